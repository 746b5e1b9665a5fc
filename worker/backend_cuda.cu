/*
 * backend_cuda.cu — the CUDA backend's lifetime, memory and matrix
 * products: device discovery (0 devices without a driver, said once),
 * cudaMalloc/cudaFree, synchronous uploads and downloads through a pinned
 * staging buffer on the backend's stream, cuBLAS sgemm (loaded with dlopen
 * so binaries start on machines without CUDA), the first-error record
 * behind the check op, and the ops table. The elementwise, convolution,
 * pooling and loss kernels are in kernels_cuda.cu.
 */
#include "backend_cuda.h"

#include <cublas_v2.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_impl.cuh"

extern "C" {                    /* common/ is C */
#include "err.h"
#include "log.h"
}

#define STAGE_BYTES ((size_t)8 << 20)   /* pinned staging buffer */

/* ---- the first-error record ---- */

int wk_cu_record(struct wk_backend *be, int code, const char *msg)
{
    struct cuda_ctx *c = cu_ctx(be);

    if (!c->err) {
        c->err = code;
        snprintf(c->msg, sizeof c->msg, "%s", msg);
    }
    return code;
}

int wk_cu_fail(struct wk_backend *be, cudaError_t e, const char *call,
               const char *what)
{
    char msg[512];
    int code;

    if (e == cudaSuccess)
        return HC_OK;
    cudaGetLastError();     /* clear a non-sticky error */
    code = e == cudaErrorMemoryAllocation ? HC_ERR_NOMEM : HC_ERR_DEVICE;
    snprintf(msg, sizeof msg, "%s: %s failed: %s (%s)%s%s",
             cu_ctx(be)->label, call,
             e == cudaErrorMemoryAllocation ? "out of device memory"
                                            : cudaGetErrorString(e),
             cudaGetErrorName(e), what ? "; " : "", what ? what : "");
    return wk_cu_record(be, code, msg);
}

int wk_cu_enter(struct wk_backend *be)
{
    return wk_cu_fail(be, cudaSetDevice(cu_ctx(be)->dev), "cudaSetDevice",
                      NULL);
}

void wk_cu_launched(struct wk_backend *be, const char *kernel)
{
    cudaError_t e = cudaGetLastError();

    if (e != cudaSuccess)
        wk_cu_fail(be, e, kernel, "kernel launch");
}

float *wk_cu_workspace(struct wk_backend *be, size_t bytes)
{
    struct cuda_ctx *c = cu_ctx(be);
    char what[64];
    void *p = NULL;

    if (c->work_bytes >= bytes)
        return c->work;
    if (c->work) {
        /* The old scratch may still be read by queued kernels. */
        if (wk_cu_fail(be, cudaStreamSynchronize(c->stream),
                       "cudaStreamSynchronize", NULL))
            return NULL;
        cudaFree(c->work);
        c->work = NULL;
        c->work_bytes = 0;
    }
    if (bytes < 4096)
        bytes = 4096;
    snprintf(what, sizeof what, "scratch of %zu bytes", bytes);
    if (wk_cu_fail(be, cudaMalloc(&p, bytes), "cudaMalloc", what))
        return NULL;
    c->work = (float *)p;
    c->work_bytes = bytes;
    return c->work;
}

/* ---- cuBLAS, loaded at run time ---- */

typedef cublasStatus_t (*blas_create_fn)(cublasHandle_t *);
typedef cublasStatus_t (*blas_destroy_fn)(cublasHandle_t);
typedef cublasStatus_t (*blas_stream_fn)(cublasHandle_t, cudaStream_t);
typedef cublasStatus_t (*blas_sgemm_fn)(cublasHandle_t, cublasOperation_t,
                                        cublasOperation_t, int, int, int,
                                        const float *, const float *, int,
                                        const float *, int, const float *,
                                        float *, int);

static struct {
    pthread_once_t once;
    void *lib;
    char error[256];
    blas_create_fn create;
    blas_destroy_fn destroy;
    blas_stream_fn set_stream;
    blas_sgemm_fn sgemm;
} blas = { PTHREAD_ONCE_INIT, NULL, "", NULL, NULL, NULL, NULL };

#define STR2(x) #x
#define STR(x) STR2(x)
#define BLAS_SONAME "libcublas.so." STR(CUBLAS_VER_MAJOR)

