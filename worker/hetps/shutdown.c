/*
 * hetps_shutdown.c — `hetps shutdown [--cluster SPEC | SPEC]`: ask every
 * parameter server of a cluster to finish cleanly (commit, close its store,
 * exit 0), as `hetps launch` does once its workers are done. Schedulers
 * that start the servers themselves (Slurm's srun, systemd) call it when
 * the training is over; SPEC is anything --cluster takes (a cluster file,
 * slurm, k8s:FILE; none: TF_CONFIG, or Slurm under a job).
 */
#include "hetps.h"

#include "worker/client.h"
#include "cluster.h"
#include "err.h"

#include <getopt.h>
#include <stdio.h>

int hetps_cmd_shutdown(int argc, char **argv)
{
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct pc_opts po = { .timeout_ms = 2000, .retry_ms = 5000 };
    struct pc_client *pc = NULL;
    const char *spec = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    int c, rv;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': spec = optarg; break;
        case 'h':
            printf("Usage: hetps shutdown [--cluster SPEC | SPEC]\n"
                   "Ask every parameter server of the cluster (a cluster file,\n"
                   "slurm[:K], k8s:FILE; default TF_CONFIG, or Slurm under a\n"
                   "job) to commit and exit. Exit status 1 when one does not\n"
                   "answer.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps shutdown --help' for more information.\n");
            return 2;
        }
    }
    if (!spec && optind < argc)
        spec = argv[optind++];
    if (optind < argc) {
        fprintf(stderr, "hetps shutdown: unexpected argument '%s'\n",
                argv[optind]);
        return 2;
    }
    if (hc_cluster_resolve(spec, NULL, 0, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if ((rv = pc_open(&pc, &cl, -1, 0, &po)) == HC_OK)
        rv = pc_shutdown(pc);
    if (rv == HC_OK)
        fprintf(stderr, "hetps shutdown: %d parameter server(s) told to shut "
                "down\n", cl.n_ps);
    else
        fprintf(stderr, "hetps shutdown: %s\n", hc_err_msg());
    pc_close(pc);
    hc_cluster_free(&cl);
    return rv == HC_OK ? 0 : 1;
}
