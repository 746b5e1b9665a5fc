/*
 * test_optimizer.c — ps/optimizer: SGD, momentum (plain and Nesterov) and
 * Adam against numbers computed independently (decimal literals worked
 * out by hand or in double precision, and double-precision reference
 * loops written here with the textbook formulas); in-place against
 * out-of-place and vector against scalar, bit for bit; the settings'
 * codec (common/optim_conf.h): one validation, the wire's message and the
 * store's record, round trips and every refusal.
 */
#include "cu.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "crc32c.h"
#include "err.h"
#include "hetps.pb-c.h"
#include "model.h"
#include "ps/optimizer.h"
#include "vec.h"

static const struct hc_optim_conf SGD = {.type = HC_OPT_SGD, .lr = 0.1f};
static const struct hc_optim_conf MOM = {.type = HC_OPT_MOMENTUM, .lr = 0.1f,
                                         .momentum = 0.9f};
static const struct hc_optim_conf NAG = {.type = HC_OPT_MOMENTUM, .lr = 0.1f,
                                         .momentum = 0.9f, .nesterov = 1};
static const struct hc_optim_conf ADAM = {.type = HC_OPT_ADAM, .lr = 1e-3f,
                                          .beta1 = 0.9f, .beta2 = 0.999f,
                                          .eps = 1e-7f};

/* ps_optim_apply for the optimizers of at most two slots, with the
 * slots as separate arguments. */
static void apply2(const struct hc_optim_conf *c, uint64_t step, size_t n,
                   const float *p_in, const float *g, float gscale,
                   const float *s0_in, const float *s1_in, float *p_out,
                   float *s0_out, float *s1_out)
{
    const float *in[PS_OPTIM_MAX_SLOTS] = {s0_in, s1_in, NULL};
    float *out[PS_OPTIM_MAX_SLOTS] = {s0_out, s1_out, NULL};
    struct ps_optim_step at = {step, gscale, 1};

    ps_optim_apply(c, &at, n, p_in, g, in, p_out, out);
}

/* |got - want| <= abs + rel·|want| */
static int close_to(double got, double want, double abs, double rel)
{
    return fabs(got - want) <= abs + rel * fabs(want);
}

#define CHECK_CLOSE(got, want, abs, rel)                                    \
    do {                                                                    \
        double g_ = (got), w_ = (want);                                     \
        if (!close_to(g_, w_, (abs), (rel)))                                \
            printf("\n  %s:%d: got %.10g want %.10g\n", __FILE__, __LINE__,  \
                   g_, w_);                                                 \
        CU_ASSERT(close_to(g_, w_, (abs), (rel)));                          \
    } while (0)

static void test_slots_and_names(void)
{
    CU_ASSERT_EQUAL(ps_optim_slots(&SGD), 0);
    CU_ASSERT_EQUAL(ps_optim_slots(&MOM), 1);
    CU_ASSERT_EQUAL(ps_optim_slots(&ADAM), 2);
}

/* SGD, lr 0.1: p = 1 - 0.1·0.5 = 0.95, then 0.95 - 0.1·(-1) = 1.05. */
static void test_sgd_steps(void)
{
    float p[6] = {1, -2, 0.5f, 3, 0, 7};
    double ref[6] = {1, -2, 0.5, 3, 0, 7};
    const float g[2][6] = {{0.5f, 1, -0.25f, 2, 0, -4},
                           {-1, 0.5f, 0.125f, -3, 1, 8}};

    for (int t = 0; t < 2; t++) {
        apply2(&SGD, (uint64_t)t, 6, p, g[t], 1.0f, NULL, NULL, p,
                       NULL, NULL);
        for (int i = 0; i < 6; i++) {
            ref[i] = ref[i] - 0.1 * g[t][i];
            CHECK_CLOSE(p[i], ref[i], 1e-7, 1e-6);
        }
        if (t == 0)
            CHECK_CLOSE(p[0], 0.95, 1e-7, 1e-7);
    }
    CHECK_CLOSE(p[0], 1.05, 1e-7, 1e-7);
    CHECK_CLOSE(p[5], 7 + 0.4 - 0.8, 1e-6, 1e-7);
}

/* Momentum 0.9, lr 0.1, grads 0.5 then 0.5 then -1, worked by hand:
 *   v1 = -0.05            p1 = 0.95
 *   v2 = -0.05 - 0.045 = -0.095          p2 = 0.855
 *   v3 = 0.1 - 0.0855 = 0.0145           p3 = 0.8695
 * Nesterov (p += -g·lr + μ·v_new):
 *   p1 = 1 - 0.05 - 0.045 = 0.905
 *   p2 = 0.905 - 0.05 - 0.0855 = 0.7695
 *   p3 = 0.7695 + 0.1 + 0.01305 = 0.88255 */
static void test_momentum_steps(void)
{
    const float g[3] = {0.5f, 0.5f, -1};
    const double want_v[3] = {-0.05, -0.095, 0.0145};
    const double want_p[3] = {0.95, 0.855, 0.8695};
    const double want_nag[3] = {0.905, 0.7695, 0.88255};
    float p = 1, v = 0, pn = 1, vn = 0;

    for (int t = 0; t < 3; t++) {
        apply2(&MOM, (uint64_t)t, 1, &p, &g[t], 1.0f, &v, NULL, &p,
                       &v, NULL);
        apply2(&NAG, (uint64_t)t, 1, &pn, &g[t], 1.0f, &vn, NULL,
                       &pn, &vn, NULL);
        CHECK_CLOSE(v, want_v[t], 1e-7, 1e-6);
        CHECK_CLOSE(p, want_p[t], 1e-7, 1e-6);
        CHECK_CLOSE(vn, want_v[t], 1e-7, 1e-6);
        CHECK_CLOSE(pn, want_nag[t], 1e-7, 1e-6);
    }
}

/* A longer momentum run over many elements against a double reference. */
static void test_momentum_reference(void)
{
    enum { N = 37, T = 5 };
    float p[N], v[N], pn[N], vn[N], g[N];
    double rp[N], rv[N], rpn[N], rvn[N];

    for (int i = 0; i < N; i++) {
        p[i] = pn[i] = (float)(i - 18) / 8.0f;
        rp[i] = rpn[i] = p[i];
        v[i] = vn[i] = 0;
        rv[i] = rvn[i] = 0;
    }
    for (int t = 0; t < T; t++) {
        for (int i = 0; i < N; i++)
            g[i] = (float)((i * 7 + t * 3) % 11 - 5) / 4.0f;
        apply2(&MOM, (uint64_t)t, N, p, g, 1.0f, v, NULL, p, v, NULL);
        apply2(&NAG, (uint64_t)t, N, pn, g, 1.0f, vn, NULL, pn, vn,
                       NULL);
        for (int i = 0; i < N; i++) {
            double lr = 0.1f, mu = 0.9f;

            rv[i] = mu * rv[i] - lr * g[i];
            rp[i] = rp[i] + rv[i];
            rvn[i] = mu * rvn[i] - lr * g[i];
            rpn[i] = rpn[i] + mu * rvn[i] - lr * g[i];
        }
    }
    for (int i = 0; i < N; i++) {
        CHECK_CLOSE(p[i], rp[i], 1e-6, 1e-5);
        CHECK_CLOSE(v[i], rv[i], 1e-6, 1e-5);
        CHECK_CLOSE(pn[i], rpn[i], 1e-6, 1e-5);
        CHECK_CLOSE(vn[i], rvn[i], 1e-6, 1e-5);
    }
}

