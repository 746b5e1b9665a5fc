/*
 * store.h — one parameter-server shard's durable state in an LMDB
 * environment: its blocks of every variable, the optimizer's slots, the
 * global step, and the last request applied from each worker.
 *
 * The store knows nothing of the network. A shard opens its directory
 * (--data-dir) with ps_store_open, the chief's first CreateVariables
 * becomes ps_store_init (idempotent), pulls read blocks with
 * ps_store_read from read transactions (MVCC: readers never wait for the
 * writer, and always see whole updates), and each optimizer step is one
 * write transaction, ps_store_apply, that also records which request it
 * answered — so a request repeated after a crash is recognised, never
 * applied twice.
 *
 * Layout on disk: DIR/data.mdb and DIR/lock.mdb, with four named
 * databases. Integers in values are little-endian (hetps runs on
 * little-endian hosts only); keys are big-endian so that LMDB's order is
 * numeric order.
 *
 *   "meta"     text key → value. "magic" = "HETPSDB", "format" = u32
 *              PS_STORE_FORMAT, "incarnation" = u64 (opens so far);
 *              after ps_store_init also "signature", "layout_hash" (u64),
 *              "block_elems", "n_shards", "shard", "n_blocks", "n_slots"
 *              (u32), "optimizer" (the settings as optim_conf.h's
 *              fixed record, HC_OPTIM_RECORD_SIZE bytes: magic "HOPT",
 *              version, type, values, CRC32C; a store written before
 *              hetps had RMSprop and the others keeps its 32-byte
 *              version 1 record, read as it is and never rewritten) and
 *              "step" (u64: updates applied so far = the version), and
 *              "app.vars" (the variables' names and shapes, JSON text,
 *              ps_store_meta_get's "vars"), all in init's transaction.
 *   "vars"     u32 BE local block index → struct ps_block_hdr (24 bytes)
 *              + length float32 values.
 *   "slots"    (u32 BE slot, u32 BE local block) → ps_block_hdr + floats
 *              (in ps/optimizer.h's order: Adam m, v, v̂ (amsgrad);
 *              momentum m; Adagrad and Ftrl start at
 *              initial_accumulator_value, the rest at 0).
 *   "rows"     row-sparse tables (store_rows.c): (u32 BE variable, u64 BE
 *              row id) → struct ps_row_hdr (16 bytes: dim, CRC32C of the
 *              floats, the row's own update count) + dim parameters +
 *              n_slots × dim slot values (ps/optimizer.h's order). A row
 *              never written is absent: its value is hc_init_row's.
 *              Meta keeps "tables" (the tables' definitions, struct
 *              ps_table_rec each), "seed" (u64, the model's, for
 *              hc_init_row) and "table_rows" (u64 per table: rows stored).
 *   "records"  u32 BE worker task index, then for a lane above 0 the
 *              u32 BE lane → struct ps_record (record.h)
 *              as it is: 56 bytes opening with its magic and format,
 *              "request R of worker W, incarnation I, answered at version
 *              V" and the worker's place. Records of format 1 (a 32-byte
 *              header, the place, the reply's bytes) are still read.
 *
 * Format 1 (hetps before the typed settings) kept "optimizer" as JSON
 * text: a writable open converts such a store to format 2 in its first
 * transaction (logged: "converted … to format 2"), a read-only open reads
 * the text as it is. A store of a format newer than this build's is
 * refused, naming both.
 *
 * Checksums: every block header carries the CRC32C (hc_crc32c, the wire's
 * TensorRef.crc32c) of its float bytes, so a pull of a whole block can
 * send the stored CRC as is. ps_store_verify recomputes them all.
 *
 * Threading: one struct ps_store per environment per process. Reads
 * (ps_store_read, ps_store_read_block, ps_store_record_get, ps_store_place,
 * ps_store_records, ps_store_step, ps_store_info, ps_store_blocks,
 * ps_store_verify) may run on any number
 * of threads at once, alongside one writer; writers (ps_store_init,
 * ps_store_apply, ps_store_sync) are serialised by the store. Nothing
 * may be called concurrently with ps_store_close. Do not open the same
 * directory twice in one process (LMDB's rule), and never carry a store
 * across fork().
 *
 * Errors: HC_ERR_* codes with a message (hc_err_msg) naming the directory
 * and what to do. A failed write transaction is aborted — the store then
 * holds exactly what it held before the call — and the store stays usable.
 */
