/* lora.h — training LoRA adapters: the adapter being trained (adapter.h: A, B, r, scale, which
 * projections; what inference applies and files store) and beside it what only training needs,
 * per adapted projection: the gradients of A and B and AdamW's two moments, all fp32 on the
 * model's backend. */
#ifndef PTRAIN_LORA_H
#define PTRAIN_LORA_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/adapter.h"
#include "ptrain/config.h"

typedef struct {
    pt_tensor grad_a, grad_b; /* shapes of A and B; views into pt_lora.grads */
    pt_tensor m_a, v_a, m_b, v_b;
    pt_tensor grad_m, m_m, v_m; /* DoRA (ad.dora): the magnitudes' gradient ([out, 1], after grad_b in grads)
                                 * and moments; no memory without DoRA */
} lora_pair;

typedef struct pt_lora {
    pt_adapter ad;        /* the weights being trained */
    lora_pair *pairs;     /* [n_layers * W_COUNT], beside ad.pairs; unused slots have no memory */
    /* All gradients live in one buffer, layer after layer, so a run of layers is one contiguous
     * span that can be summed across ranks in one call (train.c's buckets). */
    pt_tensor grads;      /* f32 [total]: grad_a, grad_b of every pair */
    pt_tensor grads_sum;  /* the same layout: the sum over the earlier micro-batches of a step */
    int64_t *layer_off;   /* [n_layers + 1]: where each layer's gradients start in grads */
} pt_lora;

/* Create adapters for cfg's lora_target_modules with cfg's r, alpha, use_rslora and random_state, on
 * the layers and with the ranks and alphas of its PEFT selectors (layers_to_transform, ...). */
pt_status lora_init(pt_lora *l, pt_model *m, const pt_config *cfg);
/* Create adapters with explicit settings (tests); A random from seed, B zero; zero gradients and
 * moments. */
pt_status lora_create(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora, const bool target[W_COUNT],
                      uint64_t seed);
/* The same with PEFT's selectors (adapter_create_select: select may be NULL; where names its source). */
pt_status lora_create_select(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora,
                             const bool target[W_COUNT], const char *select, const char *where, adapter_init init,
                             uint64_t seed);
void lora_free(pt_lora *l);

/* lora_target_modules naming a mixture of experts' projections as checkpoints store them one by one (gate_proj,
 * w1, mlp.experts.gate_proj, ...), mapped as PEFT 0.21 maps them on transformers 5 (lora_moe_names.c). */
enum { LORA_MOE_ROUTER = 3, LORA_MOE_COUNT = 4 }; /* which: 0-2 the experts' gate, up, down (expert_names), 3 router */
/* *which for name: 0-3, or -1 when name is no expert's or router's module (or the model has no experts); an
 * error naming the fix when name holds one expert's number (experts.3.w1). */
pt_status lora_moe_name(const pt_model *m, const pt_config *cfg, const char *name, int *which);
/* The slots of the names seen (named[which]) into target; *fused when gate and up became gate_up_proj (rank 2r,
 * alpha 2α as PEFT's rank_pattern gives it); an error when one of gate and up is named without the other. */
pt_status lora_moe_targets(const pt_model *m, const pt_config *cfg, const bool named[LORA_MOE_COUNT],
                           bool target[W_COUNT], bool *fused);
/* Make l's fresh adapter a DoRA one (use_dora): magnitudes m = ‖W + s·B·A‖ per row (adapter_dora_init), their
 * gradients in grads (laid out again, zero) and zero moments. */
pt_status lora_dora_enable(pt_lora *l, const pt_model *m);

lora_pair *lora_at(const pt_lora *l, int layer, int w); /* NULL when w carries no adapter */
/* Every adapted projection in layer order: for (p = lora_next(l, NULL); p; p = lora_next(l, p)) */
lora_pair *lora_next(const pt_lora *l, const lora_pair *prev);
/* The adapter's A and B of a training pair. */
adapter_pair *lora_weights(const pt_lora *l, const lora_pair *p);
pt_status lora_zero_grads(pt_lora *l);
/* The gradients of layers from .. to (inclusive) in buf (l->grads or l->grads_sum): a 1-d view. */
pt_tensor lora_grad_span(const pt_lora *l, const pt_tensor *buf, int from, int to);

/* The adapters and AdamW moments as a checkpoint's flat arrays (adapter_layout's order; m and v
 * may be NULL), and back (m and v NULL: zero moments). lora_state.c */
pt_status lora_export(const pt_lora *l, const ckpt_layout *lay, float *params, float *m, float *v);
pt_status lora_import(pt_lora *l, const ckpt_layout *lay, const float *params, const float *m, const float *v);
/* The same with reward modelling's score head (score_head.h; NULL or dim 0: none) and the modules
 * of modules_to_save (saved_modules.h; NULL or none on: none), which are then the layout's last
 * entries, after the adapters: the head, then the embedding, then the LM head. */
struct score_head;
struct saved_modules;
pt_status lora_export_all(const pt_lora *l, const struct score_head *h, const struct saved_modules *sm,
                          const ckpt_layout *lay, float *params, float *m, float *v);
pt_status lora_import_all(pt_lora *l, struct score_head *h, struct saved_modules *sm, const ckpt_layout *lay,
                          const float *params, const float *m, const float *v);

#endif
