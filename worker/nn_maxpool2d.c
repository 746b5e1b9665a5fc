/*
 * nn_maxpool2d.c — the worker's half of maxpool2d and globalmaxpool2d
 * (the rows in common/layer_pool2d.c): the backend's max-pool, over
 * windows or over the whole image, with its argmax indices kept for
 * backward, which scatters the gradient to them: on a tie, to the first
 * maximum in row-major order only (backend_ops.h). After a conv2d on the
 * same backend it applies that layer's bias and activation to its own,
 * smaller output (NN_EPILOGUE_IN: nn_build.c, fuse_epilogue).
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

static int alloc(struct nn_layer *l, size_t B)
{
    int rv;

    if ((rv = nn_alloc_f(l->be, &l->out, B * l->out_size)))
        return rv;
    return wk_be_alloc(l->be, B * l->out_size * sizeof *l->idx,
                       (void **)&l->idx);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    struct wk_geom g = l->g;
    size_t n = (size_t)B * l->out_size;

    (void)net;
    (void)training;
    g.B = B;
    wk_be_maxpool_forward(l->be, &g, x, l->out, l->idx);
    if (l->post_act && (l->act != HC_ACT_LINEAR || l->n_b))
        wk_be_act_forward(l->be, l->out, l->n_b ? params + l->doff_b : NULL,
                          l->out, (int)(n / l->out_c), l->out_c, l->act);
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    if (l->post_act)
        wk_be_act_bias_backward(l->be, l->y, dy, B * l->out_size / l->out_c,
                                l->out_c, l->act,
                                l->n_b ? grads + l->doff_b : NULL);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    struct wk_geom g = l->g;

    (void)params;
    g.B = B;
    wk_be_maxpool_backward(l->be, &g, dy, l->idx, dx);
    return 1;
}

const struct nn_kind nn_maxpool2d = {
    .flags = NN_EPILOGUE_IN,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
};

const struct nn_kind nn_globalmaxpool2d = {
    .flags = NN_EPILOGUE_IN,
    .setup = nn_global_window,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
};
