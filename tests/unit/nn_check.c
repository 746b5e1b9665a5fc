/*
 * nn_check.c — the model table, the fixture and the full check of one
 * network that the layer tests share (contracts in nn_check.h).
 */
#include "nn_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "err.h"
#include "nn_ref.h"

/* ---- the model table ---- */

void nc_model_conv_valid(struct hc_model *m)
{
    nr_mb_begin(m, "conv_valid_s1_relu", 3, 6, 5, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 0, HC_ACT_RELU, 1);
    nr_mb_flatten(m);
    nr_mb_dense(m, 4, HC_ACT_SOFTMAX, 1);
}

void nc_model_conv_same_s2(struct hc_model *m)
{
    nr_mb_begin(m, "conv_same_s2_tanh_mse", 3, 7, 6, 3, HC_LOSS_MSE);
    nr_mb_conv(m, 4, 3, 3, 2, 2, 1, HC_ACT_TANH, 1);
    nr_mb_flatten(m);
    nr_mb_dense(m, 3, HC_ACT_SIGMOID, 1);
}

void nc_model_two_convs(struct hc_model *m)
{
    nr_mb_begin(m, "conv_same_then_valid_s2_pool", 3, 9, 8, 2,
                HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_SIGMOID, 1);
    nr_mb_conv(m, 4, 2, 3, 2, 1, 0, HC_ACT_TANH, 1);
    nr_mb_pool(m, 2, 2, 2, 2, 0);
    nr_mb_flatten(m);
    nr_mb_dense(m, 5, HC_ACT_SOFTMAX, 1);
}

void nc_model_conv_1x1(struct hc_model *m)
{
    nr_mb_begin(m, "conv_1x1_no_bias", 3, 5, 5, 3, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 4, 1, 1, 1, 1, 0, HC_ACT_RELU, 0);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_TANH, 1);
    nr_mb_conv(m, 2, 1, 1, 1, 1, 0, HC_ACT_LINEAR, 1);
    nr_mb_flatten(m);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 0);
}

