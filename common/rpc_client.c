/*
 * rpc_client.c — the client of rpc.h: one call's state machine, whatever
 * carries it (rpc_backend.h: nng REQ for plain TCP, the relay for TLS).
 *
 * A call runs one small state machine per peer — WAIT (an attempt is
 * out: its reply, its loss or its deadline ends it) → done, or SLEEP
 * (back-off) → WAIT again with the very same bytes under a new request
 * id — stepped by the calling thread alone (drive): the backend's threads
 * only hand it a reply or a loss under the client's mutex and wake it.
 * Every step has a deadline, and the whole call is bounded besides.
 * A call may name a peer several times (a worker's parts over one lane):
 * the link carries its targets one after another, in the order given.
 */
#include "rpc.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/supplemental/util/platform.h>

#include "err.h"
#include "log.h"
#include "rpc_backend.h"

#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_RETRY_MS 30000
#define DEFAULT_BACKOFF_MIN_MS 50
#define DEFAULT_BACKOFF_MAX_MS 2000
#define ABORT_SLACK_MS 5000  /* beyond the retry budget before a call aborts */

enum call_state { CALL_IDLE, CALL_WAIT, CALL_SLEEP, CALL_DONE };

struct hc_rpc_link {
    hc_rpc_client *c;
    char *url;
    char *name;
    const struct hc_rpc_dial_ops *ops;
    void *be;                  /* the backend's */
    atomic_int connected;      /* connections up now */
    atomic_int ever_connected;
    uint32_t next_id;          /* request ids sent, counted */

    /* Under c->mtx: what the backend handed for the attempt in flight. */
    enum call_state state;
    uint32_t want_id;          /* the attempt's request id */
    nng_msg *got;              /* its reply */
    int lost;                  /* its loss: a code, 0 if none */
    char lost_why[120];
    nng_time due;              /* the attempt's end, or the back-off's */

    /* One call's state, the calling thread's. */
    int in_call;
    int target;                /* the call's index this link carries now */
    int attempts;
    char last_why[120];        /* the last attempt's failure */
    int backoff_ms;
    nng_time last_warn;
    char msg[512];
};

struct hc_rpc_client {
    struct hc_rpc_client_opts opts;
    int n;
    struct hc_rpc_link *peers; /* (n) */
    nng_mtx *mtx;
    nng_cv *cv;
    int pending;               /* targets of this call not done */
    int abort;
    /* The call under way (call_all): its targets, and where each one's
     * outcome goes as its link finishes it. */
    int call_n;
    const int *call_peers;     /* (call_n) */
    nng_msg **out_replies;     /* (call_n) */
    int *out_errs;             /* (call_n) */
    nng_msg **out_first;       /* (call_n) first attempts' bytes, or NULL */
    int first_failed;          /* the first target that failed, or -1 */
    int cause;                 /* the target whose request could not be
                                  made (the call's failure), or -1 */
    char fail_msg[512];
    hc_rpc_remake_fn remake;   /* makes every other attempt's bytes */
    void *remake_arg;
    int attempt_ms;
    nng_time begin;
    void (*on_reply)(void *arg, int i, nng_msg *reply); /* hc_rpc_on_reply */
    void *on_reply_arg;
};

/* ---- what the backend hands (any of its threads) ---------------------- */

void hc_rpc_link_conn(hc_rpc_link *l, int delta)
{
    if (atomic_fetch_add(&l->connected, delta) + delta > 0)
        atomic_store(&l->ever_connected, 1);
    nng_mtx_lock(l->c->mtx);
    nng_cv_wake(l->c->cv);
    nng_mtx_unlock(l->c->mtx);
}

