/*
 * nn_depthwise_conv2d.c — the worker's half of depthwise_conv2d (the row
 * in common/layer_depthwise_conv2d.c): the backend's direct depthwise
 * convolution (dwconv_forward) over the whole batch, then its bias and
 * activation fused into one pass over the output (nn_bias_act.c).
 * Backward fuses the activation derivative with the bias gradient, then
 * the kernel's gradient (dwconv_backward_filter) and the input's
 * (dwconv_backward_input). No workspace: each kernel element touches one
 * channel, so there is no product to batch into a GEMM.
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    int sh = s->sh ? s->sh : 1, sw = s->sw ? s->sw : 1, rv;

    if ((rv = nn_need_image(c, s, in)))
        return rv;
    if (s->depth_multiplier < 1)
        return hc_err_set(HC_ERR_CONFIG, "%s: depth_multiplier = %d; must "
                          "be at least 1", c->where, s->depth_multiplier);
    if ((rv = nn_window(c, s, in, s->kh, s->kw, sh, sw, l, out)))
        return rv;
    l->units = s->depth_multiplier;
    out->dims[2] = l->g.C * s->depth_multiplier;
    return nn_check_var(c, s->var_kernel, "depthwise_kernel",
                        (size_t)s->kh * s->kw * l->g.C * s->depth_multiplier,
                        &l->off_w, &l->n_w);
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
    struct wk_geom g = l->g;

    (void)net;
    (void)training;
    g.B = B;
    wk_be_dwconv_forward(l->be, &g, l->units, x, params + l->doff_w, l->out);
    nn_bias_act(l, l->n_b ? params + l->doff_b : NULL, l->out,
                B * g.OH * g.OW, l->out_c);
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    struct wk_geom g = l->g;

    g.B = B;
    nn_bias_act_backward(l, dy, B * g.OH * g.OW, l->out_c,
                         l->n_b ? grads + l->doff_b : NULL);
    wk_be_dwconv_backward_filter(l->be, &g, l->units, l->x, dy,
                                 grads + l->doff_w);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    struct wk_geom g = l->g;

    g.B = B;
    wk_be_dwconv_backward_input(l->be, &g, l->units, dy, params + l->doff_w,
                                dx);
    return 1;
}

const struct nn_kind nn_depthwise_conv2d = {
    .flags = NN_BIAS,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
};
