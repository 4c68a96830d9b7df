/* backward.c — the backward pass of one layer of the forward pass (forward.c), for every family:
 * given d loss / d layer output it writes d loss / d layer input and this micro-batch's LoRA
 * gradients (grad_scale-weighted, overwriting the previous micro-batch's: train.c accumulates).
 * The base weights are frozen: gradients only flow through them. A projection with an adapter,
 * y = x Wᵀ + (s·x̃ Aᵀ) Bᵀ (x̃: x with the adapters' dropout), gives dB = dyᵀ (s x̃ Aᵀ),
 * dA = s (dy B)ᵀ x̃, and dx = dy W + s (dy B) A through the dropout mask. Biases are frozen, so
 * their backward is the identity. DoRA (PEFT's use_dora) scales the output, y = z · m / ‖W + s·B·A‖ per column
 * with z = x Wᵀ + s (x Aᵀ) Bᵀ and the norm detached, as PEFT's: dm = Σ dy·z / ‖·‖, and the LoRA backward above
 * runs on dz = dy · m / ‖·‖ (z recomputed from x and the saved s x Aᵀ). */
#include "backward.h"

#include <string.h>

pt_status backward_take(pt_arena *arena, const fwd_ctx *c, int lora_r, backward_bufs *g)
{
    const pt_model_config *m = &c->m->cfg;
    int64_t qw = model_max_q_width(m), kw = model_max_kv_width(m); /* the widest layer's (gemma4's global) */
    int64_t wide = m->ffn_dim > qw ? m->ffn_dim : qw, dora = c->ad && c->ad->dora ? (wide > m->dim ? wide : m->dim) : 0;
    int64_t lin = m->full_period > 0 ? 1 : 0, conv = lin * model_lin_conv_dim(m), vw = lin * model_lin_value(m);
    int64_t nv = lin * m->lin_v_heads, sk = m->kv_shared > 0 ? kw : 0;
    int64_t widths[G_COUNT] = {m->ffn_dim, m->ffn_dim, m->dim, m->dim, qw, qw, kw, kw, lora_r > 0 ? lora_r : 1, dora, dora,
                               m->attn_gate ? qw : 0, conv, conv, vw, vw, nv, nv, nv, nv, m->ple_dim, m->ple_dim,
                               sk, sk, sk, sk};
    memset(g, 0, sizeof *g);
    for (int i = 0; i < G_COUNT; i++)
        TRY((i == G_LBETA || i == G_LG ? arena_take_f32 : arena_take)(arena, &g->t[i], widths[i] ? c->rows : 0,
                                                                      widths[i]));
    return PT_OK;
}

/* DoRA's part of lin_bwd: grad_m's rows of this part, and *dz = dy · m / ‖·‖ (a view of G_DZ). */
static pt_status dora_bwd(const fwd_ctx *c, lora_pair *s, const adapter_pair *p, int layer, int w, int64_t row0,
                          const pt_tensor *dy, pt_tensor *dz, const pt_tensor *x, const pt_tensor *xsv,
                          backward_bufs *g)
{
    pt_backend *be = c->m->be;
    int64_t n = dy->shape[1];
    pt_tensor z = adapter_narrow(&g->t[G_Z], n);
    *dz = adapter_narrow(&g->t[G_DZ], n);
    pt_tensor b = tensor_rows(&p->b, row0, n), wn = tensor_rows(&p->wnorm, row0, n);
    pt_tensor mag = tensor_rows(&p->dmag, row0, n), dm = tensor_rows(&s->grad_m, row0, n);
    TRY(backend_matmul(be, &z, x, &c->m->layers[layer].w[w], 0.0f));
    TRY(backend_matmul(be, &z, xsv, &b, 1.0f));
    TRY(backend_zero(be, &dm));
    TRY(backend_dora_mag_bwd(be, &dm, dy, &z, &wn));
    TRY(backend_copy(be, dz, dy));
    return backend_dora_scale(be, dz, &mag, &wn);
}

/* dx (+)= dy W (+ s (dy B) A); the LoRA gradients of this micro-batch overwrite grad_a, grad_b
 * (each pair is written once per micro-batch). tmp: [rows, r] scratch. A part of a fused weight (phi3) writes
 * its rows of the fused pair's grad_b and adds dy B_rows into tmp; the last part (the parts come in row order)
 * then gives grad_a and the LoRA path of dx once for the fused module, as PEFT's. */
