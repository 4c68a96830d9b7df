/* family.c — a family's feature switches in pt_model_config (from arch.h's table), the values its
 * reference implementation uses when a model file leaves them out, which layers attend through a
 * sliding window (and rotate by the local layers' frequencies), the attention settings of a layer, the shapes of its projections and the GGUF
 * names of its weights. The loaders (GGUF, Hugging Face
 * directories) start from these defaults and override what their file says; the forward and
 * training passes only read the switches. */
#include <math.h>
#include <stdio.h>

#include "ptrain/model.h"

/* Gemma 2 as llama.cpp and transformers run it when nothing else is said. The attention scale is
 * query_pre_attn_scalar^-1/2; GGUF files do not store it, and llama.cpp derives it as
 * 1/sqrt(head_dim), except for the 46-layer 27B model, whose scalar is dim / n_heads. */
static void gemma2_defaults(pt_model_config *c)
{
    c->post_norms = true;
    c->act = PT_ACT_GELU_TANH;
    c->embed_scale = sqrtf((float)c->dim); /* HF rounds sqrt(dim) to the activation dtype: fp32 here */
    c->embed_scaled_in_module = true;      /* transformers' Gemma2TextScaledWordEmbedding */
    c->attn_scale = 1.0f / sqrtf((float)(c->n_layers == 46 ? c->dim / c->n_heads : c->head_dim));
    c->attn_softcap = 50.0f;
    c->final_softcap = 30.0f;
    c->sliding_window = 4096;
    c->sliding_pattern = 2; /* layers 0, 2, 4, ... are local (transformers' layer_types) */
}

/* Gemma 3: Gemma 2's norms and MLP with q/k norms, no soft-caps, five local layers of six (the
 * sixth global), local layers on their own rope base. The attention scale as llama.cpp derives it:
 * 1/sqrt(head_dim), or 1/sqrt(dim/heads) for the 62-layer 27B. */
static void gemma3_defaults(pt_model_config *c)
{
    c->post_norms = true;
    c->act = PT_ACT_GELU_TANH;
    c->embed_scale = sqrtf((float)c->dim);
    c->embed_scaled_in_module = true; /* transformers' Gemma3TextScaledWordEmbedding */
    c->attn_scale = 1.0f / sqrtf((float)(c->n_layers == 62 ? c->dim / c->n_heads : c->head_dim));
    c->sliding_window = 4096;
    c->sliding_period = 6;
    c->rope_theta_local = 10000.0f;
}

/* Gemma 4: Gemma 3's block with norms of x * w, q/k norms then scale 1, unweighted value norms, local
 * layers on base 10000 (transformers' defaults; the global layers' own head size and rope come from
 * config.json). */
static void gemma4_defaults(pt_model_config *c)
{
    c->post_norms = true;
    c->act = PT_ACT_GELU_TANH;
    c->embed_scale = sqrtf((float)c->dim);
    c->embed_scaled_in_module = true;
    c->attn_scale = 1.0f;
    c->v_norm = true;
    c->sliding_window = 512;
    c->sliding_period = 6;
    c->last_layer_full = true;
    c->rope_theta_local = 10000.0f;
    c->layer_scalars = true;
}

