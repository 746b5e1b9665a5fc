/*
 * main.c — hetps-worker: one worker task.
 *
 *   hetps-worker --cluster FILE --task worker:1 [--model M.json] [...]
 *
 * Resolves the cluster and the task (configuration mistakes exit 2 before
 * any socket opens), joins every shard and, with a model, trains; without
 * one it stays joined (heartbeating) until stopped or --linger runs out —
 * useful to check a cluster's connectivity.
 *
 *   hetps-worker eval ... / hetps-worker predict ...
 *
 * `hetps eval` and `hetps predict` (the front door execs these): a
 * model's weights, exported or live, on images — loss and accuracy, or
 * the outputs themselves.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "client.h"
#include "cluster.h"
#include "checkpoint.h"
#include "data.h"
#include "device.h"
#include "err.h"
#include "eval.h"
#include "keras.h"
#include "progress.h"
#include "log.h"
#include "metrics.h"
#include "model.h"
#include "npy.h"
#include "replica.h"
#include "page.h"
#include "trainer.h"
#include "watch.h"
#include "tune.h"
#include "tables.h"
#include "ctr_inputs.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
"Usage: hetps-worker [OPTION]...\n"
"       hetps-worker eval ...     (as `hetps eval`)\n"
"       hetps-worker predict ...  (as `hetps predict`)\n"
"       hetps-worker --list-devices   (the CPU and each GPU it can use)\n"
"Run one worker task of a hetps cluster: join every parameter server, then\n"
"train the model (or, without --model, stay joined until stopped).\n"
"\n"
"  -c, --cluster FILE        cluster file (TensorFlow ClusterSpec JSON), or\n"
"                            slurm[:K] (Slurm's variables, K servers) or\n"
"                            k8s:FILE (task from the pod's name or index);\n"
"                            default: TF_CONFIG, else Slurm under a job\n"
"  -t, --task JOB:INDEX      this task, e.g. worker:1 (default: TF_CONFIG's or\n"
"                            the file's \"task\"); chief means worker:0\n"
"      --mode MODE           async, sync or ssp:S, instead of the cluster\n"
"                            file's hetps.mode (the shards must run the same)\n"
"      --devices LIST        cpu, cpu:0,cpu:1, gpu:0,gpu:1 or auto (default:\n"
"                            the cluster file's hetps.workers[i].devices)\n"
"  -m, --model FILE          train this model file (deploy/models/*.json),\n"
"                            Keras's model.to_json() or a .keras file\n"
"      --initial-weights F   the chief starts the job from these weights: a\n"
"                            .keras or .weights.h5 file, or .npy files' DIR\n"
"                            (hetps export's); a table's rows become stored\n"
"                            rows (DIR: NAME.ids.npy + NAME.rows.npy), its\n"
"                            optimizer slots fresh; a job that already has\n"
"                            values keeps them\n"
"      --loss NAME           instead of the model file's (or Keras's default):\n"
"                            sparse_categorical_crossentropy,\n"
"                            categorical_crossentropy, binary_crossentropy,\n"
"                            mse, mae, huber, or JSON '{\"type\": \"huber\",\n"
"                            \"delta\": 2}'\n"
"      --optimizer SPEC      instead of the model file's: adam, sgd or JSON,\n"
"                            '{\"type\": \"sgd\", \"learning_rate\": 0.05}'; every\n"
"                            worker, eval and export of the job needs the same\n"
"  -e, --epochs N            epochs of the whole job (default: the model\n"
"                            file's); started again, it goes on to N\n"
"  -b, --batch-size N        this worker's batch (default: the model file's)\n"
"      --data-dir DIR        IDX files (default /usr/share/datasets/fashion-mnist)\n"
"      --data X.npy,Y.npy | F.npz  train on NumPy arrays instead: images\n"
"                            (N,H,W[,C]) float32 or uint8 (scaled by 1/255),\n"
"                            integer labels (N,); an .npz holds x_train,\n"
"                            y_train, x_test, y_test; a model of several\n"
"                            inputs: one .npy per input by the model's\n"
"                            input names, then the labels:\n"
"                            image=X1.npy,meta=X2.npy,Y.npy\n"
"      --validation-data XT.npy,YT.npy  the test set with X.npy,Y.npy data\n"
"                            (several inputs: as --data)\n"
"      --max-steps N         stop after N steps (tests; sync: the job's steps,\n"
"                            those this worker sat out included)\n"
"      --overlap             async: push and pull each step's gradient on its\n"
"                            own thread while the next step computes (on\n"
"                            values one exchange staler; embedding tables:\n"
"                            their rows too, pulled two batches ahead)\n"
"      --threads N           BLAS threads of the CPU device (default 1)\n"
"      --eval / --no-eval    evaluate on the test set at epoch ends\n"
"                            (default: on the chief only)\n"
"      --slowdown F          (tests) make every step F times slower, to stand\n"
"                            in for a slower machine\n"
"      --verbose 0|1|2       as Keras's fit: 0 silent, 1 a progress bar on a\n"
"                            terminal (elsewhere a line every few seconds)\n"
"                            and the epoch summaries, 2 the summaries only\n"
"                            (default 1; workers but the chief: at most 2)\n"
"      --progress-every S    not on a terminal: seconds between progress\n"
"                            lines (default 5)\n"
"      --logdir DIR          the chief writes TensorBoard event files and\n"
"                            training.csv here (hetps launch: DATA_DIR/logs;\n"
"                            default and \"off\": none)\n"
"      --export-every-epoch DIR  the chief writes its weights after each\n"
"                            epoch as .npy files, DIR/epoch-NNN/ (as hetps\n"
"                            export), each directory whole or not at all\n"
"      --export-best-only    only DIR/best/: the epoch of the best\n"
"                            val_accuracy so far (Keras's save_best_only)\n"
"      --metrics-addr H:P    serve Prometheus /metrics here, and the chief\n"
"                            its live page at / (\"off\": not; default: the\n"
"                            cluster file's hetps.metrics_port, else off)\n"
"      --print-view          print the cluster as the shards see it after joining\n"
"      --linger SECONDS      without --model: stay joined this long, then leave\n"
"                            (default: until SIGINT/SIGTERM)\n"
"      --timeout MS          one request attempt (default 5000)\n"
"      --retry MS            give up on an unreachable shard after MS (default 30000)\n"
"      --lanes N             sync and async: a large step moves to each shard in\n"
"                            up to N parts at once, each on a connection of its\n"
"                            own (1 to 8, default 4; 1: one message per shard)\n"
"      --part-size BYTES     about this many bytes a part (K/M suffixes;\n"
"                            default 4M)\n"
"      --early-push on|off   a step in parts: push each part as soon as\n"
"                            backward has computed it, the last layers first\n"
"                            (default on, CPU devices; off: after backward)\n"
"  -h, --help                show this help and exit\n"
"\n"
"Exit status: 0 when done, 1 on a runtime failure (an unreachable shard is\n"
"named), 2 on a bad flag or configuration.\n");
}

static int parse_count(const char *flag, const char *v, int *out)
{
    char *end;
    long x = strtol(v, &end, 10);

    if (*end || end == v || x <= 0 || x > 86400000L) {
        fprintf(stderr, "hetps-worker: %s: '%s' is not a positive number\n",
                flag, v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* A size in bytes, with an optional K or M suffix (KiB, MiB), from 4K to
 * 256M. Returns 0, or -1 with the message printed. */