/* Adam, Keras defaults (lr 1e-3, β 0.9/0.999, ε 1e-7), three steps on
 * three elements; expected values computed in double precision:
 *   t = 1: m = (0.05, -0.1, 0), v = (2.5e-4, 1e-3, 0),
 *          p = (0.999000006325, -0.499000003162, 0.25)
 *   t = 3: p = (0.998149808482, -0.499781756797, 0.250181546402),
 *          m = (-0.012, 0.149, 0.08875),
 *          v = (8.7443775e-4, 5.244001e-3, 1.015609375e-3) */
static void test_adam_steps(void)
{
    const float g[3][3] = {{0.5f, -1, 0}, {0.25f, 2, -0.125f},
                           {-0.75f, 0.5f, 1}};
    const double p1[3] = {0.999000006325, -0.499000003162, 0.25};
    const double p3[3] = {0.998149808482, -0.499781756797, 0.250181546402};
    const double m3[3] = {-0.012, 0.149, 0.08875};
    const double v3[3] = {8.7443775e-4, 5.244001e-3, 1.015609375e-3};
    float p[3] = {1, -0.5f, 0.25f}, m[3] = {0}, v[3] = {0};

    for (int t = 0; t < 3; t++) {
        apply2(&ADAM, (uint64_t)t, 3, p, g[t], 1.0f, m, v, p, m, v);
        if (t == 0) {
            CHECK_CLOSE(m[0], 0.05, 1e-9, 1e-6);
            CHECK_CLOSE(m[1], -0.1, 1e-9, 1e-6);
            CHECK_CLOSE(v[0], 2.5e-4, 1e-12, 1e-6);
            CHECK_CLOSE(v[1], 1e-3, 1e-12, 1e-6);
            CU_ASSERT_EQUAL(m[2], 0.0f);
            CU_ASSERT_EQUAL(v[2], 0.0f);
            for (int i = 0; i < 3; i++)
                CHECK_CLOSE(p[i], p1[i], 2e-7, 0);
        }
    }
    for (int i = 0; i < 3; i++) {
        CHECK_CLOSE(p[i], p3[i], 3e-7, 0);
        CHECK_CLOSE(m[i], m3[i], 1e-9, 1e-5);
        CHECK_CLOSE(v[i], v3[i], 1e-12, 1e-5);
    }
}

/* ε outside the square root of the uncorrected v (Keras), not the
 * textbook m̂/(sqrt(v̂) + ε): with ε = 0.1 they differ widely. Keras:
 * 1 - lr_t·0.05/(sqrt(2.5e-4) + 0.1) = 0.999863472941; the textbook form
 * would give 0.999166666667. */
static void test_adam_eps_hat_form(void)
{
    struct hc_optim_conf c = ADAM;
    float p = 1, m = 0, v = 0, g = 0.5f;

    c.eps = 0.1f;
    apply2(&c, 0, 1, &p, &g, 1.0f, &m, &v, &p, &m, &v);
    CHECK_CLOSE(p, 0.999863472941, 2e-7, 0);
    CU_ASSERT(fabs(p - 0.999166666667) > 1e-4);
}

/* Keras takes 1 − β in double from the decimal β and rounds it to float:
 * with g = 1 the first step gives m = float(1 − 0.9) = 0.1f and
 * v = float(1 − 0.999) = 0.001f exactly (1.0f − 0.999f would give
 * 0.000999987f). */
static void test_adam_keras_coefficients(void)
{
    float p = 0, m = 0, v = 0, g = 1;

    apply2(&ADAM, 0, 1, &p, &g, 1.0f, &m, &v, &p, &m, &v);
    CU_ASSERT(m == 0.1f);
    CU_ASSERT(v == 0.001f);
    CU_ASSERT(v != 1.0f - 0.999f);
}

/* A long Adam run (late steps, where the bias corrections fade) against
 * the textbook formulas in double, rearranged to the ε̂ form. */
static void test_adam_reference(void)
{
    enum { N = 19, T = 40 };
    float p[N], m[N] = {0}, v[N] = {0}, g[N];
    double rp[N], rm[N] = {0}, rv[N] = {0};
    const double lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-7f;
    uint64_t first = 1000;  /* steps already applied: t = 1001.. */

    for (int i = 0; i < N; i++)
        rp[i] = p[i] = (float)(i % 5) - 2.0f;
    for (int t = 0; t < T; t++) {
        double tt = (double)(first + (uint64_t)t + 1);
        double mhat_scale = 1.0 / (1.0 - pow(b1, tt));
        double vhat_scale = 1.0 / (1.0 - pow(b2, tt));

        for (int i = 0; i < N; i++)
            g[i] = (float)((i * 5 + t) % 9 - 4) / 3.0f;
        apply2(&ADAM, first + (uint64_t)t, N, p, g, 1.0f, m, v, p, m,
                       v);
        for (int i = 0; i < N; i++) {
            double mh, vh;

            rm[i] = b1 * rm[i] + (1 - b1) * g[i];
            rv[i] = b2 * rv[i] + (1 - b2) * g[i] * g[i];
            mh = rm[i] * mhat_scale;
            vh = rv[i] * vhat_scale;
            /* lr·m̂/(sqrt(v̂) + ε·sqrt(vhat_scale)) is the ε̂ form */
            rp[i] -= lr * mh / (sqrt(vh) + eps * sqrt(vhat_scale));
        }
    }
    for (int i = 0; i < N; i++) {
        CHECK_CLOSE(p[i], rp[i], 2e-6, 0);
        CHECK_CLOSE(m[i], rm[i], 1e-7, 1e-4);
        CHECK_CLOSE(v[i], rv[i], 1e-9, 1e-4);
    }
}

/* Deterministic pseudo-random floats in [-2, 2). */
static void fill(float *x, size_t n, unsigned seed)
{
    unsigned s = seed * 2654435761u + 1;

    for (size_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        x[i] = (float)((s >> 8) & 0xffff) / 16384.0f - 2.0f;
    }
}

/* In place, out of place (misaligned to 16 bytes), mixed, and one element
 * at a time (scalar path) all give the same bits. */
