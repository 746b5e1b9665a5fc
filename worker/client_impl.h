/*
 * client_impl.h — the inside of a pc_client, shared by the files that
 * make up the client. Nothing outside worker/client*.c includes this; the
 * contract is client.h.
 *
 *   client.c           open and close; join and the view it gives;
 *                      heartbeats, leave and shutdown; the layout and each
 *                      shard's plan (pc_set_model), and pc_create
 *   client_call.c  one request to every shard at once: send, re-join a
 *                      restarted shard and re-send the same request, check
 *                      every reply; the tests' seam (client_hook.h)
 *   client_step.c      pull, push and push-and-pull (values copied into
 *                      the caller's buffer), and status
 *   client_parts.c     a large step's push-and-pull in parts, a part per
 *                      lane (a connection of its own to the shard)
 *
 * Threads: as client.h. The heartbeat thread (client.c) reads only what
 * pc_open set and the hb_ fields (under hb_mu), takes request ids from the
 * atomic next_id, and sends on sockets of its own.
 */
#ifndef HC_CLIENT_IMPL_H
#define HC_CLIENT_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "client.h"
#include "rowmap.h"
#include "fanout.h"
#include "client_hook.h"
#include "rpc.h"
#include "tls_cert.h"
#include "wire.h"

/* A rows call as planned (client_rows.c): its tables, each one's dim and
 * where its unique rows (or summed gradients) start in rows_buf[push]. */
struct rows_call {
    size_t n;                   /* tables */
    const struct pc_rows *t;    /* (n) */
    uint32_t dim[HC_WIRE_MAX_TABLES];
    size_t off[HC_WIRE_MAX_TABLES];
    int push;
    int init;                   /* push: InitRows of values, not gradients */
    uint32_t samples;
    int with_step;              /* push: the step's dense push follows */
};

struct shard_view {
    int joined;
    uint64_t incarnation;
    uint64_t version;
    int has_place;              /* its join reply named this worker's */
    uint32_t epoch, batches;    /*   place (pc_place) */
    char members[512];          /* "worker:0 joined, worker:1 joined" */
};

/* What the client prepared for one shard's pulls and pushes. */
struct shard_plan {
    uint32_t n_blocks;
    uint32_t *blocks;           /* (n_blocks) indices into layout.blocks */
    Hetps__Range *ranges;       /* (n_blocks) for pulls */
    Hetps__Range **range_ptrs;  /* (n_blocks) */
    struct hc_tensor_src *src;  /* (n_blocks) for pushes and creates */
    /* A step's push-and-pull in parts (client_parts.c): part k is blocks
     * [part_at[k], part_at[k + 1]) and travels on lane k. */
    uint32_t n_parts;
    uint32_t *part_at;          /* (lanes + 1) */
};

/* One part of a step's push-and-pull: part `part` of shard `shard`'s
 * blocks, on lane `part`, as request `id`. */
struct part_call {
    int shard;
    uint32_t part;
    uint64_t id;
};

struct pc_client {
    const struct hc_cluster *cl;
    struct hc_sender me;
    atomic_uint_fast64_t next_id;
    struct pc_opts o;
    int n;                      /* shards */
    const char **urls, **names;
    char (*name_buf)[32];
    hc_rpc_client *rpc;
    struct hc_tls tls;          /* this task's certificate (rpc NULL: plain) */
    atomic_uint_fast64_t model_sig; /* pc_set_model's; 0 before (me's stays 0:
                                   the heartbeat thread reads me) */
    struct shard_view *view;    /* (n) */

    /* Scratch reused by every call: one entry per shard. */
    int *peers;
    nng_msg **reqs, **replies;
    nng_msg **copies;           /* the requests of the exchange under way,
                                   kept to re-send after a re-join */
    unsigned char *copy_ok;     /* copies[i] holds this call's request */
    char devices[128];          /* as joined, for re-joins */
    pc_reply_hook hook;         /* tests: see client_hook.h */
    void *hook_arg;
    int call_timeout_ms;        /* of the exchange in progress (the hook's) */
    uint32_t store_block;       /* elements per block of the shards' stores,
                                   as join or status replies said; 0: none
                                   holds variables yet */
    int *errs;
    struct hc_wire_msg *dec;

