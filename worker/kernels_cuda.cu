/*
 * kernels_cuda.cu — the CUDA backend's compute ops other than sgemm:
 * fill/scale/axpy/reduce/copy2d/mul, im2col/col2im over NHWC, bias add and
 * gradient, activations forward and backward, softmax + sparse cross-entropy, MSE,
 * max-pool with argmax, average pool, depthwise convolution, and dropout with the CPU's counter
 * hash. Each op
 * queues one or two kernels on the backend's stream and records a failed
 * launch for the check op (cuda_impl.cuh).
 *
 * The kernels follow backend_cpu.c op by op and pick the same elements
 * (first maximum on ties, same dropout mask); only the order of float
 * additions in sums differs. Sums with no atomics anywhere, so results are
 * deterministic: col2im and max- and average-pool backward gather per
 * input element,
 * bias gradients use per-chunk partial sums added up in double.
 */
#include "cuda_impl.cuh"

#include <math.h>

#include "rng.h"

#define TPB 256                 /* threads per block */
#define ROWS_PER_BLOCK (TPB / 32)   /* warp-per-row kernels */
#define MAX_BLOCKS 1048576u
#define REDUCE_SRC 16           /* sources per reduce kernel */
#define COLSUM_CHUNKS 512       /* most partial sums per column */

#define GRID_LOOP(i, n)                                                   \
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)blockDim.x * gridDim.x)

static unsigned blocks_for(size_t n)
{
    size_t b = (n + TPB - 1) / TPB;

    return b < 1 ? 1u : b > MAX_BLOCKS ? MAX_BLOCKS : (unsigned)b;
}

static cudaStream_t stream_of(struct wk_backend *be)
{
    return cu_ctx(be)->stream;
}

/* ---- BLAS-like ---- */

__global__ static void fill_k(float *x, size_t n, float v)
{
    GRID_LOOP(i, n)
        x[i] = v;
}

__global__ static void scale_k(float *x, size_t n, float a)
{
    GRID_LOOP(i, n)
        x[i] *= a;
}

__global__ static void reg_grad_k(const float *w, float *g, size_t n,
                                  float l1, float l2)
{
    GRID_LOOP(i, n)
        g[i] += l1 * (float)((w[i] > 0.0f) - (w[i] < 0.0f)) + 2.0f * l2 * w[i];
}

__global__ static void axpy_k(size_t n, float a, const float *x, float *y)
{
    GRID_LOOP(i, n)
        y[i] += a * x[i];
}

__global__ static void copy2d_k(int rows, int cols, float a, const float *src,
                                int lds, float *dst, int ldd, int accumulate)
{
    GRID_LOOP(i, (size_t)rows * cols) {
        size_t r = i / cols, c = i % cols;
        float v = a * src[r * lds + c];

        dst[r * ldd + c] = accumulate ? dst[r * ldd + c] + v : v;
    }
}

__global__ static void mul_k(size_t n, const float *x, const float *y,
                             float *z, int accumulate)
{
    GRID_LOOP(i, n)
        z[i] = accumulate ? z[i] + x[i] * y[i] : x[i] * y[i];
}

struct reduce_args {
    const float *src[REDUCE_SRC];
    float w[REDUCE_SRC];
    int n_src;
    int accumulate;             /* 0: dst = Σ; 1: dst += Σ */
};

__global__ static void reduce_k(float *dst, struct reduce_args a, size_t n)
{
    GRID_LOOP(i, n) {
        float v = a.accumulate ? dst[i] + a.w[0] * a.src[0][i]
                               : a.w[0] * a.src[0][i];

        for (int s = 1; s < a.n_src; s++)
            v += a.w[s] * a.src[s][i];
        dst[i] = v;
    }
}

__global__ static void scale_rows_k(float *c, int m, int n, int ldc,
                                    float beta)
{
    GRID_LOOP(i, (size_t)m * n) {
        float *p = c + (i / n) * (size_t)ldc + i % n;

        *p = beta == 0.0f ? 0.0f : beta * *p;
    }
}

void wk_cu_fill(struct wk_backend *be, float *x, size_t n, float v)
{
    if (!n || wk_cu_enter(be))
        return;
    fill_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(x, n, v);
    wk_cu_launched(be, "fill kernel");
}

void wk_cu_scale(struct wk_backend *be, float *x, size_t n, float a)
{
    if (!n || wk_cu_enter(be))
        return;
    scale_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(x, n, a);
    wk_cu_launched(be, "scale kernel");
}

void wk_cu_reg_grad(struct wk_backend *be, const float *w, float *g,
                    size_t n, float l1, float l2)
{
    if (!n || wk_cu_enter(be))
        return;
    reg_grad_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(w, g, n, l1, l2);
    wk_cu_launched(be, "regularizer gradient kernel");
}

void wk_cu_axpy(struct wk_backend *be, size_t n, float a, const float *x,
                float *y)
{
    if (!n || wk_cu_enter(be))
        return;
    axpy_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(n, a, x, y);
    wk_cu_launched(be, "axpy kernel");
}

void wk_cu_copy2d(struct wk_backend *be, int rows, int cols, float a,
                  const float *src, int lds, float *dst, int ldd,
                  int accumulate)
{
    size_t n = (size_t)rows * cols;

    if (!n || wk_cu_enter(be))
        return;
    copy2d_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(rows, cols, a, src,
                                                       lds, dst, ldd,
                                                       accumulate);
    wk_cu_launched(be, "copy2d kernel");
}

void wk_cu_mul(struct wk_backend *be, size_t n, const float *x,
               const float *y, float *z, int accumulate)
{
    if (!n || wk_cu_enter(be))
        return;
    mul_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(n, x, y, z, accumulate);
    wk_cu_launched(be, "mul kernel");
}

void wk_cu_reduce(struct wk_backend *be, float *dst, const float *const *src,
                  const float *w, int n_src, size_t n)
{
    struct reduce_args a;
    int s0, s;

    if (!n || n_src < 1 || wk_cu_enter(be))
        return;
    for (s0 = 0; s0 < n_src; s0 += REDUCE_SRC) {
        a.n_src = n_src - s0 < REDUCE_SRC ? n_src - s0 : REDUCE_SRC;
        a.accumulate = s0 > 0;
        for (s = 0; s < a.n_src; s++) {
            a.src[s] = src[s0 + s];
            a.w[s] = w ? w[s0 + s] : 1.0f;
        }
        reduce_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(dst, a, n);
        wk_cu_launched(be, "reduce kernel");
    }
}