static void test_inplace_outofplace_scalar(void)
{
    enum { N = 1031 };
    static float g[N], p0[N], s00[N], s10[N];
    static float pi[N], s0i[N], s1i[N];        /* in place */
    static float po[N + 1], s0o[N + 1], s1o[N + 1];  /* out of place */
    static float pm[N], s0m[N + 1], s1m[N + 1];  /* p in place, slots out */
    static float ps[N], s0s[N], s1s[N];        /* scalar, in place */
    const struct hc_optim_conf *confs[] = {&SGD, &MOM, &NAG, &ADAM};

    for (size_t c = 0; c < sizeof confs / sizeof confs[0]; c++) {
        const struct hc_optim_conf *oc = confs[c];

        fill(p0, N, 1);
        fill(s00, N, 2);
        fill(s10, N, 3);
        for (int i = 0; i < N; i++)
            s10[i] = fabsf(s10[i]);     /* Adam's v is never negative */
        memcpy(pi, p0, sizeof pi);
        memcpy(s0i, s00, sizeof s0i);
        memcpy(s1i, s10, sizeof s1i);
        memcpy(pm, p0, sizeof pm);
        memcpy(ps, p0, sizeof ps);
        memcpy(s0s, s00, sizeof s0s);
        memcpy(s1s, s10, sizeof s1s);
        {
            const float *pin = p0, *s0in = s00, *s1in = s10;
            const float *min0 = s00, *min1 = s10;

            for (uint64_t t = 0; t < 3; t++) {
                fill(g, N, 10 + (unsigned)t);
                apply2(oc, 7 + t, N, pi, g, 0.5f, s0i, s1i, pi, s0i,
                               s1i);
                apply2(oc, 7 + t, N, pin, g, 0.5f, s0in, s1in, po + 1,
                               s0o + 1, s1o + 1);
                pin = po + 1;
                s0in = s0o + 1;
                s1in = s1o + 1;
                apply2(oc, 7 + t, N, pm, g, 0.5f, min0, min1, pm,
                               s0m + 1, s1m + 1);
                min0 = s0m + 1;
                min1 = s1m + 1;
                for (int i = 0; i < N; i++)
                    apply2(oc, 7 + t, 1, &ps[i], &g[i], 0.5f, &s0s[i],
                                   &s1s[i], &ps[i], &s0s[i], &s1s[i]);
            }
        }
        CU_ASSERT(memcmp(pi, po + 1, sizeof pi) == 0);
        CU_ASSERT(memcmp(pi, pm, sizeof pi) == 0);
        CU_ASSERT(memcmp(pi, ps, sizeof pi) == 0);
        CU_ASSERT(memcmp(pi, p0, sizeof pi) != 0);
        if (ps_optim_slots(oc) >= 1) {
            CU_ASSERT(memcmp(s0i, s0o + 1, sizeof s0i) == 0);
            CU_ASSERT(memcmp(s0i, s0m + 1, sizeof s0i) == 0);
            CU_ASSERT(memcmp(s0i, s0s, sizeof s0i) == 0);
        }
        if (ps_optim_slots(oc) == 2) {
            CU_ASSERT(memcmp(s1i, s1o + 1, sizeof s1i) == 0);
            CU_ASSERT(memcmp(s1i, s1m + 1, sizeof s1i) == 0);
            CU_ASSERT(memcmp(s1i, s1s, sizeof s1i) == 0);
        }
    }
}

/* gscale multiplies the gradient: (4g)·0.25 is g exactly. */
static void test_gscale(void)
{
    enum { N = 13 };
    const struct hc_optim_conf *confs[] = {&SGD, &MOM, &NAG, &ADAM};

    for (size_t c = 0; c < sizeof confs / sizeof confs[0]; c++) {
        float g[N], g4[N], a[N], b[N], am[N] = {0}, bm[N] = {0};
        float av[N] = {0}, bv[N] = {0};

        fill(g, N, 5);
        for (int i = 0; i < N; i++)
            g4[i] = 4.0f * g[i];
        fill(a, N, 6);
        memcpy(b, a, sizeof a);
        apply2(confs[c], 0, N, a, g, 1.0f, am, av, a, am, av);
        apply2(confs[c], 0, N, b, g4, 0.25f, bm, bv, b, bm, bv);
        CU_ASSERT(memcmp(a, b, sizeof a) == 0);
        CU_ASSERT(memcmp(am, bm, sizeof am) == 0);
    }
}

