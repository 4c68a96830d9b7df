/* arch.h — the model families ptrain runs, as one enum and one table of what tells them apart:
 * their names in GGUF files and in Hugging Face config.json files, the feature switches each turns
 * on, and the tensor names of every weight of a block in both formats (as llama.cpp's llm_arch
 * and its tensor-name table). The name of a family is parsed once, where a model file is read
 * (arch_from_gguf, arch_from_hf); everything else compares the enum or reads the table. */
#ifndef PTRAIN_ARCH_H
#define PTRAIN_ARCH_H

#include <stdbool.h>
#include <stddef.h>

#include "ptrain/error.h"

typedef enum { PT_ARCH_LLAMA, PT_ARCH_QWEN2, PT_ARCH_GEMMA2,
               PT_ARCH_QWEN3,
               PT_ARCH_SMOLLM3, /* llama with RoPE left out on every 4th layer (NoPE) */
               PT_ARCH_GRANITE, /* llama with multipliers on embeddings, scores, residual branches and logits */
               PT_ARCH_OLMO2,   /* norms after attention and the MLP only; q/k norms over the whole width */
               PT_ARCH_GEMMA3,  /* gemma2 with q/k norms, 5 local layers of 6 on their own rope base */
               PT_ARCH_PHI3,    /* llama with q/k/v and gate/up fused in the files, partial rotary */
               PT_ARCH_QWEN3MOE, /* qwen3 attention, a mixture of experts in place of the MLP (moe.h) */
               PT_ARCH_GEMMA4,  /* gemma3 with per-type head sizes and rope, per-layer inputs, KV sharing */
               PT_ARCH_QWEN35,  /* Qwen3.5 text: Gated DeltaNet layers and gated full-attention layers */
               PT_ARCH_MISTRAL3, /* Ministral 3: llama with YaRN and a query temperature (llama.cpp's mistral3) */
               PT_ARCH_MIXTRAL, /* llama attention, experts in place of every MLP (GGUF: llama with experts) */
               PT_ARCH_GRANITE4, /* Granite 4.0 attention-only (granitemoehybrid): granite with the MLP's gate and up
                                  * fused in its files (shared_mlp.input_linear); GGUF: granite */
               PT_ARCH_GPTOSS,  /* gpt-oss: biased attention with per-head sinks on alternating windows, YaRN, experts
                                 * with biases and a clamped SwiGLU on every layer */
               PT_ARCH_COUNT } pt_arch;

/* The weights of one transformer block, indexed by role. Gemma's (1 + w) RMSNorm weights are
 * stored with the 1 added at load time, so every norm computes x * rstd * w. Slots a family does
 * not use have no memory (data NULL). */
enum {
    W_ATTN_NORM, W_Q, W_K, W_V, W_O, W_FFN_NORM, W_GATE, W_UP, W_DOWN,
    W_Q_BIAS, W_K_BIAS, W_V_BIAS,          /* qwen2: f32 vectors */
    W_POST_ATTN_NORM, W_POST_FFN_NORM,     /* gemma2 */
    W_Q_NORM, W_K_NORM,                    /* qwen3, gemma3: RMSNorm of each head of q and k, head_dim values */
    W_PLE_GATE, W_PLE_PROJ, W_PLE_NORM,    /* gemma4: the per-layer input's gate [ple, dim], projection [dim, ple]
                                            * and the norm after it [dim] */
    W_PLE_MODEL,                           /* gemma4: this layer's rows of per_layer_model_projection [ple, dim] */
    W_PLE_EMBED,                           /* gemma4: this layer's columns of embed_tokens_per_layer [ple_vocab, ple] */
    /* qwen35: the output gate's rows of q_proj (the file interleaves query and gate per head; the loader splits
     * them into W_Q and W_Q_GATE), and a Gated DeltaNet layer's weights: in_proj_qkv, in_proj_z, in_proj_b,
     * in_proj_a, out_proj (projections), conv1d [conv channels, kernel], A_log and dt_bias [v heads] and the
     * gated norm's weight [v head dim] (f32 vectors; the gated norm is x * w, not 1 + w) */
    W_Q_GATE, W_LIN_QKV, W_LIN_Z, W_LIN_B, W_LIN_A, W_LIN_OUT, W_LIN_CONV, W_LIN_ALOG, W_LIN_DT, W_LIN_NORM,
    /* a sparse layer's experts as PEFT's target_parameters adapts them (mlp.experts.gate_up_proj [E, 2I, H],
     * mlp.experts.down_proj [E, H, I]): slots of LoRA pairs only, no weight here (the experts are
     * pt_layer_weights.experts) */
    W_EXP_GATE_UP, W_EXP_DOWN,
    W_ROUTER, /* a sparse layer's router (mlp.gate.weight [E, dim]) as target_parameters adapts it: a LoRA pair only */
    W_O_BIAS, /* gpt-oss: o_proj's bias [dim] (f32) */
    W_SINKS,  /* gpt-oss: each head's attention sink logit [n_heads] (f32) */
    W_COUNT
};

