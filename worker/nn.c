/*
 * nn.c — running a wk_net: the forward, loss and backward passes (see nn.h
 * for the contract, nn_build.c for how the net is built): the passes
 * over the graph's layers in order (backward in reverse, each input's
 * gradient written or added into its node's planned buffer), the loss,
 * the parameters' and activations' crossings between backends. Each layer's own forward and backward are
 * its kind's (nn_KIND.c, struct nn_kind in nn_impl.h). Layers never touch
 * backend memory: all arithmetic is in the backend's ops.
 *
 * With explicit placement each layer runs on its own backend (l->be) with
 * its parameters there; cross() moves an activation, or its gradient,
 * along an edge between two backends.
 */
#include "nn_impl.h"

#include "err.h"

#include <math.h>
#include <string.h>

/* ---- parameters and crossings between backends ---- */

/* The parameter (gradient) vector the layers of device d index with their
 * doff_*: the host vector itself on host memory. */
static const float *dev_params(const struct nn_dev *d, const float *host)
{
    return d->be->host_memory ? host : d->params_d;
}

static float *dev_grads(const struct nn_dev *d, float *host)
{
    return d->be->host_memory ? host : d->grads_d;
}

/* Variable k of layer l, k < 2 + l->n_extra: the kernel, the bias, then
 * the extras; 0 when the layer has no such variable. */
struct layer_var {
    size_t off, doff, n;
    struct hc_regularizer reg;
};

static int layer_var(const struct nn_layer *l, int k, struct layer_var *v)
{
    if (k == 0)
        *v = (struct layer_var){l->off_w, l->doff_w, l->n_w, l->reg_w};
    else if (k == 1)
        *v = (struct layer_var){l->off_b, l->doff_b, l->n_b, l->reg_b};
    else
        *v = (struct layer_var){l->off_x[k - 2], l->doff_x[k - 2],
                                l->size_x[k - 2], l->reg_x[k - 2]};
    return v->n != 0;
}

#define LAYER_VARS(l) (2 + (l)->n_extra)

/* Host parameters → every non-host device: the slices its layers own, or
 * the whole vector when it holds them all. */
static int upload_params(struct wk_net *net, const float *params)
{
    int k, i, rv;

    for (k = 0; k < net->n_devs; k++) {
        struct nn_dev *d = &net->devs[k];

        if (d->be->host_memory || !d->n_params)
            continue;
        if (d->all_params) {
            if ((rv = wk_be_upload(d->be, d->params_d, params,
                                   net->n_params * sizeof *params)))
                return rv;
            continue;
        }
        for (i = 0; i < net->n_layers; i++) {
            const struct nn_layer *l = &net->layers[i];

            if (l->dev != k)
                continue;
            for (int x = 0; x < LAYER_VARS(l); x++) {
                struct layer_var v;

                if (layer_var(l, x, &v) &&
                    (rv = wk_be_upload(d->be, d->params_d + v.doff,
                                       params + v.off, v.n * sizeof *params)))
                    return rv;
            }
        }
    }
    return HC_OK;
}

/* Every non-host device's gradients → the host vector. */
static int download_grads(struct wk_net *net, float *grads)
{
    int k, i, rv;

    for (k = 0; k < net->n_devs; k++) {
        struct nn_dev *d = &net->devs[k];

        if (d->be->host_memory || !d->n_params)
            continue;
        if (d->all_params) {
            if ((rv = wk_be_download(d->be, grads, d->grads_d,
                                     net->n_params * sizeof *grads)))
                return rv;
            continue;
        }
        for (i = 0; i < net->n_layers; i++) {
            const struct nn_layer *l = &net->layers[i];

            if (l->dev != k)
                continue;
            for (int x = 0; x < LAYER_VARS(l); x++) {
                struct layer_var v;

                if (layer_var(l, x, &v) &&
                    (rv = wk_be_download(d->be, grads + v.off,
                                         d->grads_d + v.doff,
                                         v.n * sizeof *grads)))
                    return rv;
            }
        }
    }
    return HC_OK;
}