/* One set of limits (common/optim_conf.h), every edge of every range. */
static void test_validate(void)
{
    static const struct {
        struct hc_optim_conf c;
        const char *want;       /* NULL: valid */
    } cases[] = {
        {{.type = HC_OPT_SGD, .lr = 0.01f}, NULL},
        {{.type = HC_OPT_SGD, .lr = 10}, NULL},
        {{.type = HC_OPT_SGD, .lr = 10.001f}, "learning_rate 10.001 is out of "
         "range: it must be in (0, 10]"},
        {{.type = HC_OPT_SGD, .lr = 0}, "learning_rate 0 is out of range"},
        {{.type = HC_OPT_SGD, .lr = -1}, "learning_rate -1 is out of range"},
        {{.type = HC_OPT_SGD, .lr = INFINITY}, "learning_rate inf is out of"},
        {{.type = HC_OPT_SGD, .lr = NAN}, "learning_rate nan is out of"},
        {{.type = HC_OPT_MOMENTUM, .lr = 0.1f, .momentum = 0},
         "momentum 0 is out of range: it must be in (0, 1) (use sgd for no "
         "momentum)"},
        {{.type = HC_OPT_MOMENTUM, .lr = 0.1f, .momentum = 0.99f}, NULL},
        {{.type = HC_OPT_MOMENTUM, .lr = 0.1f, .momentum = 1},
         "momentum 1 is out of range: it must be in (0, 1)"},
        {{.type = HC_OPT_MOMENTUM, .lr = 0.1f, .momentum = 0.5f,
          .nesterov = 2}, "nesterov is 2"},
        {{.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0, .beta2 = 0,
          .eps = 1}, NULL},
        {{.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 1, .beta2 = 0.9f,
          .eps = 1e-7f}, "beta_1 1 is out of range: it must be in [0, 1)"},
        {{.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = -0.1f,
          .eps = 1e-7f}, "beta_2 -0.1 is out of range: it must be in [0, 1)"},
        {{.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.9f,
          .eps = 0}, "epsilon 0 is out of range: it must be in (0, 1]"},
        {{.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.9f,
          .eps = 1.5f}, "epsilon 1.5 is out of range"},
        {{.type = (enum hc_optim)9, .lr = 1}, "optimizer type 9 is unknown"},
        {{.type = HC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .eps = 1e-7f},
         NULL},
        {{.type = HC_OPT_RMSPROP, .lr = 1e-3f, .rho = 1, .eps = 1e-7f},
         "rho 1 is out of range: it must be in [0, 1)"},
        {{.type = HC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .momentum = -0.1f,
          .eps = 1e-7f}, "momentum -0.1 is out of range: it must be in [0, 1)"},
        {{.type = HC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .eps = 1e-7f,
          .centered = 3}, "centered is 3; it must be true or false"},
        {{.type = HC_OPT_ADAGRAD, .lr = 1e-3f, .init_accum = -1, .eps = 1e-7f},
         "initial_accumulator_value -1 is out of range: it must be in [0, "
         "1e+06]"},
        {{.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.9f,
          .eps = 1e-7f, .amsgrad = 2}, "amsgrad is 2"},
        {{.type = HC_OPT_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.9f,
          .eps = 1e-7f, .weight_decay = 1.5f},
         "weight_decay 1.5 is out of range: it must be in [0, 1]"},
        {{.type = HC_OPT_SGD, .lr = 1e-3f, .weight_decay = -0.5f},
         "weight_decay -0.5 is out of range"},
        {{.type = HC_OPT_ADAGRAD, .lr = 1e-3f, .eps = 1e-7f,
          .clipvalue = NAN}, "clipvalue nan is out of range: it must be in "
         "[0, 1e+06]"},
        {{.type = HC_OPT_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.9f,
          .eps = 1e-7f, .weight_decay = 0.1f, .wd_exclude = "bi.s"},
         "exclude_from_weight_decay word \"bi.s\" has a character other"},
        {{.type = HC_OPT_NADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 1,
          .eps = 1e-7f}, "beta_2 1 is out of range"},
        {{.type = HC_OPT_ADAMAX, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.9f,
          .eps = 0}, "epsilon 0 is out of range"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = 0.5f},
         "learning_rate_power 0.5 is out of range: it must be in [-10, 0]"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f, .l1 = -1},
         "l1_regularization_strength -1 is out of range"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f, .l2 = NAN},
         "l2_regularization_strength nan is out of range"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f,
          .l2_shrinkage = 2e6f},
         "l2_shrinkage_regularization_strength 2e+06 is out of range"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f, .beta = -2},
         "beta -2 is out of range"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f},
         "ftrl initial_accumulator_value 0 with l2_regularization_strength 0 "
         "and beta 0 divides 0 by 0 (Keras's formula gives NaN)"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f, .l1 = 0.5f,
          .l2_shrinkage = 0.5f}, "ftrl initial_accumulator_value 0"},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f, .l2 = 0.01f},
         NULL},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f, .beta = 0.5f},
         NULL},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = 0}, NULL},
        {{.type = HC_OPT_FTRL, .lr = 1e-3f, .lr_power = -0.5f,
          .init_accum = 1e-6f}, NULL},
        {{.type = HC_OPT_SGD, .lr = 0.1f,
          .sched = {.kind = HC_LR_EXPONENTIAL, .decay_steps = 0,
                    .decay_rate = 0.5f}},
         "ExponentialDecay decay_steps 0 is out of range: it must be in (0, "},
        {{.type = HC_OPT_SGD, .lr = 0.1f,
          .sched = {.kind = HC_LR_INVERSE_TIME, .decay_steps = 10,
                    .decay_rate = -1}},
         "InverseTimeDecay decay_rate -1 is out of range"},
        {{.type = HC_OPT_SGD, .lr = 0,
          .sched = {.kind = HC_LR_COSINE, .decay_steps = 10, .alpha = 2}},
         "CosineDecay alpha 2 is out of range: it must be in [0, 1]"},
        {{.type = HC_OPT_SGD, .lr = 0.1f,
          .sched = {.kind = HC_LR_POLYNOMIAL, .decay_steps = 10,
                    .power = 1, .cycle = 3}},
         "PolynomialDecay cycle 3 is out of range"},
        {{.type = HC_OPT_SGD, .lr = 0.1f,
          .sched = {.kind = HC_LR_PIECEWISE, .n_values = 3,
                    .boundaries = {10, 10}, .values = {0.1f, 0.1f, 0.1f}}},
         "PiecewiseConstantDecay boundaries must increase: 10 then 10"},
        {{.type = HC_OPT_SGD, .lr = 0.1f,
          .sched = {.kind = HC_LR_PIECEWISE, .n_values = 1,
                    .values = {0.1f}}},
         "PiecewiseConstantDecay has 1 values; it takes 2 to 16"},
        {{.type = HC_OPT_SGD, .lr = 0.2f,
          .sched = {.kind = HC_LR_PIECEWISE, .n_values = 2,
                    .boundaries = {10}, .values = {0.1f, 0.1f}}},
         "learning_rate 0.2 is not its values[0] 0.1"},
        {{.type = HC_OPT_SGD, .lr = 0.1f, .sched = {.kind = 9}},
         "learning_rate schedule 9 is unknown"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rv;

        hc_err_clear();
        rv = hc_optim_validate(&cases[i].c, "model m.json");
        if (!cases[i].want) {
            CU_ASSERT_EQUAL(rv, HC_OK);
            continue;
        }
        CU_ASSERT_EQUAL(rv, HC_ERR_CONFIG);
        if (!strstr(hc_err_msg(), cases[i].want) ||
            !strstr(hc_err_msg(), "model m.json"))
            printf("\n  case %zu: message \"%s\"\n", i, hc_err_msg());
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), cases[i].want));
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "model m.json"));
    }
}

static void test_defaults_names_describe(void)
{
    struct hc_optim_conf c;
    char buf[HC_OPTIM_DESCRIBE_MAX];

    hc_optim_defaults(HC_OPT_ADAM, &c);
    CU_ASSERT(c.type == HC_OPT_ADAM && c.lr == 0.001f && c.beta1 == 0.9f &&
              c.beta2 == 0.999f && c.eps == 1e-7f && c.momentum == 0);
    CU_ASSERT_EQUAL(hc_optim_validate(&c, "d"), HC_OK);
    hc_optim_defaults(HC_OPT_SGD, &c);
    CU_ASSERT(c.type == HC_OPT_SGD && c.lr == 0.01f && c.beta1 == 0);
    CU_ASSERT_STRING_EQUAL(hc_optim_name(HC_OPT_SGD), "sgd");
    CU_ASSERT_STRING_EQUAL(hc_optim_name(HC_OPT_MOMENTUM), "momentum");
    CU_ASSERT_STRING_EQUAL(hc_optim_name(HC_OPT_ADAM), "adam");
    CU_ASSERT_STRING_EQUAL(hc_optim_name((enum hc_optim)99), "?");
    CU_ASSERT_STRING_EQUAL(hc_optim_describe(&ADAM, buf, sizeof buf),
                           "adam (learning_rate 0.00100000005, beta_1 "
                           "0.899999976, beta_2 0.999000013, epsilon "
                           "1.00000001e-07, amsgrad false)");
    CU_ASSERT_STRING_EQUAL(hc_optim_describe(&NAG, buf, sizeof buf),
                           "momentum (learning_rate 0.100000001, momentum "
                           "0.899999976, nesterov true)");
    /* equal ignores what the type does not use */
    c = SGD;
    c.beta1 = 0.5f;
    CU_ASSERT(hc_optim_equal(&SGD, &c));
    c = NAG;
    c.nesterov = 0;
    CU_ASSERT(!hc_optim_equal(&NAG, &c));
    CU_ASSERT(!hc_optim_equal(&MOM, &SGD));
}

