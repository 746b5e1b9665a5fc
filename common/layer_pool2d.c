/*
 * layer_pool2d.c — the pooling rows of the layer table (layer.h), none
 * with variables:
 *   maxpool2d, Keras's MaxPooling2D, and avgpool2d, AveragePooling2D: the
 *     largest value, or the mean, of each channel in a pool_size window
 *     slid with strides (the pool size unless given) and padding over an
 *     (H, W, C) image; with padding "same" the mean is over the window's
 *     cells inside the image, as Keras (TensorFlow) computes it;
 *   globalmaxpool2d and globalavgpool2d, GlobalMaxPooling2D and
 *     GlobalAveragePooling2D: the same over the whole image, (H, W, C) →
 *     (C), keepdims false.
 * The worker runs them in worker/nn_maxpool2d.c and worker/nn_avgpool2d.c.
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

const struct hc_layer_kind hc_layer_avgpool2d = {
    .name = "avgpool2d",
    .spellings = (const char *const[]){"averagepooling2d", NULL},
    .keras_class = "AveragePooling2D",
    .keras_aliases = (const char *const[]){"AvgPool2D", NULL},
    .snake = "average_pooling2d",
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};

/* ---- global pooling ---- */

static const char *const global_keys[] = {"keepdims", NULL};

/* keepdims true keeps (1, 1, C), a shape hetps does not have. */
static int global_parse(const cJSON *lj, const char *where,
                        struct hc_layer_spec *l)
{
    int keep, rv;

    if ((rv = md_get_bool(lj, "keepdims", where, 0, &keep)))
        return rv;
    if (keep)
        return md_fail(where, "%s keepdims true is not supported; hetps "
                       "computes keepdims false, (H, W, C) → (C)",
                       hc_layer_type_name(l->type));
    return HC_OK;
}

static int global_infer(struct hc_model *m, const char *where,
                        struct hc_layer_spec *l)
{
    char si[48];

    (void)m;
    if (l->in.rank != 3)
        return md_fail(where, "%s needs an image input (H, W, C) but its "
                       "input has shape %s", hc_layer_type_name(l->type),
                       md_fmt_shape(&l->in, si, sizeof si));
    l->out.rank = 1;
    l->out.dims[0] = l->in.dims[2];
    l->out.dims[1] = l->out.dims[2] = 0;
    return HC_OK;
}

static const struct hc_keras_arg global_keras_args[] = {
    {"keepdims", HC_KA_FALSE}, {"data_format", HC_KA_LAST}, {NULL, 0}};

static void global_keras_config(cJSON *c, const struct hc_model *m,
                                const struct hc_layer_spec *l)
{
    (void)m;
    (void)l;
    cJSON_AddStringToObject(c, "data_format", "channels_last");
    cJSON_AddFalseToObject(c, "keepdims");
}

const struct hc_layer_kind hc_layer_globalavgpool2d = {
    .name = "globalavgpool2d",
    .spellings = (const char *const[]){"globalaveragepooling2d", NULL},
    .keras_class = "GlobalAveragePooling2D",
    .keras_aliases = (const char *const[]){"GlobalAvgPool2D", NULL},
    .snake = "global_average_pooling2d",
    .keys = global_keys,
    .parse = global_parse,
    .infer = global_infer,
    .keras_args = global_keras_args,
    .keras_config = global_keras_config,
};

const struct hc_layer_kind hc_layer_globalmaxpool2d = {
    .name = "globalmaxpool2d",
    .spellings = (const char *const[]){"globalmaxpooling2d", NULL},
    .keras_class = "GlobalMaxPooling2D",
    .keras_aliases = (const char *const[]){"GlobalMaxPool2D", NULL},
    .snake = "global_max_pooling2d",
    .keys = global_keys,
    .parse = global_parse,
    .infer = global_infer,
    .keras_args = global_keras_args,
    .keras_config = global_keras_config,
};
