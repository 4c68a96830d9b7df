/* saved_modules.h — PEFT's modules_to_save for a causal LM: the input embedding (embed_tokens)
 * and the LM head (lm_head) trained in full beside the LoRA matrices, as PEFT's
 * ModulesToSaveWrapper trains them: an fp32 copy of each module's weight (the 4-bit or 16-bit base
 * dequantized), its gradient and AdamW's moments on the model's backend. While they live the
 * model's tok_embd and output are those copies, so every pass (training, evaluation) runs with
 * them. A model with tied embeddings gets two independent copies, as PEFT (without
 * ensure_weight_tying) makes them: the two modules start equal and are trained apart; a module
 * left out keeps the base's weight. */
#ifndef PTRAIN_SAVED_MODULES_H
#define PTRAIN_SAVED_MODULES_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/backend.h"
#include "ptrain/model.h"
#include "ptrain/optimizer.h"

enum { SAVED_EMBED, SAVED_HEAD, SAVED_COUNT };

typedef struct saved_modules {
    bool on[SAVED_COUNT];
    pt_tensor w[SAVED_COUNT], grad[SAVED_COUNT], m[SAVED_COUNT], v[SAVED_COUNT]; /* f32 [vocab, dim] */
    pt_tensor sum[SAVED_COUNT]; /* with gradient accumulation: the step's micro-batches' gradients added up */
    pt_tensor base[SAVED_COUNT]; /* the model's own tok_embd and output, put back by saved_modules_free */
    pt_model *model;
    int64_t rows, cols; /* vocab, dim */
} saved_modules;

/* The copies of the modules asked for (none: *s stays empty), the model switched onto them. */
pt_status saved_modules_create(saved_modules *s, pt_model *m, bool embed, bool head);
/* The model's own weights back, the copies released. */
void saved_modules_free(saved_modules *s);
bool saved_modules_any(const saved_modules *s);
int64_t saved_modules_params(const saved_modules *s); /* trained values */
/* PEFT's name of module i's weight in adapter_model.safetensors (and ptrain's checkpoints). */
const char *saved_modules_name(int i);
const char *saved_modules_module(int i); /* embed_tokens, lm_head */
/* Gradient accumulation: each micro-batch's gradient is computed alone (from zero) and added to a
 * sum, so that one process with accumulation N adds the same gradients in the same order as N
 * ranks' all-reduce (bit for bit, as the adapters' gradsync does); costs one more [vocab, dim]
 * tensor per module. Call once before training when accumulation > 1. */
pt_status saved_modules_accumulate(saved_modules *s);
/* Gradients: to zero (before a step's micro-batches, and before each micro-batch), each
 * micro-batch's added to the sum (none: nothing), the sum back as the step's gradient, summed over
 * the ranks, their squares. */
pt_status saved_modules_zero_grad(saved_modules *s);
pt_status saved_modules_zero_sum(saved_modules *s);
pt_status saved_modules_add_micro(saved_modules *s);
pt_status saved_modules_take_sum(saved_modules *s);
pt_status saved_modules_grad_sum(saved_modules *s);
pt_status saved_modules_grad_sum_squares(const saved_modules *s, double *total);
/* As optimizer_step (the same clipping by grad_norm, the norm over every trained tensor) at lr. */
pt_status saved_modules_step(saved_modules *s, const adamw_options *o, double grad_norm, double lr, int64_t step);
/* Module i's weight and moments (rows x cols values each; m and v may be NULL), and back (m and v
 * NULL: zero moments). */
pt_status saved_modules_get(const saved_modules *s, int i, float *w, float *m, float *v);
pt_status saved_modules_set(saved_modules *s, int i, const float *w, const float *m, const float *v);

#endif
