/*
 * test_cuda.c — the CUDA backend against the CPU backend: every op of the
 * table and whole nets (the reference model deploy/models/fashion_cnn.json,
 * a model using every other layer kind, and graphs of merges) on the same
 * random data, each
 * element within 1e-4 · (1 + |cpu|) of the CPU's result (the largest
 * difference is printed). Index outputs (max-pool argmax, dropout masks,
 * hits) must be equal.
 *
 * The GPU is reached only through device.h (wk_backend_open of "gpu:0"),
 * so this file compiles and links in a CPU-only build too. Without a CUDA
 * device every GPU test calls HP_SKIP("no CUDA device") after doing its
 * CPU half; the message test runs everywhere.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu.h"
#include "err.h"
#include "model.h"
#include "worker/backend.h"
#include "worker/device.h"
#include "worker/nn.h"

#define TOL 1e-4

static uint64_t rng = 88172645463325252ull;

static float frand(void)        /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) / 8388608.0 - 1.0);
}

static float *rand_floats(size_t n)
{
    float *p = malloc(n * sizeof *p);
    size_t i;

    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    for (i = 0; i < n; i++)
        p[i] = frand();
    return p;
}

/* Each got[i] within TOL·(1 + |want[i]|); prints the largest difference. */
static int near(const char *what, const float *got, const float *want,
                size_t n)
{
    double worst = 0.0;
    size_t i, at = 0, bad = 0;

    for (i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);

        if (!(d <= TOL * (1.0 + fabs(want[i]))))
            bad++;
        if (d > worst || d != d) {
            worst = d;
            at = i;
        }
    }
    printf("\n    %-40s max |gpu - cpu| %.3g (element %zu of %zu)%s", what,
           worst, at, n, bad ? "  FAIL" : "");
    CU_ASSERT_EQUAL(bad, 0);
    return bad == 0;
}

/* ---- a GPU backend and the CPU reference ---- */

struct pair {
    struct wk_backend *cpu, *gpu;
};

/* 1 with both backends open; 0 when the machine has no CUDA device. */
static int pair_open(struct pair *p)
{
    struct wk_device d = {"gpu:0", WK_DEV_GPU, 0, NULL};

    memset(p, 0, sizeof *p);
    if (wk_backend_cuda_available() < 1)
        return 0;
    CU_ASSERT_EQUAL_FATAL(wk_backend_cpu_new(1, &p->cpu), HC_OK);
    if (wk_backend_open(&d, 0, &p->gpu)) {
        printf("\n    %s", hc_err_msg());
        CU_FAIL_FATAL("gpu:0 does not open");
    }
    CU_ASSERT_EQUAL(p->gpu->host_memory, 0);
    return 1;
}

static void pair_close(struct pair *p)
{
    CU_ASSERT_EQUAL(wk_be_check(p->gpu), HC_OK);
    wk_backend_free(p->gpu);
    wk_backend_free(p->cpu);
}

/* Device copy of n bytes of host memory. */
static void *up(struct pair *p, const void *h, size_t bytes)
{
    void *d = NULL;

    CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p->gpu, bytes, &d), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_be_upload(p->gpu, d, h, bytes), HC_OK);
    return d;
}

/* Download n floats of d into a fresh host array (checked first). */
static float *down(struct pair *p, const void *d, size_t bytes)
{
    float *h = malloc(bytes);

    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(wk_be_check(p->gpu), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_be_download(p->gpu, h, d, bytes), HC_OK);
    return h;
}

/* Compare device buffer d (n floats) with host reference want. */
static void cmp(struct pair *p, const char *what, const float *d,
                const float *want, size_t n)
{
    float *h = down(p, d, n * sizeof *h);

    near(what, h, want, n);
    free(h);
}

/* ---- host memory ---- */

/* Uploads and downloads from page-locked memory (wk_devices_host_alloc
 * with a GPU: straight copies) and from plain malloc memory (through the
 * staging buffer, in chunks: 20 MiB and 3 floats crosses its 8 MiB) give
 * the same bytes, bit for bit. */
static void test_host_memory(void)
{
    const size_t n = (20u << 20) / sizeof(float) + 3, bytes = n * sizeof(float);
    struct wk_devices gpu = {0};
    float *pinned, *plain, *back_pinned, *back_plain;
    void *d = NULL;
    struct pair p;
    size_t i;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    gpu.n = 1;
    gpu.dev[0] = (struct wk_device){"gpu:0", WK_DEV_GPU, 0, p.gpu};
    pinned = wk_devices_host_alloc(&gpu, bytes);
    back_pinned = wk_devices_host_alloc(&gpu, bytes);
    plain = malloc(bytes);
    back_plain = malloc(bytes);
    CU_ASSERT_FATAL(pinned && back_pinned && plain && back_plain);
    CU_ASSERT_EQUAL(wk_devices_host_pinned(pinned), 1);
    CU_ASSERT_EQUAL(wk_devices_host_pinned(pinned + n - 1), 1);
    CU_ASSERT_EQUAL(wk_devices_host_pinned(plain), 0);
    for (i = 0; i < n; i++)
        pinned[i] = plain[i] = (float)i * 0.5f - 7.0f;
    CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, bytes, &d), HC_OK);
    CU_ASSERT_EQUAL(wk_be_upload(p.gpu, d, pinned, bytes), HC_OK);
    CU_ASSERT_EQUAL(wk_be_download(p.gpu, back_plain, d, bytes), HC_OK);
    CU_ASSERT_EQUAL(memcmp(back_plain, plain, bytes), 0);
    wk_be_scale(p.gpu, d, n, 2.0f);
    CU_ASSERT_EQUAL(wk_be_check(p.gpu), HC_OK);
    CU_ASSERT_EQUAL(wk_be_download(p.gpu, back_pinned, d, bytes), HC_OK);
    for (i = 0; i < n && back_pinned[i] == 2.0f * plain[i]; i++)
        ;
    CU_ASSERT_EQUAL(i, n);
    CU_ASSERT_EQUAL(wk_be_upload(p.gpu, d, plain, bytes), HC_OK);
    CU_ASSERT_EQUAL(wk_be_download(p.gpu, back_pinned, d, bytes), HC_OK);
    CU_ASSERT_EQUAL(memcmp(back_pinned, pinned, bytes), 0);
    wk_be_free(p.gpu, d);
    wk_devices_host_free(pinned);
    wk_devices_host_free(back_pinned);
    free(plain);
    free(back_plain);
    pair_close(&p);
}

/* ---- ops ---- */

static void test_blas(void)
{
    static const struct {
        int ta, tb, m, n, k, pad;
        float alpha, beta;
    } t[] = {
        {0, 0, 37, 29, 41, 0, 1.0f, 0.0f}, {1, 0, 37, 29, 41, 3, 0.5f, 1.0f},
        {0, 1, 64, 10, 800, 0, 1.0f, 0.0f}, {1, 1, 5, 7, 3, 2, -2.0f, 0.25f},
        {0, 0, 6, 5, 0, 1, 1.0f, 0.5f},     {1, 0, 6, 5, 0, 0, 1.0f, 0.0f},
    };
    struct pair p;
    size_t i;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        int lda = (t[i].ta ? t[i].m : t[i].k) + t[i].pad;
        int ldb = (t[i].tb ? t[i].k : t[i].n) + t[i].pad;
        int ldc = t[i].n + t[i].pad;
        size_t na = (size_t)(t[i].ta ? t[i].k : t[i].m) * lda + 1;
        size_t nb = (size_t)(t[i].tb ? t[i].n : t[i].k) * ldb + 1;
        size_t nc = (size_t)t[i].m * ldc;
        float *a = rand_floats(na), *b = rand_floats(nb), *c = rand_floats(nc);
        float *da = up(&p, a, na * 4), *db = up(&p, b, nb * 4);
        float *dc;
        char what[64];
        size_t j;

        if (t[i].beta == 0.0f)          /* beta = 0 ignores NaN */
            for (j = 0; j < nc; j++)
                c[j] = NAN;
        dc = up(&p, c, nc * 4);
        wk_be_sgemm(p.cpu, t[i].ta, t[i].tb, t[i].m, t[i].n, t[i].k,
                    t[i].alpha, a, lda, b, ldb, t[i].beta, c, ldc);
        wk_be_sgemm(p.gpu, t[i].ta, t[i].tb, t[i].m, t[i].n, t[i].k,
                    t[i].alpha, da, lda, db, ldb, t[i].beta, dc, ldc);
        snprintf(what, sizeof what, "sgemm ta %d tb %d %dx%dx%d", t[i].ta,
                 t[i].tb, t[i].m, t[i].n, t[i].k);
        cmp(&p, what, dc, c, nc);
        wk_be_free(p.gpu, da);
        wk_be_free(p.gpu, db);
        wk_be_free(p.gpu, dc);
        free(a);
        free(b);
        free(c);
    }
    pair_close(&p);
}

