/*
 * rpc_code.c — nng's error codes as hetps's (err.h), for the core and
 * both backends alike (rpc.h: hc_rpc_err; rpc_backend.h: hc_rpc_code_of).
 */
#include <nng/nng.h>

#include "err.h"
#include "rpc.h"
#include "rpc_backend.h"

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