/* The MLP's gated activation: SwiGLU (llama, qwen2, mistral) or GeGLU with tanh-GELU (gemma2). */
typedef enum { PT_ACT_SILU, PT_ACT_GELU_TANH } pt_activation;

/* A config.json model_type that loads as a family. */
typedef struct {
    const char *model_type, *class_name;
    const char *description; /* for messages: "mistral (loads as llama)" */
    bool tied;           /* transformers' default for tie_word_embeddings */
    bool sliding_window; /* its config.json may set sliding_window (Mistral) */
    bool q_temperature;  /* its rope parameters' llama_4_scaling_beta scales the queries (Ministral 3) */
    bool text_tower;     /* a multimodal wrapper (qwen3_5, mistral3, gemma3): the text model's settings are its
                          * text_config (whose model_type, when given, must be one of this family's own), its
                          * weights model.language_model.* or, as transformers 4.x saved them and 5.x still
                          * saves them for the llava line, language_model.model.* with language_model.lm_head;
                          * the vision tower and projector are left unread */
    const char *text_defaults; /* a wrapper's: transformers' defaults of its text_config as a JSON object (the keys
                                * ptrain reads), since transformers 4.x saved text_config as the difference from
                                * them (google/gemma-3-4b-it's has no num_attention_heads) */
    int sliding_period;  /* a window on every layer but every P-th (layer_types' default P; OLMo 3: 4), its rope
                          * per layer type (rope_parameters.sliding_attention / .full_attention); 0: none */
} pt_arch_hf_type;

typedef struct {
    const char *name;         /* ptrain's and GGUF's general.architecture */
    const char *description;  /* the models it covers, for messages */
    pt_arch_hf_type hf[4];    /* config.json model_types (name NULL: none) */
    bool qkv_bias;            /* q, k and v projections add a bias (W_Q_BIAS ...) */
    bool post_norms;          /* RMSNorm after attention and after the MLP (W_POST_*) */
    bool norm_plus_one;       /* HF stores norm weights as w for x * (1 + w) */
    bool gguf_permuted_qk;    /* llama.cpp's converter interleaves q/k rows for its RoPE */
    pt_activation act;
    const char *gguf[W_COUNT]; /* GGUF tensor name of a slot after "blk.N." (NULL: unused) */
    const char *hf_names[W_COUNT]; /* Hugging Face name after "model.layers.N." */
    bool qk_norm;             /* q and k RMSNormed per head before RoPE (W_Q_NORM, W_K_NORM) */
    bool no_pre_norms;        /* olmo2: no RMSNorm before attention and the MLP (only the post-norms) */
    bool qk_norm_full;        /* olmo2: the q/k norms span the whole projection (heads x head_dim values) */
    bool fused;               /* phi3: q, k, v are row ranges of one weight (qkv_proj, GGUF attn_qkv) and gate,
                               * up of another (gate_up_proj, GGUF ffn_up); the slots of a fused weight share its
                               * name in gguf[] and hf_names[], and PEFT adapts the fused module as one */
    bool moe;                 /* qwen3_moe, mixtral: a router and experts in place of the MLP on sparse layers */
    const char *gguf_arch;    /* the general.architecture of its GGUF files when not name: mixtral's is llama's, a
                               * llama file with <arch>.expert_count > 0 (NULL: name) */
    const char *moe_block;    /* the HF module of the router (.gate) and of experts stored one by one (.experts.E.);
                               * fused experts (transformers 5: mlp.experts.gate_up_proj) and their router are under mlp */
    const char *expert_names[3]; /* an expert's gate, up and down projections stored one by one: gate_proj, up_proj,
                               * down_proj (Qwen3-MoE) or w1, w3, w2 (Mixtral) */
    const char *moe_width_key; /* config.json's key of an expert's width: moe_intermediate_size or intermediate_size */
    bool moe_renormalise;     /* the top-k weights always renormalised (Mixtral); else config.json's norm_topk_prob */
    const char *not_yet;      /* what ptrain does not yet do with the family (training, exports, GGUF files), for
                               * the refusal; NULL: everything */
    bool gguf_q_temperature;  /* mistral3: its GGUF carries llama.cpp's attention.temperature_scale (the query
                               * temperature's beta, over rope.scaling.original_context_length positions) and
                               * rope.scaling.yarn_log_multiplier (YaRN's mscale_all_dim) */
    bool gated_delta;         /* qwen35: layer_types mixes Gated DeltaNet (linear_attention) and full attention layers
                               * whose q_proj carries an output gate (W_Q_GATE); training and exports not yet built */
    bool multipliers;         /* granite: embedding_multiplier, attention_multiplier, residual_multiplier and
                               * logits_scaling (GGUF: embedding_scale, attention.scale, residual_scale, logit_scale) */
    bool fused_mlp;           /* granite4: only gate and up are fused in the Hugging Face files (shared_mlp.input_linear:
                               * gate rows, then up rows), adapted as one module as PEFT does (input_linear); its GGUF
                               * files (llama.cpp's granite) hold them apart */
    const char *mlp_block;    /* the Hugging Face module holding the MLP's projections when not mlp (granite4:
                               * shared_mlp), in tensor names and PEFT's module keys */
    const char *ffn_width_key; /* config.json's key of the MLP's width when not intermediate_size (granite4:
                               * shared_intermediate_size) */
    /* gpt-oss: the router is <moe_block>.router (weight and bias) and the experts are transformers' GptOssExperts:
     * gate_up_proj [E, dim, 2I] (x W, gate the even columns, up the odd ones) with gate_up_proj_bias [E, 2I],
     * down_proj [E, I, dim] with down_proj_bias [E, dim]; their SwiGLU is clamped (swiglu_limit, swiglu_alpha);
     * attention adds o_proj's bias (W_O_BIAS) and a sink logit per head (W_SINKS) */
    bool gptoss_moe;
} pt_arch_info;

