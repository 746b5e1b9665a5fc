/*
 * nn_impl.h — the inside of a wk_net, shared by the files that build it
 * (nn_build.c) and run it (nn.c). Nothing outside worker/nn*.c includes
 * this; the contract is nn.h.
 *
 * A net runs on one or more backends (explicit placement): each layer
 * names the backend it runs on (nn_layer.dev, an index into wk_net.devs)
 * and keeps every buffer it writes there. Where consecutive layers sit on
 * different backends the activation, and in backward its gradient, cross
 * between them (nn.c, cross()).
 */
#ifndef WK_NN_IMPL_H
#define WK_NN_IMPL_H

#include "nn.h"

#define NO_VAR ((size_t)-1)

/* Distinct backends one net may run on. */
#define NN_MAX_DEVS 16

/* One backend of the net and what lives on it. */
struct nn_dev {
    struct wk_backend *be;
    int all_params;         /* holds every layer with parameters: its
                             * parameter layout is the host one (one
                             * transfer each way) */
    size_t n_params;        /* floats of parameters its layers own */
    float *params_d;        /* (n_params) non-host backends only */
    float *grads_d;         /* (n_params) non-host backends only */
    size_t max_act;         /* floats per sample of its largest activation */
    float *dbuf[2];         /* (max_B, max_act) activation gradients */
};

struct nn_layer {
    enum hc_layer_type type;
    char name[HC_NAME_MAX + 32];   /* "layer 3 (dense)", for messages */
    int dev;                /* index into wk_net.devs */
    struct wk_backend *be;  /* = devs[dev].be */
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
    size_t off_w, off_b;    /* offsets in the host params, NO_VAR if none */
    size_t n_w, n_b;        /* their sizes (0 with NO_VAR) */
    size_t doff_w, doff_b;  /* the same in the device's params / grads */
    int cross_in;           /* input comes from another backend by copy */
    float *xin;             /* (max_B, in_size) that copy, cross_in only */
    float *out;             /* (max_B, out_size) own buffer, or NULL */
    float *cols;            /* (max_B·OH·OW, kh·kw·C) conv2d workspace */
    int32_t *idx;           /* (max_B, out_size) maxpool2d argmax */
    const float *x;         /* input of the last forward (own backend) */
    const float *y;         /* output of the last forward (own or alias) */
    uint64_t seed;          /* dropout seed of the last forward, 0 = off */
};

struct wk_net {
    int n_devs;
    struct nn_dev devs[NN_MAX_DEVS];
    struct wk_backend *in_be;   /* backend of the first layer */
    struct wk_backend *out_be;  /* backend of the last layer (loss) */
    int n_layers;
    struct nn_layer layers[HC_MODEL_MAX_LAYERS];
    int max_batch;
    int first_param;        /* backward stops at this layer */
    size_t in_size, out_size, n_params;
    enum hc_loss loss;
    int fused;              /* softmax output + sparse CCE */
    float *probs;           /* (max_B, N) fused dense output: softmax(z) */
    float *loss_d, *hit_d;  /* (max_B) per-sample loss and hit, on out_be */
    float *loss_h, *hit_h;  /* (max_B) host copies (device backends) */
    float *x_d;             /* (max_B, in_size) on in_be, device only */
    float *targets_d;       /* (max_B, N) on out_be, device only, MSE */
    int *labels_d;          /* (max_B)    on out_be, device only, CCE */
    float *stage_h;         /* (max_B, max crossing size) host staging of
                             * a copy between two device backends */
    void (*on_grads)(void *arg, size_t from); /* wk_net_on_grads */
    void *on_grads_arg;
    /* state of the current step */
    int B;
    int stage;              /* 0 nothing, 1 forward done, 2 loss done */
    const float *logits;    /* (B, N) fused: z */
    const float *output;    /* (B, N) network output */
    float *probs_cur;       /* (B, N) fused: softmax(z), = output */
    const int *labels_cur;  /* backend memory */
    const float *targets_cur;
    uint64_t seed, counter;
    size_t first_sample;    /* dropout masks start at this sample */
};

#endif
