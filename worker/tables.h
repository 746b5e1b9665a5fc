/*
 * tables.h — the trainer's sparse path: each step, for every row-sparse
 * table of the model (its embeddings, nn.h's wk_net_tables), the batch's
 * ids taken from the input rows, de-duplicated (rowmap.h), their rows
 * pulled from the shards (pc_pull_rows, one request per shard for every
 * table) and set in the net before its forward; after backward the rows'
 * gradients, summed by row in the net, pushed (pc_push_rows) beside the
 * dense push. Only touched rows travel.
 *
 * The pull runs as the replicas' before-forward hook (replica.h), so
 * training steps and evaluation alike look their rows up; the push is
 * the trainer's, after a training step. The pushed gradient is that of
 * the batch's mean loss, as the dense push's (samples 1: the shard takes
 * it as it is). Async and ssp; sync shards refuse rows pushes.
 *
 * One request per shard a step (async, ssp): the trainer reads its next
 * batch while the step computes, and the step's exchange carries the
 * rows' gradients (wk_tables_step_push), the dense push-and-pull and the
 * next batch's rows to pull (wk_tables_ahead_ids) in one request to each
 * shard (client.h, pc_grad.rows and pc_step.pull_rows); the hook then
 * finds them and pulls nothing. --overlap pulls two batches ahead, its
 * exchange thread reading that batch first. Three sets of buffers take
 * turns: the rows in the net, the rows whose push is under way, the rows
 * pulled ahead.
 *
 * Threads: the trainer's thread calls everything, except that while it
 * holds a set begun ahead another thread may run wk_tables_ahead_pull of
 * that set, and while it holds a taken push another thread may run
 * wk_tables_send; the trainer waits for those before the matching _end or
 * _sent. The client and the net must outlive it.
 */
#ifndef WK_TABLES_H
#define WK_TABLES_H

#include "client.h"
#include "model.h"
#include "nn.h"

struct wk_tables;

/*
 * The tables of m for batches of up to max_batch samples, pulled and
 * pushed through pc (its model set). *out is NULL when m has none.
 * Errors: HC_ERR_NOMEM.
 */
int wk_tables_open(const struct hc_model *m, struct pc_client *pc,
                   int max_batch, struct wk_tables **out);
/*
 * The tables of m looked up in dense arrays instead of the shards:
 * dense[k] (input_dim, dim) the k-th embedding's in layer order, as
 * Keras's weights file holds it (keras.h's hc_keras_dense_tables), for
 * eval and predict of exported weights. Nothing is pushed
 * (wk_tables_push is HC_ERR_INVAL); the arrays must outlive *out.
 * Errors: as wk_tables_open.
 */
int wk_tables_open_dense(const struct hc_model *m, const float *const *dense,
                         int max_batch, struct wk_tables **out);
void wk_tables_close(struct wk_tables *t);     /* NULL allowed */

/*
 * The before-forward hook (wk_replicas_before_forward; arg is the
 * wk_tables): the rows of the B samples x (B, in_size) pulled and set in
 * net. Errors: HC_ERR_INVAL (an id negative or ≥ its table's input_dim:
 * the sample, the field and the id named), the client's, the net's.
 */
int wk_tables_before(void *arg, struct wk_net *net, const float *x, int B);

/*
 * Rows pulled ahead (async, ssp): _begin reserves a set (*set) for a batch
 * whose forward is to come; wk_tables_ahead_pull, from any one thread,
 * de-duplicates the ids of its B samples x (B, in_size) into the set and
 * pulls their rows on pc (nothing else in flight on it); _end(ok)
 * makes them the next forward's (ok 0: drops them). The hook uses the
 * oldest set ended when it holds the forward's very ids (each table's,
 * compared), and drops every ended set otherwise and pulls (on pc).
 * Errors: _begin: HC_ERR_INVAL (no client; every set in use),
 * _pull: HC_ERR_INVAL (B out of range), as the hook's.
 */
int wk_tables_ahead_begin(struct wk_tables *t, int *set);
int wk_tables_ahead_pull(struct wk_tables *t, int set, const float *x, int B);
void wk_tables_ahead_end(struct wk_tables *t, int set, int ok);

/* wk_tables_ahead_pull without the pull: set `set`'s ids of the B samples
 * x de-duplicated, and *rows (n tables, owned by t, valid until the set's
 * next use) the rows to pull into the set — by a step's push-and-pull
 * (pc_step.pull_rows), from the same thread; then _end(ok: they came).
 * Errors as wk_tables_ahead_pull's, without the client's. */
int wk_tables_ahead_ids(struct wk_tables *t, int set, const float *x, int B,
                        struct pc_rows **rows, size_t *n);

/* busy 1: pc is in a call on another thread (--overlap's exchange): a
 * hook that finds no rows pulled ahead for its batch fails
 * (HC_ERR_INVAL) instead of pulling on it. */
void wk_tables_busy(struct wk_tables *t, int busy);

/*
 * A step's push in three calls, so that it may travel on another thread:
 * wk_tables_take (the trainer's thread, after the step's backward: the
 * rows' gradients out of the net, as wk_tables_push says), wk_tables_send
 * (any one thread: pc_push_rows_step), wk_tables_sent (the trainer's
 * thread, after the send returned: its buffers free). Errors: take as
 * wk_tables_push's, and HC_ERR_INVAL when a taken push is not sent yet;
 * send: HC_ERR_INVAL (nothing taken), the client's.
 */
int wk_tables_take(struct wk_tables *t, uint32_t samples);
int wk_tables_send(struct wk_tables *t);
void wk_tables_sent(struct wk_tables *t);

/* The taken push's rows (wk_tables_take) for the step's own push-and-pull
 * instead of wk_tables_send: *rows (n tables, owned by t, valid until
 * _sent) each table's unique ids and their gradients, as pc_grad.rows
 * takes them (the samples: the taken push's, which the caller gives as
 * pc_grad.samples). Any one thread, as wk_tables_send. Errors:
 * HC_ERR_INVAL (nothing taken). */
int wk_tables_step_push(struct wk_tables *t, const struct pc_rows **rows,
                        size_t *n);

/*
 * After a training step over `samples` samples: the gradients of the rows
 * the last hook set (of the batch's mean loss), pushed as their sum over
 * the samples with `samples` — as the dense push carries its gradient —
 * so a sync step's shards weigh each worker's rows by its samples. In
 * sync, call it before pc_sync_step (the shard holds it for the step).
 * Errors: HC_ERR_INVAL (no rows pulled since the last push), the net's,
 * the client's.
 */
int wk_tables_push(struct wk_tables *t, uint32_t samples);

/* What travelled since opening, for the logs: pulls and pushes made,
 * rows (unique ids) in them, and their bytes on the wire beyond the
 * headers (an id's 8 bytes and its row's dim floats each way); and the
 * client's rows on the wire, both ways (pc_rows_wire: a rows call's
 * whole messages, headers and checksums included, evaluation's pulls
 * too; the rows riding on a step's push-and-pull, their share of its
 * messages); and the last push's step alone, for the summaries:
 * its unique rows, its pull's bytes and its own. pulls_ahead: of the
 * pulls, those pulled ahead in a step's exchange and used. */
struct wk_tables_stats {
    uint64_t pulls, pulls_ahead, pushes;
    uint64_t rows_pulled, rows_pushed;
    uint64_t bytes_pulled, bytes_pushed;
    uint64_t wire_pulls, wire_pushes;
    uint64_t step_rows, step_bytes_pulled, step_bytes_pushed;
};
void wk_tables_stats(const struct wk_tables *t, struct wk_tables_stats *out);

#endif
