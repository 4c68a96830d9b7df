/* grpo.c — GRPO's advantages, per-token gradient scales and metrics (grpo.h), as TRL 1.16's
 * GRPOTrainer computes them with its defaults. No model here: the caller's loss head gives the
 * token log-probs and takes the scales. */
#include "ptrain/grpo.h"

#include <math.h>
#include <stdio.h>

/* TRL's nanmean and nanstd (Bessel's correction; NaN with fewer than two values) over v[0..n). */
static void nan_mean_std(const double *v, int n, int stride, double *mean, double *std)
{
    double s = 0;
    int c = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i * stride])) s += v[i * stride], c++;
    *mean = c ? s / c : NAN;
    double q = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i * stride])) q += (v[i * stride] - *mean) * (v[i * stride] - *mean);
    *std = c > 1 ? sqrt(q / c * ((double)c / (c - 1))) : NAN;
}

void grpo_advantages(const double *per_func, int n_funcs, int n, int g, double *reward, double *adv, double *sums)
{
    for (int i = 0; i < n; i++) {
        double r = 0;
        bool any = false;
        for (int f = 0; f < n_funcs; f++)
            if (!isnan(per_func[f * n + i])) r += per_func[f * n + i], any = true;
        reward[i] = any ? r : NAN;
    }
    for (int g0 = 0; g0 + g <= n; g0 += g) {
        double mean, std;
        nan_mean_std(reward + g0, g, 1, &mean, &std);
        if (g == 1) std = 0.0; /* a group of one (num_generations_eval 1): TRL takes its std as 0 */
        bool zero = fabs(std) <= 1e-8; /* torch.isclose(std, 0) */
        for (int k = g0; k < g0 + g; k++) {
            double a = (reward[k] - mean) / (std + 1e-4);
            adv[k] = isnan(a) ? 0.0 : a;
            sums[GRPO_ZERO_STD] += zero;
        }
    }
    sums[GRPO_COMPLETIONS] += n;
    for (int i = 0; i < n; i++)
        if (!isnan(reward[i])) sums[GRPO_REWARD] += reward[i], sums[GRPO_REWARD_SQ] += reward[i] * reward[i], sums[GRPO_SCORED]++;
    for (int f = 0; f < n_funcs && f < GRPO_MAX_FUNCS; f++)
        for (int i = 0; i < n; i++) {
            double v = per_func[f * n + i];
            if (isnan(v)) continue;
            sums[GRPO_FUNC0 + 3 * f] += v, sums[GRPO_FUNC0 + 3 * f + 1] += v * v, sums[GRPO_FUNC0 + 3 * f + 2]++;
        }
}

/* d(-min(c A, clip(c) A)) / d lp, c = e^(lp - old): torch's min splits a tie's gradient in two, and
 * the clip passes it only inside [lo, hi]. */
static double clipped_grad(double c, double a, double lo, double hi)
{
    double cl = fmin(fmax(c, lo), hi), l1 = c * a, l2 = cl * a;
    double g2 = c >= lo && c <= hi ? a * c : 0.0;
    double g = l1 < l2 ? a * c : l1 > l2 ? g2 : (a * c + g2) / 2;
    return -g;
}

/* A completion's shares of low- and high-clipped tokens into the pass's min and max. */
static void clip_shares(int64_t n, int64_t low, int64_t high, double *low_min, double *high_max)
{
    if (n <= 0) return;
    *low_min = fmin(*low_min, (double)low / (double)n);
    *high_max = fmax(*high_max, (double)high / (double)n);
}

void grpo_token_scales(const grpo_tokens *in, float *scale, double *sums)
{
    double lo = 1 - in->eps_low, hi = 1 + in->eps_high, low_min = INFINITY, high_max = -INFINITY;
    int64_t run = 0, run_low = 0, run_high = 0;
    for (int64_t t = 0; t < in->n_tok; t++) {
        if (t > 0 && in->seq[t] != in->seq[t - 1])
            clip_shares(run, run_low, run_high, &low_min, &high_max), run = run_low = run_high = 0;
        double a = in->adv[in->seq[t]], lp = -in->nll[t];
        double c = in->old_nll ? exp(lp + in->old_nll[t]) : 1.0, cl = fmin(fmax(c, lo), hi);
        double loss = -fmin(c * a, cl * a), grad = clipped_grad(c, a, lo, hi);
        if (in->beta != 0 && in->ref_nll) {
            double d = -in->ref_nll[t] - lp; /* ref - lp */
            double kl = exp(d) - d - 1;
            loss += in->beta * kl * c;
            /* d (c kl) / d lp = c (kl + 1 - e^d); at c = 1 exactly lp - ref */
            grad += in->beta * (in->old_nll ? c * (kl + 1 - exp(d)) : lp + in->ref_nll[t]);
            sums[GRPO_KL] += kl * c;
        }
        bool low = c < lo && a < 0, high = c > hi && a > 0;
        run++, run_low += low, run_high += high;
        sums[GRPO_CLIP_LOW] += low, sums[GRPO_CLIP_HIGH] += high;
        if (in->entropy) sums[GRPO_ENTROPY] += in->entropy[t];
        sums[GRPO_LOSS] += loss * in->inv_n;
        scale[t] = (float)(-grad * in->inv_n); /* d loss / d nll = -d loss / d lp */
    }
    clip_shares(run, run_low, run_high, &low_min, &high_max);
    sums[GRPO_LOSS_TOK] += (double)in->n_tok;
    sums[GRPO_PASSES] += 1;
    if (in->n_tok > 0) sums[GRPO_CLIP_LOW_MIN] += low_min, sums[GRPO_CLIP_HIGH_MAX] += high_max;
}

