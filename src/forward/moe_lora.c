/* moe_lora.c — LoRA on a sparse layer's experts, as PEFT's target_parameters adapts the fused expert weights
 * (ParamWrapper on mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj [E, H, I]): each expert e gets
 * its own delta s·Bₑ Aₑ added to its weight. ptrain keeps the pair as A [E·r, in] and B [E·out, r] with expert
 * e's rows at e·r and e·out (peft.c moves B to and from PEFT's [out, E·r]), so each expert's factors are row
 * views, and applies the delta to the expert's rows only (x Wₑᵀ + s (x Aₑᵀ) Bₑᵀ, never forming W + ΔW): over
 * the rows forward_moe sorted by expert, grouped as the base products are (backend_moe_matmul and its backward
 * twins over per-expert views of A and B: one pass over the experts on the CPU, a product per expert elsewhere), in
 * expert order. Backend products, so the CUDA backend runs the same calls. */
#include <stdlib.h>

#include "ptrain/forward.h"

/* Per-expert row views of p's factors: v[e] A's [r, in], v[n + e] B's first split rows, v[2n + e] the rest. */
static pt_tensor *factor_views(const adapter_pair *p, int n_exp, int64_t split)
{
    int64_t out = p->b.shape[0] / n_exp;
    pt_tensor *v = malloc(sizeof(pt_tensor) * 3 * (size_t)n_exp);
    for (int e = 0; v && e < n_exp; e++) {
        v[e] = tensor_rows(&p->a, (int64_t)e * p->r, p->r);
        v[n_exp + e] = tensor_rows(&p->b, e * out, split);
        v[2 * n_exp + e] = tensor_rows(&p->b, e * out + split, out - split);
    }
    return v;
}

static pt_status lora_fwd(pt_backend *be, const adapter_pair *p, const pt_tensor *v, const int64_t *offset, int n_exp,
                          const pt_tensor *x, pt_tensor *xs, pt_tensor *y0, pt_tensor *y1)
{
    pt_tensor u = adapter_narrow(xs, p->r);
    TRY(backend_moe_matmul(be, &u, x, v, 1, offset, n_exp));
    TRY(backend_scale(be, &u, p->scale));
    TRY(backend_moe_matmul_beta(be, y0, &u, v + n_exp, 1, offset, n_exp, 1.0f));
    return y1 ? backend_moe_matmul_beta(be, y1, &u, v + 2 * n_exp, 1, offset, n_exp, 1.0f) : PT_OK;
}

pt_status forward_experts_lora(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                               const pt_tensor *x, pt_tensor *xs, pt_tensor *y0, pt_tensor *y1, int64_t split)
{
    pt_tensor *v = factor_views(p, n_exp, split);
    TRY_ALLOC(v);
    pt_status st = lora_fwd(be, p, v, offset, n_exp, x, xs, y0, y1);
    free(v);
    return st;
}

/* The gradient views of the experts' A (ga[e]) and B's two parts (gb[e], gb[n + e]). */
static void grad_views(const adapter_pair *p, int n_exp, int64_t split, pt_tensor *grad_a, pt_tensor *grad_b,
                       pt_tensor *g)
{
    int64_t out = p->b.shape[0] / n_exp;
    for (int e = 0; e < n_exp; e++) {
        g[e] = tensor_rows(grad_a, (int64_t)e * p->r, p->r);
        g[n_exp + e] = tensor_rows(grad_b, e * out, split);
        g[2 * n_exp + e] = tensor_rows(grad_b, e * out + split, out - split);
    }
}

static pt_status lora_bwd(pt_backend *be, const adapter_pair *p, const pt_tensor *v, pt_tensor *g,
                          const int64_t *offset, int n_exp, const pt_tensor *dy0, const pt_tensor *dy1, pt_tensor *xs,
                          const pt_tensor *x)
{
    pt_tensor u = adapter_narrow(xs, p->r);
    TRY(backend_moe_matmul_bwd_weight(be, g + n_exp, dy0, &u, offset, n_exp, 0.0f));
    if (dy1) TRY(backend_moe_matmul_bwd_weight(be, g + 2 * n_exp, dy1, &u, offset, n_exp, 0.0f));
    TRY(backend_moe_matmul_bwd_input(be, &u, dy0, v + n_exp, 1, offset, n_exp, 0.0f)); /* u read no more: t */
    if (dy1) TRY(backend_moe_matmul_bwd_input(be, &u, dy1, v + 2 * n_exp, 1, offset, n_exp, 1.0f));
    TRY(backend_scale(be, &u, p->scale));
    TRY(backend_moe_matmul_bwd_weight(be, g, &u, x, offset, n_exp, 0.0f));
    for (int e = 0; e < n_exp; e++) { /* no rows: no gradient this micro-batch */
        if (offset[e + 1] > offset[e]) continue;
        TRY(backend_zero(be, &g[e]));
        TRY(backend_zero(be, &g[n_exp + e]));
        if (g[2 * n_exp + e].shape[0] > 0) TRY(backend_zero(be, &g[2 * n_exp + e]));
    }
    return PT_OK;
}

pt_status backward_experts_lora_weights(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                                        const pt_tensor *dy0, const pt_tensor *dy1, int64_t split, pt_tensor *xs,
                                        const pt_tensor *x, pt_tensor *grad_a, pt_tensor *grad_b)
{
    pt_tensor *v = factor_views(p, n_exp, split), *g = malloc(sizeof(pt_tensor) * 3 * (size_t)n_exp);
    pt_status st = v && g ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) grad_views(p, n_exp, split, grad_a, grad_b, g);
    if (st == PT_OK) st = lora_bwd(be, p, v, g, offset, n_exp, dy0, dy1, xs, x);
    free(v), free(g);
    return st;
}

pt_status backward_experts_lora_input(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                                      const pt_tensor *t, pt_tensor *dx)
{
    pt_tensor *v = factor_views(p, n_exp, p->b.shape[0] / n_exp);
    TRY_ALLOC(v);
    pt_tensor te = adapter_narrow(t, p->r);
    pt_status st = backend_moe_matmul_bwd_input(be, dx, &te, v, 1, offset, n_exp, 1.0f);
    free(v);
    return st;
}
