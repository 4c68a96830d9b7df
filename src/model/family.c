/* family.c — what tells the model families ptrain runs apart (llama, qwen2, gemma2): the feature
 * switches of pt_model_config each one turns on, the values its reference implementation uses
 * when a model file leaves them out, which layers attend through a sliding window, and the
 * attention settings of a layer. The loaders (GGUF, Hugging Face directories) start from these
 * defaults and override what their file says; the forward and training passes only read the
 * switches, so a new family is a new case here plus its tensor names in the loader. */
#include <math.h>
#include <string.h>

#include "ptrain/model.h"

static const char *const family_names[] = {"llama", "qwen2", "gemma2"};

bool model_family_supported(const char *arch, size_t len)
{
    for (size_t i = 0; i < sizeof family_names / sizeof family_names[0]; i++)
        if (strlen(family_names[i]) == len && memcmp(family_names[i], arch, len) == 0) return true;
    return false;
}

const char *model_family_list(void)
{
    return "llama (Llama 2/3, Mistral, SmolLM2, TinyLlama), qwen2 (Qwen2, Qwen2.5), gemma2 (Gemma 2)";
}

/* Gemma 2 as llama.cpp and transformers run it when nothing else is said. The attention scale is
 * query_pre_attn_scalar^-1/2; GGUF files do not store it, and llama.cpp derives it as
 * 1/sqrt(head_dim), except for the 46-layer 27B model, whose scalar is dim / n_heads. */
static void gemma2_defaults(pt_model_config *c)
{
    c->post_norms = true;
    c->act = PT_ACT_GELU_TANH;
    c->embed_scale = sqrtf((float)c->dim); /* HF rounds sqrt(dim) to the activation dtype: fp32 here */
    c->attn_scale = 1.0f / sqrtf((float)(c->n_layers == 46 ? c->dim / c->n_heads : c->head_dim));
    c->attn_softcap = 50.0f;
    c->final_softcap = 30.0f;
    c->sliding_window = 4096;
    c->sliding_pattern = 2; /* layers 0, 2, 4, ... are local (transformers' layer_types) */
}

void model_family_defaults(pt_model_config *c)
{
    c->qkv_bias = c->post_norms = false;
    c->act = PT_ACT_SILU;
    c->embed_scale = 1.0f;
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    c->attn_softcap = c->final_softcap = 0.0f;
    c->sliding_window = c->sliding_pattern = 0;
    if (strcmp(c->arch, "qwen2") == 0) c->qkv_bias = true;
    if (strcmp(c->arch, "gemma2") == 0) gemma2_defaults(c);
}

int model_layer_window(const pt_model_config *c, int layer)
{
    if (c->sliding_window <= 0) return 0;
    int pattern = c->sliding_pattern > 0 ? c->sliding_pattern : 1;
    return layer % pattern == 0 ? c->sliding_window : 0;
}

pt_attention model_layer_attention(const pt_model_config *c, int layer)
{
    pt_attention a = {.n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
                      .scale = c->attn_scale > 0.0f ? c->attn_scale : 1.0f / sqrtf((float)c->head_dim),
                      .softcap = c->attn_softcap, .window = model_layer_window(c, layer)};
    return a;
}
