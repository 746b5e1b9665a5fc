/*
 * rpc_backend.h — inside the rpc module only: the interface between rpc's
 * core (rpc_client.c's calls, rpc_server.c's serve loop) and a transport
 * that moves whole messages (callers' contract: rpc.h). A backend is a
 * table of operations with a context pointer of its own; it only sends,
 * receives and tells the core what happened:
 *
 *   hc_rpc_nng_dial, hc_rpc_nng_listen   plain TCP: nng REQ/REP (rpc_nng.c)
 *   hc_rpc_tls_dial, hc_rpc_tls_listen   mutual TLS: the relay (rpc_tls.c)
 *
 * Client: an attempt is a message with a request id (new for every
 * attempt); the backend delivers it once a connection is up and hands
 * back the reply with the id it answers (the core drops one not the
 * attempt's). Server: the backend hands each request with its connection
 * and an id of its own; the core answers by the same pair, from any
 * thread, once. Connections are numbered in one space for every backend
 * (nng's pipe ids, the relay's with the top bit set).
 *
 * Callbacks come on the backend's threads, never two at once for one
 * client link; they must not call back into the backend's close or stop.
 */
#ifndef HC_RPC_BACKEND_H
#define HC_RPC_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#include "rpc.h"

#define HC_RPC_DEFAULT_RECV_MAX ((size_t)512 << 20)
#define HC_RPC_WARN_EVERY_MS 1000 /* at most one warning of a kind a second */

/* ---- client ---------------------------------------------------------- */

/* One peer of a client, as the core knows it (rpc_client.c). */
typedef struct hc_rpc_link hc_rpc_link;

struct hc_rpc_dial_ops {
    /* Connect to url in the background (again whenever lost), for peer
     * `name`; l is what the callbacks below are given. HC_OK, or an error
     * with its message set. */
    int (*open)(void **be, hc_rpc_link *l, const char *url, const char *name,
                const struct hc_rpc_client_opts *o);
    /* Send m (always taken) as attempt `id`: now, or once a connection is
     * up. HC_OK, or HC_ERR_LIMIT / HC_ERR_NOMEM: the attempt failed now.
     * Called by the calling thread, one attempt in flight per link. */
    int (*send)(void *be, uint32_t id, nng_msg *m);
    /* Forget attempt id (given up): what waits to go is dropped. */
    void (*cancel)(void *be, uint32_t id);
    /* Stop; no callback runs once this returns. */
    void (*close)(void *be);
};

/* A connection came up (+1) or went (-1). */
void hc_rpc_link_conn(hc_rpc_link *l, int delta);
/* A reply m (taken) answering attempt id. */
void hc_rpc_link_reply(hc_rpc_link *l, uint32_t id, nng_msg *m);
/* Attempt id can no longer be answered: code HC_ERR_CLOSED (its
 * connection was lost: the core tries again) or another (final); why is
 * the transport's word for it. */
void hc_rpc_link_lost(hc_rpc_link *l, uint32_t id, int code, const char *why);

extern const struct hc_rpc_dial_ops hc_rpc_nng_dial, hc_rpc_tls_dial;

/* ---- server ---------------------------------------------------------- */

struct hc_rpc_listen_ops {
    /* Whether the thread that hands a request may run its handler (nng's
     * task threads: a pool meant for it) rather than the server's own
     * threads (the relay's: one loop serves many connections). */
    int handler_here;
    /* Listen on url for server s (its callbacks below). */
    int (*start)(void **be, hc_rpc_server *s, const char *url,
                 const struct hc_rpc_server_opts *o);
    /* Answer request (conn, id) with m (taken, whatever the outcome), or
     * with m NULL let it go unanswered. Any thread, once per request. */
    void (*reply)(void *be, uint32_t conn, uint32_t id, nng_msg *m);
    /* Close connection conn (its client reconnects). Any thread. */
    void (*drop)(void *be, uint32_t conn);
    /* Stop: no new connection or request, no callback once this returns;
     * requests not answered yet need no reply. */
    void (*stop)(void *be);
    /* Times the backend listened again (rpc_listen.h); NULL: never. */
    uint64_t (*relistens)(void *be);
};

/* Connection conn is up (who: the task its certificate names, or NULL;
 * peer: its address) — nonzero refuses it — or gone (up 0). */
int hc_rpc_serve_conn(hc_rpc_server *s, uint32_t conn, int up,
                      const char *peer, const char *who);
/* Request m (taken, its pipe set to conn) on conn, answered by (conn, id). */
void hc_rpc_serve_msg(hc_rpc_server *s, uint32_t conn, uint32_t id,
                      nng_msg *m);

extern const struct hc_rpc_listen_ops hc_rpc_nng_listen, hc_rpc_tls_listen;

/* ---- shared ---------------------------------------------------------- */

/* An nng code as an hc_err code, recording nothing (for nng's threads). */
int hc_rpc_code_of(int nng_rv);

#endif
