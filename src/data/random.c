/* random.c — the data pipeline's draws from the shared splitmix64 (rng_next in util.c, a fixed,
 * portable generator, so orders are the same on every machine): unbiased bounded draws, and the
 * Fisher-Yates permutation that shuffling, the train/eval split and the sampler use. */
#include "data_internal.h"

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
