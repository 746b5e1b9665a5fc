/*
 * rpc.h — request/reply between hetps's processes over plain TCP (nng
 * REQ/REP) or mutual TLS (the relay, tls_relay.h), one code path per
 * request whatever the transport (rpc_backend.h).
 *
 * Server: the handler runs on a thread of nng's or of the server's own
 * (never the relay's); it may reply at once or keep the request and reply
 * later from any thread (a pull waiting for a sync step), so a slow
 * request never blocks the others.
 *
 * Client: one connection per peer (parameter-server shard), made in the
 * background and again when lost; the calling thread steps its calls.
 * hc_rpc_call_all sends one request to each of several peers at once and
 * waits for all replies. Each attempt has a timeout; on timeout or lost
 * connection the very same bytes are sent again with exponential back-off
 * until `retry_ms` has passed, after which the call fails with
 * HC_ERR_UNREACHABLE and a message naming the peer and its address.
 * Servers recognise a repeated request (the envelope's request id), so a
 * re-send never applies anything twice.
 *
 * Threads: a client is used by one thread at a time (open a second client
 * for a heartbeat thread). Server functions are thread-safe.
 */
#ifndef HC_RPC_H
#define HC_RPC_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

typedef struct hc_rpc_server hc_rpc_server;
typedef struct hc_rpc_req hc_rpc_req;
typedef struct hc_rpc_client hc_rpc_client;

/* Called for every received message (threads: above). `msg` is owned by
 * the handler (free it with nng_msg_free). The handler must call
 * hc_rpc_reply exactly once for `req`, now or later, from any thread. */
typedef void (*hc_rpc_handler)(void *arg, hc_rpc_req *req, nng_msg *msg);

/*
 * Mutual TLS (the relay, OpenSSL): both files are PEM (tls_cert.h). A
 * server asks every client for a certificate and closes, with a warning
 * naming the peer's address, any connection whose certificate is missing,
 * not signed by ca_file or naming no task; a client requires the server's
 * certificate to be signed by ca_file and to name the host of the URL it
 * dials. The task the client's certificate names is each of its
 * requests' identity (hc_rpc_req_identity).
 */
struct hc_rpc_tls {
    const char *ca_file;       /* the cluster CA's certificate */
    const char *cert_key_file; /* this process's certificate and key */
};

struct hc_rpc_server_opts {
    int n_ctx;          /* the requests one connection may have
                           unanswered (more: closed; default 64); over
                           plain TCP the server's requests in flight */
    size_t recv_max;    /* largest accepted message in bytes (default 512 MiB) */
    const struct hc_rpc_tls *tls; /* NULL: plain TCP */
    /* Called (on a transport's thread) when a client's connection is
     * gone, with the id hc_rpc_msg_pipe gave for its messages; may be
     * NULL. */
    void (*on_close)(void *arg, uint32_t pipe);
    int send_timeout_ms; /* a reply the peer has not taken by then is
                            dropped and its context freed (default 10000) */
    int max_conns;      /* connections at once; more are closed at accept,
                           with a warning (default 1024) */
    int recv_deadline_ms; /* a connection owed no reply that completes no
                             request for this long is closed: idle, or a
                             message body that never ends (default 120000) */
};
/* Every connection, server and client, has TCP keepalive on, so a peer
 * that vanished (power loss, cable) is found and its connection closed. */

/* The id of the connection (nng pipe, or the relay's connection, top bit
 * set) a received message came on; 0 when unknown. Ids are not reused
 * while the server runs. */
uint32_t hc_rpc_msg_pipe(nng_msg *msg);

/* With TLS, the task the certificate of the request's connection names
 * ("worker:1", "ps:0", "admin": its CN, verified by the handshake); NULL
 * without TLS. Valid until hc_rpc_reply. */
const char *hc_rpc_req_identity(const hc_rpc_req *req);

/* The remote address a received message came from ("127.0.0.1:54321"),
 * for messages naming a refused peer. */
void hc_rpc_msg_peer(nng_msg *msg, char *buf, size_t n);

/* Listen on `url` ("tcp://127.0.0.1:2222"). Fails with HC_ERR_TRANSPORT
 * and a message naming the URL (address in use, bad host). */
int hc_rpc_server_start(hc_rpc_server **out, const char *url,
                        const struct hc_rpc_server_opts *opts,
                        hc_rpc_handler handler, void *arg);

