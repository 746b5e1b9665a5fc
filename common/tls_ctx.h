/*
 * tls_ctx.h — OpenSSL contexts for hetps's mutual TLS (the relay,
 * tls_relay.h), and what a verified peer's certificate says of it.
 *
 * A context trusts only the cluster CA, presents this process's
 * certificate, and requires the peer's: a client also checks that the
 * server's certificate names the host it dialled. Certificates are the
 * PEM files of tls_cert.h.
 */
#ifndef HC_TLS_CTX_H
#define HC_TLS_CTX_H

#include <stddef.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

/* A context trusting the CA in ca_file, presenting cert_key_file (PEM; a
 * client may have none: a peer from outside, in the tests); a client
 * (server 0) checks that the server's certificate names server_name. NULL
 * with the error set naming the file. The caller's: SSL_CTX_free. */
SSL_CTX *hc_tls_ctx_open(int server, const char *ca_file,
                         const char *cert_key_file, const char *server_name);

/* The task a verified peer's certificate names: its subject CN ("ps:0",
 * "worker:1", "admin") into who. 0, or -1 (no verified certificate, or
 * no CN that fits) with who empty. */
int hc_tls_peer_task(SSL *ssl, char *who, size_t n);

#endif
