/*
 * rpc_client.c — the client of rpc.h. Over nng: each peer has one REQ
 * socket (nng's own timed re-send disabled), one context and one aio,
 * reused for every call. A call runs one small state machine per peer on
 * that aio — SEND → RECV, or on a retryable failure SLEEP (back-off) → SEND
 * again with a fresh copy of the very same bytes — and the calling thread
 * waits on a condition variable until every peer is done. Every step has a
 * timeout, and the wait itself is bounded. With TLS by the relay a peer has
 * no socket (tls_relay.h, a direct client): the calling thread writes each
 * request into TLS itself and runs the same state machine, woken when the
 * relay hands it a reply or a connection comes or goes, or when a step's
 * time is up (drive).
 */
#include "rpc.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "err.h"
#include "log.h"
#include "rpc_close.h"
#include "rpc_conf.h"
#include "tls_relay.h"

#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_RETRY_MS 30000
#define DEFAULT_BACKOFF_MIN_MS 50
#define DEFAULT_BACKOFF_MAX_MS 2000
#define RECONNECT_MIN_MS 20
#define RECONNECT_MAX_MS 1000
#define ABORT_SLACK_MS 5000  /* beyond the retry budget before a call aborts */

enum call_state { CALL_IDLE, CALL_SEND, CALL_RECV, CALL_SLEEP, CALL_DONE };

struct peer {
    hc_rpc_client *c;
    char *url;
    char *name;
    nng_socket sock;
    int sock_open;
    nng_ctx ctx;
    int ctx_open;
    nng_aio *aio;
    nng_aio *timer;            /* back-off only (see hc_rpc_req.pause) */
    atomic_int connected;      /* pipes currently up */
    atomic_int ever_connected;
    int tls;
    hc_relay_ep *relay;        /* TLS through the relay (tls_relay.h) */
    atomic_uint last_pipe;     /* the pipe that came up last (0: none) */
    /* A direct client's (c->direct, tls_relay.h): no socket, no aio. */
    uint32_t next_id;          /* request ids sent, counted */
    uint32_t want_id;          /* under c->mtx: the id the reply must have */
    nng_msg *dreply;           /* under c->mtx: the reply the relay handed */
    nng_msg *dout;             /* a request waiting for a connection */
    uint32_t sent_conn;        /* the connection it went on */
    nng_time due;              /* the attempt's end, or the back-off's */

    /* One call's state, owned by the aio callback while the call runs. */
    enum call_state state;
    int in_call;
    nng_msg *copy;             /* the request as the caller gave it */
    nng_msg *first;            /* a copy of it for the first attempt (the
                                * caller's, made ahead), or NULL */
    hc_rpc_remake_fn remake;   /* copy NULL: makes a re-send's bytes */
    void *remake_arg;
    int remake_i;              /* this peer's index in the call */
    nng_msg *reply;
    int err;
    int attempts;
    int last_rv;
    int backoff_ms;
    int attempt_ms;
    nng_time begin;
    nng_time attempt_begin;
    nng_time deadline;         /* begin + retry_ms */
    nng_time last_warn;
    char msg[512];
};

struct hc_rpc_client {
    struct hc_rpc_client_opts opts;
    int n;
    struct peer *peers;        /* (n) */
    nng_mtx *mtx;
    nng_cv *cv;
    int pending;               /* under mtx: peers of this call not done */
    atomic_int abort;
    int direct;                /* the peers are direct (TLS by the relay) */
};

static void pipe_cb(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    struct peer *p = arg;

    if (ev == NNG_PIPE_EV_ADD_POST) {
        atomic_store(&p->last_pipe, (unsigned)nng_pipe_id(pipe));
        atomic_fetch_add(&p->connected, 1);
        atomic_store(&p->ever_connected, 1);
    } else if (ev == NNG_PIPE_EV_REM_POST) {
        unsigned last = (unsigned)nng_pipe_id(pipe);

        atomic_compare_exchange_strong(&p->last_pipe, &last, 0u);
        atomic_fetch_sub(&p->connected, 1);
    }
}

