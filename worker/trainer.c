/*
 * trainer.c — the worker's training loop (see trainer.h).
 *
 * Every buffer of the loop — parameters, gradients, the batch — is
 * allocated once before the first step. In asynchronous mode each step
 * pulls the freshest parameters from every shard, computes the gradient of
 * the mean loss over the batch and pushes it; the shards apply it at once.
 */
#include "trainer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "data.h"
#include "eval.h"
#include "err.h"
#include "log.h"
#include "nn.h"

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 1 when every worker but `self` has left (or died), by every shard's
 * account. */
static int others_done(struct pc_client *pc, const struct hc_cluster *cl,
                       int self)
{
    struct pc_shard_status *st = calloc((size_t)cl->n_ps, sizeof *st);
    int j, k, done = 1;

    if (!st || pc_status(pc, st) != HC_OK) {
        free(st);
        return 0;
    }
    for (j = 0; j < cl->n_ps; j++) {
        if (!st[j].up)
            done = 0;
        for (k = 0; k < st[j].n_members; k++)
            if (st[j].members[k].worker != self &&
                !strcmp(st[j].members[k].state, "joined"))
                done = 0;
    }
    pc_status_free(st, cl->n_ps);
    free(st);
    return done;
}

/* Non-chief workers wait for the chief to create the variables. */
static int wait_for_variables(struct pc_client *pc, float *params,
                              int retry_ms)
{
    double deadline = now_s() + retry_ms / 1000.0;
    int rv, said = 0;

    for (;;) {
        rv = pc_pull(pc, params, NULL);
        if (rv != HC_ERR_NOTFOUND)
            return rv;
        if (now_s() > deadline)
            return hc_err_set(HC_ERR_TIMEOUT, "the chief (worker:0) did not "
                              "create the variables within %d ms: is it "
                              "running?", retry_ms);
        if (!said++)
            hc_info("waiting for the chief to create the variables");
        nanosleep(&(struct timespec){ 0, 100 * 1000000L }, NULL);
    }
}

