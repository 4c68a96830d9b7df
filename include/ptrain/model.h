/* model.h — a decoder-only transformer (the llama, qwen2 and gemma2 families) held on a backend:
 * hyperparameters read from the model file and frozen base weights kept in their stored
 * (4/8/16-bit) block format. The forward pass is forward.h's; the families' facts, arch.h's. */
#ifndef PTRAIN_MODEL_H
#define PTRAIN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/arch.h"
#include "ptrain/backend.h"
#include "ptrain/gguf.h"
#include "ptrain/rope.h"

typedef struct {
    pt_arch arch; /* mistral loads as llama */
    int n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab, ctx_len;
    float norm_eps, rope_theta;
    bool tied_embeddings;
    bool text_tower;        /* the text model of a multimodal checkpoint (arch.h's text_tower): PEFT names its modules
                             * model.language_model.*, and its files hold the weights under one of two prefixes */
    /* family features (model_family_defaults sets them); all zero is llama: a zero embed_scale
     * means 1 and a zero attn_scale 1/sqrt(head_dim) */
    bool qkv_bias;          /* qwen2: q, k and v projections add a bias (W_Q_BIAS ...) */
    bool post_norms;        /* gemma2: RMSNorm after attention and after the MLP (W_POST_*) */
    pt_activation act;      /* gate activation of the MLP */
    bool embed_scaled_in_module; /* gemma 2 and 3: the embedding module scales its rows (hooks on it see them scaled) */
    float embed_scale;      /* gemma: embeddings are multiplied by sqrt(dim); 1 otherwise */
    float attn_scale;       /* score scale: 1/sqrt(query_pre_attn_scalar) for gemma2, else 1/sqrt(head_dim) */
    float attn_softcap;     /* gemma2: scores become c*tanh(s/c) (50); 0 = off */
    float final_softcap;    /* gemma2: logits become c*tanh(z/c) (30); 0 = off */
    int sliding_window;     /* gemma2: keys within this many positions on local layers; 0 = none */
    int sliding_pattern;    /* layer l is local when sliding_window && l % sliding_pattern == 0 (gemma2: 2) */
    bool qk_norm;           /* qwen3, gemma3: q and k RMSNormed per head (W_Q_NORM, W_K_NORM) before RoPE */
    int nope_period;        /* smollm3: layer l has no RoPE when (l + 1) % nope_period == 0 (4); 0 = RoPE on all */
    float residual_scale;   /* granite: a branch's output is multiplied by this before its residual add; 0 = 1 */
    float logit_scale;      /* granite: the logits are divided by this (logits_scaling); 0 = 1 */
    bool no_pre_norms;      /* olmo2: attention and the MLP read the residual stream itself (no W_ATTN/FFN_NORM) */
    bool qk_norm_full;      /* olmo2: the q/k norms span all heads (heads x head_dim values), not each head */
    int sliding_period;     /* gemma3: with a window, layer l is global when (l + 1) % sliding_period == 0, else
                             * local (6); 0: sliding_pattern's rule */
    float rope_theta_local; /* gemma3: the rope base of the local layers (10000, unscaled); 0: rope_theta */
    int rope_dim;           /* phi3: the first rope_dim values of each head rotate (head_dim x
                             * partial_rotary_factor), the rest pass; 0: head_dim */
    float rope_mscale;      /* LongRoPE, YaRN: cos and sin times the attention factor; 0: 1 */
    int rope_short_max;     /* phi3 LongRoPE: original_max_position_embeddings; a pass whose positions reach it
                             * runs the long_factor frequencies (model_layer_freq), as transformers. 0: none */
    float q_temp_beta;      /* ministral3: q after RoPE times 1 + beta ln(1 + floor(pos / q_temp_period))
                             * (llama_4_scaling_beta); 0: none */
    int q_temp_period;      /* ministral3: the rope's original_max_position_embeddings */
    /* mixture of experts (qwen3_moe; moe.h): n_experts 0 = a dense MLP on every layer */
    int n_experts;          /* num_experts: experts of a sparse layer */
    int n_experts_used;     /* num_experts_per_tok: the top-k each token is routed to */
    int moe_ffn_dim;        /* moe_intermediate_size: each expert's gate/up rows */
    int moe_step;           /* decoder_sparse_step: layer l is sparse when (l + 1) % moe_step == 0 */
    bool moe_norm_topk;     /* norm_topk_prob: the k routing weights renormalised to sum 1 */
    uint64_t mlp_only[4];   /* mlp_only_layers as bits (layers < 256): these stay dense */
    /* gpt-oss (arch.h's gptoss_moe; all zero for the other families) */
    bool o_bias;            /* o_proj adds a bias (W_O_BIAS) */
    bool attn_sinks;        /* each head's softmax has one more logit, its sink (W_SINKS), dropped after */
    bool moe_bias;          /* the router and the experts' products add biases (pt_layer_weights' router_bias, expert_bias) */
    float swiglu_limit;     /* the experts' SwiGLU clamped: gate <= limit, up in [-limit, limit],
                             * out = (up + 1) gate sigmoid(alpha gate); 0: the plain SwiGLU */
    float swiglu_alpha;
    /* gemma4 (all zero for the other families) */
    bool last_layer_full;   /* the last layer is global whatever sliding_period says (transformers forces it) */
    int head_dim_full;      /* the global layers' head size (global_head_dim); 0: head_dim */
    int n_kv_heads_full;    /* the global layers' key/value heads; 0: n_kv_heads */
    int rope_pairs_full;    /* the global layers' rotated pairs ("proportional": the first pairs of head_dim_full/2
                             * turn by theta^(-2i/head_dim_full), the rest stay); 0: all */
    bool k_eq_v;            /* attention_k_eq_v: the global layers' values are their keys before the k norm */
    bool v_norm;            /* values RMSNormed per head without a weight; attention scale 1 */
    int kv_shared;          /* num_kv_shared_layers: the last layers use the keys and values of the last earlier
                             * layer of their kind */
    int ple_dim;            /* hidden_size_per_layer_input: the per-layer inputs' width; 0: none */
    int ple_vocab;          /* vocab_size_per_layer_input: the rows of embed_tokens_per_layer */
    bool layer_scalars;     /* each layer's output times its layer_scalar */
    /* qwen35 (Gated DeltaNet hybrid): layer l is full attention when (l + 1) % full_period == 0, else a Gated
     * DeltaNet layer; 0: every layer full attention (every other family) */
    int full_period;
    int lin_k_heads, lin_v_heads, lin_k_dim, lin_v_dim; /* the DeltaNet's q/k heads (fewer or as many as v heads) */
    int lin_conv;           /* the depthwise causal conv1d's kernel (linear_conv_kernel_dim) */
    bool attn_gate;         /* qwen35: full attention output times sigmoid(W_Q_GATE x) */
} pt_model_config;