/* Copy n floats from src on backend `from` to dst on backend `to`, two
 * different backends not both host memory (those hand pointers over and
 * never come here): one upload or download when one side is host memory,
 * else download into the host staging buffer and upload from it. */
static int cross(struct wk_net *net, struct wk_backend *from,
                 struct wk_backend *to, float *dst, const float *src,
                 size_t n)
{
    int rv;

    if (from->host_memory)
        return wk_be_upload(to, dst, src, n * sizeof *src);
    if (to->host_memory)
        return wk_be_download(from, dst, src, n * sizeof *src);
    if ((rv = wk_be_download(from, net->stage_h, src, n * sizeof *src)))
        return rv;
    return wk_be_upload(to, dst, net->stage_h, n * sizeof *src);
}

static int check_all(struct wk_net *net)
{
    int k, rv;

    for (k = 0; k < net->n_devs; k++)
        if ((rv = wk_be_check(net->devs[k].be)))
            return rv;
    return HC_OK;
}

/* ---- forward ---- */

static void layer_forward(struct wk_net *net, int i, const float *params,
                          int B, int training)
{
    struct nn_layer *l = &net->layers[i];

    l->x = l->xs[0];
    l->y = l->out;
    l->seed = 0;
    if (l->kind->forward_n)
        l->kind->forward_n(l, l->xs, B);
    else if (l->kind->forward)
        l->kind->forward(net, l, l->x, params, B, training);
    else
        l->y = l->x;
}

/* l1·Σ|w| + l2·Σw² of n values at w, in double. */
static double reg_penalty(const struct hc_regularizer *r, const float *w,
                          size_t n)
{
    double a = 0, q = 0;
    size_t i;

    if (!r->l1 && !r->l2)
        return 0;
    for (i = 0; i < n; i++) {
        a += fabs((double)w[i]);
        q += (double)w[i] * w[i];
    }
    return r->l1 * a + r->l2 * q;
}

/* The regularizers' penalty at the host parameters (Keras adds it to the
 * batch's mean loss). */
static double penalty(const struct wk_net *net, const float *params)
{
    double p = 0;
    int i;

    for (i = 0; i < net->n_layers; i++) {
        const struct nn_layer *l = &net->layers[i];

        for (int x = 0; x < LAYER_VARS(l); x++) {
            struct layer_var v;

            if (layer_var(l, x, &v))
                p += reg_penalty(&v.reg, params + v.off, v.n);
        }
    }
    return p;
}

/* x (B, in_size), each sample's inputs one after another, regrouped
 * into net->x_split input by input: input q (B, its size) at
 * B·in_off[q], as the layers reading it take it. */
static const float *split_inputs(struct wk_net *net, const float *x, int B)
{
    for (int q = 0; q < net->n_inputs; q++) {
        size_t off = net->in_off[q];
        size_t n = (q + 1 < net->n_inputs ? net->in_off[q + 1]
                                          : net->in_size) - off;
        float *dst = net->x_split + (size_t)B * off;

        for (int b = 0; b < B; b++)
            memcpy(dst + (size_t)b * n, x + (size_t)b * net->in_size + off,
                   n * sizeof *x);
    }
    return net->x_split;
}

