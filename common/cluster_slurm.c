/*
 * cluster_slurm.c — the Slurm resolver: turns the variables srun gives each
 * task (the node list, the tasks on each node, this task's rank) into the
 * same struct hc_cluster a cluster file gives, as TensorFlow's
 * SlurmClusterResolver does. It expands Slurm's compressed host lists
 * ("node[01-03,07]", keeping leading zeros) and tasks-per-node lists
 * ("3(x2),2,1"), numbers the tasks in Slurm's block order, makes the first
 * K of them parameter servers and gives each task on a node its own port.
 * The cluster is built as ClusterSpec JSON and read by hc_cluster_parse, so
 * it passes every check a cluster file does. Nothing here touches the
 * network.
 */
#include "cluster_read.h"

#include "err.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define SRC "Slurm"

/* ---- host lists ------------------------------------------------------- */

/* One expansion: where names go, and the variable that is read. */
struct hl {
    struct cl_parse *p;
    const char *var;
    const char *list;       /* the whole text, for messages */
    struct hc_hostlist *out;
    int cap;
};

static int hl_add(struct hl *h, const char *name, size_t len)
{
    if (len == 0) {
        cl_problem(h->p, h->var, "\"%.200s\" has an empty host name (two "
                   "commas, or a comma at an end)", h->list);
        return -1;
    }
    if (len >= HC_HOST_MAX) {
        cl_problem(h->p, h->var, "host name \"%.40s…\" is longer than %d "
                   "characters", name, HC_HOST_MAX - 1);
        return -1;
    }
    if (h->out->n >= HC_SLURM_MAX_NODES) {
        cl_problem(h->p, h->var, "\"%.200s\" names more than %d hosts",
                   h->list, HC_SLURM_MAX_NODES);
        return -1;
    }
    if (h->out->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 16;
        void *grown = realloc(h->out->name, (size_t)cap * HC_HOST_MAX);
        if (!grown) {
            h->p->nomem = 1;
            return -1;
        }
        h->out->name = grown;
        h->cap = cap;
    }
    memcpy(h->out->name[h->out->n], name, len);
    h->out->name[h->out->n][len] = '\0';
    h->out->n++;
    return 0;
}

/* Read the digits at *s (1..9 of them); -1 when there are none. */
static int read_number(const char **s, long *v, int *width)
{
    const char *b = *s;

    while (isdigit((unsigned char)**s))
        (*s)++;
    *width = (int)(*s - b);
    if (*width == 0 || *width > 9)
        return -1;
    *v = strtol(b, NULL, 10);
    return 0;
}

/*
 * Expand `item` (no top-level comma) after the already built `prefix`:
 * the text up to the first '[' is appended, each value of the bracket in
 * turn, then the rest recursively.
 */
static int hl_item(struct hl *h, char *prefix, size_t plen, const char *item,
                   const char *end)
{
    const char *open = memchr(item, '[', (size_t)(end - item));
    const char *close, *r;
    size_t lit = (size_t)((open ? open : end) - item);

    if (memchr(item, ']', lit)) {
        cl_problem(h->p, h->var, "\"%.200s\": ']' without '['", h->list);
        return -1;
    }
    if (plen + lit >= HC_HOST_MAX)
        return hl_add(h, prefix, plen + lit); /* reports the length */
    memcpy(prefix + plen, item, lit);
    plen += lit;
    if (!open)
        return hl_add(h, prefix, plen);
    close = memchr(open, ']', (size_t)(end - open));
    if (!close) {
        cl_problem(h->p, h->var, "\"%.200s\": '[' at character %d has no "
                   "']'", h->list, (int)(open - h->list) + 1);
        return -1;
    }
    if (memchr(open + 1, '[', (size_t)(close - open - 1))) {
        cl_problem(h->p, h->var, "\"%.200s\": brackets cannot nest",
                   h->list);
        return -1;
    }
    if (close == open + 1) {
        cl_problem(h->p, h->var, "\"%.200s\": empty brackets \"[]\"", h->list);
        return -1;
    }
    for (r = open + 1; r < close;) {
        long lo, hi, v;
        int wlo, whi;
        const char *start = r;
        if (read_number(&r, &lo, &wlo) != 0)
            goto bad_range;
        hi = lo;
        if (*r == '-') {
            r++;
            if (read_number(&r, &hi, &whi) != 0)
                goto bad_range;
        }
        if (r != close && *r != ',')
            goto bad_range;
        if (hi < lo) {
            cl_problem(h->p, h->var, "\"%.200s\": range \"%.*s\" runs "
                       "backwards; write LOW-HIGH", h->list,
                       (int)(r - start), start);
            return -1;
        }
        if (hi - lo >= HC_SLURM_MAX_NODES) {
            cl_problem(h->p, h->var, "\"%.200s\": range \"%.*s\" names more "
                       "than %d hosts", h->list, (int)(r - start), start,
                       HC_SLURM_MAX_NODES);
            return -1;
        }
        for (v = lo; v <= hi; v++) {
            char num[16];
            int k = snprintf(num, sizeof num, "%0*ld", wlo, v);
            if (plen + (size_t)k >= HC_HOST_MAX)
                return hl_add(h, prefix, plen + (size_t)k);
            memcpy(prefix + plen, num, (size_t)k);
            if (hl_item(h, prefix, plen + (size_t)k, close + 1, end) != 0)
                return -1;
        }
        if (*r == ',' && ++r == close)
            goto bad_range; /* "[1,]" */
        continue;
bad_range:
        while (r < close && *r != ',')
            r++;
        cl_problem(h->p, h->var, "\"%.200s\": \"%.*s\" is not a number or "
                   "range such as 01-03 (in \"[%.*s]\")", h->list,
                   (int)(r - start), start, (int)(close - open - 1), open + 1);
        return -1;
    }
    return 0;
}

