/* grpo.h — GRPO's arithmetic as TRL 1.16's GRPOTrainer computes it with GRPOConfig's defaults
 * (loss_type "dapo", scale_rewards "group", one iteration, use_bias_correction_kl) and its epsilon and
 * epsilon_high (config keys, 0.2 by default):
 *
 * A generation batch holds groups of G completions of one prompt each (completion k of group g at
 * g G + k). Each completion's reward is the sum of its reward functions' values (a function may
 * give NaN, TRL's None: left out of the sum; a completion every function left out is
 * unscorable: NaN, out of its group's mean and std, advantage 0). The advantage is
 * (reward - the group's mean) / (the group's std + 1e-4), std with Bessel's correction.
 *
 * Per completion token t with the policy's log-prob lp, the reference's ref (the base with the
 * adapter off), the log-prob old when the completions were sampled and the completion's advantage
 * A, with the ratio c = e^(lp - old): the token's loss is -min(c A, clip(c, 1 - eps, 1 + eps_high) A) +
 * beta c kl with kl = e^(ref - lp) - (ref - lp) - 1 (use_bias_correction_kl), and the loss is the
 * sum over every completion token of the optimizer step (every rank, every micro-batch) divided by
 * their number (dapo's num_items_in_batch). With one iteration (num_iterations 1) old is lp itself:
 * c is 1, the clip never acts, and d loss / d lp = (-A + beta (lp - ref)) / N; with more, each
 * generation batch is trained on num_iterations times and old is the policy's before the first.
 * The loss head scales each token's -log p gradient by -d loss / d lp. */
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
    GRPO_KL,              /* sum over the loss passes' tokens of kl (times the ratio) */
    GRPO_LOSS_TOK,        /* tokens through the loss (each pass: num_iterations counts them again) */
    GRPO_PASSES,          /* loss passes (micro-batches trained on; over ranks, summed) */
    GRPO_ENTROPY,         /* sum over the loss passes' tokens of the policy's entropy there */
    GRPO_CLIP_LOW,        /* tokens with ratio < 1 - epsilon and A < 0 */
    GRPO_CLIP_HIGH,       /* tokens with ratio > 1 + epsilon_high and A > 0 */
    GRPO_CLIP_LOW_MIN,    /* each pass's smallest per-completion share of low-clipped tokens, summed */
    GRPO_CLIP_HIGH_MAX,   /* each pass's largest per-completion share of high-clipped tokens, summed */
    GRPO_FUNC0,           /* per reward function f: sum, sum of squares, count at GRPO_FUNC0 + 3 f */
    GRPO_MAX_FUNCS = 8,
    GRPO_COUNT = GRPO_FUNC0 + 3 * GRPO_MAX_FUNCS
};

/* The rewards of n completions (groups of g) from n_funcs functions' values per_func[f * n + i]
 * (NaN: no value): each completion's reward (NaN: unscorable), its advantage, and the batch's
 * sums added to sums (GRPO_COMPLETIONS, GRPO_REWARD*, GRPO_SCORED, GRPO_ZERO_STD, the functions'). */
void grpo_advantages(const double *per_func, int n_funcs, int n, int g, double *reward, double *adv, double *sums);

/* One micro-batch's completion tokens as the loss sees them: nll[t] = -lp, ref_nll[t] = -ref (NULL
 * with beta 0), old_nll[t] = -old, the log-prob when the completions were made (NULL: on-policy,
 * old = lp, the ratio 1), entropy[t] the policy's entropy at the token (NULL: none to log); seq[t]
 * the completion of token t (an index into adv; a completion's tokens consecutive); inv_n = 1 / the
 * step's completion tokens (all ranks); epsilon's two sides (TRL's epsilon, epsilon_high). */
typedef struct {
    const double *nll, *ref_nll, *old_nll, *entropy;
    const int32_t *seq;
    int64_t n_tok;
    const double *adv;
    double beta, eps_low, eps_high, inv_n;
} grpo_tokens;

/* TRL's clipped objective per token with ratio c = e^(lp - old): -min(c A, clip(c, 1 - eps_low,
 * 1 + eps_high) A), plus beta c kl with kl = e^(ref - lp) - (ref - lp) - 1; the loss is their sum
 * times inv_n. scale[t] = d loss / d nll[t]; GRPO_LOSS, GRPO_KL, GRPO_LOSS_TOK, GRPO_PASSES,
 * GRPO_ENTROPY and the GRPO_CLIP_* added to sums. */
void grpo_token_scales(const grpo_tokens *in, float *scale, double *sums);

/* The completions' lengths, and whether each ended with eos, into sums (GRPO_LEN .., GRPO_STEPS
 * counted by the caller). The min and max are this batch's; across ranks the caller sums them, so
 * with several ranks they are the mean of the ranks' (TRL gathers the lengths). */
void grpo_lengths(const int32_t *len, const bool *ended, int n, double *sums);

/* TRL's metric names and values of the window's sums: reward, reward_std, frac_reward_zero_std,
 * rewards/<name>/mean and /std of each function, completions/mean_length, min_length, max_length,
 * clipped_ratio, mean_terminated_length, kl (beta != 0), entropy and clip_ratio/low_mean, low_min,
 * high_mean, high_max, region_mean (after a loss pass). names of the functions: func_names[f];
 * out arrays hold GRPO_COUNT; returns the count. name_buf: room for the rewards/... names
 * (GRPO_MAX_FUNCS * 2 * 96 bytes). */
int grpo_log_values(const double *sums, int n_funcs, const char *const *func_names, bool with_kl, char *name_buf,
                    const char **names, double *values);

#endif
