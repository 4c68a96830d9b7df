/* method.c — the table of training methods (method.h): one row per `method:` choice, in the order
 * of pt_method. What a method needs and logs is read from here, never from its name. */
#include "ptrain/method.h"

#include <stdio.h>

static const method_info methods[METHOD_COUNT] = {
    {METHOD_SFT, "sft", "SFTTrainer", "messages, conversations, instruction/output or text", false, false, false, false, 0,
     "mean token cross-entropy over the labelled tokens", "", true},
    {METHOD_CPT, "cpt", "UnslothTrainer (SFTTrainer, no response masking)",
     "text (or any SFT format, every token labelled)", false, false, false, false, 0,
     "mean token cross-entropy over every token (modules_to_save, e.g. embed_tokens and lm_head, at "
     "embedding_learning_rate)",
     "", true},
    {METHOD_DPO, "dpo", "DPOTrainer", "prompt, chosen, rejected", true, true, false, false, 0.1,
     "-log sigmoid(beta ((chosen - ref chosen) - (rejected - ref rejected))), log-probs summed over the completion",
     "rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected", true},
    {METHOD_ORPO, "orpo", "ORPOTrainer", "prompt, chosen, rejected", false, true, true, false, 0.1,
     "chosen's mean token cross-entropy (prompt and completion) - beta log sigmoid(log odds ratio), log-probs "
     "averaged over the completion",
     "rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected, "
     "log_odds_ratio, log_odds_chosen, nll_loss",
     true},
    {METHOD_CPO, "cpo", "CPOTrainer", "prompt, chosen, rejected", false, true, true, false, 0.1,
     "-log sigmoid(beta (chosen - rejected)) + chosen's mean token cross-entropy",
     "rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins, logps/chosen, logps/rejected, nll_loss",
     true},
    {METHOD_KTO, "kto", "KTOTrainer", "prompt, completion, label (or prompt, chosen, rejected, unrolled)", true, false,
     false, true, 0.1,
     "desirable_weight (1 - sigmoid(beta (logratio - KL))) / undesirable_weight (1 - sigmoid(beta (KL - logratio)))",
     "rewards/chosen, rewards/rejected, rewards/margins, logps/chosen, logps/rejected, kl", true},
    {METHOD_REWARD, "reward", "RewardTrainer", "chosen, rejected (prompt optional)", false, true, false, false, 0,
     "-log sigmoid(score chosen - score rejected), a scalar head on the last non-pad token",
     "min_reward, mean_reward, max_reward, accuracy, margin", true},
    {METHOD_GRPO, "grpo", "GRPOTrainer", "prompt (and the columns reward_funcs read)", true, false, false, false, 0.0,
     "clipped policy objective on group-normalised advantages + beta KL to the reference",
     "reward, reward_std, frac_reward_zero_std, rewards/<func>/mean and /std, completions/mean_length, min_length, "
     "max_length, clipped_ratio, mean_terminated_length, kl",
     true},
};

const method_info *method_info_of(pt_method m)
{
    return (int)m >= 0 && m < METHOD_COUNT ? &methods[m] : &methods[METHOD_SFT];
}

void method_built_names(char *out, size_t len)
{
    size_t used = 0;
    if (len) out[0] = '\0';
    for (int i = 0; i < METHOD_COUNT && used < len; i++)
        if (methods[i].built) used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "", methods[i].name);
}