static pt_status lin_bwd(const fwd_ctx *c, pt_lora *l, int layer, int w, pt_tensor *dx, const pt_tensor *dy,
                         const pt_tensor *x, const pt_tensor xs[W_COUNT], backward_bufs *g, float beta)
{
    pt_backend *be = c->m->be;
    pt_tensor *tmp = &g->t[G_R];
    int lead = w;
    int64_t row0 = 0, all = dy->shape[1];
    model_adapter_part(&c->m->cfg, w, &lead, &row0, &all);
    lora_pair *s = lora_at(l, layer, lead);
    if (!s) return backend_matmul_bwd_input(be, dx, dy, &c->m->layers[layer].w[w], beta);
    const adapter_pair *p = lora_weights(l, s);
    pt_tensor xsv = adapter_narrow(&xs[lead], p->r), t = adapter_narrow(tmp, p->r), dz; /* this pair's rank */
    if (s->grad_m.data) {
        if (c->dropout > 0) return ERR(PT_ERR_USER, "DoRA (use_dora) trains without lora_dropout");
        TRY(dora_bwd(c, s, p, layer, w, row0, dy, &dz, x, &xsv, g));
        dy = &dz;
    }
    TRY(backend_matmul_bwd_input(be, dx, dy, &c->m->layers[layer].w[w], beta));
    pt_tensor gb = tensor_rows(&s->grad_b, row0, dy->shape[1]), b = tensor_rows(&p->b, row0, dy->shape[1]);
    TRY(backend_matmul_bwd_weight(be, &gb, dy, &xsv, 0.0f));
    TRY(backend_matmul_bwd_input(be, &t, dy, &b, row0 == 0 ? 0.0f : 1.0f));
    if (row0 + dy->shape[1] < all) return PT_OK; /* not the last part of the fused weight */
    TRY(backend_scale(be, &t, p->scale));
    pt_tensor xin;
    TRY(forward_adapter_input(c, layer, lead, x, &xin));
    TRY(backend_matmul_bwd_weight(be, &s->grad_a, &t, &xin, 0.0f));
    if (c->dropout <= 0) return backend_matmul_bwd_input(be, dx, &t, &p->a, 1.0f);
    pt_tensor dxin = xin; /* the scratch: the dropped-out input is no longer needed */
    TRY(backend_matmul_bwd_input(be, &dxin, &t, &p->a, 0.0f));
    TRY(forward_dropout(c, layer, lead, &dxin, &dxin));
    return backend_add(be, dx, &dxin);
}

/* *grad = the gradient at a projection's output given dy at its residual branch: dy itself, or
 * dy times the branch's residual_scale (granite), or through the post-norm `norm` (input pre, rstd
 * saved), written into buf. */
static pt_status post_norm_bwd(const fwd_ctx *c, int layer, int norm, const pt_tensor *dy, const pt_tensor *pre,
                               const pt_tensor *rstd, pt_tensor *buf, const pt_tensor **grad)
{
    float rs = c->m->cfg.residual_scale;
    bool scaled = rs != 0.0f && rs != 1.0f;
    *grad = dy;
    if (!c->m->cfg.post_norms && !scaled) return PT_OK;
    *grad = buf;
    if (c->m->cfg.post_norms)
        TRY(backend_rmsnorm_bwd(c->m->be, buf, NULL, dy, pre, &c->m->layers[layer].w[norm], rstd));
    else
        TRY(backend_copy(c->m->be, buf, dy));
    return scaled ? backend_scale(c->m->be, buf, rs) : PT_OK;
}

