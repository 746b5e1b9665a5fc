/*
 * rpc.h — request/reply between hetps's processes over plain TCP (nng
 * REQ/REP) or mutual TLS (the relay, tls_relay.h), one code path whatever
 * the transport (rpc_backend.h).
 *
 * Server: the handler runs on a thread of nng's or of the server's own
 * (never the relay's) and may reply at once or later from any thread (a
 * pull waiting for a sync step): a slow request never blocks the others.
 *
 * Client: one connection per peer (a shard), made in the background and
 * again when lost; the calling thread steps its calls. An attempt that
 * times out or loses its connection is sent again, the very same bytes,
 * with exponential back-off until `retry_ms` has passed; then the call
 * fails with HC_ERR_UNREACHABLE naming the peer and its address. Servers
 * know a repeated request by its envelope's request id: a re-send never
 * applies anything twice.
 *
 * Threads: a client is used by one thread at a time (a heartbeat thread
 * opens its own). Server functions are thread-safe.
 */
#ifndef HC_RPC_H
#define HC_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct hc_rpc_server hc_rpc_server;
typedef struct hc_rpc_req hc_rpc_req;
typedef struct hc_rpc_client hc_rpc_client;

/* Called for every request; `msg` is the handler's (nng_msg_free), and it
 * calls hc_rpc_reply exactly once for `req`, now or later, any thread. */
typedef void (*hc_rpc_handler)(void *arg, hc_rpc_req *req, nng_msg *msg);

/* Mutual TLS (PEM files: tls_cert.h). A server closes, with a warning
 * naming the peer's address, a connection whose certificate is missing,
 * not signed by ca_file or naming no task; a client requires the server's
 * to be signed by ca_file and name the host it dials. The task a client's
 * certificate names is its requests' identity (hc_rpc_req_identity). */
struct hc_rpc_tls {
    const char *ca_file;       /* the cluster CA's certificate */
    const char *cert_key_file; /* this process's certificate and key */
};

struct hc_rpc_server_opts {
    int n_ctx;          /* requests one connection may have unanswered
                           (more: closed; default 64); over plain TCP, the
                           server's requests in flight */
    size_t recv_max;    /* largest accepted message (default 512 MiB) */
    const struct hc_rpc_tls *tls; /* NULL: plain TCP */
    /* A client's connection is gone (the id hc_rpc_msg_pipe gave its
     * messages), on a transport's thread; may be NULL. */
    void (*on_close)(void *arg, uint32_t pipe);
    int send_timeout_ms; /* a reply not taken by then: its connection is
                            closed (default 10000) */
    int max_conns;      /* connections at once; more are closed at accept,
                           with a warning (default 1024) */
    int recv_deadline_ms; /* a connection owed no reply that completes no
                             request for this long is closed: idle, or a
                             body that never ends (default 120000) */
    /* TLS: whether the task a verified certificate names (its CN,
     * "worker:7") may connect at all, asked at the handshake on a relay
     * thread (it must not block): 0 admits it; else why not goes in
     * why[n] and the connection is closed, logged with the peer and the
     * name (the first 20, then one a second). NULL admits every
     * certificate the cluster's CA signed. */
    int (*admit)(void *arg, const char *who, char *why, size_t n);
};
/* Every connection has TCP keepalive on: a vanished peer's is closed. */

/* The connection a message came on (an nng pipe id, or the relay's, top
 * bit set), not reused while the server runs; 0 when unknown. */
uint32_t hc_rpc_msg_pipe(nng_msg *msg);

/* With TLS, the task the request's connection's certificate names
 * ("worker:1", "ps:0", "admin": its verified CN); NULL without TLS.
 * Valid until hc_rpc_reply. */
const char *hc_rpc_req_identity(const hc_rpc_req *req);

/* The address req came from ("127.0.0.1:54321"; "an unknown address"
 * once its connection is gone). Valid until hc_rpc_reply. */
void hc_rpc_req_peer(const hc_rpc_req *req, char *buf, size_t n);

/* Listen on `url` ("tcp://127.0.0.1:2222"); HC_ERR_TRANSPORT naming the
 * URL when it cannot (address in use, bad host). */
int hc_rpc_server_start(hc_rpc_server **out, const char *url,
                        const struct hc_rpc_server_opts *opts,
                        hc_rpc_handler handler, void *arg);

