/*
 * backend_cpu.c — the CPU backend: host memory, OpenBLAS for the matrix
 * products, plain loops for everything else (written so that gcc -O2
 * vectorises the inner loops). It is also the reference the CUDA backend
 * is compared with, so every op stays short and obviously correct.
 *
 * OpenBLAS's thread count is process-wide; see wk_backend_cpu_new in
 * backend.h for what that means with several CPU devices.
 */
#include "backend.h"

#include <cblas.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "vec.h"

struct cpu_ctx {
    int n_threads;
};

/* The CPU's ws_cache (backend.h): 512 KiB, half a core's L2 cache on the
 * machines we measure, so that conv2d's GEMM packs each chunk of its
 * unrolled input as im2col left it, in cache (nn_build.c). */
#define CPU_WS_CACHE ((size_t)128 * 1024)

/* Columns summed per pass of a bias gradient (stack accumulators), and
 * rows summed in float before the partial sums are added in double. */
#define BIAS_CHUNK 256
#define BIAS_ROWS 64

/*
 * The passes over large activations go four floats at a time (vec.h): the
 * scalar selects of relu and max-pool would also compile to mispredicted
 * branches. v4i holds a comparison's lanes for vsel.
 */
typedef int32_t v4i __attribute__((vector_size(16)));

/* Lane by lane m ? a : b, m from a comparison (all ones or all zeros). */
static inline v4f vsel(v4i m, v4f a, v4f b)
{
    return (v4f)((m & (v4i)a) | (~m & (v4i)b));
}

/* ---- memory ---- */

static void cpu_destroy(struct wk_backend *be)
{
    free(be->ctx);
    free(be);
}

/* Fresh memory is written once here, so its pages are mapped at build time
 * and the first steps do not pay page faults — which would also skew the
 * speeds replica.c balances by. */
static int cpu_alloc(struct wk_backend *be, size_t bytes, void **out)
{
    size_t rounded = (bytes + 63) & ~(size_t)63;

    *out = rounded ? aligned_alloc(64, rounded) : NULL;
    if (!*out)
        return hc_err_set(HC_ERR_NOMEM, "%s: cannot allocate %zu bytes",
                          be->name, bytes);
    memset(*out, 0, rounded);
    return HC_OK;
}

static void cpu_free(struct wk_backend *be, void *p)
{
    (void)be;
    free(p);
}

static int cpu_memcpy(struct wk_backend *be, void *dst, const void *src,
                      size_t bytes)
{
    (void)be;
    if (bytes && dst != src)
        memmove(dst, src, bytes);
    return HC_OK;
}

/* ---- BLAS-like ---- */

static void cpu_sgemm(struct wk_backend *be, int ta, int tb, int m, int n,
                      int k, float alpha, const float *a, int lda,
                      const float *b, int ldb, float beta, float *c, int ldc)
{
    int i;

    (void)be;
    if (m <= 0 || n <= 0)
        return;
    if (k <= 0) {
        for (i = 0; i < m; i++) {
            if (beta == 0.0f)
                memset(c + (size_t)i * ldc, 0, (size_t)n * sizeof *c);
            else
                cblas_sscal(n, beta, c + (size_t)i * ldc, 1);
        }
        return;
    }
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb,
                beta, c, ldc);
}

static void cpu_fill(struct wk_backend *be, float *x, size_t n, float v)
{
    size_t i;

    (void)be;
    if (v == 0.0f) {
        memset(x, 0, n * sizeof *x);
        return;
    }
    for (i = 0; i < n; i++)
        x[i] = v;
}

static void cpu_reg_grad(struct wk_backend *be, const float *w, float *g,
                         size_t n, float l1, float l2)
{
    size_t i;

    (void)be;
    for (i = 0; i < n; i++)
        g[i] += l1 * (float)((w[i] > 0.0f) - (w[i] < 0.0f)) + 2.0f * l2 * w[i];
}

static void cpu_scale(struct wk_backend *be, float *x, size_t n, float a)
{
    size_t i;

    (void)be;
    for (i = 0; i < n; i++)
        x[i] *= a;
}

static void cpu_axpy(struct wk_backend *be, size_t n, float a, const float *x,
                     float *y)
{
    size_t i;

    (void)be;
    for (i = 0; i < n; i++)
        y[i] += a * x[i];
}

static void cpu_copy2d(struct wk_backend *be, int rows, int cols, float a,
                       const float *src, int lds, float *dst, int ldd,
                       int accumulate)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *s = src + (size_t)r * lds;
        float *d = dst + (size_t)r * ldd;

        if (accumulate)
            for (int c = 0; c < cols; c++)
                d[c] += a * s[c];
        else if (a == 1.0f)
            memcpy(d, s, (size_t)cols * sizeof *d);
        else
            for (int c = 0; c < cols; c++)
                d[c] = a * s[c];
    }
}

static void cpu_mul(struct wk_backend *be, size_t n, const float *x,
                    const float *y, float *z, int accumulate)
{
    (void)be;
    if (accumulate)
        for (size_t i = 0; i < n; i++)
            z[i] += x[i] * y[i];
    else
        for (size_t i = 0; i < n; i++)
            z[i] = x[i] * y[i];
}

/* A block of REDUCE_BLOCK floats at a time, each source in turn: dst's
 * block stays in cache, so the sum is one pass over memory — the same
 * products added in the same order as source after source. */
#define REDUCE_BLOCK 2048

static void cpu_reduce(struct wk_backend *be, float *dst,
                       const float *const *src, const float *w, int n_src,
                       size_t n)
{
    (void)be;
    for (size_t i0 = 0; i0 < n; i0 += REDUCE_BLOCK) {
        size_t i1 = n - i0 < REDUCE_BLOCK ? n : i0 + REDUCE_BLOCK, i;

        for (int s = 0; s < n_src; s++) {
            float ws = w ? w[s] : 1.0f;
            const float *x = src[s];
            v4f w4 = {ws, ws, ws, ws};

            for (i = i0; i + 4 <= i1; i += 4)
                st4(dst + i, s ? ld4(dst + i) + w4 * ld4(x + i)
                               : w4 * ld4(x + i));
            for (; i < i1; i++)
                dst[i] = s ? dst[i] + ws * x[i] : ws * x[i];
        }
    }
}

/* ---- convolution helpers ---- */

/* memcpy, without a library call for the few floats of a thin image. */
static inline void copy_floats(float *dst, const float *src, int n)
{
    int i;

    if (n >= 16) {
        memcpy(dst, src, (size_t)n * sizeof *dst);
        return;
    }
    for (i = 0; i < n; i++)
        dst[i] = src[i];
}

