/* step.c — forward and backward of one micro-batch with LoRA (see step.h for the contract), for
 * every family forward.c runs (qwen2's q/k/v biases, gemma2's scaled embedding, post-norms,
 * GeGLU, soft-capped scores and logits, sliding-window layers).
 *
 * A projection with an adapter computes y = x Wᵀ + (s·x Aᵀ) Bᵀ; s·x Aᵀ (xs) is kept for backward.
 * Per layer, forward keeps what backward reads: the normed inputs, q and k after RoPE, v, the
 * attention output and its log-sum-exp, the residual after attention, gate, up and their product
 * (and, with post-norms, the o and down outputs before their norms). Biases are frozen, so their
 * backward is the identity. With checkpointing only each layer's input survives the forward pass
 * and the layer is run again just before its backward. */
#include "ptrain/step.h"

#include <stdlib.h>
#include <string.h>

enum { A_XN1, A_Q, A_K, A_V, A_ATT, A_H, A_XN2, A_GATE, A_UP, A_ACT, A_RSTD1, A_RSTD2, A_LSE,
       A_O, A_D, A_RSTD3, A_RSTD4, /* post-norms only: o and down outputs, their norms' rstd */
       A_COUNT };

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
    int64_t post = g->post_norms ? 1 : 0;
    int64_t widths[A_COUNT] = {g->dim, qw, kw, kw, qw, g->dim, g->dim, g->ffn_dim, g->ffn_dim, g->ffn_dim, 1, 1,
                               g->n_heads, post * g->dim, post * g->dim, post, post};
    memset(a, 0, sizeof *a);
    for (int i = 0; i < A_COUNT; i++)
        if (widths[i]) TRY(make(c->m->be, &a->t[i], c->n, widths[i]));
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

/* dx (+)= dy W (+ s (dy B) A); the LoRA gradients of this micro-batch overwrite grad_a, grad_b
 * (each pair is written once per micro-batch; the trainer accumulates). tmp: [N, r] scratch. */
static pt_status lin_bwd(const step_ctx *c, int layer, int w, pt_tensor *dx, const pt_tensor *dy,
                         const pt_tensor *x, const pt_tensor *xs, pt_tensor *tmp, float beta)
{
    pt_backend *be = c->m->be;
    TRY(backend_matmul_bwd_input(be, dx, dy, &c->m->layers[layer].w[w], beta));
    lora_pair *p = lora_at(c->l, layer, w);
    if (!p) return PT_OK;
    TRY(backend_matmul_bwd_weight(be, &p->grad_b, dy, xs, 0.0f));
    TRY(backend_matmul_bwd_input(be, tmp, dy, &p->b, 0.0f));
    TRY(backend_scale(be, tmp, c->l->scale));
    pt_tensor xin;
    TRY(adapter_input(c, layer, w, x, &xin));
    TRY(backend_matmul_bwd_weight(be, &p->grad_a, tmp, &xin, 0.0f));
    if (c->dropout <= 0) return backend_matmul_bwd_input(be, dx, tmp, &p->a, 1.0f);
    pt_tensor dxin = scratch_as(c, x->shape[1]); /* the dropped-out input is no longer needed */
    TRY(backend_matmul_bwd_input(be, &dxin, tmp, &p->a, 0.0f));
    TRY(backend_dropout(be, &dxin, &dxin, c->dropout, mask_seed(c, layer, w)));
    return backend_add(be, dx, &dxin);
}

/* The layer's attention: c->attn with its window (gemma2's local layers). */
static pt_attention layer_attention(const step_ctx *c, int layer)
{
    pt_attention a = c->attn;
    a.window = model_layer_window(&c->m->cfg, layer);
    return a;
}