static int parse_bytes(const char *flag, const char *v, uint64_t *out)
{
    char *end;
    unsigned long long x = strtoull(v, &end, 10);

    if (end != v && (*end == 'K' || *end == 'k'))
        x <<= 10, end++;
    else if (end != v && (*end == 'M' || *end == 'm'))
        x <<= 20, end++;
    if (*end || end == v || v[0] == '-' || x < 4096 || x > (256ull << 20)) {
        fprintf(stderr, "hetps-worker: %s: '%s' is not a size from 4K to "
                "256M (bytes, K or M)\n", flag, v);
        return -1;
    }
    *out = x;
    return 0;
}

/* ---- `hetps eval` and `hetps predict`: a model's weights on images ---- */

/* What eval and predict share: the flags, the model, its weights and the
 * replicas on the devices. */
struct infer {
    const char *cmd;                /* "eval" or "predict", for messages */
    const char *model_file, *weights, *cluster_file, *devices;
    const char *data_dir, *set;     /* NULL: not given */
    struct hc_model_compile compile; /* --loss, --optimizer */
    int batch;
    struct hc_model *m;
    struct hc_cluster cl;
    int have_cluster;
    struct pc_client *pc;
    struct wk_devices devs;
    struct wk_replicas *rep;
    float *params;                  /* (n_params) */
    float *x;                       /* (batch, H, W, C) scratch */
    struct wk_tables *tables;       /* the model's embedding tables, their
                                     * rows pulled from the live shards
                                     * before each forward; NULL none */
    float *dense;                   /* --weights of Keras's files with
                                     * tables: every variable, each table
                                     * dense (keras.h); NULL otherwise */
};

#define INFER_OPTS \
    { "model", required_argument, NULL, 'm' }, \
    { "weights", required_argument, NULL, 'w' }, \
    { "cluster", required_argument, NULL, 'c' }, \
    { "data-dir", required_argument, NULL, 'd' }, \
    { "set", required_argument, NULL, 's' }, \
    { "batch-size", required_argument, NULL, 'b' }, \
    { "devices", required_argument, NULL, 'D' }, \
    { "loss", required_argument, NULL, 'L' }, \
    { "optimizer", required_argument, NULL, 'O' }, \
    { "help", no_argument, NULL, 'h' }
#define INFER_SHORT "m:w:c:d:s:b:D:L:O:h"

/* A flag both commands take: 1 when c was one (handled), 0 when it was
 * not, -1 on a bad value (message printed). */
static int infer_flag(struct infer *a, int c, const char *arg)
{
    switch (c) {
    case 'D': a->devices = arg; return 1;
    case 'L': a->compile.loss = arg; return 1;
    case 'O': a->compile.optimizer = arg; return 1;
    case 'm': a->model_file = arg; return 1;
    case 'w': a->weights = arg; return 1;
    case 'c': a->cluster_file = arg; return 1;
    case 'd': a->data_dir = arg; return 1;
    case 's': a->set = arg; return 1;
    case 'b': return parse_count("--batch-size", arg, &a->batch) ? -1 : 1;
    default: return 0;
    }
}

/* After the flags: check them, load the model, resolve the cluster.
 * Returns 0, or the exit status 2 with the message printed. */
