/* grpo_eval.c — GRPO's evaluation (val_split_ratio's held-out prompts), as TRL 1.16's GRPOTrainer
 * evaluates: each eval batch (per_device_eval_batch_size completions, num_generations_eval of each
 * prompt) gets its completions sampled and scored as a training batch's are, and its loss taken
 * on-policy without a gradient (prediction_step's compute_loss: the ratio 1); the metrics are the
 * training ones under TRL's "eval_" names (eval_reward, eval_reward_std, eval_rewards/<f>/mean, ...),
 * each the mean over the eval batches of that batch's value, and eval_loss the batches' losses weighted
 * as TRL's evaluation loop keeps them (grpo_eval_weight), as TRL averages them.
 * Rank r evaluates eval batches r, r + world, ...; every rank goes round the same number of times
 * (an empty batch where it has none left), so the reward functions' node-shared worker is called
 * alike on every rank. A prompt's completions are drawn from the seed, the step and the prompt's
 * place in the eval set alone, so a resumed run, any number of ranks and any eval batch size draw the
 * same completions (and with the same eval batch over all ranks, the same record). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "ptrain/dist.h"
#include "ptrain/grpo.h"
#include "ptrain/reward.h"
#include "trainer.h"

/* The seed of an eval batch whose first prompt is eval prompt `first`: grpo_micro_make draws prompt j
 * of it from this + 0x9e3779b97f4a7c15 (j + 1), so from the prompt's place first + j alone. */
static uint64_t eval_seed(const trainer *t, int64_t step, size_t first)
{
    uint64_t z = (uint64_t)t->cfg->seed * 0x9e3779b97f4a7c15ULL ^ 0x6576616c67727030ULL; /* "evalgrp0" */
    z ^= (uint64_t)(step + 1) * 0xbf58476d1ce4e5b9ULL;
    return z + (uint64_t)first * 0x9e3779b97f4a7c15ULL;
}

/* The loss and metrics of eval batch b (its prompts from first, up to per prompts; none past the end). */
static pt_status eval_batch(trainer *t, int64_t step, size_t b, size_t per, double *sums)
{
    size_t idx[256], k = 0, first = b * per;
    for (; k < per && first + k < t->eval.n; k++) idx[k] = first + k;
    grpo_micro g;
    TRY(grpo_micro_make(t, &t->eval, idx, first < t->eval.n ? k : 0, eval_seed(t, step, first), &g, sums));
    pt_status st = grpo_micro_eval(t, &g, sums);
    grpo_micro_free(&g);
    return st;
}

double grpo_eval_weight(size_t rows, long batch, int world, int rank, bool last)
{
    size_t total = (size_t)batch * (size_t)world, rem = total ? rows % total : 0;
    if (!last || rem == 0) return (double)batch;
    double w = (double)rem - (double)rank * (double)batch;
    return w < 0 ? 0 : w > (double)batch ? (double)batch : w;
}

void grpo_eval_add(double *sums, double loss_w, double weight, int world, int n_funcs, const char *const *funcs,
                   bool with_kl, grpo_eval_metrics *out)
{
    const char *names[GRPO_COUNT];
    char name_buf[GRPO_MAX_FUNCS * 192];
    double values[GRPO_COUNT];
    /* a rank's loss: its sum over the tokens / (the batch's tokens / world), TRL clamping those to 1 */
    double per_rank = fmax(sums[GRPO_LOSS_TOK], 1.0) / world;
    out->loss_acc += loss_w / per_rank, out->loss_weight += weight;
    sums[GRPO_STEPS] = sums[GRPO_STEPS] > 0 ? sums[GRPO_STEPS] : 1;
    out->n = grpo_log_values(sums, n_funcs, funcs, with_kl, name_buf, names, values);
    for (int i = 0; i < out->n; i++) {
        snprintf(out->name_buf[i], sizeof out->name_buf[i], "eval_%s", names[i]);
        out->names[i] = out->name_buf[i];
        if (isfinite(values[i])) out->acc[i] += values[i], out->n_acc[i]++;
    }
}

double grpo_eval_mean(grpo_eval_metrics *out)
{
    for (int i = 0; i < out->n; i++) out->values[i] = out->n_acc[i] ? out->acc[i] / out->n_acc[i] : NAN;
    return out->loss_weight > 0 ? out->loss_acc / out->loss_weight : 0.0;
}

pt_status grpo_evaluate(trainer *t, int64_t step, double *eval_loss, grpo_eval_metrics *out)
{
    long gen = grpo_generations(t->cfg, true), batch = t->cfg->per_device_eval_batch_size;
    size_t per = (size_t)(batch / gen), world = (size_t)t->d->world;
    if (per < 1) per = 1;
    if (per > 256) per = 256;
    size_t batches = (t->eval.n + per - 1) / per, rounds = (batches + world - 1) / world;
    const char *funcs[GRPO_MAX_FUNCS];
    int nf = reward_count(t->reward) < GRPO_MAX_FUNCS ? reward_count(t->reward) : GRPO_MAX_FUNCS;
    for (int f = 0; f < nf; f++) funcs[f] = reward_name(t->reward, f);
    *out = (grpo_eval_metrics){0};
    for (size_t r = 0; r < rounds; r++) { /* a round: TRL's eval batch over its processes */
        /* ranks past the last batch have none (TRL's accelerate pads them with prompts from the start):
         * no weight, and not counted among the ranks that share the batch's tokens */
        int active = (int)(batches - r * world < world ? batches - r * world : world);
        double sums[GRPO_COUNT + 1] = {0}, weight = 0;
        TRY(eval_batch(t, step, r * world + (size_t)t->d->rank, per, sums));
        for (int k = 0; k < active; k++) weight += grpo_eval_weight(t->eval.n, batch, (int)world, k, r + 1 == rounds);
        if (t->d->rank < active)
            sums[GRPO_COUNT] = grpo_eval_weight(t->eval.n, batch, (int)world, t->d->rank, r + 1 == rounds) * sums[GRPO_LOSS];
        TRY(dist_sum_f64(t->d, sums, GRPO_COUNT + 1));
        grpo_eval_add(sums, sums[GRPO_COUNT], weight, active, nf, funcs, t->cfg->beta != 0, out);
    }
    *eval_loss = grpo_eval_mean(out);
    return PT_OK;
}