static const struct hc_optim_conf ROUND_TRIP[] = {
    {.type = HC_OPT_SGD, .lr = 0.01f},
    {.type = HC_OPT_SGD, .lr = 0.0123456789f},
    {.type = HC_OPT_MOMENTUM, .lr = 0.05f, .momentum = 0.9f},
    {.type = HC_OPT_MOMENTUM, .lr = 0.05f, .momentum = 0.99f, .nesterov = 1},
    {.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
     .eps = 1e-7f},
    {.type = HC_OPT_ADAM, .lr = 3.3e-4f, .beta1 = 0.0f, .beta2 = 0.98f,
     .eps = 1.1e-8f},
    {.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
     .eps = 1e-7f, .amsgrad = 1},
    {.type = HC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .eps = 1e-7f},
    {.type = HC_OPT_RMSPROP, .lr = 2e-3f, .rho = 0.8f, .momentum = 0.5f,
     .eps = 1e-6f, .centered = 1},
    {.type = HC_OPT_ADAGRAD, .lr = 1e-2f, .init_accum = 0.1f, .eps = 1e-7f},
    {.type = HC_OPT_ADAMW, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
     .eps = 1e-7f, .weight_decay = 0.004f, .wd_exclude = "bias\0gamma"},
    {.type = HC_OPT_NADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
     .eps = 1e-7f, .global_clipnorm = 5.0f},
    {.type = HC_OPT_ADAMAX, .lr = 2e-3f, .beta1 = 0.8f, .beta2 = 0.99f,
     .eps = 1e-7f, .weight_decay = 0.01f},
    {.type = HC_OPT_FTRL, .lr = 0.05f, .lr_power = -0.5f, .init_accum = 0.1f,
     .l1 = 0.01f, .l2 = 0.02f, .l2_shrinkage = 0.03f, .beta = 0.5f},
    {.type = HC_OPT_SGD, .lr = 0.1f, .clipvalue = 0.5f,
     .sched = {.kind = HC_LR_EXPONENTIAL, .decay_steps = 1000,
               .decay_rate = 0.96f, .staircase = 1}},
    {.type = HC_OPT_ADAM, .lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f,
     .eps = 1e-7f, .sched = {.kind = HC_LR_INVERSE_TIME, .decay_steps = 10,
                             .decay_rate = 0.5f}},
    {.type = HC_OPT_RMSPROP, .lr = 1e-3f, .rho = 0.9f, .eps = 1e-7f,
     .sched = {.kind = HC_LR_POLYNOMIAL, .decay_steps = 100, .end_lr = 1e-4f,
               .power = 2, .cycle = 1}},
    {.type = HC_OPT_ADAMW, .lr = 0, .beta1 = 0.9f, .beta2 = 0.999f,
     .eps = 1e-7f, .weight_decay = 0.004f,
     .sched = {.kind = HC_LR_COSINE, .decay_steps = 1000, .alpha = 0.1f,
               .warmup = 1, .warmup_target = 0.01f, .warmup_steps = 100}},
    {.type = HC_OPT_ADAGRAD, .lr = 0.1f, .init_accum = 0.1f, .eps = 1e-7f,
     .clipnorm = 2.0f, .sched = {.kind = HC_LR_PIECEWISE, .n_values = 3,
               .boundaries = {100, 200}, .values = {0.1f, 0.01f, 0.001f}}},
};

/* Encode to the wire's message, pack, unpack, decode: the same settings,
 * bit for bit (floats travel as float). */
static void test_wire_round_trip(void)
{
    for (size_t i = 0; i < sizeof ROUND_TRIP / sizeof ROUND_TRIP[0]; i++) {
        Hetps__OptimizerSettings *back;
        struct hc_optim_wire w;
        struct hc_optim_conf c;
        uint8_t buf[512];
        size_t n;

        hc_optim_to_wire(&ROUND_TRIP[i], &w);
        CU_ASSERT_FATAL(hetps__optimizer_settings__get_packed_size(&w.m) <=
                        sizeof buf);
        n = hetps__optimizer_settings__pack(&w.m, buf);
        back = hetps__optimizer_settings__unpack(NULL, n, buf);
        CU_ASSERT_PTR_NOT_NULL_FATAL(back);
        memset(&c, 0x55, sizeof c);
        CU_ASSERT_EQUAL(hc_optim_from_wire(back, "rt", &c), HC_OK);
        CU_ASSERT(memcmp(&c, &ROUND_TRIP[i], sizeof c) == 0);
        /* a type's own settings only */
        CU_ASSERT_EQUAL(back->has_beta_1, ROUND_TRIP[i].type == HC_OPT_ADAM ||
                        (ROUND_TRIP[i].type >= HC_OPT_ADAMW &&
                         ROUND_TRIP[i].type <= HC_OPT_ADAMAX));
        CU_ASSERT_EQUAL(back->has_weight_decay,
                        ROUND_TRIP[i].weight_decay != 0.0f);
        CU_ASSERT_EQUAL(back->has_momentum,
                        ROUND_TRIP[i].type == HC_OPT_MOMENTUM ||
                        ROUND_TRIP[i].type == HC_OPT_RMSPROP);
        hetps__optimizer_settings__free_unpacked(back, NULL);
    }
}

/* What a hostile or broken peer can send: refused, naming it. */
static void test_wire_errors(void)
{
    struct hc_optim_wire w;
    Hetps__OptimizerSettings m;
    struct hc_optim_conf c = SGD;

#define WIRE_REFUSED(want)                                                  \
    do {                                                                    \
        CU_ASSERT_EQUAL(hc_optim_from_wire(&m, "create from worker:0", &c), \
                        HC_ERR_CONFIG);                                     \
        if (!strstr(hc_err_msg(), (want)) ||                                \
            !strstr(hc_err_msg(), "create from worker:0"))                  \
            printf("\n  %s:%d: message \"%s\"\n", __FILE__, __LINE__,      \
                   hc_err_msg());                                           \
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), (want)));              \
    } while (0)

    hetps__optimizer_settings__init(&m);
    m.type = (Hetps__OptimizerType)99;
    m.learning_rate = 0.1f;
    WIRE_REFUSED("optimizer type 99 is unknown");
    hc_optim_to_wire(&ADAM, &w);
    m = w.m;
    m.has_epsilon = 0;
    WIRE_REFUSED("the adam optimizer's settings lack epsilon");
    hc_optim_to_wire(&ADAM, &w);
    m = w.m;
    m.learning_rate = 1e6f;
    WIRE_REFUSED("learning_rate 1e+06 is out of range");
    hc_optim_to_wire(&ADAM, &w);
    m = w.m;
    m.beta_2 = NAN;
    WIRE_REFUSED("beta_2 nan is out of range");
    hetps__optimizer_settings__init(&m);
    hc_optim_to_wire(&MOM, &w);
    m = w.m;
    m.has_momentum = 0;
    WIRE_REFUSED("the momentum optimizer's settings lack momentum");
    hc_optim_to_wire(&MOM, &w);
    m = w.m;
    m.has_momentum = 1;
    m.momentum = -0.5f;
    WIRE_REFUSED("momentum -0.5 is out of range");
    /* *out untouched on error */
    CU_ASSERT(c.type == HC_OPT_SGD && c.lr == 0.1f);