static int infer_setup(struct infer *a, int argc, char **argv)
{
    if (optind < argc) {
        fprintf(stderr, "hetps %s: unexpected argument '%s'\n"
                "Try 'hetps %s --help' for more information.\n", a->cmd,
                argv[optind], a->cmd);
        return 2;
    }
    if (a->set && strcmp(a->set, "t10k") && strcmp(a->set, "test") &&
        strcmp(a->set, "train")) {
        fprintf(stderr, "hetps %s: --set: \"%s\" is not a data set; use "
                "t10k (test) or train\n", a->cmd, a->set);
        return 2;
    }
    if (!a->model_file || (!a->weights == !a->cluster_file)) {
        fprintf(stderr, "hetps %s: give --model and one of --weights or "
                "--cluster\n", a->cmd);
        return 2;
    }
    if (!(a->m = calloc(1, sizeof *a->m))) {
        fprintf(stderr, "hetps %s: out of memory\n", a->cmd);
        return 2;
    }
    if (hc_model_load_compiled(a->model_file, &a->compile, a->m) != HC_OK) {
        fprintf(stderr, "hetps %s: %s\n", a->cmd, hc_err_msg());
        return 2;
    }
    if (a->cluster_file) {
        struct hc_diag diag;

        if (hc_cluster_resolve(a->cluster_file, NULL, 0, &a->cl, &diag) !=
            HC_OK) {
            hc_diag_print(&diag, stderr);
            return 2;
        }
        a->have_cluster = 1;
    }
    return 0;
}

/* --weights of a model with embedding tables (the first one `emb`): a
 * Keras weights file or archive, which holds each table dense
 * (`hetps export --model FILE OUT.weights.h5`), read whole; the .npy
 * directory's tables (NAME.ids.npy, NAME.rows.npy) are refused. The
 * dense variables into a->params, the tables looked up in a->dense. */
static int infer_dense_tables(struct infer *a, const struct hc_layer_spec *emb)
{
    const float *tables[HC_MODEL_MAX_LAYERS];
    struct hc_model *md = malloc(sizeof *md);
    struct stat st;
    int n = 0, rv;

    if (!md)
        return hc_err_set(HC_ERR_NOMEM, "out of memory");
    if (stat(a->weights, &st) == 0 && S_ISDIR(st.st_mode))
        rv = hc_err_set(HC_ERR_CONFIG, "model %s has embedding tables "
                        "(layer %s): a directory of .npy files holds their "
                        "stored rows alone; give Keras's weights file "
                        "(hetps export --model FILE OUT.weights.h5) or "
                        "--cluster to read them from the live shards",
                        a->m->name, emb->name);
    else if ((rv = hc_keras_dense_tables(a->m, md)) == HC_OK &&
             !(a->dense = malloc(md->n_params * sizeof *a->dense)))
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for %zu parameters",
                        md->n_params);
    if (rv == HC_OK)
        rv = hc_keras_read_weights(a->weights, md, a->dense);
    for (int v = 0; rv == HC_OK && v < a->m->n_vars; v++)
        if (!a->m->vars[v].table_rows)
            memcpy(a->params + hc_model_var_offset(a->m, v),
                   a->dense + hc_model_var_offset(md, v),
                   a->m->vars[v].size * sizeof *a->params);
    for (int i = 0; rv == HC_OK && i < a->m->n_layers; i++)
        if (a->m->layers[i].type == HC_LAYER_EMBEDDING)
            tables[n++] = a->dense +
                          hc_model_var_offset(md, a->m->layers[i].var_kernel);
    if (rv == HC_OK &&
        (rv = wk_tables_open_dense(a->m, tables, a->batch, &a->tables)) ==
            HC_OK)
        rv = wk_replicas_before_forward(a->rep, wk_tables_before, a->tables);
    free(md);
    return rv;
}

/* For the images of d: check their shape, open the devices and the
 * replicas, and read the weights (the .npy files, or the live shards). */
static int infer_open(struct infer *a, const struct wk_dataset *d)
{
    int rv;

    if ((rv = wk_check_input(a->m, d)) != HC_OK ||
        (rv = wk_devices_open(a->devices, 1, &a->devs)) != HC_OK ||
        (rv = wk_replicas_open(a->m, &a->devs, a->batch, &a->rep)) != HC_OK)
        return rv;
    a->params = malloc(a->m->n_params * sizeof *a->params);
    a->x = malloc((size_t)a->batch * wk_replicas_input_size(a->rep) *
                  sizeof *a->x);
    if (!a->params || !a->x)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for batch %d",
                          a->batch);
    for (int i = 0; i < a->m->n_layers; i++)
        if (a->weights && a->m->layers[i].type == HC_LAYER_EMBEDDING)
            return infer_dense_tables(a, &a->m->layers[i]);
    if (a->weights)
        return wk_load_weights(a->m, a->weights, a->params);
    if ((rv = pc_open(&a->pc, &a->cl, -1, 0, NULL)) != HC_OK)
        return rv;
    {
        /* The stores' block size (their status says it), for the layout:
         * a store may have been made with another than the default. */
        struct pc_shard_status *st = calloc((size_t)a->cl.n_ps, sizeof *st);

        if (!st)
            return hc_err_set(HC_ERR_NOMEM, "out of memory");
        rv = pc_status(a->pc, st);
        pc_status_free(st, a->cl.n_ps);
        free(st);
    }
    if (rv == HC_OK && (rv = pc_set_model(a->pc, a->m, 0)) == HC_OK)
        rv = pc_pull(a->pc, a->params, NULL);
    if (rv == HC_OK &&
        (rv = wk_tables_open(a->m, a->pc, a->batch, &a->tables)) == HC_OK &&
        a->tables)
        rv = wk_replicas_before_forward(a->rep, wk_tables_before, a->tables);
    return rv;
}