static void cpu_im2col(struct wk_backend *be, const struct wk_geom *g,
                       const float *x, float *cols)
{
    const int C = g->C, kwc = g->kw * g->C;
    int b, oh, ow, i, j;

    (void)be;
    for (b = 0; b < g->B; b++) {
        const float *xb = x + (size_t)b * g->H * g->W * C;

        for (oh = 0; oh < g->OH; oh++) {
            for (ow = 0; ow < g->OW; ow++) {
                int iw0 = ow * g->sw - g->pl;
                int inside = iw0 >= 0 && iw0 + g->kw <= g->W;

                for (i = 0; i < g->kh; i++) {
                    int ih = oh * g->sh - g->pt + i;
                    const float *row = xb + (size_t)ih * g->W * C;

                    if (ih < 0 || ih >= g->H) {
                        memset(cols, 0, (size_t)kwc * sizeof *cols);
                    } else if (inside) {
                        copy_floats(cols, row + (size_t)iw0 * C, kwc);
                    } else {
                        for (j = 0; j < g->kw; j++) {
                            int iw = iw0 + j;

                            if (iw < 0 || iw >= g->W)
                                memset(cols + j * C, 0,
                                       (size_t)C * sizeof *cols);
                            else
                                copy_floats(cols + j * C, row + (size_t)iw * C,
                                            C);
                        }
                    }
                    cols += kwc;
                }
            }
        }
    }
}

/* Each input pixel's gradient is the sum, from 0 (or from dx, add) and
 * windows in output order, of every cols entry im2col read from it,
 * four channels at a time. The CUDA twin's col2im_k gathers the same
 * windows in the same order (with add, it adds their sum onto dx: the
 * same to float reassociation). */
static void cpu_col2im(struct wk_backend *be, const struct wk_geom *g,
                       const float *cols, float *dx, int add)
{
    const int C = g->C;
    int b, oh, ow, i, j, c;

    (void)be;
    if (!add)
        memset(dx, 0, (size_t)g->B * g->H * g->W * C * sizeof *dx);
    for (b = 0; b < g->B; b++) {
        float *xb = dx + (size_t)b * g->H * g->W * C;

        for (oh = 0; oh < g->OH; oh++) {
            for (ow = 0; ow < g->OW; ow++) {
                for (i = 0; i < g->kh; i++) {
                    int ih = oh * g->sh - g->pt + i;

                    for (j = 0; j < g->kw; j++, cols += C) {
                        int iw = ow * g->sw - g->pl + j;
                        float *px;

                        if (ih < 0 || ih >= g->H || iw < 0 || iw >= g->W)
                            continue;
                        px = xb + ((size_t)ih * g->W + iw) * C;
                        for (c = 0; c + 4 <= C; c += 4)
                            st4(px + c, ld4(px + c) + ld4(cols + c));
                        for (; c < C; c++)
                            px[c] += cols[c];
                    }
                }
            }
        }
    }
}

/* ---- bias and activations ---- */

static void softmax_row(const float *z, const float *bias, float *p, int n)
{
    float mx = -INFINITY, sum = 0.0f;
    int j;

    for (j = 0; j < n; j++) {
        p[j] = z[j] + (bias ? bias[j] : 0.0f);
        if (p[j] > mx)
            mx = p[j];
    }
    for (j = 0; j < n; j++) {
        p[j] = expf(p[j] - mx);
        sum += p[j];
    }
    for (j = 0; j < n; j++)
        p[j] /= sum;
}

/* act at v, for the activations applied element by element beyond
 * relu, sigmoid and tanh (model.h gives their formulas). */
static float act_value(enum hc_act act, float v)
{
    switch (act) {
    case HC_ACT_RELU6:
        return v > 0.0f ? (v < 6.0f ? v : 6.0f) : 0.0f;
    case HC_ACT_ELU:
        return v > 0.0f ? v : expm1f(v);
    case HC_ACT_GELU:
        return 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
    case HC_ACT_SWISH:
        return v / (1.0f + expf(-v));
    case HC_ACT_SOFTPLUS:
        return (v > 0.0f ? v : 0.0f) + log1pf(expf(-fabsf(v)));
    case HC_ACT_HARD_SIGMOID:
        v = (v + 3.0f) / 6.0f;
        return v > 0.0f ? (v < 1.0f ? v : 1.0f) : 0.0f;
    default:
        return v;
    }
}

/* Derivative of act (not softmax) at v: v is the op's output y, or, for
 * an activation that reads its input (wk_act_reads_input: gelu, swish),
 * the op's input z. */
static inline float act_deriv(enum hc_act act, float v)
{
    float s;

    switch (act) {
    case HC_ACT_RELU:
        return v > 0.0f ? 1.0f : 0.0f;
    case HC_ACT_SIGMOID:
        return v * (1.0f - v);
    case HC_ACT_TANH:
        return 1.0f - v * v;
    case HC_ACT_RELU6:
        return v > 0.0f && v < 6.0f ? 1.0f : 0.0f;
    case HC_ACT_ELU:                    /* y + 1 = exp(x) for x ≤ 0 */
        return v > 0.0f ? 1.0f : v + 1.0f;
    case HC_ACT_GELU:                   /* Φ(z) + z·φ(z) */
        return 0.5f * (1.0f + erff(v * (float)M_SQRT1_2)) +
               v * expf(-0.5f * v * v) * (float)(0.5 * M_2_SQRTPI * M_SQRT1_2);
    case HC_ACT_SWISH:                  /* s + z·s·(1 − s), s = sigmoid(z) */
        s = 1.0f / (1.0f + expf(-v));
        return s * (1.0f + v * (1.0f - s));
    case HC_ACT_SOFTPLUS:               /* sigmoid(x) = 1 − exp(−y) */
        return -expm1f(-v);
    case HC_ACT_HARD_SIGMOID:
        return v > 0.0f && v < 1.0f ? 1.0f / 6.0f : 0.0f;
    default:
        return 1.0f;
    }
}

static void cpu_act_forward(struct wk_backend *be, const float *x,
                            const float *bias, float *y, int rows, int n,
                            enum hc_act act)
{
    int r, j;

