/*
 * layer_flatten.c — the flatten row of the layer table (layer.h), Keras's
 * Flatten: an (H, W, C) image as a flat (H·W·C) vector, in NHWC order. No
 * settings, no variables. The worker runs it in worker/nn_flatten.c.
 */
#include "layer.h"

#include "err.h"
#include "model_impl.h"

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    (void)m;
    (void)where;
    l->out.rank = 1;
    l->out.dims[0] = (int)md_shape_elems(&l->in);  /* in ≤ MD_ELEMS_MAX */
    l->out.dims[1] = l->out.dims[2] = 0;
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    {"data_format", HC_KA_LAST}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    (void)l;
    cJSON_AddStringToObject(c, "data_format", "channels_last");
}

const struct hc_layer_kind hc_layer_flatten = {
    .name = "flatten",
    .keras_class = "Flatten",
    .snake = "flatten",
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
