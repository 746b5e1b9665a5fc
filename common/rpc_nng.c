/*
 * rpc_nng.c — rpc's plain-TCP backend (rpc_backend.h): nng REQ/REP.
 *
 * A client's link is one REQ socket (nng's own timed re-send off: the
 * core re-sends) and one aio: SEND → RECV per attempt, on the socket's own
 * context; a new attempt first cancels what is left of the last. A server
 * is one REP socket with n_ctx contexts, each cycling RECV → (the core
 * owns the request: WAIT) → SEND → RECV, its index the request's id; a
 * send not taken within the send timeout closes its pipe (a peer that
 * does not read). The listener is watched (rpc_listen.h).
 */
#include "rpc_backend.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/util/platform.h>

#include "err.h"
#include "log.h"
#include "rpc_listen.h"

#define RECONNECT_MIN_MS 20
#define RECONNECT_MAX_MS 1000
#define RECV_ERR_PAUSE_MS 50 /* pause after an unexpected receive error */
#define DEFAULT_SEND_TIMEOUT_MS 10000
#define CLOSE_MS 5000        /* a socket's close waited for (hc_nng_close) */

/* ---- client ---------------------------------------------------------- */

struct dial {
    hc_rpc_link *l;
    nng_socket sock;            /* id 0 (nng_socket_id -1): not opened */
    nng_aio *aio;
    uint32_t id;                /* the attempt the aio carries */
    bool recv;                  /* its send is done: waiting for the reply */
};

/* Whether a failed send or receive is the connection's (try again). */
static bool lost_conn(int rv)
{
    return rv == NNG_ETIMEDOUT || rv == NNG_ECLOSED ||
           rv == NNG_ECONNREFUSED || rv == NNG_ECONNRESET ||
           rv == NNG_ECONNABORTED || rv == NNG_ECONNSHUT ||
           rv == NNG_EUNREACHABLE || rv == NNG_EAGAIN;
}

static void dial_cb(void *arg)
{
    struct dial *d = arg;
    int rv = nng_aio_result(d->aio);
    nng_msg *m = nng_aio_get_msg(d->aio);

    nng_aio_set_msg(d->aio, NULL);
    if (rv == 0 && !d->recv) {
        d->recv = true;
        nng_recv_aio(d->sock, d->aio);
        return;
    }
    if (rv != 0 && m) {         /* a failed send leaves the message to us */
        nng_msg_free(m);
        m = NULL;
    }
    if (rv != NNG_ECANCELED)
        hc_rpc_link_done(d->l, d->id, m,
                         lost_conn(rv) ? HC_ERR_CLOSED : hc_rpc_code_of(rv),
                         nng_strerror(rv));
}

static void dial_pipe_cb(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    (void)pipe;
    hc_rpc_link_conn(arg, ev == NNG_PIPE_EV_ADD_POST ? 1 : -1);
}

static void dial_close(void *be)
{
    struct dial *d = be;

    if (d->aio)
        nng_aio_stop(d->aio);
    if (nng_socket_id(d->sock) > 0) {
        /* No pipe callback may reach the link once this returns. */
        nng_pipe_notify(d->sock, NNG_PIPE_EV_ADD_POST, NULL, NULL);
        nng_pipe_notify(d->sock, NNG_PIPE_EV_REM_POST, NULL, NULL);
        hc_nng_close(d->sock, CLOSE_MS, "rpc client");
    }
    if (d->aio) {
        nng_msg *left = nng_aio_get_msg(d->aio);

        if (left)
            nng_msg_free(left);
        nng_aio_free(d->aio);
    }
    free(d);
}

