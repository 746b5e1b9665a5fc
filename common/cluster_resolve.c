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