/* MLP: out = h + [n4](down(act(gate) * up)) with gate, up of n2(h): gt[G_DH] = dL/dh */
static pt_status mlp_bwd(const fwd_ctx *c, pt_lora *l, int layer, layer_acts *a, const pt_tensor *dout,
                         backward_bufs *g)
{
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t;
    const pt_tensor *dd;
    TRY(post_norm_bwd(c, layer, W_POST_FFN_NORM, dout, &t[A_D], &t[A_RSTD4], &gt[G_DIM1], &dd));
    TRY(lin_bwd(c, l, layer, W_DOWN, &gt[G_FFN1], dd, &t[A_ACT], a->xs, g, 0.0f));
    if (c->m->cfg.act == PT_ACT_GELU_TANH)
        TRY(backend_geglu_bwd(be, &gt[G_FFN1], &gt[G_FFN2], &gt[G_FFN1], &t[A_GATE], &t[A_UP]));
    else
        TRY(backend_swiglu_bwd(be, &gt[G_FFN1], &gt[G_FFN2], &gt[G_FFN1], &t[A_GATE], &t[A_UP]));
    TRY(lin_bwd(c, l, layer, W_GATE, &gt[G_DIM1], &gt[G_FFN1], &t[A_XN2], a->xs, g, 0.0f));
    TRY(lin_bwd(c, l, layer, W_UP, &gt[G_DIM1], &gt[G_FFN2], &t[A_XN2], a->xs, g, 1.0f));
    /* dh = the norm path + dout, in one pass (olmo2, without the norm: their sum) */
    if (c->m->cfg.no_pre_norms) {
        TRY(backend_copy(be, &gt[G_DH], &gt[G_DIM1]));
        return backend_add(be, &gt[G_DH], dout);
    }
    return backend_rmsnorm_bwd_add(be, &gt[G_DH], NULL, &gt[G_DIM1], &t[A_H], &c->m->layers[layer].w[W_FFN_NORM],
                                   &t[A_RSTD2], dout);
}

/* The router's LoRA pair p (training's s) from dlogits, its input xn and u = s·xn Aᵀ (then t = s·dlogits B in its
 * place): grad_b = dlogitsᵀ u, grad_a = tᵀ xn, dxn += t A (no dropout: PEFT's target_parameters have none). */
static pt_status router_lora_bwd(pt_backend *be, const adapter_pair *p, lora_pair *s, const pt_tensor *dlogits,
                                 pt_tensor *u, const pt_tensor *xn, pt_tensor *dxn)
{
    pt_tensor v = adapter_narrow(u, p->r);
    TRY(backend_matmul_bwd_weight(be, &s->grad_b, dlogits, &v, 0.0f));
    TRY(backend_matmul_bwd_input(be, &v, dlogits, &p->b, 0.0f));
    TRY(backend_scale(be, &v, p->scale));
    TRY(backend_matmul_bwd_weight(be, &s->grad_a, &v, xn, 0.0f));
    return backend_matmul_bwd_input(be, dxn, &v, &p->a, 1.0f);
}

/* A sparse layer (forward_moe): out = h + Σ_s w_s E_s(n2 h), the router and experts frozen (their LoRA pairs,
 * PEFT's target_parameters, trained when the adapter has them): the gradient
 * flows back through the experts' products (grouped as the forward grouped them), the routing weights and
 * the router's softmax; gt[G_DH] = dL/dh. The forward's buffers take the gradients in place. */
