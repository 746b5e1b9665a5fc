/*
 * cluster_resolve.c — where the cluster and this process's task come
 * from, highest first: the --task flag, TF_CONFIG's task, the cluster
 * file's task; the cluster from the file when one is given, else from
 * TF_CONFIG. And the opening every program of a job shares
 * (hc_cluster_open): resolve, apply --mode, refuse a task of another role.
 * Built on cluster.c's parser and cluster_task.c; nothing calls back here.
 */
#include "cluster_read.h"
#include "cluster_task.h"

#include "err.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        cl_read_task(&p, t, c);
    if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root,
                                                                 "cluster"))
        cl_note(d, "TF_CONFIG's cluster is ignored: the cluster comes from %s "
                "(only TF_CONFIG's task is used)", c->source);
    cJSON_Delete(root);
}

/* "slurm" or "slurm:K": 1 and *k (0 when not given); -1 when "slurm:"
 * is followed by something that is not a count; 0 when not Slurm. */
static int slurm_spec(const char *spec, long long *k)
{
    *k = 0;
    if (strcmp(spec, "slurm") == 0)
        return 1;
    if (strncmp(spec, "slurm:", 6) != 0)
        return 0;
    return cl_parse_decimal(spec + 6, k) == 0 && *k > 0 && *k < HC_MAX_TASKS
           ? 1 : -1;
}

/* The cluster named by spec (see cluster.h), its task when the resolver
 * knows it and no --task flag decides. */
static int resolve_cluster(const char *spec, const char *task_flag,
                           int need_task, struct hc_cluster *out,
                           struct hc_diag *d)
{
    int want_task = !task_flag && need_task;
    const char *tf = getenv("TF_CONFIG"), *job = getenv("SLURM_JOB_ID");
    long long k;
    int s, rc;

    if (spec && (s = slurm_spec(spec, &k)) != 0) {
        if (s < 0) {
            struct cl_parse p = { "--cluster", d, 0 };
            memset(out, 0, sizeof *out);
            cl_problem(&p, NULL, "\"%.80s\": write slurm or slurm:K, K the "
                       "number of parameter servers (1 or more)", spec);
            return HC_ERR_CONFIG;
        }
        return hc_cluster_from_slurm((int)k, want_task, out, d);
    }
    if (spec && strncmp(spec, "k8s:", 4) == 0)
        return hc_cluster_from_k8s(spec + 4, want_task, out, d);
    if (spec) {
        if ((rc = hc_cluster_load_file(spec, out, d)) != HC_OK)
            return rc;
        if (tf && *tf && task_flag)
            cl_note(d, "TF_CONFIG is set but not used: the cluster file and "
                    "--task decide");
        else if (tf && *tf)
            tf_task_over_file(tf, out, d);
        return HC_OK;
    }
    if (tf && *tf)
        return hc_cluster_parse(tf, strlen(tf), "TF_CONFIG", out, d);
    if (job && *job) {
        if ((rc = hc_cluster_from_slurm(0, want_task, out, d)) == HC_OK)
            cl_note(d, "no cluster file and no TF_CONFIG: the cluster comes "
                    "from Slurm job %.40s (--cluster slurm)", job);
        return rc;
    }
    {
        struct cl_parse p = { "TF_CONFIG", d, 0 };
        memset(out, 0, sizeof *out);
        cl_problem(&p, NULL, "%s and no cluster file was given; give a "
                   "cluster file (e.g. deploy/cluster.local.json) or export "
                   "TF_CONFIG='{\"cluster\": {...}, \"task\": {...}}'",
                   tf ? "is empty" : "is not set");
    }
    return HC_ERR_CONFIG;
}

int hc_cluster_resolve(const char *spec, const char *task_flag, int need_task,
                       struct hc_cluster *out, struct hc_diag *diag)
{
    struct hc_diag local;
    struct hc_diag *d = diag ? diag : &local;
    int rc;

    memset(d, 0, sizeof *d);
    if ((rc = resolve_cluster(spec, task_flag, need_task, out, d)) != HC_OK)
        return rc;
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

int hc_cluster_open(const char *prog, int role, const struct hc_task_flags *f,
                    struct hc_cluster *out)
{
    struct hc_diag diag;
    int i, rv;

    if (role < 0)
        rv = hc_cluster_load_file(f->file, out, &diag);
    else
        rv = hc_cluster_resolve(f->file, f->task, 1, out, &diag);
    if (rv != HC_OK) {
        hc_diag_print(&diag, stderr);
        return HC_ERR_CONFIG;
    }
    for (i = 0; i < diag.n_note; i++)
        fprintf(stderr, "hetps: note: %s\n", diag.note[i]);
    if (f->mode && hc_cluster_set_mode(out, f->mode, "--mode") != HC_OK) {
        fprintf(stderr, "%s: %s\n", prog, hc_err_msg());
        hc_cluster_free(out);
        return HC_ERR_CONFIG;
    }
    if (role >= 0 && out->task_job != (enum hc_job)role) {
        const char *want = hc_job_name((enum hc_job)role);
        const char *other = hc_job_name(out->task_job);

        fprintf(stderr, "%s: this task is %s:%d; %s runs %s tasks (use "
                "hetps-%s, or --task %s:N)\n", prog, other, out->task_index,
                prog, want, other, want);
        hc_cluster_free(out);
        return HC_ERR_CONFIG;
    }
    return HC_OK;
}
