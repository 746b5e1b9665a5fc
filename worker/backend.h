/*
 * backend.h — the compute interface of a worker device.
 *
 * A backend is a table of operations plus a context pointer (ggml-backend
 * style). The CPU backend (backend_cpu.c, OpenBLAS) fills it with host
 * memory; a CUDA backend fills the same table with device pointers. Layers
 * (nn.c) call the wk_be_* wrappers below and never dereference backend
 * memory: every pointer handed to a compute op is a backend pointer
 * obtained from wk_be_alloc (or, when be->host_memory is 1, any host
 * pointer).
 *
 * Conventions for every op:
 *   - Matrices are row-major; "rows × n" means rows of n contiguous floats.
 *   - Images are NHWC: (B, H, W, C) with C fastest, like Keras.
 *   - "dx may equal dy" means the op works in place; otherwise buffers must
 *     not overlap.
 *   - Compute ops return nothing. A device that can fail asynchronously
 *     records its first failure and reports it through wk_be_check(), which
 *     the caller runs after each pass (CUDA's sticky-error model). The CPU
 *     backend never fails in a compute op.
 *   - Ops are called from one thread at a time per backend; two backends
 *     may run concurrently on different threads.
 *
 * Optional table entries may be NULL; the wrapper then supplies a generic
 * default built from required entries (noted as "optional" below).
 */
#ifndef WK_BACKEND_H
#define WK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct wk_backend;

/* Geometry of a 2-D window op (convolution or pooling) over NHWC data.
 * Padding follows Keras/TF "same": pad_total = max((OH−1)·sh + kh − H, 0),
 * pt = pad_total / 2 (the extra row goes to the bottom); "valid": pt = 0. */
struct wk_geom {
    int B, H, W, C;     /* input (B, H, W, C) */
    int kh, kw;         /* window (kernel or pool) size */
    int sh, sw;         /* strides */
    int pt, pl;         /* padding before the first row / column */
    int OH, OW;         /* output height and width */
};

/* Fill g from an input shape, window, strides and padding mode (Keras
 * formulas: valid OH = (H − kh) / sh + 1, same OH = ceil(H / sh)). Returns
 * HC_ERR_INVAL (no message) when the output would be empty. */
int wk_geom_init(struct wk_geom *g, int B, int H, int W, int C, int kh, int kw,
                 int sh, int sw, int same);

/*
 * Dropout's counter-based random numbers, identical on every backend:
 * element i of a dropout with seed s is kept iff
 *     (splitmix64(s + (i + 1) · 0x9E3779B97F4A7C15) >> 40) ≥ threshold,
 * threshold = (uint32_t)(rate · 2^24), where splitmix64(z) is the finaliser
 *     z = (z ^ (z >> 30)) · 0xBF58476D1CE4E5B9;
 *     z = (z ^ (z >> 27)) · 0x94D049BB133111EB;  z ^ (z >> 31).
 * Kept elements are scaled by 1 / (1 − rate) (inverted dropout, as Keras).
 */
uint64_t wk_dropout_hash(uint64_t seed, uint64_t i);

/* The seed whose mask starts `offset` elements into the mask of `seed`:
 * wk_dropout_hash(wk_dropout_seed_at(s, k), i) == wk_dropout_hash(s, k + i)
 * (it is s + k · 0x9E3779B97F4A7C15). A net computing rows r… of a larger
 * batch uses it to drop exactly what one net on the whole batch would. */
uint64_t wk_dropout_seed_at(uint64_t seed, uint64_t offset);

struct wk_backend_ops {
    /* ---- lifetime and memory ---- */
    void (*destroy)(struct wk_backend *be);
    /* Allocate `bytes` (> 0) of device memory, 64-byte aligned, contents
     * undefined. Returns HC_ERR_NOMEM (with a message) on failure. */
    int (*alloc)(struct wk_backend *be, size_t bytes, void **out);
    void (*free)(struct wk_backend *be, void *p);       /* NULL allowed */
    /* Host → device, device → host, device → device. Synchronous. A failure
     * returns its code (with a message) and is also recorded for check(),
     * as the reduce default relies on. */
    int (*upload)(struct wk_backend *be, void *dst, const void *src,
                  size_t bytes);
    int (*download)(struct wk_backend *be, void *dst, const void *src,
                    size_t bytes);
    int (*copy)(struct wk_backend *be, void *dst, const void *src,
                size_t bytes);
    /* Optional: wait for queued work; return and clear the first failure of
     * a compute op since the last call. NULL: never fails. */
    int (*check)(struct wk_backend *be);

