/* model.h — a decoder-only transformer (the Llama family) held on a backend: hyperparameters
 * read from the model file, frozen base weights kept in their stored (4/8/16-bit) block format,
 * and a forward pass over token ids with a key/value cache for generation. */
#ifndef PTRAIN_MODEL_H
#define PTRAIN_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/backend.h"
#include "ptrain/gguf.h"

typedef struct {
    char arch[32];
    int n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab, ctx_len;
    float norm_eps, rope_theta;
    bool tied_embeddings;
} pt_model_config;

/* The weights of one transformer block, indexed by role. */
enum { W_ATTN_NORM, W_Q, W_K, W_V, W_O, W_FFN_NORM, W_GATE, W_UP, W_DOWN, W_COUNT };

typedef struct {
    pt_tensor w[W_COUNT];
} pt_layer_weights;

struct pt_lora;

typedef struct {
    pt_model_config cfg;
    pt_backend *be;
    const struct pt_lora *adapter; /* LoRA applied by model_forward when set (lora.h), else NULL */
    pt_tensor tok_embd, out_norm, output; /* output shares tok_embd's memory when tied */
    pt_layer_weights *layers;
    float *inv_freq; /* head_dim/2 rotary frequencies, scaling applied */
    size_t weight_bytes;
} pt_model;

typedef struct {
    int max_seq, n_past;
    pt_tensor *k, *v; /* per layer [max_seq, n_kv_heads*head_dim] */
} pt_kv_cache;

typedef struct {
    bool load_in_4bit; /* 8/16/32-bit projection weights become NF4 (double quantized, blocks of 64) */
} pt_load_options;

/* Build the model from an open GGUF file onto be (weights are copied; the file may be closed
 * afterwards). Weights already 4-bit stay in their block format. Only the llama architecture is
 * supported here; others are named in the error. opts may be NULL (load_in_4bit on). */
pt_status model_from_gguf(const gguf_file *f, pt_backend *be, const pt_load_options *opts, pt_model *m);
void model_free(pt_model *m);
/* Hyperparameters only (no weights), e.g. for `inspect` and memory estimates. */
pt_status model_config_from_gguf(const gguf_file *f, pt_model_config *cfg);

pt_status kv_cache_init(const pt_model *m, int max_seq, pt_kv_cache *kv);
void kv_cache_free(const pt_model *m, pt_kv_cache *kv);

/* Run n tokens at positions kv->n_past .. n_past+n-1, append their keys/values to the cache and
 * write logits (host memory): [n, vocab], or [1, vocab] for the last token when last_only. */
pt_status model_forward(pt_model *m, pt_kv_cache *kv, const int32_t *ids, int n, float *logits,
                        bool last_only);

#endif
