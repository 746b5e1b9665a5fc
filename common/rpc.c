/*
 * rpc.c — request/reply over nng: the REP server's context state machines
 * and the REQ client's concurrent, retrying calls (contract in rpc.h).
 *
 * Server: each hc_rpc_req is one nng context with its own aio, cycling
 *   RECV → (handler owns the message: WAIT) → hc_rpc_reply → SEND → RECV.
 * The aio callback drives the cycle; hc_rpc_reply starts the send from any
 * thread. A stopping flag under the server mutex turns late replies into
 * drops, so stop never races a send it does not know about.
 *
 * Client: each peer has one REQ socket (nng's own timed re-send disabled),
 * one context and one aio, reused for every call. A call runs one small
 * state machine per peer on that aio — SEND → RECV, or on a retryable
 * failure SLEEP (back-off) → SEND again with a fresh copy of the very same
 * bytes — and the calling thread waits on a condition variable until every
 * peer is done. Every step has a timeout, and the wait itself is bounded.
 * With TLS by the relay a peer has no socket (tls_relay.h, a direct
 * client): the calling thread writes each request into TLS itself and
 * runs the same state machine, woken when the relay hands it a reply or a
 * connection comes or goes, or when a step's time is up (drive).
 */
#include "rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/protocol/reqrep0/req.h>
#include <nng/supplemental/tls/tls.h>
#include <nng/supplemental/util/platform.h>

#include "err.h"
#include "log.h"
#include "rpc_auth.h"
#include "rpc_close.h"
#include "rpc_listen.h"
#include "tls_engine.h"
#include "tls_relay.h"

#define DEFAULT_N_CTX 64
#define MAX_N_CTX 65536
#define DEFAULT_RECV_MAX ((size_t)512 << 20)
#define DEFAULT_TIMEOUT_MS 5000
#define DEFAULT_RETRY_MS 30000
#define DEFAULT_BACKOFF_MIN_MS 50
#define DEFAULT_BACKOFF_MAX_MS 2000
#define RECONNECT_MIN_MS 20
#define RECONNECT_MAX_MS 1000
#define WARN_EVERY_MS 1000   /* at most one retry warning per peer per second */
#define RECV_ERR_PAUSE_MS 50 /* pause after an unexpected server recv error */
#define DEFAULT_SEND_TIMEOUT_MS 10000 /* a reply not taken by then is dropped */
#define DEFAULT_MAX_CONNS 1024
#define DEFAULT_RECV_DEADLINE_MS 120000 /* see sweep_cb */
#define ABORT_SLACK_MS 5000  /* beyond the retry budget before a call aborts */
#define URL_MAX 600
#define MAX_SERVE_THREADS 16 /* a direct server's handler threads, at most */

/* Translate an nng code without recording anything (usable on nng threads). */
/* Network byte order to host (nng keeps ports in network order). */
static uint16_t ntohs_(uint16_t v)
{
    const unsigned char *b = (const unsigned char *)&v;

    return (uint16_t)((b[0] << 8) | b[1]);
}

static int code_of(int rv)
{
    switch (rv) {
    case 0:
        return HC_OK;
    case NNG_ETIMEDOUT:
        return HC_ERR_TIMEOUT;
    case NNG_ECLOSED:
        return HC_ERR_CLOSED;
    case NNG_ENOMEM:
        return HC_ERR_NOMEM;
    default:
        return HC_ERR_TRANSPORT;
    }
}

int hc_rpc_err(int nng_rv, const char *what)
{
    if (nng_rv == 0)
        return HC_OK;
    return hc_err_set(code_of(nng_rv), "%s: %s", what ? what : "nng",
                      nng_strerror(nng_rv));
}

/* ------------------------------------------------------------------ */
/* TLS                                                                 */
/* ------------------------------------------------------------------ */

/* The URL to use: "tcp://…" becomes "tls+tcp://…" when tls is set. */
static void transport_url(char *out, size_t n, const char *url, int tls)
{
    if (tls && strncmp(url, "tcp://", 6) == 0)
        snprintf(out, n, "tls+%s", url);
    else
        snprintf(out, n, "%s", url);
}

/* Whether TLS goes through the relay (tls_relay.h) rather than nng. */
static int use_relay(void)
{
    const char *e = getenv("HETPS_TLS_ENGINE");

    return !e || !*e || !strcmp(e, "relay");
}

/* The host of "tcp://host:port" or "tcp://[v6]:port" into out. */
static void url_host(char *out, size_t n, const char *url)
{
    const char *h = strstr(url, "://"), *e;

    h = h ? h + 3 : url;
    if (*h == '[') {
        h++;
        e = strchr(h, ']');
    } else {
        e = strrchr(h, ':');
    }
    if (!e)
        e = h + strlen(h);
    snprintf(out, n, "%.*s", (int)(e - h), h);
}

/* A TLS configuration for a listener (auth optional: the pipe callback
 * refuses unverified peers, so it can name them) or a dialer (auth required,
 * the server's certificate must name `server_name`). */
static int tls_config(nng_tls_config **out, const struct hc_rpc_tls *t,
                      int server, const char *server_name, const char *what)
{
    nng_tls_config *cfg = NULL;
    const char *step = "allocating the configuration";
    int rv;

    *out = NULL;
    if ((rv = hc_tls_engine_install()) != 0)
        return rv == NNG_EINVAL
                   ? hc_err_set(HC_ERR_CONFIG, "%s: TLS: HETPS_TLS_ENGINE=%s "
                                "names no engine of hetps (relay, the "
                                "default, mbed or openssl)", what,
                                getenv("HETPS_TLS_ENGINE"))
                   : hc_rpc_err(rv, "TLS engine");
    if ((rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER
                                                : NNG_TLS_MODE_CLIENT)) != 0)
        goto fail;
    step = "setting the authentication mode";
    if ((rv = nng_tls_config_auth_mode(cfg, server
                                                ? NNG_TLS_AUTH_MODE_OPTIONAL
                                                : NNG_TLS_AUTH_MODE_REQUIRED)) != 0)
        goto fail;
    step = t->ca_file;
    if ((rv = nng_tls_config_ca_file(cfg, t->ca_file)) != 0)
        goto fail;
    step = t->cert_key_file;
    if ((rv = nng_tls_config_cert_key_file(cfg, t->cert_key_file, NULL)) != 0)
        goto fail;
    step = "setting the server name";
    if (server_name && (rv = nng_tls_config_server_name(cfg, server_name)) != 0)
        goto fail;
    *out = cfg;
    return HC_OK;
fail:
    if (cfg)
        nng_tls_config_free(cfg);
    return hc_err_set(code_of(rv), "%s: TLS: %s: %s (is it a PEM file made "
                      "by `hetps certs`?)", what, step, nng_strerror(rv));
}

