/* memplan.c — the per-rank memory plan of a training run (memplan.h). The activations are the
 * arena step.c takes every buffer of a micro-batch (and of an evaluation batch) from, sized by a dry
 * run of the same code (step_arena_bytes): the residual stream, each layer's activations (one
 * layer's with gradient checkpointing), the adapters' s·x·Aᵀ, the loss head's chunk of logits and
 * the backward pass's gradients. On CUDA the workspace is the GEMMs' (cuda/matmul.cu, cuda/lt.cu):
 * the bf16 scratch at its largest and the 32 MiB cuBLASLt workspace, and with checkpointing the
 * weight cache: one layer's seven projections in bf16 (cuda/wcache.cu). The Gated DeltaNet layers' backward (qwen35)
 * takes its chunk start states and chunk buffers besides (backend_delta_chunk_bwd_bytes). */
#ifdef HAVE_CONFIG_H
#include <config.h> /* PTRAIN_HAVE_CUDA */
#endif
#include "ptrain/memplan.h"

#include "ptrain/log.h"

#define MIB (1024.0 * 1024.0)

static size_t max_size(size_t a, size_t b) { return a > b ? a : b; }
static size_t round128(size_t v) { return (v + 127) / 128 * 128; }

/* The CUDA GEMMs' bf16 scratch (cuda/matmul.cu), in values: the two operands of the largest GEMM,
 * the first rounded up to 128 values (the second starts on 256 bytes). A base-weight GEMM stages
 * its activations (a layer's rows x widest at most, or the LM head's logit gradient over one loss
 * chunk) and one dequantized tile; an adapter GEMM two of: activations (rows x widest at most),
 * the adapter (widest x r) and a rank-wide activation or gradient (rows x r). */
static size_t cuda_scratch_elems(const pt_model_config *g, const pt_memplan_shape *s, size_t rows, size_t widest)
{
    size_t layer = rows * widest, head = (size_t)s->loss_chunk * (size_t)g->vocab;
    size_t base = round128(max_size(layer, head)) + PT_CUDA_TILE_ELEMS;
    size_t lora = round128(layer) + round128(max_size(rows, widest) * (size_t)s->lora_r);
    return max_size(base, lora);
}

/* One layer's q, k, v, o, gate, up and down projections in bf16. */
static size_t layer_weights_bf16(const pt_model_config *g)
{
    size_t dim = (size_t)g->dim, qw = (size_t)model_max_q_width(g); /* the widest layer's (gemma4's global) */
    size_t kw = (size_t)model_max_kv_width(g), ffn = (size_t)g->ffn_dim;
    return 2 * (dim * (qw + 2 * kw) + qw * dim + 3 * dim * ffn);
}

void memplan_compute(const pt_model_config *g, size_t weight_bytes, const pt_memplan_shape *s, pt_memplan *out)
{
    size_t rows = max_size((size_t)(s->batch * s->seq), (size_t)s->eval_rows), f = sizeof(float);
    int64_t qw = model_max_q_width(g);
    size_t widest = max_size(max_size((size_t)g->ffn_dim, (size_t)qw), (size_t)g->dim);
    out->weights = weight_bytes;
    out->adapters = (size_t)s->lora_params * 4 * f;
    out->activations = s->arena_bytes;
    out->offloaded = s->offload_bytes;
    out->workspace = 0;
    out->weight_cache = s->cuda && s->checkpointing ? layer_weights_bf16(g) : 0;
    if (s->cuda) /* the scratch, grown to its largest, the workspace taken at open, the weight cache */
        out->workspace = cuda_scratch_elems(g, s, rows, widest) * 2 + PT_CUDA_GEMM_WORKSPACE_BYTES + out->weight_cache;
    out->states = s->states_bytes;
    out->total = out->weights + out->adapters + out->activations + out->workspace + out->states;
}

/* qwen35: the delta rule backward's states of a micro-batch (batch sequences of seq) on its DeltaNet layers */
static size_t states_of(const pt_model_config *g, int64_t batch, int64_t seq)
{
    if (g->full_period <= 0 || g->lin_v_heads <= 0) return 0;
    pt_delta d = {.batch = (int)batch, .seq = (int)seq, .k_heads = g->lin_k_heads, .v_heads = g->lin_v_heads,
                  .k_dim = g->lin_k_dim, .v_dim = g->lin_v_dim, .conv = g->lin_conv};
    return backend_delta_chunk_bwd_bytes(&d);
}

void memplan_of_run(const pt_model *m, const pt_adapter *ad, const step_options *so, const pt_memplan_run *r,
                    pt_memplan *out)
{
    int64_t rows = r->batch * r->seq;
    size_t arena = step_arena_bytes(m, ad, rows, so);
    pt_dtype act = so->act;
    size_t eval = r->eval_rows > 0 ? step_loss_arena_bytes(m, ad, r->eval_rows, act) : 0;
    pt_memplan_shape s = {.batch = r->batch, .seq = r->seq, .eval_rows = r->eval_rows,
                          .lora_params = r->lora_params, .lora_r = ad->r_max, .arena_bytes = arena > eval ? arena : eval,
                          .offload_bytes = so->checkpointing && so->offload ? step_offload_bytes(m, rows, act) : 0,
                          .loss_chunk = so->loss_chunk, .cuda = r->cuda, .checkpointing = so->checkpointing,
                          .states_bytes = states_of(&m->cfg, r->batch, r->seq)};
    memplan_compute(&m->cfg, r->weight_bytes, &s, out);
}

void memplan_print(const pt_memplan *p, const char *device)
{
    log_info("memory plan: %zu bytes on %s (%.1f MiB: weights %.1f, adapters + optimizer %.1f, activations %.1f, "
             "workspace %.1f)\n", p->total, device, p->total / MIB, p->weights / MIB, p->adapters / MIB,
             p->activations / MIB, p->workspace / MIB);
    if (p->states)
        log_info("memory plan: of it %zu bytes for the Gated DeltaNet layers' recurrent states in the backward pass "
                 "(%.1f MiB: kept every 64 tokens and one chunk recomputed, per sequence and value head)\n", p->states,
                 p->states / MIB);
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
    /* the weights and the GEMM workspace are on the device already: the rest of the workspace is scratch */
    size_t scratch = p->workspace - PT_CUDA_GEMM_WORKSPACE_BYTES;
    size_t need = p->adapters + p->activations + scratch + p->states;
    if (need > free_b)
        return ERR(PT_ERR_USER, "this run needs about %.1f MiB more on GPU %d (adapters + optimizer %.1f, activations "
                   "%.1f, GEMM scratch and weight cache %.1f) but only %.1f of %.1f MiB are free after the %.1f MiB of weights and "
                   "the %.1f MiB GEMM workspace; lower per_device_train_batch_size or max_seq_length, or set "
                   "use_gradient_checkpointing: true (or \"unsloth\", which keeps the layer inputs in host memory)",
                   need / MIB, be->device, p->adapters / MIB, p->activations / MIB, scratch / MIB, free_b / MIB,
                   total_b / MIB, p->weights / MIB, PT_CUDA_GEMM_WORKSPACE_BYTES / MIB);
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
