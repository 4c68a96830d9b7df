/* preference.c — DPO's sigmoid loss, its gradient with respect to each sequence's summed token loss
 * and TRL's metrics, from per-sequence log-probabilities (preference.h). In double: the per-sequence
 * sums are doubles already, and -log sigmoid is taken as softplus without overflow. */
#include "ptrain/preference.h"

#include <math.h>

const char *const preference_metric_names[PREF_COUNT] = {
    "loss",           "rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
    "logps/chosen",   "logps/rejected", "pairs"};

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
        sums[PREF_REWARDS_CHOSEN] += reward_c;
        sums[PREF_REWARDS_REJECTED] += reward_r;
        sums[PREF_REWARDS_ACCURACIES] += reward_c > reward_r;
        sums[PREF_REWARDS_MARGINS] += z;
        sums[PREF_LOGPS_CHOSEN] += logp_c;
        sums[PREF_LOGPS_REJECTED] += logp_r;
        sums[PREF_PAIRS] += 1;
    }
}