static int retryable(int rv)
{
    switch (rv) {
    case NNG_ETIMEDOUT:
    case NNG_ECLOSED:
    case NNG_ECONNREFUSED:
    case NNG_ECONNRESET:
    case NNG_ECONNABORTED:
    case NNG_ECONNSHUT:
    case NNG_EUNREACHABLE:
    case NNG_EAGAIN:
        return 1;
    default:
        return 0;
    }
}

/* Finish this peer's part of the call; the last thing the callback does. */
static void peer_done(struct peer *p, int err)
{
    hc_rpc_client *c = p->c;

    p->err = err;
    nng_mtx_lock(c->mtx);
    p->state = CALL_DONE;
    if (--c->pending == 0)
        nng_cv_wake(c->cv);
    nng_mtx_unlock(c->mtx);
}

static void direct_send(struct peer *p, nng_msg *m);

/* Send m (owned) as this attempt's next message, then wait for its reply. */
static void peer_send_msg(struct peer *p, nng_msg *m)
{
    p->attempt_begin = nng_clock();
    if (p->c->direct) {
        direct_send(p, m);
        return;
    }
    p->state = CALL_SEND;
    nng_aio_set_msg(p->aio, m);
    nng_aio_set_timeout(p->aio, p->attempt_ms);
    nng_ctx_send(p->ctx, p->aio);
}

static void peer_send(struct peer *p)
{
    nng_msg *m;
    int rv;

    if (p->first) {
        m = p->first;           /* made by the caller: no copy here */
        p->first = NULL;
    } else if (!p->copy) {
        /* A re-send of a request the caller did not keep: made again. */
        if ((rv = p->remake(p->remake_arg, p->remake_i, &m)) != HC_OK) {
            snprintf(p->msg, sizeof p->msg, "%s at %s: making the request "
                     "again: %s", p->name, p->url, hc_err_msg());
            peer_done(p, rv);
            return;
        }
    } else if ((rv = nng_msg_dup(&m, p->copy)) != 0) {
        snprintf(p->msg, sizeof p->msg, "%s at %s: copying the request: %s",
                 p->name, p->url, nng_strerror(rv));
        peer_done(p, hc_rpc_code_of(rv));
        return;
    }
    p->attempts++;
    peer_send_msg(p, m);
}

static void peer_unreachable(struct peer *p)
{
    double secs = (double)(nng_clock() - p->begin) / 1000.0;
    char why[200];

    if (!atomic_load(&p->ever_connected))
        snprintf(why, sizeof why, p->tls
                 ? "never connected: connection refused, or the TLS "
                   "handshake failed (its certificate not from this "
                   "cluster's CA, or not naming the host)"
                 : "never connected: connection refused?");
    else if (atomic_load(&p->connected) > 0)
        snprintf(why, sizeof why, "connected but no reply; last error: %s",
                 nng_strerror(p->last_rv));
    else
        snprintf(why, sizeof why, "connection lost; last error: %s",
                 nng_strerror(p->last_rv));
    snprintf(p->msg, sizeof p->msg,
             "%s at %s: no reply after %.1f s, %d attempt%s (%s)", p->name,
             p->url, secs, p->attempts, p->attempts == 1 ? "" : "s", why);
    peer_done(p, HC_ERR_UNREACHABLE);
}

