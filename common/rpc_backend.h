/*
 * rpc_backend.h — inside the rpc module only: what lies between rpc's core
 * (rpc_client.c's calls, rpc_server.c's serve loop; callers' contract:
 * rpc.h) and a transport that moves whole messages. A backend is a table
 * of operations with a context pointer of its own; it only sends,
 * receives and tells the core what happened:
 *
 *   hc_rpc_nng_dial, hc_rpc_nng_listen   plain TCP: nng REQ/REP (rpc_nng.c)
 *   hc_rpc_tls_dial, hc_rpc_tls_listen   mutual TLS: the relay (rpc_tls.c)
 *
 * Client: an attempt is a message with a request id (new every attempt),
 * delivered once a connection is up; the reply comes back with the id it
 * answers (the core drops one not the attempt's). Server: each request
 * comes with its connection and an id of the backend's; the core answers
 * by that pair, once, from any thread. Connections are numbered in one
 * space (nng's pipe ids, the relay's with the top bit set).
 *
 * Callbacks come on the backend's threads, never two at once for one
 * client link, and must not call the backend's close or stop.
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
    /* Connect to url for peer `name` in the background, again whenever
     * lost; the callbacks below get l. HC_OK, or an error with its
     * message. */
    int (*open)(void **be, hc_rpc_link *l, const char *url, const char *name,
                const struct hc_rpc_client_opts *o);
    /* Send m (taken) as attempt `id`, now or once a connection is up;
     * HC_ERR_LIMIT or HC_ERR_NOMEM: it failed now. The calling thread's,
     * one attempt in flight per link. */
    int (*send)(void *be, uint32_t id, nng_msg *m);
    /* Forget attempt id (given up): what waits to go is dropped. */
    void (*cancel)(void *be, uint32_t id);
    /* Stop; no callback runs once this returns. */
    void (*close)(void *be);
};

/* A connection came up (+1) or went (-1). */
void hc_rpc_link_conn(hc_rpc_link *l, int delta);
/* Attempt id's reply m (taken), or with m NULL its loss: code
 * HC_ERR_CLOSED (its connection was lost: the core tries again) or another
 * (final); why: the transport's word. */
void hc_rpc_link_done(hc_rpc_link *l, uint32_t id, nng_msg *m, int code,
                      const char *why);

extern const struct hc_rpc_dial_ops hc_rpc_nng_dial, hc_rpc_tls_dial;

/* ---- server ---------------------------------------------------------- */

struct hc_rpc_listen_ops {
    /* Whether the thread that hands a request runs its handler (nng's task
     * threads, a pool meant for it) rather than the server's own (the
     * relay's loops serve many connections). */
    int handler_here;
    /* Listen on url for server s (its callbacks below). */
    int (*start)(void **be, hc_rpc_server *s, const char *url,
                 const struct hc_rpc_server_opts *o);
    /* Answer request (conn, id) with m (taken whatever the outcome), or
     * with m NULL leave it unanswered. Any thread, once per request. */
    void (*reply)(void *be, uint32_t conn, uint32_t id, nng_msg *m);
    /* Close connection conn (its client reconnects). Any thread. */
    void (*drop)(void *be, uint32_t conn);
    /* Stop: no new connection, request or callback once this returns;
     * requests not answered need no reply. */
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

/* An nng code as an hc_err code, recording nothing (for nng's threads). */
int hc_rpc_code_of(int nng_rv);

#endif