/* ------------------------------------------------------------------ */
/* Server                                                              */
/* ------------------------------------------------------------------ */

enum req_state { REQ_RECV, REQ_WAIT, REQ_SEND, REQ_PAUSE, REQ_STOPPED };

struct hc_rpc_req {
    hc_rpc_server *s;
    nng_ctx ctx;
    nng_aio *aio;
    nng_aio *pause;             /* timer only: nng_sleep_aio marks an aio
                                 * so a later timeout reads as success */
    int ctx_open;
    enum req_state state;
    char who[32];               /* the proven identity of the request's
                                   connection ("worker:1"), "" without TLS */
    nng_pipe pipe;              /* the connection the request came on */
    /* A direct server's (below): one per request, freed once answered. */
    int direct;
    uint32_t id;                /* the request id it came with */
    nng_msg *msg;               /* queued for a thread: the request */
    hc_rpc_req *qnext;          /* under s->mtx: the queue */
    hc_rpc_req *lnext, *lprev;  /* under s->mtx: the unanswered */
};

/* What a server knows of one open connection. */
struct pipe_info {
    uint32_t pipe;
    nng_time last;              /* connected, or its last request or reply */
    int owed;                   /* its requests not yet answered */
    /* TLS: the proof of its certificate (rpc_auth.h) */
    int has_nonce;
    unsigned char nonce[HC_AUTH_NONCE];
    char who[32];               /* "" until proven */
};

#define MAX_PIPES 65536

struct hc_rpc_server {
    nng_socket sock;
    int sock_open;
    char *url;
    hc_rpc_handler handler;
    void *arg;
    int tls;
    void (*on_close)(void *arg, uint32_t pipe);
    atomic_uint_least64_t refused; /* connections refused (TLS) */
    hc_auth_verifier *verifier; /* TLS: checks the clients' proofs */
    nng_mtx *mtx;
    struct pipe_info *pipes;    /* under mtx: (n_pipes) connections */
    int recv_deadline_ms;
    nng_aio *sweep;             /* every deadline/4: sweep_cb */
    atomic_uint_least64_t deadline_closed;
    int n_pipes, cap_pipes;
    int stopping;               /* under mtx: replies are dropped */
    atomic_uint_least64_t last_warn;
    int send_timeout_ms;
    int max_conns;
    atomic_int conns;           /* connections (pipes) now open */
    atomic_int closing;         /* server_free: refuse new connections */
    atomic_uint_least64_t refused_conns;
    atomic_uint_least64_t took; /* connections taken (ADD_PRE), refused too */
    hc_listen *listen;          /* the listener and its guard */
    hc_relay_ep *relay;         /* TLS through the relay (tls_relay.h) */
    int n_req;
    hc_rpc_req *reqs;           /* (n_req) */
    /* Direct (TLS by the relay): no socket. The relay hands each request
     * to serve_msg, which queues it for a thread of the server's own; a
     * reply goes back through hc_relay_send. n_ctx bounds the requests a
     * connection may have unanswered. Under mtx: */
    int direct;
    int n_ctx;
    hc_rpc_req *q_head, *q_tail; /* requests waiting for a thread */
    hc_rpc_req *live;           /* requests not answered yet */
    int quit;
    nng_cv *qcv;
    nng_thread *threads[MAX_SERVE_THREADS];
    int n_threads;
};

static void req_recv(hc_rpc_req *r)
{
    r->state = REQ_RECV;
    nng_aio_set_timeout(r->aio, NNG_DURATION_INFINITE);
    nng_ctx_recv(r->ctx, r->aio);
}

static void server_warn(hc_rpc_server *s, const char *what, int rv)
{
    uint64_t now = nng_clock();
    uint64_t last = atomic_load(&s->last_warn);

    if (last != 0 && now - last < WARN_EVERY_MS)
        return;
    atomic_store(&s->last_warn, now);
    hc_warn("rpc server %s: %s failed: %s", s->url, what, nng_strerror(rv));
}

static int proof_serve(hc_rpc_server *s, hc_rpc_req *r, nng_msg *msg);
static struct pipe_info *pipe_entry(hc_rpc_server *s, uint32_t pipe,
                                    int make);

/* A request came on (+1) or was answered or dropped (-1) on pipe p: the
 * receive deadline (sweep_cb) starts again. Under s->mtx when `locked`. */
static void pipe_account(hc_rpc_server *s, nng_pipe p, int d, int locked)
{
    struct pipe_info *pi;
    uint32_t id = p.id;

    if (id == 0)
        return;
    if (!locked)
        nng_mtx_lock(s->mtx);
    if ((pi = pipe_entry(s, id, 0)) != NULL) {
        pi->owed += d;
        if (pi->owed < 0)
            pi->owed = 0;
        pi->last = nng_clock();
    }
    if (!locked)
        nng_mtx_unlock(s->mtx);
}

static void pipe_addr(nng_pipe pipe, char *buf, size_t n);

/* A peer that did not take a reply within the send timeout is not reading:
 * close its connection, so its other requests cannot hold contexts too. */
static void drop_slow_reader(hc_rpc_server *s, nng_pipe p)
{
    char addr[80];

    pipe_addr(p, addr, sizeof addr);
    hc_warn("rpc server %s: the peer at %s did not take its reply within %d "
            "ms: closing its connection", s->url, addr, s->send_timeout_ms);
    nng_pipe_close(p);
}

/* The aio callback: one step of the context's cycle. Nothing after the
 * handler call touches `r`, because the handler may already have replied
 * from another thread and the send's own callback may be running. */
static void req_cb(void *arg)
{
    hc_rpc_req *r = arg;
    hc_rpc_server *s = r->s;
    int rv = nng_aio_result(r->aio);
    nng_msg *msg;

    switch (r->state) {
    case REQ_RECV:
        if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
            r->state = REQ_STOPPED;
            return;
        }
        if (rv != 0) {
            /* Unexpected: pause before the next receive so a persistent
             * error cannot spin. */
            server_warn(s, "receive", rv);
            r->state = REQ_PAUSE;
            nng_sleep_aio(RECV_ERR_PAUSE_MS, r->pause);
            return;
        }
        msg = nng_aio_get_msg(r->aio);
        nng_aio_set_msg(r->aio, NULL);
        r->pipe = nng_msg_get_pipe(msg);
        r->state = REQ_WAIT;
        pipe_account(s, r->pipe, 1, 0);
        if (s->verifier && proof_serve(s, r, msg))
            return;
        s->handler(s->arg, r, msg);
        return;
    case REQ_SEND:
        if (rv != 0) {
            /* The send did not take the message: it is still ours. */
            msg = nng_aio_get_msg(r->aio);
            nng_aio_set_msg(r->aio, NULL);
            if (msg)
                nng_msg_free(msg);
            if (rv == NNG_ECLOSED || rv == NNG_ECANCELED) {
                r->state = REQ_STOPPED;
                return;
            }
            if (rv == NNG_ETIMEDOUT)
                drop_slow_reader(s, r->pipe);
            else
                server_warn(s, "reply", rv);
        }
        req_recv(r);
        return;
    case REQ_PAUSE:
    case REQ_WAIT:
    case REQ_STOPPED:
        return;
    }
}