int wk_net_forward(struct wk_net *net, const float *params, const float *x,
                   int B, int training)
{
    int i, k, rv;

    net->stage = 0;
    if (!params || !x)
        return hc_err_set(HC_ERR_INVAL, "wk_net_forward: params or x is NULL");
    if (B < 1 || B > net->max_batch)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_net_forward: batch of %d samples; this net "
                          "takes 1 to %d", B, net->max_batch);
    for (i = 0; i < net->n_layers; i++)
        if ((net->layers[i].kind->flags & NN_TABLE) &&
            net->layers[i].rows_B != B)
            return hc_err_set(HC_ERR_INVAL, "wk_net_forward: %s has no rows "
                              "set for a batch of %d (wk_net_set_rows)",
                              net->layers[i].name, B);
    if ((rv = upload_params(net, params)))
        return rv;
    if (net->n_inputs > 1)
        x = split_inputs(net, x, B);
    if (!net->in_be->host_memory) {
        if ((rv = wk_be_upload(net->in_be, net->x_d, x,
                               (size_t)B * net->in_size * sizeof *x)))
            return rv;
        x = net->x_d;
    }
    if (training)
        net->counter++;
    for (i = 0; i < net->n_layers; i++) {
        struct nn_layer *l = &net->layers[i];
        struct nn_dev *d = &net->devs[l->dev];

        for (k = 0; k < l->n_in; k++) {
            int j = l->src[k];
            const float *in = j < 0 ? x + (size_t)B * net->in_off[-1 - j]
                                    : net->layers[j].y;

            if (l->cross[k]) {
                if ((rv = cross(net, nn_node_be(net, j), l->be, l->xin[k],
                                in, (size_t)B * l->src_size[k])))
                    return rv;
                in = l->xin[k];
            }
            l->xs[k] = in;
        }
        layer_forward(net, i, dev_params(d, params), B, training);
    }
    net->output = net->layers[net->n_layers - 1].y;
    if (net->fused) {
        /* Logits: the last layer's output, its softmax being the loss's
         * (act_in_loss). */
        net->logits = net->output;
        wk_be_xent_forward(net->out_be, net->logits, NULL, B,
                           (int)net->out_size, net->probs, NULL, NULL);
        if (!net->loss_par.from_logits)     /* else the output is logits */
            net->output = net->probs;
        net->probs_cur = net->probs;
    }
    if ((rv = check_all(net)))
        return rv;
    net->penalty = penalty(net, params);
    net->B = B;
    net->stage = 1;
    return HC_OK;
}

int wk_net_output(struct wk_net *net, float *out)
{
    if (net->stage < 1)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_net_output: no forward pass has run");
    return wk_be_download(net->out_be, out, net->output,
                          (size_t)net->B * net->out_size * sizeof *out);
}

/* ---- loss ---- */

/* The targets of a loss other than sparse CCE into net->targets_h (B, N):
 * targets when given, else made from the integer labels — one-hot over
 * the N outputs, or with one output the label itself (0 or 1 for
 * binary cross-entropy) — then Keras's label smoothing. */
static int make_targets(struct wk_net *net, const int *labels,
                        const float *targets)
{
    const int B = net->B, N = (int)net->out_size;
    const float s = net->loss_par.label_smoothing;
    float *t = net->targets_h;
    int i, j;

    if (targets) {
        memcpy(t, targets, (size_t)B * N * sizeof *t);
    } else if (!labels) {
        return hc_err_set(HC_ERR_INVAL, "wk_net_loss: %s needs labels or "
                          "targets", hc_loss_name(net->loss));
    } else if (N == 1 && !hc_loss_takes_classes(net->loss)) {
        for (i = 0; i < B; i++) {
            if (net->loss == HC_LOSS_BCE && labels[i] != 0 && labels[i] != 1)
                return hc_err_set(HC_ERR_DATA, "label of sample %d is %d; "
                                  "binary_crossentropy with one output "
                                  "takes labels 0 and 1", i, labels[i]);
            t[i] = (float)labels[i];
        }
    } else {
        for (i = 0; i < B; i++) {
            if (labels[i] < 0 || labels[i] >= N)
                return hc_err_set(HC_ERR_DATA, "label of sample %d is %d; "
                                  "the model has %d outputs, one per class "
                                  "(0 to %d), for %s's one-hot targets", i,
                                  labels[i], N, N - 1,
                                  hc_loss_name(net->loss));
            for (j = 0; j < N; j++)
                t[(size_t)i * N + j] = j == labels[i];
        }
    }
    if (s == 0.0f)
        return HC_OK;
    for (i = 0; i < B * N; i++)     /* binary: towards 1/2; else 1/N */
        t[i] = t[i] * (1.0f - s) +
               s / (net->loss == HC_LOSS_BCE ? 2.0f : (float)N);
    return HC_OK;
}

