/*
 * tls_engine.h — OpenSSL for hetps's TLS: the contexts of the relay
 * (tls_relay.h, the default) and an engine for nng's own TLS transport.
 *
 * HETPS_TLS_ENGINE picks how TLS is done: "relay" (or unset) by the
 * relay; "openssl" by nng's tls+tcp:// transport with the engine
 * installed here in place of the mbedTLS engine Debian's nng 1.5.2 ships
 * (it fails sends on a closed or failed connection at once, where nng's
 * own engine leaves some pending for ever, and encrypts several times
 * faster); "mbed" by nng's transport and engine as shipped
 * (common/README.md, *The TLS relay*, *The nng TLS engines*).
 * Certificates are the same PEM files (tls.h makes them with mbedTLS).
 */
#ifndef HC_TLS_ENGINE_H
#define HC_TLS_ENGINE_H

/* Install the engine when HETPS_TLS_ENGINE=openssl (once per process;
 * later calls return the first result; nothing to do when unset or
 * "mbed"). Call before any nng TLS configuration is made. 0, NNG_EINVAL
 * when HETPS_TLS_ENGINE names another engine, or an nng error code. */
int hc_tls_engine_install(void);

/* The name of the engine nng uses now ("openssl" or "mbed"). */
const char *hc_tls_engine_name(void);

/* An OpenSSL context for the relay (tls_relay.h), configured as the
 * engine's: mutual TLS with the CA in ca_file and this process's
 * certificate and key in cert_key_file (PEM; a client may have none, to
 * play a peer from outside in the tests); a client (server 0) checks that
 * the server's certificate names server_name. NULL with the error
 * set (err.h) naming the file. Free with hc_tls_ctx_close. */
typedef struct ssl_ctx_st SSL_CTX;
SSL_CTX *hc_tls_ctx_open(int server, const char *ca_file,
                         const char *cert_key_file, const char *server_name);
void hc_tls_ctx_close(SSL_CTX *ctx);

#endif