static pt_status moe_bwd(const fwd_ctx *c, pt_lora *l, int layer, layer_acts *a, const pt_tensor *dout,
                         backward_bufs *g)
{
    pt_backend *be = c->m->be;
    const pt_model_config *cf = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    moe_acts *m = &a->moe;
    pt_tensor *t = m->t, *gt = g->t;
    int k = cf->n_experts_used, n = cf->n_experts;
    lora_pair *sgu = lora_at(l, layer, W_EXP_GATE_UP), *sdn = lora_at(l, layer, W_EXP_DOWN);
    const adapter_pair *gu = sgu ? lora_weights(l, sgu) : NULL, *dn = sdn ? lora_weights(l, sdn) : NULL;
    TRY(backend_moe_combine_bwd(be, &t[M_YS], &t[M_DW], dout, &t[M_YS], m->row, m->weight, k));
    if (dn) /* the experts' LoRA (moe_lora.c) before the base products overwrite their inputs */
        TRY(backward_experts_lora_weights(be, dn, m->offset, n, &t[M_YS], NULL, cf->dim, &t[M_LDN], &t[M_ACT],
                                          &sdn->grad_a, &sdn->grad_b));
    TRY(backend_moe_matmul_bwd_input(be, &t[M_ACT], &t[M_YS], wt->experts + X_DOWN, X_COUNT, m->offset, n, 0.0f));
    if (dn) TRY(backward_experts_lora_input(be, dn, m->offset, n, &t[M_LDN], &t[M_ACT]));
    TRY(backend_swiglu_bwd(be, &t[M_ACT], &t[M_UP], &t[M_ACT], &t[M_GATE], &t[M_UP]));
    if (gu)
        TRY(backward_experts_lora_weights(be, gu, m->offset, n, &t[M_ACT], &t[M_UP], cf->moe_ffn_dim, &t[M_LGU],
                                          &t[M_XS], &sgu->grad_a, &sgu->grad_b));
    TRY(backend_moe_matmul_bwd_input(be, &t[M_XS], &t[M_ACT], wt->experts + X_GATE, X_COUNT, m->offset, n, 0.0f));
    TRY(backend_moe_matmul_bwd_input(be, &t[M_XS], &t[M_UP], wt->experts + X_UP, X_COUNT, m->offset, n, 1.0f));
    if (gu) TRY(backward_experts_lora_input(be, gu, m->offset, n, &t[M_LGU], &t[M_XS]));
    TRY(backend_zero(be, &gt[G_DIM1])); /* the gather's backward: each token's k rows summed */
    TRY(backend_moe_combine(be, &gt[G_DIM1], &t[M_XS], m->row, m->ones, k));
    bool aux = c->aux && c->aux->coef != 0.0f; /* its gradient from the logits before route_bwd overwrites them */
    if (aux) TRY(moe_aux_backward(c->aux, be, &t[M_LOGITS], &t[M_AUX]));
    TRY(backend_moe_route_bwd(be, &t[M_LOGITS], &t[M_LOGITS], &t[M_DW], m->expert, k, cf->moe_norm_topk));
    if (aux) TRY(backend_add(be, &t[M_LOGITS], &t[M_AUX]));
    lora_pair *srt = lora_at(l, layer, W_ROUTER); /* a LoRA on the router (target_parameters mlp.gate.weight) */
    if (srt) TRY(router_lora_bwd(be, lora_weights(l, srt), srt, &t[M_LOGITS], &t[M_LRT], &a->t[A_XN2], &gt[G_DIM1]));
    TRY(backend_matmul_bwd_input(be, &gt[G_DIM1], &t[M_LOGITS], &wt->router, 1.0f));
    return backend_rmsnorm_bwd_add(be, &gt[G_DH], NULL, &gt[G_DIM1], &a->t[A_H], &wt->w[W_FFN_NORM], &a->t[A_RSTD2],
                                   dout);
}

/* d = the gradient through the per-head RMSNorm of pre (heads of hd; w, rstd saved), in place */
static pt_status head_norm_bwd(const fwd_ctx *c, int hd, pt_tensor *d, const pt_tensor *pre, const pt_tensor *w,
                               const pt_tensor *rstd)
{
    if (c->m->cfg.qk_norm_full) hd = (int)pre->shape[1]; /* olmo2: the whole row */
    pt_tensor dv = forward_head_rows(d, hd), xv = forward_head_rows(pre, hd);
    return backend_rmsnorm_bwd(c->m->be, &dv, NULL, &dv, &xv, w, rstd);
}

/* A Gated DeltaNet layer (forward.c's delta_net) from da, the gradient at out_proj's output: out_proj, RMSNormGated
 * (SwiGLU's backward for y = n SiLU(z), then each head's norm), the delta rule, the gates, the conv, and the four
 * input projections into gt[G_DIM1] (the gradient at the normed input). A_log, dt_bias, the conv and the norm weight
 * are frozen. */