void model_family_defaults(pt_model_config *c)
{
    const pt_arch_info *a = arch_info(c->arch);
    c->qkv_bias = a->qkv_bias;
    c->post_norms = false;
    c->act = PT_ACT_SILU;
    c->embed_scale = 1.0f;
    c->embed_scaled_in_module = false;
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    c->attn_softcap = c->final_softcap = 0.0f;
    c->sliding_window = c->sliding_pattern = 0;
    c->qk_norm = a->qk_norm;
    c->nope_period = c->arch == PT_ARCH_SMOLLM3 ? 4 : 0; /* transformers' no_rope_layer_interval, llama.cpp's step */
    c->residual_scale = c->logit_scale = 0.0f;
    c->no_pre_norms = a->no_pre_norms;
    c->qk_norm_full = a->qk_norm_full;
    if (a->no_pre_norms) c->post_norms = true;
    c->sliding_period = 0;
    c->rope_theta_local = 0.0f;
    c->rope_dim = 0;
    c->rope_mscale = 0.0f;
    c->rope_short_max = 0;
    c->q_temp_beta = 0.0f;
    c->q_temp_period = 0;
    c->attn_gate = a->gated_delta;
    c->o_bias = c->attn_sinks = c->moe_bias = a->gptoss_moe;
    c->swiglu_limit = a->gptoss_moe ? 7.0f : 0.0f;
    c->swiglu_alpha = a->gptoss_moe ? 1.702f : 0.0f;
    if (c->arch == PT_ARCH_GEMMA2) gemma2_defaults(c);
    c->last_layer_full = c->k_eq_v = c->v_norm = c->layer_scalars = false;
    c->head_dim_full = c->n_kv_heads_full = c->rope_pairs_full = c->kv_shared = c->ple_dim = c->ple_vocab = 0;
    if (c->arch == PT_ARCH_GEMMA3) gemma3_defaults(c);
    if (c->arch == PT_ARCH_GEMMA4) gemma4_defaults(c);
}

bool model_layer_rope(const pt_model_config *c, int layer)
{
    return c->nope_period <= 0 || (layer + 1) % c->nope_period != 0;
}

int model_layer_window(const pt_model_config *c, int layer)
{
    if (c->sliding_window <= 0) return 0;
    if (c->last_layer_full && layer == c->n_layers - 1) return 0;
    if (c->sliding_period > 0) return (layer + 1) % c->sliding_period ? c->sliding_window : 0;
    int pattern = c->sliding_pattern > 0 ? c->sliding_pattern : 1;
    return layer % pattern == 0 ? c->sliding_window : 0;
}

int model_rope_dim(const pt_model_config *c) { return c->rope_dim > 0 ? c->rope_dim : c->head_dim; }

float model_rope_mscale(const pt_model_config *c) { return c->rope_mscale > 0.0f ? c->rope_mscale : 1.0f; }

float model_layer_rope_mscale(const pt_model_config *c, int layer)
{
    return c->rope_theta_local > 0.0f && model_layer_window(c, layer) > 0 ? 1.0f : model_rope_mscale(c);
}

bool model_fused_part(const pt_model_config *c, int slot, int *lead, int64_t *row0, int64_t *rows_all)
{
    const pt_arch_info *a = arch_info(c->arch);
    if (!a->fused && !(a->fused_mlp && (slot == W_GATE || slot == W_UP))) return false;
    int64_t q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim, f = c->ffn_dim;
    switch (slot) {
    case W_Q: case W_K: case W_V:
        *lead = W_Q, *rows_all = q + 2 * kv;
        *row0 = slot == W_Q ? 0 : slot == W_K ? q : q + kv;
        return true;
    case W_GATE: case W_UP:
        *lead = W_GATE, *rows_all = 2 * f, *row0 = slot == W_GATE ? 0 : f;
        return true;
    default: return false;
    }
}

bool model_adapter_part(const pt_model_config *c, int slot, int *lead, int64_t *row0, int64_t *rows_all)
{
    if (model_fused_part(c, slot, lead, row0, rows_all)) return true;
    if (!c->attn_gate || (slot != W_Q && slot != W_Q_GATE)) return false;
    int64_t q = (int64_t)c->n_heads * c->head_dim;
    *lead = W_Q, *rows_all = 2 * q, *row0 = slot == W_Q ? 0 : q;
    return true;
}

