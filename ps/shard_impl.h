/*
 * shard_impl.h — the inside of a ps_shard, shared by the two files that
 * make up the shard: shard.c (blocks, steps, sync accumulation) and
 * shard_rows.c (row-sparse tables). Nothing else includes this; the
 * contract is shard.h.
 */
#ifndef PS_SHARD_IMPL_H
#define PS_SHARD_IMPL_H

#include <stdatomic.h>

#include "optim_conf.h"
#include "shard.h"

struct ps_shard {
    int index, n_shards;
    char dir[1024];
    struct ps_store *store;
    struct hc_optim_conf optim;
    atomic_int ready;               /* blocks and index loaded (release) */
    uint32_t n_blocks;
    const struct ps_block *blocks;  /* (n_blocks) the store's, local order */
    uint32_t *index_sorted;         /* (n_blocks) local indices by (var, offset) */
    struct ps_update *updates;      /* (n_blocks) push scratch */
    unsigned char *seen;            /* (n_blocks) duplicate-block check */
    float **acc;                    /* (n_blocks) sync: sample-weighted sums */
    float *acc_mem;                 /* one allocation behind acc */
    unsigned char *acc_used;        /* (n_blocks) ACC_*: what block b's
                                       gradient of the open step is */
    const float **lent;             /* (n_blocks) ACC_LENT: the one push's
                                       values, in a message the service
                                       keeps (ps_shard_accumulate) */
    float *lent_w;                  /* (n_blocks) its weight (samples) */
    uint32_t *acc_n;                /* (n_blocks) pushes in block b's sum */
    uint64_t *acc_w;                /* (n_blocks) their samples */
    unsigned char *applied;         /* (n_blocks) given to the open step
                                       (ps_shard_apply_ready) */
    int has_moving;                 /* batch norm's moving statistics here
                                       (set with the blocks, before ready) */
};

/* The store once the variables exist and are loaded, else NULL (as
 * ps_shard_store). */
static inline struct ps_store *shard_store(const struct ps_shard *sh)
{
    return atomic_load(&((struct ps_shard *)sh)->ready) ? sh->store : NULL;
}

#endif
