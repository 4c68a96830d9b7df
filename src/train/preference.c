/* preference.c — DPO's sigmoid loss, its gradient with respect to each sequence's summed token loss
 * and TRL's metrics, from per-sequence log-probabilities (preference.h). In double: the per-sequence
 * sums are doubles already, and -log sigmoid is taken as softplus without overflow. */
#include "ptrain/preference.h"

#include <math.h>

#include "ptrain/settings.h"

#define PREF_IGNORE (-100) /* PT_IGNORE_INDEX: a row without a target */

const char *const preference_metric_names[PREF_COUNT] = {
    "loss",           "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
    "logps/chosen",   "logps/rejected", "nll_loss",         "log_odds_ratio",     "log_odds_chosen", "pairs",
    "kl",             "chosen",         "rejected",         "micro_batches",      "min_reward",      "max_reward"};

int preference_metrics_end(int method)
{
    return method == METHOD_ORPO ? PREF_PAIRS : method == METHOD_CPO ? PREF_NLL_LOSS + 1 : PREF_NLL_LOSS;
}

int preference_log_values(int method, const double *sums, const char **names, double *values)
{
    int n = 0;
    if (method == METHOD_REWARD) { /* TRL's order */
        double p = fmax(sums[PREF_PAIRS], 1), micro = fmax(sums[PREF_MICRO], 1);
        names[n] = "min_reward", values[n++] = sums[PREF_MIN_REWARD] / micro;
        names[n] = "mean_reward", values[n++] = (sums[PREF_REWARDS_CHOSEN] + sums[PREF_REWARDS_REJECTED]) / (2 * p);
        names[n] = "max_reward", values[n++] = sums[PREF_MAX_REWARD] / micro;
        names[n] = "accuracy", values[n++] = sums[PREF_REWARDS_ACCURACIES] / p;
        names[n] = "margin", values[n++] = sums[PREF_REWARDS_MARGINS] / p;
        return n;
    }
    if (method != METHOD_KTO) {
        for (int k = PREF_REWARDS_CHOSEN; k < preference_metrics_end(method); k++, n++)
            names[n] = preference_metric_names[k], values[n] = sums[k] / fmax(sums[PREF_PAIRS], 1);
        return n;
    }
    double nc = sums[PREF_N_CHOSEN], nr = sums[PREF_N_REJECTED];
    if (nc > 0) names[n] = "rewards/chosen", values[n++] = sums[PREF_REWARDS_CHOSEN] / nc;
    if (nr > 0) names[n] = "rewards/rejected", values[n++] = sums[PREF_REWARDS_REJECTED] / nr;
    if (nc > 0 && nr > 0)
        names[n] = "rewards/margins", values[n++] = sums[PREF_REWARDS_CHOSEN] / nc - sums[PREF_REWARDS_REJECTED] / nr;
    if (nc > 0) names[n] = "logps/chosen", values[n++] = sums[PREF_LOGPS_CHOSEN] / nc;
    if (nr > 0) names[n] = "logps/rejected", values[n++] = sums[PREF_LOGPS_REJECTED] / nr;
    names[n] = "kl", values[n++] = sums[PREF_KL] / fmax(sums[PREF_MICRO], 1);
    return n;
}

/* TRL's metrics of one pair from its log-probs and rewards. */
static void pair_metrics(double logp_c, double logp_r, double reward_c, double reward_r, double *sums)
{
    sums[PREF_REWARDS_CHOSEN] += reward_c;
    sums[PREF_REWARDS_REJECTED] += reward_r;
    sums[PREF_REWARDS_ACCURACIES] += reward_c > reward_r;
    sums[PREF_REWARDS_MARGINS] += reward_c - reward_r;
    sums[PREF_LOGPS_CHOSEN] += logp_c;
    sums[PREF_LOGPS_REJECTED] += logp_r;
    sums[PREF_PAIRS] += 1;
}

/* -log sigmoid(z) = log(1 + exp(-z)), and sigmoid(-z), both stable for large |z|. */
static double softplus_neg(double z) { return z > 0 ? log1p(exp(-z)) : -z + log1p(exp(z)); }
static double sigmoid(double z) { return z >= 0 ? 1.0 / (1.0 + exp(-z)) : exp(z) / (1.0 + exp(z)); }