int wk_net_loss(struct wk_net *net, const int *labels, const float *targets,
                double *loss_sum, int *correct)
{
    struct wk_backend *be = net->out_be;
    const int B = net->B, N = (int)net->out_size;
    double sum = 0.0;
    int i, hits = 0, rv;

    if (net->stage < 1)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_net_loss: call wk_net_forward first");
    if (net->loss == HC_LOSS_SPARSE_CCE) {
        if (!labels)
            return hc_err_set(HC_ERR_INVAL,
                              "wk_net_loss: sparse_categorical_crossentropy "
                              "needs labels");
        for (i = 0; i < B; i++)
            if (labels[i] < 0 || labels[i] >= N)
                return hc_err_set(HC_ERR_DATA,
                                  "label of sample %d is %d; the model has "
                                  "%d classes (0 to %d)", i, labels[i], N,
                                  N - 1);
        if (!be->host_memory) {
            if ((rv = wk_be_upload(be, net->labels_d, labels,
                                   (size_t)B * sizeof *labels)))
                return rv;
            labels = net->labels_d;
        }
        wk_be_xent_forward(be, net->logits, labels, B, N,
                           net->probs_cur, net->loss_d, net->hit_d);
        net->labels_cur = labels;
    } else {
        if ((rv = make_targets(net, labels, targets)))
            return rv;
        targets = net->targets_h;
        if (!be->host_memory) {
            if ((rv = wk_be_upload(be, net->targets_d, targets,
                                   (size_t)B * N * sizeof *targets)))
                return rv;
            targets = net->targets_d;
        }
        if (net->loss == HC_LOSS_MSE)
            wk_be_mse_forward(be, net->output, targets, B, N, net->loss_d,
                              net->hit_d);
        else
            wk_be_tloss_forward(be, net->loss, net->loss_par.from_logits,
                                net->loss_par.delta,
                                net->fused ? net->logits : net->output,
                                targets, B, N, net->loss_d, net->hit_d);
        net->targets_cur = targets;
    }
    if ((rv = wk_be_check(be)))
        return rv;
    if (!be->host_memory &&
        ((rv = wk_be_download(be, net->loss_h, net->loss_d,
                              (size_t)B * sizeof *net->loss_h)) ||
         (rv = wk_be_download(be, net->hit_h, net->hit_d,
                              (size_t)B * sizeof *net->hit_h))))
        return rv;
    for (i = 0; i < B; i++) {
        sum += net->loss_h[i];
        hits += net->hit_h[i] != 0.0f;
    }
    sum += B * net->penalty;
    if (loss_sum)
        *loss_sum = sum;
    if (correct)
        *correct = hits;
    net->stage = 2;
    return HC_OK;
}

/* ---- backward ---- */

/* Layer l's parameter gradients are final (its input gradient may still
 * be computed, reading its parameters): wk_net_on_grads's report. */
static void grads_final(const struct wk_net *net, const struct nn_layer *l)
{
    size_t from = NO_VAR;

    for (int k = 0; k < LAYER_VARS(l); k++) {
        struct layer_var v;

        if (layer_var(l, k, &v) && (from == NO_VAR || v.off < from))
            from = v.off;
    }
    if (net->on_grads && from != NO_VAR)
        net->on_grads(net->on_grads_arg, from);
}

/* The output gradient of node j (its device's planned buffer). */
static float *grad_of(struct wk_net *net, int j)
{
    struct nn_layer *p = &net->layers[j];

    return net->devs[p->dev].gbuf[p->gbuf];
}

