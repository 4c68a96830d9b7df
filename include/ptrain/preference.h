/* preference.h — the preference losses as TRL computes them, on per-sequence log-probabilities
 * (step.h's row_seq: the loss head sums -log p over each sequence's completion tokens). A
 * micro-batch holds P pairs as 2P sequences: pair i's chosen is sequence 2i, its rejected 2i+1.
 *
 * DPO (TRL's DPOTrainer, loss_type "sigmoid", reverse KL): with the reference log-probs of the
 * same sequences (the base with the adapter off), z = beta ((logp_c - ref_c) - (logp_r - ref_r)),
 * loss = -log sigmoid(z) per pair, the mean over the batch's pairs. Its metrics are TRL's:
 * rewards/chosen = beta (logp_c - ref_c), rewards/rejected, rewards/accuracies (chosen reward >
 * rejected reward), rewards/margins, logps/chosen, logps/rejected, each a mean over pairs.
 *
 * CPO (TRL's experimental CPOTrainer, loss_type "sigmoid", cpo_alpha 1, no reference):
 * z = beta (logp_c - logp_r), loss = -log sigmoid(z) per pair, its mean over the micro-batch's
 * pairs, plus the mean token loss of the micro-batch's chosen completions (nll_loss); rewards are
 * beta logp.
 *
 * ORPO (TRL's experimental ORPOTrainer, beta as lambda, no reference): the chosen sequences' mean
 * token loss over prompt and completion (nll_loss), minus the mean over pairs of
 * beta log sigmoid(log odds), log odds = (lp_c - lp_r) - (log(1 - e^lp_c) - log(1 - e^lp_r)) with
 * lp the log-prob averaged over the completion's tokens; rewards are beta lp. Its micro-batch has
 * 3P sequences (preference_orpo_rows): 2i and 2i+1 pair i's completions as for DPO, 2P+i the
 * prompt rows of pair i's chosen, which only the token mean counts.
 *
 * KTO (TRL's KTOTrainer, loss_type "kto"): n examples, each a completion with a label, in slots
 * (example k: sequence 2k when desirable, 2k+1 when not; batch_collate_unpaired); with the
 * log-ratio r = logp - ref logp and kl the batch's KL estimate (the mean over its mismatched
 * sequences of logp - ref logp, taken over the ranks, at least 0, no gradient), a desirable
 * example's loss is desirable_weight (1 - sigmoid(beta (r - kl))), an undesirable one's
 * undesirable_weight (1 - sigmoid(beta (kl - r))); the loss is their mean. Rewards are beta r; the
 * metrics are means over the desirable (chosen) and the undesirable (rejected) examples, kl a mean
 * over micro-batches.
 *
 * Reward modelling (TRL's RewardTrainer): each sequence's score r is the score head's product with
 * the final-normed hidden state of its last token that is not the pad token (step.h's score head);
 * loss = -log sigmoid(r_c - r_r - margin) per pair (margin 0 without the column), plus
 * center_rewards_coefficient (r_c + r_r)^2 when set (TRL's mean over the micro-batch's rewards of
 * (r_c + r_r)^2 taken per pair). Its metrics are TRL's: accuracy (r_c > r_r), margin (r_c - r_r,
 * without the margin column), mean_reward over both sequences, and min_reward and max_reward, each
 * micro-batch's extreme averaged over the micro-batches (equal to TRL's on one process; with ranks
 * TRL takes the extreme over all ranks' micro-batches, ptrain the mean of each rank's). */
#ifndef PTRAIN_PREFERENCE_H
#define PTRAIN_PREFERENCE_H

#include <stdbool.h>
#include <stdint.h>

/* Sums over pairs (divide by pairs for TRL's means); added to by each micro-batch and summed over
 * the ranks as doubles. */
