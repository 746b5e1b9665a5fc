/*
 * nn_conv2d.c — the worker's half of conv2d (the row in
 * common/layer_conv2d.c): im2col + one SGEMM over the whole batch
 * (a 1×1 stride-1 kernel reads its input as the cols, "direct"), its bias
 * and activation fused into one pass over the output — or left to a
 * max-pool after it (NN_EPILOGUE_OUT: nn_build.c, fuse_epilogue).
 * Backward fuses the activation derivative with the bias gradient, then
 * dW = colsᵀ·dY and dX = col2im(dY·Wᵀ). The cols are the device's shared
 * workspace (NN_SHARED_WS), not kept from forward: backward unrolls the
 * input again unless the workspace still holds it (the last conv2d of a
 * device, the first in backward), so a deep net holds one layer's cols,
 * not one per layer. Where a whole batch's cols would be larger than the
 * device's largest activation, or than its backend's cache bound (the
 * CPU's ws_cache: each chunk's cols still in cache when the GEMM packs
 * them), the batch goes through in chunks of ws_chunk samples (one GEMM
 * each, M = chunk·OH·OW rows). Where its
 * input has other readers, dX is added onto their gradient (NN_ADDS).
 * With stride 1, where dY's cols are no larger than the input's
 * (l->flip: this file's backward_both), backward unrolls dY instead of
 * the input, once, and that serves both: dW = Xᵀ·im2col(dY) with the
 * input as the GEMM's operand as it stands, and dX = im2col(dY)·Wflipᵀ,
 * the correlation of dY with the kernel turned round — no second unroll
 * of the input, no kh·kw times larger dcols to write and col2im.
 */
#include "nn_impl.h"

#include "err.h"

static int setup(const struct nn_setup *c, const struct hc_layer_spec *s,
                 const struct hc_shape *in, struct nn_layer *l,
                 struct hc_shape *out)
{
    int sh = s->sh ? s->sh : 1, sw = s->sw ? s->sw : 1, rv;

    if ((rv = nn_need_image(c, s, in)))
        return rv;
    if (s->filters < 1)
        return hc_err_set(HC_ERR_CONFIG, "%s: filters = %d; must be at "
                          "least 1", c->where, s->filters);
    if ((rv = nn_window(c, s, in, s->kh, s->kw, sh, sw, l, out)))
        return rv;
    out->dims[2] = s->filters;
    l->direct = s->kh == 1 && s->kw == 1 && sh == 1 && sw == 1;
    l->ws_size = l->direct ? 0 : (size_t)l->g.OH * l->g.OW * s->kh * s->kw *
                                 l->g.C;
    /* dY's cols (H·W, kh·kw·F) in the same workspace, when not larger */
    l->flip = !l->direct && sh == 1 && sw == 1 &&
              (size_t)l->g.H * l->g.W * s->kh * s->kw * s->filters <=
              l->ws_size;
    return nn_check_var(c, s->var_kernel, "kernel",
                        (size_t)s->kh * s->kw * l->g.C * s->filters,
                        &l->off_w, &l->n_w);
}

static int alloc(struct nn_layer *l, size_t B)
{
    int rv;

    if ((rv = nn_alloc_f(l->be, &l->out, B * l->out_size)) ||
        (!l->pre_pool && (rv = nn_alloc_pre(l, B))) ||
        (l->flip && (rv = nn_alloc_f(l->be, &l->aux, 2 * l->n_w))))
        return rv;
    return HC_OK;
}

/* The samples [b0, b0 + n) of the batch unrolled into the workspace. */
static void unroll(const struct nn_layer *l, const float *x, int b0, int n)
{
    struct wk_geom g = l->g;

    g.B = n;
    wk_be_im2col(l->be, &g, x + (size_t)b0 * l->in_size, l->cols);
}

static void forward(const struct wk_net *net, struct nn_layer *l,
                    const float *x, const float *params, int B, int training)
{
    int P = l->g.OH * l->g.OW, K = l->g.kh * l->g.kw * l->g.C, F = l->out_c;

    (void)net;
    (void)training;
    if (l->direct) {
        wk_be_sgemm(l->be, 0, 0, B * P, F, K, 1.0f, x, K, params + l->doff_w,
                    F, 0.0f, l->out, F);
    } else {
        for (int b0 = 0; b0 < B; b0 += l->ws_chunk) {
            int n = B - b0 < l->ws_chunk ? B - b0 : l->ws_chunk;

            unroll(l, x, b0, n);
            wk_be_sgemm(l->be, 0, 0, n * P, F, K, 1.0f, l->cols, K,
                        params + l->doff_w, F, 0.0f,
                        l->out + (size_t)b0 * l->out_size, F);
        }
        *l->ws_holder = l->ws_chunk >= B ? l : NULL;
    }
    if (!l->pre_pool)
        nn_bias_act(l, l->n_b ? params + l->doff_b : NULL, l->out, B * P, F);
}

