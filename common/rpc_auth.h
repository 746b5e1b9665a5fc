/*
 * rpc_auth.h — which task's certificate a client holds, proved once per
 * connection (used by rpc_server.c and rpc_client.c only; the contract for callers is rpc.h).
 *
 * nng 1.5.2 tells a server whether a TLS peer's certificate verified, not
 * whose it is. So on each new connection the client proves it:
 *
 *   client → HELLO                         server → NONCE (32 random bytes,
 *                                                   kept for this pipe)
 *   client → PROOF: its certificate (DER)  server → OK, or ERR with why
 *            and an ECDSA signature over
 *            SHA-256("hetps proof v1" ‖ nonce) with its key
 *
 * The server checks the certificate against the cluster CA, the signature
 * against the certificate's key, and takes the subject CN ("worker:1",
 * "ps:0", "admin") as the pipe's identity. A nonce belongs to one
 * connection and lasts until its next HELLO. Every later request on that
 * pipe carries that identity. Anything out of order — a request on a pipe
 * not proven, a PROOF with no nonce on its pipe (nng's REQ re-sends an
 * outstanding message on the next connection when its own closes) — is
 * answered UNAUTH, never dropped and never a final ERR: the client proves
 * itself again and re-sends. A request unanswered within an attempt makes
 * the next attempt start with a HELLO; a HELLO or PROOF unanswered within
 * two attempts in a row makes the client close that connection and dial a
 * fresh one (a live server answers them at once, so it is wedged). All of
 * this travels inside the TLS connection.
 *
 * Control messages start with 8 magic bytes that no hetps message can
 * start with (as a header length they exceed every limit), then a kind
 * byte.
 */
#ifndef HC_RPC_AUTH_H
#define HC_RPC_AUTH_H

#include <stddef.h>

#include <nng/nng.h>

#define HC_AUTH_NONCE 32

enum hc_auth_kind {
    HC_AUTH_HELLO = 'H',
    HC_AUTH_NONCE_REPLY = 'N',
    HC_AUTH_PROOF = 'P',
    HC_AUTH_OK = 'K',
    HC_AUTH_ERR = 'E',
    HC_AUTH_UNAUTH = 'U',
};

/* The kind of a control message (an hc_auth_kind), or 0 for any other. */
int hc_auth_kind_of(nng_msg *m);

/* A control message of `kind` with `n` bytes of data after the kind. */
int hc_auth_msg(nng_msg **out, int kind, const void *data, size_t n);

/* The data after the kind byte (len in *n). */
const unsigned char *hc_auth_data(nng_msg *m, size_t *n);

/* Client side: a certificate and its key, from one PEM file. One signer
 * per peer: a signer is used by one thread at a time. */
typedef struct hc_auth_signer hc_auth_signer;
int hc_auth_signer_open(hc_auth_signer **out, const char *cert_key_file);
void hc_auth_signer_close(hc_auth_signer *s);
/* The PROOF for a NONCE reply. */
int hc_auth_prove(hc_auth_signer *s, nng_msg *nonce_reply, nng_msg **proof);

/* Server side: the cluster CA. Thread-safe. */
typedef struct hc_auth_verifier hc_auth_verifier;
int hc_auth_verifier_open(hc_auth_verifier **out, const char *ca_file);
void hc_auth_verifier_close(hc_auth_verifier *v);
/* Check a PROOF against `nonce`: 0 with the certificate's CN in who, or -1
 * with the reason in why. */
int hc_auth_check(hc_auth_verifier *v, const unsigned char *nonce,
                  nng_msg *proof, char *who, size_t wn, char *why, size_t yn);

#endif
