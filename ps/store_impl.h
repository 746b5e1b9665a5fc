/*
 * store_impl.h — the inside of a ps_store, shared by the files that make
 * up the store. Nothing outside ps/store*.c includes this; the contract is
 * store.h.
 *
 *   store.c         open (check the magic and format, load meta and the
 *                   block table), init, close, sync, what meta says
 *   store_txn.c     LMDB errors, transactions, map growth and the cached
 *                   store mapped ahead, meta keys and the application's
 *                   meta data
 *   store_block.c   block and optimizer-slot values: keys, headers and
 *                   CRCs; pulls, verify, and moving slots for reshard
 *   store_apply.c   one optimizer step per write transaction
 *   store_record.c  the per-worker request records an apply writes
 *   store_rows.c    row-sparse tables: their rows, lazy initial values and
 *                   per-row optimizer steps
 *   store_held.c    a synchronous step's rows pushes held until its commit
 */
#ifndef PS_STORE_IMPL_H
#define PS_STORE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <lmdb.h>

#include "fanout.h"
#include "optimizer.h"
#include "store.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the hetps store keeps little-endian float32; big-endian hosts are not supported"
#endif

#define HDR_SIZE sizeof(struct ps_block_hdr)
#define POOL_MAX 8
#define SCRATCH_ARRAYS (1 + PS_STORE_MAX_SLOTS) /* parameters, slots */

/* A variable the optimizer does not train: a batch norm's moving
 * statistic (the "moving" of its definition in meta "app.vars"). */
enum { MOVING_NONE, MOVING_MEAN, MOVING_VARIANCE };
struct store_moving {
    uint8_t kind;               /* MOVING_*; NONE: trained */
    float momentum;
};

struct ps_store {
    char *dir;
    MDB_env *env;
    int env_open;               /* mdb_env_open succeeded */
    MDB_dbi dbi_meta, dbi_vars, dbi_slots, dbi_recs;
    int read_only;
    int lock_fd;                /* DIR/hetps.lock, -1 when none held */
    enum ps_durability durability;
    unsigned sync_ms;
    uint64_t direct_max_pages;
    _Atomic uint64_t map_size;  /* written under maplock, read anywhere */
    _Atomic uint64_t map_max;
    unsigned psize;

    pthread_mutex_t wmu;        /* one writer at a time (scratch, seen) */
    pthread_rwlock_t maplock;   /* shared: in a txn; exclusive: resizing */
    pthread_mutex_t poolmu;
    MDB_txn *pool[POOL_MAX];    /* reset read transactions */
    int n_pool;

    _Atomic uint64_t step;
    _Atomic int initialised;
    uint64_t incarnation;
    uint64_t signature, layout_hash;
    uint32_t block_elems, n_shards, shard, n_blocks, n_slots;
    struct hc_optim_conf optim;

    struct ps_block *blocks;    /* (n_blocks) */
    uint32_t max_len;           /* longest block */
    float *scratch;             /* (2 * SCRATCH_ARRAYS, max_len): in, out */
    uint8_t *decay;             /* (n_vars) under wmu: weight decay per
                                   variable (store_decay_flags), or NULL */
    uint32_t n_decay;
    char decay_for[HC_OPTIM_EXCLUDE_BYTES]; /* the exclusions it is for */
    struct store_moving *moving; /* (n_moving) under wmu: each variable's
                                   part in batch norm (store_moving_flags),
                                   or NULL before the first apply */
    uint32_t n_moving;
    struct hc_fanout *fan;      /* a large step's compute; NULL: one thread */
    uint64_t split_min;         /* elements of a step worth splitting */
    struct store_job *jobs;     /* under wmu: a split step's blocks */
    size_t jobs_cap;
    _Atomic uint64_t steps_split;
    uint32_t *seen;             /* (n_blocks) apply generation stamps */
    uint32_t seen_gen;
    uint64_t last_sync_ms;
    int unsynced;               /* under wmu: commits since the last sync */
    uint64_t last_reader_check_ms;
    uint64_t disk_reserved;     /* under wmu: bytes of the data file allocated */
    uint64_t write_extra;       /* under wmu: bytes the next write transaction
                                   adds beyond what is in use (a create) */
    _Atomic uint64_t map_ahead_max; /* bytes; 0: none (off, or no kernel
                                   support) */
    _Atomic uint64_t mapped_ahead; /* bytes the last store_map_ahead mapped */
    struct store_step *stepper; /* store_step.c's thread, once used */
    struct store_rows *rows;    /* store_rows.c's: the "rows" database and
                                   the tables; NULL until opened */
};

