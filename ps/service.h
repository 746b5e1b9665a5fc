/*
 * service.h — one parameter-server shard as a network service.
 *
 * The service receives envelopes over common/rpc, validates them
 * (common/wire), keeps the membership of the workers (join, heartbeat,
 * leave) and answers status and shutdown. Requests with an effect carry
 * (worker, incarnation, request id); the per-worker record answers a repeat
 * of the last applied request with the reply sent the first time, so a
 * re-sent request is never applied twice. Variable state (create, pull,
 * push) is delegated to ps/shard.h.
 *
 * Threads: handlers run on nng's threads in parallel. Membership, records
 * and the mode's state are kept under one small mutex; the shard's writes
 * (create, push, a step's apply) are serialised apart from it, and pulls
 * read store snapshots beside them (service_impl.h says which path takes
 * which lock). ps_service_wait blocks the calling (main) thread.
 */
#ifndef PS_SERVICE_H
#define PS_SERVICE_H

#include <stdint.h>

#include "cluster.h"

struct ps_service;

struct ps_service_conf {
    const struct hc_cluster *cluster;   /* must outlive the service */
    const char *cluster_file;   /* re-read on change or SIGHUP (elastic
                                   membership); NULL: TF_CONFIG, fixed */
    int shard;                  /* this shard's index in cluster->ps */
    const char *listen_url;     /* NULL: cluster->ps[shard].url */
    const char *data_dir;       /* LMDB directory of this shard */
    int n_ctx;                  /* requests in flight (0: default) */
    size_t max_message;         /* largest accepted request (0: default) */
    int heartbeat_timeout_ms;   /* a worker silent this long is dead */
    int join_timeout_ms;        /* sync/ssp: a worker never joined by then
                                   is dead (default 60000) */
    int balance;                /* sync: split batches by speed */
    int durability;             /* 0 process (default), 1 machine */
    unsigned sync_ms;           /* machine: group commit window (0: each) */
    int apply_threads;          /* a large optimizer step's threads (0: the
                                   machine's cores, at most 8) */
    uint64_t max_staleness;     /* async: refuse older gradients (0: off) */
    struct hc_metrics *metrics; /* record into (service_metrics.c); NULL:
                                   none. Must outlive the service */
    int recv_deadline_ms;       /* rpc: a connection owed no reply that
                                   completes no request this long is
                                   closed (0: the default, 120 s) */
    int step_timeout_ms;        /* sync: a step waits this long for a live
                                   worker's push, then goes on without it
                                   (marked dead; default 120000) */
    int allow_nonfinite;        /* apply pushes holding NaN or Inf (default:
                                   refused, counted in status) */
};

/* Open the shard's store and start listening. Errors name the URL or the
 * directory. */
int ps_service_start(struct ps_service **out, const struct ps_service_conf *c);

/* Block until a Shutdown request arrives or ps_service_request_stop is
 * called (e.g. from a signal handler: it is async-signal-safe). */
void ps_service_wait(struct ps_service *s);

/* Async-signal-safe: ask ps_service_wait to return. */
void ps_service_request_stop(struct ps_service *s);

/* Async-signal-safe: re-read the cluster file at the next tick (SIGHUP). */
void ps_service_request_reload(struct ps_service *s);

/* Stop listening, commit and close the store, free. */
void ps_service_stop(struct ps_service *s);

/* Tests' seam: fn(arg) runs in each synchronous step's apply, on the
 * thread applying it, holding the shard's write lock and not the service's
 * small one (as the apply does), before the store's transaction. NULL:
 * none. */
void ps_service_set_apply_hook(struct ps_service *s, void (*fn)(void *),
                               void *arg);

/* Tests' seam: on 1, a synchronous step's last part of a worker's push is
 * answered before the commit too (from the open step, as the others are),
 * so no answer confirms the step — what a worker must not accept. */
void ps_service_set_unconfirmed(struct ps_service *s, int on);

#endif
