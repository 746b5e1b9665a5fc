/*
 * test_rowmap.c — common/rowmap: the row → shard routing against its
 * documented formula (computed here with splitmix64's constants written
 * out, and splitmix64's known first output), even spread of distinct ids
 * under Zipf-skewed, consecutive and high-bit ids, the de-duplication by
 * shard (sorted, unique, each id where it routes, the inverse index)
 * with gather and gradient sums against plain loops, reuse of one map
 * over batches of other sizes, and the refusals.
 */
#include "cu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"
#include "rowmap.h"

/* splitmix64's finaliser, written out from the paper's constants. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* rowmap.h's formula, as its comment gives it. */
static uint32_t want_shard(uint32_t var, uint64_t row, uint32_t n)
{
    uint64_t h = mix(row ^ mix(0x9E3779B97F4A7C15ull * ((uint64_t)var + 1)));

    return (uint32_t)(((unsigned __int128)h * n) >> 64);
}

static void test_formula(void)
{
    static const uint64_t rows[] = {0, 1, 2, 3, 1000, 123456789,
                                    (1ull << 40) + 7, (1ull << 62) - 1};
    int bad = 0;

    /* splitmix64 seeded 0: its first output, from the reference code. */
    CU_ASSERT_EQUAL(hc_mix64(HC_GOLDEN_GAMMA), 0xE220A8397B1DCDAFull);
    for (uint32_t var = 0; var < 5; var++)
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            for (uint32_t n = 1; n <= 9; n++)
                bad += hc_row_shard(var, rows[i], n) !=
                       want_shard(var, rows[i], n);
    CU_ASSERT_EQUAL(bad, 0);
    /* One shard: everything on it. Two variables route row 0 apart often
     * enough that their hot rows do not all meet on one shard. */
    for (uint64_t r = 0; r < 100; r++)
        bad += hc_row_shard(3, r, 1) != 0;
    CU_ASSERT_EQUAL(bad, 0);
    {
        int same = 0;

        for (uint32_t v = 0; v < 64; v++)
            same += hc_row_shard(v, 0, 8) == hc_row_shard(0, 0, 8);
        CU_ASSERT(same < 24);       /* 1/8 of 64 = 8 expected */
    }
}

/* Zipf(s) over 1 .. V by inverse CDF: a table of V cumulative weights. */
struct zipf {
    double *cdf;
    size_t v;
    uint64_t state;
};

static void zipf_init(struct zipf *z, size_t v, double s, uint64_t seed)
{
    double sum = 0;

    z->cdf = malloc(v * sizeof *z->cdf);
    z->v = v;
    z->state = seed;
    for (size_t i = 0; i < v; i++)
        z->cdf[i] = (sum += 1.0 / pow((double)(i + 1), s));
    for (size_t i = 0; i < v; i++)
        z->cdf[i] /= sum;
}

