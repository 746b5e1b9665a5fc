/*
 * tls_frame.c — the relay's framing inside TLS (see tls_frame.h): a small
 * state machine, PREAMBLE → (HEAD → BODY)*, that never touches a socket.
 */
#include "tls_frame.h"

#include <stdio.h>
#include <stdlib.h>
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
    if (!(*n = f->cap - f->got))
        return NULL;            /* hc_frame_grow first (or no body) */
    return (f->msg ? (uint8_t *)nng_msg_body(f->msg) : f->stage) + f->got;
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
    int i;

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
        f->len = 0;             /* the head's fields (hc_frame_head's) */
        for (i = 0; i < 8; i++)
            f->len = f->len << 8 | f->head[i];
        f->id = (uint32_t)f->head[8] << 24 | (uint32_t)f->head[9] << 16 |
                (uint32_t)f->head[10] << 8 | f->head[11];
        return HC_FRAME_HEAD;
    }
    f->got += n;
    if (f->msg && f->got == f->cap)
        return HC_FRAME_MSG;
    return f->got < f->cap ? HC_FRAME_MORE : HC_FRAME_ROOM;
}

/* What the body holds after its next growth: doubling from the first
 * buffer up to a quarter of the body, then the whole body. */
static size_t next_cap(const struct hc_frame_in *f)
{
    size_t len = (size_t)f->len, quarter = len / 4 + (len % 4 != 0);
    size_t c = f->cap ? 2 * f->cap
                      : f->first ? f->first : HC_FRAME_FIRST_BYTES;

    if (c >= len || f->cap >= quarter)
        return len;
    return c < quarter ? c : quarter;
}

size_t hc_frame_room(const struct hc_frame_in *f)
{
    return next_cap(f) - f->cap;
}

int hc_frame_grow(struct hc_frame_in *f)
{
    size_t c = next_cap(f);
    uint8_t *s;

    if (f->len > SIZE_MAX)
        return -1;
    if (c < f->len) {
        if (!(s = realloc(f->stage, c)))
            return -1;
        f->stage = s;
    } else {
        if (nng_msg_alloc(&f->msg, c) != 0)
            return -1;
        if (f->got)
            memcpy(nng_msg_body(f->msg), f->stage, f->got);
        free(f->stage);
        f->stage = NULL;
    }
    f->cap = c;
    return 0;
}

nng_msg *hc_frame_take(struct hc_frame_in *f, uint32_t *id)
{
    nng_msg *m = f->msg;

    *id = f->id;
    f->msg = NULL;
    f->in_body = 0;
    f->cap = f->got = 0;
    return m;
}

void hc_frame_reset(struct hc_frame_in *f)
{
    size_t first = f->first;

    if (f->msg)
        nng_msg_free(f->msg);
    free(f->stage);
    memset(f, 0, sizeof *f);
    f->first = first;
}
