/*
 * nn_ref.h — what the tests of the layers (test_nn_*.c) share: random
 * numbers, a comparison that prints its largest difference, and a plain
 * double-precision reference for every op and for a whole network.
 *
 * The reference is written from the definitions with the plainest loops,
 * so a reader can check it by eye; the float backend and worker/nn.c are
 * compared against it. Models are built by hand (nr_mb_*) so the tests
 * need no JSON parser. Allocation failures end the current test through
 * CU_ASSERT_FATAL; nothing here returns an error code. Single-threaded,
 * like the CUnit programs that use it.
 */
#ifndef HP_TEST_NN_REF_H
#define HP_TEST_NN_REF_H

#include <stddef.h>
#include <stdint.h>

#include "worker/backend.h"
#include "worker/nn.h"

/* ---- random numbers, comparison, allocation ---- */

/* The next value of a splitmix64 generator whose state is *s. */
uint64_t nr_rng_next(uint64_t *s);

/* Uniform in [lo, hi), from the generator *s. */
double nr_urand(uint64_t *s, double lo, double hi);

/* x[0..n) uniform in [lo, hi). */
void nr_fill_rand(float *x, size_t n, uint64_t *s, double lo, double hi);

/*
 * Compare got (gotf when not NULL, else gotd) against want, n values:
 * each must satisfy |got − want| ≤ atol + rtol·|want| (NaN never does).
 * Prints one line naming `what` with the largest difference (and, on
 * failure, the worst value relative to its tolerance). Returns 1 when all
 * are within (also when n is 0), 0 otherwise.
 */
int nr_cmp_report(const char *what, const float *gotf, const double *gotd,
                  const double *want, size_t n, double atol, double rtol);

/* n zeroed doubles / floats (at least one); free() them. Fatal to the
 * test when memory runs out. */
double *nr_dalloc(size_t n);
float *nr_falloc(size_t n);

/* A one-thread CPU backend; wk_backend_free() it. Fatal on failure. */
struct wk_backend *nr_cpu(void);

/* ---- naive double-precision ops ---- */

/* y = act(z) over `rows` rows of n values (softmax per row). */
void nr_ref_act(enum hc_act a, const double *z, double *y, size_t rows,
                int n);

/* dz from dy through act at z, y = act(z) (the full Jacobian for
 * softmax); same layout as nr_ref_act. */
void nr_ref_dact(enum hc_act a, const double *z, const double *y,
                 const double *dy, double *dz, size_t rows, int n);

/* Keras padding of one dimension of size H, window k, stride s: the
 * padding before (top or left) and the output size. same: 1 "same",
 * 0 "valid". */
int nr_pad_before(int H, int k, int s, int same);
int nr_out_dim(int H, int k, int s, int same);

/* ---- the model builder ---- */

/*
 * Fill a struct hc_model by hand, as worker/nn_build.c would from a
 * Keras file: nr_mb_begin clears m and sets the input shape (rank 1: d0;
 * rank 3: (d0, d1, d2) = (H, W, C)), the loss and seed 7; each later call
 * appends one layer after the last, with its output shape and variables
 * (kernels Glorot-uniform, biases zeros, in the order Keras lists them).
 * Layers are named like Keras's ("dense", "dense_1", ...). The caller
 * keeps within HC_MODEL_MAX_LAYERS and the variable limit.
 */
void nr_mb_begin(struct hc_model *m, const char *name, int rank, int d0,
                 int d1, int d2, enum hc_loss loss);
void nr_mb_conv(struct hc_model *m, int F, int kh, int kw, int sh, int sw,
                int same, enum hc_act act, int use_bias);
/* A depthwise_conv2d: dm outputs per channel, its kernel (kh, kw, C, dm)
 * and bias (C·dm) named as Keras names them. */
void nr_mb_dwconv(struct hc_model *m, int dm, int kh, int kw, int sh, int sw,
                  int same, enum hc_act act, int use_bias);
/* A separable_conv2d: its depthwise kernel (kh, kw, C, dm), pointwise
 * kernel (1, 1, C·dm, F) and bias (F), as Keras names and orders them. */