static uint64_t zipf_draw(struct zipf *z)
{
    double u = (double)(hc_splitmix64(&z->state) >> 11) * 0x1.0p-53;
    size_t lo = 0, hi = z->v - 1;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;

        if (z->cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* max/mean of distinct ids per shard over n_shards shards. */
static double spread(const struct hc_rowmap *m)
{
    double mean = (double)m->n_unique / m->n_shards, hi = 0;

    for (uint32_t s = 0; s < m->n_shards; s++) {
        double c = (double)(m->start[s + 1] - m->start[s]);

        hi = c > hi ? c : hi;
    }
    return hi / mean;
}

static void test_balance(void)
{
    enum { N = 400000 };
    uint64_t *ids = malloc(N * sizeof *ids);
    struct hc_rowmap m = {0};
    struct zipf z;

    /* Zipf 1.05 over 10^6 ids, hashed into a 2^40 id space as a reader of
     * categorical values would: the distinct ids spread within 3 %. */
    zipf_init(&z, 1000000, 1.05, 42);
    for (size_t i = 0; i < N; i++)
        ids[i] = mix(zipf_draw(&z)) >> 24;
    CU_ASSERT_EQUAL_FATAL(hc_rowmap_build(&m, 1, ids, N, 8, 1ull << 40),
                          HC_OK);
    CU_ASSERT(m.n_unique > 50000 && m.n_unique < N);
    printf("\n  zipf: %zu distinct of %d, max/mean %.4f over 8 shards",
           m.n_unique, N, spread(&m));
    CU_ASSERT(spread(&m) < 1.03);
    /* Zipf ranks as they are (small consecutive ids). */
    for (size_t i = 0; i < N; i++)
        ids[i] = zipf_draw(&z);
    CU_ASSERT_EQUAL_FATAL(hc_rowmap_build(&m, 0, ids, N, 5, 1000000), HC_OK);
    printf(", ranks %.4f over 5", spread(&m));
    CU_ASSERT(spread(&m) < 1.03);
    /* Ids that differ only in their high bits. */
    for (size_t i = 0; i < 100000; i++)
        ids[i] = (uint64_t)i << 40;
    CU_ASSERT_EQUAL_FATAL(hc_rowmap_build(&m, 2, ids, 100000, 4,
                                          HC_ROW_ID_LIMIT), HC_OK);
    printf(", high bits %.4f over 4\n", spread(&m));
    CU_ASSERT(spread(&m) < 1.03);
    hc_rowmap_free(&m);
    free(z.cdf);
    free(ids);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Every property of a built map for batch ids[0 .. n). */
static int check_map(const struct hc_rowmap *m, uint32_t var,
                     const uint64_t *ids, size_t n)
{
    uint64_t *sorted = malloc((n ? n : 1) * sizeof *sorted);
    size_t distinct = 0;
    int bad = 0;

    memcpy(sorted, ids, n * sizeof *ids);
    qsort(sorted, n, sizeof *sorted, cmp_u64);
    for (size_t i = 0; i < n; i++)
        distinct += i == 0 || sorted[i] != sorted[i - 1];
    bad += m->n != n || m->n_unique != distinct;
    bad += m->start[0] != 0 || m->start[m->n_shards] != m->n_unique;
    for (uint32_t s = 0; s < m->n_shards; s++)
        for (size_t u = m->start[s]; u < m->start[s + 1]; u++) {
            bad += hc_row_shard(var, m->ids[u], m->n_shards) != s;
            bad += u > m->start[s] && m->ids[u] <= m->ids[u - 1];
        }
    for (size_t i = 0; i < n; i++)
        bad += m->inv[i] >= m->n_unique || m->ids[m->inv[i]] != ids[i];
    free(sorted);
    return bad;
}

static void test_dedup(void)
{
    enum { N = 5000, DIM = 3 };
    static const size_t sizes[] = {N, 1, 0, 17, 2 * N};
    uint64_t *ids = malloc(2 * N * sizeof *ids), st = 7;
    float *rows = malloc(2 * N * DIM * sizeof *rows);
    float *out = malloc(2 * N * DIM * sizeof *out);
    float *grad = malloc(2 * N * DIM * sizeof *grad);
    double *want = malloc(2 * N * DIM * sizeof *want);
    struct hc_rowmap m = {0};

    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t];
        int bad = 0;

        for (size_t i = 0; i < n; i++)      /* many repeats */
            ids[i] = hc_splitmix64(&st) % (n / 3 + 1) * 1000003;
        CU_ASSERT_EQUAL_FATAL(hc_rowmap_build(&m, 4, ids, n, 3,
                                              HC_ROW_ID_LIMIT), HC_OK);
        CU_ASSERT_EQUAL(check_map(&m, 4, ids, n), 0);
        /* gather: the batch's rows are the unique ones by id */
        for (size_t u = 0; u < m.n_unique; u++)
            for (int j = 0; j < DIM; j++)
                rows[u * DIM + j] = (float)(m.ids[u] % 1000) + 0.25f * j;
        hc_rowmap_gather(&m, rows, DIM, out);
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < DIM; j++)
                bad += out[i * DIM + j] != (float)(ids[i] % 1000) + 0.25f * j;
        /* sum: each unique id's gradient is its positions' sum */
        for (size_t i = 0; i < n * DIM; i++)
            grad[i] = (float)(i % 7) - 3.0f;
        hc_rowmap_sum(&m, grad, DIM, out);
        for (size_t u = 0; u < m.n_unique * DIM; u++)
            want[u] = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t u = 0; u < m.n_unique; u++)
                if (m.ids[u] == ids[i])
                    for (int j = 0; j < DIM; j++)
                        want[u * DIM + j] += grad[i * DIM + j];
        for (size_t u = 0; u < m.n_unique * DIM; u++)
            bad += out[u] != (float)want[u];
        CU_ASSERT_EQUAL(bad, 0);
    }
    hc_rowmap_free(&m);
    free(ids);
    free(rows);
    free(out);
    free(grad);
    free(want);
}

static void test_errors(void)
{
    uint64_t ids[] = {5, 9, 100, 5};
    struct hc_rowmap m = {0};

    CU_ASSERT_EQUAL(hc_rowmap_build(&m, 0, ids, 4, 0, 1000), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "no shards"));
    CU_ASSERT_EQUAL(hc_rowmap_build(&m, 6, ids, 4, 2, 100), HC_ERR_INVAL);
    CU_ASSERT_PTR_NOT_NULL(strstr(hc_err_msg(), "id 100 at position 2 of "
                                                "variable 6"));
    CU_ASSERT_EQUAL(m.n, 0);
    CU_ASSERT_EQUAL(m.n_unique, 0);
    /* the map stays usable */
    CU_ASSERT_EQUAL_FATAL(hc_rowmap_build(&m, 6, ids, 4, 2, 101), HC_OK);
    CU_ASSERT_EQUAL(m.n_unique, 3);
    CU_ASSERT_EQUAL(check_map(&m, 6, ids, 4), 0);
    hc_rowmap_free(&m);
}

void hp_test_register(void)
{
    CU_pSuite s = CU_add_suite("rowmap", NULL, NULL);

    CU_add_test(s, "routing is the documented formula", test_formula);
    CU_add_test(s, "distinct ids spread evenly (Zipf, ranks, high bits)",
                test_balance);
    CU_add_test(s, "de-duplication by shard, inverse, gather, sum",
                test_dedup);
    CU_add_test(s, "refusals; a map reused after one", test_errors);
}
