/*
 * layer_dense.c — the dense row of the layer table (layer.h), Keras's
 * Dense: a flat (N) input times a kernel, plus a bias, through an
 * activation. Its variables are "NAME/kernel" (N, units) and "NAME/bias"
 * (units), their initialisers and regularizers Keras's (GlorotUniform and
 * Zeros by default). The worker runs it in
 * worker/nn_dense.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {"units", "activation", "use_bias",
                                   MD_WEIGHTS_KEYS, NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    int rv;

    if (!md_get(lj, "units"))
        return md_missing(where, "units", "10");
    if ((rv = md_get_int(lj, "units", where, 0, 1, 1 << 24, &l->units)) ||
        (rv = md_get_act(lj, where, HC_ACT_LINEAR, &l->act)) ||
        (rv = md_get_bool(lj, "use_bias", where, 1, &l->use_bias)))
        return rv;
    return md_get_weights_args(lj, where, l);
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    const struct hc_shape *in = &l->in;
    char si[48];
    int shape[2];

    if (in->rank != 1)
        return md_fail(where, "dense needs a flat input (N) but its input "
                       "has shape %s; add {\"type\": \"flatten\"} before "
                       "it", md_fmt_shape(in, si, sizeof si));
    l->out.dims[0] = l->units;
    shape[0] = in->dims[0];
    shape[1] = l->units;
    return md_add_weights(m, where, l, 2, shape, in->dims[0], l->units);
}

static const struct hc_keras_arg keras_args[] = {
    HC_KERAS_WEIGHT_ARGS, {"units", HC_KA_COPY}, {"activation", HC_KA_ACT},
    {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON_AddNumberToObject(c, "units", l->units);
    cJSON_AddStringToObject(c, "activation", hc_act_name(l->act));
    kx_weights_args(c, m, l);
}

const struct hc_layer_kind hc_layer_dense = {
    .name = "dense",
    .keras_class = "Dense",
    .snake = "dense",
    .flags = HC_LAYER_ACT | HC_LAYER_LOGITS,
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
