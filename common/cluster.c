/*
 * cluster.c — reads the cluster definition: TensorFlow's ClusterSpec JSON
 * (a cluster file or TF_CONFIG, as TensorFlow and Kubeflow write it) plus
 * the "hetps" block, into a struct hc_cluster, and resolves this process's
 * task. Parsing never stops at the first mistake: every problem found is
 * one sentence "SOURCE: KEY: what is wrong; fix" in an hc_diag, so a user
 * fixes a file in one round. A chief/master job becomes worker 0. Nothing
 * here touches the network.
 */
#include "cluster.h"

#include "err.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX (16u << 20) /* a cluster file larger than this is a mistake */
#define SSP_MAX 1000000      /* largest staleness bound accepted */
#define DEV_MAX 64           /* devices per worker */

/* One parse: where the text came from and where problems go. */
struct pc {
    const char *src;        /* "cluster file F", "TF_CONFIG", "--task flag" */
    struct hc_diag *d;
    int nomem;
};

/* One job of the "cluster" object while it is read. */
struct job {
    const char *name;       /* "ps", "worker", "chief", "master" */
    const cJSON *node;      /* NULL when absent */
    int dict;               /* written as {"0": "h:p", …} */
    int n;                  /* tasks; -1 when the shape is wrong */
    struct hc_task_addr *t; /* (n) */
    unsigned char *ok;      /* (n) 1 when t[i] holds a valid address */
};

static const char *const top_keys[] = { "cluster", "task", "hetps" };
static const char *const job_keys[] = { "ps", "worker", "chief", "master" };
static const char *const task_keys[] = { "type", "index" };
static const char *const hetps_keys[] = { "workers", "mode", "staleness",
                                          "backup_workers", "token_file" };
static const char *const wconf_keys[] = { "devices" };
#define NKEYS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- diagnostics ------------------------------------------------------ */

static void problem(struct pc *p, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem(struct pc *p, const char *key, const char *fmt, ...)
{
    char what[448];
    struct hc_diag *d = p->d;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (d->n < HC_DIAG_MAX) {
        char *m = d->msg[d->n];
        if (key)
            snprintf(m, sizeof d->msg[0], "%s: %s: %s", p->src, key, what);
        else
            snprintf(m, sizeof d->msg[0], "%s: %s", p->src, what);
        if (d->n == 0)
            hc_err_set(HC_ERR_CONFIG, "%s", m);
    }
    d->n++;
}

static void note(struct hc_diag *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void note(struct hc_diag *d, const char *fmt, ...)
{
    va_list ap;

    if (d->n_note >= NKEYS(d->note))
        return;
    va_start(ap, fmt);
    vsnprintf(d->note[d->n_note++], sizeof d->note[0], fmt, ap);
    va_end(ap);
}

static const char *jtype(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsArray(v))
        return "a list";
    if (cJSON_IsObject(v))
        return "an object";
    if (cJSON_IsBool(v))
        return "true/false";
    return "null";
}

/* Edit distance counting a swap of neighbours as one edit (optimal string
 * alignment), case-insensitive; 99 for long strings. */
static int distance(const char *a, const char *b)
{
    int la = (int)strlen(a), lb = (int)strlen(b), i, j;
    int d[32][32];

    if (la > 31 || lb > 31)
        return 99;
    for (i = 0; i <= la; i++)
        d[i][0] = i;
    for (j = 0; j <= lb; j++)
        d[0][j] = j;
    for (i = 1; i <= la; i++)
        for (j = 1; j <= lb; j++) {
            int ca = tolower((unsigned char)a[i - 1]);
            int cb = tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + (ca != cb);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                cb == tolower((unsigned char)a[i - 2]) &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The valid key closest to a misspelt one, or NULL when none is close. */
static const char *suggest(const char *s, const char *const *valid, int n)
{
    const char *best = NULL;
    int bestd = 99, i;

    for (i = 0; i < n; i++) {
        int d = distance(s, valid[i]);
        int lim = (int)strlen(valid[i]) / 3;
        if (d <= (lim < 1 ? 1 : lim) && d < bestd) {
            best = valid[i];
            bestd = d;
        }
    }
    return best;
}

static void join(char *buf, size_t n, const char *const *items, int count)
{
    size_t at = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < count && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "",
                               items[i]);
}

static int known(const char *s, const char *const *valid, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(s, valid[i]) == 0)
            return 1;
    return 0;
}

/*
 * Check an object's keys: each at most once; unknown keys are errors when
 * `strict`, else only when they look like a typo of a valid key (a TF_CONFIG
 * may carry keys such as "environment" that hetps has no use for).
 */
static void check_keys(struct pc *p, const cJSON *obj, const char *prefix,
                       const char *const *valid, int nvalid, int strict)
{
    const cJSON *e, *f;
    char key[96], list[128];

    cJSON_ArrayForEach(e, obj) {
        snprintf(key, sizeof key, "%s%s%.40s", prefix, *prefix ? "." : "",
                 e->string);
        for (f = obj->child; f != e; f = f->next)
            if (strcmp(f->string, e->string) == 0)
                break;
        if (f != e) {
            problem(p, key, "given twice; keep one");
            continue;
        }
        if (known(e->string, valid, nvalid))
            continue;
        const char *near = suggest(e->string, valid, nvalid);
        if (!strict && !near)
            continue;
        join(list, sizeof list, valid, nvalid);
        if (near)
            problem(p, key, "unknown key; did you mean \"%s\"? (valid keys: "
                    "%s)", near, list);
        else
            problem(p, key, "unknown key; valid keys: %s", list);
    }
}

/* ---- numbers and addresses ------------------------------------------- */

/* Decimal integer, optional '-': 0, -1 when not numeric, -2 when huge. */
static int parse_decimal(const char *s, long long *v)
{
    long long x = 0;
    int neg = 0, nd = 0;

    if (*s == '-') {
        neg = 1;
        s++;
    }
    if (!*s)
        return -1;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s))
            return -1;
        if (++nd <= 15)
            x = x * 10 + (*s - '0');
    }
    if (nd > 15)
        return -2;
    *v = neg ? -x : x;
    return 0;
}

