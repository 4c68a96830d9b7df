/* sampler.c — the per-rank micro-batches of one epoch, as HF Trainer (through Accelerate) hands
 * them out under several processes: the epoch's order is a permutation seeded by seed + epoch,
 * cut into batches of batch_size; rank r takes batches r, r + world, r + 2·world, ... With
 * several ranks the last round is completed from the start of the order so every rank runs the
 * same number of full batches (Accelerate's even_batches); one process keeps a short last batch
 * (a DataLoader without drop_last). So one optimizer step of W ranks × A accumulation covers the
 * same W·A consecutive batches as one process with accumulation W·A — the equivalence the
 * data-parallel test checks. A resumed epoch starts after the entries of the order that were
 * already consumed (sampler_epoch_from), whatever the world size was, so no example is seen twice
 * or skipped; with the same world size and batch, the batches are exactly those of the
 * uninterrupted run. A sequential sampler (KTO) takes the dataset's order in every epoch. The
 * generator is ptrain's own (random.c), so orders differ from torch's. With group_by_length the
 * permutation is grouped by length as transformers' LengthGroupedSampler does (a function of the
 * permutation alone, so a resume finds it again); a sequential sampler is not grouped, as TRL's
 * KTOTrainer ignores group_by_length. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

/* Indices per rank for m examples: all of them with one process, else whole batches. */
static size_t per_rank(size_t m, long batch_size, int world)
{
    size_t b = (size_t)batch_size, w = (size_t)world;
    return world == 1 ? m : (m + b * w - 1) / (b * w) * b;
}

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
    s->full = per_rank(n_examples, batch_size, world);
    s->n = s->full;
    s->idx = malloc(sizeof *s->idx * (s->full + 1));
    if (!s->idx) return ERR(PT_ERR_NOMEM, "out of memory");
    return PT_OK;
}

typedef struct {
    int32_t len;
    size_t at, idx; /* at: the place in the megabatch, for Python's stable sort */
} by_length;

static int longer_first(const void *a, const void *b)
{
    const by_length *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->at < y->at ? -1 : x->at > y->at;
}

pt_status sampler_group_order(size_t *perm, size_t n, const int32_t *lengths, long group)
{
    if (group < 1) return ERR(PT_ERR_INTERNAL, "group_by_length: a group of %ld", group);
    size_t mult = n / ((size_t)group * 4);
    if (mult > 50) mult = 50;
    if (mult == 0) mult = 1;
    size_t mb = mult * (size_t)group;
    by_length *tmp = malloc(sizeof *tmp * (mb < n ? mb : n) + 1);
    if (!tmp) return ERR(PT_ERR_NOMEM, "out of memory");
    size_t longest = 0; /* the megabatch whose first (longest) entry is longest; the first of equals */
    for (size_t start = 0; start < n; start += mb) {
        size_t m = n - start < mb ? n - start : mb;
        for (size_t i = 0; i < m; i++) tmp[i] = (by_length){lengths[perm[start + i]], i, perm[start + i]};
        qsort(tmp, m, sizeof *tmp, longer_first);
        for (size_t i = 0; i < m; i++) perm[start + i] = tmp[i].idx;
        if (lengths[perm[start]] > lengths[perm[longest]]) longest = start;
    }
    size_t first = perm[0];
    perm[0] = perm[longest], perm[longest] = first;
    free(tmp);
    return PT_OK;
}

pt_status sampler_group_by_length(pt_sampler *s, const pt_dataset *ds, long group)
{
    if (ds->n != s->n_examples) return ERR(PT_ERR_INTERNAL, "group_by_length: %zu examples, the sampler has %zu", ds->n, s->n_examples);
    free(s->lengths);
    s->lengths = malloc(sizeof *s->lengths * (ds->n + 1));
    if (!s->lengths) return ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < ds->n; i++) s->lengths[i] = ds->ex[i].len;
    s->group = group;
    return PT_OK;
}

pt_status sampler_epoch(pt_sampler *s, uint64_t seed, long epoch)
{
    return sampler_epoch_from(s, seed, epoch, 0);
}

pt_status sampler_epoch_from(pt_sampler *s, uint64_t seed, long epoch, size_t skip)
{
    if (!s->idx) return ERR(PT_ERR_INTERNAL, "sampler_epoch before sampler_init");
    if (skip > s->n_examples) skip = s->n_examples;
    size_t *perm = malloc(sizeof *perm * s->n_examples);
    if (!perm) return ERR(PT_ERR_NOMEM, "out of memory");
    if (s->sequential)
        for (size_t i = 0; i < s->n_examples; i++) perm[i] = i;
    else rng_permutation(s->n_examples, seed + (uint64_t)epoch, perm);
    pt_status st = PT_OK;
    if (s->lengths && !s->sequential) st = sampler_group_order(perm, s->n_examples, s->lengths, s->group);
    if (st != PT_OK) {
        free(perm);
        return st;
    }
    size_t b = (size_t)s->batch_size, w = (size_t)s->world, r = (size_t)s->rank;
    s->n = per_rank(s->n_examples - skip, s->batch_size, s->world);
    for (size_t i = 0; i < s->n; i++) { /* i-th index of this rank: batch i/b of its own */
        size_t global_batch = (i / b) * w + r;
        s->idx[i] = perm[(skip + global_batch * b + i % b) % s->n_examples];
    }
    free(perm);
    s->epoch = epoch;
    s->skip = skip;
    return PT_OK;
}

size_t sampler_seen(const pt_sampler *s, size_t batches_done)
{
    size_t seen = s->skip + batches_done * (size_t)s->batch_size * (size_t)s->world;
    return seen < s->n_examples ? seen : s->n_examples;
}

size_t sampler_full_batches(const pt_sampler *s)
{
    size_t b = (size_t)s->batch_size;
    return b ? (s->full + b - 1) / b : 0;
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
    free(s->lengths);
    *s = (pt_sampler){.epoch = -1};
}
