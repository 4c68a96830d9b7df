/* wcache.cu — dequantized base weights kept for reuse within a pass (issue 26, point 5). With
 * gradient checkpointing the backward pass of a layer first recomputes its forward (every
 * projection's weight dequantized once) and then multiplies by the same weights again for the
 * input gradients: a cache of about one layer's weights in bf16 turns that second dequantization
 * into a lookup. The cache is least-recently-used, keyed by the stored weight's address (base
 * weights are frozen: a key never goes stale while the model lives), its budget set by the caller
 * (backend_weight_cache; 0, the default, keeps it off), its slots taken from the stream-ordered
 * pool and given back there on eviction. PTRAIN_CUDA_KERNELS=reference never caches. Only
 * quantized and f16 weights are cached: bf16 ones are used in place, fp32 ones are the adapters,
 * which change every step. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdlib.h>

#include "cuda_backend.h"

typedef struct {
    const void *key; /* the stored weight's data */
    __nv_bfloat16 *data;
    size_t elems;
    uint64_t used; /* the clock at its last use */
} wc_entry;

struct cuda_wcache {
    wc_entry *e;
    int n, cap;
    size_t budget, bytes; /* bytes allowed and held */
    uint64_t clock;
    long hits, misses;
};

static void entry_drop(cuda_ctx *c, int i)
{
    struct cuda_wcache *w = c->wcache;
    cudaFreeAsync(w->e[i].data, c->stream); /* after the work queued so far: stream order */
    w->bytes -= w->e[i].elems * sizeof(__nv_bfloat16);
    w->e[i] = w->e[--w->n];
}

static void cache_clear(cuda_ctx *c)
{
    while (c->wcache && c->wcache->n) entry_drop(c, 0);
}

pt_status cuda_weight_cache(pt_backend *be, size_t bytes)
{
    cuda_ctx *c = ctx_of(be);
    if (!c->wcache) {
        c->wcache = (struct cuda_wcache *)calloc(1, sizeof *c->wcache);
        TRY_ALLOC(c->wcache);
    }
    cache_clear(c);
    c->wcache->budget = c->reference ? 0 : bytes;
    return PT_OK;
}

void cuda_wcache_close(cuda_ctx *c)
{
    if (!c->wcache) return;
    cache_clear(c);
    free(c->wcache->e);
    free(c->wcache);
    c->wcache = NULL;
}

/* Room for elems more values: the least recently used entries dropped until they fit. */
static pt_status make_room(cuda_ctx *c, size_t elems)
{
    struct cuda_wcache *w = c->wcache;
    while (w->n && w->bytes + elems * sizeof(__nv_bfloat16) > w->budget) {
        int lru = 0;
        for (int i = 1; i < w->n; i++)
            if (w->e[i].used < w->e[lru].used) lru = i;
        entry_drop(c, lru);
    }
    if (w->n == w->cap) {
        int cap = w->cap ? 2 * w->cap : 16;
        wc_entry *grown = (wc_entry *)realloc(w->e, sizeof *grown * (size_t)cap);
        TRY_ALLOC(grown);
        w->e = grown;
        w->cap = cap;
    }
    return PT_OK;
}

pt_status cuda_wcache_get(cuda_ctx *c, const pt_tensor *w, const __nv_bfloat16 **out)
{
    struct cuda_wcache *wc = c->wcache;
    size_t elems = (size_t)(w->shape[0] * w->shape[1]);
    *out = NULL;
    if (!wc || elems * sizeof(__nv_bfloat16) > wc->budget || w->dtype == PT_F32 || w->dtype == PT_BF16) return PT_OK;
    wc->clock++;
    for (int i = 0; i < wc->n; i++)
        if (wc->e[i].key == w->data && wc->e[i].elems == elems) {
            wc->e[i].used = wc->clock;
            wc->hits++;
            *out = wc->e[i].data;
            return PT_OK;
        }
    TRY(make_room(c, elems));
    wc_entry e = {w->data, NULL, elems, wc->clock};
    CUDA_TRY(cudaMallocAsync((void **)&e.data, elems * sizeof(__nv_bfloat16), c->stream));
    pt_status st = cuda_dequant_rows(c, w, NULL, 0, w->shape[0], e.data, NULL);
    if (st != PT_OK) {
        cudaFreeAsync(e.data, c->stream);
        return st;
    }
    wc->e[wc->n++] = e;
    wc->bytes += elems * sizeof(__nv_bfloat16);
    wc->misses++;
    *out = e.data;
    return PT_OK;
}

/* For tests/unit/test_cuda_ops: lookups that found the weight, and that dequantized it. */
extern "C" void cuda_wcache_stats(pt_backend *be, long *hits, long *misses)
{
    cuda_ctx *c = ctx_of(be);
    *hits = c->wcache ? c->wcache->hits : 0;
    *misses = c->wcache ? c->wcache->misses : 0;
}
