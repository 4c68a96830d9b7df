/* tokens.c — generation's use of the forward pass (forward.h): a key/value cache per layer (none on the
 * layers that reuse another's, gemma4), and
 * forward_tokens, which runs new tokens after the cached ones through the one layer forward
 * (forward.c) and returns their logits; forward_tokens_batch for sequences decoded in step, and
 * forward_tokens_shared for a prompt they all start with. The buffers of a call come from an arena
 * sized for it. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/forward.h"

/* A Gated DeltaNet layer's conv and recurrent states, zeroed (qwen35). */
static pt_status states_make(const pt_model *m, int batch, int l, pt_kv_cache *kv)
{
    const pt_model_config *c = &m->cfg;
    int64_t conv[2] = {(int64_t)batch * (c->lin_conv > 1 ? c->lin_conv - 1 : 1), model_lin_conv_dim(c)},
            state[2] = {(int64_t)batch * c->lin_v_heads * c->lin_k_dim, c->lin_v_dim};
    kv->conv[l] = tensor_make(m->be->act, 2, conv);
    kv->state[l] = tensor_make(PT_F32, 2, state);
    TRY(backend_alloc(m->be, &kv->conv[l]));
    TRY(backend_alloc(m->be, &kv->state[l]));
    TRY(backend_zero(m->be, &kv->conv[l]));
    return backend_zero(m->be, &kv->state[l]);
}

static pt_status cache_make(const pt_model *m, int batch, int max_seq, pt_kv_cache *kv)
{
    memset(kv, 0, sizeof *kv);
    kv->max_seq = max_seq, kv->batch = batch;
    kv->k = calloc((size_t)m->cfg.n_layers, sizeof(pt_tensor));
    kv->v = calloc((size_t)m->cfg.n_layers, sizeof(pt_tensor));
    kv->conv = calloc((size_t)m->cfg.n_layers, sizeof(pt_tensor));
    kv->state = calloc((size_t)m->cfg.n_layers, sizeof(pt_tensor));
    TRY_ALLOC(kv->k && kv->v && kv->conv && kv->state ? kv->k : NULL);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        if (model_layer_linear(&m->cfg, l)) {
            TRY(states_make(m, batch > 1 ? batch : 1, l, kv));
            continue;
        }
        if (model_kv_source(&m->cfg, l) != l) continue; /* gemma4's KV-shared layers read another layer's */
        int64_t shape[2] = {(int64_t)(batch > 1 ? batch : 1) * max_seq,
                            (int64_t)model_layer_kv_heads(&m->cfg, l) * model_layer_head_dim(&m->cfg, l)};
        kv->k[l] = tensor_make(m->be->act, 2, shape);
        kv->v[l] = tensor_make(m->be->act, 2, shape);
        TRY(backend_alloc(m->be, &kv->k[l]));
        TRY(backend_alloc(m->be, &kv->v[l]));
        if (batch > 1) { /* the masked rows past a position must hold numbers */
            TRY(backend_zero(m->be, &kv->k[l]));
            TRY(backend_zero(m->be, &kv->v[l]));
        }
    }
    return PT_OK;
}

pt_status kv_cache_init(const pt_model *m, int max_seq, pt_kv_cache *kv) { return cache_make(m, 1, max_seq, kv); }

pt_status kv_cache_init_batch(const pt_model *m, int batch, int max_seq, pt_kv_cache *kv)
{
    return cache_make(m, batch, max_seq, kv);
}

void kv_cache_free(const pt_model *m, pt_kv_cache *kv)
{
    for (int l = 0; kv->k && l < m->cfg.n_layers; l++) {
        pt_tensor *all[4] = {&kv->k[l], &kv->v[l], kv->conv ? &kv->conv[l] : NULL, kv->state ? &kv->state[l] : NULL};
        for (int i = 0; i < 4; i++)
            if (all[i] && all[i]->data) backend_release(m->be, all[i]);
    }
    free(kv->k);
    free(kv->v);
    free(kv->conv);
    free(kv->state);
    memset(kv, 0, sizeof *kv);
}

/* The pass's buffers and the logits': the residual stream (2 in turn), one set of activations,
 * the final norm's output and rstd, the logits rows. */
static pt_status take_all(pt_arena *arena, fwd_ctx *c, int n_logits, fwd_bufs *b, pt_tensor *xn, pt_tensor *rstd,
                          pt_tensor *logits)
{
    TRY(forward_take(arena, c, false, false, b));
    TRY(arena_take(arena, xn, c->rows, c->m->cfg.dim));
    TRY(arena_take_f32(arena, rstd, c->rows, 1));
    return arena_take_f32(arena, logits, n_logits, c->m->cfg.vocab);
}

/* seqs > 1 (batched, last_only): the logits of each sequence's last row. */
static pt_status run(fwd_ctx *c, pt_arena *arena, const int32_t *ids, bool last_only, int seqs, float *logits)
{
    const pt_model *m = c->m;
    fwd_bufs b;
    pt_tensor xn, rstd, out, sel = {0};
    pt_status st = take_all(arena, c, last_only ? seqs : (int)c->rows, &b, &xn, &rstd, &out);
    if (st == PT_OK && seqs > 1) st = arena_take(arena, &sel, seqs, m->cfg.dim);
    if (st == PT_OK) st = forward_run(c, ids, &b, NULL);
    if (st == PT_OK) st = backend_rmsnorm(m->be, &xn, &rstd, forward_output(c, &b), &m->out_norm, m->cfg.norm_eps);
    float ls = m->cfg.logit_scale; /* granite: logits / logits_scaling, as the normed states times 1/ls */
    if (st == PT_OK && ls != 0.0f && ls != 1.0f) st = backend_scale(m->be, &xn, 1.0f / ls);
    pt_tensor rows = last_only ? tensor_rows(&xn, c->rows - 1, 1) : xn;
    for (int q = 0; st == PT_OK && seqs > 1 && q < seqs; q++) { /* each sequence's last row */
        pt_tensor to = tensor_rows(&sel, q, 1), from = tensor_rows(&xn, (c->rows / seqs) * (q + 1) - 1, 1);
        st = backend_copy(m->be, &to, &from);
    }
    if (seqs > 1) rows = sel;
    if (st == PT_OK) st = backend_matmul(m->be, &out, &rows, adapter_lm_head(c->ad, m), 0.0f);
    if (st == PT_OK && m->cfg.final_softcap > 0.0f) st = backend_softcap(m->be, &out, &out, m->cfg.final_softcap);
    if (st == PT_OK) st = backend_download(m->be, &out, logits, out.nbytes);
    forward_bufs_free(&b);
    return st;
}