/* The pause after an unexpected receive error is over. */
static void pause_cb(void *arg)
{
    hc_rpc_req *r = arg;

    if (nng_aio_result(r->pause) == NNG_ECANCELED) {
        r->state = REQ_STOPPED;
        return;
    }
    req_recv(r);
}

/* The remote address of a pipe, "127.0.0.1:54321" or "[::1]:54321". */
static void pipe_addr(nng_pipe pipe, char *buf, size_t n)
{
    nng_sockaddr sa;
    const unsigned char *a;
    size_t at;
    int i;

    snprintf(buf, n, "an unknown address");
    /* A direct connection of the TLS relay: the relay knows its peer. */
    if (hc_relay_conn_peer(pipe.id, buf, n) ||
        nng_pipe_get_addr(pipe, NNG_OPT_REMADDR, &sa) != 0)
        return;
    if (sa.s_family == NNG_AF_INPROC) {
        snprintf(buf, n, "a connection in this process");
        return;
    }
    if (sa.s_family == NNG_AF_INET) {
        a = (const unsigned char *)&sa.s_in.sa_addr;
        snprintf(buf, n, "%u.%u.%u.%u:%u", a[0], a[1], a[2], a[3],
                 (unsigned)ntohs_(sa.s_in.sa_port));
    } else if (sa.s_family == NNG_AF_INET6) {
        a = sa.s_in6.sa_addr;
        at = (size_t)snprintf(buf, n, "[");
        for (i = 0; i < 16 && at < n; i += 2)
            at += (size_t)snprintf(buf + at, n - at, "%s%x", i ? ":" : "",
                                   (unsigned)(a[i] << 8 | a[i + 1]));
        if (at < n)
            snprintf(buf + at, n - at, "]:%u",
                     (unsigned)ntohs_(sa.s_in6.sa_port));
    }
}

void hc_rpc_msg_peer(nng_msg *msg, char *buf, size_t n)
{
    pipe_addr(nng_msg_get_pipe(msg), buf, n);
}

uint32_t hc_rpc_msg_pipe(nng_msg *msg)
{
    return msg ? nng_msg_get_pipe(msg).id : 0;
}

/* A client connected (refuse it unless its certificate is the cluster's)
 * or is gone (tell the service). */
static void server_pipe_cb(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    hc_rpc_server *s = arg;
    bool verified = false;
    char addr[80];
    uint64_t n;

    if (ev == NNG_PIPE_EV_REM_POST) {
        uint32_t id = nng_pipe_id(pipe) > 0 ? (uint32_t)nng_pipe_id(pipe) : 0;
        int i;

        atomic_fetch_sub(&s->conns, 1);

        nng_mtx_lock(s->mtx);
        for (i = 0; i < s->n_pipes; i++)
            if (s->pipes[i].pipe == id) {
                s->pipes[i] = s->pipes[--s->n_pipes];
                break;
            }
        nng_mtx_unlock(s->mtx);
        if (s->on_close && id)
            s->on_close(s->arg, id);
        return;
    }
    if (ev != NNG_PIPE_EV_ADD_PRE)
        return;
    atomic_fetch_add(&s->took, 1);
    if (atomic_load(&s->closing)) {
        nng_pipe_close(pipe);
        return;
    }
    /* The connection cap, then the certificate. A pipe closed here is
     * closed before the socket sees it: no REM_POST comes for it. */
    if (atomic_fetch_add(&s->conns, 1) >= s->max_conns) {
        atomic_fetch_sub(&s->conns, 1);
        atomic_fetch_add(&s->refused_conns, 1);
        nng_pipe_close(pipe);
        server_warn(s, "accepting a connection (over the cap of "
                    "connections)", NNG_ENOSPC);
        return;
    }
    if (!s->tls || (nng_pipe_get_bool(pipe, NNG_OPT_TLS_VERIFIED,
                                      &verified) == 0 && verified)) {
        /* Its entry lives from here to REM_POST: a proof message can only
         * find the entry of a connection that is still open, and a HELLO
         * handled after its connection closed cannot leave one behind. */
        struct pipe_info *pi;

        nng_mtx_lock(s->mtx);
        if ((pi = pipe_entry(s, (uint32_t)nng_pipe_id(pipe), 1)) != NULL)
            pi->last = nng_clock();
        nng_mtx_unlock(s->mtx);
        if (pi)
            return;
        atomic_fetch_sub(&s->conns, 1);
        server_warn(s, "accepting a connection (no memory for its state)",
                    NNG_ENOMEM);
        nng_pipe_close(pipe);
        return;
    }
    atomic_fetch_sub(&s->conns, 1);
    pipe_addr(pipe, addr, sizeof addr);
    n = atomic_fetch_add(&s->refused, 1) + 1;
    if (n <= 20 || n % 1000 == 0)
        hc_warn("rpc server %s: refused the connection from %s (%llu so "
                "far): no client certificate, or one not signed by this "
                "cluster's CA", s->url, addr, (unsigned long long)n);
    nng_pipe_close(pipe);
}

const char *hc_rpc_req_identity(const hc_rpc_req *req)
{
    return req && req->who[0] ? req->who : NULL;
}

/* The entry of `pipe` (made when `make`), or NULL. Under s->mtx. */
static struct pipe_info *pipe_entry(hc_rpc_server *s, uint32_t pipe, int make)
{
    struct pipe_info *pa;
    int i;

    for (i = 0; i < s->n_pipes; i++)
        if (s->pipes[i].pipe == pipe)
            return &s->pipes[i];
    if (!make || s->n_pipes == MAX_PIPES)
        return NULL;
    if (s->n_pipes == s->cap_pipes) {
        int cap = s->cap_pipes ? 2 * s->cap_pipes : 16;

        if (!(pa = realloc(s->pipes, (size_t)cap * sizeof *pa)))
            return NULL;
        s->pipes = pa;
        s->cap_pipes = cap;
    }
    pa = &s->pipes[s->n_pipes++];
    memset(pa, 0, sizeof *pa);
    pa->pipe = pipe;
    return pa;
}

/*
 * TLS: the certificate proof, before the handler sees anything. Answers
 * HELLO and PROOF here (and a request on a connection not yet proven,
 * with UNAUTH) and returns 1; for a request on a proven connection records
 * its identity in r->who and returns 0.
 */
