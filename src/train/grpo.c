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

void grpo_token_scales(const double *nll, const double *ref_nll, const int32_t *seq, int64_t n_tok,
                       const double *adv, double beta, double inv_n, float *scale, double *sums)
{
    for (int64_t t = 0; t < n_tok; t++) {
        double a = adv[seq[t]], lp = -nll[t], loss = -a, grad = -a;
        if (beta != 0 && ref_nll) {
            double d = -ref_nll[t] - lp; /* ref - lp */
            double kl = exp(d) - d - 1;
            loss += beta * kl;
            grad += beta * (lp - -ref_nll[t]); /* d (kl ratio)/d lp at ratio 1 */
            sums[GRPO_KL] += kl;
        }
        sums[GRPO_LOSS] += loss * inv_n;
        scale[t] = (float)(-grad * inv_n); /* d loss / d nll = -d loss / d lp */
    }
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

int grpo_log_values(const double *sums, int n_funcs, const char *const *func_names, bool with_kl, char *name_buf,
                    const char **names, double *values)
{
    int k = 0;
    double n = sums[GRPO_COMPLETIONS], steps = sums[GRPO_STEPS] > 0 ? sums[GRPO_STEPS] : 1;
    if (n <= 0) return 0;
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
    if (with_kl) names[k] = "kl", values[k++] = sums[GRPO_LEN] > 0 ? sums[GRPO_KL] / sums[GRPO_LEN] : 0;
    return k;
}
