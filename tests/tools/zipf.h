/*
 * zipf.h — the Zipf-distributed row ids of the rows tools (rows.c,
 * rows_sync.c): Zipf(1.05) ranks over ZIPF_VOCAB by inverse CDF, each
 * rank hashed into an id below 2^40, so ids repeat within a batch and
 * spread over the whole table.
 */
#ifndef TOOLS_ZIPF_H
#define TOOLS_ZIPF_H

#include <stdint.h>
#include <stdlib.h>

#include "rng.h"

#define ZIPF_VOCAB 100000

/* The CDF over ZIPF_VOCAB ranks (malloc'd; NULL when out of memory). */
static inline double *zipf_cdf(void)
{
    double *c = malloc(ZIPF_VOCAB * sizeof *c), sum = 0;

    for (size_t i = 0; c && i < ZIPF_VOCAB; i++)
        c[i] = (sum += 1.0 / __builtin_pow((double)(i + 1), 1.05));
    for (size_t i = 0; c && i < ZIPF_VOCAB; i++)
        c[i] /= sum;
    return c;
}

/* The next id from the stream *st. */
static inline uint64_t zipf_id(const double *cdf, uint64_t *st)
{
    double u = (double)(hc_splitmix64(st) >> 11) * 0x1.0p-53;
    size_t lo = 0, hi = ZIPF_VOCAB - 1;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;

        if (cdf[mid] < u)
            lo = mid + 1;
        else
            hi = mid;
    }
    return hc_mix64(lo) >> 24;      /* below 2^40 */
}

#endif