static pt_status delta_net_bwd(const fwd_ctx *c, pt_lora *l, int layer, layer_acts *a, const pt_tensor *da,
                               backward_bufs *g)
{
    const pt_model_config *cf = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t;
    pt_delta d = {.batch = c->attn.batch, .seq = c->attn.n_q, .k_heads = cf->lin_k_heads, .v_heads = cf->lin_v_heads,
                  .k_dim = cf->lin_k_dim, .v_dim = cf->lin_v_dim, .conv = cf->lin_conv, .segments = c->attn.segments};
    TRY(lin_bwd(c, l, layer, W_LIN_OUT, &gt[G_LV1], da, &t[A_LY], a->xs, g, 0.0f));
    TRY(backend_swiglu_bwd(be, &gt[G_LV1], &gt[G_LV2], &gt[G_LV1], &t[A_LZ], &t[A_LN]));
    pt_tensor dn = forward_head_rows(&gt[G_LV2], cf->lin_v_dim), on = forward_head_rows(&t[A_LO], cf->lin_v_dim);
    TRY(backend_rmsnorm_bwd(be, &dn, NULL, &dn, &on, &wt->w[W_LIN_NORM], &t[A_LRSTD]));
    TRY(backend_delta_chunk_bwd(be, &gt[G_L1], &gt[G_LBETA], &gt[G_LG], &gt[G_LV2], &t[A_LCONV], &t[A_LBETA],
                                &t[A_LG], &d));
    TRY(backend_delta_gates_bwd(be, &gt[G_LB], &gt[G_LA], &gt[G_LBETA], &gt[G_LG], &t[A_LB], &t[A_LA],
                                &wt->w[W_LIN_ALOG], &wt->w[W_LIN_DT]));
    TRY(backend_conv1d_silu_bwd(be, &gt[G_L2], &gt[G_L1], &t[A_LQKV], &wt->w[W_LIN_CONV], &d));
    TRY(lin_bwd(c, l, layer, W_LIN_QKV, &gt[G_DIM1], &gt[G_L2], &t[A_XN1], a->xs, g, 0.0f));
    TRY(lin_bwd(c, l, layer, W_LIN_Z, &gt[G_DIM1], &gt[G_LV1], &t[A_XN1], a->xs, g, 1.0f));
    TRY(lin_bwd(c, l, layer, W_LIN_B, &gt[G_DIM1], &gt[G_LB], &t[A_XN1], a->xs, g, 1.0f));
    return lin_bwd(c, l, layer, W_LIN_A, &gt[G_DIM1], &gt[G_LA], &t[A_XN1], a->xs, g, 1.0f);
}

/* gemma4: whether layer l computes keys and values that a KV-shared layer reuses (forward.c's kv_stored). */
static bool kv_stored(const pt_model_config *cf, int layer)
{
    for (int l = cf->n_layers - cf->kv_shared; cf->kv_shared > 0 && l < cf->n_layers; l++)
        if (l != layer && model_kv_source(cf, l) == layer) return true;
    return false;
}

/* gemma4: a KV-shared layer hands dk, dv (at the keys and values it read) to its kind's buffers, which the layer
 * that computed them adds to its own; the last reader (the first in the backward order) overwrites them. */
static pt_status shared_kv_bwd(const fwd_ctx *c, int layer, const pt_tensor *dk, const pt_tensor *dv, backward_bufs *g)
{
    const pt_model_config *cf = &c->m->cfg;
    int kind = model_layer_window(cf, layer) ? 1 : 0, src = model_kv_source(cf, layer);
    pt_tensor sk = adapter_narrow(&g->t[kind ? G_SK1 : G_SK0], dk->shape[1]);
    pt_tensor sv = adapter_narrow(&g->t[kind ? G_SV1 : G_SV0], dv->shape[1]);
    bool last = true;
    for (int l = layer + 1; l < cf->n_layers; l++) last = last && model_kv_source(cf, l) != src;
    TRY((last ? backend_copy : backend_add)(c->m->be, &sk, dk));
    return (last ? backend_copy : backend_add)(c->m->be, &sv, dv);
}

/* dk, dv of a layer whose keys and values shared layers read too: their gradients added; then (gemma4) dv through
 * the value norm (no weight) and, where the values are the keys before their norm (k_eq_v), into dk_pre's. */
static pt_status kv_norms_bwd(const fwd_ctx *c, int layer, layer_acts *a, pt_tensor *dk, pt_tensor *dv,
                              backward_bufs *g)
{
    const pt_model_config *cf = &c->m->cfg;
    pt_backend *be = c->m->be;
    int hd = model_layer_head_dim(cf, layer), kvh = model_layer_kv_heads(cf, layer), kind = model_layer_window(cf, layer) ? 1 : 0;
    if (kv_stored(cf, layer)) {
        pt_tensor sk = adapter_narrow(&g->t[kind ? G_SK1 : G_SK0], dk->shape[1]);
        pt_tensor sv = adapter_narrow(&g->t[kind ? G_SV1 : G_SV0], dv->shape[1]);
        TRY(backend_add(be, dk, &sk));
        TRY(backend_add(be, dv, &sv));
    }
    if (!cf->v_norm) return PT_OK;
    bool own_v = model_layer_has_v(cf, layer);
    pt_tensor pre = adapter_narrow(&a->t[own_v ? A_VPRE : A_KPRE], dv->shape[1]);
    pt_tensor rstd = adapter_narrow(&a->t[A_VRSTD], kvh), ones = tensor_span(&c->m->ones, 0, hd);
    TRY(head_norm_bwd(c, hd, dv, &pre, &ones, &rstd));
    return PT_OK;
}

