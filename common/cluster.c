/*
 * cluster.c — reads the cluster definition: TensorFlow's ClusterSpec JSON
 * (a cluster file or TF_CONFIG, as TensorFlow and Kubeflow write it) plus
 * the "hetps" block, into a struct hc_cluster, and resolves this process's
 * task. Parsing never stops at the first mistake: every problem found is
 * one sentence "SOURCE: KEY: what is wrong; fix" in an hc_diag, so a user
 * fixes a file in one round. A chief/master job becomes worker 0. Nothing
 * here touches the network.
 *
 * This file reads the ClusterSpec (jobs, addresses, the chief) and the
 * task, and holds the entry points and the printer; the "hetps" block is
 * read in cluster_hetps.c, and the diagnostics, JSON text and values all
 * of them use are in cluster_read.c (shared through cluster_impl.h).
 */
#include "cluster_impl.h"

#include "err.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define FILE_MAX (16u << 20) /* a cluster file larger than this is a mistake */

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

/* ---- the "cluster" object --------------------------------------------- */

static void entry_key(char *buf, size_t n, const struct job *j, int i)
{
    snprintf(buf, n, j->dict ? "cluster.%s[\"%d\"]" : "cluster.%s[%d]",
             j->name, i);
}

/* Read one job: a list of addresses, or an object of index -> address. */
static void read_job(struct cl_parse *p, struct job *j)
{
    const cJSON *e;
    char key[96];
    int n, i = 0;

    j->n = -1;
    snprintf(key, sizeof key, "cluster.%s", j->name);
    if (!cJSON_IsArray(j->node) && !cJSON_IsObject(j->node)) {
        cl_problem(p, key, "must be a list of \"host:port\" strings (or an "
                   "object {\"0\": \"host:port\", …}), got %s",
                   cl_jtype(j->node));
        return;
    }
    j->dict = cJSON_IsObject(j->node);
    n = cJSON_GetArraySize(j->node);
    if (n > HC_MAX_TASKS) {
        cl_problem(p, key, "has %d tasks, more than the limit of %d", n,
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
            j->ok[i] = cl_read_addr(p, key, e, &j->t[i]) == 0;
            i++;
            continue;
        }
        snprintf(key, sizeof key, "cluster.%s[\"%.24s\"]", j->name,
                 e->string);
        r = cl_parse_decimal(e->string, &k);
        if (r == -1 || e->string[0] == '-')
            cl_problem(p, key, "\"%.24s\" is not a task index; the keys of a "
                       "job object are \"0\", \"1\", …", e->string);
        else if (r == -2 || k >= n)
            cl_problem(p, key, "index %.24s leaves a gap: this job has %d "
                       "task(s), so its indices must be 0..%d", e->string, n,
                       n - 1);
        else if (j->t[k].host[0] || j->ok[k] == 2)
            cl_problem(p, key, "task %lld is given twice; keep one", k);
        else if (cl_read_addr(p, key, e, &j->t[k]) == 0)
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
static void check_duplicates(struct cl_parse *p, struct job **jobs, int njobs)
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
        cl_problem(p, k2, "address \"%s\" is also used by %s; every task "
                   "needs its own host:port: change the port or the host",
                   b->addr, k1);
    }
    free(r);
}

/*
 * Read "cluster" into c: ps list, worker list with the chief first. Counts
 * are left -1 when a job's shape is wrong, so later checks can skip.
 */
static void read_cluster(struct cl_parse *p, const cJSON *cl,
                         struct hc_cluster *c)
{
    struct job ps = { "ps", 0, 0, -1, 0, 0 }, wk = { "worker", 0, 0, -1, 0, 0 };
    struct job ch = { "chief", 0, 0, -1, 0, 0 }, ma = { "master", 0, 0, -1, 0, 0 };
    struct job *all[] = { &ps, &ch, &ma, &wk }, *cj;
    const cJSON *e;
    char list[64];
    int k, listed;

