/* arch.c — the table of model families (see arch.h): one row per family with its names, feature
 * switches and tensor names. A new family is a new row here (plus what its feature needs in the
 * forward pass); nothing else compares family names. */
#include "ptrain/arch.h"

#include <stdio.h>

#include "ptrain/error.h"
#include <string.h>

/* The llama-like blocks share their GGUF and HF names; each family row lists them in full. */
#define GGUF_COMMON                                                                                    \
    [W_ATTN_NORM] = "attn_norm.weight", [W_Q] = "attn_q.weight", [W_K] = "attn_k.weight",                \
    [W_V] = "attn_v.weight", [W_O] = "attn_output.weight", [W_FFN_NORM] = "ffn_norm.weight",             \
    [W_GATE] = "ffn_gate.weight", [W_UP] = "ffn_up.weight", [W_DOWN] = "ffn_down.weight"
#define HF_COMMON                                                                                      \
    [W_ATTN_NORM] = "input_layernorm.weight", [W_Q] = "self_attn.q_proj.weight",                         \
    [W_K] = "self_attn.k_proj.weight", [W_V] = "self_attn.v_proj.weight", [W_O] = "self_attn.o_proj.weight", \
    [W_GATE] = "mlp.gate_proj.weight", [W_UP] = "mlp.up_proj.weight", [W_DOWN] = "mlp.down_proj.weight"

/* transformers' defaults of the multimodal configs' text_config: Mistral3Config's text model (Mistral Small 3.1's
 * sizes) and Gemma3TextConfig's, as transformers 4.50 (which saved the published files) and 5.25 have them */
#define MISTRAL3_TEXT                                                                                          \
    "{\"head_dim\": 128, \"hidden_size\": 5120, \"intermediate_size\": 32768, \"max_position_embeddings\": 131072, " \
    "\"num_attention_heads\": 32, \"num_hidden_layers\": 40, \"num_key_value_heads\": 8, \"rms_norm_eps\": 1e-05, "  \
    "\"rope_theta\": 1000000000.0, \"vocab_size\": 131072}"
#define GEMMA3_TEXT                                                                                            \
    "{\"vocab_size\": 262208, \"hidden_size\": 2304, \"intermediate_size\": 9216, \"num_hidden_layers\": 26, "        \
    "\"num_attention_heads\": 8, \"num_key_value_heads\": 4, \"head_dim\": 256, \"rms_norm_eps\": 1e-06, "            \
    "\"max_position_embeddings\": 131072, \"query_pre_attn_scalar\": 256, \"rope_theta\": 1000000.0}"

