/*
 * nn_kind.c — the worker's layer table: each kind's half (nn_KIND.c),
 * indexed by the same id as its row in common/layer.c. Adding a kind adds
 * its line here.
 */
#include "nn_impl.h"

static const struct nn_kind *const kinds[HC_LAYER_COUNT] = {
    [HC_LAYER_CONV2D] = &nn_conv2d,
    [HC_LAYER_MAXPOOL2D] = &nn_maxpool2d,
    [HC_LAYER_FLATTEN] = &nn_flatten,
    [HC_LAYER_DENSE] = &nn_dense,
    [HC_LAYER_DROPOUT] = &nn_dropout,
    [HC_LAYER_ACTIVATION] = &nn_activation,
    [HC_LAYER_ADD] = &nn_add,
    [HC_LAYER_SUBTRACT] = &nn_subtract,
    [HC_LAYER_AVERAGE] = &nn_average,
    [HC_LAYER_MULTIPLY] = &nn_multiply,
    [HC_LAYER_CONCATENATE] = &nn_concatenate,
    [HC_LAYER_RELU] = &nn_relu,
    [HC_LAYER_LEAKY_RELU] = &nn_relu,       /* a ReLU with its slope */
    [HC_LAYER_AVGPOOL2D] = &nn_avgpool2d,
    [HC_LAYER_GLOBALAVGPOOL2D] = &nn_globalavgpool2d,
    [HC_LAYER_GLOBALMAXPOOL2D] = &nn_globalmaxpool2d,
    [HC_LAYER_ZEROPADDING2D] = &nn_zeropadding2d,
    [HC_LAYER_RESHAPE] = &nn_reshape,
    [HC_LAYER_DEPTHWISE_CONV2D] = &nn_depthwise_conv2d,
    [HC_LAYER_SEPARABLE_CONV2D] = &nn_separable_conv2d,
    [HC_LAYER_LAYER_NORMALIZATION] = &nn_layer_normalization,
    [HC_LAYER_BATCHNORM] = &nn_batchnorm,
    [HC_LAYER_EMBEDDING] = &nn_embedding,
    [HC_LAYER_GLOBALAVGPOOL1D] = &nn_globalavgpool1d,
};

const struct nn_kind *nn_kind_of(enum hc_layer_type t)
{
    return (unsigned)t < HC_LAYER_COUNT ? kinds[t] : NULL;
}