static void test_blas1_reduce(void)
{
    enum { N = 100003, NS = 19 };
    const float *srcs[NS], *dsrcs[NS];
    float w[NS], *x, *y, *dx, *dy, *s[NS], *ds[NS];
    struct pair p;
    int i;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    x = rand_floats(N);
    y = rand_floats(N);
    dx = up(&p, x, N * 4);
    dy = up(&p, y, N * 4);
    wk_be_axpy(p.cpu, N, 0.75f, x, y);
    wk_be_axpy(p.gpu, N, 0.75f, dx, dy);
    cmp(&p, "axpy", dy, y, N);
    wk_be_reg_grad(p.cpu, x, y, N, 0.01f, 0.5f);
    wk_be_reg_grad(p.gpu, dx, dy, N, 0.01f, 0.5f);
    cmp(&p, "regularizer gradient (L1L2)", dy, y, N);
    wk_be_scale(p.cpu, y, N, -1.5f);
    wk_be_scale(p.gpu, dy, N, -1.5f);
    cmp(&p, "scale", dy, y, N);
    wk_be_fill(p.cpu, y, N / 2, 3.25f);
    wk_be_fill(p.gpu, dy, N / 2, 3.25f);
    cmp(&p, "fill", dy, y, N);
    CU_ASSERT_EQUAL(wk_be_copy(p.gpu, dy, dx, N * 4), HC_OK);
    cmp(&p, "copy", dy, x, N);
    for (i = 0; i < NS; i++) {
        s[i] = rand_floats(N);
        ds[i] = up(&p, s[i], N * 4);
        srcs[i] = s[i];
        dsrcs[i] = ds[i];
        w[i] = frand();
    }
    wk_be_reduce(p.cpu, y, srcs, NULL, 3, N);
    wk_be_reduce(p.gpu, dy, dsrcs, NULL, 3, N);
    cmp(&p, "reduce 3 sources, no weights", dy, y, N);
    wk_be_reduce(p.cpu, s[0], srcs, w, NS, N);      /* dst = src[0] */
    wk_be_reduce(p.gpu, ds[0], dsrcs, w, NS, N);
    cmp(&p, "reduce 19 weighted sources in place", ds[0], s[0], N);
    /* Blocks of wider matrices: 211 rows of 97 columns, 300 and 401
     * apart (N ≥ 211·401), written and then added. */
    wk_be_copy2d(p.cpu, 211, 97, -0.5f, x + 3, 300, y + 7, 401, 0);
    wk_be_copy2d(p.gpu, 211, 97, -0.5f, dx + 3, 300, dy + 7, 401, 0);
    cmp(&p, "copy2d", dy, y, N);
    wk_be_copy2d(p.cpu, 211, 97, 1.25f, x + 5, 300, y + 7, 401, 1);
    wk_be_copy2d(p.gpu, 211, 97, 1.25f, dx + 5, 300, dy + 7, 401, 1);
    cmp(&p, "copy2d accumulate", dy, y, N);
    wk_be_mul(p.cpu, N, x, s[1], y, 0);
    wk_be_mul(p.gpu, N, dx, ds[1], dy, 0);
    cmp(&p, "mul", dy, y, N);
    wk_be_mul(p.cpu, N, x, s[2], y, 1);
    wk_be_mul(p.gpu, N, dx, ds[2], dy, 1);
    cmp(&p, "mul accumulate", dy, y, N);
    for (i = 0; i < NS; i++) {
        wk_be_free(p.gpu, ds[i]);
        free(s[i]);
    }
    wk_be_free(p.gpu, dx);
    wk_be_free(p.gpu, dy);
    free(x);
    free(y);
    pair_close(&p);
}

static void test_conv_pool(void)
{
    static const struct {
        int B, H, W, C, kh, kw, sh, sw, same;
    } t[] = {
        {3, 28, 28, 1, 3, 3, 1, 1, 0}, {2, 9, 11, 5, 3, 3, 2, 2, 1},
        {2, 7, 7, 8, 1, 1, 1, 1, 0},   {1, 10, 9, 3, 5, 4, 3, 2, 1},
        {4, 26, 26, 32, 2, 2, 2, 2, 0}, {2, 7, 9, 6, 3, 3, 2, 2, 0},
        {2, 8, 8, 4, 3, 3, 1, 1, 1},   {3, 7, 6, 5, 7, 6, 1, 1, 0},
    };
    struct pair p;
    size_t i;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_geom g;
        size_t nx, nc, ny, j;
        float *x, *cols, *dx, *y, *dy, *d_x, *d_cols, *d_dx, *d_y, *d_dy;
        int32_t *idx, *d_idx, *idx_h;
        char what[96];

        CU_ASSERT_EQUAL_FATAL(wk_geom_init(&g, t[i].B, t[i].H, t[i].W,
                                           t[i].C, t[i].kh, t[i].kw, t[i].sh,
                                           t[i].sw, t[i].same), HC_OK);
        nx = (size_t)g.B * g.H * g.W * g.C;
        nc = (size_t)g.B * g.OH * g.OW * g.kh * g.kw * g.C;
        ny = (size_t)g.B * g.OH * g.OW * g.C;
        x = rand_floats(nx);
        cols = rand_floats(nc);
        dx = malloc(nx * 4);
        y = malloc(ny * 4);
        dy = rand_floats(ny);
        idx = malloc(ny * 4);
        d_x = up(&p, x, nx * 4);
        d_cols = up(&p, cols, nc * 4);
        d_dy = up(&p, dy, ny * 4);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, nx * 4, (void **)&d_dx), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, ny * 4, (void **)&d_y), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, ny * 4, (void **)&d_idx), 0);

        snprintf(what, sizeof what, "col2im %dx%d s%d%s C%d", g.kh, g.kw,
                 g.sh, t[i].same ? " same" : "", g.C);
        wk_be_col2im(p.cpu, &g, cols, dx, 0);
        wk_be_col2im(p.gpu, &g, d_cols, d_dx, 0);
        cmp(&p, what, d_dx, dx, nx);
        strcat(what, " adding");        /* onto the result just made */
        wk_be_col2im(p.cpu, &g, cols, dx, 1);
        wk_be_col2im(p.gpu, &g, d_cols, d_dx, 1);
        cmp(&p, what, d_dx, dx, nx);
        what[strlen(what) - strlen(" adding")] = '\0';
        what[0] = 'i', what[1] = 'm', what[2] = '2', what[3] = 'c',
        what[4] = 'o', what[5] = 'l';
        wk_be_im2col(p.cpu, &g, x, cols);
        wk_be_im2col(p.gpu, &g, d_x, d_cols);
        cmp(&p, what, d_cols, cols, nc);

        snprintf(what, sizeof what, "maxpool %dx%d s%d%s C%d", g.kh, g.kw,
                 g.sh, t[i].same ? " same" : "", g.C);
        wk_be_maxpool_forward(p.cpu, &g, x, y, idx);
        wk_be_maxpool_forward(p.gpu, &g, d_x, d_y, d_idx);
        cmp(&p, what, d_y, y, ny);
        idx_h = (int32_t *)down(&p, d_idx, ny * 4);
        for (j = 0; j < ny && idx_h[j] == idx[j]; j++)
            ;
        CU_ASSERT_EQUAL(j, ny);         /* same argmax everywhere */
        free(idx_h);
        strcat(what, " backward");
        wk_be_maxpool_backward(p.cpu, &g, dy, idx, dx);
        wk_be_maxpool_backward(p.gpu, &g, d_dy, d_idx, d_dx);
        cmp(&p, what, d_dx, dx, nx);

        snprintf(what, sizeof what, "avgpool %dx%d s%d%s C%d", g.kh, g.kw,
                 g.sh, t[i].same ? " same" : "", g.C);
        wk_be_avgpool_forward(p.cpu, &g, x, y);
        wk_be_avgpool_forward(p.gpu, &g, d_x, d_y);
        cmp(&p, what, d_y, y, ny);
        strcat(what, " backward");
        wk_be_avgpool_backward(p.cpu, &g, dy, dx);
        wk_be_avgpool_backward(p.gpu, &g, d_dy, d_dx);
        cmp(&p, what, d_dx, dx, nx);

        wk_be_free(p.gpu, d_x);
        wk_be_free(p.gpu, d_cols);
        wk_be_free(p.gpu, d_dx);
        wk_be_free(p.gpu, d_y);
        wk_be_free(p.gpu, d_dy);
        wk_be_free(p.gpu, d_idx);
        free(x);
        free(cols);
        free(dx);
        free(y);
        free(dy);
        free(idx);
    }
    pair_close(&p);
}