/* Send `reply` (ownership taken) as the answer to `req`; with reply NULL
 * the request is dropped without an answer (the client will time out).
 * After this call `req` must not be used. */
void hc_rpc_reply(hc_rpc_req *req, nng_msg *reply);

/* Stop receiving, close every connection, free. Deferred
 * requests not yet answered are dropped: an hc_rpc_reply running at the
 * same time is safe (its reply is discarded), but once this returns every
 * unanswered hc_rpc_req is freed and must not be passed to hc_rpc_reply —
 * forget them (the request messages remain the handler's to free). Handlers
 * that are running when stop begins are waited for. */
void hc_rpc_server_stop(hc_rpc_server *s);

/* Times the server found its listener no longer taking connections and
 * listened again (rpc_listen.h: an nng 1.5.2 bug a client can trigger;
 * plain TCP only). */
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

/*
 * Open one connection per peer, made in the background. urls[i] is
 * "tcp://host:port", names[i] the task ("ps:1") used in messages. Does not
 * wait for connections.
 */
int hc_rpc_client_open(hc_rpc_client **out, int n, const char *const *urls,
                       const char *const *names,
                       const struct hc_rpc_client_opts *opts);

/*
 * Send reqs[i] to peer peers[i] for i < n, all at once, and wait until each
 * has a reply or has failed. A peer may be named by several targets: it
 * carries them one after another, in index order (one request in flight
 * per peer; open several peers to the same URL for several in flight). Ownership of every reqs[i] passes to the call.
 * replies[i] receives the reply (caller frees) or NULL; errs[i] HC_OK or the
 * failure code. timeout_ms > 0 overrides the per-attempt timeout (e.g. for
 * a pull that may wait for a synchronous step). Returns HC_OK when every
 * peer answered, else the first failure's code with its message.
 */
int hc_rpc_call_all(hc_rpc_client *c, int n, const int *peers,
                    nng_msg **reqs, nng_msg **replies, int *errs,
                    int timeout_ms);

/* hc_rpc_call_all, but every reqs[i] stays the caller's (each attempt
 * sends a copy): for a caller that may send the same bytes again later,
 * without a copy of its own. */
int hc_rpc_call_all_kept(hc_rpc_client *c, int n, const int *peers,
                         nng_msg *const *reqs, nng_msg **replies, int *errs,
                         int timeout_ms);

/* Makes call index i's request again for a re-send: the very bytes of the
 * first attempt (same request id). Called on the calling thread while a
 * call runs. Returns HC_OK, or a code with its message set (the call then
 * fails for that peer). */
typedef int (*hc_rpc_remake_fn)(void *arg, int i, nng_msg **out);

/* hc_rpc_call_all, where every reqs[i] is sent as it is (taken, set NULL)
 * and no copy is kept: a re-send asks remake(arg, i) for the same bytes,
 * as does a first attempt whose reqs[i] is NULL (made when its peer gets
 * to it: a long queue of large requests is not all built up front) —
 * for a caller that can make a large request again cheaper than keeping
 * a copy of it (a push, encoded again from the gradients). */
int hc_rpc_call_all_remade(hc_rpc_client *c, int n, const int *peers,
                           nng_msg **reqs, hc_rpc_remake_fn remake, void *arg,
                           nng_msg **replies, int *errs, int timeout_ms);

/* Have every later call hand each reply to fn(arg, i, reply) on the
 * calling thread as it lands, before the call returns (the reply stays in
 * replies[i], the caller's): to start on one while others are in flight.
 * fn NULL: no more. */
void hc_rpc_on_reply(hc_rpc_client *c, void (*fn)(void *arg, int i,
                                                   nng_msg *reply),
                     void *arg);

/* hc_rpc_call_all for one peer. */
int hc_rpc_call(hc_rpc_client *c, int peer, nng_msg *req, nng_msg **reply,
                int timeout_ms);

/* Whether peer currently has a connection up. */
int hc_rpc_connected(hc_rpc_client *c, int peer);

void hc_rpc_client_close(hc_rpc_client *c);

/* Translate an nng error to an hc_err code, recording `what` and nng's
 * text in the detail. */
int hc_rpc_err(int nng_rv, const char *what);

#endif