static void blas_load(void)
{
    static const char *const names[] = {
        BLAS_SONAME, "/usr/local/cuda/lib64/" BLAS_SONAME,
    };
    const char *why = "";
    size_t i;

    for (i = 0; i < sizeof names / sizeof names[0] && !blas.lib; i++) {
        blas.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!blas.lib && i == 0) {
            why = dlerror();
            snprintf(blas.error, sizeof blas.error, "%s", why ? why : "");
        }
    }
    if (!blas.lib) {
        snprintf(blas.error + strlen(blas.error),
                 sizeof blas.error - strlen(blas.error),
                 " — install the CUDA %d cuBLAS library or use cpu",
                 CUBLAS_VER_MAJOR);
        return;
    }
    blas.create = (blas_create_fn)dlsym(blas.lib, "cublasCreate_v2");
    blas.destroy = (blas_destroy_fn)dlsym(blas.lib, "cublasDestroy_v2");
    blas.set_stream = (blas_stream_fn)dlsym(blas.lib, "cublasSetStream_v2");
    blas.sgemm = (blas_sgemm_fn)dlsym(blas.lib, "cublasSgemm_v2");
    if (!blas.create || !blas.destroy || !blas.set_stream || !blas.sgemm) {
        snprintf(blas.error, sizeof blas.error,
                 "%s lacks cublasCreate_v2/cublasSgemm_v2", BLAS_SONAME);
        dlclose(blas.lib);
        blas.lib = NULL;
    }
}

static const char *blas_status(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "out of device memory";
    case CUBLAS_STATUS_INVALID_VALUE: return "invalid value";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    case CUBLAS_STATUS_MAPPING_ERROR: return "mapping error";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "execution failed";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "internal error";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "not supported";
    default: return "unknown status";
    }
}

static int blas_fail(struct wk_backend *be, cublasStatus_t s, const char *call)
{
    char msg[256];

    if (s == CUBLAS_STATUS_SUCCESS)
        return HC_OK;
    snprintf(msg, sizeof msg, "%s: %s failed: %s (status %d)",
             cu_ctx(be)->label, call, blas_status(s), (int)s);
    return wk_cu_record(be, s == CUBLAS_STATUS_ALLOC_FAILED ? HC_ERR_NOMEM
                                                            : HC_ERR_DEVICE,
                        msg);
}

/* ---- devices ---- */

static struct {
    pthread_once_t once;
    int count;
} devices = { PTHREAD_ONCE_INIT, 0 };

