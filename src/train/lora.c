/* lora.c — training LoRA adapters (lora.h): the adapter (adapter.c creates and initialises it as
 * PEFT does) and, per adapted projection, gradients laid out in one buffer and zero AdamW moments. */
#include "ptrain/lora.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/method.h"

lora_pair *lora_at(const pt_lora *l, int layer, int w)
{
    if (!adapter_at(&l->ad, layer, w) || !l->pairs) return NULL;
    return &l->pairs[(size_t)layer * W_COUNT + (size_t)w];
}

lora_pair *lora_next(const pt_lora *l, const lora_pair *prev)
{
    if (!l || !l->pairs) return NULL;
    size_t total = (size_t)l->ad.n_layers * W_COUNT;
    for (size_t i = prev ? (size_t)(prev - l->pairs) + 1 : 0; i < total; i++)
        if (l->ad.target[i % W_COUNT] && l->ad.pairs[i].r > 0) return &l->pairs[i];
    return NULL;
}

adapter_pair *lora_weights(const pt_lora *l, const lora_pair *p) { return &l->ad.pairs[p - l->pairs]; }

static pt_status zeros_like(pt_backend *be, pt_tensor *t, const pt_tensor *like)
{
    *t = tensor_make(PT_F32, 2, like->shape);
    TRY(backend_alloc(be, t));
    return backend_zero(be, t);
}

/* Lay out every pair's gradients in one buffer (layer by layer, A then B) and point the pairs'
 * grad_a/grad_b at their places. */
static pt_status grads_create(pt_lora *l)
{
    const pt_adapter *ad = &l->ad;
    int64_t off = 0;
    for (int layer = 0; layer < ad->n_layers; layer++) {
        l->layer_off[layer] = off;
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(ad, layer, w);
            if (p) off += tensor_numel(&p->a) + tensor_numel(&p->b) + (ad->dora ? p->b.shape[0] : 0);
        }
    }
    l->layer_off[ad->n_layers] = off;
    int64_t shape[2] = {1, off};
    pt_tensor like = tensor_make(PT_F32, 2, shape);
    TRY(zeros_like(ad->be, &l->grads, &like));
    TRY(zeros_like(ad->be, &l->grads_sum, &like));
    for (int layer = 0; layer < ad->n_layers; layer++) {
        int64_t at = l->layer_off[layer];
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(ad, layer, w);
            if (!p) continue;
            lora_pair *s = lora_at(l, layer, w);
            s->grad_a = tensor_make(PT_F32, 2, p->a.shape);
            s->grad_a.data = (float *)l->grads.data + at;
            at += tensor_numel(&p->a);
            s->grad_b = tensor_make(PT_F32, 2, p->b.shape);
            s->grad_b.data = (float *)l->grads.data + at;
            at += tensor_numel(&p->b);
            if (!ad->dora) continue;
            int64_t mshape[2] = {p->b.shape[0], 1};
            s->grad_m = tensor_make(PT_F32, 2, mshape);
            s->grad_m.data = (float *)l->grads.data + at;
            at += p->b.shape[0];
        }
    }
    return PT_OK;
}

static pt_status moments_create(pt_lora *l)
{
    for (lora_pair *s = lora_next(l, NULL); s; s = lora_next(l, s)) {
        const adapter_pair *p = lora_weights(l, s);
        TRY(zeros_like(l->ad.be, &s->m_a, &p->a));
        TRY(zeros_like(l->ad.be, &s->v_a, &p->a));
        TRY(zeros_like(l->ad.be, &s->m_b, &p->b));
        TRY(zeros_like(l->ad.be, &s->v_b, &p->b));
    }
    return PT_OK;
}

pt_status lora_create_select(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora,
                             const bool target[W_COUNT], const char *select, const char *where, adapter_init init,
                             uint64_t seed)
{
    memset(l, 0, sizeof *l);
    TRY(adapter_create_init(&l->ad, m, r, alpha, rslora, target, select, where, init, &seed));
    l->pairs = calloc((size_t)l->ad.n_layers * W_COUNT, sizeof *l->pairs);
    l->layer_off = calloc((size_t)l->ad.n_layers + 1, sizeof *l->layer_off);
    pt_status st = l->pairs && l->layer_off ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) st = grads_create(l);
    if (st == PT_OK) st = moments_create(l);
    if (st != PT_OK) lora_free(l);
    return st;
}

/* Whether the config names module. */
static bool names(const pt_config *cfg, const char *module)
{
    for (int i = 0; i < cfg->lora_target_modules.n; i++)
        if (!strcmp(cfg->lora_target_modules.items[i], module)) return true;
    return false;
}