/* ---- store_txn.c ------------------------------------------------------- */

/* Write x big-endian into b[0..4) (keys sort numerically). */
void store_be32(unsigned char *b, uint32_t x);

/* b bytes as "64 KiB" or "1024 MiB" in buf; returns buf. */
const char *store_fmt_bytes(char *buf, size_t cap, uint64_t b);

/* Translate LMDB code rc into an HC_ERR_* code with a message naming the
 * store and what it was doing (`what`). */
int store_lmdb_err(const struct ps_store *s, int rc, const char *what);

/* Map the used part of the store's map that is in the page cache into the
 * process (MADV_POPULATE_READ), at most map_ahead_max bytes, so that reads
 * take no page fault: after the open's first transaction and after a remap
 * (map_resize), which drops every mapping. Takes maplock shared. */
void store_map_ahead(struct ps_store *s);

/* Begin a transaction (flags: 0 or MDB_RDONLY; read ones come from the
 * pool) with maplock held shared. End a read one with store_rtxn_end, a
 * write one only inside store_write_txn. */
int store_txn_begin(struct ps_store *s, unsigned flags, MDB_txn **txn);

/* store_apply.c, for the open step (store_step.c) too: check an apply's
 * arguments; run the optimizer on g's blocks in txn at `step` (direct:
 * into their reserved values; split over the apply threads when large);
 * sync after a commit when group commit says so. Under wmu. */
int store_apply_check(struct ps_store *s, const struct hc_optim_conf *c,
                      const struct ps_update *u, size_t n,
                      const struct ps_record *recs, size_t n_recs);
int store_apply_blocks(struct ps_store *s, MDB_txn *txn,
                       const struct hc_optim_conf *c, uint64_t step,
                       const struct ps_apply *g, int direct);

/* Read the ranges r[0 .. n) in transaction txn (a reader's, or the open
 * step's on its thread). */
int store_read_in(struct ps_store *s, MDB_txn *txn, struct ps_read *r,
                  size_t n);

/* The step thread of store_step.c, stopped by ps_store_close. */
void store_step_stop(struct ps_store *s);

/* Allocate the data file ahead of a write transaction (store_txn.c: a
 * full disk fails here, before anything is written). Under wmu. */
int store_reserve_disk(struct ps_store *s, const char *what);
void store_rtxn_end(struct ps_store *s, MDB_txn *t);

/* After a commit: flush when group commit (PS_DURABLE_MACHINE, sync_ms)
 * says it is time. */
int store_maybe_sync(struct ps_store *s);

/* The body of a write transaction: HC_OK commits, anything else aborts. */
typedef int (*store_write_fn)(struct ps_store *s, MDB_txn *txn, void *arg);

/* Run fn in a write transaction and commit, growing the map and running
 * it again on MDB_MAP_FULL. The caller holds s->wmu. */
int store_write_txn(struct ps_store *s, store_write_fn fn, void *arg,
                    const char *what);

/* The store's own "meta" keys. get: HC_ERR_NOTFOUND (no message) when
 * missing; fixed: a missing key or a value of another size is damage. */
int store_meta_get(struct ps_store *s, MDB_txn *txn, const char *key,
                   MDB_val *v);
int store_meta_put(struct ps_store *s, MDB_txn *txn, const char *key,
                   const void *data, size_t len);
int store_meta_put_u32(struct ps_store *s, MDB_txn *txn, const char *key,
                       uint32_t x);