void wk_cu_scale_rows(struct wk_backend *be, float *c, int m, int n, int ldc,
                      float beta)
{
    if (m <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    scale_rows_k<<<blocks_for((size_t)m * n), TPB, 0, stream_of(be)>>>(
        c, m, n, ldc, beta);
    wk_cu_launched(be, "sgemm k=0 kernel");
}

/* ---- convolution helpers ---- */

/* One thread per entry of cols (B·OH·OW, kh·kw·C). */
__global__ static void im2col_k(struct wk_geom g, const float *x, float *cols)
{
    size_t total = (size_t)g.B * g.OH * g.OW * g.kh * g.kw * g.C;

    GRID_LOOP(e, total) {
        size_t t = e;
        int c = (int)(t % g.C), j, i, ow, oh, b, ih, iw;

        t /= g.C;
        j = (int)(t % g.kw);
        t /= g.kw;
        i = (int)(t % g.kh);
        t /= g.kh;
        ow = (int)(t % g.OW);
        t /= g.OW;
        oh = (int)(t % g.OH);
        b = (int)(t / g.OH);
        ih = oh * g.sh - g.pt + i;
        iw = ow * g.sw - g.pl + j;
        cols[e] = ih < 0 || ih >= g.H || iw < 0 || iw >= g.W
                      ? 0.0f
                      : x[(((size_t)b * g.H + ih) * g.W + iw) * g.C + c];
    }
}

/* First output index o ≥ 0 whose window [o·s − p, o·s − p + k) holds
 * input position v. */
__device__ static int first_window(int v, int p, int k, int s)
{
    int num = v + p - k + 1;

    return num <= 0 ? 0 : (num + s - 1) / s;
}

/* Element e of an input (B, H, W, C) and the output windows that hold it:
 * rows oh0..oh1, columns ow0..ow1 (none when a first exceeds its last). */
struct covering {
    int b, ih, iw, c;
    int oh0, oh1, ow0, ow1;
};

__device__ static struct covering covering_windows(const struct wk_geom &g,
                                                   size_t e)
{
    struct covering w;
    size_t t = e;

    w.c = (int)(t % g.C);
    t /= g.C;
    w.iw = (int)(t % g.W);
    t /= g.W;
    w.ih = (int)(t % g.H);
    w.b = (int)(t / g.H);
    w.oh0 = first_window(w.ih, g.pt, g.kh, g.sh);
    w.oh1 = (w.ih + g.pt) / g.sh;
    if (w.oh1 > g.OH - 1)
        w.oh1 = g.OH - 1;
    w.ow0 = first_window(w.iw, g.pl, g.kw, g.sw);
    w.ow1 = (w.iw + g.pl) / g.sw;
    if (w.ow1 > g.OW - 1)
        w.ow1 = g.OW - 1;
    return w;
}

/* One thread per element of dx (B, H, W, C): the sum of every cols entry
 * im2col read from it, windows in output order. */
__global__ static void col2im_k(struct wk_geom g, const float *cols, float *dx,
                                int add)
{
    size_t total = (size_t)g.B * g.H * g.W * g.C;
    size_t row_len = (size_t)g.kh * g.kw * g.C;

    GRID_LOOP(e, total) {
        struct covering w = covering_windows(g, e);
        float sum = 0.0f;

        for (int oh = w.oh0; oh <= w.oh1; oh++) {
            int i = w.ih + g.pt - oh * g.sh;

            for (int ow = w.ow0; ow <= w.ow1; ow++) {
                int j = w.iw + g.pl - ow * g.sw;
                size_t r = ((size_t)w.b * g.OH + oh) * g.OW + ow;

                sum += cols[r * row_len + ((size_t)i * g.kw + j) * g.C + w.c];
            }
        }
        dx[e] = add ? dx[e] + sum : sum;
    }
}

void wk_cu_im2col(struct wk_backend *be, const struct wk_geom *g,
                  const float *x, float *cols)
{
    size_t n = (size_t)g->B * g->OH * g->OW * g->kh * g->kw * g->C;

    if (!n || wk_cu_enter(be))
        return;
    im2col_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, x, cols);
    wk_cu_launched(be, "im2col kernel");
}

void wk_cu_col2im(struct wk_backend *be, const struct wk_geom *g,
                  const float *cols, float *dx, int add)
{
    size_t n = (size_t)g->B * g->H * g->W * g->C;

    if (!n || wk_cu_enter(be))
        return;
    col2im_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, cols, dx, add);
    wk_cu_launched(be, "col2im kernel");
}

/* ---- warp helpers (one warp per row) ---- */

__device__ static float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ static float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The first maximum of the warp's (value, index) pairs: greater value, or
 * equal value and smaller index. Every lane gets the result. */
__device__ static void warp_argmax(float *v, int *idx)
{
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, *v, o);
        int oi = __shfl_xor_sync(0xffffffffu, *idx, o);

        if (ov > *v || (ov == *v && oi < *idx)) {
            *v = ov;
            *idx = oi;
        }
    }
}

/* First argmax of row v (n ≥ 1), as argmax_row in backend_cpu.c. */
__device__ static int row_argmax(const float *v, int n, int lane)
{
    float best = -INFINITY;
    int arg = n;                /* "none yet" loses every tie */

    for (int j = lane; j < n; j += 32) {
        if (arg == n || v[j] > best) {
            best = v[j];
            arg = j;
        }
    }
    warp_argmax(&best, &arg);
    return arg;
}

static unsigned row_blocks(int rows)
{
    return (unsigned)((rows + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK);
}

/* ---- bias and activations ---- */

__device__ static float act_apply(enum hc_act act, float v)
{
    switch (act) {
    case HC_ACT_RELU:
        return v > 0.0f ? v : 0.0f;
    case HC_ACT_SIGMOID:
        return 1.0f / (1.0f + expf(-v));
    case HC_ACT_TANH:
        return tanhf(v);
    case HC_ACT_RELU6:
        return fminf(fmaxf(v, 0.0f), 6.0f);
    case HC_ACT_ELU:
        return v > 0.0f ? v : expm1f(v);
    case HC_ACT_GELU:
        return 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    case HC_ACT_SWISH:
        return v / (1.0f + expf(-v));
    case HC_ACT_SOFTPLUS:
        return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v)));
    case HC_ACT_HARD_SIGMOID:
        return fminf(fmaxf((v + 3.0f) / 6.0f, 0.0f), 1.0f);
    default:
        return v;
    }
}