/* Taken for the attempt in flight, else dropped. */
void hc_rpc_link_done(hc_rpc_link *l, uint32_t id, nng_msg *m, int code,
                      const char *why)
{
    nng_mtx_lock(l->c->mtx);
    if (l->state == CALL_WAIT && id == l->want_id && !l->got && !l->lost) {
        l->got = m;
        l->lost = m ? 0 : code;
        snprintf(l->lost_why, sizeof l->lost_why, "%s", m ? "" : why);
        m = NULL;
        nng_cv_wake(l->c->cv);
    }
    nng_mtx_unlock(l->c->mtx);
    if (m)                      /* a late answer to an attempt given up */
        nng_msg_free(m);
}

/* ---- one peer's call, in the calling thread --------------------------- */

static void set_state(hc_rpc_link *p, enum call_state st, nng_time due)
{
    nng_mtx_lock(p->c->mtx);
    p->state = st;
    p->due = due;
    nng_mtx_unlock(p->c->mtx);
}

/* The target's outcome: err into the call's errs (a reply is in replies). */
static void peer_done(hc_rpc_link *p, int err)
{
    p->c->out_errs[p->target] = err;
    set_state(p, CALL_DONE, 0);
    p->c->pending--;
}

static void peer_unreachable(hc_rpc_link *p)
{
    double secs = (double)(nng_clock() - p->c->begin) / 1000.0;
    char why[200];

    if (!atomic_load(&p->ever_connected))
        snprintf(why, sizeof why, p->c->opts.tls
                 ? "never connected: connection refused, or the TLS "
                   "handshake failed (its certificate not from this "
                   "cluster's CA, or not naming the host)"
                 : "never connected: connection refused?");
    else if (atomic_load(&p->connected) > 0)
        snprintf(why, sizeof why, "connected but no reply; last error: %s",
                 p->last_why);
    else
        snprintf(why, sizeof why, "connection lost; last error: %s",
                 p->last_why);
    snprintf(p->msg, sizeof p->msg,
             "%s at %s: no reply after %.1f s, %d attempt%s (%s)", p->name,
             p->url, secs, p->attempts, p->attempts == 1 ? "" : "s", why);
    peer_done(p, HC_ERR_UNREACHABLE);
}

/* An attempt failed: back off and send again, or give up. */
static void peer_failed(hc_rpc_link *p, int code, const char *why)
{
    hc_rpc_client *c = p->c;
    nng_time now = nng_clock();
    nng_time deadline = c->begin + (nng_time)c->opts.retry_ms;
    int b = p->backoff_ms, sleep_ms;

    snprintf(p->last_why, sizeof p->last_why, "%s", why);
    if (c->abort) {
        snprintf(p->msg, sizeof p->msg, "%s at %s: call aborted after %.1f s",
                 p->name, p->url, (double)(now - c->begin) / 1000.0);
        peer_done(p, HC_ERR_TIMEOUT);
        return;
    }
    if (code != HC_ERR_CLOSED && code != HC_ERR_TIMEOUT &&
        code != HC_ERR_LIMIT) {             /* not the connection's: final */
        snprintf(p->msg, sizeof p->msg, "%s at %s: %s", p->name, p->url, why);
        peer_done(p, code);
        return;
    }
    if (now >= deadline) {
        peer_unreachable(p);
        return;
    }
    /* Exponential back-off, ±25 % jitter, never past the deadline. */
    sleep_ms = b - b / 4 + (int)(nng_random() % (uint32_t)(b / 2 + 1));
    if (sleep_ms < 1)
        sleep_ms = 1;
    if ((nng_time)sleep_ms > deadline - now)
        sleep_ms = (int)(deadline - now);
    p->backoff_ms = b > c->opts.backoff_max_ms / 2 ? c->opts.backoff_max_ms
                                                    : 2 * b;
    if (p->last_warn == 0 || now - p->last_warn >= HC_RPC_WARN_EVERY_MS) {
        p->last_warn = now;
        hc_warn("rpc: %s at %s: %s; retrying in %d ms (attempt %d, "
                "%.1f s of %.1f s)", p->name, p->url, why, sleep_ms,
                p->attempts, (double)(now - c->begin) / 1000.0,
                c->opts.retry_ms / 1000.0);
    }
    set_state(p, CALL_SLEEP, now + (nng_time)sleep_ms);
}

