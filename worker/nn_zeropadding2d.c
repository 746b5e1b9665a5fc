/*
 * nn_zeropadding2d.c — the worker's half of zeropadding2d (the row in
 * common/layer_zeropadding2d.c): the padded image is im2col with a 1×1
 * window, stride 1 and the layer's padding before the first row and
 * column, (B, H, W, C) → (B, top + H + bottom, left + W + right, C); its
 * backward is col2im, the adjoint, which keeps the inner cells. No
 * parameters.
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
    l->g = (struct wk_geom){
        .B = 1, .H = in->dims[0], .W = in->dims[1], .C = in->dims[2],
        .kh = 1, .kw = 1, .sh = 1, .sw = 1, .pt = s->pad[0], .pl = s->pad[2],
        .OH = in->dims[0] + s->pad[0] + s->pad[1],
        .OW = in->dims[1] + s->pad[2] + s->pad[3]};
    out->dims[0] = l->g.OH;
    out->dims[1] = l->g.OW;
    return HC_OK;
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    struct wk_geom g = l->g;

    (void)net;
    (void)params;
    (void)training;
    g.B = B;
    wk_be_im2col(l->be, &g, x, l->out);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    struct wk_geom g = l->g;

    (void)params;
    g.B = B;
    wk_be_col2im(l->be, &g, dy, dx, 0);
    return 1;
}

const struct nn_kind nn_zeropadding2d = {
    .setup = setup,
    .alloc = nn_alloc_out,
    .forward = forward,
    .backward_input = backward_input,
};
