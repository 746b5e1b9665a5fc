/*
 * rpc_server.c — the server of rpc.h, whatever carries the requests
 * (rpc_backend.h). The backend hands each request with its connection and
 * id (hc_rpc_serve_msg); the handler runs on the backend's thread where
 * that is a pool meant for it (nng's), else on the server's own, fed by a
 * queue; a reply, from any thread, goes back by the same pair. The table
 * of open connections keeps each one's task (its certificate's), the
 * replies it is owed (over n_ctx: closed), its last move (the receive
 * deadline) and its address.
 */
#include "rpc.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nng/supplemental/util/platform.h>

#include "err.h"
#include "log.h"
#include "rpc_backend.h"

#define DEFAULT_N_CTX 64
#define MAX_N_CTX 65536
#define DEFAULT_MAX_CONNS 1024
#define DEFAULT_RECV_DEADLINE_MS 120000 /* see sweep_cb */
#define MAX_SERVE_THREADS 16
#define MAX_PIPES 65536

struct hc_rpc_req {
    hc_rpc_server *s;
    uint32_t conn, id;          /* what the backend answers it by */
    char who[32];               /* the task the connection's certificate
                                   names ("worker:1"), "" without TLS */
    nng_msg *msg;               /* queued for a thread: the request */
    hc_rpc_req *qnext;          /* under s->mtx: the queue */
    hc_rpc_req *lnext, *lprev;  /* under s->mtx: the unanswered */
};

/* What a server knows of one open connection. */
struct conn_info {
    uint32_t conn;
    nng_time last;              /* connected, or its last request or reply */
    int owed;                   /* its requests not yet answered */
    int over;                   /* requests refused over n_ctx: it is being
                                 * closed (said once, at the first) */
    char who[32];               /* TLS: the task its certificate names */
    char peer[64];              /* its address */
};

struct hc_rpc_server {
    char *url;
    const struct hc_rpc_listen_ops *ops;
    void *be;                   /* the backend's */
    hc_rpc_handler handler;
    void *arg;
    struct hc_rpc_server_opts o; /* defaults filled in (tls not kept) */
    atomic_uint_least64_t deadline_closed;
    nng_aio *sweep;             /* every deadline/4: sweep_cb */
    nng_mtx *mtx;
    /* Under mtx: */
    struct conn_info *cs;       /* (n_cs) open connections, max_conns */
    int n_cs, cap_cs;
    nng_time last_warn;         /* the last "over the cap" warning */
    uint64_t strangers;         /* certificates refused by o.admit */
    nng_time stranger_warn;     /* the last of them logged */
    int stopping;               /* replies are dropped, threads end */
    int replying;               /* hc_rpc_reply calls in the backend */
    hc_rpc_req *q_head, *q_tail; /* requests waiting for a thread */
    hc_rpc_req *live;           /* requests not answered yet */
    nng_cv *cv;                 /* the queue; the last reply when stopping */
    nng_thread *threads[MAX_SERVE_THREADS];
    int n_threads;
};

/* The entry of conn (made when `make`), or NULL. Under s->mtx. */
static struct conn_info *conn_entry(hc_rpc_server *s, uint32_t conn, int make)
{
    struct conn_info *ci;
    int i;

    for (i = 0; i < s->n_cs; i++)
        if (s->cs[i].conn == conn)
            return &s->cs[i];
    if (!make || s->n_cs == MAX_PIPES)
        return NULL;
    if (s->n_cs == s->cap_cs) {
        int cap = s->cap_cs ? 2 * s->cap_cs : 16;

        if (!(ci = realloc(s->cs, (size_t)cap * sizeof *ci)))
            return NULL;
        s->cs = ci;
        s->cap_cs = cap;
    }
    ci = &s->cs[s->n_cs++];
    memset(ci, 0, sizeof *ci);
    ci->conn = conn;
    return ci;
}

/* ---- what the backend hands ------------------------------------------- */