static const pt_arch_info table[PT_ARCH_COUNT] = {
    [PT_ARCH_LLAMA] = {
        .name = "llama", .description = "llama (Llama 2/3, Mistral, SmolLM2, TinyLlama)",
        .hf = {{"llama", "LlamaForCausalLM", "llama (Llama 2/3.x, SmolLM2, TinyLlama)", false, false},
               {"mistral", "MistralForCausalLM", "mistral (loads as llama)", false, true},
               {"mistral3", "Mistral3ForConditionalGeneration",
                "mistral3 (Mistral Small 3.1+, Ministral 3 multimodal: its text tower)",
                true, true, false, true,
                MISTRAL3_TEXT}},
        .gguf_permuted_qk = true, .act = PT_ACT_SILU,
        .gguf = {GGUF_COMMON},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight"},
    },
    [PT_ARCH_QWEN2] = {
        .name = "qwen2", .description = "qwen2 (Qwen2, Qwen2.5)",
        .hf = {{"qwen2", "Qwen2ForCausalLM", "qwen2 (Qwen2, Qwen2.5)", false, false}},
        .qkv_bias = true, .act = PT_ACT_SILU,
        .gguf = {GGUF_COMMON, [W_Q_BIAS] = "attn_q.bias", [W_K_BIAS] = "attn_k.bias", [W_V_BIAS] = "attn_v.bias"},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight",
                     [W_Q_BIAS] = "self_attn.q_proj.bias", [W_K_BIAS] = "self_attn.k_proj.bias",
                     [W_V_BIAS] = "self_attn.v_proj.bias"},
    },
    [PT_ARCH_GEMMA2] = {
        .name = "gemma2", .description = "gemma2 (Gemma 2)",
        .hf = {{"gemma2", "Gemma2ForCausalLM", "gemma2 (Gemma 2)", true, false}},
        .post_norms = true, .norm_plus_one = true, .act = PT_ACT_GELU_TANH,
        .gguf = {GGUF_COMMON, [W_POST_ATTN_NORM] = "post_attention_norm.weight",
                 [W_POST_FFN_NORM] = "post_ffw_norm.weight"},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "pre_feedforward_layernorm.weight",
                     [W_POST_ATTN_NORM] = "post_attention_layernorm.weight",
                     [W_POST_FFN_NORM] = "post_feedforward_layernorm.weight"},
    },
    [PT_ARCH_QWEN3] = {
        .name = "qwen3", .description = "qwen3 (Qwen3, DeepSeek-R1 Qwen3 distills)",
        .hf = {{"qwen3", "Qwen3ForCausalLM", "qwen3 (Qwen3)", false, false}},
        .qk_norm = true, .act = PT_ACT_SILU,
        .gguf = {GGUF_COMMON, [W_Q_NORM] = "attn_q_norm.weight", [W_K_NORM] = "attn_k_norm.weight"},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight",
                     [W_Q_NORM] = "self_attn.q_norm.weight", [W_K_NORM] = "self_attn.k_norm.weight"},
    },
    [PT_ARCH_SMOLLM3] = {
        .name = "smollm3", .description = "smollm3 (SmolLM3)",
        .hf = {{"smollm3", "SmolLM3ForCausalLM", "smollm3 (SmolLM3)", true, false}},
        .gguf_permuted_qk = true, .act = PT_ACT_SILU, /* llama.cpp converts it as llama */
        .gguf = {GGUF_COMMON},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight"},
    },
    [PT_ARCH_GRANITE] = {
        .name = "granite", .description = "granite (Granite 3.x)",
        .hf = {{"granite", "GraniteForCausalLM", "granite (Granite 3.x)", false, false}},
        .gguf_permuted_qk = true, .act = PT_ACT_SILU, .multipliers = true, /* llama.cpp converts it as llama */
        .gguf = {GGUF_COMMON},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight"},
    },
    [PT_ARCH_OLMO2] = {
        .name = "olmo2", .description = "olmo2 (OLMo 2, OLMo 3)",
        .hf = {{"olmo2", "Olmo2ForCausalLM", "olmo2 (OLMo 2)", false, false},
               {"olmo3", "Olmo3ForCausalLM", "olmo3 (OLMo 3; loads as olmo2)", false, false, false, .sliding_period = 4}},
        .post_norms = true, .qk_norm = true, .no_pre_norms = true, .qk_norm_full = true, .act = PT_ACT_SILU,
        .gguf = {[W_Q] = "attn_q.weight", [W_K] = "attn_k.weight", [W_V] = "attn_v.weight",
                 [W_O] = "attn_output.weight", [W_GATE] = "ffn_gate.weight", [W_UP] = "ffn_up.weight",
                 [W_DOWN] = "ffn_down.weight", [W_POST_ATTN_NORM] = "post_attention_norm.weight",
                 [W_POST_FFN_NORM] = "post_ffw_norm.weight", [W_Q_NORM] = "attn_q_norm.weight",
                 [W_K_NORM] = "attn_k_norm.weight"},
        .hf_names = {[W_Q] = "self_attn.q_proj.weight", [W_K] = "self_attn.k_proj.weight",
                     [W_V] = "self_attn.v_proj.weight", [W_O] = "self_attn.o_proj.weight",
                     [W_GATE] = "mlp.gate_proj.weight", [W_UP] = "mlp.up_proj.weight", [W_DOWN] = "mlp.down_proj.weight",
                     [W_POST_ATTN_NORM] = "post_attention_layernorm.weight",
                     [W_POST_FFN_NORM] = "post_feedforward_layernorm.weight", [W_Q_NORM] = "self_attn.q_norm.weight",
                     [W_K_NORM] = "self_attn.k_norm.weight"},
    },
    [PT_ARCH_GEMMA3] = {
        .name = "gemma3", .description = "gemma3 (Gemma 3 text)",
        .hf = {{"gemma3_text", "Gemma3ForCausalLM", "gemma3_text (Gemma 3)", true, false},
               {"gemma3", "Gemma3ForConditionalGeneration", "gemma3 (Gemma 3 multimodal: its text tower)", true,
                false, false, true, GEMMA3_TEXT}},
        .post_norms = true, .norm_plus_one = true, .qk_norm = true, .act = PT_ACT_GELU_TANH,
        .gguf = {GGUF_COMMON, [W_POST_ATTN_NORM] = "post_attention_norm.weight",
                 [W_POST_FFN_NORM] = "post_ffw_norm.weight", [W_Q_NORM] = "attn_q_norm.weight",
                 [W_K_NORM] = "attn_k_norm.weight"},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "pre_feedforward_layernorm.weight",
                     [W_POST_ATTN_NORM] = "post_attention_layernorm.weight",
                     [W_POST_FFN_NORM] = "post_feedforward_layernorm.weight",
                     [W_Q_NORM] = "self_attn.q_norm.weight", [W_K_NORM] = "self_attn.k_norm.weight"},
    },
    [PT_ARCH_PHI3] = {
        .name = "phi3", .description = "phi3 (Phi-3, Phi-3.5, Phi-4, Phi-4-mini)",
        .hf = {{"phi3", "Phi3ForCausalLM", "phi3 (Phi-3.5, Phi-4, Phi-4-mini)", false, true}},
        .fused = true, .act = PT_ACT_SILU,
        .gguf = {[W_ATTN_NORM] = "attn_norm.weight", [W_Q] = "attn_qkv.weight", [W_K] = "attn_qkv.weight",
                 [W_V] = "attn_qkv.weight", [W_O] = "attn_output.weight", [W_FFN_NORM] = "ffn_norm.weight",
                 [W_GATE] = "ffn_up.weight", [W_UP] = "ffn_up.weight", [W_DOWN] = "ffn_down.weight"},
        .hf_names = {[W_ATTN_NORM] = "input_layernorm.weight", [W_Q] = "self_attn.qkv_proj.weight",
                     [W_K] = "self_attn.qkv_proj.weight", [W_V] = "self_attn.qkv_proj.weight",
                     [W_O] = "self_attn.o_proj.weight", [W_FFN_NORM] = "post_attention_layernorm.weight",
                     [W_GATE] = "mlp.gate_up_proj.weight", [W_UP] = "mlp.gate_up_proj.weight",
                     [W_DOWN] = "mlp.down_proj.weight"},
    },
    [PT_ARCH_QWEN3MOE] = {
        .name = "qwen3moe", .description = "qwen3moe (Qwen3-MoE)",
        .hf = {{"qwen3_moe", "Qwen3MoeForCausalLM", "qwen3_moe (Qwen3-MoE: Qwen3-30B-A3B, 235B-A22B)", false, false}},
        .qk_norm = true, .act = PT_ACT_SILU, .moe = true, /* GGUF names: llama.cpp's, for adapter.gguf */
        .gguf = {GGUF_COMMON, [W_Q_NORM] = "attn_q_norm.weight", [W_K_NORM] = "attn_k_norm.weight"},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight",
                     [W_Q_NORM] = "self_attn.q_norm.weight", [W_K_NORM] = "self_attn.k_norm.weight"},
        .moe_block = "mlp", .expert_names = {"gate_proj", "up_proj", "down_proj"},
        .moe_width_key = "moe_intermediate_size",
    },
    [PT_ARCH_GEMMA4] = {
        .name = "gemma4", .description = "gemma4 (Gemma 4 text)",
        .hf = {{"gemma4_text", "Gemma4ForCausalLM", "gemma4_text (Gemma 4)", true, false},
               {"gemma4", "Gemma4ForConditionalGeneration", "gemma4 (Gemma 4, its text tower)", true, false, false,
                true}},
        .post_norms = true, .qk_norm = true, .act = PT_ACT_GELU_TANH, /* norms compute x * w, not x * (1 + w) */
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "pre_feedforward_layernorm.weight",
                     [W_POST_ATTN_NORM] = "post_attention_layernorm.weight",
                     [W_POST_FFN_NORM] = "post_feedforward_layernorm.weight",
                     [W_Q_NORM] = "self_attn.q_norm.weight", [W_K_NORM] = "self_attn.k_norm.weight",
                     [W_PLE_GATE] = "per_layer_input_gate.weight", [W_PLE_PROJ] = "per_layer_projection.weight",
                     [W_PLE_NORM] = "post_per_layer_input_norm.weight"},
        .not_yet = "runs, trains and merges (--hf) Gemma 4 from Hugging Face directories only; merged GGUF "
                   "exports (--gguf, --ollama), llama.cpp adapters (adapter.gguf) and GGUF files of it are not built yet",
    },
    [PT_ARCH_QWEN35] = {
        .name = "qwen35", .description = "qwen35 (Qwen3.5 text)",
        .hf = {{"qwen3_5_text", "Qwen3_5ForCausalLM", "qwen3_5_text (Qwen3.5)", false, false},
               {"qwen3_5", "Qwen3_5ForConditionalGeneration", "qwen3_5 (Qwen3.5, its text tower)", false, false,
                false, true}},
        .norm_plus_one = true, .qk_norm = true, .gated_delta = true, .act = PT_ACT_SILU,
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight",
                     [W_Q_NORM] = "self_attn.q_norm.weight", [W_K_NORM] = "self_attn.k_norm.weight",
                     [W_Q_GATE] = "self_attn.q_proj.weight", [W_LIN_QKV] = "linear_attn.in_proj_qkv.weight",
                     [W_LIN_Z] = "linear_attn.in_proj_z.weight", [W_LIN_B] = "linear_attn.in_proj_b.weight",
                     [W_LIN_A] = "linear_attn.in_proj_a.weight", [W_LIN_OUT] = "linear_attn.out_proj.weight",
                     [W_LIN_CONV] = "linear_attn.conv1d.weight", [W_LIN_ALOG] = "linear_attn.A_log",
                     [W_LIN_DT] = "linear_attn.dt_bias", [W_LIN_NORM] = "linear_attn.norm.weight"},
    },
    [PT_ARCH_MISTRAL3] = {
        .name = "mistral3", .description = "mistral3 (Ministral 3)",
        .hf = {{"ministral3", "Ministral3ForCausalLM", "ministral3 (Ministral 3)", false, true, true}},
        .gguf_permuted_qk = true, .act = PT_ACT_SILU, .gguf_q_temperature = true, /* llama.cpp: llama's tensors */
        .gguf = {GGUF_COMMON},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight"},
    },
    [PT_ARCH_MIXTRAL] = {
        .name = "mixtral", .description = "mixtral (Mixtral; GGUF: llama with experts)", .gguf_arch = "llama",
        .hf = {{"mixtral", "MixtralForCausalLM", "mixtral (Mixtral 8x7B, 8x22B)", false, true}},
        .gguf_permuted_qk = true, .act = PT_ACT_SILU, .moe = true, /* llama.cpp converts it as llama with experts */
        .gguf = {GGUF_COMMON},
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight"},
        .moe_block = "block_sparse_moe", .expert_names = {"w1", "w3", "w2"}, .moe_width_key = "intermediate_size",
        .moe_renormalise = true,
    },
    [PT_ARCH_GRANITE4] = {
        .name = "granite4", .description = "granite4 (Granite 4.0 attention-only; GGUF: granite)",
        .gguf_arch = "granite", /* llama.cpp's converter writes it as granite, input_linear split */
        .hf = {{"granitemoehybrid", "GraniteMoeHybridForCausalLM",
                "granitemoehybrid (Granite 4.0: the attention-only sizes without experts)", false, false}},
        .gguf_permuted_qk = true, .act = PT_ACT_SILU, .multipliers = true, .fused_mlp = true,
        .mlp_block = "shared_mlp", .ffn_width_key = "shared_intermediate_size",
        .gguf = {GGUF_COMMON},
        .hf_names = {[W_ATTN_NORM] = "input_layernorm.weight", [W_Q] = "self_attn.q_proj.weight",
                     [W_K] = "self_attn.k_proj.weight", [W_V] = "self_attn.v_proj.weight",
                     [W_O] = "self_attn.o_proj.weight", [W_FFN_NORM] = "post_attention_layernorm.weight",
                     [W_GATE] = "shared_mlp.input_linear.weight", [W_UP] = "shared_mlp.input_linear.weight",
                     [W_DOWN] = "shared_mlp.output_linear.weight"},
    },
    [PT_ARCH_GPTOSS] = {
        .name = "gpt-oss", .description = "gpt-oss (gpt-oss-20b, gpt-oss-120b)",
        .hf = {{"gpt_oss", "GptOssForCausalLM", "gpt_oss (gpt-oss-20b, gpt-oss-120b)", false, false}},
        .qkv_bias = true, .act = PT_ACT_SILU, .moe = true, .gptoss_moe = true,
        .hf_names = {HF_COMMON, [W_FFN_NORM] = "post_attention_layernorm.weight",
                     [W_Q_BIAS] = "self_attn.q_proj.bias", [W_K_BIAS] = "self_attn.k_proj.bias",
                     [W_V_BIAS] = "self_attn.v_proj.bias", [W_O_BIAS] = "self_attn.o_proj.bias",
                     [W_SINKS] = "self_attn.sinks"},
        /* top-k of the biased logits, softmax over the k: the softmax over all experts renormalised over the k */
        .moe_block = "mlp", .moe_width_key = "intermediate_size", .moe_renormalise = true,
        .not_yet = "runs gpt-oss forward (generate, inspect, score) from Hugging Face directories only (bf16/f32 "
                   "or MXFP4 experts); training, GGUF files and exports of it are not built yet",
    },
};

