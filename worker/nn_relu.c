/*
 * nn_relu.c — the worker's half of relu and leaky_relu (the rows in
 * common/layer_relu.c; LeakyReLU is a ReLU with its slope): the
 * backend's relu_forward into the layer's own buffer, and in backward
 * its derivative, taken from the input, applied to the gradient in place.
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    (void)in;
    (void)out;
    if (!(s->negative_slope >= 0.0f))
        return hc_err_set(HC_ERR_CONFIG, "%s: negative_slope = %g; must be "
                          "at least 0", c->where, (double)s->negative_slope);
    l->max_value = s->max_value;
    l->slope = s->negative_slope;
    l->threshold = s->threshold;
    return HC_OK;
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    (void)net;
    (void)params;
    (void)training;
    wk_be_relu_forward(l->be, x, l->out, (size_t)B * l->out_size,
                       l->max_value, l->slope, l->threshold);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    (void)params;
    (void)dx;
    wk_be_relu_backward(l->be, l->x, dy, dy, (size_t)B * l->out_size,
                        l->max_value, l->slope, l->threshold);
    return 0;
}

const struct nn_kind nn_relu = {
    .setup = setup,
    .alloc = nn_alloc_out,
    .forward = forward,
    .backward_input = backward_input,
};
