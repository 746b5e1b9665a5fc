/*
 * err.c — error codes to text, and the per-thread error detail.
 */
#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const err_text[HC_ERR__COUNT] = {
    [HC_OK] = "success",
    [HC_ERR_NOMEM] = "out of memory",
    [HC_ERR_INVAL] = "invalid argument",
    [HC_ERR_CONFIG] = "invalid configuration",
    [HC_ERR_IO] = "input/output error",
    [HC_ERR_PROTO] = "malformed message",
    [HC_ERR_VERSION] = "version mismatch",
    [HC_ERR_CLUSTER] = "message from a different cluster",
    [HC_ERR_LIMIT] = "limit exceeded",
    [HC_ERR_CRC] = "checksum mismatch",
    [HC_ERR_TIMEOUT] = "timed out",
    [HC_ERR_UNREACHABLE] = "peer unreachable",
    [HC_ERR_CLOSED] = "closed",
    [HC_ERR_TRANSPORT] = "transport error",
    [HC_ERR_STORE] = "store error",
    [HC_ERR_MAPFULL] = "store full",
    [HC_ERR_NOTFOUND] = "not found",
    [HC_ERR_EXISTS] = "already exists",
    [HC_ERR_MISMATCH] = "mismatch",
    [HC_ERR_DATA] = "bad data set",
    [HC_ERR_REMOTE] = "remote error",
    [HC_ERR_STALE] = "stale request",
    [HC_ERR_DEVICE] = "device error",
    [HC_ERR_UNSUPPORTED] = "not supported in this build",
};

static _Thread_local char err_detail[4096];
static _Thread_local int err_code;

const char *hc_strerror(int code)
{
    if (code < 0 || code >= HC_ERR__COUNT || !err_text[code])
        return "unknown error";
    return err_text[code];
}

int hc_err_set(int code, const char *fmt, ...)
{
    char detail[sizeof err_detail]; /* an argument may be hc_err_msg() */
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    memcpy(err_detail, detail, sizeof detail);
    err_code = code;
    return code;
}

const char *hc_err_msg(void)
{
    if (err_detail[0])
        return err_detail;
    return hc_strerror(err_code);
}

void hc_err_clear(void)
{
    err_detail[0] = '\0';
    err_code = HC_OK;
}