static const char *const peft_modules[W_COUNT] = {
    [W_Q] = "q_proj", [W_K] = "k_proj", [W_V] = "v_proj", [W_O] = "o_proj",
    [W_GATE] = "gate_proj", [W_UP] = "up_proj", [W_DOWN] = "down_proj",
    /* qwen35's Gated DeltaNet layers (linear_attn); its q_proj's gate rows are a part of q_proj (model_adapter_part) */
    [W_LIN_QKV] = "in_proj_qkv", [W_LIN_Z] = "in_proj_z", [W_LIN_B] = "in_proj_b", [W_LIN_A] = "in_proj_a",
    [W_LIN_OUT] = "out_proj",
};
static const char *const peft_fused_modules[W_COUNT] = {
    [W_Q] = "qkv_proj", [W_O] = "o_proj", [W_GATE] = "gate_up_proj", [W_DOWN] = "down_proj",
};
static const char *const peft_shared_mlp_modules[W_COUNT] = {
    [W_Q] = "q_proj", [W_K] = "k_proj", [W_V] = "v_proj", [W_O] = "o_proj",
    [W_GATE] = "input_linear", [W_DOWN] = "output_linear",
};

const pt_arch_info *arch_info(pt_arch a) { return &table[a < PT_ARCH_COUNT ? a : PT_ARCH_LLAMA]; }

