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
 * default built from required entries (noted "optional" in backend_ops.h,
 * the list of the entries and their contracts).
 */
#ifndef WK_BACKEND_H
#define WK_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend_ops.h"
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

/* 1 when the derivative of act cannot be had from its output alone (gelu
 * and swish are not one-to-one): act_backward and act_bias_backward then
 * read the op's input z (bias added) where the others read its output y,
 * so a layer applying it keeps z. Also: such an activation is not
 * non-decreasing, so it does not commute with a max. */
int wk_act_reads_input(enum hc_act act);

/* Fill g from an input shape, window, strides and padding mode (Keras
 * formulas: valid OH = (H − kh) / sh + 1, same OH = ceil(H / sh)). Returns
 * HC_ERR_INVAL (no message) when the output would be empty. */
int wk_geom_init(struct wk_geom *g, int B, int H, int W, int C, int kh, int kw,
                 int sh, int sw, int same);

/*
 * Dropout's counter-based random numbers, identical on every backend:
 * element i of a dropout with seed s is kept iff
 *     (mix64(s + (i + 1) · 0x9E3779B97F4A7C15) >> 40) ≥ threshold,
 * threshold = (uint32_t)(rate · 2^24), where mix64(z) is splitmix64's
 * finaliser (hc_mix64, common/rng.h)
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

/* The table: destroy, then the entries backend_ops.h lists, where their
 * contracts are. */
struct wk_backend_ops {
    void (*destroy)(struct wk_backend *be);
#define WK_OPS_FIELD(ret, name, params, args, presence) ret (*name) params;
    WK_BACKEND_OPS(WK_OPS_FIELD)
#undef WK_OPS_FIELD
};

struct wk_backend {
    const struct wk_backend_ops *ops;
    void *ctx;              /* the implementation's state */
    char name[32];          /* "cpu", "cuda:0" */
    int host_memory;        /* 1: backend pointers are plain host memory */
    size_t ws_cache;        /* floats a net's shared scratch workspace
                             * should stay within, so that what one op
                             * writes there the next reads from cache (the
                             * CPU's: half a core's L2); 0: no bound */
    size_t allocated;       /* bytes wk_be_alloc gave out (atomic) */
};

/* Bytes wk_be_alloc has given out on be since it was made, frees not
 * subtracted: what a net took of a backend is the difference across its
 * wk_net_new (a net allocates only there). Any thread. */
size_t wk_be_allocated(const struct wk_backend *be);

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

/* Wrappers, wk_be_NAME for each entry of backend_ops.h: the entry of the
 * table, or the generic default of an optional entry. Same contracts. */
#define WK_BE_DECLARE(ret, name, params, args, presence)                \
    ret wk_be_##name params;
WK_BACKEND_OPS(WK_BE_DECLARE)
#undef WK_BE_DECLARE

#endif
