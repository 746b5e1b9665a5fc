/*
 * test_eval_metric.c — Keras's metrics (common/eval_metric.h): each value
 * against hand-computed ones (AUC with ties counting 1/2, top-k with ties
 * at the boundary). Reading them from a model file is test_model.c's.
 */
#include <math.h>
#include <stdio.h>

#include "cu.h"
#include "err.h"
#include "eval_metric.h"

/* Five samples of one output (probabilities, or logits of the same
 * order); positives score 0.9, 0.2, 0.6, negatives 0.4, 0.6. */
static const float bin_p[5] = { 0.9f, 0.4f, 0.6f, 0.2f, 0.6f };
static const float bin_z[5] = { 2.0f, -0.5f, 0.5f, -1.5f, 0.5f };
static const int32_t bin_y[5] = { 1, 0, 0, 1, 1 };

/* Two samples of three softmax outputs. */
static const float cat_p[6] = { 0.2f, 0.5f, 0.3f, 0.6f, 0.3f, 0.1f };
static const int32_t cat_y[2] = { 2, 0 };

static void test_values(void)
{
    static const struct {
        enum hc_eval_metric_kind kind;
        float threshold;
        int k, bce, logits, c, n;
        const float *out;
        const int32_t *y;
        double want;
    } t[] = {
        /* accuracy, binary by the loss: > 0.5 is 1,0,1,0,1 → 3 of 5 */
        { HC_EM_ACCURACY, 0.5f, 5, 1, 0, 1, 5, bin_p, bin_y, 0.6 },
        { HC_EM_ACCURACY, 0.5f, 5, 1, 1, 1, 5, bin_z, bin_y, 0.6 },
        /* threshold 0.3: 1,1,1,0,1 → 2 of 5 */
        { HC_EM_BINARY_ACCURACY, 0.3f, 5, 1, 0, 1, 5, bin_p, bin_y, 0.4 },
        /* pairs (pos, neg): 0.9 beats both, 0.2 neither, 0.6 beats 0.4
         * and ties 0.6 → (2 + 0 + 1.5) / 6 */
        { HC_EM_AUC, 0.5f, 5, 1, 0, 1, 5, bin_p, bin_y, 3.5 / 6 },
        { HC_EM_AUC, 0.5f, 5, 1, 1, 1, 5, bin_z, bin_y, 3.5 / 6 },
        /* argmax 1 ≠ 2, 0 = 0 */
        { HC_EM_ACCURACY, 0.5f, 5, 0, 0, 3, 2, cat_p, cat_y, 0.5 },
        { HC_EM_CATEGORICAL_ACCURACY, 0.5f, 5, 0, 0, 3, 2, cat_p, cat_y, 0.5 },
        { HC_EM_SPARSE_CATEGORICAL_ACCURACY, 0.5f, 5, 0, 0, 3, 2, cat_p,
          cat_y, 0.5 },
        /* label 2 is second in row 0 */
        { HC_EM_SPARSE_TOP_K, 0.5f, 2, 0, 0, 3, 2, cat_p, cat_y, 1.0 },
        { HC_EM_TOP_K, 0.5f, 1, 0, 0, 3, 2, cat_p, cat_y, 0.5 },
        /* one-hot vs > 0.5: row 0 matches 2 of 3, row 1 all 3 */
        { HC_EM_BINARY_ACCURACY, 0.5f, 5, 0, 0, 3, 2, cat_p, cat_y, 5.0 / 6 },
        /* flattened: positives 0.3, 0.6; negatives 0.2, 0.5, 0.3, 0.1:
         * 0.3 beats 0.2, 0.1 and ties 0.3 (2.5), 0.6 beats all 4 */
        { HC_EM_AUC, 0.5f, 5, 0, 0, 3, 2, cat_p, cat_y, 6.5 / 8 },
    };

    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        struct hc_eval_metric e = { .kind = t[i].kind, .name = "m",
                                    .threshold = t[i].threshold, .k = t[i].k };
        double v = -1;
        int rv = hc_eval_metric_value(&e, t[i].bce, t[i].logits, t[i].out,
                                      t[i].y, t[i].n, t[i].c, &v);

        if (rv != HC_OK || fabs(v - t[i].want) > 1e-9)
            printf("\n  row %zu: rv %d, value %.9f, wanted %.9f\n", i, rv, v,
                   t[i].want);
        CU_ASSERT_EQUAL(rv, HC_OK);
        CU_ASSERT_DOUBLE_EQUAL(v, t[i].want, 1e-9);
    }
}

static void test_ties_and_edges(void)
{
    struct hc_eval_metric top1 = { .kind = HC_EM_SPARSE_TOP_K, .k = 1 };
    struct hc_eval_metric auc = { .kind = HC_EM_AUC, .name = "auc" };
    const float tie[3] = { 0.4f, 0.4f, 0.2f }, same[2] = { 0.5f, 0.5f };
    const float logits[6] = { 0.0f, 1.0f, 2.0f, 3.0f, 2.0f, 1.0f };
    const int32_t one[1] = { 1 }, neg[2] = { 0, 0 }, mixed[2] = { 1, 0 };
    double v = -1;

    /* classes tied at the boundary are all in the top k (in_top_k) */
    CU_ASSERT_EQUAL(hc_eval_metric_value(&top1, 0, 0, tie, one, 1, 3, &v),
                    HC_OK);
    CU_ASSERT_DOUBLE_EQUAL(v, 1.0, 1e-12);
    /* all scores tied: 1/2 */
    CU_ASSERT_EQUAL(hc_eval_metric_value(&auc, 1, 0, same, mixed, 2, 1, &v),
                    HC_OK);
    CU_ASSERT_DOUBLE_EQUAL(v, 0.5, 1e-12);
    /* no positive: 0, as Keras */
    CU_ASSERT_EQUAL(hc_eval_metric_value(&auc, 1, 0, same, neg, 2, 1, &v),
                    HC_OK);
    CU_ASSERT_DOUBLE_EQUAL(v, 0.0, 1e-12);
    /* logits of 3 classes go through softmax: rows (.090, .245, .665)
     * and (.665, .245, .090), labels 2 and 0: both positives (.665) beat
     * every negative (.090, .245, .245, .090) → 1 */
    CU_ASSERT_EQUAL(hc_eval_metric_value(&auc, 0, 1, logits,
                                         (const int32_t[]){ 2, 0 }, 2, 3, &v),
                    HC_OK);
    CU_ASSERT_DOUBLE_EQUAL(v, 1.0, 1e-12);
    /* a NaN score (a model gone wrong) ends, within [0, 1]; it looped
     * forever before (found by tests/tools/ctrgen) */
    CU_ASSERT_EQUAL(hc_eval_metric_value(&auc, 1, 0,
                                         (const float[]){ NAN, 0.5f, 0.2f },
                                         (const int32_t[]){ 1, 0, 1 }, 3, 1,
                                         &v), HC_OK);
    CU_ASSERT(v >= 0.0 && v <= 1.0);
    CU_ASSERT_EQUAL(hc_eval_metric_value(&auc, 0, 0, same, neg, 0, 1, &v),
                    HC_ERR_INVAL);
    CU_ASSERT_TRUE(hc_eval_metric_binary(1, 1));
    CU_ASSERT_FALSE(hc_eval_metric_binary(1, 3));
    CU_ASSERT_FALSE(hc_eval_metric_binary(0, 1));
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("eval_metric", NULL, NULL);

    CU_add_test(s, "values against hand-computed ones", test_values);
    CU_add_test(s, "ties, logits, no positives", test_ties_and_edges);
}