/* A JSON number that is a whole number: 0, -1 when fractional, -2 huge. */
static int json_whole(const cJSON *v, long long *out)
{
    double x = v->valuedouble;

    if (x != x)
        return -1;
    if (x > 1e15 || x < -1e15)
        return -2;
    if ((double)(long long)x != x)
        return -1;
    *out = (long long)x;
    return 0;
}

/* A task index: a number or a string of digits ("1"), as Kubeflow writes. */
static int read_index(struct pc *p, const char *key, const cJSON *v,
                      long long *out)
{
    int r;

    if (cJSON_IsNumber(v)) {
        r = json_whole(v, out);
        if (r == -1) {
            problem(p, key, "%g is not a whole number; task indices are 0, "
                    "1, 2, …", v->valuedouble);
            return -1;
        }
    } else if (cJSON_IsString(v)) {
        r = parse_decimal(v->valuestring, out);
        if (r == -1) {
            problem(p, key, "\"%.40s\" is not a number; write a task index "
                    "such as 0 or \"0\"", v->valuestring);
            return -1;
        }
    } else {
        problem(p, key, "must be a number such as 0 (or a string of digits "
                "such as \"0\"), got %s", jtype(v));
        return -1;
    }
    if (r == -2)
        *out = LLONG_MAX;
    if (*out < 0) {
        problem(p, key, "%lld is negative; task indices start at 0", *out);
        return -1;
    }
    return 0;
}

/* Parse "host:port" or "[v6]:port" into *a; on a mistake fill why. */
static int parse_addr(const char *s, struct hc_task_addr *a, char *why,
                      size_t wn)
{
    const char *hs, *he, *colon, *c;
    size_t hl;
    long long port;
    int v6 = 0, r;

    memset(a, 0, sizeof *a);
    if (!*s)
        return snprintf(why, wn, "empty; write \"host:port\", e.g. "
                        "\"ps0:2222\""), -1;
    if (strlen(s) >= sizeof a->addr)
        return snprintf(why, wn, "too long (at most %zu characters)",
                        sizeof a->addr - 1), -1;
    if (strstr(s, "://"))
        return snprintf(why, wn, "has a scheme; write just \"host:port\" "
                        "(hetps adds tcp://)"), -1;
    if (s[0] == '[') {
        v6 = 1;
        hs = s + 1;
        he = strchr(s, ']');
        if (!he)
            return snprintf(why, wn, "has '[' but no ']'; write an IPv6 "
                            "address as \"[::1]:2222\""), -1;
        colon = he + 1;
        if (*colon == '\0')
            return snprintf(why, wn, "missing port; write \"host:port\", "
                            "e.g. \"[::1]:2222\""), -1;
        if (*colon != ':')
            return snprintf(why, wn, "unexpected text after ']'; write an "
                            "IPv6 address as \"[::1]:2222\""), -1;
    } else {
        hs = s;
        colon = he = strrchr(s, ':');
        if (!colon)
            return snprintf(why, wn, "missing port; write \"host:port\", "
                            "e.g. \"%.60s:2222\"", s), -1;
        if (memchr(s, ':', (size_t)(colon - s)))
            return snprintf(why, wn, "an IPv6 address needs brackets, e.g. "
                            "\"[::1]:2222\""), -1;
    }
    hl = (size_t)(he - hs);
    if (hl == 0)
        return snprintf(why, wn, "empty host; write \"host:port\", e.g. "
                        "\"ps0:2222\""), -1;
    if (hl >= HC_HOST_MAX)
        return snprintf(why, wn, "host name too long (at most %d "
                        "characters)", HC_HOST_MAX - 1), -1;
    for (c = hs; c < he; c++)
        if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c) ||
            *c == '/' || (!v6 && (*c == '[' || *c == ']')))
            return snprintf(why, wn, "host \"%.*s\" contains '%s'; write a "
                            "host name or IP address", (int)hl, hs,
                            *c == '/' ? "/" : isspace((unsigned char)*c)
                            ? " " : *c == '[' ? "[" : *c == ']' ? "]"
                            : "a control character"), -1;
    if (colon[1] == '\0')
        return snprintf(why, wn, "missing port after ':'; e.g. \"%.60s2222\"",
                        s), -1;
    r = parse_decimal(colon + 1, &port);
    if (r == -1)
        return snprintf(why, wn, "port \"%.20s\" is not a number; write "
                        "e.g. 2222", colon + 1), -1;
    if (r == -2 || port < 1 || port > 65535)
        return snprintf(why, wn, "port %.20s is out of range; use "
                        "1..65535", colon + 1), -1;
    memcpy(a->host, hs, hl);
    a->host[hl] = '\0';
    a->port = (int)port;
    strcpy(a->addr, s);
    snprintf(a->url, sizeof a->url, v6 ? "tcp://[%s]:%d" : "tcp://%s:%d",
             a->host, a->port);
    return 0;
}

static int read_addr(struct pc *p, const char *key, const cJSON *v,
                     struct hc_task_addr *a)
{
    char why[256];

    if (!cJSON_IsString(v)) {
        problem(p, key, "must be a string \"host:port\", got %s", jtype(v));
        return -1;
    }
    if (parse_addr(v->valuestring, a, why, sizeof why) != 0) {
        problem(p, key, "\"%.64s\": %s", v->valuestring, why);
        return -1;
    }
    return 0;
}

/* ---- the "cluster" object --------------------------------------------- */

static void entry_key(char *buf, size_t n, const struct job *j, int i)
{
    snprintf(buf, n, j->dict ? "cluster.%s[\"%d\"]" : "cluster.%s[%d]",
             j->name, i);
}