static void infer_close(struct infer *a)
{
    wk_tables_close(a->tables);
    free(a->dense);
    pc_close(a->pc);
    free(a->params);
    free(a->x);
    wk_replicas_free(a->rep);
    wk_devices_close(&a->devs);
    if (a->have_cluster)
        hc_cluster_free(&a->cl);
    free(a->m);
}

/* `hetps-worker eval …` / `hetps eval …`: weights → loss and accuracy. */
/* eval's data: --data's arrays (X.npy,Y.npy, an .npz's test set, or
 * NAME=X.npy,…,Y.npy for a model of several inputs), else the IDX set. */
static int eval_data(const struct infer *a, const char *data,
                     struct wk_dataset *d)
{
    const char *names[HC_MODEL_MAX_INPUTS];

    if (!data)
        return wk_data_load_dir(a->data_dir, a->set ? a->set : "t10k", d);
    if (wk_ctr_inputs_spec(data))
        return wk_ctr_inputs_load(data, "--data", a->m, d);
    if (a->m->n_inputs < 2 && !strchr(data, '='))
        return wk_data_load_any(data, data, NULL, "t10k", d);
    for (int q = 0; q < a->m->n_inputs; q++)
        names[q] = a->m->inputs[q].name;
    return wk_data_load_inputs(data, names, a->m->n_inputs, 1, "--data", d);
}

static int cmd_eval(int argc, char **argv)
{
    static const struct option opts[] = {
        INFER_OPTS, { "data", required_argument, NULL, 'A' },
        { NULL, 0, NULL, 0 } };
    struct infer a = { .cmd = "eval", .devices = "auto", .batch = 256 };
    struct wk_dataset d = { 0 };
    const char *data = NULL;
    int32_t *y = NULL;
    double loss, acc, vm[HC_MODEL_MAX_METRICS] = { 0 };
    char more[640];
    int c, rv, status;

    optind = 1;
    while ((c = getopt_long(argc, argv, INFER_SHORT, opts, NULL)) != -1) {
        if ((rv = infer_flag(&a, c, optarg)) != 0) {
            if (rv < 0)
                return 2;
            continue;
        }
        if (c == 'A') {
            data = optarg;
            continue;
        }
        if (c == 'h') {
            printf("Usage: hetps eval --model FILE (--weights DIR|FILE | --cluster FILE)\n"
                   "                  [--data-dir DIR] [--set t10k|train] [--batch-size N]\n"
                   "                  [--data X.npy,Y.npy | F.npz | NAME=X.npy,...,Y.npy]\n"
                   "                  [--devices LIST] [--loss NAME] [--optimizer SPEC]\n"
                   "Evaluate a model's weights — exported .npy files (hetps export),\n"
                   "a Keras .weights.h5 or .keras file, or the live values of a\n"
                   "running cluster — on an IDX data set\n"
                   "(default: Fashion-MNIST's 10,000 test images) or on NumPy arrays:\n"
                   "images and labels, an .npz's x_test and y_test, or for a model of\n"
                   "several inputs one .npy per input named by the model's inputs, then\n"
                   "the labels (image=X1.npy,meta=X2.npy,Y.npy).\n");
            return 0;
        }
        fprintf(stderr, "Try 'hetps eval --help' for more information.\n");
        return 2;
    }
    if ((status = infer_setup(&a, argc, argv)) != 0)
        goto out;
    status = 1;
    if (data && (a.data_dir || a.set)) {
        rv = hc_err_set(HC_ERR_INVAL, "--data: give arrays or "
                        "--data-dir/--set, not both");
        goto out;
    }
    if ((rv = eval_data(&a, data, &d)) != HC_OK ||
        (hc_loss_takes_classes(a.m->loss) &&
         (rv = wk_data_check_classes(&d, a.m->n_classes)) != HC_OK) ||
        (rv = wk_evaluate_metrics_fit(a.m, &d)) != HC_OK ||
        (rv = infer_open(&a, &d)) != HC_OK)
        goto out;
    if (!(y = malloc((size_t)a.batch * sizeof *y))) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for batch %d", a.batch);
        goto out;
    }
    rv = wk_evaluate(a.rep, a.params, &d, a.batch, a.x, y, &loss, &acc);
    if (rv == HC_OK)
        rv = wk_evaluate_metrics(a.rep, a.m, a.params, &d, a.batch, a.x, vm);
    if (rv == HC_OK) {
        wk_progress_metrics(more, sizeof more, "", a.m->metrics,
                            a.m->n_metrics, vm);
        printf("eval: %s on %lld samples of %s: loss %.4f - accuracy %.4f%s\n",
               a.m->name, d.n, d.images_path, loss, acc, more);
        status = 0;
    }
out:
    if (status == 1)
        fprintf(stderr, "hetps eval: %s\n", hc_err_msg());
    free(y);
    wk_data_free(&d);
    infer_close(&a);
    return status;
}

/* Print `INDEX CLASS PROBABILITY` per image: the argmax of its outputs and
 * that output (one output: class 1 when it is above 0.5, as Keras's
 * accuracy reads a single output). */