void grpo_lengths(const int32_t *len, const bool *ended, int n, double *sums)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < n; i++) {
        sums[GRPO_LEN] += len[i];
        lo = fmin(lo, len[i]), hi = fmax(hi, len[i]);
        if (ended[i]) sums[GRPO_TERM_LEN] += len[i];
        else sums[GRPO_CLIPPED]++;
    }
    if (n) sums[GRPO_LEN_MIN] += lo, sums[GRPO_LEN_MAX] += hi;
}

/* sqrt of the unbiased variance from a sum, a sum of squares and a count */
static double std_of(double s, double q, double c)
{
    if (c < 2) return NAN;
    double var = (q - s * s / c) / (c - 1);
    return sqrt(var > 0 ? var : 0);
}

/* The metrics TRL logs from its loss (none before a loss pass). */
static int grpo_loss_values(const double *sums, bool with_kl, const char **names, double *values)
{
    int k = 0;
    double tok = sums[GRPO_LOSS_TOK], passes = sums[GRPO_PASSES];
    if (tok <= 0) return 0;
    if (with_kl) names[k] = "kl", values[k++] = sums[GRPO_KL] / tok;
    names[k] = "entropy", values[k++] = sums[GRPO_ENTROPY] / tok;
    names[k] = "clip_ratio/low_mean", values[k++] = sums[GRPO_CLIP_LOW] / tok;
    names[k] = "clip_ratio/low_min", values[k++] = sums[GRPO_CLIP_LOW_MIN] / passes;
    names[k] = "clip_ratio/high_mean", values[k++] = sums[GRPO_CLIP_HIGH] / tok;
    names[k] = "clip_ratio/high_max", values[k++] = sums[GRPO_CLIP_HIGH_MAX] / passes;
    names[k] = "clip_ratio/region_mean", values[k++] = (sums[GRPO_CLIP_LOW] + sums[GRPO_CLIP_HIGH]) / tok;
    return k;
}

int grpo_log_values(const double *sums, int n_funcs, const char *const *func_names, bool with_kl, char *name_buf,
                    const char **names, double *values)
{
    int k = 0;
    double n = sums[GRPO_COMPLETIONS], steps = sums[GRPO_STEPS] > 0 ? sums[GRPO_STEPS] : 1;
    if (n <= 0) return grpo_loss_values(sums, with_kl, names, values); /* a reused generation batch */
    for (int f = 0; f < n_funcs && f < GRPO_MAX_FUNCS; f++) {
        const double *s = sums + GRPO_FUNC0 + 3 * f;
        char *mean = name_buf + (size_t)f * 192, *sd = mean + 96;
        snprintf(mean, 96, "rewards/%s/mean", func_names[f]);
        snprintf(sd, 96, "rewards/%s/std", func_names[f]);
        names[k] = mean, values[k++] = s[2] > 0 ? s[0] / s[2] : NAN;
        names[k] = sd, values[k++] = std_of(s[0], s[1], s[2]);
    }
    names[k] = "reward", values[k++] = sums[GRPO_SCORED] > 0 ? sums[GRPO_REWARD] / sums[GRPO_SCORED] : NAN;
    names[k] = "reward_std", values[k++] = std_of(sums[GRPO_REWARD], sums[GRPO_REWARD_SQ], sums[GRPO_SCORED]);
    names[k] = "frac_reward_zero_std", values[k++] = sums[GRPO_ZERO_STD] / n;
    names[k] = "completions/mean_length", values[k++] = sums[GRPO_LEN] / n;
    names[k] = "completions/min_length", values[k++] = sums[GRPO_LEN_MIN] / steps;
    names[k] = "completions/max_length", values[k++] = sums[GRPO_LEN_MAX] / steps;
    names[k] = "completions/clipped_ratio", values[k++] = sums[GRPO_CLIPPED] / n;
    double ended = n - sums[GRPO_CLIPPED];
    names[k] = "completions/mean_terminated_length", values[k++] = ended > 0 ? sums[GRPO_TERM_LEN] / ended : 0;
    return k + grpo_loss_values(sums, with_kl, names + k, values + k);
}
