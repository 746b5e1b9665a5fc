/*
 * test_nn_loss.c — activations and losses: every activation
 * forward and backward (with the fused bias gradient), softmax with
 * sparse categorical cross-entropy, mean squared error, and networks of
 * activation layers and both losses against the double reference.
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

static void test_activations(void)
{
    struct wk_backend *be = nr_cpu();
    enum { R = 9, N = 7 };
    float x[R * N], bias[N], y[R * N], dy[R * N], dx[R * N], db[N];
    float zf[R * N];            /* x + bias in float: what gelu and swish
                                 * differentiate from */
    const float *from;
    float fused[R * N], db2[N];
    double z[R * N], wy[R * N], wdz[R * N], wdb[N], dyd[R * N];
    uint64_t s = 3;
    int ai, r, j, wb;

    for (ai = 0; ai < HC_ACT_COUNT; ai++) {
        enum hc_act a = (enum hc_act)ai;

        for (wb = 0; wb < 2; wb++) {
            char what[64];

            nr_fill_rand(x, R * N, &s, -3, 3);
            nr_fill_rand(bias, N, &s, -1, 1);
            nr_fill_rand(dy, R * N, &s, -1, 1);
            x[0] = 0.0f;
            for (r = 0; r < R; r++)
                for (j = 0; j < N; j++) {
                    zf[r * N + j] = x[r * N + j] + (wb ? bias[j] : 0.0f);
                    z[r * N + j] = zf[r * N + j];
                }
            from = wk_act_reads_input(a) ? zf : y;
            nr_ref_act(a, z, wy, R, N);
            wk_be_act_forward(be, x, wb ? bias : NULL, y, R, N, a);
            snprintf(what, sizeof what, "act_forward %s bias %d", hc_act_name(a),
                     wb);
            CU_ASSERT(nr_cmp_report(what, y, NULL, wy, R * N, 1e-6, 1e-5));
            /* backward from the float outputs, against double */
            for (r = 0; r < R * N; r++)
                dyd[r] = dy[r];
            nr_ref_dact(a, z, wy, dyd, wdz, R, N);
            wk_be_act_backward(be, from, dy, dx, R, N, a);
            snprintf(what, sizeof what, "act_backward %s bias %d", hc_act_name(a),
                     wb);
            CU_ASSERT(nr_cmp_report(what, dx, NULL, wdz, R * N, 1e-6, 1e-4));
            /* fused act + bias gradient: same as the two ops */
            memcpy(fused, dy, sizeof fused);
            wk_be_act_bias_backward(be, from, fused, R, N, a, db);
            for (j = 0; j < N; j++) {
                wdb[j] = 0;
                for (r = 0; r < R; r++)
                    wdb[j] += wdz[r * N + j];
            }
            snprintf(what, sizeof what, "act_bias_backward dy %d", (int)a);
            CU_ASSERT(nr_cmp_report(what, fused, NULL, wdz, R * N, 1e-6, 1e-4));
            snprintf(what, sizeof what, "act_bias_backward db %d", (int)a);
            CU_ASSERT(nr_cmp_report(what, db, NULL, wdb, N, 1e-6, 1e-4));
            wk_be_bias_grad(be, dx, R, N, db2);
            CU_ASSERT(nr_cmp_report("bias_grad", db2, NULL, wdb, N, 1e-6,
                                    1e-4));
            /* in place, db NULL */
            memcpy(fused, dy, sizeof fused);
            wk_be_act_bias_backward(be, from, fused, R, N, a, NULL);
            CU_ASSERT(nr_cmp_report("act_bias_backward db=NULL", fused, NULL,
                                    wdz, R * N, 1e-6, 1e-4));
            wk_be_act_forward(be, x, wb ? bias : NULL, x, R, N, a);
            CU_ASSERT(memcmp(x, y, sizeof x) == 0);     /* in place */
        }
    }
    wk_backend_free(be);
}

