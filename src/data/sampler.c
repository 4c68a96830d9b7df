/* sampler.c — the per-rank micro-batches of one epoch, as HF Trainer (through Accelerate) hands
 * them out under several processes: the epoch's order is a permutation seeded by seed + epoch,
 * cut into batches of batch_size; rank r takes batches r, r + world, r + 2·world, ... With
 * several ranks the last round is completed from the start of the order so every rank runs the
 * same number of full batches (Accelerate's even_batches); one process keeps a short last batch
 * (a DataLoader without drop_last). So one optimizer step of W ranks × A accumulation covers the
 * same W·A consecutive batches as one process with accumulation W·A — the equivalence the
 * data-parallel test checks. The generator is ptrain's own (random.c), so orders differ from
 * torch's. */
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
    size_t b = (size_t)batch_size, w = (size_t)world;
    size_t rounds = (n_examples + b * w - 1) / (b * w); /* batches per rank */
    s->n = world == 1 ? n_examples : rounds * b;
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
    size_t b = (size_t)s->batch_size, w = (size_t)s->world, r = (size_t)s->rank;
    for (size_t i = 0; i < s->n; i++) { /* i-th index of this rank: batch i/b of its own */
        size_t global_batch = (i / b) * w + r;
        s->idx[i] = perm[(global_batch * b + i % b) % s->n_examples];
    }
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