#ifndef PS_STORE_H
#define PS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "model.h"
#include "optim_conf.h"
#include "record.h"

#define PS_STORE_MAGIC  "HETPSDB"
#define PS_STORE_FORMAT 2u
#define PS_STORE_FORMAT_JSON_OPTIM 1u   /* older: converted on open */
#define PS_STORE_MAX_SLOTS 3     /* PS_OPTIM_MAX_SLOTS */

struct ps_store;
struct ps_table;     /* a row-sparse table: below */
struct ps_rows;

enum ps_durability {
    /* MDB_NOSYNC | MDB_NOMETASYNC: a commit reaches the OS page cache, so
     * it survives kill -9 of the process but not a machine crash. */
    PS_DURABLE_NONE = 0,
    /* Commits reach the disk: fsync at every commit (sync_ms = 0) or,
     * grouping commits, at the first commit sync_ms after the last sync
     * and at ps_store_sync / ps_store_close. */
    PS_DURABLE_MACHINE = 1,
};

struct ps_store_opts {
    uint64_t map_size;          /* bytes mapped at open; 0 = 1 GiB */
    uint64_t map_max;           /* growth limit on MDB_MAP_FULL (doubling);
                                   0 = 64 GiB; <= map_size: no growth */
    enum ps_durability durability;
    unsigned sync_ms;           /* PS_DURABLE_MACHINE group commit */
    unsigned max_readers;       /* concurrent read transactions; 0 = 126 */
    int read_only;              /* MDB_RDONLY: inspect, export */
    /* The data-directory lock, DIR/hetps.lock (flock): a writable open
     * holds it exclusively while open, so a second shard (or a reshard
     * writing there) on the same directory is refused; a read-only open
     * with require_idle takes it shared, so it is refused while a shard
     * still writes there (reshard's sources). Plain read-only opens
     * (inspect, a live export) take no lock. */
    int require_idle;
    /* Largest apply (estimated dirty pages) computed straight into
     * MDB_RESERVE'd space; bigger ones go through the store's scratch.
     * Without MDB_WRITEMAP LMDB may spill a big transaction's dirty pages,
     * moving earlier reservations; a writable store maps with WRITEMAP,
     * where nothing moves. 0 = no limit (tests set one to exercise the
     * scratch path). */
    uint64_t direct_max_pages;
    /* Threads for one optimizer step over a large update (at least
     * split_min elements): the writer reads and reserves every block's
     * records, then the optimizer, the CRC32Cs and the headers run on
     * this many threads, a range of blocks each (see store_apply.c).
     * 0 = the machine's cores (at most 8); 1 = the writer's thread only. */
    int apply_threads;
    uint64_t split_min;         /* elements; 0 = 262 144 (1 MiB of floats) */
    /* Bytes of the store's used pages mapped into the process ahead of use
     * (MADV_POPULATE_READ) at open and after each remap of a growing map,
     * only pages already in the page cache (nothing is read from disk for
     * it), the lowest offsets first: page tables, about 2 MiB a GiB, not
     * the process's own memory. Writable opens only (a shard's store; an
     * inspect or export reads once). 0 = 64 GiB; PS_STORE_MAP_AHEAD_OFF:
     * none. */
    uint64_t map_ahead_max;
};
#define PS_STORE_MAP_AHEAD_OFF UINT64_MAX

/* Header of every stored block value ("vars" and "slots"), followed by
 * `length` floats. */
struct ps_block_hdr {
    uint32_t var;               /* variable index */
    uint32_t length;            /* elements */
    uint64_t offset;            /* first element within the variable */
    uint32_t crc;               /* CRC32C of the length*4 float bytes */
    uint32_t kind;              /* 0 = parameters, 1 + s = slot s */
};