/* A fused family (phi3) adapts q, k, v as one (qkv_proj) and gate, up as one (gate_up_proj; granite4:
 * input_linear), as PEFT does: the config names the fused module, or all of its parts (the llama list, all-linear),
 * never some of them. */
static pt_status check_fused(const pt_model *m, const pt_config *cfg)
{
    const char *groups[2][4] = {{"qkv_proj", "q_proj", "k_proj", "v_proj"},
                                {arch_peft_module(m->cfg.arch, W_GATE), "gate_proj", "up_proj", NULL}};
    for (int g = arch_info(m->cfg.arch)->fused ? 0 : 1; g < 2; g++) {
        int n = 0, parts = 0;
        for (int i = 1; i < 4 && groups[g][i]; i++, parts++) n += names(cfg, groups[g][i]);
        if (n > 0 && n < parts && !names(cfg, groups[g][0]))
            return ERR(PT_ERR_USER, "%s: lora_target_modules names some of %s%s%s%s%s but not all: %s stores them as "
                       "one weight, %s, which PEFT adapts as one module; name %s (or all of them)",
                       shown_text(cfg->path).s, groups[g][1], ", ", groups[g][2], groups[g][3] ? ", " : "",
                       groups[g][3] ? groups[g][3] : "", arch_name(m->cfg.arch), groups[g][0], groups[g][0]);
    }
    return PT_OK;
}

pt_status lora_create(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora, const bool target[W_COUNT],
                      uint64_t seed)
{
    return lora_create_select(l, m, r, alpha, rslora, target, NULL, "the adapter", ADAPTER_INIT_TRUE, seed);
}

/* The config's PEFT selectors as the JSON object adapter_select.c reads, in *out (NULL: none given);
 * finetune_last_n_layers becomes layers_to_transform, the last N of the model's n_layers. */
