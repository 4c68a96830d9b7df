/* split.c — the train/eval split by val_split_ratio: a seeded permutation of the examples, the
 * first ceil(ratio * n) of it for eval and the rest for train, as datasets' train_test_split. */
#include <math.h>
#include <stdlib.h>

#include "data_internal.h"

static void take(const pt_dataset *all, const size_t *perm, size_t from, size_t to, pt_dataset *out)
{
    out->ex = malloc(sizeof *out->ex * (to - from + 1));
    if (!out->ex) abort();
    for (size_t i = from; i < to; i++) out->ex[out->n++] = all->ex[perm[i]];
}

pt_status dataset_split(pt_dataset *all, double ratio, uint64_t seed, pt_dataset *train, pt_dataset *eval)
{
    size_t n = all->n;
    /* ratio * n can land a hair above an integer (0.7 * 10): round that away before the ceiling */
    size_t n_eval = ratio > 0 ? (size_t)ceil(ratio * (double)n - 1e-9) : 0;
    if (ratio > 0 && n_eval == 0)
        return ERR(PT_ERR_USER, "val_split_ratio %g: there are no examples to split", ratio);
    if (n_eval >= n && n)
        return ERR(PT_ERR_USER, "val_split_ratio %g leaves no training examples (%zu example%s, %zu for eval)", ratio,
                   n, n == 1 ? "" : "s", n_eval);
    size_t *perm = malloc(sizeof *perm * (n + 1));
    if (!perm) abort();
    if (n_eval) rng_permutation(n, seed, perm);
    else
        for (size_t i = 0; i < n; i++) perm[i] = i;
    *train = (pt_dataset){.max_len = all->max_len, .packed = all->packed, .stats = all->stats, .n_stats = all->n_stats};
    *eval = (pt_dataset){.max_len = all->max_len, .packed = all->packed};
    take(all, perm, n_eval, n, train);
    take(all, perm, 0, n_eval, eval);
    free(perm);
    free(all->ex);
    *all = (pt_dataset){0};
    return PT_OK;
}