    /* ---- BLAS-like ---- */
    /* C (m, n) = alpha · op(A) · op(B) + beta · C, row-major; op(A) is
     * (m, k): A is (m, lda≥k) when !ta, (k, lda≥m) when ta; likewise B.
     * beta = 0 ignores C's old contents (NaN included). */
    void (*sgemm)(struct wk_backend *be, int ta, int tb, int m, int n, int k,
                  float alpha, const float *a, int lda, const float *b,
                  int ldb, float beta, float *c, int ldc);
    void (*fill)(struct wk_backend *be, float *x, size_t n, float v);
    void (*scale)(struct wk_backend *be, float *x, size_t n, float a);
    void (*axpy)(struct wk_backend *be, size_t n, float a, const float *x,
                 float *y);                             /* y += a · x */
    /* Optional: dst = Σ_i w_i · src_i (w = NULL: all 1), n_src ≥ 1; dst may
     * equal src[0]. Default: scale/copy then axpy per source. */
    void (*reduce)(struct wk_backend *be, float *dst, const float *const *src,
                   const float *w, int n_src, size_t n);

    /* ---- convolution helpers ---- */
    /* cols (B·OH·OW, kh·kw·C) from x (B, H, W, C); column (i·kw + j)·C + c
     * of row (b·OH + oh)·OW + ow holds x[b, oh·sh − pt + i, ow·sw − pl + j,
     * c], or 0 in the padding. That column order is the Keras kernel
     * (kh, kw, in, out) flattened to a (kh·kw·in, out) matrix. */
    void (*im2col)(struct wk_backend *be, const struct wk_geom *g,
                   const float *x, float *cols);
    /* The adjoint: dx (B, H, W, C) = Σ of cols' entries over the positions
     * im2col read them from. Overwrites dx. */
    void (*col2im)(struct wk_backend *be, const struct wk_geom *g,
                   const float *cols, float *dx);

    /* ---- bias and activations (act ∈ hc_act; softmax acts on rows) ---- */
    /* y (rows, n) = act(x + bias); bias (n) may be NULL; y may equal x. */
    void (*act_forward)(struct wk_backend *be, const float *x,
                        const float *bias, float *y, int rows, int n,
                        enum hc_act act);
    /* dx = dy · act'(…), from the op's output y; dx may equal dy. Softmax:
     * dx = y ⊙ (dy − Σ_j dy_j y_j) per row. */
    void (*act_backward)(struct wk_backend *be, const float *y,
                         const float *dy, float *dx, int rows, int n,
                         enum hc_act act);
    /* db (n) = Σ over rows of dy (rows, n). Overwrites db. */
    void (*bias_grad)(struct wk_backend *be, const float *dy, int rows, int n,
                      float *db);
    /* Optional fusion: dy ← act_backward(y, dy) in place, then, if db is not
     * NULL, db = bias_grad(dy). Default: those two ops. */
    void (*act_bias_backward)(struct wk_backend *be, const float *y, float *dy,
                              int rows, int n, enum hc_act act, float *db);

    /* ---- losses (per-sample results; the caller reduces) ---- */
    /* p (rows, n) = softmax(z) per row, computed stably. If labels (rows) is
     * not NULL also loss[r] = logsumexp(z_r) − z_r[label_r] and hit[r] = 1
     * when argmax(z_r) (first maximum) equals label_r, else 0. Labels are
     * in [0, n) (the caller checks). */
    void (*xent_forward)(struct wk_backend *be, const float *z,
                         const int *labels, int rows, int n, float *p,
                         float *loss, float *hit);
    /* dz (rows, n) = scale · (p − onehot(labels)). dz may equal p. */
    void (*xent_backward)(struct wk_backend *be, const float *p,
                          const int *labels, int rows, int n, float scale,
                          float *dz);
    /* loss[r] = mean_j (y − t)²; hit[r] = accuracy as Keras picks it for
     * this loss: n = 1: (y > 0.5) == (t > 0.5); n > 1: argmax y == argmax t. */
    void (*mse_forward)(struct wk_backend *be, const float *y, const float *t,
                        int rows, int n, float *loss, float *hit);
    /* dy = scale · (y − t), elementwise over `count` floats. */
    void (*mse_backward)(struct wk_backend *be, const float *y, const float *t,
                         size_t count, float scale, float *dy);

