/* pack.c — packing (packing: true): whole examples placed into sequences of at most max_len
 * tokens by best-fit decreasing (longest first, ties in data order; each goes to the open
 * sequence it fills the most, the most recently opened among equals), then each sequence lists
 * its examples in data order and sequences are ordered by their first example. Segment ids
 * number the examples 1, 2, ... within a sequence; each example's first label is dropped so no
 * target crosses a boundary. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

typedef struct {
    const pt_example *ex;
    int32_t cap;    /* max_len */
    int *head;      /* [cap + 1]: an open bin with that much room left, linked through next */
    int *next;      /* [n]: per bin */
    int *room;      /* [n] */
    int *bin_of;    /* [n]: per example */
    int n_bins;
} packer;

typedef struct {
    int32_t len;
    size_t index;
} item;

static int by_length_desc(const void *a, const void *b)
{
    const item *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? 1 : -1;
    return x->index < y->index ? -1 : x->index > y->index;
}

static void bin_push(packer *p, int bin)
{
    p->next[bin] = p->head[p->room[bin]];
    p->head[p->room[bin]] = bin;
}

static void place(packer *p, size_t e)
{
    int32_t len = p->ex[e].len, room = len;
    while (room <= p->cap && p->head[room] < 0) room++;
    int bin;
    if (room <= p->cap) {
        bin = p->head[room];
        p->head[room] = p->next[bin];
    } else {
        bin = p->n_bins++;
        p->room[bin] = p->cap;
    }
    p->room[bin] -= len;
    p->bin_of[e] = bin;
    if (p->room[bin] > 0) bin_push(p, bin);
}

/* The bin of each example; returns the number of bins. */
static int assign_bins(const pt_dataset *ds, int *bin_of)
{
    packer p = {ds->ex, ds->max_len, malloc(sizeof(int) * ((size_t)ds->max_len + 1)), malloc(sizeof(int) * (ds->n + 1)),
                malloc(sizeof(int) * (ds->n + 1)), bin_of, 0};
    item *order = malloc(sizeof *order * (ds->n + 1));
    if (!p.head || !p.next || !p.room || !order) abort();
    for (int32_t c = 0; c <= p.cap; c++) p.head[c] = -1;
    for (size_t i = 0; i < ds->n; i++) order[i] = (item){ds->ex[i].len, i};
    qsort(order, ds->n, sizeof *order, by_length_desc);
    for (size_t i = 0; i < ds->n; i++) place(&p, order[i].index);
    free(order);
    free(p.head);
    free(p.next);
    free(p.room);
    return p.n_bins;
}

static void append(pt_example *seq, const pt_example *ex, int32_t segment)
{
    memcpy(seq->ids + seq->len, ex->ids, sizeof(int32_t) * (size_t)ex->len);
    memcpy(seq->labels + seq->len, ex->labels, sizeof(int32_t) * (size_t)ex->len);
    seq->labels[seq->len] = PT_IGNORE_INDEX;
    for (int32_t t = 0; t < ex->len; t++) seq->segments[seq->len + t] = segment;
    seq->len += ex->len;
}

/* Sequences in order of their first example (bins were opened in length order, not data order). */
static void build(const pt_dataset *ds, const int *bin_of, int n_bins, pt_example *seqs)
{
    int *rank = malloc(sizeof(int) * ((size_t)n_bins + 1)), next_rank = 0;
    int32_t *count = calloc((size_t)n_bins + 1, sizeof *count);
    if (!rank || !count) abort();
    for (int b = 0; b < n_bins; b++) rank[b] = -1;
    for (size_t i = 0; i < ds->n; i++) {
        if (rank[bin_of[i]] < 0) rank[bin_of[i]] = next_rank++;
        count[rank[bin_of[i]]] += ds->ex[i].len;
    }
    for (int s = 0; s < n_bins; s++) {
        size_t len = (size_t)count[s] + 1;
        seqs[s] = (pt_example){malloc(sizeof(int32_t) * len), malloc(sizeof(int32_t) * len),
                               malloc(sizeof(int32_t) * len), 0, 0.0f};
        if (!seqs[s].ids || !seqs[s].labels || !seqs[s].segments) abort();
        count[s] = 0; /* now: examples placed */
    }
    for (size_t i = 0; i < ds->n; i++) {
        int s = rank[bin_of[i]];
        append(&seqs[s], &ds->ex[i], ++count[s]);
    }
    free(rank);
    free(count);
}

pt_status dataset_pack(pt_dataset *ds)
{
    if (ds->packed) return ERR(PT_ERR_INTERNAL, "dataset_pack: already packed");
    if (ds->max_len < 1) return ERR(PT_ERR_INTERNAL, "dataset_pack: max_len %d", (int)ds->max_len);
    for (size_t i = 0; i < ds->n; i++)
        if (ds->ex[i].len > ds->max_len)
            return ERR(PT_ERR_INTERNAL, "dataset_pack: example %zu has %d tokens, more than %d", i, (int)ds->ex[i].len,
                       (int)ds->max_len);
    int *bin_of = malloc(sizeof(int) * (ds->n + 1));
    if (!bin_of) abort();
    int n_bins = assign_bins(ds, bin_of);
    pt_example *seqs = malloc(sizeof *seqs * ((size_t)n_bins + 1));
    if (!seqs) abort();
    build(ds, bin_of, n_bins, seqs);
    free(bin_of);
    for (size_t i = 0; i < ds->n; i++) example_free(&ds->ex[i]);
    free(ds->ex);
    ds->ex = seqs;
    ds->n = (size_t)n_bins;
    ds->packed = true;
    return PT_OK;
}