static void backward_params(struct nn_layer *l, float *grads, float *dy,
                            int B)
{
    int P = l->g.OH * l->g.OW, K = l->g.kh * l->g.kw * l->g.C;
    int F = l->out_c;

    if (!l->pre_pool)
        nn_bias_act_backward(l, dy, B * P, F, l->n_b ? grads + l->doff_b
                                                    : NULL);
    /* dW (K, F) = colsᵀ · dY, summed over the workspace's chunks */
    if (l->direct) {
        wk_be_sgemm(l->be, 1, 0, K, F, B * P, 1.0f, l->x, K, dy, F, 0.0f,
                    grads + l->doff_w, F);
        return;
    }
    for (int b0 = 0; b0 < B; b0 += l->ws_chunk) {
        int n = B - b0 < l->ws_chunk ? B - b0 : l->ws_chunk;

        if (*l->ws_holder != l)
            unroll(l, l->x, b0, n);
        wk_be_sgemm(l->be, 1, 0, K, F, n * P, 1.0f, l->cols, K,
                    dy + (size_t)b0 * l->out_size, F, b0 ? 1.0f : 0.0f,
                    grads + l->doff_w, F);
    }
}

/* Stride 1 (l->flip): one unroll of dY a chunk at a time, its windows
 * padded by what the input's lacked (kh − 1 − pt before), serves both
 * gradients: dWflip (C, kh·kw·F) = Xᵀ · im2col(dY) and dX (n·H·W, C) =
 * im2col(dY) · Wflipᵀ, Wflip the kernel's taps in reverse order, each
 * transposed (aux: Wflip, then dWflip). */
static int backward_both(struct nn_layer *l, const float *params,
                         float *grads, float *dy, float *dx, int B)
{
    const struct wk_geom *g = &l->g;
    int F = l->out_c, C = g->C, T = g->kh * g->kw, KF = T * F;
    int M = g->H * g->W;
    float *wf = l->aux, *dwf = l->aux + l->n_w;
    struct wk_geom gd = {
        .H = g->OH, .W = g->OW, .C = F, .kh = g->kh, .kw = g->kw,
        .sh = 1, .sw = 1, .pt = g->kh - 1 - g->pt, .pl = g->kw - 1 - g->pl,
        .OH = g->H, .OW = g->W,
    };

    if (!l->flip)
        return 0;
    if (!l->pre_pool)
        nn_bias_act_backward(l, dy, B * g->OH * g->OW, F,
                             l->n_b ? grads + l->doff_b : NULL);
    for (int t = 0; dx && t < T; t++)   /* Wflip[c, T−1−t, f] = W[t, c, f] */
        wk_be_copy2d(l->be, C, F, 1.0f,
                     params + l->doff_w + (size_t)t * C * F, F,
                     wf + (size_t)(T - 1 - t) * F, KF, 0);
    *l->ws_holder = NULL;
    for (int b0 = 0; b0 < B; b0 += l->ws_chunk) {
        int n = B - b0 < l->ws_chunk ? B - b0 : l->ws_chunk;

        gd.B = n;
        wk_be_im2col(l->be, &gd, dy + (size_t)b0 * l->out_size, l->cols);
        wk_be_sgemm(l->be, 1, 0, C, KF, n * M, 1.0f,
                    l->x + (size_t)b0 * l->in_size, C, l->cols, KF,
                    b0 ? 1.0f : 0.0f, dwf, KF);
        if (dx)
            wk_be_sgemm(l->be, 0, 1, n * M, C, KF, 1.0f, l->cols, KF, wf, KF,
                        l->dx_add ? 1.0f : 0.0f,
                        dx + (size_t)b0 * l->in_size, C);
    }
    for (int t = 0; t < T; t++)         /* dW[t, c, f] = dWflip[c, T−1−t, f] */
        wk_be_copy2d(l->be, C, F, 1.0f, dwf + (size_t)(T - 1 - t) * F, KF,
                     grads + l->doff_w + (size_t)t * C * F, F, 0);
    return 1;
}

static int backward_input(struct nn_layer *l, const float *params, float *dy,
                          float *dx, int B)
{
    struct wk_geom g = l->g;
    int P = g.OH * g.OW, K = g.kh * g.kw * g.C, F = l->out_c;

    if (l->direct) {
        wk_be_sgemm(l->be, 0, 1, B * P, K, F, 1.0f, dy, F, params + l->doff_w,
                    F, l->dx_add ? 1.0f : 0.0f, dx, K);
        return 1;
    }
    /* dcols (n·P, K) = dY · Wᵀ a chunk at a time, into the workspace
     * (backward_params is done with it), then back onto dX. */
    *l->ws_holder = NULL;
    for (int b0 = 0; b0 < B; b0 += l->ws_chunk) {
        int n = B - b0 < l->ws_chunk ? B - b0 : l->ws_chunk;

        g.B = n;
        wk_be_sgemm(l->be, 0, 1, n * P, K, F, 1.0f,
                    dy + (size_t)b0 * l->out_size, F, params + l->doff_w, F,
                    0.0f, l->cols, K);
        wk_be_col2im(l->be, &g, l->cols, dx + (size_t)b0 * l->in_size,
                     l->dx_add);
    }
    return 1;
}

const struct nn_kind nn_conv2d = {
    .flags = NN_BIAS | NN_EPILOGUE_OUT | NN_SHARED_WS | NN_ADDS,
    .setup = setup,
    .alloc = alloc,
    .forward = forward,
    .backward_params = backward_params,
    .backward_input = backward_input,
    .backward_both = backward_both,
};
