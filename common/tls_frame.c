/*
 * tls_frame.c — the relay's framing inside TLS (see tls_frame.h): a small
 * state machine, PREAMBLE → (HEAD → BODY)*, that never touches a socket.
 */
#include "tls_frame.h"

#include <stdio.h>
#include <string.h>

uint8_t *hc_frame_want(struct hc_frame_in *f, size_t *n)
{
    if (f->pre_got < sizeof f->pre) {
        *n = sizeof f->pre - f->pre_got;
        return f->pre + f->pre_got;
    }
    if (!f->in_body) {
        *n = HC_FRAME_HEAD_BYTES - f->head_got;
        return f->head + f->head_got;
    }
    if (!f->msg) {
        *n = 0;                 /* hc_frame_begin first (or no body) */
        return NULL;
    }
    *n = nng_msg_len(f->msg) - f->got;
    return (uint8_t *)nng_msg_body(f->msg) + f->got;
}

/* The head's fields. */
static void read_head(struct hc_frame_in *f)
{
    int i;

    f->len = 0;
    for (i = 0; i < 8; i++)
        f->len = f->len << 8 | f->head[i];
    f->id = (uint32_t)f->head[8] << 24 | (uint32_t)f->head[9] << 16 |
            (uint32_t)f->head[10] << 8 | f->head[11];
}

void hc_frame_head(uint8_t *p, uint64_t len, uint32_t id)
{
    int i;

    for (i = 7; i >= 0; i--, len >>= 8)
        p[i] = (uint8_t)len;
    for (i = 11; i >= 8; i--, id >>= 8)
        p[i] = (uint8_t)id;
}

int hc_frame_got(struct hc_frame_in *f, size_t n, char *why, size_t wn)
{
    if (f->pre_got < sizeof f->pre) {
        if ((f->pre_got += n) < sizeof f->pre)
            return HC_FRAME_MORE;
        if (!memcmp(f->pre, HC_FRAME_PREAMBLE, sizeof f->pre))
            return HC_FRAME_HELLO;
        snprintf(why, wn, "%s", !memcmp(f->pre, "\0SP\0", 4)
                 ? "it speaks nng's own TLS transport (tls+tcp://), not "
                   "hetps's relay: every process of a cluster speaks the "
                   "relay's protocol inside TLS"
                 : "what it sent after the TLS handshake is not hetps's "
                   "relay protocol");
        return HC_FRAME_ERROR;
    }
    if (!f->in_body) {
        if ((f->head_got += n) < HC_FRAME_HEAD_BYTES)
            return HC_FRAME_MORE;
        f->head_got = 0;
        f->in_body = 1;
        read_head(f);
        return HC_FRAME_HEAD;
    }
    if (!f->msg) {              /* got before begin: a caller's mistake */
        snprintf(why, wn, "a message read before its buffer was made");
        return HC_FRAME_ERROR;
    }
    f->got += n;
    return f->got == nng_msg_len(f->msg) ? HC_FRAME_MSG : HC_FRAME_MORE;
}

int hc_frame_begin(struct hc_frame_in *f)
{
    f->got = 0;
    return f->len > SIZE_MAX || nng_msg_alloc(&f->msg, (size_t)f->len) != 0
               ? -1 : 0;
}

nng_msg *hc_frame_take(struct hc_frame_in *f, uint32_t *id)
{
    nng_msg *m = f->msg;

    *id = f->id;
    f->msg = NULL;
    f->in_body = 0;
    return m;
}

void hc_frame_reset(struct hc_frame_in *f)
{
    if (f->msg)
        nng_msg_free(f->msg);
    memset(f, 0, sizeof *f);
}
