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
#include "metrics.h"
#include "tune.h"
#include "export.h"
#include "reshard.h"
#include "service.h"

static struct ps_service *the_service;

static void on_signal(int sig)
{
    if (!the_service)
        return;
    if (sig == SIGHUP)
        ps_service_request_reload(the_service);
    else
        ps_service_request_stop(the_service);
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: hetps-ps [OPTION]...\n"
"       hetps-ps export|inspect|reshard ...   (as `hetps export` …)\n"
"Run one parameter-server task (a shard of every variable) of a hetps cluster.\n"
"\n"
"  -c, --cluster FILE        cluster file (TensorFlow ClusterSpec JSON), or\n"
"                            slurm[:K] (Slurm's variables, K servers) or\n"
"                            k8s:FILE (task from the pod's name or index);\n"
"                            default: TF_CONFIG, else Slurm under a job\n"
"  -t, --task JOB:INDEX      this task, e.g. ps:0 (default: TF_CONFIG's or\n"
"                            the file's \"task\")\n"
"  -d, --data-dir DIR        LMDB store of this shard (default hetps-data/ps-INDEX)\n"
"  -l, --listen URL          listen here instead of the cluster address\n"
"                            (e.g. tcp://0.0.0.0:2222 in a container)\n"
"      --metrics-addr H:P    serve Prometheus /metrics here (\"off\": not;\n"
"                            default: the cluster file's hetps.metrics_port,\n"
"                            else off)\n"
"      --heartbeat-timeout MS  a worker silent this long is dead (default 10000)\n"
"      --max-message BYTES   refuse larger requests (closes the sender's\n"
"                            connection; default 512 MiB)\n"
"      --recv-deadline MS    close a connection that is owed no reply and\n"
"                            completes no request for this long: idle, or a\n"
"                            message body that never ends (default 120000;\n"
"                            our clients reconnect)\n"
"      --mode MODE           async, sync or ssp:S, instead of the cluster\n"
"                            file's hetps.mode (give every task the same)\n"
"      --balance on|off      sync: split each step's global batch among the\n"
"                            workers by their measured speed (default on)\n"
"      --max-staleness N     async: refuse gradients computed more than N\n"
"                            versions ago (default 0: no bound)\n"
"      --durability LEVEL    process (default): a kill -9 of this server loses\n"
"                            no acknowledged update (commits reach the OS);\n"
"                            machine[:MS]: commits reach the disk, fsync'd\n"
"                            at once or grouped over MS milliseconds\n"
"      --join-timeout MS     sync/ssp: a worker of the cluster file that has\n"
"                            not joined by then is left out (default 60000)\n"
"      --step-timeout MS     sync: a step waits this long for a live worker's\n"
"                            push, naming it at half that, then goes on\n"
"                            without it (marked dead; default 120000)\n"
"      --apply-threads N     threads for the optimizer step of a large update\n"
"                            (1 MiB of gradients or more), at most the\n"
"                            machine's cores and 8 (default 0: that many;\n"
"                            1: the step on one thread)\n"
"      --allow-nonfinite     apply gradients holding NaN or Inf (default: such\n"
"                            a push is refused, the store left unchanged, and\n"
"                            counted as nonfinite in `hetps status`)\n"
"  -h, --help                show this help and exit\n"
"\n"
"The cluster file is re-read when it changes or on SIGHUP: workers added to\n"
"or removed from it join or leave at the next step (elastic membership).\n"
"\n"
"Exit status: 0 after a clean shutdown, 1 on a runtime failure, 2 on a bad\n"
"flag or configuration.\n");
}

/* --format keras: the model file read, --out a Keras file name. Returns
 * 0, or the exit status 2 with the message printed. */
static int export_keras_args(const char *out, const char *model_file,
                             const struct hc_model_compile *compile,
                             struct hc_model **m)
{
    size_t n = strlen(out);