static void print_classes(const float *out /* (n, k) */, long long n,
                          size_t k)
{
    long long i;
    size_t j, best;

    for (i = 0; i < n; i++) {
        const float *row = out + (size_t)i * k;
        int cls;

        for (best = 0, j = 1; j < k; j++)
            if (row[j] > row[best])
                best = j;
        cls = k == 1 ? row[0] > 0.5f : (int)best;
        printf("%lld %d %.6f\n", i, cls, (double)row[best]);
    }
}

/* predict's images: an IDX or .npy file; for a model of several inputs
 * NAME=X.npy per input (wk_data_load_inputs; labels may follow); a
 * click-through file, criteo:FILE or libsvm:FILE (its labels unused). */
static int load_images(const struct hc_model *m, const char *images,
                       struct wk_dataset *d)
{
    const char *names[HC_MODEL_MAX_INPUTS];

    if (wk_ctr_inputs_spec(images))
        return wk_ctr_inputs_load(images, "--images", m, d);
    if (m->n_inputs > 1 || strchr(images, '=')) {
        for (int q = 0; q < m->n_inputs; q++)
            names[q] = m->inputs[q].name;
        return wk_data_load_inputs(images, names, m->n_inputs, 0,
                                   "--images", d);
    }
    if (strlen(images) > 4 && !strcmp(images + strlen(images) - 4, ".npy"))
        return wk_data_load_npy(images, NULL, d);
    return wk_data_load_images(images, d);
}

/* `hetps-worker predict …` / `hetps predict …`: weights and images →
 * the model's outputs (Keras's model.predict). */
static int cmd_predict(int argc, char **argv)
{
    static const struct option opts[] = {
        INFER_OPTS,
        { "images", required_argument, NULL, 'i' },
        { "out", required_argument, NULL, 'o' },
        { NULL, 0, NULL, 0 },
    };
    struct infer a = { .cmd = "predict", .devices = "auto", .batch = 256 };
    struct wk_dataset d = { 0 };
    const char *images = NULL, *out_file = NULL;
    char path[WK_DATA_PATH_MAX];
    float *out = NULL;
    size_t k = 0;
    int c, rv, status;

    optind = 1;
    while ((c = getopt_long(argc, argv, INFER_SHORT "i:o:", opts, NULL)) !=
           -1) {
        if ((rv = infer_flag(&a, c, optarg)) != 0) {
            if (rv < 0)
                return 2;
            continue;
        }
        switch (c) {
        case 'i': images = optarg; break;
        case 'o': out_file = optarg; break;
        case 'h':
            printf("Usage: hetps predict --model FILE (--weights DIR|FILE | --cluster FILE)\n"
                   "                     [--images FILE | --data-dir DIR --set t10k|train]\n"
                   "                     [--out FILE.npy] [--batch-size N] [--devices LIST]\n"
                   "Run a model's weights — exported .npy files (hetps export), a Keras\n"
                   ".weights.h5 or .keras file, or the live values of a running\n"
                   "cluster — forward over images, as Keras's\n"
                   "model.predict: an IDX images file (gzip or plain; no labels needed),\n"
                   "a NumPy .npy of images (float32, or uint8 scaled by 1/255)\n"
                   "or a data set's images (default: Fashion-MNIST's 10,000 test images).\n"
                   "\n"
                   "A model of several inputs takes one .npy per input, named by the\n"
                   "model's input names: --images image=X1.npy,meta=X2.npy\n"
                   "A click-through model takes --images criteo:FILE.tsv or libsvm:FILE\n"
                   "(its labels unused): one line per line of the file, the probability\n"
                   "of a click last.\n"
                   "\n"
                   "  --out FILE.npy   write the outputs, float32 (N_images, N_outputs)\n"
                   "                   (softmax probabilities), and print one summary line\n"
                   "Without --out, one line per image: INDEX CLASS PROBABILITY (the\n"
                   "largest output and its index; one output: class 1 above 0.5).\n");
            return 0;
        default:
            fprintf(stderr, "Try 'hetps predict --help' for more information.\n");
            return 2;
        }
    }
    if (images && (a.data_dir || a.set)) {
        fprintf(stderr, "hetps predict: --images: give an images file or "
                "--data-dir/--set, not both\n");
        return 2;
    }
    if ((status = infer_setup(&a, argc, argv)) != 0)
        goto out;
    status = 1;
    if (!images) {
        if ((rv = wk_data_dir_paths(a.data_dir, a.set ? a.set : "t10k", path,
                                    NULL)) != HC_OK)
            goto out;
        images = path;
    }
    if ((rv = load_images(a.m, images, &d)) != HC_OK ||
        (rv = wk_eval_held_fits(&d, "predict")) != HC_OK ||
        (rv = infer_open(&a, &d)) != HC_OK)
        goto out;
    k = wk_replicas_output_size(a.rep);
    if (!(out = malloc((size_t)d.n * k * sizeof *out))) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for %lld x %zu outputs",
                        d.n, k);
        goto out;
    }
    if ((rv = wk_predict_all(a.rep, a.params, &d, a.batch, a.x, out)) !=
        HC_OK)
        goto out;
    if (out_file) {
        size_t shape[2] = { (size_t)d.n, k };

        if ((rv = hc_npy_write_f32(out_file, shape, 2, out)) != HC_OK)
            goto out;
        printf("predict: %s on %lld images of %s: outputs (%lld, %zu) float32 "
               "written to %s\n", a.m->name, d.n, d.images_path, d.n, k,
               out_file);
    } else {
        print_classes(out, d.n, k);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        rv = hc_err_set(HC_ERR_IO, "cannot write the output: %s",
                        strerror(errno));
        goto out;
    }
    status = 0;