/* An attempt failed with nng code rv: back off and re-send, or give up. */
static void peer_failed(struct peer *p, int rv, const char *what)
{
    hc_rpc_client *c = p->c;
    nng_time now = nng_clock();
    int b = p->backoff_ms, sleep_ms;

    p->last_rv = rv;
    if (atomic_load(&c->abort)) {
        snprintf(p->msg, sizeof p->msg, "%s at %s: call aborted after %.1f s",
                 p->name, p->url, (double)(now - p->begin) / 1000.0);
        peer_done(p, HC_ERR_TIMEOUT);
        return;
    }
    if (!retryable(rv)) {
        snprintf(p->msg, sizeof p->msg, "%s at %s: %s: %s", p->name, p->url,
                 what, nng_strerror(rv));
        peer_done(p, hc_rpc_code_of(rv));
        return;
    }
    if (now >= p->deadline) {
        peer_unreachable(p);
        return;
    }
    /* Exponential back-off, ±25 % jitter, never past the deadline. */
    sleep_ms = b - b / 4 + (int)(nng_random() % (uint32_t)(b / 2 + 1));
    if (sleep_ms < 1)
        sleep_ms = 1;
    if ((nng_time)sleep_ms > p->deadline - now)
        sleep_ms = (int)(p->deadline - now);
    p->backoff_ms = b > c->opts.backoff_max_ms / 2 ? c->opts.backoff_max_ms
                                                    : 2 * b;
    if (p->last_warn == 0 || now - p->last_warn >= HC_RPC_WARN_EVERY_MS) {
        p->last_warn = now;
        hc_warn("rpc: %s at %s: %s: %s; retrying in %d ms (attempt %d, "
                "%.1f s of %.1f s)",
                p->name, p->url, what, nng_strerror(rv), sleep_ms,
                p->attempts, (double)(now - p->begin) / 1000.0,
                c->opts.retry_ms / 1000.0);
    }
    if (p->c->direct) {
        nng_mtx_lock(c->mtx);
        p->state = CALL_SLEEP;
        p->due = now + (nng_time)sleep_ms;
        nng_mtx_unlock(c->mtx);
        return;
    }
    p->state = CALL_SLEEP;
    nng_sleep_aio(sleep_ms, p->timer);
}

/* The back-off timer's callback: send again, unless the call aborted. */
static void timer_cb(void *arg)
{
    struct peer *p = arg;
    int rv = nng_aio_result(p->timer);

    if (rv == 0 && atomic_load(&p->c->abort))
        rv = NNG_ECANCELED;
    if (rv != 0) {
        peer_failed(p, rv, "back-off");
        return;
    }
    peer_send(p);
}

/* The peer's aio callback: one step of SEND → RECV (→ SLEEP → SEND …). */
static void peer_cb(void *arg)
{
    struct peer *p = arg;
    int rv = nng_aio_result(p->aio);
    nng_msg *m;
    nng_duration left;

    switch (p->state) {
    case CALL_SEND:
        if (rv != 0) {
            /* A failed send leaves the message with us. */
            if ((m = nng_aio_get_msg(p->aio)) != NULL)
                nng_msg_free(m);
            nng_aio_set_msg(p->aio, NULL);
            peer_failed(p, rv, "send");
            return;
        }
        left = p->attempt_ms - (nng_duration)(nng_clock() - p->attempt_begin);
        p->state = CALL_RECV;
        nng_aio_set_timeout(p->aio, left > 0 ? left : 1);
        nng_ctx_recv(p->ctx, p->aio);
        return;
    case CALL_RECV:
        if (rv != 0) {
            peer_failed(p, rv, "no reply");
            return;
        }
        p->reply = nng_aio_get_msg(p->aio);
        nng_aio_set_msg(p->aio, NULL);
        peer_done(p, HC_OK);
        return;
    case CALL_SLEEP:
    case CALL_IDLE:
    case CALL_DONE:
        return;
    }
}

/* ------------------------------------------------------------------ */
/* A direct client: the state machine above, without nng's socket       */