/* An attempt: the bytes out under a request id of their own, the caller's
 * for a target's first when given (c->out_first, taken), else made
 * (remake); when they cannot be, the peer is done. */
static void peer_send(hc_rpc_link *p)
{
    nng_msg *m = p->c->out_first ? p->c->out_first[p->target] : NULL;
    uint32_t id;
    int rv;

    if (m)
        p->c->out_first[p->target] = NULL;
    if (!m && (rv = p->c->remake(p->c->remake_arg, p->target, &m)) != HC_OK) {
        snprintf(p->msg, sizeof p->msg, "%s at %s: making the request: %s",
                 p->name, p->url, hc_err_msg());
        peer_done(p, rv);
        p->c->abort = 1;        /* the call fails: the others end now */
        if (p->c->cause < 0)
            p->c->cause = p->target;
        return;
    }
    p->attempts++;
    id = 0x80000000u | (++p->next_id & 0x7fffffffu);
    nng_mtx_lock(p->c->mtx);
    if (p->got)
        nng_msg_free(p->got);
    p->got = NULL;
    p->lost = 0;
    p->want_id = id;
    p->state = CALL_WAIT;
    p->due = nng_clock() + (nng_time)p->c->attempt_ms;
    nng_mtx_unlock(p->c->mtx);
    if ((rv = p->ops->send(p->be, id, m)) != HC_OK)
        peer_failed(p, rv, rv == HC_ERR_LIMIT ? "send: the connection is busy"
                                              : hc_strerror(rv));
}

/* Whether peer p has a step to take now (under c->mtx); if not, *next is
 * lowered to when it will. */
static int ready(hc_rpc_link *p, nng_time now, nng_time *next)
{
    if (p->state == CALL_IDLE || p->state == CALL_DONE)
        return 0;
    if (p->state == CALL_WAIT && (p->got || p->lost))
        return 1;
    if (now >= p->due)
        return 1;
    if (p->due < *next)
        *next = p->due;
    return 0;
}

/* One step of peer p (no lock held). */
static void step(hc_rpc_link *p, nng_time now)
{
    enum call_state st;
    nng_msg *m;
    int lost;
    char why[120];

    nng_mtx_lock(p->c->mtx);
    st = p->state;
    m = p->got;
    lost = p->lost;
    snprintf(why, sizeof why, "%s", p->lost_why);
    p->got = NULL;
    p->lost = 0;
    nng_mtx_unlock(p->c->mtx);
    if (st == CALL_SLEEP) {
        if (p->c->abort)
            peer_failed(p, HC_ERR_TIMEOUT, "back-off");
        else
            peer_send(p);
        return;
    }
    if (m) {
        p->c->out_replies[p->target] = m;
        peer_done(p, HC_OK);
        return;
    }
    if (!lost && now < p->due)
        return;
    p->ops->cancel(p->be, p->want_id);
    if (lost)
        peer_failed(p, lost, why);
    else
        peer_failed(p, HC_ERR_TIMEOUT, atomic_load(&p->connected) > 0
                                           ? "no reply"
                                           : "no connection");
}

/* Peer p set up for target i of the call (its first attempt follows). */
static void call_begin(hc_rpc_link *p, int i)
{
    hc_rpc_client *c = p->c;

    p->in_call = 1;
    p->target = i;
    p->attempts = 0;
    snprintf(p->last_why, sizeof p->last_why, "none");
    p->backoff_ms = c->opts.backoff_min_ms;
    p->last_warn = 0;
    p->msg[0] = '\0';
}

/* Link p finished its target (its outcome in the call's arrays): a reply
 * handed on, a failure noted, and the link's next target, if any, begun
 * (each link carries one at a time, in the order given: a lane's requests
 * keep their order). */
