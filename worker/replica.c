/*
 * replica.c — a worker's devices computing one gradient together: mirrored
 * replicas (one net per device, the batch split by measured speed, the
 * gradients reduced weighted by samples) or one placed net (layers on the
 * devices the model names). See replica.h for the contract.
 *
 * Threads: device 0 runs on the caller's thread; devices 1 … n − 1 each
 * have a thread for the life of the set, waiting on `go` for a new
 * generation number, running their slice, and counting `pending` down
 * under the mutex. The job's inputs are written before the generation is
 * bumped and the results read after pending reaches 0, both under the
 * mutex, so no other synchronisation is needed.
 */
#include "replica.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "nn.h"
#include "share.h"

#define SPEED_EMA 0.3           /* weight of the newest measurement */

enum job { JOB_STEP, JOB_PREDICT, JOB_OUTPUTS };

/* One device's replica and its part of the current job. */
struct rep_dev {
    struct wk_replicas *r;
    struct wk_net *net;
    pthread_t thread;
    int started;                /* thread running */
    float *grads;               /* (n_params) host, devices 1 … n − 1 */
    double slowdown;            /* ≥ 1 */
    double speed;               /* samples/s EMA, 0 = not measured */
    /* the current job */
    int start, count;           /* its slice of the batch */
    float *gout;                /* where its gradient goes */
    /* results */
    int rv;
    char msg[512];
    double loss_sum;
    int correct;
    double seconds;
};

struct wk_replicas {
    const struct wk_devices *devs;
    int n;
    int placed;
    int max_batch;
    size_t in_size, out_size, n_params;
    int sparse;                 /* a loss over classes: labels are checked
                                 * up front */
    struct rep_dev dev[WK_MAX_DEVICES];
    /* the current job, read by the threads */
    enum job job;
    const float *params, *x, *targets;
    const int *labels;
    float *out;                 /* JOB_OUTPUTS: (B, out_size) */
    uint64_t seed, steps;
    /* split */
    int fixed;                  /* set_split weights in force */
    struct wk_share share;      /* together, or the fastest alone */
    int no_share;               /* wk_replicas_set_share(r, 0) */
    int solo;                   /* the next job's: WK_SHARE_ALL or a device */
    double weight[WK_MAX_DEVICES];
    int split[WK_MAX_DEVICES];  /* of the last job */
    int (*before)(void *arg, struct wk_net *net, const float *x, int B);
    void *before_arg;           /* wk_replicas_before_forward */
    /* hand-off */
    int sync_init;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t gen;
    int pending, quit;
};

/* ---- the split ---- */

/* Largest-remainder rounding of B · w_i / Σ w (see replica.h). */
static void split_batch(const double *w, int n, int B, int *c)
{
    double q[WK_MAX_DEVICES], W = 0.0;
    int i, sum = 0, n_pos = 0, min1;

    for (i = 0; i < n; i++) {
        W += w[i];
        n_pos += w[i] > 0.0;
    }
    min1 = B >= n_pos;
    for (i = 0; i < n; i++) {
        q[i] = w[i] > 0.0 ? (double)B * w[i] / W : 0.0;
        c[i] = (int)floor(q[i]);
        if (min1 && w[i] > 0.0 && c[i] < 1)
            c[i] = 1;
        sum += c[i];
    }
    /* Short: one more to the largest remainders (at most n rounds). */
    while (sum < B) {
        int best = -1;

        for (i = 0; i < n; i++)
            if (w[i] > 0.0 && (best < 0 || q[i] - c[i] > q[best] - c[best]))
                best = i;
        c[best]++;
        sum++;
    }
    /* Over (the minimum of one pushed it): one less from the largest
     * surplus that keeps its minimum; ties to the higher index. */
    while (sum > B) {
        int best = -1;

        for (i = 0; i < n; i++)
            if (c[i] > (min1 && w[i] > 0.0 ? 1 : 0) &&
                (best < 0 || c[i] - q[i] >= c[best] - q[best]))
                best = i;
        c[best]--;
        sum--;
    }
}

