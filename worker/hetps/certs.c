/*
 * hetps_certs.c — `hetps certs CLUSTER_FILE DIR`: the cluster's CA and one
 * certificate per task (plus the front door's admin certificate) for
 * deployments made by hand, Compose secrets or Kubernetes Secrets. The
 * making itself is common/tls_cert.c, shared with `hetps launch`.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cluster.h"
#include "err.h"
#include "hetps.h"
#include "tls_cert.h"

static void certs_usage(FILE *f)
{
    fprintf(f,
"Usage: hetps certs CLUSTER_FILE DIR\n"
"Make the certificates of CLUSTER_FILE's cluster in DIR (created if absent):\n"
"  ca.crt, ca.key   the cluster CA (keep ca.key off the task machines)\n"
"  ps-J.pem         certificate and key of ps:J, naming its host\n"
"  worker-I.pem     certificate and key of worker:I\n"
"  admin.pem        certificate and key of the `hetps` front door\n"
"Files that exist are kept: run it again after adding tasks to sign the\n"
"new ones with the same CA. Each task needs ca.crt and its own .pem; point\n"
"it at DIR with HETPS_CERTS=DIR or the cluster file's \"hetps\": {\"certs\":\n"
"DIR}. `hetps launch` does this by itself in DATA_DIR/certs.\n"
"CLUSTER_FILE may also be a resolver's spec, as --cluster takes it: `slurm`\n"
"(in a batch script: the job's nodes) or `k8s:FILE`.\n");
}

int hetps_cmd_certs(int argc, char **argv)
{
    static const struct option opts[] = {
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct hc_cluster cl;
    struct hc_diag diag;
    int c, made = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'h': certs_usage(stdout); return 0;
        default:
            fprintf(stderr, "Try 'hetps certs --help' for more information.\n");
            return 2;
        }
    }
    if (argc - optind != 2) {
        fprintf(stderr, "hetps certs: expected CLUSTER_FILE DIR, got %d "
                "argument(s)\nTry 'hetps certs --help' for more "
                "information.\n", argc - optind);
        return 2;
    }
    /* A cluster file, or a resolver's spec: `hetps certs slurm DIR` in a
     * batch script, `k8s:FILE` (hc_cluster_resolve; no task needed). */
    if (hc_cluster_resolve(argv[optind], NULL, 0, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if (hc_tls_make(&cl, argv[optind + 1], &made) != HC_OK) {
        fprintf(stderr, "%s\n", hc_err_msg());
        hc_cluster_free(&cl);
        return 1;
    }
    printf("hetps certs: %s: %d file(s) made, cluster %016llx (%d ps, %d "
           "workers, admin)\n", argv[optind + 1], made,
           (unsigned long long)cl.id, cl.n_ps, cl.n_worker);
    hc_cluster_free(&cl);
    return 0;
}