/* Layer normalisation forward and backward, GPU vs CPU: rows of one to
 * many values, with and without gamma and beta. */
static void test_layernorm(void)
{
    static const struct { int rows, n, affine; } t[] = {
        {1, 1, 1}, {7, 3, 1}, {64, 16, 0}, {200, 64, 1}, {3, 1000, 1},
    };
    struct pair p;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const int rows = t[i].rows, n = t[i].n, af = t[i].affine;
        const size_t nx = (size_t)rows * n;
        float *x = rand_floats(nx), *dy = rand_floats(nx);
        float *g = rand_floats(n), *b = rand_floats(n);
        float *y = malloc(nx * 4), *xh = malloc(nx * 4), *rs = malloc(rows * 4);
        float *dx = malloc(nx * 4), *dg = malloc(n * 4), *db = malloc(n * 4);
        float *d_x = up(&p, x, nx * 4), *d_dy = up(&p, dy, nx * 4);
        float *d_g = up(&p, g, n * 4), *d_b = up(&p, b, n * 4);
        float *d_y, *d_xh, *d_rs, *d_dx, *d_dg, *d_db;
        char what[64];

        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, nx * 4, (void **)&d_y), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, nx * 4, (void **)&d_xh), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, rows * 4, (void **)&d_rs), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, nx * 4, (void **)&d_dx), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, n * 4, (void **)&d_dg), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, n * 4, (void **)&d_db), 0);
        snprintf(what, sizeof what, "layernorm %d×%d%s", rows, n,
                 af ? " γ β" : "");
        wk_be_layernorm_forward(p.cpu, rows, n, 1e-3f, x, af ? g : NULL,
                                af ? b : NULL, y, xh, rs);
        wk_be_layernorm_forward(p.gpu, rows, n, 1e-3f, d_x, af ? d_g : NULL,
                                af ? d_b : NULL, d_y, d_xh, d_rs);
        cmp(&p, what, d_y, y, nx);
        wk_be_layernorm_backward(p.cpu, rows, n, dy, xh, rs, af ? g : NULL,
                                 dx, dg, db);
        wk_be_layernorm_backward(p.gpu, rows, n, d_dy, d_xh, d_rs,
                                 af ? d_g : NULL, d_dx, d_dg, d_db);
        strcat(what, " dx");
        cmp(&p, what, d_dx, dx, nx);
        strcat(what, " dγ");
        cmp(&p, what, d_dg, dg, n);
        strcat(what, " dβ");
        cmp(&p, what, d_db, db, n);
        wk_be_free(p.gpu, d_x);
        wk_be_free(p.gpu, d_dy);
        wk_be_free(p.gpu, d_g);
        wk_be_free(p.gpu, d_b);
        wk_be_free(p.gpu, d_y);
        wk_be_free(p.gpu, d_xh);
        wk_be_free(p.gpu, d_rs);
        wk_be_free(p.gpu, d_dx);
        wk_be_free(p.gpu, d_dg);
        wk_be_free(p.gpu, d_db);
        free(x);
        free(dy);
        free(g);
        free(b);
        free(y);
        free(xh);
        free(rs);
        free(dx);
        free(dg);
        free(db);
    }
    pair_close(&p);
}

/* Embedding gather and its scatter-add adjoint, GPU vs CPU, with ids
 * repeated within the batch (rows 0 and 1 hot) and rows no position
 * names (their gradient zero). */
static void test_embed(void)
{
    static const struct { size_t n, rows; int dim; } t[] = {
        {1, 1, 1}, {7, 3, 5}, {512 * 26, 300, 16}, {40, 40, 33},
    };
    struct pair p;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const size_t n = t[i].n, nr = t[i].rows;
        const int dim = t[i].dim;
        float *rows = rand_floats(nr * dim), *dy = rand_floats(n * dim);
        float *y = malloc(n * dim * 4), *dr = malloc(nr * dim * 4);
        int32_t *inv = malloc(n * sizeof *inv);
        float *d_rows, *d_dy, *d_y, *d_dr;
        int32_t *d_inv;
        char what[64];

        CU_ASSERT_FATAL(y && dr && inv);
        for (size_t k = 0; k < n; k++) {    /* half on rows 0 and 1 */
            frand();
            inv[k] = (int32_t)(k % 2 ? rng % nr : k / 2 % (nr < 2 ? 1 : 2));
        }
        d_rows = up(&p, rows, nr * dim * 4);
        d_dy = up(&p, dy, n * dim * 4);
        d_inv = up(&p, inv, n * sizeof *inv);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, n * dim * 4, (void **)&d_y),
                              0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, nr * dim * 4,
                                          (void **)&d_dr), 0);
        snprintf(what, sizeof what, "embed gather %zu ids, %zu rows × %d", n,
                 nr, dim);
        wk_be_embed_gather(p.cpu, rows, inv, n, dim, y);
        wk_be_embed_gather(p.gpu, d_rows, d_inv, n, dim, d_y);
        cmp(&p, what, d_y, y, n * dim);
        snprintf(what, sizeof what, "embed scatter %zu ids, %zu rows × %d",
                 n, nr, dim);
        wk_be_embed_scatter(p.cpu, dy, inv, n, dim, nr, dr);
        wk_be_embed_scatter(p.gpu, d_dy, d_inv, n, dim, nr, d_dr);
        cmp(&p, what, d_dr, dr, nr * dim);
        wk_be_free(p.gpu, d_rows);
        wk_be_free(p.gpu, d_dy);
        wk_be_free(p.gpu, d_inv);
        wk_be_free(p.gpu, d_y);
        wk_be_free(p.gpu, d_dr);
        free(rows);
        free(dy);
        free(y);
        free(dr);
        free(inv);
    }
    pair_close(&p);
}

/* Depthwise convolution forward, filter and input gradients, GPU vs CPU,
 * over geometries with strides, "same" padding and depth multipliers. */
