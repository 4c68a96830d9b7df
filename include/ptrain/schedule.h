/* schedule.h — the learning-rate schedules of Hugging Face transformers (get_scheduler): linear,
 * cosine, constant, constant_with_warmup, cosine_with_restarts, polynomial and cosine_with_min_lr,
 * with their arguments (lr_scheduler_kwargs) and the same step indexing: the factor for the
 * optimizer step that is about to run, counting from 0. */
#ifndef PTRAIN_SCHEDULE_H
#define PTRAIN_SCHEDULE_H

#include <stdint.h>

#include "ptrain/settings.h"

typedef struct {
    pt_lr_scheduler type;
    double peak_lr;
    int64_t warmup_steps, total_steps;
    pt_sched_args args;
} lr_schedule;

/* type: the config's lr_scheduler_type; args: its arguments (NULL: transformers' defaults).
 * warmup_ratio wins over warmup_steps when >= 0 (HF: ceil(total * ratio)). */
lr_schedule schedule_make(pt_lr_scheduler type, const pt_sched_args *args, double peak_lr, int64_t total_steps,
                          int64_t warmup_steps, double warmup_ratio);
double schedule_lr(const lr_schedule *s, int64_t step);

/* HF's total optimizer steps: max_steps when > 0, else ceil(epochs * max(1, batches // accum)). */
int64_t schedule_total_steps(int64_t max_steps, double epochs, int64_t batches_per_epoch, int64_t accum);

#endif
