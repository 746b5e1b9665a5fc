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
 * One thread at a time; the client and the net must outlive it.
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
 * whole messages of the client's rows calls, both ways (pc_rows_wire:
 * headers and checksums included, evaluation's pulls too); and the
 * last push's step alone, for the summaries: its unique rows, its pull's
 * bytes and its own. */
struct wk_tables_stats {
    uint64_t pulls, pushes;
    uint64_t rows_pulled, rows_pushed;
    uint64_t bytes_pulled, bytes_pushed;
    uint64_t wire_pulls, wire_pushes;
    uint64_t step_rows, step_bytes_pulled, step_bytes_pushed;
};
void wk_tables_stats(const struct wk_tables *t, struct wk_tables_stats *out);

#endif
