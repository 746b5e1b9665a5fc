/*
 * nn_flatten.c — the worker's half of flatten and reshape (the rows in
 * common/layer_flatten.c and common/layer_reshape.c): NHWC activations
 * are laid out in the order both keep, so the output is the input itself
 * and the gradient passes through; only the shape changes. No buffers, no
 * pass of their own.
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

/* The shape the model inferred (target_shape with its −1 filled), once it
 * is checked to hold the input's values. */
static int setup_reshape(const struct nn_setup *c,
                         const struct hc_layer_spec *s,
                         const struct hc_shape *in, struct nn_layer *l,
                         struct hc_shape *out)
{
    char b1[48], b2[48];

    (void)l;
    if (nn_shape_size(&s->out) != nn_shape_size(in))
        return hc_err_set(HC_ERR_CONFIG, "%s: reshape to %s does not hold "
                          "the values of its input %s", c->where,
                          nn_shape_str(&s->out, b1, sizeof b1),
                          nn_shape_str(in, b2, sizeof b2));
    *out = s->out;
    return HC_OK;
}

const struct nn_kind nn_reshape = {
    .setup = setup_reshape,
};