static int proof_serve(hc_rpc_server *s, hc_rpc_req *r, nng_msg *msg)
{
    uint32_t pipe = hc_rpc_msg_pipe(msg);
    int kind = hc_auth_kind_of(msg), ok;
    unsigned char nonce[HC_AUTH_NONCE];
    struct pipe_info *pa;
    nng_msg *reply = NULL;
    char who[32], why[256], addr[80];
    uint64_t n;

    r->who[0] = '\0';
    nng_mtx_lock(s->mtx);
    pa = pipe_entry(s, pipe, 0);
    if (kind == 0 && pa && pa->who[0]) {
        memcpy(r->who, pa->who, sizeof r->who);
        nng_mtx_unlock(s->mtx);
        return 0;
    }
    if (kind == HC_AUTH_HELLO && pa) {
        ok = getrandom(pa->nonce, sizeof pa->nonce, 0) == (ssize_t)sizeof pa->nonce;
        pa->has_nonce = ok;
        pa->who[0] = '\0';
        memcpy(nonce, pa->nonce, sizeof nonce);
        nng_mtx_unlock(s->mtx);
        if (ok)
            hc_auth_msg(&reply, HC_AUTH_NONCE_REPLY, nonce, sizeof nonce);
        else
            hc_auth_msg(&reply, HC_AUTH_ERR, "the server could not make a "
                        "nonce (getrandom failed)", 47);
        goto answer;
    }
    if (kind == HC_AUTH_PROOF && pa && pa->has_nonce) {
        /* The nonce stays until this connection's next HELLO: a late,
         * stale proof (its client timed out and said HELLO again) fails
         * without spoiling the fresh one. Replaying a proof gains nothing:
         * the nonce is this connection's alone. */
        memcpy(nonce, pa->nonce, sizeof nonce);
        nng_mtx_unlock(s->mtx);
        if (hc_auth_check(s->verifier, nonce, msg, who, sizeof who, why,
                          sizeof why) == 0) {
            nng_mtx_lock(s->mtx);
            if ((pa = pipe_entry(s, pipe, 0)) != NULL)
                memcpy(pa->who, who, sizeof pa->who);
            nng_mtx_unlock(s->mtx);
            hc_auth_msg(&reply, HC_AUTH_OK, NULL, 0);
            goto answer;
        }
        hc_rpc_msg_peer(msg, addr, sizeof addr);
        n = atomic_fetch_add(&s->refused, 1) + 1;
        if (n <= 20 || n % 1000 == 0)
            hc_warn("rpc server %s: refused the certificate proof from %s: "
                    "%s", s->url, addr, why);
        hc_auth_msg(&reply, HC_AUTH_ERR, why, strlen(why));
        goto answer;
    }
    nng_mtx_unlock(s->mtx);
    /* Anything else must make the client prove itself again, never stop
     * it: a request on a connection not (yet) proven, a PROOF without a
     * nonce (nng's REQ re-sends an outstanding message on the next
     * connection when the one it went on closes, so a PROOF or a request
     * can arrive first thing on a new connection), a message whose
     * connection is already gone. Every one of them gets this answer. */
    hc_debug("rpc server %s: a %s on connection %u not proven: asking "
             "for the proof", s->url, kind == 0 ? "request" : "proof message",
             pipe);
    hc_auth_msg(&reply, HC_AUTH_UNAUTH, NULL, 0);
answer:
    nng_msg_free(msg);
    hc_rpc_reply(r, reply);
    return 1;
}

static void direct_answered(hc_rpc_server *s, hc_rpc_req *r,
                            nng_msg *reply);

void hc_rpc_reply(hc_rpc_req *req, nng_msg *reply)
{
    hc_rpc_server *s;

    if (!req) {
        if (reply)
            nng_msg_free(reply);
        return;
    }
    s = req->s;
    nng_mtx_lock(s->mtx);
    if (s->stopping || req->state != REQ_WAIT) {
        nng_mtx_unlock(s->mtx);
        if (reply)
            nng_msg_free(reply);
        return;
    }
    pipe_account(s, req->pipe, -1, 1);
    if (req->direct) {
        direct_answered(s, req, reply);
        return;
    }
    if (!reply) {
        /* Drop: a fresh receive abandons the request in nng. */
        req_recv(req);
    } else {
        req->state = REQ_SEND;
        nng_aio_set_msg(req->aio, reply);
        /* A peer that never reads its replies must not hold this context
         * (and, one by one, all of them) for ever. */
        nng_aio_set_timeout(req->aio, s->send_timeout_ms);
        nng_ctx_send(req->ctx, req->aio);
    }
    nng_mtx_unlock(s->mtx);
}

/* ------------------------------------------------------------------ */
/* A direct server (TLS by the relay, no socket)                        */

/* A connection the relay verified (refused over the cap, said here), or
 * one gone: what server_pipe_cb does for nng's pipes. */
static int serve_conn(void *arg, uint32_t conn, int up, const char *peer)
{
    hc_rpc_server *s = arg;
    struct pipe_info *pi;
    int i;

    if (!up) {
        atomic_fetch_sub(&s->conns, 1);
        nng_mtx_lock(s->mtx);
        for (i = 0; i < s->n_pipes; i++)
            if (s->pipes[i].pipe == conn) {
                s->pipes[i] = s->pipes[--s->n_pipes];
                break;
            }
        nng_mtx_unlock(s->mtx);
        if (s->on_close)
            s->on_close(s->arg, conn);
        return 0;
    }
    atomic_fetch_add(&s->took, 1);
    if (atomic_load(&s->closing))
        return -1;
    if (atomic_fetch_add(&s->conns, 1) >= s->max_conns) {
        atomic_fetch_sub(&s->conns, 1);
        atomic_fetch_add(&s->refused_conns, 1);
        server_warn(s, "accepting a connection (over the cap of "
                    "connections)", NNG_ENOSPC);
        return -1;
    }
    nng_mtx_lock(s->mtx);
    if ((pi = pipe_entry(s, conn, 1)) != NULL)
        pi->last = nng_clock();
    nng_mtx_unlock(s->mtx);
    if (pi)
        return 0;
    atomic_fetch_sub(&s->conns, 1);
    hc_warn("rpc server %s: no memory for the connection from %s: closed",
            s->url, peer);
    return -1;
}

/* A request, from the relay's thread: queued for a handler thread. A
 * connection with n_ctx requests unanswered already is closed (a client
 * of ours has one at a time; the rest would only queue). */