#undef WIRE_REFUSED
}

/* A version 1 record (hetps before RMSprop and the others) exactly as
 * that hetps wrote it: Adam(0.001, 0.9, 0.999, 1e-7), or momentum 0.5
 * with nesterov; its CRC32C over bytes 0..27 at 28. */
static void v1_record(unsigned char rec[HC_OPTIM_RECORD_V1_SIZE], int adam)
{
    static const unsigned char adam_v1[28] = {
        'H', 'O', 'P', 'T', 1, 0, 2, 0,
        0x6f, 0x12, 0x83, 0x3a,     /* 0.001f */
        0, 0, 0, 0,
        0x66, 0x66, 0x66, 0x3f,     /* 0.9f */
        0x77, 0xbe, 0x7f, 0x3f,     /* 0.999f */
        0x95, 0xbf, 0xd6, 0x33,     /* 1e-7f */
    };
    static const unsigned char mom_v1[28] = {
        'H', 'O', 'P', 'T', 1, 0, 1, 1,
        0xcd, 0xcc, 0xcc, 0x3d,     /* 0.1f */
        0, 0, 0, 0x3f,              /* 0.5f */
    };
    uint32_t crc;

    memcpy(rec, adam ? adam_v1 : mom_v1, 28);
    crc = hc_crc32c(rec, 28);
    for (int i = 0; i < 4; i++)
        rec[28 + i] = (unsigned char)(crc >> (8 * i));
}

/* The store's fixed record: round trip of every type, the bytes of the
 * version this hetps writes, version 1 read as before, and every way a
 * record can be wrong. */
static void test_record(void)
{
    unsigned char rec[HC_OPTIM_RECORD_SIZE], bad[HC_OPTIM_RECORD_SIZE];
    unsigned char v1[HC_OPTIM_RECORD_V1_SIZE];
    struct hc_optim_conf c, mom = {.type = HC_OPT_MOMENTUM, .lr = 0.1f,
                                   .momentum = 0.5f, .nesterov = 1};

    for (size_t i = 0; i < sizeof ROUND_TRIP / sizeof ROUND_TRIP[0]; i++) {
        hc_optim_to_record(&ROUND_TRIP[i], rec);
        memset(&c, 0x55, sizeof c);
        CU_ASSERT_EQUAL(hc_optim_from_record(rec, sizeof rec, "s", &c), HC_OK);
        CU_ASSERT(memcmp(&c, &ROUND_TRIP[i], sizeof c) == 0);
    }
    /* version 1, byte for byte as written before: read, the same settings */
    v1_record(v1, 1);
    memset(&c, 0x55, sizeof c);
    CU_ASSERT_EQUAL(hc_optim_from_record(v1, sizeof v1, "s", &c), HC_OK);
    CU_ASSERT(memcmp(&c, &ADAM, sizeof c) == 0);
    v1_record(v1, 0);
    CU_ASSERT_EQUAL(hc_optim_from_record(v1, sizeof v1, "s", &c), HC_OK);
    CU_ASSERT(memcmp(&c, &mom, sizeof c) == 0);
    v1[6] = HC_OPT_RMSPROP;
    v1_record(bad, 0);
    memcpy(bad + 6, v1 + 6, 1);
    {
        uint32_t crc = hc_crc32c(bad, 28);

        for (int i = 0; i < 4; i++)
            bad[28 + i] = (unsigned char)(crc >> (8 * i));
    }
    CU_ASSERT_EQUAL(hc_optim_from_record(bad, HC_OPTIM_RECORD_V1_SIZE,
                                         "store d", &c), HC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "version 1 names type 3"));
    /* version 2: its bytes */
    hc_optim_to_record(&ADAM, rec);
    v1_record(v1, 1);
    CU_ASSERT(memcmp(rec, "HOPT\2\0\2\0", 8) == 0);
    CU_ASSERT(memcmp(rec + 8, v1 + 8, 20) == 0);    /* lr, 0, β1, β2, ε */
    CU_ASSERT_EQUAL(hc_optim_from_record(rec, sizeof rec - 1, "store d",
                                         &c), HC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "store d: optimizer settings "
                                  "record version 2 of 359 bytes, expected "
                                  "360"));
    CU_ASSERT_EQUAL(hc_optim_from_record("{\"type\":\"adam\",\"learning_rat}",
                                         32, "store d", &c), HC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "JSON text"));
    memcpy(bad, rec, sizeof bad);
    bad[4] = 3;
    CU_ASSERT_EQUAL(hc_optim_from_record(bad, sizeof bad, "store d", &c),
                    HC_ERR_VERSION);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "record version 3, but this "
                                  "hetps reads versions 1 and 2"));
    memcpy(bad, rec, sizeof bad);
    bad[9] ^= 1;
    CU_ASSERT_EQUAL(hc_optim_from_record(bad, sizeof bad, "store d", &c),
                    HC_ERR_STORE);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "fails its checksum"));
    /* a value out of range under a good checksum: damage, named */
    {
        struct hc_optim_conf wild = ADAM;

        wild.eps = 2;
        hc_optim_to_record(&wild, bad);
        CU_ASSERT_EQUAL(hc_optim_from_record(bad, sizeof bad, "store d",
                                             &c), HC_ERR_STORE);
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "epsilon 2 is out of "
                                      "range"));
        CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "the store is damaged"));
    }
    CU_ASSERT(memcmp(&c, &mom, sizeof c) == 0);     /* untouched on error */
}

/* The model file's optimizer (common/model.c, the reader of our JSON and of
 * what Keras's compile_config is turned into): each type's keys with
 * Keras's defaults; unknown keys, wrong kinds and values refused by name,
 * listing what is allowed. */