__global__ static void act_k(const float *x, const float *bias, float *y,
                             int rows, int n, enum hc_act act)
{
    GRID_LOOP(i, (size_t)rows * n)
        y[i] = act_apply(act, x[i] + (bias ? bias[i % n] : 0.0f));
}

/* Softmax of x + bias per row, computed stably; y may equal x. */
__global__ static void softmax_k(const float *x, const float *bias, float *y,
                                 int rows, int n)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    float mx = -INFINITY, sum = 0.0f;

    if (r >= rows)
        return;
    x += (size_t)r * n;
    y += (size_t)r * n;
    for (int j = lane; j < n; j += 32)
        mx = fmaxf(mx, x[j] + (bias ? bias[j] : 0.0f));
    mx = warp_max(mx);
    for (int j = lane; j < n; j += 32) {
        float e = expf(x[j] + (bias ? bias[j] : 0.0f) - mx);

        y[j] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    for (int j = lane; j < n; j += 32)
        y[j] /= sum;
}

/* act' at v: v is the output y, or the input z for gelu and swish
 * (wk_act_reads_input), as backend_cpu.c's act_deriv. */
__device__ static float act_deriv(enum hc_act act, float v)
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
    case HC_ACT_ELU:
        return v > 0.0f ? 1.0f : v + 1.0f;
    case HC_ACT_GELU:
        return 0.5f * (1.0f + erff(v * 0.70710678118654752f)) +
               v * expf(-0.5f * v * v) * 0.39894228040143268f;
    case HC_ACT_SWISH:
        s = 1.0f / (1.0f + expf(-v));
        return s * (1.0f + v * (1.0f - s));
    case HC_ACT_SOFTPLUS:
        return -expm1f(-v);
    case HC_ACT_HARD_SIGMOID:
        return v > 0.0f && v < 1.0f ? 1.0f / 6.0f : 0.0f;
    default:
        return 1.0f;
    }
}

__global__ static void act_back_k(const float *y, const float *dy, float *dx,
                                  size_t count, enum hc_act act)
{
    GRID_LOOP(i, count) {
        if (act == HC_ACT_RELU)
            dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
        else
            dx[i] = dy[i] * act_deriv(act, y[i]);
    }
}

/* dx = y ⊙ (dy − Σ_j dy_j y_j) per row; dx may equal dy. */
__global__ static void softmax_back_k(const float *y, const float *dy,
                                      float *dx, int rows, int n)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    size_t off = (size_t)r * n;
    float dot = 0.0f;

    if (r >= rows)
        return;
    for (int j = lane; j < n; j += 32)
        dot += dy[off + j] * y[off + j];
    dot = warp_sum(dot);
    for (int j = lane; j < n; j += 32)
        dx[off + j] = y[off + j] * (dy[off + j] - dot);
}

/* Partial column sums: block (x, y) sums columns 32·x … over rows y·8 + ty,
 * stepping by gridDim.y · 8, into part[y · n + column]. */
__global__ static void colsum_part_k(const float *dy, int rows, int n,
                                     float *part)
{
    __shared__ float sh[8][33];
    int col = blockIdx.x * 32 + threadIdx.x;
    float s = 0.0f;

    if (col < n)
        for (int r = blockIdx.y * 8 + threadIdx.y; r < rows;
             r += gridDim.y * 8)
            s += dy[(size_t)r * n + col];
    sh[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < n) {
        for (int k = 1; k < 8; k++)
            s += sh[k][threadIdx.x];
        part[(size_t)blockIdx.y * n + col] = s;
    }
}

__global__ static void colsum_final_k(const float *part, int chunks, int n,
                                      float *db)
{
    GRID_LOOP(j, (size_t)n) {
        double acc = 0.0;

        for (int k = 0; k < chunks; k++)
            acc += part[(size_t)k * n + j];
        db[j] = (float)acc;
    }
}

void wk_cu_act_forward(struct wk_backend *be, const float *x,
                       const float *bias, float *y, int rows, int n,
                       enum hc_act act)
{
    if (rows <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    if (act == HC_ACT_SOFTMAX)
        softmax_k<<<row_blocks(rows), TPB, 0, stream_of(be)>>>(x, bias, y,
                                                               rows, n);
    else
        act_k<<<blocks_for((size_t)rows * n), TPB, 0, stream_of(be)>>>(
            x, bias, y, rows, n, act);
    wk_cu_launched(be, "activation forward kernel");
}

void wk_cu_act_backward(struct wk_backend *be, const float *y,
                        const float *dy, float *dx, int rows, int n,
                        enum hc_act act)
{
    size_t count = (size_t)rows * n;

    if (rows <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    if (act == HC_ACT_SOFTMAX)
        softmax_back_k<<<row_blocks(rows), TPB, 0, stream_of(be)>>>(y, dy, dx,
                                                                    rows, n);
    else
        act_back_k<<<blocks_for(count), TPB, 0, stream_of(be)>>>(y, dy, dx,
                                                                 count, act);
    wk_cu_launched(be, "activation backward kernel");
}

void wk_cu_bias_grad(struct wk_backend *be, const float *dy, int rows, int n,
                     float *db)
{
    int chunks;
    float *part;

    if (n <= 0 || wk_cu_enter(be))
        return;
    if (rows <= 0) {
        wk_cu_fill(be, db, (size_t)n, 0.0f);
        return;
    }
    chunks = (rows + 127) / 128;        /* about 16 rows per thread */
    if (chunks > COLSUM_CHUNKS)
        chunks = COLSUM_CHUNKS;
    if (!(part = wk_cu_workspace(be, (size_t)chunks * n * sizeof *part)))
        return;
    colsum_part_k<<<dim3((unsigned)(n + 31) / 32, (unsigned)chunks),
                    dim3(32, 8), 0, stream_of(be)>>>(dy, rows, n, part);
    wk_cu_launched(be, "bias gradient kernel");
    colsum_final_k<<<blocks_for((size_t)n), TPB, 0, stream_of(be)>>>(
        part, chunks, n, db);
    wk_cu_launched(be, "bias gradient kernel");
}

void wk_cu_act_bias_backward(struct wk_backend *be, const float *y, float *dy,
                             int rows, int n, enum hc_act act, float *db)
{
    if (act != HC_ACT_LINEAR)
        wk_cu_act_backward(be, y, dy, dy, rows, n, act);
    if (db)
        wk_cu_bias_grad(be, dy, rows, n, db);
}

/* ---- the ReLU layer (as backend_cpu.c's) ---- */

__global__ static void relu_k(const float *x, float *y, size_t n, float max,
                              float slope, float threshold)
{
    GRID_LOOP(i, n) {
        float v = x[i], a = v > threshold ? v : 0.0f;

        if (max >= 0.0f)
            a = fminf(fmaxf(a, 0.0f), max);
        y[i] = v < threshold ? a + slope * (v - threshold) : a;
    }
}

__global__ static void relu_back_k(const float *x, const float *dy,
                                   float *dx, size_t n, float max,
                                   float slope, float threshold)
{
    GRID_LOOP(i, n) {
        float v = x[i];
        int pass = v > threshold && (max < 0.0f || (v > 0.0f && v < max));

        dx[i] = dy[i] * ((pass ? 1.0f : 0.0f) + (v < threshold ? slope : 0.0f));
    }
}

void wk_cu_relu_forward(struct wk_backend *be, const float *x, float *y,
                        size_t n, float max, float slope, float threshold)
{
    if (!n || wk_cu_enter(be))
        return;
    relu_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(x, y, n, max, slope,
                                                     threshold);
    wk_cu_launched(be, "relu layer kernel");
}

void wk_cu_relu_backward(struct wk_backend *be, const float *x,
                         const float *dy, float *dx, size_t n, float max,
                         float slope, float threshold)
{
    if (!n || wk_cu_enter(be))
        return;
    relu_back_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(x, dy, dx, n, max,
                                                          slope, threshold);
    wk_cu_launched(be, "relu layer backward kernel");
}

/* ---- losses ---- */

__global__ static void xent_k(const float *z, const int *labels, int rows,
                              int n, float *p, float *loss, float *hit)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32, arg;
    float mx, sum = 0.0f;