static void serve_msg(void *arg, uint32_t conn, uint32_t id, nng_msg *msg)
{
    hc_rpc_server *s = arg;
    nng_pipe pipe = NNG_PIPE_INITIALIZER;
    struct pipe_info *pi;
    hc_rpc_req *r = calloc(1, sizeof *r);
    char addr[80];
    int over = 0;

    pipe.id = conn;
    nng_msg_set_pipe(msg, pipe);
    nng_mtx_lock(s->mtx);
    pi = r && !s->stopping ? pipe_entry(s, conn, 0) : NULL;
    if (pi && pi->owed >= s->n_ctx)
        over = 1;
    if (!pi || over) {
        nng_mtx_unlock(s->mtx);
        nng_msg_free(msg);
        free(r);
        if (over) {
            pipe_addr(pipe, addr, sizeof addr);
            hc_warn("rpc server %s: the peer at %s has %d requests "
                    "unanswered: closing its connection", s->url, addr,
                    s->n_ctx);
            hc_relay_drop(s->relay, conn);
        }
        return;
    }
    pi->owed++;
    pi->last = nng_clock();
    r->s = s;
    r->direct = 1;
    r->pipe = pipe;
    r->id = id;
    r->msg = msg;
    r->state = REQ_WAIT;
    r->lnext = s->live;
    if (s->live)
        s->live->lprev = r;
    s->live = r;
    if (s->q_tail)
        s->q_tail->qnext = r;
    else
        s->q_head = r;
    s->q_tail = r;
    nng_cv_wake1(s->qcv);
    nng_mtx_unlock(s->mtx);
}

/* A handler thread: the proof, then the handler, for each request. */
static void serve_thread(void *arg)
{
    hc_rpc_server *s = arg;
    hc_rpc_req *r;
    nng_msg *msg;

    nng_mtx_lock(s->mtx);
    for (;;) {
        while (!s->q_head && !s->quit)
            nng_cv_wait(s->qcv);
        if (s->quit)
            break;
        r = s->q_head;
        if (!(s->q_head = r->qnext))
            s->q_tail = NULL;
        msg = r->msg;
        r->msg = NULL;
        nng_mtx_unlock(s->mtx);
        if (!s->verifier || !proof_serve(s, r, msg))
            s->handler(s->arg, r, msg);
        nng_mtx_lock(s->mtx);
    }
    nng_mtx_unlock(s->mtx);
}

/* hc_rpc_reply's end for a direct request (s->mtx held, released here):
 * out of the unanswered, the reply written, the request freed. */
static void direct_answered(hc_rpc_server *s, hc_rpc_req *r, nng_msg *reply)
{
    int err;

    if (r->lprev)
        r->lprev->lnext = r->lnext;
    else
        s->live = r->lnext;
    if (r->lnext)
        r->lnext->lprev = r->lprev;
    r->state = REQ_STOPPED;
    nng_mtx_unlock(s->mtx);
    if (reply &&
        (err = hc_relay_send(s->relay, r->pipe.id, r->id, reply)) != HC_OK) {
        nng_msg_free(reply);
        if (err == HC_ERR_LIMIT) {
            /* Eight replies wait already: a peer that does not read. */
            char addr[80];

            pipe_addr(r->pipe, addr, sizeof addr);
            hc_warn("rpc server %s: the peer at %s does not take its "
                    "replies: closing its connection", s->url, addr);
            hc_relay_drop(s->relay, r->pipe.id);
        }
    }
    free(r);
}

/* The handler threads and the relay's listener of a direct server. */
static int serve_start(hc_rpc_server *s, const char *url, size_t recv_max,
                       const struct hc_rpc_tls *tls)
{
    const struct hc_relay_direct cb = {serve_conn, serve_msg, s,
                                       s->send_timeout_ms};
    char host[URL_MAX];
    const char *colon = strrchr(url, ':');
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int bound = 0, n, rv;

    s->direct = 1;
    if ((rv = nng_cv_alloc(&s->qcv, s->mtx)) != 0)
        return hc_rpc_err(rv, "rpc server: condition variable");
    /* As many as nng's task threads would be: 2 a core, 4 to 16. */
    n = cpus < 2 ? 4 : cpus > MAX_SERVE_THREADS / 2 ? MAX_SERVE_THREADS
                                                    : 2 * (int)cpus;
    while (s->n_threads < n) {
        if ((rv = nng_thread_create(&s->threads[s->n_threads], serve_thread,
                                    s)) != 0)
            return hc_rpc_err(rv, "rpc server: starting a thread");
        s->n_threads++;
    }
    url_host(host, sizeof host, url);
    return hc_relay_listen_direct(&s->relay, host, colon ? atoi(colon + 1) : 0,
                                  recv_max, tls->ca_file, tls->cert_key_file,
                                  url, &bound, &cb);
}

/* Stop a direct server's threads (those in a handler finish it) and free
 * every request not answered. The relay is closed already. */
static void serve_stop(hc_rpc_server *s)
{
    hc_rpc_req *r;
    int i;

    if (!s->qcv)
        return;
    nng_mtx_lock(s->mtx);
    s->quit = 1;
    nng_cv_wake(s->qcv);
    nng_mtx_unlock(s->mtx);
    for (i = 0; i < s->n_threads; i++)
        nng_thread_destroy(s->threads[i]);
    s->n_threads = 0;
    while ((r = s->live) != NULL) {
        s->live = r->lnext;
        if (r->msg)
            nng_msg_free(r->msg);
        free(r);
    }
    nng_cv_free(s->qcv);
    s->qcv = NULL;
}

/*
 * The receive deadline. A connection owed no reply that has not completed
 * a request within recv_deadline_ms of connecting, or of its last request
 * or reply, is closed. nng 1.5.2 gives a message no deadline of its own:
 * a peer that sends a length and then trickles the body, or nothing, would
 * hold its connection (one of max_conns) and the buffer nng allocated for
 * the announced length for ever. A client of ours that was merely idle
 * redials on its next call (and with TLS proves itself again); a request
 * the server keeps (a sync pull) is owed a reply, so its connection stays.
 */
static void sweep_cb(void *arg)
{
    hc_rpc_server *s = arg;
    uint32_t late[16];
    nng_time now = nng_clock();
    int i, n = 0;

    if (nng_aio_result(s->sweep) == NNG_ECANCELED)
        return;
    nng_mtx_lock(s->mtx);
    for (i = 0; i < s->n_pipes && n < (int)(sizeof late / sizeof *late); i++) {
        struct pipe_info *pi = &s->pipes[i];

        if (pi->owed == 0 &&
            now - pi->last > (nng_time)s->recv_deadline_ms) {
            late[n++] = pi->pipe;
            pi->last = now;     /* one close per deadline at most */
        }
    }
    nng_mtx_unlock(s->mtx);
    for (i = 0; i < n; i++) {
        nng_pipe p = NNG_PIPE_INITIALIZER;
        char addr[80];
        uint64_t k = atomic_fetch_add(&s->deadline_closed, 1) + 1;

        p.id = late[i];
        pipe_addr(p, addr, sizeof addr);
        if (k <= 20 || k % 1000 == 0)
            hc_info("rpc server %s: closing the connection from %s (%llu so "
                    "far): no complete request for %d ms (idle, or a message "
                    "that never ends); a client of ours reconnects", s->url,
                    addr, (unsigned long long)k, s->recv_deadline_ms);
        if (s->direct)
            hc_relay_drop(s->relay, p.id);
        else
            nng_pipe_close(p);
    }
    nng_sleep_aio(s->recv_deadline_ms / 4 > 1000 ? 1000
                                                 : s->recv_deadline_ms / 4,
                  s->sweep);
}

