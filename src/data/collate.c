/* collate.c — a micro-batch as the training step takes it. The default layout is padding-free:
 * the examples are laid end to end in one row (as transformers' DataCollatorWithFlattening and
 * FlashAttention's varlen interface do), each keeping its own segment id, rotary positions that
 * restart at 0 and targets that never cross into the next example, so attention stays inside each
 * example and no arithmetic is spent on padding. The padded layout (one row per example,
 * right-padded to the longest) gives the same losses and gradients on the real tokens; the tests
 * compare the two. */
#include <stdlib.h>

#include "data_internal.h"

static pt_status batch_alloc(pt_batch *out, int rows, int cols)
{
    size_t cells = (size_t)rows * (size_t)cols + 1;
    *out = (pt_batch){.rows = rows, .cols = cols};
    out->ids = malloc(sizeof(int32_t) * cells);
    out->labels = malloc(sizeof(int32_t) * cells);
    out->targets = malloc(sizeof(int32_t) * cells);
    out->pos = malloc(sizeof(int32_t) * cells);
    out->segments = malloc(sizeof(int32_t) * cells);
    if (!out->ids || !out->labels || !out->targets || !out->pos || !out->segments) {
        batch_free(out);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

/* Write ex at cells [at, at+ex->len) with segment ids seg_base + its own (1 when not packed);
 * returns the last segment id used. */
static int32_t put_example(const pt_example *ex, pt_batch *b, size_t at, int32_t seg_base)
{
    int32_t last = seg_base;
    for (int t = 0; t < ex->len; t++) {
        size_t c = at + (size_t)t;
        b->ids[c] = ex->ids[t];
        b->labels[c] = ex->labels[t];
        b->segments[c] = seg_base + (ex->segments ? ex->segments[t] : 1);
        b->pos[c] = t > 0 && b->segments[c] == b->segments[c - 1] ? b->pos[c - 1] + 1 : 0;
        if (b->segments[c] > last) last = b->segments[c];
    }
    for (int t = 0; t < ex->len; t++) {
        size_t c = at + (size_t)t;
        bool next = t + 1 < ex->len && b->segments[c + 1] == b->segments[c];
        b->targets[c] = next ? b->labels[c + 1] : PT_IGNORE_INDEX;
    }
    return last;
}

static pt_status check_indices(const pt_dataset *ds, const size_t *idx, size_t n)
{
    for (size_t r = 0; r < n; r++)
        if (idx[r] >= ds->n) return ERR(PT_ERR_INTERNAL, "batch_collate: example %zu of %zu", idx[r], ds->n);
    return PT_OK;
}

pt_status batch_collate(const pt_dataset *ds, const size_t *idx, size_t n, pt_batch *out)
{
    *out = (pt_batch){0};
    TRY(check_indices(ds, idx, n));
    size_t total = 0;
    for (size_t r = 0; r < n; r++) total += (size_t)ds->ex[idx[r]].len;
    if (total > (size_t)INT32_MAX) return ERR(PT_ERR_USER, "a micro-batch of %zu tokens is too long", total);
    TRY(batch_alloc(out, 1, total > 0 ? (int)total : 1));
    out->margin = malloc(sizeof(float) * (n + 1));
    if (!out->margin) {
        batch_free(out);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    for (size_t r = 0; r < n; r++) out->margin[r] = ds->ex[idx[r]].margin;
    if (total == 0) { /* no example has a token: one ignored cell keeps the shapes valid */
        out->ids[0] = 0, out->labels[0] = out->targets[0] = PT_IGNORE_INDEX, out->pos[0] = 0, out->segments[0] = 1;
        return PT_OK;
    }
    size_t at = 0;
    int32_t seg = 0;
    for (size_t r = 0; r < n; r++) {
        seg = put_example(&ds->ex[idx[r]], out, at, seg);
        at += (size_t)ds->ex[idx[r]].len;
    }
    return PT_OK;
}

pt_status batch_collate_padded(const pt_dataset *ds, const size_t *idx, size_t n, int32_t pad_id, pt_batch *out)
{
    *out = (pt_batch){0};
    TRY(check_indices(ds, idx, n));
    int cols = 1;
    for (size_t r = 0; r < n; r++)
        if (ds->ex[idx[r]].len > cols) cols = ds->ex[idx[r]].len;
    TRY(batch_alloc(out, (int)n, cols));
    for (size_t r = 0; r < n; r++) {
        const pt_example *ex = &ds->ex[idx[r]];
        size_t row = r * (size_t)cols;
        put_example(ex, out, row, 0);
        for (int t = ex->len; t < cols; t++) { /* padding: its own segment 0, never a target */
            out->ids[row + t] = pad_id;
            out->labels[row + t] = out->targets[row + t] = PT_IGNORE_INDEX;
            out->segments[row + t] = 0;
            out->pos[row + t] = 0;
        }
    }
    return PT_OK;
}

void batch_free(pt_batch *b)
{
    free(b->ids);
    free(b->labels);
    free(b->targets);
    free(b->pos);
    free(b->segments);
    free(b->margin);
    *b = (pt_batch){0};
}