/* The weights of the next split: fixed, the one device that runs alone,
 * measured speeds, or equal. */
static void split_weights(const struct wk_replicas *r, double *w)
{
    int i, measured = 1;

    for (i = 0; i < r->n; i++)
        measured &= r->dev[i].speed > 0.0;
    for (i = 0; i < r->n; i++)
        w[i] = r->fixed ? r->weight[i]
             : r->solo != WK_SHARE_ALL ? (i == r->solo)
             : measured ? r->dev[i].speed : 1.0;
}

int wk_replicas_split(const struct wk_replicas *r, int B, int *counts)
{
    double w[WK_MAX_DEVICES];
    int i;

    if (B < 1)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_replicas_split: batch of %d samples", B);
    if (r->placed) {
        for (i = 0; i < r->n; i++)
            counts[i] = B;
        return HC_OK;
    }
    split_weights(r, w);
    split_batch(w, r->n, B, counts);
    return HC_OK;
}

/* ---- one device's slice ---- */

static void run_job(struct wk_replicas *r, struct rep_dev *d)
{
    const size_t s = (size_t)d->start;
    const float *x = r->x + s * r->in_size;
    const int *labels = r->labels ? r->labels + s : NULL;
    const float *targets = r->targets ? r->targets + s * r->out_size : NULL;
    double t0, t1;
    int rv;

    d->loss_sum = 0.0;
    d->correct = 0;
    d->seconds = 0.0;
    d->rv = HC_OK;
    if (!d->count)
        return;
    t0 = hc_now_s();
    if (r->before && (rv = r->before(r->before_arg, d->net, x, d->count))) {
        /* the forward does not run */
    } else if (r->job == JOB_STEP) {
        wk_net_set_dropout_pos(d->net, r->seed, r->steps, s);
        if (!(rv = wk_net_forward(d->net, r->params, x, d->count, 1)) &&
            !(rv = wk_net_loss(d->net, labels, targets, &d->loss_sum,
                               &d->correct)))
            rv = wk_net_backward(d->net, r->params, d->gout);
    } else if (r->job == JOB_OUTPUTS) {
        if (!(rv = wk_net_forward(d->net, r->params, x, d->count, 0)))
            rv = wk_net_output(d->net, r->out + s * r->out_size);
    } else {
        rv = wk_net_predict(d->net, r->params, x, labels, targets, d->count,
                            &d->loss_sum, &d->correct);
    }
    t1 = hc_now_s();
    if (d->slowdown > 1.0)
        hc_sleep_s((d->slowdown - 1.0) * (t1 - t0));
    d->seconds = hc_now_s() - t0;
    if (rv) {
        d->rv = rv;
        snprintf(d->msg, sizeof d->msg, "%s", hc_err_msg());
    }
}