/* A block of this shard, as the store knows it. */
struct ps_block {
    uint32_t var;
    uint32_t length;
    uint64_t offset;
};

struct ps_store_info {
    const char *dir;            /* as given to ps_store_open */
    int initialised;            /* 0 until ps_store_init */
    uint64_t incarnation;       /* opens of this store, this one included */
    uint64_t step;              /* updates applied (the version) */
    uint64_t signature;         /* model signature */
    uint64_t layout_hash;       /* hc_layout_hash of the layout */
    uint32_t block_elems, n_shards, shard, n_blocks, n_slots;
    struct hc_optim_conf optim;
    uint64_t map_size, map_max; /* bytes, now */
    unsigned page_size;
    uint64_t steps_split;       /* optimizer steps computed on several
                                   threads since the open */
};

/* One block's gradient for ps_store_apply. */
struct ps_update {
    uint32_t local;             /* local block index */
    uint32_t length;            /* must equal the block's length */
    const float *grad;          /* (length) */
    float scale;                /* gradient used = grad · scale */
};

/* Where a worker is in its data (async/ssp): `batches` batches of epoch
 * `epoch` done. known = 0: not recorded. */
struct ps_place {
    int known;
    uint32_t epoch, batches;
};

/* One block (or part of it) to read with ps_store_read. */
struct ps_read {
    uint32_t local;             /* local block index */
    uint32_t first;             /* first element within the block */
    uint32_t count;             /* elements; first + count <= length */
    float *dst;                 /* (count) written by ps_store_read */
    uint32_t crc;               /* out: the stored CRC32C of the whole block */
};

/*
 * Open (creating when missing, with parent directories) the store in
 * directory `dir`. `o` may be NULL for the defaults. Clears reader slots
 * left by crashed processes (mdb_reader_check; logs how many), writes the
 * magic and format into a fresh store or checks them in an existing one,
 * and counts this open as a new incarnation (not when read_only). Loads
 * the block table when the store is initialised.
 *
 * Returns HC_OK and *out (owned by the caller, freed by ps_store_close),
 * or: HC_ERR_IO (directory cannot be made or opened), HC_ERR_VERSION (not
 * a hetps store, other format, LMDB file of another version: the message
 * names the path and what to do), HC_ERR_STORE (other LMDB failure),
 * HC_ERR_NOMEM, HC_ERR_INVAL (bad options).
 */
int ps_store_open(const char *dir, const struct ps_store_opts *o,
                  struct ps_store **out);

/* Bytes of the store mapped ahead of use by the open or the last growth
 * of its map (ps_store_opts.map_ahead_max), 0 where the kernel has no
 * MADV_POPULATE_READ (Linux before 5.14). Any thread. */
uint64_t ps_store_mapped_ahead(const struct ps_store *s);

/* Sync (in every durability mode), close the environment and free the
 * store. NULL is a no-op. */
void ps_store_close(struct ps_store *s);

/*
 * What a create makes of a store: shard `shard` of `layout` for the model
 * with `signature`, its optimizer settings, its initial values and the
 * variables' names and shapes.
 */
struct ps_store_def {
    uint64_t signature;             /* model signature */
    const struct hc_layout *layout;
    uint32_t shard;
    const struct hc_optim_conf *optim;  /* checked by hc_optim_validate */
    /* One pointer per local block of this shard (in local order), each to
     * that block's length floats; NULL makes every block zero. */
    const float *const *init;
    /* The variables' names and shapes as `hetps export` and `inspect` read
     * them (the "vars" application meta, JSON text), var_defs_len bytes;
     * NULL for none. */
    const char *var_defs;
    size_t var_defs_len;
    /* The model's row-sparse tables (every shard holds rows of each, by
     * hc_row_shard) and the seed their rows start from; NULL, 0 for none. */
    const struct ps_table *tables;
    uint32_t n_tables;
    uint64_t seed;
    /* 1: the chief's initial rows of the tables follow: the store is made
     * with application meta "rows_loading" = 1 in the same transaction
     * (the shard serves it once its last InitRows sets it to 0). */
    int rows_loading;
};

