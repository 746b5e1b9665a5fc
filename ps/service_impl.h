/*
 * service_impl.h — the inside of a ps_service, shared by the files that
 * make up the service. Nothing outside ps/service*.c includes this; the
 * contract is service.h.
 *
 *   service.c         decode, check the sender, de-duplicate against the
 *                     per-worker records (ps/record.h), dispatch, reply;
 *                     start, the tick loop of ps_service_wait, stop
 *   service_reply.c   error and ack replies
 *   service_member.c  what the shard says of its members (join and status
 *                     replies), silent workers marked dead, and the
 *                     cluster file re-read (elastic membership)
 *   service_step.c    pulls and pushes as the mode judges them: pulls
 *                     answered now or kept until the mode allows, a
 *                     complete synchronous step applied
 *
 * Threads: three mutexes. s->mu and s->wmu are taken in this order when
 * both are held; s->qmu, the group commit's queue (service_step.c), is
 * only ever held alone — let go before its committer takes s->wmu.
 * s->mu (small) guards membership, the records, the mode's state and the
 * kept pulls; s->wmu serialises the shard's writers (create, push,
 * accumulate, a step's apply), whose scratch and store transaction are
 * one. Pulls read store snapshots under neither: in async and ssp a pull
 * the mode allows, and an async push's apply (under wmu alone), run after
 * s->mu is let go, so heartbeats, status and pulls never wait for a
 * commit. service_sweep_members and service_reload_cluster take s->mu
 * themselves (ps_service_wait calls them); service_answer_pull and
 * service_apply_outside are called without it; the other functions taking
 * a service are called with it held, except service_error_reply, which
 * reads only what never changes.
 */
#ifndef PS_SERVICE_IMPL_H
#define PS_SERVICE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "metrics.h"
#include "rpc.h"
#include "service.h"
#include "record.h"
#include "shard.h"
#include "mode.h"
#include "tls_cert.h"
#include "wire.h"

enum member_state { M_NONE, M_JOINED, M_LEFT, M_DEAD };

#define MEMBER_PIPES 4

#define SVC_KINDS 6             /* request kinds /metrics counts apart */

/* What the shard knows of one worker. Its pushes have one record per
 * lane (REC_PUSH + lane): a step's parts travel over several lanes, each
 * lane's requests in order. */
enum { REC_JOIN, REC_OTHER, REC_PUSH, N_REC = REC_PUSH + PS_RECORD_LANES };

struct member {
    enum member_state state;
    uint64_t incarnation;       /* of the worker process last joined */
    /* The records of its last requests with an effect, one per ordering:
     * pushes (REC_PUSH + lane: the optimizer's), joins, and the chief's create
     * and a leave — kept apart so that the re-join before a re-sent push,
     * create or leave (after a shard restart: a new, higher id) never
     * makes that request look old. */
    struct ps_record rec[N_REC];
    int64_t last_seen_ms;
    /* The connections its process's requests came on lately (join, pulls,
     * pushes, heartbeats: one socket each), 0 once gone. A member with any
     * left is a live process: another claiming its task is refused. */
    uint32_t pipes[MEMBER_PIPES];
    char devices[128];
    uint64_t requests, duplicates;
    unsigned in_step;           /* sync: bit l: its push on lane l
                                   (rec[REC_PUSH + l]) is in the open step,
                                   recorded with the step's apply */
    unsigned early;             /* sync: bit l: that push was answered
                                   before the commit (its record says so
                                   once the step is committed) */
    /* sync: the parts of its push to the open step held so far (Push.part
     * and parts): counted as pushed once all are in. */
    uint64_t parts_base;        /* the step they are for */
    uint64_t parts_incarnation;
    uint32_t parts_in, parts_want;
    int removed;                /* no longer in the cluster file */
    int64_t expected_ms;        /* sync/ssp: expected to join since then */
};

/* A pull that must wait (sync: for the next version; ssp: for the slowest
 * worker). The request message is kept and served again when ready. */
struct pending {
    hc_rpc_req *req;
    nng_msg *msg;
    int worker;
    int is_push;                /* push-and-pull: record the answer */
    uint32_t lane;              /* its sender's lane */
    int held;                   /* sync: a part of a push not yet whole
                                   (its worker's other parts to come) */
    int early;                  /* sync: a part in the open step, not its
                                   worker's last: answered as soon as its
                                   blocks are applied, before the commit */
    uint64_t request_id;        /* (and the sender's incarnation in msg) */
    uint64_t min_version, clock; /* what it waits for (see pull_wants) */
    double t0;                  /* when it was kept (metrics) */
};

struct ps_service {
    struct ps_service_conf conf;
    const struct hc_cluster *cl;
    struct hc_sender me;
    hc_rpc_server *rpc;
    struct hc_tls tls;          /* this shard's certificate (rpc NULL: plain) */
    struct ps_shard *shard;
    struct ps_mode *sync;
    struct pending *pending;    /* (n_pending) */
    int n_pending, cap_pending;
    struct pending *early;      /* (n_early) taken from pending, to answer
                                   from the open step outside s->mu */
    int n_early, cap_early;
    atomic_int early_sent;      /* early answers sent in the open step */
    nng_msg **spent;            /* (n_spent) their messages, kept until the
                                   step is applied (a failed add redoes the
                                   step from the gradients lent in them) */
    int n_spent, cap_spent;