    if (r >= rows)
        return;
    z += (size_t)r * n;
    p += (size_t)r * n;
    arg = row_argmax(z, n, lane);
    mx = z[arg];
    for (int j = lane; j < n; j += 32) {
        float e = expf(z[j] - mx);

        p[j] = e;
        sum += e;
    }
    sum = warp_sum(sum);
    for (int j = lane; j < n; j += 32)
        p[j] /= sum;
    if (labels && lane == 0) {
        loss[r] = logf(sum) + mx - z[labels[r]];
        hit[r] = arg == labels[r] ? 1.0f : 0.0f;
    }
}

__global__ static void xent_back_k(const float *p, const int *labels,
                                   int rows, int n, float scale, float *dz)
{
    GRID_LOOP(i, (size_t)rows * n) {
        float v = scale * p[i];

        if ((int)(i % n) == labels[i / n])
            v -= scale;
        dz[i] = v;
    }
}

__global__ static void mse_k(const float *y, const float *t, int rows, int n,
                             float *loss, float *hit)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32, ay, at;
    float sum = 0.0f;

    if (r >= rows)
        return;
    y += (size_t)r * n;
    t += (size_t)r * n;
    for (int j = lane; j < n; j += 32)
        sum += (y[j] - t[j]) * (y[j] - t[j]);
    sum = warp_sum(sum);
    ay = row_argmax(y, n, lane);
    at = row_argmax(t, n, lane);
    if (lane == 0) {
        loss[r] = sum / (float)n;
        if (n == 1)
            hit[r] = (y[0] > 0.5f) == (t[0] > 0.5f) ? 1.0f : 0.0f;
        else
            hit[r] = ay == at ? 1.0f : 0.0f;
    }
}

__global__ static void mse_back_k(const float *y, const float *t,
                                  size_t count, float scale, float *dy)
{
    GRID_LOOP(i, count)
        dy[i] = scale * (y[i] - t[i]);
}