uint64_t hc_rpc_server_deadline_closed(const hc_rpc_server *s)
{
    return s ? atomic_load(&s->deadline_closed) : 0;
}

/*
 * Close every TLS connection through the socket (protocol first, then the
 * transport): before the socket closes (server_drain, which then waits for
 * them to go) and before the listener guard replaces a stopped listener.
 * nng 1.5.2 closes a listener's connections transport first, and its TLS
 * transport (unlike its TCP one) then lets a reply that starts after that
 * wait for ever: nng's single reaper thread waits for it, and every close
 * and every redial of the process stalls behind it (tests/unit/test_rpc.c
 * restarted a TLS server into that about one run in three).
 */
static void server_close_conns(void *arg)
{
    hc_rpc_server *s = arg;
    uint32_t *ids;
    int i, n = 0;

    nng_mtx_lock(s->mtx);
    if ((ids = malloc((size_t)(s->n_pipes + 1) * sizeof *ids)) != NULL)
        for (i = 0; i < s->n_pipes; i++)
            ids[n++] = s->pipes[i].pipe;
    nng_mtx_unlock(s->mtx);
    for (i = 0; i < n; i++) {
        nng_pipe p = NNG_PIPE_INITIALIZER;

        p.id = ids[i];
        nng_pipe_close(p);
    }
    free(ids);
}

static void server_drain(hc_rpc_server *s)
{
    int k;

    atomic_store(&s->closing, 1);
    server_close_conns(s);
    for (k = 0; k < 200 && atomic_load(&s->conns) > 0; k++)
        nng_msleep(5);
}

static void server_free(hc_rpc_server *s)
{
    int i;

    if (!s)
        return;
    hc_relay_close(s->relay);   /* no new connection from here on */
    s->relay = NULL;
    hc_listen_stop(s->listen);  /* no new listener from here on */
    s->listen = NULL;
    if (s->sweep)
        nng_aio_stop(s->sweep);
    if (s->mtx) {
        nng_mtx_lock(s->mtx);
        s->stopping = 1;
        nng_mtx_unlock(s->mtx);
    }
    serve_stop(s);
    /* Stop every aio first: waits for running callbacks (and handlers). */
    for (i = 0; i < s->n_req; i++) {
        if (s->reqs[i].pause)
            nng_aio_stop(s->reqs[i].pause);
        if (s->reqs[i].aio)
            nng_aio_stop(s->reqs[i].aio);
    }
    for (i = 0; i < s->n_req; i++) {
        hc_rpc_req *r = &s->reqs[i];
        nng_msg *left;

        if (r->ctx_open)
            nng_ctx_close(r->ctx);
        if (r->aio) {
            if ((left = nng_aio_get_msg(r->aio)) != NULL)
                nng_msg_free(left);
            nng_aio_free(r->aio);
        }
        if (r->pause)
            nng_aio_free(r->pause);
    }
    if (s->sock_open && s->tls)
        server_drain(s);
    if (s->sock_open) {
        /* No pipe callback may reach s once this returns. */
        nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, NULL, NULL);
        nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, NULL, NULL);
        hc_rpc_close_socket(s->sock, s->url);
    }
    if (s->mtx)
        nng_mtx_free(s->mtx);
    if (s->sweep)
        nng_aio_free(s->sweep);
    hc_auth_verifier_close(s->verifier);
    free(s->pipes);
    free(s->reqs);
    free(s->url);
    free(s);
}

/* Keepalive (a vanished peer's connection is found and closed) and the
 * connection cap, set before listening. */
static int server_limits(hc_rpc_server *s)
{
    int rv;

    if ((rv = nng_socket_set_bool(s->sock, NNG_OPT_TCP_KEEPALIVE, true)) != 0 &&
        rv != NNG_ENOTSUP)
        return hc_rpc_err(rv, "rpc server: setting TCP keepalive");
    return HC_OK;
}