out:
    if (status == 1)
        fprintf(stderr, "hetps predict: %s\n", hc_err_msg());
    free(out);
    wk_data_free(&d);
    infer_close(&a);
    return status;
}

/* The reports of a training run (watch.h): progress on stdout, the
 * metrics server when there is an address for this task, the chief's
 * summaries under logdir. */
static int start_watch(struct wk_watch *w, const struct hc_cluster *cl,
                       const struct hc_model *m, int epochs, int verbose,
                       double progress_s, const char *logdir,
                       const char *metrics_flag, struct hc_metrics **metrics,
                       struct hc_http **http, struct wk_page *page)
{
    struct wk_watch_conf wc = { 0 };
    char addr[300];
    int rv, chief = cl->task_index == 0;

    hc_metrics_addr(cl, 0, cl->task_index, metrics_flag, addr, sizeof addr);
    if (addr[0]) {
        if ((rv = hc_metrics_new(metrics)) != HC_OK ||
            (rv = hc_http_open(http, addr, *metrics)) != HC_OK)
            return hc_err_set(rv, "--metrics-addr: %s", hc_err_msg());
    }
    wc.worker = cl->task_index;
    wc.n_workers = cl->n_worker;
    wc.epochs = epochs > 0 ? epochs : m->epochs;
    /* The chief shows the bar and writes the summaries; the others print
     * their epoch summaries. hetps launch relays a bar to its terminal
     * (HETPS_TTY=1). */
    wc.verbose = chief || verbose == 0 ? verbose : 2;
    wc.tty = isatty(STDOUT_FILENO) ||
             (getenv("HETPS_TTY") && !strcmp(getenv("HETPS_TTY"), "1"));
    wc.progress_interval_s = progress_s;
    wc.metrics = *metrics;
    wc.logdir = chief ? logdir : NULL;
    wc.val_metrics = m->metrics;
    wc.n_val_metrics = m->n_metrics;
    if ((rv = wk_watch_open(w, &wc)) != HC_OK)
        return rv;
    if (!*http)
        return HC_OK;
    if (chief) {
        page->cl = cl;
        page->model = m->name;
        page->watch = w;
        if ((rv = hc_http_page(*http, "/", "text/html; charset=utf-8",
                               wk_page_render, page)) != HC_OK)
            return rv;
    }
    if ((rv = hc_http_listen(*http)) != HC_OK)
        return hc_err_set(rv, "--metrics-addr: %s", hc_err_msg());
    hc_info("metrics on http://%s/metrics%s%s%s", addr,
            chief ? ", live page on http://" : "", chief ? addr : "",
            chief ? "/" : "");
    return HC_OK;
}

/* ---- a worker task ---- */

/* The command line of a worker task. */
struct worker_args {
    const char *cluster_file, *task, *mode;    /* NULL: not given */
    const char *devices;        /* NULL: the cluster file's, else "auto" */
    const char *model_file;     /* NULL: join and stay joined */
    struct hc_model_compile compile; /* --loss, --optimizer */
    struct wk_train_conf train; /* what the flags set of the training:
                                   epochs, batch size, data, eval … */
    int verbose;                /* 0, 1, 2 */
    double progress_s;          /* seconds between progress lines */
    const char *logdir;         /* NULL: none ("off") */
    const char *metrics_flag;   /* --metrics-addr, NULL: not given */
    struct wk_checkpoint ckpt;  /* --export-every-epoch, --export-best-only */
    struct pc_opts po;          /* --timeout, --retry */
    int print_view;
    int linger_s;               /* 0: until stopped */
};

/* --slowdown: a factor in [1, 1000]. Returns 0, or -1 with the message. */
static int parse_slowdown(const char *v, double *out)
{
    char *end;

    *out = strtod(v, &end);
    if (*end || !(*out >= 1.0 && *out <= 1000.0)) {
        fprintf(stderr, "hetps-worker: --slowdown: '%s' is not a "
                "factor in [1, 1000]\n", v);
        return -1;
    }
    return 0;
}

/* --verbose: 0, 1 or 2. Returns 0, or -1 with the message. */
static int parse_verbose(const char *v, int *out)
{
    if (strcmp(v, "0") && strcmp(v, "1") && strcmp(v, "2")) {
        fprintf(stderr, "hetps-worker: --verbose: '%s' is not 0, 1 "
                "or 2\n", v);
        return -1;
    }
    *out = v[0] - '0';
    return 0;
}

/* --progress-every: seconds in [0.01, 86400]. Returns 0, or -1 with the
 * message. */
static int parse_progress(const char *v, double *out)
{
    char *end;

    *out = strtod(v, &end);
    if (*end || end == v || !(*out >= 0.01 && *out <= 86400)) {
        fprintf(stderr, "hetps-worker: --progress-every: '%s' is not "
                "a number of seconds in [0.01, 86400]\n", v);
        return -1;
    }
    return 0;
}

/* Parse the command line into a. Returns -1 to go on, else the exit code
 * (0 after --help, 2 on a bad flag, with its message printed). */