/* Read one job: a list of addresses, or an object of index -> address. */
static void read_job(struct pc *p, struct job *j)
{
    const cJSON *e;
    char key[96];
    int n, i = 0;

    j->n = -1;
    snprintf(key, sizeof key, "cluster.%s", j->name);
    if (!cJSON_IsArray(j->node) && !cJSON_IsObject(j->node)) {
        problem(p, key, "must be a list of \"host:port\" strings (or an "
                "object {\"0\": \"host:port\", …}), got %s", jtype(j->node));
        return;
    }
    j->dict = cJSON_IsObject(j->node);
    n = cJSON_GetArraySize(j->node);
    if (n > HC_MAX_TASKS) {
        problem(p, key, "has %d tasks, more than the limit of %d", n,
                HC_MAX_TASKS);
        return;
    }
    j->t = calloc((size_t)n + 1, sizeof *j->t);
    j->ok = calloc((size_t)n + 1, 1);
    if (!j->t || !j->ok) {
        p->nomem = 1;
        return;
    }
    j->n = n;
    cJSON_ArrayForEach(e, j->node) {
        long long k = 0;
        int r;
        if (!j->dict) {
            entry_key(key, sizeof key, j, i);
            j->ok[i] = read_addr(p, key, e, &j->t[i]) == 0;
            i++;
            continue;
        }
        snprintf(key, sizeof key, "cluster.%s[\"%.24s\"]", j->name,
                 e->string);
        r = parse_decimal(e->string, &k);
        if (r == -1 || e->string[0] == '-')
            problem(p, key, "\"%.24s\" is not a task index; the keys of a "
                    "job object are \"0\", \"1\", …", e->string);
        else if (r == -2 || k >= n)
            problem(p, key, "index %.24s leaves a gap: this job has %d "
                    "task(s), so its indices must be 0..%d", e->string, n,
                    n - 1);
        else if (j->t[k].host[0] || j->ok[k] == 2)
            problem(p, key, "task %lld is given twice; keep one", k);
        else if (read_addr(p, key, e, &j->t[k]) == 0)
            j->ok[k] = 1;
        else
            j->ok[k] = 2; /* taken, but invalid */
    }
    for (i = 0; i < n; i++)
        j->ok[i] = j->ok[i] == 1;
}

struct aref {
    const struct job *j;
    int i;
    int seq;                /* order of appearance */
};

static int aref_cmp(const void *x, const void *y)
{
    const struct aref *a = x, *b = y;
    const struct hc_task_addr *ta = &a->j->t[a->i], *tb = &b->j->t[b->i];
    int c = strcasecmp(ta->host, tb->host);

    if (c)
        return c;
    if (ta->port != tb->port)
        return ta->port < tb->port ? -1 : 1;
    return a->seq - b->seq;
}

/* Every host:port may appear once in the whole cluster. */
static void check_duplicates(struct pc *p, struct job **jobs, int njobs)
{
    struct aref *r;
    char k1[96], k2[96];
    int n = 0, i, k, first = 0;

    for (k = 0; k < njobs; k++)
        n += jobs[k]->n > 0 ? jobs[k]->n : 0;
    r = calloc((size_t)n + 1, sizeof *r);
    if (!r) {
        p->nomem = 1;
        return;
    }
    n = 0;
    for (k = 0; k < njobs; k++)
        for (i = 0; i < jobs[k]->n; i++)
            if (jobs[k]->ok[i]) {
                r[n] = (struct aref){ jobs[k], i, n };
                n++;
            }
    qsort(r, (size_t)n, sizeof *r, aref_cmp);
    for (i = 1; i < n; i++) {
        const struct hc_task_addr *a = &r[first].j->t[r[first].i];
        const struct hc_task_addr *b = &r[i].j->t[r[i].i];
        if (strcasecmp(a->host, b->host) != 0 || a->port != b->port) {
            first = i;
            continue;
        }
        entry_key(k1, sizeof k1, r[first].j, r[first].i);
        entry_key(k2, sizeof k2, r[i].j, r[i].i);
        problem(p, k2, "address \"%s\" is also used by %s; every task needs "
                "its own host:port: change the port or the host", b->addr,
                k1);
    }
    free(r);
}

/*
 * Read "cluster" into c: ps list, worker list with the chief first. Counts
 * are left -1 when a job's shape is wrong, so later checks can skip.
 */