static void test_xent(void)
{
    struct wk_backend *be = nr_cpu();
    enum { R = 6, N = 5 };
    float z[R * N], p[R * N], loss[R], hit[R], dz[R * N];
    double wp[R * N], wl[R], wh[R], wdz[R * N], zd[R * N];
    int labels[R] = {0, 4, 2, 2, 1, 3}, r, j;
    uint64_t s = 5;

    nr_fill_rand(z, R * N, &s, -4, 4);
    z[5 * N + 3] = 900.0f;     /* huge logits: still finite */
    z[5 * N + 1] = -900.0f;
    z[4 * N + 0] = 700.0f;     /* the label's logit far below the max */
    z[3 * N + 2] = z[3 * N + 4] = 3.5f;  /* tie: first maximum wins */
    z[3 * N + 0] = z[3 * N + 1] = z[3 * N + 3] = 0.0f;
    for (r = 0; r < R * N; r++)
        zd[r] = z[r];
    nr_ref_act(HC_ACT_SOFTMAX, zd, wp, R, N);
    for (r = 0; r < R; r++) {
        double mx = zd[r * N], se = 0;
        int arg = 0;

        for (j = 1; j < N; j++)
            if (zd[r * N + j] > mx) {
                mx = zd[r * N + j];
                arg = j;
            }
        for (j = 0; j < N; j++)
            se += exp(zd[r * N + j] - mx);
        wl[r] = log(se) + mx - zd[r * N + labels[r]];
        wh[r] = arg == labels[r];
        for (j = 0; j < N; j++)
            wdz[r * N + j] = 0.25 * (wp[r * N + j] - (j == labels[r]));
    }
    wk_be_xent_forward(be, z, labels, R, N, p, loss, hit);
    CU_ASSERT(nr_cmp_report("xent_forward p", p, NULL, wp, R * N, 1e-7, 1e-5));
    CU_ASSERT(nr_cmp_report("xent_forward loss", loss, NULL, wl, R, 1e-6,
                            1e-5));
    CU_ASSERT(nr_cmp_report("xent_forward hit", hit, NULL, wh, R, 0, 0));
    CU_ASSERT(isfinite(loss[4]) && loss[4] > 690.0f);
    wk_be_xent_backward(be, p, labels, R, N, 0.25f, dz);
    CU_ASSERT(nr_cmp_report("xent_backward", dz, NULL, wdz, R * N, 1e-7, 1e-5));
    wk_be_xent_backward(be, p, labels, R, N, 0.25f, p);    /* in place */
    CU_ASSERT(memcmp(p, dz, sizeof dz) == 0);
    /* no labels: probabilities only, loss and hit untouched */
    loss[0] = -1.0f;
    wk_be_xent_forward(be, z, NULL, R, N, p, NULL, NULL);
    CU_ASSERT(nr_cmp_report("xent_forward p (no labels)", p, NULL, wp, R * N,
                            1e-7, 1e-5));
    CU_ASSERT_EQUAL(loss[0], -1.0f);
    wk_backend_free(be);
}

static void test_mse(void)
{
    struct wk_backend *be = nr_cpu();
    enum { R = 5, N = 3 };
    float y[R * N], t[R * N], loss[R], hit[R], dy[R * N];
    float y1[4] = {0.2f, 0.7f, 0.6f, 0.4f}, t1[4] = {0.0f, 1.0f, 0.0f, 0.0f};
    double wl[R], wh[R], wd[R * N], wl1[4], wh1[4] = {1, 1, 0, 1};
    uint64_t s = 6;
    int r, j;

    nr_fill_rand(y, R * N, &s, -1, 1);
    nr_fill_rand(t, R * N, &s, -1, 1);
    for (r = 0; r < R; r++) {
        int ay = 0, at = 0;

        wl[r] = 0;
        for (j = 0; j < N; j++) {
            double d = (double)y[r * N + j] - t[r * N + j];

            wl[r] += d * d / N;
            wd[r * N + j] = 0.3 * d;
            if (y[r * N + j] > y[r * N + ay])
                ay = j;
            if (t[r * N + j] > t[r * N + at])
                at = j;
        }
        wh[r] = ay == at;
    }
    wk_be_mse_forward(be, y, t, R, N, loss, hit);
    CU_ASSERT(nr_cmp_report("mse_forward loss", loss, NULL, wl, R, 1e-7, 1e-6));
    CU_ASSERT(nr_cmp_report("mse_forward hit (argmax)", hit, NULL, wh, R, 0,
                            0));
    wk_be_mse_backward(be, y, t, R * N, 0.3f, dy);
    CU_ASSERT(nr_cmp_report("mse_backward", dy, NULL, wd, R * N, 1e-7, 1e-6));
    for (r = 0; r < 4; r++)
        wl1[r] = ((double)y1[r] - t1[r]) * ((double)y1[r] - t1[r]);
    wk_be_mse_forward(be, y1, t1, 4, 1, loss, hit);
    CU_ASSERT(nr_cmp_report("mse_forward loss n=1", loss, NULL, wl1, 4, 1e-7,
                            1e-6));
    CU_ASSERT(nr_cmp_report("mse_forward hit n=1 (threshold)", hit, NULL, wh1,
                            4, 0, 0));
    wk_backend_free(be);
}

/* The ReLU layer's op, forward and backward, against the reference over
 * settings that exercise each piece (ceiling, slope, threshold). */