/* Answer `req` with `reply` (taken); reply NULL drops the request
 * unanswered (the client times out). `req` is gone after this. */
void hc_rpc_reply(hc_rpc_req *req, nng_msg *reply);

/* Stop receiving, close every connection, free; running handlers are
 * waited for. An hc_rpc_reply meanwhile is safe (its reply discarded), but
 * once this returns every unanswered hc_rpc_req is freed: forget them
 * (their request messages stay the handler's to free). */
void hc_rpc_server_stop(hc_rpc_server *s);

/* Times a plain server's listener stopped taking connections and
 * listened again (rpc_listen.h: an nng 1.5.2 bug). */
uint64_t hc_rpc_server_relistens(hc_rpc_server *s);

/* Connections closed by the receive deadline (recv_deadline_ms). */
uint64_t hc_rpc_server_deadline_closed(const hc_rpc_server *s);

struct hc_rpc_client_opts {
    int timeout_ms;     /* one attempt (default 5000) */
    int retry_ms;       /* keep retrying this long in total (default 30000) */
    int backoff_min_ms; /* first back-off (default 50) */
    int backoff_max_ms; /* largest back-off (default 2000) */
    size_t recv_max;    /* largest accepted reply (default 512 MiB) */
    const struct hc_rpc_tls *tls; /* NULL: plain TCP */
};

/* One connection per peer, made in the background (not waited for):
 * urls[i] "tcp://host:port", names[i] the task ("ps:1") for messages. */
int hc_rpc_client_open(hc_rpc_client **out, int n, const char *const *urls,
                       const char *const *names,
                       const struct hc_rpc_client_opts *opts);

/*
 * Send reqs[i] (taken) to peer peers[i] for i < n, all at once, and wait
 * until each has a reply or has failed. A peer named by several targets
 * carries them one after another, in index order (one in flight per
 * peer: open several peers to one URL for more). replies[i]: the reply
 * (the caller's) or NULL; errs[i]: HC_OK or the failure's code.
 * timeout_ms > 0 overrides the attempt's timeout (a pull that may wait for
 * a sync step). HC_OK when every peer answered, else the first failure's
 * code with its message.
 */
int hc_rpc_call_all(hc_rpc_client *c, int n, const int *peers,
                    nng_msg **reqs, nng_msg **replies, int *errs,
                    int timeout_ms);

/* hc_rpc_call_all, but every reqs[i] stays the caller's (each attempt
 * sends a copy): for bytes the caller may send again later. */
int hc_rpc_call_all_kept(hc_rpc_client *c, int n, const int *peers,
                         nng_msg *const *reqs, nng_msg **replies, int *errs,
                         int timeout_ms);

/* Makes target i's request again, the very bytes of its first attempt,
 * on the calling thread (a first attempt's, in target order, may wait for
 * what it sends); HC_OK, or a code with its message: the call then fails,
 * its other targets ended at once. */
typedef int (*hc_rpc_remake_fn)(void *arg, int i, nng_msg **out);

/* hc_rpc_call_all, where every reqs[i] is sent as it is (taken, set NULL)
 * and no copy is kept: a re-send, or a first attempt whose reqs[i] is
 * NULL (made when its peer gets to it), asks remake(arg, i) for the bytes
 * — for a large request cheaper made again than kept (a push, encoded
 * again from the gradients). */
int hc_rpc_call_all_remade(hc_rpc_client *c, int n, const int *peers,
                           nng_msg **reqs, hc_rpc_remake_fn remake, void *arg,
                           nng_msg **replies, int *errs, int timeout_ms);

/* Every later call hands each reply to fn(arg, i, reply) on the calling
 * thread as it lands (it stays in replies[i]): to start on one while
 * others are in flight. fn NULL: no more. */
void hc_rpc_on_reply(hc_rpc_client *c, void (*fn)(void *arg, int i,
                                                   nng_msg *reply),
                     void *arg);

/* hc_rpc_call_all for one peer. */
int hc_rpc_call(hc_rpc_client *c, int peer, nng_msg *req, nng_msg **reply,
                int timeout_ms);

/* Whether peer currently has a connection up. */
int hc_rpc_connected(hc_rpc_client *c, int peer);

void hc_rpc_client_close(hc_rpc_client *c);

/* An nng error as an hc_err code, `what` and nng's text its message. */
int hc_rpc_err(int nng_rv, const char *what);

#endif