static void test_model_json(void)
{
    static const struct {
        const char *json;
        const char *want;       /* hc_optim_describe's, or the refusal */
        int ok;
    } cases[] = {
        {"\"rmsprop\"", "rmsprop (learning_rate 0.00100000005, momentum 0, "
         "rho 0.899999976, epsilon 1.00000001e-07, centered false)", 1},
        {"{\"type\": \"RMSprop\", \"centered\": true, \"momentum\": 0.5}",
         "rmsprop (learning_rate 0.00100000005, momentum 0.5, rho "
         "0.899999976, epsilon 1.00000001e-07, centered true)", 1},
        {"{\"type\": \"adagrad\"}", "adagrad (learning_rate 0.00100000005, "
         "epsilon 1.00000001e-07, initial_accumulator_value 0.100000001)", 1},
        {"{\"type\": \"AdamW\", \"exclude_from_weight_decay\": [\"bias\", "
         "\"gamma\"]}", "adamw (learning_rate 0.00100000005, beta_1 "
         "0.899999976, beta_2 0.999000013, epsilon 1.00000001e-07, "
         "weight_decay 0.00400000019, amsgrad false, "
         "exclude_from_weight_decay bias gamma)", 1},
        {"{\"type\": \"adam\", \"amsgrad\": true}", "adam (learning_rate "
         "0.00100000005, beta_1 0.899999976, beta_2 0.999000013, epsilon "
         "1.00000001e-07, amsgrad true)", 1},
        {"{\"type\": \"sgd\", \"momentum\": 0.9, \"nesterov\": true}",
         "momentum (learning_rate 0.00999999978, momentum 0.899999976, "
         "nesterov true)", 1},
        {"{\"type\": \"sgd\", \"weight_decay\": 0.01}", "sgd (learning_rate "
         "0.00999999978, weight_decay 0.00999999978)", 1},
        {"\"nadam\"", "nadam (learning_rate 0.00100000005, beta_1", 1},
        {"\"adamax\"", "adamax (learning_rate 0.00100000005, beta_1", 1},
        {"{\"type\": \"ftrl\", \"l1_regularization_strength\": 0.01}",
         "ftrl (learning_rate 0.00100000005, initial_accumulator_value "
         "0.100000001, learning_rate_power -0.5, l1_regularization_strength "
         "0.00999999978", 1},
        {"{\"type\": \"adagrad\", \"rho\": 0.9}", "m.json: optimizer "
         "(adagrad): unknown key \"rho\"", 0},
        {"{\"type\": \"adagrad\", \"frobnicate\": 0.9}", "unknown key "
         "\"frobnicate\"; allowed here: type, learning_rate, epsilon, "
         "initial_accumulator_value, weight_decay, clipvalue, clipnorm, "
         "global_clipnorm, exclude_from_weight_decay",
         0},
        {"{\"type\": \"adam\", \"amsgrad\": 1}", "\"amsgrad\" must be true "
         "or false, got 1", 0},
        {"{\"type\": \"adamw\", \"exclude_from_weight_decay\": \"bias\"}",
         "\"exclude_from_weight_decay\" must be a list of words", 0},
        {"{\"type\": \"adamw\", \"exclude_from_weight_decay\": [\"b.*s\"]}",
         "exclude_from_weight_decay word \"b.*s\" has a character other than "
         "a letter", 0},
        {"{\"type\": \"lion\"}", "unsupported optimizer \"lion\"; use one of "
         "sgd, rmsprop, adagrad, adam, adamw, nadam, adamax, ftrl", 0},
        {"\"momentum\"", "unsupported optimizer \"momentum\"", 0},
        {"{\"type\": \"sgd\", \"nesterov\": true}", "\"nesterov\": true "
         "needs \"momentum\" > 0", 0},
        {"{\"type\": \"rmsprop\", \"rho\": 1.5}", "rho 1.5 is out of range: "
         "it must be in [0, 1)", 0},
        {"{\"type\": \"ftrl\", \"learning_rate_power\": 0.5}",
         "learning_rate_power 0.5 is out of range: it must be in [-10, 0]", 0},
        {"{\"type\": \"sgd\", \"learning_rate\": {\"class_name\": "
         "\"ExponentialDecay\", \"config\": {\"initial_learning_rate\": 0.1, "
         "\"decay_steps\": 1000, \"decay_rate\": 0.96, \"staircase\": true, "
         "\"name\": \"ExponentialDecay\"}, \"module\": "
         "\"keras.optimizers.schedules\", \"registered_name\": null}}",
         "sgd (learning_rate ExponentialDecay(initial_learning_rate "
         "0.100000001, decay_steps 1000, decay_rate 0.959999979, staircase "
         "true))", 1},
        {"{\"type\": \"adamw\", \"learning_rate\": {\"class_name\": "
         "\"CosineDecay\", \"config\": {\"initial_learning_rate\": 0.0, "
         "\"decay_steps\": 1000, \"warmup_target\": 0.01, \"warmup_steps\": "
         "100}}}", "adamw (learning_rate CosineDecay(initial_learning_rate 0, "
         "decay_steps 1000, alpha 0, warmup_steps 100, warmup_target "
         "0.00999999978)", 1},
        {"{\"type\": \"adam\", \"learning_rate\": {\"class_name\": "
         "\"PiecewiseConstantDecay\", \"config\": {\"boundaries\": [100, "
         "200], \"values\": [0.01, 0.001, 0.0001]}}}", "adam (learning_rate "
         "PiecewiseConstantDecay(boundaries 100 200, values 0.00999999978 "
         "0.00100000005 9.99999975e-05)", 1},
        {"{\"type\": \"sgd\", \"learning_rate\": {\"class_name\": "
         "\"PolynomialDecay\", \"config\": {\"initial_learning_rate\": 0.1, "
         "\"decay_steps\": 10}}}", "sgd (learning_rate PolynomialDecay("
         "initial_learning_rate 0.100000001, decay_steps 10, "
         "end_learning_rate 9.99999975e-05, power 1, cycle false))", 1},
        {"{\"type\": \"adam\", \"learning_rate\": {\"class_name\": "
         "\"CosineDecayRestarts\", \"config\": {}}}", "schedule "
         "\"CosineDecayRestarts\" is not supported; use a number or one of "
         "ExponentialDecay, InverseTimeDecay, PolynomialDecay, CosineDecay, "
         "PiecewiseConstantDecay", 0},
        {"{\"type\": \"adam\", \"learning_rate\": {\"class_name\": "
         "\"ExponentialDecay\", \"config\": {\"initial_learning_rate\": 0.1,"
         " \"decay_steps\": 10, \"decay_rate\": 0.5, \"alpha\": 1}}}",
         "learning_rate ExponentialDecay: unknown key \"alpha\"", 0},
        {"{\"type\": \"adam\", \"learning_rate\": {\"class_name\": "
         "\"ExponentialDecay\", \"config\": {\"initial_learning_rate\": 0.1,"
         " \"decay_steps\": 10}}}", "needs initial_learning_rate, decay_steps "
         "and decay_rate", 0},
        {"{\"type\": \"adam\", \"learning_rate\": {\"class_name\": "
         "\"PiecewiseConstantDecay\", \"config\": {\"boundaries\": [1.5], "
         "\"values\": [0.1, 0.2]}}}", "\"boundaries\" must hold step counts "
         "(whole numbers), got 1.5", 0},
        {"{\"type\": \"adam\", \"learning_rate\": {\"class_name\": "
         "\"PiecewiseConstantDecay\", \"config\": {\"boundaries\": [1, 2], "
         "\"values\": [0.1, 0.2]}}}", "has 2 boundaries and 2 values", 0},
        {"{\"type\": \"adam\", \"learning_rate\": \"fast\"}",
         "\"learning_rate\" must be a number, got \"fast\"", 0},
    };
    char d[HC_OPTIM_DESCRIBE_MAX];

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct hc_optim_conf c;
        int rv = hc_model_optim_from_json(cases[i].json, strlen(cases[i].json),
                                          "m.json", &c);
        const char *got = rv == HC_OK ? hc_optim_describe(&c, d, sizeof d)
                                      : hc_err_msg();

        CU_ASSERT_EQUAL(rv, cases[i].ok ? HC_OK : HC_ERR_CONFIG);
        if (!strstr(got, cases[i].want))
            printf("\n  case %zu: rv %d \"%s\", wanted \"%s\"\n", i, rv, got,
                   cases[i].want);
        CU_ASSERT_PTR_NOT_NULL(strstr(got, cases[i].want));
    }
}

