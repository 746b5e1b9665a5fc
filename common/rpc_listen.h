/*
 * rpc_listen.h — a plain-TCP server's nng listener, watched so it keeps
 * accepting, and an nng_close that cannot hang (rpc_nng.c only).
 *
 * nng 1.5.2 (Debian 12's) ends a listener's accept loop for good when a
 * client drops its connection during nng's handshake (nanomsg/nng#1518,
 * fixed in 1.6; a port scanner or health check can do it): the port still
 * completes TCP handshakes, but no connection reaches the socket. So when
 * the listener has taken no connection for a while, a probe connects from
 * inside the process; a probe that comes up on its side but is never
 * taken, twice in a row, means the accept loop is gone: the listener is
 * closed (its connections' clients reconnect) and a new one listens on the
 * same address, with a warning.
 */
#ifndef HC_RPC_LISTEN_H
#define HC_RPC_LISTEN_H

#include <stdatomic.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct hc_listen hc_listen;

/* Listen on turl ("tcp://host:port") for sock and start the guard. took:
 * what the caller's NNG_PIPE_EV_ADD_PRE callback counts every connection
 * taken (refused too) in. A wildcard host is probed on loopback; port 0
 * becomes the bound port, for a new listener too. 0 or an nng error. */
int hc_listen_start(hc_listen **out, nng_socket sock, const char *turl,
                    atomic_uint_least64_t *took);

/* Times the listener was found stopped and listened again. */
uint64_t hc_listen_restarts(hc_listen *l);

/* Stop the guard (waits for it) and free; the listener itself closes with
 * its socket. NULL is fine. */
void hc_listen_stop(hc_listen *l);

/* nng_close(s), waited for at most ms, else left to finish on its own
 * thread, with a warning naming what: nng 1.5.2 loses a pipe closed while
 * its receive completes (a read restarted on a stopped aio never ends);
 * its one reaper then waits for it for ever, and so does every nng_close
 * (a shard that dropped a peer that never reads could not stop). 0 when
 * closed, -1 when left. */
int hc_nng_close(nng_socket s, int ms, const char *what);

#endif
