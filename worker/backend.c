/*
 * backend.c — what every backend shares: the wk_be_* wrappers over the ops
 * table (with the generic defaults of optional entries), the window
 * geometry of convolution and pooling, and dropout's counter-based hash.
 * Nothing here touches backend memory itself.
 */
#include "backend.h"

#include "err.h"
#include "rng.h"

int wk_act_reads_input(enum hc_act act)
{
    return act == HC_ACT_GELU || act == HC_ACT_SWISH;
}

int wk_geom_init(struct wk_geom *g, int B, int H, int W, int C, int kh, int kw,
                 int sh, int sw, int same)
{
    int pad_h, pad_w;

    if (B < 1 || H < 1 || W < 1 || C < 1 || kh < 1 || kw < 1 || sh < 1 ||
        sw < 1)
        return HC_ERR_INVAL;
    g->B = B;
    g->H = H;
    g->W = W;
    g->C = C;
    g->kh = kh;
    g->kw = kw;
    g->sh = sh;
    g->sw = sw;
    if (same) {
        g->OH = (H + sh - 1) / sh;
        g->OW = (W + sw - 1) / sw;
        pad_h = (g->OH - 1) * sh + kh - H;
        pad_w = (g->OW - 1) * sw + kw - W;
        g->pt = pad_h > 0 ? pad_h / 2 : 0;
        g->pl = pad_w > 0 ? pad_w / 2 : 0;
    } else {
        if (kh > H || kw > W)
            return HC_ERR_INVAL;
        g->OH = (H - kh) / sh + 1;
        g->OW = (W - kw) / sw + 1;
        g->pt = 0;
        g->pl = 0;
    }
    return HC_OK;
}

uint64_t wk_dropout_hash(uint64_t seed, uint64_t i)
{
    return hc_mix64(seed + (i + 1) * HC_GOLDEN_GAMMA);
}

uint64_t wk_dropout_seed_at(uint64_t seed, uint64_t offset)
{
    return seed + offset * HC_GOLDEN_GAMMA;
}

void wk_backend_free(struct wk_backend *be)
{
    if (be)
        be->ops->destroy(be);
}

int wk_be_alloc(struct wk_backend *be, size_t bytes, void **out)
{
    int rv = be->ops->alloc(be, bytes, out);

    if (rv == HC_OK)
        __atomic_add_fetch(&be->allocated, bytes, __ATOMIC_RELAXED);
    return rv;
}

size_t wk_be_allocated(const struct wk_backend *be)
{
    return __atomic_load_n(&be->allocated, __ATOMIC_RELAXED);
}

void wk_be_free(struct wk_backend *be, void *p)
{
    if (p)
        be->ops->free(be, p);
}

int wk_be_upload(struct wk_backend *be, void *dst, const void *src,
                 size_t bytes)
{
    return be->ops->upload(be, dst, src, bytes);
}

int wk_be_download(struct wk_backend *be, void *dst, const void *src,
                   size_t bytes)
{
    return be->ops->download(be, dst, src, bytes);
}

int wk_be_copy(struct wk_backend *be, void *dst, const void *src,
               size_t bytes)
{
    return be->ops->copy(be, dst, src, bytes);
}

int wk_be_check(struct wk_backend *be)
{
    return be->ops->check ? be->ops->check(be) : HC_OK;
}

/* The wrapper of a required compute op passes the call on; an optional
 * one's is written out below, with its default. */
#define WRAPPER_required(ret, name, params, args)                         \
    ret wk_be_##name params                                               \
    {                                                                     \
        be->ops->name args;                                               \
    }
#define WRAPPER_optional(ret, name, params, args)
#define WRAPPER(ret, name, params, args, presence)                        \
    WRAPPER_##presence(ret, name, params, args)
WK_BACKEND_COMPUTE_OPS(WRAPPER)
#undef WRAPPER
#undef WRAPPER_optional
#undef WRAPPER_required

void wk_be_reduce(struct wk_backend *be, float *dst, const float *const *src,
                  const float *w, int n_src, size_t n)
{
    int i;

    if (be->ops->reduce) {
        be->ops->reduce(be, dst, src, w, n_src, n);
        return;
    }
    /* A compute op reports failure through check(), so a failed copy
     * needs no return code here: the device records it. */
    if (dst != src[0] && be->ops->copy(be, dst, src[0], n * sizeof *dst))
        return;
    if (w && w[0] != 1.0f)
        be->ops->scale(be, dst, n, w[0]);
    for (i = 1; i < n_src; i++)
        be->ops->axpy(be, n, w ? w[i] : 1.0f, src[i], dst);
}

void wk_be_act_bias_backward(struct wk_backend *be, const float *y, float *dy,
                             int rows, int n, enum hc_act act, float *db)
{
    if (be->ops->act_bias_backward) {
        be->ops->act_bias_backward(be, y, dy, rows, n, act, db);
        return;
    }
    if (act != HC_ACT_LINEAR)
        be->ops->act_backward(be, y, dy, dy, rows, n, act);
    if (db)
        be->ops->bias_grad(be, dy, rows, n, db);
}
