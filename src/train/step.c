/* step.c — forward and backward of one micro-batch with LoRA (see step.h for the contract).
 *
 * A projection with an adapter computes y = x Wᵀ + (s·x Aᵀ) Bᵀ; s·x Aᵀ (xs) is kept for backward.
 * Per layer, forward keeps what backward reads: the normed inputs, q and k after RoPE, v, the
 * attention output and its log-sum-exp, the residual after attention, gate, up and their product.
 * With checkpointing only each layer's input survives the forward pass and the layer is run again
 * just before its backward. */
#include "ptrain/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { A_XN1, A_Q, A_K, A_V, A_ATT, A_H, A_XN2, A_GATE, A_UP, A_ACT, A_RSTD1, A_RSTD2, A_LSE, A_COUNT };

typedef struct {
    pt_tensor t[A_COUNT];
    pt_tensor xs[W_COUNT]; /* s · x Aᵀ per adapted projection, [N, r] */
} layer_acts;

typedef struct {
    pt_model *m;
    pt_lora *l;
    const train_batch *b;
    int64_t n; /* B*T rows */
    pt_attention attn;
    float dropout;     /* on the adapters' input; 0: none */
    uint64_t seed;
    pt_tensor scratch; /* [n, widest projection input] for dropped-out inputs */
} step_ctx;

/* scratch seen as [n, cols] */
static pt_tensor scratch_as(const step_ctx *c, int64_t cols)
{
    int64_t shape[2] = {c->n, cols};
    pt_tensor t = tensor_make(PT_F32, 2, shape);
    t.data = c->scratch.data;
    return t;
}

static uint64_t mask_seed(const step_ctx *c, int layer, int w)
{
    return c->seed * 0x100000001b3ULL + (uint64_t)layer * W_COUNT + (uint64_t)w;
}

/* The adapters' input: x itself, or x with dropout (same mask every time for this layer and w). */
static pt_status adapter_input(const step_ctx *c, int layer, int w, const pt_tensor *x, pt_tensor *out)
{
    if (c->dropout <= 0) {
        *out = *x;
        return PT_OK;
    }
    *out = scratch_as(c, x->shape[1]);
    return backend_dropout(c->m->be, out, x, c->dropout, mask_seed(c, layer, w));
}

static pt_status make(pt_backend *be, pt_tensor *t, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    *t = tensor_make(PT_F32, 2, shape);
    return backend_alloc(be, t);
}

static pt_status acts_alloc(const step_ctx *c, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    int64_t qw = (int64_t)g->n_heads * g->head_dim, kw = (int64_t)g->n_kv_heads * g->head_dim;
    int64_t widths[A_COUNT] = {g->dim, qw, kw, kw, qw, g->dim, g->dim, g->ffn_dim, g->ffn_dim, g->ffn_dim, 1, 1,
                               g->n_heads};
    memset(a, 0, sizeof *a);
    for (int i = 0; i < A_COUNT; i++) TRY(make(c->m->be, &a->t[i], c->n, widths[i]));
    for (int w = 0; w < W_COUNT; w++)
        if (c->l && c->l->target[w]) TRY(make(c->m->be, &a->xs[w], c->n, c->l->r));
    return PT_OK;
}

static void acts_free(pt_backend *be, layer_acts *a)
{
    for (int i = 0; i < A_COUNT; i++) backend_release(be, &a->t[i]);
    for (int w = 0; w < W_COUNT; w++) backend_release(be, &a->xs[w]);
}

/* y = x Wᵀ (+ (s x Aᵀ) Bᵀ), keeping s x Aᵀ in xs */
static pt_status lin_fwd(const step_ctx *c, int layer, int w, pt_tensor *y, const pt_tensor *x, pt_tensor *xs)
{
    pt_backend *be = c->m->be;
    TRY(backend_matmul(be, y, x, &c->m->layers[layer].w[w], 0.0f));
    lora_pair *p = lora_at(c->l, layer, w);
    if (!p) return PT_OK;
    pt_tensor xin;
    TRY(adapter_input(c, layer, w, x, &xin));
    TRY(backend_matmul(be, xs, &xin, &p->a, 0.0f));
    TRY(backend_scale(be, xs, c->l->scale));
    return backend_matmul(be, y, xs, &p->b, 1.0f);
}