    const struct hc_model *model;
    struct hc_layout layout;
    int have_layout;
    struct shard_plan *plan;    /* (n) */
    struct hc_fanout *fan;      /* per-shard work on several cores (NULL:
                                   one shard, or one core) */
    /* Set by a push for its exchange: its requests are sent without a
     * copy kept, and made again by remake for a re-send. */
    hc_rpc_remake_fn remake;
    void *remake_arg;
    int *piece_rv;              /* (n) each fan-out piece's result, */
    char (*piece_why)[256];     /* (n) and its failure's message */

    /* Parts (client_parts.c): rpc peer `shard` is a shard's lane 0, peer
     * n + shard * (lanes - 1) + lane - 1 its lane `lane` (once the model
     * has parts: until then lanes_open is 1). */
    int lanes;                  /* wanted: pc_opts.lanes */
    int lanes_open;             /* peers per shard the rpc client has */
    uint64_t part_bytes;        /* pc_opts.part_bytes */
    int n_pcalls;               /* parts of a step over all shards */
    struct part_call *pcalls;   /* (n_pcalls) */
    int *p_peers;               /* (n_pcalls) each part's rpc peer */
    nng_msg **p_reqs, **p_replies; /* (n_pcalls) */
    int *p_errs, *p_rv;         /* (n_pcalls) */
    unsigned char *p_taken;     /* (n_pcalls) its values taken (p_rv) */
    struct hc_wire_msg *p_dec;  /* (n_pcalls) */
    char (*p_why)[256];         /* (n_pcalls) */

    /* Row-sparse tables (client_rows.c): a call's ids of each table by
     * shard, and their unique rows or summed gradients, table after table,
     * kept between calls; [0] a pull's, [1] a push's, so that a step
     * carries both (step_rows). */
    struct hc_rowmap *rowmaps[2]; /* (HC_WIRE_MAX_TABLES) once used */
    float *rows_buf[2];         /* (rows_cap[i]) floats */
    size_t rows_cap[2];
    uint64_t rows_wire[2][2];   /* [push][0 sent, 1 received]: the rows
                                   calls' messages, bytes (pc_rows_wire) */
    struct rows_call step_rows[2]; /* the step under way's rows riding on
                                   its pushes (Push.rows_pull, rows_grad):
                                   [0] to pull, [1] pushed; n 0: none */
    unsigned char *rows_loading;    /* (n) pc_init_rows_begin's answers:
                                       shard i takes initial rows */

    pthread_t hb_thread;
    int hb_running;
    int hb_interval_ms;
    pthread_mutex_t hb_mu;
    pthread_cond_t hb_cv;
    int hb_stop;
};

/* ---- requests to every shard (client_call.c) ----------------------- */

/* A fresh request id (safe from any thread). */
uint64_t client_next_id(struct pc_client *c);

/*
 * Send c->reqs[0..n) to every shard at once; decode each reply into
 * c->dec[i] and check it answers request ids[i] with payload `want` (a
 * shard that restarted is joined again and sent the same request). On
 * failure every decoded reply is released; on success the caller reads
 * c->dec and calls client_release. `what` names the call in errors.
 */
int client_call(struct pc_client *c, const uint64_t *ids,
                    Hetps__Envelope__PayloadCase want, const char *what,
                    int timeout_ms);

/* Whether the model's tensors are large enough (4 MiB) for per-shard work
 * to go to the fan-out: below that, threads cost more than they save. */
int client_big(const struct pc_client *c);

/* c->me with the model's signature, for joins, pulls and pushes. */
void client_sender(struct pc_client *c, struct hc_sender *me);

/* Free the replies (and their decoded forms) of the last exchange. */
void client_release(struct pc_client *c);

/* Free the requests not sent (c->reqs). */
void client_free_reqs(struct pc_client *c);

/* Build the same payload-only request (no tensors) for every shard; the
 * ids go to ids[0..n). */
int client_simple_reqs(struct pc_client *c, Hetps__Envelope *env,
                       uint64_t *ids);

