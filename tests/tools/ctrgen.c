/*
 * ctrgen.c — synthetic click-through data from a planted model, in the
 * Criteo TSV format (worker/data_ctr.h), so a click-through model's
 * accuracy can be checked against the truth.
 *
 *   ctrgen [--train-rows N] [--test-rows M] [--seed S] [--vocab V]
 *          [--zipf A] [--scale C] [--head H] TRAIN.tsv TEST.tsv
 *
 * Each row: 26 categorical fields, field f drawing a rank k from Zipf(A)
 * over its vocabulary V_f (V_f = 4 · (V/4)^(f/25), rounded: 4 values for
 * C1 up to V for C26), written as the 8 hex digits of a hash of
 * (seed, f, k); empty with probability 0.02 · (f mod 6). 13 integer fields,
 * field j: floor(exp(N(μ_j, 1.2))) with μ_j = 0.5 + 0.3 j; I2 is −1
 * or −2 one time in 20 (as Criteo's I2); empty with probability
 * 0.02 · (j mod 4). The label is Bernoulli(sigmoid(z)) with the planted
 * logit
 *   z = −1.6 + Σ_f C · g(seed, key(f, value)) + Σ_j w_j · (log(1 + x_j⁺) − μ_j)
 * — g a standard normal drawn by Box–Muller from splitmix64 hashes (no
 * table stored; an empty field has its own effect), key the reader's
 * (field · 2^33 + value, or + 2^32 for empty), C the --scale (0.25), w_j =
 * 0.15 · g(seed, j), x⁺ = max(x, 0), empty x = 0.
 * Rows stream to the files; only the test file's true probabilities are
 * kept, to write beside it TEST.tsv.bayes_auc: the exact AUC of the true
 * probabilities against the drawn labels (common/eval_metric.h's AUC), the
 * best any model can do on that file. Deterministic from the seed.
 */
#include "eval_metric.h"
#include "rng.h"
#include "clock.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_NUM 13
#define N_CAT 26
#define OUT_BUF (1 << 20)

struct gen {
    uint64_t seed;
    double zipf, scale, head;
    long long vocab[N_CAT];
    double w[N_NUM];
    /* Zipf rejection-inversion constants per field (Hörmann & Derflinger
     * 1996, as Apache Commons RNG's sampler) */
    double hx1[N_CAT], hn[N_CAT], s[N_CAT];
};

/* --- Zipf by rejection-inversion --------------------------------------- */

static double helper1(double x)
{
    return fabs(x) > 1e-8 ? log1p(x) / x : 1 - x * (0.5 - x * (1 / 3.0 - 0.25 * x));
}

static double helper2(double x)
{
    return fabs(x) > 1e-8 ? expm1(x) / x
                          : 1 + x * 0.5 * (1 + x * (1 / 3.0) * (1 + 0.25 * x));
}

static double h_integral(double a, double x)
{
    double lx = log(x);

    return helper2((1 - a) * lx) * lx;
}

static double h(double a, double x)
{
    return exp(-a * log(x));
}

static double h_integral_inverse(double a, double x)
{
    double t = x * (1 - a);

    if (t < -1)
        t = -1;
    return exp(helper1(t) * x);
}

static double uniform(uint64_t *st)
{
    return (double)(hc_splitmix64(st) >> 11) * 0x1.0p-53;
}

/* A rank in [1, vocab[f]] with P(k) ∝ k^−a. */
static long long zipf(const struct gen *g, int f, uint64_t *st)
{
    const double a = g->zipf;

    for (;;) {
        double u = g->hn[f] + uniform(st) * (g->hx1[f] - g->hn[f]);
        double x = h_integral_inverse(a, u);
        long long k = (long long)(x + 0.5);

        if (k < 1)
            k = 1;
        else if (k > g->vocab[f])
            k = g->vocab[f];
        if (k - x <= g->s[f] || u >= h_integral(a, k + 0.5) - h(a, k))
            return k;
    }
}