static void count_devices(void)
{
    cudaError_t e = cudaGetDeviceCount(&devices.count);

    if (e != cudaSuccess || devices.count < 1) {
        devices.count = 0;
        cudaGetLastError();
        hc_info("no CUDA device found (%s): using the CPU",
                e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    }
}

extern "C" int wk_cuda_device_count(void)
{
    pthread_once(&devices.once, count_devices);
    return devices.count;
}

extern "C" int wk_cuda_device_info(int device, char *name, size_t len,
                                   size_t *mem_bytes, int *cc_major,
                                   int *cc_minor)
{
    struct cudaDeviceProp p;
    int n = wk_cuda_device_count();
    cudaError_t e;

    if (device < 0 || device >= n)
        return hc_err_set(HC_ERR_INVAL,
                          "gpu:%d: this machine has %d CUDA device%s", device,
                          n, n == 1 ? "" : "s");
    if ((e = cudaGetDeviceProperties(&p, device)) != cudaSuccess)
        return hc_err_set(HC_ERR_DEVICE,
                          "gpu:%d: cudaGetDeviceProperties failed: %s",
                          device, cudaGetErrorString(e));
    if (name && len)
        snprintf(name, len, "%s", p.name);
    if (mem_bytes)
        *mem_bytes = p.totalGlobalMem;
    if (cc_major)
        *cc_major = p.major;
    if (cc_minor)
        *cc_minor = p.minor;
    return HC_OK;
}

/* ---- memory ---- */

/* The recorded failure as the op's return value, with its message. */
static int fail_now(struct wk_backend *be, int rv)
{
    return rv ? hc_err_set(rv, "%s", cu_ctx(be)->msg) : HC_OK;
}

static void cuda_destroy(struct wk_backend *be)
{
    struct cuda_ctx *c = cu_ctx(be);

    if (c) {
        cudaSetDevice(c->dev);
        if (c->stream)
            cudaStreamSynchronize(c->stream);
        if (c->blas)
            blas.destroy((cublasHandle_t)c->blas);
        cudaFreeHost(c->stage);
        cudaFree(c->work);
        if (c->stream)
            cudaStreamDestroy(c->stream);
        cudaGetLastError();
        free(c);
    }
    free(be);
}

static int cuda_alloc(struct wk_backend *be, size_t bytes, void **out)
{
    char what[64];
    int rv;

    *out = NULL;
    if ((rv = wk_cu_enter(be)))
        return fail_now(be, rv);
    snprintf(what, sizeof what, "%zu bytes requested", bytes);
    /* cudaMalloc returns 256-byte aligned memory. */
    return fail_now(be, wk_cu_fail(be, cudaMalloc(out, bytes ? bytes : 1),
                                   "cudaMalloc", what));
}

static void cuda_free(struct wk_backend *be, void *p)
{
    if (!p || wk_cu_enter(be))
        return;
    /* cudaFree waits for the device; a failure is recorded for check. */
    wk_cu_fail(be, cudaFree(p), "cudaFree", NULL);
}

/* Host ↔ device: straight from page-locked host memory (both ends of the
 * range in it), else through the pinned staging buffer, chunk by chunk. */
static int cuda_transfer(struct wk_backend *be, void *dst, const void *src,
                         size_t bytes, int to_device)
{
    struct cuda_ctx *c = cu_ctx(be);
    const char *host = (const char *)(to_device ? src : dst);
    size_t off, n;
    int rv;

    if (!bytes)
        return HC_OK;
    if ((rv = wk_cu_enter(be)))
        return fail_now(be, rv);
    if (wk_cuda_host_pinned(host) && wk_cuda_host_pinned(host + bytes - 1)) {
        rv = wk_cu_fail(be, cudaMemcpyAsync(dst, src, bytes, to_device ?
                                            cudaMemcpyHostToDevice :
                                            cudaMemcpyDeviceToHost,
                                            c->stream),
                        to_device ? "cudaMemcpyAsync (upload)" :
                                    "cudaMemcpyAsync (download)", NULL);
        if (!rv)
            rv = wk_cu_fail(be, cudaStreamSynchronize(c->stream),
                            "cudaStreamSynchronize", NULL);
        return rv ? fail_now(be, rv) : HC_OK;
    }
    for (off = 0; off < bytes; off += n) {
        n = bytes - off < c->stage_bytes ? bytes - off : c->stage_bytes;
        if (to_device) {
            /* The previous chunk's copy finished: the buffer is free. */
            memcpy(c->stage, (const char *)src + off, n);
            rv = wk_cu_fail(be, cudaMemcpyAsync((char *)dst + off, c->stage,
                                                n, cudaMemcpyHostToDevice,
                                                c->stream),
                            "cudaMemcpyAsync (upload)", NULL);
        } else {
            rv = wk_cu_fail(be, cudaMemcpyAsync(c->stage,
                                                (const char *)src + off, n,
                                                cudaMemcpyDeviceToHost,
                                                c->stream),
                            "cudaMemcpyAsync (download)", NULL);
        }
        if (!rv)
            rv = wk_cu_fail(be, cudaStreamSynchronize(c->stream),
                            "cudaStreamSynchronize", NULL);
        if (rv)
            return fail_now(be, rv);
        if (!to_device)
            memcpy((char *)dst + off, c->stage, n);
    }
    return HC_OK;
}

static int cuda_upload(struct wk_backend *be, void *dst, const void *src,
                       size_t bytes)
{
    return cuda_transfer(be, dst, src, bytes, 1);
}

static int cuda_download(struct wk_backend *be, void *dst, const void *src,
                         size_t bytes)
{
    return cuda_transfer(be, dst, src, bytes, 0);
}

/* Device to device, queued on the stream: every later op on this backend
 * sees the result. */
static int cuda_copy(struct wk_backend *be, void *dst, const void *src,
                     size_t bytes)
{
    int rv;

    if (!bytes || dst == src)
        return HC_OK;
    if ((rv = wk_cu_enter(be)))
        return fail_now(be, rv);
    return fail_now(be, wk_cu_fail(be, cudaMemcpyAsync(dst, src, bytes,
                                                       cudaMemcpyDeviceToDevice,
                                                       cu_ctx(be)->stream),
                                   "cudaMemcpyAsync (copy)", NULL));
}

static int cuda_check(struct wk_backend *be)
{
    struct cuda_ctx *c = cu_ctx(be);
    int rv;

    if (!wk_cu_enter(be))
        wk_cu_fail(be, cudaStreamSynchronize(c->stream),
                   "cudaStreamSynchronize", "a queued kernel or copy failed");
    rv = c->err;
    if (rv)
        hc_err_set(rv, "%s", c->msg);
    c->err = 0;
    c->msg[0] = '\0';
    return rv;
}

/* ---- BLAS ---- */

/* Row-major C = op(A)·op(B) is column-major Cᵀ = op(B)ᵀ·op(A)ᵀ: the same
 * buffers read as column-major are Aᵀ and Bᵀ, so swap the operands. */
void wk_cu_sgemm(struct wk_backend *be, int ta, int tb, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc)
{
    if (m <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    if (k <= 0) {
        wk_cu_scale_rows(be, c, m, n, ldc, beta);
        return;
    }
    blas_fail(be, blas.sgemm((cublasHandle_t)cu_ctx(be)->blas,
                             tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                             ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                             b, ldb, a, lda, &beta, c, ldc),
              "cublasSgemm");
}

static const struct wk_backend_ops cuda_ops = {
    /* .destroy = */ cuda_destroy,
    /* .alloc = */ cuda_alloc,
    /* .free = */ cuda_free,
    /* .upload = */ cuda_upload,
    /* .download = */ cuda_download,
    /* .copy = */ cuda_copy,
    /* .check = */ cuda_check,
    /* the compute ops, in the table's order: wk_cu_sgemm, wk_cu_fill, … */
#define CU_ENTRY(ret, name, params, args, presence) wk_cu_##name,
    WK_BACKEND_COMPUTE_OPS(CU_ENTRY)
#undef CU_ENTRY
};

extern "C" int wk_backend_cuda_new(int device, struct wk_backend **out)
{
    struct wk_backend *be = NULL;
    struct cuda_ctx *c = NULL;
    char name[64] = "";
    cublasHandle_t h;
    int n = wk_cuda_device_count(), rv;

    *out = NULL;
    if (device < 0 || device >= n)
        return hc_err_set(HC_ERR_INVAL,
                          "gpu:%d: this machine has %d CUDA device%s", device,
                          n, n == 1 ? "" : "s");
    pthread_once(&blas.once, blas_load);
    if (!blas.lib)
        return hc_err_set(HC_ERR_UNSUPPORTED, "gpu:%d: cannot load cuBLAS: %s",
                          device, blas.error);
    be = (struct wk_backend *)calloc(1, sizeof *be);
    c = (struct cuda_ctx *)calloc(1, sizeof *c);
    if (!be || !c) {
        free(be);
        free(c);
        return hc_err_set(HC_ERR_NOMEM, "gpu:%d: out of host memory", device);
    }
    be->ops = &cuda_ops;
    be->ctx = c;
    be->host_memory = 0;
    snprintf(be->name, sizeof be->name, "cuda:%d", device);
    c->dev = device;
    wk_cuda_device_info(device, name, sizeof name, NULL, NULL, NULL);
    snprintf(c->label, sizeof c->label, "cuda:%d (%s)", device, name);
    if ((rv = wk_cu_enter(be)) ||
        (rv = wk_cu_fail(be, cudaStreamCreateWithFlags(&c->stream,
                                                       cudaStreamNonBlocking),
                         "cudaStreamCreate", NULL)) ||
        (rv = wk_cu_fail(be, cudaMallocHost(&c->stage, STAGE_BYTES),
                         "cudaMallocHost", "pinned staging buffer of 8 MiB")))
        goto fail;
    c->stage_bytes = STAGE_BYTES;
    if ((rv = blas_fail(be, blas.create(&h), "cublasCreate")))
        goto fail;
    c->blas = h;
    if ((rv = blas_fail(be, blas.set_stream(h, c->stream), "cublasSetStream")))
        goto fail;
    *out = be;
    return HC_OK;
fail:
    rv = hc_err_set(rv, "%s", c->msg);
    cuda_destroy(be);
    return rv;
}

extern "C" void *wk_cuda_host_alloc(size_t bytes)
{
    void *p = NULL;

    if (!bytes || !wk_cuda_device_count())
        return NULL;
    if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) != cudaSuccess) {
        cudaGetLastError();     /* not sticky: clear it for later calls */
        return NULL;
    }
    return p;
}

extern "C" int wk_cuda_host_pinned(const void *p)
{
    struct cudaPointerAttributes a;

    if (!p || !wk_cuda_device_count())
        return 0;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();
        return 0;
    }
    return a.type == cudaMemoryTypeHost;
}

extern "C" void wk_cuda_host_free(void *p)
{
    if (p && cudaFreeHost(p) != cudaSuccess)
        cudaGetLastError();
}