static void link_next(hc_rpc_link *p)
{
    hc_rpc_client *c = p->c;
    int me = (int)(p - c->peers);

    while (p->state == CALL_DONE) {
        int i = p->target;

        p->in_call = 0;
        set_state(p, CALL_IDLE, 0);
        if (c->out_replies[i] && c->on_reply)
            c->on_reply(c->on_reply_arg, i, c->out_replies[i]);
        if (c->out_errs[i] != HC_OK &&
            (c->first_failed < 0 || i == c->cause ||
             (i < c->first_failed && c->first_failed != c->cause))) {
            c->first_failed = i;
            snprintf(c->fail_msg, sizeof c->fail_msg, "%s", p->msg);
        }
        while (++i < c->call_n && c->call_peers[i] != me)
            ;
        if (i == c->call_n)
            return;
        call_begin(p, i);
        peer_send(p);
    }
}

/* Step every peer of the call until each is done. Past `hard` (a guard
 * against a backend that never answers nor loses), or once a request
 * could not be made, the call is aborted: each peer's next step ends it. */
static void drive(hc_rpc_client *c, int n, const int *peers, nng_time hard)
{
    int i;

    nng_mtx_lock(c->mtx);
    while (c->pending > 0) {
        nng_time now = nng_clock(), next = hard;
        hc_rpc_link *go = NULL;

        for (i = 0; i < n && !go; i++)
            if (ready(&c->peers[peers[i]], now, &next))
                go = &c->peers[peers[i]];
        if (go) {
            nng_mtx_unlock(c->mtx);
            step(go, now);
            link_next(go);      /* done: its outcome out, its next begun */
            nng_mtx_lock(c->mtx);
            continue;
        }
        if (now >= hard || (c->abort && hard > now + 100)) {
            c->abort = 1;
            for (i = 0; i < n; i++)
                c->peers[peers[i]].due = now;
            hard = now + 100;
            continue;
        }
        nng_cv_until(c->cv, next);
    }
    nng_mtx_unlock(c->mtx);
}

/* ---- opening and closing ---------------------------------------------- */

void hc_rpc_client_close(hc_rpc_client *c)
{
    int i;

    if (!c)
        return;
    for (i = 0; i < c->n; i++) {
        hc_rpc_link *p = &c->peers[i];

        if (p->be)
            p->ops->close(p->be);   /* no callback reaches p from here */
        if (p->got)
            nng_msg_free(p->got);
        free(p->url);
        free(p->name);
    }
    if (c->cv)
        nng_cv_free(c->cv);
    if (c->mtx)
        nng_mtx_free(c->mtx);
    free(c->peers);
    free(c);
}