/* attention: h = x + [n3](o([gate] attn(rope [nq] q, rope [nk] k, [nv] v))) from da, the gradient at o's output
 * (qwen35's output gate: o reads attn * sigmoid(W_Q_GATE x)); each layer's own head size, key/value heads, scale
 * and rope (gemma4); a KV-shared layer's dk, dv go to the layer it shares them with; biases pass dq, dk, dv
 * unchanged; gt[G_DIM1] = the gradient at the normed input. */
static pt_status attention_bwd(const fwd_ctx *c, pt_lora *l, int layer, layer_acts *a, const pt_tensor *da,
                               backward_bufs *g)
{
    const pt_model_config *cf = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t;
    bool gate = cf->attn_gate, own_kv = model_kv_source(cf, layer) == layer;
    pt_attention at = c->attn, own = model_layer_attention(cf, layer);
    at.window = own.window, at.head_dim = own.head_dim, at.n_kv_heads = own.n_kv_heads, at.scale = own.scale;
    int hd = own.head_dim, kvh = own.n_kv_heads, kind = own.window ? 1 : 0;
    int64_t qw = (int64_t)cf->n_heads * hd, kw = (int64_t)kvh * hd;
    pt_tensor q = adapter_narrow(&t[A_Q], qw), att = adapter_narrow(&t[A_ATT], qw), gq = adapter_narrow(&gt[G_Q], qw);
    pt_tensor gatt = adapter_narrow(&gt[G_ATT], qw), gk = adapter_narrow(&gt[G_K], kw), gv = adapter_narrow(&gt[G_V], kw);
    pt_tensor k = own_kv ? adapter_narrow(&t[A_K], kw) : c->shared_k[kind];
    pt_tensor v = own_kv ? adapter_narrow(&t[A_V], kw) : c->shared_v[kind];
    pt_tensor attg = adapter_narrow(&t[gate ? A_ATTG : A_ATT], qw);
    TRY(lin_bwd(c, l, layer, W_O, &gatt, da, &attg, a->xs, g, 0.0f));
    if (gate) TRY(backend_sigmoid_mul_bwd(be, &gatt, &gt[G_QG], &gatt, &t[A_ATTG], &t[A_QGATE]));
    TRY(backend_attention_bwd(be, &gq, &gk, &gv, &gatt, &q, &k, &v, &att, &t[A_LSE], &at));
    if (cf->q_temp_beta != 0.0f) TRY(backend_pos_scale(be, &gq, cf->q_temp_beta, cf->q_temp_period, c->pos));
    if (!own_kv) TRY(shared_kv_bwd(c, layer, &gk, &gv, g));
    else TRY(kv_norms_bwd(c, layer, a, &gk, &gv, g));
    if (model_layer_rope(cf, layer)) {
        int rd = cf->head_dim_full > 0 ? hd : model_rope_dim(cf);
        float ms = model_layer_rope_mscale(cf, layer);
        const float *freq = model_layer_freq(c->m, layer, c->pos, c->rows);
        TRY(backend_rope_part_bwd(be, &gq, cf->n_heads, hd, rd, ms, c->pos, freq));
        if (own_kv) TRY(backend_rope_part_bwd(be, &gk, kvh, hd, rd, ms, c->pos, freq));
    }
    if (cf->qk_norm) { /* q = nq(q_pre), k = nk(k_pre) per head: dq, dk through the norms, in place */
        pt_tensor qpre = adapter_narrow(&t[A_QPRE], qw), kpre = adapter_narrow(&t[A_KPRE], kw);
        pt_tensor krstd = adapter_narrow(&t[A_KRSTD], cf->qk_norm_full ? 1 : kvh);
        TRY(head_norm_bwd(c, hd, &gq, &qpre, &wt->w[W_Q_NORM], &t[A_QRSTD]));
        if (own_kv) TRY(head_norm_bwd(c, hd, &gk, &kpre, &wt->w[W_K_NORM], &krstd));
    }
    TRY(lin_bwd(c, l, layer, W_Q, &gt[G_DIM1], &gq, &t[A_XN1], a->xs, g, 0.0f));
    /* the gate rows right after the query rows: the two parts of q_proj's pair share G_R */
    if (gate) TRY(lin_bwd(c, l, layer, W_Q_GATE, &gt[G_DIM1], &gt[G_QG], &t[A_XN1], a->xs, g, 1.0f));
    if (!own_kv) return PT_OK;
    if (!model_layer_has_v(cf, layer)) { /* k_eq_v: the values were k_proj's output too */
        TRY(backend_add(be, &gk, &gv));
        return lin_bwd(c, l, layer, W_K, &gt[G_DIM1], &gk, &t[A_XN1], a->xs, g, 1.0f);
    }
    TRY(lin_bwd(c, l, layer, W_K, &gt[G_DIM1], &gk, &t[A_XN1], a->xs, g, 1.0f));
    return lin_bwd(c, l, layer, W_V, &gt[G_DIM1], &gv, &t[A_XN1], a->xs, g, 1.0f);
}