int hc_rpc_server_start(hc_rpc_server **out, const char *url,
                        const struct hc_rpc_server_opts *opts,
                        hc_rpc_handler handler, void *arg)
{
    hc_rpc_server *s = NULL;
    int n_ctx = opts && opts->n_ctx ? opts->n_ctx : DEFAULT_N_CTX;
    size_t recv_max = opts && opts->recv_max ? opts->recv_max
                                             : DEFAULT_RECV_MAX;
    nng_tls_config *tls = NULL;
    char turl[URL_MAX];
    int rv, i, err;

    if (out)
        *out = NULL;
    if (!out || !url || !handler)
        return hc_err_set(HC_ERR_INVAL,
                          "rpc server: out, url and handler are required");
    if (n_ctx < 1 || n_ctx > MAX_N_CTX)
        return hc_err_set(HC_ERR_INVAL,
                          "rpc server %s: n_ctx %d out of range 1..%d", url,
                          n_ctx, MAX_N_CTX);
    if (!(s = calloc(1, sizeof *s)) || !(s->url = strdup(url)) ||
        !(s->reqs = calloc((size_t)n_ctx, sizeof *s->reqs))) {
        err = hc_err_set(HC_ERR_NOMEM, "rpc server %s: out of memory", url);
        goto fail;
    }
    s->handler = handler;
    s->arg = arg;
    s->send_timeout_ms = opts && opts->send_timeout_ms ? opts->send_timeout_ms
                                                       : DEFAULT_SEND_TIMEOUT_MS;
    s->max_conns = opts && opts->max_conns ? opts->max_conns : DEFAULT_MAX_CONNS;
    s->recv_deadline_ms = opts && opts->recv_deadline_ms
                              ? opts->recv_deadline_ms
                              : DEFAULT_RECV_DEADLINE_MS;
    if (s->recv_deadline_ms < 4) {
        err = hc_err_set(HC_ERR_INVAL, "rpc server %s: receive deadline %d "
                         "ms is too short", url, s->recv_deadline_ms);
        goto fail;
    }
    atomic_init(&s->deadline_closed, 0);
    atomic_init(&s->last_warn, 0);
    atomic_init(&s->conns, 0);
    atomic_init(&s->refused_conns, 0);
    atomic_init(&s->took, 0);
    if ((rv = nng_mtx_alloc(&s->mtx)) != 0) {
        err = hc_rpc_err(rv, "rpc server: mutex");
        goto fail;
    }
    s->tls = opts && opts->tls;
    s->on_close = opts ? opts->on_close : NULL;
    s->n_ctx = n_ctx;
    atomic_init(&s->refused, 0);
    if (s->tls && use_relay()) {
        /* TLS by the relay, which hands requests to our threads: no
         * socket (and no nng listener to guard: nng's handshake bug is
         * in its TCP and TLS transports). */
        if ((err = hc_auth_verifier_open(&s->verifier, opts->tls->ca_file)) !=
                HC_OK ||
            (err = serve_start(s, url, recv_max, opts->tls)) != HC_OK)
            goto fail;
        goto sweep;
    }
    if ((rv = nng_rep0_open(&s->sock)) != 0) {
        err = hc_rpc_err(rv, "rpc server: opening REP socket");
        goto fail;
    }
    s->sock_open = 1;
    if ((rv = nng_socket_set_size(s->sock, NNG_OPT_RECVMAXSZ, recv_max)) !=
        0) {
        err = hc_rpc_err(rv, "rpc server: setting recv_max");
        goto fail;
    }
    if ((rv = server_limits(s)) != HC_OK) {
        err = rv;
        goto fail;
    }
    if ((rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_ADD_PRE, server_pipe_cb,
                              s)) != 0 ||
        (rv = nng_pipe_notify(s->sock, NNG_PIPE_EV_REM_POST, server_pipe_cb,
                              s)) != 0) {
        err = hc_rpc_err(rv, "rpc server: registering pipe callbacks");
        goto fail;
    }
    transport_url(turl, sizeof turl, url, s->tls);
    if (s->tls &&
        ((err = tls_config(&tls, opts->tls, 1, NULL, url)) != HC_OK ||
         (err = hc_auth_verifier_open(&s->verifier, opts->tls->ca_file)) !=
             HC_OK))
        goto fail;
    rv = hc_listen_start(&s->listen, s->sock, turl, tls,
                         tls ? opts->tls->cert_key_file : NULL, &s->took,
                         tls ? server_close_conns : NULL, s);
    if (tls)
        nng_tls_config_free(tls); /* the listener holds its own reference */
    if (rv != 0) {
        err = hc_err_set(code_of(rv) == HC_ERR_NOMEM ? HC_ERR_NOMEM
                                                     : HC_ERR_TRANSPORT,
                         "rpc server: cannot listen on %s: %s%s", turl,
                         nng_strerror(rv),
                         rv == NNG_EADDRINUSE
                             ? " (another process holds the port; stop it "
                               "or pick another port)"
                             : "");
        goto fail;
    }
    for (i = 0; i < n_ctx; i++) {
        hc_rpc_req *r = &s->reqs[i];

        r->s = s;
        r->state = REQ_STOPPED;
        s->n_req = i + 1;
        if ((rv = nng_aio_alloc(&r->aio, req_cb, r)) != 0 ||
            (rv = nng_aio_alloc(&r->pause, pause_cb, r)) != 0) {
            err = hc_rpc_err(rv, "rpc server: allocating aio");
            goto fail;
        }
        if ((rv = nng_ctx_open(&r->ctx, s->sock)) != 0) {
            err = hc_rpc_err(rv, "rpc server: opening context");
            goto fail;
        }
        r->ctx_open = 1;
    }
    for (i = 0; i < n_ctx; i++)
        req_recv(&s->reqs[i]);
sweep:
    if ((rv = nng_aio_alloc(&s->sweep, sweep_cb, s)) != 0) {
        err = hc_rpc_err(rv, "rpc server: allocating aio");
        goto fail;
    }
    nng_sleep_aio(0, s->sweep);
    *out = s;
    return HC_OK;

fail:
    server_free(s);
    return err;
}

void hc_rpc_server_stop(hc_rpc_server *s)
{
    server_free(s);
}

uint64_t hc_rpc_server_relistens(hc_rpc_server *s)
{
    return s ? hc_listen_restarts(s->listen) : 0;
}

