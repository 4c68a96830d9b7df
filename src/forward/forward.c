/* forward.c — the layer forward of every family (forward.h), written once: training keeps what
 * each layer writes into its own layer_acts, evaluation and generation reuse one set; with a KV
 * cache the new keys and values are written straight into the cache rows of their positions and
 * attention reads the whole cache. Biases are frozen, so their backward is the identity. */
#include "ptrain/forward.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/quant.h"

fwd_ctx forward_ctx(const pt_model *m, const pt_adapter *ad, int batch, int seq, const int32_t *pos,
                    const int32_t *segments)
{
    fwd_ctx c = {.m = m, .ad = ad, .rows = (int64_t)batch * seq, .pos = pos, .attn = model_layer_attention(&m->cfg, 0)};
    c.attn.batch = batch;
    c.attn.n_q = c.attn.n_kv = seq;
    c.attn.q_pos0 = 0;
    c.attn.segments = segments;
    return c;
}

/* Take a's buffers: k and v unless the pass has a cache, the log-sum-exp for the backward pass
 * (not with a cache), the post-norms' when the family has them, s·x·Aᵀ per adapted projection. q, k and v are
 * as wide as the widest layer's (gemma4's global layers have their own head size); a layer uses the front. */
static pt_status acts_take(pt_arena *arena, const fwd_ctx *c, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    int64_t qw = model_max_q_width(g), kw = model_max_kv_width(g), kvh = g->n_kv_heads;
    if (g->n_kv_heads_full > kvh) kvh = g->n_kv_heads_full;
    int64_t post = g->post_norms ? 1 : 0, own_kv = !c->kv || c->kv->batch > 1, qk = g->qk_norm ? 1 : 0;
    int64_t vn = g->v_norm ? 1 : 0, ple = g->ple_dim > 0 ? 1 : 0;
    int64_t lin = g->full_period > 0 ? 1 : 0, vw = model_lin_value(g), nv = g->lin_v_heads;
    int64_t widths[A_COUNT] = {g->dim,     qw,         own_kv * kw,    own_kv * kw, qw,  g->dim, g->dim, g->ffn_dim,
                               g->ffn_dim, g->ffn_dim, 1,              1,           own_kv * g->n_heads,
                               post * g->dim, post * g->dim, post,      post,
                               qk * qw,    qk * kw,    qk * (g->qk_norm_full ? 1 : g->n_heads),
                               qk * (g->qk_norm_full ? 1 : kvh),
                               vn * kw,    vn * kvh,
                               ple * g->dim, ple * g->ple_dim, ple * g->ple_dim, ple * g->dim, ple,
                               g->attn_gate ? qw : 0,
                               lin * model_lin_conv_dim(g), lin * model_lin_conv_dim(g), lin * vw, lin * nv, lin * nv,
                               lin * nv,   lin * nv,   lin * vw,       lin * vw,    lin * nv,
                               g->attn_gate ? qw : 0, lin * vw};
    memset(a, 0, sizeof *a);
    for (int i = 0; i < A_COUNT; i++) {
        bool f32 = i == A_RSTD1 || i == A_RSTD2 || i == A_RSTD3 || i == A_RSTD4 || i == A_LSE || i == A_QRSTD ||
                   i == A_KRSTD || i == A_VRSTD || i == A_RSTD5 || i == A_LBETA || i == A_LG ||
                   i == A_LRSTD; /* statistics, the delta rule's gates */
        TRY((f32 ? arena_take_f32 : arena_take)(arena, &a->t[i], widths[i] ? c->rows : 0, widths[i]));
    }
    for (int w = 0; w < W_COUNT; w++)
        if (c->ad && c->ad->target[w]) TRY(arena_take(arena, &a->xs[w], c->rows, c->ad->r_max));
    return forward_moe_take(arena, c, &a->moe);
}

/* gemma4's buffers of a pass: the per-layer inputs and what computing them takes; without a cache, the keys
 * and values of the layers the KV-shared ones reuse. */