const char *arch_name(pt_arch a) { return arch_info(a)->name; }

const char *arch_gguf_name(pt_arch a) { return arch_info(a)->gguf_arch ? arch_info(a)->gguf_arch : arch_name(a); }

bool arch_from_gguf(const char *name, size_t len, pt_arch *out)
{
    for (int a = 0; a < PT_ARCH_COUNT; a++)
        if (!table[a].gguf_arch && strlen(table[a].name) == len && memcmp(table[a].name, name, len) == 0) {
            *out = (pt_arch)a;
            return true;
        }
    return false;
}

bool arch_gguf_with_experts(pt_arch dense, pt_arch *out)
{
    for (int a = 0; a < PT_ARCH_COUNT; a++)
        if (table[a].moe && table[a].gguf_arch && !strcmp(table[a].gguf_arch, arch_name(dense))) {
            *out = (pt_arch)a;
            return true;
        }
    return false;
}

bool arch_from_hf(const char *model_type, const char *class_name, pt_arch *out, const pt_arch_hf_type **type)
{
    bool by_type = model_type && *model_type; /* model_type decides; architectures[0] only without one */
    for (int a = 0; a < PT_ARCH_COUNT; a++)
        for (size_t i = 0; i < sizeof table[a].hf / sizeof table[a].hf[0] && table[a].hf[i].model_type; i++) {
            const char *want = by_type ? table[a].hf[i].model_type : table[a].hf[i].class_name;
            const char *have = by_type ? model_type : class_name;
            if (!have || strcmp(want, have)) continue;
            *out = (pt_arch)a;
            if (type) *type = &table[a].hf[i];
            return true;
        }
    return false;
}