/* Expert weights of a sparse layer, per expert (each its own tensor, NF4 under load_in_4bit). */
enum { X_GATE, X_UP, X_DOWN, X_COUNT };

typedef struct {
    pt_tensor w[W_COUNT];
    /* sparse layers only (model_layer_moe): the router [n_experts, dim], never quantized, and
     * experts[e * X_COUNT + X_*]: gate and up [moe_ffn_dim, dim], down [dim, moe_ffn_dim] */
    pt_tensor router;
    pt_tensor *experts;
    /* gpt-oss (moe_bias): the router's bias [n_experts] and the experts' biases, expert e's the row e:
     * expert_bias[X_GATE], [X_UP] [n_experts, moe_ffn_dim], [X_DOWN] [n_experts, dim] (f32) */
    pt_tensor router_bias, expert_bias[X_COUNT];
} pt_layer_weights;

typedef struct {
    pt_model_config cfg;
    pt_backend *be;
    pt_tensor tok_embd, out_norm, output; /* output shares tok_embd's memory when tied */
    pt_layer_weights *layers;
    float *inv_freq; /* head_dim/2 rotary frequencies, scaling applied; then head_dim/2 more for the local
                      * layers when cfg.rope_theta_local is set, and for LongRoPE's long factors when
                      * cfg.rope_short_max is (model_freq_count, model_layer_freq) */
    /* gemma4: per_layer_projection_norm [ple_dim]; a vector of ones (the value norm's weight), the layers'
     * scalars (host memory). embed_tokens_per_layer is cut into the layers' W_PLE_EMBED. */
    pt_tensor ple_norm, ones;
    float *layer_scalar;
    size_t weight_bytes;
    bool borrowed;   /* the weights point into a shared image (model_share.h): model_free leaves them */
} pt_model;