    (void)be;
    for (r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *yr = y + (size_t)r * n;

        switch (act) {
        case HC_ACT_SOFTMAX:
            softmax_row(xr, bias, yr, n);
            break;
        case HC_ACT_RELU:
            for (j = 0; j + 4 <= n; j += 4) {
                v4f v = ld4(xr + j), zero = {0};

                if (bias)
                    v += ld4(bias + j);
                st4(yr + j, vsel(v > zero, v, zero));
            }
            for (; j < n; j++) {
                float v = xr[j] + (bias ? bias[j] : 0.0f);
                yr[j] = v > 0.0f ? v : 0.0f;
            }
            break;
        case HC_ACT_SIGMOID:
            for (j = 0; j < n; j++)
                yr[j] = 1.0f / (1.0f + expf(-(xr[j] + (bias ? bias[j] : 0.0f))));
            break;
        case HC_ACT_TANH:
            for (j = 0; j < n; j++)
                yr[j] = tanhf(xr[j] + (bias ? bias[j] : 0.0f));
            break;
        case HC_ACT_LINEAR:
            if (!bias) {
                if (xr != yr)
                    memcpy(yr, xr, (size_t)n * sizeof *yr);
                break;
            }
            for (j = 0; j + 4 <= n; j += 4)
                st4(yr + j, ld4(xr + j) + ld4(bias + j));
            for (; j < n; j++)
                yr[j] = xr[j] + bias[j];
            break;
        default:
            for (j = 0; j < n; j++)
                yr[j] = act_value(act, xr[j] + (bias ? bias[j] : 0.0f));
            break;
        }
    }
}

static void cpu_act_backward(struct wk_backend *be, const float *y,
                             const float *dy, float *dx, int rows, int n,
                             enum hc_act act)
{
    size_t i, count = (size_t)rows * n;
    int r, j;

    (void)be;
    switch (act) {
    case HC_ACT_SOFTMAX:
        for (r = 0; r < rows; r++) {
            const float *yr = y + (size_t)r * n, *dyr = dy + (size_t)r * n;
            float *dxr = dx + (size_t)r * n;
            float dot = 0.0f;

            for (j = 0; j < n; j++)
                dot += dyr[j] * yr[j];
            for (j = 0; j < n; j++)
                dxr[j] = yr[j] * (dyr[j] - dot);
        }
        break;
    case HC_ACT_RELU:
        for (i = 0; i + 4 <= count; i += 4) {
            v4f zero = {0};

            st4(dx + i, vsel(ld4(y + i) > zero, ld4(dy + i), zero));
        }
        for (; i < count; i++)
            dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        break;
    case HC_ACT_SIGMOID:
        for (i = 0; i < count; i++)
            dx[i] = dy[i] * y[i] * (1.0f - y[i]);
        break;
    case HC_ACT_TANH:
        for (i = 0; i < count; i++)
            dx[i] = dy[i] * (1.0f - y[i] * y[i]);
        break;
    case HC_ACT_LINEAR:
        if (dx != dy)
            memcpy(dx, dy, count * sizeof *dx);
        break;
    default:
        for (i = 0; i < count; i++)
            dx[i] = dy[i] * act_deriv(act, y[i]);
        break;
    }
}

/* dy ← dy · act'(y) over columns [j0, j1) of one row, adding the results
 * to part (j1 − j0 floats). act linear: dy is only read (through cdy). */
static void colsum_row(const float *y, float *dy, const float *cdy, int j0,
                       int j1, enum hc_act act, float *part)
{
    const v4f zero = {0};
    int j = j0;

    if (act == HC_ACT_LINEAR) {
        for (; j + 4 <= j1; j += 4)
            st4(part + j - j0, ld4(part + j - j0) + ld4(cdy + j));
        for (; j < j1; j++)
            part[j - j0] += cdy[j];
        return;
    }
    if (act == HC_ACT_RELU) {
        for (; j + 4 <= j1; j += 4) {
            v4f d = vsel(ld4(y + j) > zero, ld4(dy + j), zero);

            st4(dy + j, d);
            st4(part + j - j0, ld4(part + j - j0) + d);
        }
    }
    for (; j < j1; j++) {
        dy[j] *= act_deriv(act, y[j]);
        part[j - j0] += dy[j];
    }
}

/* Column sums of dy (rows, n) into db: float partial sums over BIAS_ROWS
 * rows, added up in double, over column chunks that fit on the stack; with
 * act not linear, dy ← dy · act'(y) first, in the same pass. */
static void act_colsum(const float *y, float *dy, const float *cdy, int rows,
                       int n, enum hc_act act, float *db)
{
    double acc[BIAS_CHUNK];
    float part[BIAS_CHUNK];
    int j0, j1, r0, r, j;

    for (j0 = 0; j0 < n; j0 = j1) {
        j1 = j0 + BIAS_CHUNK < n ? j0 + BIAS_CHUNK : n;
        for (j = j0; j < j1; j++)
            acc[j - j0] = 0.0;
        for (r0 = 0; r0 < rows; r0 += BIAS_ROWS) {
            int r1 = r0 + BIAS_ROWS < rows ? r0 + BIAS_ROWS : rows;

            memset(part, 0, sizeof part);
            for (r = r0; r < r1; r++) {
                size_t off = (size_t)r * n;

                if (act == HC_ACT_LINEAR)
                    colsum_row(NULL, NULL, cdy + off, j0, j1, act, part);
                else
                    colsum_row(y + off, dy + off, NULL, j0, j1, act, part);
            }
            for (j = j0; j < j1; j++)
                acc[j - j0] += part[j - j0];
        }
        for (j = j0; j < j1; j++)
            db[j] = (float)acc[j - j0];
    }
}

static void cpu_act_bias_backward(struct wk_backend *be, const float *y,
                                  float *dy, int rows, int n, enum hc_act act,
                                  float *db)
{
    if (act == HC_ACT_SOFTMAX || !db) {
        if (act != HC_ACT_LINEAR)
            cpu_act_backward(be, y, dy, dy, rows, n, act);
        if (db)
            act_colsum(NULL, NULL, dy, rows, n, HC_ACT_LINEAR, db);
        return;
    }
    act_colsum(y, dy, dy, rows, n, act, db);
}

static void cpu_bias_grad(struct wk_backend *be, const float *dy, int rows,
                          int n, float *db)
{
    (void)be;
    act_colsum(NULL, NULL, dy, rows, n, HC_ACT_LINEAR, db);
}

/* ---- the ReLU layer ---- */

static void cpu_relu_forward(struct wk_backend *be, const float *x, float *y,
                             size_t n, float max, float slope,
                             float threshold)
{
    size_t i;

    (void)be;
    for (i = 0; i < n; i++) {
        float v = x[i], a = v > threshold ? v : 0.0f;

        if (max >= 0.0f)
            a = a < 0.0f ? 0.0f : a > max ? max : a;
        y[i] = v < threshold ? a + slope * (v - threshold) : a;
    }
}