/* Layer l's gradient g (B, src_size[k]) of input k, on l's backend, into
 * the planned buffer of the node it reads: written or added (gacc), and
 * across backends (cross) through the node's device's scratch when
 * added. */
static int give_grad(struct wk_net *net, struct nn_layer *l, int k,
                     const float *g)
{
    struct nn_layer *p = &net->layers[l->src[k]];
    struct nn_dev *pd = &net->devs[p->dev];
    float *dst = pd->gbuf[p->gbuf];
    int n = l->src_size[k], rv;

    if (!l->cross[k]) {
        if (g != dst)
            wk_be_copy2d(l->be, net->B, n, 1.0f, g, n, dst, n, l->gacc[k]);
        return HC_OK;
    }
    if ((rv = cross(net, l->be, p->be, l->gacc[k] ? pd->scratch : dst, g,
                    (size_t)net->B * n)))
        return rv;
    if (l->gacc[k])
        wk_be_copy2d(p->be, net->B, n, 1.0f, pd->scratch, n, dst, n, 1);
    return HC_OK;
}

/* Where a backward_input of layer l writes input k's gradient: added in
 * place where the kind can (NN_ADDS; sets l->dx_add), else written to the
 * scratch and added by give_grad. */
static float *dx_of(struct wk_net *net, struct nn_layer *l, int k)
{
    int add = l->gacc[k] && !l->cross[k] && (l->kind->flags & NN_ADDS);

    l->dx_add = add;
    return (l->gacc[k] && !add) || l->cross[k] ? net->devs[l->dev].scratch
                                               : grad_of(net, l->src[k]);
}

/* Input k of layer l wants a gradient from it. */
static int wants_grad(const struct wk_net *net, const struct nn_layer *l,
                      int k)
{
    return l->src[k] >= 0 && net->layers[l->src[k]].need_grad &&
           !l->galias[k];
}

/* Backward of layer i, whose output gradient is complete in its buffer
 * (and may be overwritten): its parameter gradients into grads, and the
 * gradient of each input whose node needs one to that node's buffer. */
static int layer_backward(struct wk_net *net, int i, const float *params,
                          float *grads)
{
    struct nn_layer *l = &net->layers[i];
    struct nn_dev *d = &net->devs[l->dev];
    float *dy = grad_of(net, i), *dx0 = NULL;
    int k, rv, both = 0;

    if (l->kind->backward_both && l->n_in == 1 && !l->alias) {
        dx0 = wants_grad(net, l, 0) ? dx_of(net, l, 0) : NULL;
        both = l->kind->backward_both(l, params, grads, dy, dx0, net->B);
    }
    if (!both && l->kind->backward_params)
        l->kind->backward_params(l, grads, dy, net->B);
    for (k = 0; k < LAYER_VARS(l); k++) {
        struct layer_var v;

        if (layer_var(l, k, &v) && (v.reg.l1 || v.reg.l2))
            wk_be_reg_grad(l->be, params + v.doff, grads + v.doff, v.n,
                           v.reg.l1, v.reg.l2);
    }
    grads_final(net, l);
    for (k = 0; k < l->n_in; k++) {
        const float *g = dy;

        if (!wants_grad(net, l, k))
            continue;
        if (both) {
            if (l->dx_add)
                continue;
            g = dx0;
        } else if (l->kind->backward_in) {
            /* A merge writes or adds its input's gradient itself. */
            if (!l->cross[k]) {
                l->kind->backward_in(l, k, dy, grad_of(net, l->src[k]),
                                     l->gacc[k], net->B);
                continue;
            }
            l->kind->backward_in(l, k, dy, d->scratch, 0, net->B);
            g = d->scratch;
        } else if (l->alias) {
            /* In place, into the buffer its one input's node now owns. */
            if (l->kind->backward_input)
                l->kind->backward_input(l, params, dy, dy, net->B);
            continue;
        } else if (l->kind->backward_input) {
            float *dx = dx_of(net, l, k);

            if (l->kind->backward_input(l, params, dy, dx, net->B)) {
                if (l->dx_add)
                    continue;
                g = dx;
            }
        }
        if ((rv = give_grad(net, l, k, g)))
            return rv;
    }
    return HC_OK;
}

