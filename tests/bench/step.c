/*
 * step.c — speed of one worker's training step, in-process, no network:
 * the model file's net on the CPU backend, real Fashion-MNIST batches from
 * the worker's shard (wk_shard_batch: shuffled, copied), forward + loss +
 * backward (wk_net_step), then the parameter server's Adam update
 * (ps_optim_apply) on the same process's parameters. This is exactly the
 * work of a training step minus pull/push, and the peer of torch_step.py.
 *
 *   step [STEPS [BATCH [THREADS]]] [--rss] [--model FILE] [--data DIR]
 *
 * Defaults: 300 steps, batch 64, 1 OpenBLAS thread,
 * deploy/models/fashion_cnn.json, WK_DATA_DEFAULT_DIR. Runs 20 warm-up
 * steps, then times STEPS steps; everything is allocated before the timed
 * loop. Prints
 *   hetps: STEPS steps batch B threads T: S samples/s
 *   hetps: loss first F last L
 * (the mean batch loss of the first warm-up step and of the last timed one:
 * a check that the loop really trains), and with --rss the peak resident
 * set size from getrusage and the net's memory (all its buffers plus the
 * parameters and gradients) as a ratio to the least a step must hold at
 * its widest point (the activations kept for backward, the output
 * gradients live at once, the same parameters and gradients). Exits 1 with a message on any error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "worker/backend.h"
#include "worker/data.h"
#include "err.h"
#include "model.h"
#include "worker/nn.h"
#include "ps/optimizer.h"

#define WARMUP 20

struct bench_args {
    int steps, batch, threads, rss;
    const char *model, *data;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The net's own buffers (all it allocated on its backend) plus the
 * parameters and gradients, against the least a step must hold at its
 * widest point: the activations kept from forward to backward, the output
 * gradients live at once in backward (each at its own size), and the same
 * parameters and gradients; and against the kept activations alone. */
static void print_net_memory(const struct wk_net *net,
                             const struct wk_backend *be,
                             const struct hc_model *m, int batch)
{
    const double MiB = 1024.0 * 1024.0, f = (double)batch * sizeof(float);
    double pg = 2.0 * (double)m->n_params * sizeof(float);
    double kept = f * (double)wk_net_kept_size(net);
    double live = f * (double)wk_net_grad_peak(net);
    double got = (double)wk_be_allocated(be) + pg;

    printf("hetps: net memory %.1f MiB = %.2fx the least at the widest point "
           "(kept activations %.1f MiB + live gradients %.1f MiB + "
           "parameters and gradients %.1f MiB), %.2fx without the live "
           "gradients\n", got / MiB, got / (kept + live + pg), kept / MiB,
           live / MiB, pg / MiB, got / (kept + pg));
}

static int parse_int(const char *s, const char *what, int lo, int hi, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);

    if (end == s || *end || v < lo || v > hi)
        return hc_err_set(HC_ERR_INVAL, "%s '%s' is not a whole number in "
                          "[%d, %d]", what, s, lo, hi);
    *out = (int)v;
    return HC_OK;
}

static int parse_args(int argc, char **argv, struct bench_args *a)
{
    static const char *const names[] = { "steps", "batch", "threads" };
    int *slots[] = { &a->steps, &a->batch, &a->threads };
    int pos = 0, i, rv;

    *a = (struct bench_args){ 300, 64, 1, 0, "deploy/models/fashion_cnn.json",
                              NULL };
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rss")) {
            a->rss = 1;
        } else if (!strcmp(argv[i], "--model") && i + 1 < argc) {
            a->model = argv[++i];
        } else if (!strcmp(argv[i], "--data") && i + 1 < argc) {
            a->data = argv[++i];
        } else if (argv[i][0] != '-' && pos < 3) {
            rv = parse_int(argv[i], names[pos], 1, pos == 2 ? 64 : 1000000,
                           slots[pos]);
            if (rv != HC_OK)
                return rv;
            pos++;
        } else {
            return hc_err_set(HC_ERR_INVAL, "unexpected argument '%s'; usage: "
                              "step [STEPS [BATCH [THREADS]]] [--rss] "
                              "[--model FILE] [--data DIR]", argv[i]);
        }
    }
    return HC_OK;
}

/* The training step: next batch of the shard, forward/loss/backward, Adam.
 * *step counts optimizer updates (Keras's iterations); *next_batch walks
 * the epochs; *n the samples of the batch. Returns HC_OK or an error code. */