static void cpu_relu_backward(struct wk_backend *be, const float *x,
                              const float *dy, float *dx, size_t n,
                              float max, float slope, float threshold)
{
    size_t i;

    (void)be;
    for (i = 0; i < n; i++) {
        float v = x[i];
        int pass = v > threshold && (max < 0.0f || (v > 0.0f && v < max));

        dx[i] = dy[i] * ((pass ? 1.0f : 0.0f) + (v < threshold ? slope : 0.0f));
    }
}

/* ---- losses ---- */

static void cpu_xent_forward(struct wk_backend *be, const float *z,
                             const int *labels, int rows, int n, float *p,
                             float *loss, float *hit)
{
    int r, j;

    (void)be;
    for (r = 0; r < rows; r++) {
        const float *zr = z + (size_t)r * n;
        float *pr = p + (size_t)r * n;
        float mx = zr[0], sum = 0.0f;
        int arg = 0;

        for (j = 1; j < n; j++) {
            if (zr[j] > mx) {
                mx = zr[j];
                arg = j;
            }
        }
        for (j = 0; j < n; j++) {
            pr[j] = expf(zr[j] - mx);
            sum += pr[j];
        }
        for (j = 0; j < n; j++)
            pr[j] /= sum;
        if (labels) {
            loss[r] = logf(sum) + mx - zr[labels[r]];
            hit[r] = arg == labels[r] ? 1.0f : 0.0f;
        }
    }
}

static void cpu_xent_backward(struct wk_backend *be, const float *p,
                              const int *labels, int rows, int n, float scale,
                              float *dz)
{
    int r, j;

    (void)be;
    for (r = 0; r < rows; r++) {
        const float *pr = p + (size_t)r * n;
        float *dr = dz + (size_t)r * n;

        for (j = 0; j < n; j++)
            dr[j] = scale * pr[j];
        dr[labels[r]] -= scale;
    }
}

static int argmax_row(const float *v, int n)
{
    int j, arg = 0;

    for (j = 1; j < n; j++)
        if (v[j] > v[arg])
            arg = j;
    return arg;
}

static void cpu_mse_forward(struct wk_backend *be, const float *y,
                            const float *t, int rows, int n, float *loss,
                            float *hit)
{
    int r, j;

    (void)be;
    for (r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * n, *tr = t + (size_t)r * n;
        float sum = 0.0f;

        for (j = 0; j < n; j++)
            sum += (yr[j] - tr[j]) * (yr[j] - tr[j]);
        loss[r] = sum / (float)n;
        if (n == 1)
            hit[r] = (yr[0] > 0.5f) == (tr[0] > 0.5f) ? 1.0f : 0.0f;
        else
            hit[r] = argmax_row(yr, n) == argmax_row(tr, n) ? 1.0f : 0.0f;
    }
}

static void cpu_mse_backward(struct wk_backend *be, const float *y,
                             const float *t, size_t count, float scale,
                             float *dy)
{
    size_t i;

    (void)be;
    for (i = 0; i < count; i++)
        dy[i] = scale * (y[i] - t[i]);
}

#define BCE_EPS 1e-7f             /* Keras's epsilon */

/* One output's term of a loss summed (then averaged) over the outputs:
 * BCE, MAE or Huber, as backend_ops.h's tloss_forward says. */
static float tloss_term(enum hc_loss kind, int from_logits, float delta,
                        float y, float t)
{
    float e = y - t, a = fabsf(e), p;

    switch (kind) {
    case HC_LOSS_BCE:
        if (from_logits)
            return (y > 0.0f ? y : 0.0f) - y * t + log1pf(expf(-fabsf(y)));
        p = y < BCE_EPS ? BCE_EPS : y > 1.0f - BCE_EPS ? 1.0f - BCE_EPS : y;
        return -(t * logf(p + BCE_EPS) + (1.0f - t) * logf(1.0f - p + BCE_EPS));
    case HC_LOSS_HUBER:
        return a <= delta ? 0.5f * e * e : delta * (a - 0.5f * delta);
    default:                            /* MAE */
        return a;
    }
}

/* Its derivative with respect to y. */
static float tloss_deriv(enum hc_loss kind, int from_logits, float delta,
                         float y, float t)
{
    float e = y - t;

    switch (kind) {
    case HC_LOSS_BCE:
        if (from_logits)
            return 1.0f / (1.0f + expf(-y)) - t;
        if (y < BCE_EPS || y > 1.0f - BCE_EPS)
            return 0.0f;                /* clipped */
        return (1.0f - t) / (1.0f - y + BCE_EPS) - t / (y + BCE_EPS);
    case HC_LOSS_HUBER:
        return e > delta ? delta : e < -delta ? -delta : e;
    default:                            /* MAE */
        return (float)((e > 0.0f) - (e < 0.0f));
    }
}

static void cpu_tloss_forward(struct wk_backend *be, enum hc_loss kind,
                              int from_logits, float delta, const float *y,
                              const float *t, int rows, int n, float *loss,
                              float *hit)
{
    int r, j;

    (void)be;
    for (r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * n, *tr = t + (size_t)r * n;
        float sum = 0.0f, mx = yr[0];

        if (kind == HC_LOSS_CCE) {          /* logsumexp(z) − Σ t·z */
            for (j = 1; j < n; j++)
                mx = yr[j] > mx ? yr[j] : mx;
            for (j = 0; j < n; j++)
                sum += expf(yr[j] - mx);
            loss[r] = mx + logf(sum);
            for (j = 0; j < n; j++)
                loss[r] -= tr[j] * yr[j];
        } else {
            for (j = 0; j < n; j++)
                sum += tloss_term(kind, from_logits, delta, yr[j], tr[j]);
            loss[r] = sum / (float)n;
        }
        if (n == 1)
            hit[r] = (yr[0] > (from_logits ? 0.0f : 0.5f)) == (tr[0] > 0.5f);
        else
            hit[r] = argmax_row(yr, n) == argmax_row(tr, n) ? 1.0f : 0.0f;
    }
}

static void cpu_tloss_backward(struct wk_backend *be, enum hc_loss kind,
                               int from_logits, float delta, const float *y,
                               const float *t, int rows, int n, float scale,
                               float *dy)
{
    size_t i, count = (size_t)rows * n;

    (void)be;
    if (kind == HC_LOSS_CCE) {
        for (i = 0; i < count; i++)
            dy[i] = scale * (y[i] - t[i]);
        return;
    }
    scale /= (float)n;
    for (i = 0; i < count; i++)
        dy[i] = scale * tloss_deriv(kind, from_logits, delta, y[i], t[i]);
}

/* ---- pooling ---- */

/* Window (oh, ow)'s first input row and column and its cells inside x:
 * rows i0..i1 − 1, columns j0..j1 − 1 of the window, as pool_window
 * reads them. */
