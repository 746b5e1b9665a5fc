/*
 * shard.h — the variables of one parameter-server shard: creation by the
 * chief, pulls and pushes, on top of the LMDB store (ps/store.h) and the
 * optimizer (ps/optimizer.h). Knows the wire's envelopes, not the network.
 *
 * Threads: pulls (ps_shard_answer_pull, ps_shard_serve of a Pull),
 * ps_shard_version, ps_shard_place and ps_shard_record may run on any
 * number of threads at once, beside one writer: create, push
 * (ps_shard_serve of those), ps_shard_push, ps_shard_push_group,
 * ps_shard_accumulate and ps_shard_apply_step
 * share the shard's scratch and must be serialised by the caller.
 * ps_shard_open and ps_shard_close run alone.
 */
#ifndef PS_SHARD_H
#define PS_SHARD_H

#include <stdint.h>

#include <nng/nng.h>

#include "store.h"
#include "wire.h"

struct ps_shard;

/* Open (creating if needed) the shard's store in `dir`. Variables exist
 * once the chief's CreateVariables arrives, or already when the store
 * holds them from an earlier run. apply_threads: ps_store_opts's (0: the
 * machine's cores, 1: one thread). */
int ps_shard_open(struct ps_shard **out, const char *dir, int shard,
                  int n_shards, int durability, unsigned sync_ms,
                  int apply_threads);

/* 1 once the shard holds variables of which some are a batch norm's
 * moving statistics (their definitions' "moving"), else 0. Any thread. */
int ps_shard_has_moving(const struct ps_shard *sh);

/* The record of the last push the store applied for worker w on `lane`
 * (after a restart: so a repeat is still answered from it).
 * HC_ERR_NOTFOUND when none. */
int ps_shard_record(struct ps_shard *sh, int w, uint32_t lane,
                    struct ps_record *out);

/* Worker w's place in its data, recorded with its last applied push
 * (at->known = 0 when none; sh may be NULL; a damaged record is logged
 * and read as none). */
void ps_shard_place(struct ps_shard *sh, int w, struct ps_place *at);

/* What a pull's answer carries besides the values: a synchronous step's
 * slice of the global batch for the worker. */
struct ps_pull_extra {
    int has_slice;
    uint32_t offset, count;
    int late;                   /* push-and-pull: the push came too late */
    uint32_t job_batch;         /* sync: the job's global batch (0: none) */
    int uncommitted;            /* sync part: from the open step */
};

/* Serve a create, pull or push (applied at once, answered with an Ack at
 * the version after it); rows: ps_shard_pull_rows, ps_shard_push_rows. `extra` (may be NULL) adds to a pull's answer.
 * On success *reply is the answer (owned by the caller); on failure
 * returns a code with the reason in hc_err_msg(). */
int ps_shard_serve(struct ps_shard *sh, const struct hc_wire_msg *in,
                   const struct hc_sender *me,
                   const struct ps_pull_extra *extra, nng_msg **reply);

/* Apply one push at once, recorded as answered at *version, the version
 * after it (ps_shard_push_group of one). The caller builds its reply. */
int ps_shard_push(struct ps_shard *sh, const struct hc_wire_msg *in,
                  uint64_t *version);

/* One push of a group (ps_shard_push_group): `in` given; version, rv and
 * err (rv's message) filled. */
struct ps_push_item {
    const struct hc_wire_msg *in;
    uint64_t version;           /* the version after this push's step */
    int rv;                     /* HC_OK, or why this push was not applied */
    char err[512];
};

/* Group commit: apply the pushes items[0 .. n) as consecutive steps in one
 * store transaction (ps_store_apply_group), each with its record ("request
 * R of worker W, incarnation I, answered at the version after its step",
 * and the worker's place). Builds no reply: the caller answers each push
 * (an Ack at its version, or a push-and-pull's values). A push that fails
 * its checks is left out (its rv and err set); when the transaction fails,
 * none is applied and each carries the error. */
void ps_shard_push_group(struct ps_shard *sh, struct ps_push_item *items,
                         size_t n);

/* Synchronous steps: add a push (mean gradient of `samples` samples) to the
 * step's sum, weighted by samples. Checks the tensors as a push would.
 * lend: the caller keeps in's message until the step is applied, or hands
 * it to ps_shard_unlend before freeing it — so a block's only gradient is
 * read where it lies (one worker's step: no sum made at all). */
int ps_shard_accumulate(struct ps_shard *sh, const struct hc_wire_msg *in,
                        int lend);

/* The message body [body, body + len) is about to be freed: the open
 * step's gradients lent from it are copied into the step's sum first.
 * Under the same lock as ps_shard_accumulate. */
void ps_shard_unlend(struct ps_shard *sh, const void *body, size_t len);