/* ------------------------------------------------------------------ */
/* Client                                                              */
/* ------------------------------------------------------------------ */

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
    hc_auth_signer *signer;    /* TLS: proves this process's certificate */
    hc_relay_ep *relay;        /* TLS through the relay (tls_relay.h) */
    atomic_uint authed_pipe;   /* the pipe the proof was accepted on; 0:
                                  none (prove before the next request) */
    atomic_uint last_pipe;     /* the pipe that came up last (0: none) */
    int unanswered;            /* proof steps unanswered in a row on it */
    enum { PH_HELLO, PH_PROOF, PH_REQ } phase; /* what the aio carries */
    /* A direct client's (tls_relay.h): no socket, no aio. */
    int direct;
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
        unsigned id = (unsigned)nng_pipe_id(pipe), last = id;

        atomic_compare_exchange_strong(&p->last_pipe, &last, 0u);
        atomic_fetch_sub(&p->connected, 1);
        /* The proven connection is gone: prove again on the next. */
        atomic_compare_exchange_strong(&p->authed_pipe, &id, 0u);
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
    if (p->direct) {
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

    if (p->signer && atomic_load(&p->authed_pipe) == 0) {
        /* A new connection: prove the certificate first (rpc_auth.h). */
        if (hc_auth_msg(&m, HC_AUTH_HELLO, NULL, 0) != HC_OK) {
            snprintf(p->msg, sizeof p->msg, "%s at %s: %s", p->name, p->url,
                     hc_err_msg());
            peer_done(p, HC_ERR_NOMEM);
            return;
        }
        p->phase = PH_HELLO;
        peer_send_msg(p, m);
        return;
    }
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
        peer_done(p, code_of(rv));
        return;
    }
    p->phase = PH_REQ;
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
    if (p->signer && rv == NNG_ETIMEDOUT && p->phase == PH_REQ) {
        /* TLS: a request unanswered for a whole attempt may be one the
         * server keeps (a sync pull) or one sent on a connection the
         * server never reads (after a restart). Prove again first: the
         * server answers a HELLO at once, so the next attempt tells the
         * two apart without closing a good connection. */
        atomic_store(&p->authed_pipe, 0u);
    } else if (p->signer && rv == NNG_ETIMEDOUT &&
               atomic_load(&p->last_pipe) && ++p->unanswered >= 2) {
        /* TLS: a HELLO or PROOF unanswered for a whole attempt, twice in
         * a row, on a connection that is up. A live server answers both at
         * once (or with UNAUTH); once may be a busy server (a short
         * attempt under load), twice says the connection is wedged or
         * its server stopped.
         * Do not wait on it again: close it, so nng dials a fresh one and
         * the next attempt proves itself there (a dropped connection costs
         * one handshake; a wedged one cost the whole retry budget). */
        nng_pipe stuck = NNG_PIPE_INITIALIZER;

        stuck.id = atomic_exchange(&p->last_pipe, 0u);
        atomic_store(&p->authed_pipe, 0u);
        p->unanswered = 0;
        if (stuck.id) {
            hc_warn("rpc: %s at %s: no answer to the certificate %s "
                    "within %d ms: closing connection %u, connecting again",
                    p->name, p->url, p->phase == PH_HELLO ? "HELLO" : "PROOF",
                    p->attempt_ms, (unsigned)stuck.id);
            if (p->direct)
                hc_relay_drop(p->relay, stuck.id);
            else
                nng_pipe_close(stuck);
        }
    }
    if (atomic_load(&c->abort)) {
        snprintf(p->msg, sizeof p->msg, "%s at %s: call aborted after %.1f s",
                 p->name, p->url, (double)(now - p->begin) / 1000.0);
        peer_done(p, HC_ERR_TIMEOUT);
        return;
    }
    if (!retryable(rv)) {
        snprintf(p->msg, sizeof p->msg, "%s at %s: %s: %s", p->name, p->url,
                 what, nng_strerror(rv));
        peer_done(p, code_of(rv));
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
    if (p->last_warn == 0 || now - p->last_warn >= WARN_EVERY_MS) {
        p->last_warn = now;
        hc_warn("rpc: %s at %s: %s: %s; retrying in %d ms (attempt %d, "
                "%.1f s of %.1f s)",
                p->name, p->url, what, nng_strerror(rv), sleep_ms,
                p->attempts, (double)(now - p->begin) / 1000.0,
                c->opts.retry_ms / 1000.0);
    }
    if (p->direct) {
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

/*
 * A reply during the certificate proof (rpc_auth.h): continue it and
 * return 1, or return 0 when p->reply is the request's own answer.
 */
static int proof_step(struct peer *p)
{
    nng_msg *r = p->reply, *proof = NULL;
    int kind = hc_auth_kind_of(r);
    const unsigned char *d;
    size_t n;

    if (p->phase == PH_REQ && kind != HC_AUTH_UNAUTH)
        return 0;
    p->reply = NULL;
    if (kind == HC_AUTH_NONCE_REPLY && p->phase == PH_HELLO) {
        if (hc_auth_prove(p->signer, r, &proof) != HC_OK) {
            snprintf(p->msg, sizeof p->msg, "%s at %s: %s", p->name, p->url,
                     hc_err_msg());
            nng_msg_free(r);
            peer_done(p, HC_ERR_CONFIG);
            return 1;
        }
        nng_msg_free(r);
        p->phase = PH_PROOF;
        peer_send_msg(p, proof);
        return 1;
    }
    if (kind == HC_AUTH_OK && p->phase == PH_PROOF) {
        uint32_t id = nng_msg_get_pipe(r).id;

        nng_msg_free(r);
        atomic_store(&p->authed_pipe, id ? (unsigned)id : 1u);
        peer_send(p);
        return 1;
    }
    if (kind == HC_AUTH_ERR) {
        d = hc_auth_data(r, &n);
        snprintf(p->msg, sizeof p->msg, "%s at %s refused this process's "
                 "certificate: %.*s", p->name, p->url, (int)(n > 300 ? 300 : n),
                 (const char *)d);
        nng_msg_free(r);
        peer_done(p, HC_ERR_CONFIG);
        return 1;
    }
    nng_msg_free(r);
    if (kind == HC_AUTH_UNAUTH) {
        /* The request went on a connection not yet proven. */
        atomic_store(&p->authed_pipe, 0u);
        peer_failed(p, NNG_ECONNRESET, "connection not yet proven");
        return 1;
    }
    snprintf(p->msg, sizeof p->msg, "%s at %s: an unexpected answer while "
             "proving this process's certificate (not a hetps server?)",
             p->name, p->url);
    peer_done(p, HC_ERR_PROTO);
    return 1;
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
        p->unanswered = 0;
        if (p->signer && proof_step(p))
            return;
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
static int direct_conn(void *arg, uint32_t conn, int up, const char *peer)
{
    struct peer *p = arg;
    hc_rpc_client *c = p->c;

    (void)peer;
    if (up) {
        atomic_store(&p->last_pipe, conn);
        atomic_store(&p->connected, 1);
        atomic_store(&p->ever_connected, 1);
    } else {
        unsigned last = conn, id = conn;

        atomic_compare_exchange_strong(&p->last_pipe, &last, 0u);
        atomic_store(&p->connected, 0);
        /* The proven connection is gone: prove again on the next. */
        atomic_compare_exchange_strong(&p->authed_pipe, &id, 0u);
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
    nng_pipe pipe = NNG_PIPE_INITIALIZER;

    pipe.id = conn;
    nng_msg_set_pipe(m, pipe);  /* proof_step reads the connection there */
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
        p->unanswered = 0;
        if (p->signer && proof_step(p))
            return;
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
    hc_auth_signer_close(p->signer);
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
    nng_tls_config *tls = NULL;
    nng_dialer d;
    char turl[URL_MAX], host[URL_MAX];
    int rv, err;
    const char *step;

    p->c = c;
    p->tls = c->opts.tls != NULL;
    transport_url(turl, sizeof turl, url, p->tls);
    atomic_init(&p->connected, 0);
    atomic_init(&p->ever_connected, 0);
    if (!(p->url = strdup(url)) || !(p->name = strdup(name)))
        return hc_err_set(HC_ERR_NOMEM, "rpc client: out of memory for %s",
                          name);
    atomic_init(&p->authed_pipe, 0u);
    atomic_init(&p->last_pipe, 0u);
    if (c->direct) {
        /* TLS by the relay, no socket: requests go from this thread. */
        const struct hc_relay_direct cb = {direct_conn, direct_msg, p, 0};
        const char *colon = strrchr(url, ':');

        p->direct = 1;
        if ((err = hc_auth_signer_open(&p->signer,
                                       c->opts.tls->cert_key_file)) != HC_OK)
            return err;
        url_host(host, sizeof host, url);
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
    if (p->tls && (err = hc_auth_signer_open(&p->signer,
                                             c->opts.tls->cert_key_file)) != HC_OK)
        return err;
    if (p->tls) {
        url_host(host, sizeof host, url);
        if ((err = tls_config(&tls, c->opts.tls, 0, host, name)) != HC_OK)
            return err;
    }
    step = "dialling (is the URL valid?)";
    if ((rv = nng_dialer_create(&d, p->sock, turl)) == 0 &&
        (!tls || (rv = nng_dialer_set_ptr(d, NNG_OPT_TLS_CONFIG, tls)) == 0))
        rv = nng_dialer_start(d, NNG_FLAG_NONBLOCK);
    if (tls)
        nng_tls_config_free(tls); /* the dialer holds its own reference */
    if (rv != 0)
        goto fail;
    return HC_OK;

fail:
    return hc_err_set(code_of(rv), "rpc client: %s at %s: %s: %s", name, turl,
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
    o.recv_max = o.recv_max ? o.recv_max : DEFAULT_RECV_MAX;
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
    c->direct = o.tls && use_relay();
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

        if (!p->direct) {
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
