/* gradsync.c — accumulation over micro-batches and bucketed sums over ranks, one layer at a time
 * as the backward pass finishes it (see gradsync.h). Accumulation keeps the running sum in
 * l->grads_sum: the first micro-batch copies, the middle ones add, and the last adds the sum into
 * l->grads, where the optimizer (and the sum across ranks) reads it. */
#include "ptrain/gradsync.h"

#include "ptrain/progress.h"

void gradsync_init(gradsync *g, pt_lora *l, int world, long accum)
{
    *g = (gradsync){.l = l, .world = world, .accum = accum > 0 ? accum : 1, .bucket_top = -1};
}

void gradsync_begin_micro(gradsync *g, long micro)
{
    g->micro = micro;
    if (micro == 0) {
        g->bucket_top = -1;
        g->buckets = 0;
        g->comm_s = 0;
    }
}

/* This micro-batch's gradients of `layer` into the step's running sum. */
static pt_status accumulate(gradsync *g, int layer)
{
    pt_lora *l = g->l;
    pt_tensor cur = lora_grad_span(l, &l->grads, layer, layer), sum = lora_grad_span(l, &l->grads_sum, layer, layer);
    if (g->accum == 1 || tensor_numel(&cur) == 0) return PT_OK;
    if (g->micro == 0) return backend_copy(l->ad.be, &sum, &cur);
    if (g->micro < g->accum - 1) return backend_add(l->ad.be, &sum, &cur);
    return backend_add(l->ad.be, &cur, &sum);
}

pt_status gradsync_layer_done(void *arg, int layer)
{
    gradsync *g = arg;
    TRY(accumulate(g, layer));
    if (g->micro < g->accum - 1 || g->world == 1) return PT_OK;
    double t0 = progress_now();
    if (g->bucket_top < 0) g->bucket_top = layer;
    pt_tensor bucket = lora_grad_span(g->l, &g->l->grads, layer, g->bucket_top);
    pt_status st = PT_OK;
    if (bucket.nbytes >= GRADSYNC_BUCKET_BYTES || layer == 0) {
        if (tensor_numel(&bucket) > 0) st = backend_reduce_begin(g->l->ad.be, &bucket);
        g->bucket_top = -1;
        g->buckets++;
    }
    if (st == PT_OK) st = backend_reduce_poll(g->l->ad.be); /* move the open sums along */
    g->comm_s += progress_now() - t0;
    return st;
}

pt_status gradsync_finish(gradsync *g)
{
    if (g->world == 1) return PT_OK;
    double t0 = progress_now();
    pt_status st = backend_reduce_end(g->l->ad.be);
    g->comm_s += progress_now() - t0;
    return st;
}