int hc_rpc_serve_conn(hc_rpc_server *s, uint32_t conn, int up,
                      const char *peer, const char *who)
{
    struct conn_info *ci = NULL;
    nng_time now = nng_clock();
    char why[256];
    int full;

    if (!up) {                  /* its entry dropped, the service told */
        nng_mtx_lock(s->mtx);
        if ((ci = conn_entry(s, conn, 0)) != NULL)
            *ci = s->cs[--s->n_cs];
        nng_mtx_unlock(s->mtx);
        if (s->o.on_close && conn)
            s->o.on_close(s->arg, conn);
        return 0;
    }
    if (who && s->o.admit && s->o.admit(s->arg, who, why, sizeof why) != 0) {
        uint64_t n;
        int say;

        nng_mtx_lock(s->mtx);   /* the first 20, then one a second */
        n = ++s->strangers;
        say = n <= 20 || now - s->stranger_warn >= HC_RPC_WARN_EVERY_MS;
        if (say)
            s->stranger_warn = now;
        nng_mtx_unlock(s->mtx);
        if (say)
            hc_warn("rpc server %s: refused the connection from %s (%llu so "
                    "far): its certificate names %s: %s", s->url,
                    peer ? peer : "?", (unsigned long long)n, who, why);
        return -1;
    }
    nng_mtx_lock(s->mtx);
    full = s->n_cs >= s->o.max_conns;
    if (!s->stopping && !full && (ci = conn_entry(s, conn, 1)) != NULL) {
        ci->last = now;
        snprintf(ci->who, sizeof ci->who, "%s", who ? who : "");
        snprintf(ci->peer, sizeof ci->peer, "%s", peer ? peer : "?");
    }
    /* Refused over the cap: one warning a second at most. */
    full = full && (!s->last_warn ||
                    now - s->last_warn >= HC_RPC_WARN_EVERY_MS);
    if (full)
        s->last_warn = now;
    nng_mtx_unlock(s->mtx);
    if (full)
        hc_warn("rpc server %s: accepting a connection failed: over the cap "
                "of connections", s->url);
    return ci ? 0 : -1;
}

void hc_rpc_serve_msg(hc_rpc_server *s, uint32_t conn, uint32_t id,
                      nng_msg *m)
{
    struct conn_info *ci;
    hc_rpc_req *r = calloc(1, sizeof *r);
    char peer[64];
    int stopping;

    nng_mtx_lock(s->mtx);
    stopping = s->stopping;
    ci = r && !stopping ? conn_entry(s, conn, 0) : NULL;
    if (!ci || ci->owed >= s->o.n_ctx) {      /* gone, or too many owed */
        int first = ci && ci->over++ == 0;

        if (ci)
            memcpy(peer, ci->peer, sizeof peer);
        nng_mtx_unlock(s->mtx);
        nng_msg_free(m);
        free(r);
        if (first) {
            hc_warn("rpc server %s: the peer at %s has %d requests "
                    "unanswered: closing its connection", s->url, peer,
                    s->o.n_ctx);
            s->ops->drop(s->be, conn);
        }
        if (!stopping)          /* not answered: the backend's slot free */
            s->ops->reply(s->be, conn, id, NULL);
        return;
    }
    ci->owed++;
    ci->last = nng_clock();
    *r = (hc_rpc_req){.s = s, .conn = conn, .id = id, .msg = m};
    memcpy(r->who, ci->who, sizeof r->who);
    r->lnext = s->live;
    if (s->live)
        s->live->lprev = r;
    s->live = r;
    if (s->ops->handler_here) {
        /* nng's thread runs it, as its contexts were made for. */
        r->msg = NULL;
        nng_mtx_unlock(s->mtx);
        s->handler(s->arg, r, m);
        return;
    }
    if (s->q_tail)
        s->q_tail->qnext = r;
    else
        s->q_head = r;
    s->q_tail = r;
    nng_cv_wake1(s->cv);
    nng_mtx_unlock(s->mtx);
}

