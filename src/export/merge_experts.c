/* merge_experts.c — where an adapter on a sparse layer (PEFT's target_parameters: the experts' gate_up_proj and
 * down_proj, the router's mlp.gate.weight) lands in the tensors of a merged export. ptrain holds an experts pair as
 * A [E·r, in] and B [E·out, r] (expert e's rows at e·r and e·out, gate rows before up rows in gate_up's out); the
 * files cut the experts differently: Hugging Face's one by one (<block>.experts.E.<gate|up|down name>.weight) or
 * fused (mlp.experts.gate_up_proj [E, 2I, H], down_proj [E, H, I]), llama.cpp's as 3-D ffn_gate_exps and
 * ffn_up_exps {H, I, E} and ffn_down_exps {I, H, E}. Each tensor's place says which experts and which of their B
 * rows it holds, so merge_delta_add adds s·Bₑ Aₑ row by row whatever the cut. */
#include <stdio.h>
#include <string.h>

#include "export_internal.h"
#include "ptrain/hf_model.h"
#include "ptrain/model.h"

/* The tensor name's llama.cpp form on layer l: ffn_<role>_exps or the router. */
static bool gguf_place(const pt_model_config *cfg, const char *name, merge_expert_place *at)
{
    int l, n = 0;
    char role[16];
    if (sscanf(name, "blk.%d.ffn_%15[a-z_].weight%n", &l, role, &n) != 2 || name[n] || !model_layer_moe(cfg, l))
        return false;
    int64_t f = cfg->moe_ffn_dim;
    *at = (merge_expert_place){.layer = l, .e0 = -1};
    if (!strcmp(role, "gate_inp")) at->slot = W_ROUTER;
    else if (!strcmp(role, "gate_exps")) at->slot = W_EXP_GATE_UP, at->per_exp = f;
    else if (!strcmp(role, "up_exps")) at->slot = W_EXP_GATE_UP, at->per_exp = f, at->b_off = f;
    else if (!strcmp(role, "down_exps")) at->slot = W_EXP_DOWN, at->per_exp = cfg->dim;
    else return false;
    return true;
}

/* An expert's own tensor, <block>.experts.E.<name>.weight (rest: what follows model.layers.L.). */
static bool hf_expert_place(const pt_model_config *cfg, const char *rest, merge_expert_place *at)
{
    const pt_arch_info *a = arch_info(cfg->arch);
    size_t nb = strlen(a->moe_block);
    int e, n = 0;
    char which[32];
    if (strncmp(rest, a->moe_block, nb) || sscanf(rest + nb, ".experts.%d.%31[a-z0-9_].weight%n", &e, which, &n) != 2 ||
        rest[nb + (size_t)n] || e < 0 || e >= cfg->n_experts)
        return false;
    int64_t f = cfg->moe_ffn_dim;
    at->e0 = e;
    if (!strcmp(which, a->expert_names[0])) at->slot = W_EXP_GATE_UP, at->per_exp = f;
    else if (!strcmp(which, a->expert_names[1])) at->slot = W_EXP_GATE_UP, at->per_exp = f, at->b_off = f;
    else if (!strcmp(which, a->expert_names[2])) at->slot = W_EXP_DOWN, at->per_exp = cfg->dim;
    else return false;
    return true;
}

bool merge_expert_place_of(const pt_model_config *cfg, const char *name, merge_expert_place *at)
{
    if (cfg->n_experts <= 0) return false;
    if (!strncmp(name, "blk.", 4)) return gguf_place(cfg, name, at);
    char own[256], block_gate[64];
    int l, n = 0;
    if (!hf_text_own_name(cfg, name, own, sizeof own)) return false;
    if (sscanf(own, "model.layers.%d.%n", &l, &n) != 1 || !n || !model_layer_moe(cfg, l)) return false;
    const char *rest = own + n;
    *at = (merge_expert_place){.layer = l, .e0 = -1};
    snprintf(block_gate, sizeof block_gate, "%s.gate.weight", arch_info(cfg->arch)->moe_block);
    if (!strcmp(rest, "mlp.gate.weight") || !strcmp(rest, block_gate)) at->slot = W_ROUTER;
    else if (!strcmp(rest, "mlp.experts.gate_up_proj")) at->slot = W_EXP_GATE_UP, at->per_exp = 2 * cfg->moe_ffn_dim;
    else if (!strcmp(rest, "mlp.experts.down_proj")) at->slot = W_EXP_DOWN, at->per_exp = cfg->dim;
    else return hf_expert_place(cfg, rest, at);
    return true;
}

pt_status merge_delta_load_expert(merge_delta *d, const pt_adapter *l, const merge_expert_place *at)
{
    TRY(merge_delta_load(d, l, at->layer, at->slot, 0));
    if (!d->a || at->slot == W_ROUTER) return PT_OK;
    const adapter_pair *p = adapter_at(l, at->layer, at->slot);
    d->n_exp = (int)(p->a.shape[0] / p->r);
    d->r = p->r, d->out = p->b.shape[0] / d->n_exp;
    d->e0 = at->e0 < 0 ? 0 : at->e0;
    d->per_exp = at->per_exp, d->b_off = at->b_off;
    return PT_OK;
}
