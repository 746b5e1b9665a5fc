/*
 * tls_relay.h — mutual TLS for rpc (its backend rpc_tls.c), on OpenSSL in
 * threads of the process, outside nng (why: common/README.md, *The TLS
 * relay*). Whole messages go both ways: a body is decrypted into memory
 * that grows with its bytes, then into the nng message its callee takes
 * (tls_frame.h); one given is encrypted from its bytes, in the giving
 * thread when the connection is free.
 *
 * Only a connection that completes the handshake with a certificate of
 * the cluster's CA reaches a server's callbacks, with the task it names
 * (its CN). Inside TLS: tls_frame.h; a peer that sends anything else, or a
 * message over the endpoint's limit, is refused by name.
 *
 * Threads: any thread may open and close endpoints and send; the relay's
 * threads read, and write what a sender left.
 */
#ifndef HC_TLS_RELAY_H
#define HC_TLS_RELAY_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct hc_relay_ep hc_relay_ep;

/*
 * Callbacks, on a relay thread or in hc_relay_close, never two at once
 * for one connection; they must not close the endpoint:
 *  - on_conn(arg, conn, 1, peer, who): connection conn (never 0, not
 *    reused, top bit set: apart from nng's pipe ids) is up — a client's
 *    once the server took our certificate and speaks the relay's protocol
 *    (who NULL), a server's once the client's certificate is verified
 *    (who: its task, "worker:1"; nonzero refuses it, the callee logs why).
 *    on_conn(arg, conn, 0, peer, who): it is gone (only after a 1 taken).
 *  - on_msg(arg, conn, id, msg): a message read on conn with its request
 *    id; msg (its body the message alone) is the callee's.
 * send_timeout_ms (a server's): a connection whose output has not moved
 * for that long while some waits is closed with a warning (0: never).
 */
struct hc_relay_cb {
    int (*on_conn)(void *arg, uint32_t conn, int up, const char *peer,
                   const char *who);
    void (*on_msg)(void *arg, uint32_t conn, uint32_t id, nng_msg *msg);
    void *arg;
    int send_timeout_ms;
};

/* An endpoint on url ("tcp://host:port") presenting cert_key_file and
 * trusting the CA in ca_file. A server (server 1) listens there and hands
 * cb each connection whose certificate that CA signed; a client connects
 * there (the server's certificate must name host) at once and again
 * whenever a connection is lost, 20 ms to 1 s apart. A message over
 * recv_max bytes ends its connection. name: for logs (the server's URL,
 * the client's peer task). HC_OK or an error. */
int hc_relay_open(hc_relay_ep **out, int server, const char *url,
                  size_t recv_max, const char *ca_file,
                  const char *cert_key_file, const char *name,
                  const struct hc_relay_cb *cb);

/* Send m with request id on connection conn of ep (one on_conn said is
 * up): taken and HC_OK; else m stays the caller's and HC_ERR_CLOSED (conn
 * is not up) or HC_ERR_LIMIT (8 messages wait already: a server's
 * connection is then closed, with a warning). Any thread. */
int hc_relay_send(hc_relay_ep *ep, uint32_t conn, uint32_t id, nng_msg *m);

/* Close connection conn of ep, if up (its relay thread does; then
 * on_conn says it is gone; a client makes a new one). Any thread. */
void hc_relay_drop(hc_relay_ep *ep, uint32_t conn);

/* The budget of the bytes held by messages being read, process-wide (0:
 * the default, HETPS_RECV_BUDGET or a quarter of the memory, at most 4
 * GiB). A body's memory grows with its bytes (tls_frame.h), not at the
 * length its head announces; a peer whose message would take the total
 * over the budget is closed with a warning naming it, as one announcing
 * more than recv_max is: peers holding any certificate of the cluster
 * cannot make the process hold more. Any thread. */
void hc_relay_set_budget(uint64_t bytes);

/* Stop an endpoint: no more connections, its open ones closed. NULL is
 * fine. */
void hc_relay_close(hc_relay_ep *ep);

#endif