/*
 * Initialise the store as `d` describes. The meta, every block, the
 * optimizer's slots (zero), the step (0) and the variable definitions are
 * written in ONE transaction: a process killed at any point leaves the
 * store either empty or whole, never "created" without its definitions.
 *
 * Idempotent: when the store is already initialised with the same
 * signature, layout fingerprint, shard and optimizer, nothing changes and
 * HC_OK is returned with *created = 0 (values trained so far are kept) —
 * except that a store made by an older hetps without its variable
 * definitions gets d->var_defs now. *created = 1 when this call
 * initialised it (created may be NULL).
 * Errors: HC_ERR_MISMATCH (initialised for another model, layout or shard
 * count — the message says which and suggests `hetps reshard` or a fresh
 * --data-dir), HC_ERR_INVAL (bad layout or shard), HC_ERR_CONFIG (bad
 * optimizer settings), HC_ERR_LIMIT (var_defs over the meta limit),
 * HC_ERR_MAPFULL, HC_ERR_STORE.
 */
int ps_store_init(struct ps_store *s, const struct ps_store_def *d,
                  int *created);

/* The current step (updates applied; the version pulls wait for). 0 when
 * not initialised. Lock-free. */
uint64_t ps_store_step(const struct ps_store *s);

/* The model signature the store was initialised with; 0 before. Lock-free
 * (set once, before the store is published as initialised). */
uint64_t ps_store_signature(const struct ps_store *s);

/* Elements per block of the layout the store was initialised with; 0
 * before. Lock-free, as ps_store_signature. */
uint32_t ps_store_block_elems(const struct ps_store *s);

/* What the store holds (meta), into *info. Strings point into the store
 * and live until ps_store_close. */
void ps_store_info(const struct ps_store *s, struct ps_store_info *info);

/* This shard's blocks in local order: *n entries, owned by the store,
 * valid until ps_store_close (NULL, 0 before ps_store_init). */
const struct ps_block *ps_store_blocks(const struct ps_store *s, uint32_t *n);

/*
 * Read the `n` ranges `r` from one snapshot (one read transaction): every
 * block comes from the same step, returned in *step (may be NULL).
 * Fills r[i].dst and r[i].crc. Allocation-free once warm (read
 * transactions are pooled).
 * Errors: HC_ERR_NOTFOUND (not initialised, or no such block),
 * HC_ERR_INVAL (range outside the block), HC_ERR_LIMIT (all reader slots
 * in use: raise max_readers), HC_ERR_STORE (LMDB failure, or a stored
 * value of the wrong size: corruption).
 */
int ps_store_read(struct ps_store *s, struct ps_read *r, size_t n,
                  uint64_t *step);

/*
 * A snapshot to read from in several calls (a pull that must know the
 * step before it reads the values): ps_store_snap_begin opens a read
 * transaction and gives its step; ps_store_snap_read reads ranges of it as
 * ps_store_read does; ps_store_snap_end closes it (always, once begin
 * succeeded; a no-op on an ended or failed one). One thread uses a
 * snapshot; a writer commits meanwhile without waiting for it. Hold it
 * briefly: pages it sees cannot be reused, so the map grows while it lives.
 */
struct ps_snap {
    struct ps_store *store;
    void *txn;                  /* MDB_txn, read-only */
};
int ps_store_snap_begin(struct ps_store *s, struct ps_snap *snap,
                        uint64_t *step);
int ps_store_snap_read(struct ps_snap *snap, struct ps_read *r, size_t n);
void ps_store_snap_end(struct ps_snap *snap);

/* Read all `len` floats of local block `local` into dst (len must be the
 * block's length). Errors as ps_store_read, HC_ERR_MISMATCH for len. */
int ps_store_read_block(struct ps_store *s, uint32_t local, float *dst,
                        uint32_t len);