/* The blocks of the open step whose sums every one of `need` workers'
 * pushes is in (need 0: none) go to the optimizer now, into the step's
 * open store transaction (ps_store_step_add), while the rest arrive: their
 * gradients (a sum, or a lent push the caller keeps) must stay until the
 * step is applied. Returns how many blocks went. Under the lock of
 * ps_shard_accumulate. */
int ps_shard_apply_ready(struct ps_shard *sh, uint32_t need);

/* Apply the step's sum divided by `total` samples (its sample-weighted
 * mean; per block, over the samples of the pushes that gave it) with the
 * optimizer — the blocks not applied yet, then the step committed as one
 * store transaction with the ones ps_shard_apply_ready gave it — with the
 * records of the pushes in it (recs[0 .. n_recs), made by ps_record_begin:
 * answered at the version after the step); clears the sum. */
int ps_shard_apply_step(struct ps_shard *sh, uint64_t total,
                        const struct ps_record *recs, size_t n_recs);

/* The pull answer (values of the requested ranges, version, `extra`) to a
 * Pull, or to a Push that carries ranges (push-and-pull). */
int ps_shard_answer_pull(struct ps_shard *sh, const struct hc_wire_msg *in,
                         const struct hc_sender *me,
                         const struct ps_pull_extra *extra, nng_msg **reply);

/* Whether every range in's push-and-pull asks for is of a block the open
 * step has applied (ps_shard_apply_ready): its answer is known before the
 * step commits. Under the lock of ps_shard_accumulate. */
int ps_shard_applied(struct ps_shard *sh, const struct hc_wire_msg *in);

/* The answer to in's push-and-pull from the open step, before its commit
 * (ranges ps_shard_applied found applied): the values of `version`, the
 * open step's. HC_ERR_STALE when the values read are another version's
 * (the step failed and will be redone). No slice in it: the worker's last
 * part brings that, after the commit. Not under the service's locks (it
 * waits for the store's step thread). */
int ps_shard_answer_early(struct ps_shard *sh, const struct hc_wire_msg *in,
                          const struct hc_sender *me, uint64_t version,
                          nng_msg **reply);

/* ---- row-sparse tables (shard_rows.c) ----------------------------------- */

/* The answer to a PullRows: an Ack carrying, per table with ids, the rows
 * of its ids in their order, each table read from one snapshot (rows
 * never written: their initial values), and the smallest version read. Any thread, as a pull. Errors:
 * HC_ERR_NOTFOUND (no variables yet, or the key is no table here),
 * HC_ERR_MISMATCH (dim is not the table's), HC_ERR_INVAL (an id ≥ the
 * table's input_dim), HC_ERR_STORE, HC_ERR_NOMEM. */
int ps_shard_pull_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       const struct hc_sender *me, nng_msg **reply);

/* Delete worker's held rows push (ps_store_rows_drop): its step was
 * answered without an apply. Under the writers' lock. */
int ps_shard_drop_held(struct ps_shard *sh, uint32_t worker);

/* Apply a PushRows at once as one step (each table's rows' gradients
 * divided by its samples, through the optimizer row by row), recorded
 * as the worker's push on its lane in the same store transaction; the
 * version after it into *version. hold (sync): kept in the store with its
 * record for the open step instead (ps_store_rows_hold), *version the
 * current one. Under the writers' lock. Errors as ps_shard_pull_rows,
 * HC_ERR_DATA (a gradient not finite), the store's. */
int ps_shard_push_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       int hold, uint64_t *version);

/* A step's Push with rows (Push.rows_grad): each table's ids and summed
 * gradients as the step's row updates rows[0 .. n_rows_grad), scaled by
 * 1 / samples, the ids malloc'd into ids[k] (the caller frees them, set
 * or NULL, on success or not); their gradients point into in. Errors as
 * ps_shard_push_rows (HC_ERR_INVAL: an id ≥ the table's input_dim).
 * Under the writers' lock. */
int ps_shard_step_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       struct ps_rows *rows, uint64_t **ids);

/* The rows of a Push's rows_pull table k (Push.rows_pull) into out
 * (n, dim), from one snapshot, *step its step. Errors as
 * ps_shard_pull_rows. Any thread, as a pull. */
int ps_shard_read_rows(struct ps_shard *sh, const struct hc_wire_msg *in,
                       size_t k, float *out, uint64_t *step);

/* The shard's store once its variables exist (NULL before): what the
 * service's status, metrics and records read. */
struct ps_store *ps_shard_store(const struct ps_shard *sh);

/* Updates applied so far (the shard's global step). */
uint64_t ps_shard_version(const struct ps_shard *sh);

/* The model signature the variables were created with; 0 before. */
uint64_t ps_shard_signature(const struct ps_shard *sh);

/* Elements per block of the variables' layout; 0 before they exist. */
uint32_t ps_shard_block_elems(const struct ps_shard *sh);

/* The store's housekeeping (ps_store_maintain): call every few hundred ms. */
int ps_shard_maintain(struct ps_shard *sh);

void ps_shard_close(struct ps_shard *sh);

#endif