void preference_dpo(const double *nll, const double *ref_nll, int pairs, double beta, double grad_scale, float *scale,
                    double *sums)
{
    for (int i = 0; i < pairs; i++) {
        double logp_c = -nll[2 * i], logp_r = -nll[2 * i + 1];
        double reward_c = beta * (logp_c + ref_nll[2 * i]), reward_r = beta * (logp_r + ref_nll[2 * i + 1]);
        double z = reward_c - reward_r;
        /* d loss / d z = -sigmoid(-z); z moves by -beta with the chosen nll and +beta with the rejected */
        double g = beta * sigmoid(-z) * grad_scale;
        scale[2 * i] = (float)g;
        scale[2 * i + 1] = (float)-g;
        sums[PREF_LOSS] += softplus_neg(z);
        pair_metrics(logp_c, logp_r, reward_c, reward_r, sums);
    }
}

int preference_score_rows(const int32_t *ids, const int32_t *segments, int rows, int32_t pad, int32_t *score_row)
{
    int n = 0;
    for (int r = 0; r < rows; r++) {
        int seq = segments[r] - 1;
        if (seq < 0) continue;
        for (; n <= seq; n++) score_row[n] = r; /* a sequence's first row */
        if (ids[r] != pad) score_row[seq] = r;
    }
    return n;
}

void preference_reward(const double *score, const double *margin, int pairs, double center, double grad_scale,
                       float *scale, double *sums)
{
    double lo = INFINITY, hi = -INFINITY;
    for (int i = 0; i < pairs; i++) {
        double rc = score[2 * i], rr = score[2 * i + 1], z = rc - rr - (margin ? margin[i] : 0.0);
        double sum = rc + rr;
        /* d/d rc of -log sigmoid(z) is -sigmoid(-z), of center (rc + rr)^2 is 2 center (rc + rr) */
        double g = sigmoid(-z), gc = 2.0 * center * sum;
        scale[2 * i] = (float)((-g + gc) * grad_scale);
        scale[2 * i + 1] = (float)((g + gc) * grad_scale);
        sums[PREF_LOSS] += softplus_neg(z) + center * sum * sum;
        sums[PREF_REWARDS_CHOSEN] += rc;
        sums[PREF_REWARDS_REJECTED] += rr;
        sums[PREF_REWARDS_ACCURACIES] += rc > rr;
        sums[PREF_REWARDS_MARGINS] += rc - rr;
        lo = fmin(lo, fmin(rc, rr)), hi = fmax(hi, fmax(rc, rr));
    }
    if (pairs > 0) sums[PREF_MIN_REWARD] += lo, sums[PREF_MAX_REWARD] += hi, sums[PREF_MICRO] += 1;
    sums[PREF_PAIRS] += pairs;
}

void preference_cpo(const double *nll, int pairs, double chosen_tokens, double beta, double grad_scale, float *scale,
                    double *sums)
{
    double chosen_nll = 0;
    for (int i = 0; i < pairs; i++) chosen_nll += nll[2 * i];
    double nll_mean = chosen_tokens > 0 ? chosen_nll / chosen_tokens : 0;
    /* the mean token loss's gradient, once per pair in the sum over pairs grad_scale weighs */
    double per_token = chosen_tokens > 0 ? (double)pairs / chosen_tokens : 0;
    for (int i = 0; i < pairs; i++) {
        double logp_c = -nll[2 * i], logp_r = -nll[2 * i + 1];
        double z = beta * (logp_c - logp_r), g = beta * sigmoid(-z);
        scale[2 * i] = (float)((g + per_token) * grad_scale);
        scale[2 * i + 1] = (float)(-g * grad_scale);
        sums[PREF_LOSS] += softplus_neg(z) + nll_mean;
        sums[PREF_NLL_LOSS] += nll_mean;
        pair_metrics(logp_c, logp_r, beta * logp_c, beta * logp_r, sums);
    }
}

