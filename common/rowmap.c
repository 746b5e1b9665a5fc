/*
 * rowmap.c — row → shard routing of row-sparse tables and the batch's
 * de-duplication by shard (see rowmap.h for the formula and the
 * contract): each id is tagged with its shard and position, the tags are
 * sorted by (shard, id, position), and each run of one id becomes one
 * unique id, every position in the run pointing back at it. The sort is
 * a least-significant-digit radix sort, stable, so the tags (made in
 * position order) need sorting by id and then by shard alone: a batch of
 * 512 × 26 ids costs a few passes over 13,312 tags, not qsort's 14
 * compares a tag (measured: 18 % of a click-through worker's time).
 * Digits of 12 bits: ids below 2^24 (a table of 2^23 rows) in two passes;
 * the variable's salt is hashed once a build, not once an id.
 */
#include "rowmap.h"

#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "rng.h"

/* The formula's salt of variable var, the same for each of its rows. */
static uint64_t var_salt(uint32_t var)
{
    return hc_mix64(HC_GOLDEN_GAMMA * ((uint64_t)var + 1));
}

/* The formula for a row of a variable of that salt (one shard: 0, the
 * product's high word being 0 whatever h is). */
static uint32_t shard_of(uint64_t salt, uint64_t row, uint32_t n_shards)
{
    if (n_shards == 1)
        return 0;
    return (uint32_t)(((unsigned __int128)hc_mix64(row ^ salt) * n_shards) >>
                      64);
}

uint32_t hc_row_shard(uint32_t var, uint64_t row, uint32_t n_shards)
{
    return shard_of(var_salt(var), row, n_shards);
}

#define DIGIT_BITS 12
#define DIGITS (1u << DIGIT_BITS)
#define BY_SHARD (-1)

/* A tag's digit: its id's bits [shift, shift + DIGIT_BITS), or its shard
 * (shift BY_SHARD). */
static inline size_t digit_of(const struct hc_rowkey *k, int shift)
{
    return shift == BY_SHARD ? k->shard : (k->id >> shift) & (DIGITS - 1);
}

/* One stable counting pass of a[0 .. n) into b by digit_of(·, shift), below
 * n_digits; count (n_digits) its scratch. 0 when every tag has the first
 * tag's digit (nothing moved: b is not written), else 1. */
static int counting_pass(const struct hc_rowkey *a, struct hc_rowkey *b,
                         size_t n, size_t n_digits, size_t *count, int shift)
{
    size_t sum = 0;

    memset(count, 0, n_digits * sizeof *count);
    for (size_t i = 0; i < n; i++)
        count[digit_of(&a[i], shift)]++;
    if (count[digit_of(&a[0], shift)] == n)
        return 0;
    for (size_t d = 0; d < n_digits; d++) {
        size_t c = count[d];

        count[d] = sum;
        sum += c;
    }
    for (size_t i = 0; i < n; i++)
        b[count[digit_of(&a[i], shift)]++] = a[i];
    return 1;
}

/* m->keys[0 .. n), made in position order, sorted by (shard, id,
 * position): by id, digit after digit from the lowest, then by shard, each
 * pass stable. The sorted tags end in m->keys (the halves swapped). */
static void sort_keys(struct hc_rowmap *m, size_t n, uint32_t n_shards)
{
    struct hc_rowkey *a = m->keys, *b = m->tmp, *t;
    size_t count[DIGITS];
    uint64_t all = 0;
    int bits;

    if (n < 2)
        return;
    for (size_t i = 0; i < n; i++)
        all |= a[i].id;
    bits = all ? 64 - __builtin_clzll(all) : 0;
    for (int shift = 0; shift < bits; shift += DIGIT_BITS)
        if (counting_pass(a, b, n, DIGITS, count, shift)) {
            t = a;
            a = b;
            b = t;
        }
    /* m->start (n_shards + 1) counts: the build fills it afresh after. */
    if (n_shards > 1 && counting_pass(a, b, n, n_shards, m->start, BY_SHARD)) {
        t = a;
        a = b;
        b = t;
    }
    m->keys = a;
    m->tmp = b;
}