static pt_status gemma4_take(pt_arena *arena, fwd_ctx *c)
{
    const pt_model_config *g = &c->m->cfg;
    if (g->ple_dim > 0) {
        TRY(arena_take(arena, &c->ple_in, c->rows * g->n_layers, g->ple_dim));
        TRY(arena_take(arena, &c->ple_tmp, c->rows, g->ple_dim));
        TRY(arena_take_f32(arena, &c->ple_rstd, c->rows, 1));
    }
    memset(c->shared_k, 0, sizeof c->shared_k);
    memset(c->shared_v, 0, sizeof c->shared_v);
    if (g->kv_shared <= 0 || c->kv) return PT_OK;
    bool taken[2] = {false, false};
    for (int l = g->n_layers - g->kv_shared; l < g->n_layers; l++) {
        int src = model_kv_source(g, l), kind = model_layer_window(g, l) == 0 ? 0 : 1;
        int64_t w = (int64_t)model_layer_kv_heads(g, src) * model_layer_head_dim(g, src);
        if (taken[kind]) continue;
        taken[kind] = true;
        TRY(arena_take(arena, &c->shared_k[kind], c->rows, w));
        TRY(arena_take(arena, &c->shared_v[kind], c->rows, w));
    }
    return PT_OK;
}

pt_status forward_take(pt_arena *arena, fwd_ctx *c, bool keep_inputs, bool keep_acts, fwd_bufs *b)
{
    return forward_take_sets(arena, c, keep_inputs, keep_acts ? c->m->cfg.n_layers : 1, b);
}

int forward_acts_index(const fwd_bufs *b, int n_layers, int layer)
{
    int first = n_layers - (b->n_acts - 1); /* the first layer with a set of its own */
    return layer >= first ? layer - (n_layers - b->n_acts) : 0;
}

pt_status forward_take_sets(pt_arena *arena, fwd_ctx *c, bool keep_inputs, int sets, fwd_bufs *b)
{
    const pt_model_config *g = &c->m->cfg;
    if (sets < 1) sets = 1;
    if (sets > g->n_layers) sets = g->n_layers;
    *b = (fwd_bufs){.n_x = keep_inputs ? g->n_layers + 1 : 2, .n_acts = sets};
    b->x = calloc((size_t)b->n_x, sizeof *b->x);
    b->acts = calloc((size_t)b->n_acts, sizeof *b->acts);
    TRY_ALLOC(b->x && b->acts ? b->x : NULL);
    for (int i = 0; i < b->n_x; i++) TRY(arena_take(arena, &b->x[i], c->rows, g->dim));
    for (int i = 0; i < b->n_acts; i++) TRY(acts_take(arena, c, &b->acts[i]));
    TRY(gemma4_take(arena, c));
    int64_t widest = g->ffn_dim > g->dim ? g->ffn_dim : g->dim;
    if (model_max_q_width(g) > widest) widest = model_max_q_width(g);
    if ((int64_t)g->n_heads * g->head_dim > widest) widest = (int64_t)g->n_heads * g->head_dim;
    if (g->full_period > 0 && model_lin_value(g) > widest) widest = model_lin_value(g); /* out_proj's input */
    return arena_take(arena, &c->scratch, c->ad && c->dropout > 0 ? c->rows : 0, widest);
}

void forward_bufs_free(fwd_bufs *b)
{
    for (int i = 0; b->acts && i < b->n_acts; i++) forward_moe_free(&b->acts[i].moe);
    free(b->x);
    free(b->acts);
    *b = (fwd_bufs){0};
}

pt_status forward_dropout(const fwd_ctx *c, int layer, int w, pt_tensor *y, const pt_tensor *x)
{
    /* 16: the slot count when these seeds were fixed; slots added since must not change existing masks */
    uint64_t seed = c->seed * 0x100000001b3ULL + (uint64_t)layer * 16 + (uint64_t)w;
    return backend_dropout(c->m->be, y, x, c->dropout, seed);
}

pt_status forward_adapter_input(const fwd_ctx *c, int layer, int w, const pt_tensor *x, pt_tensor *out)
{
    if (c->dropout <= 0) {
        *out = *x;
        return PT_OK;
    }
    int64_t shape[2] = {c->rows, x->shape[1]};
    *out = tensor_make(x->dtype, 2, shape);
    out->data = c->scratch.data;
    return forward_dropout(c, layer, w, out, x);
}

/* y = x Wᵀ, plus the adapter's s (x Aᵀ) Bᵀ (s x Aᵀ kept in xs[w]). A part of a fused weight (phi3's q, k, v and
 * gate, up; qwen35's query and gate rows of q_proj) takes its rows of the fused adapter's B, whose s x Aᵀ the first part computes into xs[lead] (the
 * parts run in row order, on one input, with one dropout mask: PEFT's one module). */