int hc_slurm_hostlist(const char *list, const char *var,
                      struct hc_hostlist *out, struct hc_diag *diag)
{
    struct hc_diag local;
    struct cl_parse p = { SRC, diag ? diag : &local, 0 };
    struct hl h = { &p, var, list, out, 0 };
    char prefix[HC_HOST_MAX + 16];
    const char *s = list, *e;
    int depth, before;

    if (!diag)
        memset(&local, 0, sizeof local);
    before = p.d->n;
    memset(out, 0, sizeof *out);
    if (!*list) {
        cl_problem(&p, var, "is empty; it should name the job's nodes, "
                   "e.g. \"node[01-03]\"");
        return HC_ERR_CONFIG;
    }
    for (;;) {
        /* an item ends at a comma outside brackets */
        for (e = s, depth = 0; *e && (depth || *e != ','); e++)
            depth += *e == '[' ? 1 : *e == ']' ? -1 : 0;
        for (const char *c = s; c < e; c++)
            if (isspace((unsigned char)*c) || iscntrl((unsigned char)*c)) {
                cl_problem(&p, var, "\"%.200s\": contains a space or control "
                           "character at character %d", list,
                           (int)(c - list) + 1);
                goto fail;
            }
        if (hl_item(&h, prefix, 0, s, e) != 0)
            goto fail;
        if (!*e)
            break;
        s = e + 1;
    }
    if (p.d->n == before && !p.nomem)
        return HC_OK;
fail:
    hc_hostlist_free(out);
    return p.nomem ? hc_err_set(HC_ERR_NOMEM, "%s: out of memory", var)
                   : HC_ERR_CONFIG;
}

void hc_hostlist_free(struct hc_hostlist *h)
{
    free(h->name);
    memset(h, 0, sizeof *h);
}

/* ---- tasks per node --------------------------------------------------- */

int hc_slurm_tasks_per_node(const char *spec, const char *var, int n_nodes,
                            int *counts, struct hc_diag *diag)
{
    struct hc_diag local;
    struct cl_parse p = { SRC, diag ? diag : &local, 0 };
    const char *s = spec;
    int filled = 0;

    if (!diag)
        memset(&local, 0, sizeof local);
    while (*s) {
        const char *start = s;
        long tasks, reps = 1;
        int w;
        if (read_number(&s, &tasks, &w) != 0 || tasks < 1)
            goto bad;
        if (s[0] == '(') {
            if (s[1] != 'x')
                goto bad;
            s += 2;
            if (read_number(&s, &reps, &w) != 0 || reps < 1 || *s != ')')
                goto bad;
            s++;
        }
        if (*s && *s != ',')
            goto bad;
        if (reps > n_nodes - filled) {
            cl_problem(&p, var, "\"%.120s\" counts more nodes than the %d of "
                       "the node list", spec, n_nodes);
            return HC_ERR_CONFIG;
        }
        while (reps-- > 0)
            counts[filled++] = (int)tasks;
        if (*s == ',' && !*++s)
            goto bad;
        continue;
bad:
        while (*s && *s != ',')
            s++;
        cl_problem(&p, var, "\"%.120s\": \"%.*s\" is not a task count; "
                   "write N or N(xM) per node, e.g. \"3(x2),2,1\"", spec,
                   (int)(s - start), start);
        return HC_ERR_CONFIG;
    }
    if (filled != n_nodes) {
        cl_problem(&p, var, "\"%.120s\" counts %d node(s), but the node list "
                   "has %d", spec, filled, n_nodes);
        return HC_ERR_CONFIG;
    }
    return HC_OK;
}

