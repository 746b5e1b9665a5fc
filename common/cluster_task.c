/*
 * cluster_task.c — who this process is in the cluster: a "task" object
 * ({"type": "worker", "index": 0}, in a cluster file or TF_CONFIG) or a
 * --task flag ("worker:1", "chief"), checked against the cluster's jobs and
 * mapped to hetps's (job, index): a chief (or master) is worker 0, and
 * TensorFlow's worker i then worker i+1. Contract: cluster_task.h.
 */
#include "cluster_task.h"

#include "err.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

static const char *const task_keys[] = { "type", "index" };

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

void cl_read_task(struct cl_parse *p, const cJSON *task,
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
