/*
 * client.h — what a worker (or the front door) sees of the parameter
 * servers: join, pull, push, leave, over all shards at once.
 *
 * The client hides the wire and the transport: it cuts the flat parameter
 * vector into the layout's blocks, sends one request per shard in
 * parallel, checks every reply (sender, request id, checksums) and copies
 * pulled blocks straight into the caller's buffer. Every request carries
 * (task, incarnation, request id); a request that times out is re-sent with
 * the same id, which the shards recognise, so nothing is applied twice.
 *
 * Threads: one thread uses a client at a time; the heartbeat thread started
 * by pc_heartbeat_start has its own sockets.
 */
#ifndef HC_CLIENT_H
#define HC_CLIENT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cluster.h"
#include "layout.h"
#include "model.h"

struct pc_client;

#define PC_MAX_LANES 8          /* pc_opts.lanes at most (the wire's) */

struct pc_opts {
    int timeout_ms;     /* one attempt (default 5000) */
    int retry_ms;       /* give up on a shard after this long (default 30000) */
    int wait_ms;        /* pc_sync_step, pc_ssp_step: one attempt while a
                           shard holds the pull back (default 120000) */
    /* pc_sync_step and pc_async_step of a large model: each shard's step
     * moves as parts of about part_bytes (default 4 MiB), at most `lanes`
     * (default 4, at most PC_MAX_LANES), each on a connection of its own,
     * so transfer, apply and answer overlap. lanes 1: one message per
     * shard. */
    int lanes;
    uint64_t part_bytes;
};

/* Open sockets to every shard of `cl` as task (job, index); job is
 * HC_JOB_WORKER, or -1 for the front door. Does not wait for connections. */
int pc_open(struct pc_client **out, const struct hc_cluster *cl, int job,
            int index, const struct pc_opts *o);

/* Join every shard in parallel; `devices` is reported in status. */
int pc_join(struct pc_client *c, const char *devices);

/* After pc_join: where this worker's task index left off in its data, as
 * recorded with its last push applied (pc_step.has_place) — the least
 * place the shards that hold one hold: a push in flight when its process
 * died may have reached some shards and not others; resuming from the
 * least, the worker sends that step again, and the shards that applied
 * it already answer it without applying it twice (their record's place
 * is at or past the push's). A shard the worker's steps reach (one
 * holding a block of the model, or every shard when it has tables) that
 * holds none counts as the start (epoch 0, no batches): the worker's
 * first push reached the others alone. Call it after pc_set_model.
 * Returns 0 when no shard holds one. */
int pc_place(const struct pc_client *c, uint32_t *epoch, uint32_t *batches);

/* Print what the join replies said: shards, their incarnations and the
 * workers each has seen. */
void pc_print_view(const struct pc_client *c, FILE *f);

/* Send a heartbeat to every shard every interval_ms from a thread of the
 * client's own (stopped by pc_leave / pc_close). */
int pc_heartbeat_start(struct pc_client *c, int interval_ms);

/* Tell every shard this worker is done. */
int pc_leave(struct pc_client *c);

/* Fix the variable layout (from the model) used by create, pull and push.
 * block_elems: elements per block; 0 takes the block size the shards'
 * stores hold their variables in, as pc_join's or pc_status's replies
 * said, and the layout's default (HC_LAYOUT_DEFAULT_BLOCK) for stores
 * that hold none yet. */
int pc_set_model(struct pc_client *c, const struct hc_model *m,
                 uint32_t block_elems);

/* Whether a step of pc_sync_step and pc_async_step moves in parts (the
 * model set is large enough for more than one part a shard). */
int pc_in_parts(const struct pc_client *c);

/* Chief: register the model's variables on every shard with their initial
 * values `init` (n_params floats). Idempotent across restarts. */
int pc_create(struct pc_client *c, const float *init);

