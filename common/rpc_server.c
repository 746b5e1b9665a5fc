/*
 * rpc_server.c — the server of rpc.h. Over nng (plain TCP, or nng's own
 * TLS transport): each hc_rpc_req is one nng context with its own aio,
 * cycling RECV → (handler owns the message: WAIT) → hc_rpc_reply → SEND →
 * RECV. The aio callback drives the cycle; hc_rpc_reply starts the send
 * from any thread. A stopping flag under the server mutex turns late
 * replies into drops, so stop never races a send it does not know about.
 * Over the TLS relay (the default TLS; a direct server, tls_relay.h) there
 * is no socket: the relay queues each request, threads of the server's own
 * run the handler, and an hc_rpc_req lives from its request to its reply.
 * Both keep a table of open connections (pipe_info): the certificate each
 * names (TLS), the replies it is owed, the receive deadline.
 */
#include "rpc.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/supplemental/util/platform.h>

#include "err.h"
#include "log.h"
#include "rpc_close.h"
#include "rpc_conf.h"
#include "rpc_listen.h"
#include "tls_relay.h"

#define DEFAULT_N_CTX 64
#define MAX_N_CTX 65536
#define RECV_ERR_PAUSE_MS 50 /* pause after an unexpected server recv error */
#define DEFAULT_SEND_TIMEOUT_MS 10000 /* a reply not taken by then is dropped */
#define DEFAULT_MAX_CONNS 1024
#define DEFAULT_RECV_DEADLINE_MS 120000 /* see sweep_cb */
#define MAX_SERVE_THREADS 16 /* a direct server's handler threads, at most */

/* Translate an nng code without recording anything (usable on nng threads). */
/* Network byte order to host (nng keeps ports in network order). */
static uint16_t ntohs_(uint16_t v)
{
    const unsigned char *b = (const unsigned char *)&v;

    return (uint16_t)((b[0] << 8) | b[1]);
}

enum req_state { REQ_RECV, REQ_WAIT, REQ_SEND, REQ_PAUSE, REQ_STOPPED };

struct hc_rpc_req {
    hc_rpc_server *s;
    nng_ctx ctx;
    nng_aio *aio;
    nng_aio *pause;             /* timer only: nng_sleep_aio marks an aio
                                 * so a later timeout reads as success */
    int ctx_open;
    enum req_state state;
    char who[32];               /* the task the request's connection's
                                   certificate names ("worker:1"), "" without
                                   TLS */
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
    char who[32];               /* TLS: the task its certificate names */
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

    if (last != 0 && now - last < HC_RPC_WARN_EVERY_MS)
        return;
    atomic_store(&s->last_warn, now);
    hc_warn("rpc server %s: %s failed: %s", s->url, what, nng_strerror(rv));
}

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

/* A connection (nng's pipe or the relay's) is gone: its entry dropped, the
 * service told. */
static void conn_gone(hc_rpc_server *s, uint32_t id)
{
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
}

/* A client connected (refused over the cap of connections) or is gone
 * (tell the service). */
static void server_pipe_cb(nng_pipe pipe, nng_pipe_ev ev, void *arg)
{
    hc_rpc_server *s = arg;
    if (ev == NNG_PIPE_EV_REM_POST) {
        conn_gone(s, nng_pipe_id(pipe) > 0 ? (uint32_t)nng_pipe_id(pipe) : 0);
        return;
    }
    if (ev != NNG_PIPE_EV_ADD_PRE)
        return;
    atomic_fetch_add(&s->took, 1);
    if (atomic_load(&s->closing)) {
        nng_pipe_close(pipe);
        return;
    }
    /* The connection cap. A pipe closed here is closed before the socket
     * sees it: no REM_POST comes for it. */
    if (atomic_fetch_add(&s->conns, 1) >= s->max_conns) {
        atomic_fetch_sub(&s->conns, 1);
        atomic_fetch_add(&s->refused_conns, 1);
        nng_pipe_close(pipe);
        server_warn(s, "accepting a connection (over the cap of "
                    "connections)", NNG_ENOSPC);
        return;
    }
    {
        /* Its entry lives from here to REM_POST. */
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
    }
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
static int serve_conn(void *arg, uint32_t conn, int up, const char *peer,
                      const char *who)
{
    hc_rpc_server *s = arg;
    struct pipe_info *pi;

    if (!up) {
        conn_gone(s, conn);
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
    if ((pi = pipe_entry(s, conn, 1)) != NULL) {
        pi->last = nng_clock();
        snprintf(pi->who, sizeof pi->who, "%s", who ? who : "");
    }
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
    memcpy(r->who, pi->who, sizeof r->who);
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

/* A handler thread: the handler, for each request. */
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
    char host[HC_RPC_URL_MAX];
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
    hc_rpc_url_host(host, sizeof host, url);
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
 * redials on its next call; a request
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
                                             : HC_RPC_DEFAULT_RECV_MAX;
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
    if (!(s = calloc(1, sizeof *s)) || !(s->url = strdup(url))) {
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
    if (s->tls) {
        /* TLS by the relay, which hands requests to our threads: no
         * socket (and no nng listener to guard). */
        if ((err = serve_start(s, url, recv_max, opts->tls)) != HC_OK)
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
    rv = hc_listen_start(&s->listen, s->sock, url, &s->took);
    if (rv != 0) {
        err = hc_err_set(hc_rpc_code_of(rv) == HC_ERR_NOMEM ? HC_ERR_NOMEM
                                                     : HC_ERR_TRANSPORT,
                         "rpc server: cannot listen on %s: %s%s", url,
                         nng_strerror(rv),
                         rv == NNG_EADDRINUSE
                             ? " (another process holds the port; stop it "
                               "or pick another port)"
                             : "");
        goto fail;
    }
    if (!(s->reqs = calloc((size_t)n_ctx, sizeof *s->reqs))) {
        err = hc_err_set(HC_ERR_NOMEM, "rpc server %s: out of memory", url);
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