static void *rep_thread(void *arg)
{
    struct rep_dev *d = arg;
    struct wk_replicas *r = d->r;
    uint64_t seen = 0;

    pthread_mutex_lock(&r->mu);
    for (;;) {
        while (!r->quit && r->gen == seen)
            pthread_cond_wait(&r->go, &r->mu);
        if (r->quit)
            break;
        seen = r->gen;
        pthread_mutex_unlock(&r->mu);
        run_job(r, d);
        pthread_mutex_lock(&r->mu);
        if (--r->pending == 0)
            pthread_cond_signal(&r->done);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Run the job set up in r on every device; the first failure (device
 * order) is returned with its message. */
static int run_all(struct wk_replicas *r)
{
    int i, n_threads = r->placed ? 0 : r->n - 1, others = 0;

    /* Device 0 alone (the others have no share): no hand-off at all; the
     * others' results are those of an empty slice. */
    for (i = 1; i <= n_threads; i++)
        others += r->dev[i].count > 0;
    if (!others)
        for (i = 1; i <= n_threads; i++)
            run_job(r, &r->dev[i]);
    if (!others)
        n_threads = 0;
    if (n_threads > 0) {
        pthread_mutex_lock(&r->mu);
        r->pending = n_threads;
        r->gen++;
        pthread_cond_broadcast(&r->go);
        pthread_mutex_unlock(&r->mu);
    }
    run_job(r, &r->dev[0]);
    if (n_threads > 0) {
        pthread_mutex_lock(&r->mu);
        while (r->pending > 0)
            pthread_cond_wait(&r->done, &r->mu);
        pthread_mutex_unlock(&r->mu);
    }
    if (r->placed && r->dev[0].rv)
        return hc_err_set(r->dev[0].rv, "%s", r->dev[0].msg);
    for (i = 0; i < (r->placed ? 0 : r->n); i++)
        if (r->dev[i].rv)
            return hc_err_set(r->dev[i].rv, "%s: %s", r->devs->dev[i].name,
                              r->dev[i].msg);
    return HC_OK;
}

/* Set the job's inputs and every device's slice. */
static int set_job(struct wk_replicas *r, enum job job, const float *params,
                   const float *x, const int *labels, const float *targets,
                   int B, const char *fn)
{
    int i, start = 0;

    if (!params || !x)
        return hc_err_set(HC_ERR_INVAL, "%s: params or x is NULL", fn);
    if (B < 1 || B > r->max_batch)
        return hc_err_set(HC_ERR_INVAL,
                          "%s: batch of %d samples; these replicas take 1 to "
                          "%d", fn, B, r->max_batch);
    /* The nets check too, but number samples within their slice. */
    for (i = 0; r->sparse && labels && i < B; i++)
        if (labels[i] < 0 || (size_t)labels[i] >= r->out_size)
            return hc_err_set(HC_ERR_DATA,
                              "label of sample %d is %d; the model has %zu "
                              "classes (0 to %zu)", i, labels[i], r->out_size,
                              r->out_size - 1);
    r->job = job;
    r->params = params;
    r->x = x;
    r->labels = labels;
    r->targets = targets;
    wk_replicas_split(r, B, r->split);
    if (r->placed) {
        r->dev[0].start = 0;
        r->dev[0].count = B;
        return HC_OK;
    }
    for (i = 0; i < r->n; i++) {
        r->dev[i].start = start;
        r->dev[i].count = r->split[i];
        start += r->split[i];
    }
    return HC_OK;
}

/* ---- steps ---- */

static void update_speeds(struct wk_replicas *r)
{
    int i;

    for (i = 0; i < (r->placed ? 1 : r->n); i++) {
        struct rep_dev *d = &r->dev[i];
        double s;

        if (!d->count || !(d->seconds > 0.0))
            continue;
        s = d->count / d->seconds;
        d->speed = d->speed > 0.0 ? SPEED_EMA * s + (1.0 - SPEED_EMA) * d->speed
                                  : s;
    }
}

/* The devices' gradients into grads, weighted by samples; one device's
 * alone is copied (device 0's is there already). */
static void reduce_grads(struct wk_replicas *r, float *grads, int B)
{
    int i, n = 0;
    const float *src[WK_MAX_DEVICES];
    double w[WK_MAX_DEVICES];
    size_t j;

    for (i = 0; i < r->n; i++)
        if (r->dev[i].count) {
            src[n] = i ? r->dev[i].grads : grads;
            w[n++] = r->dev[i].count;
        }
    if (n == 1) {
        if (src[0] != grads)
            memcpy(grads, src[0], r->n_params * sizeof *grads);
        return;
    }
    for (j = 0; j < r->n_params; j++) {
        double acc = 0.0;

        for (i = 0; i < n; i++)
            acc += w[i] * (double)src[i][j];
        grads[j] = (float)(acc / B);
    }
}

/* Mirrored, balanced by measure: choose the next step's arrangement
 * (share.h), and after it say when that changed. */
static void share_begin(struct wk_replicas *r)
{
    double speed[WK_MAX_DEVICES];
    int i;

    if (r->placed || r->fixed || r->no_share || r->n < 2)
        return;
    for (i = 0; i < r->n; i++)
        speed[i] = r->dev[i].speed;
    r->solo = wk_share_next(&r->share, speed, r->n);
}

static void share_end(struct wk_replicas *r, double seconds, int B)
{
    char list[256];

    if (r->placed || r->fixed || r->no_share || r->n < 2 ||
        !wk_share_done(&r->share, seconds, B))
        return;
    wk_devices_str(r->devs, list, sizeof list);
    if (r->share.cur == WK_SHARE_ALL)
        hc_info("devices %s: together again (%.1f us a sample): every one "
                "gets a share", list, r->share.cost * 1e6);
    else
        hc_info("devices %s: %s alone is faster (%.1f us a sample): the "
                "others get no share until it pays again (tried every %ld "
                "steps at most)", list, r->devs->dev[r->share.cur].name,
                r->share.cost * 1e6, r->share.every);
}

/* The last job's loss sum and hits, added up over the devices that ran
 * it. */
static void job_results(const struct wk_replicas *r, double *loss, int *hits)
{
    int i;

    *loss = 0.0;
    *hits = 0;
    for (i = 0; i < (r->placed ? 1 : r->n); i++) {
        *loss += r->dev[i].loss_sum;
        *hits += r->dev[i].correct;
    }
}

int wk_replicas_step(struct wk_replicas *r, const float *params,
                     const float *x, const int *labels, const float *targets,
                     int B, float *grads, double *loss_mean, int *correct)
{
    double loss, t0 = hc_now_s();
    int hits, rv;

    if (!grads)
        return hc_err_set(HC_ERR_INVAL, "wk_replicas_step: grads is NULL");
    share_begin(r);
    if ((rv = set_job(r, JOB_STEP, params, x, labels, targets, B,
                      "wk_replicas_step")))
        return rv;
    /* Device 0 writes straight into grads; the reduction below works in
     * place on it. */
    r->dev[0].gout = grads;
    rv = run_all(r);
    r->steps++;
    if (rv)
        return rv;
    update_speeds(r);
    if (!r->placed && r->n > 1)
        reduce_grads(r, grads, B);
    share_end(r, hc_now_s() - t0, B);
    job_results(r, &loss, &hits);
    if (loss_mean)
        *loss_mean = loss / B;
    if (correct)
        *correct = hits;
    return HC_OK;
}

int wk_replicas_predict(struct wk_replicas *r, const float *params,
                        const float *x, const int *labels,
                        const float *targets, int B, double *loss_sum,
                        int *correct)
{
    double loss;
    int hits, rv;

    r->solo = r->share.cur;     /* the arrangement in force, never a try */
    if ((rv = set_job(r, JOB_PREDICT, params, x, labels, targets, B,
                      "wk_replicas_predict")) ||
        (rv = run_all(r)))
        return rv;
    job_results(r, &loss, &hits);
    if (loss_sum)
        *loss_sum = loss;
    if (correct)
        *correct = hits;
    return HC_OK;
}

int wk_replicas_outputs(struct wk_replicas *r, const float *params,
                        const float *x, int B, float *out)
{
    int rv;

    if (!out)
        return hc_err_set(HC_ERR_INVAL, "wk_replicas_outputs: out is NULL");
    r->solo = r->share.cur;
    if ((rv = set_job(r, JOB_OUTPUTS, params, x, NULL, NULL, B,
                      "wk_replicas_outputs")))
        return rv;
    r->out = out;
    return run_all(r);
}

/* ---- building ---- */

static int check_args(const struct hc_model *m, const struct wk_devices *devs,
                      int max_batch, struct wk_replicas **out, const char *fn)
{
    int i;

    if (!out || !m || !devs)
        return hc_err_set(HC_ERR_INVAL, "%s: NULL argument", fn);
    *out = NULL;
    if (devs->n < 1 || devs->n > WK_MAX_DEVICES)
        return hc_err_set(HC_ERR_INVAL, "%s: %d devices; open 1 to %d with "
                          "wk_devices_open", fn, devs->n, WK_MAX_DEVICES);
    for (i = 0; i < devs->n; i++)
        if (!devs->dev[i].be)
            return hc_err_set(HC_ERR_INVAL, "%s: device %s is not open", fn,
                              devs->dev[i].name);
    if (max_batch < 1)
        return hc_err_set(HC_ERR_INVAL, "%s: max_batch = %d; must be at "
                          "least 1", fn, max_batch);
    return HC_OK;
}

static struct wk_replicas *alloc_replicas(const struct hc_model *m,
                                          const struct wk_devices *devs,
                                          int max_batch)
{
    struct wk_replicas *r = calloc(1, sizeof *r);
    int i;

    if (!r)
        return NULL;
    r->devs = devs;
    r->n = devs->n;
    r->max_batch = max_batch;
    r->seed = m->seed;
    r->n_params = m->n_params;
    r->sparse = hc_loss_takes_classes(m->loss);
    for (i = 0; i < r->n; i++) {
        r->dev[i].r = r;
        r->dev[i].slowdown = 1.0;
    }
    wk_share_init(&r->share);
    r->solo = WK_SHARE_ALL;
    return r;
}

static void set_sizes(struct wk_replicas *r)
{
    r->in_size = wk_net_input_size(r->dev[0].net);
    r->out_size = wk_net_output_size(r->dev[0].net);
}

/* Start the threads of devices 1 … n − 1. */
static int start_threads(struct wk_replicas *r)
{
    int i, e;

    if (pthread_mutex_init(&r->mu, NULL))
        return hc_err_set(HC_ERR_IO, "replicas: cannot create a mutex");
    if (pthread_cond_init(&r->go, NULL)) {
        pthread_mutex_destroy(&r->mu);
        return hc_err_set(HC_ERR_IO, "replicas: cannot create a condition "
                          "variable");
    }
    if (pthread_cond_init(&r->done, NULL)) {
        pthread_cond_destroy(&r->go);
        pthread_mutex_destroy(&r->mu);
        return hc_err_set(HC_ERR_IO, "replicas: cannot create a condition "
                          "variable");
    }
    r->sync_init = 1;
    for (i = 1; i < r->n; i++) {
        if ((e = pthread_create(&r->dev[i].thread, NULL, rep_thread,
                                &r->dev[i])))
            return hc_err_set(HC_ERR_IO, "replicas: cannot start the thread "
                              "of %s: %s", r->devs->dev[i].name, strerror(e));
        r->dev[i].started = 1;
    }
    return HC_OK;
}

int wk_replicas_new(const struct hc_model *m, const struct wk_devices *devs,
                    int max_batch, struct wk_replicas **out)
{
    struct wk_replicas *r = NULL;
    int i, rv;

    if ((rv = check_args(m, devs, max_batch, out, "wk_replicas_new")))
        return rv;
    if (!(r = alloc_replicas(m, devs, max_batch)))
        return hc_err_set(HC_ERR_NOMEM, "wk_replicas_new: out of memory");
    for (i = 0; i < r->n; i++) {
        struct rep_dev *d = &r->dev[i];

        if ((rv = wk_net_new(m, devs->dev[i].be, max_batch, &d->net))) {
            snprintf(d->msg, sizeof d->msg, "%s", hc_err_msg());
            rv = hc_err_set(rv, "%s: %s", devs->dev[i].name, d->msg);
            goto fail;
        }
        d->gout = NULL;
        if (i > 0) {
            if (!(d->grads = wk_devices_host_alloc(devs, r->n_params *
                                                        sizeof *d->grads))) {
                rv = hc_err_set(HC_ERR_NOMEM, "%s: out of memory for "
                                "gradients", devs->dev[i].name);
                goto fail;
            }
            d->gout = d->grads;
        }
    }
    set_sizes(r);
    if (r->n > 1 && (rv = start_threads(r)))
        goto fail;
    *out = r;
    return HC_OK;
fail:
    wk_replicas_free(r);
    return rv;
}

int wk_replicas_new_placed(const struct hc_model *m,
                           const struct wk_devices *devs, int max_batch,
                           struct wk_replicas **out)
{
    struct wk_backend *layer_be[HC_MODEL_MAX_LAYERS];
    struct wk_replicas *r = NULL;
    char list[WK_MAX_DEVICES * 16];
    int i, k, rv;

    if ((rv = check_args(m, devs, max_batch, out, "wk_replicas_new_placed")))
        return rv;
    if (m->n_layers < 1 || m->n_layers > HC_MODEL_MAX_LAYERS)
        return hc_err_set(HC_ERR_CONFIG, "model %s: %d layers; a model has 1 "
                          "to %d", m->name, m->n_layers, HC_MODEL_MAX_LAYERS);
    for (i = 0; i < m->n_layers; i++) {
        const struct hc_layer_spec *s = &m->layers[i];

        k = s->device[0] ? wk_devices_find(devs, s->device) : 0;
        if (k < 0)
            return hc_err_set(HC_ERR_CONFIG,
                              "model %s, layer %d (%s): device \"%s\" is not "
                              "one of this worker's devices (%s); add it to "
                              "the worker's devices or change the layer's "
                              "\"device\"", m->name, i,
                              s->name[0] ? s->name
                                         : hc_layer_type_name(s->type),
                              s->device,
                              wk_devices_str(devs, list, sizeof list));
        layer_be[i] = devs->dev[k].be;
    }
    if (!(r = alloc_replicas(m, devs, max_batch)))
        return hc_err_set(HC_ERR_NOMEM,
                          "wk_replicas_new_placed: out of memory");
    r->placed = 1;
    if ((rv = wk_net_new_placed(m, layer_be, max_batch, &r->dev[0].net)))
        goto fail;
    set_sizes(r);
    *out = r;
    return HC_OK;
fail:
    wk_replicas_free(r);
    return rv;
}

int wk_replicas_open(const struct hc_model *m, const struct wk_devices *devs,
                     int max_batch, struct wk_replicas **out)
{
    int i, rv;

    for (i = 0; m && i < m->n_layers && i < HC_MODEL_MAX_LAYERS; i++)
        if (m->layers[i].device[0])
            return wk_replicas_new_placed(m, devs, max_batch, out);
    if ((rv = wk_replicas_new(m, devs, max_batch, out)) != HC_OK)
        return rv;
    /* Batch norm normalises each replica by its own slice's moments: the
     * slices are equal, as Keras's MirroredStrategy cuts them, never by
     * speed, so what is computed does not depend on timing. */
    for (i = 0; m && i < m->n_vars; i++)
        if (m->vars[i].moving) {
            (*out)->fixed = 1;
            for (int d = 0; d < (*out)->n; d++)
                (*out)->weight[d] = 1;
            break;
        }
    return HC_OK;
}

void wk_replicas_free(struct wk_replicas *r)
{
    int i;

    if (!r)
        return;
    if (r->sync_init) {
        pthread_mutex_lock(&r->mu);
        r->quit = 1;
        pthread_cond_broadcast(&r->go);
        pthread_mutex_unlock(&r->mu);
    }
    for (i = 0; i < r->n; i++)
        if (r->dev[i].started)
            pthread_join(r->dev[i].thread, NULL);
    if (r->sync_init) {
        pthread_cond_destroy(&r->done);
        pthread_cond_destroy(&r->go);
        pthread_mutex_destroy(&r->mu);
    }
    for (i = 0; i < r->n; i++) {
        wk_net_free(r->dev[i].net);
        wk_devices_host_free(r->dev[i].grads);
    }
    free(r);
}

/* ---- settings and readings ---- */

int wk_replicas_n(const struct wk_replicas *r)
{
    return r->n;
}

int wk_replicas_is_placed(const struct wk_replicas *r)
{
    return r->placed;
}

size_t wk_replicas_input_size(const struct wk_replicas *r)
{
    return r->in_size;
}

size_t wk_replicas_output_size(const struct wk_replicas *r)
{
    return r->out_size;
}

void wk_replicas_set_seed(struct wk_replicas *r, uint64_t seed)
{
    r->seed = seed;
    r->steps = 0;
}

void wk_replicas_speeds(const struct wk_replicas *r, double *out)
{
    int i;

    for (i = 0; i < r->n; i++)
        out[i] = r->dev[r->placed ? 0 : i].speed;
}

void wk_replicas_last_split(const struct wk_replicas *r, int *counts)
{
    memcpy(counts, r->split, (size_t)r->n * sizeof *counts);
}

int wk_replicas_set_split(struct wk_replicas *r, const int *counts)
{
    long sum = 0;
    int i;

    if (!counts) {
        r->fixed = 0;
        return HC_OK;
    }
    for (i = 0; i < r->n; i++) {
        if (counts[i] < 0)
            return hc_err_set(HC_ERR_INVAL,
                              "wk_replicas_set_split: %s gets %d samples; "
                              "counts must be 0 or more",
                              r->devs->dev[i].name, counts[i]);
        sum += counts[i];
    }
    if (sum == 0)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_replicas_set_split: every count is 0; give at "
                          "least one device a share");
    for (i = 0; i < r->n; i++)
        r->weight[i] = counts[i];
    r->fixed = 1;
    return HC_OK;
}

int wk_replicas_fixed(const struct wk_replicas *r)
{
    return r->fixed;
}

void wk_replicas_set_share(struct wk_replicas *r, int on)
{
    r->no_share = !on;
    wk_share_init(&r->share);
    r->solo = WK_SHARE_ALL;
}

int wk_replicas_on_grads(struct wk_replicas *r,
                         void (*fn)(void *arg, size_t from), void *arg)
{
    int single = r->n == 1 || r->placed;

    if (!single || r->dev[0].slowdown > 1.0)
        fn = NULL;
    return wk_net_on_grads(r->dev[0].net, fn, arg);
}

int wk_replicas_before_forward(struct wk_replicas *r,
                               int (*fn)(void *arg, struct wk_net *net,
                                         const float *x, int B),
                               void *arg)
{
    if (fn && r->n > 1 && !r->placed)
        return hc_err_set(HC_ERR_CONFIG, "row-sparse tables (embeddings) "
                          "train on one net a worker, but this worker "
                          "mirrors the model on %d devices (%s, …); give it "
                          "one device (--devices)", r->n,
                          r->devs->dev[0].name);
    r->before = fn;
    r->before_arg = arg;
    return HC_OK;
}

int wk_replicas_set_slowdown(struct wk_replicas *r, int dev, double factor)
{
    if (dev < 0 || dev >= r->n)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_replicas_set_slowdown: device %d; there are %d",
                          dev, r->n);
    if (!(factor >= 1.0 && factor <= 1000.0))
        return hc_err_set(HC_ERR_INVAL,
                          "wk_replicas_set_slowdown: factor %g; use 1 to 1000",
                          factor);
    r->dev[dev].slowdown = factor;
    if (factor > 1.0 && dev == 0)       /* its gradient only once slept */
        wk_net_on_grads(r->dev[0].net, NULL, NULL);
    return HC_OK;
}
