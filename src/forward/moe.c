/* moe.c — a sparse layer's mixture of experts (Qwen3-MoE, Mixtral, gpt-oss), as transformers computes it: router
 * logits = xn Rᵀ (plus gpt-oss's bias), softmax over all experts in fp32, the top-k (renormalised with norm_topk_prob);
 * the (token, expert) pairs sorted by expert, then token (a counting sort on the host: one fixed
 * order, so a pass and its resumed twin compute the same numbers); each expert's rows through its
 * gate, up (SwiGLU; gpt-oss: biases and the clamped SwiGLU) and down products, one grouped pass per expert with rows (backend_moe_matmul);
 * and each token's k outputs times their weights added to the residual in ascending expert order
 * (transformers' index_add_ order). Experts no token chose cost nothing. LoRA on the experts (PEFT's
 * target_parameters) adds each expert's delta to its rows' gate/up and down products (moe_lora.c). */
#include <stdlib.h>
#include <string.h>

#include "ptrain/forward.h"

pt_status forward_moe_take(pt_arena *arena, const fwd_ctx *c, moe_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    memset(a, 0, sizeof *a);
    if (g->n_experts <= 0) return PT_OK;
    int64_t n = c->rows * g->n_experts_used;
    bool gu = c->ad && c->ad->target[W_EXP_GATE_UP], dn = c->ad && c->ad->target[W_EXP_DOWN];
    int64_t r = c->ad && c->ad->r_max > 0 ? c->ad->r_max : 1;
    bool aux = c->aux && c->aux->coef != 0.0f;
    bool rt = c->ad && c->ad->target[W_ROUTER];
    int64_t rows[M_COUNT] = {c->rows, n, n, n, n, n, c->rows, gu ? n : 0, dn ? n : 0, aux ? c->rows : 0, rt ? c->rows : 0};
    int64_t cols[M_COUNT] = {g->n_experts, g->dim, g->moe_ffn_dim, g->moe_ffn_dim, g->moe_ffn_dim, g->dim,
                             g->n_experts_used, r, r, g->n_experts, r};
    for (int i = 0; i < M_COUNT; i++) TRY((i == M_DW ? arena_take_f32 : arena_take)(arena, &a->t[i], rows[i], cols[i]));
    a->expert = malloc(sizeof(int32_t) * (size_t)n);
    a->weight = malloc(sizeof(float) * (size_t)n);
    a->token = malloc(sizeof(int32_t) * (size_t)n);
    a->row = malloc(sizeof(int32_t) * (size_t)n);
    a->offset = calloc((size_t)g->n_experts + 1, sizeof(int64_t));
    a->ones = malloc(sizeof(float) * (size_t)n);
    TRY_ALLOC(a->expert && a->weight && a->token && a->row && a->offset && a->ones ? a->offset : NULL);
    for (int64_t i = 0; i < n; i++) a->ones[i] = 1.0f;
    return PT_OK;
}

void forward_moe_free(moe_acts *a)
{
    free(a->expert);
    free(a->weight);
    free(a->token);
    free(a->row);
    free(a->offset);
    free(a->ones);
    a->expert = a->token = a->row = NULL;
    a->weight = a->ones = NULL;
    a->offset = NULL;
}

/* Each token's k (expert, weight) pairs into ascending expert order, then the counting sort: offset[e]
 * the first sorted row of expert e, token[] the token of each sorted row (tokens ascending within an
 * expert), row[t k + s] the sorted row of token t's s-th pair. */
static void sort_pairs(moe_acts *a, int64_t rows, int k, int n_experts)
{
    for (int64_t t = 0; t < rows; t++) /* insertion sort of k pairs */
        for (int s = 1; s < k; s++)
            for (int j = s; j > 0 && a->expert[t * k + j - 1] > a->expert[t * k + j]; j--) {
                int32_t e = a->expert[t * k + j];
                float w = a->weight[t * k + j];
                a->expert[t * k + j] = a->expert[t * k + j - 1], a->weight[t * k + j] = a->weight[t * k + j - 1];
                a->expert[t * k + j - 1] = e, a->weight[t * k + j - 1] = w;
            }
    memset(a->offset, 0, sizeof(int64_t) * ((size_t)n_experts + 1));
    for (int64_t i = 0; i < rows * k; i++) a->offset[a->expert[i] + 1]++;
    for (int e = 0; e < n_experts; e++) a->offset[e + 1] += a->offset[e];
    for (int64_t t = 0; t < rows; t++)
        for (int s = 0; s < k; s++) {
            int e = a->expert[t * k + s];
            int64_t r = a->offset[e]++;
            a->token[r] = (int32_t)t;
            a->row[t * k + s] = (int32_t)r;
        }
    for (int e = n_experts - 1; e > 0; e--) a->offset[e] = a->offset[e - 1]; /* offset[e] ended e: shift back */
    a->offset[0] = 0;
}

