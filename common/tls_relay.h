/*
 * tls_relay.h — mutual TLS for rpc.c, on OpenSSL, outside nng.
 *
 * nng 1.5.2's TLS transport moves at most 16 KiB per step, each step a
 * hand-off between its threads: a 40 MB message is 2 500 of them, and
 * mutual TLS cost 4× plain TCP at real model sizes whatever the cipher
 * (tests/bench/README.md). The relay does the TLS itself, in threads of
 * the process, and hands nng whole messages over its in-process (inproc)
 * transport, which passes a message by reference: a message's bytes are
 * decrypted straight into the nng message the server (or client) takes,
 * and encrypted straight from the one it gave.
 *
 *  - a server's public port is the relay's; each connection that completes
 *    the handshake with a certificate of the cluster's CA gets an inproc
 *    listener of its own on the server's socket, and the relay's raw REQ
 *    socket for that connection dials it. hc_relay_peer tells a connection
 *    the relay made (and its real peer) by that listener.
 *  - a client's socket listens on an inproc address; the relay keeps a TLS
 *    connection to the server (the server's certificate must name its
 *    host), and once one is up its raw REP socket dials that address, so
 *    the client's socket sees a connection exactly while a verified TLS
 *    one is up. A lost or failed one is made again, 20 ms to 1 s apart.
 *
 * On the wire, inside TLS, each side first sends 8 bytes ("HETPSr1\n"),
 * then messages: an 8-byte big-endian body length, the 4-byte request id,
 * the body. A peer that sends anything else (nng's own TLS transport, say,
 * where a process has another HETPS_TLS_ENGINE) is refused by name, as is
 * a message longer than the socket's limit.
 *
 * What a peer proves about itself is unchanged: rpc_auth.h's signed proof
 * runs over the relayed connection. Only code in this process can reach
 * an inproc address.
 *
 * Threads: any thread may open and close endpoints; the relay's threads
 * do all TLS. Selected with HETPS_TLS_ENGINE=relay, or unset (rpc.c).
 */
#ifndef HC_TLS_RELAY_H
#define HC_TLS_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct hc_relay_ep hc_relay_ep;

/* A server's side: listen on host:port (port 0: any; *bound gets it),
 * completing TLS with the CA in ca_file and the certificate and key in
 * cert_key_file, and join verified connections to the REP socket inner;
 * messages over recv_max bytes end their connection. name: for logs (the
 * server's URL). HC_OK or an error (err.h). */
int hc_relay_listen(hc_relay_ep **out, const char *host, int port,
                    nng_socket inner, size_t recv_max, const char *ca_file,
                    const char *cert_key_file, const char *name, int *bound);

/* A client's side: carry the REQ socket inner's requests over TLS to
 * host:port, whose certificate must name host (inner listens on an inproc
 * address of the relay's; nothing else need dial). Replies over recv_max
 * bytes end the connection. name: for logs (the peer's task). HC_OK or an
 * error (err.h). */
int hc_relay_dial(hc_relay_ep **out, const char *host, int port,
                  nng_socket inner, size_t recv_max, const char *ca_file,
                  const char *cert_key_file, const char *name);

/* Stop an endpoint: no more connections, and its open ones closed.
 * NULL is fine. */
void hc_relay_close(hc_relay_ep *ep);

/* Whether the connection pipe (of a server's socket) came through the
 * relay of server endpoint ep (NULL: of any); if so, its real peer
 * ("10.0.0.5:41234") into peer. */
int hc_relay_peer(hc_relay_ep *ep, nng_pipe pipe, char *peer, size_t n);

#endif