static void read_cluster(struct pc *p, const cJSON *cl, struct hc_cluster *c)
{
    struct job ps = { "ps", 0, 0, -1, 0, 0 }, wk = { "worker", 0, 0, -1, 0, 0 };
    struct job ch = { "chief", 0, 0, -1, 0, 0 }, ma = { "master", 0, 0, -1, 0, 0 };
    struct job *all[] = { &ps, &ch, &ma, &wk }, *cj;
    const cJSON *e;
    char list[64];
    int k, listed;

    c->n_ps = c->n_worker = -1;
    if (!cl) {
        problem(p, "cluster", "missing; write {\"cluster\": {\"ps\": "
                "[\"host:port\"], \"worker\": [\"host:port\"]}}");
        return;
    }
    if (!cJSON_IsObject(cl)) {
        problem(p, "cluster", "must be an object {\"ps\": [...], \"worker\": "
                "[...]}, got %s", jtype(cl));
        return;
    }
    check_keys(p, cl, "cluster", job_keys, NKEYS(job_keys), 0);
    join(list, sizeof list, job_keys, NKEYS(job_keys));
    cJSON_ArrayForEach(e, cl) {
        char key[64];
        if (known(e->string, job_keys, NKEYS(job_keys)) ||
            suggest(e->string, job_keys, NKEYS(job_keys)))
            continue; /* typos were reported by check_keys */
        snprintf(key, sizeof key, "cluster.%.40s", e->string);
        if (strcmp(e->string, "evaluator") == 0)
            problem(p, key, "hetps has no evaluator job: the chief (worker "
                    "0) evaluates at each epoch end; remove this job");
        else
            problem(p, key, "unknown job name; hetps knows %s", list);
    }
    for (k = 0; k < 4; k++) {
        all[k]->node = cJSON_GetObjectItemCaseSensitive(cl, all[k]->name);
        if (all[k]->node)
            read_job(p, all[k]);
    }
    if (!ps.node)
        problem(p, "cluster.ps", "missing: hetps needs at least one "
                "parameter server; add \"ps\": [\"host:2222\"]");
    else if (ps.n == 0)
        problem(p, "cluster.ps", "is empty: hetps needs at least one "
                "parameter server; add an address \"host:2222\"");
    if (ch.node && ma.node)
        problem(p, "cluster.master", "both \"chief\" and \"master\" are "
                "given; a cluster has one chief: keep one of them");
    cj = ch.node ? &ch : ma.node ? &ma : NULL;
    if (cj && cj->n > 1)
        problem(p, cj == &ch ? "cluster.chief" : "cluster.master", "has %d "
                "tasks; a cluster has one chief: keep one address and move "
                "the others to cluster.worker", cj->n);
    else if (cj && cj->n == 0)
        problem(p, cj == &ch ? "cluster.chief" : "cluster.master", "is "
                "empty; give the chief's address or remove the key");
    if (!wk.node && !cj)
        problem(p, "cluster.worker", "missing: add \"worker\": "
                "[\"host:2222\"] (or a \"chief\")");
    else if (wk.node && wk.n == 0 && !cj)
        problem(p, "cluster.worker", "is empty and there is no chief; list "
                "at least one worker address");
    check_duplicates(p, all, 4);

    if (ps.n >= 0) {
        c->n_ps = ps.n;
        c->ps = ps.t;
        ps.t = NULL;
    }
    listed = wk.node ? wk.n : 0;
    if (listed >= 0 && (!cj || cj->n >= 0)) {
        c->chief_mapped = cj && cj->n > 0;
        c->n_worker = listed + c->chief_mapped;
        c->worker = calloc((size_t)c->n_worker + 1, sizeof *c->worker);
        c->wconf = calloc((size_t)c->n_worker + 1, sizeof *c->wconf);
        if (!c->worker || !c->wconf) {
            p->nomem = 1;
            c->n_worker = -1;
            goto out;
        }
        if (c->chief_mapped)
            c->worker[0] = cj->t[0];
        if (listed)
            memcpy(c->worker + c->chief_mapped, wk.t,
                   (size_t)listed * sizeof *wk.t);
        for (k = 0; k < c->n_worker; k++)
            strcpy(c->wconf[k].devices, "auto");
        if (c->chief_mapped)
            note(p->d, "cluster.%s (%s) is worker 0, so cluster.worker[i] is "
                 "worker i+1: TensorFlow's chief is a worker that also does "
                 "the bookkeeping", cj->name, cj->t[0].addr);
    }
out:
    for (k = 0; k < 4; k++) {
        free(all[k]->t);
        free(all[k]->ok);
    }
}

/* ---- the task --------------------------------------------------------- */

enum { T_PS, T_WORKER, T_CHIEF, T_EVALUATOR, T_UNKNOWN };

static int task_type(const char *s)
{
    if (strcmp(s, "ps") == 0)
        return T_PS;
    if (strcmp(s, "worker") == 0)
        return T_WORKER;
    if (strcmp(s, "chief") == 0 || strcmp(s, "master") == 0)
        return T_CHIEF;
    if (strcmp(s, "evaluator") == 0)
        return T_EVALUATOR;
    return T_UNKNOWN;
}

/* Report a task type that is not ps/worker/chief/master; -1 when bad. */
static int check_type(struct pc *p, const char *key, const char *type)
{
    int t = task_type(type);

    if (t == T_EVALUATOR)
        problem(p, key, "hetps has no evaluator task: the chief (worker 0) "
                "evaluates on the test set at each epoch end; do not start "
                "an evaluator (or run this process as a worker)");
    else if (t == T_UNKNOWN)
        problem(p, key, "unknown task type \"%.40s\"; valid: ps, worker, "
                "chief, master", type);
    return t >= T_EVALUATOR ? -1 : t;
}

/*
 * Turn (type, TensorFlow index) into hetps's (job, index), checking the
 * range: a chief is worker 0 and worker i is worker i+1 when a chief job was
 * mapped. Sets c's task on success.
 */
static int map_task(struct pc *p, const char *ikey, int t, long long idx,
                    struct hc_cluster *c)
{
    int n;

    if (idx < 0) {
        problem(p, ikey, "%lld is negative; task indices start at 0", idx);
        return -1;
    }
    if (t == T_PS || t == T_WORKER) {
        n = t == T_PS ? c->n_ps : c->n_worker;
        if (n < 0)
            return -1; /* the job itself is wrong; already reported */
        if (t == T_WORKER)
            n -= c->chief_mapped;
        if (idx >= n) {
            if (n == 0)
                problem(p, ikey, "%lld is out of range: cluster.%s has no "
                        "tasks", idx, t == T_PS ? "ps" : "worker");
            else
                problem(p, ikey, "%lld is out of range: cluster.%s has %d "
                        "task(s), valid indices are 0..%d", idx,
                        t == T_PS ? "ps" : "worker", n, n - 1);
            return -1;
        }
        c->task_job = t == T_PS ? HC_JOB_PS : HC_JOB_WORKER;
        c->task_index = (int)idx + (t == T_WORKER ? c->chief_mapped : 0);
    } else {
        if (c->n_worker < 0)
            return -1;
        if (idx != 0) {
            problem(p, ikey, "%lld is out of range: the chief is a single "
                    "task, valid index is 0", idx);
            return -1;
        }
        c->task_job = HC_JOB_WORKER;
        c->task_index = 0;
    }
    c->has_task = 1;
    return 0;
}

