/* schedule.c — learning-rate factors exactly as transformers' optimization.py computes them. */
#include "ptrain/schedule.h"

#include <math.h>

lr_schedule schedule_make(pt_lr_scheduler type, double peak_lr, int64_t total_steps, int64_t warmup_steps,
                          double warmup_ratio)
{
    lr_schedule s = {type, peak_lr, warmup_steps, total_steps};
    if (warmup_ratio >= 0) s.warmup_steps = (int64_t)ceil((double)total_steps * warmup_ratio);
    return s;
}

double schedule_lr(const lr_schedule *s, int64_t step)
{
    double w = (double)s->warmup_steps, t = (double)s->total_steps, c = (double)step, f;
    if (s->type == SCHED_CONSTANT) return s->peak_lr;
    if (c < w) return s->peak_lr * c / fmax(1.0, w);
    switch (s->type) {
    case SCHED_LINEAR: f = fmax(0.0, (t - c) / fmax(1.0, t - w)); break;
    case SCHED_COSINE: {
        double progress = (c - w) / fmax(1.0, t - w);
        f = fmax(0.0, 0.5 * (1.0 + cos(M_PI * 0.5 * 2.0 * progress)));
        break;
    }
    default: f = 1.0; break;
    }
    return s->peak_lr * f;
}

int64_t schedule_total_steps(int64_t max_steps, double epochs, int64_t batches_per_epoch, int64_t accum)
{
    if (max_steps > 0) return max_steps;
    int64_t per_epoch = batches_per_epoch / (accum > 0 ? accum : 1);
    if (per_epoch < 1) per_epoch = 1;
    return (int64_t)ceil(epochs * (double)per_epoch);
}