/* dx (+)= dy W (+ s (dy B) A); LoRA gradients accumulate. tmp: [N, r] scratch. */
static pt_status lin_bwd(const step_ctx *c, int layer, int w, pt_tensor *dx, const pt_tensor *dy,
                         const pt_tensor *x, const pt_tensor *xs, pt_tensor *tmp, float beta)
{
    pt_backend *be = c->m->be;
    TRY(backend_matmul_bwd_input(be, dx, dy, &c->m->layers[layer].w[w], beta));
    lora_pair *p = lora_at(c->l, layer, w);
    if (!p) return PT_OK;
    TRY(backend_matmul_bwd_weight(be, &p->grad_b, dy, xs, 1.0f));
    TRY(backend_matmul_bwd_input(be, tmp, dy, &p->b, 0.0f));
    TRY(backend_scale(be, tmp, c->l->scale));
    pt_tensor xin;
    TRY(adapter_input(c, layer, w, x, &xin));
    TRY(backend_matmul_bwd_weight(be, &p->grad_a, tmp, &xin, 1.0f));
    if (c->dropout <= 0) return backend_matmul_bwd_input(be, dx, tmp, &p->a, 1.0f);
    pt_tensor dxin = scratch_as(c, x->shape[1]); /* the dropped-out input is no longer needed */
    TRY(backend_matmul_bwd_input(be, &dxin, tmp, &p->a, 0.0f));
    TRY(backend_dropout(be, &dxin, &dxin, c->dropout, mask_seed(c, layer, w)));
    return backend_add(be, dx, &dxin);
}

/* out = layer(x), filling a */
static pt_status layer_fwd(const step_ctx *c, int layer, const pt_tensor *x, pt_tensor *out, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t;
    TRY(backend_rmsnorm(be, &t[A_XN1], &t[A_RSTD1], x, &wt->w[W_ATTN_NORM], g->norm_eps));
    TRY(lin_fwd(c, layer, W_Q, &t[A_Q], &t[A_XN1], &a->xs[W_Q]));
    TRY(lin_fwd(c, layer, W_K, &t[A_K], &t[A_XN1], &a->xs[W_K]));
    TRY(lin_fwd(c, layer, W_V, &t[A_V], &t[A_XN1], &a->xs[W_V]));
    TRY(backend_rope(be, &t[A_Q], g->n_heads, g->head_dim, c->b->pos, c->m->inv_freq));
    TRY(backend_rope(be, &t[A_K], g->n_kv_heads, g->head_dim, c->b->pos, c->m->inv_freq));
    TRY(backend_attention(be, &t[A_ATT], &t[A_LSE], &t[A_Q], &t[A_K], &t[A_V], &c->attn));
    TRY(lin_fwd(c, layer, W_O, &t[A_H], &t[A_ATT], &a->xs[W_O]));
    TRY(backend_add(be, &t[A_H], x));
    TRY(backend_rmsnorm(be, &t[A_XN2], &t[A_RSTD2], &t[A_H], &wt->w[W_FFN_NORM], g->norm_eps));
    TRY(lin_fwd(c, layer, W_GATE, &t[A_GATE], &t[A_XN2], &a->xs[W_GATE]));
    TRY(lin_fwd(c, layer, W_UP, &t[A_UP], &t[A_XN2], &a->xs[W_UP]));
    TRY(backend_swiglu(be, &t[A_ACT], &t[A_GATE], &t[A_UP]));
    TRY(lin_fwd(c, layer, W_DOWN, out, &t[A_ACT], &a->xs[W_DOWN]));
    return backend_add(be, out, &t[A_H]);
}

enum { G_FFN1, G_FFN2, G_DIM1, G_DH, G_ATT, G_Q, G_K, G_V, G_R, G_COUNT };

typedef struct {
    pt_tensor t[G_COUNT];
} grad_bufs;

static pt_status grads_alloc(const step_ctx *c, grad_bufs *g)
{
    const pt_model_config *m = &c->m->cfg;
    int64_t qw = (int64_t)m->n_heads * m->head_dim, kw = (int64_t)m->n_kv_heads * m->head_dim;
    int64_t widths[G_COUNT] = {m->ffn_dim, m->ffn_dim, m->dim, m->dim, qw, qw, kw, kw, c->l ? c->l->r : 1};
    memset(g, 0, sizeof *g);
    for (int i = 0; i < G_COUNT; i++) TRY(make(c->m->be, &g->t[i], c->n, widths[i]));
    return PT_OK;
}

static void grads_free(pt_backend *be, grad_bufs *g)
{
    for (int i = 0; i < G_COUNT; i++) backend_release(be, &g->t[i]);
}

