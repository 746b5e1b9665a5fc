/*
 * test_nn_dense.c — what dense layers and dropout are made of:
 * sgemm with every transpose, the BLAS-1 and memory ops, the dropout
 * mask (its documented formula, rate and seeds), and networks of dense
 * and dropout layers: gradients against the double reference, masks
 * reproducible from the seed and new at every step.
 *
 * The reference and the shared checks are in nn_ref.c and nn_check.c;
 * each comparison prints its largest difference.
 */
#include "cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "nn_check.h"
#include "nn_ref.h"
#include "worker/backend.h"
#include "worker/nn.h"

static void test_sgemm(void)
{
    struct wk_backend *be = nr_cpu();
    const int m = 7, n = 5, k = 6, pad = 3;
    uint64_t s = 1;
    float *a = nr_falloc((size_t)k * (m + pad) + m * (k + pad));
    float *b = nr_falloc((size_t)k * (n + pad) + n * (k + pad));
    float *c = nr_falloc((size_t)m * (n + pad));
    double *want = nr_dalloc((size_t)m * n), *c0 = nr_dalloc((size_t)m * n);
    float got[7 * 5];
    int ta, tb, bi, i, j, p;

    nr_fill_rand(a, (size_t)k * (m + pad) + m * (k + pad), &s, -1, 1);
    nr_fill_rand(b, (size_t)k * (n + pad) + n * (k + pad), &s, -1, 1);
    for (ta = 0; ta < 2; ta++)
        for (tb = 0; tb < 2; tb++)
            for (bi = 0; bi < 2; bi++) {
                float beta = bi ? 1.3f : 0.0f;
                int lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad;
                char what[64];

                for (i = 0; i < m; i++)
                    for (j = 0; j < n + pad; j++) {
                        c[i * (n + pad) + j] = bi ? (float)nr_urand(&s, -1, 1)
                                                  : NAN;
                        if (j < n)
                            c0[i * n + j] = c[i * (n + pad) + j];
                    }
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++) {
                        double acc = 0;

                        for (p = 0; p < k; p++)
                            acc += (double)(ta ? a[p * lda + i]
                                               : a[i * lda + p]) *
                                   (tb ? b[j * ldb + p] : b[p * ldb + j]);
                        want[i * n + j] = 0.7 * acc + (bi ? beta * c0[i * n + j]
                                                          : 0.0);
                    }
                wk_be_sgemm(be, ta, tb, m, n, k, 0.7f, a, lda, b, ldb, beta, c,
                            n + pad);
                for (i = 0; i < m; i++)
                    for (j = 0; j < n; j++)
                        got[i * n + j] = c[i * (n + pad) + j];
                snprintf(what, sizeof what, "sgemm ta=%d tb=%d beta=%g", ta,
                         tb, (double)beta);
                CU_ASSERT(nr_cmp_report(what, got, NULL, want, (size_t)m * n,
                                        1e-6, 1e-5));
            }
    /* k = 0: C = beta·C */
    c[0] = 2.0f;
    wk_be_sgemm(be, 0, 0, 1, 1, 0, 1.0f, a, 1, b, 1, 0.5f, c, 1);
    CU_ASSERT_EQUAL(c[0], 1.0f);
    free(a);
    free(b);
    free(c);
    free(want);
    free(c0);
    wk_backend_free(be);
}

static void test_blas1_and_memory(void)
{
    struct wk_backend *be = nr_cpu();
    float *d = NULL, h[10], back[10];
    int i;

    CU_ASSERT_EQUAL_FATAL(wk_be_alloc(be, sizeof h, (void **)&d), HC_OK);
    CU_ASSERT_EQUAL((uintptr_t)d % 64, 0);
    for (i = 0; i < 10; i++)
        h[i] = (float)i;
    CU_ASSERT_EQUAL(wk_be_upload(be, d, h, sizeof h), HC_OK);
    wk_be_scale(be, d, 10, 2.0f);
    wk_be_axpy(be, 10, 0.5f, h, d);          /* 2i + i/2 */
    CU_ASSERT_EQUAL(wk_be_download(be, back, d, sizeof back), HC_OK);
    for (i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(back[i], 2.5f * (float)i);
    wk_be_fill(be, d, 10, 3.0f);
    CU_ASSERT_EQUAL(wk_be_copy(be, back, d, sizeof back), HC_OK);
    for (i = 0; i < 10; i++)
        CU_ASSERT_EQUAL(back[i], 3.0f);
    wk_be_fill(be, d, 10, 0.0f);
    CU_ASSERT_EQUAL(d[9], 0.0f);
    wk_be_free(be, d);
    wk_be_free(be, NULL);
#ifndef __SANITIZE_ADDRESS__   /* ASan aborts on absurd sizes */
    d = (float *)1;
    CU_ASSERT_EQUAL(wk_be_alloc(be, (size_t)1 << 62, (void **)&d), HC_ERR_NOMEM);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "cpu: cannot allocate"));
