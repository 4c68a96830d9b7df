/* grpo_eval.c — GRPO's evaluation (val_split_ratio's held-out prompts), as TRL 1.16's GRPOTrainer
 * evaluates: each eval batch (per_device_eval_batch_size completions, num_generations of each
 * prompt) gets its completions sampled and scored as a training batch's are, and its loss taken
 * on-policy without a gradient (prediction_step's compute_loss: the ratio 1); the metrics are the
 * training ones under TRL's "eval_" names (eval_reward, eval_reward_std, eval_rewards/<f>/mean, ...).
 * Rank r evaluates eval batches r, r + world, ...; every rank goes round the same number of times
 * (an empty batch where it has none left), so the reward functions' node-shared worker is called
 * alike on every rank. The sampling seed is the seed, the step and the eval batch's number alone, so
 * a resumed run, and any number of ranks, draw the same completions. */
#include <stdio.h>
#include <string.h>

#include "ptrain/dist.h"
#include "ptrain/grpo.h"
#include "ptrain/reward.h"
#include "trainer.h"

static uint64_t eval_seed(const trainer *t, int64_t step, size_t batch_no)
{
    uint64_t z = (uint64_t)t->cfg->seed * 0x9e3779b97f4a7c15ULL ^ 0x6576616c67727030ULL; /* "evalgrp0" */
    z ^= (uint64_t)(step + 1) * 0xbf58476d1ce4e5b9ULL;
    return z ^ ((uint64_t)batch_no * 1000003u);
}

/* The loss and metrics of eval batch b (its prompts from first, up to per prompts; none past the end). */
static pt_status eval_batch(trainer *t, int64_t step, size_t b, size_t per, double *sums)
{
    size_t idx[256], k = 0, first = b * per;
    for (; k < per && first + k < t->eval.n; k++) idx[k] = first + k;
    grpo_micro g;
    TRY(grpo_micro_make(t, &t->eval, idx, first < t->eval.n ? k : 0, eval_seed(t, step, b), &g, sums));
    pt_status st = grpo_micro_eval(t, &g, sums);
    grpo_micro_free(&g);
    return st;
}

pt_status grpo_evaluate(trainer *t, int64_t step, double *eval_loss, grpo_eval_metrics *out)
{
    long gen = t->cfg->num_generations > 0 ? t->cfg->num_generations : 1;
    size_t per = (size_t)(t->cfg->per_device_eval_batch_size / gen), world = (size_t)t->d->world;
    if (per < 1) per = 1;
    if (per > 256) per = 256;
    size_t batches = (t->eval.n + per - 1) / per, rounds = (batches + world - 1) / world;
    double sums[GRPO_COUNT] = {0};
    for (size_t r = 0; r < rounds; r++) TRY(eval_batch(t, step, r * world + (size_t)t->d->rank, per, sums));
    TRY(dist_sum_f64(t->d, sums, GRPO_COUNT));
    *eval_loss = sums[GRPO_LOSS_TOK] > 0 ? sums[GRPO_LOSS] / sums[GRPO_LOSS_TOK] : 0.0;
    const char *funcs[GRPO_MAX_FUNCS], *names[GRPO_COUNT];
    char name_buf[GRPO_MAX_FUNCS * 192];
    int nf = reward_count(t->reward) < GRPO_MAX_FUNCS ? reward_count(t->reward) : GRPO_MAX_FUNCS;
    for (int f = 0; f < nf; f++) funcs[f] = reward_name(t->reward, f);
    sums[GRPO_STEPS] = sums[GRPO_STEPS] > 0 ? sums[GRPO_STEPS] : 1;
    out->n = grpo_log_values(sums, nf, funcs, t->cfg->beta != 0, name_buf, names, out->values);
    for (int i = 0; i < out->n; i++) {
        snprintf(out->name_buf[i], sizeof out->name_buf[i], "eval_%s", names[i]);
        out->names[i] = out->name_buf[i];
    }
    return PT_OK;
}
