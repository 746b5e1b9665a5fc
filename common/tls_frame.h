/*
 * tls_frame.h — the relay's framing inside TLS, apart from sockets and
 * TLS (tls_relay.c reads into it; tests/fuzz/fuzz_frame.c feeds it bytes).
 *
 * Each side first sends 8 bytes, "HETPSr1\n"; then messages, each a
 * 12-byte head (the body's length, 8 bytes big-endian, and a 4-byte
 * request id) and the body. The reader says where the next bytes go, so
 * a message's body is read straight into the nng message its callee
 * takes: hc_frame_want, read up to that many bytes there, hc_frame_got.
 * A head is announced (HC_FRAME_HEAD) before anything is allocated for
 * its body: the caller checks its length against its limits and calls
 * hc_frame_begin, or refuses the peer.
 */
#ifndef HC_TLS_FRAME_H
#define HC_TLS_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <nng/nng.h>

#define HC_FRAME_PREAMBLE "HETPSr1\n"
#define HC_FRAME_HEAD_BYTES 12u

enum hc_frame_ev {
    HC_FRAME_MORE,      /* nothing whole yet: read on */
    HC_FRAME_HELLO,     /* the peer's preamble is in, and hetps's */
    HC_FRAME_HEAD,      /* a head is in: len and id; hc_frame_begin next */
    HC_FRAME_MSG,       /* a message is whole: hc_frame_take */
    HC_FRAME_ERROR,     /* not hetps's protocol (why says whose), or out
                           of memory: the connection ends */
};

struct hc_frame_in {
    uint8_t pre[8];
    size_t pre_got;
    uint8_t head[HC_FRAME_HEAD_BYTES];
    size_t head_got;
    int in_body;                /* a head is in: its body (maybe empty) next */
    nng_msg *msg;               /* the body being read (len bytes) */
    size_t got;
    uint64_t len;               /* the head's: the body's length */
    uint32_t id;                /* the head's: its request id */
};

/* Where the next bytes go: at most *n of them there (*n 0: a message with
 * no body, or nothing until hc_frame_begin; call hc_frame_got(f, 0)). */
uint8_t *hc_frame_want(struct hc_frame_in *f, size_t *n);

/* n bytes arrived where hc_frame_want said: what is whole now. On
 * HC_FRAME_ERROR, why (n bytes) says what the peer sent. */
int hc_frame_got(struct hc_frame_in *f, size_t n, char *why, size_t wn);

/* After HC_FRAME_HEAD: the body's message allocated (len bytes). 0, or -1
 * out of memory. */
int hc_frame_begin(struct hc_frame_in *f);

/* After HC_FRAME_MSG: the message (the caller's) and its id. */
nng_msg *hc_frame_take(struct hc_frame_in *f, uint32_t *id);

/* A head for a body of len bytes with request id into p
 * (HC_FRAME_HEAD_BYTES). */
void hc_frame_head(uint8_t *p, uint64_t len, uint32_t id);

/* Free what is held; f reads a new stream after this. */
void hc_frame_reset(struct hc_frame_in *f);

#endif
