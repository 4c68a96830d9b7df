/* optimizer.h — one optimizer step over all LoRA parameters: the global gradient norm (summed
 * across ranks by the caller's all-reduce), clipping as torch.nn.utils.clip_grad_norm_ does it,
 * and AdamW as torch.optim.AdamW does it (decoupled weight decay, bias correction). */
#ifndef PTRAIN_OPTIMIZER_H
#define PTRAIN_OPTIMIZER_H

#include "ptrain/lora.h"

typedef struct {
    double beta1, beta2, eps, weight_decay, max_grad_norm; /* max_grad_norm 0: no clipping */
} adamw_options;

/* The L2 norm of all LoRA gradients. */
pt_status optimizer_grad_norm(const pt_lora *l, double *norm);
/* Clip to max_grad_norm (given the norm), then one AdamW step at learning rate lr; step counts
 * from 1. */
pt_status optimizer_step(pt_lora *l, const adamw_options *o, double grad_norm, double lr, int64_t step);

#endif
