/*
 * nn_separable_conv2d.c — the worker's half of separable_conv2d (the row
 * in common/layer_separable_conv2d.c): the backend's depthwise
 * convolution (dwconv_forward, as depthwise_conv2d) into the layer's
 * workspace M = (B·OH·OW, C·dm), then the pointwise 1×1 convolution as
 * one GEMM, Y = M · P with P (C·dm, filters), then the bias and
 * activation fused into one pass (nn_bias_act.c). Backward: the
 * activation derivative with the bias gradient, dP = Mᵀ · dY, dM = dY ·
 * Pᵀ (into aux), then the depthwise kernel's gradient
 * (dwconv_backward_filter) and the input's (dwconv_backward_input) from
 * dM. Its variables: the depthwise kernel (off_w), the pointwise kernel
 * (the one extra, off_x[0]) and the bias (off_b).
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    int sh = s->sh ? s->sh : 1, sw = s->sw ? s->sw : 1, rv;
    size_t mid;

    if ((rv = nn_need_image(c, s, in)))
        return rv;
    if (s->depth_multiplier < 1 || s->filters < 1)
        return hc_err_set(HC_ERR_CONFIG, "%s: depth_multiplier = %d, "
                          "filters = %d; each must be at least 1", c->where,
                          s->depth_multiplier, s->filters);
    if ((rv = nn_window(c, s, in, s->kh, s->kw, sh, sw, l, out)))
        return rv;
    l->units = s->depth_multiplier;
    mid = (size_t)l->g.C * s->depth_multiplier;
    out->dims[2] = s->filters;
    l->ws_size = l->aux_size = (size_t)l->g.OH * l->g.OW * mid;
    if ((rv = nn_check_var(c, s->var_kernel, "depthwise_kernel",
                           (size_t)s->kh * s->kw * mid, &l->off_w,
                           &l->n_w)))
        return rv;
    if (s->n_var < 2)
        return hc_err_set(HC_ERR_MISMATCH, "%s: has %d variables; a "
                          "separable_conv2d has its depthwise and pointwise "
                          "kernels", c->where, s->n_var);
    return nn_check_extra(c, l, s->var_first + 1, "pointwise_kernel",
                          mid * (size_t)s->filters);
}

static int alloc(struct nn_layer *l, size_t B)
{
    int rv;

    if ((rv = nn_alloc_f(l->be, &l->out, B * l->out_size)) ||
        (rv = nn_alloc_f(l->be, &l->cols, B * l->ws_size)) ||
        (rv = nn_alloc_f(l->be, &l->aux, B * l->aux_size)))
        return rv;
    return nn_alloc_pre(l, B);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    struct wk_geom g = l->g;
    const int M = B * g.OH * g.OW, K = g.C * l->units, F = l->out_c;

    (void)net;
    (void)training;
    g.B = B;
    l->w2 = params + l->doff_x[0];
    wk_be_dwconv_forward(l->be, &g, l->units, x, params + l->doff_w,
                         l->cols);
    wk_be_sgemm(l->be, 0, 0, M, F, K, 1.0f, l->cols, K, l->w2, F, 0.0f,
                l->out, F);
    nn_bias_act(l, l->n_b ? params + l->doff_b : NULL, l->out, M, F);
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    struct wk_geom g = l->g;
    const int M = B * g.OH * g.OW, K = g.C * l->units, F = l->out_c;

    g.B = B;
    nn_bias_act_backward(l, dy, M, F, l->n_b ? grads + l->doff_b : NULL);
    /* dP (K, F) = Mᵀ · dY; dM (M, K) = dY · Pᵀ */
    wk_be_sgemm(l->be, 1, 0, K, F, M, 1.0f, l->cols, K, dy, F, 0.0f,
                grads + l->doff_x[0], F);
    wk_be_sgemm(l->be, 0, 1, M, K, F, 1.0f, dy, F, l->w2, F, 0.0f, l->aux,
                K);
    wk_be_dwconv_backward_filter(l->be, &g, l->units, l->x, l->aux,
                                 grads + l->doff_w);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    struct wk_geom g = l->g;

    (void)dy;
    g.B = B;
    wk_be_dwconv_backward_input(l->be, &g, l->units, l->aux,
                                params + l->doff_w, dx);
    return 1;
}

const struct nn_kind nn_separable_conv2d = {
    .flags = NN_BIAS,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
};