struct win {
    int ih0, iw0, i0, i1, j0, j1;
};

static struct win window_at(const struct wk_geom *g, int oh, int ow)
{
    struct win w;

    w.ih0 = oh * g->sh - g->pt;
    w.iw0 = ow * g->sw - g->pl;
    w.i0 = w.ih0 < 0 ? -w.ih0 : 0;
    w.i1 = w.ih0 + g->kh > g->H ? g->H - w.ih0 : g->kh;
    w.j0 = w.iw0 < 0 ? -w.iw0 : 0;
    w.j1 = w.iw0 + g->kw > g->W ? g->W - w.iw0 : g->kw;
    return w;
}

/* Max over window w in image img of x: its cells are (ih0 + i, iw0 + j),
 * i in [i0, i1), j in [j0, j1). The first cell initialises y and idx (C
 * values each, in cache); every other cell updates them where it is
 * strictly greater, four channels a step. */
static void pool_window(const struct wk_geom *g, const float *x, size_t img,
                        const struct win *w, float *y, int32_t *idx)
{
    const int C = g->C;
    const v4i lane = {0, 1, 2, 3};
    int i, j, c;

    for (i = w->i0; i < w->i1; i++) {
        for (j = w->j0; j < w->j1; j++) {
            int32_t at = (int32_t)(img + ((size_t)(w->ih0 + i) * g->W +
                                          w->iw0 + j) * C);
            const float *px = x + at;

            if (i == w->i0 && j == w->j0) {
                for (c = 0; c + 4 <= C; c += 4) {
                    v4i arg = at + c + lane;

                    st4(y + c, ld4(px + c));
                    memcpy(idx + c, &arg, sizeof arg);
                }
                for (; c < C; c++) {
                    y[c] = px[c];
                    idx[c] = at + c;
                }
                continue;
            }
            for (c = 0; c + 4 <= C; c += 4) {
                v4f v = ld4(px + c), best = ld4(y + c);
                v4i m = v > best, arg;

                memcpy(&arg, idx + c, sizeof arg);
                arg = (m & (at + c + lane)) | (~m & arg);
                st4(y + c, vsel(m, v, best));
                memcpy(idx + c, &arg, sizeof arg);
            }
            for (; c < C; c++) {
                if (px[c] > y[c]) {
                    y[c] = px[c];
                    idx[c] = at + c;
                }
            }
        }
    }
}

static void cpu_maxpool_forward(struct wk_backend *be, const struct wk_geom *g,
                                const float *x, float *y, int32_t *idx)
{
    int b, oh, ow;

    (void)be;
    for (b = 0; b < g->B; b++) {
        size_t img = (size_t)b * g->H * g->W * g->C;

        for (oh = 0; oh < g->OH; oh++) {
            for (ow = 0; ow < g->OW; ow++) {
                struct win w = window_at(g, oh, ow);

                pool_window(g, x, img, &w, y, idx);
                y += g->C;
                idx += g->C;
            }
        }
    }
}

static void cpu_maxpool_backward(struct wk_backend *be,
                                 const struct wk_geom *g, const float *dy,
                                 const int32_t *idx, float *dx)
{
    const size_t band_out = (size_t)g->OW * g->C;
    const size_t img = (size_t)g->H * g->W * g->C;
    size_t o, n_out = (size_t)g->B * g->OH * band_out;
    int b, oh;

    (void)be;
    if (g->sh != g->kh || g->sw != g->kw || g->pt || g->pl ||
        g->OH * g->kh > g->H || g->OW * g->kw > g->W) {
        /* Overlapping or padded windows: clear, then scatter-add. */
        memset(dx, 0, (size_t)g->B * img * sizeof *dx);
        for (o = 0; o < n_out; o++)
            dx[idx[o]] += dy[o];
        return;
    }
    /* Disjoint windows: clear one band of kh input rows at a time and
     * scatter into it while it is in cache; then the rows no window
     * covers. */
    for (b = 0; b < g->B; b++) {
        float *xb = dx + (size_t)b * img;
        size_t band_in = (size_t)g->kh * g->W * g->C;

        for (oh = 0; oh < g->OH; oh++) {
            memset(xb + oh * band_in, 0, band_in * sizeof *dx);
            for (o = 0; o < band_out; o++, dy++, idx++)
                dx[*idx] = *dy;
        }
        memset(xb + g->OH * band_in, 0,
               (img - g->OH * band_in) * sizeof *dx);
    }
}

static void cpu_avgpool_forward(struct wk_backend *be,
                                const struct wk_geom *g, const float *x,
                                float *y)
{
    const int C = g->C;
    int b, oh, ow, i, j, c;

    (void)be;
    for (b = 0; b < g->B; b++) {
        const float *xb = x + (size_t)b * g->H * g->W * C;

        for (oh = 0; oh < g->OH; oh++)
            for (ow = 0; ow < g->OW; ow++, y += C) {
                struct win w = window_at(g, oh, ow);
                float inv = 1.0f / (float)((w.i1 - w.i0) * (w.j1 - w.j0));

                memset(y, 0, (size_t)C * sizeof *y);
                for (i = w.i0; i < w.i1; i++)
                    for (j = w.j0; j < w.j1; j++) {
                        const float *px = xb + ((size_t)(w.ih0 + i) * g->W +
                                                w.iw0 + j) * C;

                        for (c = 0; c < C; c++)
                            y[c] += px[c];
                    }
                for (c = 0; c < C; c++)
                    y[c] *= inv;
            }
    }
}

static void cpu_avgpool_backward(struct wk_backend *be,
                                 const struct wk_geom *g, const float *dy,
                                 float *dx)
{
    const int C = g->C;
    int b, oh, ow, i, j, c;

    (void)be;
    memset(dx, 0, (size_t)g->B * g->H * g->W * C * sizeof *dx);
    for (b = 0; b < g->B; b++) {
        float *xb = dx + (size_t)b * g->H * g->W * C;

        for (oh = 0; oh < g->OH; oh++)
            for (ow = 0; ow < g->OW; ow++, dy += C) {
                struct win w = window_at(g, oh, ow);
                float inv = 1.0f / (float)((w.i1 - w.i0) * (w.j1 - w.j0));

                for (i = w.i0; i < w.i1; i++)
                    for (j = w.j0; j < w.j1; j++) {
                        float *px = xb + ((size_t)(w.ih0 + i) * g->W +
                                          w.iw0 + j) * C;

                        for (c = 0; c < C; c++)
                            px[c] += dy[c] * inv;
                    }
            }
    }
}

/* ---- depthwise convolution ---- */

