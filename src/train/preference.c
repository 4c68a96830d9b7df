/* preference.c — DPO's sigmoid loss, its gradient with respect to each sequence's summed token loss
 * and TRL's metrics, from per-sequence log-probabilities (preference.h). In double: the per-sequence
 * sums are doubles already, and -log sigmoid is taken as softplus without overflow. */
#include "ptrain/preference.h"

#include <math.h>

const char *const preference_metric_names[PREF_COUNT] = {
    "loss",           "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
    "logps/chosen",   "logps/rejected", "nll_loss",         "pairs"};

int preference_metrics_end(bool nll) { return nll ? PREF_NLL_LOSS + 1 : PREF_NLL_LOSS; }

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
