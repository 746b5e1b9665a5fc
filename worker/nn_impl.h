/*
 * nn_impl.h — the inside of a wk_net, shared by the files that build it
 * (nn_build.c) and run it (nn.c). Nothing outside worker/nn*.c includes
 * this; the contract is nn.h.
 */
#ifndef WK_NN_IMPL_H
#define WK_NN_IMPL_H

#include "nn.h"

#define NO_VAR ((size_t)-1)

struct nn_layer {
    enum hc_layer_type type;
    char name[HC_NAME_MAX + 32];   /* "layer 3 (dense)", for messages */
    enum hc_act act;        /* applied in forward; LINEAR for the fused
                             * softmax of the output */
    int in_size, out_size;  /* floats per sample */
    int out_c;              /* last dimension of the output (row length) */
    struct wk_geom g;       /* conv2d / maxpool2d, g.B set per call */
    int units;              /* dense */
    float rate;             /* dropout */
    int direct;             /* conv2d 1×1, stride 1: the input is the cols */
    int pre_pool;           /* conv2d feeding a maxpool2d that applies its
                             * bias and activation (nn_build.c,
                             * fuse_conv_pool) */
    int post_act;           /* maxpool2d applying act and the bias at off_b
                             * of the conv2d before it */
    size_t off_w, off_b;    /* offsets in params, NO_VAR if none */
    float *out;             /* (max_B, out_size) own buffer, or NULL */
    float *cols;            /* (max_B·OH·OW, kh·kw·C) conv2d workspace */
    int32_t *idx;           /* (max_B, out_size) maxpool2d argmax */
    const float *y;         /* output of the last forward (own or alias) */
    uint64_t seed;          /* dropout seed of the last forward, 0 = off */
};

struct wk_net {
    struct wk_backend *be;
    int n_layers;
    struct nn_layer layers[HC_MODEL_MAX_LAYERS];
    int max_batch;
    int first_param;        /* backward stops at this layer */
    size_t in_size, out_size, n_params;
    enum hc_loss loss;
    int fused;              /* softmax output + sparse CCE */
    float *probs;           /* (max_B, N) fused dense output: softmax(z) */
    float *dbuf[2];         /* (max_B, max layer size) activation grads */
    float *loss_d, *hit_d;  /* (max_B) per-sample loss and hit */
    float *loss_h, *hit_h;  /* (max_B) host copies (device backends) */
    float *x_d;             /* (max_B, in_size)   device backends only */
    float *params_d;        /* (n_params)         device backends only */
    float *grads_d;         /* (n_params)         device backends only */
    float *targets_d;       /* (max_B, N)         device backends, MSE */
    int *labels_d;          /* (max_B)            device backends, CCE */
    /* state of the current step */
    int B;
    int stage;              /* 0 nothing, 1 forward done, 2 loss done */
    const float *x_cur;     /* input of the last forward (backend memory) */
    const float *logits;    /* (B, N) fused: z */
    const float *output;    /* (B, N) network output */
    float *probs_cur;       /* (B, N) fused: softmax(z), = output */
    const int *labels_cur;  /* backend memory */
    const float *targets_cur;
    uint64_t seed, counter;
};

#endif