/* n new tokens of each of seqs sequences (1: the plain cache) */
static pt_status tokens_run(const pt_model *m, const pt_adapter *ad, pt_kv_cache *kv, const int32_t *ids, int n,
                            int seqs, float *logits, bool last_only)
{
    if (n <= 0) return ERR(PT_ERR_INTERNAL, "forward of %d tokens", n);
    if (kv->n_past + n > kv->max_seq)
        return ERR(PT_ERR_USER, "%d tokens do not fit the context of %d (already %d); use fewer tokens",
                   n, kv->max_seq, kv->n_past);
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n * (size_t)seqs);
    TRY_ALLOC(pos);
    for (int i = 0; i < n * seqs; i++) pos[i] = kv->n_past + i % n;
    fwd_ctx c = forward_ctx(m, ad, seqs, n, pos, NULL);
    c.kv = kv;
    fwd_bufs sizing;
    pt_tensor xn, rstd, out;
    pt_arena arena;
    arena_measure(&arena, m->be->act);
    pt_status st = take_all(&arena, &c, last_only ? seqs : n, &sizing, &xn, &rstd, &out);
    if (st == PT_OK && seqs > 1) st = arena_take(&arena, &xn, seqs, m->cfg.dim);
    forward_bufs_free(&sizing);
    size_t bytes = arena.high;
    if (st == PT_OK) st = arena_open(&arena, m->be, bytes);
    if (st == PT_OK) st = run(&c, &arena, ids, last_only, seqs, logits);
    arena_close(&arena);
    free(pos);
    if (st == PT_OK) kv->n_past += n;
    return st;
}

pt_status forward_tokens(const pt_model *m, const pt_adapter *ad, pt_kv_cache *kv, const int32_t *ids, int n,
                         float *logits, bool last_only)
{
    if (kv->batch > 1) return ERR(PT_ERR_INTERNAL, "forward_tokens on a cache of %d sequences", kv->batch);
    return tokens_run(m, ad, kv, ids, n, 1, logits, last_only);
}

pt_status forward_tokens_batch(const pt_model *m, const pt_adapter *ad, pt_kv_cache *kv, const int32_t *ids, int n,
                               float *logits)
{
    return tokens_run(m, ad, kv, ids, n, kv->batch > 1 ? kv->batch : 1, logits, true);
}

/* A prompt shared by every sequence of a batch cache runs once, as sequence 0 (a one-sequence view
 * of its rows), and its keys and values are copied to the other sequences' rows: GRPO's group
 * starts from one prompt, and prefilling it num_generations times cost as much as decoding. */
pt_status forward_tokens_shared(const pt_model *m, const pt_adapter *ad, pt_kv_cache *kv, const int32_t *ids, int n,
                                float *logits)
{
    int seqs = kv->batch > 1 ? kv->batch : 1, layers = m->cfg.n_layers;
    if (seqs == 1) return forward_tokens(m, ad, kv, ids, n, logits, true);
    if (m->cfg.full_period > 0) /* the conv and recurrent states would need their copies too */
        return ERR(PT_ERR_INTERNAL, "forward_tokens_shared: a Gated DeltaNet model's states are not shared yet");
    pt_kv_cache one = {.max_seq = kv->max_seq, .n_past = kv->n_past, .batch = 1};
    one.k = calloc((size_t)layers, sizeof(pt_tensor));
    one.v = calloc((size_t)layers, sizeof(pt_tensor));
    pt_status st = one.k && one.v ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory for a cache view");
    for (int l = 0; st == PT_OK && l < layers; l++)
        one.k[l] = tensor_rows(&kv->k[l], 0, kv->max_seq), one.v[l] = tensor_rows(&kv->v[l], 0, kv->max_seq);
    if (st == PT_OK) st = forward_tokens(m, ad, &one, ids, n, logits, true);
    for (int l = 0; st == PT_OK && l < layers; l++)
        for (int b = 1; st == PT_OK && b < seqs; b++) {
            int64_t at = (int64_t)b * kv->max_seq + kv->n_past;
            pt_tensor dk = tensor_rows(&kv->k[l], at, n), dv = tensor_rows(&kv->v[l], at, n);
            pt_tensor sk = tensor_rows(&kv->k[l], kv->n_past, n), sv = tensor_rows(&kv->v[l], kv->n_past, n);
            st = backend_copy(m->be, &dk, &sk);
            if (st == PT_OK) st = backend_copy(m->be, &dv, &sv);
        }
    for (int b = 1; st == PT_OK && b < seqs; b++)
        memcpy(logits + (size_t)b * (size_t)m->cfg.vocab, logits, sizeof(float) * (size_t)m->cfg.vocab);
    if (st == PT_OK) kv->n_past += n;
    free(one.k), free(one.v);
    return st;
}
