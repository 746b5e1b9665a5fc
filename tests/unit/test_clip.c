/*
 * test_clip.c — worker/clip: Keras's clipnorm (per variable) and
 * global_clipnorm (the whole gradient) on a small model's gradient,
 * against the formulas of keras/src/optimizers/base_optimizer.py
 * (_clip_by_norm, clip_by_global_norm) computed here in double; a
 * variable under its norm, a zero variable, a NaN, and neither set.
 */
#include "cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "model.h"
#include "worker/clip.h"

/* Dense(3) over 4 inputs: kernel (4, 3) = 12 floats, then bias (3). */
static const char model_json[] =
    "{\"name\": \"c\", \"input_shape\": [4], \"layers\": [{\"type\": "
    "\"dense\", \"name\": \"dense\", \"units\": 3}], \"loss\": \"mse\", "
    "\"optimizer\": %s}";

static struct hc_model *model_with(const char *optimizer)
{
    static struct hc_model m;
    char buf[512];

    snprintf(buf, sizeof buf, model_json, optimizer);
    CU_ASSERT_EQUAL_FATAL(hc_model_parse(buf, strlen(buf), "t", &m), HC_OK);
    CU_ASSERT_EQUAL_FATAL(m.n_params, 15);
    return &m;
}

static void fill(float *g)
{
    for (int i = 0; i < 15; i++)
        g[i] = (float)((i * 7) % 11 - 5) / 2.0f;   /* kernel norm ~6.9 */
    g[12] = 0.1f;                                   /* bias norm ~0.17 */
    g[13] = -0.1f;
    g[14] = 0.05f;
}

static int close_rel(double got, double want)
{
    return fabs(got - want) <= 1e-6 * fabs(want) + 1e-9;
}

static void test_clipnorm(void)
{
    struct hc_model *m = model_with("{\"type\": \"sgd\", \"clipnorm\": 1.5}");
    float g[15], g0[15];
    int bad = 0;

    CU_ASSERT(wk_clip_by_norm(&m->optim));
    fill(g);
    memcpy(g0, g, sizeof g);
    wk_clip_grads(m, g);
    for (int v = 0, at = 0; v < 2; v++) {
        int n = v ? 3 : 12;
        double s2 = 0, norm;

        for (int i = 0; i < n; i++)
            s2 += (double)g0[at + i] * g0[at + i];
        norm = sqrt(s2);
        for (int i = 0; i < n; i++) {
            double want = g0[at + i] * 1.5 / (norm > 1.5 ? norm : 1.5);

            if (!close_rel(g[at + i], want)) {
                printf("\n  var %d elem %d: %.9g, want %.9g\n", v, i,
                       (double)g[at + i], want);
                bad++;
            }
        }
        at += n;
    }
    CU_ASSERT_EQUAL(bad, 0);
    /* the kernel was clipped to norm 1.5, the bias (under it) kept */
    CU_ASSERT(fabsf(g[0]) < fabsf(g0[0]));
    CU_ASSERT(close_rel(g[12], g0[12]));
    /* a zero variable stays zero */
    memset(g, 0, sizeof g);
    wk_clip_grads(m, g);
    for (int i = 0; i < 15; i++)
        bad += g[i] != 0.0f;
    CU_ASSERT_EQUAL(bad, 0);
}

static void test_global_clipnorm(void)
{
    struct hc_model *m = model_with("{\"type\": \"adam\", "
                                    "\"global_clipnorm\": 2.0}");
    float g[15], g0[15];
    double s2 = 0, norm, scale;
    int bad = 0;

    fill(g);
    memcpy(g0, g, sizeof g);
    wk_clip_grads(m, g);
    for (int i = 0; i < 15; i++)
        s2 += (double)g0[i] * g0[i];
    norm = sqrt(s2);
    scale = 2.0 * fmin(1.0 / norm, 1.0 / 2.0);
    for (int i = 0; i < 15; i++)
        bad += !close_rel(g[i], g0[i] * scale);
    CU_ASSERT_EQUAL(bad, 0);
    /* under the norm: scaled by 2·(1/2), 1 */
    for (int i = 0; i < 15; i++)
        g[i] = g0[i] / 100.0f;
    memcpy(g0, g, sizeof g);
    wk_clip_grads(m, g);
    CU_ASSERT(memcmp(g, g0, sizeof g) == 0);
    /* a NaN makes all NaN, as Keras's (use_norm - use_norm) */
    g[3] = NAN;
    wk_clip_grads(m, g);
    CU_ASSERT(isnan(g[0]) && isnan(g[14]));
}

static void test_none_and_refusals(void)
{
    struct hc_model *m = model_with("{\"type\": \"sgd\", \"clipvalue\": 1}");
    struct hc_optim_conf c;
    float g[15], g0[15];

    CU_ASSERT(!wk_clip_by_norm(&m->optim));   /* the shards clip values */
    fill(g);
    memcpy(g0, g, sizeof g);
    wk_clip_grads(m, g);
    CU_ASSERT(memcmp(g, g0, sizeof g) == 0);
    hc_optim_defaults(HC_OPT_ADAM, &c);
    c.clipnorm = 1;
    c.global_clipnorm = 1;
    CU_ASSERT_EQUAL(hc_optim_validate(&c, "m.json"), HC_ERR_CONFIG);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "only one of them can be "
                                  "set, as in Keras"));
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("clip", NULL, NULL);

    CU_add_test(s, "clipnorm per variable", test_clipnorm);
    CU_add_test(s, "global_clipnorm", test_global_clipnorm);
    CU_add_test(s, "neither; only one of the three", test_none_and_refusals);
}
