/*
 * tls_frame.h — the relay's framing inside TLS, apart from sockets and
 * TLS (tls_relay.c reads into it; tests/fuzz/fuzz_frame.c feeds it bytes).
 *
 * Each side first sends 8 bytes, "HETPSr1\n"; then messages: a 12-byte
 * head (the body's length, 8 bytes big-endian, and a 4-byte request id)
 * and the body. The reader says where the next bytes go (hc_frame_want;
 * read up to that many there; hc_frame_got). A body's memory comes with
 * its bytes, never at the length announced: its first quarter goes into a
 * buffer doubling from 64 KiB, then the nng message is allocated whole,
 * that quarter copied in and the rest read straight into it — at most 4
 * times what arrived, plus 64 KiB. Each growth is the caller's
 * (HC_FRAME_HEAD, HC_FRAME_ROOM): it counts hc_frame_room against its
 * limits and calls hc_frame_grow, or refuses the peer.
 */
#ifndef HC_TLS_FRAME_H
#define HC_TLS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#define HC_FRAME_PREAMBLE "HETPSr1\n"
#define HC_FRAME_HEAD_BYTES 12u
#define HC_FRAME_FIRST_BYTES ((size_t)64 << 10) /* a body's first buffer */

enum hc_frame_ev {
    HC_FRAME_MORE,      /* nothing whole yet: read on */
    HC_FRAME_HELLO,     /* the peer's preamble is in, and hetps's */
    HC_FRAME_HEAD,      /* a head is in (len, id): hc_frame_grow next */
    HC_FRAME_ROOM,      /* the body's buffer is full: hc_frame_grow next */
    HC_FRAME_MSG,       /* a message is whole: hc_frame_take */
    HC_FRAME_ERROR,     /* not hetps's protocol: why says whose */
};

struct hc_frame_in {
    uint8_t pre[8];
    size_t pre_got;
    uint8_t head[HC_FRAME_HEAD_BYTES];
    size_t head_got;
    int in_body;                /* a head is in: its body (maybe empty) next */
    uint8_t *stage;             /* (cap) the body's first bytes, until … */
    nng_msg *msg;               /* (len) … its message is allocated */
    size_t cap, got;            /* bytes held for the body, and read */
    size_t first;               /* the first buffer (0: HC_FRAME_FIRST_BYTES) */
    uint64_t len;               /* the head's: the body's length */
    uint32_t id;                /* the head's: its request id */
};

/* Where the next bytes go: at most *n of them there (*n 0: a message with
 * no body, or a full buffer; call hc_frame_got(f, 0)). */
uint8_t *hc_frame_want(struct hc_frame_in *f, size_t *n);

/* n bytes arrived where hc_frame_want said: what is whole now. On
 * HC_FRAME_ERROR, why (wn bytes) says what the peer sent. */
int hc_frame_got(struct hc_frame_in *f, size_t n, char *why, size_t wn);

/* The bytes the body's next growth adds to what it holds. */
size_t hc_frame_room(const struct hc_frame_in *f);

/* After HC_FRAME_HEAD or HC_FRAME_ROOM: the body's buffer grown by
 * hc_frame_room bytes. 0, or -1 out of memory. */
int hc_frame_grow(struct hc_frame_in *f);

/* After HC_FRAME_MSG: the message (the caller's) and its id. */
nng_msg *hc_frame_take(struct hc_frame_in *f, uint32_t *id);

/* A head for a body of len bytes with request id into p
 * (HC_FRAME_HEAD_BYTES). */
void hc_frame_head(uint8_t *p, uint64_t len, uint32_t id);

/* Free what is held; f reads a new stream after this (first kept). */
void hc_frame_reset(struct hc_frame_in *f);

#endif
