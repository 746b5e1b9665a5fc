/*
 * crc32c.c — CRC32C (Castagnoli) of the tensor data in hetps messages.
 *
 * Computed by Intel's ISA-L (`crc32_iscsi`, Debian's libisal), which
 * picks at run time the fastest code the CPU has (on one with AVX-512 and
 * VPCLMULQDQ, folding with carry-less multiplication): 2.5-2.8x the three
 * interleaved crc32-instruction chains hetps had
 * written itself (41-55 against 16-20 GB/s on the project's VM). The
 * portable slicing-by-8 table code below (hc_crc32c_soft) is the
 * reference the tests hold it to. Nothing else in hetps computes
 * checksums of messages.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#include <isa-l/crc.h>

#if defined(__x86_64__)
#include <immintrin.h>

static int have_avx;

__attribute__((constructor)) static void crc_detect(void)
{
    have_avx = __builtin_cpu_supports("avx");
}
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

#if defined(__x86_64__)
/* ISA-L's AVX-512 code returns with the vector registers' upper halves
 * dirty; the SSE code compiled around it (the optimizer's loop, the finite
 * check) then took 2.5x the time on the project's VM (perf, session 11:
 * the optimizer's share of a 20 M model's step 6 % -> 15 %, back to 8 %
 * with this). Clearing them costs one instruction. */
__attribute__((target("avx"))) static void upper_clear(void)
{
    _mm256_zeroupper();
}
#endif

/* Advance a pre-inverted crc over n bytes (ISA-L's crc32_iscsi takes an
 * int length and a buffer it only reads). */
static uint32_t crc_update(uint32_t state, const uint8_t *p, size_t n)
{
    while (n) {
        size_t k = n < (size_t)1 << 30 ? n : (size_t)1 << 30;

        state = crc32_iscsi((unsigned char *)(uintptr_t)p, (int)k, state);
        p += k;
        n -= k;
    }
#if defined(__x86_64__)
    if (have_avx)
        upper_clear();
#endif
    return state;
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
