/*
 * main.c — hetps-ps: one parameter-server task.
 *
 *   hetps-ps --cluster FILE --task ps:0 [--data-dir DIR]
 *
 * Resolves the cluster (file or TF_CONFIG) and the task before opening any
 * socket; a configuration mistake exits with code 2 and one message per
 * mistake. SIGINT/SIGTERM stop the shard cleanly (store committed).
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.h"
#include "err.h"
#include "log.h"
#include "service.h"

static struct ps_service *the_service;

static void on_signal(int sig)
{
    (void)sig;
    if (the_service)
        ps_service_request_stop(the_service);
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: hetps-ps [OPTION]...\n"
"Run one parameter-server task (a shard of every variable) of a hetps cluster.\n"
"\n"
"  -c, --cluster FILE        cluster file (TensorFlow ClusterSpec JSON);\n"
"                            default: the TF_CONFIG environment variable\n"
"  -t, --task JOB:INDEX      this task, e.g. ps:0 (default: TF_CONFIG's or\n"
"                            the file's \"task\")\n"
"  -d, --data-dir DIR        LMDB store of this shard (default hetps-data/ps-INDEX)\n"
"  -l, --listen URL          listen here instead of the cluster address\n"
"                            (e.g. tcp://0.0.0.0:2222 in a container)\n"
"      --heartbeat-timeout MS  a worker silent this long is dead (default 10000)\n"
"      --max-message BYTES   refuse larger requests (closes the sender's\n"
"                            connection; default 512 MiB)\n"
"  -h, --help                show this help and exit\n"
"\n"
"Exit status: 0 after a clean shutdown, 1 on a runtime failure, 2 on a bad\n"
"flag or configuration.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' },
        { "task", required_argument, NULL, 't' },
        { "data-dir", required_argument, NULL, 'd' },
        { "listen", required_argument, NULL, 'l' },
        { "heartbeat-timeout", required_argument, NULL, 'H' },
        { "max-message", required_argument, NULL, 'M' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct ps_service_conf conf = { 0 };
    struct hc_cluster cl;
    struct hc_diag diag;
    const char *cluster_file = NULL, *task = NULL;
    char data_dir[1024] = "", name[32];
    struct sigaction sa;
    char *end;
    int c, rv;

    while ((c = getopt_long(argc, argv, "c:t:d:l:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': cluster_file = optarg; break;
        case 't': task = optarg; break;
        case 'd': snprintf(data_dir, sizeof data_dir, "%s", optarg); break;
        case 'l': conf.listen_url = optarg; break;
        case 'H':
            conf.heartbeat_timeout_ms = (int)strtol(optarg, &end, 10);
            if (*end || conf.heartbeat_timeout_ms <= 0) {
                fprintf(stderr, "hetps-ps: --heartbeat-timeout: '%s' is not a "
                        "positive number of milliseconds\n", optarg);
                return 2;
            }
            break;
        case 'M': {
            unsigned long long v = strtoull(optarg, &end, 10);

            if (*end || v < 4096) {
                fprintf(stderr, "hetps-ps: --max-message: '%s' is not a number "
                        "of bytes >= 4096\n", optarg);
                return 2;
            }
            conf.max_message = (size_t)v;
            break;
        }
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "Try 'hetps-ps --help' for more information.\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hetps-ps: unexpected argument '%s'\n"
                "Try 'hetps-ps --help' for more information.\n", argv[optind]);
        return 2;
    }
    if (hc_cluster_resolve(cluster_file, task, 1, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if (cl.task_job != HC_JOB_PS) {
        fprintf(stderr, "hetps-ps: this task is worker:%d; hetps-ps runs ps "
                "tasks (use hetps-worker, or --task ps:N)\n", cl.task_index);
        hc_cluster_free(&cl);
        return 2;
    }
    snprintf(name, sizeof name, "ps:%d", cl.task_index);
    hc_log_set_task(name);
    if (!data_dir[0])
        snprintf(data_dir, sizeof data_dir, "hetps-data/ps-%d", cl.task_index);

    conf.cluster = &cl;
    conf.shard = cl.task_index;
    conf.data_dir = data_dir;
    rv = ps_service_start(&the_service, &conf);
    if (rv != HC_OK) {
        hc_error("cannot start: %s", hc_err_msg());
        hc_cluster_free(&cl);
        return 1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    ps_service_wait(the_service);
    hc_info("stopping");
    ps_service_stop(the_service);
    the_service = NULL;
    hc_cluster_free(&cl);
    return 0;
}