int wk_net_backward(struct wk_net *net, const float *params, float *grads)
{
    const int B = net->B, N = (int)net->out_size;
    struct wk_backend *be = net->out_be;
    int i, rv;
    float *dy;

    if (net->stage != 2)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_net_backward: call wk_net_forward and then "
                          "wk_net_loss first");
    if (!params || !grads)
        return hc_err_set(HC_ERR_INVAL,
                          "wk_net_backward: params or grads is NULL");
    /* Gradient of the mean loss with respect to the output (or, fused,
     * the logits). */
    dy = grad_of(net, net->n_layers - 1);
    if (net->loss == HC_LOSS_SPARSE_CCE)
        wk_be_xent_backward(be, net->probs_cur, net->labels_cur, B, N,
                            1.0f / (float)B, dy);
    else if (net->loss == HC_LOSS_MSE)
        wk_be_mse_backward(be, net->output, net->targets_cur, (size_t)B * N,
                           2.0f / ((float)N * (float)B), dy);
    else
        wk_be_tloss_backward(be, net->loss, net->loss_par.from_logits,
                             net->loss_par.delta,
                             net->fused ? net->probs_cur : net->output,
                             net->targets_cur, B, N, 1.0f / (float)B, dy);
    for (i = net->n_layers - 1; i >= 0; i--) {
        struct nn_dev *d = &net->devs[net->layers[i].dev];

        if (net->layers[i].need_grad &&
            (rv = layer_backward(net, i, dev_params(d, params),
                                 dev_grads(d, grads))))
            return rv;
    }
    if ((rv = check_all(net)) || (rv = download_grads(net, grads)))
        return rv;
    return HC_OK;
}

/* Whether each layer's parameters lie after the previous layer's (kernel,
 * then bias): then once layer i's gradient is in, so is everything from
 * its first element on. */
static int params_in_layer_order(const struct wk_net *net)
{
    size_t end = 0;
    int i;

    for (i = 0; i < net->n_layers; i++) {
        const struct nn_layer *l = &net->layers[i];

        for (int k = 0; k < LAYER_VARS(l); k++) {
            struct layer_var v;

            if (!layer_var(l, k, &v))
                continue;
            if (v.off < end)
                return 0;
            end = v.off + v.n;
        }
    }
    return end == net->n_params;
}

int wk_net_on_grads(struct wk_net *net, void (*fn)(void *arg, size_t from),
                    void *arg)
{
    int k;

    net->on_grads = NULL;
    net->on_grads_arg = NULL;
    if (!fn || !params_in_layer_order(net))
        return 0;
    for (k = 0; k < net->n_devs; k++)
        if (!net->devs[k].be->host_memory)
            return 0;
    net->on_grads = fn;
    net->on_grads_arg = arg;
    return 1;
}

/* ---- convenience ---- */

int wk_net_step(struct wk_net *net, const float *params, const float *x,
                const int *labels, const float *targets, int B, float *grads,
                double *loss_mean, int *correct)
{
    double sum;
    int rv;

    if ((rv = wk_net_forward(net, params, x, B, 1)) ||
        (rv = wk_net_loss(net, labels, targets, &sum, correct)) ||
        (rv = wk_net_backward(net, params, grads)))
        return rv;
    if (loss_mean)
        *loss_mean = sum / B;
    return HC_OK;
}

int wk_net_predict(struct wk_net *net, const float *params, const float *x,
                   const int *labels, const float *targets, int B,
                   double *loss_sum, int *correct)
{
    int rv;

    if ((rv = wk_net_forward(net, params, x, B, 0)))
        return rv;
    return wk_net_loss(net, labels, targets, loss_sum, correct);
}