static int dial_open(void **be, hc_rpc_link *l, const char *url,
                     const char *name, const struct hc_rpc_client_opts *o)
{
    struct dial *d = calloc(1, sizeof *d);
    const char *step = "allocating";
    nng_dialer dl;
    int rv = NNG_ENOMEM;

    *be = NULL;
    if (!d)
        goto fail;
    d->l = l;
    step = "opening REQ socket";
    if ((rv = nng_req0_open(&d->sock)) != 0)
        goto fail;
    step = "setting options";
    if ((rv = nng_socket_set_size(d->sock, NNG_OPT_RECVMAXSZ, o->recv_max)) ||
        (rv = nng_socket_set_ms(d->sock, NNG_OPT_REQ_RESENDTIME,
                                NNG_DURATION_INFINITE)) ||
        (rv = nng_socket_set_ms(d->sock, NNG_OPT_RECONNMINT,
                                RECONNECT_MIN_MS)) ||
        (rv = nng_socket_set_ms(d->sock, NNG_OPT_RECONNMAXT,
                                RECONNECT_MAX_MS)) ||
        (rv = nng_socket_set_bool(d->sock, NNG_OPT_TCP_KEEPALIVE, true)) ||
        (rv = nng_pipe_notify(d->sock, NNG_PIPE_EV_ADD_POST, dial_pipe_cb, l)) ||
        (rv = nng_pipe_notify(d->sock, NNG_PIPE_EV_REM_POST, dial_pipe_cb, l)) ||
        (rv = nng_aio_alloc(&d->aio, dial_cb, d)))
        goto fail;
    step = "dialling (is the URL valid?)";
    if ((rv = nng_dialer_create(&dl, d->sock, url)) != 0 ||
        (rv = nng_dialer_start(dl, NNG_FLAG_NONBLOCK)) != 0)
        goto fail;
    *be = d;
    return HC_OK;
fail:
    if (d)
        dial_close(d);
    return hc_err_set(hc_rpc_code_of(rv), "rpc client: %s at %s: %s: %s",
                      name, url, step, nng_strerror(rv));
}

static int dial_send(void *be, uint32_t id, nng_msg *m)
{
    struct dial *d = be;

    /* What is left of the last attempt ends first (its callback sees
     * NNG_ECANCELED); nng then sends on a connection that is up. */
    nng_aio_cancel(d->aio);
    nng_aio_wait(d->aio);
    d->id = id;
    d->recv = false;
    nng_aio_set_msg(d->aio, m);
    nng_aio_set_timeout(d->aio, NNG_DURATION_INFINITE);
    nng_send_aio(d->sock, d->aio);
    return HC_OK;
}

static void dial_cancel(void *be, uint32_t id)
{
    struct dial *d = be;

    (void)id;
    nng_aio_cancel(d->aio);
}

const struct hc_rpc_dial_ops hc_rpc_nng_dial = {
    dial_open, dial_send, dial_cancel, dial_close,
};

/* ---- server ---------------------------------------------------------- */

struct listen;

struct rep_ctx {
    struct listen *L;
    nng_ctx ctx;                /* id 0 (nng_ctx_id -1): not opened */
    nng_aio *aio;
    nng_aio *pause;             /* timer only: nng_sleep_aio marks an aio
                                 * so a later timeout reads as success */
    bool recv;                  /* receiving (else sending, or paused) */
    nng_pipe pipe;              /* the request's connection */
};

struct listen {
    hc_rpc_server *s;
    char url[160];
    nng_socket sock;            /* id 0: not opened */
    int send_timeout_ms;
    atomic_uint_least64_t took; /* connections taken (ADD_PRE), refused too */
    atomic_uint_least64_t last_warn;
    atomic_uint_least32_t dropped; /* the last pipe closed for not reading */
    hc_listen *guard;
    int n_ctx;
    struct rep_ctx *ctxs;       /* (n_ctx) */
};

/* The remote address of a pipe, "127.0.0.1:54321" or "[::1]:54321"
 * (nng keeps addresses and ports in network order). */
static void pipe_addr(nng_pipe pipe, char *buf, size_t n)
{
    nng_sockaddr sa;
    char host[INET6_ADDRSTRLEN];

    snprintf(buf, n, "an unknown address");
    if (nng_pipe_get_addr(pipe, NNG_OPT_REMADDR, &sa) != 0)
        return;
    if (sa.s_family == NNG_AF_INET &&
        inet_ntop(AF_INET, &sa.s_in.sa_addr, host, sizeof host))
        snprintf(buf, n, "%s:%u", host, (unsigned)ntohs(sa.s_in.sa_port));
    else if (sa.s_family == NNG_AF_INET6 &&
             inet_ntop(AF_INET6, sa.s_in6.sa_addr, host, sizeof host))
        snprintf(buf, n, "[%s]:%u", host, (unsigned)ntohs(sa.s_in6.sa_port));
}

