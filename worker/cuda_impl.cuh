/*
 * cuda_impl.cuh — what the two halves of the CUDA backend share (internal:
 * only the .cu files of worker/ include it): the backend's context, its first-error
 * record, and the compute ops that fill the table in backend_cuda.cu.
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

/* ---- compute ops: wk_cu_NAME for each of WK_BACKEND_COMPUTE_OPS, whose
 * contracts backend_ops.h gives. wk_cu_sgemm is in backend_cuda.cu
 * (cuBLAS), the others in kernels_cuda.cu. ---- */
#define WK_CU_DECLARE(ret, name, params, args, presence)                  \
    ret wk_cu_##name params;
WK_BACKEND_COMPUTE_OPS(WK_CU_DECLARE)
#undef WK_CU_DECLARE

/* rows (m, n) of c with leading dimension ldc: c = beta · c (beta = 0
 * writes zeros); sgemm's k = 0 case. */
void wk_cu_scale_rows(struct wk_backend *be, float *c, int m, int n, int ldc,
                      float beta);

#endif