static void test_relu_op(void)
{
    static const float set[][3] = {    /* max_value, slope, threshold */
        {-1, 0, 0}, {6, 0, 0}, {-1, 0.3f, 0}, {0.5f, 0.1f, -0.4f},
        {2, 0.2f, 0.7f}, {-1, 0, -1}};
    struct wk_backend *be = nr_cpu();
    enum { N = 400 };
    float x[N], y[N], dy[N], dx[N];
    double wy[N], wdx[N];
    struct hc_layer_spec s;
    uint64_t st = 8;
    char what[64];

    for (size_t k = 0; k < sizeof set / sizeof set[0]; k++) {
        memset(&s, 0, sizeof s);
        s.max_value = set[k][0];
        s.negative_slope = set[k][1];
        s.threshold = set[k][2];
        nr_fill_rand(x, N, &st, -8, 8);
        nr_fill_rand(dy, N, &st, -1, 1);
        for (int i = 0; i < N; i++) {
            double d;

            wy[i] = nr_ref_relu(&s, x[i], &d);
            wdx[i] = dy[i] * d;
        }
        wk_be_relu_forward(be, x, y, N, s.max_value, s.negative_slope,
                           s.threshold);
        snprintf(what, sizeof what, "relu_forward (%g, %g, %g)",
                 (double)set[k][0], (double)set[k][1], (double)set[k][2]);
        CU_ASSERT(nr_cmp_report(what, y, NULL, wy, N, 1e-6, 1e-6));
        wk_be_relu_backward(be, x, dy, dx, N, s.max_value,
                            s.negative_slope, s.threshold);
        CU_ASSERT(nr_cmp_report("  backward", dx, NULL, wdx, N, 1e-7, 1e-6));
    }
    wk_backend_free(be);
}

/* Binary cross-entropy at the clipping bounds and from logits far out:
 * finite, Keras's values; no gradient where the probability is clipped. */
static void test_bce_edges(void)
{
    struct wk_backend *be = nr_cpu();
    const float y[4] = {0.0f, 1.0f, 1e-9f, 0.5f}, t[4] = {1, 0, 0, 1};
    const float z[2] = {-100.0f, 80.0f}, tz[2] = {1, 0};
    float loss[4], hit[4], dy[4];
    /* Keras's clipped values in float32: −log(1e-7 + 1e-7); −log(1 − p +
     * 1e-7) with p = 1 − 1e-7 rounded to float (1 − p = 2^-23); 1e-9
     * clipped up, −log(1 − 1e-7 + 1e-7) ≈ 0; −log(0.5 + 1e-7). */
    const double top = 1.0 - (double)(1.0f - 1e-7f);
    const double want[4] = {-log(2e-7), -log(top + 1e-7), 0.0,
                            -log(0.5 + 1e-7)};

    for (int r = 0; r < 4; r++) {
        wk_be_tloss_forward(be, HC_LOSS_BCE, 0, 1, y + r, t + r, 1, 1,
                            loss + r, hit + r);
        CU_ASSERT(fabs(loss[r] - want[r]) < 1e-3 * fabs(want[r]) + 1e-6);
    }
    CU_ASSERT(hit[0] == 0 && hit[1] == 0 && hit[2] == 1 && hit[3] == 0);
    wk_be_tloss_backward(be, HC_LOSS_BCE, 0, 1, y, t, 4, 1, 1.0f, dy);
    CU_ASSERT(dy[0] == 0 && dy[1] == 0 && dy[2] == 0);  /* clipped */
    CU_ASSERT(fabs(dy[3] + 1 / (0.5 + 1e-7)) < 1e-5);
    wk_be_tloss_forward(be, HC_LOSS_BCE, 1, 1, z, tz, 2, 1, loss, hit);
    CU_ASSERT(fabs(loss[0] - 100) < 1e-4 && fabs(loss[1] - 80) < 1e-4);
    CU_ASSERT(hit[0] == 0 && hit[1] == 0);
    wk_be_tloss_backward(be, HC_LOSS_BCE, 1, 1, z, tz, 2, 1, 1.0f, dy);
    CU_ASSERT(fabs(dy[0] + 1) < 1e-6 && fabs(dy[1] - 1) < 1e-6);
    wk_backend_free(be);
}

/* The worker's targets from integer labels: one-hot for categorical CE
 * (the same loss as one-hot targets given), the label itself for one
 * binary output; a label that does not fit is refused by name. */