static pt_status proj(const fwd_ctx *c, int layer, int w, pt_tensor *y, const pt_tensor *x, pt_tensor xs[W_COUNT])
{
    TRY(backend_matmul(c->m->be, y, x, &c->m->layers[layer].w[w], 0.0f));
    int lead = w;
    int64_t row0 = 0, all;
    model_adapter_part(&c->m->cfg, w, &lead, &row0, &all);
    if (!adapter_at(c->ad, layer, lead)) return PT_OK;
    if (adapter_at(c->ad, layer, lead)->mag && c->dropout > 0)
        return ERR(PT_ERR_USER, "a DoRA adapter (use_dora) runs without lora_dropout: ptrain applies DoRA only "
                   "where PEFT's forward has no dropout (generate, evaluation)");
    pt_tensor xin = *x;
    if (row0 == 0) TRY(forward_adapter_input(c, layer, lead, x, &xin));
    TRY(adapter_matmul_part(c->ad, layer, lead, row0, row0 == 0, y, &xin, &xs[lead]));
    return adapter_dora_part(c->ad, layer, lead, row0, &c->m->layers[layer].w[w], y);
}

pt_tensor forward_head_rows(const pt_tensor *t, int head_dim)
{
    pt_tensor v = *t;
    v.ndim = 2;
    v.shape[0] = tensor_numel(t) / head_dim;
    v.shape[1] = head_dim;
    return v;
}

/* y = RMSNorm of each hd-wide piece of x's rows (the q/k/v norms): the rows' norm over
 * [rows * heads, hd], rstd [rows, heads] */
static pt_status head_norm(const fwd_ctx *c, int hd, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                           const pt_tensor *w)
{
    if (c->m->cfg.qk_norm_full) hd = (int)x->shape[1]; /* olmo2: the whole row */
    pt_tensor yv = forward_head_rows(y, hd), xv = forward_head_rows(x, hd);
    return backend_rmsnorm(c->m->be, &yv, rstd, &xv, w, c->m->cfg.norm_eps);
}

/* The first `width` columns of the [rows, wider] buffer t as a [rows, width] tensor (its front, no copy): a
 * layer narrower than the widest (gemma4's sliding layers) uses that much of it. */
static pt_tensor front(const pt_tensor *t, int64_t width)
{
    if (!t->data || t->ndim != 2 || t->shape[1] == width) return *t;
    pt_tensor v = *t;
    size_t es = t->nbytes / (size_t)tensor_numel(t);
    v.shape[1] = width;
    v.nbytes = (size_t)(v.shape[0] * width) * es;
    return v;
}

/* gemma4: whether layer l computes keys and values that a KV-shared layer reuses. */
static bool kv_stored(const pt_model_config *g, int layer)
{
    for (int l = g->n_layers - g->kv_shared; g->kv_shared > 0 && l < g->n_layers; l++)
        if (model_kv_source(g, l) == layer && l != layer) return true;
    return false;
}

/* k and v of layer l into k, v: projections, biases, q/k norms (gemma4: the value norm, values that are the
 * keys before their norm with k_eq_v) and RoPE of k. */
static pt_status keys_values(const fwd_ctx *c, int layer, layer_acts *a, pt_tensor *k, pt_tensor *v)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t;
    int hd = model_layer_head_dim(g, layer), kvh = model_layer_kv_heads(g, layer);
    int64_t kw = (int64_t)kvh * hd;
    pt_tensor kpre = front(&t[A_KPRE], kw), vpre = front(&t[A_VPRE], kw), krstd = front(&t[A_KRSTD], kvh);
    pt_tensor vrstd = front(&t[A_VRSTD], kvh), *kp = g->qk_norm ? &kpre : k;
    pt_tensor *vp = !g->v_norm ? v : model_layer_has_v(g, layer) ? &vpre : kp;
    TRY(proj(c, layer, W_K, kp, &t[A_XN1], a->xs));
    if (model_layer_has_v(g, layer)) TRY(proj(c, layer, W_V, vp, &t[A_XN1], a->xs));
    if (g->qkv_bias) {
        TRY(backend_add_bias(be, kp, &wt->w[W_K_BIAS]));
        TRY(backend_add_bias(be, v, &wt->w[W_V_BIAS]));
    }
    if (g->qk_norm) TRY(head_norm(c, hd, k, &krstd, kp, &wt->w[W_K_NORM]));
    pt_tensor ones = g->v_norm ? tensor_span(&c->m->ones, 0, hd) : c->m->ones;
    if (g->v_norm) TRY(head_norm(c, hd, v, &vrstd, vp, &ones));
    if (!model_layer_rope(g, layer)) return PT_OK;
    int rd = g->head_dim_full > 0 ? hd : model_rope_dim(g);
    return backend_rope_part(be, k, kvh, hd, rd, model_layer_rope_mscale(g, layer), c->pos,
                             model_layer_freq(c->m, layer, c->pos, c->rows));
}