int store_meta_put_u64(struct ps_store *s, MDB_txn *txn, const char *key,
                       uint64_t x);
int store_meta_fixed(struct ps_store *s, MDB_txn *txn, const char *key,
                     void *dst, size_t len);

/* An application meta key (ps_store_meta_put's, e.g. "vars") in txn. */
int store_app_meta_put(struct ps_store *s, MDB_txn *txn, const char *key,
                       const void *data, size_t len);

/* ---- store_block.c ----------------------------------------------------- */

/* Key of array k (0 = parameters in "vars", 1 + slot in "slots") of block
 * `local` into key[0..8); returns its length (4 or 8). */
size_t store_block_key(unsigned char *key, int k, uint32_t local);

/* Reserve and write a block value: header (with the CRC) + b->length
 * floats of data, or every float `fill` when data is NULL. */
int store_put_block(struct ps_store *s, MDB_txn *txn, MDB_dbi dbi,
                    const void *key, size_t klen, const struct ps_block *b,
                    uint32_t kind, const float *data, float fill);

/* Fetch a block value into *v and its header into *h, checking the size
 * against the header; `kind` names it in messages. */
int store_get_block(struct ps_store *s, MDB_txn *txn, MDB_dbi dbi,
                    const void *key, size_t klen, uint32_t local,
                    const char *kind, MDB_val *v, struct ps_block_hdr *h);

/* ---- store_record.c ---------------------------------------------------- */

/* Write r (replacing the worker's last record) in txn, answered at
 * `step`, the step after the apply it answers. */
int store_record_put(struct ps_store *s, MDB_txn *txn,
                     const struct ps_record *r, uint64_t step);

/* ---- store_rows.c ------------------------------------------------------ */

/* Open (writable: create) the "rows" database in the open's first
 * transaction; a read-only open of a store without one has no rows. */
int store_rows_open(struct ps_store *s, MDB_txn *txn);

/* Load the tables from meta (an initialised store); none is fine. */
int store_rows_load(struct ps_store *s, MDB_txn *txn);

/* Write the tables of a create (init's transaction), check them
 * (HC_ERR_INVAL naming the bad one, before any transaction), say how they
 * differ from the store's (HC_ERR_MISMATCH), and take them over once the
 * create committed. */
int store_rows_check(const struct ps_store *s, const struct ps_table *t,
                     uint32_t n);
int store_rows_init(struct ps_store *s, MDB_txn *txn,
                    const struct ps_table *t, uint32_t n, uint64_t seed);
int store_rows_mismatch(const struct ps_store *s, const struct ps_table *t,
                        uint32_t n, uint64_t seed);
int store_rows_adopt(struct ps_store *s, const struct ps_table *t,
                     uint32_t n, uint64_t seed);

/* Check a step's row updates (under wmu, before its transaction). */
int store_rows_check_update(struct ps_store *s, const struct ps_rows *r,
                            size_t n);

/* Apply row updates r[0 .. n) in txn at the store's `step` (a learning
 * rate schedule's; each row's own count is the optimizer's step). Under
 * wmu. */
int store_rows_apply(struct ps_store *s, MDB_txn *txn,
                     const struct hc_optim_conf *c, uint64_t step,
                     const struct ps_rows *r, size_t n);

/* ps_store_verify's part: every stored row's key, size and CRC32C, and
 * each table's count against meta "table_rows". */
int store_rows_verify(struct ps_store *s, MDB_txn *txn);

/* ---- store_held.c ------------------------------------------------------ */

/* Apply, in txn at the store's `step`, every rows push held for the
 * synchronous step (ps_store_rows_hold; worker −1) or, async, the one
 * `worker` holds for its step, summed by row and scaled by 1 / (their
 * samples), and delete them; *any 1 when there was one. Under wmu. */
int store_rows_apply_held(struct ps_store *s, MDB_txn *txn,
                          const struct hc_optim_conf *c, uint64_t step,
                          int64_t worker, int *any);

void store_rows_free(struct ps_store *s);

#endif
