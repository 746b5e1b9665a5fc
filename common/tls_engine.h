/*
 * tls_engine.h — hetps's TLS engine for nng, on OpenSSL (opt-in).
 *
 * With HETPS_TLS_ENGINE=openssl in the environment, every TLS connection
 * of hetps (tls+tcp:// listeners and dialers in rpc.c) runs through the
 * engine installed here in place of the mbedTLS engine Debian's nng 1.5.2
 * ships: it fails sends on a closed or failed connection at once (nng
 * 1.5.2's own engine leaves some pending for ever, which wedges the
 * process's nng) and encrypts several times faster. Not the default yet
 * (common/README.md, *The TLS engine*). Certificates are the same PEM
 * files (tls.h makes them with mbedTLS).
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

#endif
