/*
 * nn_merge.c — the worker's half of the merges (the rows in
 * common/layer_merge.c and layer_concatenate.c): layers reading several
 * nodes, with no parameters, each pass a few block copies (the backend's
 * copy2d). Add, Subtract and Average are weighted sums, y = Σ coef_k·x_k
 * (coef 1, (1, −1), 1/n: the backend's reduce, one pass), so the gradient
 * of input k is coef_k·dy.
 * Multiply is the product, so the gradient of input k is dy times the
 * product of the others (through a workspace when there are more than
 * two). Concatenate views each tensor as (B·outer, cols): outer the product of
 * the dimensions before the axis, cols that of the axis and after; input
 * k is the column block at blk_off[k] of the output, and its gradient the
 * same block of dy; backward reads only the blocks of the inputs that
 * need a gradient (grad_cols), so the layer before may write no others.
 */
#include "nn_impl.h"

#include "err.h"

/* Every input has the shape of the first (the reader checked this; a
 * model built in code is checked again). */
static int setup_same(const struct nn_setup *c, const struct hc_shape *in,
                      struct nn_layer *l)
{
    char b1[48], b2[48];

    for (int k = 1; k < c->n_in; k++)
        if (nn_shape_size(c->ins[k]) != nn_shape_size(in) ||
            c->ins[k]->rank != in->rank)
            return hc_err_set(HC_ERR_MISMATCH, "%s: input %d has shape %s; "
                              "input 0 has %s", c->where, k,
                              nn_shape_str(c->ins[k], b1, sizeof b1),
                              nn_shape_str(in, b2, sizeof b2));
    l->act = HC_ACT_LINEAR;
    return HC_OK;
}

static int setup_add(const struct nn_setup *c, const struct hc_layer_spec *s,
                     const struct hc_shape *in, struct nn_layer *l,
                     struct hc_shape *out)
{
    (void)s;
    (void)out;
    for (int k = 0; k < c->n_in; k++)
        l->coef[k] = 1.0f;
    return setup_same(c, in, l);
}

static int setup_subtract(const struct nn_setup *c,
                          const struct hc_layer_spec *s,
                          const struct hc_shape *in, struct nn_layer *l,
                          struct hc_shape *out)
{
    (void)s;
    (void)out;
    if (c->n_in != 2)
        return hc_err_set(HC_ERR_CONFIG, "%s: subtract reads 2 inputs, not "
                          "%d", c->where, c->n_in);
    l->coef[0] = 1.0f;
    l->coef[1] = -1.0f;
    return setup_same(c, in, l);
}

static int setup_average(const struct nn_setup *c,
                         const struct hc_layer_spec *s,
                         const struct hc_shape *in, struct nn_layer *l,
                         struct hc_shape *out)
{
    (void)s;
    (void)out;
    for (int k = 0; k < c->n_in; k++)
        l->coef[k] = 1.0f / (float)c->n_in;
    return setup_same(c, in, l);
}

static void forward_sum(struct nn_layer *l, const float *const *xs, int B)
{
    wk_be_reduce(l->be, l->out, xs, l->coef, l->n_in,
                 (size_t)B * l->out_size);
}

static void backward_sum(struct nn_layer *l, int k, const float *dy,
                         float *dx, int accumulate, int B)
{
    wk_be_copy2d(l->be, B, l->out_size, l->coef[k], dy, l->out_size, dx,
                 l->out_size, accumulate);
}

const struct nn_kind nn_add = {
    .flags = NN_SUM_GRAD,
    .setup = setup_add,
    .alloc = nn_alloc_out,
    .forward_n = forward_sum,
    .backward_in = backward_sum,
};

const struct nn_kind nn_subtract = {
    .flags = NN_SUM_GRAD,
    .setup = setup_subtract,
    .alloc = nn_alloc_out,
    .forward_n = forward_sum,
    .backward_in = backward_sum,
};

const struct nn_kind nn_average = {
    .flags = NN_SUM_GRAD,
    .setup = setup_average,
    .alloc = nn_alloc_out,
    .forward_n = forward_sum,
    .backward_in = backward_sum,
};

/* ---- multiply ---- */

static int setup_multiply(const struct nn_setup *c,
                          const struct hc_layer_spec *s,
                          const struct hc_shape *in, struct nn_layer *l,
                          struct hc_shape *out)
{
    (void)s;
    (void)out;
    l->ws_size = c->n_in > 2 ? nn_shape_size(in) : 0;
    return setup_same(c, in, l);
}

static int alloc_multiply(struct nn_layer *l, size_t B)
{
    int rv = nn_alloc_out(l, B);

    if (rv || !l->ws_size)
        return rv;
    return nn_alloc_f(l->be, &l->cols, B * l->ws_size);
}