void wk_cu_xent_forward(struct wk_backend *be, const float *z,
                        const int *labels, int rows, int n, float *p,
                        float *loss, float *hit)
{
    if (rows <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    xent_k<<<row_blocks(rows), TPB, 0, stream_of(be)>>>(z, labels, rows, n, p,
                                                        loss, hit);
    wk_cu_launched(be, "softmax cross-entropy kernel");
}

void wk_cu_xent_backward(struct wk_backend *be, const float *p,
                         const int *labels, int rows, int n, float scale,
                         float *dz)
{
    if (rows <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    xent_back_k<<<blocks_for((size_t)rows * n), TPB, 0, stream_of(be)>>>(
        p, labels, rows, n, scale, dz);
    wk_cu_launched(be, "cross-entropy backward kernel");
}

void wk_cu_mse_forward(struct wk_backend *be, const float *y, const float *t,
                       int rows, int n, float *loss, float *hit)
{
    if (rows <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    mse_k<<<row_blocks(rows), TPB, 0, stream_of(be)>>>(y, t, rows, n, loss,
                                                       hit);
    wk_cu_launched(be, "mse kernel");
}

void wk_cu_mse_backward(struct wk_backend *be, const float *y, const float *t,
                        size_t count, float scale, float *dy)
{
    if (!count || wk_cu_enter(be))
        return;
    mse_back_k<<<blocks_for(count), TPB, 0, stream_of(be)>>>(y, t, count,
                                                             scale, dy);
    wk_cu_launched(be, "mse backward kernel");
}

/* The other losses of float targets, as backend_cpu.c's tloss_term and
 * tloss_deriv. */
#define BCE_EPS 1e-7f

__device__ static float tloss_term(enum hc_loss kind, int from_logits,
                                   float delta, float y, float t)
{
    float e = y - t, a = fabsf(e), p;

    switch (kind) {
    case HC_LOSS_BCE:
        if (from_logits)
            return fmaxf(y, 0.0f) - y * t + log1pf(expf(-fabsf(y)));
        p = fminf(fmaxf(y, BCE_EPS), 1.0f - BCE_EPS);
        return -(t * logf(p + BCE_EPS) + (1.0f - t) * logf(1.0f - p + BCE_EPS));
    case HC_LOSS_HUBER:
        return a <= delta ? 0.5f * e * e : delta * (a - 0.5f * delta);
    default:
        return a;
    }
}

__device__ static float tloss_deriv(enum hc_loss kind, int from_logits,
                                    float delta, float y, float t)
{
    float e = y - t;

    switch (kind) {
    case HC_LOSS_BCE:
        if (from_logits)
            return 1.0f / (1.0f + expf(-y)) - t;
        if (y < BCE_EPS || y > 1.0f - BCE_EPS)
            return 0.0f;
        return (1.0f - t) / (1.0f - y + BCE_EPS) - t / (y + BCE_EPS);
    case HC_LOSS_HUBER:
        return fminf(fmaxf(e, -delta), delta);
    default:
        return (float)((e > 0.0f) - (e < 0.0f));
    }
}

/* One warp per row, as mse_k. */
__global__ static void tloss_k(enum hc_loss kind, int from_logits,
                               float delta, const float *y, const float *t,
                               int rows, int n, float *loss, float *hit)
{
    int r = blockIdx.x * ROWS_PER_BLOCK + threadIdx.x / 32;
    int lane = threadIdx.x % 32, ay, at;
    float sum = 0.0f, mx = -INFINITY, tz = 0.0f;

    if (r >= rows)
        return;
    y += (size_t)r * n;
    t += (size_t)r * n;
    if (kind == HC_LOSS_CCE) {
        for (int j = lane; j < n; j += 32)
            mx = fmaxf(mx, y[j]);
        mx = warp_max(mx);
        for (int j = lane; j < n; j += 32) {
            sum += expf(y[j] - mx);
            tz += t[j] * y[j];
        }
        tz = warp_sum(tz);
    } else {
        for (int j = lane; j < n; j += 32)
            sum += tloss_term(kind, from_logits, delta, y[j], t[j]);
    }
    sum = warp_sum(sum);
    ay = row_argmax(y, n, lane);
    at = row_argmax(t, n, lane);
    if (lane == 0) {
        loss[r] = kind == HC_LOSS_CCE ? mx + logf(sum) - tz : sum / (float)n;
        if (n == 1)
            hit[r] = (y[0] > (from_logits ? 0.0f : 0.5f)) == (t[0] > 0.5f)
                         ? 1.0f : 0.0f;
        else
            hit[r] = ay == at ? 1.0f : 0.0f;
    }
}

__global__ static void tloss_back_k(enum hc_loss kind, int from_logits,
                                    float delta, const float *y,
                                    const float *t, size_t count, float scale,
                                    float *dy)
{
    GRID_LOOP(i, count) {
        if (kind == HC_LOSS_CCE)
            dy[i] = scale * (y[i] - t[i]);
        else
            dy[i] = scale * tloss_deriv(kind, from_logits, delta, y[i], t[i]);
    }
}

void wk_cu_tloss_forward(struct wk_backend *be, enum hc_loss kind,
                         int from_logits, float delta, const float *y,
                         const float *t, int rows, int n, float *loss,
                         float *hit)
{
    if (rows <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    tloss_k<<<row_blocks(rows), TPB, 0, stream_of(be)>>>(
        kind, from_logits, delta, y, t, rows, n, loss, hit);
    wk_cu_launched(be, "loss kernel");
}

void wk_cu_tloss_backward(struct wk_backend *be, enum hc_loss kind,
                          int from_logits, float delta, const float *y,
                          const float *t, int rows, int n, float scale,
                          float *dy)
{
    size_t count = (size_t)rows * n;

    if (!count || rows <= 0 || n <= 0 || wk_cu_enter(be))
        return;
    if (kind != HC_LOSS_CCE)
        scale /= (float)n;
    tloss_back_k<<<blocks_for(count), TPB, 0, stream_of(be)>>>(
        kind, from_logits, delta, y, t, count, scale, dy);
    wk_cu_launched(be, "loss backward kernel");
}

/* ---- pooling ---- */

/* Output element e (b, oh, ow, c) of a pool and its window's cells inside
 * the input: rows ih0 + i for i in [i0, i1), columns iw0 + j for j in
 * [j0, j1), as window_at in backend_cpu.c. */
struct pool_win {
    int b, c, ih0, iw0, i0, i1, j0, j1;
};

__device__ static struct pool_win pool_window(const struct wk_geom &g,
                                              size_t e)
{
    struct pool_win w;
    size_t t = e;
    int ow, oh;

    w.c = (int)(t % g.C);
    t /= g.C;
    ow = (int)(t % g.OW);
    t /= g.OW;
    oh = (int)(t % g.OH);
    w.b = (int)(t / g.OH);
    w.ih0 = oh * g.sh - g.pt;
    w.iw0 = ow * g.sw - g.pl;
    w.i0 = w.ih0 < 0 ? -w.ih0 : 0;
    w.i1 = w.ih0 + g.kh > g.H ? g.H - w.ih0 : g.kh;
    w.j0 = w.iw0 < 0 ? -w.iw0 : 0;
    w.j1 = w.iw0 + g.kw > g.W ? g.W - w.iw0 : g.kw;
    return w;
}

/* Flat index into x of cell (i, j) of window w. */
__device__ static int32_t pool_cell(const struct wk_geom &g,
                                    const struct pool_win &w, int i, int j)
{
    return (int32_t)((((size_t)w.b * g.H + w.ih0 + i) * g.W + w.iw0 + j) *
                     g.C + w.c);
}

/* One thread per output (b, oh, ow, c): the window's first maximum, cells
 * visited row by row as pool_window in backend_cpu.c. */
__global__ static void maxpool_k(struct wk_geom g, const float *x, float *y,
                                 int32_t *idx)
{
    size_t total = (size_t)g.B * g.OH * g.OW * g.C;

    GRID_LOOP(e, total) {
        struct pool_win w = pool_window(g, e);
        float best = 0.0f;
        int32_t arg = -1;

        for (int i = w.i0; i < w.i1; i++) {
            for (int j = w.j0; j < w.j1; j++) {
                int32_t at = pool_cell(g, w, i, j);

                if (arg < 0 || x[at] > best) {
                    best = x[at];
                    arg = at;
                }
            }
        }
        y[e] = best;
        idx[e] = arg;
    }
}

/* One thread per element of dx: the sum of dy over the windows whose
 * maximum it is, in output order (the CPU's scatter order). */
__global__ static void maxpool_back_k(struct wk_geom g, const float *dy,
                                      const int32_t *idx, float *dx)
{
    size_t total = (size_t)g.B * g.H * g.W * g.C;

    GRID_LOOP(e, total) {
        struct covering w = covering_windows(g, e);
        float sum = 0.0f;

        for (int oh = w.oh0; oh <= w.oh1; oh++) {
            for (int ow = w.ow0; ow <= w.ow1; ow++) {
                size_t o = (((size_t)w.b * g.OH + oh) * g.OW + ow) * g.C + w.c;

                if ((size_t)idx[o] == e)
                    sum += dy[o];
            }
        }
        dx[e] = sum;
    }
}

void wk_cu_maxpool_forward(struct wk_backend *be, const struct wk_geom *g,
                           const float *x, float *y, int32_t *idx)
{
    size_t n = (size_t)g->B * g->OH * g->OW * g->C;

    if (!n || wk_cu_enter(be))
        return;
    maxpool_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, x, y, idx);
    wk_cu_launched(be, "max-pool kernel");
}

void wk_cu_maxpool_backward(struct wk_backend *be, const struct wk_geom *g,
                            const float *dy, const int32_t *idx, float *dx)
{
    size_t n = (size_t)g->B * g->H * g->W * g->C;

    if (!n || wk_cu_enter(be))
        return;
    maxpool_back_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, dy, idx, dx);
    wk_cu_launched(be, "max-pool backward kernel");
}

/* Cells of window (oh, ow) inside the input: the mean's divisor. */
__device__ static int window_cells(const struct wk_geom &g, int oh, int ow)
{
    int ih0 = oh * g.sh - g.pt, iw0 = ow * g.sw - g.pl;
    int ih1 = ih0 + g.kh < g.H ? ih0 + g.kh : g.H;
    int iw1 = iw0 + g.kw < g.W ? iw0 + g.kw : g.W;

    return (ih1 - (ih0 < 0 ? 0 : ih0)) * (iw1 - (iw0 < 0 ? 0 : iw0));
}

/* One thread per output (b, oh, ow, c): the mean of the window's cells
 * inside x, summed row by row as cpu_avgpool_forward does. */
__global__ static void avgpool_k(struct wk_geom g, const float *x, float *y)
{
    size_t total = (size_t)g.B * g.OH * g.OW * g.C;

    GRID_LOOP(e, total) {
        struct pool_win w = pool_window(g, e);
        float sum = 0.0f;

        for (int i = w.i0; i < w.i1; i++)
            for (int j = w.j0; j < w.j1; j++)
                sum += x[pool_cell(g, w, i, j)];
        y[e] = sum * (1.0f / (float)((w.i1 - w.i0) * (w.j1 - w.j0)));
    }
}

/* One thread per element of dx: dy over each window holding it, divided
 * by that window's cells, windows in output order. */
__global__ static void avgpool_back_k(struct wk_geom g, const float *dy,
                                      float *dx)
{
    size_t total = (size_t)g.B * g.H * g.W * g.C;

    GRID_LOOP(e, total) {
        struct covering w = covering_windows(g, e);
        float sum = 0.0f;

        for (int oh = w.oh0; oh <= w.oh1; oh++) {
            for (int ow = w.ow0; ow <= w.ow1; ow++) {
                size_t o = (((size_t)w.b * g.OH + oh) * g.OW + ow) * g.C + w.c;

                sum += dy[o] * (1.0f / (float)window_cells(g, oh, ow));
            }
        }
        dx[e] = sum;
    }
}

void wk_cu_avgpool_forward(struct wk_backend *be, const struct wk_geom *g,
                           const float *x, float *y)
{
    size_t n = (size_t)g->B * g->OH * g->OW * g->C;

    if (!n || wk_cu_enter(be))
        return;
    avgpool_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, x, y);
    wk_cu_launched(be, "average-pool kernel");
}

void wk_cu_avgpool_backward(struct wk_backend *be, const struct wk_geom *g,
                            const float *dy, float *dx)
{
    size_t n = (size_t)g->B * g->H * g->W * g->C;

    if (!n || wk_cu_enter(be))
        return;
    avgpool_back_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, dy, dx);
    wk_cu_launched(be, "average-pool backward kernel");
}

