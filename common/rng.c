/*
 * rng.c — splitmix64 (see rng.h).
 */
#include "rng.h"

uint64_t hc_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t hc_splitmix64(uint64_t *state)
{
    return hc_mix64(*state += HC_GOLDEN_GAMMA);
}

uint64_t hc_rng_below(uint64_t *state, uint64_t bound)
{
    uint64_t threshold = (0 - bound) % bound, r;

    do
        r = hc_splitmix64(state);
    while (r < threshold);
    return r % bound;
}