/* Direct loops over each output's window, the cells inside x row by row,
 * channels innermost: y's C·dm values of one output position are summed
 * in place, one kernel row (C·dm values of w) per cell. */
/* y (n) += a ⊙ b, four elements a step so the compiler may pair them
 * (depth_multiplier 1: a channel's products in the order the general
 * loops add them, so the sums are the same). */
static void madd(float *restrict y, const float *restrict a,
                 const float *restrict b, int n)
{
    int c = 0;

    for (; c + 4 <= n; c += 4) {
        y[c] += a[c] * b[c];
        y[c + 1] += a[c + 1] * b[c + 1];
        y[c + 2] += a[c + 2] * b[c + 2];
        y[c + 3] += a[c + 3] * b[c + 3];
    }
    for (; c < n; c++)
        y[c] += a[c] * b[c];
}

static void cpu_dwconv_forward(struct wk_backend *be, const struct wk_geom *g,
                               int dm, const float *x, const float *w,
                               float *y)
{
    const int C = g->C, CM = C * dm;
    int b, oh, ow, i, j, c, m;

    (void)be;
    for (b = 0; b < g->B; b++) {
        const float *xb = x + (size_t)b * g->H * g->W * C;

        for (oh = 0; oh < g->OH; oh++)
            for (ow = 0; ow < g->OW; ow++, y += CM) {
                struct win v = window_at(g, oh, ow);

                memset(y, 0, (size_t)CM * sizeof *y);
                for (i = v.i0; i < v.i1; i++)
                    for (j = v.j0; j < v.j1; j++) {
                        const float *px = xb + ((size_t)(v.ih0 + i) * g->W +
                                                v.iw0 + j) * C;
                        const float *pw = w + ((size_t)i * g->kw + j) * CM;

                        if (dm == 1) {
                            madd(y, px, pw, C);
                            continue;
                        }
                        for (c = 0; c < C; c++)
                            for (m = 0; m < dm; m++)
                                y[c * dm + m] += px[c] * pw[c * dm + m];
                    }
            }
    }
}

static void cpu_dwconv_backward_filter(struct wk_backend *be,
                                       const struct wk_geom *g, int dm,
                                       const float *x, const float *dy,
                                       float *dw)
{
    const int C = g->C, CM = C * dm;
    int b, oh, ow, i, j, c, m;

    (void)be;
    memset(dw, 0, (size_t)g->kh * g->kw * CM * sizeof *dw);
    for (b = 0; b < g->B; b++) {
        const float *xb = x + (size_t)b * g->H * g->W * C;

        for (oh = 0; oh < g->OH; oh++)
            for (ow = 0; ow < g->OW; ow++, dy += CM) {
                struct win v = window_at(g, oh, ow);

                for (i = v.i0; i < v.i1; i++)
                    for (j = v.j0; j < v.j1; j++) {
                        const float *px = xb + ((size_t)(v.ih0 + i) * g->W +
                                                v.iw0 + j) * C;
                        float *pw = dw + ((size_t)i * g->kw + j) * CM;

                        if (dm == 1) {
                            madd(pw, px, dy, C);
                            continue;
                        }
                        for (c = 0; c < C; c++)
                            for (m = 0; m < dm; m++)
                                pw[c * dm + m] += px[c] * dy[c * dm + m];
                    }
            }
    }
}

static void cpu_dwconv_backward_input(struct wk_backend *be,
                                      const struct wk_geom *g, int dm,
                                      const float *dy, const float *w,
                                      float *dx)
{
    const int C = g->C, CM = C * dm;
    int b, oh, ow, i, j, c, m;

    (void)be;
    memset(dx, 0, (size_t)g->B * g->H * g->W * C * sizeof *dx);
    for (b = 0; b < g->B; b++) {
        float *xb = dx + (size_t)b * g->H * g->W * C;

        for (oh = 0; oh < g->OH; oh++)
            for (ow = 0; ow < g->OW; ow++, dy += CM) {
                struct win v = window_at(g, oh, ow);

                for (i = v.i0; i < v.i1; i++)
                    for (j = v.j0; j < v.j1; j++) {
                        float *px = xb + ((size_t)(v.ih0 + i) * g->W +
                                          v.iw0 + j) * C;
                        const float *pw = w + ((size_t)i * g->kw + j) * CM;

                        if (dm == 1) {
                            madd(px, dy, pw, C);
                            continue;
                        }
                        for (c = 0; c < C; c++) {
                            float sum = 0.0f;

                            for (m = 0; m < dm; m++)
                                sum += dy[c * dm + m] * pw[c * dm + m];
                            px[c] += sum;
                        }
                    }
            }
    }
}

/* ---- dropout ---- */

static void cpu_dropout(const float *x, float *y, size_t n, float rate,
                        uint64_t seed)
{
    uint64_t thr = (uint64_t)(rate * 16777216.0f);
    float keep = 1.0f / (1.0f - rate);
    size_t i;

    for (i = 0; i < n; i++)
        y[i] = (wk_dropout_hash(seed, i) >> 40) >= thr ? x[i] * keep : 0.0f;
}

static void cpu_dropout_forward(struct wk_backend *be, const float *x,
                                float *y, size_t n, float rate, uint64_t seed)
{
    (void)be;
    cpu_dropout(x, y, n, rate, seed);
}

static void cpu_dropout_backward(struct wk_backend *be, const float *dy,
                                 float *dx, size_t n, float rate,
                                 uint64_t seed)
{
    (void)be;
    cpu_dropout(dy, dx, n, rate, seed);
}

/* ---- embedding lookup ---- */

/* y (+)= x over one embedding row of dim floats: 16 at a time where they
 * fit (a fixed count the compiler turns into vector moves, not a call to
 * memcpy per row), the rest one by one. */
static void row_copy(float *restrict y, const float *restrict x, int dim,
                     int add)
{
    int c = 0;

    for (; c + 16 <= dim; c += 16)
        for (int q = 0; q < 16; q++)
            y[c + q] = add ? y[c + q] + x[c + q] : x[c + q];
    for (; c < dim; c++)
        y[c] = add ? y[c] + x[c] : x[c];
}

static void cpu_embed_gather(struct wk_backend *be, const float *rows,
                             const int32_t *inv, size_t n, int dim, float *y)
{
    (void)be;
    for (size_t i = 0; i < n; i++)
        row_copy(y + i * (size_t)dim, rows + (size_t)inv[i] * (size_t)dim,
                 dim, 0);
}