/* Check the answer d of shard `shard` against its plan's blocks
 * [lo, hi) — followed by `extra` tensors of the step's rows — and copy
 * their values into params (client_parts.c; a whole shard's answer is
 * its blocks [0, n_blocks)). HC_OK, or a
 * code with the reason, beginning with `what`, in why. Thread-safe for
 * distinct shards or ranges. */
int client_take_blocks(const struct pc_client *c, int shard, uint32_t lo,
                       uint32_t hi, size_t extra,
                       const struct hc_wire_msg *d, float *params,
                       const char *what, char *why, size_t why_n);

/* Join shard i alone (after it restarted). */
int client_join_one(struct pc_client *c, int i);

/* ---- a step's rows (client_rows.c) -------------------------------------- */

/* The rows riding on a step's pushes: g's rows' gradients summed by id
 * and st's rows to pull, planned by shard into c->step_rows (none: both
 * n 0). Errors as pc_push_rows. */
int client_step_rows_plan(struct pc_client *c, const struct pc_grad *g,
                          const struct pc_step *st);

/* Shard s's share of the step's rows for its Push: the RowsRefs of its
 * tables with ids (refs: room for 2·HC_WIRE_MAX_TABLES; grad[*n_grad],
 * pull[*n_pull] point into it) and their tensors appended to t (room for
 * 3·HC_WIRE_MAX_TABLES): per rows_grad table its ids and gradients, then
 * per rows_pull table its ids. Returns the tensors added. Reads only. */
size_t client_step_rows_of(const struct pc_client *c, int s,
                           Hetps__RowsRef *refs, Hetps__RowsRef **grad,
                           size_t *n_grad, Hetps__RowsRef **pull,
                           size_t *n_pull, struct hc_tensor_src *t);

/* Shard s's request `id` for its share of the step's rows to pull alone,
 * a PullRows, into *out (NULL: it has none): a shard that holds no block
 * of the model and no row the step pushes. */
int client_step_rows_pull_request(struct pc_client *c, int s, uint64_t id,
                                  nng_msg **out);

/* The tables of the step's rows to pull with ids on shard s: the tensors
 * its answer carries after the values. */
size_t client_step_rows_pulled(const struct pc_client *c, int s);

/* Shard s's answer d: its rows_pull tables' rows, the tensors from
 * `first` on, into the pull's buffer; its rows' share of the messages
 * counted (pc_rows_wire). On the calling thread. */
int client_step_rows_take(struct pc_client *c, int s,
                          const struct hc_wire_msg *d, size_t first);

/* The step's exchange is over: ok, the rows taken go to the caller's
 * st->pull_rows (scattered to their positions); the step's rows forgotten
 * either way. */
void client_step_rows_end(struct pc_client *c, int ok);

/* ---- parts (client_parts.c) -------------------------------------------- */

/* Cut each shard's plan into parts of about c->part_bytes, at most
 * c->lanes (plan[i].n_parts, part_at); returns the parts over all shards. */
size_t client_parts_plan(struct pc_client *c);

/* Whether any shard's step moves in more than one part. */
int client_parts_used(const struct pc_client *c);

/* Order the step's parts (c->pcalls, c->p_peers) as a backward pass
 * finishes them: the last elements of the model first. */
void client_parts_order(struct pc_client *c);

/* One step's push-and-pull in parts: env (a Push, its per-part fields
 * filled here) with g's blocks — each part sent once g->ready says its
 * elements are final — the answers' values into params, the version,
 * slice and late flag into st. Errors name the shard. */
int client_parts_step(struct pc_client *c, const Hetps__Envelope *env,
                      const struct pc_grad *g, float *params,
                      struct pc_step *st, int timeout_ms);

/* Wait until elements [at, n_params) of r's gradient are final: HC_OK, or
 * HC_ERR_CLOSED when the computation failed. r NULL: at once. */
int client_ready_wait(struct pc_ready *r, size_t at);

/* ---- the layout (client.c) --------------------------------------------- */

/* HC_ERR_INVAL naming `what` when pc_set_model has not been called. */
int client_need_layout(const struct pc_client *c, const char *what);

#endif