void nr_mb_sepconv(struct hc_model *m, int F, int dm, int kh, int kw,
                   int sh, int sw, int same, enum hc_act act, int use_bias);
/* A layer_normalization over the last axis: gamma with scale, beta with
 * center. */
void nr_mb_layernorm(struct hc_model *m, float epsilon, int scale,
                     int center);
/* Another input of the model, named name: returns its node (−1 − q) for
 * nr_mb_read. */
int nr_mb_input(struct hc_model *m, const char *name, int rank, int d0,
                int d1, int d2);
void nr_mb_pool(struct hc_model *m, int ph, int pw, int sh, int sw,
                int same);
/* avgpool2d as nr_mb_pool; a global pool (t: globalavgpool2d or
 * globalmaxpool2d); zeropadding2d; reshape to (d0) or (d0, d1, d2). */
void nr_mb_avgpool(struct hc_model *m, int ph, int pw, int sh, int sw,
                   int same);
void nr_mb_global(struct hc_model *m, enum hc_layer_type t);
void nr_mb_zeropad(struct hc_model *m, int top, int bottom, int left,
                   int right);
void nr_mb_reshape(struct hc_model *m, int rank, int d0, int d1, int d2);
void nr_mb_flatten(struct hc_model *m);
/* A softmax dense layer also sets m->n_classes. */
void nr_mb_dense(struct hc_model *m, int units, enum hc_act act,
                 int use_bias);
void nr_mb_dropout(struct hc_model *m, float rate);
void nr_mb_act(struct hc_model *m, enum hc_act act);
/* A relu (t HC_LAYER_RELU) or leaky_relu layer with Keras's settings
 * (max_value < 0: none). */
/* A batch norm over the last axis (gamma with scale, beta with center,
 * then moving_mean and moving_variance, not trainable). */
void nr_mb_batchnorm(struct hc_model *m, int scale, int center, float eps);
void nr_mb_relu(struct hc_model *m, enum hc_layer_type t, float max_value,
                float slope, float threshold);

/* Keras's ReLU layer of s at x, written out plainly; its derivative into
 * *d when d is not NULL. */
double nr_ref_relu(const struct hc_layer_spec *s, double x, double *d);

/* Graphs: the next layer appended reads node j (a layer's index, or -1
 * the input) instead of the last layer; a merge of type t (add, subtract,
 * average, concatenate along Keras's axis) reads the n nodes src. */
void nr_mb_read(int j);
void nr_mb_merge(struct hc_model *m, enum hc_layer_type t, int axis, int n,
                 const int *src);

/* The two pieces the others are made of, for building broken models:
 * append variable "layer/what" of ndim dimensions (s0..s3) and return
 * its index; append a bare layer of type t (input = output = the last
 * output, no variables) and return it for the caller to finish. */
int nr_mb_var(struct hc_model *m, const char *layer, const char *what,
              int ndim, int s0, int s1, int s2, int s3);
struct hc_layer_spec *nr_mb_layer(struct hc_model *m, enum hc_layer_type t,
                                  enum hc_act act);

/* Values in one sample of shape s (rank 1 or 3). */
size_t nr_shp_size(const struct hc_shape *s);

/* Parameters p (n_params) for m: Glorot-like random kernels and small
 * random nonzero biases, from the generator *s. */
void nr_rand_params(const struct hc_model *m, float *p, uint64_t *s);

/* ---- the reference network in double ---- */

/* One batch for nr_ref_run; the caller owns every array. */
struct nr_batch {
    int B;
    const float *x;             /* (B, input) */
    const int *labels;          /* (B) sparse CCE */
    const float *targets;       /* (B, N) MSE */
    double *const *masks;       /* per layer: dropout scale (B, size), or
                                   NULL (no masks: dropout is identity) */
};

/*
 * Mean loss of the batch rb through model m with parameters P
 * (n_params). When G is not NULL, adds the gradient of the mean loss to
 * G (n_params; pass it zeroed). When out is not NULL, writes the network
 * output there (B, N). Every layer is computed by the plainest loops,
 * from the definition.
 */
double nr_ref_run(const struct hc_model *m, const double *P,
                  const struct nr_batch *rb, double *G, double *out);

#endif