static void cpu_embed_scatter(struct wk_backend *be, const float *dy,
                              const int32_t *inv, size_t n, int dim,
                              size_t n_rows, float *drows)
{
    (void)be;
    memset(drows, 0, n_rows * (size_t)dim * sizeof *drows);
    for (size_t i = 0; i < n; i++)
        row_copy(drows + (size_t)inv[i] * (size_t)dim, dy + i * (size_t)dim,
                 dim, 1);
}

/* ---- layer normalisation ---- */

static void cpu_layernorm_forward(struct wk_backend *be, int rows, int n,
                                  float eps, const float *x,
                                  const float *gamma, const float *beta,
                                  float *y, float *xhat, float *rstd)
{
    (void)be;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * n;
        float *hr = xhat + (size_t)r * n, *yr = y + (size_t)r * n;
        double mu = 0, var = 0;
        float rs;

        for (int j = 0; j < n; j++)
            mu += xr[j];
        mu /= n;
        for (int j = 0; j < n; j++)
            var += (xr[j] - mu) * (xr[j] - mu);
        rs = (float)(1.0 / sqrt(var / n + eps));
        rstd[r] = rs;
        for (int j = 0; j < n; j++) {
            hr[j] = (float)(xr[j] - mu) * rs;
            yr[j] = hr[j] * (gamma ? gamma[j] : 1.0f) + (beta ? beta[j] : 0.0f);
        }
    }
}

/* ---- batch normalization: channels in chunks of BN_CHUNK, each chunk's
 * sums in double on the stack (of float partial sums over BIAS_ROWS rows,
 * bn_part), the rows walked in order; four channels at a time (v4f, and
 * two v2d for the double sums: the same operations, in the same order, as
 * one channel at a time) ---- */

#define BN_CHUNK 256

typedef double v2d __attribute__((vector_size(16)));

/* Lanes 0–1 and 2–3 of v as doubles. */
static inline v2d lo2d(v4f v)
{
    v2d d = {v[0], v[1]};

    return d;
}

static inline v2d hi2d(v4f v)
{
    v2d d = {v[2], v[3]};

    return d;
}

/* s[0..2) += lanes of v, in double: four channels' sums (v2d pairs). */
static inline void acc4d(v2d *s, v4f v)
{
    s[0] += lo2d(v);
    s[1] += hi2d(v);
}

/* Channel j's double in an array of pairs. */
#define D2(a, j) ((a)[(j) >> 1][(j) & 1])

/* Two sums per channel over up to BIAS_ROWS rows, in float (v four
 * channels at a time, t the last n mod 4), before bn_part_add adds them
 * to the double sums: a pass goes as a bias gradient's does. */
struct bn_part {
    v4f v[2][BN_CHUNK / 4];
    float t[2][4];
};

/* a, b (channels [0, n) as v2d pairs) += p's two sums; p zeroed. */
static void bn_part_add(struct bn_part *p, v2d *a, v2d *b, int n, int n4)
{
    for (int j = 0; j < n4; j += 4) {
        acc4d(a + j / 2, p->v[0][j / 4]);
        acc4d(b + j / 2, p->v[1][j / 4]);
    }
    for (int j = n4; j < n; j++) {
        D2(a, j) += p->t[0][j - n4];
        D2(b, j) += p->t[1][j - n4];
    }
    memset(p, 0, sizeof *p);
}

/* One pass: Σ(x − k) and Σ(x − k)² (bn_part), k each channel's first
 * value — near the mean, so that the variance Σ(x − k)²/rows −
 * (mean − k)² loses nothing to cancellation. */
static void cpu_bn_stats(struct wk_backend *be, const float *x, int rows,
                         int c, float *st)
{
    v2d s[BN_CHUNK / 2], q[BN_CHUNK / 2];
    struct bn_part p;

    (void)be;
    for (int c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int n = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK, n4 = n & ~3;
        const float *k = x + c0;        /* the shift: row 0 */

        memset(s, 0, sizeof s);
        memset(q, 0, sizeof q);
        memset(&p, 0, sizeof p);
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * c + c0;

            for (int j = 0; j < n4; j += 4) {
                v4f d = ld4(xr + j) - ld4(k + j);

                p.v[0][j / 4] += d;
                p.v[1][j / 4] += d * d;
            }
            for (int j = n4; j < n; j++) {
                float d = xr[j] - k[j];

                p.t[0][j - n4] += d;
                p.t[1][j - n4] += d * d;
            }
            if ((r + 1) % BIAS_ROWS == 0 || r + 1 == rows)
                bn_part_add(&p, s, q, n, n4);
        }
        for (int j = 0; j < n; j++) {
            double dm = D2(s, j) / rows, mean = k[j] + dm;
            double var = D2(q, j) / rows - dm * dm;

            if (var < 0.0)
                var = 0.0;
            st[c0 + j] = (float)mean;
            st[c + c0 + j] = (float)var;
            st[2 * c + c0 + j] = (float)(var + mean * mean);
        }
    }
}

static void cpu_layernorm_backward(struct wk_backend *be, int rows, int n,
                                   const float *dy, const float *xhat,
                                   const float *rstd, const float *gamma,
                                   float *dx, float *dgamma, float *dbeta)
{
    (void)be;
    for (int j = 0; j < n && (dgamma || dbeta); j++) {
        double sg = 0, sb = 0;

        for (int r = 0; r < rows; r++) {
            sg += (double)dy[(size_t)r * n + j] * xhat[(size_t)r * n + j];
            sb += dy[(size_t)r * n + j];
        }
        if (dgamma)
            dgamma[j] = (float)sg;
        if (dbeta)
            dbeta[j] = (float)sb;
    }
    for (int r = 0; dx && r < rows; r++) {
        const float *dr = dy + (size_t)r * n, *hr = xhat + (size_t)r * n;
        float *xr = dx + (size_t)r * n;
        double mg = 0, mgh = 0;

        for (int j = 0; j < n; j++) {
            double g = (double)dr[j] * (gamma ? gamma[j] : 1.0f);

            mg += g;
            mgh += g * hr[j];
        }
        mg /= n;
        mgh /= n;
        for (int j = 0; j < n; j++) {
            double g = (double)dr[j] * (gamma ? gamma[j] : 1.0f);

            xr[j] = (float)(rstd[r] * (g - mg - hr[j] * mgh));
        }
    }
}

