/*
 * fuzz_frame.c — libFuzzer target: the relay's framing inside TLS
 * (common/tls_frame.c), apart from sockets and TLS. The input is the byte
 * stream a peer sends after the handshake, fed in pieces whose sizes the
 * input's first byte picks (as TLS records and short reads cut it), with
 * a first body buffer of 1 to 8 bytes (its second byte) so that short
 * inputs grow bodies through every stage. A head is taken only under a
 * limit (as the relay's recv_max), so the bodies stay small; a body never
 * holds more than 4 times its bytes read plus its first buffer; every
 * message read must be the bytes sent, and nothing may be held after a
 * reset.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "tls_frame.h"

#define LIMIT ((uint64_t)1 << 16)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct hc_frame_in f;
    size_t at = 2, piece, body_at = 0;
    char why[200] = "";
    int ev = HC_FRAME_MORE;

    if (size < 2)
        return 0;
    piece = (size_t)data[0] % 31 + 1;
    memset(&f, 0, sizeof f);
    f.first = (size_t)data[1] % 8 + 1;
    while (ev != HC_FRAME_ERROR) {
        size_t want, n;
        uint8_t *to = hc_frame_want(&f, &want);
        uint32_t id;

        n = want < piece ? want : piece;
        if (n > size - at)
            n = size - at;
        if (want && !n)
            break;              /* the stream ended mid-frame */
        if (n)
            memcpy(to, data + at, n);
        at += n;
        switch ((ev = hc_frame_got(&f, n, why, sizeof why))) {
        case HC_FRAME_HEAD:
            body_at = at;
            /* fall through */
        case HC_FRAME_ROOM:
            if (f.len > LIMIT || hc_frame_grow(&f) != 0)
                ev = HC_FRAME_ERROR;    /* the relay refuses the peer */
            else if (f.cap > 4 * f.got + f.first)
                abort();
            break;
        case HC_FRAME_MSG: {
            uint64_t len = f.len;
            nng_msg *m = hc_frame_take(&f, &id);

            if (!m || nng_msg_len(m) != len ||
                (len && memcmp(nng_msg_body(m), data + body_at, len)))
                abort();
            nng_msg_free(m);
            break;
        }
        case HC_FRAME_ERROR:
            if (!why[0])
                abort();        /* a refusal always says why */
            break;
        default:
            break;
        }
    }
    hc_frame_reset(&f);
    return 0;
}