static void test_dwconv(void)
{
    static const struct {
        int B, H, W, C, kh, kw, sh, sw, same, dm;
    } t[] = {
        {3, 28, 28, 1, 3, 3, 1, 1, 0, 1}, {2, 9, 11, 5, 3, 3, 2, 2, 1, 2},
        {2, 7, 7, 8, 1, 1, 1, 1, 0, 3},   {1, 10, 9, 3, 5, 4, 3, 2, 1, 1},
        {4, 14, 14, 32, 3, 3, 1, 1, 1, 1}, {2, 8, 8, 4, 3, 3, 2, 2, 1, 2},
        {16, 14, 14, 16, 3, 3, 1, 1, 1, 1},
    };
    struct pair p;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct wk_geom g;
        size_t nx, ny, nw;
        float *x, *w, *y, *dy, *dx, *dw, *d_x, *d_w, *d_y, *d_dy, *d_dx, *d_dw;
        int dm = t[i].dm;
        char what[96];

        CU_ASSERT_EQUAL_FATAL(wk_geom_init(&g, t[i].B, t[i].H, t[i].W,
                                           t[i].C, t[i].kh, t[i].kw, t[i].sh,
                                           t[i].sw, t[i].same), HC_OK);
        nx = (size_t)g.B * g.H * g.W * g.C;
        ny = (size_t)g.B * g.OH * g.OW * g.C * dm;
        nw = (size_t)g.kh * g.kw * g.C * dm;
        x = rand_floats(nx);
        w = rand_floats(nw);
        dy = rand_floats(ny);
        y = malloc(ny * 4);
        dx = malloc(nx * 4);
        dw = malloc(nw * 4);
        d_x = up(&p, x, nx * 4);
        d_w = up(&p, w, nw * 4);
        d_dy = up(&p, dy, ny * 4);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, ny * 4, (void **)&d_y), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, nx * 4, (void **)&d_dx), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, nw * 4, (void **)&d_dw), 0);

        snprintf(what, sizeof what, "dwconv %dx%d s%d%s C%d dm%d B%d", g.kh,
                 g.kw, g.sh, t[i].same ? " same" : "", g.C, dm, g.B);
        wk_be_dwconv_forward(p.cpu, &g, dm, x, w, y);
        wk_be_dwconv_forward(p.gpu, &g, dm, d_x, d_w, d_y);
        cmp(&p, what, d_y, y, ny);
        strcat(what, " filter");
        wk_be_dwconv_backward_filter(p.cpu, &g, dm, x, dy, dw);
        wk_be_dwconv_backward_filter(p.gpu, &g, dm, d_x, d_dy, d_dw);
        cmp(&p, what, d_dw, dw, nw);
        strcpy(what + strlen(what) - strlen("filter"), "input");
        wk_be_dwconv_backward_input(p.cpu, &g, dm, dy, w, dx);
        wk_be_dwconv_backward_input(p.gpu, &g, dm, d_dy, d_w, d_dx);
        cmp(&p, what, d_dx, dx, nx);

        wk_be_free(p.gpu, d_x);
        wk_be_free(p.gpu, d_w);
        wk_be_free(p.gpu, d_y);
        wk_be_free(p.gpu, d_dy);
        wk_be_free(p.gpu, d_dx);
        wk_be_free(p.gpu, d_dw);
        free(x);
        free(w);
        free(y);
        free(dy);
        free(dx);
        free(dw);
    }
    pair_close(&p);
}

/* Batch norm's four ops, with and without gamma and beta, on rows of
 * an image batch and of vectors; the backward through the CPU's moments. */
static void test_batchnorm(void)
{
    static const struct {
        int rows, c, affine;
    } t[] = {{3 * 28 * 28, 16, 1}, {64, 10, 0}, {2 * 7 * 7, 300, 1},
             {1, 4, 1}, {5000, 1, 0}};
    struct pair p;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        size_t n = (size_t)t[i].rows * t[i].c, c = (size_t)t[i].c;
        float *x = rand_floats(n), *dy = rand_floats(n), *g = rand_floats(c);
        float *b = rand_floats(c), *st = malloc(3 * c * 4);
        float *sums = malloc(2 * c * 4), *y = malloc(n * 4), *dx = malloc(n * 4);
        float *d_x = up(&p, x, n * 4), *d_dy = up(&p, dy, n * 4);
        float *d_g = up(&p, g, c * 4), *d_b = up(&p, b, c * 4);
        float *d_st, *d_sums, *d_y, *d_dx;
        const float *gg = t[i].affine ? d_g : NULL, *bb = t[i].affine ? d_b
                                                                      : NULL;
        char what[96];

        for (size_t k = 0; k < n; k++)
            x[k] = 3.0f + 2.0f * x[k];      /* a mean and a spread */
        wk_be_upload(p.gpu, d_x, x, n * 4);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, 3 * c * 4, (void **)&d_st), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, 2 * c * 4, (void **)&d_sums),
                              0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, n * 4, (void **)&d_y), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, n * 4, (void **)&d_dx), 0);
        snprintf(what, sizeof what, "bn rows %d C %d%s stats", t[i].rows,
                 t[i].c, t[i].affine ? " affine" : "");
        wk_be_bn_stats(p.cpu, x, t[i].rows, t[i].c, st);
        wk_be_bn_stats(p.gpu, d_x, t[i].rows, t[i].c, d_st);
        cmp(&p, what, d_st, st, 3 * c);
        wk_be_upload(p.gpu, d_st, st, 3 * c * 4);
        strcpy(strstr(what, " stats"), " forward");
        wk_be_bn_forward(p.cpu, x, t[i].rows, t[i].c, st, st + c, 1e-3f,
                         t[i].affine ? g : NULL, t[i].affine ? b : NULL, y);
        wk_be_bn_forward(p.gpu, d_x, t[i].rows, t[i].c, d_st, d_st + c, 1e-3f,
                         gg, bb, d_y);
        cmp(&p, what, d_y, y, n);
        strcpy(strstr(what, " forward"), " sums");
        wk_be_bn_backward_params(p.cpu, x, dy, t[i].rows, t[i].c, st, 1e-3f,
                                 sums);
        wk_be_bn_backward_params(p.gpu, d_x, d_dy, t[i].rows, t[i].c, d_st,
                                 1e-3f, d_sums);
        cmp(&p, what, d_sums, sums, 2 * c);
        wk_be_upload(p.gpu, d_sums, sums, 2 * c * 4);
        strcpy(strstr(what, " sums"), " input");
        wk_be_bn_backward_input(p.cpu, x, dy, t[i].rows, t[i].c, st, 1e-3f,
                                t[i].affine ? g : NULL, sums, dx);
        wk_be_bn_backward_input(p.gpu, d_x, d_dy, t[i].rows, t[i].c, d_st,
                                1e-3f, gg, d_sums, d_dx);
        cmp(&p, what, d_dx, dx, n);
        wk_be_free(p.gpu, d_x);
        wk_be_free(p.gpu, d_dy);
        wk_be_free(p.gpu, d_g);
        wk_be_free(p.gpu, d_b);
        wk_be_free(p.gpu, d_st);
        wk_be_free(p.gpu, d_sums);
        wk_be_free(p.gpu, d_y);
        wk_be_free(p.gpu, d_dx);
        free(x);
        free(dy);
        free(g);
        free(b);
        free(st);
        free(sums);
        free(y);
        free(dx);
    }
    pair_close(&p);
}

static void test_activations(void)
{
    static const struct {
        int rows, n;
    } shapes[] = {{5, 10}, {3000, 37}, {2, 300}};
    struct pair p;
    size_t a, s;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s].rows, n = shapes[s].n;
        size_t cnt = (size_t)rows * n;

        for (a = 0; a < HC_ACT_COUNT; a++) {
            enum hc_act act = (enum hc_act)a;
            float *x = rand_floats(cnt), *bias = rand_floats(n);
            float *dy = rand_floats(cnt), *y = malloc(cnt * 4);
            float *db = malloc(n * 4);
            float *d_x = up(&p, x, cnt * 4), *d_bias = up(&p, bias, n * 4);
            float *d_dy = up(&p, dy, cnt * 4), *d_y, *d_db;
            char what[96];

            CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, cnt * 4, (void **)&d_y),
                                  0);
            CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, n * 4, (void **)&d_db),
                                  0);
            snprintf(what, sizeof what, "%s forward %dx%d",
                     hc_act_name(act), rows, n);
            wk_be_act_forward(p.cpu, x, a % 2 ? bias : NULL, y, rows, n,
                              act);
            wk_be_act_forward(p.gpu, d_x, a % 2 ? d_bias : NULL, d_y, rows,
                              n, act);
            cmp(&p, what, d_y, y, cnt);
            wk_be_act_forward(p.cpu, x, bias, x, rows, n, act);
            wk_be_act_forward(p.gpu, d_x, d_bias, d_x, rows, n, act);
            strcat(what, " in place");
            cmp(&p, what, d_x, x, cnt);
            snprintf(what, sizeof what, "%s backward", hc_act_name(act));
            wk_be_act_backward(p.cpu, y, dy, x, rows, n, act);
            wk_be_act_backward(p.gpu, d_y, d_dy, d_x, rows, n, act);
            cmp(&p, what, d_x, x, cnt);
            snprintf(what, sizeof what, "%s fused bias backward",
                     hc_act_name(act));
            wk_be_act_bias_backward(p.cpu, y, dy, rows, n, act, db);
            wk_be_act_bias_backward(p.gpu, d_y, d_dy, rows, n, act, d_db);
            cmp(&p, what, d_dy, dy, cnt);
            cmp(&p, "  … its bias gradient", d_db, db, n);
            wk_be_bias_grad(p.cpu, x, rows, n, db);
            wk_be_bias_grad(p.gpu, d_x, rows, n, d_db);
            cmp(&p, "bias gradient", d_db, db, n);
            wk_be_free(p.gpu, d_x);
            wk_be_free(p.gpu, d_bias);
            wk_be_free(p.gpu, d_dy);
            wk_be_free(p.gpu, d_y);
            wk_be_free(p.gpu, d_db);
            free(x);
            free(bias);
            free(dy);
            free(y);
            free(db);
        }
    }
    pair_close(&p);
}