/* t[A_ATT] = attention of the normed input t[A_XN1]: q, k, v with biases, q/k norms and RoPE (k
 * and v in the cache rows at n_past when there is one); a KV-shared layer (gemma4) attends to the keys
 * and values of the layer it shares them with. */
static pt_status attention_core(const fwd_ctx *c, int layer, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t;
    int hd = model_layer_head_dim(g, layer), src = model_kv_source(g, layer), kind = model_layer_window(g, layer) ? 1 : 0;
    int64_t qw = (int64_t)g->n_heads * hd, kw = (int64_t)model_layer_kv_heads(g, layer) * hd;
    pt_tensor q = front(&t[A_Q], qw), qpre = front(&t[A_QPRE], qw), att = front(&t[A_ATT], qw);
    pt_tensor k = front(&t[A_K], kw), v = front(&t[A_V], kw);
    bool batched = c->kv && c->kv->batch > 1; /* k and v computed here, then put in each sequence's rows */
    if (c->kv && !batched) k = tensor_rows(&c->kv->k[layer], c->kv->n_past, c->rows), v = tensor_rows(&c->kv->v[layer], c->kv->n_past, c->rows);
    pt_tensor *qp = g->qk_norm ? &qpre : &q;
    TRY(proj(c, layer, W_Q, qp, &t[A_XN1], a->xs));
    if (g->qkv_bias) TRY(backend_add_bias(be, qp, &wt->w[W_Q_BIAS]));
    if (g->qk_norm) TRY(head_norm(c, hd, &q, &t[A_QRSTD], qp, &wt->w[W_Q_NORM]));
    if (model_layer_rope(g, layer)) {
        int rd = g->head_dim_full > 0 ? hd : model_rope_dim(g);
        TRY(backend_rope_part(be, &q, g->n_heads, hd, rd, model_layer_rope_mscale(g, layer), c->pos,
                              model_layer_freq(c->m, layer, c->pos, c->rows)));
    }
    if (src != layer && !c->kv) k = c->shared_k[kind], v = c->shared_v[kind]; /* computed by layer src */
    if (src == layer) TRY(keys_values(c, layer, a, &k, &v));
    if (src == layer && !c->kv && kv_stored(g, layer)) {
        pt_tensor sk = c->shared_k[kind], sv = c->shared_v[kind];
        TRY(backend_copy(be, &sk, &k));
        TRY(backend_copy(be, &sv, &v));
    }
    if (g->q_temp_beta != 0.0f) TRY(backend_pos_scale(be, &q, g->q_temp_beta, g->q_temp_period, c->pos));
    pt_attention at = c->attn;
    pt_attention own = model_layer_attention(g, layer);
    at.window = own.window, at.head_dim = own.head_dim, at.n_kv_heads = own.n_kv_heads, at.scale = own.scale;
    at.sinks = g->attn_sinks ? wt->w[W_SINKS].data : NULL; /* gpt-oss */
    if (!c->kv) return backend_attention(be, &att, &t[A_LSE], &q, &k, &v, &at);
    if (batched && src == layer) { /* sequence b's cache rows are b max_seq ..; the keys past a query's position are masked */
        int n = c->attn.n_q, ms = c->kv->max_seq;
        for (int b = 0; b < c->kv->batch; b++) {
            pt_tensor ck = tensor_rows(&c->kv->k[layer], (int64_t)b * ms + c->kv->n_past, n),
                      cv = tensor_rows(&c->kv->v[layer], (int64_t)b * ms + c->kv->n_past, n);
            pt_tensor nk = tensor_rows(&k, (int64_t)b * n, n), nv = tensor_rows(&v, (int64_t)b * n, n);
            TRY(backend_copy(be, &ck, &nk));
            TRY(backend_copy(be, &cv, &nv));
        }
    }
    at.n_kv = batched ? c->kv->max_seq : c->kv->n_past + (int)c->rows;
    at.q_pos0 = c->kv->n_past;
    return backend_attention(be, &att, NULL, &q, &c->kv->k[src], &c->kv->v[src], &at);
}

