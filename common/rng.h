/*
 * rng.h — the one pseudo-random generator of hetps: splitmix64 (Steele,
 * Lea, Flood 2014). Small, fast, and the same on every machine, so initial
 * values, shuffles and dropout masks are reproducible from a seed.
 */
#ifndef HC_RNG_H
#define HC_RNG_H

#include <stdint.h>

/* splitmix64's output function: a bijective 64-bit mix. */
uint64_t hc_mix64(uint64_t z);

/* Advance *state by the golden-ratio increment and return its mix. */
uint64_t hc_splitmix64(uint64_t *state);

#endif
