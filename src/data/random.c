/* random.c — the one random source of the data pipeline: splitmix64 (a fixed, portable
 * generator, so orders are the same on every machine), unbiased bounded draws, and the
 * Fisher-Yates permutation that shuffling, the train/eval split and the sampler use. */
#include "data_internal.h"

uint64_t rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

uint64_t rng_below(uint64_t *state, uint64_t n)
{
    uint64_t threshold = (0 - n) % n; /* 2^64 mod n: reject the short last stretch */
    for (;;) {
        uint64_t r = rng_next(state);
        if (r >= threshold) return r % n;
    }
}

void rng_permutation(size_t n, uint64_t seed, size_t *out)
{
    uint64_t state = seed;
    for (size_t i = 0; i < n; i++) out[i] = i;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(&state, i);
        size_t t = out[i - 1];
        out[i - 1] = out[j];
        out[j] = t;
    }
}