/* The descriptions joined by ", ": of the families, or of their config.json model_types. */
static const char *join(char *text, size_t len, bool hf)
{
    if (text[0]) return text;
    for (int a = 0; a < PT_ARCH_COUNT; a++)
        for (size_t i = 0; i < (hf ? sizeof table[a].hf / sizeof table[a].hf[0] : !table[a].gguf_arch); i++) {
            const char *d = hf ? table[a].hf[i].description : table[a].description; /* GGUF: by their own name */
            if (d) snprintf(text + strlen(text), len - strlen(text), "%s%s", text[0] ? ", " : "", d);
        }
    return text;
}

const char *arch_list(void)
{
    static char text[1024];
    return join(text, sizeof text, false);
}

const char *arch_hf_list(void)
{
    static char text[2048];
    return join(text, sizeof text, true);
}

const char *arch_gguf_tensor(pt_arch a, int l, int slot, char *buf, size_t len)
{
    if (slot < 0 || slot >= W_COUNT || !arch_info(a)->gguf[slot]) return NULL;
    snprintf(buf, len, "blk.%d.%s", l, arch_info(a)->gguf[slot]);
    return buf;
}

const char *arch_hf_tensor(pt_arch a, int l, int slot, char *buf, size_t len)
{
    if (slot < 0 || slot >= W_COUNT || !arch_info(a)->hf_names[slot]) return NULL;
    snprintf(buf, len, "model.layers.%d.%s", l, arch_info(a)->hf_names[slot]);
    return buf;
}