    if (!model_file) {
        fprintf(stderr, "hetps export: --format keras needs the job's "
                "--model FILE (Keras's files name layers by class)\n");
        return 2;
    }
    if (!(n > 6 && !strcmp(out + n - 6, ".keras")) &&
        !(n > 11 && !strcmp(out + n - 11, ".weights.h5"))) {
        fprintf(stderr, "hetps export: --format keras: --out must end in "
                ".weights.h5 (model.load_weights) or .keras "
                "(keras.models.load_model), as Keras requires\n");
        return 2;
    }
    if (!(*m = calloc(1, sizeof **m)) ||
        hc_model_load_compiled(model_file, compile, *m)) {
        fprintf(stderr, "hetps export: %s\n",
                *m ? hc_err_msg() : "out of memory");
        free(*m);
        *m = NULL;
        return 2;
    }
    return 0;
}

/* `hetps-ps export …` / `hetps export …`: the stores to .npy files. */
static int cmd_export(int argc, char **argv)
{
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' },
        { "data-dir", required_argument, NULL, 'd' },
        { "out", required_argument, NULL, 'o' },
        { "format", required_argument, NULL, 'f' },
        { "model", required_argument, NULL, 'm' },
        { "loss", required_argument, NULL, 'L' },
        { "optimizer", required_argument, NULL, 'O' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *file = NULL, *data_dir = "hetps-data", *out = NULL;
    const char *format = "npy", *model_file = NULL;
    struct hc_model_compile compile = { 0 };
    struct hc_model *m = NULL;
    struct hc_cluster cl;
    struct hc_diag diag;
    int c, rv;

    optind = 1;
    while ((c = getopt_long(argc, argv, "c:d:o:f:m:L:O:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': file = optarg; break;
        case 'd': data_dir = optarg; break;
        case 'o': out = optarg; break;
        case 'f': format = optarg; break;
        case 'm': model_file = optarg; break;
        case 'L': compile.loss = optarg; break;
        case 'O': compile.optimizer = optarg; break;
        case 'h':
            printf("Usage: hetps export [--cluster FILE] [--data-dir DIR] --out OUT\n"
                   "       hetps export --format keras --model M --out F.weights.h5|F.keras ...\n"
                   "Write every variable held by the shards' stores (shard J in\n"
                   "DIR/ps-J, default hetps-data) as OUT/NAME.npy (float32, Keras\n"
                   "layout: conv kernels (kh, kw, in, out), dense kernels (in, out)),\n"
                   "loadable with numpy.load and into the same Keras model.\n"
                   "With --format keras and the job's model file: Keras 3's weights\n"
                   "file (model.load_weights) or, for an OUT ending in .keras, a whole\n"
                   "model archive (keras.models.load_model), both with the optimizer's\n"
                   "iteration count and slots in Keras's optimizer/vars; --loss and\n"
                   "--optimizer as the job was given them.\n"
                   "An embedding table (row-sparse) becomes OUT/NAME.ids.npy (uint64)\n"
                   "and OUT/NAME.rows.npy, its stored rows, with each optimizer slot\n"
                   "beside them by Keras's name (NAME.accumulator.npy, NAME.momentum.npy,\n"
                   "…) and each row's update count (NAME.updates.npy); with --format\n"
                   "keras one dense (input_dim, output_dim) array, the rows never\n"
                   "trained their initial values, for a table of at most 1 GiB, and\n"
                   "each slot dense in optimizer/vars (rows never stored: the slot's\n"
                   "initial value; lazy Adam's per-row counts are not in Keras's file).\n"
                   "hetps-worker --initial-weights takes either form back (values only).\n"
                   "The stores are read-only: this runs beside live servers.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps export --help' for more information.\n");
            return 2;
        }
    }
    if (!file && optind < argc)
        file = argv[optind++];
    if (!out) {
        fprintf(stderr, "hetps export: --out DIR is required\n");
        return 2;
    }
    if (strcmp(format, "npy") && strcmp(format, "keras")) {
        fprintf(stderr, "hetps export: --format: \"%s\" is not npy or keras\n",
                format);
        return 2;
    }
    if (!strcmp(format, "keras") &&
        (rv = export_keras_args(out, model_file, &compile, &m)) != 0)
        return rv;
    if (hc_cluster_resolve(file, NULL, 0, &cl, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        free(m);
        return 2;
    }
    rv = m ? ps_export_keras(&cl, data_dir, m, out, stdout)
           : ps_export(&cl, data_dir, out, stdout);
    if (rv != HC_OK)
        fprintf(stderr, "hetps export: %s\n", hc_err_msg());
    hc_cluster_free(&cl);
    free(m);
    return rv == HC_OK ? 0 : 1;
}

/* `hetps reshard --in-place`: an interrupted reshard recovered, then
 * DATA's stores fitted to `to` (reshard.h), saying what was done; silent
 * when there was nothing to do. */
static int reshard_in_place(const struct hc_cluster *to, const char *to_file,
                            const char *data_dir)
{
    struct ps_reshard_done done;
    int rv, from = 0;

    /* Opening and writing stores is not news here: keep to what changed. */
    if (!getenv("HETPS_LOG"))
        hc_log_set_level(HC_LOG_WARN);
    rv = ps_reshard_recover(data_dir, &done);
    if (done.cleared)
        printf("hetps reshard: removed the incomplete output of an "
               "interrupted reshard in %s (its stores had not been "
               "touched)\n", data_dir);
    if (done.finished_from)
        printf("hetps reshard: finished moving the stores in %s from %d to "
               "%d parameter servers, which had been interrupted (the old "
               "stores are kept in %s/before-reshard-%d)\n", data_dir,
               done.finished_from, done.finished_to, data_dir,
               done.finished_from);
    fflush(stdout);
    if (rv == HC_OK)
        rv = ps_reshard_in_place(to, data_dir, &from, stdout);
    if (rv != HC_OK) {
        fprintf(stderr, "hetps reshard: %s\n", hc_err_msg());
        return 1;
    }
    if (from)
        printf("hetps reshard: %s holds %d parameter servers' stores, %s has "
               "%d: resharded %d → %d (the old stores are kept in "
               "%s/before-reshard-%d)\n", data_dir, from, to_file, to->n_ps,
               from, to->n_ps, data_dir, from);
    fflush(stdout);
    return 0;
}

/* `hetps-ps reshard …` / `hetps reshard …`. */
static int cmd_reshard(int argc, char **argv)
{
    static const struct option opts[] = {
        { "from", required_argument, NULL, 'f' },
        { "to", required_argument, NULL, 't' },
        { "data-dir", required_argument, NULL, 'd' },
        { "out-dir", required_argument, NULL, 'o' },
        { "in-place", no_argument, NULL, 'i' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    const char *from = NULL, *to = NULL, *data_dir = "hetps-data", *out = NULL;
    struct hc_cluster a, b;
    struct hc_diag diag;
    int c, rv, in_place = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "f:t:d:o:ih", opts, NULL)) != -1) {
        switch (c) {
        case 'f': from = optarg; break;
        case 't': to = optarg; break;
        case 'd': data_dir = optarg; break;
        case 'o': out = optarg; break;
        case 'i': in_place = 1; break;
        case 'h':
            printf("Usage: hetps reshard --from OLD_CLUSTER --to NEW_CLUSTER\n"
                   "                     [--data-dir DIR] --out-dir NEW_DIR\n"
                   "       hetps reshard --in-place --to NEW_CLUSTER [--data-dir DIR]\n"
                   "Move a job's variables, optimizer slots and step from the\n"
                   "stores of OLD_CLUSTER's parameter servers (DIR/ps-J, default\n"
                   "hetps-data) to fresh stores for NEW_CLUSTER's (NEW_DIR/ps-J),\n"
                   "verifying checksums and reading every value back. Stop the\n"
                   "job first; then start it with NEW_CLUSTER and --data-dir\n"
                   "NEW_DIR: training continues from the same values.\n"
                   "\n"
                   "--in-place, what `hetps launch` does before it starts any\n"
                   "task: when DIR/ps-0 holds a store of another number of\n"
                   "parameter servers than NEW_CLUSTER's, move the job to new\n"
                   "stores written inside DIR, keep the old ones in\n"
                   "DIR/before-reshard-M/ps-J and put the new ones at DIR/ps-J.\n"
                   "A move that was interrupted is finished first. Silent when\n"
                   "the stores already fit.\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps reshard --help' for more information.\n");
            return 2;
        }
    }
    if (in_place ? (!to || from || out) : (!from || !to || !out)) {
        fprintf(stderr, "hetps reshard: %s\n", in_place
                ? "--in-place takes --to (and --data-dir), not --from or --out-dir"
                : "--from, --to and --out-dir are required");
        return 2;
    }
    if (in_place) {
        if (hc_cluster_load_file(to, &b, &diag) != HC_OK) {
            hc_diag_print(&diag, stderr);
            return 2;
        }
        rv = reshard_in_place(&b, to, data_dir);
        hc_cluster_free(&b);
        return rv;
    }
    if (hc_cluster_load_file(from, &a, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        return 2;
    }
    if (hc_cluster_load_file(to, &b, &diag) != HC_OK) {
        hc_diag_print(&diag, stderr);
        hc_cluster_free(&a);
        return 2;
    }
    rv = ps_reshard(&a, data_dir, &b, out, stdout);
    if (rv != HC_OK)
        fprintf(stderr, "hetps reshard: %s\n", hc_err_msg());
    else
        printf("resharded %d → %d parameter servers: start the job with %s "
               "and --data-dir %s\n", a.n_ps, b.n_ps, to, out);
    hc_cluster_free(&a);
    hc_cluster_free(&b);
    return rv == HC_OK ? 0 : 1;
}

static int cmd_inspect(int argc, char **argv)
{
    int i, bad = 0;

    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        printf("Usage: hetps inspect STORE_DIR...\n"
               "Print what a shard's LMDB store holds and verify its checksums.\n");
        return argc < 2 ? 2 : 0;
    }
    for (i = 1; i < argc; i++) {
        if (ps_inspect(argv[i], stdout) != HC_OK) {
            fprintf(stderr, "hetps inspect: %s\n", hc_err_msg());
            bad = 1;
        }
    }
    return bad;
}

/* The command line of a parameter-server task. */
struct ps_args {
    const char *cluster_file, *task, *mode;    /* NULL: not given */
    const char *metrics_flag;   /* --metrics-addr, NULL: not given */
    char data_dir[1024];        /* "": hetps-data/ps-INDEX */
    struct ps_service_conf conf; /* the flags that tune the service */
};

/* A --*-timeout flag: a positive number of milliseconds. Returns 0, or -1
 * with the message. */
static int parse_timeout_ms(const char *flag, const char *v, int *out)
{
    char *end;

    *out = (int)strtol(v, &end, 10);
    if (*end || *out <= 0) {
        fprintf(stderr, "hetps-ps: %s: '%s' is not a "
                "positive number of milliseconds\n", flag, v);
        return -1;
    }
    return 0;
}

/* --durability: process, machine or machine:MS (the group-commit window).
 * Returns 0, or -1 with the message. */
static int parse_durability(const char *v, struct ps_service_conf *conf)
{
    char *end;

    if (!strcmp(v, "process")) {
        conf->durability = 0;
    } else if (!strncmp(v, "machine", 7) && (v[7] == '\0' || v[7] == ':')) {
        conf->durability = 1;
        conf->sync_ms = 0;
        if (v[7] == ':') {
            long ms = strtol(v + 8, &end, 10);

            if (*end || end == v + 8 || ms < 0 || ms > 60000) {
                fprintf(stderr, "hetps-ps: --durability: '%s': the "
                        "group-commit window must be 0..60000 ms\n", v);
                return -1;
            }
            conf->sync_ms = (unsigned)ms;
        }
    } else {
        fprintf(stderr, "hetps-ps: --durability: '%s' is not process, "
                "machine or machine:MS\n", v);
        return -1;
    }
    return 0;
}

/* Parse the command line into a. Returns -1 to go on, else the exit code
 * (0 after --help, 2 on a bad flag, with its message printed). */
static int parse_args(int argc, char **argv, struct ps_args *a)
{
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' },
        { "task", required_argument, NULL, 't' },
        { "data-dir", required_argument, NULL, 'd' },
        { "listen", required_argument, NULL, 'l' },
        { "heartbeat-timeout", required_argument, NULL, 'H' },
        { "max-message", required_argument, NULL, 'M' },
        { "mode", required_argument, NULL, 'm' },
        { "balance", required_argument, NULL, 'B' },
        { "max-staleness", required_argument, NULL, 'S' },
        { "join-timeout", required_argument, NULL, 'J' },
        { "durability", required_argument, NULL, 'D' },
        { "metrics-addr", required_argument, NULL, 'P' },
        { "allow-nonfinite", no_argument, NULL, 'N' },
        { "step-timeout", required_argument, NULL, 'T' },
        { "recv-deadline", required_argument, NULL, 'R' },
        { "apply-threads", required_argument, NULL, 'A' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    struct ps_service_conf *conf = &a->conf;
    char *end;
    int c;

    *a = (struct ps_args){ .conf = { .balance = 1 } };
    while ((c = getopt_long(argc, argv, "c:t:d:l:h", opts, NULL)) != -1) {
        switch (c) {
        case 'c': a->cluster_file = optarg; break;
        case 't': a->task = optarg; break;
        case 'd':
            snprintf(a->data_dir, sizeof a->data_dir, "%s", optarg);
            break;
        case 'l': conf->listen_url = optarg; break;
        case 'P': a->metrics_flag = optarg; break;
        case 'm': a->mode = optarg; break;
        case 'H':
            if (parse_timeout_ms("--heartbeat-timeout", optarg,
                                 &conf->heartbeat_timeout_ms))
                return 2;
            break;
        case 'M': {
            unsigned long long v = strtoull(optarg, &end, 10);

            if (*end || v < 4096) {
                fprintf(stderr, "hetps-ps: --max-message: '%s' is not a number "
                        "of bytes >= 4096\n", optarg);
                return 2;
            }
            conf->max_message = (size_t)v;
            break;
        }
        case 'B':
            if (!strcmp(optarg, "on"))
                conf->balance = 1;
            else if (!strcmp(optarg, "off"))
                conf->balance = 0;
            else {
                fprintf(stderr, "hetps-ps: --balance: '%s' is not on or off\n",
                        optarg);
                return 2;
            }
            break;
        case 'N': conf->allow_nonfinite = 1; break;
        case 'A': {
            long n = strtol(optarg, &end, 10);

            if (*end || end == optarg || n < 0 || n > 64) {
                fprintf(stderr, "hetps-ps: --apply-threads: '%s' is not a "
                        "number of threads 0..64 (0: the machine's cores)\n",
                        optarg);
                return 2;
            }
            conf->apply_threads = (int)n;
            break;
        }
        case 'S':
            conf->max_staleness = strtoull(optarg, &end, 10);
            if (*end || optarg[0] == '-') {
                fprintf(stderr, "hetps-ps: --max-staleness: '%s' is not a "
                        "number of versions\n", optarg);
                return 2;
            }
            break;
        case 'D':
            if (parse_durability(optarg, conf))
                return 2;
            break;
        case 'J':
            if (parse_timeout_ms("--join-timeout", optarg,
                                 &conf->join_timeout_ms))
                return 2;
            break;
        case 'T':
            if (parse_timeout_ms("--step-timeout", optarg,
                                 &conf->step_timeout_ms))
                return 2;
            break;
        case 'R': {
            long v = strtol(optarg, &end, 10);

            if (*end || end == optarg || v < 100 || v > 86400000) {
                fprintf(stderr, "hetps-ps: --recv-deadline: '%s' is not a "
                        "number of milliseconds in 100..86400000\n", optarg);
                return 2;
            }
            conf->recv_deadline_ms = (int)v;
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
    return -1;
}

/* Serve Prometheus /metrics when the flag or the cluster file gives this
 * task an address. Returns HC_OK (*http NULL when there is none), or the
 * failure, logged, with nothing left open. */
static int open_metrics(const struct hc_cluster *cl, const char *metrics_flag,
                        struct hc_metrics **metrics, struct hc_http **http)
{
    char addr[300];
    int rv;

    hc_metrics_addr(cl, 1, cl->task_index, metrics_flag, addr, sizeof addr);
    if (!addr[0])
        return HC_OK;
    if ((rv = hc_metrics_new(metrics)) != HC_OK ||
        (rv = hc_http_open(http, addr, *metrics)) != HC_OK ||
        (rv = hc_http_listen(*http)) != HC_OK) {
        hc_error("--metrics-addr: %s", hc_err_msg());
        hc_http_stop(*http);
        *http = NULL;
        hc_metrics_free(*metrics);
        *metrics = NULL;
        return rv;
    }
    hc_info("metrics on http://%s/metrics", addr);
    return HC_OK;
}

/* Run the shard until SIGINT/SIGTERM (SIGHUP: re-read the cluster file),
 * then stop http and the service. Returns the exit status (1: it could
 * not start, logged). */
static int serve(const struct ps_service_conf *conf, struct hc_http *http)
{
    struct sigaction sa;

    if (ps_service_start(&the_service, conf) != HC_OK) {
        hc_error("cannot start: %s", hc_err_msg());
        hc_http_stop(http);
        return 1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    ps_service_wait(the_service);
    hc_info("stopping");
    hc_http_stop(http);
    ps_service_stop(the_service);
    the_service = NULL;
    return 0;
}

int main(int argc, char **argv)
{
    struct ps_args a;
    struct hc_metrics *metrics = NULL;
    struct hc_http *http = NULL;
    struct hc_cluster cl;
    char name[32];
    int status;

    hc_tune_process();

    if (argc > 1 && !strcmp(argv[1], "export"))
        return cmd_export(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "inspect"))
        return cmd_inspect(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "reshard"))
        return cmd_reshard(argc - 1, argv + 1);
    if ((status = parse_args(argc, argv, &a)) >= 0)
        return status;
    if (hc_cluster_open("hetps-ps", HC_JOB_PS,
                        &(struct hc_task_flags){ a.cluster_file, a.task,
                                                 a.mode },
                        &cl) != HC_OK)
        return 2;
    snprintf(name, sizeof name, "ps:%d", cl.task_index);
    hc_log_set_task(name);
    if (!a.data_dir[0])
        snprintf(a.data_dir, sizeof a.data_dir, "hetps-data/ps-%d",
                 cl.task_index);

    a.conf.cluster = &cl;
    a.conf.cluster_file = cl.file[0] ? cl.file : NULL; /* re-read on change */
    a.conf.shard = cl.task_index;
    a.conf.data_dir = a.data_dir;
    if (open_metrics(&cl, a.metrics_flag, &metrics, &http) != HC_OK) {
        status = 2;
    } else {
        a.conf.metrics = metrics;
        status = serve(&a.conf, http);
    }
    hc_metrics_free(metrics);
    hc_cluster_free(&cl);
    return status;
}