/*
 * Apply one optimizer step in one write transaction: for each update, read
 * the block's parameters and slots, run ps_optim_apply(c, step, …) into
 * MDB_RESERVE'd space of the new values, store their CRCs; then, when
 * n > 0, add 1 to the step; write each record (n_recs, may be 0; made by
 * ps_record_begin), answered at the step after the apply; commit.
 * On MDB_MAP_FULL the map is doubled (up to map_max) and the transaction
 * run again. *new_step (may be NULL) receives the step after the apply.
 *
 * `c` must need no more slots than the store was initialised with (a
 * different learning rate is fine: a schedule is the caller's business).
 * A block may appear once per apply. Allocation-free in steady state
 * (LMDB's own page buffers aside).
 * Errors, with nothing applied: HC_ERR_NOTFOUND (not initialised),
 * HC_ERR_INVAL (bad block, length, duplicate block, a record not made by
 * ps_record_begin), HC_ERR_CONFIG (c fails hc_optim_validate),
 * HC_ERR_MISMATCH (c needs more slots), HC_ERR_MAPFULL
 * (the map is at map_max: the message names the directory and the limit
 * to raise), HC_ERR_STORE, HC_ERR_IO (sync failed after commit — the
 * update is applied but may not be on disk).
 */
int ps_store_apply(struct ps_store *s, const struct hc_optim_conf *c,
                   const struct ps_update *u, size_t n,
                   const struct ps_record *recs, size_t n_recs,
                   uint64_t *new_step);

/*
 * Group commit: the steps g[0 .. n_g) (each as one ps_store_apply call
 * would apply it: its updates, the step counted when it has any, then its
 * records with the step after it) in ONE write transaction, in order, so a
 * queue of pushes costs one commit (and one fsync under
 * PS_DURABLE_MACHINE). A block may appear once per step and in several
 * steps. All or nothing: on any error none is applied. Errors as
 * ps_store_apply.
 */
struct ps_apply {
    const struct ps_update *u;
    size_t n;
    const struct ps_record *recs;
    size_t n_recs;
    int uncounted;      /* a later part of a push whose first part counted
                           the step: applied at that step (the optimizer's
                           step number), the step not counted again */
    const struct ps_rows *rows; /* (n_rows) row updates of the same step
                                   (store_rows.c); a step with rows and no
                                   blocks counts too */
    size_t n_rows;
    uint32_t held_of;   /* 1 + the worker whose held rows push
                           (ps_store_rows_hold, async: PushRows.with_step)
                           this step applies with its blocks, as one step;
                           0: every held push joins the group's first step
                           (a synchronous step) */
};
int ps_store_apply_group(struct ps_store *s, const struct hc_optim_conf *c,
                         const struct ps_apply *g, size_t n_g,
                         uint64_t *new_step);
/*
 * A synchronous step applied in parts (store_step.c), as they become ready,
 * and committed together: each ps_store_step_add queues blocks to run
 * through the optimizer (at the current step, not counted) into ONE write
 * transaction, opened at the first and kept on a thread of the store's own
 * (LMDB's writer is a thread's); ps_store_step_commit queues the rest, the
 * records (answered at the step after it) and the count, and waits for the
 * commit — the same bits and the same all-or-nothing as one ps_store_apply
 * of every block (a crash before it leaves the store as it was). Without
 * an add it is ps_store_apply. The gradients u[i].grad point to must stay
 * valid and unchanged until the commit returns, or until ps_store_step_drain
 * (which waits for every queued add) returns. A block may be given once per
 * step; no other write may be started on the store while a step is open
 * (its writer lock is the step thread's from the first add to the commit).
 * An add that fails aborts the open transaction quietly: the commit then
 * applies every block of the step in one ps_store_apply (a full map grows
 * there). Errors (of the commit) as ps_store_apply.
 */
int ps_store_step_add(struct ps_store *s, const struct hc_optim_conf *c,
                      const struct ps_update *u, size_t n);