/* attention_core, then (qwen35) t[A_ATTG] = the output times sigmoid of the gate rows of q_proj */
static pt_status attention(const fwd_ctx *c, int layer, layer_acts *a)
{
    TRY(attention_core(c, layer, a));
    if (!c->m->cfg.attn_gate) return PT_OK;
    TRY(proj(c, layer, W_Q_GATE, &a->t[A_QGATE], &a->t[A_XN1], a->xs));
    TRY(backend_copy(c->m->be, &a->t[A_ATTG], &a->t[A_ATT]));
    return backend_sigmoid_mul(c->m->be, &a->t[A_ATTG], &a->t[A_QGATE]);
}

/* t[A_LY] = a Gated DeltaNet layer's output before out_proj, from the normed input t[A_XN1]: the conv over
 * in_proj_qkv, the gates, the delta rule (t[A_LO]), and RMSNormGated (each head's norm times w, times SiLU(in_proj_z x));
 * with a cache, its conv and recurrent states carry on from the tokens before. */
static pt_status delta_net(const fwd_ctx *c, int layer, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t;
    pt_delta d = {.batch = c->attn.batch, .seq = c->attn.n_q, .k_heads = g->lin_k_heads, .v_heads = g->lin_v_heads,
                  .k_dim = g->lin_k_dim, .v_dim = g->lin_v_dim, .conv = g->lin_conv, .segments = c->attn.segments};
    TRY(proj(c, layer, W_LIN_QKV, &t[A_LQKV], &t[A_XN1], a->xs));
    TRY(proj(c, layer, W_LIN_Z, &t[A_LZ], &t[A_XN1], a->xs));
    TRY(proj(c, layer, W_LIN_B, &t[A_LB], &t[A_XN1], a->xs));
    TRY(proj(c, layer, W_LIN_A, &t[A_LA], &t[A_XN1], a->xs));
    TRY(backend_conv1d_silu(be, &t[A_LCONV], &t[A_LQKV], &wt->w[W_LIN_CONV], c->kv ? &c->kv->conv[layer] : NULL, &d));
    TRY(backend_delta_gates(be, &t[A_LBETA], &t[A_LG], &t[A_LB], &t[A_LA], &wt->w[W_LIN_ALOG], &wt->w[W_LIN_DT]));
    pt_tensor *st = c->kv ? &c->kv->state[layer] : NULL; /* a prompt or training: chunked; a generated token: one step */
    TRY(d.seq > 1 ? backend_delta_chunk(be, &t[A_LO], &t[A_LCONV], &t[A_LBETA], &t[A_LG], st, &d)
                  : backend_delta_rule(be, &t[A_LO], &t[A_LCONV], &t[A_LBETA], &t[A_LG], st, &d));
    pt_tensor on = forward_head_rows(&t[A_LN], g->lin_v_dim), ov = forward_head_rows(&t[A_LO], g->lin_v_dim);
    TRY(backend_rmsnorm(be, &on, &t[A_LRSTD], &ov, &wt->w[W_LIN_NORM], g->norm_eps));
    return backend_swiglu(be, &t[A_LY], &t[A_LZ], &t[A_LN]);
}

/* The norm that follows a residual add in the same pass (backend_add_rmsnorm): its weight, output
 * and rstd; none (w -1) at the end of a layer. */
typedef struct {
    int w;
    pt_tensor *y, *rstd;
} next_norm;

/* y = proj(w)(x) + res, or with post-norms y = norm(proj(w)(x)) + res keeping the projection in
 * *pre and the norm's rstd (the branch times residual_scale first, when the family has one); then the next norm of y, fused with the add, when there is one */