/* The relay: a connection came up or went (tls_relay.h). */
static int direct_conn(void *arg, uint32_t conn, int up, const char *peer,
                       const char *who)
{
    struct peer *p = arg;
    hc_rpc_client *c = p->c;

    (void)peer;
    (void)who;
    if (up) {
        atomic_store(&p->last_pipe, conn);
        atomic_store(&p->connected, 1);
        atomic_store(&p->ever_connected, 1);
    } else {
        unsigned last = conn;

        atomic_compare_exchange_strong(&p->last_pipe, &last, 0u);
        atomic_store(&p->connected, 0);
    }
    nng_mtx_lock(c->mtx);
    nng_cv_wake(c->cv);
    nng_mtx_unlock(c->mtx);
    return 0;
}

/* The relay read a message: the reply the call waits for, or a late one
 * (to an attempt given up), dropped. */
static void direct_msg(void *arg, uint32_t conn, uint32_t id, nng_msg *m)
{
    struct peer *p = arg;
    hc_rpc_client *c = p->c;
    (void)conn;
    nng_mtx_lock(c->mtx);
    if (p->state == CALL_RECV && id == p->want_id && !p->dreply) {
        p->dreply = m;
        m = NULL;
        nng_cv_wake(c->cv);
    }
    nng_mtx_unlock(c->mtx);
    if (m)
        nng_msg_free(m);
}

static void direct_state(struct peer *p, enum call_state st)
{
    nng_mtx_lock(p->c->mtx);
    p->state = st;
    nng_mtx_unlock(p->c->mtx);
}

/* Write p->dout on the connection up now, or leave it to wait for one. */
static void direct_push(struct peer *p)
{
    uint32_t conn = atomic_load(&p->last_pipe);
    int err;

    if (conn == 0)
        return;
    /* Waiting before it is sent: a reply can come before the send returns. */
    direct_state(p, CALL_RECV);
    if ((err = hc_relay_send(p->relay, conn, p->want_id, p->dout)) == HC_OK) {
        p->dout = NULL;
        p->sent_conn = conn;
        return;
    }
    direct_state(p, CALL_SEND);
    if (err == HC_ERR_CLOSED)
        return;                 /* gone meanwhile: the next one */
    nng_msg_free(p->dout);
    p->dout = NULL;
    peer_failed(p, err == HC_ERR_NOMEM ? NNG_ENOMEM : NNG_EAGAIN, "send");
}

/* A new attempt's message, with a request id of its own: a reply to an
 * earlier one is never taken for its answer. */
static void direct_send(struct peer *p, nng_msg *m)
{
    hc_rpc_client *c = p->c;
    nng_msg *stale;

    nng_mtx_lock(c->mtx);
    stale = p->dreply;
    p->dreply = NULL;
    p->want_id = 0x80000000u | (++p->next_id & 0x7fffffffu);
    p->state = CALL_SEND;
    p->due = p->attempt_begin + (nng_time)p->attempt_ms;
    nng_mtx_unlock(c->mtx);
    if (stale)
        nng_msg_free(stale);
    p->dout = m;
    direct_push(p);
}

/* What peer p can do now (under c->mtx): 0 nothing (*next lowered to
 * its time), else 1. */
static int direct_ready(struct peer *p, nng_time now, nng_time *next)
{
    uint32_t up = atomic_load(&p->last_pipe);

    switch (p->state) {
    case CALL_RECV:
        if (p->dreply || up != p->sent_conn)
            return 1;
        break;
    case CALL_SEND:
        if (up)
            return 1;
        break;
    case CALL_SLEEP:
        break;
    case CALL_IDLE:
    case CALL_DONE:
        return 0;
    }
    if (now >= p->due)
        return 1;
    if (p->due < *next)
        *next = p->due;
    return 0;
}

