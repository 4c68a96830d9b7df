/* collate.c — a micro-batch as the training step takes it: the examples right-padded to the
 * longest, the shifted targets (never crossing a packed example's boundary), rotary positions
 * restarting per packed example, and the segment ids attention masks with. */
#include <stdlib.h>

#include "data_internal.h"

static void fill_row(const pt_example *ex, int cols, int32_t pad_id, pt_batch *b, size_t row)
{
    int32_t *ids = b->ids + row * (size_t)cols, *labels = b->labels + row * (size_t)cols;
    int32_t *targets = b->targets + row * (size_t)cols, *pos = b->pos + row * (size_t)cols;
    int32_t *seg = b->segments + row * (size_t)cols;
    for (int t = 0; t < cols; t++) {
        bool real = t < ex->len;
        ids[t] = real ? ex->ids[t] : pad_id;
        labels[t] = real ? ex->labels[t] : PT_IGNORE_INDEX;
        seg[t] = real ? (ex->segments ? ex->segments[t] : 1) : 0;
        pos[t] = real && t > 0 && seg[t] == seg[t - 1] ? pos[t - 1] + 1 : 0;
    }
    for (int t = 0; t < cols; t++) {
        bool next = t + 1 < ex->len && seg[t + 1] == seg[t];
        targets[t] = next ? labels[t + 1] : PT_IGNORE_INDEX;
    }
}

pt_status batch_collate(const pt_dataset *ds, const size_t *idx, size_t n, int32_t pad_id, pt_batch *out)
{
    *out = (pt_batch){0};
    int cols = 1;
    for (size_t r = 0; r < n; r++) {
        if (idx[r] >= ds->n) return ERR(PT_ERR_INTERNAL, "batch_collate: example %zu of %zu", idx[r], ds->n);
        if (ds->ex[idx[r]].len > cols) cols = ds->ex[idx[r]].len;
    }
    size_t cells = n * (size_t)cols + 1;
    out->rows = (int)n;
    out->cols = cols;
    out->ids = malloc(sizeof(int32_t) * cells);
    out->labels = malloc(sizeof(int32_t) * cells);
    out->targets = malloc(sizeof(int32_t) * cells);
    out->pos = malloc(sizeof(int32_t) * cells);
    out->segments = malloc(sizeof(int32_t) * cells);
    if (!out->ids || !out->labels || !out->targets || !out->pos || !out->segments) {
        batch_free(out);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    for (size_t r = 0; r < n; r++) fill_row(&ds->ex[idx[r]], cols, pad_id, out, r);
    return PT_OK;
}

void batch_free(pt_batch *b)
{
    free(b->ids);
    free(b->labels);
    free(b->targets);
    free(b->pos);
    free(b->segments);
    *b = (pt_batch){0};
}
