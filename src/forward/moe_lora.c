/* moe_lora.c — LoRA on a sparse layer's experts, as PEFT's target_parameters adapts the fused expert weights
 * (ParamWrapper on mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj [E, H, I]): each expert e gets
 * its own delta s·Bₑ Aₑ added to its weight. ptrain keeps the pair as A [E·r, in] and B [E·out, r] with expert
 * e's rows at e·r and e·out (peft.c moves B to and from PEFT's [out, E·r]), so each expert's factors are row
 * views, and applies the delta to the expert's rows only (x Wₑᵀ + s (x Aₑᵀ) Bₑᵀ, never forming W + ΔW): over
 * the rows forward_moe sorted by expert, one product per expert with rows, in expert order. Plain backend
 * products, so the CUDA backend runs the same calls. */
#include "ptrain/forward.h"

/* The row views of expert e: rows [offset[e], offset[e+1]) of t (t narrowed to r columns first when r > 0). */
static pt_tensor rows_of(const pt_tensor *t, const int64_t *offset, int e, int64_t r)
{
    pt_tensor v = r > 0 ? adapter_narrow(t, r) : *t;
    return tensor_rows(&v, offset[e], offset[e + 1] - offset[e]);
}

pt_status forward_experts_lora(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                               const pt_tensor *x, pt_tensor *xs, pt_tensor *y0, pt_tensor *y1, int64_t split)
{
    int64_t out = p->b.shape[0] / n_exp;
    for (int e = 0; e < n_exp; e++) {
        if (offset[e + 1] == offset[e]) continue;
        pt_tensor xe = rows_of(x, offset, e, 0), ue = rows_of(xs, offset, e, p->r);
        pt_tensor a = tensor_rows(&p->a, (int64_t)e * p->r, p->r), b0 = tensor_rows(&p->b, e * out, split);
        TRY(backend_matmul(be, &ue, &xe, &a, 0.0f));
        TRY(backend_scale(be, &ue, p->scale));
        pt_tensor y0e = rows_of(y0, offset, e, 0);
        TRY(backend_matmul(be, &y0e, &ue, &b0, 1.0f));
        if (!y1) continue;
        pt_tensor y1e = rows_of(y1, offset, e, 0), b1 = tensor_rows(&p->b, e * out + split, out - split);
        TRY(backend_matmul(be, &y1e, &ue, &b1, 1.0f));
    }
    return PT_OK;
}

/* Expert e's share of backward_experts_lora_weights (it has rows). */
static pt_status expert_weights(pt_backend *be, const adapter_pair *p, const int64_t *offset, int e,
                                const pt_tensor *dy0, const pt_tensor *dy1, int64_t split, pt_tensor *xs,
                                const pt_tensor *x, pt_tensor *grad_a, pt_tensor *grad_b)
{
    int64_t out = p->b.shape[0] / (p->a.shape[0] / p->r);
    pt_tensor ue = rows_of(xs, offset, e, p->r), d0 = rows_of(dy0, offset, e, 0);
    pt_tensor gb0 = tensor_rows(grad_b, e * out, split), b0 = tensor_rows(&p->b, e * out, split);
    TRY(backend_matmul_bwd_weight(be, &gb0, &d0, &ue, 0.0f));
    if (dy1) {
        pt_tensor d1 = rows_of(dy1, offset, e, 0);
        pt_tensor gb1 = tensor_rows(grad_b, e * out + split, out - split);
        TRY(backend_matmul_bwd_weight(be, &gb1, &d1, &ue, 0.0f));
    }
    TRY(backend_matmul_bwd_input(be, &ue, &d0, &b0, 0.0f)); /* ue is read no more: t in its place */
    if (dy1) {
        pt_tensor d1 = rows_of(dy1, offset, e, 0), b1 = tensor_rows(&p->b, e * out + split, out - split);
        TRY(backend_matmul_bwd_input(be, &ue, &d1, &b1, 1.0f));
    }
    TRY(backend_scale(be, &ue, p->scale));
    pt_tensor xe = rows_of(x, offset, e, 0), ga = tensor_rows(grad_a, (int64_t)e * p->r, p->r);
    return backend_matmul_bwd_weight(be, &ga, &ue, &xe, 0.0f);
}

pt_status backward_experts_lora_weights(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                                        const pt_tensor *dy0, const pt_tensor *dy1, int64_t split, pt_tensor *xs,
                                        const pt_tensor *x, pt_tensor *grad_a, pt_tensor *grad_b)
{
    int64_t out = p->b.shape[0] / n_exp;
    for (int e = 0; e < n_exp; e++) {
        if (offset[e + 1] > offset[e]) {
            TRY(expert_weights(be, p, offset, e, dy0, dy1, split, xs, x, grad_a, grad_b));
            continue;
        }
        pt_tensor ga = tensor_rows(grad_a, (int64_t)e * p->r, p->r), gb = tensor_rows(grad_b, e * out, out);
        TRY(backend_zero(be, &ga)); /* no rows: no gradient this micro-batch */
        TRY(backend_zero(be, &gb));
    }
    return PT_OK;
}

pt_status backward_experts_lora_input(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                                      const pt_tensor *t, pt_tensor *dx)
{
    for (int e = 0; e < n_exp; e++) {
        if (offset[e + 1] == offset[e]) continue;
        pt_tensor te = rows_of(t, offset, e, p->r), dxe = rows_of(dx, offset, e, 0);
        pt_tensor a = tensor_rows(&p->a, (int64_t)e * p->r, p->r);
        TRY(backend_matmul_bwd_input(be, &dxe, &te, &a, 1.0f));
    }
    return PT_OK;
}
