/* lora_moe_names.c — lora_target_modules naming a mixture of experts' projections as checkpoints store them one by
 * one (transformers 4's per-expert nn.Linear: Qwen3-MoE's mlp.experts.E.{gate,up,down}_proj, Mixtral's
 * block_sparse_moe.experts.E.{w1,w3,w2}, the router mlp.gate / block_sparse_moe.gate), mapped as PEFT 0.21 maps them
 * on transformers 5, which fuses the experts on load so that no per-expert module exists to adapt
 * (peft/utils/transformers_weight_conversion.py, _convert_peft_config_moe): a target whose name is, or ends in
 * ".", the gate, up or down projection's becomes target_parameters gate_up_proj or down_proj, every expert; gate and
 * up must both be named (they are one fused weight), and their pair gets rank 2r and alpha 2α (rank_pattern /
 * alpha_pattern ".*\.gate_up_proj", so that the fused pair holds what two pairs of rank r would); "gate" becomes the
 * router's gate.weight. The dense MLP of an mlp_only_layers layer then gets no adapter, as in PEFT. A name with an
 * expert's number (experts.3.w1) is refused: PEFT maps it to every expert's fused weight, so one expert alone cannot
 * be adapted there. */
#include <ctype.h>
#include <string.h>

#include "ptrain/lora.h"

/* Whether name is tail or ends in "." tail. */
static bool names(const char *name, const char *tail)
{
    size_t n = strlen(name), t = strlen(tail);
    return n >= t && !strcmp(name + n - t, tail) && (n == t || name[n - t - 1] == '.');
}

/* Whether name holds "experts.<digits>.": one expert's module. */
static bool one_expert(const char *name)
{
    for (const char *p = strstr(name, "experts."); p; p = strstr(p + 1, "experts.")) {
        const char *d = p + strlen("experts.");
        if (!isdigit((unsigned char)*d)) continue;
        while (isdigit((unsigned char)*d)) d++;
        if (*d == '.') return true;
    }
    return false;
}

pt_status lora_moe_name(const pt_model *m, const pt_config *cfg, const char *name, int *which)
{
    const pt_arch_info *ai = arch_info(m->cfg.arch);
    *which = -1;
    if (m->cfg.n_experts <= 0 || !ai->moe) return PT_OK;
    for (int i = 0; i < 3; i++)
        if (ai->expert_names[i] && names(name, ai->expert_names[i])) *which = i;
    if (names(name, "gate")) *which = LORA_MOE_ROUTER;
    if (*which < 0 || !one_expert(name)) return PT_OK;
    return ERR(PT_ERR_USER, "%s: lora_target_modules: %s names one expert's projection; transformers 5 fuses the "
               "experts on load, and PEFT 0.21 maps such a name to the fused weight of every expert, so one expert "
               "cannot be adapted alone: name %s, %s and/or %s (all experts, as PEFT maps them) or use "
               "target_parameters (mlp.experts.gate_up_proj, mlp.experts.down_proj)", shown_text(cfg->path).s,
               shown_text(name).s, ai->expert_names[0], ai->expert_names[1], ai->expert_names[2]);
}

pt_status lora_moe_targets(const pt_model *m, const pt_config *cfg, const bool named[LORA_MOE_COUNT],
                           bool target[W_COUNT], bool *fused)
{
    const pt_arch_info *ai = arch_info(m->cfg.arch);
    *fused = false;
    if (named[0] != named[1]) /* X_GATE, X_UP order of expert_names */
        return ERR(PT_ERR_USER, "%s: lora_target_modules names %s without %s: the experts' gate and up projections are "
                   "one fused weight (gate_up_proj) in transformers 5, and PEFT refuses one without the other; name "
                   "both, or use target_parameters (mlp.experts.gate_up_proj)", shown_text(cfg->path).s,
                   ai->expert_names[named[0] ? 0 : 1], ai->expert_names[named[0] ? 1 : 0]);
    if (named[0]) target[W_EXP_GATE_UP] = *fused = true;
    if (named[2]) target[W_EXP_DOWN] = true;
    if (named[LORA_MOE_ROUTER]) target[W_ROUTER] = true;
    return PT_OK;
}
