/*
 * cuda_impl.cuh — what the two halves of the CUDA backend share (internal:
 * only the .cu files of worker/ include it): the backend's context, its first-error
 * record, and the compute ops kernels_cuda.cu implements for the table in
 * backend_cuda.cu.
 */
#ifndef WK_CUDA_IMPL_CUH
#define WK_CUDA_IMPL_CUH

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"

struct cuda_ctx {
    int dev;                    /* CUDA device number */
    char label[96];             /* "cuda:0 (NVIDIA H200)", for messages */
    cudaStream_t stream;        /* every op runs on it, in order */
    void *blas;                 /* cublasHandle_t bound to stream */
    void *stage;                /* pinned host staging buffer */
    size_t stage_bytes;
    float *work;                /* device scratch (partial sums) */
    size_t work_bytes;
    int err;                    /* first failure since the last check */
    char msg[512];
};

static inline struct cuda_ctx *cu_ctx(struct wk_backend *be)
{
    return (struct cuda_ctx *)be->ctx;
}

/* Record a failure of `call` (the first one since the last check wins):
 * code HC_ERR_NOMEM for cudaErrorMemoryAllocation, else HC_ERR_DEVICE.
 * `what` adds detail (may be NULL). Returns the code (HC_OK for
 * cudaSuccess, then nothing is recorded). */
int wk_cu_fail(struct wk_backend *be, cudaError_t e, const char *call,
               const char *what);
/* The same for a message built by the caller. */
int wk_cu_record(struct wk_backend *be, int code, const char *msg);

/* Make the backend's device current on this thread (recorded on failure;
 * returns nonzero then). */
int wk_cu_enter(struct wk_backend *be);

/* Record a failed kernel launch (cudaGetLastError) naming the kernel. */
void wk_cu_launched(struct wk_backend *be, const char *kernel);

/* Device scratch of at least `bytes`, grown as needed (NULL on failure,
 * recorded). Valid until the next call. */
float *wk_cu_workspace(struct wk_backend *be, size_t bytes);

/* ---- compute ops (kernels_cuda.cu); contracts in backend.h ---- */

void wk_cu_fill(struct wk_backend *be, float *x, size_t n, float v);
void wk_cu_scale(struct wk_backend *be, float *x, size_t n, float a);
void wk_cu_axpy(struct wk_backend *be, size_t n, float a, const float *x,
                float *y);
void wk_cu_reduce(struct wk_backend *be, float *dst, const float *const *src,
                  const float *w, int n_src, size_t n);
/* rows (m, n) of c with leading dimension ldc: c = beta · c (beta = 0
 * writes zeros); sgemm's k = 0 case. */
void wk_cu_scale_rows(struct wk_backend *be, float *c, int m, int n, int ldc,
                      float beta);
void wk_cu_im2col(struct wk_backend *be, const struct wk_geom *g,
                  const float *x, float *cols);
void wk_cu_col2im(struct wk_backend *be, const struct wk_geom *g,
                  const float *cols, float *dx);
void wk_cu_act_forward(struct wk_backend *be, const float *x,
                       const float *bias, float *y, int rows, int n,
                       enum hc_act act);
void wk_cu_act_backward(struct wk_backend *be, const float *y,
                        const float *dy, float *dx, int rows, int n,
                        enum hc_act act);
void wk_cu_bias_grad(struct wk_backend *be, const float *dy, int rows, int n,
                     float *db);
void wk_cu_act_bias_backward(struct wk_backend *be, const float *y, float *dy,
                             int rows, int n, enum hc_act act, float *db);
void wk_cu_xent_forward(struct wk_backend *be, const float *z,
                        const int *labels, int rows, int n, float *p,
                        float *loss, float *hit);
void wk_cu_xent_backward(struct wk_backend *be, const float *p,
                         const int *labels, int rows, int n, float scale,
                         float *dz);
void wk_cu_mse_forward(struct wk_backend *be, const float *y, const float *t,
                       int rows, int n, float *loss, float *hit);
void wk_cu_mse_backward(struct wk_backend *be, const float *y, const float *t,
                        size_t count, float scale, float *dy);
void wk_cu_maxpool_forward(struct wk_backend *be, const struct wk_geom *g,
                           const float *x, float *y, int32_t *idx);
void wk_cu_maxpool_backward(struct wk_backend *be, const struct wk_geom *g,
                            const float *dy, const int32_t *idx, float *dx);
void wk_cu_dropout_forward(struct wk_backend *be, const float *x, float *y,
                           size_t n, float rate, uint64_t seed);
void wk_cu_dropout_backward(struct wk_backend *be, const float *dy, float *dx,
                            size_t n, float rate, uint64_t seed);

#endif