bool model_adapter_shape(const pt_model_config *c, int slot, int64_t *out, int64_t *in)
{
    int lead;
    int64_t row0, all;
    if (slot == W_ROUTER) {
        *out = c->n_experts, *in = c->dim;
        return c->n_experts > 0;
    }
    if (model_slot_experts(slot)) {
        if (c->n_experts <= 0) return false;
        *out = slot == W_EXP_GATE_UP ? 2 * (int64_t)c->moe_ffn_dim : c->dim;
        *in = slot == W_EXP_GATE_UP ? c->dim : c->moe_ffn_dim;
        return true;
    }
    if (!arch_info(c->arch)->hf_names[slot] || !model_proj_shape(c, slot, out, in)) return false;
    if (!model_adapter_part(c, slot, &lead, &row0, &all)) return true;
    if (lead != slot) return false;
    *out = all;
    return true;
}

bool model_slot_experts(int slot) { return slot == W_EXP_GATE_UP || slot == W_EXP_DOWN; }

bool model_slot_sparse(int slot) { return model_slot_experts(slot) || slot == W_ROUTER; }

int model_adapter_experts(const pt_model_config *c, int slot)
{
    return model_slot_experts(slot) && c->n_experts > 0 ? c->n_experts : 1;
}

bool model_layer_adapter_shape(const pt_model_config *c, int layer, int slot, int64_t *out, int64_t *in)
{
    if (model_slot_sparse(slot) && !model_layer_moe(c, layer)) return false; /* a dense layer */
    if (!model_adapter_shape(c, slot, out, in) || (c->full_period > 0 && !model_slot_in_layer(c, layer, slot)))
        return false;
    int lead;
    int64_t row0, all;
    bool attn = slot == W_Q || slot == W_K || slot == W_V || slot == W_O;
    if (!attn || model_adapter_part(c, slot, &lead, &row0, &all)) return true;
    return model_layer_proj_shape(c, layer, slot, out, in); /* gemma4: the layer's own heads; none on shared k/v */
}

/* The global layers' frequencies come first (head_dim_full/2 of them on gemma4), then the local layers'. */
static int global_half(const pt_model_config *c) { return (c->head_dim_full > 0 ? c->head_dim_full : c->head_dim) / 2; }

/* where LongRoPE's long frequencies start in inv_freq: after the global and local ones */
static int long_offset(const pt_model_config *c) { return global_half(c) + (c->rope_theta_local > 0.0f ? c->head_dim / 2 : 0); }

int model_freq_count(const pt_model_config *c) { return long_offset(c) + (c->rope_short_max > 0 ? c->head_dim / 2 : 0); }

const float *model_layer_freq(const pt_model *m, int layer, const int32_t *pos, int64_t rows)
{
    const pt_model_config *c = &m->cfg;
    bool long_set = false;
    for (int64_t r = 0; c->rope_short_max > 0 && pos && r < rows && !long_set; r++)
        long_set = pos[r] >= c->rope_short_max;
    if (long_set) return m->inv_freq + long_offset(c);
    bool own = c->rope_theta_local > 0.0f && model_layer_window(c, layer) > 0;
    return m->inv_freq + (own ? global_half(c) : 0);
}

int model_layer_head_dim(const pt_model_config *c, int layer)
{
    return c->head_dim_full > 0 && model_layer_window(c, layer) == 0 ? c->head_dim_full : c->head_dim;
}

int model_layer_kv_heads(const pt_model_config *c, int layer)
{
    return c->n_kv_heads_full > 0 && model_layer_window(c, layer) == 0 ? c->n_kv_heads_full : c->n_kv_heads;
}

int64_t model_max_q_width(const pt_model_config *c)
{
    int64_t w = 0;
    for (int l = 0; l < c->n_layers; l++)
        if ((int64_t)c->n_heads * model_layer_head_dim(c, l) > w) w = (int64_t)c->n_heads * model_layer_head_dim(c, l);
    return w;
}