/* A standard normal from one 64-bit hash (Box–Muller on its halves). */
static double gauss(uint64_t hash)
{
    double u1 = ((double)(hash >> 32) + 0.5) * 0x1.0p-32;
    double u2 = ((double)(hash & 0xffffffffu) + 0.5) * 0x1.0p-32;

    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static void gen_init(struct gen *g, uint64_t seed, long long vocab,
                     double zipf_a, double scale, double head)
{
    g->seed = seed;
    g->zipf = zipf_a;
    g->scale = scale;
    g->head = head;
    for (int f = 0; f < N_CAT; f++) {
        double a = zipf_a;
        double v = 4.0 * pow((double)vocab / 4.0, f / 25.0);

        g->vocab[f] = v < 1 ? 1 : (long long)(v + 0.5);
        g->hx1[f] = h_integral(a, 1.5) - 1;
        g->hn[f] = h_integral(a, (double)g->vocab[f] + 0.5);
        g->s[f] = 2 - h_integral_inverse(a, h_integral(a, 2.5) - h(a, 2));
    }
    for (int j = 0; j < N_NUM; j++)
        g->w[j] = 0.15 * gauss(hc_mix64(seed ^ 0x5151515151515151ull ^
                                        (uint64_t)(j + 1)));
}

/* --- rows -------------------------------------------------------------- */

static char *put_int(char *p, long long x)
{
    char tmp[24];
    int n = 0;
    unsigned long long u = x < 0 ? (unsigned long long)-x
                                 : (unsigned long long)x;

    if (x < 0)
        *p++ = '-';
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static char *put_hex8(char *p, uint32_t v)
{
    static const char hex[] = "0123456789abcdef";

    for (int i = 7; i >= 0; i--)
        *p++ = hex[(v >> (4 * i)) & 15];
    return p;
}

/* One row into p (at most ~400 bytes); its true click probability into
 * *prob and its drawn label into *label. */
static char *row(const struct gen *g, uint64_t *st, char *p, double *prob,
                 int *label)
{
    char body[512], *q = body;
    double z = -1.6;

    for (int j = 0; j < N_NUM; j++) {
        double mu = 0.5 + 0.3 * j, l = 0;
        long long x;

        *q++ = '\t';
        if (uniform(st) < 0.02 * (j % 4)) {
            z += g->w[j] * (0 - mu);
            continue;
        }
        if (j == 1 && uniform(st) < 0.05) {
            x = uniform(st) < 0.5 ? -1 : -2;
        } else {
            double r = uniform(st), s2 = uniform(st);
            double n01 = sqrt(-2 * log(1 - r)) * cos(2 * M_PI * s2);

            x = (long long)floor(exp(mu + 1.2 * n01));
            l = log1p((double)x);
        }
        z += g->w[j] * (l - mu);
        q = put_int(q, x);
    }
    for (int f = 0; f < N_CAT; f++) {
        uint64_t key;
        double shrink = 1;

        *q++ = '\t';
        if (uniform(st) < 0.02 * (f % 6)) {
            key = (uint64_t)f << 33 | 1ull << 32;
        } else {
            long long k = zipf(g, f, st);
            uint32_t v = (uint32_t)hc_mix64(g->seed ^ (uint64_t)f << 40 ^
                                            (uint64_t)k);

            key = (uint64_t)f << 33 | v;
            q = put_hex8(q, v);
            shrink = sqrt(g->head / (g->head + (double)k));
        }
        z += g->scale * shrink * gauss(hc_mix64(g->seed ^ 0xA5A5A5A5A5A5A5A5ull ^
                                       hc_mix64(key)));
    }
    *prob = 1 / (1 + exp(-z));
    *label = uniform(st) < *prob;
    *p++ = (char)('0' + *label);
    memcpy(p, body, (size_t)(q - body));
    p += q - body;
    *p++ = '\n';
    return p;
}

/* Write n rows from stream `stream` to path; with probs and labels
 * non-NULL, keep each row's probability (n) and label (n). Returns the
 * number of positive labels, or −1 (message printed) when the file cannot
 * be written. */
static long long write_rows(const struct gen *g, const char *path,
                            long long n, uint64_t stream, float *probs,
                            int32_t *labels)
{
    FILE *f = fopen(path, "wb");
    char *buf = malloc(OUT_BUF), *p;
    uint64_t st = hc_mix64(g->seed ^ hc_mix64(stream));
    long long pos = 0;
    int bad = 0;

    if (f == NULL || buf == NULL) {
        fprintf(stderr, "ctrgen: cannot write %s\n", path);
        if (f)
            fclose(f);
        free(buf);
        return -1;
    }
    p = buf;
    for (long long i = 0; i < n && !bad; i++) {
        double prob;
        int label;

        p = row(g, &st, p, &prob, &label);
        pos += label;
        if (probs) {
            probs[i] = (float)prob;
            labels[i] = label;
        }
        if (p - buf > OUT_BUF - 1024 || i == n - 1) {
            bad = fwrite(buf, 1, (size_t)(p - buf), f) != (size_t)(p - buf);
            p = buf;
        }
    }
    free(buf);
    if ((fclose(f) != 0) | bad) {
        fprintf(stderr, "ctrgen: write failed: %s\n", path);
        return -1;
    }
    return pos;
}

static int usage(void)
{
    fprintf(stderr, "usage: ctrgen [--train-rows N] [--test-rows M] [--seed S] "
            "[--vocab V] [--zipf A] [--scale C] [--head H] TRAIN.tsv TEST.tsv\n");
    return 2;
}

int main(int argc, char **argv)
{
    long long n_train = 2000000, n_test = 200000, vocab = 1000000;
    unsigned long long seed = 1;
    double zipf_a = 1.05, scale = 0.25, head = 100, t0 = hc_now_s(), auc = 0, ll = 0;
    const char *train = NULL, *test = NULL;
    struct gen g;
    struct hc_eval_metric mt = { .kind = HC_EM_AUC };
    float *probs;
    int32_t *labels;
    long long pos_train, pos_test;
    char auc_path[1024];
    FILE *f;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--train-rows") == 0 && v) n_train = atoll(v), i++;
        else if (strcmp(a, "--test-rows") == 0 && v) n_test = atoll(v), i++;
        else if (strcmp(a, "--seed") == 0 && v) seed = strtoull(v, NULL, 0), i++;
        else if (strcmp(a, "--vocab") == 0 && v) vocab = atoll(v), i++;
        else if (strcmp(a, "--zipf") == 0 && v) zipf_a = atof(v), i++;
        else if (strcmp(a, "--scale") == 0 && v) scale = atof(v), i++;
        else if (strcmp(a, "--head") == 0 && v) head = atof(v), i++;
        else if (a[0] == '-') return usage();
        else if (!train) train = a;
        else if (!test) test = a;
        else return usage();
    }
    if (!train || !test || n_train < 1 || n_test < 2 || n_test > 1 << 30 ||
        vocab < 4 || vocab > 1ll << 32 || !(zipf_a > 0) || zipf_a == 1.0 || !(head > 0)) {
        fprintf(stderr, "ctrgen: need both files, rows ≥ 1 (test ≥ 2, "
                "< 2^30), 4 ≤ vocab ≤ 2^32, zipf > 0 and ≠ 1\n");
        return usage();
    }
    gen_init(&g, seed, vocab, zipf_a, scale, head);
    probs = malloc((size_t)n_test * sizeof *probs);
    labels = malloc((size_t)n_test * sizeof *labels);
    if (!probs || !labels) {
        fprintf(stderr, "ctrgen: no memory for %lld test rows\n", n_test);
        return 1;
    }
    if ((pos_train = write_rows(&g, train, n_train, 1, NULL, NULL)) < 0 ||
        (pos_test = write_rows(&g, test, n_test, 2, probs, labels)) < 0)
        return 1;
    if (hc_eval_metric_value(&mt, 1, 0, probs, labels, (int)n_test, 1, &auc)
        != 0) {
        fprintf(stderr, "ctrgen: AUC failed\n");
        return 1;
    }
    for (long long i = 0; i < n_test; i++) {
        double p = probs[i] < 1e-7 ? 1e-7 : probs[i] > 1 - 1e-7 ? 1 - 1e-7 : probs[i];

        ll -= labels[i] ? log(p) : log(1 - p);
    }
    ll /= (double)n_test;
    snprintf(auc_path, sizeof auc_path, "%s.bayes_auc", test);
    if ((f = fopen(auc_path, "w")) == NULL ||
        fprintf(f, "%.6f\n", auc) < 0 || fclose(f) != 0) {
        fprintf(stderr, "ctrgen: cannot write %s\n", auc_path);
        return 1;
    }
    printf("ctrgen: seed %llu, vocab %lld, zipf %.3g: %lld train rows "
           "(%.1f%% clicks) in %s, %lld test rows (%.1f%% clicks) in %s; "
           "Bayes AUC %.4f, Bayes log loss %.4f (in %s); %.1f s\n",
           seed, vocab, zipf_a, n_train, 100.0 * (double)pos_train / (double)n_train,
           train, n_test, 100.0 * (double)pos_test / (double)n_test, test, auc,
           ll, auc_path, hc_now_s() - t0);
    free(probs);
    free(labels);
    return 0;
}