/* ---- embedding lookup ---- */

/* One thread per element of y: its position's row's element. */
__global__ static void embed_gather_k(const float *rows, const int32_t *inv,
                                      size_t n, int dim, float *y)
{
    GRID_LOOP(e, n * (size_t)dim) {
        size_t i = e / (size_t)dim;

        y[e] = rows[(size_t)inv[i] * dim + e % (size_t)dim];
    }
}

/* One thread per element of dy, added to its row's (repeated ids meet
 * in atomicAdd: the sum's order is the GPU's). */
__global__ static void embed_scatter_k(const float *dy, const int32_t *inv,
                                       size_t n, int dim, float *drows)
{
    GRID_LOOP(e, n * (size_t)dim) {
        size_t i = e / (size_t)dim;

        atomicAdd(&drows[(size_t)inv[i] * dim + e % (size_t)dim], dy[e]);
    }
}

void wk_cu_embed_gather(struct wk_backend *be, const float *rows,
                        const int32_t *inv, size_t n, int dim, float *y)
{
    size_t total = n * (size_t)dim;

    if (!total || wk_cu_enter(be))
        return;
    embed_gather_k<<<blocks_for(total), TPB, 0, stream_of(be)>>>(rows, inv,
                                                                 n, dim, y);
    wk_cu_launched(be, "embedding gather kernel");
}

void wk_cu_embed_scatter(struct wk_backend *be, const float *dy,
                         const int32_t *inv, size_t n, int dim, size_t n_rows,
                         float *drows)
{
    size_t total = n * (size_t)dim;

    if (wk_cu_enter(be))
        return;
    if (n_rows &&
        cudaMemsetAsync(drows, 0, n_rows * (size_t)dim * sizeof *drows,
                        stream_of(be)) != cudaSuccess) {
        wk_cu_launched(be, "embedding gradient clear");
        return;
    }
    if (!total)
        return;
    embed_scatter_k<<<blocks_for(total), TPB, 0, stream_of(be)>>>(dy, inv, n,
                                                                  dim, drows);
    wk_cu_launched(be, "embedding scatter kernel");
}

/* ---- depthwise convolution ---- */

/* One thread per output (b, oh, ow, c·dm + m): its window's cells inside
 * x row by row, as cpu_dwconv_forward sums them. */
__global__ static void dwconv_k(struct wk_geom g, int dm, const float *x,
                                const float *w, float *y)
{
    const int CM = g.C * dm;
    size_t total = (size_t)g.B * g.OH * g.OW * CM;

    GRID_LOOP(e, total) {
        size_t t = e / CM;
        int k = (int)(e % CM), c = k / dm;
        int ow = (int)(t % g.OW), oh = (int)(t / g.OW % g.OH);
        int b = (int)(t / g.OW / g.OH);
        int ih0 = oh * g.sh - g.pt, iw0 = ow * g.sw - g.pl;
        int i0 = ih0 < 0 ? -ih0 : 0, j0 = iw0 < 0 ? -iw0 : 0;
        int i1 = ih0 + g.kh > g.H ? g.H - ih0 : g.kh;
        int j1 = iw0 + g.kw > g.W ? g.W - iw0 : g.kw;
        float sum = 0.0f;

        for (int i = i0; i < i1; i++)
            for (int j = j0; j < j1; j++)
                sum += x[(((size_t)b * g.H + ih0 + i) * g.W + iw0 + j) *
                         g.C + c] * w[((size_t)i * g.kw + j) * CM + k];
        y[e] = sum;
    }
}