    c->n_ps = c->n_worker = -1;
    if (!cl) {
        cl_problem(p, "cluster", "missing; write {\"cluster\": {\"ps\": "
                   "[\"host:port\"], \"worker\": [\"host:port\"]}}");
        return;
    }
    if (!cJSON_IsObject(cl)) {
        cl_problem(p, "cluster", "must be an object {\"ps\": [...], "
                   "\"worker\": [...]}, got %s", cl_jtype(cl));
        return;
    }
    cl_check_keys(p, cl, "cluster", job_keys, NKEYS(job_keys), 0);
    cl_join(list, sizeof list, job_keys, NKEYS(job_keys));
    cJSON_ArrayForEach(e, cl) {
        char key[64];
        if (cl_known(e->string, job_keys, NKEYS(job_keys)) ||
            cl_suggest(e->string, job_keys, NKEYS(job_keys)))
            continue; /* typos were reported by cl_check_keys */
        snprintf(key, sizeof key, "cluster.%.40s", e->string);
        if (strcmp(e->string, "evaluator") == 0)
            cl_problem(p, key, "hetps has no evaluator job: the chief (worker "
                       "0) evaluates at each epoch end; remove this job");
        else
            cl_problem(p, key, "unknown job name; hetps knows %s", list);
    }
    for (k = 0; k < 4; k++) {
        all[k]->node = cJSON_GetObjectItemCaseSensitive(cl, all[k]->name);
        if (all[k]->node)
            read_job(p, all[k]);
    }
    if (!ps.node)
        cl_problem(p, "cluster.ps", "missing: hetps needs at least one "
                   "parameter server; add \"ps\": [\"host:2222\"]");
    else if (ps.n == 0)
        cl_problem(p, "cluster.ps", "is empty: hetps needs at least one "
                   "parameter server; add an address \"host:2222\"");
    if (ch.node && ma.node)
        cl_problem(p, "cluster.master", "both \"chief\" and \"master\" are "
                   "given; a cluster has one chief: keep one of them");
    cj = ch.node ? &ch : ma.node ? &ma : NULL;
    if (cj && cj->n > 1)
        cl_problem(p, cj == &ch ? "cluster.chief" : "cluster.master", "has %d "
                   "tasks; a cluster has one chief: keep one address and move "
                   "the others to cluster.worker", cj->n);
    else if (cj && cj->n == 0)
        cl_problem(p, cj == &ch ? "cluster.chief" : "cluster.master", "is "
                   "empty; give the chief's address or remove the key");
    if (!wk.node && !cj)
        cl_problem(p, "cluster.worker", "missing: add \"worker\": "
                   "[\"host:2222\"] (or a \"chief\")");
    else if (wk.node && wk.n == 0 && !cj)
        cl_problem(p, "cluster.worker", "is empty and there is no chief; list "
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
            cl_note(p->d, "cluster.%s (%s) is worker 0, so cluster.worker[i] "
                    "is worker i+1: TensorFlow's chief is a worker that also "
                    "does the bookkeeping", cj->name, cj->t[0].addr);
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
static int check_type(struct cl_parse *p, const char *key, const char *type)
{
    int t = task_type(type);

    if (t == T_EVALUATOR)
        cl_problem(p, key, "hetps has no evaluator task: the chief (worker 0) "
                   "evaluates on the test set at each epoch end; do not start "
                   "an evaluator (or run this process as a worker)");
    else if (t == T_UNKNOWN)
        cl_problem(p, key, "unknown task type \"%.40s\"; valid: ps, worker, "
                   "chief, master", type);
    return t >= T_EVALUATOR ? -1 : t;
}

/*
 * Turn (type, TensorFlow index) into hetps's (job, index), checking the
 * range: a chief is worker 0 and worker i is worker i+1 when a chief job was
 * mapped. Sets c's task on success.
 */
static int map_task(struct cl_parse *p, const char *ikey, int t, long long idx,
                    struct hc_cluster *c)
{
    int n;

    if (idx < 0) {
        cl_problem(p, ikey, "%lld is negative; task indices start at 0", idx);
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
                cl_problem(p, ikey, "%lld is out of range: cluster.%s has no "
                           "tasks", idx, t == T_PS ? "ps" : "worker");
            else
                cl_problem(p, ikey, "%lld is out of range: cluster.%s has %d "
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
            cl_problem(p, ikey, "%lld is out of range: the chief is a single "
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
static void read_task(struct cl_parse *p, const cJSON *task,
                      struct hc_cluster *c)
{
    const cJSON *type, *index;
    long long idx = 0;
    int t = -1, iok = -1;

    if (!cJSON_IsObject(task)) {
        cl_problem(p, "task", "must be an object {\"type\": \"worker\", "
                   "\"index\": 0}, got %s", cl_jtype(task));
        return;
    }
    cl_check_keys(p, task, "task", task_keys, NKEYS(task_keys), 0);
    type = cJSON_GetObjectItemCaseSensitive(task, "type");
    index = cJSON_GetObjectItemCaseSensitive(task, "index");
    if (!type)
        cl_problem(p, "task.type", "missing; add \"type\": \"worker\" (or "
                   "\"ps\", \"chief\")");
    else if (!cJSON_IsString(type))
        cl_problem(p, "task.type", "must be a string such as \"worker\", got "
                   "%s", cl_jtype(type));
    else
        t = check_type(p, "task.type", type->valuestring);
    if (!index)
        cl_problem(p, "task.index", "missing; add \"index\": 0");
    else
        iok = cl_read_index(p, "task.index", index, &idx);
    if (t >= 0 && iok == 0)
        map_task(p, "task.index", t, idx, c);
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
    struct cl_parse p = { source, diag ? diag : &local, 0 };
    cJSON *root;
    const cJSON *h, *t;

    memset(p.d, 0, sizeof *p.d);
    memset(out, 0, sizeof *out);
    root = cl_parse_json(&p, json, len);
    if (!root)
        goto out;
    if (!cJSON_IsObject(root)) {
        cl_problem(&p, NULL, "the top level must be a JSON object "
                   "{\"cluster\": {...}}, got %s", cl_jtype(root));
        goto out;
    }
    cl_check_keys(&p, root, "", top_keys, NKEYS(top_keys), 0);
    snprintf(out->source, sizeof out->source, "%s", source);
    read_cluster(&p, cJSON_GetObjectItemCaseSensitive(root, "cluster"), out);
    if ((h = cJSON_GetObjectItemCaseSensitive(root, "hetps")))
        cl_read_hetps(&p, h, out);
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
    struct cl_parse p = { src, diag ? diag : &local, 0 };
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
                cl_problem(&p, NULL, "larger than %u MiB; is this the right "
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
    cl_problem(&p, NULL, "cannot read it: %s; check the path (and that it is "
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
    struct cl_parse p = { source, diag ? diag : &local, 0 };
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
        cl_problem(&p, key, "not a task; write JOB:INDEX, e.g. \"worker:1\" "
                   "or \"ps:0\"");
        return HC_ERR_CONFIG;
    }
    memcpy(type, spec, tl);
    type[tl] = '\0';
    if ((t = check_type(&p, key, type)) < 0)
        return HC_ERR_CONFIG;
    if (!colon && t != T_CHIEF) {
        cl_problem(&p, key, "missing index; write \"%s:0\" (JOB:INDEX)", type);
        return HC_ERR_CONFIG;
    }
    if (colon) {
        r = cl_parse_decimal(colon + 1, &idx);
        if (r == -1) {
            cl_problem(&p, key, "the index \"%.20s\" is not a number; write "
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
    struct cl_parse p = { "TF_CONFIG", d, 0 };
    cJSON *root = cl_parse_json(&p, tf, strlen(tf));
    const cJSON *t;

    if (!root)
        return;
    if (!cJSON_IsObject(root))
        cl_problem(&p, NULL, "the top level must be a JSON object {\"task\": "
                   "{...}}, got %s", cl_jtype(root));
    else if ((t = cJSON_GetObjectItemCaseSensitive(root, "task")))
        read_task(&p, t, c);
    if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root,
                                                                 "cluster"))
        cl_note(d, "TF_CONFIG's cluster is ignored: the cluster comes from %s "
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
            cl_note(d, "TF_CONFIG is set but not used: the cluster file and "
                    "--task decide");
        else if (tf && *tf)
            tf_task_over_file(tf, out, d);
    } else if (!tf || !*tf) {
        struct cl_parse p = { "TF_CONFIG", d, 0 };
        memset(out, 0, sizeof *out);
        cl_problem(&p, NULL, "%s and no cluster file was given; give a "
                   "cluster file (e.g. deploy/cluster.local.json) or export "
                   "TF_CONFIG='{\"cluster\": {...}, \"task\": {...}}'",
                   tf ? "is empty" : "is not set");
        return HC_ERR_CONFIG;
    } else if ((rc = hc_cluster_parse(tf, strlen(tf), "TF_CONFIG", out, d))
               != HC_OK) {
        return rc;
    }
    if (task_flag)
        hc_cluster_set_task(out, task_flag, "--task flag", d);
    if (d->n == 0 && need_task && !out->has_task) {
        struct cl_parse p = { out->source, d, 0 };
        cl_problem(&p, "task", "not given; pass --task worker:0 (or ps:0), or "
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
            c->token_file[0] ? c->token_file : "none");
    if (c->insecure)
        fprintf(f, "  transport INSECURE plain TCP (\"insecure\": true)\n");
    else
        fprintf(f, "  transport mutual TLS, certificates in %s\n",
                getenv("HETPS_CERTS") && getenv("HETPS_CERTS")[0]
                    ? getenv("HETPS_CERTS")
                    : c->certs[0] ? c->certs : "hetps-data/certs");
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