void ps_store_step_drain(struct ps_store *s);
/* Read ranges r[0 .. n) (as ps_store_read) of blocks the open step has
 * applied, before its commit: on the step's thread, once every add queued
 * before has gone in; *step is the version they are (the open step's, its
 * step + 1). With no step open (committed meanwhile, or an add failed and
 * the commit will redo it) the committed values, *step their step: the
 * caller compares. Waits for the step thread; not with the service's
 * locks held. */
int ps_store_step_read(struct ps_store *s, struct ps_read *r, size_t n,
                       uint64_t *step);
int ps_store_step_commit(struct ps_store *s, const struct hc_optim_conf *c,
                         const struct ps_update *u, size_t n,
                         const struct ps_record *recs, size_t n_recs,
                         uint64_t *new_step);

/* ---- row-sparse tables (store_rows.c) ------------------------------------
 *
 * A table's rows are written only once touched: a read of a row never
 * written yields hc_init_row(init, input_dim, dim, seed, var, row), the
 * same on every shard, restart and reshard, so a table of 2^40 rows costs
 * what its touched rows cost. An update applies the optimizer to each
 * touched row alone (lazily): the row's parameters and slots (fresh:
 * ps_optim_slot_init's values) go through ps_optim_apply at the row's own
 * update count (`step` = updates of that row before this one: Adam's bias
 * correction per row, TF Addons' LazyAdam), without weight decay; rows not
 * touched do not move. Row updates ride in ps_store_apply_group's steps
 * (struct ps_apply.rows), in the step's transaction beside its records.
 */

/* A row-sparse table: variable `var`, input_dim rows of dim floats. */
struct ps_table {
    uint32_t var;
    uint32_t dim;               /* 1 .. PS_TABLE_MAX_DIM */
    uint64_t input_dim;         /* 1 .. HC_ROW_ID_LIMIT */
    struct hc_initializer init;
};
#define PS_TABLE_MAX_DIM 65536u
#define PS_STORE_MAX_TABLES 64u

/* A stored row's header, followed by (1 + n_slots) × dim floats. */
struct ps_row_hdr {
    uint32_t dim;
    uint32_t crc;               /* CRC32C of the (1 + n_slots)·dim floats */
    uint64_t updates;           /* updates applied to this row */
};

/* One table's part of an update: n rows' summed gradients. A table may
 * appear in several of one step's updates (a synchronous step's pushes,
 * one a worker): its rows' gradients are then summed — Σ grad·scale, in
 * the order given — before one optimizer step per row, each row counted
 * once. */
struct ps_rows {
    uint32_t var;               /* a table's variable */
    size_t n;
    const uint64_t *ids;        /* (n) ascending, unique, < input_dim */
    const float *grad;          /* (n, dim) */
    float scale;                /* the gradient used is grad · scale */
};

/* Apply one step of row updates (and dense blocks u, may be none) with
 * its records: ps_store_apply_group of one step. */
int ps_store_apply_rows(struct ps_store *s, const struct hc_optim_conf *c,
                        const struct ps_update *u, size_t n,
                        const struct ps_rows *rows, size_t n_rows,
                        const struct ps_record *recs, size_t n_recs,
                        uint64_t *new_step);

/* Delete worker's held rows pushes, if any, in a transaction of its own
 * (its step was answered without an apply: applied before its process
 * restarted). Errors: the store's. */
int ps_store_rows_drop(struct ps_store *s, uint32_t worker);

/*
 * Hold a worker's rows push (rows r[0 .. n), its summed gradients,
 * each table's scale ignored) for the open step, durably: written in a
 * transaction of its own with its record rec (answered at the current
 * step, *step, may be NULL), so a push answered survives a restart; the
 * next counted step's commit (ps_store_step_commit, ps_store_apply) applies
 * every push held — summed by row in (worker, request) order and scaled by
 * 1 / (their samples summed), one optimizer step per row — counts the step
 * even without blocks, and deletes them with it. Async (PushRows.with_step):
 * held the same way for the worker's own next push, whose apply
 * (ps_apply.held_of) applies them in its transaction as one step. A
 * worker's earlier held push still there is replaced (its restarted
 * process's predecessor's). Errors as ps_store_apply_rows.
 */