/* Read a "task" object {"type": "worker", "index": 0} against c. */
static void read_task(struct pc *p, const cJSON *task, struct hc_cluster *c)
{
    const cJSON *type, *index;
    long long idx = 0;
    int t = -1, iok = -1;

    if (!cJSON_IsObject(task)) {
        problem(p, "task", "must be an object {\"type\": \"worker\", "
                "\"index\": 0}, got %s", jtype(task));
        return;
    }
    check_keys(p, task, "task", task_keys, NKEYS(task_keys), 0);
    type = cJSON_GetObjectItemCaseSensitive(task, "type");
    index = cJSON_GetObjectItemCaseSensitive(task, "index");
    if (!type)
        problem(p, "task.type", "missing; add \"type\": \"worker\" (or "
                "\"ps\", \"chief\")");
    else if (!cJSON_IsString(type))
        problem(p, "task.type", "must be a string such as \"worker\", got "
                "%s", jtype(type));
    else
        t = check_type(p, "task.type", type->valuestring);
    if (!index)
        problem(p, "task.index", "missing; add \"index\": 0");
    else
        iok = read_index(p, "task.index", index, &idx);
    if (t >= 0 && iok == 0)
        map_task(p, "task.index", t, idx, c);
}

/* ---- the "hetps" block ------------------------------------------------ */

/* Validate a device list; the normalised list goes to out. */
static int parse_devices(const char *s, char *out, size_t on, char *why,
                         size_t wn)
{
    char items[DEV_MAX][16], all[DEV_MAX * 16];
    int n = 0, is_auto = 0, i;
    size_t at = 0;

    for (;;) {
        const char *end = strchr(s, ','), *b = s, *e;
        char item[16];
        long long k;
        e = end ? end : s + strlen(s);
        while (b < e && isspace((unsigned char)*b))
            b++;
        while (e > b && isspace((unsigned char)e[-1]))
            e--;
        if (b == e)
            return snprintf(why, wn, "has an empty device; list devices "
                            "separated by commas, e.g. \"gpu:0,gpu:1\""), -1;
        if (n == DEV_MAX)
            return snprintf(why, wn, "lists more than %d devices",
                            DEV_MAX), -1;
        if (e - b == 4 && memcmp(b, "auto", 4) == 0) {
            is_auto = 1;
            snprintf(item, sizeof item, "auto");
        } else if (e - b == 3 && memcmp(b, "cpu", 3) == 0) {
            snprintf(item, sizeof item, "cpu");
        } else {
            char num[8];
            size_t nl = (size_t)(e - b) - 4;
            if (e - b < 5 || e - b > 10 || (memcmp(b, "cpu:", 4) != 0 &&
                memcmp(b, "gpu:", 4) != 0))
                goto bad;
            memcpy(num, b + 4, nl);
            num[nl] = '\0';
            if (num[0] == '-' || parse_decimal(num, &k) != 0 || k > 4095)
                goto bad;
            snprintf(item, sizeof item, "%.3s:%d", b, (int)k);
        }
        for (i = 0; i < n; i++)
            if (strcmp(items[i], item) == 0)
                return snprintf(why, wn, "lists %s twice", item), -1;
        strcpy(items[n++], item);
        at += (size_t)snprintf(all + at, sizeof all - at, "%s%s",
                               at ? "," : "", item);
        if (!end)
            break;
        s = end + 1;
        continue;
bad:
        return snprintf(why, wn, "\"%.*s\" is not a device; use \"cpu\", "
                        "\"cpu:N\", \"gpu:N\" (comma-separated) or \"auto\"",
                        (int)(e - b > 24 ? 24 : e - b), b), -1;
    }
    if (is_auto && n > 1)
        return snprintf(why, wn, "\"auto\" cannot be combined with other "
                        "devices"), -1;
    if (at >= on)
        return snprintf(why, wn, "too long (at most %zu characters)",
                        on - 1), -1;
    memcpy(out, all, at + 1);
    return 0;
}

static void read_workers(struct pc *p, const cJSON *w, struct hc_cluster *c)
{
    const cJSON *e, *dev;
    char key[64], why[192], norm[sizeof c->wconf[0].devices];
    int n, i = 0;

    if (!cJSON_IsArray(w)) {
        problem(p, "hetps.workers", "must be a list of objects such as "
                "[{\"devices\": \"gpu:0\"}, {\"devices\": \"cpu\"}], got %s",
                jtype(w));
        return;
    }
    n = cJSON_GetArraySize(w);
    if (c->n_worker >= 0 && n > c->n_worker)
        problem(p, "hetps.workers", "lists %d workers but the cluster has "
                "%d%s; remove the extra entries or add workers to "
                "cluster.worker", n, c->n_worker,
                c->chief_mapped ? " (the chief included, as workers[0])" : "");
    cJSON_ArrayForEach(e, w) {
        snprintf(key, sizeof key, "hetps.workers[%d]", i);
        if (!cJSON_IsObject(e)) {
            problem(p, key, "must be an object such as {\"devices\": "
                    "\"cpu\"}, got %s", jtype(e));
        } else {
            check_keys(p, e, key, wconf_keys, NKEYS(wconf_keys), 1);
            dev = cJSON_GetObjectItemCaseSensitive(e, "devices");
            snprintf(key, sizeof key, "hetps.workers[%d].devices", i);
            if (dev && !cJSON_IsString(dev))
                problem(p, key, "must be a string such as \"gpu:0,gpu:1\", "
                        "\"cpu\" or \"auto\", got %s", jtype(dev));
            else if (dev && parse_devices(dev->valuestring, norm, sizeof norm,
                                          why, sizeof why) != 0)
                problem(p, key, "\"%.64s\": %s", dev->valuestring, why);
            else if (dev && i < c->n_worker)
                strcpy(c->wconf[i].devices, norm);
        }
        i++;
    }
}

/* mode: "async", "sync", "ssp:S", or "ssp" with "staleness": S. */
static void read_mode(struct pc *p, const cJSON *m, const cJSON *st,
                      struct hc_cluster *c)
{
    long long s = -1, s2 = -1;
    const char *v;
    int r;

