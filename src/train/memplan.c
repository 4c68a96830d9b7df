/* memplan.c — the per-rank memory plan of a training run (memplan.h). The activations are the
 * arena step.c takes every buffer of a micro-batch (and of an evaluation batch) from, sized by a dry
 * run of the same code (step_arena_bytes): the residual stream, each layer's activations (one
 * layer's with gradient checkpointing), the adapters' s·x·Aᵀ, the loss head's chunk of logits and
 * the backward pass's gradients. */
#ifdef HAVE_CONFIG_H
#include <config.h> /* PTRAIN_HAVE_CUDA */
#endif
#include "ptrain/memplan.h"

#include "ptrain/log.h"

#define MIB (1024.0 * 1024.0)

void memplan_compute(const pt_model_config *g, size_t weight_bytes, const pt_memplan_shape *s, pt_memplan *out)
{
    size_t n = (size_t)(s->batch * s->seq), f = sizeof(float);
    int64_t qw = (int64_t)g->n_heads * g->head_dim;
    size_t widest = (size_t)(g->ffn_dim > qw ? g->ffn_dim : qw);
    if ((size_t)g->dim > widest) widest = (size_t)g->dim;
    out->weights = weight_bytes;
    out->adapters = (size_t)s->lora_params * 4 * f;
    out->activations = s->arena_bytes;
    out->offloaded = s->offload_bytes;
    out->workspace = 0;
    if (s->cuda) { /* bf16 operands of the largest matmul (a layer's, or the LM head's over one chunk of
                    * logit rows), one dequantized weight tile, cuBLAS's workspace */
        size_t layer = n * widest * 2, head = (size_t)s->loss_chunk * (size_t)g->vocab * 2;
        out->workspace += (layer > head ? layer : head) + (32u << 20) + (32u << 20);
    }
    out->total = out->weights + out->adapters + out->activations + out->workspace;
}

void memplan_of_run(const pt_model *m, const pt_adapter *ad, const step_options *so, const pt_memplan_run *r,
                    pt_memplan *out)
{
    int64_t rows = r->batch * r->seq;
    size_t arena = step_arena_bytes(m, ad, rows, so);
    size_t eval = r->eval_rows > 0 ? step_loss_arena_bytes(m, ad, r->eval_rows) : 0;
    pt_memplan_shape s = {.batch = r->batch, .seq = r->seq, .lora_params = r->lora_params,
                          .arena_bytes = arena > eval ? arena : eval,
                          .offload_bytes = so->checkpointing && so->offload ? step_offload_bytes(m, rows) : 0,
                          .loss_chunk = so->loss_chunk, .cuda = r->cuda};
    memplan_compute(&m->cfg, r->weight_bytes, &s, out);
}

void memplan_print(const pt_memplan *p, const char *device)
{
    log_info("memory plan: %zu bytes on %s (%.1f MiB: weights %.1f, adapters + optimizer %.1f, activations %.1f, "
             "workspace %.1f)\n", p->total, device, p->total / MIB, p->weights / MIB, p->adapters / MIB,
             p->activations / MIB, p->workspace / MIB);
    if (p->offloaded)
        log_info("memory plan: %zu bytes of pinned host memory for the layer inputs (%.1f MiB; use_gradient_checkpointing: "
                 "unsloth)\n", p->offloaded, p->offloaded / MIB);
}

pt_status memplan_check(pt_backend *be, const pt_memplan *p)
{
#ifdef PTRAIN_HAVE_CUDA
    if (be->device < 0) return PT_OK;
    size_t free_b = 0, total_b = 0;
    TRY(cuda_mem_info(be, &free_b, &total_b));
    size_t need = p->total - p->weights; /* the weights are on the device already */
    if (need > free_b)
        return ERR(PT_ERR_USER, "this run needs about %.1f MiB more on GPU %d (adapters + optimizer %.1f, activations "
                   "%.1f, workspace %.1f) but only %.1f of %.1f MiB are free after the %.1f MiB of weights; lower "
                   "per_device_train_batch_size or max_seq_length, or set use_gradient_checkpointing: true (or \"unsloth\", "
                   "which keeps the layer inputs in host memory)",
                   need / MIB, be->device, p->adapters / MIB, p->activations / MIB, p->workspace / MIB, free_b / MIB,
                   total_b / MIB, p->weights / MIB);
#else
    (void)be;
    (void)p;
#endif
    return PT_OK;
}

size_t memplan_peak_bytes(pt_backend *be)
{
#ifdef PTRAIN_HAVE_CUDA
    if (be->device >= 0) return cuda_peak_bytes(be);
#else
    (void)be;
#endif
    return 0;
}