typedef struct {
    bool load_in_4bit; /* 8/16/32-bit projection weights become NF4 (double quantized, blocks of 64) */
    double *quantize_s; /* may be NULL: seconds spent converting weights to NF4 are added here */
} pt_load_options;

/* The family's feature switches (family.c): from c->arch (arch.h's table) and the dimensions
 * already in c, the values the family's reference uses when the file does not say (gemma2: scale
 * sqrt(dim), soft-caps 50 and 30, window 4096 on even layers, attention scale as llama.cpp
 * derives it); a loader then overrides what its file gives. */
void model_family_defaults(pt_model_config *c);
/* Whether layer l of a model of config c is a mixture of experts (else its MLP is dense). */
bool model_layer_moe(const pt_model_config *c, int layer);
/* Parameters of the model's weights as stored (unquantized counts): *total all of them, *active those a
 * token runs through (k of the n_experts experts of each sparse layer); either may be NULL. */
void model_param_counts(const pt_model_config *c, int64_t *total, int64_t *active);
/* The values of the q or k norm (slot W_Q_NORM, W_K_NORM): head_dim, or heads x head_dim (olmo2). */
int64_t model_qk_norm_width(const pt_model_config *c, int slot);
/* The values of each head that rotate: rope_dim, or head_dim. */
int model_rope_dim(const pt_model_config *c);
/* What cos and sin are multiplied by: rope_mscale, or 1. */
float model_rope_mscale(const pt_model_config *c);
/* What layer l's cos and sin are multiplied by: 1 on the local layers of a family whose local layers rotate by
 * their own base unscaled (rope_theta_local: Gemma 3, OLMo 3), else model_rope_mscale. */
float model_layer_rope_mscale(const pt_model_config *c, int layer);
/* Whether projection slot is a row range of a weight the files store fused (phi3: W_Q, W_K, W_V of qkv_proj,
 * W_GATE, W_UP of gate_up_proj): *lead the slot whose rows come first (W_Q, W_GATE), *row0 the slot's first
 * row in the fused weight and *rows_all its rows. False (and nothing set) for a slot stored alone. */
bool model_fused_part(const pt_model_config *c, int slot, int *lead, int64_t *row0, int64_t *rows_all);
/* The [out, in] shape of the LoRA pair of projection slot: the projection's, or the fused weight's (phi3's
 * adapters on qkv_proj and gate_up_proj are one pair each, on W_Q and W_GATE); false for a slot that has no
 * pair of its own (W_K, W_V, W_UP of a fused family, norms, biases). */
bool model_adapter_shape(const pt_model_config *c, int slot, int64_t *out, int64_t *in);
/* The experts a LoRA pair of slot covers: n_experts for W_EXP_GATE_UP and W_EXP_DOWN (PEFT's target_parameters:
 * A [E·r, in], B [E·out, r] in ptrain's memory, expert e's rows e·r and e·out on; model_adapter_shape gives one
 * expert's out and in), else 1. */
int model_adapter_experts(const pt_model_config *c, int slot);
/* Whether slot is one of the experts' (W_EXP_GATE_UP, W_EXP_DOWN). */
bool model_slot_experts(int slot);
/* Whether slot's pairs live on the sparse layers only (the experts' and the router's, W_ROUTER). */
bool model_slot_sparse(int slot);
/* model_adapter_shape for layer l: false also for a slot the layer does not have (qwen35: the DeltaNet's
 * projections on its full-attention layers, q/k/v/o on its DeltaNet layers; the experts' and the router's on a
 * dense layer). */
bool model_layer_adapter_shape(const pt_model_config *c, int layer, int slot, int64_t *out, int64_t *in);
/* model_fused_part, and qwen35's q_proj: PEFT adapts it as one module over its query and gate rows, which the loader
 * splits into W_Q and W_Q_GATE; its pair is on W_Q, B's rows the queries (row 0) then the gates (row n_heads x
 * head_dim) in ptrain's order. */
bool model_adapter_part(const pt_model_config *c, int slot, int *lead, int64_t *row0, int64_t *rows_all);
/* Whether layer l is a Gated DeltaNet layer (qwen35's linear_attention). */
bool model_layer_linear(const pt_model_config *c, int layer);
/* Whether layer l of a model of config c has a weight in slot (its family has the slot, and on a hybrid
 * model the slot belongs to the layer's kind). */
