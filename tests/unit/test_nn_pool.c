/*
 * test_nn_pool.c — pooling and the layers that only move values: the
 * max-pool op (values, argmax, backward) and the average-pool op against
 * naive loops, and networks with overlapping, "same" and row-dropping
 * max and average pools, global pools, zero padding and reshapes against
 * the double reference and finite differences.
 *
 * The reference and the shared checks are in nn_ref.c and nn_check.c;
 * each comparison prints its largest difference.
 */
#include "cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "err.h"
#include "nn_check.h"
#include "nn_ref.h"
#include "worker/backend.h"
#include "worker/nn.h"

static void test_maxpool(void)
{
    static const struct {
        int B, H, W, C, p, s, same;
    } t[] = {
        {2, 4, 4, 3, 2, 2, 0}, {2, 5, 5, 2, 2, 2, 0}, {1, 7, 6, 2, 3, 2, 0},
        {2, 5, 5, 2, 2, 2, 1}, {1, 6, 5, 3, 3, 1, 1}, {3, 26, 26, 4, 2, 2, 0},
        {1, 1, 1, 2, 2, 2, 1},
    };
    struct wk_backend *be = nr_cpu();
    uint64_t s = 7;
    size_t ti;

    for (ti = 0; ti < sizeof t / sizeof t[0]; ti++) {
        struct wk_geom g;
        size_t nx, ny, i;
        float *x, *y, *dy, *dx;
        int32_t *idx;
        double *wy, *widx, *wdx, *gi;
        int b, oh, ow, c, a;
        char what[64];

        CU_ASSERT_FATAL(wk_geom_init(&g, t[ti].B, t[ti].H, t[ti].W, t[ti].C,
                                     t[ti].p, t[ti].p, t[ti].s, t[ti].s,
                                     t[ti].same) == HC_OK);
        nx = (size_t)g.B * g.H * g.W * g.C;
        ny = (size_t)g.B * g.OH * g.OW * g.C;
        x = nr_falloc(nx);
        dx = nr_falloc(nx);
        y = nr_falloc(ny);
        dy = nr_falloc(ny);
        idx = calloc(ny, sizeof *idx);
        CU_ASSERT_FATAL(idx != NULL);
        wy = nr_dalloc(ny);
        widx = nr_dalloc(ny);
        gi = nr_dalloc(ny);
        wdx = nr_dalloc(nx);
        nr_fill_rand(x, nx, &s, -1, 1);
        nr_fill_rand(dy, ny, &s, -1, 1);
        for (i = 0; i < nx; i++)
            dx[i] = NAN;
        for (b = 0, i = 0; b < g.B; b++)
            for (oh = 0; oh < g.OH; oh++)
                for (ow = 0; ow < g.OW; ow++)
                    for (c = 0; c < g.C; c++, i++) {
                        long best = -1;

                        for (a = 0; a < g.kh * g.kw; a++) {
                            int ih = oh * g.sh - g.pt + a / g.kw;
                            int iw = ow * g.sw - g.pl + a % g.kw;
                            long xi = (((long)b * g.H + ih) * g.W + iw) * g.C + c;

                            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W)
                                continue;
                            if (best < 0 || x[xi] > x[best])
                                best = xi;
                        }
                        wy[i] = x[best];
                        widx[i] = (double)best;
                        wdx[best] += dy[i];
                    }
        wk_be_maxpool_forward(be, &g, x, y, idx);
        wk_be_maxpool_backward(be, &g, dy, idx, dx);
        for (i = 0; i < ny; i++)
            gi[i] = idx[i];
        snprintf(what, sizeof what, "maxpool_forward case %zu", ti);
        CU_ASSERT(nr_cmp_report(what, y, NULL, wy, ny, 0, 0));
        snprintf(what, sizeof what, "maxpool argmax case %zu", ti);
        CU_ASSERT(nr_cmp_report(what, NULL, gi, widx, ny, 0, 0));
        snprintf(what, sizeof what, "maxpool_backward case %zu", ti);
        CU_ASSERT(nr_cmp_report(what, dx, NULL, wdx, nx, 1e-7, 1e-6));
        free(x);
        free(dx);
        free(y);
        free(dy);
        free(idx);
        free(wy);
        free(widx);
        free(gi);
        free(wdx);
    }
    wk_backend_free(be);
}

/* Ties: the max-pool's gradient goes to the first maximum of the window,
 * row by row, and to no other cell (GlobalMaxPooling2D's rule too: one
 * window of the whole image). */
static void test_maxpool_ties(void)
{
    /* (1, 3, 3, 2): channel 0 all 1; channel 1 has its maximum 2 at the
     * cells 4 and 8 (row-major). */
    static const float x[18] = {1, 0, 1, 0, 1, 0, 1, 0, 1, 2,
                                1, 0, 1, 0, 1, 0, 1, 2};
    const float dy[2] = {0.5f, -3.0f};
    struct wk_backend *be = nr_cpu();
    struct wk_geom g;
    float y[2], dx[18];
    int32_t idx[2];

    CU_ASSERT_FATAL(wk_geom_init(&g, 1, 3, 3, 2, 3, 3, 1, 1, 0) == HC_OK);
    CU_ASSERT_FATAL(g.OH == 1 && g.OW == 1);
    wk_be_maxpool_forward(be, &g, x, y, idx);
    wk_be_maxpool_backward(be, &g, dy, idx, dx);
    CU_ASSERT(y[0] == 1.0f && y[1] == 2.0f);
    CU_ASSERT(idx[0] == 0 && idx[1] == 4 * 2 + 1);
    for (int i = 0; i < 18; i++)
        CU_ASSERT_EQUAL(dx[i], i == 0 ? 0.5f : i == 9 ? -3.0f : 0.0f);
    wk_backend_free(be);
}