/* gemma4's per-layer input block: out = h2 + n(proj(gelu(gate(h2)) * in)), in constant (it depends on the token
 * ids and the frozen embeddings only): dout (the gradient at out) becomes the gradient at h2, in place. */
static pt_status ple_bwd(const fwd_ctx *c, pt_lora *l, int layer, layer_acts *a, pt_tensor *dout, backward_bufs *g)
{
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t, in = tensor_rows(&c->ple_in, (int64_t)layer * c->rows, c->rows);
    TRY(backend_rmsnorm_bwd(be, &gt[G_DIM1], NULL, dout, &t[A_PLP], &c->m->layers[layer].w[W_PLE_NORM], &t[A_RSTD5]));
    TRY(lin_bwd(c, l, layer, W_PLE_PROJ, &gt[G_PL1], &gt[G_DIM1], &t[A_PLA], a->xs, g, 0.0f));
    TRY(backend_geglu_bwd(be, &gt[G_PL1], &gt[G_PL2], &gt[G_PL1], &t[A_PLG], &in));
    return lin_bwd(c, l, layer, W_PLE_GATE, dout, &gt[G_PL1], &t[A_H2], a->xs, g, 1.0f);
}

pt_status backward_layer(const fwd_ctx *c, pt_lora *l, int layer, const pt_tensor *x, layer_acts *a, pt_tensor *dout,
                         backward_bufs *g)
{
    const pt_model_config *cf = &c->m->cfg;
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t;
    float scalar = cf->layer_scalars && c->m->layer_scalar ? c->m->layer_scalar[layer] : 1.0f; /* gemma4 */
    if (scalar != 1.0f) TRY(backend_scale(be, dout, scalar));
    if (cf->ple_dim > 0) TRY(ple_bwd(c, l, layer, a, dout, g));
    TRY(model_layer_moe(cf, layer) ? moe_bwd(c, l, layer, a, dout, g) : mlp_bwd(c, l, layer, a, dout, g));
    const pt_tensor *da;
    TRY(post_norm_bwd(c, layer, W_POST_ATTN_NORM, &gt[G_DH], &t[A_O], &t[A_RSTD3], &gt[G_DIM1], &da));
    TRY(model_layer_linear(cf, layer) ? delta_net_bwd(c, l, layer, a, da, g) : attention_bwd(c, l, layer, a, da, g));
    if (cf->no_pre_norms) { /* olmo2: dx = dxn1 + dh */
        TRY(backend_copy(be, dout, &gt[G_DIM1]));
        return backend_add(be, dout, &gt[G_DH]);
    }
    return backend_rmsnorm_bwd_add(be, dout, NULL, &gt[G_DIM1], x, &c->m->layers[layer].w[W_ATTN_NORM], &t[A_RSTD1],
                                   &gt[G_DH]);
}