    if (st) {
        if (!cJSON_IsNumber(st) || json_whole(st, &s2) != 0 || s2 < 0 ||
            s2 > SSP_MAX) {
            problem(p, "hetps.staleness", "must be a whole number 0..%d, "
                    "got %s", SSP_MAX, cJSON_IsNumber(st) ? "another number"
                    : jtype(st));
            st = NULL;
            s2 = -1;
        }
    }
    if (!m) {
        if (st)
            problem(p, "hetps.staleness", "applies only to mode ssp; add "
                    "\"mode\": \"ssp\" or remove it");
        return;
    }
    if (!cJSON_IsString(m)) {
        problem(p, "hetps.mode", "must be a string: \"async\", \"sync\" or "
                "\"ssp:S\", got %s", jtype(m));
        return;
    }
    v = m->valuestring;
    if (strcmp(v, "async") == 0 || strcmp(v, "sync") == 0) {
        c->mode = v[0] == 'a' ? HC_MODE_ASYNC : HC_MODE_SYNC;
        if (st)
            problem(p, "hetps.staleness", "applies only to mode ssp, but "
                    "mode is \"%s\"; remove it", v);
        return;
    }
    if (strncmp(v, "ssp", 3) != 0 || (v[3] != '\0' && v[3] != ':')) {
        problem(p, "hetps.mode", "\"%.40s\" is not a mode; valid: "
                "\"async\", \"sync\", \"ssp:S\" (S = staleness bound, a "
                "whole number >= 0)", v);
        return;
    }
    if (v[3] == ':') {
        r = parse_decimal(v + 4, &s);
        if (r == -1 || s < 0 || r == -2 || s > SSP_MAX) {
            problem(p, "hetps.mode", "\"%.40s\": the staleness bound after "
                    "\"ssp:\" must be a whole number 0..%d, e.g. \"ssp:3\"",
                    v, SSP_MAX);
            return;
        }
        if (st && s2 != s) {
            problem(p, "hetps.staleness", "%lld disagrees with mode \"%s\"; "
                    "give the bound once", s2, v);
            return;
        }
    } else if (st) {
        s = s2;
    } else {
        problem(p, "hetps.mode", "\"ssp\" needs a staleness bound: write "
                "\"ssp:3\" or add \"staleness\": 3");
        return;
    }
    c->mode = HC_MODE_SSP;
    c->staleness = (int)s;
}

static void read_hetps(struct pc *p, const cJSON *h, struct hc_cluster *c)
{
    const cJSON *w, *b, *t;
    long long n;

    if (!cJSON_IsObject(h)) {
        problem(p, "hetps", "must be an object such as {\"mode\": "
                "\"async\"}, got %s", jtype(h));
        return;
    }
    check_keys(p, h, "hetps", hetps_keys, NKEYS(hetps_keys), 1);
    read_mode(p, cJSON_GetObjectItemCaseSensitive(h, "mode"),
              cJSON_GetObjectItemCaseSensitive(h, "staleness"), c);
    if ((w = cJSON_GetObjectItemCaseSensitive(h, "workers")))
        read_workers(p, w, c);
    if ((b = cJSON_GetObjectItemCaseSensitive(h, "backup_workers"))) {
        if (!cJSON_IsNumber(b) || json_whole(b, &n) != 0)
            problem(p, "hetps.backup_workers", "must be a whole number such "
                    "as 1, got %s", cJSON_IsNumber(b) ? "a fraction"
                    : jtype(b));
        else if (n < 0)
            problem(p, "hetps.backup_workers", "%lld is negative; use 0 (wait "
                    "for every worker) or more", n);
        else if (c->n_worker >= 0 && n >= c->n_worker)
            problem(p, "hetps.backup_workers", "%lld must be less than the "
                    "number of workers (%d): a step needs at least one "
                    "gradient; use at most %d", n, c->n_worker,
                    c->n_worker - 1);
        else {
            c->backup_workers = (int)n;
            if (n > 0 && c->mode != HC_MODE_SYNC)
                note(p->d, "hetps.backup_workers is ignored in mode %s "
                     "(it applies to mode sync)", hc_mode_name(c->mode));
        }
    }
    if ((t = cJSON_GetObjectItemCaseSensitive(h, "token_file"))) {
        if (!cJSON_IsString(t))
            problem(p, "hetps.token_file", "must be a string (a file path), "
                    "got %s", jtype(t));
        else if (!t->valuestring[0])
            problem(p, "hetps.token_file", "is empty; give a file path or "
                    "remove the key");
        else if (strlen(t->valuestring) >= sizeof c->token_file)
            problem(p, "hetps.token_file", "too long (at most %zu "
                    "characters)", sizeof c->token_file - 1);
        else
            strcpy(c->token_file, t->valuestring);
    }
}

/* ---- JSON text -------------------------------------------------------- */

static void line_col(const char *s, size_t pos, int *line, int *col)
{
    size_t i, start = 0;

    *line = 1;
    for (i = 0; i < pos; i++)
        if (s[i] == '\n') {
            (*line)++;
            start = i + 1;
        }
    *col = (int)(pos - start) + 1;
}

/* Up to 16 characters from pos, to quote after "near". */
static void excerpt(char *buf, const char *s, size_t len, size_t pos)
{
    size_t n = 0;

    while (pos < len && n < 16 && s[pos] != '\n' && s[pos] != '\0') {
        buf[n++] = isprint((unsigned char)s[pos]) ? s[pos] : '?';
        pos++;
    }
    buf[n] = '\0';
}

