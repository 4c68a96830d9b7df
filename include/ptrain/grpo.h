/* grpo.h — GRPO's arithmetic as TRL 1.16's GRPOTrainer computes it with GRPOConfig's defaults
 * (loss_type "dapo", scale_rewards "group", epsilon 0.2, one iteration, use_bias_correction_kl):
 *
 * A generation batch holds groups of G completions of one prompt each (completion k of group g at
 * g G + k). Each completion's reward is the sum of its reward functions' values (a function may
 * give NaN, TRL's None: left out of the sum; a completion every function left out is
 * unscorable: NaN, out of its group's mean and std, advantage 0). The advantage is
 * (reward - the group's mean) / (the group's std + 1e-4), std with Bessel's correction.
 *
 * Per completion token t with the policy's log-prob lp, the reference's ref (the base with the
 * adapter off) and the completion's advantage A, on-policy (the old log-probs are lp itself, so
 * the ratio is 1 in value, clipping is never active, and its gradient is 1): the token's loss is
 * -A + beta kl with kl = e^(ref - lp) - (ref - lp) - 1 (times the ratio: use_bias_correction_kl),
 * and the loss is the sum over every completion token of the optimizer step (every rank, every
 * micro-batch) divided by their number (dapo's num_items_in_batch). d loss / d lp = (-A + beta (lp
 * - ref)) / N per token: the loss head scales each token's -log p gradient by the negation. */
#ifndef PTRAIN_GRPO_H
#define PTRAIN_GRPO_H

#include <stdbool.h>
#include <stdint.h>

/* Sums over a logging window (or a step), added to by each generation batch and summed over the
 * ranks as doubles; grpo_log_values turns them into TRL's metrics. */
enum {
    GRPO_LOSS,            /* the loss's numerator: sum over tokens of the token loss / N of its step */
    GRPO_STEPS,           /* generation batches (optimizer steps) */
    GRPO_COMPLETIONS,     /* completions */
    GRPO_REWARD,          /* sum of the completions' rewards (scorable ones) */
    GRPO_REWARD_SQ,       /* ... of their squares */
    GRPO_SCORED,          /* scorable completions */
    GRPO_ZERO_STD,        /* completions whose group's std is 0 */
    GRPO_LEN,             /* completion tokens */
    GRPO_LEN_MIN,         /* each step's shortest completion, summed */
    GRPO_LEN_MAX,         /* each step's longest, summed */
    GRPO_CLIPPED,         /* completions that reached max_completion_length without eos */
    GRPO_TERM_LEN,        /* tokens of the completions that ended with eos */
    GRPO_KL,              /* sum over tokens of kl */
    GRPO_FUNC0,           /* per reward function f: sum, sum of squares, count at GRPO_FUNC0 + 3 f */
    GRPO_MAX_FUNCS = 8,
    GRPO_COUNT = GRPO_FUNC0 + 3 * GRPO_MAX_FUNCS
};

/* The rewards of n completions (groups of g) from n_funcs functions' values per_func[f * n + i]
 * (NaN: no value): each completion's reward (NaN: unscorable), its advantage, and the batch's
 * sums added to sums (GRPO_COMPLETIONS, GRPO_REWARD*, GRPO_SCORED, GRPO_ZERO_STD, the functions'). */
void grpo_advantages(const double *per_func, int n_funcs, int n, int g, double *reward, double *adv, double *sums);

/* One micro-batch's tokens: nll[t] = -lp and ref_nll[t] = -ref (NULL with beta 0) of its n_tok
 * completion tokens, seq[t] the completion of token t (an index into adv); inv_n = 1 / the step's
 * completion tokens (all ranks). scale[t] = d loss / d nll[t] = (A - beta (lp - ref)) inv_n;
 * GRPO_LOSS and GRPO_KL added to sums. */
void grpo_token_scales(const double *nll, const double *ref_nll, const int32_t *seq, int64_t n_tok,
                       const double *adv, double beta, double inv_n, float *scale, double *sums);

/* The completions' lengths, and whether each ended with eos, into sums (GRPO_LEN .., GRPO_STEPS
 * counted by the caller). The min and max are this batch's; across ranks the caller sums them, so
 * with several ranks they are the mean of the ranks' (TRL gathers the lengths). */
void grpo_lengths(const int32_t *len, const bool *ended, int n, double *sums);

/* TRL's metric names and values of the window's sums: reward, reward_std, frac_reward_zero_std,
 * rewards/<name>/mean and /std of each function, completions/mean_length, min_length, max_length,
 * clipped_ratio, mean_terminated_length, kl (beta != 0). names of the functions: func_names[f];
 * out arrays hold GRPO_COUNT; returns the count. name_buf: room for the rewards/... names
 * (GRPO_MAX_FUNCS * 2 * 96 bytes). */
int grpo_log_values(const double *sums, int n_funcs, const char *const *func_names, bool with_kl, char *name_buf,
                    const char **names, double *values);

#endif