bool model_slot_in_layer(const pt_model_config *c, int layer, int slot);
/* The DeltaNet's widths: q and k (lin_k_heads x lin_k_dim each), v and z (lin_v_heads x lin_v_dim), the conv
 * channels (q, k and v: 2 key + value). */
int64_t model_lin_key(const pt_model_config *c);
int64_t model_lin_value(const pt_model_config *c);
int64_t model_lin_conv_dim(const pt_model_config *c);
/* PT_ERR_USER naming what: a qwen35 model's GGUF files (a GGUF base, merged GGUF, llama.cpp's adapter.gguf) are not built
 * yet. */
pt_status model_refuse_gated_delta(const pt_model_config *c, const char *what);
/* Whether layer l rotates q and k (false on smollm3's NoPE layers). */
bool model_layer_rope(const pt_model_config *c, int layer);
/* The sliding window of layer l (0: global attention). */
int model_layer_window(const pt_model_config *c, int layer);
/* How many rotary frequencies a model of config c keeps in inv_freq (head_dim/2, twice that with local
 * layers of their own base, and head_dim/2 more for LongRoPE's long factors), and those layer l rotates by
 * in a pass over rows positions pos (LongRoPE: the long set when one reaches rope_short_max, as
 * transformers' longrope_frequency_update picks per pass). */
int model_freq_count(const pt_model_config *c);
const float *model_layer_freq(const pt_model *m, int layer, const int32_t *pos, int64_t rows);
/* Fill m->inv_freq (model_freq_count values) from theta and the global layers' scaling s (NULL:
 * none); the local layers' frequencies come from c.rope_theta_local, unscaled. */
pt_status model_rope_freqs(pt_model *m, double theta, const pt_rope_scaling *s);
/* Layer l's head size and key/value heads (gemma4's global layers have their own), and the widest of each
 * over the layers: q [rows, n_heads * head], k and v [rows, kv_heads * head]. */
int model_layer_head_dim(const pt_model_config *c, int layer);
int model_layer_kv_heads(const pt_model_config *c, int layer);
int64_t model_max_q_width(const pt_model_config *c);
int64_t model_max_kv_width(const pt_model_config *c);
/* The layer whose keys and values layer l attends to: l itself, or with KV sharing the last layer of its kind
 * before the shared ones (gemma4). */
int model_kv_source(const pt_model_config *c, int layer);
/* Whether layer l has a value projection of its own (not gemma4's global layers with k_eq_v, not shared). */
bool model_layer_has_v(const pt_model_config *c, int layer);
/* model_proj_shape of layer l (its own head size, key/value heads); false also for a projection the layer
 * does not have (shared or k_eq_v layers' k and v). The per-layer input's slots too. */
bool model_layer_proj_shape(const pt_model_config *c, int layer, int slot, int64_t *out, int64_t *in);
/* Layer l's attention settings (heads, scale, soft-cap, window); the caller fills in batch,
 * n_q, n_kv, q_pos0 and segments. */
pt_attention model_layer_attention(const pt_model_config *c, int layer);
/* The [out, in] shape of projection slot (W_Q ... W_DOWN) in a model of config c, as the loaders
 * expect it; false (and nothing set) for a slot that is no projection. */
bool model_proj_shape(const pt_model_config *c, int slot, int64_t *out, int64_t *in);

/* Build the model from an open GGUF file onto be (weights are copied; the file may be closed
 * afterwards). Weights already 4-bit stay in their block format. Architectures llama, qwen2 and
 * gemma2; others are named in the error. opts may be NULL (load_in_4bit on). */
pt_status model_from_gguf(const gguf_file *f, pt_backend *be, const pt_load_options *opts, pt_model *m);
void model_free(pt_model *m);
/* Bytes of the routers and experts of the sparse layers (counted in weight_bytes). */
size_t model_expert_bytes(const pt_model *m);
/* llama.cpp's name of layer l's weight in slot (blk.N.attn_q.weight), or NULL when the family has
 * no such weight; *permute (may be NULL) gets the head count whose q/k rows llama.cpp interleaves
 * for its rotary embedding (llama's q and k), else 0. */
const char *model_gguf_tensor_name(const pt_model_config *c, int l, int slot, char *buf, size_t len, int *permute);
/* Hyperparameters only (no weights), e.g. for `inspect` and memory estimates. */
pt_status model_config_from_gguf(const gguf_file *f, pt_model_config *cfg);

#endif
