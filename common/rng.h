/*
 * rng.h — the one pseudo-random generator of hetps: splitmix64 (Steele,
 * Lea, Flood 2014). Small, fast, and the same on every machine, so initial
 * values, shuffles and dropout masks are reproducible from a seed. Every
 * host-side use goes through these functions; the CUDA dropout kernel
 * keeps a device twin of hc_mix64 (worker/kernels_cuda.cu), compared with
 * the CPU by test_cuda.
 */
#ifndef HC_RNG_H
#define HC_RNG_H

#include <stdint.h>

/* splitmix64's increment (its "golden gamma"): 2^64 / φ, rounded to odd. */
#define HC_GOLDEN_GAMMA 0x9E3779B97F4A7C15ull

/* splitmix64's output function: a bijective 64-bit mix. */
uint64_t hc_mix64(uint64_t z);

/* Advance *state by HC_GOLDEN_GAMMA and return its mix. */
uint64_t hc_splitmix64(uint64_t *state);

/* Uniform in [0, bound) from *state (advanced as hc_splitmix64), bound ≥ 1,
 * without modulo bias (draws below 2^64 mod bound are redrawn): the
 * Fisher–Yates shuffles' draw. */
uint64_t hc_rng_below(uint64_t *state, uint64_t bound);

#endif