static cJSON *parse_json(struct pc *p, const char *json, size_t len)
{
    const char *end = NULL;
    cJSON *root;
    size_t off = 0, pos;
    char near[24];
    int line, col;

    if (len >= 3 && memcmp(json, "\xEF\xBB\xBF", 3) == 0)
        off = 3; /* a UTF-8 byte-order mark */
    pos = off;
    while (pos < len && isspace((unsigned char)json[pos]))
        pos++;
    if (pos == len || json[pos] == '\0') {
        problem(p, NULL, "is empty; write a JSON object such as {\"cluster\": "
                "{\"ps\": [\"host:2222\"], \"worker\": [\"host:2223\"]}}");
        return NULL;
    }
    root = cJSON_ParseWithLengthOpts(json + off, len - off, &end, 0);
    pos = end ? (size_t)(end - json) : len;
    if (pos > len)
        pos = len;
    if (root) {
        while (pos < len && isspace((unsigned char)json[pos]))
            pos++;
        if (pos == len || json[pos] == '\0')
            return root;
        cJSON_Delete(root);
        line_col(json, pos, &line, &col);
        excerpt(near, json, len, pos);
        problem(p, NULL, "bad JSON at line %d, column %d: unexpected text "
                "after the end of the object, near '%s'; remove it", line,
                col, near);
        return NULL;
    }
    line_col(json, pos, &line, &col);
    excerpt(near, json, len, pos);
    problem(p, NULL, "bad JSON at line %d, column %d, near '%s'; look there "
            "(or just before) for a missing comma, quote, colon or bracket",
            line, col, near);
    return NULL;
}

/* ---- public ----------------------------------------------------------- */

static uint64_t cluster_id(const struct hc_cluster *c)
{
    uint64_t h = 0xcbf29ce484222325ull;
    char buf[HC_HOST_MAX + 16];
    int i;

    for (i = 0; i < c->n_ps; i++) {
        const struct hc_task_addr *a = &c->ps[i];
        const char *s;
        snprintf(buf, sizeof buf, strchr(a->host, ':') ? "%s[%s]:%d"
                 : "%s%s:%d", i ? "," : "ps=", a->host, a->port);
        for (s = buf; *s; s++) {
            h ^= (unsigned char)tolower((unsigned char)*s);
            h *= 0x100000001b3ull;
        }
    }
    return h ? h : 1;
}

void hc_cluster_free(struct hc_cluster *c)
{
    if (!c)
        return;
    free(c->ps);
    free(c->worker);
    free(c->wconf);
    memset(c, 0, sizeof *c);
}

int hc_cluster_parse(const char *json, size_t len, const char *source,
                     struct hc_cluster *out, struct hc_diag *diag)
{
    struct hc_diag local;
    struct pc p = { source, diag ? diag : &local, 0 };
    cJSON *root;
    const cJSON *h, *t;

    memset(p.d, 0, sizeof *p.d);
    memset(out, 0, sizeof *out);
    root = parse_json(&p, json, len);
    if (!root)
        goto out;
    if (!cJSON_IsObject(root)) {
        problem(&p, NULL, "the top level must be a JSON object {\"cluster\": "
                "{...}}, got %s", jtype(root));
        goto out;
    }
    check_keys(&p, root, "", top_keys, NKEYS(top_keys), 0);
    snprintf(out->source, sizeof out->source, "%s", source);
    read_cluster(&p, cJSON_GetObjectItemCaseSensitive(root, "cluster"), out);
    if ((h = cJSON_GetObjectItemCaseSensitive(root, "hetps")))
        read_hetps(&p, h, out);
    if ((t = cJSON_GetObjectItemCaseSensitive(root, "task")))
        read_task(&p, t, out);
    if (p.d->n == 0 && !p.nomem)
        out->id = cluster_id(out);
out:
    cJSON_Delete(root);
    if (p.d->n == 0 && !p.nomem)
        return HC_OK;
    hc_cluster_free(out);
    if (p.nomem)
        return hc_err_set(HC_ERR_NOMEM, "%s: out of memory while reading the "
                          "cluster", source);
    return HC_ERR_CONFIG;
}

int hc_cluster_load_file(const char *path, struct hc_cluster *out,
                         struct hc_diag *diag)
{
    struct hc_diag local;
    char src[sizeof out->source];
    struct pc p = { src, diag ? diag : &local, 0 };
    FILE *f;
    char *buf = NULL, *grown;
    size_t n = 0, cap = 0;
    int rc = HC_ERR_CONFIG;