static void test_targets_from_labels(void)
{
    struct nc_fixture f;
    double a, b;
    float *onehot;

    nc_open(&f, nc_model_cce_smooth, 4, 4, 21);
    onehot = nr_falloc(4 * f.N);
    for (size_t i = 0; i < 4 * f.N; i++)
        onehot[i] = f.labels[i / f.N] == (int)(i % f.N);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(f.net, f.params, f.x, 4, 0), HC_OK);
    CU_ASSERT_EQUAL(wk_net_loss(f.net, f.labels, NULL, &a, NULL), HC_OK);
    CU_ASSERT_EQUAL(wk_net_loss(f.net, NULL, onehot, &b, NULL), HC_OK);
    CU_ASSERT(a == b && a > 0);
    f.labels[2] = 4;
    CU_ASSERT_EQUAL(wk_net_loss(f.net, f.labels, NULL, &a, NULL),
                    HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "label of sample 2 is 4; "
                                  "the model has 4 outputs, one per class "
                                  "(0 to 3), for categorical_crossentropy's "
                                  "one-hot targets"));
    free(onehot);
    nc_close(&f);

    nc_open(&f, nc_model_bce_logits, 3, 3, 22);
    CU_ASSERT_EQUAL_FATAL(wk_net_forward(f.net, f.params, f.x, 3, 0), HC_OK);
    f.labels[0] = 0;
    f.labels[1] = 1;
    f.labels[2] = 1;
    f.targets[0] = 0;
    f.targets[1] = 1;
    f.targets[2] = 1;
    CU_ASSERT_EQUAL(wk_net_loss(f.net, f.labels, NULL, &a, NULL), HC_OK);
    CU_ASSERT_EQUAL(wk_net_loss(f.net, NULL, f.targets, &b, NULL), HC_OK);
    CU_ASSERT(a == b);
    f.labels[1] = 2;
    CU_ASSERT_EQUAL(wk_net_loss(f.net, f.labels, NULL, &a, NULL),
                    HC_ERR_DATA);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "label of sample 1 is 2; "
                                  "binary_crossentropy with one output "
                                  "takes labels 0 and 1"));
    nc_close(&f);
}

/* ---- networks ---- */

static void test_grad_activation_layers(void)
{
    nc_check_model(nc_model_activation_layers, 4, 0, 0, 2);
}

static void test_grad_keras_acts(void)
{
    nc_check_model(nc_model_keras_acts, 4, 0, 0, 2);
}

static void test_grad_cce_smooth(void)
{
    nc_check_model(nc_model_cce_smooth, 5, 0, 0, 2);
}

static void test_grad_cce_logits(void)
{
    nc_check_model(nc_model_cce_logits, 5, 0, 0, 2);
}

static void test_grad_sparse_logits(void)
{
    nc_check_model(nc_model_sparse_logits, 5, 0, 0, 2);
}

static void test_grad_bce(void)
{
    nc_check_model(nc_model_bce, 5, 0, 0, 2);
}

static void test_grad_bce_logits(void)
{
    nc_check_model(nc_model_bce_logits, 6, 0, 0, 2);
}

static void test_grad_mae(void)
{
    nc_check_model(nc_model_mae, 5, 0, 0, 2);
}

static void test_grad_huber(void)
{
    nc_check_model(nc_model_huber, 5, 0, 0, 2);
}

static void test_grad_regularized(void)
{
    nc_check_model(nc_model_regularized, 4, 0, 0, 2);
}

static void test_grad_relu_layers(void)
{
    nc_check_model(nc_model_relu_layers, 5, 0, 0, 2);
}

static void test_grad_mse_softmax(void)
{
    nc_check_model(nc_model_mse_softmax, 3, 0, 0, 2);
}

static void test_grad_mse_relu_sigmoid1(void)
{
    nc_check_model(nc_model_mse_relu_sigmoid1, 5, 0, 0, 2);
}

void hp_test_register(void)
{
    static const struct nc_test ops[] = {
        {"activations forward/backward, fused bias grad", test_activations},
        {"softmax + sparse CCE", test_xent},
        {"mse", test_mse},
        {"binary CE clipping and logits", test_bce_edges},
        {"ReLU layer op", test_relu_op},
        {"targets from integer labels", test_targets_from_labels},
    }, nets[] = {
        {"grad activation layers, fused softmax", test_grad_activation_layers},
        {"grad relu6, elu, gelu, swish, softplus, hard_sigmoid",
         test_grad_keras_acts},
        {"grad categorical CE, label smoothing 0.1", test_grad_cce_smooth},
        {"grad categorical CE from logits", test_grad_cce_logits},
        {"grad sparse categorical CE from logits", test_grad_sparse_logits},
        {"grad binary CE on sigmoid, label smoothing 0.2", test_grad_bce},
        {"grad binary CE from logits, one output", test_grad_bce_logits},
        {"grad mae", test_grad_mae},
        {"grad huber delta 0.3", test_grad_huber},
        {"grad L1, L2, L1L2 on kernels and biases", test_grad_regularized},
        {"grad ReLU (max_value, negative_slope, threshold), LeakyReLU",
         test_grad_relu_layers},
        {"grad mse on softmax output", test_grad_mse_softmax},
        {"grad mse relu + sigmoid n=1", test_grad_mse_relu_sigmoid1},
    };

    nc_add_suite("backend_cpu loss", ops, sizeof ops / sizeof ops[0]);
    nc_add_suite("nn loss", nets, sizeof nets / sizeof nets[0]);
}
