/*
 * rpc_conf.h — inside the rpc module only: what its server
 * (rpc_server.c) and client (rpc_client.c) share.
 */
#ifndef HC_RPC_CONF_H
#define HC_RPC_CONF_H

#include <stddef.h>

#include <nng/nng.h>

#include "rpc.h"

#define HC_RPC_URL_MAX 600
#define HC_RPC_DEFAULT_RECV_MAX ((size_t)512 << 20)
#define HC_RPC_WARN_EVERY_MS 1000 /* at most one warning of a kind a second */

/* An nng code as an hc_err code, recording nothing (for nng's threads). */
int hc_rpc_code_of(int nng_rv);

/* The host of "tcp://host:port" or "tcp://[v6]:port" into out. */
void hc_rpc_url_host(char *out, size_t n, const char *url);

#endif