    pthread_mutex_t wmu;        /* one writer of the shard at a time */
    /* Group commit of async pushes (service_step.c): pushes queue here,
     * the first to find no commit running applies the queue in one store
     * transaction and wakes the others. */
    pthread_mutex_t qmu;        /* guards the four below */
    pthread_cond_t qcv;         /* a group was committed */
    struct group_wait *qhead, **qtail;
    int committing;
    pthread_mutex_t mu;         /* guards everything below */
    struct member *members;     /* (n_members) indexed by worker index */
    int n_members;
    uint64_t requests, duplicates, rejected;
    uint64_t claims_refused;    /* of rejected: another task's certificate
                                   (logged on a count of its own, so one
                                   flood of bad envelopes does not hide it) */
    /* Refusals said in the log (refusal_said): the connections already
     * named (the last 16), how many, and when the last line was. */
    uint32_t said_conns[16];
    unsigned said_next;
    uint64_t refusals;
    int64_t refusal_said_ms;
    uint64_t nonfinite;         /* pushes refused for NaN/Inf values */
    uint64_t deadline_version;  /* sync: the step whose deadline runs … */
    int64_t deadline_since_ms;  /* … since then (its first push seen) */
    int deadline_warned;        /* half its deadline passed: said so */
    int64_t start_ms;

    int stop_pipe[2];           /* written by request_stop, read by wait */
    atomic_int stopping;
    atomic_int reload;          /* SIGHUP: re-read the cluster file */
    struct timespec file_mtime; /* of the cluster file when last read */
    int n_active;               /* workers in the cluster file now */
    struct svc_metrics {        /* series of conf.metrics (NULL: none) */
        /* by request kind: push, pull, heartbeat, pull_rows, push_rows,
         * other (service_metrics.c) */
        struct hc_series *requests[SVC_KINDS], *seconds[SVC_KINDS];
        struct hc_series *bytes_in, *bytes_out, *apply, *staleness;
        struct hc_series *early;    /* parts answered before the commit */
        /* row-sparse requests, [0] pulls, [1] pushes: unique rows and
         * sparse bytes (ids and rows) in total and per request */
        struct hc_series *rows[2], *rows_per[2], *sbytes[2], *sbytes_per[2];
    } met;
    uint64_t wait_version;      /* sync: the step whose wait was logged */
    double wait_logged_s;       /*   after this long (next: twice as long) */
    /* sync: a step found ready is applied once s->mu is let go
     * (service_unlock), so pulls, heartbeats and status are served while
     * it runs. STEP_DUE: found ready, STEP_APPLYING: being applied; what
     * would change the step meanwhile (a push, a join, a leave, the
     * sweeps) waits on `applied` (service_lock_step). */
    enum { STEP_NONE, STEP_DUE, STEP_APPLYING } applying;
    uint64_t apply_total;       /* the due step's samples */
    struct ps_record *step_recs; /* (n_members) the records of its pushes,
                                    applied with it (service_unlock) */
    pthread_cond_t applied;
    int unconfirmed;            /* tests: ps_service_set_unconfirmed */
    void (*apply_hook)(void *); /* tests: ps_service_set_apply_hook */
    void *apply_hook_arg;
};

/* Take s->mu to change the sync step (a push, a join, a leave, a sweep):
 * after any step being applied is done. */
void service_lock_step(struct ps_service *s);

/* Let s->mu go; then, when a sync step was found ready meanwhile
 * (service_advance), apply it on this thread — holding the write lock,
 * not s->mu — and answer the pulls it frees. Every path that may call
 * service_advance ends with this instead of unlocking s->mu itself. */
void service_unlock(struct ps_service *s);

/* ---- replies (service_reply.c) ----------------------------------------- */

/* An Error reply to request `id` (NULL when it cannot be built). */
nng_msg *service_error_reply(struct ps_service *s, uint64_t id,
                             Hetps__ErrorCode code, const char *text);

/* An Ack to request `id` carrying the shard's version (NULL when it cannot
 * be built). */
nng_msg *service_ack_reply(struct ps_service *s, uint64_t id);

/* An Ack to request `id` answered at `version` (and `late`: the push came
 * too late for its step). NULL when it cannot be built. */
nng_msg *service_ack_at(struct ps_service *s, uint64_t id, uint64_t version,
                        int late);

/* ---- metrics (service_metrics.c) --------------------------------------- */

/* Register the shard's series in conf.metrics and its render callback. */
void service_metrics_init(struct ps_service *s);
/* A request of kind pc answered in `seconds` (deferred: when kept), its
 * bytes in and out. Without s->mu. */
void service_metrics_request(struct ps_service *s, int payload_case,
                             size_t in, size_t out, double seconds);
