/*
 * step_gpu.c — speed of one training step (wk_net_step: upload params and
 * batch, forward, loss, backward, download gradients) of a model on one
 * device, on random data so it needs no data set: the GPU peer of step.c.
 *
 *   step_gpu [--device gpu:0] [--batch B] [--steps N] [--model FILE]
 *
 * Defaults: gpu:0, batch 64, 200 steps, deploy/models/fashion_cnn.json.
 * 10 warm-up steps, then N timed ones. Prints
 *   hetps-gpu: DEVICE batch B: S samples/s
 * Exits 1 with a message on any error (no CUDA device included).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "model.h"
#include "worker/device.h"
#include "worker/nn.h"

#define WARMUP 10

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"device", required_argument, NULL, 'd'},
        {"batch", required_argument, NULL, 'b'},
        {"steps", required_argument, NULL, 's'},
        {"model", required_argument, NULL, 'm'},
        {NULL, 0, NULL, 0},
    };
    const char *device = "gpu:0", *model = "deploy/models/fashion_cnn.json";
    struct hc_model *m = calloc(1, sizeof *m);
    struct wk_devices devs = {0};
    struct wk_net *net = NULL;
    float *params = NULL, *grads = NULL, *x = NULL;
    int *labels = NULL, batch = 64, steps = 200, c, i, status = 1;
    size_t nin, k;
    double t0 = 0.0, loss;

    while ((c = getopt_long(argc, argv, "d:b:s:m:", opts, NULL)) != -1) {
        switch (c) {
        case 'd': device = optarg; break;
        case 'b': batch = atoi(optarg); break;
        case 's': steps = atoi(optarg); break;
        case 'm': model = optarg; break;
        default:
            fprintf(stderr, "usage: step_gpu [--device D] [--batch B] "
                            "[--steps N] [--model FILE]\n");
            return 2;
        }
    }
    if (!m || batch < 1 || steps < 1) {
        fprintf(stderr, "step_gpu: bad arguments\n");
        free(m);
        return 2;
    }
    if (hc_model_load(model, m) || wk_devices_open(device, 1, &devs) ||
        wk_net_new(m, devs.dev[0].be, batch, &net))
        goto out;
    nin = wk_net_input_size(net);
    params = malloc(m->n_params * sizeof *params);
    grads = malloc(m->n_params * sizeof *grads);
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
        labels[i] = i % (int)wk_net_output_size(net);
    for (i = 0; i < WARMUP + steps; i++) {
        if (i == WARMUP)
            t0 = now_s();
        if (wk_net_step(net, params, x, labels, NULL, batch, grads, &loss,
                        NULL))
            goto out;
    }
    printf("hetps-gpu: %s batch %d: %.0f samples/s\n", device, batch,
           (double)steps * batch / (now_s() - t0));
    status = 0;
out:
    if (status)
        fprintf(stderr, "step_gpu: %s\n", hc_err_msg());
    wk_net_free(net);
    wk_devices_close(&devs);
    free(params);
    free(grads);
    free(x);
    free(labels);
    free(m);
    return status;
}