/*
 * The chief's initial rows of the model's tables (--initial-weights), as
 * stored rows: pc_create_loading is pc_create whose stores, when created
 * by it, serve nothing (pulls and pushes answer "no variables yet", so the
 * other workers wait) until the rows are in; stores that exist already
 * are kept as they are. pc_init_rows_begin asks every shard whether it
 * still takes rows (*loading: how many do — 0 when the job already has
 * values: a restarted chief then sends none). pc_init_rows sends each
 * table's rows t[i].grad (n, dim) of ids t[i].ids (each id once, any
 * order, below input_dim) to the shards holding them that are loading;
 * a row stored again (a restarted chief's repeat) is replaced. Each shard
 * writes its rows' slots at the optimizer's initial values, update count
 * 0. pc_init_rows_done ends the loading: every shard still loading serves
 * from then on. Call them in that order, on the chief, after
 * pc_create_loading. Errors: HC_ERR_INVAL (an id ≥ input_dim or repeated,
 * named; out of order calls), the shards' refusals, transport errors.
 */
struct pc_rows;
int pc_create_loading(struct pc_client *c, const float *init);
int pc_init_rows_begin(struct pc_client *c, int *loading);
int pc_init_rows(struct pc_client *c, const struct pc_rows *t,
                 size_t n_tables);
int pc_init_rows_done(struct pc_client *c);

/* Pull every block into params (n_params floats). *version, when not NULL,
 * receives the smallest shard version seen. */
int pc_pull(struct pc_client *c, float *params, uint64_t *version);

/*
 * Row-sparse tables (client_rows.c): a model variable with table_rows > 0
 * (model.h), its rows spread over every shard by hc_row_shard. The caller
 * gives each table's batch ids as they come (any order, repeats allowed);
 * the client de-duplicates them (rowmap.h), sends each shard its sorted
 * unique ids of every table in one request, all shards in parallel, and
 * scatters the rows back — or sums the gradients of repeated ids before
 * the push. Only touched rows travel.
 *
 * pc_pull_rows: for each of t[0 .. n_tables), rows ids[0 .. n) into
 * rows (n, dim); the smallest shard version read into *version (may be
 * NULL). pc_push_rows: the per-position gradients grad (n, dim) of each
 * table's ids, summed by id, applied by each shard holding some as one
 * step (async, ssp: at once, exactly once; the gradient used is sum /
 * samples); the largest version after it into *version (may be NULL).
 * In sync mode each shard holds the push (durably, answered at once, at
 * the current version) for its open step, which sums every worker's rows
 * by row and applies them once with 1 / (their samples) at its commit:
 * call it before the step's pc_sync_step. At most HC_WIRE_MAX_TABLES tables, each
 * once. Errors: HC_ERR_INVAL (a var that is no table of the model or
 * given twice, an id ≥ its input_dim: named; no model set), the shards'
 * refusals, transport errors.
 */
struct pc_rows {
    uint32_t var;           /* a table's variable */
    const uint64_t *ids;    /* (n) */
    size_t n;
    float *rows;            /* (n, dim) pc_pull_rows writes them */
    const float *grad;      /* (n, dim) pc_push_rows reads them */
};
int pc_pull_rows(struct pc_client *c, struct pc_rows *t, size_t n_tables,
                 uint64_t *version);
int pc_push_rows(struct pc_client *c, const struct pc_rows *t,
                 size_t n_tables, uint32_t samples, uint64_t *version);

/* The bytes on the wire of every pc_pull_rows (push 0) or pc_push_rows
 * (push 1) answered so far: the requests sent and the replies received,
 * whole messages (protobuf header, ids, rows and their checksums; not the
 * transport's framing), each request counted once even when re-sent; and
 * of the rows riding on a step's push-and-pull (pc_grad.rows,
 * pc_step.pull_rows), their share of its messages: their tensors and
 * their RowsRefs and TensorRefs in the header. */
void pc_rows_wire(const struct pc_client *c, int push, uint64_t *sent,
                  uint64_t *received);

/*
 * pc_push_rows for the rows of a worker's step whose dense push
 * (pc_async_step, pc_ssp_step, pc_sync_step) follows: each shard the
 * dense push goes to (one holding a block of the model) holds them
 * (durably, answered at once) and applies them with this worker's next
 * push, in its transaction, as one step — a worker's step counts once on
 * each shard, and its rows and dense gradient land together or not at
 * all; a shard of rows alone applies them at once, as its step. A held
 * push not yet applied is replaced by the worker's next rows push (its
 * restarted process's). Same errors.
 */
int pc_push_rows_step(struct pc_client *c, const struct pc_rows *t,
                      size_t n_tables, uint32_t samples);

