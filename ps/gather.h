/*
 * gather.h — read the stores of every shard of a cluster, read-only, and
 * assemble each variable (and its optimizer slots) whole: what `hetps
 * export` writes out and ps_reshard lays out again (export.h, reshard.h).
 */
#ifndef PS_GATHER_H
#define PS_GATHER_H

#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "model.h"
#include "npy.h"
#include "store.h"

/* The most bytes of a store's variable definitions ("vars" meta). */
#define PS_VARS_JSON_MAX (1u << 20)

/* One variable, assembled from the blocks of every shard. */
struct ps_gathered_var {
    char name[HC_NAME_MAX * 2];
    int ndim;
    size_t shape[HC_NPY_MAX_DIMS];
    size_t size;
    float *data;            /* (size); a table: its stored rows (n_rows, dim) */
    unsigned char *seen;    /* (size) elements filled; NULL for a table */
    uint64_t table_rows;    /* a row-sparse table's input_dim; 0: dense */
    uint32_t dim;           /* a table's floats a row */
    uint64_t *ids;          /* (n_rows) a table's stored row ids, ascending
                               over every shard (shape (n_rows, dim)) */
    size_t n_rows;
    size_t width;           /* floats a row in data: dim, or (PS_GATHER_MOVE)
                               (1 + n_slots) · dim, its slots after it */
    uint64_t *updates;      /* (n_rows) PS_GATHER_MOVE: each row's count */
    int moments_of_prev;    /* a batch norm's moving_variance: kept with
                             * its moving_mean, the variable before */
};

/* Everything the shards of one cluster hold, assembled per variable. */
struct ps_gathered {
    struct ps_gathered_var *vars; /* (n_vars) values, element coverage */
    int n_vars;
    float *slots[PS_STORE_MAX_SLOTS][HC_MODEL_MAX_VARS]; /* optimizer slots */
    uint32_t n_slots, block_elems;
    uint64_t step;              /* the largest shard step */
    struct ps_store_info info0; /* of shard 0 */
    char *json;                 /* (json_len) shard 0's variable definitions */
    size_t json_len;
    struct ps_table tables[PS_STORE_MAX_TABLES]; /* (n_tables) shard 0's */
    uint32_t n_tables;
    uint64_t seed;              /* their rows' (hc_init_row) */
    struct ps_place *places;    /* (n_workers) PS_GATHER_MOVE: each worker's
                                   furthest recorded place in its data */
    int n_workers;
};

/* What ps_gather reads besides the variables. */
#define PS_GATHER_SLOTS 1   /* every optimizer slot (a live store is fine),
                               a table's rows whole as PS_GATHER_ROWS */
#define PS_GATHER_MOVE 2    /* to move the stores (reshard): the slots and
                               each worker's furthest place recorded by any
                               shard, from stores no shard has open */
#define PS_GATHER_ROWS 4    /* each table's rows whole: its slots after
                               each row (width) and each row's count */

/*
 * Read every block (and, as `what` says, every optimizer slot and the
 * workers' places) of the stores of `cl` — shard J in DATA_DIR/ps-J,
 * opened read-only — into *g. Every element must come from exactly one
 * block; `verify` checks every checksum first. Frees *g on failure.
 */
int ps_gather(const struct hc_cluster *cl, const char *data_dir, int what,
              int verify, struct ps_gathered *g, FILE *log);

/* Free what ps_gather assembled; *g is zeroed. */
void ps_gathered_free(struct ps_gathered *g);

#endif
