/* forward.c — the forward pass of the llama, qwen2 and gemma2 families over backend ops, with a
 * key/value cache:
 *   x = embed(ids) (* sqrt(dim): gemma2);
 *   per layer: a = o(attn(rope(q(n1 x) + bq), rope(k(n1 x) + bk), v(n1 x) + bv))   (biases: qwen2)
 *              x += a, or x += n3(a) with gemma2's post-attention norm;
 *              m = down(act(gate(n2 x)) * up(n2 x))   (act: silu, or tanh-gelu for gemma2)
 *              x += m, or x += n4(m);
 *   logits = lm_head(norm(x)), soft-capped (gemma2).
 * Attention takes the layer's scale, score soft-cap and sliding window (model_layer_attention).
 * New keys and values are written straight into the cache rows of their positions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/lora.h"
#include "ptrain/model.h"

enum { B_X, B_XN, B_Q, B_ATT, B_PROJ, B_GATE, B_UP, B_LOGITS, B_LORA, B_COUNT };

typedef struct {
    pt_tensor t[B_COUNT];
} fwd_buffers;

static pt_status buffers_alloc(pt_backend *be, const pt_model_config *c, int lora_r, int n, int n_logits,
                               fwd_buffers *b)
{
    int64_t widths[B_COUNT] = {c->dim, c->dim, (int64_t)c->n_heads * c->head_dim, (int64_t)c->n_heads * c->head_dim,
                               c->dim, c->ffn_dim, c->ffn_dim, c->vocab, lora_r};
    memset(b, 0, sizeof *b);
    for (int i = 0; i < B_COUNT; i++) {
        int64_t shape[2] = {i == B_LOGITS ? n_logits : n, widths[i]};
        b->t[i] = tensor_make(PT_F32, 2, shape);
        TRY(backend_alloc(be, &b->t[i]));
    }
    return PT_OK;
}

static void buffers_free(pt_backend *be, fwd_buffers *b)
{
    for (int i = 0; i < B_COUNT; i++) backend_release(be, &b->t[i]);
}

/* y = x Wᵀ, plus s (x Aᵀ) Bᵀ when an adapter covers this projection; tmp is [n, r] */
static pt_status proj(pt_model *m, int l, int w, pt_tensor *y, const pt_tensor *x, pt_tensor *tmp)
{
    TRY(backend_matmul(m->be, y, x, &m->layers[l].w[w], 0.0f));
    lora_pair *p = lora_at(m->adapter, l, w);
    if (!p) return PT_OK;
    pt_tensor t = tensor_rows(tmp, 0, x->shape[0]);
    TRY(backend_matmul(m->be, &t, x, &p->a, 0.0f));
    TRY(backend_scale(m->be, &t, m->adapter->scale));
    return backend_matmul(m->be, y, &t, &p->b, 1.0f);
}

/* q, k and v of the layer from the normed input, with qwen2's biases */
static pt_status qkv(pt_model *m, int l, fwd_buffers *b, pt_tensor *k_new, pt_tensor *v_new)
{
    const pt_layer_weights *w = &m->layers[l];
    pt_tensor *xn = &b->t[B_XN], *q = &b->t[B_Q];
    TRY(proj(m, l, W_Q, q, xn, &b->t[B_LORA]));
    TRY(proj(m, l, W_K, k_new, xn, &b->t[B_LORA]));
    TRY(proj(m, l, W_V, v_new, xn, &b->t[B_LORA]));
    if (!m->cfg.qkv_bias) return PT_OK;
    TRY(backend_add_bias(m->be, q, &w->w[W_Q_BIAS]));
    TRY(backend_add_bias(m->be, k_new, &w->w[W_K_BIAS]));
    return backend_add_bias(m->be, v_new, &w->w[W_V_BIAS]);
}

/* x += B_PROJ, through the post-norm `norm` when the family has one (B_XN is free by now) */
static pt_status residual_add(pt_model *m, int l, int norm, fwd_buffers *b)
{
    if (!m->cfg.post_norms) return backend_add(m->be, &b->t[B_X], &b->t[B_PROJ]);
    TRY(backend_rmsnorm(m->be, &b->t[B_XN], NULL, &b->t[B_PROJ], &m->layers[l].w[norm], m->cfg.norm_eps));
    return backend_add(m->be, &b->t[B_X], &b->t[B_XN]);
}

static pt_status attention_block(pt_model *m, pt_kv_cache *kv, int l, int n, const int32_t *pos, fwd_buffers *b)
{
    const pt_model_config *c = &m->cfg;
    pt_backend *be = m->be;
    pt_tensor *q = &b->t[B_Q];
    pt_tensor k_new = tensor_rows(&kv->k[l], kv->n_past, n), v_new = tensor_rows(&kv->v[l], kv->n_past, n);
    TRY(backend_rmsnorm(be, &b->t[B_XN], NULL, &b->t[B_X], &m->layers[l].w[W_ATTN_NORM], c->norm_eps));
    TRY(qkv(m, l, b, &k_new, &v_new));
    TRY(backend_rope(be, q, c->n_heads, c->head_dim, pos, m->inv_freq));
    TRY(backend_rope(be, &k_new, c->n_kv_heads, c->head_dim, pos, m->inv_freq));
    pt_attention desc = model_layer_attention(c, l);
    desc.batch = 1;
    desc.n_q = n;
    desc.n_kv = kv->n_past + n;
    desc.q_pos0 = kv->n_past;
    TRY(backend_attention(be, &b->t[B_ATT], NULL, q, &kv->k[l], &kv->v[l], &desc));
    TRY(proj(m, l, W_O, &b->t[B_PROJ], &b->t[B_ATT], &b->t[B_LORA]));
    return residual_add(m, l, W_POST_ATTN_NORM, b);
}