/* t[A_ATT] = attention of the normed input t[A_XN1] (q, k, v with biases and RoPE kept) */
static pt_status attn_fwd(const step_ctx *c, int layer, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t;
    TRY(lin_fwd(c, layer, W_Q, &t[A_Q], &t[A_XN1], &a->xs[W_Q]));
    TRY(lin_fwd(c, layer, W_K, &t[A_K], &t[A_XN1], &a->xs[W_K]));
    TRY(lin_fwd(c, layer, W_V, &t[A_V], &t[A_XN1], &a->xs[W_V]));
    if (g->qkv_bias) {
        TRY(backend_add_bias(be, &t[A_Q], &wt->w[W_Q_BIAS]));
        TRY(backend_add_bias(be, &t[A_K], &wt->w[W_K_BIAS]));
        TRY(backend_add_bias(be, &t[A_V], &wt->w[W_V_BIAS]));
    }
    TRY(backend_rope(be, &t[A_Q], g->n_heads, g->head_dim, c->b->pos, c->m->inv_freq));
    TRY(backend_rope(be, &t[A_K], g->n_kv_heads, g->head_dim, c->b->pos, c->m->inv_freq));
    pt_attention at = layer_attention(c, layer);
    return backend_attention(be, &t[A_ATT], &t[A_LSE], &t[A_Q], &t[A_K], &t[A_V], &at);
}

/* y = lin(w)(x) + res, or with post-norms y = norm(lin(w)(x)) + res keeping the projection in
 * *pre and the norm's rstd (y is not res) */
static pt_status lin_residual_fwd(const step_ctx *c, int layer, int w, int norm, pt_tensor *y, const pt_tensor *x,
                                  const pt_tensor *res, pt_tensor *xs, pt_tensor *pre, pt_tensor *rstd)
{
    pt_backend *be = c->m->be;
    if (!c->m->cfg.post_norms) {
        TRY(lin_fwd(c, layer, w, y, x, xs));
        return backend_add(be, y, res);
    }
    TRY(lin_fwd(c, layer, w, pre, x, xs));
    TRY(backend_rmsnorm(be, y, rstd, pre, &c->m->layers[layer].w[norm], c->m->cfg.norm_eps));
    return backend_add(be, y, res);
}

