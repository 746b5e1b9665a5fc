/*
 * test_nn_conv.c — convolutions: the Keras geometry (same/valid,
 * strides), im2col/col2im against naive loops and as adjoints, and
 * networks with conv2d, depthwise_conv2d, separable_conv2d and
 * layer_normalization layers against the double reference.
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

static void test_geom(void)
{
    static const struct {
        int H, k, s, same, OH, pt;
    } t[] = {
        {28, 3, 1, 0, 26, 0}, {28, 3, 1, 1, 28, 1}, {7, 3, 2, 1, 4, 1},
        {5, 2, 2, 1, 3, 0},   {6, 2, 2, 1, 3, 0},   {5, 2, 2, 0, 2, 0},
        {8, 4, 3, 1, 3, 1},   {1, 3, 1, 1, 1, 1},   {7, 7, 1, 0, 1, 0},
    };
    struct wk_geom g;
    size_t i;

    for (i = 0; i < sizeof t / sizeof t[0]; i++) {
        CU_ASSERT_EQUAL_FATAL(wk_geom_init(&g, 2, t[i].H, t[i].H + 1, 3, t[i].k,
                                           t[i].k, t[i].s, t[i].s, t[i].same),
                              HC_OK);
        CU_ASSERT_EQUAL(g.OH, t[i].OH);
        CU_ASSERT_EQUAL(g.pt, t[i].pt);
        CU_ASSERT_EQUAL(g.OH, nr_out_dim(t[i].H, t[i].k, t[i].s, t[i].same));
        CU_ASSERT_EQUAL(g.OW, nr_out_dim(t[i].H + 1, t[i].k, t[i].s,
                                         t[i].same));
        CU_ASSERT_EQUAL(g.pl, nr_pad_before(t[i].H + 1, t[i].k, t[i].s,
                                            t[i].same));
    }
    CU_ASSERT_EQUAL(wk_geom_init(&g, 1, 2, 5, 1, 3, 3, 1, 1, 0), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_geom_init(&g, 1, 5, 5, 1, 3, 3, 0, 1, 0), HC_ERR_INVAL);
    CU_ASSERT_EQUAL(wk_geom_init(&g, 0, 5, 5, 1, 3, 3, 1, 1, 0), HC_ERR_INVAL);
}

static const struct {
    int B, H, W, C, kh, kw, sh, sw, same;
} geoms[] = {
    {2, 5, 6, 2, 3, 3, 1, 1, 0}, {2, 5, 6, 2, 3, 3, 1, 1, 1},
    {1, 7, 6, 3, 3, 2, 2, 2, 1}, {2, 7, 7, 1, 3, 3, 2, 2, 0},
    {1, 4, 4, 3, 1, 1, 1, 1, 0}, {3, 6, 5, 2, 2, 3, 2, 1, 1},
    {1, 3, 3, 2, 5, 5, 1, 1, 1}, {2, 8, 8, 1, 4, 4, 3, 3, 1},
};

static void test_im2col_col2im(void)
{
    struct wk_backend *be = nr_cpu();
    size_t gi;
    uint64_t s = 2;

    for (gi = 0; gi < sizeof geoms / sizeof geoms[0]; gi++) {
        struct wk_geom g;
        size_t nx, nc, i;
        float *x, *cols, *dc, *dx;
        double *wc, *wx, dot1 = 0, dot2 = 0;
        int b, oh, ow, a, c;
        char what[64];

        CU_ASSERT_FATAL(wk_geom_init(&g, geoms[gi].B, geoms[gi].H, geoms[gi].W,
                                     geoms[gi].C, geoms[gi].kh, geoms[gi].kw,
                                     geoms[gi].sh, geoms[gi].sw,
                                     geoms[gi].same) == HC_OK);
        nx = (size_t)g.B * g.H * g.W * g.C;
        nc = (size_t)g.B * g.OH * g.OW * g.kh * g.kw * g.C;
        x = nr_falloc(nx);
        cols = nr_falloc(nc);
        dc = nr_falloc(nc);
        dx = nr_falloc(nx);
        wc = nr_dalloc(nc);
        wx = nr_dalloc(nx);
        nr_fill_rand(x, nx, &s, -1, 1);
        nr_fill_rand(dc, nc, &s, -1, 1);
        for (i = 0; i < nx; i++)
            dx[i] = NAN;    /* col2im must overwrite */
        i = 0;
        for (b = 0; b < g.B; b++)
            for (oh = 0; oh < g.OH; oh++)
                for (ow = 0; ow < g.OW; ow++)
                    for (a = 0; a < g.kh * g.kw; a++)
                        for (c = 0; c < g.C; c++, i++) {
                            int ih = oh * g.sh - g.pt + a / g.kw;
                            int iw = ow * g.sw - g.pl + a % g.kw;
                            size_t xi = (((size_t)b * g.H + ih) * g.W + iw) * g.C + c;

                            if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W)
                                continue;
                            wc[i] = x[xi];
                            wx[xi] += dc[i];
                        }
        wk_be_im2col(be, &g, x, cols);
        wk_be_col2im(be, &g, dc, dx, 0);
        snprintf(what, sizeof what, "im2col geometry %zu", gi);
        CU_ASSERT(nr_cmp_report(what, cols, NULL, wc, nc, 0, 0));
        snprintf(what, sizeof what, "col2im geometry %zu", gi);
        CU_ASSERT(nr_cmp_report(what, dx, NULL, wx, nx, 1e-6, 1e-6));
        /* adjoint: <im2col(x), dc> = <x, col2im(dc)> */
        for (i = 0; i < nc; i++)
            dot1 += (double)cols[i] * dc[i];
        for (i = 0; i < nx; i++)
            dot2 += (double)x[i] * dx[i];
        CU_ASSERT(fabs(dot1 - dot2) <= 1e-5 * (1 + fabs(dot1)));
        /* add 1: onto what dx holds (x here), nothing overwritten */
        for (i = 0; i < nx; i++)
            wx[i] += x[i];
        wk_be_col2im(be, &g, dc, x, 1);
        snprintf(what, sizeof what, "col2im adding, geometry %zu", gi);
        CU_ASSERT(nr_cmp_report(what, x, NULL, wx, nx, 1e-6, 1e-6));
        free(x);
        free(cols);
        free(dc);
        free(dx);
        free(wc);
        free(wx);
    }
    wk_backend_free(be);
}

