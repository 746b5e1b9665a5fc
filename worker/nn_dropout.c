/*
 * nn_dropout.c — the worker's half of dropout (the row in
 * common/layer_dropout.c): in a training forward the backend's dropout
 * with a mask from its counter-based hash, seeded from the net's seed,
 * the layer's index and the count of training forwards (nn.h), so
 * backward re-derives the mask instead of storing it and applies it to
 * the gradient in place. Otherwise, and at rate 0, the identity (no
 * buffer).
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    (void)in;
    (void)out;
    if (!(s->rate >= 0.0f && s->rate < 1.0f))
        return hc_err_set(HC_ERR_CONFIG, "%s: rate = %g; must be in [0, 1)",
                          c->where, (double)s->rate);
    l->rate = s->rate;
    return HC_OK;
}

static int alloc(struct nn_layer *l, size_t B)
{
    if (l->rate == 0.0f)
        return HC_OK;
    return nn_alloc_f(l->be, &l->out, B * l->out_size);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    int i = (int)(l - net->layers);

    (void)params;
    if (!training || l->rate == 0.0f) {
        l->y = x;
        return;
    }
    l->seed = wk_dropout_hash(net->seed,
                              net->counter * HC_MODEL_MAX_LAYERS + i);
    if (!l->seed)
        l->seed = 1;
    /* Rows from first_sample on of the batch's mask (wk_net_set_
     * dropout_pos); 0 is still "off" for backward, a 2^-64 chance. */
    if (net->first_sample)
        l->seed = wk_dropout_seed_at(l->seed, (uint64_t)net->first_sample *
                                                  (uint64_t)l->out_size);
    wk_be_dropout_forward(l->be, x, l->out, (size_t)B * l->out_size, l->rate,
                          l->seed);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    (void)params;
    (void)dx;
    if (l->seed)
        wk_be_dropout_backward(l->be, dy, dy, (size_t)B * l->out_size,
                               l->rate, l->seed);
    return 0;
}

const struct nn_kind nn_dropout = {
    .flags = NN_IN_PLACE,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_input = backward_input,
};