static pt_status mlp_block(pt_model *m, int l, fwd_buffers *b)
{
    pt_backend *be = m->be;
    const pt_layer_weights *w = &m->layers[l];
    TRY(backend_rmsnorm(be, &b->t[B_XN], NULL, &b->t[B_X], &w->w[W_FFN_NORM], m->cfg.norm_eps));
    TRY(proj(m, l, W_GATE, &b->t[B_GATE], &b->t[B_XN], &b->t[B_LORA]));
    TRY(proj(m, l, W_UP, &b->t[B_UP], &b->t[B_XN], &b->t[B_LORA]));
    if (m->cfg.act == PT_ACT_GELU_TANH)
        TRY(backend_geglu(be, &b->t[B_GATE], &b->t[B_GATE], &b->t[B_UP]));
    else
        TRY(backend_swiglu(be, &b->t[B_GATE], &b->t[B_GATE], &b->t[B_UP]));
    TRY(proj(m, l, W_DOWN, &b->t[B_PROJ], &b->t[B_GATE], &b->t[B_LORA]));
    return residual_add(m, l, W_POST_FFN_NORM, b);
}

static pt_status embed_tokens(pt_model *m, const int32_t *ids, fwd_buffers *b)
{
    TRY(backend_embed(m->be, &b->t[B_X], &m->tok_embd, ids));
    float s = m->cfg.embed_scale;
    return s != 0.0f && s != 1.0f ? backend_scale(m->be, &b->t[B_X], s) : PT_OK;
}

static pt_status forward_layers(pt_model *m, pt_kv_cache *kv, const int32_t *ids, int n, bool last_only,
                                fwd_buffers *b, float *logits)
{
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    TRY_ALLOC(pos);
    for (int i = 0; i < n; i++) pos[i] = kv->n_past + i;
    pt_status st = embed_tokens(m, ids, b);
    for (int l = 0; l < m->cfg.n_layers && st == PT_OK; l++) {
        st = attention_block(m, kv, l, n, pos, b);
        if (st == PT_OK) st = mlp_block(m, l, b);
    }
    free(pos);
    TRY(st);
    TRY(backend_rmsnorm(m->be, &b->t[B_XN], NULL, &b->t[B_X], &m->out_norm, m->cfg.norm_eps));
    pt_tensor rows = last_only ? tensor_rows(&b->t[B_XN], n - 1, 1) : b->t[B_XN];
    TRY(backend_matmul(m->be, &b->t[B_LOGITS], &rows, &m->output, 0.0f));
    if (m->cfg.final_softcap > 0.0f)
        TRY(backend_softcap(m->be, &b->t[B_LOGITS], &b->t[B_LOGITS], m->cfg.final_softcap));
    return backend_download(m->be, &b->t[B_LOGITS], logits, b->t[B_LOGITS].nbytes);
}

pt_status model_forward(pt_model *m, pt_kv_cache *kv, const int32_t *ids, int n, float *logits, bool last_only)
{
    if (n <= 0) return ERR(PT_ERR_INTERNAL, "forward of %d tokens", n);
    if (kv->n_past + n > kv->max_seq)
        return ERR(PT_ERR_USER, "%d tokens do not fit the context of %d (already %d); use fewer tokens",
                   n, kv->max_seq, kv->n_past);
    fwd_buffers b;
    pt_status st = buffers_alloc(m->be, &m->cfg, m->adapter ? m->adapter->r : 1, n, last_only ? 1 : n, &b);
    if (st == PT_OK) st = forward_layers(m, kv, ids, n, last_only, &b, logits);
    buffers_free(m->be, &b);
    if (st == PT_OK) kv->n_past += n;
    return st;
}

pt_status kv_cache_init(const pt_model *m, int max_seq, pt_kv_cache *kv)
{
    memset(kv, 0, sizeof *kv);
    kv->max_seq = max_seq;
    kv->k = calloc((size_t)m->cfg.n_layers, sizeof(pt_tensor));
    kv->v = calloc((size_t)m->cfg.n_layers, sizeof(pt_tensor));
    TRY_ALLOC(kv->k && kv->v ? kv->k : NULL);
    int64_t shape[2] = {max_seq, (int64_t)m->cfg.n_kv_heads * m->cfg.head_dim};
    for (int l = 0; l < m->cfg.n_layers; l++) {
        kv->k[l] = tensor_make(PT_F32, 2, shape);
        kv->v[l] = tensor_make(PT_F32, 2, shape);
        TRY(backend_alloc(m->be, &kv->k[l]));
        TRY(backend_alloc(m->be, &kv->v[l]));
    }
    return PT_OK;
}

void kv_cache_free(const pt_model *m, pt_kv_cache *kv)
{
    for (int l = 0; kv->k && l < m->cfg.n_layers; l++) {
        backend_release(m->be, &kv->k[l]);
        backend_release(m->be, &kv->v[l]);
    }
    free(kv->k);
    free(kv->v);
    memset(kv, 0, sizeof *kv);
}