/* One step of a synchronous or bounded-staleness worker. */
struct pc_step {
    uint64_t min_version;   /* in: sync: wait until every shard reaches it */
    uint64_t clock;         /* in: ssp: steps this worker has pushed */
    uint32_t global_batch;  /* in: sync: samples of the step over all
                               workers (0: ask for no slice) */
    uint32_t job_batch;     /* in: sync: this worker's idea of the job's full
                               global batch; out: the job's (ps:0's) */
    int has_place;          /* in: async/ssp push: the worker's place in its
                               data once this push is applied — `batches`
                               batches of epoch `epoch` done — recorded by
                               the shards with it (see pc_place) */
    uint32_t epoch, batches;
    uint64_t version;       /* out: smallest version pulled */
    int has_slice;          /* out: sync: ps:0 assigned a slice */
    uint32_t offset, count; /* out: this worker's slice of the global batch */
    int late;               /* out: sync step: a shard counted the pushed
                               gradient too late for its step (backup
                               workers) */
    /* in: pc_async_step, pc_ssp_step: rows to pull with the step's answer
     * — their values after it, in the same request to each shard as the
     * push (Push.rows_pull) — written into pull_rows[k].rows; none: n 0.
     * out: rows_pulled 1 when they came. */
    struct pc_rows *pull_rows;  /* (n_pull_rows) */
    size_t n_pull_rows;
    int rows_pulled;
};

/* Pull with the step's conditions; waits (up to wait_ms per attempt, 0 =
 * the client's timeout) while a shard holds the pull back. */
int pc_pull_step(struct pc_client *c, float *params, struct pc_step *st,
                 int wait_ms);

/* Push a gradient (n_params floats, the mean over `samples` samples)
 * computed at base_version with the worker's measured speed; *late (may
 * be NULL) is set when a shard counted it as too late for its
 * synchronous step. */
int pc_push_step(struct pc_client *c, const float *grads, uint32_t samples,
                 uint64_t base_version, float samples_per_s, uint64_t clock,
                 int *late);

/*
 * A gradient still being computed, pushed as it is (BytePS's priority):
 * backward marks elements [from, n_params) final as it finishes each
 * layer, the last layers first, and a step in parts sends each part as
 * soon as all its elements are (a step in one message waits for all).
 * The computing thread marks; the thread running the step waits. Reset
 * before each step.
 */
struct pc_ready {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t from;                /* under mu: [from, n_params) final */
    int failed;                 /* under mu: the computation failed */
};

void pc_ready_init(struct pc_ready *r);
void pc_ready_destroy(struct pc_ready *r);
/* Nothing final yet: from = n_params, failed = 0. */
void pc_ready_reset(struct pc_ready *r, size_t n_params);
/* Elements [from, n_params) are final (from only goes down). */
void pc_ready_mark(struct pc_ready *r, size_t from);
/* The gradient will never be final: every wait returns HC_ERR_CANCELLED
 * and the step gives up. */
void pc_ready_fail(struct pc_ready *r);

/* A gradient to push: the mean over `samples` samples, computed on the
 * values of base_version, with the worker's measured speed. */
struct pc_grad {
    const float *data;          /* (n_params) */
    uint32_t samples;
    uint64_t base_version;
    float samples_per_s;
    struct pc_ready *ready;     /* NULL: data is final; else sent as it
                                   becomes final (params is written only
                                   once all of it is) */
    /* pc_async_step, pc_ssp_step: the step's rows' per-position gradients
     * (pc_rows.grad, of the mean loss times samples, as pc_push_rows
     * takes them), summed by id and pushed in the step's request to each
     * shard (Push.rows_grad), applied there with the dense gradient in one
     * store transaction, as one step; none: n_rows 0. */
    const struct pc_rows *rows; /* (n_rows) */
    size_t n_rows;
};

