/*
 * rowmap.h — where the rows of a row-sparse table live, and the one place
 * that turns a batch's row ids into what travels: per shard, a sorted list
 * of unique ids (ps-lite's sorted key lists), with the inverse index that
 * scatters the pulled rows back to the batch and sums the gradients of
 * repeated ids before the push.
 *
 * Routing. A table is not placed on one shard: each row goes to a shard
 * by a hash of (variable, row id), the same in every process and across
 * restarts:
 *
 *     h     = hc_mix64(row ^ hc_mix64(HC_GOLDEN_GAMMA · (var + 1)))
 *     shard = ⌊h · n_shards / 2^64⌋          (the high word of a 128-bit
 *                                              product: Lemire's reduction)
 *
 * hc_mix64 is splitmix64's finaliser (rng.h), a bijection whose every
 * output bit depends on every input bit, so consecutive ids, ids that
 * differ in their high bits and Zipf-skewed ids spread evenly; the salt by
 * variable keeps the hot rows of two tables (row 0 of each, say) from
 * landing on one shard. Changing the shard count re-routes rows by the
 * same function (a reshard moves a row to hc_row_shard of the new count).
 *
 * A map is reused step after step: its arrays grow to the largest batch
 * seen and are never shrunk, so a warm step allocates nothing.
 *
 * Thread safety: hc_row_shard is pure; a map belongs to one thread.
 */
#ifndef HC_ROWMAP_H
#define HC_ROWMAP_H

#include <stddef.h>
#include <stdint.h>

/* Ids of a table are below this (input_dim may be at most 2^62). */
#define HC_ROW_ID_LIMIT (1ull << 62)

/* The shard (0 .. n_shards − 1) holding row `row` of variable `var`, by the
 * formula above. n_shards must be at least 1. */
uint32_t hc_row_shard(uint32_t var, uint64_t row, uint32_t n_shards);

/* One id of a batch while a map is built: sorted by (shard, id, pos). */
struct hc_rowkey {
    uint64_t id;
    uint32_t shard, pos;
};

/* A batch's ids of one table, de-duplicated and grouped by shard. */
struct hc_rowmap {
    uint32_t n_shards;
    size_t n;               /* ids in the batch */
    size_t n_unique;        /* distinct ids */
    uint64_t *ids;          /* (n_unique) grouped by shard, ascending within
                               each: shard s's are ids[start[s] .. start[s+1]) */
    size_t *start;          /* (n_shards + 1) */
    uint32_t *inv;          /* (n) batch position i is ids[inv[i]] */
    /* Working space, kept between builds: */
    struct hc_rowkey *keys; /* (cap) */
    struct hc_rowkey *tmp;  /* (cap) the radix sort's other half */
    size_t cap;             /* ids the arrays hold */
    uint32_t shards_cap;    /* shards start holds, less one */
};

/*
 * De-duplicate ids[0 .. n) of variable `var` for n_shards shards into m
 * (zeroed by the caller before its first build; reused after). Every id
 * must be below `limit` (the table's input_dim).
 * Returns HC_OK, HC_ERR_INVAL (n_shards 0, an id ≥ limit: the message
 * names its position and value, n over 2^32 − 1), HC_ERR_NOMEM. On error
 * m holds no batch (n = n_unique = 0) and stays reusable.
 */
int hc_rowmap_build(struct hc_rowmap *m, uint32_t var, const uint64_t *ids,
                    size_t n, uint32_t n_shards, uint64_t limit);

/* The batch's rows from the unique ones: out[i] = rows[inv[i]], each `dim`
 * floats. rows (n_unique, dim), out (n, dim). */
void hc_rowmap_gather(const struct hc_rowmap *m, const float *rows,
                      size_t dim, float *out);

/* The unique ids' gradients from the batch's: out[u] = Σ over i with
 * inv[i] = u of grad[i], summed in batch order. grad (n, dim), out
 * (n_unique, dim), overwritten. */
void hc_rowmap_sum(const struct hc_rowmap *m, const float *grad, size_t dim,
                   float *out);

/* Free m's arrays; m may then be built again. */
void hc_rowmap_free(struct hc_rowmap *m);

#endif
