/*
 * layout.h — which parameter server holds which part of which variable.
 *
 * Every variable is a flat float32 array cut into blocks of at most
 * `block_elems` elements. Blocks are assigned to shards by a pure function
 * of the variable sizes, the block size and the number of shards, so every
 * process computes the same layout: blocks are taken largest first (ties by
 * variable then offset) and each goes to the shard holding the fewest bytes
 * so far (ties to the lowest index). This balances bytes across shards.
 */
#ifndef HC_LAYOUT_H
#define HC_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* Elements per block unless the model's stores say otherwise: 4086 floats
 * and a store's 24-byte block header fill four 4 KiB pages of LMDB's (16
 * bytes of each value's first page are LMDB's own) — 4096 would need a
 * fifth page for the last 40 bytes, 25 % more written per step. Stores
 * made with another size keep it (a JoinReply says which). */
#define HC_LAYOUT_DEFAULT_BLOCK 4086u

struct hc_block {
    uint32_t var;           /* variable index */
    uint64_t offset;        /* first element within the variable */
    uint32_t length;        /* elements */
    uint32_t shard;         /* owner */
    uint64_t flat;          /* offset in the flat parameter vector */
    uint32_t local;         /* index among its shard's blocks */
};

struct hc_layout {
    int n_shards;
    uint32_t block_elems;
    size_t n_blocks;
    struct hc_block *blocks;    /* (n_blocks) in (var, offset) order */
    uint64_t total;             /* elements over all variables */
    uint64_t *shard_elems;      /* (n_shards) elements per shard */
    uint32_t *shard_blocks;     /* (n_shards) blocks per shard */
};

/* sizes[v] is the element count of variable v, for v < n_vars; 0 for a
 * row-sparse table (model.h, table_rows), which has no blocks: its rows
 * are on every shard by hc_row_shard (rowmap.h). */
int hc_layout_build(const size_t *sizes, int n_vars, int n_shards,
                    uint32_t block_elems, struct hc_layout *out);
void hc_layout_free(struct hc_layout *l);

/* A 64-bit fingerprint of the layout (for stores to check). */
uint64_t hc_layout_hash(const struct hc_layout *l);

#endif
