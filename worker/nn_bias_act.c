/*
 * nn_bias_act.c — what the kinds with weights (conv2d, dense) share: the
 * bias and activation applied to their product, and backward the
 * activation's derivative fused with the bias gradient. An activation
 * whose derivative reads its input (wk_act_reads_input: gelu, swish)
 * makes the layer keep the values before it in l->pre; every other one
 * is differentiated from the output, so the layer keeps nothing more.
 */
#include "nn_impl.h"

#include "err.h"

int nn_alloc_pre(struct nn_layer *l, size_t B)
{
    if (!wk_act_reads_input(l->act))
        return HC_OK;
    return nn_alloc_f(l->be, &l->pre, B * l->out_size);
}

void nn_bias_act(struct nn_layer *l, const float *bias, float *y, int rows,
                 int n)
{
    if (!l->pre) {
        wk_be_act_forward(l->be, y, bias, y, rows, n, l->act);
        return;
    }
    wk_be_act_forward(l->be, y, bias, l->pre, rows, n, HC_ACT_LINEAR);
    wk_be_act_forward(l->be, l->pre, NULL, y, rows, n, l->act);
}

void nn_bias_act_backward(struct nn_layer *l, float *dy, int rows, int n,
                          float *db)
{
    wk_be_act_bias_backward(l->be, l->pre ? l->pre : l->y, dy, rows, n,
                            l->act, db);
}