static void forward_multiply(struct nn_layer *l, const float *const *xs,
                             int B)
{
    size_t n = (size_t)B * l->out_size;

    wk_be_mul(l->be, n, xs[0], xs[1], l->out, 0);
    for (int k = 2; k < l->n_in; k++)
        wk_be_mul(l->be, n, l->out, xs[k], l->out, 0);
}

/* dx (+)= dy ⊙ Π_{j≠k} x_j, the partial products in the workspace. */
static void backward_multiply(struct nn_layer *l, int k, const float *dy,
                              float *dx, int accumulate, int B)
{
    size_t n = (size_t)B * l->out_size;
    const float *t = dy;
    int j, last = k == l->n_in - 1 ? l->n_in - 2 : l->n_in - 1;

    for (j = 0; j < l->n_in; j++) {
        if (j == k || j == last)
            continue;
        wk_be_mul(l->be, n, t, l->xs[j], l->cols, 0);
        t = l->cols;
    }
    wk_be_mul(l->be, n, t, l->xs[last], dx, accumulate);
}

const struct nn_kind nn_multiply = {
    .setup = setup_multiply,
    .alloc = alloc_multiply,
    .forward_n = forward_multiply,
    .backward_in = backward_multiply,
};

/* ---- concatenate ---- */

static int setup_concat(const struct nn_setup *c,
                        const struct hc_layer_spec *s,
                        const struct hc_shape *in, struct nn_layer *l,
                        struct hc_shape *out)
{
    int ax = s->axis < 0 ? in->rank + s->axis : s->axis - 1, sum = 0;
    char b1[48], b2[48];

    if (ax < 0 || ax >= in->rank)
        return hc_err_set(HC_ERR_CONFIG, "%s: axis %d does not fit the input "
                          "%s", c->where, s->axis,
                          nn_shape_str(in, b1, sizeof b1));
    l->outer = 1;
    for (int d = 0; d < ax; d++)
        l->outer *= in->dims[d];
    for (int k = 0; k < c->n_in; k++) {
        const struct hc_shape *x = c->ins[k];
        int fit = x->rank == in->rank, cols = 1;

        for (int d = 0; fit && d < x->rank; d++) {
            fit = d == ax || x->dims[d] == in->dims[d];
            if (d >= ax)
                cols *= x->dims[d];
        }
        if (!fit)
            return hc_err_set(HC_ERR_MISMATCH, "%s: input %d has shape %s, "
                              "which does not fit input 0's %s on axis %d",
                              c->where, k, nn_shape_str(x, b1, sizeof b1),
                              nn_shape_str(in, b2, sizeof b2), s->axis);
        l->blk_cols[k] = cols;
        l->blk_off[k] = k ? l->blk_off[k - 1] + l->blk_cols[k - 1] : 0;
        sum += x->dims[ax];
    }
    out->dims[ax] = sum;
    l->act = HC_ACT_LINEAR;
    return HC_OK;
}

/* The output's columns per row of the 2-D view. */
static int out_cols(const struct nn_layer *l)
{
    return l->out_size / l->outer;
}

static void forward_concat(struct nn_layer *l, const float *const *xs, int B)
{
    for (int k = 0; k < l->n_in; k++)
        wk_be_copy2d(l->be, B * l->outer, l->blk_cols[k], 1.0f, xs[k], l->blk_cols[k],
                     l->out + l->blk_off[k], out_cols(l), 0);
}

static void backward_concat(struct nn_layer *l, int k, const float *dy,
                            float *dx, int accumulate, int B)
{
    wk_be_copy2d(l->be, B * l->outer, l->blk_cols[k], 1.0f, dy + l->blk_off[k],
                 out_cols(l), dx, l->blk_cols[k], accumulate);
}

/* Backward reads the column blocks of the inputs that need a gradient:
 * their span, in a sample's row when the axis is the last (outer 1). */
static void grad_cols_concat(const struct wk_net *net,
                             const struct nn_layer *l, int *lo, int *hi)
{
    *lo = l->outer == 1 ? l->out_size : 0;
    *hi = l->outer == 1 ? 0 : l->out_size;
    for (int k = 0; l->outer == 1 && k < l->n_in; k++) {
        if (l->src[k] < 0 || !net->layers[l->src[k]].need_grad)
            continue;
        if (l->blk_off[k] < *lo)
            *lo = l->blk_off[k];
        if (l->blk_off[k] + l->blk_cols[k] > *hi)
            *hi = l->blk_off[k] + l->blk_cols[k];
    }
}

const struct nn_kind nn_concatenate = {
    .setup = setup_concat,
    .alloc = nn_alloc_out,
    .forward_n = forward_concat,
    .backward_in = backward_concat,
    .grad_cols = grad_cols_concat,
};