static void listen_warn(struct listen *L, const char *what, int rv)
{
    uint64_t now = nng_clock(), last = atomic_load(&L->last_warn);

    if (last != 0 && now - last < HC_RPC_WARN_EVERY_MS)
        return;
    atomic_store(&L->last_warn, now);
    hc_warn("rpc server %s: %s failed: %s", L->url, what, nng_strerror(rv));
}

static void ctx_recv(struct rep_ctx *r)
{
    r->recv = true;
    nng_aio_set_timeout(r->aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(r->ctx, r->aio);
}

/* One step of a context's cycle. Nothing after hc_rpc_serve_msg touches
 * r: the core may already have answered from another thread. */
static void ctx_cb(void *arg)
{
    struct rep_ctx *r = arg;
    struct listen *L = r->L;
    int rv = nng_aio_result(r->aio);
    nng_msg *m = nng_aio_get_msg(r->aio);
    char addr[80];

    nng_aio_set_msg(r->aio, NULL);
    if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
        if (m)
            nng_msg_free(m);
        return;
    }
    if (r->recv && rv == 0) {
        r->pipe = nng_msg_get_pipe(m);
        r->recv = false;
        hc_rpc_serve_msg(L->s, (uint32_t)nng_pipe_id(r->pipe),
                         (uint32_t)(r - L->ctxs), m);
        return;
    }
    if (m)                      /* a send not taken: still ours */
        nng_msg_free(m);
    if (r->recv) {
        /* Unexpected: a pause, so a persistent error cannot spin. */
        listen_warn(L, "receive", rv);
        r->recv = false;
        nng_sleep_aio(RECV_ERR_PAUSE_MS, r->pause);
        return;
    }
    if (rv == NNG_ETIMEDOUT) {
        /* Not read within the send timeout: a peer that does not read
         * must not hold this context (and, one by one, all of them). */
        uint32_t id = (uint32_t)nng_pipe_id(r->pipe);

        if (atomic_exchange(&L->dropped, id) != id) { /* once a pipe */
            pipe_addr(r->pipe, addr, sizeof addr);
            hc_warn("rpc server %s: the peer at %s did not take its reply "
                    "within %d ms: closing its connection", L->url, addr,
                    L->send_timeout_ms);
        }
        nng_pipe_close(r->pipe);
    } else if (rv != 0) {
        listen_warn(L, "reply", rv);
    }
    ctx_recv(r);
}

static void pause_cb(void *arg)
{
    struct rep_ctx *r = arg;

    if (nng_aio_result(r->pause) != NNG_ECANCELED)
        ctx_recv(r);
}

/* A client connected (the core may refuse it) or is gone. A pipe closed
 * at ADD_PRE is closed before the socket sees it: no REM_POST comes. */
static void listen_pipe_cb(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    struct listen *L = arg;
    uint32_t id = (uint32_t)nng_pipe_id(pipe);
    char addr[80];

    if (ev == NNG_PIPE_EV_REM_POST) {
        hc_rpc_serve_conn(L->s, id, 0, NULL, NULL);
        return;
    }
    atomic_fetch_add(&L->took, 1);
    pipe_addr(pipe, addr, sizeof addr);
    if (hc_rpc_serve_conn(L->s, id, 1, addr, NULL) != 0)
        nng_pipe_close(pipe);
}

static void listen_reply(void *be, uint32_t conn, uint32_t id, nng_msg *m)
{
    struct listen *L = be;
    struct rep_ctx *r = &L->ctxs[id];

    (void)conn;
    if (!m) {
        ctx_recv(r);            /* a fresh receive abandons the request */
        return;
    }
    nng_aio_set_msg(r->aio, m);
    nng_aio_set_timeout(r->aio, L->send_timeout_ms);
    nng_ctx_send(r->ctx, r->aio);
}

static void listen_drop(void *be, uint32_t conn)
{
    nng_pipe p = NNG_PIPE_INITIALIZER;

    (void)be;
    p.id = conn;
    nng_pipe_close(p);
}