int hc_rpc_client_open(hc_rpc_client **out, int n, const char *const *urls,
                       const char *const *names,
                       const struct hc_rpc_client_opts *opts)
{
    hc_rpc_client *c = NULL;
    struct hc_rpc_client_opts o;
    int rv, i;

    if (out)
        *out = NULL;
    if (!out || n < 0 || (n > 0 && (!urls || !names)))
        return hc_err_set(HC_ERR_INVAL, "rpc client: bad arguments "
                                        "(out, n >= 0, urls and names)");
    /* The options, defaults filled in. */
    o = opts ? *opts : (struct hc_rpc_client_opts){0};
    if (o.timeout_ms < 0 || o.retry_ms < 0 || o.backoff_min_ms < 0 ||
        o.backoff_max_ms < 0)
        return hc_err_set(HC_ERR_INVAL,
                          "rpc client: negative timeout_ms, retry_ms or "
                          "backoff (use 0 for the default)");
    o.timeout_ms = o.timeout_ms ? o.timeout_ms : DEFAULT_TIMEOUT_MS;
    o.retry_ms = o.retry_ms ? o.retry_ms : DEFAULT_RETRY_MS;
    o.backoff_min_ms = o.backoff_min_ms ? o.backoff_min_ms
                                        : DEFAULT_BACKOFF_MIN_MS;
    o.backoff_max_ms = o.backoff_max_ms ? o.backoff_max_ms
                                        : DEFAULT_BACKOFF_MAX_MS;
    o.recv_max = o.recv_max ? o.recv_max : HC_RPC_DEFAULT_RECV_MAX;
    if (o.backoff_max_ms < o.backoff_min_ms)
        o.backoff_max_ms = o.backoff_min_ms;
    for (i = 0; i < n; i++)
        if (!urls[i] || !names[i])
            return hc_err_set(HC_ERR_INVAL,
                              "rpc client: peer %d has no URL or name", i);
    if (!(c = calloc(1, sizeof *c)) ||
        !(c->peers = calloc(n > 0 ? (size_t)n : 1, sizeof *c->peers))) {
        rv = hc_err_set(HC_ERR_NOMEM, "rpc client: out of memory");
        goto fail;
    }
    c->opts = o;
    if ((rv = nng_mtx_alloc(&c->mtx)) != 0 ||
        (rv = nng_cv_alloc(&c->cv, c->mtx)) != 0) {
        rv = hc_rpc_err(rv, "rpc client: mutex");
        goto fail;
    }
    for (i = 0; i < n; i++) {
        hc_rpc_link *p = &c->peers[i];

        c->n = i + 1;
        p->c = c;
        p->ops = o.tls ? &hc_rpc_tls_dial : &hc_rpc_nng_dial;
        atomic_init(&p->connected, 0);
        atomic_init(&p->ever_connected, 0);
        if (!(p->url = strdup(urls[i])) || !(p->name = strdup(names[i]))) {
            rv = hc_err_set(HC_ERR_NOMEM, "rpc client: out of memory for %s",
                            names[i]);
            goto fail;
        }
        if ((rv = p->ops->open(&p->be, p, p->url, p->name, &c->opts)) !=
            HC_OK)
            goto fail;
    }
    *out = c;
    return HC_OK;

fail:
    hc_rpc_client_close(c);
    return rv;
}

/* ---- calls ------------------------------------------------------------ */

/* Free every request and clear the outputs of a call that never started. */
static void drop_all(int n, nng_msg **reqs, nng_msg **replies, int *errs,
                     int code)
{
    int i;

    for (i = 0; i < n; i++) {
        if (reqs && reqs[i]) {
            nng_msg_free(reqs[i]);
            reqs[i] = NULL;
        }
        if (replies)
            replies[i] = NULL;
        if (errs)
            errs[i] = code;
    }
}

/* The calls of hc_rpc_call_all: reqs[i] target i's request; taken (set
 * NULL) as its first attempt's bytes when `take`, else left the caller's.
 * Every attempt not given is made by remake(arg, i). A peer named by
 * several targets carries them one after another, in order. */
