/* lora.h — LoRA adapters on the frozen projections of a model: y = W x + s·B(A x), with A [r, in]
 * initialised kaiming-uniform as PEFT does (bound 1/sqrt(in)), B [out, r] zero, and
 * s = alpha/r (alpha/sqrt(r) with rsLoRA). Adapters, their gradients and the AdamW moments are
 * fp32 on the model's backend. */
#ifndef PTRAIN_LORA_H
#define PTRAIN_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/config.h"
#include "ptrain/model.h"

typedef struct {
    pt_tensor a, b;           /* A [r, in], B [out, r] */
    pt_tensor grad_a, grad_b; /* same shapes; views into pt_lora.grads */
    pt_tensor m_a, v_a, m_b, v_b;
} lora_pair;

typedef struct pt_lora {
    int r, n_layers;
    float alpha, scale;
    bool rslora;          /* scale = alpha/sqrt(r) (rsLoRA), else alpha/r */
    bool target[W_COUNT]; /* which projections (W_Q ... W_DOWN) carry adapters */
    lora_pair *pairs;     /* [n_layers * W_COUNT]; unused slots have no memory */
    pt_backend *be;
    /* All gradients live in one buffer, layer after layer, so a run of layers is one contiguous
     * span that can be summed across ranks in one call (train.c's buckets). */
    pt_tensor grads;      /* f32 [total]: grad_a, grad_b of every pair */
    pt_tensor grads_sum;  /* the same layout: the sum over the earlier micro-batches of a step */
    int64_t *layer_off;   /* [n_layers + 1]: where each layer's gradients start in grads */
} pt_lora;

/* The module name PEFT uses for projection w (q_proj ... down_proj), NULL for norms. */
const char *lora_module_name(int w);
/* Create adapters for cfg's lora_target_modules with cfg's r, alpha, use_rslora and random_state. */
pt_status lora_init(pt_lora *l, const pt_model *m, const pt_config *cfg);
/* Create adapters with explicit settings (tests, adapter files); A random from seed, B zero. */
pt_status lora_create(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora, const bool target[W_COUNT],
                      uint64_t seed);
/* The same without gradients and AdamW moments (a sixth of the memory) and with A and B zero (a
 * matrix a file leaves out adds nothing), for adapters that are only applied or copied: what
 * adapter files are read into (generation, export, lora_model_dir). */
pt_status lora_create_frozen(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora,
                             const bool target[W_COUNT]);
void lora_free(pt_lora *l);

lora_pair *lora_at(const pt_lora *l, int layer, int w); /* NULL when w carries no adapter */
/* Every adapted projection in layer order: for (p = lora_next(l, NULL); p; p = lora_next(l, p)) */
lora_pair *lora_next(const pt_lora *l, lora_pair *prev);
pt_status lora_zero_grads(pt_lora *l);
/* The gradients of layers from .. to (inclusive) in buf (l->grads or l->grads_sum): a 1-d view. */
pt_tensor lora_grad_span(const pt_lora *l, const pt_tensor *buf, int from, int to);
int64_t lora_param_count(const pt_lora *l);
/* FNV-1a over every adapter value (A and B, layer order): equal on ranks holding equal adapters. */
pt_status lora_checksum(const pt_lora *l, uint64_t *hash);

#endif