static int train_step(struct wk_net *net, const struct hc_model *m,
                      struct wk_shard *shard, const struct wk_dataset *d,
                      int B, long *next_batch, uint64_t *step, float *params,
                      float *grads, float *s_m, float *s_v, float *x,
                      int32_t *y, double *loss, int *n)
{
    long long nb = wk_shard_n_batches(shard, B);
    int epoch = (int)(*next_batch / nb);
    long long b = *next_batch % nb;
    int rv;

    if ((rv = wk_shard_batch(shard, epoch, b, B, d, x, y, n)) != HC_OK ||
        (rv = wk_net_step(net, params, x, y, NULL, *n, grads, loss,
                          NULL)) != HC_OK)
        return rv;
    {
        const float *in[PS_OPTIM_MAX_SLOTS] = {s_m, s_v, NULL};
        float *out[PS_OPTIM_MAX_SLOTS] = {s_m, s_v, NULL};
        struct ps_optim_step at = {*step, 1.0f, 1};

        ps_optim_apply(&m->optim, &at, m->n_params, params, grads, in, params,
                       out);
    }
    (*step)++;
    (*next_batch)++;
    return HC_OK;
}

int main(int argc, char **argv)
{
    struct bench_args a;
    struct hc_model m;
    struct wk_dataset d = { 0 };
    struct wk_shard shard = { 0 };
    struct wk_backend *be = NULL;
    struct wk_net *net = NULL;
    float *params = NULL, *grads = NULL, *s_m = NULL, *s_v = NULL, *x = NULL;
    int32_t *y = NULL;
    long next_batch = 0, samples = 0;
    uint64_t step = 0;
    double t0, dt, loss = 0, loss_first = 0;
    int rv, i, n;

    if ((rv = parse_args(argc, argv, &a)) ||
        (rv = hc_model_load(a.model, &m)) ||
        (rv = hc_optim_validate(&m.optim, a.model)) ||
        (rv = wk_data_load_dir(a.data, "train", &d)) ||
        (rv = wk_data_check_classes(&d, m.n_classes)) ||
        (rv = wk_shard_init(&shard, d.n, 1, 0, m.seed)) ||
        (rv = wk_backend_cpu_new(a.threads, &be)) ||
        (rv = wk_net_new(&m, be, a.batch, &net)))
        goto out;
    if ((size_t)d.h * d.w * d.c != wk_net_input_size(net)) {
        rv = hc_err_set(HC_ERR_MISMATCH, "%s: images of %dx%dx%d do not fit "
                        "the input of model %s (%zu floats)", d.images_path,
                        d.h, d.w, d.c, a.model, wk_net_input_size(net));
        goto out;
    }
    if (ps_optim_slots(&m.optim) > 2 || ps_optim_slot_init(&m.optim, 0)) {
        rv = hc_err_set(HC_ERR_CONFIG, "model %s: optimizer %s keeps slots "
                        "this bench does not (at most two, starting at 0)",
                        a.model, hc_optim_name(m.optim.type));
        goto out;
    }
    params = malloc(m.n_params * sizeof *params);
    grads = malloc(m.n_params * sizeof *grads);
    s_m = calloc(m.n_params, sizeof *s_m);             /* Adam slots: zero */
    s_v = calloc(m.n_params, sizeof *s_v);
    x = malloc((size_t)a.batch * wk_net_input_size(net) * sizeof *x);
    y = malloc((size_t)a.batch * sizeof *y);
    if (!params || !grads || !s_m || !s_v || !x || !y) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for %zu parameters and "
                        "batch %d", m.n_params, a.batch);
        goto out;
    }
    hc_model_init_params(&m, params);

    for (i = 0; i < WARMUP; i++) {
        if ((rv = train_step(net, &m, &shard, &d, a.batch, &next_batch,
                             &step, params, grads, s_m, s_v, x, y, &loss,
                             &n)) != HC_OK)
            goto out;
        if (i == 0)
            loss_first = loss;
    }
    t0 = now_s();
    for (i = 0; i < a.steps; i++) {
        if ((rv = train_step(net, &m, &shard, &d, a.batch, &next_batch,
                             &step, params, grads, s_m, s_v, x, y, &loss,
                             &n)) != HC_OK)
            goto out;
        samples += n;
    }
    dt = now_s() - t0;

    printf("hetps: %d steps batch %d threads %d: %.1f samples/s\n", a.steps,
           a.batch, a.threads, (double)samples / dt);
    printf("hetps: loss first %.4f last %.4f\n", loss_first, loss);
    if (a.rss) {
        struct rusage ru;

        if (getrusage(RUSAGE_SELF, &ru) == 0)
            printf("hetps: peak RSS %.1f MiB\n", (double)ru.ru_maxrss / 1024);
        print_net_memory(net, be, &m, a.batch);
    }
    rv = HC_OK;
out:
    if (rv != HC_OK)
        fprintf(stderr, "step: %s\n", hc_err_msg());
    free(y);
    free(x);
    free(s_v);
    free(s_m);
    free(grads);
    free(params);
    wk_net_free(net);
    wk_backend_free(be);
    wk_shard_free(&shard);
    wk_data_free(&d);
    return rv == HC_OK ? 0 : 1;
}