    memset(p.d, 0, sizeof *p.d);
    memset(out, 0, sizeof *out);
    snprintf(src, sizeof src, "cluster file %s", path);
    f = fopen(path, "rb");
    if (!f)
        goto unreadable;
    for (;;) {
        if (n == cap) {
            if (cap > FILE_MAX) {
                problem(&p, NULL, "larger than %u MiB; is this the right "
                        "file?", FILE_MAX >> 20);
                goto out;
            }
            cap = cap ? 2 * cap : 1 << 14;
            if (!(grown = realloc(buf, cap))) {
                rc = hc_err_set(HC_ERR_NOMEM, "%s: out of memory", src);
                goto out;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    if (ferror(f))
        goto unreadable;
    rc = hc_cluster_parse(buf, n, src, out, p.d);
    goto out;
unreadable:
    problem(&p, NULL, "cannot read it: %s; check the path (and that it is "
            "a readable file)", strerror(errno));
out:
    if (f)
        fclose(f);
    free(buf);
    return rc;
}

int hc_cluster_set_task(struct hc_cluster *c, const char *spec,
                        const char *source, struct hc_diag *diag)
{
    struct hc_diag local;
    struct pc p = { source, diag ? diag : &local, 0 };
    const char *colon = strchr(spec, ':');
    char type[32], key[80];
    size_t tl = colon ? (size_t)(colon - spec) : strlen(spec);
    long long idx = 0;
    int t, before, r;

    if (!diag)
        memset(&local, 0, sizeof local);
    before = p.d->n;
    snprintf(key, sizeof key, "\"%.64s\"", spec);
    if (tl == 0 || tl >= sizeof type) {
        problem(&p, key, "not a task; write JOB:INDEX, e.g. \"worker:1\" or "
                "\"ps:0\"");
        return HC_ERR_CONFIG;
    }
    memcpy(type, spec, tl);
    type[tl] = '\0';
    if ((t = check_type(&p, key, type)) < 0)
        return HC_ERR_CONFIG;
    if (!colon && t != T_CHIEF) {
        problem(&p, key, "missing index; write \"%s:0\" (JOB:INDEX)", type);
        return HC_ERR_CONFIG;
    }
    if (colon) {
        r = parse_decimal(colon + 1, &idx);
        if (r == -1) {
            problem(&p, key, "the index \"%.20s\" is not a number; write "
                    "JOB:INDEX, e.g. \"%s:1\"", colon + 1, type);
            return HC_ERR_CONFIG;
        }
        if (r == -2)
            idx = LLONG_MAX;
    }
    map_task(&p, key, t, idx, c);
    return p.d->n == before ? HC_OK : HC_ERR_CONFIG;
}

/* Apply TF_CONFIG's task to a cluster that came from a file. */
static void tf_task_over_file(const char *tf, struct hc_cluster *c,
                              struct hc_diag *d)
{
    struct pc p = { "TF_CONFIG", d, 0 };
    cJSON *root = parse_json(&p, tf, strlen(tf));
    const cJSON *t;

    if (!root)
        return;
    if (!cJSON_IsObject(root))
        problem(&p, NULL, "the top level must be a JSON object {\"task\": "
                "{...}}, got %s", jtype(root));
    else if ((t = cJSON_GetObjectItemCaseSensitive(root, "task")))
        read_task(&p, t, c);
    if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root,
                                                                 "cluster"))
        note(d, "TF_CONFIG's cluster is ignored: the cluster comes from %s "
             "(only TF_CONFIG's task is used)", c->source);
    cJSON_Delete(root);
}

int hc_cluster_resolve(const char *file, const char *task_flag, int need_task,
                       struct hc_cluster *out, struct hc_diag *diag)
{
    struct hc_diag local;
    struct hc_diag *d = diag ? diag : &local;
    const char *tf = getenv("TF_CONFIG");
    int rc;

    memset(d, 0, sizeof *d);
    if (file) {
        if ((rc = hc_cluster_load_file(file, out, d)) != HC_OK)
            return rc;
        if (tf && *tf && task_flag)
            note(d, "TF_CONFIG is set but not used: the cluster file and "
                 "--task decide");
        else if (tf && *tf)
            tf_task_over_file(tf, out, d);
    } else if (!tf || !*tf) {
        struct pc p = { "TF_CONFIG", d, 0 };
        memset(out, 0, sizeof *out);
        problem(&p, NULL, "%s and no cluster file was given; give a cluster "
                "file (e.g. deploy/cluster.local.json) or export TF_CONFIG="
                "'{\"cluster\": {...}, \"task\": {...}}'",
                tf ? "is empty" : "is not set");
        return HC_ERR_CONFIG;
    } else if ((rc = hc_cluster_parse(tf, strlen(tf), "TF_CONFIG", out, d))
               != HC_OK) {
        return rc;
    }
    if (task_flag)
        hc_cluster_set_task(out, task_flag, "--task flag", d);
    if (d->n == 0 && need_task && !out->has_task) {
        struct pc p = { out->source, d, 0 };
        problem(&p, "task", "not given; pass --task worker:0 (or ps:0), or "
                "set \"task\" in TF_CONFIG or the cluster file");
    }
    if (d->n == 0)
        return HC_OK;
    hc_cluster_free(out);
    return HC_ERR_CONFIG;
}

const char *hc_job_name(enum hc_job job)
{
    return job == HC_JOB_PS ? "ps" : "worker";
}

const char *hc_mode_name(enum hc_mode mode)
{
    return mode == HC_MODE_SYNC ? "sync" : mode == HC_MODE_SSP ? "ssp"
           : "async";
}

void hc_cluster_print(const struct hc_cluster *c, FILE *f)
{
    int i;

    fprintf(f, "cluster from %s\n", c->source);
    fprintf(f, "  id        0x%016llx\n", (unsigned long long)c->id);
    fprintf(f, "  mode      %s", hc_mode_name(c->mode));
    if (c->mode == HC_MODE_SSP)
        fprintf(f, " (staleness bound %d)", c->staleness);
    if (c->mode == HC_MODE_SYNC)
        fprintf(f, " (backup workers %d)", c->backup_workers);
    fprintf(f, "\n  token     %s\n",
            c->token_file[0] ? c->token_file : "none (no authentication)");
    fprintf(f, "  ps        %d task(s)\n", c->n_ps);
    for (i = 0; i < c->n_ps; i++)
        fprintf(f, "    ps:%-6d %s\n", i, c->ps[i].addr);
    fprintf(f, "  workers   %d task(s)\n", c->n_worker);
    for (i = 0; i < c->n_worker; i++)
        fprintf(f, "    worker:%-2d %-24s devices %s%s\n", i,
                c->worker[i].addr, c->wconf[i].devices,
                i == 0 ? "  (chief)" : "");
    if (c->has_task)
        fprintf(f, "  task      %s:%d (%s)\n", hc_job_name(c->task_job),
                c->task_index, c->task_job == HC_JOB_PS
                ? c->ps[c->task_index].addr : c->worker[c->task_index].addr);
    else
        fprintf(f, "  task      not set (give --task JOB:INDEX)\n");
    if (c->chief_mapped)
        fprintf(f, "  note      the chief job is worker 0; the listed workers "
                "are shifted up by one\n");
}

void hc_diag_print(const struct hc_diag *d, FILE *f)
{
    int i, n = d->n < HC_DIAG_MAX ? d->n : HC_DIAG_MAX;

    for (i = 0; i < n; i++)
        fprintf(f, "hetps: %s\n", d->msg[i]);
    if (d->n > n)
        fprintf(f, "hetps: … and %d more problem(s) not shown\n", d->n - n);
    for (i = 0; i < d->n_note; i++)
        fprintf(f, "hetps: note: %s\n", d->note[i]);
}
