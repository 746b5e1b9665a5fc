/*
 * rpc_conf.c — what rpc's server (rpc_server.c) and client
 * (rpc_client.c) share: nng's error codes as ours, URLs, and the TLS
 * configuration of nng's own transport (rpc_conf.h).
 */
#include "rpc_conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "tls_engine.h"

int hc_rpc_code_of(int rv)
{
    switch (rv) {
    case 0:
        return HC_OK;
    case NNG_ETIMEDOUT:
        return HC_ERR_TIMEOUT;
    case NNG_ECLOSED:
        return HC_ERR_CLOSED;
    case NNG_ENOMEM:
        return HC_ERR_NOMEM;
    default:
        return HC_ERR_TRANSPORT;
    }
}

int hc_rpc_err(int nng_rv, const char *what)
{
    if (nng_rv == 0)
        return HC_OK;
    return hc_err_set(hc_rpc_code_of(nng_rv), "%s: %s", what ? what : "nng",
                      nng_strerror(nng_rv));
}

/* The URL to use: "tcp://…" becomes "tls+tcp://…" when tls is set. */
void hc_rpc_transport_url(char *out, size_t n, const char *url, int tls)
{
    if (tls && strncmp(url, "tcp://", 6) == 0)
        snprintf(out, n, "tls+%s", url);
    else
        snprintf(out, n, "%s", url);
}

/* Whether TLS goes through the relay (tls_relay.h) rather than nng. */
int hc_rpc_use_relay(void)
{
    const char *e = getenv("HETPS_TLS_ENGINE");

    return !e || !*e || !strcmp(e, "relay");
}

/* The host of "tcp://host:port" or "tcp://[v6]:port" into out. */
void hc_rpc_url_host(char *out, size_t n, const char *url)
{
    const char *h = strstr(url, "://"), *e;

    h = h ? h + 3 : url;
    if (*h == '[') {
        h++;
        e = strchr(h, ']');
    } else {
        e = strrchr(h, ':');
    }
    if (!e)
        e = h + strlen(h);
    snprintf(out, n, "%.*s", (int)(e - h), h);
}

/* A TLS configuration for a listener (auth optional: the pipe callback
 * refuses unverified peers, so it can name them) or a dialer (auth required,
 * the server's certificate must name `server_name`). */
int hc_rpc_tls_config(nng_tls_config **out, const struct hc_rpc_tls *t,
                      int server, const char *server_name, const char *what)
{
    nng_tls_config *cfg = NULL;
    const char *step = "allocating the configuration";
    int rv;

    *out = NULL;
    if ((rv = hc_tls_engine_install()) != 0)
        return rv == NNG_EINVAL
                   ? hc_err_set(HC_ERR_CONFIG, "%s: TLS: HETPS_TLS_ENGINE=%s "
                                "names no engine of hetps (relay, the "
                                "default, mbed or openssl)", what,
                                getenv("HETPS_TLS_ENGINE"))
                   : hc_rpc_err(rv, "TLS engine");
    if ((rv = nng_tls_config_alloc(&cfg, server ? NNG_TLS_MODE_SERVER
                                                : NNG_TLS_MODE_CLIENT)) != 0)
        goto fail;
    step = "setting the authentication mode";
    if ((rv = nng_tls_config_auth_mode(cfg, server
                                                ? NNG_TLS_AUTH_MODE_OPTIONAL
                                                : NNG_TLS_AUTH_MODE_REQUIRED)) != 0)
        goto fail;
    step = t->ca_file;
    if ((rv = nng_tls_config_ca_file(cfg, t->ca_file)) != 0)
        goto fail;
    step = t->cert_key_file;
    if ((rv = nng_tls_config_cert_key_file(cfg, t->cert_key_file, NULL)) != 0)
        goto fail;
    step = "setting the server name";
    if (server_name && (rv = nng_tls_config_server_name(cfg, server_name)) != 0)
        goto fail;
    *out = cfg;
    return HC_OK;
fail:
    if (cfg)
        nng_tls_config_free(cfg);
    return hc_err_set(hc_rpc_code_of(rv), "%s: TLS: %s: %s (is it a PEM file made "
                      "by `hetps certs`?)", what, step, nng_strerror(rv));
}