static pt_status proj_residual(const fwd_ctx *c, int layer, int w, int norm, pt_tensor *y, const pt_tensor *x,
                               const pt_tensor *res, pt_tensor *xs, pt_tensor *pre, pt_tensor *rstd, next_norm nn)
{
    pt_backend *be = c->m->be;
    const pt_layer_weights *wt = &c->m->layers[layer];
    if (!c->m->cfg.post_norms) {
        TRY(proj(c, layer, w, y, x, xs));
        if (w == W_O && c->m->cfg.o_bias) TRY(backend_add_bias(be, y, &wt->w[W_O_BIAS])); /* gpt-oss */
    } else {
        TRY(proj(c, layer, w, pre, x, xs));
        TRY(backend_rmsnorm(be, y, rstd, pre, &wt->w[norm], c->m->cfg.norm_eps));
    }
    float rs = c->m->cfg.residual_scale; /* granite's residual_multiplier */
    if (rs != 0.0f && rs != 1.0f) TRY(backend_scale(be, y, rs));
    if (nn.w < 0) return backend_add(be, y, res);
    return backend_add_rmsnorm(be, y, nn.y, nn.rstd, res, &wt->w[nn.w], c->m->cfg.norm_eps);
}

pt_status forward_layer(const fwd_ctx *c, int layer, const pt_tensor *x, pt_tensor *out, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t;
    next_norm ffn_norm = {W_FFN_NORM, &t[A_XN2], &t[A_RSTD2]}, none = {-1, NULL, NULL};
    if (g->no_pre_norms) { /* olmo2: attention and the MLP read the stream itself (kept as their inputs) */
        TRY(backend_copy(be, &t[A_XN1], x));
        ffn_norm = none;
    } else {
        TRY(backend_rmsnorm(be, &t[A_XN1], &t[A_RSTD1], x, &wt->w[W_ATTN_NORM], g->norm_eps));
    }
    bool lin = model_layer_linear(g, layer);
    TRY(lin ? delta_net(c, layer, a) : attention(c, layer, a));
    pt_tensor att = front(&t[g->attn_gate ? A_ATTG : A_ATT], (int64_t)g->n_heads * model_layer_head_dim(g, layer));
    TRY(proj_residual(c, layer, lin ? W_LIN_OUT : W_O, W_POST_ATTN_NORM, &t[A_H], lin ? &t[A_LY] : &att, x,
                      a->xs, &t[A_O], &t[A_RSTD3], ffn_norm));
    if (g->no_pre_norms) TRY(backend_copy(be, &t[A_XN2], &t[A_H]));
    if (model_layer_moe(g, layer)) { /* out = h + the experts' weighted sum */
        TRY(backend_copy(be, out, &t[A_H]));
        return forward_moe(c, layer, &t[A_XN2], out, &a->moe);
    }
    TRY(proj(c, layer, W_GATE, &t[A_GATE], &t[A_XN2], a->xs));
    TRY(proj(c, layer, W_UP, &t[A_UP], &t[A_XN2], a->xs));
    if (g->act == PT_ACT_GELU_TANH)
        TRY(backend_geglu(be, &t[A_ACT], &t[A_GATE], &t[A_UP]));
    else
        TRY(backend_swiglu(be, &t[A_ACT], &t[A_GATE], &t[A_UP]));
    pt_tensor *h2 = g->ple_dim > 0 ? &t[A_H2] : out;
    TRY(proj_residual(c, layer, W_DOWN, W_POST_FFN_NORM, h2, &t[A_ACT], &t[A_H], a->xs, &t[A_D], &t[A_RSTD4], none));
    if (g->ple_dim > 0) { /* gemma4: out = h2 + norm(proj(gelu(gate(h2)) * per-layer input)) */
        pt_tensor in = tensor_rows(&c->ple_in, (int64_t)layer * c->rows, c->rows);
        TRY(proj(c, layer, W_PLE_GATE, &t[A_PLG], h2, a->xs));
        TRY(backend_geglu(be, &t[A_PLA], &t[A_PLG], &in));
        TRY(proj(c, layer, W_PLE_PROJ, &t[A_PLP], &t[A_PLA], a->xs));
        TRY(backend_rmsnorm(be, out, &t[A_RSTD5], &t[A_PLP], &wt->w[W_PLE_NORM], g->norm_eps));
        TRY(backend_add(be, out, h2));
    }
    float scalar = g->layer_scalars && c->m->layer_scalar ? c->m->layer_scalar[layer] : 1.0f;
    return scalar != 1.0f ? backend_scale(be, out, scalar) : PT_OK;
}

/* gemma4's per-layer inputs from the scaled embeddings x0 (transformers' get_per_layer_inputs and
 * project_per_layer_inputs): layer l's (norm(x0 P_lᵀ / sqrt(dim)) + E_l[ids] sqrt(ple)) / sqrt(2). */
