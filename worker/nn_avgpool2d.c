/*
 * nn_avgpool2d.c — the worker's half of avgpool2d and globalavgpool2d
 * (the rows in common/layer_pool2d.c) and of globalavgpool1d
 * (common/layer_globalavgpool1d.c, a sequence (steps, C) pooled as the
 * image (1, steps, C)): the backend's average pool, over
 * windows (padding not counted in the mean, as Keras) or over the whole
 * image, and its adjoint, which spreads each output's gradient evenly
 * over the cells it averaged. No parameters, no state kept for backward.
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    int rv;

    if ((rv = nn_need_image(c, s, in)))
        return rv;
    return nn_window(c, s, in, s->ph, s->pw, s->sh ? s->sh : s->ph,
                     s->sw ? s->sw : s->pw, l, out);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    struct wk_geom g = l->g;

    (void)net;
    (void)params;
    (void)training;
    g.B = B;
    wk_be_avgpool_forward(l->be, &g, x, l->out);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    struct wk_geom g = l->g;

    (void)params;
    g.B = B;
    wk_be_avgpool_backward(l->be, &g, dy, dx);
    return 1;
}

const struct nn_kind nn_avgpool2d = {
    .setup = setup,
    .alloc = nn_alloc_out,
    .forward = forward,
    .backward_input = backward_input,
};

const struct nn_kind nn_globalavgpool2d = {
    .setup = nn_global_window,
    .alloc = nn_alloc_out,
    .forward = forward,
    .backward_input = backward_input,
};

/* A sequence (steps, C) as the image (1, steps, C), one window of it. */
static int setup_1d(const struct nn_setup *c, const struct hc_layer_spec *s,
                    const struct hc_shape *in, struct nn_layer *l,
                    struct hc_shape *out)
{
    struct hc_shape img = {3, {1, in->dims[0], in->dims[1]}};
    char b1[48];
    int rv;

    if (in->rank != 2)
        return hc_err_set(HC_ERR_CONFIG, "%s: globalavgpool1d needs a "
                          "sequence (steps, C), got %s", c->where,
                          nn_shape_str(in, b1, sizeof b1));
    if ((rv = nn_window(c, s, &img, 1, in->dims[0], 1, 1, l, out)))
        return rv;
    out->rank = 1;
    out->dims[0] = in->dims[1];
    out->dims[1] = out->dims[2] = 0;
    return HC_OK;
}

const struct nn_kind nn_globalavgpool1d = {
    .setup = setup_1d,
    .alloc = nn_alloc_out,
    .forward = forward,
    .backward_input = backward_input,
};