/* out = layer(x), filling a */
static pt_status layer_fwd(const step_ctx *c, int layer, const pt_tensor *x, pt_tensor *out, layer_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t;
    TRY(backend_rmsnorm(be, &t[A_XN1], &t[A_RSTD1], x, &wt->w[W_ATTN_NORM], g->norm_eps));
    TRY(attn_fwd(c, layer, a));
    TRY(lin_residual_fwd(c, layer, W_O, W_POST_ATTN_NORM, &t[A_H], &t[A_ATT], x, &a->xs[W_O], &t[A_O],
                         &t[A_RSTD3]));
    TRY(backend_rmsnorm(be, &t[A_XN2], &t[A_RSTD2], &t[A_H], &wt->w[W_FFN_NORM], g->norm_eps));
    TRY(lin_fwd(c, layer, W_GATE, &t[A_GATE], &t[A_XN2], &a->xs[W_GATE]));
    TRY(lin_fwd(c, layer, W_UP, &t[A_UP], &t[A_XN2], &a->xs[W_UP]));
    if (g->act == PT_ACT_GELU_TANH)
        TRY(backend_geglu(be, &t[A_ACT], &t[A_GATE], &t[A_UP]));
    else
        TRY(backend_swiglu(be, &t[A_ACT], &t[A_GATE], &t[A_UP]));
    return lin_residual_fwd(c, layer, W_DOWN, W_POST_FFN_NORM, out, &t[A_ACT], &t[A_H], &a->xs[W_DOWN], &t[A_D],
                            &t[A_RSTD4]);
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

/* *grad = the gradient at a projection's output given dy at its residual branch: dy itself, or
 * dy through the post-norm `norm` (input pre, rstd saved) written into buf. */
static pt_status post_norm_bwd(const step_ctx *c, int layer, int norm, const pt_tensor *dy, const pt_tensor *pre,
                               const pt_tensor *rstd, pt_tensor *buf, const pt_tensor **grad)
{
    *grad = dy;
    if (!c->m->cfg.post_norms) return PT_OK;
    *grad = buf;
    return backend_rmsnorm_bwd(c->m->be, buf, NULL, dy, pre, &c->m->layers[layer].w[norm], rstd);
}

/* MLP: out = h + [n4](down(act(gate) * up)) with gate, up of n2(h): gt[G_DH] = dL/dh */
static pt_status mlp_bwd(const step_ctx *c, int layer, layer_acts *a, const pt_tensor *dout, grad_bufs *g)
{
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t;
    const pt_tensor *dd;
    TRY(post_norm_bwd(c, layer, W_POST_FFN_NORM, dout, &t[A_D], &t[A_RSTD4], &gt[G_DIM1], &dd));
    TRY(lin_bwd(c, layer, W_DOWN, &gt[G_FFN1], dd, &t[A_ACT], &a->xs[W_DOWN], &gt[G_R], 0.0f));
    if (c->m->cfg.act == PT_ACT_GELU_TANH)
        TRY(backend_geglu_bwd(be, &gt[G_FFN1], &gt[G_FFN2], &gt[G_FFN1], &t[A_GATE], &t[A_UP]));
    else
        TRY(backend_swiglu_bwd(be, &gt[G_FFN1], &gt[G_FFN2], &gt[G_FFN1], &t[A_GATE], &t[A_UP]));
    TRY(lin_bwd(c, layer, W_GATE, &gt[G_DIM1], &gt[G_FFN1], &t[A_XN2], &a->xs[W_GATE], &gt[G_R], 0.0f));
    TRY(lin_bwd(c, layer, W_UP, &gt[G_DIM1], &gt[G_FFN2], &t[A_XN2], &a->xs[W_UP], &gt[G_R], 1.0f));
    TRY(backend_rmsnorm_bwd(be, &gt[G_DH], NULL, &gt[G_DIM1], &t[A_H], &c->m->layers[layer].w[W_FFN_NORM],
                            &t[A_RSTD2]));
    return backend_add(be, &gt[G_DH], dout); /* dh = dout + norm path */
}

/* Given dout = dL/d(layer output), replace it with dL/d(layer input) x. */
static pt_status layer_bwd(const step_ctx *c, int layer, const pt_tensor *x, layer_acts *a, pt_tensor *dout,
                           grad_bufs *g)
{
    const pt_model_config *cf = &c->m->cfg;
    pt_backend *be = c->m->be;
    pt_tensor *t = a->t, *gt = g->t;
    TRY(mlp_bwd(c, layer, a, dout, g));
    /* attention: h = x + [n3](o(attn(rope q, rope k, v))); biases pass dq, dk, dv unchanged */
    const pt_tensor *da;
    TRY(post_norm_bwd(c, layer, W_POST_ATTN_NORM, &gt[G_DH], &t[A_O], &t[A_RSTD3], &gt[G_DIM1], &da));
    TRY(lin_bwd(c, layer, W_O, &gt[G_ATT], da, &t[A_ATT], &a->xs[W_O], &gt[G_R], 0.0f));
    pt_attention at = layer_attention(c, layer);
    TRY(backend_attention_bwd(be, &gt[G_Q], &gt[G_K], &gt[G_V], &gt[G_ATT], &t[A_Q], &t[A_K], &t[A_V], &t[A_ATT],
                              &t[A_LSE], &at));
    TRY(backend_rope_bwd(be, &gt[G_Q], cf->n_heads, cf->head_dim, c->b->pos, c->m->inv_freq));
    TRY(backend_rope_bwd(be, &gt[G_K], cf->n_kv_heads, cf->head_dim, c->b->pos, c->m->inv_freq));
    TRY(lin_bwd(c, layer, W_Q, &gt[G_DIM1], &gt[G_Q], &t[A_XN1], &a->xs[W_Q], &gt[G_R], 0.0f));
    TRY(lin_bwd(c, layer, W_K, &gt[G_DIM1], &gt[G_K], &t[A_XN1], &a->xs[W_K], &gt[G_R], 1.0f));
    TRY(lin_bwd(c, layer, W_V, &gt[G_DIM1], &gt[G_V], &t[A_XN1], &a->xs[W_V], &gt[G_R], 1.0f));
    TRY(backend_rmsnorm_bwd(be, dout, NULL, &gt[G_DIM1], x, &c->m->layers[layer].w[W_ATTN_NORM], &t[A_RSTD1]));
    return backend_add(be, dout, &gt[G_DH]);
}

/* The loss head's buffers: the normed last hidden states and their rstd; the labelled rows of
 * them (gathered), their gradient and the gradient of all rows; one chunk of logits (and of
 * soft-capped logits, gemma2). */
enum { H_XF, H_RSTD, H_XL, H_DXL, H_DXF, H_LOGITS, H_CAPPED, H_COUNT };

/* The rows whose target counts, as runs of consecutive rows, and their targets in that order.
 * Only these rows reach the lm_head: an unlabelled row's logits change neither the loss nor any
 * gradient (its cross-entropy gradient is exactly zero). */
typedef struct {
    int64_t *start, *len; /* runs */
    int64_t n_runs, rows; /* rows: the labelled rows in all */
    int32_t *targets;     /* [rows] */
} labelled_rows;

static pt_status labelled_find(const int32_t *targets, int64_t n, bool all, labelled_rows *lr)
{
    *lr = (labelled_rows){0};
    lr->start = malloc(sizeof(int64_t) * (size_t)(n / 2 + 1));
    lr->len = malloc(sizeof(int64_t) * (size_t)(n / 2 + 1));
    lr->targets = malloc(sizeof(int32_t) * (size_t)(n + 1));
    TRY_ALLOC(lr->start && lr->len && lr->targets ? lr->start : NULL);
    for (int64_t r = 0; r < n; r++) {
        if (targets[r] == PT_IGNORE_INDEX && !all) continue;
        if (lr->n_runs == 0 || lr->start[lr->n_runs - 1] + lr->len[lr->n_runs - 1] != r)
            lr->start[lr->n_runs] = r, lr->len[lr->n_runs++] = 0;
        lr->len[lr->n_runs - 1]++;
        lr->targets[lr->rows++] = targets[r];
    }
    return PT_OK;
}

static void labelled_free(labelled_rows *lr)
{
    free(lr->start), free(lr->len), free(lr->targets);
}

/* Copy the labelled rows of all into packed (gather), or packed back into them (scatter). */
static pt_status labelled_move(pt_backend *be, const labelled_rows *lr, pt_tensor *all, pt_tensor *packed,
                               bool gather)
{
    for (int64_t i = 0, at = 0; i < lr->n_runs; at += lr->len[i++]) {
        pt_tensor a = tensor_rows(all, lr->start[i], lr->len[i]), p = tensor_rows(packed, at, lr->len[i]);
        TRY(gather ? backend_copy(be, &p, &a) : backend_copy(be, &a, &p));
    }
    return PT_OK;
}

/* Cross-entropy of rows [r0, r0+rows) of the labelled states; with a gradient buffer also theirs. */
static pt_status loss_chunk(const step_ctx *c, pt_tensor *h, const int32_t *targets, int64_t r0, int64_t rows,
                            float grad_scale, double *loss_sum, int64_t *n_tokens)
{
    pt_backend *be = c->m->be;
    float cap = c->m->cfg.final_softcap;
    bool grad = h[H_DXL].data != NULL;
    pt_tensor xv = tensor_rows(&h[H_XL], r0, rows), lv = tensor_rows(&h[H_LOGITS], 0, rows);
    TRY(backend_matmul(be, &lv, &xv, &c->m->output, 0.0f));
    pt_tensor zv = lv; /* the logits the loss sees */
    if (cap > 0.0f) {
        zv = tensor_rows(&h[H_CAPPED], 0, rows);
        TRY(backend_softcap(be, &zv, &lv, cap));
    }
    TRY(backend_cross_entropy(be, grad ? &lv : NULL, loss_sum, n_tokens, &zv, targets + r0, grad_scale));
    if (!grad) return PT_OK;
    if (cap > 0.0f) TRY(backend_softcap_bwd(be, &lv, &lv, &zv, cap));
    pt_tensor dv = tensor_rows(&h[H_DXL], r0, rows);
    return backend_matmul_bwd_input(be, &dv, &lv, &c->m->output, 0.0f);
}

/* The chunks of the labelled rows, then their gradient scattered back (zero elsewhere). */
static pt_status loss_rows(const step_ctx *c, pt_tensor *hb, const labelled_rows *lr, int chunk, float grad_scale,
                           double *loss_sum, int64_t *n_tokens)
{
    pt_backend *be = c->m->be;
    bool grad = hb[H_DXF].data != NULL;
    TRY(labelled_move(be, lr, &hb[H_XF], &hb[H_XL], true));
    for (int64_t r0 = 0; r0 < lr->rows; r0 += chunk)
        TRY(loss_chunk(c, hb, lr->targets, r0, lr->rows - r0 < chunk ? lr->rows - r0 : chunk, grad_scale, loss_sum,
                       n_tokens));
    if (!grad) return PT_OK;
    TRY(backend_zero(be, &hb[H_DXF]));
    return labelled_move(be, lr, &hb[H_DXF], &hb[H_DXL], false);
}

/* Final norm, lm_head (and soft-cap) and cross-entropy on the labelled rows, `chunk` rows of
 * logits at a time. With dh, also the gradient of the loss with respect to the last layer's
 * output. */
static pt_status loss_head(const step_ctx *c, const pt_tensor *h, pt_tensor *dh, float grad_scale, int chunk,
                           bool all_rows, double *loss_sum, int64_t *n_tokens)
{
    pt_backend *be = c->m->be;
    const pt_model_config *g = &c->m->cfg;
    labelled_rows lr;
    pt_status st = labelled_find(c->b->targets, c->n, all_rows, &lr);
    int64_t nl = lr.rows > 0 ? lr.rows : 1, ch = chunk < nl ? chunk : nl;
    pt_tensor hb[H_COUNT] = {{0}};
    int64_t rows[H_COUNT] = {c->n, c->n, nl, dh ? nl : 0, dh ? c->n : 0, ch, g->final_softcap > 0.0f ? ch : 0};
    int64_t cols[H_COUNT] = {g->dim, 1, g->dim, g->dim, g->dim, g->vocab, g->vocab};
    for (int i = 0; i < H_COUNT && st == PT_OK; i++)
        if (rows[i]) st = make(be, &hb[i], rows[i], cols[i]);
    if (st == PT_OK) st = backend_rmsnorm(be, &hb[H_XF], &hb[H_RSTD], h, &c->m->out_norm, g->norm_eps);
    if (st == PT_OK) st = loss_rows(c, hb, &lr, chunk, grad_scale, loss_sum, n_tokens);
    if (st == PT_OK && dh) st = backend_rmsnorm_bwd(be, dh, NULL, &hb[H_DXF], h, &c->m->out_norm, &hb[H_RSTD]);
    for (int i = 0; i < H_COUNT; i++) backend_release(be, &hb[i]);
    labelled_free(&lr);
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
    float scale = c->m->cfg.embed_scale;
    if (scale != 0.0f && scale != 1.0f) TRY(backend_scale(c->m->be, &s->x[0], scale));
    for (int l = 0; l < layers; l++) TRY(layer_fwd(c, l, &s->x[l], &s->x[l + 1], &s->acts[checkpointing ? 0 : l]));
    return PT_OK;
}

static pt_status backward_all(const step_ctx *c, const step_options *o, fwd_state *s, pt_tensor *d)
{
    grad_bufs g;
    pt_tensor scratch = {0};
    pt_status st = grads_alloc(c, &g);
    if (st == PT_OK && o->checkpointing) st = make(c->m->be, &scratch, c->n, c->m->cfg.dim);
    for (int l = c->m->cfg.n_layers - 1; l >= 0 && st == PT_OK; l--) {
        layer_acts *a = &s->acts[o->checkpointing ? 0 : l];
        if (o->checkpointing) st = layer_fwd(c, l, &s->x[l], &scratch, a); /* recompute this layer */
        if (st == PT_OK) st = layer_bwd(c, l, &s->x[l], a, d, &g);
        if (st == PT_OK && o->layer_done) st = o->layer_done(o->layer_done_arg, l);
    }
    backend_release(c->m->be, &scratch);
    grads_free(c->m->be, &g);
    return st;
}

static step_ctx ctx_make(pt_model *m, pt_lora *l, const train_batch *b)
{
    step_ctx c = {.m = m, .l = l, .b = b, .n = (int64_t)b->batch * b->seq, .attn = model_layer_attention(&m->cfg, 0)};
    c.attn.batch = b->batch;
    c.attn.n_q = c.attn.n_kv = b->seq;
    c.attn.q_pos0 = 0;
    c.attn.segments = b->segments;
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
                                    o->full_lm_head, loss_sum, n_tokens);
    if (st == PT_OK) st = backward_all(&c, o, &s, &d);
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
    if (st == PT_OK) st = loss_head(&c, &s.x[m->cfg.n_layers], NULL, 0.0f, 256, false, loss_sum, n_tokens);
    state_free(&c, &s);
    return st;
}
