/*
 * rpc_conf.c — what rpc's server (rpc_server.c) and client
 * (rpc_client.c) share: nng's error codes as ours, URLs (rpc_conf.h).
 */
#include "rpc_conf.h"

#include <stdio.h>
#include <string.h>

#include "err.h"

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