static void cpu_bn_forward(struct wk_backend *be, const float *x, int rows,
                           int c, const float *mean, const float *var,
                           float eps, const float *gamma, const float *beta,
                           float *y)
{
    float a[BN_CHUNK], b[BN_CHUNK];

    (void)be;
    for (int c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int n = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK, n4 = n & ~3;

        /* y = a·x + b per channel */
        for (int j = 0; j < n; j++) {
            float inv = 1.0f / sqrtf(var[c0 + j] + eps);
            float g = gamma ? gamma[c0 + j] : 1.0f;

            a[j] = g * inv;
            b[j] = (beta ? beta[c0 + j] : 0.0f) - a[j] * mean[c0 + j];
        }
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * c + c0;
            float *yr = y + (size_t)r * c + c0;

            for (int j = 0; j < n4; j += 4)
                st4(yr + j, ld4(a + j) * ld4(xr + j) + ld4(b + j));
            for (int j = n4; j < n; j++)
                yr[j] = a[j] * xr[j] + b[j];
        }
    }
}

/* Σ dy·(x − mean) and Σ dy in one pass (bn_part). */
static void cpu_bn_backward_params(struct wk_backend *be, const float *x,
                                   const float *dy, int rows, int c,
                                   const float *st, float eps, float *sums)
{
    v2d sg[BN_CHUNK / 2], sb[BN_CHUNK / 2];
    struct bn_part p;

    (void)be;
    for (int c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int n = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK, n4 = n & ~3;
        const float *mean = st + c0;

        memset(sg, 0, sizeof sg);
        memset(sb, 0, sizeof sb);
        memset(&p, 0, sizeof p);
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * c + c0;
            const float *dr = dy + (size_t)r * c + c0;

            for (int j = 0; j < n4; j += 4) {
                v4f d = ld4(dr + j);

                p.v[0][j / 4] += d * (ld4(xr + j) - ld4(mean + j));
                p.v[1][j / 4] += d;
            }
            for (int j = n4; j < n; j++) {
                p.t[0][j - n4] += dr[j] * (xr[j] - mean[j]);
                p.t[1][j - n4] += dr[j];
            }
            if ((r + 1) % BIAS_ROWS == 0 || r + 1 == rows)
                bn_part_add(&p, sg, sb, n, n4);
        }
        for (int j = 0; j < n; j++) {
            sums[c0 + j] = (float)(D2(sg, j) /
                                   sqrt((double)st[c + c0 + j] + eps));
            sums[c + c0 + j] = (float)D2(sb, j);
        }
    }
}

static void cpu_bn_backward_input(struct wk_backend *be, const float *x,
                                  const float *dy, int rows, int c,
                                  const float *st, float eps,
                                  const float *gamma, const float *sums,
                                  float *dx)
{
    float k[BN_CHUNK], inv[BN_CHUNK], mg[BN_CHUNK], mb[BN_CHUNK];

    (void)be;
    for (int c0 = 0; c0 < c; c0 += BN_CHUNK) {
        int n = c - c0 < BN_CHUNK ? c - c0 : BN_CHUNK, n4 = n & ~3;
        const float *mean = st + c0;

        for (int j = 0; j < n; j++) {
            inv[j] = 1.0f / sqrtf(st[c + c0 + j] + eps);
            k[j] = (gamma ? gamma[c0 + j] : 1.0f) * inv[j];
            mg[j] = sums[c0 + j] / (float)rows;
            mb[j] = sums[c + c0 + j] / (float)rows;
        }
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * c + c0;
            const float *dr = dy + (size_t)r * c + c0;
            float *xo = dx + (size_t)r * c + c0;

            for (int j = 0; j < n4; j += 4) {
                v4f xh = (ld4(xr + j) - ld4(mean + j)) * ld4(inv + j);

                st4(xo + j, ld4(k + j) * (ld4(dr + j) - ld4(mb + j) -
                                          xh * ld4(mg + j)));
            }
            for (int j = n4; j < n; j++) {
                float xh = (xr[j] - mean[j]) * inv[j];

                xo[j] = k[j] * (dr[j] - mb[j] - xh * mg[j]);
            }
        }
    }
}

static const struct wk_backend_ops cpu_ops = {
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_memcpy,
    .download = cpu_memcpy,
    .copy = cpu_memcpy,
    .check = NULL,
    .sgemm = cpu_sgemm,
    .fill = cpu_fill,
    .reg_grad = cpu_reg_grad,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .reduce = cpu_reduce,
    .copy2d = cpu_copy2d,
    .mul = cpu_mul,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .act_forward = cpu_act_forward,
    .act_backward = cpu_act_backward,
    .bias_grad = cpu_bias_grad,
    .act_bias_backward = cpu_act_bias_backward,
    .xent_forward = cpu_xent_forward,
    .xent_backward = cpu_xent_backward,
    .mse_forward = cpu_mse_forward,
    .mse_backward = cpu_mse_backward,
    .relu_forward = cpu_relu_forward,
    .relu_backward = cpu_relu_backward,
    .tloss_forward = cpu_tloss_forward,
    .tloss_backward = cpu_tloss_backward,
    .maxpool_forward = cpu_maxpool_forward,
    .maxpool_backward = cpu_maxpool_backward,
    .avgpool_forward = cpu_avgpool_forward,
    .avgpool_backward = cpu_avgpool_backward,
    .dwconv_forward = cpu_dwconv_forward,
    .dwconv_backward_filter = cpu_dwconv_backward_filter,
    .dwconv_backward_input = cpu_dwconv_backward_input,
    .layernorm_forward = cpu_layernorm_forward,
    .layernorm_backward = cpu_layernorm_backward,
    .dropout_forward = cpu_dropout_forward,
    .dropout_backward = cpu_dropout_backward,
    .bn_stats = cpu_bn_stats,
    .bn_forward = cpu_bn_forward,
    .bn_backward_params = cpu_bn_backward_params,
    .bn_backward_input = cpu_bn_backward_input,
    .embed_gather = cpu_embed_gather,
    .embed_scatter = cpu_embed_scatter,
};

int wk_backend_cpu_new(int n_threads, struct wk_backend **out)
{
    struct wk_backend *be = NULL;
    struct cpu_ctx *ctx = NULL;

    *out = NULL;
    if (n_threads < 0)
        return hc_err_set(HC_ERR_INVAL,
                          "cpu backend: %d threads requested; use 1 or more "
                          "(0 means 1)", n_threads);
    be = calloc(1, sizeof *be);
    ctx = calloc(1, sizeof *ctx);
    if (!be || !ctx) {
        free(be);
        free(ctx);
        return hc_err_set(HC_ERR_NOMEM, "cpu backend: out of memory");
    }
    ctx->n_threads = n_threads ? n_threads : 1;
    openblas_set_num_threads(ctx->n_threads);
    be->ops = &cpu_ops;
    be->ctx = ctx;
    be->host_memory = 1;
    be->ws_cache = CPU_WS_CACHE;
    strcpy(be->name, "cpu");
    *out = be;
    return HC_OK;
}
