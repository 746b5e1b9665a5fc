/*
 * layer_globalavgpool1d.c — the globalavgpool1d row of the layer table
 * (layer.h), Keras's GlobalAveragePooling1D: the mean over the steps of a
 * sequence, (steps, C) → (C), keepdims false (an embedding's rows
 * averaged). No variables. The worker runs it in
 * worker/nn_globalavgpool1d.c.
 */
#include "layer.h"

#include "err.h"
#include "model_impl.h"

static const char *const keys[] = {"keepdims", NULL};

static int parse(const cJSON *lj, const char *where, struct hc_layer_spec *l)
{
    int keep, rv;

    (void)l;
    if ((rv = md_get_bool(lj, "keepdims", where, 0, &keep)))
        return rv;
    if (keep)
        return md_fail(where, "globalavgpool1d keepdims true is not "
                       "supported; hetps computes keepdims false, "
                       "(steps, C) → (C)");
    return HC_OK;
}

static int infer(struct hc_model *m, const char *where,
                 struct hc_layer_spec *l)
{
    char si[48];

    (void)m;
    if (l->in.rank != 2)
        return md_fail(where, "globalavgpool1d needs a sequence input "
                       "(steps, C), an embedding's, but its input has shape "
                       "%s", md_fmt_shape(&l->in, si, sizeof si));
    l->out.rank = 1;
    l->out.dims[0] = l->in.dims[1];
    l->out.dims[1] = l->out.dims[2] = 0;
    return HC_OK;
}

static const struct hc_keras_arg keras_args[] = {
    {"keepdims", HC_KA_FALSE}, {"data_format", HC_KA_LAST}, {NULL, 0}};

static void keras_config(cJSON *c, const struct hc_model *m,
                         const struct hc_layer_spec *l)
{
    (void)m;
    (void)l;
    cJSON_AddStringToObject(c, "data_format", "channels_last");
    cJSON_AddFalseToObject(c, "keepdims");
}

const struct hc_layer_kind hc_layer_globalavgpool1d = {
    .name = "globalavgpool1d",
    .spellings = (const char *const[]){"globalaveragepooling1d", NULL},
    .keras_class = "GlobalAveragePooling1D",
    .keras_aliases = (const char *const[]){"GlobalAvgPool1D", NULL},
    .snake = "global_average_pooling1d",
    .keys = keys,
    .parse = parse,
    .infer = infer,
    .keras_args = keras_args,
    .keras_config = keras_config,
};
