/* schedule.c — learning-rate factors exactly as transformers' optimization.py computes them. */
#include "ptrain/schedule.h"

#include <math.h>

lr_schedule schedule_make(pt_lr_scheduler type, const pt_sched_args *args, double peak_lr, int64_t total_steps,
                          int64_t warmup_steps, double warmup_ratio)
{
    lr_schedule s = {type, peak_lr, warmup_steps, total_steps,
                     {.num_cycles = type == SCHED_COSINE_WITH_RESTARTS ? 1.0 : 0.5, .lr_end = 1e-7, .power = 1.0}};
    if (args) s.args = *args;
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
        f = fmax(0.0, 0.5 * (1.0 + cos(M_PI * s->args.num_cycles * 2.0 * progress)));
        break;
    }
    case SCHED_COSINE_WITH_MIN_LR: {
        double progress = (c - w) / fmax(1.0, t - w);
        f = 0.5 * (1.0 + cos(M_PI * s->args.num_cycles * 2.0 * progress));
        f = fmax(0.0, f * (1.0 - s->args.min_lr_rate) + s->args.min_lr_rate);
        break;
    }
    case SCHED_COSINE_WITH_RESTARTS: {
        double progress = (c - w) / fmax(1.0, t - w);
        f = progress >= 1.0 ? 0.0 : fmax(0.0, 0.5 * (1.0 + cos(M_PI * fmod(s->args.num_cycles * progress, 1.0))));
        break;
    }
    case SCHED_POLYNOMIAL: { /* transformers: lr_end past the last step; lr_end < peak (config_check.c) */
        double end = s->args.lr_end;
        if (c > t) return end;
        double remaining = 1.0 - (c - w) / fmax(1.0, t - w);
        return (s->peak_lr - end) * pow(remaining, s->args.power) + end;
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
