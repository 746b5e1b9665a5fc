/*
 * rpc_close.h — closing an nng socket without hanging.
 *
 * nng 1.5.2's nng_close can wait for ever: its TLS transport can leave a
 * send pending on a connection that is gone, and nng's single reaper
 * thread then waits for it, so every later close in the process waits
 * too (rpc_close.c says where it was seen). A socket's close runs on a
 * thread of its own and is waited for a few seconds; past that it is left
 * to finish, or not, in the background.
 */
#ifndef HC_RPC_CLOSE_H
#define HC_RPC_CLOSE_H

#include <nng/nng.h>

/* Close sock, waiting at most CLOSE_WAIT_MS (3 s); past that the close is
 * left to finish in the background, with a warning naming `name`. The
 * caller removes its pipe callbacks first.
 * 0 when closed, -1 when left (this process's nng is stuck). */
int hc_rpc_close_socket(nng_socket sock, const char *name);

#endif
