/*
 * layout.c — the block → shard assignment every process computes alike.
 *
 * Variable v of size n is cut into ceil(n / block_elems) blocks, all of
 * block_elems elements but its last. The blocks are then taken in the order
 * (length descending, variable ascending, offset ascending) and each goes to
 * the shard holding the fewest elements so far (ties to the lowest index);
 * since every block is at most block_elems long, the fullest and the
 * emptiest shard never differ by more than block_elems. The result lists
 * the blocks in (variable, offset) order, each with its offset in the flat
 * parameter vector (variables laid end to end) and its index among its
 * shard's blocks, counted in that same order.
 *
 * The hash is FNV-1a 64 over little-endian fixed-width fields: n_shards
 * (u32), block_elems (u32), then per block var (u32), offset (u64), length
 * (u32), shard (u32).
 */
#include "layout.h"
#include "err.h"

#include <stdlib.h>
#include <string.h>

#define LAYOUT_MAX_SHARDS 4096

/* A block to assign: its length, and its index in (var, offset) order,
 * which breaks ties exactly as (var, offset) would. */
struct pending {
    uint32_t length;
    size_t index;
};

static int by_length_desc(const void *pa, const void *pb)
{
    const struct pending *a = pa, *b = pb;

    if (a->length != b->length)
        return a->length > b->length ? -1 : 1;
    return a->index < b->index ? -1 : a->index > b->index;
}

void hc_layout_free(struct hc_layout *l)
{
    if (!l)
        return;
    free(l->blocks);
    free(l->shard_elems);
    free(l->shard_blocks);
    memset(l, 0, sizeof *l);
}

/* Count the blocks and check sizes; *n_blocks and *total on success. */
static int count_blocks(const size_t *sizes, int n_vars, uint32_t block_elems,
                        size_t *n_blocks, uint64_t *total)
{
    uint64_t nb = 0, t = 0;

    for (int v = 0; v < n_vars; v++) {
        uint64_t n = sizes[v];     /* 0: a row-sparse table, no blocks */
        if (t + n < t)
            return hc_err_set(HC_ERR_LIMIT, "layout: the variables' sizes "
                              "overflow 64 bits");
        t += n;
        nb += n / block_elems + (n % block_elems != 0);
    }
    if (nb > UINT32_MAX || nb > SIZE_MAX / sizeof(struct hc_block))
        return hc_err_set(HC_ERR_LIMIT, "layout: %llu blocks of %u elements "
                          "are too many; use a larger block size",
                          (unsigned long long)nb, block_elems);
    *n_blocks = (size_t)nb;
    *total = t;
    return HC_OK;
}

int hc_layout_build(const size_t *sizes, int n_vars, int n_shards,
                    uint32_t block_elems, struct hc_layout *out)
{
    struct hc_layout l = {0};
    struct pending *order = NULL;
    size_t b = 0;
    uint64_t flat = 0;
    int rv;

    if (!out)
        return hc_err_set(HC_ERR_INVAL, "layout: NULL output");
    memset(out, 0, sizeof *out);
    if (n_vars < 1 || !sizes)
        return hc_err_set(HC_ERR_INVAL, "layout: %d variables; need at "
                          "least one", n_vars);
    if (n_shards < 1 || n_shards > LAYOUT_MAX_SHARDS)
        return hc_err_set(HC_ERR_INVAL, "layout: %d parameter-server shards; "
                          "need 1 to %d", n_shards, LAYOUT_MAX_SHARDS);
    if (block_elems < 1)
        return hc_err_set(HC_ERR_INVAL, "layout: block size 0; need at "
                          "least 1 element");
    l.n_shards = n_shards;
    l.block_elems = block_elems;
    if ((rv = count_blocks(sizes, n_vars, block_elems, &l.n_blocks,
                           &l.total)))
        return rv;
    l.blocks = calloc(l.n_blocks ? l.n_blocks : 1, sizeof *l.blocks);
    order = calloc(l.n_blocks ? l.n_blocks : 1, sizeof *order);
    l.shard_elems = calloc((size_t)n_shards, sizeof *l.shard_elems);
    l.shard_blocks = calloc((size_t)n_shards, sizeof *l.shard_blocks);
    if (!l.blocks || !order || !l.shard_elems || !l.shard_blocks) {
        rv = hc_err_set(HC_ERR_NOMEM, "layout: out of memory for %zu blocks",
                        l.n_blocks);
        goto out;
    }

    /* Cut: blocks in (var, offset) order. */
    for (int v = 0; v < n_vars; v++)
        for (uint64_t off = 0; off < sizes[v]; off += block_elems, b++) {
            uint64_t left = sizes[v] - off;
            l.blocks[b].var = (uint32_t)v;
            l.blocks[b].offset = off;
            l.blocks[b].length =
                (uint32_t)(left < block_elems ? left : block_elems);
            l.blocks[b].flat = flat + off;
            order[b].length = l.blocks[b].length;
            order[b].index = b;
            if (left <= block_elems)
                flat += sizes[v];
        }

    /* Assign: largest first, each to the emptiest shard. */
    qsort(order, l.n_blocks, sizeof *order, by_length_desc);
    for (b = 0; b < l.n_blocks; b++) {
        struct hc_block *blk = &l.blocks[order[b].index];
        int best = 0;
        for (int s = 1; s < n_shards; s++)
            if (l.shard_elems[s] < l.shard_elems[best])
                best = s;
        blk->shard = (uint32_t)best;
        l.shard_elems[best] += blk->length;
    }

    /* Number each shard's blocks in (var, offset) order. */
    for (b = 0; b < l.n_blocks; b++)
        l.blocks[b].local = l.shard_blocks[l.blocks[b].shard]++;

    *out = l;
    memset(&l, 0, sizeof l);
    rv = HC_OK;
out:
    free(order);
    hc_layout_free(&l);
    return rv;
}

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static uint64_t fnv_le(uint64_t h, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) {
        h ^= (v >> (8 * i)) & 0xff;
        h *= FNV_PRIME;
    }
    return h;
}

uint64_t hc_layout_hash(const struct hc_layout *l)
{
    uint64_t h = FNV_OFFSET;

    h = fnv_le(h, (uint32_t)l->n_shards, 4);
    h = fnv_le(h, l->block_elems, 4);
    for (size_t b = 0; b < l->n_blocks; b++) {
        const struct hc_block *blk = &l->blocks[b];
        h = fnv_le(h, blk->var, 4);
        h = fnv_le(h, blk->offset, 8);
        h = fnv_le(h, blk->length, 4);
        h = fnv_le(h, blk->shard, 4);
    }
    return h;
}
