/*
 * nn_check.h — the networks the layer tests train, and the full check of
 * one: the model table (nc_model_*), a fixture holding a net with random
 * parameters and data, nc_check_model (the net against the double
 * reference of nn_ref.h and against finite differences), and
 * nc_add_suite (a CUnit suite from a table of tests).
 *
 * Failures are CUnit assertions (fatal ones end the current test);
 * nothing here returns an error code. Single-threaded.
 */
#ifndef HP_TEST_NN_CHECK_H
#define HP_TEST_NN_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <CUnit/CUnit.h>

#include "worker/backend.h"
#include "worker/nn.h"

/* ---- the model table ---- */

/* Builds one model into m (with nr_mb_*; m is cleared first). */
typedef void (*nc_model_fn)(struct hc_model *m);

void nc_model_conv_valid(struct hc_model *m);      /* conv valid s1 relu, CCE */
void nc_model_conv_same_s2(struct hc_model *m);    /* conv same s2 tanh, MSE */
void nc_model_two_convs(struct hc_model *m);       /* two convs + pool, CCE */
void nc_model_conv_1x1(struct hc_model *m);        /* 1x1 convs, no bias */
void nc_model_pools(struct hc_model *m);           /* overlapping, same pools */
void nc_model_pool_leftover(struct hc_model *m);   /* pool leaves a row, MSE */
void nc_model_avgpools(struct hc_model *m);       /* same and valid */
void nc_model_global_pools(struct hc_model *m);   /* zeropad, global avg */
void nc_model_global_max(struct hc_model *m);     /* conv fused into it */
void nc_model_reshapes(struct hc_model *m);       /* (N) ↔ (H, W, C) */
void nc_model_mlp_dropout(struct hc_model *m);     /* dense, dropout 0.4 */
void nc_model_activation_layers(struct hc_model *m); /* activation layers */
void nc_model_keras_acts(struct hc_model *m);      /* relu6 … hard_sigmoid,
                                                    * fused and alone */
void nc_model_cce_smooth(struct hc_model *m);      /* CCE, smoothing 0.1 */
void nc_model_cce_logits(struct hc_model *m);      /* CCE from_logits */
void nc_model_sparse_logits(struct hc_model *m);   /* sparse from_logits */
void nc_model_bce(struct hc_model *m);             /* BCE sigmoid, 0.2 */
void nc_model_bce_logits(struct hc_model *m);      /* BCE from_logits n=1 */
void nc_model_mae(struct hc_model *m);             /* MAE */
void nc_model_huber(struct hc_model *m);           /* Huber, delta 0.3 */
void nc_model_regularized(struct hc_model *m);     /* L1, L2, L1L2 */
void nc_model_relu_layers(struct hc_model *m);     /* ReLU, LeakyReLU */
void nc_model_mse_softmax(struct hc_model *m);     /* MSE on softmax */
void nc_model_mse_relu_sigmoid1(struct hc_model *m); /* MSE, one sigmoid out */
void nc_model_conv_softmax_channels(struct hc_model *m); /* + two dropouts */
void nc_model_reference(struct hc_model *m);       /* fashion_cnn */
void nc_model_graph_residual(struct hc_model *m);  /* fan-out, add */
void nc_model_graph_concat(struct hc_model *m);    /* concatenates */
void nc_model_graph_merges(struct hc_model *m);    /* the other merges */
void nc_model_dwconv(struct hc_model *m);          /* depthwise, dm 2, s2 */
void nc_model_graph_mobile(struct hc_model *m);    /* dwconv, ReLU(6), add */
void nc_model_sepconv(struct hc_model *m);         /* separable, dm 2, s2 */
void nc_model_graph_xception(struct hc_model *m);  /* separable, layernorm */
void nc_model_layernorm(struct hc_model *m);       /* flat and channels */
void nc_model_two_inputs(struct hc_model *m);      /* image + vector */
void nc_model_batchnorm(struct hc_model *m);      /* image and vector, add */

/* ---- the fixture ---- */

/* A net of one model on its own CPU backend, with random parameters,
 * inputs, labels and targets for max_batch samples; B is the batch the
 * test means to use. */
struct nc_fixture {
    struct hc_model m;
    struct wk_backend *be;
    struct wk_net *net;
    int B;
    size_t N;                   /* output values per sample */
    float *params, *grads;      /* (n_params) */
    float *x;                   /* (max_batch, input) */
    float *targets;             /* (max_batch, N) in [0, 1) */
    int *labels;                /* (max_batch) in [0, N) */
};

/* Build model fn into f and a net for up to max_batch samples; random
 * values from seed. Fatal to the test when the net cannot be made (the
 * reason printed). Release with nc_close. */
void nc_open(struct nc_fixture *f, nc_model_fn fn, int B, int max_batch,
             uint64_t seed);
void nc_close(struct nc_fixture *f);

/*
 * The full check of one model at batch B:
 *   the net's output, loss, correct count and gradients against the
 *   double reference (tight);
 *   the reference's gradients against double central differences
 *   (n_fd_ref parameters, evenly spread; all if 0);
 *   the net's gradients against float central differences (n_fd
 *   parameters, all if 0) and along n_dir random directions over all
 *   parameters at once.
 * Each comparison prints its largest difference.
 */
void nc_check_model(nc_model_fn fn, int B, size_t n_fd_ref, size_t n_fd,
                    int n_dir);

/* ---- registration ---- */

struct nc_test {
    const char *name;
    CU_TestFunc fn;
};

/* Add suite `name` with the n tests of t (for hp_test_register). */
void nc_add_suite(const char *name, const struct nc_test *t, size_t n);

#endif
