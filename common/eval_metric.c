/*
 * eval_metric.c — the values of Keras's metrics over a whole evaluation set
 * (see eval_metric.h): accuracies by counting, AUC by ranking every
 * (score, label) pair with average ranks for ties.
 */
#include "eval_metric.h"

#include <math.h>
#include <stdlib.h>

#include "err.h"

int hc_eval_metric_binary(int loss_is_bce, int n_out)
{
    return loss_is_bce && n_out == 1;
}

/* Row i of out as probabilities into p (c). */
static void probs(const float *row, int c, int from_logits, double *p)
{
    double mx = row[0], s = 0;
    int j;

    if (!from_logits) {
        for (j = 0; j < c; j++)
            p[j] = row[j];
        return;
    }
    if (c == 1) {
        p[0] = 1 / (1 + exp(-(double)row[0]));
        return;
    }
    for (j = 1; j < c; j++)
        mx = row[j] > mx ? row[j] : mx;
    for (j = 0; j < c; j++)
        s += p[j] = exp(row[j] - mx);
    for (j = 0; j < c; j++)
        p[j] /= s;
}

/* Sample i's hit (0 to 1) under mt; p its probabilities (c). */
static double hit(const struct hc_eval_metric *mt, int loss_is_bce,
                  const double *p, int32_t label, int c)
{
    enum hc_eval_metric_kind kind = mt->kind;
    double thr = mt->kind == HC_EM_ACCURACY ? 0.5 : mt->threshold;
    int j, above = 0, best = 0, k = mt->k, ok = 0;

    if (kind == HC_EM_ACCURACY)
        kind = hc_eval_metric_binary(loss_is_bce, c)
                   ? HC_EM_BINARY_ACCURACY : HC_EM_CATEGORICAL_ACCURACY;
    switch (kind) {
    case HC_EM_BINARY_ACCURACY:
        if (c == 1)
            return (p[0] > thr) == (label != 0);
        for (j = 0; j < c; j++)
            ok += (p[j] > thr) == (j == label);
        return (double)ok / c;
    case HC_EM_CATEGORICAL_ACCURACY:
    case HC_EM_SPARSE_CATEGORICAL_ACCURACY:
        if (c == 1)
            return (p[0] > 0.5) == (label != 0);
        for (j = 1; j < c; j++)
            best = p[j] > p[best] ? j : best;
        return best == label;
    case HC_EM_TOP_K:
    case HC_EM_SPARSE_TOP_K:
        /* in_top_k: classes tied at the boundary all count as in. */
        if (label < 0 || label >= c)
            return 0;
        for (j = 0; j < c; j++)
            above += p[j] > p[label];
        return above < k;
    default:
        return 0;
    }
}

struct pair {
    double score;
    int pos;
};

static int by_score(const void *a, const void *b)
{
    double x = ((const struct pair *)a)->score,
           y = ((const struct pair *)b)->score;

    return (x > y) - (x < y);
}

/* The Mann-Whitney statistic: (Σ ranks of positives − P(P+1)/2) / (P·N),
 * tied scores sharing their average rank. */
static double rank_auc(struct pair *v, size_t m)
{
    double rank_sum = 0, pos = 0, neg;
    size_t i = 0, j;

    qsort(v, m, sizeof *v, by_score);
    while (i < m) {
        int tie_pos = v[i].pos;

        /* from i + 1: a NaN score equals nothing, itself included */
        for (j = i + 1; j < m && v[j].score == v[i].score; j++)
            tie_pos += v[j].pos;
        /* ranks i+1 … j, average (i + 1 + j) / 2 */
        rank_sum += tie_pos * (double)(i + 1 + j) / 2;
        pos += tie_pos;
        i = j;
    }
    neg = (double)m - pos;
    if (pos == 0 || neg == 0)
        return 0;
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

static int auc(int from_logits, const float *out, const int32_t *labels,
               int n, int c, double *p, double *value)
{
    size_t m = (size_t)n * (size_t)c, at = 0;
    struct pair *v = malloc(m * sizeof *v);
    int i, j;

    if (!v)
        return hc_err_set(HC_ERR_NOMEM, "out of memory for AUC over %zu "
                          "scores", m);
    for (i = 0; i < n; i++) {
        probs(out + (size_t)i * c, c, from_logits, p);
        for (j = 0; j < c; j++, at++) {
            v[at].score = p[j];
            v[at].pos = c == 1 ? labels[i] != 0 : labels[i] == j;
        }
    }
    *value = rank_auc(v, m);
    free(v);
    return HC_OK;
}

int hc_eval_metric_value(const struct hc_eval_metric *mt, int loss_is_bce,
                         int from_logits, const float *out,
                         const int32_t *labels, int n, int c, double *value)
{
    double sum = 0, *p;
    int i, rv = HC_OK;

    if (n < 1 || c < 1)
        return hc_err_set(HC_ERR_INVAL, "metric %s over %d samples of %d "
                          "outputs", mt->name, n, c);
    if (!(p = malloc((size_t)c * sizeof *p)))
        return hc_err_set(HC_ERR_NOMEM, "out of memory for metric %s",
                          mt->name);
    if (mt->kind == HC_EM_AUC) {
        rv = auc(from_logits, out, labels, n, c, p, value);
    } else {
        for (i = 0; i < n; i++) {
            probs(out + (size_t)i * c, c, from_logits, p);
            sum += hit(mt, loss_is_bce, p, labels[i], c);
        }
        *value = sum / n;
    }
    free(p);
    return rv;
}
