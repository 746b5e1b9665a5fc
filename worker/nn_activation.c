/*
 * nn_activation.c — the worker's half of activation (the row in
 * common/layer_activation.c): the backend's activation over rows of the
 * output's last dimension, and in backward its derivative applied to the
 * gradient in place. As the output layer of sparse cross-entropy its
 * softmax is the loss's (act_in_loss): the output is then its input, the
 * logits. For gelu and swish the derivative reads the input (l->x)
 * instead of the output.
 */
#include "nn_impl.h"

#include "err.h"

static int alloc(struct nn_layer *l, size_t B)
{
    if (l->act_in_loss)
        return HC_OK;
    return nn_alloc_f(l->be, &l->out, B * l->out_size);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    (void)net;
    (void)params;
    (void)training;
    if (l->act_in_loss) {
        l->y = x;
        return;
    }
    wk_be_act_forward(l->be, x, NULL, l->out, B * l->out_size / l->out_c,
                      l->out_c, l->act);
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    (void)params;
    (void)dx;
    if (l->act != HC_ACT_LINEAR)
        wk_be_act_backward(l->be, wk_act_reads_input(l->act) ? l->x : l->y,
                           dy, dy, B * l->out_size / l->out_c, l->out_c,
                           l->act);
    return 0;
}

const struct nn_kind nn_activation = {
    .flags = NN_IN_PLACE,
    .alloc = alloc,
    .forward = forward,
    .backward_input = backward_input,
};