static void listen_stop(void *be)
{
    struct listen *L = be;
    int i;

    hc_listen_stop(L->guard);   /* no new listener from here on */
    for (i = 0; i < L->n_ctx; i++) { /* waits for running callbacks */
        if (L->ctxs[i].pause)
            nng_aio_stop(L->ctxs[i].pause);
        if (L->ctxs[i].aio)
            nng_aio_stop(L->ctxs[i].aio);
    }
    for (i = 0; i < L->n_ctx; i++) {
        struct rep_ctx *r = &L->ctxs[i];
        nng_msg *left;

        if (nng_ctx_id(r->ctx) > 0)
            nng_ctx_close(r->ctx);
        if (r->aio) {
            if ((left = nng_aio_get_msg(r->aio)) != NULL)
                nng_msg_free(left);
            nng_aio_free(r->aio);
        }
        if (r->pause)
            nng_aio_free(r->pause);
    }
    if (nng_socket_id(L->sock) > 0) {
        /* No pipe callback may reach the core once this returns. */
        nng_pipe_notify(L->sock, NNG_PIPE_EV_ADD_PRE, NULL, NULL);
        nng_pipe_notify(L->sock, NNG_PIPE_EV_REM_POST, NULL, NULL);
        hc_nng_close(L->sock, CLOSE_MS, L->url);
    }
    free(L->ctxs);
    free(L);
}

static int listen_start(void **be, hc_rpc_server *s, const char *url,
                        const struct hc_rpc_server_opts *o)
{
    struct listen *L = calloc(1, sizeof *L);
    const char *step = "opening REP socket";
    int rv = NNG_ENOMEM, i;

    *be = NULL;
    if (!L)
        return hc_err_set(HC_ERR_NOMEM, "rpc server %s: out of memory", url);
    L->s = s;
    snprintf(L->url, sizeof L->url, "%s", url);
    L->send_timeout_ms = o->send_timeout_ms ? o->send_timeout_ms
                                            : DEFAULT_SEND_TIMEOUT_MS;
    atomic_init(&L->took, 0);
    atomic_init(&L->last_warn, 0);
    atomic_init(&L->dropped, 0);
    if ((rv = nng_rep0_open(&L->sock)) != 0)
        goto fail;
    step = "setting options";
    /* Keepalive: a vanished peer's connection is found and closed. */
    if ((rv = nng_socket_set_size(L->sock, NNG_OPT_RECVMAXSZ,
                                  o->recv_max)) != 0 ||
        ((rv = nng_socket_set_bool(L->sock, NNG_OPT_TCP_KEEPALIVE, true)) &&
         rv != NNG_ENOTSUP) ||
        (rv = nng_pipe_notify(L->sock, NNG_PIPE_EV_ADD_PRE, listen_pipe_cb,
                              L)) != 0 ||
        (rv = nng_pipe_notify(L->sock, NNG_PIPE_EV_REM_POST, listen_pipe_cb,
                              L)) != 0)
        goto fail;
    step = "cannot listen";
    if ((rv = hc_listen_start(&L->guard, L->sock, url, &L->took)) != 0)
        goto fail;
    /* Known to the server before a context can hand it a request (whose
     * answer goes through it): a client may already be waiting. */
    *be = L;
    step = "opening contexts";
    rv = NNG_ENOMEM;
    if (!(L->ctxs = calloc((size_t)o->n_ctx, sizeof *L->ctxs)))
        goto fail;
    for (i = 0; i < o->n_ctx; i++) {
        struct rep_ctx *r = &L->ctxs[i];

        r->L = L;
        L->n_ctx = i + 1;
        if ((rv = nng_aio_alloc(&r->aio, ctx_cb, r)) != 0 ||
            (rv = nng_aio_alloc(&r->pause, pause_cb, r)) != 0 ||
            (rv = nng_ctx_open(&r->ctx, L->sock)) != 0)
            goto fail;
    }
    for (i = 0; i < o->n_ctx; i++)      /* each receiving */
        ctx_recv(&L->ctxs[i]);
    return HC_OK;
fail:
    listen_stop(L);     /* no callback after it */
    *be = NULL;
    return hc_err_set(hc_rpc_code_of(rv), "rpc server %s: %s: %s%s", url,
                      step, nng_strerror(rv),
                      rv == NNG_EADDRINUSE
                          ? " (another process holds the port; stop it or "
                            "pick another port)"
                          : "");
}

static uint64_t listen_relistens(void *be)
{
    return hc_listen_restarts(((struct listen *)be)->guard);
}

const struct hc_rpc_listen_ops hc_rpc_nng_listen = {
    1, listen_start, listen_reply, listen_drop, listen_stop,
    listen_relistens,
};