int ps_store_rows_hold(struct ps_store *s, const struct ps_rows *r, size_t n,
                       uint32_t samples, const struct ps_record *rec,
                       uint64_t *step);

/* The rows pushes held for an uncommitted step into *n (0: none). Errors:
 * the store's. */
int ps_store_rows_held(struct ps_store *s, size_t *n);

/* The tables the store was initialised with: *n entries owned by the
 * store, valid until ps_store_close (NULL, 0 when none). */
const struct ps_table *ps_store_tables(const struct ps_store *s, uint32_t *n);

/*
 * Read rows ids[0 .. n) of table `var` (any order, repeats allowed) from
 * one snapshot into out (n, dim): stored rows as stored (checksum
 * verified), the others their initial values; *step (may be NULL) the
 * step read. Errors: HC_ERR_NOTFOUND (var is no table of this store),
 * HC_ERR_INVAL (an id ≥ input_dim, named), HC_ERR_CRC (a damaged row),
 * HC_ERR_STORE, HC_ERR_LIMIT (reader slots).
 */
int ps_store_rows_read(struct ps_store *s, uint32_t var, const uint64_t *ids,
                       size_t n, float *out, uint64_t *step);

/* Row `id` of table `var` whole: its parameters and slots into out
 * ((1 + n_slots) × dim floats), its update count into *updates, and
 * *stored 1 when it is stored (0: the initial values and fresh slots).
 * Errors as ps_store_rows_read. */
int ps_store_row_get(struct ps_store *s, uint32_t var, uint64_t id,
                     float *out, uint64_t *updates, int *stored);

/* Rows stored of table `var` into *rows (one read of meta). Errors:
 * HC_ERR_NOTFOUND (no such table), HC_ERR_STORE. */
int ps_store_table_rows(struct ps_store *s, uint32_t var, uint64_t *rows);

/* Every stored row of table `var`, in id order, from one snapshot: ids
 * into *ids (n), values into *rows (n, dim) — or, with updates given
 * (may be NULL), whole rows (n, (1 + n_slots) · dim: values and optimizer
 * slots) and each row's update count into *updates (n) — all malloc'd
 * (the caller frees them; NULL when n is 0), checksums verified. Errors:
 * HC_ERR_NOTFOUND (no such table), HC_ERR_CRC, HC_ERR_STORE,
 * HC_ERR_NOMEM. */
int ps_store_rows_list(struct ps_store *s, uint32_t var, uint64_t **ids,
                       float **rows, uint64_t **updates, size_t *n);

/* Store rows ids[0 .. n) (ascending, none stored yet) of table `var`
 * whole, as ps_store_rows_list gives them (values, slots, update counts),
 * in one write transaction, counted in the table's rows (reshard).
 * Errors: HC_ERR_NOTFOUND (no such table), HC_ERR_INVAL (ids),
 * HC_ERR_EXISTS (a row already stored), the store's. */
int ps_store_rows_put(struct ps_store *s, uint32_t var, const uint64_t *ids,
                      const float *rows, const uint64_t *updates, size_t n);

/* Store rows ids[0 .. n) (ascending, unique) of table `var` as initial
 * values (worker --initial-weights): values (n, dim), each row's slots at
 * the optimizer's initial value (ps_optim_slot_init) and its update count
 * 0, in one write transaction; a row stored already is replaced (a
 * repeat of the same rows), a new one counted in the table's rows. The
 * caller decides whether the store may still take them (the shard: only
 * while its "rows_loading" meta says so). Errors: HC_ERR_NOTFOUND (no such
 * table), HC_ERR_INVAL (ids: named), HC_ERR_NOMEM, the store's. */
int ps_store_rows_init_put(struct ps_store *s, uint32_t var,
                           const uint64_t *ids, const float *values, size_t n);

