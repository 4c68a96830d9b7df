/* memplan.c — the per-rank memory plan of a training run (memplan.h). The activation count follows
 * step.c's buffers: per layer the normed inputs, q, k, v, the attention output and its log-sum-exp,
 * the residual, gate, up and their product, the rstds, the post-norm outputs (Gemma 2) and the
 * adapters' s·x·Aᵀ; with gradient checkpointing only each layer's input plus one layer's buffers.
 * Everything is fp32 at the seam, so 4 bytes a value. */
#ifdef HAVE_CONFIG_H
#include <config.h> /* PTRAIN_HAVE_CUDA */
#endif
#include "ptrain/memplan.h"

#include "ptrain/log.h"

#define MIB (1024.0 * 1024.0)

static size_t layer_values(const pt_model_config *g, const pt_memplan_shape *s)
{
    int64_t qw = (int64_t)g->n_heads * g->head_dim, kw = (int64_t)g->n_kv_heads * g->head_dim;
    int64_t width = 3 * g->dim + 2 * qw + 2 * kw + 3 * g->ffn_dim + 2 + g->n_heads + (int64_t)s->adapted * s->lora_r;
    if (g->post_norms) width += 2 * g->dim + 2;
    return (size_t)width;
}

void memplan_compute(const pt_model_config *g, size_t weight_bytes, const pt_memplan_shape *s, pt_memplan *out)
{
    size_t n = (size_t)(s->batch * s->seq), f = sizeof(float);
    int64_t qw = (int64_t)g->n_heads * g->head_dim, kw = (int64_t)g->n_kv_heads * g->head_dim;
    size_t kept_layers = s->checkpointing ? 1 : (size_t)g->n_layers;
    size_t residuals = (size_t)(g->n_layers + 1) * n * (size_t)g->dim * f;
    size_t grads = n * (size_t)(2 * g->ffn_dim + 2 * g->dim + 2 * qw + 2 * kw + s->lora_r) * f;
    size_t widest = (size_t)(g->ffn_dim > qw ? g->ffn_dim : qw);
    if ((size_t)g->dim > widest) widest = (size_t)g->dim;
    out->weights = weight_bytes;
    out->adapters = (size_t)s->lora_params * 4 * f;
    out->activations = residuals + kept_layers * n * layer_values(g, s) * f + grads + n * widest * f /* dropout */ +
                       3 * n * (size_t)g->dim * f /* loss head: normed states, their gradient */;
    out->workspace = 2 * (size_t)s->loss_chunk * (size_t)g->vocab * f;
    if (s->cuda) { /* bf16 operands of the largest matmul (a layer's, or the LM head's over one chunk of
                    * logit rows), one dequantized weight tile, cuBLAS's workspace */
        size_t layer = n * widest * 2, head = (size_t)s->loss_chunk * (size_t)g->vocab * 2;
        out->workspace += (layer > head ? layer : head) + (32u << 20) + (32u << 20);
    }
    out->total = out->weights + out->adapters + out->activations + out->workspace;
}

void memplan_print(const pt_memplan *p, const char *device)
{
    log_info("memory plan: %zu bytes on %s (%.1f MiB: weights %.1f, adapters + optimizer %.1f, activations %.1f, "
             "workspace %.1f)\n", p->total, device, p->total / MIB, p->weights / MIB, p->adapters / MIB,
             p->activations / MIB, p->workspace / MIB);
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
                   "per_device_train_batch_size or max_seq_length, or set use_gradient_checkpointing: true",
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
