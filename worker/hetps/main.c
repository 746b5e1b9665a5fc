/*
 * main.c — `hetps COMMAND [ARG]...`, the front door: find the command in
 * the table below and run it (hetps.h); `help` prints the list. Each
 * command lives in its own file of worker/hetps/.
 */
#include <stdio.h>
#include <string.h>

#include "hetps.h"
#include "log.h"
#include "tune.h"

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    { "launch", hetps_cmd_launch },
    { "status", hetps_cmd_status },
    { "check-config", hetps_cmd_check_config },
    { "export", hetps_cmd_export },
    { "inspect", hetps_cmd_inspect },
    { "reshard", hetps_cmd_reshard },
    { "eval", hetps_cmd_eval },
    { "predict", hetps_cmd_predict },
    { "compose", hetps_cmd_compose },
    { "health", hetps_cmd_health },
    { "k8s", hetps_cmd_k8s },
    { "shutdown", hetps_cmd_shutdown },
    { "plot", hetps_cmd_plot },
    { "certs", hetps_cmd_certs },
};

static void usage(FILE *f)
{
    fprintf(f,
"Usage: hetps COMMAND [ARG]...\n"
"The front door of hetps, a parameter server for training across unequal\n"
"machines.\n"
"\n"
"Commands:\n"
"  launch CLUSTER_FILE [-- WORKER_ARG...]  start every task on this machine\n"
"  status [FILE]                           what every parameter server knows\n"
"  check-config [FILE]                     check a cluster file or TF_CONFIG\n"
"  compose CLUSTER_FILE [-o FILE] [--host NAME]\n"
"                                          a Docker Compose file of its tasks\n"
"  health [--task JOB:I] [FILE]            exit 0 while a task is healthy (a\n"
"                                          container's HEALTHCHECK)\n"
"  export --out DIR [--data-dir D] [FILE]  the shards' variables as .npy files\n"
"         (--format keras --model M: a .weights.h5 or .keras file)\n"
"  inspect STORE_DIR...                    what a shard's LMDB store holds\n"
"  reshard --from OLD --to NEW --out-dir D move the stores to another number\n"
"                                          of parameter servers\n"
"  eval --model M (--weights DIR|FILE | --cluster FILE)\n"
"                                          loss and accuracy on the test set\n"
"  predict --model M (--weights DIR|FILE | --cluster FILE) [--images FILE]\n"
"          [--out FILE.npy]                the outputs for each image\n"
"  shutdown [FILE]                         tell every parameter server to exit\n"
"  k8s CLUSTER_FILE [-o DIR]               Kubernetes manifests for it\n"
"  certs CLUSTER_FILE DIR                  make the cluster's CA and certificates\n"
"  plot LOGDIR [-o FILE.png]               a run's loss, accuracy and speed\n"
"                                          curves (gnuplot)\n"
"  help                                    this text\n"
"\n"
"'hetps COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
    size_t i;

    hc_log_set_task("hetps");
    hc_tune_process();
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    for (i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") ||
        !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "hetps: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