const char *arch_peft_param(int w)
{ /* transformers 5 holds both families' experts fused under mlp.experts (Mixtral's block_sparse_moe renamed) */
    return w == W_EXP_GATE_UP ? "mlp.experts.gate_up_proj" : w == W_EXP_DOWN ? "mlp.experts.down_proj"
           : w == W_ROUTER    ? "mlp.gate.weight"
                              : NULL;
}

const char *arch_peft_module(pt_arch a, int w)
{
    if (w < 0 || w >= W_COUNT) return NULL;
    if (!arch_info(a)->hf_names[w]) return NULL; /* a slot the family does not have */
    if (arch_info(a)->fused_mlp) return peft_shared_mlp_modules[w];
    return arch_info(a)->fused ? peft_fused_modules[w] : peft_modules[w];
}

const char *arch_peft_block(pt_arch a, int w)
{
    if (w >= W_LIN_QKV && w <= W_LIN_OUT) return "linear_attn"; /* qwen35's Gated DeltaNet */
    if (w != W_GATE && w != W_UP && w != W_DOWN) return "self_attn";
    return arch_info(a)->mlp_block ? arch_info(a)->mlp_block : "mlp";
}

const char *arch_llama_module(int w) { return w >= 0 && w < W_COUNT ? peft_modules[w] : NULL; }

int arch_fused_lead(pt_arch a, int w)
{
    if (arch_info(a)->fused && (w == W_K || w == W_V)) return W_Q;
    if ((arch_info(a)->fused || arch_info(a)->fused_mlp) && w == W_UP) return W_GATE;
    return w;
}

bool arch_gguf_gemma_line(const char *name, size_t len)
{
    static const char *const line[] = {"gemma", "gemma2", "gemma3"};
    for (size_t i = 0; i < sizeof line / sizeof line[0]; i++)
        if (strlen(line[i]) == len && memcmp(line[i], name, len) == 0) return true;
    return false;
}

bool arch_slot_is_norm(int slot)
{
    return slot == W_ATTN_NORM || slot == W_FFN_NORM || slot == W_POST_ATTN_NORM || slot == W_POST_FFN_NORM ||
           slot == W_Q_NORM || slot == W_K_NORM || slot == W_PLE_NORM;
}

pt_status arch_check_supported(pt_arch a, const char *what)
{
    const char *why = arch_info(a)->not_yet;
    if (!why) return PT_OK;
    return ERR(PT_ERR_USER, "%s is not available for %s models yet: ptrain %s; use another family for %s",
               what, arch_name(a), why, what);
}