/* ---- the cluster ------------------------------------------------------ */

/* The first set variable of names[], its name in *which; NULL when none. */
static const char *first_env(const char *const *names, int n,
                             const char **which)
{
    int i;

    for (i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) {
            *which = names[i];
            return v;
        }
    }
    *which = names[0];
    return NULL;
}

/* A whole number from variable `var` in [lo, hi]; -1 when reported. */
static int env_int(struct cl_parse *p, const char *var, const char *v,
                   long long lo, long long hi, long long *out)
{
    if (cl_parse_decimal(v, out) != 0 || *out < lo || *out > hi) {
        cl_problem(p, var, "\"%.40s\" is not a whole number in %lld..%lld",
                   v, lo, hi);
        return -1;
    }
    return 0;
}

/* The JSON text of the cluster: K ps, the rest workers, and the task. */
static char *cluster_json(const struct hc_hostlist *nodes, const int *counts,
                          int n_ps, int base, int task)
{
    cJSON *root = cJSON_CreateObject(), *cl, *ps, *wk, *t;
    char addr[HC_HOST_MAX + 16], *text = NULL;
    int node, local, rank = 0;

    if (!root || !(cl = cJSON_AddObjectToObject(root, "cluster")) ||
        !(ps = cJSON_AddArrayToObject(cl, "ps")) ||
        !(wk = cJSON_AddArrayToObject(cl, "worker")))
        goto out;
    for (node = 0; node < nodes->n; node++)
        for (local = 0; local < counts[node]; local++, rank++) {
            cJSON *a;
            snprintf(addr, sizeof addr, "%s:%d", nodes->name[node],
                     base + local);
            if (!(a = cJSON_CreateString(addr)) ||
                !cJSON_AddItemToArray(rank < n_ps ? ps : wk, a))
                goto out;
        }
    if (task >= 0) {
        if (!(t = cJSON_AddObjectToObject(root, "task")) ||
            !cJSON_AddStringToObject(t, "type", task < n_ps ? "ps" : "worker")
            || !cJSON_AddNumberToObject(t, "index",
                                        task < n_ps ? task : task - n_ps))
            goto out;
    }
    text = cJSON_PrintUnformatted(root);
out:
    cJSON_Delete(root);
    return text;
}

/* The node that runs task `rank` in block order. */
static int node_of(const int *counts, int n_nodes, long long rank)
{
    int node;

    for (node = 0; node < n_nodes; node++) {
        if (rank < counts[node])
            return node;
        rank -= counts[node];
    }
    return -1;
}

int hc_cluster_from_slurm(int n_ps, int want_task, struct hc_cluster *out,
                          struct hc_diag *diag)
{
    static const char *const list_vars[] = { "SLURM_STEP_NODELIST",
                                             "SLURM_JOB_NODELIST",
                                             "SLURM_NODELIST" };
    static const char *const tpn_vars[] = { "SLURM_STEP_TASKS_PER_NODE",
                                            "SLURM_TASKS_PER_NODE" };
    static const char *const ntasks_vars[] = { "SLURM_STEP_NUM_TASKS",
                                               "SLURM_NTASKS" };
    struct hc_diag local;
    struct cl_parse p = { SRC, diag ? diag : &local, 0 };
    struct hc_hostlist nodes = { 0, NULL };
    const char *lvar, *tvar, *nvar, *v, *list, *tpn, *ntasks;
    char source[sizeof out->source];
    long long total = 0, k = n_ps, base = HC_DEFAULT_PORT, rank = -1;
    int *counts = NULL, i, rc = HC_ERR_CONFIG;
    char *json = NULL;