/* The ReLU layer's op over settings that exercise its pieces. */
static void test_relu_layer(void)
{
    static const float set[][3] = {    /* max_value, slope, threshold */
        {-1, 0, 0}, {6, 0, 0}, {-1, 0.3f, 0}, {0.5f, 0.1f, -0.4f},
        {2, 0.2f, 0.7f}};
    const size_t n = 100003;
    struct pair p;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (size_t k = 0; k < sizeof set / sizeof set[0]; k++) {
        float *x = rand_floats(n), *dy = rand_floats(n), *y = malloc(n * 4);
        float *d_x, *d_dy, *d_y;
        char what[96];

        for (size_t i = 0; i < n; i++)
            x[i] *= 8;
        d_x = up(&p, x, n * 4);
        d_dy = up(&p, dy, n * 4);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, n * 4, (void **)&d_y), 0);
        snprintf(what, sizeof what, "relu layer (%g, %g, %g) forward",
                 (double)set[k][0], (double)set[k][1], (double)set[k][2]);
        wk_be_relu_forward(p.cpu, x, y, n, set[k][0], set[k][1], set[k][2]);
        wk_be_relu_forward(p.gpu, d_x, d_y, n, set[k][0], set[k][1],
                           set[k][2]);
        cmp(&p, what, d_y, y, n);
        strcat(what, ", backward in place");
        wk_be_relu_backward(p.cpu, x, dy, dy, n, set[k][0], set[k][1],
                            set[k][2]);
        wk_be_relu_backward(p.gpu, d_x, d_dy, d_dy, n, set[k][0], set[k][1],
                            set[k][2]);
        cmp(&p, what, d_dy, dy, n);
        wk_be_free(p.gpu, d_x);
        wk_be_free(p.gpu, d_dy);
        wk_be_free(p.gpu, d_y);
        free(x);
        free(dy);
        free(y);
    }
    pair_close(&p);
}

static void test_losses(void)
{
    static const struct {
        int rows, n;
    } t[] = {{64, 10}, {7, 1}, {33, 100}};
    static const struct {
        enum hc_loss kind;
        int logits;
    } tl[] = {{HC_LOSS_CCE, 1}, {HC_LOSS_BCE, 0}, {HC_LOSS_BCE, 1},
              {HC_LOSS_MAE, 0}, {HC_LOSS_HUBER, 0}};
    struct pair p;
    size_t k;
    int r;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (k = 0; k < sizeof t / sizeof t[0]; k++) {
        int rows = t[k].rows, n = t[k].n;
        size_t cnt = (size_t)rows * n;
        float *z = rand_floats(cnt), *tg = rand_floats(cnt);
        float *pr = malloc(cnt * 4), *loss = malloc(rows * 4);
        float *hit = malloc(rows * 4);
        int *lab = malloc(rows * sizeof *lab);
        float *d_z, *d_t, *d_p, *d_loss, *d_hit, *h;
        int *d_lab;

        for (r = 0; r < rows; r++)
            lab[r] = (int)((frand() + 1.0f) * 0.5f * n) % n;
        z[0] = z[1];                    /* a tie: the first maximum wins */
        d_z = up(&p, z, cnt * 4);
        d_t = up(&p, tg, cnt * 4);
        d_lab = up(&p, lab, rows * sizeof *lab);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, cnt * 4, (void **)&d_p), 0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, rows * 4, (void **)&d_loss),
                              0);
        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, rows * 4, (void **)&d_hit),
                              0);
        wk_be_xent_forward(p.cpu, z, lab, rows, n, pr, loss, hit);
        wk_be_xent_forward(p.gpu, d_z, d_lab, rows, n, d_p, d_loss, d_hit);
        cmp(&p, "softmax + CE forward: p", d_p, pr, cnt);
        cmp(&p, "softmax + CE forward: loss", d_loss, loss, rows);
        h = down(&p, d_hit, rows * 4);
        CU_ASSERT(memcmp(h, hit, rows * 4) == 0);
        free(h);
        wk_be_xent_forward(p.cpu, z, NULL, rows, n, pr, NULL, NULL);
        wk_be_xent_forward(p.gpu, d_z, NULL, rows, n, d_p, NULL, NULL);
        cmp(&p, "softmax without labels", d_p, pr, cnt);
        wk_be_xent_backward(p.cpu, pr, lab, rows, n, 1.0f / rows, pr);
        wk_be_xent_backward(p.gpu, d_p, d_lab, rows, n, 1.0f / rows, d_p);
        cmp(&p, "CE backward in place", d_p, pr, cnt);
        wk_be_mse_forward(p.cpu, z, tg, rows, n, loss, hit);
        wk_be_mse_forward(p.gpu, d_z, d_t, rows, n, d_loss, d_hit);
        cmp(&p, "mse forward: loss", d_loss, loss, rows);
        h = down(&p, d_hit, rows * 4);
        CU_ASSERT(memcmp(h, hit, rows * 4) == 0);
        free(h);
        wk_be_mse_backward(p.cpu, z, tg, cnt, 2.0f / cnt, pr);
        wk_be_mse_backward(p.gpu, d_z, d_t, cnt, 2.0f / cnt, d_p);
        cmp(&p, "mse backward", d_p, pr, cnt);
        for (size_t f = 0; f < sizeof tl / sizeof tl[0]; f++) {
            char what[96];

            snprintf(what, sizeof what, "%s%s forward %dx%d",
                     hc_loss_name(tl[f].kind),
                     tl[f].logits ? " from logits" : "", rows, n);
            wk_be_tloss_forward(p.cpu, tl[f].kind, tl[f].logits, 0.5f, z, tg,
                                rows, n, loss, hit);
            wk_be_tloss_forward(p.gpu, tl[f].kind, tl[f].logits, 0.5f, d_z,
                                d_t, rows, n, d_loss, d_hit);
            cmp(&p, what, d_loss, loss, rows);
            h = down(&p, d_hit, rows * 4);
            CU_ASSERT(memcmp(h, hit, rows * 4) == 0);
            free(h);
            strcat(what, ", backward");
            wk_be_tloss_backward(p.cpu, tl[f].kind, tl[f].logits, 0.5f, z,
                                 tg, rows, n, 1.0f / rows, pr);
            wk_be_tloss_backward(p.gpu, tl[f].kind, tl[f].logits, 0.5f, d_z,
                                 d_t, rows, n, 1.0f / rows, d_p);
            cmp(&p, what, d_p, pr, cnt);
        }
        wk_be_free(p.gpu, d_z);
        wk_be_free(p.gpu, d_t);
        wk_be_free(p.gpu, d_lab);
        wk_be_free(p.gpu, d_p);
        wk_be_free(p.gpu, d_loss);
        wk_be_free(p.gpu, d_hit);
        free(z);
        free(tg);
        free(pr);
        free(loss);
        free(hit);
        free(lab);
    }
    pair_close(&p);
}

