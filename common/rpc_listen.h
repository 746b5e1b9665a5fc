/*
 * rpc_listen.h — a plain-TCP server's nng listener, watched so it keeps
 * accepting (rpc_nng.c only).
 *
 * nng 1.5.2 (Debian 12's) ends a listener's accept loop for good when a
 * client drops its connection during nng's connection handshake
 * (nanomsg/nng#1518, fixed in nng 1.6): the port still completes TCP
 * handshakes, but no connection reaches the socket. A port scanner or a
 * health check can do it.
 *
 * The guard: when the listener has taken no connection for a while, a
 * probe connects to it from inside the process. A probe whose connection
 * comes up on the client side but is never taken by the server, twice in
 * a row, means the accept loop is gone: the listener is closed (and with
 * it its connections, whose clients reconnect) and a new one listens on
 * the same address, with a warning.
 */
#ifndef HC_RPC_LISTEN_H
#define HC_RPC_LISTEN_H

#include <stdatomic.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct hc_listen hc_listen;

/* Listen on turl ("tcp://host:port") for sock and start the guard.
 * took: a counter the caller's NNG_PIPE_EV_ADD_PRE callback adds one to
 * for every connection the socket takes (before refusing any). A wildcard
 * host is probed on loopback; port 0 becomes the bound port, so a new
 * listener gets the same. 0 or an nng error code (NNG_EADDRINUSE …). */
int hc_listen_start(hc_listen **out, nng_socket sock, const char *turl,
                    atomic_uint_least64_t *took);

/* Times the listener was found stopped and listened again. */
uint64_t hc_listen_restarts(hc_listen *l);

/* Stop the guard (waits for it) and free; the listener itself closes with
 * its socket. NULL is fine. */
void hc_listen_stop(hc_listen *l);

#endif
