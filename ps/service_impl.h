/*
 * service_impl.h — the inside of a ps_service, shared by the files that
 * make up the service. Nothing outside ps/service*.c includes this; the
 * contract is service.h.
 *
 *   service.c         decode, check the sender, de-duplicate against the
 *                     per-worker records, dispatch, reply; start, the
 *                     tick loop of ps_service_wait, stop
 *   service_member.c  what the shard says of its members (join and status
 *                     replies), silent workers marked dead, and the
 *                     cluster file re-read (elastic membership)
 *   service_pull.c    pulls and pushes as the mode judges them: pulls
 *                     answered now or kept until the mode allows, a
 *                     complete synchronous step applied
 *
 * Threads: service_sweep_members and service_reload_cluster take s->mu
 * themselves (ps_service_wait calls them); the other functions taking a
 * service are called with it held, except service_error_reply, which reads
 * only what never changes.
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
#include "shard.h"
#include "sync.h"
#include "tls.h"
#include "wire.h"

enum member_state { M_NONE, M_JOINED, M_LEFT, M_DEAD };

/* What the shard knows of one worker. */
struct member {
    enum member_state state;
    uint64_t incarnation;       /* of the worker process last joined */
    /* The last applied request and its reply, kept apart for pushes (which
     * carry the optimizer's ordering) and for the rest (join, leave,
     * create), so a re-join does not make a re-sent push look old. */
    struct record {
        uint64_t last_req;      /* last applied request id */
        unsigned char *reply;   /* (reply_len) bytes answered to last_req;
                                   0 bytes: still being answered */
        size_t reply_len, reply_cap;
    } rec[2];
    int64_t last_seen_ms;
    uint32_t pipe;              /* connection its last join came on; 0 once
                                   that connection is gone */
    char devices[128];
    uint64_t requests, duplicates;
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
    uint64_t request_id;
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
    struct ps_sync *sync;
    struct pending *pending;    /* (n_pending) */
    int n_pending, cap_pending;

    pthread_mutex_t mu;         /* guards everything below */
    struct member *members;     /* (n_members) indexed by worker index */
    int n_members;
    uint64_t requests, duplicates, rejected;
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
        struct hc_series *requests[4], *seconds[4]; /* by request kind */
        struct hc_series *bytes_in, *bytes_out, *apply, *staleness;
    } met;
    uint64_t wait_version;      /* sync: the step whose wait was logged */
    double wait_logged_s;       /*   after this long (next: twice as long) */
};

/* ---- dispatch and records (service.c) ---------------------------------- */

/* An Error reply to request `id` (NULL when it cannot be built). */
nng_msg *service_error_reply(struct ps_service *s, uint64_t id,
                             Hetps__ErrorCode code, const char *text);

/* Remember the reply to the last applied request of a member. */
void service_record_reply(struct member *m, struct record *r, uint64_t id,
                          nng_msg *reply);

/* ---- metrics (service_metrics.c) --------------------------------------- */

/* Register the shard's series in conf.metrics and its render callback. */
void service_metrics_init(struct ps_service *s);
/* A request of kind pc answered in `seconds` (deferred: when kept), its
 * bytes in and out. Without s->mu. */
void service_metrics_request(struct ps_service *s, int payload_case,
                             size_t in, size_t out, double seconds);
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

/* ---- pulls, pushes and steps (service_pull.c) -------------------------- */

/* A pull: answered now, or kept (the message and the request) until the
 * mode allows it (*deferred set, NULL returned). */
nng_msg *service_serve_pull(struct ps_service *s, const struct hc_wire_msg *in,
                            nng_msg *msg_in, hc_rpc_req *req, int *deferred);

/* A push: judged by the mode, then applied, added to the step, or counted
 * as late; a push-and-pull's values now (*reply) or later (*deferred). */
int service_serve_push(struct ps_service *s, const struct hc_wire_msg *in,
                       nng_msg *msg_in, hc_rpc_req *req, int *deferred,
                       nng_msg **reply);

/* Apply a complete synchronous step, then answer the pulls it frees. */
void service_advance(struct ps_service *s);

#endif