const pt_arch_info *arch_info(pt_arch a);
const char *arch_name(pt_arch a);
/* The family of a GGUF general.architecture (len bytes); false when ptrain has none. */
bool arch_from_gguf(const char *name, size_t len, pt_arch *out);
/* The family whose GGUF files are dense's with experts (llama: mixtral); false when none. */
bool arch_gguf_with_experts(pt_arch dense, pt_arch *out);
/* The general.architecture (and key prefix) of the family's GGUF files: gguf_arch, else name. */
const char *arch_gguf_name(pt_arch a);
/* The family and HF type of a config.json model_type, or of its architectures[0] when model_type is
 * empty or NULL. */
bool arch_from_hf(const char *model_type, const char *class_name, pt_arch *out, const pt_arch_hf_type **type);
/* The supported families, for error messages: those a GGUF file may hold (by their own name), and the
 * config.json model_types. */
const char *arch_list(void);
const char *arch_hf_list(void);
/* "blk.N.attn_q.weight" / "model.layers.N.self_attn.q_proj.weight" of slot in layer l, or NULL
 * when the family has no such weight. */
const char *arch_gguf_tensor(pt_arch a, int l, int slot, char *buf, size_t len);
const char *arch_hf_tensor(pt_arch a, int l, int slot, char *buf, size_t len);
/* The module name PEFT uses for projection slot w of family a (q_proj ... down_proj; phi3: qkv_proj on W_Q and
 * gate_up_proj on W_GATE, which stand for their fused weights, NULL on W_K, W_V and W_UP; granite4: input_linear
 * on W_GATE, NULL on W_UP, output_linear on W_DOWN), NULL for norms and biases. */
const char *arch_peft_module(pt_arch a, int w);
/* The module that holds projection slot w in PEFT's keys (model.layers.N.<block>.<module>): self_attn, the MLP's
 * (mlp; granite4: shared_mlp), or qwen35's Gated DeltaNet (linear_attn). */
const char *arch_peft_block(pt_arch a, int w);
/* The llama name of projection slot w (q_proj ... down_proj), NULL for the other slots. */
const char *arch_llama_module(int w);
/* The slot whose adapter adapts slot w of family a: the first part of the fused weight w is in (phi3: W_Q for W_K,
 * W_V; phi3, granite4: W_GATE for W_UP), else w. */
int arch_fused_lead(pt_arch a, int w);
/* PEFT's target_parameters entry of an experts slot (W_EXP_GATE_UP: mlp.experts.gate_up_proj, W_EXP_DOWN:
 * mlp.experts.down_proj, the fused expert weights as transformers 5 holds them), NULL for other slots. */
const char *arch_peft_param(int w);
/* Whether a GGUF general.architecture (supported or not) is of the Gemma line (gemma, gemma2,
 * gemma3), whose SentencePiece vocabularies take no space prefix. */
bool arch_gguf_gemma_line(const char *name, size_t len);
/* PT_ERR_USER naming what the family does not yet support (arch_info's not_yet) when it has such a limit: what
 * names the refused action ("training", "export"). */
pt_status arch_check_supported(pt_arch a, const char *what);
/* Whether slot is an RMSNorm weight. */
bool arch_slot_is_norm(int slot);

#endif