int wk_train(const struct wk_train_conf *c)
{
    const struct hc_model *m = c->model;
    const int chief = c->worker == 0;
    const int epochs = c->epochs > 0 ? c->epochs : m->epochs;
    const int B = c->batch_size > 0 ? c->batch_size : m->batch_size;
    const int do_eval = c->eval >= 0 ? c->eval : chief;
    struct wk_dataset train = { 0 }, test = { 0 };
    struct wk_shard shard = { 0 };
    struct wk_backend *be = NULL;
    struct wk_net *net = NULL;
    struct pc_client *pc = NULL;
    float *params = NULL, *grads = NULL, *x = NULL;
    int32_t *y = NULL;
    size_t in_size;
    long steps = 0;
    int rv, epoch, joined = 0;

    rv = wk_data_load_dir(c->data_dir, "train", &train);
    if (rv == HC_OK && do_eval)
        rv = wk_data_load_dir(c->data_dir, "t10k", &test);
    if (rv == HC_OK && m->loss == HC_LOSS_SPARSE_CCE)
        rv = wk_data_check_classes(&train, m->n_classes);
    if (rv != HC_OK)
        goto out;
    if (train.h * train.w * train.c != (int)(m->input.rank == 3
            ? m->input.dims[0] * m->input.dims[1] * m->input.dims[2]
            : m->input.dims[0])) {
        rv = hc_err_set(HC_ERR_MISMATCH, "%s: images are %dx%dx%d but model "
                        "%s expects input %d values", train.images_path,
                        train.h, train.w, train.c, m->source,
                        m->input.rank == 3 ? m->input.dims[0] * m->input.dims[1] *
                                                 m->input.dims[2]
                                           : m->input.dims[0]);
        goto out;
    }
    rv = wk_shard_init(&shard, train.n, c->cluster->n_worker, c->worker,
                       m->seed);
    if (rv != HC_OK)
        goto out;
    if ((rv = wk_backend_cpu_new(c->n_threads > 0 ? c->n_threads : 1, &be)) ||
        (rv = wk_net_new(m, be, B, &net)))
        goto out;
    in_size = wk_net_input_size(net);
    params = malloc(m->n_params * sizeof *params);
    grads = malloc(m->n_params * sizeof *grads);
    x = malloc((size_t)B * in_size * sizeof *x);
    y = malloc((size_t)B * sizeof *y);
    if (!params || !grads || !x || !y) {
        rv = hc_err_set(HC_ERR_NOMEM, "out of memory for batch %d", B);
        goto out;
    }

    rv = pc_open(&pc, c->cluster, HC_JOB_WORKER, c->worker, &c->client);
    if (rv == HC_OK)
        rv = pc_join(pc, c->devices ? c->devices : "cpu");
    if (rv == HC_OK) {
        joined = 1;
        rv = pc_heartbeat_start(pc, 1000);
    }
    if (rv == HC_OK)
        rv = pc_set_model(pc, m, c->block_elems);
    if (rv != HC_OK)
        goto out;
    if (chief) {
        hc_model_init_params(m, params);
        rv = pc_create(pc, params);
        if (rv == HC_OK)
            hc_info("variables of %s registered on %d shard(s): %zu parameters",
                    m->name, c->cluster->n_ps, m->n_params);
    } else {
        rv = wait_for_variables(pc, params,
                                c->client.retry_ms > 0 ? c->client.retry_ms
                                                       : 60000);
    }
    if (rv != HC_OK)
        goto out;

    hc_info("training %s: %d epoch(s), batch %d, %d of %d samples (shard %d/%d)",
            m->name, epochs, B, shard.n, train.n, c->worker,
            c->cluster->n_worker);
    for (epoch = 0; epoch < epochs; epoch++) {
        int nb = wk_shard_n_batches(&shard, B), b, seen = 0;
        double t0 = now_s(), loss_sum = 0, dt;
        long correct = 0;

        for (b = 0; b < nb; b++) {
            double loss;
            int n, k;

            if (c->stop && *c->stop)
                break;
            if (c->max_steps && steps >= c->max_steps)
                break;
            n = wk_shard_batch(&shard, epoch, b, B, &train, x, y);
            if (n < 0) {
                rv = -n;
                goto out;
            }
            if ((rv = pc_pull(pc, params, NULL)) ||
                (rv = wk_net_step(net, params, x, y, NULL, n, grads, &loss, &k)) ||
                (rv = pc_push(pc, grads, (uint32_t)n)))
                goto out;
            loss_sum += loss * n;
            correct += k;
            seen += n;
            steps++;
        }
        dt = now_s() - t0;
        if (seen == 0)
            break;
        if (do_eval) {
            double vl, va;

            if ((rv = pc_pull(pc, params, NULL)) ||
                (rv = wk_evaluate(net, params, &test, B, x, y, &vl, &va)))
                goto out;
            printf("Epoch %d/%d - %.1fs - loss: %.4f - accuracy: %.4f - "
                   "val_loss: %.4f - val_accuracy: %.4f - %.0f samples/s\n",
                   epoch + 1, epochs, dt, loss_sum / seen,
                   (double)correct / seen, vl, va, seen / dt);
        } else {
            printf("Epoch %d/%d - %.1fs - loss: %.4f - accuracy: %.4f - "
                   "%.0f samples/s\n", epoch + 1, epochs, dt, loss_sum / seen,
                   (double)correct / seen, seen / dt);
        }
        fflush(stdout);
        if ((c->stop && *c->stop) || (c->max_steps && steps >= c->max_steps))
            break;
    }
    if (do_eval && chief && c->cluster->n_worker > 1 && !(c->stop && *c->stop)) {
        /* The others may still be pushing: evaluate the final weights once
         * they are done (bounded: a worker that neither finishes nor dies
         * within ten minutes is not waited for). */
        double t_end = now_s() + 600, vl, va;
        int waited = 0;

        while (!others_done(pc, c->cluster, c->worker) && now_s() < t_end &&
               !(c->stop && *c->stop)) {
            if (!waited++)
                hc_info("waiting for the other workers to finish");
            nanosleep(&(struct timespec){ 0, 200 * 1000000L }, NULL);
        }
        if ((rv = pc_pull(pc, params, NULL)) ||
            (rv = wk_evaluate(net, params, &test, B, x, y, &vl, &va)))
            goto out;
        printf("Final weights (all workers done): val_loss: %.4f - "
               "val_accuracy: %.4f\n", vl, va);
        fflush(stdout);
    }
    rv = HC_OK;
out:
    if (pc && joined) {
        int lrv, keep = rv;
        char msg[1024];

        snprintf(msg, sizeof msg, "%s", hc_err_msg());
        lrv = pc_leave(pc);
        if (keep != HC_OK)
            hc_err_set(keep, "%s", msg);
        else if (lrv != HC_OK)
            rv = lrv;
    }
    pc_close(pc);
    free(params);
    free(grads);
    free(x);
    free(y);
    wk_net_free(net);
    wk_backend_free(be);
    wk_shard_free(&shard);
    wk_data_free(&train);
    wk_data_free(&test);
    return rv;
}
