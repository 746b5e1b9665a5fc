/*
 * step_gpu.c — speed of one training step of a model on one device or on
 * several mirrored ones, on random data so it needs no data set: the GPU
 * peer of step.c. It takes the trainer's path (worker/trainer.c):
 * wk_devices_open, wk_replicas_open, wk_replicas_step — upload params and
 * each device's slice of the batch, forward, loss, backward, download the
 * gradients and reduce them on the host. With one device a step runs
 * inline and costs what wk_net_step costs; with several, the batch is cut
 * by each device's measured speed (replica.h) and the devices run at once.
 *
 *   step_gpu [--device LIST] [--batch B] [--steps N] [--model FILE]
 *            [--pageable]
 *
 * LIST is a device list as the worker takes it (device.h): "gpu:0",
 * "gpu:0,gpu:1", "cpu", "cpu:0,cpu:1"; --devices is the same option. Each
 * CPU device gets 1 OpenBLAS thread. Defaults: gpu:0, batch 64, 200 steps,
 * deploy/models/fashion_cnn.json. 10 warm-up steps (the replicas measure
 * each device's speed there), then N timed ones. The parameters and the
 * gradients live in host memory as the trainer's do (wk_devices_host_alloc:
 * page-locked when a GPU is in the list); --pageable takes plain malloc
 * memory instead, to see what locking it saves. Prints
 *   hetps-gpu: LIST batch B: S samples/s, T ms a step
 * (LIST as given; ", pageable host buffers" with --pageable), for several
 * devices followed by the slices of the last
 * step, " (mirrored, split 128+128)", or by " (placed)" when the model
 * file places its layers. Exits 1 with a message on any error (no CUDA
 * device included).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "model.h"
#include "worker/device.h"
#include "worker/replica.h"

#define WARMUP 10

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* " (mirrored, split 128+128)" or " (placed)" for several devices, "" for
 * one. */
static const char *mode_str(const struct wk_replicas *r, char *buf,
                            size_t len)
{
    int counts[WK_MAX_DEVICES], n = wk_replicas_n(r), i;
    size_t at;

    buf[0] = '\0';
    if (n < 2)
        return buf;
    if (wk_replicas_is_placed(r)) {
        snprintf(buf, len, " (placed)");
        return buf;
    }
    wk_replicas_last_split(r, counts);
    at = (size_t)snprintf(buf, len, " (mirrored, split ");
    for (i = 0; i < n && at < len; i++)
        at += (size_t)snprintf(buf + at, len - at, "%s%d", i ? "+" : "",
                               counts[i]);
    if (at < len)
        snprintf(buf + at, len - at, ")");
    return buf;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},
        {"devices", required_argument, NULL, 'd'},
        {"batch", required_argument, NULL, 'b'},
        {"steps", required_argument, NULL, 's'},
        {"model", required_argument, NULL, 'm'},
        {"pageable", no_argument, NULL, 'P'},
        {NULL, 0, NULL, 0},
    };
    const char *device = "gpu:0", *model = "deploy/models/fashion_cnn.json";
    struct hc_model *m = calloc(1, sizeof *m);
    struct wk_devices devs = {0};
    struct wk_replicas *rep = NULL;
    float *params = NULL, *grads = NULL, *x = NULL;
    int *labels = NULL, batch = 64, steps = 200, c, i, status = 1;
    int pageable = 0;
    size_t nin, k;
    double t0 = 0.0, dt, loss;
    char mode[WK_MAX_DEVICES * 8 + 32];

    while ((c = getopt_long(argc, argv, "d:b:s:m:", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'b': batch = atoi(optarg); break;
        case 's': steps = atoi(optarg); break;
        case 'm': model = optarg; break;
        case 'P': pageable = 1; break;
        default:
            fprintf(stderr, "usage: step_gpu [--device LIST] [--batch B] "
                            "[--steps N] [--model FILE] [--pageable]\n");
            return 2;
        }
    }
    if (!m || batch < 1 || steps < 1) {
        fprintf(stderr, "step_gpu: bad arguments\n");
        free(m);
        return 2;
    }
    if (hc_model_load(model, m) || wk_devices_open(device, 1, &devs) ||
        wk_replicas_open(m, &devs, batch, &rep))
        goto out;
    nin = wk_replicas_input_size(rep);
    /* As the trainer has them (page-locked on a GPU), or --pageable. */
    params = pageable ? malloc(m->n_params * sizeof *params)
                      : wk_devices_host_alloc(&devs, m->n_params * sizeof *params);
    grads = pageable ? malloc(m->n_params * sizeof *grads)
                     : wk_devices_host_alloc(&devs, m->n_params * sizeof *grads);
    x = malloc((size_t)batch * nin * sizeof *x);
    labels = malloc((size_t)batch * sizeof *labels);
    if (!params || !grads || !x || !labels) {
        hc_err_set(HC_ERR_NOMEM, "out of memory");
        goto out;
    }
    hc_model_init_params(m, params);
    for (k = 0; k < (size_t)batch * nin; k++)
        x[k] = (float)((k * 2654435761u) % 1000) / 1000.0f;
    for (i = 0; i < batch; i++)
        labels[i] = i % (int)wk_replicas_output_size(rep);
    for (i = 0; i < WARMUP + steps; i++) {
        if (i == WARMUP)
            t0 = now_s();
        if (wk_replicas_step(rep, params, x, labels, NULL, batch, grads,
                             &loss, NULL))
            goto out;
    }
    dt = now_s() - t0;
    printf("hetps-gpu: %s batch %d: %.0f samples/s, %.2f ms a step%s%s\n",
           device, batch, (double)steps * batch / dt, dt / steps * 1e3,
           pageable ? ", pageable host buffers" : "",
           mode_str(rep, mode, sizeof mode));
    status = 0;
out:
    if (status)
        fprintf(stderr, "step_gpu: %s\n", hc_err_msg());
    wk_replicas_free(rep);
    wk_devices_host_free(params);
    wk_devices_host_free(grads);
    wk_devices_close(&devs);
    free(x);
    free(labels);
    free(m);
    return status;
}