/* The "rows" database's key order, set as its LMDB comparator: the sign
 * of memcmp over the shorter length, then the shorter first — LMDB's own
 * order for keys without a comparator, so mdb_dump, mdb_load and a build
 * without it see the same tree — computed for two 12-byte (u32 BE
 * variable, u64 BE row) keys as two byte-swapped integer compares. Returns
 * -1, 0 or 1. Pure; any thread. */
int ps_store_row_key_cmp(const void *a, size_t na, const void *b, size_t nb);

/* The seed the store's rows start from (hc_init_row; 0 without tables). */
uint64_t ps_store_rows_seed(const struct ps_store *s);

/*
 * The last request recorded for (`worker`, `lane`) into *out: who sent it, its id,
 * the version it was answered at and the worker's place (a format-1
 * record read as this format).
 * Errors: HC_ERR_NOTFOUND (nothing recorded for this worker and lane),
 * HC_ERR_STORE (a damaged record).
 */
int ps_store_record_get(struct ps_store *s, uint32_t worker, uint32_t lane,
                        struct ps_record *out);

/* The worker's place in its data recorded with its last request (at->known
 * = 0 when there is no record or it has no place). Errors: HC_ERR_STORE
 * for a damaged record. */
int ps_store_place(struct ps_store *s, uint32_t worker, struct ps_place *at);

/* Every worker's record, in worker order (see ps_store_records). */
typedef int (*ps_record_fn)(void *arg, uint32_t worker, uint64_t incarnation,
                            uint64_t request_id, const struct ps_place *place);

/* Call fn for each worker's record: its task index, incarnation, last
 * request id and place; stops early (HC_OK) when fn returns non-zero.
 * Errors: HC_ERR_STORE for a damaged record. */
int ps_store_records(struct ps_store *s, ps_record_fn fn, void *arg);

/*
 * Recompute the CRC of every block and slot and check the headers against
 * the block table. Returns HC_OK, or HC_ERR_CRC naming the first bad block
 * (local index, variable, offset, kind), or HC_ERR_STORE for a missing or
 * mis-sized value. Reads one snapshot; runs alongside pulls and applies.
 */
int ps_store_verify(struct ps_store *s);

/*
 * Moving a shard's state elsewhere (`hetps reshard`): read slot `slot` of
 * local block `local` (len = the block's length; checksum verified), and
 * overwrite every block's slots — slots[k][local], `length` floats each,
 * NULL for zeros — and the step, in one write transaction.
 */
int ps_store_read_slot(struct ps_store *s, uint32_t slot, uint32_t local,
                       float *dst, uint32_t len);
int ps_store_restore(struct ps_store *s, const float *const *const *slots,
                     uint64_t step);

/*
 * Application meta data beside the store's own: `key` (1..64 bytes, e.g.
 * "vars") → up to a few KiB of bytes. put is one write transaction (the
 * shard keeps the variables' names and shapes there for export); get
 * copies the value into buf (cap bytes) and its size into *len.
 * Errors: HC_ERR_NOTFOUND (no such key), HC_ERR_LIMIT (buf too small;
 * *len says how much), HC_ERR_INVAL (bad key), HC_ERR_STORE, HC_ERR_MAPFULL.
 */
int ps_store_meta_put(struct ps_store *s, const char *key, const void *data,
                      size_t len);
int ps_store_meta_get(struct ps_store *s, const char *key, void *buf,
                      size_t cap, size_t *len);

/* Flush committed transactions to disk now (mdb_env_sync, forced).
 * Returns HC_OK or HC_ERR_IO. */
int ps_store_sync(struct ps_store *s);

/*
 * Housekeeping, called every few hundred ms by the shard's service (any
 * thread): with PS_DURABLE_MACHINE and sync_ms, sync commits older than
 * sync_ms that no later commit has synced (so the window holds even when
 * pushes stop); every 10 s, clear reader slots left by crashed processes
 * (mdb_reader_check), logged when any. Returns HC_OK or HC_ERR_IO.
 */
int ps_store_maintain(struct ps_store *s);

#endif
