/*
 * nn_batchnorm.c — the worker's half of batchnorm (the row in
 * common/layer_batchnorm.c): each channel of the last axis normalised
 * over the batch's rows (B, or B·H·W for an image). A training forward
 * uses the batch's own mean and biased variance (bn_stats, kept in the
 * workspace for backward); any other forward (eval, predict) the moving
 * statistics the shards hold. Backward writes gamma's and beta's
 * gradients (Σ dy·x̂, Σ dy: the loss is the batch's mean, so these are the
 * mean's gradients, as every layer's) and, in the slots of moving_mean
 * and moving_variance, the batch's moments the push carries: its mean and
 * its mean of squares (variance + mean²). Pooled with weights the
 * samples, as replicas and shards pool every gradient, those give the
 * union's mean and — less its mean² — its biased variance (the
 * parallel-axis rule); the shard moves the statistics by them
 * (ps/README.md). The input's gradient goes through the batch's moments.
 *
 * Workspace (cols): st (3, C) the last training forward's mean, variance
 * and mean of squares, then sums (2, C) of backward.
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    size_t C = (size_t)in->dims[in->rank - 1];
    int mm = s->var_first + s->n_var - 2, rv;

    (void)out;
    if (s->n_var < 2 || !s->epsilon)
        return hc_err_set(HC_ERR_MISMATCH, "%s: a batchnorm needs its "
                          "moving_mean and moving_variance and an epsilon",
                          c->where);
    l->eps = s->epsilon;
    if ((s->scale && (rv = nn_check_var(c, s->var_kernel, "gamma", C,
                                        &l->off_w, &l->n_w))) ||
        (s->center && (rv = nn_check_var(c, s->var_bias, "beta", C,
                                         &l->off_b, &l->n_b))) ||
        (rv = nn_check_extra(c, l, mm, "moving_mean", C)) ||
        (rv = nn_check_extra(c, l, mm + 1, "moving_variance", C)))
        return rv;
    return HC_OK;
}

static int alloc(struct nn_layer *l, size_t B)
{
    int rv;

    if ((rv = nn_alloc_f(l->be, &l->out, B * l->out_size)))
        return rv;
    return nn_alloc_f(l->be, &l->cols, 5 * (size_t)l->out_c);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    int C = l->out_c, rows = B * (l->out_size / C);
    const float *gamma = l->n_w ? params + l->doff_w : NULL;
    const float *beta = l->n_b ? params + l->doff_b : NULL;

    (void)net;
    if (training) {
        wk_be_bn_stats(l->be, x, rows, C, l->cols);
        wk_be_bn_forward(l->be, x, rows, C, l->cols, l->cols + C, l->eps,
                         gamma, beta, l->out);
    } else {
        wk_be_bn_forward(l->be, x, rows, C, params + l->doff_x[0],
                         params + l->doff_x[1], l->eps, gamma, beta, l->out);
    }
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    int C = l->out_c, rows = B * (l->out_size / C);
    float *sums = l->cols + 3 * (size_t)C;
    size_t bytes = (size_t)C * sizeof(float);

    wk_be_bn_backward_params(l->be, l->x, dy, rows, C, l->cols, l->eps, sums);
    if (l->n_w)
        wk_be_copy(l->be, grads + l->doff_w, sums, bytes);
    if (l->n_b)
        wk_be_copy(l->be, grads + l->doff_b, sums + C, bytes);
    /* The push's moments: the batch's mean and mean of squares. */
    wk_be_copy(l->be, grads + l->doff_x[0], l->cols, bytes);
    wk_be_copy(l->be, grads + l->doff_x[1], l->cols + 2 * (size_t)C, bytes);
}

/* In place: the input's gradient replaces dy (elementwise, once
 * backward_params has taken its sums), so a batch norm read by one layer
 * hands its gradient buffer on to the node it reads. */
static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    int C = l->out_c, rows = B * (l->out_size / C);

    (void)dx;
    wk_be_bn_backward_input(l->be, l->x, dy, rows, C, l->cols, l->eps,
                            l->n_w ? params + l->doff_w : NULL,
                            l->cols + 3 * (size_t)C, dy);
    return 0;
}

const struct nn_kind nn_batchnorm = {
    .flags = NN_IN_PLACE,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
};
