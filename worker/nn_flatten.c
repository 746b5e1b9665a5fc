/*
 * nn_flatten.c — the worker's half of flatten (the row in
 * common/layer_flatten.c): NHWC activations are already laid out flat,
 * so the output is the input itself and the gradient passes through;
 * only the shape changes. No buffers, no pass of its own.
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    (void)c;
    (void)s;
    (void)l;
    out->rank = 1;
    out->dims[0] = (int)nn_shape_size(in);
    return HC_OK;
}

const struct nn_kind nn_flatten = {
    .setup = setup,
};
