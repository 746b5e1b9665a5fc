/*
 * layer.c — the layer table (layer.h): one row per kind, indexed by its
 * id, and the look-ups by id, by hetps's type name and by Keras class.
 * Adding a kind adds its line here.
 */
#include "layer.h"

#include <string.h>

static const struct hc_layer_kind *const kinds[HC_LAYER_COUNT] = {
    [HC_LAYER_CONV2D] = &hc_layer_conv2d,
    [HC_LAYER_MAXPOOL2D] = &hc_layer_maxpool2d,
    [HC_LAYER_FLATTEN] = &hc_layer_flatten,
    [HC_LAYER_DENSE] = &hc_layer_dense,
    [HC_LAYER_DROPOUT] = &hc_layer_dropout,
    [HC_LAYER_ACTIVATION] = &hc_layer_activation,
    [HC_LAYER_ADD] = &hc_layer_add,
    [HC_LAYER_SUBTRACT] = &hc_layer_subtract,
    [HC_LAYER_AVERAGE] = &hc_layer_average,
    [HC_LAYER_MULTIPLY] = &hc_layer_multiply,
    [HC_LAYER_CONCATENATE] = &hc_layer_concatenate,
    [HC_LAYER_RELU] = &hc_layer_relu,
    [HC_LAYER_LEAKY_RELU] = &hc_layer_leaky_relu,
    [HC_LAYER_AVGPOOL2D] = &hc_layer_avgpool2d,
    [HC_LAYER_GLOBALAVGPOOL2D] = &hc_layer_globalavgpool2d,
    [HC_LAYER_GLOBALMAXPOOL2D] = &hc_layer_globalmaxpool2d,
    [HC_LAYER_ZEROPADDING2D] = &hc_layer_zeropadding2d,
    [HC_LAYER_RESHAPE] = &hc_layer_reshape,
    [HC_LAYER_DEPTHWISE_CONV2D] = &hc_layer_depthwise_conv2d,
    [HC_LAYER_SEPARABLE_CONV2D] = &hc_layer_separable_conv2d,
    [HC_LAYER_LAYER_NORMALIZATION] = &hc_layer_layer_normalization,
    [HC_LAYER_BATCHNORM] = &hc_layer_batchnorm,
    [HC_LAYER_EMBEDDING] = &hc_layer_embedding,
    [HC_LAYER_GLOBALAVGPOOL1D] = &hc_layer_globalavgpool1d,
};

const struct hc_layer_kind *hc_layer_kind(enum hc_layer_type t)
{
    return (unsigned)t < HC_LAYER_COUNT ? kinds[t] : NULL;
}

const char *hc_layer_type_name(enum hc_layer_type t)
{
    const struct hc_layer_kind *k = hc_layer_kind(t);

    return k ? k->name : "unknown";
}

/* 1 when s is one of list (NULL-terminated; NULL is empty). */
static int listed(const char *s, const char *const *list)
{
    for (; list && *list; list++)
        if (strcmp(s, *list) == 0)
            return 1;
    return 0;
}

int hc_layer_kind_named(const char *s, enum hc_layer_type *t)
{
    for (int i = 0; i < HC_LAYER_COUNT; i++)
        if (strcmp(s, kinds[i]->name) == 0 || listed(s, kinds[i]->spellings)) {
            *t = (enum hc_layer_type)i;
            return 0;
        }
    return -1;
}

const struct hc_layer_kind *hc_layer_kind_keras(const char *cls)
{
    for (int i = 0; i < HC_LAYER_COUNT; i++)
        if (strcmp(cls, kinds[i]->keras_class) == 0 ||
            listed(cls, kinds[i]->keras_aliases))
            return kinds[i];
    return NULL;
}