/*
 * One step's exchange, one round trip (as ps-lite's PushPull): push g and
 * receive into params (n_params floats) the values the mode allows next.
 * Each fills st->version (the smallest shard version pulled).
 *
 * A click-through step (async, ssp): g's rows and st's rows to pull ride
 * in the same request to each shard (a shard that holds no block of the
 * model gets a push of rows alone, or a PullRows when it has only rows to
 * pull) — one request per shard a step. A step in parts (a large model,
 * pc_in_parts) sends its rows as pc_push_rows_step before and
 * pc_pull_rows after it instead; a failed pull then leaves
 * st->rows_pulled 0 and the step is not failed. pc_sync_step refuses rows
 * (HC_ERR_INVAL): sync pushes them with pc_push_rows, and the next slice's
 * ids are known only from the step's answer.
 *
 * pc_sync_step: g is for step base_version; answers once every worker has
 * pushed that step, with version base_version + 1 and this worker's slice
 * (st->has_slice, offset, count) of st->global_batch (in: the samples of
 * step base_version + 1) for it; st->late when a shard counted g too late
 * for its step. Waits up to the client's wait_ms per attempt.
 *
 * pc_ssp_step: answers once this worker is within the staleness bound
 * after the push (st->clock: steps it pushed before this one); waits up to
 * wait_ms per attempt.
 *
 * pc_async_step: answers at once with the freshest values.
 *
 * pc_ssp_step and pc_async_step send the worker's place in its data with
 * the push when st->has_place (st->epoch, st->batches), as the shards
 * record it (pc_place). Errors: a code with a message naming the shard.
 */
int pc_sync_step(struct pc_client *c, const struct pc_grad *g, float *params,
                 struct pc_step *st);
int pc_ssp_step(struct pc_client *c, const struct pc_grad *g, float *params,
                struct pc_step *st);
int pc_async_step(struct pc_client *c, const struct pc_grad *g, float *params,
                  struct pc_step *st);

/* Ask every shard to shut down (front door). */
int pc_shutdown(struct pc_client *c);

/* A worker's membership as a shard reports it. */
enum pc_member_state {
    PC_MEMBER_UNKNOWN,          /* never joined, or a state not known here */
    PC_MEMBER_JOINED,
    PC_MEMBER_LEFT,             /* said goodbye */
    PC_MEMBER_DEAD              /* missed its heartbeats */
};

/* "unknown", "joined", "left", "dead", as `hetps status` prints them. */
const char *pc_member_state_name(enum pc_member_state s);

/* What one shard says of one worker. */
struct pc_member {
    int worker;
    enum pc_member_state state;
    uint64_t incarnation;
    uint64_t last_seen_ms;
    uint64_t requests, duplicates;
    char devices[128];
    uint64_t clock, late;       /* steps pushed; gradients too late */
    float samples_per_s;        /* reported speed */
    uint32_t share;             /* sync: samples of the current step */
    float lag_ms;               /* sync: fixed time per step; -1: not sync */
    int has_place;              /* async/ssp: where it is in its data: */
    uint32_t epoch, batches;    /*   batches done of epoch (0-based) */
};

/* What one shard says of itself. */
#define PC_MAX_TABLES 16        /* tables a status lists (more: left off) */
struct pc_shard_status {
    int up;                     /* answered */
    char error[512];            /* why not, when !up */
    uint64_t incarnation, version, requests, duplicates, rejected, uptime_ms;
    uint64_t late, stale;       /* sync: late gradients; async: refused old */
    uint64_t nonfinite;         /* pushes refused for NaN/Inf values */
    uint32_t max_ahead;         /* ssp: most steps a worker ran ahead */
    uint32_t waiting;           /* pulls held back now */
    char waiting_for[256];      /* sync: workers the open step waits for */
    double waiting_s;           /*   since this many seconds ("": none) */
    char mode[16];
    uint32_t block_elems;       /* the store's block size; 0: no variables */
    int n_members;
    struct pc_member *members;  /* (n_members), freed by pc_status_free */
    int n_tables;               /* row-sparse tables, at most PC_MAX_TABLES */
    struct pc_table_rows {
        uint32_t var;           /* the model's variable */
        uint64_t rows;          /* its rows stored on this shard */
    } tables[PC_MAX_TABLES];
};

/* Ask every shard for its status in parallel; out has one entry per shard.
 * Returns HC_OK even when some shards are down (see out[i].up). */
int pc_status(struct pc_client *c, struct pc_shard_status *out);
void pc_status_free(struct pc_shard_status *st, int n);

void pc_close(struct pc_client *c);

#endif