int64_t model_max_kv_width(const pt_model_config *c)
{
    int64_t w = 0;
    for (int l = 0; l < c->n_layers; l++) {
        int64_t kw = (int64_t)model_layer_kv_heads(c, l) * model_layer_head_dim(c, l);
        if (kw > w) w = kw;
    }
    return w;
}

int model_kv_source(const pt_model_config *c, int layer)
{
    int first = c->n_layers - c->kv_shared;
    if (c->kv_shared <= 0 || layer < first) return layer;
    bool global = model_layer_window(c, layer) == 0;
    for (int l = first - 1; l >= 0; l--)
        if ((model_layer_window(c, l) == 0) == global) return l;
    return layer; /* hf_config refuses a kind that no earlier layer computes */
}

bool model_layer_has_v(const pt_model_config *c, int layer)
{
    return model_kv_source(c, layer) == layer && !(c->k_eq_v && model_layer_window(c, layer) == 0);
}

bool model_layer_proj_shape(const pt_model_config *c, int layer, int slot, int64_t *out, int64_t *in)
{
    int64_t d = c->dim, q = (int64_t)c->n_heads * model_layer_head_dim(c, layer);
    int64_t kv = (int64_t)model_layer_kv_heads(c, layer) * model_layer_head_dim(c, layer);
    bool own_kv = model_kv_source(c, layer) == layer;
    switch (slot) {
    case W_Q: *out = q, *in = d; return true;
    case W_K: *out = kv, *in = d; return own_kv;
    case W_V: *out = kv, *in = d; return model_layer_has_v(c, layer);
    case W_O: *out = d, *in = q; return true;
    case W_PLE_GATE: case W_PLE_MODEL: *out = c->ple_dim, *in = d; return c->ple_dim > 0;
    case W_PLE_PROJ: *out = d, *in = c->ple_dim; return c->ple_dim > 0;
    default: return model_proj_shape(c, slot, out, in);
    }
}

pt_attention model_layer_attention(const pt_model_config *c, int layer)
{
    int hd = model_layer_head_dim(c, layer);
    pt_attention a = {.n_heads = c->n_heads, .n_kv_heads = model_layer_kv_heads(c, layer), .head_dim = hd,
                      .scale = c->attn_scale > 0.0f ? c->attn_scale : 1.0f / sqrtf((float)hd),
                      .softcap = c->attn_softcap, .window = model_layer_window(c, layer)};
    return a;
}

bool model_proj_shape(const pt_model_config *c, int slot, int64_t *out, int64_t *in)
{
    int64_t d = c->dim, q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim, f = c->ffn_dim;
    switch (slot) {
    case W_Q: *out = q, *in = d; return true;
    case W_K: case W_V: *out = kv, *in = d; return true;
    case W_O: *out = d, *in = q; return true;
    case W_GATE: case W_UP: *out = f, *in = d; return true;
    case W_DOWN: *out = d, *in = f; return true;
    case W_Q_GATE: *out = q, *in = d; return true;
    case W_LIN_QKV: *out = model_lin_conv_dim(c), *in = d; return true;
    case W_LIN_Z: *out = model_lin_value(c), *in = d; return true;
    case W_LIN_B: case W_LIN_A: *out = c->lin_v_heads, *in = d; return true;
    case W_LIN_OUT: *out = d, *in = model_lin_value(c); return true;
    default: return false;
    }
}

bool model_layer_linear(const pt_model_config *c, int layer)
{
    return c->full_period > 0 && (layer + 1) % c->full_period != 0;
}

bool model_slot_in_layer(const pt_model_config *c, int layer, int slot)
{
    if (slot < 0 || slot >= W_COUNT || !arch_info(c->arch)->hf_names[slot]) return false;
    if (c->full_period <= 0) return true;
    bool lin_slot = slot >= W_LIN_QKV && slot <= W_LIN_NORM;
    bool attn_slot = slot == W_Q || slot == W_K || slot == W_V || slot == W_O || slot == W_Q_NORM ||
                     slot == W_K_NORM || slot == W_Q_GATE || slot == W_Q_BIAS || slot == W_K_BIAS || slot == W_V_BIAS;
    return model_layer_linear(c, layer) ? !attn_slot : !lin_slot;
}