/* Given dout = dL/d(layer output), replace it with dL/d(layer input) x. */
static pt_status layer_bwd(const step_ctx *c, int layer, const pt_tensor *x, layer_acts *a, pt_tensor *dout,
                           grad_bufs *g)
{
    const pt_model_config *cf = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t;
    /* MLP: out = h + down(silu(gate) * up) */
    TRY(lin_bwd(c, layer, W_DOWN, &gt[G_FFN1], dout, &t[A_ACT], &a->xs[W_DOWN], &gt[G_R], 0.0f));
    TRY(backend_swiglu_bwd(be, &gt[G_FFN1], &gt[G_FFN2], &gt[G_FFN1], &t[A_GATE], &t[A_UP]));
    TRY(lin_bwd(c, layer, W_GATE, &gt[G_DIM1], &gt[G_FFN1], &t[A_XN2], &a->xs[W_GATE], &gt[G_R], 0.0f));
    TRY(lin_bwd(c, layer, W_UP, &gt[G_DIM1], &gt[G_FFN2], &t[A_XN2], &a->xs[W_UP], &gt[G_R], 1.0f));
    TRY(backend_rmsnorm_bwd(be, &gt[G_DH], NULL, &gt[G_DIM1], &t[A_H], &wt->w[W_FFN_NORM], &t[A_RSTD2]));
    TRY(backend_add(be, &gt[G_DH], dout)); /* dh = dout + norm path */
    /* attention: h = x + o(attn(rope q, rope k, v)) */
    TRY(lin_bwd(c, layer, W_O, &gt[G_ATT], &gt[G_DH], &t[A_ATT], &a->xs[W_O], &gt[G_R], 0.0f));
    TRY(backend_attention_bwd(be, &gt[G_Q], &gt[G_K], &gt[G_V], &gt[G_ATT], &t[A_Q], &t[A_K], &t[A_V], &t[A_ATT],
                              &t[A_LSE], &c->attn));
    TRY(backend_rope_bwd(be, &gt[G_Q], cf->n_heads, cf->head_dim, c->b->pos, c->m->inv_freq));
    TRY(backend_rope_bwd(be, &gt[G_K], cf->n_kv_heads, cf->head_dim, c->b->pos, c->m->inv_freq));
    TRY(lin_bwd(c, layer, W_Q, &gt[G_DIM1], &gt[G_Q], &t[A_XN1], &a->xs[W_Q], &gt[G_R], 0.0f));
    TRY(lin_bwd(c, layer, W_K, &gt[G_DIM1], &gt[G_K], &t[A_XN1], &a->xs[W_K], &gt[G_R], 1.0f));
    TRY(lin_bwd(c, layer, W_V, &gt[G_DIM1], &gt[G_V], &t[A_XN1], &a->xs[W_V], &gt[G_R], 1.0f));
    TRY(backend_rmsnorm_bwd(be, dout, NULL, &gt[G_DIM1], x, &wt->w[W_ATTN_NORM], &t[A_RSTD1]));
    return backend_add(be, dout, &gt[G_DH]);
}

/* Final norm, lm_head and cross-entropy, `chunk` rows of logits at a time. With dh, also the
 * gradient of the loss with respect to the last layer's output. */
static pt_status loss_head(const step_ctx *c, const pt_tensor *h, pt_tensor *dh, float grad_scale, int chunk,
                           double *loss_sum, int64_t *n_tokens)
{
    pt_backend *be = c->m->be;
    pt_tensor xf, rstd, dxf = {0}, logits;
    TRY(make(be, &xf, c->n, c->m->cfg.dim));
    pt_status st = make(be, &rstd, c->n, 1);
    if (st == PT_OK && dh) st = make(be, &dxf, c->n, c->m->cfg.dim);
    if (st == PT_OK) st = make(be, &logits, chunk, c->m->cfg.vocab);
    if (st == PT_OK) st = backend_rmsnorm(be, &xf, &rstd, h, &c->m->out_norm, c->m->cfg.norm_eps);
    for (int64_t r0 = 0; r0 < c->n && st == PT_OK; r0 += chunk) {
        int64_t rows = c->n - r0 < chunk ? c->n - r0 : chunk;
        pt_tensor xv = tensor_rows(&xf, r0, rows), lv = tensor_rows(&logits, 0, rows);
        st = backend_matmul(be, &lv, &xv, &c->m->output, 0.0f);
        if (st == PT_OK)
            st = backend_cross_entropy(be, &lv, loss_sum, n_tokens, &lv, c->b->targets + r0, grad_scale);
        if (st == PT_OK && dh) {
            pt_tensor dv = tensor_rows(&dxf, r0, rows);
            st = backend_matmul_bwd_input(be, &dv, &lv, &c->m->output, 0.0f);
        }
    }
    if (st == PT_OK && dh) st = backend_rmsnorm_bwd(be, dh, NULL, &dxf, h, &c->m->out_norm, &rstd);
    pt_tensor *all[] = {&xf, &rstd, &dxf, &logits};
    for (int i = 0; i < 4; i++) backend_release(be, all[i]);
    return st;
}

typedef struct {
    pt_tensor *x;      /* [L+1] layer inputs (x[L] = last output) */
    layer_acts *acts;  /* [L], or [1] with checkpointing */
    int n_acts;
} fwd_state;