    if (!diag)
        memset(&local, 0, sizeof local);
    memset(out, 0, sizeof *out);
    list = first_env(list_vars, NKEYS(list_vars), &lvar);
    if (!list) {
        cl_problem(&p, lvar, "is not set: this is not a Slurm job step; run "
                   "under srun (or sbatch), or give a cluster file");
        return HC_ERR_CONFIG;
    }
    if ((rc = hc_slurm_hostlist(list, lvar, &nodes, p.d)) != HC_OK)
        return rc;
    rc = HC_ERR_CONFIG;
    if (!(counts = calloc((size_t)nodes.n, sizeof *counts))) {
        rc = hc_err_set(HC_ERR_NOMEM, "%s: out of memory", lvar);
        goto out;
    }
    tpn = first_env(tpn_vars, NKEYS(tpn_vars), &tvar);
    ntasks = first_env(ntasks_vars, NKEYS(ntasks_vars), &nvar);
    if (tpn) {
        if (hc_slurm_tasks_per_node(tpn, tvar, nodes.n, counts, p.d) != HC_OK)
            goto out;
    } else {
        for (i = 0; i < nodes.n; i++)
            counts[i] = 1;
    }
    for (i = 0; i < nodes.n; i++)
        total += counts[i];
    if (ntasks) {
        long long n;
        if (env_int(&p, nvar, ntasks, 1, 1 << 20, &n) != 0)
            goto out;
        if (n != total) {
            cl_problem(&p, nvar, "is %lld, but %s%s%s places %lld task(s) on "
                       "the %d node(s) of %s", n, tpn ? tvar : "",
                       tpn ? "=" : "one task per node", tpn ? tpn : "", total,
                       nodes.n, lvar);
            goto out;
        }
    }
    if (k <= 0 && (v = getenv("HETPS_PS_TASKS")) && *v &&
        env_int(&p, "HETPS_PS_TASKS", v, 1, 1 << 20, &k) != 0)
        goto out;
    if (k <= 0)
        k = 1;
    if (k >= total) {
        cl_problem(&p, n_ps > 0 ? "--cluster slurm:K" : "HETPS_PS_TASKS",
                   "%lld parameter server(s) leave no worker among the job's "
                   "%lld task(s); ask srun for more tasks (--ntasks) or fewer "
                   "servers", k, total);
        goto out;
    }
    if ((v = getenv("HETPS_BASE_PORT")) && *v &&
        env_int(&p, "HETPS_BASE_PORT", v, 1, 65535, &base) != 0)
        goto out;
    for (i = 0; i < nodes.n; i++)
        if (base + counts[i] - 1 > 65535) {
            cl_problem(&p, "HETPS_BASE_PORT", "%lld + %d tasks on node %s "
                       "passes port 65535; choose a lower base port", base,
                       counts[i], nodes.name[i]);
            goto out;
        }
    if (want_task) {
        if (!(v = getenv("SLURM_PROCID")) || !*v) {
            cl_problem(&p, "SLURM_PROCID", "is not set: start each task with "
                       "srun, or give --task JOB:INDEX");
            goto out;
        }
        if (env_int(&p, "SLURM_PROCID", v, 0, total - 1, &rank) != 0)
            goto out;
        v = getenv("SLURMD_NODENAME");
        i = node_of(counts, nodes.n, rank);
        if (v && *v && strcmp(v, nodes.name[i]) != 0) {
            cl_problem(&p, "SLURM_PROCID", "task %lld runs on %s, but in "
                       "block order it belongs on %s: hetps needs srun's "
                       "default block distribution (drop -m/--distribution "
                       "cyclic or plane)", rank, v, nodes.name[i]);
            goto out;
        }
    }
    if (!(json = cluster_json(&nodes, counts, (int)k, (int)base, (int)rank))) {
        rc = hc_err_set(HC_ERR_NOMEM, "Slurm: out of memory");
        goto out;
    }
    snprintf(source, sizeof source, "Slurm (%s=%.200s)", lvar, list);
    rc = hc_cluster_parse(json, strlen(json), source, out, p.d);
out:
    free(json);
    free(counts);
    hc_hostlist_free(&nodes);
    return rc;
}
