/*
 * tls_engine.h — hetps's TLS engine for nng, on OpenSSL.
 *
 * Every TLS connection of hetps (tls+tcp:// listeners and dialers in
 * rpc.c) runs through the engine installed here in place of the mbedTLS
 * engine Debian's nng 1.5.2 ships: it fails sends on a closed connection
 * at once (nng 1.5.2's own layer leaves them pending for ever, which
 * wedges the process's nng) and encrypts several times faster. Certificates
 * are the same PEM files (tls.h makes them with mbedTLS).
 *
 * HETPS_TLS_ENGINE=mbedtls in the environment keeps nng's own engine (for
 * the benchmark that compares them).
 */
#ifndef HC_TLS_ENGINE_H
#define HC_TLS_ENGINE_H

/* Install the engine (once per process; later calls return the first
 * result). Call before any nng TLS configuration is made. 0 or an nng
 * error code. */
int hc_tls_engine_install(void);

/* The name of the engine nng uses now ("openssl" or "mbed"). */
const char *hc_tls_engine_name(void);

#endif