static void state_free(const step_ctx *c, fwd_state *s)
{
    for (int i = 0; s->x && i <= c->m->cfg.n_layers; i++) backend_release(c->m->be, &s->x[i]);
    for (int i = 0; s->acts && i < s->n_acts; i++) acts_free(c->m->be, &s->acts[i]);
    free(s->x);
    free(s->acts);
}

static pt_status forward_all(const step_ctx *c, bool checkpointing, fwd_state *s)
{
    int layers = c->m->cfg.n_layers;
    s->n_acts = checkpointing ? 1 : layers;
    s->x = calloc((size_t)layers + 1, sizeof *s->x);
    s->acts = calloc((size_t)s->n_acts, sizeof *s->acts);
    TRY_ALLOC(s->x && s->acts ? s->x : NULL);
    for (int i = 0; i <= layers; i++) TRY(make(c->m->be, &s->x[i], c->n, c->m->cfg.dim));
    for (int i = 0; i < s->n_acts; i++) TRY(acts_alloc(c, &s->acts[i]));
    TRY(backend_embed(c->m->be, &s->x[0], &c->m->tok_embd, c->b->ids));
    for (int l = 0; l < layers; l++) TRY(layer_fwd(c, l, &s->x[l], &s->x[l + 1], &s->acts[checkpointing ? 0 : l]));
    return PT_OK;
}

static pt_status backward_all(const step_ctx *c, bool checkpointing, fwd_state *s, pt_tensor *d)
{
    grad_bufs g;
    pt_tensor scratch = {0};
    pt_status st = grads_alloc(c, &g);
    if (st == PT_OK && checkpointing) st = make(c->m->be, &scratch, c->n, c->m->cfg.dim);
    for (int l = c->m->cfg.n_layers - 1; l >= 0 && st == PT_OK; l--) {
        layer_acts *a = &s->acts[checkpointing ? 0 : l];
        if (checkpointing) st = layer_fwd(c, l, &s->x[l], &scratch, a); /* recompute this layer */
        if (st == PT_OK) st = layer_bwd(c, l, &s->x[l], a, d, &g);
    }
    backend_release(c->m->be, &scratch);
    grads_free(c->m->be, &g);
    return st;
}

static step_ctx ctx_make(pt_model *m, pt_lora *l, const train_batch *b)
{
    const pt_model_config *g = &m->cfg;
    step_ctx c = {.m = m, .l = l, .b = b, .n = (int64_t)b->batch * b->seq,
                  .attn = {.batch = b->batch, .n_q = b->seq, .n_kv = b->seq, .q_pos0 = 0, .n_heads = g->n_heads,
                           .n_kv_heads = g->n_kv_heads, .head_dim = g->head_dim,
                           .scale = 1.0f / sqrtf((float)g->head_dim), .segments = b->segments}};
    return c;
}

pt_status step_run(pt_model *m, pt_lora *l, const train_batch *b, const step_options *o, float grad_scale,
                   double *loss_sum, int64_t *n_tokens)
{
    step_ctx c = ctx_make(m, l, b);
    fwd_state s = {0};
    pt_tensor d = {0};
    pt_status st = PT_OK;
    if (l && o->lora_dropout > 0) {
        const pt_model_config *g = &m->cfg;
        int64_t widest = g->ffn_dim > g->dim ? g->ffn_dim : g->dim;
        if ((int64_t)g->n_heads * g->head_dim > widest) widest = (int64_t)g->n_heads * g->head_dim;
        c.dropout = o->lora_dropout;
        c.seed = o->dropout_seed;
        st = make(m->be, &c.scratch, c.n, widest);
    }
    if (st == PT_OK) st = forward_all(&c, o->checkpointing, &s);
    if (st == PT_OK) st = make(m->be, &d, c.n, m->cfg.dim);
    if (st == PT_OK) st = loss_head(&c, &s.x[m->cfg.n_layers], &d, grad_scale, o->loss_chunk > 0 ? o->loss_chunk : 256,
                                    loss_sum, n_tokens);
    if (st == PT_OK) st = backward_all(&c, o->checkpointing, &s, &d);
    backend_release(m->be, &c.scratch);
    backend_release(m->be, &d);
    state_free(&c, &s);
    return st;
}

pt_status step_loss(pt_model *m, pt_lora *l, const train_batch *b, double *loss_sum, int64_t *n_tokens)
{
    step_ctx c = ctx_make(m, l, b);
    fwd_state s = {0};
    pt_status st = forward_all(&c, true, &s);
    if (st == PT_OK) st = loss_head(&c, &s.x[m->cfg.n_layers], NULL, 0.0f, 256, loss_sum, n_tokens);
    state_free(&c, &s);
    return st;
}
