/*
 * rpc_conf.h — inside the rpc module only: what its server
 * (rpc_server.c) and client (rpc_client.c) share.
 */
#ifndef HC_RPC_CONF_H
#define HC_RPC_CONF_H

#include <stddef.h>

#include <nng/nng.h>
#include <nng/supplemental/tls/tls.h>

#include "rpc.h"

#define HC_RPC_URL_MAX 600
#define HC_RPC_DEFAULT_RECV_MAX ((size_t)512 << 20)
#define HC_RPC_WARN_EVERY_MS 1000 /* at most one warning of a kind a second */

/* An nng code as an hc_err code, recording nothing (for nng's threads). */
int hc_rpc_code_of(int nng_rv);

/* The URL to use: "tcp://…" becomes "tls+tcp://…" when tls is set. */
void hc_rpc_transport_url(char *out, size_t n, const char *url, int tls);

/* Whether TLS goes through the relay (tls_relay.h, the default) rather
 * than nng's transport: HETPS_TLS_ENGINE unset, empty or "relay". */
int hc_rpc_use_relay(void);

/* The host of "tcp://host:port" or "tcp://[v6]:port" into out. */
void hc_rpc_url_host(char *out, size_t n, const char *url);

/* A TLS configuration for nng's transport: a listener's (server: the
 * client's certificate optional, the pipe callback refuses and names an
 * unverified peer) or a dialer's (required; the server's certificate must
 * name server_name). HC_OK, or an error naming `what` and the file. */
int hc_rpc_tls_config(nng_tls_config **out, const struct hc_rpc_tls *t,
                      int server, const char *server_name, const char *what);

#endif