static void test_dropout(void)
{
    enum { N = 50001 };
    static const float rates[] = {0.0f, 0.3f, 0.5f, 0.9f};
    struct pair p;
    size_t k;

    if (!pair_open(&p))
        HP_SKIP("no CUDA device");
    for (k = 0; k < sizeof rates / sizeof rates[0]; k++) {
        float *x = rand_floats(N), *y = malloc(N * 4), *h;
        float *d_x = up(&p, x, N * 4), *d_y;
        uint64_t seed = wk_dropout_seed_at(12345u + k, 77);

        CU_ASSERT_EQUAL_FATAL(wk_be_alloc(p.gpu, N * 4, (void **)&d_y), 0);
        wk_be_dropout_forward(p.cpu, x, y, N, rates[k], seed);
        wk_be_dropout_forward(p.gpu, d_x, d_y, N, rates[k], seed);
        h = down(&p, d_y, N * 4);
        CU_ASSERT(memcmp(h, y, N * 4) == 0);    /* the same mask, exactly */
        free(h);
        wk_be_dropout_backward(p.cpu, x, x, N, rates[k], seed + 1);
        wk_be_dropout_backward(p.gpu, d_x, d_x, N, rates[k], seed + 1);
        h = down(&p, d_x, N * 4);
        CU_ASSERT(memcmp(h, x, N * 4) == 0);
        free(h);
        wk_be_free(p.gpu, d_x);
        wk_be_free(p.gpu, d_y);
        free(x);
        free(y);
    }
    pair_close(&p);
}

/* ---- errors ---- */

static void test_errors(void)
{
    struct wk_device d = {"gpu:0", WK_DEV_GPU, 0, NULL};
    struct wk_backend *be = NULL;
    int n = wk_backend_cuda_available();
    void *ptr = NULL;
    char want[64];

    if (n < 1) {
        /* Runs everywhere: gpu:0 is refused, saying why. */
        CU_ASSERT_EQUAL(wk_backend_open(&d, 0, &be), HC_ERR_UNSUPPORTED);
        CU_ASSERT_PTR_NULL(be);
        CU_ASSERT(strstr(hc_err_msg(), "gpu:0: this build has no CUDA "
                                       "backend") ||
                  strstr(hc_err_msg(), "gpu:0: this machine has no CUDA "
                                       "device — use cpu"));
        printf("\n    %s", hc_err_msg());
        return;
    }
    d.index = n;
    snprintf(d.name, sizeof d.name, "gpu:%d", n);
    CU_ASSERT_EQUAL(wk_backend_open(&d, 0, &be), HC_ERR_UNSUPPORTED);
    snprintf(want, sizeof want, "gpu:%d: this machine has %d CUDA device", n,
             n);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), want));
    d.index = 0;
    snprintf(d.name, sizeof d.name, "gpu:0");
    CU_ASSERT_EQUAL_FATAL(wk_backend_open(&d, 0, &be), HC_OK);
    CU_ASSERT_STRING_EQUAL(be->name, "gpu:0");
    CU_ASSERT_EQUAL(wk_be_check(be), HC_OK);
    CU_ASSERT_EQUAL(wk_be_alloc(be, (size_t)1 << 52, &ptr), HC_ERR_NOMEM);
    CU_ASSERT_PTR_NULL(ptr);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "out of device memory"));
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "4503599627370496 bytes"));
    printf("\n    %s", hc_err_msg());
    /* The failure was recorded too: check reports it once, then clears. */
    CU_ASSERT_EQUAL(wk_be_check(be), HC_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "cudaMalloc"));
    CU_ASSERT_EQUAL(wk_be_check(be), HC_OK);
    wk_backend_free(be);
}

/* ---- whole nets ---- */

/* Every layer kind other than the reference model's: strided same convs,
 * tanh, overlapping same pool, dropout, sigmoid output with mse. */
static const char mixed_json[] =
    "{\"name\": \"mixed\", \"input_shape\": [12, 10, 3], \"layers\": ["
    "{\"type\": \"conv2d\", \"filters\": 8, \"kernel_size\": [3, 3],"
    " \"strides\": [2, 2], \"padding\": \"same\", \"activation\": \"tanh\"},"
    "{\"type\": \"conv2d\", \"filters\": 6, \"kernel_size\": [2, 2],"
    " \"activation\": \"relu\"},"
    "{\"type\": \"maxpool2d\", \"pool_size\": [3, 3], \"strides\": [1, 1],"
    " \"padding\": \"same\"},"
    "{\"type\": \"flatten\"},"
    "{\"type\": \"dense\", \"units\": 40, \"activation\": \"relu\"},"
    "{\"type\": \"dropout\", \"rate\": 0.3},"
    "{\"type\": \"dense\", \"units\": 4, \"activation\": \"sigmoid\"}],"
    " \"loss\": \"mse\", \"optimizer\": {\"type\": \"sgd\","
    " \"learning_rate\": 0.01}, \"batch_size\": 8, \"seed\": 5}";

/* Keras's activations beyond the reference model's, fused in conv2d (gelu
 * keeping its input, elu left to the pool) and dense, and alone; the
 * ReLU and LeakyReLU layers. */
static const char acts_json[] =
    "{\"name\": \"acts\", \"input_shape\": [10, 9, 2], \"layers\": ["
    "{\"type\": \"conv2d\", \"filters\": 6, \"kernel_size\": [3, 3],"
    " \"padding\": \"same\", \"activation\": \"gelu\"},"
    "{\"type\": \"conv2d\", \"filters\": 5, \"kernel_size\": [3, 3],"
    " \"activation\": \"elu\"},"
    "{\"type\": \"maxpool2d\", \"pool_size\": [2, 2]},"
    "{\"type\": \"flatten\"},"
    "{\"type\": \"dense\", \"units\": 30, \"activation\": \"swish\"},"
    "{\"type\": \"activation\", \"activation\": \"softplus\"},"
    "{\"type\": \"dense\", \"units\": 20, \"activation\": \"relu6\"},"
    "{\"type\": \"activation\", \"activation\": \"gelu\"},"
    "{\"type\": \"ReLU\", \"max_value\": 0.5, \"threshold\": -0.1,"
    " \"negative_slope\": 0.05},"
    "{\"type\": \"dense\", \"units\": 10},"
    "{\"type\": \"LeakyReLU\", \"negative_slope\": 0.2},"
    "{\"type\": \"dense\", \"units\": 4,"
    " \"activation\": \"hard_sigmoid\"}],"
    " \"loss\": \"mse\", \"optimizer\": \"adam\", \"seed\": 6}";

/* Categorical cross-entropy with label smoothing on a fused softmax (and
 * L1L2 and L2 regularizers), and binary cross-entropy from logits: the
 * targets made on the host go up. */
static const char cce_json[] =
    "{\"name\": \"cce\", \"input_shape\": [12], \"layers\": ["
    "{\"type\": \"dense\", \"units\": 20, \"activation\": \"relu\","
    " \"kernel_regularizer\": {\"type\": \"L1L2\", \"l1\": 0.01,"
    " \"l2\": 0.02}, \"bias_regularizer\": \"l2\"},"
    "{\"type\": \"dense\", \"units\": 5, \"activation\": \"softmax\"}],"
    " \"loss\": {\"type\": \"categorical_crossentropy\","
    " \"label_smoothing\": 0.1}, \"optimizer\": \"adam\", \"seed\": 3}";
static const char bce_json[] =
    "{\"name\": \"bce\", \"input_shape\": [12], \"layers\": ["
    "{\"type\": \"dense\", \"units\": 20, \"activation\": \"tanh\"},"
    "{\"type\": \"dense\", \"units\": 3}],"
    " \"loss\": {\"type\": \"binary_crossentropy\", \"from_logits\": true},"
    " \"optimizer\": \"adam\", \"seed\": 4}";

/* The net of m on the CPU and on gpu:0 (and split across both when split):
 * one training step and one prediction on the same data compare. Returns
 * 0 (after the CPU half) when there is no CUDA device. */