/* One step of peer p, in the calling thread (no lock held). */
static void direct_step(struct peer *p, nng_time now)
{
    hc_rpc_client *c = p->c;
    enum call_state st;
    nng_msg *m;

    nng_mtx_lock(c->mtx);
    st = p->state;
    m = p->dreply;
    p->dreply = NULL;
    nng_mtx_unlock(c->mtx);
    if (st == CALL_RECV && m) {
        p->reply = m;
        peer_done(p, HC_OK);
        return;
    }
    if (st == CALL_SLEEP) {
        if (atomic_load(&c->abort))
            peer_failed(p, NNG_ECANCELED, "back-off");
        else
            peer_send(p);
        return;
    }
    if (now < p->due) {
        if (st == CALL_SEND)
            direct_push(p);
        else                    /* the connection it went on is gone */
            peer_failed(p, NNG_ECONNSHUT, "connection lost");
        return;
    }
    if (st == CALL_SEND) {
        nng_msg_free(p->dout);
        p->dout = NULL;
        peer_failed(p, NNG_ETIMEDOUT, "send (no connection)");
    } else {
        peer_failed(p, NNG_ETIMEDOUT, "no reply");
    }
}

/* wait_all for direct peers: the calling thread runs their steps. Past
 * `hard` the call is aborted: each peer's next step ends it. */
static void drive(hc_rpc_client *c, int n, const int *peers, nng_time hard)
{
    int i;

    nng_mtx_lock(c->mtx);
    while (c->pending > 0) {
        nng_time now = nng_clock(), next = hard;
        struct peer *ready = NULL;

        for (i = 0; i < n && !ready; i++)
            if (direct_ready(&c->peers[peers[i]], now, &next))
                ready = &c->peers[peers[i]];
        if (ready) {
            nng_mtx_unlock(c->mtx);
            direct_step(ready, now);
            nng_mtx_lock(c->mtx);
            continue;
        }
        if (now >= hard) {
            atomic_store(&c->abort, 1);
            for (i = 0; i < n; i++)
                c->peers[peers[i]].due = now;
            hard = now + 100;
            continue;
        }
        nng_cv_until(c->cv, next);
    }
    nng_mtx_unlock(c->mtx);
}

static void peer_close(struct peer *p)
{
    nng_msg *left;

    /* No relay callback reaches p once this returns. */
    hc_relay_close(p->relay);
    p->relay = NULL;

    if (p->timer)
        nng_aio_stop(p->timer);
    if (p->aio)
        nng_aio_stop(p->aio);
    if (p->ctx_open)
        nng_ctx_close(p->ctx);
    if (p->sock_open) {
        /* No pipe callback may reach p once this returns. */
        nng_pipe_notify(p->sock, NNG_PIPE_EV_ADD_POST, NULL, NULL);
        nng_pipe_notify(p->sock, NNG_PIPE_EV_REM_POST, NULL, NULL);
        hc_rpc_close_socket(p->sock, p->name);
    }
    if (p->aio) {
        if ((left = nng_aio_get_msg(p->aio)) != NULL)
            nng_msg_free(left);
        nng_aio_free(p->aio);
    }
    if (p->timer)
        nng_aio_free(p->timer);
    if (p->dreply)
        nng_msg_free(p->dreply);
    if (p->dout)
        nng_msg_free(p->dout);
    free(p->url);
    free(p->name);
}

void hc_rpc_client_close(hc_rpc_client *c)
{
    int i;

    if (!c)
        return;
    for (i = 0; i < c->n; i++)
        peer_close(&c->peers[i]);
    if (c->cv)
        nng_cv_free(c->cv);
    if (c->mtx)
        nng_mtx_free(c->mtx);
    free(c->peers);
    free(c);
}

