/*
 * crc32c.c — CRC32C (Castagnoli) of the tensor data in hetps messages.
 *
 * Two implementations of one function: the portable slicing-by-8 table code
 * (eight bytes per step, tables built once on first use), and on x86-64 the
 * SSE4.2 crc32 instruction (three interleaved chains on long buffers),
 * chosen at run time with __builtin_cpu_supports
 * so one binary runs on every x86-64 CPU. Nothing else in hetps computes
 * checksums of messages.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define CRC_HAVE_X86 1
#else
#define CRC_HAVE_X86 0
#endif

#define CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t crc_table[8][256]; /* (slice, byte) */
static pthread_once_t crc_table_once = PTHREAD_ONCE_INIT;

static void crc_table_build(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    for (int s = 1; s < 8; s++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t prev = crc_table[s - 1][i];
            crc_table[s][i] = (prev >> 8) ^ crc_table[0][prev & 0xff];
        }
}

/* Advance a pre-inverted crc over n bytes with the tables. */
static uint32_t crc_soft_update(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint64_t w;

        memcpy(&w, p, 8); /* little-endian host: byte 0 is the low byte */
        w ^= crc;
        crc = crc_table[7][w & 0xff] ^ crc_table[6][(w >> 8) & 0xff] ^
              crc_table[5][(w >> 16) & 0xff] ^ crc_table[4][(w >> 24) & 0xff] ^
              crc_table[3][(w >> 32) & 0xff] ^ crc_table[2][(w >> 40) & 0xff] ^
              crc_table[1][(w >> 48) & 0xff] ^ crc_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
    return crc;
}

uint32_t hc_crc32c_soft(const void *buf, size_t len)
{
    pthread_once(&crc_table_once, crc_table_build);
    return ~crc_soft_update(0xFFFFFFFFu, buf, len);
}

#if CRC_HAVE_X86
/*
 * The crc32 instruction takes 3 cycles but can start one per cycle, so one
 * dependency chain runs at a third of its speed. Long buffers therefore go
 * three chunks of CRC_LONG bytes at a time, each with its own chain, and
 * the three registers are joined: the raw register is linear, so the
 * register after A||B is shift(reg after A, |B|) ^ (reg of B from 0), where
 * shift appends |B| zero bytes. crc_shift holds that operator for
 * CRC_LONG bytes as four byte tables, built once from the instruction
 * itself (each basis bit run through CRC_LONG zero bytes).
 */
#define CRC_LONG 4096

static uint32_t crc_shift[4][256]; /* (byte of the register, its value) */
static pthread_once_t crc_shift_once = PTHREAD_ONCE_INIT;

__attribute__((target("sse4.2")))
static void crc_shift_build(void)
{
    uint32_t basis[32];

    for (int b = 0; b < 32; b++) {
        uint64_t c = 1u << b;

        for (int i = 0; i < CRC_LONG / 8; i++)
            c = _mm_crc32_u64(c, 0);
        basis[b] = (uint32_t)c;
    }
    for (int k = 0; k < 4; k++)
        for (uint32_t v = 0; v < 256; v++) {
            uint32_t x = 0;

            for (int j = 0; j < 8; j++)
                if (v >> j & 1)
                    x ^= basis[8 * k + j];
            crc_shift[k][v] = x;
        }
}

static uint32_t crc_shift_long(uint32_t c)
{
    return crc_shift[0][c & 0xff] ^ crc_shift[1][(c >> 8) & 0xff] ^
           crc_shift[2][(c >> 16) & 0xff] ^ crc_shift[3][c >> 24];
}

/* Advance a pre-inverted crc over n bytes with the instruction. */
__attribute__((target("sse4.2")))
static uint32_t crc_hw_update(uint32_t state, const uint8_t *p, size_t n)
{
    uint64_t crc = state;

    while (n > 0 && ((uintptr_t)p & 7) != 0) {
        crc = _mm_crc32_u8((uint32_t)crc, *p++);
        n--;
    }
    if (n >= 3 * CRC_LONG)
        pthread_once(&crc_shift_once, crc_shift_build);
    while (n >= 3 * CRC_LONG) { /* three chains, joined per round */
        uint64_t c1 = 0, c2 = 0;

        for (size_t i = 0; i < CRC_LONG; i += 8) {
            uint64_t w0, w1, w2;

            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + CRC_LONG + i, 8);
            memcpy(&w2, p + 2 * CRC_LONG + i, 8);
            crc = _mm_crc32_u64(crc, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        crc = crc_shift_long((uint32_t)crc) ^ (uint32_t)c1;
        crc = crc_shift_long((uint32_t)crc) ^ (uint32_t)c2;
        p += 3 * CRC_LONG;
        n -= 3 * CRC_LONG;
    }
    while (n >= 32) { /* unrolled; one dependency chain */
        uint64_t w[4];

        memcpy(w, p, sizeof w);
        crc = _mm_crc32_u64(crc, w[0]);
        crc = _mm_crc32_u64(crc, w[1]);
        crc = _mm_crc32_u64(crc, w[2]);
        crc = _mm_crc32_u64(crc, w[3]);
        p += 32;
        n -= 32;
    }
    while (n >= 8) {
        uint64_t w;

        memcpy(&w, p, 8);
        crc = _mm_crc32_u64(crc, w);
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = _mm_crc32_u8((uint32_t)crc, *p++);
    return (uint32_t)crc;
}
#endif

int hc_crc32c_hw_available(void)
{
#if CRC_HAVE_X86
    return __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    return 0;
#endif
}

/* Advance a pre-inverted crc over n bytes, the fastest way this CPU has. */
static uint32_t crc_update(uint32_t state, const uint8_t *p, size_t n)
{
#if CRC_HAVE_X86
    if (__builtin_cpu_supports("sse4.2"))
        return crc_hw_update(state, p, n);
#endif
    pthread_once(&crc_table_once, crc_table_build);
    return crc_soft_update(state, p, n);
}

uint32_t hc_crc32c(const void *buf, size_t len)
{
    return ~crc_update(0xFFFFFFFFu, buf, len);
}

uint32_t hc_crc32c_extend(uint32_t crc, const void *buf, size_t len)
{
    return ~crc_update(~crc, buf, len);
}

/* Chunks small enough to be checksummed from L1 right after the copy. */
#define CRC_COPY_CHUNK (6 * 4096)

uint32_t hc_crc32c_copy(void *dst, const void *src, size_t len)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    uint32_t state = 0xFFFFFFFFu;

    while (len) {
        size_t k = len < CRC_COPY_CHUNK ? len : CRC_COPY_CHUNK;

        memcpy(d, s, k);
        state = crc_update(state, d, k);
        d += k;
        s += k;
        len -= k;
    }
    return ~state;
}