void nc_model_pools(struct hc_model *m)
{
    nr_mb_begin(m, "pools_odd_overlap_same", 3, 8, 8, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 2, 2, 1, 1, 0, HC_ACT_RELU, 1);   /* 7×7 */
    nr_mb_pool(m, 3, 3, 2, 2, 0);                       /* 3×3, overlapping */
    nr_mb_pool(m, 2, 2, 2, 2, 1);                       /* 2×2, same */
    nr_mb_flatten(m);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

void nc_model_pool_leftover(struct hc_model *m)
{
    nr_mb_begin(m, "pool_leftover_rows", 3, 6, 6, 1, HC_LOSS_MSE);
    nr_mb_conv(m, 2, 2, 2, 1, 1, 0, HC_ACT_LINEAR, 1); /* 5×5 */
    nr_mb_pool(m, 2, 2, 2, 2, 0);                       /* 2×2, row 4 left */
    nr_mb_conv(m, 2, 2, 2, 1, 1, 1, HC_ACT_RELU, 1);
    nr_mb_flatten(m);
    nr_mb_dense(m, 2, HC_ACT_LINEAR, 1);
}

void nc_model_avgpools(struct hc_model *m)
{
    nr_mb_begin(m, "avgpools_same_valid", 3, 9, 8, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 2, 2, 1, 1, 0, HC_ACT_RELU, 1);   /* 8×7 */
    nr_mb_avgpool(m, 3, 3, 2, 2, 1);    /* 4×4, the extra pixel bottom/right */
    nr_mb_avgpool(m, 3, 3, 1, 1, 1);    /* 4×4, one pixel each side */
    nr_mb_avgpool(m, 2, 2, 1, 1, 0);    /* 3×3, overlapping */
    nr_mb_flatten(m);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

void nc_model_global_pools(struct hc_model *m)
{
    nr_mb_begin(m, "zeropad_global_pools", 3, 6, 5, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 4, 2, 2, 1, 1, 0, HC_ACT_RELU, 1);   /* 5×4 */
    nr_mb_zeropad(m, 1, 2, 0, 1);                       /* 8×5 */
    nr_mb_conv(m, 3, 3, 3, 1, 1, 0, HC_ACT_TANH, 1);   /* 6×3 */
    nr_mb_global(m, HC_LAYER_GLOBALAVGPOOL2D);          /* (3) */
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

void nc_model_global_max(struct hc_model *m)
{
    nr_mb_begin(m, "global_max", 3, 5, 6, 2, HC_LOSS_MSE);
    nr_mb_conv(m, 4, 3, 3, 1, 1, 1, HC_ACT_RELU, 1);   /* 5×6, fused into */
    nr_mb_global(m, HC_LAYER_GLOBALMAXPOOL2D);          /* (4) */
    nr_mb_dense(m, 2, HC_ACT_LINEAR, 1);
}

void nc_model_reshapes(struct hc_model *m)
{
    nr_mb_begin(m, "reshapes", 3, 4, 3, 2, HC_LOSS_MSE);
    nr_mb_reshape(m, 1, 24, 0, 0);                      /* (24) */
    nr_mb_dense(m, 12, HC_ACT_TANH, 1);
    nr_mb_reshape(m, 3, 2, 3, 2);                       /* (2, 3, 2) */
    nr_mb_conv(m, 3, 2, 2, 1, 1, 1, HC_ACT_RELU, 1);   /* (2, 3, 3) */
    nr_mb_reshape(m, 3, 3, 2, 3);                       /* rank 3 → 3 */
    nr_mb_global(m, HC_LAYER_GLOBALAVGPOOL2D);
    nr_mb_dense(m, 2, HC_ACT_LINEAR, 1);
}

void nc_model_mlp_dropout(struct hc_model *m)
{
    nr_mb_begin(m, "mlp_dropout", 1, 6, 0, 0, HC_LOSS_SPARSE_CCE);
    nr_mb_dense(m, 8, HC_ACT_RELU, 1);
    nr_mb_dropout(m, 0.4f);
    nr_mb_dense(m, 5, HC_ACT_TANH, 1);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

void nc_model_activation_layers(struct hc_model *m)
{
    nr_mb_begin(m, "activation_layers", 1, 5, 0, 0, HC_LOSS_SPARSE_CCE);
    nr_mb_dense(m, 6, HC_ACT_LINEAR, 1);
    nr_mb_act(m, HC_ACT_RELU);
    nr_mb_dense(m, 4, HC_ACT_LINEAR, 1);
    nr_mb_act(m, HC_ACT_SIGMOID);
    nr_mb_act(m, HC_ACT_TANH);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 1);
    nr_mb_act(m, HC_ACT_SOFTMAX);
}

void nc_model_keras_acts(struct hc_model *m)
{
    nr_mb_begin(m, "keras_activations", 3, 6, 6, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_GELU, 1);    /* keeps z */
    nr_mb_conv(m, 3, 3, 3, 1, 1, 0, HC_ACT_ELU, 1);     /* fused to the pool */
    nr_mb_pool(m, 2, 2, 2, 2, 0);
    nr_mb_flatten(m);
    nr_mb_dense(m, 6, HC_ACT_SWISH, 1);
    nr_mb_act(m, HC_ACT_SOFTPLUS);
    nr_mb_dense(m, 5, HC_ACT_RELU6, 1);
    nr_mb_act(m, HC_ACT_GELU);
    nr_mb_act(m, HC_ACT_SWISH);
    nr_mb_dense(m, 5, HC_ACT_HARD_SIGMOID, 0);
    nr_mb_act(m, HC_ACT_ELU);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

void nc_model_cce_smooth(struct hc_model *m)
{
    nr_mb_begin(m, "cce_softmax_smoothing", 1, 5, 0, 0, HC_LOSS_CCE);
    m->loss_par.label_smoothing = 0.1f;
    nr_mb_dense(m, 6, HC_ACT_TANH, 1);
    nr_mb_dense(m, 4, HC_ACT_SOFTMAX, 1);
}

void nc_model_cce_logits(struct hc_model *m)
{
    nr_mb_begin(m, "cce_from_logits", 1, 5, 0, 0, HC_LOSS_CCE);
    m->loss_par.from_logits = 1;
    nr_mb_dense(m, 6, HC_ACT_SWISH, 1);
    nr_mb_dense(m, 4, HC_ACT_LINEAR, 1);
}

void nc_model_sparse_logits(struct hc_model *m)
{
    nr_mb_begin(m, "sparse_cce_from_logits", 1, 5, 0, 0, HC_LOSS_SPARSE_CCE);
    m->loss_par.from_logits = 1;
    nr_mb_dense(m, 6, HC_ACT_ELU, 1);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 1);
}

void nc_model_bce(struct hc_model *m)
{
    nr_mb_begin(m, "bce_sigmoid_smoothing", 1, 5, 0, 0, HC_LOSS_BCE);
    m->loss_par.label_smoothing = 0.2f;
    nr_mb_dense(m, 6, HC_ACT_TANH, 1);
    nr_mb_dense(m, 3, HC_ACT_SIGMOID, 1);
}

void nc_model_bce_logits(struct hc_model *m)
{
    nr_mb_begin(m, "bce_from_logits_n1", 1, 5, 0, 0, HC_LOSS_BCE);
    m->loss_par.from_logits = 1;
    nr_mb_dense(m, 6, HC_ACT_TANH, 1);
    nr_mb_dense(m, 1, HC_ACT_LINEAR, 1);
}

void nc_model_mae(struct hc_model *m)
{
    nr_mb_begin(m, "mae", 1, 5, 0, 0, HC_LOSS_MAE);
    nr_mb_dense(m, 6, HC_ACT_SOFTPLUS, 1);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 1);
}

void nc_model_huber(struct hc_model *m)
{
    nr_mb_begin(m, "huber_delta_0.3", 1, 5, 0, 0, HC_LOSS_HUBER);
    m->loss_par.delta = 0.3f;
    nr_mb_dense(m, 6, HC_ACT_TANH, 1);
    nr_mb_dense(m, 4, HC_ACT_LINEAR, 1);
}

void nc_model_regularized(struct hc_model *m)
{
    nr_mb_begin(m, "l1_l2_regularizers", 3, 6, 6, 1, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 0, HC_ACT_TANH, 1);   /* bias to the pool */
    m->vars[0].reg = (struct hc_regularizer){0, 0.05f};
    m->vars[1].reg = (struct hc_regularizer){0.01f, 0};
    nr_mb_pool(m, 2, 2, 2, 2, 0);
    nr_mb_flatten(m);
    nr_mb_dense(m, 5, HC_ACT_RELU, 1);
    m->vars[2].reg = (struct hc_regularizer){0.02f, 0.03f};
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 0);
    m->vars[4].reg = (struct hc_regularizer){0, 0.1f};
}

void nc_model_relu_layers(struct hc_model *m)
{
    nr_mb_begin(m, "relu_leaky_relu_layers", 1, 6, 0, 0, HC_LOSS_SPARSE_CCE);
    nr_mb_dense(m, 8, HC_ACT_LINEAR, 1);
    nr_mb_relu(m, HC_LAYER_RELU, 0.5f, 0, 0);           /* a ceiling */
    nr_mb_dense(m, 8, HC_ACT_LINEAR, 1);
    nr_mb_relu(m, HC_LAYER_LEAKY_RELU, -1, 0.3f, 0);
    nr_mb_dense(m, 8, HC_ACT_LINEAR, 1);
    nr_mb_relu(m, HC_LAYER_RELU, -1, 0.1f, -0.2f);      /* below 0 */
    nr_mb_dense(m, 8, HC_ACT_LINEAR, 1);
    nr_mb_relu(m, HC_LAYER_RELU, 1.0f, 0.05f, 0.1f);    /* all three */
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

void nc_model_mse_softmax(struct hc_model *m)
{
    nr_mb_begin(m, "mse_softmax_output", 1, 4, 0, 0, HC_LOSS_MSE);
    nr_mb_dense(m, 5, HC_ACT_TANH, 1);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

void nc_model_mse_relu_sigmoid1(struct hc_model *m)
{
    nr_mb_begin(m, "mse_relu_sigmoid_n1", 1, 4, 0, 0, HC_LOSS_MSE);
    nr_mb_dense(m, 6, HC_ACT_RELU, 1);
    nr_mb_dense(m, 1, HC_ACT_SIGMOID, 1);
}

void nc_model_conv_softmax_channels(struct hc_model *m)
{
    nr_mb_begin(m, "conv_softmax_channels_dropout", 3, 4, 5, 2, HC_LOSS_MSE);
    nr_mb_dropout(m, 0.25f);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_SOFTMAX, 1);
    nr_mb_dropout(m, 0.5f);
    nr_mb_flatten(m);
    nr_mb_dense(m, 2, HC_ACT_LINEAR, 1);
}

void nc_model_reference(struct hc_model *m)
{
    nr_mb_begin(m, "fashion_cnn", 3, 28, 28, 1, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 32, 3, 3, 1, 1, 0, HC_ACT_RELU, 1);
    nr_mb_pool(m, 2, 2, 2, 2, 0);
    nr_mb_flatten(m);
    nr_mb_dense(m, 10, HC_ACT_SOFTMAX, 1);
}

/* A residual block: conv 0 read by conv 1 and by a 1×1 projection 2
 * (fan-out), their sum (add), relu, a dropout, then a softmax head. */
void nc_model_graph_residual(struct hc_model *m)
{
    static const int sum[] = {1, 2};

    nr_mb_begin(m, "graph_residual", 3, 5, 5, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_RELU, 1);            /* 0 */
    nr_mb_conv(m, 4, 3, 3, 1, 1, 1, HC_ACT_LINEAR, 1);          /* 1 */
    nr_mb_read(0);
    nr_mb_conv(m, 4, 1, 1, 1, 1, 0, HC_ACT_LINEAR, 0);          /* 2 */
    nr_mb_merge(m, HC_LAYER_ADD, 0, 2, sum);                    /* 3 */
    nr_mb_act(m, HC_ACT_RELU);                                  /* 4 */
    nr_mb_dropout(m, 0.3f);                                     /* 5 */
    nr_mb_flatten(m);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

/* Depthwise convolutions: valid with two outputs per channel, then same
 * with strides 2 and no bias (an odd image: the extra pixel bottom and
 * right), a 1×1 conv mixing the channels. */
void nc_model_dwconv(struct hc_model *m)
{
    nr_mb_begin(m, "depthwise_valid_same_s2", 3, 7, 6, 2, HC_LOSS_MSE);
    nr_mb_dwconv(m, 2, 3, 2, 1, 1, 0, HC_ACT_TANH, 1);
    nr_mb_dwconv(m, 1, 3, 3, 2, 2, 1, HC_ACT_LINEAR, 0);
    nr_mb_conv(m, 3, 1, 1, 1, 1, 0, HC_ACT_SIGMOID, 1);
    nr_mb_flatten(m);
    nr_mb_dense(m, 2, HC_ACT_SIGMOID, 1);
}

/* MobileNetV2-style: expand (1×1), depthwise 3×3 same, ReLU(6.0),
 * project (1×1), added to the block's input. */
void nc_model_graph_mobile(struct hc_model *m)
{
    static const int sum[] = {0, 4};

    nr_mb_begin(m, "graph_mobile", 3, 5, 5, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_RELU, 1);            /* 0 */
    nr_mb_conv(m, 6, 1, 1, 1, 1, 0, HC_ACT_RELU6, 1);           /* 1 */
    nr_mb_dwconv(m, 1, 3, 3, 1, 1, 1, HC_ACT_LINEAR, 1);        /* 2 */
    nr_mb_relu(m, HC_LAYER_RELU, 6.0f, 0, 0);                   /* 3 */
    nr_mb_conv(m, 3, 1, 1, 1, 1, 0, HC_ACT_LINEAR, 0);          /* 4 */
    nr_mb_merge(m, HC_LAYER_ADD, 0, 2, sum);                    /* 5 */
    nr_mb_flatten(m);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

/* Separable convolutions: valid with two outputs per channel and a
 * bias, then same with strides 2 on an odd image and no bias. */
void nc_model_sepconv(struct hc_model *m)
{
    nr_mb_begin(m, "separable_valid_same_s2", 3, 7, 6, 2, HC_LOSS_MSE);
    nr_mb_sepconv(m, 3, 2, 3, 2, 1, 1, 0, HC_ACT_TANH, 1);
    nr_mb_sepconv(m, 4, 1, 3, 3, 2, 2, 1, HC_ACT_LINEAR, 0);
    nr_mb_flatten(m);
    nr_mb_dense(m, 2, HC_ACT_SIGMOID, 1);
}

/* Xception-style: a conv, separable conv, layer norm on the channels
 * (ConvNeXt's), a 1×1 projection of the block's input added to it. */
void nc_model_graph_xception(struct hc_model *m)
{
    static const int sum[] = {2, 4};

    nr_mb_begin(m, "graph_xception", 3, 5, 5, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_TANH, 1);            /* 0 */
    nr_mb_sepconv(m, 4, 1, 3, 3, 1, 1, 1, HC_ACT_GELU, 1);      /* 1 */
    nr_mb_layernorm(m, 1e-3f, 1, 1);                            /* 2 */
    nr_mb_read(0);
    nr_mb_conv(m, 4, 1, 1, 1, 1, 0, HC_ACT_LINEAR, 0);          /* 3 */
    nr_mb_sepconv(m, 4, 2, 1, 1, 1, 1, 0, HC_ACT_LINEAR, 1);    /* 4 */
    nr_mb_merge(m, HC_LAYER_ADD, 0, 2, sum);                    /* 5 */
    nr_mb_flatten(m);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

/* Layer norm over a flat input with gamma only, then over channels with
 * beta only and a large epsilon. */
void nc_model_layernorm(struct hc_model *m)
{
    nr_mb_begin(m, "layernorm_flat_image", 3, 3, 3, 4, HC_LOSS_MSE);
    nr_mb_layernorm(m, 0.5f, 0, 1);
    nr_mb_conv(m, 3, 2, 2, 1, 1, 0, HC_ACT_TANH, 1);
    nr_mb_flatten(m);
    nr_mb_layernorm(m, 1e-3f, 1, 0);
    nr_mb_dense(m, 2, HC_ACT_SIGMOID, 1);
}

/* Two inputs: an image through a conv and a vector through a dense,
 * concatenated flat; the vector also read by a second dense (fan-out
 * of an input). */
void nc_model_two_inputs(struct hc_model *m)
{
    static const int cat[] = {1, 2, 3};
    int vec;

    nr_mb_begin(m, "two_inputs", 3, 4, 4, 2, HC_LOSS_SPARSE_CCE);
    snprintf(m->inputs[0].name, sizeof m->inputs[0].name, "image");
    vec = nr_mb_input(m, "vector", 1, 5, 0, 0);
    nr_mb_conv(m, 2, 3, 3, 1, 1, 0, HC_ACT_RELU, 1);            /* 0 */
    nr_mb_flatten(m);                                           /* 1 */
    nr_mb_read(vec);
    nr_mb_dense(m, 4, HC_ACT_TANH, 1);                          /* 2 */
    nr_mb_read(vec);
    nr_mb_dense(m, 3, HC_ACT_LINEAR, 0);                        /* 3 */
    nr_mb_merge(m, HC_LAYER_CONCATENATE, -1, 3, cat);           /* 4 */
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

/* Batch norm: after a conv (an image's channels, with gamma and beta)
 * feeding a residual add, and on a dense layer's vector without scale. */
void nc_model_batchnorm(struct hc_model *m)
{
    static const int sum[] = {1, 3};

    nr_mb_begin(m, "batchnorm", 3, 5, 5, 2, HC_LOSS_SPARSE_CCE);
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_LINEAR, 0);          /* 0 */
    nr_mb_batchnorm(m, 1, 1, 1e-3f);                            /* 1 */
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_TANH, 0);            /* 2 */
    nr_mb_batchnorm(m, 1, 1, 1e-3f);                            /* 3 */
    nr_mb_merge(m, HC_LAYER_ADD, 0, 2, sum);                    /* 4 */
    nr_mb_flatten(m);
    nr_mb_dense(m, 4, HC_ACT_SIGMOID, 1);
    nr_mb_batchnorm(m, 0, 1, 1e-2f);
    nr_mb_dense(m, 3, HC_ACT_SOFTMAX, 1);
}

/* DenseNet-style: convs concatenated on the channels, twice; a conv read
 * by a max-pool and by a flatten (so the pool may not fuse with it), the
 * two concatenated flat. */
void nc_model_graph_concat(struct hc_model *m)
{
    static const int cat1[] = {0, 1}, cat2[] = {0, 1, 3}, flat[] = {7, 8};

    nr_mb_begin(m, "graph_concat", 3, 4, 4, 2, HC_LOSS_MSE);
    nr_mb_conv(m, 2, 3, 3, 1, 1, 1, HC_ACT_TANH, 1);            /* 0 */
    nr_mb_conv(m, 3, 3, 3, 1, 1, 1, HC_ACT_RELU, 1);            /* 1 */
    nr_mb_merge(m, HC_LAYER_CONCATENATE, -1, 2, cat1);          /* 2 */
    nr_mb_conv(m, 2, 1, 1, 1, 1, 0, HC_ACT_SIGMOID, 1);         /* 3 */
    nr_mb_merge(m, HC_LAYER_CONCATENATE, 3, 3, cat2);           /* 4 */
    nr_mb_conv(m, 2, 3, 3, 1, 1, 1, HC_ACT_RELU, 1);            /* 5 */
    nr_mb_pool(m, 2, 2, 2, 2, 0);                               /* 6 */
    nr_mb_flatten(m);                                           /* 7 */
    nr_mb_read(5);
    nr_mb_flatten(m);                                           /* 8 */
    nr_mb_merge(m, HC_LAYER_CONCATENATE, -1, 2, flat);          /* 9 */
    nr_mb_dense(m, 3, HC_ACT_SIGMOID, 1);
}

/* Flat merges: subtract, average of three (one reading the input
 * directly), an activation reading a node with several readers, a
 * concatenation of vectors, products of two and of three. */
void nc_model_graph_merges(struct hc_model *m)
{
    static const int sub[] = {0, 1}, avg[] = {2, 3, 4}, cat[] = {5, 1},
                     mul2[] = {6, 6}, mul3[] = {7, 6, 6};

    nr_mb_begin(m, "graph_merges", 1, 6, 0, 0, HC_LOSS_MSE);
    nr_mb_dense(m, 5, HC_ACT_TANH, 1);                          /* 0 */
    nr_mb_dense(m, 5, HC_ACT_SIGMOID, 1);                       /* 1 */
    nr_mb_merge(m, HC_LAYER_SUBTRACT, 0, 2, sub);               /* 2 */
    nr_mb_read(0);
    nr_mb_act(m, HC_ACT_RELU);                                  /* 3 */
    nr_mb_read(-1);
    nr_mb_dense(m, 5, HC_ACT_LINEAR, 1);                        /* 4 */
    nr_mb_merge(m, HC_LAYER_AVERAGE, 0, 3, avg);                /* 5 */
    nr_mb_merge(m, HC_LAYER_CONCATENATE, 1, 2, cat);            /* 6 */
    nr_mb_merge(m, HC_LAYER_MULTIPLY, 0, 2, mul2);              /* 7 */
    nr_mb_merge(m, HC_LAYER_MULTIPLY, 0, 3, mul3);              /* 8 */
    nr_mb_dense(m, 3, HC_ACT_SIGMOID, 1);
}

/* ---- the fixture and the check ---- */

void nc_open(struct nc_fixture *f, nc_model_fn fn, int B, int max_batch,
             uint64_t seed)
{
    uint64_t s = seed;
    size_t n_in = 0;
    int i, rv;

    memset(f, 0, sizeof *f);
    fn(&f->m);
    f->be = nr_cpu();
    rv = wk_net_new(&f->m, f->be, max_batch, &f->net);
    if (rv)
        printf("\n    wk_net_new: %s", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
    f->B = B;
    f->N = wk_net_output_size(f->net);
    for (i = 0; i < f->m.n_inputs; i++)     /* a sample's row (nn.h) */
        n_in += nr_shp_size(&f->m.inputs[i].shape);
    CU_ASSERT_EQUAL(wk_net_input_size(f->net), n_in);
    f->params = nr_falloc(f->m.n_params);
    f->grads = nr_falloc(f->m.n_params);
    f->x = nr_falloc((size_t)max_batch * n_in);
    f->targets = nr_falloc((size_t)max_batch * f->N);
    f->labels = calloc((size_t)max_batch, sizeof *f->labels);
    CU_ASSERT_FATAL(f->labels != NULL);
    nr_rand_params(&f->m, f->params, &s);
    nr_fill_rand(f->x, (size_t)max_batch * n_in, &s, -1, 1);
    nr_fill_rand(f->targets, (size_t)max_batch * f->N, &s, 0, 1);
    for (i = 0; i < max_batch; i++)
        f->labels[i] = (int)(nr_rng_next(&s) % f->N);
    if (f->m.loss == HC_LOSS_CCE)       /* one-hot, as the worker makes */
        for (i = 0; i < max_batch * (int)f->N; i++)
            f->targets[i] = f->labels[i / f->N] == i % (int)f->N;
}

void nc_close(struct nc_fixture *f)
{
    wk_net_free(f->net);
    wk_backend_free(f->be);
    free(f->params);
    free(f->grads);
    free(f->x);
    free(f->targets);
    free(f->labels);
}

/* Mean loss of the net (training forward with the dropout seed reset so
 * every call draws the same masks). */
static double net_loss(struct nc_fixture *f, const float *params)
{
    double sum = 0;

    wk_net_set_seed(f->net, 77);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(f->net, params, f->x, f->B, 1), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_loss(f->net, f->labels, f->targets, &sum,
                                      NULL), HC_OK);
    return sum / f->B;
}

/* After a training forward: the dropout masks as doubles for nr_ref_run. */
static void net_masks(struct nc_fixture *f, double **masks)
{
    int l;

    for (l = 0; l < f->m.n_layers; l++) {
        size_t n = (size_t)f->B * nr_shp_size(&f->m.layers[l].out), i;
        uint64_t seed = wk_net_dropout_seed(f->net, l);
        float *ones, *mk;

        masks[l] = NULL;
        if (f->m.layers[l].type != HC_LAYER_DROPOUT || !seed)
            continue;
        ones = nr_falloc(n);
        mk = nr_falloc(n);
        for (i = 0; i < n; i++)
            ones[i] = 1.0f;
        wk_be_dropout_forward(f->be, ones, mk, n, f->m.layers[l].rate, seed);
        masks[l] = nr_dalloc(n);
        for (i = 0; i < n; i++)
            masks[l][i] = mk[i];
        free(ones);
        free(mk);
    }
}

/* Central difference of the net's mean loss in parameter i, step h. */
static double fd_float(struct nc_fixture *f, float *pp, size_t i, float h)
{
    float keep = pp[i], hp, hm;
    double lp, lm;

    pp[i] = keep + h;
    hp = pp[i];
    lp = net_loss(f, pp);
    pp[i] = keep - h;
    hm = pp[i];
    lm = net_loss(f, pp);
    pp[i] = keep;
    return (lp - lm) / ((double)hp - hm);
}

/* (n_params) 1 where a parameter is a moving statistic. */
static unsigned char *moving_mask(const struct hc_model *m)
{
    unsigned char *k = calloc(m->n_params + 1, 1);
    size_t at = 0;

    CU_ASSERT_FATAL(k != NULL);
    for (int v = 0; v < m->n_vars; v++) {
        if (m->vars[v].moving)
            memset(k + at, 1, m->vars[v].size);
        at += m->vars[v].size;
    }
    return k;
}

void nc_check_model(nc_model_fn fn, int B, size_t n_fd_ref, size_t n_fd,
                    int n_dir)
{
    struct nc_fixture f;
    double *masks[HC_MODEL_MAX_LAYERS], *P, *G, *out, *fd, *gsel, ref_loss,
        loss_mean, worst = 0;
    struct nr_batch rb;
    float *netout, *pp;
    unsigned char *moving;
    size_t n, i, k, step, cnt, outliers = 0, worst_at = 0;
    uint64_t s = 99;
    char what[96];
    int correct, d, l, kinks = 0;

    nc_open(&f, fn, B, B, 11);
    n = f.m.n_params;
    printf("\n  model %s, %zu parameters, batch %d", f.m.name, n, B);
    wk_net_set_seed(f.net, 77);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels,
                                      f.targets, B, f.grads, &loss_mean,
                                      &correct), HC_OK);
    net_masks(&f, masks);
    rb.B = B;
    rb.x = f.x;
    rb.labels = f.labels;
    rb.targets = f.targets;
    rb.masks = masks;
    P = nr_dalloc(n);
    G = nr_dalloc(n);
    out = nr_dalloc((size_t)B * f.N);
    netout = nr_falloc((size_t)B * f.N);
    for (i = 0; i < n; i++)
        P[i] = f.params[i];
    ref_loss = nr_ref_run(&f.m, P, &rb, G, out);
    CU_ASSERT(nr_cmp_report("loss vs reference", NULL, &loss_mean, &ref_loss, 1,
                            1e-6, 1e-5));
    CU_ASSERT_EQUAL(wk_net_output(f.net, netout), HC_OK);
    CU_ASSERT(nr_cmp_report("output vs reference", netout, NULL, out,
                            (size_t)B * f.N, 1e-6, 1e-4));
    CU_ASSERT(nr_cmp_report("gradients vs reference", f.grads, NULL, G, n, 1e-6,
                            1e-3));
    if (f.m.loss == HC_LOSS_SPARSE_CCE) {
        int want = 0, b;

        for (b = 0; b < B; b++) {
            size_t j, arg = 0;

            for (j = 1; j < f.N; j++)
                if (out[b * f.N + j] > out[b * f.N + arg])
                    arg = j;
            want += (int)arg == f.labels[b];
        }
        CU_ASSERT_EQUAL(correct, want);
    }

    /* the reference itself against double central differences (but for
     * batch norm's moving statistics: their slots carry the batch's
     * moments, checked against the reference above, no gradient) */
    moving = moving_mask(&f.m);
    step = n_fd_ref && n_fd_ref < n ? n / n_fd_ref : 1;
    cnt = (n + step - 1) / step;
    fd = nr_dalloc(cnt);
    gsel = nr_dalloc(cnt);
    for (i = 0, k = 0; i < n; i += step, k++) {
        double keep = P[i], lp, lm;

        if (moving[i])
            continue;       /* fd[k] = gsel[k] = 0 */

        P[i] = keep + 1e-6;
        lp = nr_ref_run(&f.m, P, &rb, NULL, NULL);
        P[i] = keep - 1e-6;
        lm = nr_ref_run(&f.m, P, &rb, NULL, NULL);
        P[i] = keep;
        fd[k] = (lp - lm) / 2e-6;
        gsel[k] = G[i];
    }
    snprintf(what, sizeof what, "reference vs double FD (%zu params)", cnt);
    CU_ASSERT(nr_cmp_report(what, NULL, gsel, fd, cnt, 1e-7, 1e-5));
    free(fd);
    free(gsel);

    /*
     * The net against float central differences of its own forward, step
     * 1e-3, retried at 2.5e-4 when they disagree. With relu or max-pool a
     * kink closer to the point than the step makes the difference the mean
     * of the two one-sided slopes while the gradient is one of them; such
     * outliers are counted and allowed for 2% of the parameters (the tight
     * checks against the reference above leave no room for a real error).
     */
    for (l = 0; l < f.m.n_layers; l++)
        kinks |= f.m.layers[l].act == HC_ACT_RELU ||
                 f.m.layers[l].act == HC_ACT_RELU6 ||
                 f.m.layers[l].type == HC_LAYER_MAXPOOL2D ||
                 f.m.layers[l].type == HC_LAYER_RELU ||
                 f.m.layers[l].type == HC_LAYER_LEAKY_RELU;
    step = n_fd && n_fd < n ? n / n_fd : 1;
    cnt = (n + step - 1) / step;
    pp = nr_falloc(n);
    memcpy(pp, f.params, n * sizeof *pp);
    for (i = 0; i < n; i += step) {
        double g = f.grads[i], e, diff;

        if (moving[i])
            continue;
        e = fd_float(&f, pp, i, 1e-3f);

        if (fabs(g - e) > 2e-4 + 2e-2 * fabs(e))
            e = fd_float(&f, pp, i, 2.5e-4f);
        diff = fabs(g - e);
        if (diff > 2e-4 + 2e-2 * fabs(e)) {
            outliers++;
            printf("\n      outlier: parameter %zu gradient %.6g, FD %.6g", i,
                   g, e);
            continue;
        }
        if (diff > worst) {
            worst = diff;
            worst_at = i;
        }
    }
    printf("\n    %-44s max |diff| %.3g (at %zu), %zu outliers (%zu allowed)",
           "net vs float FD", worst, worst_at, outliers,
           kinks ? cnt / 50 : 0);
    CU_ASSERT(outliers <= (kinks ? cnt / 50 : 0));

    /* directional derivatives: every parameter at once */
    for (d = 0; d < n_dir; d++) {
        float *vp = nr_falloc(n), *vm = nr_falloc(n);
        double dot = 0, lp, lm, fdd, dn = 0;

        for (i = 0; i < n; i++) {
            double v = moving[i] ? 0 : nr_urand(&s, -1, 1);

            vp[i] = (float)(f.params[i] + 1e-3 * v);
            vm[i] = (float)(f.params[i] - 1e-3 * v);
            dot += (double)f.grads[i] * ((double)vp[i] - vm[i]);
            dn += ((double)vp[i] - vm[i]) * ((double)vp[i] - vm[i]);
        }
        lp = net_loss(&f, vp);
        lm = net_loss(&f, vm);
        fdd = lp - lm;
        snprintf(what, sizeof what, "directional FD %d (|step| %.2g)", d,
                 sqrt(dn));
        CU_ASSERT(nr_cmp_report(what, NULL, &dot, &fdd, 1, 2e-6, 2e-2));
        free(vp);
        free(vm);
    }
    for (l = 0; l < f.m.n_layers; l++)
        free(masks[l]);
    free(moving);
    free(pp);
    free(P);
    free(G);
    free(out);
    free(netout);
    nc_close(&f);
}

void nc_add_suite(const char *name, const struct nc_test *t, size_t n)
{
    CU_pSuite s = CU_add_suite(name, NULL, NULL);
    size_t i;

    for (i = 0; i < n; i++)
        CU_add_test(s, t[i].name, t[i].fn);
}