static pt_status select_json(const pt_config *cfg, int n_layers, bool fused, char **out)
{
    *out = NULL;
    bool last_n = cfg->finetune_last_n_layers != -1;
    if (!cfg->layers_to_transform.n && !last_n && !cfg->rank_pattern.n && !cfg->alpha_pattern.n && !fused) return PT_OK;
    if (last_n && cfg->finetune_last_n_layers > n_layers)
        return ERR(PT_ERR_USER, "%s: finetune_last_n_layers is %ld, but the model has %d layers; give at most %d",
                   shown_text(cfg->path).s, cfg->finetune_last_n_layers, n_layers, n_layers);
    json_t *sel = json_object(), *layers = json_array(), *rank = json_object(), *alpha = json_object();
    for (int i = 0; i < cfg->layers_to_transform.n; i++)
        json_array_append_new(layers, json_integer(strtol(cfg->layers_to_transform.items[i], NULL, 10)));
    for (long i = last_n ? n_layers - cfg->finetune_last_n_layers : n_layers; i < n_layers; i++)
        json_array_append_new(layers, json_integer(i));
    json_object_set_new(sel, "layers_to_transform", json_array_size(layers) ? layers : (json_decref(layers), json_null()));
    json_t *pattern = json_null();
    if (cfg->layers_pattern.n == 1) json_decref(pattern), pattern = json_string(cfg->layers_pattern.items[0]);
    else if (cfg->layers_pattern.n > 1) {
        json_decref(pattern), pattern = json_array();
        for (int i = 0; i < cfg->layers_pattern.n; i++) json_array_append_new(pattern, json_string(cfg->layers_pattern.items[i]));
    }
    json_object_set_new(sel, "layers_pattern", pattern);
    for (int i = 0; i < cfg->rank_pattern.n; i++)
        json_object_set_new(rank, cfg->rank_pattern.keys[i], json_integer(strtol(cfg->rank_pattern.values[i], NULL, 10)));
    for (int i = 0; i < cfg->alpha_pattern.n; i++)
        json_object_set_new(alpha, cfg->alpha_pattern.keys[i], json_real(strtod(cfg->alpha_pattern.values[i], NULL)));
    if (fused) { /* gate and up named one by one: PEFT's key for the fused pair (lora_moe_names.c) */
        json_object_set_new(rank, ".*\\.gate_up_proj", json_integer(2 * cfg->lora_r));
        json_object_set_new(alpha, ".*\\.gate_up_proj", json_real(2 * cfg->lora_alpha));
    }
    json_object_set_new(sel, "rank_pattern", rank);
    json_object_set_new(sel, "alpha_pattern", alpha);
    *out = json_dumps(sel, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(sel);
    if (*out && strlen(*out) >= sizeof ((ckpt_state *)0)->lora_select) {
        free(*out), *out = NULL;
        return ERR(PT_ERR_USER, "%s: layers_to_transform, layers_pattern, rank_pattern and alpha_pattern take more than "
                   "%zu characters as JSON, more than a checkpoint keeps; give fewer or shorter patterns",
                   shown_text(cfg->path).s, sizeof ((ckpt_state *)0)->lora_select - 1);
    }
    return *out ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
}

/* pissa/olora change the base the adapter applies to: refused where something needs the original base
 * beside the adapted model (a reference model, an adapter to continue from). */
static pt_status check_decomp(const pt_config *cfg)
{
    const char *how = cfg->lora_init == LORA_INIT_PISSA ? "pissa" : cfg->lora_init == LORA_INIT_OLORA ? "olora" : "pissa_niter_N";
    if (method_info_of(cfg->method)->reference)
        return ERR(PT_ERR_USER, "%s: init_lora_weights %s takes the adapter's start out of the base weights, and "
                   "%s's reference model is the base without the adapter, which is then no longer the original "
                   "model; use init_lora_weights true with this method", shown_text(cfg->path).s, how,
                   method_info_of(cfg->method)->name);
    if (cfg->lora_model_dir && *cfg->lora_model_dir)
        return ERR(PT_ERR_USER, "%s: init_lora_weights %s starts a new adapter from the base weights; lora_model_dir "
                   "continues from a trained one instead; give one of the two", shown_text(cfg->path).s, how);
    return PT_OK;
}

/* The projection names a family's lora_target_modules may use, for the error that names a wrong one. */
static const char *target_names(const pt_model_config *c)
{
    if (arch_info(c->arch)->fused) return "qkv_proj, o_proj, gate_up_proj, down_proj, or the llama names of their parts";
    if (arch_info(c->arch)->fused_mlp)
        return "q_proj, k_proj, v_proj, o_proj, input_linear, output_linear, or the llama names of the last two's parts";
    if (c->full_period > 0)
        return "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, and on the Gated DeltaNet layers "
               "in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj";
    return "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";
}

/* target_parameters (PEFT's, on the experts' fused weights) into target; refused where PEFT refuses it (dropout,
 * DoRA) or where ptrain has no experts' pair (a dense model, a name that is no expert weight). */
static pt_status experts_targets(const pt_model *m, const pt_config *cfg, bool target[W_COUNT])
{
    const char *path = shown_text(cfg->path).s;
    for (int i = 0; i < cfg->target_parameters.n; i++) {
        const char *name = cfg->target_parameters.items[i];
        if (m->cfg.n_experts <= 0)
            return ERR(PT_ERR_USER, "%s: target_parameters: %s names a mixture of experts' weight, and %s models have no experts; "
                       "remove target_parameters and name projections in lora_target_modules", path,
                       shown_text(name).s, arch_name(m->cfg.arch));
        if (!adapter_param_slot(name, target))
            return ERR(PT_ERR_USER, "%s: target_parameters: %s is not a weight ptrain adapts there; name "
                       "mlp.experts.gate_up_proj, mlp.experts.down_proj and/or the router's mlp.gate.weight", path,
                       shown_text(name).s);
    }
    if (!target[W_EXP_GATE_UP] && !target[W_EXP_DOWN] && !target[W_ROUTER]) return PT_OK;
    if (cfg->lora_dropout > 0)
        return ERR(PT_ERR_USER, "%s: target_parameters with lora_dropout %g: PEFT adapts parameters without dropout "
                   "(it refuses lora_dropout there, as ptrain does); set lora_dropout: 0", path, cfg->lora_dropout);
    if (cfg->use_dora)
        return ERR(PT_ERR_USER, "%s: target_parameters with use_dora: PEFT has no DoRA on parameters (it refuses "
                   "it, as ptrain does); set use_dora: false or remove target_parameters", path);
    if (cfg->lora_init == LORA_INIT_PISSA || cfg->lora_init == LORA_INIT_OLORA || cfg->lora_init == LORA_INIT_PISSA_NITER)
        return ERR(PT_ERR_USER, "%s: target_parameters with init_lora_weights pissa/olora: starting the experts' "
                   "adapters from their weights' decomposition is not built; use init_lora_weights true", path);
    return PT_OK;
}

pt_status lora_init(pt_lora *l, pt_model *m, const pt_config *cfg)
{
    bool decomp = cfg->lora_init == LORA_INIT_PISSA || cfg->lora_init == LORA_INIT_OLORA ||
                  cfg->lora_init == LORA_INIT_PISSA_NITER;
    if (decomp) TRY(check_decomp(cfg));
    bool target[W_COUNT] = {0}, named[LORA_MOE_COUNT] = {0}, fused;
    for (int i = 0; i < cfg->lora_target_modules.n; i++) {
        int which;
        TRY(lora_moe_name(m, cfg, cfg->lora_target_modules.items[i], &which)); /* experts named one by one */
        if (which >= 0) named[which] = true;
        else if (!adapter_target_slot(m->cfg.arch, cfg->lora_target_modules.items[i], target, NULL))
            return ERR(PT_ERR_USER, "%s: lora_target_modules: %s is not a projection of %s models (%s)",
                       shown_text(cfg->path).s, shown_text(cfg->lora_target_modules.items[i]).s,
                       arch_name(m->cfg.arch), target_names(&m->cfg));
    }
    if (cfg->lora_all_linear) adapter_all_linear(m->cfg.arch, target);
    TRY(lora_moe_targets(m, cfg, named, target, &fused));
    if (arch_info(m->cfg.arch)->fused || arch_info(m->cfg.arch)->fused_mlp) TRY(check_fused(m, cfg));
    TRY(experts_targets(m, cfg, target));
    if (m->cfg.n_experts > 0 && (target[W_GATE] || target[W_UP] || target[W_DOWN]))
        return ERR(PT_ERR_USER, "%s: lora_target_modules names the MLP (gate_proj, up_proj, down_proj) of a mixture-of-"
                   "experts model (%s), whose experts are fused weights, not projections: adapt them with PEFT's "
                   "target_parameters (mlp.experts.gate_up_proj, mlp.experts.down_proj) and name the attention "
                   "projections (q_proj, k_proj, v_proj, o_proj) in lora_target_modules", shown_text(cfg->path).s,
                   arch_name(m->cfg.arch));
    char *select = NULL;
    TRY(select_json(cfg, m->cfg.n_layers, fused, &select));
    adapter_init init = cfg->lora_init == LORA_INIT_FALSE      ? ADAPTER_INIT_FALSE
                        : cfg->lora_init == LORA_INIT_GAUSSIAN ? ADAPTER_INIT_GAUSSIAN
                                                               : ADAPTER_INIT_TRUE;
    pt_status st = lora_create_select(l, m, (int)cfg->lora_r, (float)cfg->lora_alpha, cfg->use_rslora, target, select,
                                      shown_text(cfg->path).s, init, (uint64_t)cfg->random_state);
    free(select);
    /* the decomposition of the base as loaded, on every start: a resumed run recomputes the same residual base
     * (and start) before its checkpoint's pairs replace the fresh ones */
    if (st == PT_OK && decomp) {
        adapter_decomp how = cfg->lora_init == LORA_INIT_PISSA   ? ADAPTER_DECOMP_PISSA
                             : cfg->lora_init == LORA_INIT_OLORA ? ADAPTER_DECOMP_OLORA
                                                                 : ADAPTER_DECOMP_PISSA_NITER;
        st = adapter_decomp_base(&l->ad, m, how, cfg->lora_init_niter, (uint64_t)cfg->random_state ^ 0x9155a);
        if (st != PT_OK) lora_free(l);
    }
    return st;
}

pt_status lora_dora_enable(pt_lora *l, const pt_model *m)
{
    TRY(adapter_dora_init(&l->ad, m));
    backend_release(l->ad.be, &l->grads);
    backend_release(l->ad.be, &l->grads_sum);
    TRY(grads_create(l));
    for (lora_pair *s = lora_next(l, NULL); s; s = lora_next(l, s)) {
        TRY(zeros_like(l->ad.be, &s->m_m, &s->grad_m));
        TRY(zeros_like(l->ad.be, &s->v_m, &s->grad_m));
    }
    return PT_OK;
}

void lora_free(pt_lora *l)
{
    pt_backend *be = l->ad.be;
    for (lora_pair *s = lora_next(l, NULL); s; s = lora_next(l, s)) {
        pt_tensor *all[] = {&s->m_a, &s->v_a, &s->m_b, &s->v_b};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) backend_release(be, all[i]);
        if (s->m_m.data) backend_release(be, &s->m_m);
        if (s->v_m.data) backend_release(be, &s->v_m);
    }
    if (be) {
        backend_release(be, &l->grads);
        backend_release(be, &l->grads_sum);
    }
    free(l->layer_off);
    free(l->pairs);
    adapter_free(&l->ad);
    memset(l, 0, sizeof *l);
}

pt_status lora_zero_grads(pt_lora *l)
{
    return l->grads.data ? backend_scale(l->ad.be, &l->grads, 0.0f) : PT_OK;
}

pt_tensor lora_grad_span(const pt_lora *l, const pt_tensor *buf, int from, int to)
{
    return tensor_span(buf, l->layer_off[from], l->layer_off[to + 1] - l->layer_off[from]);
}