static int parse_args(int argc, char **argv, struct worker_args *a)
{
    enum { O_DEVICES = 256, O_VIEW, O_LINGER, O_TIMEOUT, O_RETRY, O_DATA,
           O_MAXSTEPS, O_OVERLAP, O_THREADS, O_EVAL, O_NOEVAL, O_SLOWDOWN, O_MODE,
           O_VERBOSE, O_PROGRESS, O_LOGDIR, O_METRICS,
           O_EXPORT, O_BEST, O_NPDATA, O_VALDATA, O_INITIAL, O_LOSS, O_OPTIM,
           O_LANES, O_PART, O_EARLY };
    static const struct option opts[] = {
        { "cluster", required_argument, NULL, 'c' },
        { "task", required_argument, NULL, 't' },
        { "devices", required_argument, NULL, O_DEVICES },
        { "mode", required_argument, NULL, O_MODE },
        { "model", required_argument, NULL, 'm' },
        { "epochs", required_argument, NULL, 'e' },
        { "batch-size", required_argument, NULL, 'b' },
        { "data-dir", required_argument, NULL, O_DATA },
        { "max-steps", required_argument, NULL, O_MAXSTEPS },
        { "overlap", no_argument, NULL, O_OVERLAP },
        { "threads", required_argument, NULL, O_THREADS },
        { "eval", no_argument, NULL, O_EVAL },
        { "no-eval", no_argument, NULL, O_NOEVAL },
        { "slowdown", required_argument, NULL, O_SLOWDOWN },
        { "verbose", required_argument, NULL, O_VERBOSE },
        { "progress-every", required_argument, NULL, O_PROGRESS },
        { "logdir", required_argument, NULL, O_LOGDIR },
        { "data", required_argument, NULL, O_NPDATA },
        { "validation-data", required_argument, NULL, O_VALDATA },
        { "export-every-epoch", required_argument, NULL, O_EXPORT },
        { "export-best-only", no_argument, NULL, O_BEST },
        { "initial-weights", required_argument, NULL, O_INITIAL },
        { "loss", required_argument, NULL, O_LOSS },
        { "optimizer", required_argument, NULL, O_OPTIM },
        { "metrics-addr", required_argument, NULL, O_METRICS },
        { "print-view", no_argument, NULL, O_VIEW },
        { "linger", required_argument, NULL, O_LINGER },
        { "timeout", required_argument, NULL, O_TIMEOUT },
        { "retry", required_argument, NULL, O_RETRY },
        { "lanes", required_argument, NULL, O_LANES },
        { "part-size", required_argument, NULL, O_PART },
        { "early-push", required_argument, NULL, O_EARLY },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    int c;

    *a = (struct worker_args){ .train = { .eval = -1, .slowdown = 1.0 },
                               .verbose = 1, .progress_s = 5.0,
                               .ckpt = { .best = -1 } };
    while ((c = getopt_long(argc, argv, "c:t:m:e:b:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': a->model_file = optarg; break;
        case 'e':
            if (parse_count("--epochs", optarg, &a->train.epochs))
                return 2;
            break;
        case 'b':
            if (parse_count("--batch-size", optarg, &a->train.batch_size))
                return 2;
            break;
        case O_DATA: a->train.data_dir = optarg; break;
        case O_MAXSTEPS:
            if (parse_count("--max-steps", optarg, &a->train.max_steps))
                return 2;
            break;
        case O_THREADS:
            if (parse_count("--threads", optarg, &a->train.n_threads))
                return 2;
            break;
        case O_EVAL: a->train.eval = 1; break;
        case O_NOEVAL: a->train.eval = 0; break;
        case O_OVERLAP: a->train.overlap = 1; break;
        case O_SLOWDOWN:
            if (parse_slowdown(optarg, &a->train.slowdown))
                return 2;
            break;
        case O_VERBOSE:
            if (parse_verbose(optarg, &a->verbose))
                return 2;
            break;
        case O_PROGRESS:
            if (parse_progress(optarg, &a->progress_s))
                return 2;
            break;
        case O_LOGDIR:
            a->logdir = strcmp(optarg, "off") ? optarg : NULL;
            break;
        case O_EXPORT: a->ckpt.dir = optarg; break;
        case O_NPDATA: a->train.data = optarg; break;
        case O_VALDATA: a->train.validation_data = optarg; break;
        case O_INITIAL: a->train.initial_weights = optarg; break;
        case O_LOSS: a->compile.loss = optarg; break;
        case O_OPTIM: a->compile.optimizer = optarg; break;
        case O_BEST: a->ckpt.best_only = 1; break;
        case O_METRICS: a->metrics_flag = optarg; break;
        case 'c': a->cluster_file = optarg; break;
        case 't': a->task = optarg; break;
        case O_DEVICES: a->devices = optarg; break;
        case O_MODE: a->mode = optarg; break;
        case O_VIEW: a->print_view = 1; break;
        case O_LINGER:
            if (parse_count("--linger", optarg, &a->linger_s))
                return 2;
            break;
        case O_TIMEOUT:
            if (parse_count("--timeout", optarg, &a->po.timeout_ms))
                return 2;
            break;
        case O_RETRY:
            if (parse_count("--retry", optarg, &a->po.retry_ms))
                return 2;
            break;
        case O_LANES:
            if (parse_count("--lanes", optarg, &a->po.lanes))
                return 2;
            if (a->po.lanes > PC_MAX_LANES) {
                fprintf(stderr, "hetps-worker: --lanes: %d is over the most, "
                        "%d\n", a->po.lanes, PC_MAX_LANES);
                return 2;
            }
            break;
        case O_PART:
            if (parse_bytes("--part-size", optarg, &a->po.part_bytes))
                return 2;
            break;
        case O_EARLY:
            if (strcmp(optarg, "on") && strcmp(optarg, "off")) {
                fprintf(stderr, "hetps-worker: --early-push: '%s'; use on or "
                        "off\n", optarg);
                return 2;
            }
            a->train.push_late = !strcmp(optarg, "off");
            break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "Try 'hetps-worker --help' for more information.\n");
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "hetps-worker: unexpected argument '%s'\n"
                "Try 'hetps-worker --help' for more information.\n",
                argv[optind]);
        return 2;
    }
    if (a->ckpt.best_only && !a->ckpt.dir) {
        fprintf(stderr, "hetps-worker: --export-best-only needs "
                "--export-every-epoch DIR\n");
        return 2;
    }
    return -1;
}

/* With --model: train it, the reports open around the run. Returns the
 * exit status (1: the failure, logged). */
static int train(struct worker_args *a, const struct hc_cluster *cl,
                 const struct hc_model *model)
{
    struct wk_train_conf tc = a->train;
    struct hc_metrics *metrics = NULL;
    struct hc_http *http = NULL;
    struct wk_watch watch = { 0 };
    struct wk_page page = { 0 };
    int rv;

    tc.cluster = cl;
    tc.cluster_file = cl->file[0] ? cl->file : NULL;
    tc.worker = cl->task_index;
    tc.model = model;
    tc.devices = a->devices;
    tc.client = a->po;
    tc.stop = &stop_requested;
    tc.watch = &watch;
    if (a->ckpt.dir && cl->task_index == 0)
        tc.export_every_epoch = &a->ckpt;
    rv = start_watch(&watch, cl, model, a->train.epochs, a->verbose,
                     a->progress_s, a->logdir, a->metrics_flag, &metrics,
                     &http, &page);
    if (rv == HC_OK)
        rv = wk_train(&tc);
    hc_http_stop(http);
    if (watch.pts)
        wk_watch_close(&watch);
    hc_metrics_free(metrics);
    if (rv != HC_OK)
        hc_error("%s", hc_err_msg());
    else
        hc_info("done");
    return rv == HC_OK ? 0 : 1;
}

/* Until SIGINT/SIGTERM, or linger_s seconds when it is > 0. */
static void linger(int linger_s)
{
    struct timespec t0, now, tick = { 0, 50 * 1000000L };

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (stop_requested)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (linger_s > 0 && now.tv_sec - t0.tv_sec >= linger_s)
            break;
        nanosleep(&tick, NULL);
    }
}