/* The average pool against naive loops: "same" windows count only their
 * cells inside the image (Keras), the extra pixel bottom/right. */
static void test_avgpool(void)
{
    static const struct {
        int B, H, W, C, p, s, same;
    } t[] = {
        {2, 4, 4, 3, 2, 2, 0}, {2, 5, 5, 2, 2, 2, 1}, {1, 6, 5, 3, 3, 1, 1},
        {1, 7, 6, 2, 3, 2, 1}, {2, 5, 7, 4, 5, 1, 0}, {1, 1, 1, 2, 2, 2, 1},
    };
    struct wk_backend *be = nr_cpu();
    uint64_t s = 11;

    for (size_t ti = 0; ti < sizeof t / sizeof t[0]; ti++) {
        struct wk_geom g;
        size_t nx, ny, i = 0;
        float *x, *y, *dy, *dx;
        double *wy, *wdx;
        char what[64];

        CU_ASSERT_FATAL(wk_geom_init(&g, t[ti].B, t[ti].H, t[ti].W, t[ti].C,
                                     t[ti].p, t[ti].p, t[ti].s, t[ti].s,
                                     t[ti].same) == HC_OK);
        nx = (size_t)g.B * g.H * g.W * g.C;
        ny = (size_t)g.B * g.OH * g.OW * g.C;
        x = nr_falloc(nx);
        dx = nr_falloc(nx);
        y = nr_falloc(ny);
        dy = nr_falloc(ny);
        wy = nr_dalloc(ny);
        wdx = nr_dalloc(nx);
        nr_fill_rand(x, nx, &s, -1, 1);
        nr_fill_rand(dy, ny, &s, -1, 1);
        for (size_t k = 0; k < nx; k++)
            dx[k] = NAN;
        for (int b = 0; b < g.B; b++)
            for (int oh = 0; oh < g.OH; oh++)
                for (int ow = 0; ow < g.OW; ow++)
                    for (int c = 0; c < g.C; c++, i++) {
                        long in[64];
                        int n = 0;

                        for (int a = 0; a < g.kh * g.kw; a++) {
                            int ih = oh * g.sh - g.pt + a / g.kw;
                            int iw = ow * g.sw - g.pl + a % g.kw;

                            if (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W)
                                in[n++] = (((long)b * g.H + ih) * g.W + iw) *
                                          g.C + c;
                        }
                        for (int k = 0; k < n; k++) {
                            wy[i] += x[in[k]] / (double)n;
                            wdx[in[k]] += dy[i] / (double)n;
                        }
                    }
        wk_be_avgpool_forward(be, &g, x, y);
        wk_be_avgpool_backward(be, &g, dy, dx);
        snprintf(what, sizeof what, "avgpool_forward case %zu", ti);
        CU_ASSERT(nr_cmp_report(what, y, NULL, wy, ny, 1e-7, 1e-6));
        snprintf(what, sizeof what, "avgpool_backward case %zu", ti);
        CU_ASSERT(nr_cmp_report(what, dx, NULL, wdx, nx, 1e-7, 1e-6));
        free(x);
        free(dx);
        free(y);
        free(dy);
        free(wy);
        free(wdx);
    }
    wk_backend_free(be);
}

/* ---- networks ---- */

static void test_grad_pools(void)
{
    nc_check_model(nc_model_pools, 3, 0, 0, 2);
}

static void test_grad_pool_leftover(void)
{
    nc_check_model(nc_model_pool_leftover, 2, 0, 0, 2);
}

static void test_grad_avgpools(void)
{
    nc_check_model(nc_model_avgpools, 3, 0, 0, 2);
}

static void test_grad_global_pools(void)
{
    nc_check_model(nc_model_global_pools, 3, 0, 0, 2);
}

static void test_grad_global_max(void)
{
    nc_check_model(nc_model_global_max, 3, 0, 0, 2);
}

static void test_grad_reshapes(void)
{
    nc_check_model(nc_model_reshapes, 3, 0, 0, 2);
}

void hp_test_register(void)
{
    static const struct nc_test ops[] = {
        {"maxpool forward/backward", test_maxpool},
        {"maxpool ties: the gradient to the first maximum", test_maxpool_ties},
        {"avgpool forward/backward, padding not counted", test_avgpool},
    }, nets[] = {
        {"grad overlapping and same pools", test_grad_pools},
        {"grad pool with leftover rows", test_grad_pool_leftover},
        {"grad average pools, same and valid", test_grad_avgpools},
        {"grad zero padding, global average pool", test_grad_global_pools},
        {"grad global max pool after a fused conv", test_grad_global_max},
        {"grad reshapes (N) to (H, W, C) and back", test_grad_reshapes},
    };

    nc_add_suite("backend_cpu pool", ops, sizeof ops / sizeof ops[0]);
    nc_add_suite("nn pool", nets, sizeof nets / sizeof nets[0]);
}