enum {
    PREF_LOSS,
    PREF_REWARDS_CHOSEN,
    PREF_REWARDS_REJECTED,
    PREF_REWARDS_ACCURACIES,
    PREF_REWARDS_MARGINS,
    PREF_LOGPS_CHOSEN,
    PREF_LOGPS_REJECTED,
    PREF_NLL_LOSS, /* CPO, ORPO: the mean token loss of the chosen (times the pairs) */
    PREF_LOG_ODDS_RATIO, /* ORPO: log sigmoid of the log odds ratio */
    PREF_LOG_ODDS_CHOSEN, /* ORPO: the log odds ratio */
    PREF_PAIRS, /* pairs, or KTO's examples */
    PREF_KL,         /* KTO: the micro-batches' KL estimates, summed */
    PREF_N_CHOSEN,   /* KTO: desirable examples */
    PREF_N_REJECTED, /* KTO: undesirable examples */
    PREF_MICRO,      /* KTO, reward: micro-batches */
    PREF_MIN_REWARD, /* reward: each micro-batch's least score, summed */
    PREF_MAX_REWARD, /* reward: each micro-batch's greatest score, summed */
    PREF_COUNT
};
extern const char *const preference_metric_names[PREF_COUNT]; /* TRL's names; "loss" and "pairs" first/last */
/* The metrics method (a pt_method) logs: preference_metric_names[PREF_REWARDS_CHOSEN .. the end returned). */
int preference_metrics_end(int method);
/* What method logs from the sums of a window (or a step) under TRL's names: names[i] and values[i]
 * for i below the count returned (at most PREF_COUNT). A pair method's metrics are means over the
 * pairs; KTO's over its desirable or undesirable examples (those with none are left out, as TRL
 * leaves them out) and kl a mean over micro-batches. */
int preference_log_values(int method, const double *sums, const char **names, double *values);

/* DPO's sigmoid loss of `pairs` pairs: nll and ref_nll the sequences' summed token losses (-log p) under
 * the policy and the reference; sums[] added to; scale[2 pairs] = d (grad_scale * sum of the pairs'
 * losses) / d nll, what the loss head scales each sequence's token-loss gradient by (grad_scale:
 * 1 / the pairs of the whole optimizer step, for TRL's mean). */
void preference_dpo(const double *nll, const double *ref_nll, int pairs, double beta, double grad_scale, float *scale,
                    double *sums);
/* The reward loss of `pairs` pairs from their scores (score[2i] chosen, score[2i+1] rejected);
 * margin[pairs] TRL's margin column or NULL; center: center_rewards_coefficient (0: none); sums[]
 * added to; scale[2 pairs] = d (grad_scale * sum of the pairs' losses) / d score. */
void preference_reward(const double *score, const double *margin, int pairs, double center, double grad_scale,
                       float *scale, double *sums);
/* The reward model's scored rows of a micro-batch of pairs (segments 2i+1 chosen, 2i+2 rejected,
 * rows without a segment (0) skipped): score_row[seq] = the last row of sequence seq whose id is
 * not pad (pad < 0: none is), or its first row when all are (transformers' rightmost non-pad token,
 * argmax of index * mask). Returns the sequences (the greatest segment). */
int preference_score_rows(const int32_t *ids, const int32_t *segments, int rows, int32_t pad, int32_t *score_row);
/* CPO's loss of `pairs` pairs whose chosen completions have chosen_tokens tokens: as preference_dpo
 * (no reference); the chosen completions' mean token loss counts once per pair in sums[PREF_LOSS]
 * and sums[PREF_NLL_LOSS], so that divided by the pairs it is TRL's per-micro-batch value. */
void preference_cpo(const double *nll, int pairs, double chosen_tokens, double beta, double grad_scale, float *scale,
                    double *sums);

/* ORPO's rows of a micro-batch of pairs (segments 2i+1 chosen, 2i+2 rejected; targets on the
 * completions): orpo_targets = targets, plus on every row of a chosen sequence but its last the next
 * token; row_seq as above; tokens[3P] the targets of each sequence. Returns 3P. */
int preference_orpo_rows(const int32_t *ids, const int32_t *targets, const int32_t *segments, int rows,
                         int32_t *orpo_targets, int32_t *row_seq, double *tokens);
/* ORPO's loss of `pairs` pairs from the 3P sequences' summed token losses and targets (tokens). */
void preference_orpo(const double *nll, const double *tokens, int pairs, double beta, double grad_scale, float *scale,
                     double *sums);

/* KTO's loss of n examples (desirable[k]: the label of example k, whose nll and ref_nll are at
 * slot 2k or 2k+1 as above); kl as above; the weights; scale[2n] as for DPO (0 at empty slots). */
void preference_kto(const double *nll, const double *ref_nll, const bool *desirable, int n, double kl, double beta,
                    double desirable_weight, double undesirable_weight, double grad_scale, float *scale,
                    double *sums);

#endif
