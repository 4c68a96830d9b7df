/* hf_model.h — Hugging Face model directories: config.json read into a pt_model_config (llama,
 * mistral as llama, qwen2, gemma2), and the weights loaded from the model's safetensors by their
 * transformers names, including pre-quantized bitsandbytes 4-bit checkpoints used as they are. */
#ifndef PTRAIN_HF_MODEL_H
#define PTRAIN_HF_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "ptrain/model.h"
#include "ptrain/rope.h"
#include "ptrain/safetensors.h"

typedef struct {
    pt_model_config cfg;
    pt_rope_scaling rope;   /* rope_scaling / rope_parameters */
    double rope_theta;      /* as written (cfg.rope_theta is its float) */
    char model_type[32];    /* as written: "mistral" stays "mistral" here */
    char architecture[64];  /* architectures[0], or "" */
    char torch_dtype[16];   /* torch_dtype / dtype as written, or "" */
    bool bnb_4bit;          /* quantization_config: a bitsandbytes 4-bit checkpoint */
    bool bnb_double_quant;  /* bnb_4bit_use_double_quant */
    bool mxfp4;             /* quant_method mxfp4 (gpt-oss): the experts as *_blocks / *_scales, kept MXFP4 */
    bool text_tower;        /* a multimodal checkpoint (qwen3_5): the text model's settings are its text_config and
                             * its weights model.language_model.*; the other towers are not loaded */
} hf_config;

/* Parse config.json text (name is used in messages). Missing keys, values of the wrong type or
 * out of range, and unknown architectures (the supported ones are named) fail with PT_ERR_USER. */
pt_status hf_config_parse(const char *name, const char *text, size_t len, hf_config *out);
pt_status hf_config_read(const char *path, hf_config *out);

/* Build the model from its safetensors (weights are copied onto be; s may be closed afterwards).
 * Projections in F32/F16/BF16 become NF4 when opts->load_in_4bit (opts NULL: on) and their input
 * size is a multiple of 64, else stay as stored; bitsandbytes NF4 weights are taken as they are.
 * Embeddings and lm_head stay as stored, norms and biases become f32 (gemma's 1 + w added). */
pt_status model_from_hf(const hf_config *hc, const st_set *s, pt_backend *be, const pt_load_options *opts,
                        pt_model *m);

/* The tensor a text model calls own (model.embed_tokens.weight, model.layers.N..., lm_head.weight) in s: under
 * that name, or for a multimodal checkpoint's text model (c->text_tower) under either of its layouts
 * (hf_names.c); NULL when absent. */
const st_tensor *hf_text_find(const st_set *s, const pt_model_config *c, const char *own, const st_file **f);
/* A checkpoint's tensor name as its text model's own name (buf); false for a multimodal checkpoint's tensors
 * outside its text model (the vision tower, the projector). */
bool hf_text_own_name(const pt_model_config *c, const char *name, char *buf, size_t len);

#endif
