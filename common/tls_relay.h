/*
 * tls_relay.h — mutual TLS for rpc.c, on OpenSSL, outside nng.
 *
 * nng 1.5.2's TLS transport moves at most 16 KiB per step, each step a
 * hand-off between its threads: a 40 MB message is 2 500 of them, and
 * mutual TLS cost 4× plain TCP at real model sizes whatever the cipher
 * (tests/bench/README.md). The relay does the TLS itself, in threads of
 * the process with 256 KiB buffers, and hands nng plain TCP on loopback:
 *
 *  - a server's public port is the relay's; each connection that completes
 *    the handshake with a certificate of the cluster's CA is joined to the
 *    nng listener on 127.0.0.1 (an ephemeral port) that the server listens
 *    on instead. hc_relay_peer tells a connection nng took from the relay
 *    (and its real peer) from any other: only those are served.
 *  - a client's socket dials a loopback port of the relay, which connects
 *    to the server, does the handshake (the server's certificate must name
 *    its host) and then relays. A failed connect or handshake closes the
 *    loopback connection before nng's own handshake finishes, so nng sees
 *    no connection and dials again, as it would over TLS.
 *
 * What a peer proves about itself is unchanged: rpc_auth.h's signed proof
 * runs over the relayed connection. A local process that connects to the
 * loopback ports directly gains nothing: a server refuses connections the
 * relay did not make, and a client's relay only carries the bytes of
 * whoever connects — it cannot sign for this process.
 *
 * Threads: any thread may open and close endpoints; the relay's threads
 * does all I/O. Selected with HETPS_TLS_ENGINE=relay (rpc.c).
 */
#ifndef HC_TLS_RELAY_H
#define HC_TLS_RELAY_H

#include <stddef.h>
#include <stdint.h>

typedef struct hc_relay_ep hc_relay_ep;

/* A server's side: listen on host:port (port 0: any; *bound gets it),
 * completing TLS with the CA in ca_file and the certificate and key in
 * cert_key_file, and join verified connections to 127.0.0.1:inner_port.
 * name: for logs (the server's URL). HC_OK or an error (err.h). */
int hc_relay_listen(hc_relay_ep **out, const char *host, int port,
                    int inner_port, const char *ca_file,
                    const char *cert_key_file, const char *name, int *bound);

/* A client's side: a loopback port (*inner_port) whose connections the
 * relay carries over TLS to host:port, whose certificate must name host.
 * name: for logs (the peer's task). HC_OK or an error (err.h). */
int hc_relay_dial(hc_relay_ep **out, const char *host, int port,
                  const char *ca_file, const char *cert_key_file,
                  const char *name, int *inner_port);

/* Stop an endpoint: no more connections, and its open ones closed.
 * NULL is fine. */
void hc_relay_close(hc_relay_ep *ep);

/* Whether a connection nng accepted from 127.0.0.1:from_port came through
 * the relay of server endpoint ep (NULL: of any); if so, its real peer
 * ("10.0.0.5:41234") into peer. */
int hc_relay_peer(hc_relay_ep *ep, int from_port, char *peer, size_t n);

#endif