int preference_orpo_rows(const int32_t *ids, const int32_t *targets, const int32_t *segments, int rows,
                         int32_t *orpo_targets, int32_t *row_seq, double *tokens)
{
    int n_seq = 0;
    for (int r = 0; r < rows; r++) n_seq = segments[r] > n_seq ? segments[r] : n_seq;
    int pairs = n_seq / 2;
    for (int s = 0; s < 3 * pairs; s++) tokens[s] = 0;
    for (int r = 0; r < rows; r++) {
        int seq = segments[r] - 1;
        orpo_targets[r] = targets[r];
        row_seq[r] = seq;
        bool next_same = r + 1 < rows && segments[r + 1] == segments[r];
        if (seq >= 0 && seq % 2 == 0 && targets[r] == PREF_IGNORE && next_same) /* a chosen prompt row */
            orpo_targets[r] = ids[r + 1], row_seq[r] = 2 * pairs + seq / 2;
        if (seq >= 0 && orpo_targets[r] != PREF_IGNORE) tokens[row_seq[r]] += 1;
    }
    return 3 * pairs;
}

void preference_kto(const double *nll, const double *ref_nll, const bool *desirable, int n, double kl, double beta,
                    double desirable_weight, double undesirable_weight, double grad_scale, float *scale,
                    double *sums)
{
    for (int s = 0; s < 2 * n; s++) scale[s] = 0;
    for (int k = 0; k < n; k++) {
        int s = 2 * k + (desirable[k] ? 0 : 1);
        double logp = -nll[s], ratio = logp + ref_nll[s], reward = beta * ratio;
        /* desirable: z = beta (r - kl), loss w (1 - sigmoid(z)); undesirable: z = beta (kl - r); dr/dnll = -1 */
        double z = desirable[k] ? beta * (ratio - kl) : beta * (kl - ratio), w = desirable[k] ? desirable_weight
                                                                                              : undesirable_weight;
        double sz = sigmoid(z), dz = sz * (1 - sz);
        scale[s] = (float)(w * beta * dz * (desirable[k] ? 1 : -1) * grad_scale);
        sums[PREF_LOSS] += w * (1 - sz);
        sums[desirable[k] ? PREF_REWARDS_CHOSEN : PREF_REWARDS_REJECTED] += reward;
        sums[desirable[k] ? PREF_LOGPS_CHOSEN : PREF_LOGPS_REJECTED] += logp;
        sums[desirable[k] ? PREF_N_CHOSEN : PREF_N_REJECTED] += 1;
        sums[PREF_PAIRS] += 1;
    }
    sums[PREF_KL] += kl;
    sums[PREF_MICRO] += 1;
}

/* log(1 - e^x) for x < 0, as TRL's log1mexp (branching at -ln 2). */
static double log1mexp(double x) { return x < -0.6931471805599453 ? log1p(-exp(x)) : log(-expm1(x)); }

void preference_orpo(const double *nll, const double *tokens, int pairs, double beta, double grad_scale, float *scale,
                     double *sums)
{
    double full = 0, n_full = 0; /* the chosen sequences' token loss: completion and prompt rows */
    for (int i = 0; i < pairs; i++) {
        full += nll[2 * i] + nll[2 * pairs + i];
        n_full += tokens[2 * i] + tokens[2 * pairs + i];
    }
    double nll_mean = n_full > 0 ? full / n_full : 0, per_token = n_full > 0 ? pairs / n_full : 0;
    for (int i = 0; i < pairs; i++) {
        double lc = tokens[2 * i] > 0 ? tokens[2 * i] : 1, lr = tokens[2 * i + 1] > 0 ? tokens[2 * i + 1] : 1;
        double pc = -nll[2 * i] / lc, pr = -nll[2 * i + 1] / lr;
        double lo = (pc - pr) - (log1mexp(pc) - log1mexp(pr)), ratio = -softplus_neg(lo), g = beta * sigmoid(-lo);
        /* d lo / d pc = 1 / (1 - e^pc), d lo / d pr = -1 / (1 - e^pr); d pc / d nll = -1 / lc */
        scale[2 * i] = (float)((per_token + g / (lc * -expm1(pc))) * grad_scale);
        scale[2 * i + 1] = (float)(-g / (lr * -expm1(pr)) * grad_scale);
        scale[2 * pairs + i] = (float)(per_token * grad_scale);
        sums[PREF_LOSS] += nll_mean - beta * ratio;
        sums[PREF_NLL_LOSS] += nll_mean;
        sums[PREF_LOG_ODDS_RATIO] += ratio;
        sums[PREF_LOG_ODDS_CHOSEN] += lo;
        pair_metrics(pc, pr, beta * pc, beta * pr, sums);
    }
}