/* Without --model: join every shard, heartbeat until stopped (or
 * --linger), then leave. Returns the exit status (1: the failure,
 * logged). */
static int stay_joined(const struct worker_args *a,
                       const struct hc_cluster *cl)
{
    struct pc_client *pc = NULL;
    int rv, status = 1;

    rv = pc_open(&pc, cl, HC_JOB_WORKER, cl->task_index, &a->po);
    if (rv == HC_OK)
        rv = pc_join(pc, a->devices);
    if (rv == HC_OK)
        rv = wk_check_mode(pc, cl);
    if (rv != HC_OK) {
        hc_error("%s", hc_err_msg());
        goto out;
    }
    hc_info("joined %d shard(s) (devices %s)", cl->n_ps, a->devices);
    if (a->print_view)
        pc_print_view(pc, stdout);
    rv = pc_heartbeat_start(pc, 1000);
    if (rv != HC_OK) {
        hc_error("%s", hc_err_msg());
        goto out;
    }
    linger(a->linger_s);
    rv = pc_leave(pc);
    if (rv != HC_OK) {
        hc_error("%s", hc_err_msg());
        goto out;
    }
    hc_info("left the cluster");
    status = 0;
out:
    pc_close(pc);
    return status;
}

int main(int argc, char **argv)
{
    struct worker_args a;
    struct hc_model *model = NULL;
    struct hc_cluster cl;
    struct sigaction sa;
    int status;
    char name[32];

    hc_tune_process();

    if (argc > 1 && !strcmp(argv[1], "eval"))
        return cmd_eval(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "predict"))
        return cmd_predict(argc - 1, argv + 1);
    if (argc > 1 && !strcmp(argv[1], "--list-devices")) {
        wk_devices_list(stdout);
        return 0;
    }
    if ((status = parse_args(argc, argv, &a)) >= 0)
        return status;
    if (hc_cluster_open("hetps-worker", HC_JOB_WORKER,
                        &(struct hc_task_flags){ a.cluster_file, a.task,
                                                 a.mode },
                        &cl) != HC_OK)
        return 2;
    if (a.model_file) {
        model = calloc(1, sizeof *model);
        if (!model ||
            hc_model_load_compiled(a.model_file, &a.compile, model) != HC_OK) {
            fprintf(stderr, "hetps-worker: %s\n",
                    model ? hc_err_msg() : "out of memory");
            free(model);
            hc_cluster_free(&cl);
            return 2;
        }
    }
    snprintf(name, sizeof name, "worker:%d", cl.task_index);
    hc_log_set_task(name);
    if (!a.devices)
        a.devices = cl.wconf[cl.task_index].devices[0]
                        ? cl.wconf[cl.task_index].devices : "auto";

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    status = model ? train(&a, &cl, model) : stay_joined(&a, &cl);
    free(model);
    hc_cluster_free(&cl);
    return status;
}