static int compare_net(const struct hc_model *m, int B, int split)
{
    struct wk_backend *layer_be[HC_MODEL_MAX_LAYERS];
    struct wk_net *cn = NULL, *gn = NULL;
    size_t nin, nout, np = m->n_params, i;
    float *params, *x, *tg, *gc, *gg, *oc, *og;
    double lc, lg;
    int *lab, cc, cg, l;
    struct pair p;
    char what[96];

    params = malloc(np * 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(params);
    hc_model_init_params(m, params);
    if (!pair_open(&p)) {
        /* The CPU half still runs: the model builds and steps. */
        struct wk_backend *cpu = NULL;

        CU_ASSERT_EQUAL_FATAL(wk_backend_cpu_new(1, &cpu), HC_OK);
        CU_ASSERT_EQUAL_FATAL(wk_net_new(m, cpu, B, &cn), HC_OK);
        wk_net_free(cn);
        wk_backend_free(cpu);
        free(params);
        return 0;
    }
    CU_ASSERT_EQUAL_FATAL(wk_net_new(m, p.cpu, B, &cn), HC_OK);
    for (l = 0; l < m->n_layers; l++)
        layer_be[l] = split && l % 2 ? p.cpu : p.gpu;
    CU_ASSERT_EQUAL_FATAL(wk_net_new_placed(m, layer_be, B, &gn), HC_OK);
    nin = wk_net_input_size(cn);
    nout = wk_net_output_size(cn);
    x = rand_floats((size_t)B * nin);
    tg = rand_floats((size_t)B * nout);
    lab = malloc(B * sizeof *lab);
    for (l = 0; l < B; l++)
        lab[l] = (int)((frand() + 1.0f) * 0.5f * nout) % (int)nout;
    gc = malloc(np * 4);
    gg = malloc(np * 4);
    oc = malloc((size_t)B * nout * 4);
    og = malloc((size_t)B * nout * 4);
    wk_net_set_seed(cn, 9);
    wk_net_set_seed(gn, 9);
    CU_ASSERT_EQUAL(wk_net_step(cn, params, x, lab, tg, B, gc, &lc, &cc), 0);
    CU_ASSERT_EQUAL(wk_net_output(cn, oc), HC_OK);
    if (wk_net_step(gn, params, x, lab, tg, B, gg, &lg, &cg))
        printf("\n    %s", hc_err_msg());
    CU_ASSERT_EQUAL(wk_net_output(gn, og), HC_OK);
    snprintf(what, sizeof what, "%s%s B=%d output", m->name,
             split ? " split cpu/gpu" : "", B);
    near(what, og, oc, (size_t)B * nout);
    what[strlen(what) - 6] = '\0';
    strcat(what, "gradients");
    near(what, gg, gc, np);
    near("  … mean loss", &(float){(float)lg}, &(float){(float)lc}, 1);
    CU_ASSERT(abs(cc - cg) <= 1);       /* a near tie may flip one */
    CU_ASSERT_EQUAL(wk_net_predict(cn, params, x, lab, tg, B, &lc, &cc), 0);
    CU_ASSERT_EQUAL(wk_net_predict(gn, params, x, lab, tg, B, &lg, &cg), 0);
    near("  … predict loss sum", &(float){(float)lg}, &(float){(float)lc}, 1);
    for (i = 0; i < np; i++)            /* a step really changed things */
        if (gc[i] != 0.0f)
            break;
    CU_ASSERT(i < np);
    wk_net_free(gn);
    wk_net_free(cn);
    pair_close(&p);
    free(params);
    free(x);
    free(tg);
    free(lab);
    free(gc);
    free(gg);
    free(oc);
    free(og);
    return 1;
}

/* One step of a click-through net — ids through an embedding and
 * GlobalAveragePooling1D beside a numeric input, dense layers, binary
 * cross-entropy — on the CPU and on the GPU (split: every other layer on
 * the CPU), the same rows set in both: outputs, dense gradients and the
 * rows' gradients summed by row (ids repeated within the batch). Without
 * a GPU the CPU half still builds and steps. */
static void embed_net(struct pair *p, int have_gpu, int split)
{
    enum { B = 16, N = 6, NX = 3, DIM = 4 };
    static const char json[] =
        "{\"seed\": 3, \"inputs\": [{\"name\": \"categorical\", \"shape\": "
        "[6], \"dtype\": \"int64\"}, {\"name\": \"numeric\", \"shape\": "
        "[3]}], \"layers\": [{\"type\": \"embedding\", \"input_dim\": 1000, "
        "\"output_dim\": 4, \"inputs\": \"categorical\"}, {\"type\": "
        "\"globalavgpool1d\", \"name\": \"pooled\"}, {\"type\": "
        "\"concatenate\", \"inputs\": [\"pooled\", \"numeric\"]}, "
        "{\"type\": \"dense\", \"units\": 5, \"activation\": \"tanh\"}, "
        "{\"type\": \"dense\", \"units\": 1, \"activation\": \"sigmoid\"}], "
        "\"loss\": \"binary_crossentropy\", \"optimizer\": \"sgd\"}";
    struct hc_model *m = calloc(1, sizeof *m);
    struct wk_backend *layer_be[HC_MODEL_MAX_LAYERS];
    struct wk_net *cn = NULL, *gn = NULL;
    const int row = N * HC_ID_FLOATS + NX;
    float x[B * (N * HC_ID_FLOATS + NX)], rows[B * N * DIM];
    float rc[B * N * DIM], rg[B * N * DIM], oc[B], og[B], *params, *gc, *gg;
    int64_t ids[B * N], uniq[B * N];
    int32_t inv[B * N];
    int lab[B], n_rows = 0, l;
    double lc, lg;

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(json, strlen(json), "embed_net",
                                         m), HC_OK);
    for (int i = 0; i < B * N; i++) {   /* ids from 20 values: repeats */
        int k;

        ids[i] = (int64_t)((frand() + 1.0f) * 10.0f) % 20;
        for (k = 0; k < n_rows && uniq[k] != ids[i]; k++)
            ;
        if (k == n_rows)
            uniq[n_rows++] = ids[i];
        inv[i] = k;
    }
    for (int b = 0; b < B; b++) {
        memcpy(x + b * row, ids + b * N, N * sizeof *ids);
        for (int j = 0; j < NX; j++)
            x[b * row + N * HC_ID_FLOATS + j] = frand();
        lab[b] = frand() > 0;
    }
    for (int i = 0; i < n_rows * DIM; i++)
        rows[i] = 0.5f * frand();
    params = malloc(m->n_params * 4);
    gc = malloc(m->n_params * 4);
    gg = malloc(m->n_params * 4);
    CU_ASSERT_FATAL(params && gc && gg);
    hc_model_init_params(m, params);
    CU_ASSERT_EQUAL_FATAL(wk_net_new(m, p->cpu, B, &cn), HC_OK);
    CU_ASSERT_EQUAL_FATAL(wk_net_set_rows(cn, 0, rows, (size_t)n_rows, inv,
                                          B), HC_OK);
    CU_ASSERT_EQUAL(wk_net_step(cn, params, x, lab, NULL, B, gc, &lc, NULL),
                    HC_OK);
    CU_ASSERT_EQUAL(wk_net_output(cn, oc), HC_OK);
    CU_ASSERT_EQUAL(wk_net_rows_grad(cn, 0, rc), HC_OK);
    if (have_gpu) {
        for (l = 0; l < m->n_layers; l++)
            layer_be[l] = split && l % 2 ? p->cpu : p->gpu;
        CU_ASSERT_EQUAL_FATAL(wk_net_new_placed(m, layer_be, B, &gn), HC_OK);
        CU_ASSERT_EQUAL_FATAL(wk_net_set_rows(gn, 0, rows, (size_t)n_rows,
                                              inv, B), HC_OK);
        if (wk_net_step(gn, params, x, lab, NULL, B, gg, &lg, NULL))
            printf("\n    %s", hc_err_msg());
        CU_ASSERT_EQUAL(wk_net_output(gn, og), HC_OK);
        CU_ASSERT_EQUAL(wk_net_rows_grad(gn, 0, rg), HC_OK);
        near(split ? "embedding net split output" : "embedding net output",
             og, oc, B);
        near("  … dense gradients", gg, gc, m->n_params);
        near("  … rows' gradients", rg, rc, (size_t)n_rows * DIM);
        near("  … mean loss", &(float){(float)lg}, &(float){(float)lc}, 1);
    }
    wk_net_free(gn);
    wk_net_free(cn);
    free(params);
    free(gc);
    free(gg);
    free(m);
}

static void test_embed_model(void)
{
    struct pair p;
    int gpu = pair_open(&p);

    if (!gpu)
        CU_ASSERT_EQUAL_FATAL(wk_backend_cpu_new(1, &p.cpu), HC_OK);
    embed_net(&p, gpu, 0);
    embed_net(&p, gpu, 1);
    if (gpu) {
        pair_close(&p);
        return;
    }
    wk_backend_free(p.cpu);
    HP_SKIP("no CUDA device");
}

