/*
 * nn_dense.c — the worker's half of dense (the row in
 * common/layer_dense.c): Y = X·W over the batch in one SGEMM, its bias
 * and activation in one pass; backward fuses the activation derivative
 * with the bias gradient, then dW = Xᵀ·dY and dX = dY·Wᵀ (the columns of
 * dX the layer before reads: nn_impl.h's dx_lo, dx_hi).
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    char b1[48];

    if (in->rank != 1)
        return hc_err_set(HC_ERR_CONFIG, "%s: dense needs a flat input, got "
                          "%s; add a flatten layer before it", c->where,
                          nn_shape_str(in, b1, sizeof b1));
    if (s->units < 1)
        return hc_err_set(HC_ERR_CONFIG, "%s: units = %d; must be at least "
                          "1", c->where, s->units);
    out->rank = 1;
    out->dims[0] = s->units;
    l->units = s->units;
    return nn_check_var(c, s->var_kernel, "kernel",
                        (size_t)in->dims[0] * s->units, &l->off_w, &l->n_w);
}

static int alloc(struct nn_layer *l, size_t B)
{
    int rv;

    if ((rv = nn_alloc_f(l->be, &l->out, B * l->out_size)))
        return rv;
    return nn_alloc_pre(l, B);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    (void)net;
    (void)training;
    wk_be_sgemm(l->be, 0, 0, B, l->units, l->in_size, 1.0f, x, l->in_size,
                params + l->doff_w, l->units, 0.0f, l->out, l->units);
    nn_bias_act(l, l->n_b ? params + l->doff_b : NULL, l->out, B, l->units);
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    nn_bias_act_backward(l, dy, B, l->units,
                         l->n_b ? grads + l->doff_b : NULL);
    /* dW (in, out) = Xᵀ · dY */
    wk_be_sgemm(l->be, 1, 0, l->in_size, l->units, B, 1.0f, l->x,
                l->in_size, dy, l->units, 0.0f, grads + l->doff_w, l->units);
}

/* dX (B, in) = dY · Wᵀ, only its columns [dx_lo, dx_hi) that the layer
 * before reads (the embeddings' beside a concatenated numeric input). */
static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    wk_be_sgemm(l->be, 0, 1, B, l->dx_hi - l->dx_lo, l->units, 1.0f, dy,
                l->units, params + l->doff_w + (size_t)l->dx_lo * l->units,
                l->units, 0.0f, dx + l->dx_lo, l->in_size);
    return 1;
}

const struct nn_kind nn_dense = {
    .flags = NN_BIAS,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
};