    /* ---- pooling and dropout ---- */
    /* y (B, OH, OW, C) = max over each window (padding never wins); idx
     * holds the flat index into x of each maximum (first one on ties). */
    void (*maxpool_forward)(struct wk_backend *be, const struct wk_geom *g,
                            const float *x, float *y, int32_t *idx);
    /* dx (B, H, W, C) = scatter-add of dy at idx. Overwrites dx. */
    void (*maxpool_backward)(struct wk_backend *be, const struct wk_geom *g,
                             const float *dy, const int32_t *idx, float *dx);
    /* y = x ⊙ mask(seed) / (1 − rate), mask as wk_dropout_hash documents;
     * y may equal x. 0 ≤ rate < 1. */
    void (*dropout_forward)(struct wk_backend *be, const float *x, float *y,
                            size_t n, float rate, uint64_t seed);
    /* dx = dy ⊙ the same mask and scale; dx may equal dy. */
    void (*dropout_backward)(struct wk_backend *be, const float *dy, float *dx,
                             size_t n, float rate, uint64_t seed);
};

struct wk_backend {
    const struct wk_backend_ops *ops;
    void *ctx;              /* the implementation's state */
    char name[32];          /* "cpu", "cuda:0" */
    int host_memory;        /* 1: backend pointers are plain host memory */
};

/*
 * The CPU backend: host memory, cblas_sgemm from OpenBLAS, plain loops for
 * the rest. n_threads (≥ 1; 0 means 1) is the OpenBLAS thread count — a
 * process-wide OpenBLAS setting: creating a CPU backend sets it for every
 * CPU backend in the process (the most recent one wins). With several CPU
 * devices running concurrently keep 1 thread each (the default), which is
 * also the only setting under which OpenBLAS calls from different threads
 * run in parallel without contention. Returns HC_ERR_INVAL for n_threads
 * < 0, HC_ERR_NOMEM. Free with wk_backend_free.
 */
int wk_backend_cpu_new(int n_threads, struct wk_backend **out);

/* Destroy a backend (NULL allowed). Its buffers must be freed first. */
void wk_backend_free(struct wk_backend *be);

/* Wrappers: the entry of the table, or the generic default of an optional
 * entry. Same contracts as the table above. */
int wk_be_alloc(struct wk_backend *be, size_t bytes, void **out);
void wk_be_free(struct wk_backend *be, void *p);
int wk_be_upload(struct wk_backend *be, void *dst, const void *src,
                 size_t bytes);
int wk_be_download(struct wk_backend *be, void *dst, const void *src,
                   size_t bytes);
int wk_be_copy(struct wk_backend *be, void *dst, const void *src,
               size_t bytes);
int wk_be_check(struct wk_backend *be);
void wk_be_sgemm(struct wk_backend *be, int ta, int tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);
void wk_be_fill(struct wk_backend *be, float *x, size_t n, float v);
void wk_be_scale(struct wk_backend *be, float *x, size_t n, float a);
void wk_be_axpy(struct wk_backend *be, size_t n, float a, const float *x,
                float *y);
void wk_be_reduce(struct wk_backend *be, float *dst, const float *const *src,
                  const float *w, int n_src, size_t n);
void wk_be_im2col(struct wk_backend *be, const struct wk_geom *g,
                  const float *x, float *cols);
void wk_be_col2im(struct wk_backend *be, const struct wk_geom *g,
                  const float *cols, float *dx);
void wk_be_act_forward(struct wk_backend *be, const float *x,
                       const float *bias, float *y, int rows, int n,
                       enum hc_act act);
void wk_be_act_backward(struct wk_backend *be, const float *y, const float *dy,
                        float *dx, int rows, int n, enum hc_act act);
void wk_be_bias_grad(struct wk_backend *be, const float *dy, int rows, int n,
                     float *db);
void wk_be_act_bias_backward(struct wk_backend *be, const float *y, float *dy,
                             int rows, int n, enum hc_act act, float *db);
void wk_be_xent_forward(struct wk_backend *be, const float *z,
                        const int *labels, int rows, int n, float *p,
                        float *loss, float *hit);
void wk_be_xent_backward(struct wk_backend *be, const float *p,
                         const int *labels, int rows, int n, float scale,
                         float *dz);
void wk_be_mse_forward(struct wk_backend *be, const float *y, const float *t,
                       int rows, int n, float *loss, float *hit);
void wk_be_mse_backward(struct wk_backend *be, const float *y, const float *t,
                        size_t count, float scale, float *dy);
void wk_be_maxpool_forward(struct wk_backend *be, const struct wk_geom *g,
                           const float *x, float *y, int32_t *idx);
void wk_be_maxpool_backward(struct wk_backend *be, const struct wk_geom *g,
                            const float *dy, const int32_t *idx, float *dx);
void wk_be_dropout_forward(struct wk_backend *be, const float *x, float *y,
                           size_t n, float rate, uint64_t seed);
void wk_be_dropout_backward(struct wk_backend *be, const float *dy, float *dx,
                            size_t n, float rate, uint64_t seed);

#endif