static int call_all(hc_rpc_client *c, int n, const int *peers,
                    nng_msg **reqs, int take, hc_rpc_remake_fn remake,
                    void *arg, nng_msg **replies, int *errs, int timeout_ms)
{
    int i, rv = HC_OK;

    if (!c || n < 0 || (n > 0 && (!peers || !reqs || !replies || !errs)))
        rv = hc_err_set(HC_ERR_INVAL, "rpc call: bad arguments");
    /* Every target a valid peer with a request (or a remake to make it). */
    for (i = 0; rv == HC_OK && i < n; i++) {
        if (peers[i] < 0 || peers[i] >= c->n)
            rv = hc_err_set(HC_ERR_INVAL, "rpc call: target %d: peer %d is "
                            "not one of the %d peers", i, peers[i], c->n);
        else if (!reqs[i] && !take)
            rv = hc_err_set(HC_ERR_INVAL, "rpc call: target %d (%s): "
                            "request is NULL", i, c->peers[peers[i]].name);
    }
    if (rv != HC_OK) {
        drop_all(n, take ? reqs : NULL, replies, errs, rv);
        return rv;
    }
    if (n == 0)
        return HC_OK;

    c->attempt_ms = timeout_ms > 0 ? timeout_ms : c->opts.timeout_ms;
    c->begin = nng_clock();
    c->abort = 0;
    c->pending = n;
    c->call_n = n;
    c->call_peers = peers;
    c->out_replies = replies;
    c->out_errs = errs;
    c->out_first = take ? reqs : NULL;
    c->remake = remake;
    c->remake_arg = arg;
    c->first_failed = -1;
    c->cause = -1;
    for (i = 0; i < n; i++) {   /* each link's first target */
        replies[i] = NULL;
        errs[i] = HC_OK;
        if (!c->peers[peers[i]].in_call)
            call_begin(&c->peers[peers[i]], i);
    }
    for (i = 0; i < n; i++) {
        hc_rpc_link *p = &c->peers[peers[i]];

        if (p->in_call && p->target == i && p->state == CALL_IDLE) {
            peer_send(p);
            link_next(p);       /* failed at once: its next target */
        }
    }
    /* The retry budget counts from here: a first attempt may have been
     * made late (a part waits for backward to compute its gradient). */
    c->begin = nng_clock();
    drive(c, n, peers, c->begin + (nng_time)c->opts.retry_ms +
                           2 * (nng_time)c->attempt_ms + ABORT_SLACK_MS);
    if (c->first_failed < 0)
        return HC_OK;
    return hc_err_set(errs[c->first_failed], "%s", c->fail_msg);
}

/* remake for requests the caller keeps: a copy of reqs[i]. */
static int copy_req(void *arg, int i, nng_msg **out)
{
    int rv = nng_msg_dup(out, ((nng_msg *const *)arg)[i]);

    return rv ? hc_rpc_err(rv, "copying the request") : HC_OK;
}

int hc_rpc_call_all_kept(hc_rpc_client *c, int n, const int *peers,
                         nng_msg *const *reqs, nng_msg **replies, int *errs,
                         int timeout_ms)
{
    return call_all(c, n, peers, (nng_msg **)reqs, 0, copy_req,
                    (void *)reqs, replies, errs, timeout_ms);
}

int hc_rpc_call_all(hc_rpc_client *c, int n, const int *peers,
                    nng_msg **reqs, nng_msg **replies, int *errs,
                    int timeout_ms)
{
    int rv = hc_rpc_call_all_kept(c, n, peers, reqs, replies, errs,
                                  timeout_ms);

    drop_all(reqs ? n : 0, reqs, NULL, NULL, 0);
    return rv;
}

int hc_rpc_call_all_remade(hc_rpc_client *c, int n, const int *peers,
                           nng_msg **reqs, hc_rpc_remake_fn remake, void *arg,
                           nng_msg **replies, int *errs, int timeout_ms)
{
    if (!remake) {
        drop_all(n, reqs, replies, errs, HC_ERR_INVAL);
        return hc_err_set(HC_ERR_INVAL, "rpc call: no remake function");
    }
    return call_all(c, n, peers, reqs, 1, remake, arg, replies, errs,
                    timeout_ms);
}

int hc_rpc_call(hc_rpc_client *c, int peer, nng_msg *req, nng_msg **reply,
                int timeout_ms)
{
    int err;

    return hc_rpc_call_all(c, 1, &peer, &req, reply, &err, timeout_ms);
}

void hc_rpc_on_reply(hc_rpc_client *c, void (*fn)(void *arg, int i,
                                                   nng_msg *reply),
                     void *arg)
{
    c->on_reply = fn;
    c->on_reply_arg = arg;
}

int hc_rpc_connected(hc_rpc_client *c, int peer)
{
    if (!c || peer < 0 || peer >= c->n)
        return 0;
    return atomic_load(&c->peers[peer].connected) > 0;
}
