/*
 * layer_maxpool2d.c — the maxpool2d row of the layer table (layer.h),
 * Keras's MaxPooling2D: the largest value of each channel in a
 * pool_size window, slid with strides (the pool size unless given) and
 * padding over an (H, W, C) image. No variables. The worker runs it in
 * worker/nn_maxpool2d.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {"pool_size", "strides", "padding", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    const cJSON *st;
    int rv;

    l->ph = l->pw = 2;
    if ((md_get(lj, "pool_size") &&
         (rv = md_get_pair(lj, "pool_size", where, 1, MD_DIM_MAX, &l->ph,
                           &l->pw))) ||
        (rv = md_get_padding(lj, where, &l->same)))
        return rv;
    l->sh = l->ph;
    l->sw = l->pw;
    st = md_get(lj, "strides");
    if (st && !cJSON_IsNull(st) &&
        (rv = md_get_pair(lj, "strides", where, 1, MD_DIM_MAX, &l->sh,
                          &l->sw)))
        return rv;
    return HC_OK;
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    (void)m;
    return md_window_out(where, l, "pool_size", l->ph, l->pw);
}

static const struct hc_keras_arg keras_args[] = {
    {"pool_size", HC_KA_COPY}, {"strides", HC_KA_COPY},
    {"padding", HC_KA_COPY}, {"data_format", HC_KA_LAST}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    cJSON_AddItemToObject(c, "pool_size", kx_pair(l->ph, l->pw));
    cJSON_AddStringToObject(c, "padding", l->same ? "same" : "valid");
    cJSON_AddItemToObject(c, "strides", kx_pair(l->sh, l->sw));
    cJSON_AddStringToObject(c, "data_format", "channels_last");
}

const struct hc_layer_kind hc_layer_maxpool2d = {
    .name = "maxpool2d",
    .spellings = (const char *const[]){"maxpooling2d", NULL},
    .keras_class = "MaxPooling2D",
    .keras_aliases = (const char *const[]){"MaxPool2D", NULL},
    .snake = "max_pooling2d",
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