/* One block per kernel element (i, j, c, m): its threads stride over the
 * B·OH·OW output positions whose window holds a cell of x there, then
 * add their sums in shared memory in a fixed tree: no atomics. */
__global__ static void dwconv_filter_k(struct wk_geom g, int dm,
                                       const float *x, const float *dy,
                                       float *dw)
{
    __shared__ float part[TPB];
    const int CM = g.C * dm;
    int e = blockIdx.x, k = e % CM, c = k / dm;
    int j = e / CM % g.kw, i = e / CM / g.kw;
    size_t n = (size_t)g.B * g.OH * g.OW;
    float sum = 0.0f;

    for (size_t p = threadIdx.x; p < n; p += blockDim.x) {
        int ow = (int)(p % g.OW), oh = (int)(p / g.OW % g.OH);
        int b = (int)(p / g.OW / g.OH);
        int ih = oh * g.sh - g.pt + i, iw = ow * g.sw - g.pl + j;

        if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
            sum += x[(((size_t)b * g.H + ih) * g.W + iw) * g.C + c] *
                   dy[p * CM + k];
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int s = TPB / 2; s > 0; s /= 2) {
        if ((int)threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        dw[e] = part[0];
}

/* One thread per element of dx (b, ih, iw, c): dy · w over the windows
 * holding it, in output order, and its channel's dm outputs. */
__global__ static void dwconv_input_k(struct wk_geom g, int dm,
                                      const float *dy, const float *w,
                                      float *dx)
{
    const int CM = g.C * dm;
    size_t total = (size_t)g.B * g.H * g.W * g.C;

    GRID_LOOP(e, total) {
        struct covering v = covering_windows(g, e);
        float sum = 0.0f;

        for (int oh = v.oh0; oh <= v.oh1; oh++) {
            int i = v.ih + g.pt - oh * g.sh;

            for (int ow = v.ow0; ow <= v.ow1; ow++) {
                int j = v.iw + g.pl - ow * g.sw;
                const float *py = dy + (((size_t)v.b * g.OH + oh) * g.OW +
                                        ow) * CM + (size_t)v.c * dm;
                const float *pw = w + ((size_t)i * g.kw + j) * CM +
                                  (size_t)v.c * dm;

                for (int m = 0; m < dm; m++)
                    sum += py[m] * pw[m];
            }
        }
        dx[e] = sum;
    }
}

void wk_cu_dwconv_forward(struct wk_backend *be, const struct wk_geom *g,
                          int dm, const float *x, const float *w, float *y)
{
    size_t n = (size_t)g->B * g->OH * g->OW * g->C * dm;

    if (!n || wk_cu_enter(be))
        return;
    dwconv_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, dm, x, w, y);
    wk_cu_launched(be, "depthwise convolution kernel");
}

void wk_cu_dwconv_backward_filter(struct wk_backend *be,
                                  const struct wk_geom *g, int dm,
                                  const float *x, const float *dy, float *dw)
{
    size_t n = (size_t)g->kh * g->kw * g->C * dm;

    if (!n || wk_cu_enter(be))
        return;
    dwconv_filter_k<<<(unsigned)n, TPB, 0, stream_of(be)>>>(*g, dm, x, dy,
                                                            dw);
    wk_cu_launched(be, "depthwise convolution filter-gradient kernel");
}

void wk_cu_dwconv_backward_input(struct wk_backend *be,
                                 const struct wk_geom *g, int dm,
                                 const float *dy, const float *w, float *dx)
{
    size_t n = (size_t)g->B * g->H * g->W * g->C;

    if (!n || wk_cu_enter(be))
        return;
    dwconv_input_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(*g, dm, dy, w,
                                                             dx);
    wk_cu_launched(be, "depthwise convolution input-gradient kernel");
}

/* ---- layer normalisation ---- */

/* One thread per row, summing in double as cpu_layernorm_forward does. */
__global__ static void layernorm_k(int rows, int n, float eps,
                                   const float *x, const float *gamma,
                                   const float *beta, float *y, float *xhat,
                                   float *rstd)
{
    GRID_LOOP(r, (size_t)rows) {
        const float *xr = x + r * n;
        float *hr = xhat + r * n, *yr = y + r * n;
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
            yr[j] = hr[j] * (gamma ? gamma[j] : 1.0f) +
                    (beta ? beta[j] : 0.0f);
        }
    }
}

