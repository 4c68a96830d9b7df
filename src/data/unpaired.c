/* unpaired.c — KTO's data (dataset.h): the pairs of a preference dataset unrolled as TRL's
 * unpair_preference_dataset does (datasets' batched map of 1000 rows: each chunk's chosen, then
 * its rejected), and a micro-batch with the mismatched sequences TRL's KTOTrainer estimates the KL
 * term from: within a batch of n examples, example k's prompt with example k-1's completion
 * (example 0's with the last one's), as KTOTrainer's add_kl_completion_ids rotates the
 * completions of each batch of per_device_train_batch_size under its sequential sampler. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

#define UNPAIR_CHUNK 1000 /* datasets.map's default batch_size, which unpair_preference_dataset runs under */

/* The tokens of ex whose segment is seg, as an example of its own (segment ids kept). */
static pt_example sequence_of(const pt_example *ex, int32_t seg)
{
    int32_t n = 0, from = -1;
    for (int32_t t = 0; t < ex->len; t++)
        if (ex->segments[t] == seg) n++, from = from < 0 ? t : from;
    pt_example out = {malloc(sizeof(int32_t) * (size_t)(n + 1)), malloc(sizeof(int32_t) * (size_t)(n + 1)),
                      malloc(sizeof(int32_t) * (size_t)(n + 1)), n, 0.0f};
    if (!out.ids || !out.labels || !out.segments) abort();
    memcpy(out.ids, ex->ids + from, sizeof(int32_t) * (size_t)n);
    memcpy(out.labels, ex->labels + from, sizeof(int32_t) * (size_t)n);
    memcpy(out.segments, ex->segments + from, sizeof(int32_t) * (size_t)n);
    return out;
}

static bool is_pair(const pt_example *ex) { return ex->len > 0 && ex->segments[ex->len - 1] != ex->segments[0]; }

pt_status dataset_unpair(pt_dataset *ds)
{
    if (ds->backing) return ERR(PT_ERR_INTERNAL, "dataset_unpair: a dataset read from a cache is unrolled already");
    size_t pairs = 0;
    for (size_t i = 0; i < ds->n; i++) pairs += is_pair(&ds->ex[i]);
    if (pairs == 0) return PT_OK;
    pt_example *out = malloc(sizeof *out * (ds->n + pairs + 1));
    TRY_ALLOC(out);
    size_t k = 0;
    for (size_t c = 0; c < ds->n; c += UNPAIR_CHUNK) {
        size_t end = c + UNPAIR_CHUNK < ds->n ? c + UNPAIR_CHUNK : ds->n;
        for (size_t i = c; i < end; i++) out[k++] = is_pair(&ds->ex[i]) ? sequence_of(&ds->ex[i], 1) : ds->ex[i];
        for (size_t i = c; i < end; i++)
            if (is_pair(&ds->ex[i])) {
                out[k++] = sequence_of(&ds->ex[i], 2);
                example_free(&ds->ex[i]);
            }
    }
    free(ds->ex);
    ds->ex = out;
    ds->n = k;
    return PT_OK;
}

/* Where ex's completion starts: its first labelled token. */
static int32_t completion_start(const pt_example *ex)
{
    int32_t t = 0;
    while (t < ex->len && ex->labels[t] == PT_IGNORE_INDEX) t++;
    return t;
}

/* prompt[0..np) + completion[0..nc), cut to max_len, as segment seg at cell *at; the completion's
 * tokens are the targets of the tokens before them. */
static void put_sequence(pt_batch *b, size_t *at, const int32_t *prompt, int32_t np, const int32_t *completion,
                         int32_t nc, int32_t seg, int32_t max_len)
{
    int32_t n = np + nc < max_len ? np + nc : max_len;
    for (int32_t t = 0; t < n; t++) {
        size_t c = *at + (size_t)t;
        b->ids[c] = t < np ? prompt[t] : completion[t - np];
        b->labels[c] = t < np ? PT_IGNORE_INDEX : b->ids[c];
        b->segments[c] = seg;
        b->pos[c] = t;
    }
    for (int32_t t = 0; t < n; t++) {
        size_t c = *at + (size_t)t;
        b->targets[c] = t + 1 < n ? b->labels[c + 1] : PT_IGNORE_INDEX;
    }
    *at += (size_t)n;
}

pt_status batch_collate_unpaired(const pt_dataset *ds, const size_t *idx, size_t n, int32_t max_len, pt_batch *out)
{
    *out = (pt_batch){0};
    if (n == 0 || max_len < 1) return ERR(PT_ERR_INTERNAL, "batch_collate_unpaired: %zu examples", n);
    size_t total = 0;
    for (size_t k = 0; k < n; k++) {
        if (idx[k] >= ds->n) return ERR(PT_ERR_INTERNAL, "batch_collate_unpaired: example %zu of %zu", idx[k], ds->n);
        total += 2 * (size_t)max_len;
    }
    if (total > (size_t)INT32_MAX) return ERR(PT_ERR_USER, "a micro-batch of %zu tokens is too long", total);
    size_t cells = total + 1;
    *out = (pt_batch){.rows = 1};
    out->ids = malloc(sizeof(int32_t) * cells), out->labels = malloc(sizeof(int32_t) * cells);
    out->targets = malloc(sizeof(int32_t) * cells), out->pos = malloc(sizeof(int32_t) * cells);
    out->segments = malloc(sizeof(int32_t) * cells);
    if (!out->ids || !out->labels || !out->targets || !out->pos || !out->segments) {
        batch_free(out);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    size_t at = 0;
    for (size_t k = 0; k < n; k++) { /* the examples: slot k, 2k+1 desirable, 2k+2 undesirable */
        const pt_example *ex = &ds->ex[idx[k]];
        int32_t from = completion_start(ex);
        int32_t seg = 2 * (int32_t)k + (ex->len && ex->segments && ex->segments[0] == 2 ? 2 : 1);
        put_sequence(out, &at, ex->ids, from, ex->ids + from, ex->len - from, seg, max_len);
    }
    for (size_t k = 0; k < n; k++) { /* the KL sequences: k's prompt, k-1's completion */
        const pt_example *ex = &ds->ex[idx[k]], *other = &ds->ex[idx[k == 0 ? n - 1 : k - 1]];
        int32_t from = completion_start(ex), other_from = completion_start(other);
        put_sequence(out, &at, ex->ids, from, other->ids + other_from, other->len - other_from,
                     2 * (int32_t)n + 1 + (int32_t)k, max_len);
    }
    out->cols = at > 0 ? (int)at : 1;
    if (at == 0) out->ids[0] = 0, out->labels[0] = out->targets[0] = PT_IGNORE_INDEX, out->pos[0] = 0, out->segments[0] = 1;
    return PT_OK;
}
