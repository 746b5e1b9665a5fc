/*
 * backend_cuda.h — the CUDA backend: the ops table of backend.h on one
 * NVIDIA GPU (device memory, one stream, cuBLAS for the matrix products,
 * kernels for the rest). Built only when nvcc is found (the Makefile then
 * defines HETPS_CUDA); device.c is the one caller outside the backend.
 *
 * Nothing here needs a GPU, a driver or the CUDA libraries at run time:
 * the CUDA runtime is linked statically, cuBLAS is loaded with dlopen when
 * the first CUDA backend is created, and a machine without a driver or a
 * GPU simply has 0 CUDA devices.
 *
 * Compute ops are asynchronous on the backend's stream; their first
 * failure (a CUDA or cuBLAS call, naming the call and the device) is
 * recorded and returned by the table's check op, which also waits for the
 * queued work. upload/download/copy return their own failures at once.
 */
#ifndef WK_BACKEND_CUDA_H
#define WK_BACKEND_CUDA_H

#include <stddef.h>

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of CUDA devices this process can use; 0 when the machine has no
 * GPU or no driver (said once in the log: "no CUDA device found: using the
 * CPU"). The count is taken once and cached. */
int wk_cuda_device_count(void);

/* Name (truncated to len, NUL-terminated), global memory in bytes and
 * compute capability of CUDA device `device`; any output may be NULL.
 * HC_ERR_INVAL for a device out of range, HC_ERR_DEVICE when CUDA fails. */
int wk_cuda_device_info(int device, char *name, size_t len, size_t *mem_bytes,
                        int *cc_major, int *cc_minor);

/* Open a CUDA backend on device `device` (host_memory = 0, name "cuda:N"):
 * a stream, a cuBLAS handle bound to it and a pinned staging buffer.
 * Errors: HC_ERR_INVAL (device out of range: the message says how many
 * devices the machine has), HC_ERR_UNSUPPORTED (cuBLAS cannot be loaded),
 * HC_ERR_NOMEM, HC_ERR_DEVICE. Free with wk_backend_free. */
int wk_backend_cuda_new(int device, struct wk_backend **out);

/* Page-locked host memory of `bytes` bytes, usable by every GPU of the
 * process (cudaHostAlloc, portable): a backend's upload and download copy
 * straight from and to it at the bus's speed, where pageable memory goes
 * through the backend's staging buffer (a memcpy more, and no overlap).
 * NULL when CUDA refuses (no device, or the memory cannot be locked): the
 * caller falls back to malloc. Free with wk_cuda_host_free. */
void *wk_cuda_host_alloc(size_t bytes);

/* 1 when p is memory of wk_cuda_host_alloc (or otherwise page-locked for
 * CUDA), 0 when it is plain host memory. */
int wk_cuda_host_pinned(const void *p);

/* Free memory of wk_cuda_host_alloc; NULL is ignored. */
void wk_cuda_host_free(void *p);

#ifdef __cplusplus
}
#endif

#endif
