/*
 * layer_conv2d.c — the conv2d row of the layer table (layer.h), Keras's
 * Conv2D: `filters` kernels of kernel_size slid over an (H, W, C) image
 * with strides and padding, a bias and an activation. Its variables are
 * "NAME/kernel" (kh, kw, C, filters) and "NAME/bias" (filters), their
 * initialisers and regularizers Keras's (GlorotUniform and Zeros by
 * default). The worker runs it in worker/nn_conv2d.c.
 */
#include "layer.h"

#include "err.h"
#include "keras_impl.h"
#include "model_impl.h"

static const char *const keys[] = {
    "filters", "kernel_size", "strides", "padding", "activation", "use_bias",
    MD_WEIGHTS_KEYS, NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    int rv;

    if (!md_get(lj, "filters"))
        return md_missing(where, "filters", "32");
    if (!md_get(lj, "kernel_size"))
        return md_missing(where, "kernel_size", "[3, 3]");
    if ((rv = md_get_int(lj, "filters", where, 0, 1, MD_DIM_MAX,
                         &l->filters)) ||
        (rv = md_get_pair(lj, "kernel_size", where, 1, MD_DIM_MAX, &l->kh,
                          &l->kw)) ||
        (md_get(lj, "strides") &&
         (rv = md_get_pair(lj, "strides", where, 1, MD_DIM_MAX, &l->sh,
                           &l->sw))) ||
        (rv = md_get_padding(lj, where, &l->same)) ||
        (rv = md_get_act(lj, where, HC_ACT_LINEAR, &l->act)) ||
        (rv = md_get_bool(lj, "use_bias", where, 1, &l->use_bias)))
        return rv;
    return md_get_weights_args(lj, where, l);
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    int shape[4], rv;

    if ((rv = md_window_out(where, l, "kernel_size", l->kh, l->kw)))
        return rv;
    l->out.dims[2] = l->filters;
    if (md_shape_elems(&l->out) > MD_ELEMS_MAX)
        return HC_OK;       /* reported by the caller, with both shapes */
    shape[0] = l->kh;
    shape[1] = l->kw;
    shape[2] = l->in.dims[2];
    shape[3] = l->filters;
    return md_add_weights(m, where, l, 4, shape, l->kh * l->kw * shape[2],
                          l->kh * l->kw * l->filters);
}

static const struct hc_keras_arg keras_args[] = {
    HC_KERAS_WEIGHT_ARGS, {"filters", HC_KA_COPY},
    {"kernel_size", HC_KA_COPY}, {"strides", HC_KA_COPY},
    {"padding", HC_KA_COPY}, {"data_format", HC_KA_LAST},
    {"dilation_rate", HC_KA_ONES}, {"groups", HC_KA_ONES},
    {"activation", HC_KA_ACT}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    cJSON_AddNumberToObject(c, "filters", l->filters);
    cJSON_AddItemToObject(c, "kernel_size", kx_pair(l->kh, l->kw));
    cJSON_AddItemToObject(c, "strides", kx_pair(l->sh, l->sw));
    cJSON_AddStringToObject(c, "padding", l->same ? "same" : "valid");
    cJSON_AddStringToObject(c, "data_format", "channels_last");
    cJSON_AddItemToObject(c, "dilation_rate", kx_pair(1, 1));
    cJSON_AddNumberToObject(c, "groups", 1);
    cJSON_AddStringToObject(c, "activation", hc_act_name(l->act));
    kx_weights_args(c, m, l);
}

const struct hc_layer_kind hc_layer_conv2d = {
    .name = "conv2d",
    .spellings = (const char *const[]){"convolution2d", NULL},
    .keras_class = "Conv2D",
    .keras_aliases = (const char *const[]){"Convolution2D", NULL},
    .snake = "conv2d",
    .flags = HC_LAYER_ACT | HC_LAYER_LOGITS,
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