static void test_reference_model(void)
{
    struct hc_model *m = calloc(1, sizeof *m);

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    CU_ASSERT_EQUAL_FATAL(hc_model_load("deploy/models/fashion_cnn.json", m),
                          HC_OK);
    if (!compare_net(m, 64, 0)) {
        free(m);
        HP_SKIP("no CUDA device");
    }
    compare_net(m, 5, 0);
    compare_net(m, 16, 1);
    free(m);
}

/* Model text json (its name `name`) on the CPU and gpu:0, then split;
 * test names the test in a skip. */
static void compare_json(const char *test, const char *json,
                         const char *name)
{
    struct hc_model *m = calloc(1, sizeof *m);
    int rv;

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    rv = hc_model_parse(json, strlen(json), name, m);
    if (rv)
        printf("\n    %s", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
    if (!compare_net(m, 8, 0)) {
        free(m);
        hp_test_skip(test, "no CUDA device");
        return;
    }
    compare_net(m, 7, 1);
    free(m);
}

static void test_mixed_model(void)
{
    compare_json(__func__, mixed_json, "mixed");
}

static void test_acts_model(void)
{
    compare_json(__func__, acts_json, "acts");
}

static void test_cce_model(void)
{
    compare_json(__func__, cce_json, "cce");
}

static void test_bce_model(void)
{
    compare_json(__func__, bce_json, "bce");
}

/* Graphs: a residual block with a projection shortcut (fan-out, Add), a
 * DenseNet-style block (Concatenate) and flat merges, each on the GPU and
 * split across CPU and GPU layer by layer (gradients cross and sum on the
 * edges). */
static const char merges_json[] =
    "{\"name\": \"merges\", \"input_shape\": [12], \"layers\": ["
    "{\"type\": \"dense\", \"name\": \"a\", \"units\": 8, "
    "\"activation\": \"tanh\"},"
    "{\"type\": \"dense\", \"name\": \"b\", \"units\": 8, "
    "\"activation\": \"sigmoid\"},"
    "{\"type\": \"subtract\", \"name\": \"s\", \"inputs\": [\"a\", \"b\"]},"
    "{\"type\": \"activation\", \"name\": \"r\", \"activation\": "
    "\"relu\", \"inputs\": \"a\"},"
    "{\"type\": \"dense\", \"name\": \"c\", \"units\": 8, "
    "\"inputs\": \"input\"},"
    "{\"type\": \"average\", \"name\": \"avg\", \"inputs\": "
    "[\"s\", \"r\", \"c\"]},"
    "{\"type\": \"concatenate\", \"name\": \"cat\", \"inputs\": "
    "[\"avg\", \"b\"]},"
    "{\"type\": \"multiply\", \"name\": \"sq\", \"inputs\": "
    "[\"cat\", \"cat\", \"cat\"]},"
    "{\"type\": \"dense\", \"name\": \"out\", \"units\": 4, "
    "\"activation\": \"softmax\"}],"
    "\"loss\": \"sparse_categorical_crossentropy\", \"optimizer\": \"sgd\"}";

/* Zero padding, average pools (same), global max and average pools and
 * reshapes both ways, with a branch joined by concatenate. */
static const char pools_json[] =
    "{\"name\": \"pools\", \"input_shape\": [10, 9, 3], \"layers\": ["
    "{\"type\": \"zeropadding2d\", \"padding\": [[1, 0], [2, 1]]},"
    "{\"type\": \"conv2d\", \"filters\": 6, \"kernel_size\": [3, 3],"
    " \"activation\": \"relu\"},"
    "{\"type\": \"avgpool2d\", \"pool_size\": [3, 3], \"strides\": [2, 2],"
    " \"padding\": \"same\"},"
    "{\"type\": \"conv2d\", \"name\": \"c2\", \"filters\": 4,"
    " \"kernel_size\": [2, 2], \"padding\": \"same\","
    " \"activation\": \"tanh\"},"
    "{\"type\": \"reshape\", \"target_shape\": [-1]},"
    "{\"type\": \"dense\", \"units\": 12, \"activation\": \"relu\"},"
    "{\"type\": \"reshape\", \"name\": \"r2\", \"target_shape\": [2, 2, 3]},"
    "{\"type\": \"globalavgpool2d\", \"name\": \"gavg\"},"
    "{\"type\": \"globalmaxpool2d\", \"name\": \"gmax\","
    " \"inputs\": \"c2\"},"
    "{\"type\": \"concatenate\", \"inputs\": [\"gavg\", \"gmax\"]},"
    "{\"type\": \"dense\", \"units\": 3, \"activation\": \"softmax\"}],"
    "\"loss\": \"sparse_categorical_crossentropy\", \"optimizer\": \"sgd\"}";

static void test_pool_models(void)
{
    struct hc_model *m = calloc(1, sizeof *m);
    int rv;

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    rv = hc_model_parse(pools_json, strlen(pools_json), "pools", m);
    if (rv)
        printf("\n    %s", hc_err_msg());
    CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
    if (!compare_net(m, 6, 0)) {
        free(m);
        HP_SKIP("no CUDA device");
    }
    compare_net(m, 5, 1);
    free(m);
}

static void test_graph_models(void)
{
    static const char *const files[] = {
        "tests/unit/keras/resnet_block.json",
        "tests/unit/keras/dense_block.json",
        "tests/unit/keras/mobile_block.json",
        "tests/unit/keras/xception_block.json",
        "tests/unit/keras/convnext_block.json",
        "tests/unit/keras/two_inputs.json",
        "tests/unit/keras/resnet_bn.json", NULL};
    struct hc_model *m = calloc(1, sizeof *m);
    int gpu = 1;

    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        int rv = files[i] ? hc_model_load(files[i], m)
                          : hc_model_parse(merges_json, strlen(merges_json),
                                           "merges", m);

        if (rv)
            printf("\n    %s", hc_err_msg());
        CU_ASSERT_EQUAL_FATAL(rv, HC_OK);
        gpu = compare_net(m, 6, 0);
        if (gpu)
            compare_net(m, 5, 1);
    }
    free(m);
    if (!gpu)
        HP_SKIP("no CUDA device");
}

void hp_test_register(void)
{
    static const struct {
        const char *name;
        CU_TestFunc fn;
    } t[] = {
        {"host memory: pinned and pageable copies", test_host_memory},
        {"sgemm (transposes, ld, alpha, beta, k = 0)", test_blas},
        {"fill, scale, axpy, copy, reduce", test_blas1_reduce},
        {"im2col, col2im, max and average pool forward/backward",
         test_conv_pool},
        {"depthwise convolution forward, filter and input gradients",
         test_dwconv},
        {"layer normalisation forward and backward", test_layernorm},
        {"batch norm statistics, forward, gradients", test_batchnorm},
        {"embedding gather and scatter-add", test_embed},
        {"embedding, GlobalAveragePooling1D model gpu vs cpu, and split",
         test_embed_model},
        {"activations, bias gradients", test_activations},
        {"ReLU layer (max_value, negative_slope, threshold)",
         test_relu_layer},
        {"softmax + CE, mse, the other losses", test_losses},
        {"dropout mask bit for bit", test_dropout},
        {"device errors and messages", test_errors},
        {"reference model (fashion_cnn) gpu vs cpu", test_reference_model},
        {"conv/pool/dropout/mse model gpu vs cpu", test_mixed_model},
        {"graphs (add, concatenate, merges, multiply, depthwise, separable, "
         "layer norm, two inputs, batch norm) gpu vs cpu, and split",
         test_graph_models},
        {"relu6 … hard_sigmoid model gpu vs cpu", test_acts_model},
        {"categorical CE model gpu vs cpu", test_cce_model},
        {"binary CE from logits model gpu vs cpu", test_bce_model},
        {"pools, zero padding, reshapes gpu vs cpu, and split",
         test_pool_models},
    };
    CU_pSuite s = CU_add_suite("backend_cuda", NULL, NULL);
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++)
        CU_add_test(s, t[i].name, t[i].fn);
}