static pt_status per_layer_inputs(const fwd_ctx *c, const int32_t *ids, const pt_tensor *x0)
{
    const pt_model *m = c->m;
    const pt_model_config *g = &m->cfg;
    pt_tensor t0 = c->ple_tmp, rstd = c->ple_rstd;
    for (int l = 0; l < g->n_layers; l++) {
        pt_tensor in = tensor_rows(&c->ple_in, (int64_t)l * c->rows, c->rows);
        TRY(backend_matmul(m->be, &t0, x0, &m->layers[l].w[W_PLE_MODEL], 0.0f));
        TRY(backend_scale(m->be, &t0, 1.0f / sqrtf((float)g->dim)));
        TRY(backend_rmsnorm(m->be, &in, &rstd, &t0, &m->ple_norm, g->norm_eps));
        TRY(backend_embed(m->be, &t0, &m->layers[l].w[W_PLE_EMBED], ids));
        TRY(backend_scale(m->be, &t0, sqrtf((float)g->ple_dim)));
        TRY(backend_add(m->be, &in, &t0));
        TRY(backend_scale(m->be, &in, 1.0f / sqrtf(2.0f)));
    }
    return PT_OK;
}

pt_tensor *forward_output(const fwd_ctx *c, fwd_bufs *b) { return &b->x[c->m->cfg.n_layers % b->n_x]; }

static uint64_t noise_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

pt_status forward_embed_noise(pt_backend *be, pt_tensor *x, pt_tensor *buf, float mag, uint64_t seed)
{
    int64_t n = tensor_numel(x);
    if (x->dtype != PT_F32 && x->dtype != PT_BF16)
        return ERR(PT_ERR_INTERNAL, "NEFTune noise on %s activations", dtype_name(x->dtype));
    float *host = malloc(sizeof(float) * (size_t)n);
    TRY_ALLOC(host);
    uint64_t key = noise_mix(seed ^ 0x6e656674756e65ULL); /* "neftune" */
    for (int64_t i = 0; i < n; i++) {
        double u = (double)(noise_mix(key + (uint64_t)i * 0x9e3779b97f4a7c15ULL) >> 11) / 9007199254740992.0;
        host[i] = mag * (float)(2.0 * u - 1.0);
    }
    if (x->dtype == PT_BF16) { /* in place: element i's two bytes lie before float i's end */
        uint16_t *h16 = (uint16_t *)(void *)host;
        for (int64_t i = 0; i < n; i++) h16[i] = quant_f32_to_bf16(host[i]);
    }
    pt_tensor stage = *buf;
    stage.dtype = x->dtype, stage.ndim = x->ndim, stage.nbytes = x->nbytes;
    memcpy(stage.shape, x->shape, sizeof stage.shape);
    pt_status st = buf->nbytes >= x->nbytes ? backend_upload(be, &stage, host, x->nbytes)
                                            : ERR(PT_ERR_INTERNAL, "NEFTune: the staging buffer is too small");
    free(host);
    TRY(st);
    return backend_add(be, x, &stage);
}

pt_status forward_run(const fwd_ctx *c, const int32_t *ids, fwd_bufs *b, const fwd_hooks *h)
{
    const pt_model *m = c->m;
    TRY(backend_embed(m->be, &b->x[0], adapter_embed_table(c->ad, m), ids)); /* modules_to_save: the adapter's */
    float scale = m->cfg.embed_scale;
    /* NEFTune's hook sees the embedding module's output: before the model's scale, or after it where
     * the module itself scales (Gemma 2 and 3) */
    bool noise = c->noise_mag > 0.0f && b->n_x > 1;
    if (noise && !m->cfg.embed_scaled_in_module) TRY(forward_embed_noise(m->be, &b->x[0], &b->x[1], c->noise_mag, c->noise_seed));
    if (scale != 0.0f && scale != 1.0f) TRY(backend_scale(m->be, &b->x[0], scale));
    if (noise && m->cfg.embed_scaled_in_module) TRY(forward_embed_noise(m->be, &b->x[0], &b->x[1], c->noise_mag, c->noise_seed));
    if (m->cfg.ple_dim > 0) TRY(per_layer_inputs(c, ids, &b->x[0]));
    for (int l = 0; l < m->cfg.n_layers; l++) {
        if (h && h->before) TRY(h->before(h->arg, l));
        TRY(forward_layer(c, l, &b->x[l % b->n_x], &b->x[(l + 1) % b->n_x], &b->acts[forward_acts_index(b, m->cfg.n_layers, l)]));
    }
    return PT_OK;
}