int64_t model_lin_key(const pt_model_config *c) { return (int64_t)c->lin_k_heads * c->lin_k_dim; }

int64_t model_lin_value(const pt_model_config *c) { return (int64_t)c->lin_v_heads * c->lin_v_dim; }

int64_t model_lin_conv_dim(const pt_model_config *c) { return 2 * model_lin_key(c) + model_lin_value(c); }

pt_status model_refuse_gated_delta(const pt_model_config *c, const char *what)
{
    if (!arch_info(c->arch)->gated_delta) return PT_OK;
    return ERR(PT_ERR_USER, "%s of a %s model is not built yet: ptrain trains Qwen3.5 text models with LoRA and writes "
               "their adapters for PEFT (adapter_config.json + adapter_model.safetensors) and for ptrain (adapter.h5) "
               "and merged Hugging Face directories (--hf), but GGUF files of the family (llama.cpp's qwen35 tensor "
               "names and keys) come later (issue 42)", what, arch_name(c->arch));
}

int64_t model_qk_norm_width(const pt_model_config *c, int slot)
{
    int heads = slot == W_Q_NORM ? c->n_heads : c->n_kv_heads;
    return c->qk_norm_full ? (int64_t)heads * c->head_dim : c->head_dim;
}

const char *model_gguf_tensor_name(const pt_model_config *c, int l, int slot, char *buf, size_t len, int *permute)
{
    const pt_arch_info *a = arch_info(c->arch);
    if (slot < 0 || slot >= W_COUNT || !a->gguf[slot]) return NULL;
    snprintf(buf, len, "blk.%d.%s", l, a->gguf[slot]);
    if (permute) *permute = !a->gguf_permuted_qk ? 0 : slot == W_Q ? c->n_heads : slot == W_K ? c->n_kv_heads : 0;
    return buf;
}

bool model_layer_moe(const pt_model_config *c, int layer)
{
    if (c->n_experts <= 0 || layer < 0) return false;
    if (layer < 256 && (c->mlp_only[layer / 64] >> (layer % 64) & 1)) return false;
    int step = c->moe_step > 0 ? c->moe_step : 1;
    return (layer + 1) % step == 0;
}

void model_param_counts(const pt_model_config *c, int64_t *total, int64_t *active)
{
    int64_t d = c->dim, q = (int64_t)c->n_heads * c->head_dim, kv = (int64_t)c->n_kv_heads * c->head_dim;
    int64_t attn = 2 * d * q + 2 * d * kv + 2 * d + (c->qkv_bias ? q + 2 * kv : 0) +
                   (c->qk_norm ? model_qk_norm_width(c, W_Q_NORM) + model_qk_norm_width(c, W_K_NORM) : 0) +
                   (c->post_norms ? 2 * d : 0) + (c->o_bias ? d : 0) + (c->attn_sinks ? c->n_heads : 0);
    int64_t edge = (int64_t)c->vocab * d * (c->tied_embeddings ? 1 : 2) + d, all = edge, act = edge;
    for (int l = 0; l < c->n_layers; l++) {
        all += attn, act += attn;
        if (!model_layer_moe(c, l)) {
            all += 3 * d * c->ffn_dim, act += 3 * d * c->ffn_dim;
            continue;
        }
        int64_t bias = c->moe_bias ? 2 * c->moe_ffn_dim + d : 0, expert = 3 * d * c->moe_ffn_dim + bias;
        int64_t router = (int64_t)c->n_experts * (d + (c->moe_bias ? 1 : 0));
        all += router + c->n_experts * expert;
        act += router + c->n_experts_used * expert;
    }
    if (total) *total = all;
    if (active) *active = act;
}