/* A PullRows or PushRows served, or a Push's rows (Push.rows_grad: as
 * pushed, rows_pull: as pulled): its unique rows and sparse bytes (8 an
 * id, 4 a float of a row). */
void service_metrics_rows(struct ps_service *s, const struct hc_wire_msg *in);
/* A request refused with `code` (the reason label). */
void service_metrics_refusal(struct ps_service *s, int code);

/* ---- members (service_member.c) --------------------------------------- */

/* The status reply; without `full` (a worker other than the chief asks)
 * only the shard, its version and its mode — no members, no counters. */
nng_msg *service_status_reply(struct ps_service *s, uint64_t id, int full);
/* The reply to worker's join: the shard, its members, and where the worker
 * left off in its data (async/ssp) when a push of it was applied here. */
nng_msg *service_join_reply(struct ps_service *s, int worker, uint64_t id);

/* Mark workers silent for longer than the heartbeat timeout as dead; log
 * whom a synchronous step has waited for, once it is SERVICE_WAIT_LOG_S
 * seconds, then at each doubling. */
void service_sweep_members(struct ps_service *s);
#define SERVICE_WAIT_LOG_S 5.0

/* The modification time of `path` into *t; -1 when it cannot be read. */
int service_file_mtime(const char *path, struct timespec *t);

/* Elastic membership: re-read the cluster file (see service_member.c). */
void service_reload_cluster(struct ps_service *s);

/* ---- pulls, pushes and steps (service_step.c) -------------------------- */

/* A pull: answered now, or kept (the message and the request) until the
 * mode allows it (*deferred set, NULL returned); in async and ssp one the
 * mode allows now is left to the caller (*outside set, NULL returned), to
 * answer with service_answer_pull once s->mu is let go. */
nng_msg *service_serve_pull(struct ps_service *s, const struct hc_wire_msg *in,
                            nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                            int *outside);

/* Free a kept request's message (struct pending's), after copying any
 * gradient of the open sync step lent from it. With s->mu. */
void service_free_kept(struct ps_service *s, nng_msg *msg);

/* What a request was answered with, for its record: the version the
 * answer named and, for values, what else it carried (the slice, late). */
struct answer_info {
    int valid;                  /* answered (not an error) */
    uint64_t version;
    struct ps_pull_extra extra;
};

/* The lane e was sent on (Envelope.lane; 0 when absent). */
uint32_t service_lane(const Hetps__Envelope *e);

/* r's request was answered as `info` says. */
void service_record_answered(struct ps_record *r,
                             const struct answer_info *info);

/* Answer a pull (or a push-and-pull's pull) now, from one store snapshot.
 * Without s->mu in async and ssp; with it in sync (the step's slice).
 * info (may be NULL) receives what the answer was built with. */
nng_msg *service_answer_pull(struct ps_service *s,
                             const struct hc_wire_msg *in, int late,
                             struct answer_info *info);

/* The answer to `in`, a repeat of the request r records (not a join's),
 * made again from the record: a push-and-pull's values with what the
 * answer carried while the shard is at the version it named (the same
 * bytes), else the values now (async; a sync step that went on without
 * this worker; a shard restarted since); otherwise an Ack at the version
 * recorded. Nothing is applied. With s->mu. */
nng_msg *service_answer_again(struct ps_service *s,
                              const struct hc_wire_msg *in,
                              const struct ps_record *r);

/* A push: judged by the mode, then applied, added to the step, or counted
 * as late; its answer now (*reply, answered as *info says: an Ack, or a
 * push-and-pull's values) or later (*deferred). In
 * async an applied push is left to the caller (*outside set, HC_OK and no
 * reply): service_apply_outside once s->mu is let go. */
int service_serve_push(struct ps_service *s, const struct hc_wire_msg *in,
                       nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                       int *outside, nng_msg **reply,
                       struct answer_info *info);

/* An async push left outside by service_serve_push, whose record the
 * caller marked as being answered (ps_record_begin: a repeat meanwhile
 * goes unanswered and is sent again; *prev what the record held before).
 * Applies it by group commit (the queued pushes in one store transaction,
 * under s->wmu, each with its record), builds its answer (an Ack at the
 * version after it, or a push-and-pull's values), then takes s->mu to
 * record it as answered (or, on failure, put the record back).
 * Returns the reply. */
nng_msg *service_apply_outside(struct ps_service *s,
                               const struct hc_wire_msg *in,
                               const struct ps_record *prev);

/* A PushRows (service_step.c), under s->wmu: async, ssp: applied at once
 * as one step with its record, answered with an Ack at the version after
 * it; sync: held in the store with its record for the open step (applied,
 * summed by row with the other workers', by the step's commit), answered
 * with an Ack at the current version (info valid both). When the shard
 * refuses it, an Error reply (info not valid). With s->mu. */
nng_msg *service_push_rows(struct ps_service *s, const struct hc_wire_msg *in,
                           struct answer_info *info);

/* Apply a complete synchronous step, then answer the pulls it frees. */
void service_advance(struct ps_service *s);

#endif