/* dgamma, dbeta: one thread per column, rows in order. */
__global__ static void layernorm_params_k(int rows, int n, const float *dy,
                                          const float *xhat, float *dgamma,
                                          float *dbeta)
{
    GRID_LOOP(j, (size_t)n) {
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
}

/* dx: one thread per row. */
__global__ static void layernorm_input_k(int rows, int n, const float *dy,
                                         const float *xhat, const float *rstd,
                                         const float *gamma, float *dx)
{
    GRID_LOOP(r, (size_t)rows) {
        const float *dr = dy + r * n, *hr = xhat + r * n;
        float *xr = dx + r * n;
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

void wk_cu_layernorm_forward(struct wk_backend *be, int rows, int n,
                             float eps, const float *x, const float *gamma,
                             const float *beta, float *y, float *xhat,
                             float *rstd)
{
    if (rows < 1 || n < 1 || wk_cu_enter(be))
        return;
    layernorm_k<<<blocks_for((size_t)rows), TPB, 0, stream_of(be)>>>(
        rows, n, eps, x, gamma, beta, y, xhat, rstd);
    wk_cu_launched(be, "layer normalisation kernel");
}

void wk_cu_layernorm_backward(struct wk_backend *be, int rows, int n,
                              const float *dy, const float *xhat,
                              const float *rstd, const float *gamma,
                              float *dx, float *dgamma, float *dbeta)
{
    if (rows < 1 || n < 1 || wk_cu_enter(be))
        return;
    if (dgamma || dbeta) {
        layernorm_params_k<<<blocks_for((size_t)n), TPB, 0,
                             stream_of(be)>>>(rows, n, dy, xhat, dgamma,
                                              dbeta);
        wk_cu_launched(be, "layer normalisation parameter-gradient kernel");
    }
    if (!dx)
        return;
    layernorm_input_k<<<blocks_for((size_t)rows), TPB, 0, stream_of(be)>>>(
        rows, n, dy, xhat, rstd, gamma, dx);
    wk_cu_launched(be, "layer normalisation input-gradient kernel");
}

/* ---- dropout ---- */

/* wk_dropout_hash (backend.c) bit for bit: the device twin of hc_mix64
 * (common/rng.c), which device code cannot call. */
__device__ static uint64_t dropout_hash(uint64_t seed, uint64_t i)
{
    uint64_t z = seed + (i + 1) * HC_GOLDEN_GAMMA;

    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

__global__ static void dropout_k(const float *x, float *y, size_t n,
                                 uint64_t thr, float keep, uint64_t seed)
{
    GRID_LOOP(i, n)
        y[i] = (dropout_hash(seed, i) >> 40) >= thr ? x[i] * keep : 0.0f;
}

/* Threshold and scale computed on the host exactly as cpu_dropout does. */
static void dropout(struct wk_backend *be, const float *x, float *y, size_t n,
                    float rate, uint64_t seed)
{
    uint64_t thr = (uint64_t)(rate * 16777216.0f);
    float keep = 1.0f / (1.0f - rate);

    if (!n || wk_cu_enter(be))
        return;
    dropout_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(x, y, n, thr, keep,
                                                        seed);
    wk_cu_launched(be, "dropout kernel");
}

void wk_cu_dropout_forward(struct wk_backend *be, const float *x, float *y,
                           size_t n, float rate, uint64_t seed)
{
    dropout(be, x, y, n, rate, seed);
}

void wk_cu_dropout_backward(struct wk_backend *be, const float *dy, float *dx,
                            size_t n, float rate, uint64_t seed)
{
    dropout(be, dy, dx, n, rate, seed);
}

/* ---- batch normalization: one block per channel for the sums (its
 * threads stride the rows, then a tree in shared memory, in double), a
 * thread per element for the rest ---- */

/* The block's sum of v (TPB threads), in thread 0. */
__device__ static double block_sum(double v, double *sh)
{
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = TPB / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    v = sh[0];
    __syncthreads();
    return v;
}

__global__ static void bn_stats_k(const float *x, int rows, int c, float *st)
{
    __shared__ double sh[TPB];
    int j = blockIdx.x;
    double s = 0.0, q = 0.0, k = x[j], dm, mean, var;

    for (int r = threadIdx.x; r < rows; r += TPB) {
        double d = x[(size_t)r * c + j] - k;

        s += d;
        q += d * d;
    }
    dm = block_sum(s, sh) / rows;
    var = block_sum(q, sh) / rows - dm * dm;
    var = var > 0.0 ? var : 0.0;
    mean = k + dm;
    if (threadIdx.x == 0) {
        st[j] = (float)mean;
        st[c + j] = (float)var;
        st[2 * c + j] = (float)(var + mean * mean);
    }
}

__global__ static void bn_forward_k(const float *x, size_t n, int c,
                                    const float *mean, const float *var,
                                    float eps, const float *gamma,
                                    const float *beta, float *y)
{
    GRID_LOOP(i, n) {
        int j = (int)(i % (size_t)c);
        float a = (gamma ? gamma[j] : 1.0f) / sqrtf(var[j] + eps);

        y[i] = a * (x[i] - mean[j]) + (beta ? beta[j] : 0.0f);
    }
}

__global__ static void bn_back_params_k(const float *x, const float *dy,
                                        int rows, int c, const float *st,
                                        float eps, float *sums)
{
    __shared__ double sh[TPB];
    int j = blockIdx.x;
    double sg = 0.0, sb = 0.0;

    for (int r = threadIdx.x; r < rows; r += TPB) {
        size_t i = (size_t)r * c + j;

        sg += (double)dy[i] * (x[i] - st[j]);
        sb += dy[i];
    }
    sg = block_sum(sg, sh);
    sb = block_sum(sb, sh);
    if (threadIdx.x == 0) {
        sums[j] = (float)(sg / sqrt((double)st[c + j] + eps));
        sums[c + j] = (float)sb;
    }
}

__global__ static void bn_back_input_k(const float *x, const float *dy,
                                       size_t n, int rows, int c,
                                       const float *st, float eps,
                                       const float *gamma, const float *sums,
                                       float *dx)
{
    GRID_LOOP(i, n) {
        int j = (int)(i % (size_t)c);
        float inv = 1.0f / sqrtf(st[c + j] + eps);
        float xh = (x[i] - st[j]) * inv;

        dx[i] = (gamma ? gamma[j] : 1.0f) * inv *
                (dy[i] - sums[c + j] / (float)rows -
                 xh * (sums[j] / (float)rows));
    }
}

void wk_cu_bn_stats(struct wk_backend *be, const float *x, int rows, int c,
                    float *st)
{
    if (rows <= 0 || c <= 0 || wk_cu_enter(be))
        return;
    bn_stats_k<<<(unsigned)c, TPB, 0, stream_of(be)>>>(x, rows, c, st);
    wk_cu_launched(be, "batch norm statistics kernel");
}

void wk_cu_bn_forward(struct wk_backend *be, const float *x, int rows, int c,
                      const float *mean, const float *var, float eps,
                      const float *gamma, const float *beta, float *y)
{
    size_t n = (size_t)rows * (size_t)c;

    if (rows <= 0 || c <= 0 || wk_cu_enter(be))
        return;
    bn_forward_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(x, n, c, mean, var,
                                                           eps, gamma, beta,
                                                           y);
    wk_cu_launched(be, "batch norm forward kernel");
}

void wk_cu_bn_backward_params(struct wk_backend *be, const float *x,
                              const float *dy, int rows, int c,
                              const float *st, float eps, float *sums)
{
    if (rows <= 0 || c <= 0 || wk_cu_enter(be))
        return;
    bn_back_params_k<<<(unsigned)c, TPB, 0, stream_of(be)>>>(x, dy, rows, c,
                                                             st, eps, sums);
    wk_cu_launched(be, "batch norm parameter gradient kernel");
}

void wk_cu_bn_backward_input(struct wk_backend *be, const float *x,
                             const float *dy, int rows, int c,
                             const float *st, float eps, const float *gamma,
                             const float *sums, float *dx)
{
    size_t n = (size_t)rows * (size_t)c;

    if (rows <= 0 || c <= 0 || wk_cu_enter(be))
        return;
    bn_back_input_k<<<blocks_for(n), TPB, 0, stream_of(be)>>>(
        x, dy, n, rows, c, st, eps, gamma, sums, dx);
    wk_cu_launched(be, "batch norm input gradient kernel");
}
