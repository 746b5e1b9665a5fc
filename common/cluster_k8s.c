/*
 * cluster_k8s.c — the Kubernetes resolver: every pod reads the same cluster
 * file (a ConfigMap) and finds its own task in what Kubernetes gives it, a
 * StatefulSet's ordinal in its host name (NAME-N) or an Indexed Job's
 * JOB_COMPLETION_INDEX, so one pod template serves every task. The job
 * (ps or worker) comes from HETPS_JOB or the NAME's last word, as
 * `hetps k8s` names its StatefulSet "…-ps" and its Job "…-worker"; a Job
 * whose pods start at worker K says so with HETPS_INDEX_OFFSET=K. Kubeflow
 * TFJob pods need none of this: their TF_CONFIG is read as it is
 * (cluster.c). Nothing here touches the network.
 */
#include "cluster_read.h"

#include "err.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SRC "Kubernetes"

/* "ps", "worker" or NULL from a word of `len` characters. */
static const char *job_word(const char *s, size_t len)
{
    if (len == 2 && strncmp(s, "ps", 2) == 0)
        return "ps";
    if (len == 6 && strncmp(s, "worker", 6) == 0)
        return "worker";
    return NULL;
}

int hc_k8s_task(char *spec, size_t n, struct hc_diag *diag)
{
    struct hc_diag local;
    struct cl_parse p = { SRC, diag ? diag : &local, 0 };
    char host[HC_HOST_MAX];
    const char *job = getenv("HETPS_JOB"), *idx = getenv("JOB_COMPLETION_INDEX");
    const char *h = getenv("HOSTNAME"), *dash = NULL, *word, *c, *off;
    long long index = -1;

    if (!diag)
        memset(&local, 0, sizeof local);
    if (!h || !*h) {
        if (gethostname(host, sizeof host) != 0)
            host[0] = '\0';
        host[sizeof host - 1] = '\0';
        h = host;
    }
    /* NAME-N: the last '-' followed by digits only */
    if ((dash = strrchr(h, '-')) && dash[1]) {
        for (c = dash + 1; *c && isdigit((unsigned char)*c); c++)
            ;
        if (*c || cl_parse_decimal(dash + 1, &index) != 0)
            dash = NULL, index = -1;
    } else {
        dash = NULL;
    }
    if (job && *job) {
        if (!job_word(job, strlen(job))) {
            cl_problem(&p, "HETPS_JOB", "\"%.40s\" is not a job; write ps or "
                       "worker", job);
            return HC_ERR_CONFIG;
        }
    } else if (dash) {
        for (word = dash; word > h && word[-1] != '-'; word--)
            ;
        job = job_word(word, (size_t)(dash - word));
    }
    if (!job || !*job) {
        cl_problem(&p, "HETPS_JOB", "not set, and the host name \"%.80s\" is "
                   "not NAME-ps-N or NAME-worker-N; set HETPS_JOB=ps or "
                   "worker in the pod, or give --task JOB:INDEX", h);
        return HC_ERR_CONFIG;
    }
    if (idx && *idx) {
        if (cl_parse_decimal(idx, &index) != 0 || index < 0 ||
            index >= HC_MAX_TASKS) {
            cl_problem(&p, "JOB_COMPLETION_INDEX", "\"%.40s\" is not a task "
                       "index (0..%d)", idx, HC_MAX_TASKS - 1);
            return HC_ERR_CONFIG;
        }
    } else if (index < 0) {
        cl_problem(&p, "HOSTNAME", "\"%.80s\" does not end in -N (a "
                   "StatefulSet's ordinal) and JOB_COMPLETION_INDEX is not "
                   "set (an Indexed Job's); give --task JOB:INDEX", h);
        return HC_ERR_CONFIG;
    }
    if ((off = getenv("HETPS_INDEX_OFFSET")) && *off) {
        long long o;
        if (cl_parse_decimal(off, &o) != 0 || o < 0 || o >= HC_MAX_TASKS) {
            cl_problem(&p, "HETPS_INDEX_OFFSET", "\"%.40s\" is not a task "
                       "index (0..%d)", off, HC_MAX_TASKS - 1);
            return HC_ERR_CONFIG;
        }
        index += o;
    }
    snprintf(spec, n, "%s:%lld", job, index);
    return HC_OK;
}

int hc_cluster_from_k8s(const char *path, int want_task,
                        struct hc_cluster *out, struct hc_diag *diag)
{
    struct hc_diag local;
    struct hc_diag *d = diag ? diag : &local;
    char spec[64], source[96];
    int rc;

    memset(d, 0, sizeof *d);
    if ((rc = hc_cluster_load_file(path, out, d)) != HC_OK || !want_task)
        return rc;
    if ((rc = hc_k8s_task(spec, sizeof spec, d)) == HC_OK) {
        snprintf(source, sizeof source, "Kubernetes pod (task %s)", spec);
        rc = hc_cluster_set_task(out, spec, source, d);
    }
    if (rc != HC_OK)
        hc_cluster_free(out);
    return rc;
}