/* A handler thread: the handler, for each request queued. */
static void serve_thread(void *arg)
{
    hc_rpc_server *s = arg;
    hc_rpc_req *r;
    nng_msg *msg;

    nng_mtx_lock(s->mtx);
    for (;;) {
        while (!s->q_head && !s->stopping)
            nng_cv_wait(s->cv);
        if (s->stopping)        /* a queued request's reply would be lost */
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

void hc_rpc_reply(hc_rpc_req *req, nng_msg *reply)
{
    hc_rpc_server *s;
    struct conn_info *ci;

    if (!req) {
        if (reply)
            nng_msg_free(reply);
        return;
    }
    s = req->s;
    nng_mtx_lock(s->mtx);
    if (s->stopping) {          /* stop frees req */
        nng_mtx_unlock(s->mtx);
        if (reply)
            nng_msg_free(reply);
        return;
    }
    if ((ci = conn_entry(s, req->conn, 0)) != NULL) {
        ci->owed = ci->owed > 0 ? ci->owed - 1 : 0;
        ci->last = nng_clock();
    }
    if (req->lprev)
        req->lprev->lnext = req->lnext;
    else
        s->live = req->lnext;
    if (req->lnext)
        req->lnext->lprev = req->lprev;
    s->replying++;
    nng_mtx_unlock(s->mtx);
    /* Out of the lock: the relay may write a large reply in this thread. */
    s->ops->reply(s->be, req->conn, req->id, reply);
    free(req);
    nng_mtx_lock(s->mtx);
    if (--s->replying == 0 && s->stopping)
        nng_cv_wake(s->cv);
    nng_mtx_unlock(s->mtx);
}

const char *hc_rpc_req_identity(const hc_rpc_req *req)
{
    return req && req->who[0] ? req->who : NULL;
}

uint32_t hc_rpc_msg_pipe(nng_msg *msg)
{
    return msg ? nng_msg_get_pipe(msg).id : 0;
}

void hc_rpc_req_peer(const hc_rpc_req *req, char *buf, size_t n)
{
    struct conn_info *ci;

    snprintf(buf, n, "an unknown address");
    nng_mtx_lock(req->s->mtx);
    if ((ci = conn_entry(req->s, req->conn, 0)) != NULL)
        snprintf(buf, n, "%s", ci->peer);
    nng_mtx_unlock(req->s->mtx);
}

/* ---- the receive deadline --------------------------------------------- */

/* A connection owed no reply that completed no request within
 * recv_deadline_ms of connecting or of its last request or reply is
 * closed: a peer trickling a body, or sending nothing, would hold one of
 * max_conns for ever. An idle client of ours redials on its next call; a
 * kept request (a sync pull) is owed a reply, so its connection stays. */
static void sweep_cb(void *arg)
{
    hc_rpc_server *s = arg;
    uint32_t late[16];
    char peers[16][64];
    nng_time now = nng_clock();
    int i, n = 0;

    if (nng_aio_result(s->sweep) == NNG_ECANCELED)
        return;
    nng_mtx_lock(s->mtx);
    for (i = 0; i < s->n_cs && n < (int)(sizeof late / sizeof *late); i++) {
        struct conn_info *ci = &s->cs[i];

        if (ci->owed == 0 && now - ci->last > (nng_time)s->o.recv_deadline_ms) {
            memcpy(peers[n], ci->peer, sizeof peers[n]);
            late[n++] = ci->conn;
            ci->last = now;     /* one close per deadline at most */
        }
    }
    nng_mtx_unlock(s->mtx);
    for (i = 0; i < n; i++) {
        uint64_t k = atomic_fetch_add(&s->deadline_closed, 1) + 1;

        if (k <= 20 || k % 1000 == 0)
            hc_info("rpc server %s: closing the connection from %s (%llu so "
                    "far): no complete request for %d ms (idle, or a message "
                    "that never ends); a client of ours reconnects", s->url,
                    peers[i], (unsigned long long)k, s->o.recv_deadline_ms);
        s->ops->drop(s->be, late[i]);
    }
    nng_sleep_aio(s->o.recv_deadline_ms / 4 > 1000 ? 1000
                                                 : s->o.recv_deadline_ms / 4,
                  s->sweep);
}

uint64_t hc_rpc_server_deadline_closed(const hc_rpc_server *s)
{
    return s ? atomic_load(&s->deadline_closed) : 0;
}

/* ---- starting and stopping -------------------------------------------- */

void hc_rpc_server_stop(hc_rpc_server *s)
{
    hc_rpc_req *r;
    int i;

    if (!s)
        return;
    if (s->sweep)
        nng_aio_stop(s->sweep);
    if (s->cv) {                /* else nothing was started */
        nng_mtx_lock(s->mtx);
        s->stopping = 1;
        nng_cv_wake(s->cv);     /* the handler threads end */
        while (s->replying > 0)
            nng_cv_wait(s->cv);
        nng_mtx_unlock(s->mtx);
    }
    if (s->be)
        s->ops->stop(s->be);    /* no callback of the backend from here */
    for (i = 0; i < s->n_threads; i++) /* a running handler finishes */
        nng_thread_destroy(s->threads[i]);
    while ((r = s->live) != NULL) {
        s->live = r->lnext;
        if (r->msg)
            nng_msg_free(r->msg);
        free(r);
    }
    if (s->cv)
        nng_cv_free(s->cv);
    if (s->mtx)
        nng_mtx_free(s->mtx);
    if (s->sweep)
        nng_aio_free(s->sweep);
    free(s->cs);
    free(s->url);
    free(s);
}

int hc_rpc_server_start(hc_rpc_server **out, const char *url,
                        const struct hc_rpc_server_opts *opts,
                        hc_rpc_handler handler, void *arg)
{
    struct hc_rpc_server_opts o;
    hc_rpc_server *s = NULL;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int threads = cpus < 2 ? 4 : cpus > MAX_SERVE_THREADS / 2
                                     ? MAX_SERVE_THREADS : 2 * (int)cpus;
    int rv, err;

    if (out)
        *out = NULL;
    if (!out || !url || !handler)
        return hc_err_set(HC_ERR_INVAL,
                          "rpc server: out, url and handler are required");
    /* The options, defaults filled in. */
    o = opts ? *opts : (struct hc_rpc_server_opts){0};
    o.n_ctx = o.n_ctx ? o.n_ctx : DEFAULT_N_CTX;
    o.recv_max = o.recv_max ? o.recv_max : HC_RPC_DEFAULT_RECV_MAX;
    o.max_conns = o.max_conns ? o.max_conns : DEFAULT_MAX_CONNS;
    o.recv_deadline_ms = o.recv_deadline_ms ? o.recv_deadline_ms
                                            : DEFAULT_RECV_DEADLINE_MS;
    if (o.n_ctx < 1 || o.n_ctx > MAX_N_CTX)
        return hc_err_set(HC_ERR_INVAL,
                          "rpc server %s: n_ctx %d out of range 1..%d", url,
                          o.n_ctx, MAX_N_CTX);
    if (o.recv_deadline_ms < 4)
        return hc_err_set(HC_ERR_INVAL, "rpc server %s: receive deadline %d "
                          "ms is too short", url, o.recv_deadline_ms);
    if (!(s = calloc(1, sizeof *s)) || !(s->url = strdup(url))) {
        free(s);
        return hc_err_set(HC_ERR_NOMEM, "rpc server %s: out of memory", url);
    }
    s->handler = handler;
    s->arg = arg;
    s->o = o;
    s->o.tls = NULL;            /* the caller's, read by start alone */
    s->ops = o.tls ? &hc_rpc_tls_listen : &hc_rpc_nng_listen;
    atomic_init(&s->deadline_closed, 0);
    if ((rv = nng_mtx_alloc(&s->mtx)) != 0 ||
        (rv = nng_cv_alloc(&s->cv, s->mtx)) != 0 ||
        (rv = nng_aio_alloc(&s->sweep, sweep_cb, s)) != 0) {
        err = hc_rpc_err(rv, "rpc server: allocating");
        goto fail;
    }
    /* The handler threads, unless the backend's run the handler: as many
     * as nng's task threads would be, 2 a core, 4 to 16. */
    while (!s->ops->handler_here && s->n_threads < threads) {
        if ((rv = nng_thread_create(&s->threads[s->n_threads], serve_thread,
                                    s)) != 0) {
            err = hc_rpc_err(rv, "rpc server: starting a thread");
            goto fail;
        }
        s->n_threads++;
    }
    if ((err = s->ops->start(&s->be, s, url, &o)) != HC_OK)
        goto fail;
    nng_sleep_aio(0, s->sweep);
    *out = s;
    return HC_OK;
fail:
    hc_rpc_server_stop(s);
    return err;
}

uint64_t hc_rpc_server_relistens(hc_rpc_server *s)
{
    return s && s->be && s->ops->relistens ? s->ops->relistens(s->be) : 0;
}
