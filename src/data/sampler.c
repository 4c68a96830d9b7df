/* sampler.c — the per-rank order of one epoch, as PyTorch's DistributedSampler (shuffle, no
 * drop_last) under a DataLoader without drop_last: a permutation seeded by seed + epoch, wrapped
 * around to a multiple of world, rank r taking every world-th index from r, then consecutive
 * micro-batches. The generator is ptrain's own (random.c), so the orders differ from torch's. */
#include <stdlib.h>

#include "data_internal.h"

pt_status sampler_init(pt_sampler *s, size_t n_examples, int rank, int world, long batch_size)
{
    *s = (pt_sampler){.epoch = -1};
    if (world < 1 || rank < 0 || rank >= world)
        return ERR(PT_ERR_INTERNAL, "sampler: rank %d of %d ranks", rank, world);
    if (batch_size < 1)
        return ERR(PT_ERR_USER, "per_device_train_batch_size must be at least 1, found %ld", batch_size);
    if (n_examples == 0) return ERR(PT_ERR_USER, "there are no training examples to sample");
    s->n_examples = n_examples;
    s->rank = rank;
    s->world = world;
    s->batch_size = batch_size;
    s->n = (n_examples + (size_t)world - 1) / (size_t)world;
    s->idx = malloc(sizeof *s->idx * s->n);
    if (!s->idx) return ERR(PT_ERR_NOMEM, "out of memory");
    return PT_OK;
}

pt_status sampler_epoch(pt_sampler *s, uint64_t seed, long epoch)
{
    if (!s->idx) return ERR(PT_ERR_INTERNAL, "sampler_epoch before sampler_init");
    size_t *perm = malloc(sizeof *perm * s->n_examples);
    if (!perm) return ERR(PT_ERR_NOMEM, "out of memory");
    rng_permutation(s->n_examples, seed + (uint64_t)epoch, perm);
    for (size_t i = 0; i < s->n; i++) s->idx[i] = perm[((size_t)s->rank + i * (size_t)s->world) % s->n_examples];
    free(perm);
    s->epoch = epoch;
    return PT_OK;
}

size_t sampler_batches(const pt_sampler *s)
{
    size_t b = (size_t)s->batch_size;
    return b ? (s->n + b - 1) / b : 0;
}

size_t sampler_batch(const pt_sampler *s, size_t b, const size_t **idx)
{
    size_t from = b * (size_t)s->batch_size;
    *idx = s->idx + (from < s->n ? from : s->n);
    if (from >= s->n) return 0;
    size_t left = s->n - from;
    return left < (size_t)s->batch_size ? left : (size_t)s->batch_size;
}

void sampler_free(pt_sampler *s)
{
    free(s->idx);
    *s = (pt_sampler){.epoch = -1};
}