/* gpt-oss (moe_bias): each expert's rows of y (sorted by expert) plus its bias row of b [n_experts, width]. */
static pt_status expert_bias(pt_backend *be, pt_tensor *y, const pt_tensor *b, const int64_t *offset, int n_exp)
{
    for (int e = 0; e < n_exp; e++) {
        if (offset[e + 1] == offset[e]) continue;
        pt_tensor rows = tensor_rows(y, offset[e], offset[e + 1] - offset[e]), row = tensor_rows(b, e, 1);
        TRY(backend_add_bias(be, &rows, &row));
    }
    return PT_OK;
}

/* The experts' activation: SwiGLU, or gpt-oss's clamped one (swiglu_limit). */
static pt_status expert_act(pt_backend *be, const pt_model_config *g, pt_tensor *y, const pt_tensor *gate,
                            const pt_tensor *up)
{
    if (g->swiglu_limit > 0.0f) return backend_swiglu_clamp(be, y, gate, up, g->swiglu_limit, g->swiglu_alpha);
    return backend_swiglu(be, y, gate, up);
}

pt_status forward_moe(const fwd_ctx *c, int layer, const pt_tensor *xn, pt_tensor *out, moe_acts *a)
{
    const pt_model_config *g = &c->m->cfg;
    const pt_layer_weights *wt = &c->m->layers[layer];
    pt_backend *be = c->m->be;
    int k = g->n_experts_used, n_exp = g->n_experts;
    pt_tensor *t = a->t;
    TRY(backend_matmul(be, &t[M_LOGITS], xn, &wt->router, 0.0f));
    if (g->moe_bias) TRY(backend_add_bias(be, &t[M_LOGITS], &wt->router_bias)); /* gpt-oss */
    TRY(adapter_matmul(c->ad, layer, W_ROUTER, &t[M_LOGITS], xn, &t[M_LRT])); /* a LoRA on the router, if any */
    TRY(backend_moe_route(be, a->expert, a->weight, &t[M_LOGITS], k, g->moe_norm_topk));
    for (int64_t i = 0; i < c->rows * k; i++)
        if (a->expert[i] < 0 || a->expert[i] >= n_exp)
            return ERR(PT_ERR_INTERNAL, "layer %d: the router chose expert %d of %d (non-finite router logits?)", layer,
                       a->expert[i], n_exp);
    if (c->aux) TRY(moe_aux_add(c->aux, be, &t[M_LOGITS], a->expert, k));
    sort_pairs(a, c->rows, k, n_exp);
    TRY(backend_moe_gather(be, &t[M_XS], xn, a->token));
    TRY(backend_moe_matmul(be, &t[M_GATE], &t[M_XS], wt->experts + X_GATE, X_COUNT, a->offset, n_exp));
    TRY(backend_moe_matmul(be, &t[M_UP], &t[M_XS], wt->experts + X_UP, X_COUNT, a->offset, n_exp));
    if (g->moe_bias) TRY(expert_bias(be, &t[M_GATE], &wt->expert_bias[X_GATE], a->offset, n_exp));
    if (g->moe_bias) TRY(expert_bias(be, &t[M_UP], &wt->expert_bias[X_UP], a->offset, n_exp));
    const adapter_pair *gu = adapter_at(c->ad, layer, W_EXP_GATE_UP), *dn = adapter_at(c->ad, layer, W_EXP_DOWN);
    if (gu) TRY(forward_experts_lora(be, gu, a->offset, n_exp, &t[M_XS], &t[M_LGU], &t[M_GATE], &t[M_UP], g->moe_ffn_dim));
    TRY(expert_act(be, g, &t[M_ACT], &t[M_GATE], &t[M_UP]));
    TRY(backend_moe_matmul(be, &t[M_YS], &t[M_ACT], wt->experts + X_DOWN, X_COUNT, a->offset, n_exp));
    if (g->moe_bias) TRY(expert_bias(be, &t[M_YS], &wt->expert_bias[X_DOWN], a->offset, n_exp));
    if (dn) TRY(forward_experts_lora(be, dn, a->offset, n_exp, &t[M_ACT], &t[M_LDN], &t[M_YS], NULL, g->dim));
    return backend_moe_combine(be, out, &t[M_YS], a->row, a->weight, k);
}
