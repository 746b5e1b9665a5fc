/*
 * cluster.c — reads the cluster definition: TensorFlow's ClusterSpec JSON
 * (a cluster file or TF_CONFIG, as TensorFlow and Kubeflow write it) plus
 * the "hetps" block, into a struct hc_cluster, and resolves this process's
 * task. Parsing never stops at the first mistake: every problem found is
 * one sentence "SOURCE: KEY: what is wrong; fix" in an hc_diag, so a user
 * fixes a file in one round. A chief/master job becomes worker 0. Nothing
 * here touches the network.
 *
 * This file reads the document — the ClusterSpec (jobs, addresses, the
 * chief) — and holds hc_cluster_parse, hc_cluster_load_file and the
 * printer. Each other part has its file, called from here and calling
 * nothing back: the task (cluster_task.c), the "hetps" block
 * (cluster_hetps.c), the diagnostics, JSON text and values
 * (cluster_read.c). Where the cluster and the task come from — a file,
 * TF_CONFIG, --task — is decided in cluster_resolve.c, above this file.
 */
#include "cluster_hetps.h"
#include "cluster_read.h"
#include "cluster_task.h"

#include "err.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ---- public ----------------------------------------------------------- */

/* FNV-1a 64 of text, lower-cased, continuing from h. */
static uint64_t fnv_text(uint64_t h, const char *s)
{
    for (; *s; s++) {
        h ^= (unsigned char)tolower((unsigned char)*s);
        h *= 0x100000001b3ull;
    }
    return h;
}

static void addr_text(char *buf, size_t n, const struct hc_task_addr *a)
{
    snprintf(buf, n, strchr(a->host, ':') ? "[%s]:%d" : "%s:%d", a->host,
             a->port);
}

/*
 * The cluster id: FNV-1a 64 of the definition's canonical text
 *   ps=H:P,H:P;chief=H:P;mode=M;staleness=S;backup=K;insecure=I
 * — everything fixed for the life of a job: the parameter servers (they fix
 * the sharding), the chief (worker 0: it creates the variables), the
 * training mode and its bounds, the transport. Left out on purpose: the
 * other workers (the job scales by editing their list; the shards check
 * membership themselves) and what is local to one machine or deployment
 * (per-worker devices, the certificate path, the metrics port).
 */
static uint64_t cluster_id(const struct hc_cluster *c)
{
    uint64_t h = 0xcbf29ce484222325ull;
    char buf[HC_HOST_MAX + 64];
    int i;

    for (i = 0; i < c->n_ps; i++) {
        h = fnv_text(h, i ? "," : "ps=");
        addr_text(buf, sizeof buf, &c->ps[i]);
        h = fnv_text(h, buf);
    }
    h = fnv_text(h, ";chief=");
    if (c->n_worker > 0) {
        addr_text(buf, sizeof buf, &c->worker[0]);
        h = fnv_text(h, buf);
    }
    snprintf(buf, sizeof buf, ";mode=%s;staleness=%d;backup=%d;insecure=%d",
             hc_mode_name(c->mode), c->mode == HC_MODE_SSP ? c->staleness : 0,
             c->mode == HC_MODE_SYNC ? c->backup_workers : 0, !!c->insecure);
    h = fnv_text(h, buf);
    return h ? h : 1;
}

static int same_addr(const struct hc_task_addr *a, const struct hc_task_addr *b)
{
    return a->port == b->port && strcasecmp(a->host, b->host) == 0;
}

const char *hc_cluster_differs(const struct hc_cluster *a,
                               const struct hc_cluster *b)
{
    int i;

    if (a->id == b->id)
        return NULL;
    if (a->n_ps != b->n_ps)
        return "the list of parameter servers";
    for (i = 0; i < a->n_ps; i++)
        if (!same_addr(&a->ps[i], &b->ps[i]))
            return "the list of parameter servers";
    if ((a->n_worker > 0) != (b->n_worker > 0) ||
        (a->n_worker > 0 && !same_addr(&a->worker[0], &b->worker[0])))
        return "the chief (worker 0)";
    if (!!a->insecure != !!b->insecure)
        return "\"insecure\"";
    /* Last: --mode may have changed a running process's mode, not its id. */
    return "the mode or its bounds";
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
        cl_read_task(&p, t, out);
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
    if (rc == HC_OK)
        snprintf(out->file, sizeof out->file, "%s", path);
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

const char *hc_job_name(enum hc_job job)
{
    return job == HC_JOB_PS ? "ps" : "worker";
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
    fputc('\n', f);
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