/* Room for n ids and n_shards shards. */
static int reserve(struct hc_rowmap *m, size_t n, uint32_t n_shards)
{
    if (n > m->cap) {
        size_t cap = m->cap ? m->cap : 256;
        void *a, *b, *c, *d;

        while (cap < n)
            cap *= 2;
        a = realloc(m->ids, cap * sizeof *m->ids);
        if (a)
            m->ids = a;
        b = realloc(m->inv, cap * sizeof *m->inv);
        if (b)
            m->inv = b;
        c = realloc(m->keys, cap * sizeof *m->keys);
        if (c)
            m->keys = c;
        d = realloc(m->tmp, cap * sizeof *m->tmp);
        if (d)
            m->tmp = d;
        if (!a || !b || !c || !d)
            return hc_err_set(HC_ERR_NOMEM, "row map: out of memory for %zu "
                              "ids", n);
        m->cap = cap;
    }
    if (!m->start || n_shards > m->shards_cap) {
        size_t *s = realloc(m->start, ((size_t)n_shards + 1) * sizeof *s);

        if (!s)
            return hc_err_set(HC_ERR_NOMEM, "row map: out of memory for %u "
                              "shards", n_shards);
        m->start = s;
        m->shards_cap = n_shards;
    }
    return HC_OK;
}

int hc_rowmap_build(struct hc_rowmap *m, uint32_t var, const uint64_t *ids,
                    size_t n, uint32_t n_shards, uint64_t limit)
{
    uint64_t salt;
    size_t u = 0;
    int rv;

    m->n = m->n_unique = 0;
    if (n_shards == 0)
        return hc_err_set(HC_ERR_INVAL, "row map: no shards to route to");
    if (n > UINT32_MAX)
        return hc_err_set(HC_ERR_INVAL, "row map: %zu ids in one batch; at "
                          "most %u", n, UINT32_MAX);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= limit)
            return hc_err_set(HC_ERR_INVAL, "row map: id %llu at position %zu "
                              "of variable %u is not below the table's "
                              "input_dim %llu", (unsigned long long)ids[i], i,
                              var, (unsigned long long)limit);
    if ((rv = reserve(m, n, n_shards)) != HC_OK)
        return rv;
    salt = var_salt(var);
    for (size_t i = 0; i < n; i++)
        m->keys[i] = (struct hc_rowkey){ids[i],
                                        shard_of(salt, ids[i], n_shards),
                                        (uint32_t)i};
    sort_keys(m, n, n_shards);
    memset(m->start, 0, ((size_t)n_shards + 1) * sizeof *m->start);
    for (size_t i = 0; i < n; i++) {
        const struct hc_rowkey *k = &m->keys[i];

        if (u == 0 || k->id != m->ids[u - 1]) {
            m->ids[u++] = k->id;
            m->start[k->shard + 1]++;
        }
        m->inv[k->pos] = (uint32_t)(u - 1);
    }
    for (uint32_t s = 0; s < n_shards; s++)
        m->start[s + 1] += m->start[s];
    m->n_shards = n_shards;
    m->n = n;
    m->n_unique = u;
    return HC_OK;
}

void hc_rowmap_gather(const struct hc_rowmap *m, const float *rows,
                      size_t dim, float *out)
{
    for (size_t i = 0; i < m->n; i++)
        memcpy(out + i * dim, rows + (size_t)m->inv[i] * dim,
               dim * sizeof *out);
}

void hc_rowmap_sum(const struct hc_rowmap *m, const float *grad, size_t dim,
                   float *out)
{
    memset(out, 0, m->n_unique * dim * sizeof *out);
    for (size_t i = 0; i < m->n; i++) {
        float *o = out + (size_t)m->inv[i] * dim;
        const float *g = grad + i * dim;

        for (size_t j = 0; j < dim; j++)
            o[j] += g[j];
    }
}

void hc_rowmap_free(struct hc_rowmap *m)
{
    free(m->ids);
    free(m->start);
    free(m->inv);
    free(m->keys);
    free(m->tmp);
    memset(m, 0, sizeof *m);
}