static int peer_open(hc_rpc_client *c, struct peer *p, const char *url,
                     const char *name)
{
    nng_dialer d;
    char host[HC_RPC_URL_MAX];
    int rv;
    const char *step;

    p->c = c;
    p->tls = c->opts.tls != NULL;
    atomic_init(&p->connected, 0);
    atomic_init(&p->ever_connected, 0);
    if (!(p->url = strdup(url)) || !(p->name = strdup(name)))
        return hc_err_set(HC_ERR_NOMEM, "rpc client: out of memory for %s",
                          name);
    atomic_init(&p->last_pipe, 0u);
    if (c->direct) {
        /* TLS by the relay, no socket: requests go from this thread. */
        const struct hc_relay_direct cb = {direct_conn, direct_msg, p, 0};
        const char *colon = strrchr(url, ':');

        hc_rpc_url_host(host, sizeof host, url);
        return hc_relay_dial_direct(&p->relay, host,
                                    colon ? atoi(colon + 1) : 0,
                                    c->opts.recv_max, c->opts.tls->ca_file,
                                    c->opts.tls->cert_key_file, name, &cb);
    }
    step = "opening REQ socket";
    if ((rv = nng_req0_open(&p->sock)) != 0)
        goto fail;
    p->sock_open = 1;
    step = "setting options";
    if ((rv = nng_socket_set_size(p->sock, NNG_OPT_RECVMAXSZ,
                                  c->opts.recv_max)) != 0 ||
        (rv = nng_socket_set_ms(p->sock, NNG_OPT_REQ_RESENDTIME,
                                NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_ms(p->sock, NNG_OPT_RECONNMINT,
                                RECONNECT_MIN_MS)) != 0 ||
        (rv = nng_socket_set_ms(p->sock, NNG_OPT_RECONNMAXT,
                                RECONNECT_MAX_MS)) != 0 ||
        (rv = nng_socket_set_bool(p->sock, NNG_OPT_TCP_KEEPALIVE, true)) != 0)
        goto fail;
    step = "registering pipe callbacks";
    if ((rv = nng_pipe_notify(p->sock, NNG_PIPE_EV_ADD_POST, pipe_cb, p)) !=
            0 ||
        (rv = nng_pipe_notify(p->sock, NNG_PIPE_EV_REM_POST, pipe_cb, p)) != 0)
        goto fail;
    step = "opening context";
    if ((rv = nng_ctx_open(&p->ctx, p->sock)) != 0)
        goto fail;
    p->ctx_open = 1;
    if ((rv = nng_ctx_set_ms(p->ctx, NNG_OPT_REQ_RESENDTIME,
                             NNG_DURATION_INFINITE)) != 0)
        goto fail;
    step = "allocating aio";
    if ((rv = nng_aio_alloc(&p->aio, peer_cb, p)) != 0 ||
        (rv = nng_aio_alloc(&p->timer, timer_cb, p)) != 0)
        goto fail;
    step = "dialling (is the URL valid?)";
    if ((rv = nng_dialer_create(&d, p->sock, url)) == 0)
        rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
    if (rv != 0)
        goto fail;
    return HC_OK;

fail:
    return hc_err_set(hc_rpc_code_of(rv), "rpc client: %s at %s: %s: %s", name, url,
                      step, nng_strerror(rv));
}

int hc_rpc_client_open(hc_rpc_client **out, int n, const char *const *urls,
                       const char *const *names,
                       const struct hc_rpc_client_opts *opts)
{
    hc_rpc_client *c = NULL;
    struct hc_rpc_client_opts o = {0};
    int rv, i;

    if (out)
        *out = NULL;
    if (!out || n < 0 || (n > 0 && (!urls || !names)))
        return hc_err_set(HC_ERR_INVAL, "rpc client: bad arguments "
                                        "(out, n >= 0, urls and names)");
    if (opts)
        o = *opts;
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
    c->direct = o.tls != NULL;
    atomic_init(&c->abort, 0);
    if ((rv = nng_mtx_alloc(&c->mtx)) != 0 ||
        (rv = nng_cv_alloc(&c->cv, c->mtx)) != 0) {
        rv = hc_rpc_err(rv, "rpc client: mutex");
        goto fail;
    }
    for (i = 0; i < n; i++) {
        c->n = i + 1;
        if ((rv = peer_open(c, &c->peers[i], urls[i], names[i])) != HC_OK)
            goto fail;
    }
    c->n = n;
    *out = c;
    return HC_OK;

fail:
    hc_rpc_client_close(c);
    return rv;
}

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

/* Every target is a valid, distinct peer with a request. */
static int check_targets(hc_rpc_client *c, int n, const int *peers,
                         nng_msg **reqs)
{
    int i, rv = HC_OK;

    for (i = 0; i < n && rv == HC_OK; i++) {
        if (peers[i] < 0 || peers[i] >= c->n)
            rv = hc_err_set(HC_ERR_INVAL,
                            "rpc call: target %d: peer %d is not one of the "
                            "%d peers",
                            i, peers[i], c->n);
        else if (!reqs[i])
            rv = hc_err_set(HC_ERR_INVAL,
                            "rpc call: target %d (%s): request is NULL", i,
                            c->peers[peers[i]].name);
        else if (c->peers[peers[i]].in_call)
            rv = hc_err_set(HC_ERR_INVAL,
                            "rpc call: peer %s named twice in one call",
                            c->peers[peers[i]].name);
        else
            c->peers[peers[i]].in_call = 1;
    }
    for (i = 0; i < n; i++)
        if (peers[i] >= 0 && peers[i] < c->n)
            c->peers[peers[i]].in_call = 0;
    return rv;
}

/* Wait until every peer of the call is done. Every attempt is bounded, so
 * this ends; past `hard` (a guard against a transport that never completes
 * an operation) the call is aborted and the aios cancelled. */
static void wait_all(hc_rpc_client *c, int n, const int *peers, nng_time hard)
{
    int i;

    nng_mtx_lock(c->mtx);
    while (c->pending > 0) {
        if (nng_cv_until(c->cv, hard) != NNG_ETIMEDOUT)
            continue;
        atomic_store(&c->abort, 1);
        nng_mtx_unlock(c->mtx);
        for (i = 0; i < n; i++) { /* a no-op on an idle aio */
            nng_aio_cancel(c->peers[peers[i]].aio);
            nng_aio_cancel(c->peers[peers[i]].timer);
        }
        nng_mtx_lock(c->mtx);
        hard = nng_clock() + 100;
    }
    nng_mtx_unlock(c->mtx);
}

/* The calls of hc_rpc_call_all; `keep`: the requests stay the caller's;
 * firsts (NULL, or NULL entries): copies for the first attempts, taken.
 * remake (not NULL): reqs are NULL, firsts hold the requests (each taken),
 * and a re-send asks remake for its bytes. */
static int call_all(hc_rpc_client *c, int n, const int *peers,
                    nng_msg **reqs, nng_msg **firsts, nng_msg **replies,
                    int *errs, int timeout_ms, int keep,
                    hc_rpc_remake_fn remake, void *remake_arg)
{
    int i, rv, first = -1;
    int attempt_ms;
    nng_time begin;
    nng_msg **sent = remake ? firsts : reqs; /* what each target sends */

    if (!c || n < 0 || (n > 0 && (!peers || !sent || !replies || !errs))) {
        drop_all(n, keep ? NULL : reqs, replies, errs, HC_ERR_INVAL);
        drop_all(firsts ? n : 0, firsts, NULL, NULL, 0);
        return hc_err_set(HC_ERR_INVAL, "rpc call: bad arguments");
    }
    if ((rv = check_targets(c, n, peers, sent)) != HC_OK) {
        drop_all(n, keep ? NULL : reqs, replies, errs, rv);
        drop_all(firsts ? n : 0, firsts, NULL, NULL, 0);
        return rv;
    }
    if (n == 0)
        return HC_OK;

    attempt_ms = timeout_ms > 0 ? timeout_ms : c->opts.timeout_ms;
    begin = nng_clock();
    atomic_store(&c->abort, 0);
    c->pending = n;
    for (i = 0; i < n; i++) {
        struct peer *p = &c->peers[peers[i]];

        p->in_call = 1;
        p->copy = remake ? NULL : reqs[i];
        p->first = firsts ? firsts[i] : NULL;
        p->remake = remake;
        p->remake_arg = remake_arg;
        p->remake_i = i;
        if (firsts)
            firsts[i] = NULL;
        p->reply = NULL;
        p->err = HC_OK;
        p->attempts = 0;
        p->last_rv = 0;
        p->backoff_ms = c->opts.backoff_min_ms;
        p->attempt_ms = attempt_ms;
        p->begin = begin;
        p->deadline = begin + (nng_time)c->opts.retry_ms;
        p->last_warn = 0;
        p->msg[0] = '\0';
        p->state = CALL_IDLE;
    }
    for (i = 0; i < n; i++)
        peer_send(&c->peers[peers[i]]);
    (c->direct ? drive : wait_all)(c, n, peers,
                                   begin + (nng_time)c->opts.retry_ms +
                                       2 * (nng_time)attempt_ms +
                                       ABORT_SLACK_MS);

    for (i = 0; i < n; i++) {
        struct peer *p = &c->peers[peers[i]];

        if (!p->c->direct) {
            nng_aio_wait(p->timer); /* the last callbacks have returned */
            nng_aio_wait(p->aio);
        }
        if (!keep)
            nng_msg_free(p->copy);
        if (p->first)                   /* never sent: the call failed first */
            nng_msg_free(p->first);
        p->copy = p->first = NULL;
        p->in_call = 0;
        p->state = CALL_IDLE;
        replies[i] = p->reply;
        p->reply = NULL;
        errs[i] = p->err;
        if (p->err != HC_OK && first < 0)
            first = i;
    }
    if (first < 0)
        return HC_OK;
    return hc_err_set(errs[first], "%s", c->peers[peers[first]].msg);
}

int hc_rpc_call_all(hc_rpc_client *c, int n, const int *peers,
                    nng_msg **reqs, nng_msg **replies, int *errs,
                    int timeout_ms)
{
    return call_all(c, n, peers, reqs, NULL, replies, errs, timeout_ms, 0,
                    NULL, NULL);
}

int hc_rpc_call_all_kept(hc_rpc_client *c, int n, const int *peers,
                         nng_msg *const *reqs, nng_msg **replies, int *errs,
                         int timeout_ms)
{
    return call_all(c, n, peers, (nng_msg **)reqs, NULL, replies, errs,
                    timeout_ms, 1, NULL, NULL);
}

int hc_rpc_call_all_remade(hc_rpc_client *c, int n, const int *peers,
                           nng_msg **reqs, hc_rpc_remake_fn remake, void *arg,
                           nng_msg **replies, int *errs, int timeout_ms)
{
    if (!remake) {
        drop_all(n, reqs, replies, errs, HC_ERR_INVAL);
        return hc_err_set(HC_ERR_INVAL, "rpc call: no remake function");
    }
    return call_all(c, n, peers, NULL, reqs, replies, errs, timeout_ms, 1,
                    remake, arg);
}

int hc_rpc_call(hc_rpc_client *c, int peer, nng_msg *req, nng_msg **reply,
                int timeout_ms)
{
    int err;

    return hc_rpc_call_all(c, 1, &peer, &req, reply, &err, timeout_ms);
}

int hc_rpc_connected(hc_rpc_client *c, int peer)
{
    if (!c || peer < 0 || peer >= c->n)
        return 0;
    return atomic_load(&c->peers[peer].connected) > 0;
}

int hc_rpc_client_peers(const hc_rpc_client *c)
{
    return c ? c->n : 0;
}

const char *hc_rpc_peer_name(const hc_rpc_client *c, int peer)
{
    if (!c || peer < 0 || peer >= c->n)
        return "?";
    return c->peers[peer].name;
}

const char *hc_rpc_peer_url(const hc_rpc_client *c, int peer)
{
    if (!c || peer < 0 || peer >= c->n)
        return "?";
    return c->peers[peer].url;
}
