/* score_head.h — the reward model's score head: transformers' `score` of a sequence-classification
 * model with one label, a [1, dim] linear without bias on the final-normed hidden state of each
 * sequence's last non-pad token (step.h's score head), trained in full beside the LoRA matrices
 * as PEFT's modules_to_save trains it: fp32 weight, gradient and AdamW moments on the model's
 * backend, the weight and the micro-batches' gradient also on the host, where the step reads and
 * adds them. */
#ifndef PTRAIN_SCORE_HEAD_H
#define PTRAIN_SCORE_HEAD_H

#include <stdint.h>

#include "ptrain/backend.h"
#include "ptrain/optimizer.h"

typedef struct score_head {
    int64_t dim;
    pt_tensor w, grad, m, v; /* f32 [1, dim] on the backend */
    float *host_w;           /* the weight, as the step reads it */
    float *host_grad;        /* d L / d w, added to by each micro-batch of a step */
    pt_backend *be;
} score_head;

/* A head of dim values drawn from normal(0, std) (transformers' init with std its
 * initializer_range) by a Box-Muller transform of a splitmix64 stream of seed; zero moments. */
pt_status score_head_create(score_head *s, pt_backend *be, int64_t dim, double std, uint64_t seed);
void score_head_free(score_head *s);
/* The weight (and, when m and v are not NULL, the moments; else zero) set from dim values each. */
pt_status score_head_set(score_head *s, const float *w, const float *m, const float *v);
/* The weight and moments into dim values each (m and v may be NULL). */
pt_status score_head_get(const score_head *s, float *w, float *m, float *v);
void score_head_zero_grad(score_head *s);
/* host_grad onto the backend (before the ranks' sum and the optimizer step). */
pt_status score_head_grad_upload(score_head *s);
/* Adds the sum of the gradient's squares (on the backend) to *total. */
pt_status score_head_grad_sum_squares(const score_head *s, double *total);
/* As optimizer_step for the head (the same clipping by grad_norm, the norm over the LoRA
 * gradients and the head's together), then the new weight to host_w. */
pt_status score_head_step(score_head *s, const adamw_options *o, double grad_norm, double lr, int64_t step);

#endif