#endif
    wk_backend_free(be);
}

static void test_dropout_op(void)
{
    struct wk_backend *be = nr_cpu();
    enum { N = 20000 };
    float *x = nr_falloc(N), *y = nr_falloc(N), *y2 = nr_falloc(N);
    float *dx = nr_falloc(N);
    const float rate = 0.3f, keep = 1.0f / (1.0f - rate);
    uint64_t s = 8;
    size_t i, dropped = 0, differ = 0;
    int mismatch = 0;

    nr_fill_rand(x, N, &s, 0.5, 1.5);   /* never 0, so zeros mean dropped */
    wk_be_dropout_forward(be, x, y, N, rate, 1234);
    for (i = 0; i < N; i++) {
        /* the documented formula, recomputed here */
        uint64_t z = 1234 + (i + 1) * 0x9E3779B97F4A7C15ull;
        int kept;

        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        kept = (z >> 40) >= (uint64_t)(rate * 16777216.0f);
        if (kept != (y[i] != 0.0f) || (kept && y[i] != x[i] * keep))
            mismatch++;
        dropped += y[i] == 0.0f;
    }
    CU_ASSERT_EQUAL(mismatch, 0);
    printf("\n    dropout rate 0.3: dropped %zu of %d", dropped, N);
    /* 3 standard deviations of a binomial(20000, 0.3) are about 195 */
    CU_ASSERT(dropped > 6000 - 200 && dropped < 6000 + 200);
    /* backward uses the same mask and scale, in place too */
    wk_be_dropout_backward(be, x, dx, N, rate, 1234);
    CU_ASSERT(memcmp(dx, y, N * sizeof *y) == 0);
    memcpy(dx, x, N * sizeof *x);
    wk_be_dropout_backward(be, dx, dx, N, rate, 1234);
    CU_ASSERT(memcmp(dx, y, N * sizeof *y) == 0);
    /* same seed same mask; another seed another mask */
    wk_be_dropout_forward(be, x, y2, N, rate, 1234);
    CU_ASSERT(memcmp(y2, y, N * sizeof *y) == 0);
    wk_be_dropout_forward(be, x, y2, N, rate, 1235);
    for (i = 0; i < N; i++)
        differ += (y2[i] == 0.0f) != (y[i] == 0.0f);
    CU_ASSERT(differ > 1000);
    /* rate 0: identity */
    wk_be_dropout_forward(be, x, y2, N, 0.0f, 99);
    CU_ASSERT(memcmp(y2, x, N * sizeof *x) == 0);
    free(x);
    free(y);
    free(y2);
    free(dx);
    wk_backend_free(be);
}

/* ---- networks ---- */

static void test_grad_mlp_dropout(void)
{
    nc_check_model(nc_model_mlp_dropout, 4, 0, 0, 2);
}

/* Dropout masks: reproducible from the seed, new at every training step. */
static void test_dropout_seeds(void)
{
    struct nc_fixture f;
    float *g1, *g2;
    uint64_t s1, s2;
    size_t n;

    nc_open(&f, nc_model_mlp_dropout, 8, 8, 51);
    n = f.m.n_params;
    g1 = nr_falloc(n);
    g2 = nr_falloc(n);
    wk_net_set_seed(f.net, 5);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 8,
                                      g1, NULL, NULL), HC_OK);
    s1 = wk_net_dropout_seed(f.net, 1);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 8,
                                      g2, NULL, NULL), HC_OK);
    s2 = wk_net_dropout_seed(f.net, 1);
    CU_ASSERT(s1 != s2);
    CU_ASSERT(memcmp(g1, g2, n * sizeof *g1) != 0);
    wk_net_set_seed(f.net, 5);
    CU_ASSERT_EQUAL_FATAL(wk_net_step(f.net, f.params, f.x, f.labels, NULL, 8,
                                      g2, NULL, NULL), HC_OK);
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 1), s1);
    CU_ASSERT(memcmp(g1, g2, n * sizeof *g1) == 0);
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 0), 0);     /* not dropout */
    CU_ASSERT_EQUAL(wk_net_dropout_seed(f.net, 99), 0);
    free(g1);
    free(g2);
    nc_close(&f);
}

void hp_test_register(void)
{
    static const struct nc_test ops[] = {
        {"sgemm (transposes, alpha, beta, ld)", test_sgemm},
        {"alloc, copies, fill, scale, axpy", test_blas1_and_memory},
        {"dropout mask, scale, seeds", test_dropout_op},
    }, nets[] = {
        {"grad mlp with dropout", test_grad_mlp_dropout},
        {"dropout seeds per step", test_dropout_seeds},
    };

    nc_add_suite("backend_cpu dense", ops, sizeof ops / sizeof ops[0]);
    nc_add_suite("nn dense", nets, sizeof nets / sizeof nets[0]);
}