/* Slots: how many, their Keras names, where they start; weight decay's
 * exclusions by the last name component. */
static void test_slots_decay(void)
{
    struct hc_optim_conf c;

    hc_optim_defaults(HC_OPT_RMSPROP, &c);
    CU_ASSERT_EQUAL(ps_optim_slots(&c), 1);
    c.momentum = 0.5f;
    c.centered = 1;
    CU_ASSERT_EQUAL(ps_optim_slots(&c), 3);
    CU_ASSERT_STRING_EQUAL(ps_optim_slot_name(&c, 1), "momentum");
    CU_ASSERT_STRING_EQUAL(ps_optim_slot_name(&c, 2), "average_gradient");
    c.momentum = 0;
    CU_ASSERT_STRING_EQUAL(ps_optim_slot_name(&c, 1), "average_gradient");
    CU_ASSERT_STRING_EQUAL(ps_optim_slot_name(&c, 2), "?");
    hc_optim_defaults(HC_OPT_ADAMW, &c);
    CU_ASSERT_EQUAL(ps_optim_slots(&c), 2);
    c.amsgrad = 1;
    CU_ASSERT_EQUAL(ps_optim_slots(&c), 3);
    CU_ASSERT_STRING_EQUAL(ps_optim_slot_name(&c, 2), "velocity_hat");
    hc_optim_defaults(HC_OPT_FTRL, &c);
    CU_ASSERT_EQUAL(ps_optim_slots(&c), 2);
    CU_ASSERT(ps_optim_slot_init(&c, 0) == 0.1f);
    CU_ASSERT(ps_optim_slot_init(&c, 1) == 0.0f);
    CU_ASSERT_STRING_EQUAL(ps_optim_slot_name(&c, 1), "linear");
    hc_optim_defaults(HC_OPT_ADAGRAD, &c);
    CU_ASSERT(ps_optim_slot_init(&c, 0) == 0.1f);
    hc_optim_defaults(HC_OPT_ADAMAX, &c);
    CU_ASSERT_STRING_EQUAL(ps_optim_slot_name(&c, 1), "norm");
    CU_ASSERT(ps_optim_slot_init(&c, 0) == 0.0f);

    hc_optim_defaults(HC_OPT_ADAMW, &c);
    CU_ASSERT_EQUAL(hc_optim_exclude_add(&c, "bias", "t"), HC_OK);
    CU_ASSERT_EQUAL(hc_optim_exclude_add(&c, "norm", "t"), HC_OK);
    CU_ASSERT(hc_optim_decays(&c, "dense/kernel"));
    CU_ASSERT(!hc_optim_decays(&c, "dense/bias"));
    CU_ASSERT(hc_optim_decays(&c, "layer_norm/gamma"));   /* leaf gamma */
    CU_ASSERT(!hc_optim_decays(&c, "batchnorm"));       /* no '/': whole */
    CU_ASSERT(hc_optim_decays(&c, "bias_layer/kernel"));  /* not the leaf */
    c.weight_decay = 0;
    CU_ASSERT(!hc_optim_decays(&c, "dense/kernel"));
    for (int i = 0; i < 30; i++)
        if (hc_optim_exclude_add(&c, "abcd", "t") != HC_OK)
            break;
    CU_ASSERT_EQUAL(hc_optim_exclude_add(&c, "abcdefgh", "t"), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "the words take more than"));
    CU_ASSERT_EQUAL(hc_optim_validate(&c, "t"), HC_OK);
}

/* vec.h's finite check and sync sum, against one float at a time: every
 * length to 13 (the 4-wide body and each tail), the bad value at every
 * place; the largest finite float, subnormals and -0 are finite. */
static void test_vec_kernels(void)
{
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    float x[13], a[13], b[13], g[13];
    size_t n, at, k;
    int v, wrong = 0;

    for (k = 0; k < 13; k++) {
        x[k] = k % 3 == 0 ? FLT_MAX : k % 3 == 1 ? 1e-40f : -0.0f;
        g[k] = 0.5f * (float)k - 2.0f;
    }
    for (n = 0; n <= 13; n++) {
        wrong += vec_any_nonfinite(x, n) != 0;
        for (at = 0; at < n; at++)
            for (v = 0; v < 3; v++) {
                float keep = x[at];

                x[at] = bad[v];
                wrong += vec_any_nonfinite(x, n) != 1;
                x[at] = keep;
            }
        for (k = 0; k < 13; k++)
            a[k] = b[k] = (float)k;
        vec_scaled_add(a, g, 3.0f, n, 1);
        for (k = 0; k < n; k++)
            b[k] += 3.0f * g[k];
        wrong += memcmp(a, b, sizeof a) != 0;
        vec_scaled_add(a, g, 0.25f, n, 0);
        for (k = 0; k < n; k++)
            b[k] = 0.25f * g[k];
        wrong += memcmp(a, b, sizeof a) != 0;
    }
    CU_ASSERT_EQUAL(wrong, 0);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("optimizer", NULL, NULL);

    CU_add_test(s, "slots", test_slots_and_names);
    CU_add_test(s, "sgd steps", test_sgd_steps);
    CU_add_test(s, "momentum steps (plain, nesterov)", test_momentum_steps);
    CU_add_test(s, "momentum vs double reference", test_momentum_reference);
    CU_add_test(s, "adam steps", test_adam_steps);
    CU_add_test(s, "adam epsilon-hat form", test_adam_eps_hat_form);
    CU_add_test(s, "adam keras coefficients", test_adam_keras_coefficients);
    CU_add_test(s, "adam vs double reference", test_adam_reference);
    CU_add_test(s, "in place = out of place = scalar",
                test_inplace_outofplace_scalar);
    CU_add_test(s, "gradient scale", test_gscale);
    CU_add_test(s, "settings: one validation", test_validate);
    CU_add_test(s, "settings: defaults, names, describe, equal",
                test_defaults_names_describe);
    CU_add_test(s, "settings: wire round trip", test_wire_round_trip);
    CU_add_test(s, "settings: wire refusals", test_wire_errors);
    CU_add_test(s, "settings: the store's record", test_record);
    CU_add_test(s, "vector kernels: finite check, sync sum", test_vec_kernels);
    CU_add_test(s, "settings: the model file's keys", test_model_json);
    CU_add_test(s, "slots, their names and starts; weight decay by name",
                test_slots_decay);
}
