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
