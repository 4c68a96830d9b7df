/* schedule.h — the learning-rate schedules of Hugging Face transformers (get_scheduler): linear,
 * cosine, constant and constant_with_warmup, with the same step indexing: the factor for the
 * optimizer step that is about to run, counting from 0. */
#ifndef PTRAIN_SCHEDULE_H
#define PTRAIN_SCHEDULE_H

#include <stdint.h>

typedef enum { SCHED_LINEAR, SCHED_COSINE, SCHED_CONSTANT, SCHED_CONSTANT_WITH_WARMUP } sched_type;

typedef struct {
    sched_type type;
    double peak_lr;
    int64_t warmup_steps, total_steps;
} lr_schedule;

/* type: a config lr_scheduler_type name. warmup_ratio wins over warmup_steps when >= 0
 * (HF: ceil(total * ratio)). */
lr_schedule schedule_make(const char *type, double peak_lr, int64_t total_steps, int64_t warmup_steps,
                          double warmup_ratio);
double schedule_lr(const lr_schedule *s, int64_t step);

/* HF's total optimizer steps: max_steps when > 0, else ceil(epochs * max(1, batches // accum)). */
int64_t schedule_total_steps(int64_t max_steps, double epochs, int64_t batches_per_epoch, int64_t accum);

#endif