/* ---- networks ---- */

static void test_grad_conv_valid(void)
{
    nc_check_model(nc_model_conv_valid, 3, 0, 0, 2);
}

static void test_grad_conv_same_s2(void)
{
    nc_check_model(nc_model_conv_same_s2, 3, 0, 0, 2);
}

static void test_grad_two_convs(void)
{
    nc_check_model(nc_model_two_convs, 2, 0, 0, 2);
}

static void test_grad_conv_1x1(void)
{
    nc_check_model(nc_model_conv_1x1, 2, 0, 0, 2);
}

static void test_grad_conv_softmax_channels(void)
{
    nc_check_model(nc_model_conv_softmax_channels, 2, 0, 0, 2);
}

static void test_grad_dwconv(void)
{
    nc_check_model(nc_model_dwconv, 3, 0, 0, 2);
}

static void test_grad_mobile_block(void)
{
    nc_check_model(nc_model_graph_mobile, 2, 0, 0, 2);
}

static void test_grad_sepconv(void)
{
    nc_check_model(nc_model_sepconv, 3, 0, 0, 2);
}

static void test_grad_xception_block(void)
{
    nc_check_model(nc_model_graph_xception, 2, 0, 0, 2);
}

static void test_grad_layernorm(void)
{
    nc_check_model(nc_model_layernorm, 3, 0, 0, 2);
}

static void test_grad_batchnorm(void)
{
    nc_check_model(nc_model_batchnorm, 4, 0, 0, 2);
}

void hp_test_register(void)
{
    static const struct nc_test ops[] = {
        {"geometry (Keras same/valid)", test_geom},
        {"im2col / col2im vs naive and adjoint", test_im2col_col2im},
    }, nets[] = {
        {"grad conv valid s1 relu + dense softmax", test_grad_conv_valid},
        {"grad conv same s2 tanh + sigmoid mse", test_grad_conv_same_s2},
        {"grad two convs (col2im) + pool", test_grad_two_convs},
        {"grad 1x1 convs, no bias", test_grad_conv_1x1},
        {"grad conv softmax channels + dropouts", test_grad_conv_softmax_channels},
        {"grad depthwise valid dm 2, same s2 no bias", test_grad_dwconv},
        {"grad MobileNetV2 block: depthwise, ReLU(6), add", test_grad_mobile_block},
        {"grad separable valid dm 2, same s2 no bias", test_grad_sepconv},
        {"grad Xception block: separable gelu, layer norm, add",
         test_grad_xception_block},
        {"grad layer norm: flat gamma only, channels beta only",
         test_grad_layernorm},
        {"grad batch norm (image, vector; batch moments pushed)",
         test_grad_batchnorm},
    };

    nc_add_suite("backend_cpu conv", ops, sizeof ops / sizeof ops[0]);
    nc_add_suite("nn conv", nets, sizeof nets / sizeof nets[0]);
}
