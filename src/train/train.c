/* train.c — the training loop, readable top to bottom in train_run():
 *   load the model and its tokenizer; read, tokenize and split the data, and check that every rank
 *   read the same (data_agree.c); create the adapters;
 *   resume from a checkpoint when the config says so (train_ckpt.c); then for each optimizer
 *   step: gather gradient_accumulation_steps micro-batches, count their target tokens across all
 *   ranks, run forward+backward on each (the loss is the mean over all those tokens, as
 *   transformers computes it) while gradsync accumulates the gradients and sums them across ranks
 *   in buckets as layers finish, clip, AdamW; log every logging_steps (with the slowest rank and
 *   the time spent communicating), compare the replicas' checksums; evaluate, track the best
 *   model and early stopping; checkpoint (rank 0) by save_strategy. A SIGUSR1/SIGTERM/SIGINT on
 *   any rank travels with the step's loss sum, so all ranks stop after the same step: rank 0
 *   checkpoints and every rank returns PT_CHECKPOINTED. At the end rank 0 writes the final adapter
 *   (the best checkpoint's with load_best_model_at_end). A rank that fails inside the loop ends
 *   the job (dist_fail_fast), since the others are already waiting in the step's collectives. */
#include "ptrain/train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/adapter.h"
#include "ptrain/blas_kernel.h"
#include "ptrain/config_options.h"
#include "ptrain/dataset.h"
#include "ptrain/export.h"
#include "ptrain/gradsync.h"
#include "ptrain/log.h"
#include "ptrain/method.h"
#include "ptrain/model_io.h"
#include "ptrain/optimizer.h"
#include "ptrain/outdir.h"
#include "ptrain/peft.h"
#include "ptrain/progress.h"
#include "ptrain/resume.h"
#include "ptrain/schedule.h"
#include "ptrain/signals.h"
#include "ptrain/step.h"
#include "ptrain/util.h"
#include "trainer.h"

/* The examples of this rank's next micro-batch, moving to the next epoch when one ends. */
static pt_status next_indices(trainer *t, const size_t **idx, size_t *n)
{
    if (t->next_batch >= sampler_batches(&t->sampler)) {
        TRY(sampler_epoch(&t->sampler, (uint64_t)t->cfg->data_seed, ++t->epoch));
        t->next_batch = 0;
    }
    *n = sampler_batch(&t->sampler, t->next_batch++, idx);
    return PT_OK;
}

/* The next micro-batch of this rank. */
static pt_status next_batch(trainer *t, pt_batch *b)
{
    const size_t *idx;
    size_t n;
    TRY(next_indices(t, &idx, &n));
    if (method_info_of(t->cfg->method)->unpaired)
        return batch_collate_unpaired(&t->train, idx, n, (int32_t)t->cfg->max_seq_length, b);
    return batch_collate(&t->train, idx, n, b);
}

/* A method whose loss is over pairs or KTO's examples, not tokens (preference.h). */
static bool pref_method(const trainer *t)
{
    const method_info *mi = method_info_of(t->cfg->method);
    return mi->pairs || mi->unpaired;
}

static train_batch view_of(const pt_batch *b)
{
    train_batch v = {b->rows, b->cols, b->ids, b->targets, b->pos, b->segments};
    return v;
}

static int64_t count_targets(const pt_batch *b)
{
    int64_t n = 0;
    for (int i = 0; i < b->rows * b->cols; i++) n += b->targets[i] != PT_IGNORE_INDEX;
    return n;
}

typedef struct {
    double loss_sum, tokens, inputs, grad_norm, lr; /* tokens: with a target; inputs: all */
    double compute_s, comm_s; /* this rank's seconds computing and in communication */
    bool stop;                /* a rank received SIGUSR1, SIGTERM or SIGINT before the step ended */
    bool nonfinite;           /* the summed loss or the gradient norm is NaN or infinite: not applied */
    double pref[TRAIN_SUMS];  /* a preference method's (or GRPO's) metrics, summed over the step and ranks */
    bool skipped;             /* ... and skipped (skip_nonfinite_steps): its warning stands for its log */
} step_result;

/* Sum values across ranks, adding the time it took to *comm_s. */
static pt_status timed_sum(const trainer *t, double *values, int n, double *comm_s)
{
    double t0 = progress_now();
    pt_status st = dist_sum_f64(t->d, values, n);
    *comm_s += progress_now() - t0;
    return st;
}

/* step_options.layer_done: hand the layer to gradsync. For the failure tests
 * (tests/mpi/test_dp.sh), PTRAIN_TEST_FAIL_STEP=N makes this rank fail halfway through step N's
 * backward pass as an allocation would, while the other ranks are already summing buckets. */
static pt_status on_layer_done(void *arg, int layer)
{
    trainer *t = arg;
    if (t->fail_step == t->step + 1 && layer == t->m.cfg.n_layers / 2)
        return ERR(PT_ERR_NOMEM, "out of host memory in the backward pass of layer %d at step %lld (injected by "
                   "PTRAIN_TEST_FAIL_STEP)", layer, (long long)t->fail_step);
    return gradsync_layer_done(&t->sync, layer);
}

/* The options of every micro-batch's step (the dropout seed is set per micro-batch). */
static step_options step_options_of(trainer *t)
{
    step_options so = step_options_for(t->cfg->use_gradient_checkpointing, t->be->device >= 0,
                                       (float)t->cfg->lora_dropout);
    so.act = t->be->act; /* fp32 with PTRAIN_CUDA_KERNELS=reference */
    so.keep_layers = (int)t->cfg->gradient_checkpointing_keep_layers;
    so.neftune_alpha = (float)t->cfg->neftune_noise_alpha;
    so.offload_host = t->offload_host;
    so.layer_done = on_layer_done, so.layer_done_arg = t;
    so.arena = &t->arena;
    so.embed_grad = t->sm.on[SAVED_EMBED] ? &t->sm.grad[SAVED_EMBED] : NULL; /* modules_to_save */
    so.head_grad = t->sm.on[SAVED_HEAD] ? &t->sm.grad[SAVED_HEAD] : NULL;
    if (t->cfg->output_router_logits && t->m.cfg.n_experts > 0) so.router_aux_coef = (float)t->cfg->router_aux_loss_coef;
    return so;
}

/* Preference methods: a micro-batch of P pairs is 2P sequences, segments 1..2P (pair i: chosen
 * 2i+1, rejected 2i+2; dataset.h). The rows as the loss head takes them: each row's sequence, the
 * targets (ORPO's also on its chosen prompts: preference_orpo_rows) and each sequence's targets. */
typedef struct {
    int32_t *row_seq, *targets;
    double *tokens;
    int n_seq, pairs;
} pref_rows;

static void pref_rows_free(pref_rows *p)
{
    free(p->row_seq), free(p->targets), free(p->tokens);
    *p = (pref_rows){0};
}

static pt_status pref_rows_of(const trainer *t, const pt_batch *b, pref_rows *p)
{
    int rows = b->rows * b->cols, n = 0;
    for (int r = 0; r < rows; r++) n = b->segments[r] > n ? b->segments[r] : n;
    *p = (pref_rows){malloc(sizeof(int32_t) * (size_t)(rows + 1)), malloc(sizeof(int32_t) * (size_t)(rows + 1)),
                     calloc(3 * (size_t)n + 2, sizeof(double)), n, n / 2};
    if (!p->row_seq || !p->targets || !p->tokens) {
        pref_rows_free(p);
        return ERR(PT_ERR_NOMEM, "no memory for the rows of %d sequences", n);
    }
    if (t->cfg->method == METHOD_ORPO) {
        p->n_seq = preference_orpo_rows(b->ids, b->targets, b->segments, rows, p->targets, p->row_seq, p->tokens);
        return PT_OK;
    }
    for (int r = 0; r < rows; r++) {
        p->row_seq[r] = b->segments[r] - 1, p->targets[r] = b->targets[r];
        if (p->row_seq[r] >= 0 && b->targets[r] != PT_IGNORE_INDEX) p->tokens[p->row_seq[r]] += 1;
    }
    return PT_OK;
}

typedef struct {
    const trainer *t;
    const double *ref_nll; /* DPO */
    const double *tokens;  /* each sequence's targets */
    double grad_scale;
    int pairs;
    double *sums;
    const double *margin;  /* reward: each pair's margin (TRL's margin column; 0 without it) */
} pref_step;

/* step_options.seq_grad: the pairs' loss (DPO's, CPO's or ORPO's) and each sequence's gradient scale. */
static pt_status pref_seq_grad(void *arg, const double *nll, float *scale)
{
    pref_step *p = arg;
    double beta = p->t->cfg->beta, chosen = 0;
    for (int i = 0; i < p->pairs; i++) chosen += p->tokens[2 * i];
    if (p->t->cfg->method == METHOD_CPO) preference_cpo(nll, p->pairs, chosen, beta, p->grad_scale, scale, p->sums);
    else if (p->t->cfg->method == METHOD_ORPO)
        preference_orpo(nll, p->tokens, p->pairs, beta, p->grad_scale, scale, p->sums);
    else preference_dpo(nll, p->ref_nll, p->pairs, beta, p->grad_scale, scale, p->sums);
    return PT_OK;
}

/* Reward modelling: step_options.seq_grad takes the sequences' scores (preference_reward). */
static pt_status reward_seq_grad(void *arg, const double *score, float *scale)
{
    pref_step *p = arg;
    preference_reward(score, p->margin, p->pairs, p->t->cfg->center_rewards_coefficient, p->grad_scale, scale, p->sums);
    return PT_OK;
}

/* The token whose hidden state a reward model scores: the last that is not the pad token (the
 * tokenizer's, else its eos, as TRL sets it), as transformers finds it. */
static int32_t reward_pad(const trainer *t)
{
    return tokenizer_pad(t->tok) >= 0 ? tokenizer_pad(t->tok) : tokenizer_eos(t->tok);
}

/* One micro-batch of reward modelling: each sequence scored by the head, added to *loss_sum and sums. */
static pt_status reward_micro_batch(trainer *t, const pt_batch *b, step_options so, float scale, double *loss_sum,
                                    double *sums)
{
    int rows = b->rows * b->cols;
    int32_t *score_row = malloc(sizeof(int32_t) * (size_t)(rows + 1));
    TRY_ALLOC(score_row);
    int n_seq = preference_score_rows(b->ids, b->segments, rows, reward_pad(t), score_row);
    double *margin = calloc((size_t)n_seq / 2 + 1, sizeof *margin); /* one pair an example, in batch order */
    if (!margin) free(score_row);
    TRY_ALLOC(margin);
    for (int i = 0; b->margin && i < n_seq / 2; i++) margin[i] = b->margin[i];
    train_batch v = view_of(b);
    double before = sums[PREF_LOSS], unused = 0;
    int64_t n = 0;
    pref_step p = {t, NULL, NULL, scale, n_seq / 2, sums, margin};
    so.n_seq = n_seq, so.seq_grad = reward_seq_grad, so.seq_grad_arg = &p;
    so.score_w = t->head.host_w, so.score_row = score_row, so.score_grad = t->head.host_grad;
    pt_status st = step_run(&t->m, &t->l, &v, &so, 0.0f, &unused, &n);
    *loss_sum += sums[PREF_LOSS] - before;
    free(score_row), free(margin);
    return st;
}

/* One micro-batch of a preference method: the reference's log-probs when the method has one (the
 * same base with the adapter off), then the policy's step; the pairs' loss is added to *loss_sum,
 * the metrics to sums. */
static pt_status pref_micro_batch(trainer *t, const pt_batch *b, step_options so, float scale, double *loss_sum,
                                  double *sums)
{
    pref_rows pr;
    TRY(pref_rows_of(t, b, &pr));
    train_batch v = view_of(b);
    v.targets = pr.targets;
    double *ref = calloc((size_t)pr.n_seq + 1, sizeof *ref);
    pt_status st = ref ? PT_OK : ERR(PT_ERR_NOMEM, "no memory for %d sequences' log-probs", pr.n_seq);
    if (st == PT_OK && method_info_of(t->cfg->method)->reference)
        st = step_sequence_nll(&t->m, NULL, &v, pr.row_seq, pr.n_seq, &t->arena, ref);
    double before = sums[PREF_LOSS], token_loss = 0;
    int64_t n = 0;
    pref_step p = {t, ref, pr.tokens, scale, pr.pairs, sums, NULL};
    so.row_seq = pr.row_seq, so.n_seq = pr.n_seq, so.seq_grad = pref_seq_grad, so.seq_grad_arg = &p;
    if (st == PT_OK) st = step_run(&t->m, &t->l, &v, &so, 0.0f, &token_loss, &n);
    *loss_sum += sums[PREF_LOSS] - before;
    free(ref);
    pref_rows_free(&pr);
    return st;
}

/* KTO: a micro-batch laid out by batch_collate_unpaired, its n examples' tokens first (slots 0..2n),
 * then their KL sequences; each row's sequence (a KL row's counted from the KL rows' start). */
typedef struct {
    int n, main_cols;
    int32_t *row_seq;
    bool *desirable;
    double *nll; /* [5n]: ref (2n slots), ref KL (n), policy KL (n); scratch */
} kto_rows;

static void kto_rows_free(kto_rows *k)
{
    free(k->row_seq), free(k->desirable), free(k->nll);
    *k = (kto_rows){0};
}

static pt_status kto_rows_of(const pt_batch *b, kto_rows *k)
{
    int cols = b->rows * b->cols, last = 0;
    for (int r = 0; r < cols; r++) last = b->segments[r] > last ? b->segments[r] : last;
    int n = last / 3, main_cols = 0;
    while (main_cols < cols && b->segments[main_cols] <= 2 * n) main_cols++;
    *k = (kto_rows){n, main_cols, malloc(sizeof(int32_t) * (size_t)(cols + 1)), calloc((size_t)n + 1, sizeof(bool)),
                    calloc(5 * (size_t)n + 1, sizeof(double))};
    if (!k->row_seq || !k->desirable || !k->nll) {
        kto_rows_free(k);
        return ERR(PT_ERR_NOMEM, "no memory for the rows of %d KTO examples", n);
    }
    for (int r = 0; r < cols; r++) {
        int seg = b->segments[r];
        k->row_seq[r] = r < main_cols ? seg - 1 : seg - 2 * n - 1;
        if (r < main_cols && seg >= 1 && (seg - 1) % 2 == 0) k->desirable[(seg - 1) / 2] = true;
    }
    return PT_OK;
}

/* The reference's log-probs of the examples and of the KL sequences, the policy's of the KL
 * sequences (no gradient), and the KL estimate: the mean of logp - ref logp over the KL sequences,
 * over the ranks when `ranks` (TRL gathers it in training), at least 0. */
static pt_status kto_reference(trainer *t, const pt_batch *b, kto_rows *k, bool ranks, double *kl)
{
    train_batch main = view_of(b), mis = view_of(b);
    main.seq = k->main_cols;
    mis.seq = b->cols - k->main_cols;
    mis.ids += k->main_cols, mis.targets += k->main_cols, mis.pos += k->main_cols, mis.segments += k->main_cols;
    double *ref = k->nll, *ref_kl = ref + 2 * k->n, *pol_kl = ref_kl + k->n;
    TRY(step_sequence_nll(&t->m, NULL, &main, k->row_seq, 2 * k->n, &t->arena, ref));
    TRY(step_sequence_nll(&t->m, NULL, &mis, k->row_seq + k->main_cols, k->n, &t->arena, ref_kl));
    TRY(step_sequence_nll(&t->m, &t->l.ad, &mis, k->row_seq + k->main_cols, k->n, &t->arena, pol_kl));
    double v[2] = {0, 1};
    for (int i = 0; i < k->n; i++) v[0] += (ref_kl[i] - pol_kl[i]) / k->n;
    if (ranks) TRY(dist_sum_f64(t->d, v, 2));
    *kl = fmax(v[0] / v[1], 0.0);
    return PT_OK;
}

typedef struct {
    const trainer *t;
    const kto_rows *k;
    double kl, grad_scale;
    double *sums;
} kto_step;

static pt_status kto_seq_grad(void *arg, const double *nll, float *scale)
{
    kto_step *p = arg;
    const pt_config *c = p->t->cfg;
    preference_kto(nll, p->k->nll, p->k->desirable, p->k->n, p->kl, c->beta, c->desirable_weight,
                   c->undesirable_weight, p->grad_scale, scale, p->sums);
    return PT_OK;
}

/* One KTO micro-batch: the reference and KL passes, then the policy's step on the examples. */
static pt_status kto_micro_batch(trainer *t, const pt_batch *b, step_options so, float scale, double *loss_sum,
                                 double *sums)
{
    kto_rows k;
    TRY(kto_rows_of(b, &k));
    kto_step p = {t, &k, 0, scale, sums};
    pt_status st = kto_reference(t, b, &k, true, &p.kl);
    train_batch v = view_of(b);
    v.seq = k.main_cols;
    double before = sums[PREF_LOSS], token_loss = 0;
    int64_t n = 0;
    so.row_seq = k.row_seq, so.n_seq = 2 * k.n, so.seq_grad = kto_seq_grad, so.seq_grad_arg = &p;
    if (st == PT_OK) st = step_run(&t->m, &t->l, &v, &so, 0.0f, &token_loss, &n);
    *loss_sum += sums[PREF_LOSS] - before;
    kto_rows_free(&k);
    return st;
}

/* A KTO eval batch: its examples' losses (the batch's own KL estimate, no gradient) into sums. */
static pt_status evaluate_kto(trainer *t, const pt_batch *b, double *sums)
{
    kto_rows k;
    TRY(kto_rows_of(b, &k));
    double kl = 0, pref[PREF_COUNT] = {0};
    double *nll = calloc(2 * (size_t)k.n + 1, sizeof *nll);
    float *scale = calloc(2 * (size_t)k.n + 1, sizeof *scale);
    pt_status st = nll && scale ? PT_OK : ERR(PT_ERR_NOMEM, "no memory for %d KTO examples' log-probs", k.n);
    if (st == PT_OK) st = kto_reference(t, b, &k, false, &kl);
    train_batch v = view_of(b);
    v.seq = k.main_cols;
    if (st == PT_OK) st = step_sequence_nll(&t->m, &t->l.ad, &v, k.row_seq, 2 * k.n, &t->arena, nll);
    if (st == PT_OK)
        preference_kto(nll, k.nll, k.desirable, k.n, kl, t->cfg->beta, t->cfg->desirable_weight,
                       t->cfg->undesirable_weight, 1.0, scale, pref);
    sums[0] += pref[PREF_LOSS], sums[1] += pref[PREF_PAIRS];
    free(nll), free(scale);
    kto_rows_free(&k);
    return st;
}

/* The score head's gradient summed over the ranks (in double) and onto the backend. */
static pt_status reward_head_sum(trainer *t)
{
    if (t->d->world > 1) {
        double *g = malloc(sizeof(double) * (size_t)t->head.dim);
        TRY_ALLOC(g);
        for (int64_t k = 0; k < t->head.dim; k++) g[k] = t->head.host_grad[k];
        pt_status st = dist_sum_f64(t->d, g, (int)t->head.dim);
        for (int64_t k = 0; k < t->head.dim; k++) t->head.host_grad[k] = (float)g[k];
        free(g);
        TRY(st);
    }
    return score_head_grad_upload(&t->head);
}

/* Forward and backward of the step's micro-batches; gradsync accumulates and reduces. scale: the
 * gradient's factor, 1 / the step's target tokens (1 / its pairs for a preference method). */
static pt_status run_micro_batches(trainer *t, int64_t step, pt_batch *mb, float scale, double *loss_sum,
                                   double *pref_sums)
{
    long accum = t->cfg->gradient_accumulation_steps;
    bool pairs = method_info_of(t->cfg->method)->pairs;
    step_options so = step_options_of(t);
    if (t->head.dim) score_head_zero_grad(&t->head);
    TRY(saved_modules_zero_grad(&t->sm));
    TRY(saved_modules_zero_sum(&t->sm));
    for (long i = 0; i < accum; i++) {
        train_batch v = view_of(&mb[i]);
        int64_t n = 0;
        so.dropout_seed = (uint64_t)t->cfg->seed * 1000003u + (uint64_t)(step * accum + i);
        so.noise_seed = so.dropout_seed ^ 0x4e4546544e4f4953ULL; /* NEFTune's: the step and micro-batch alone */
        gradsync_begin_micro(&t->sync, i);
        if (method_info_of(t->cfg->method)->unpaired) TRY(kto_micro_batch(t, &mb[i], so, scale, loss_sum, pref_sums));
        else if (t->head.dim) TRY(reward_micro_batch(t, &mb[i], so, scale, loss_sum, pref_sums));
        else if (pairs) TRY(pref_micro_batch(t, &mb[i], so, scale, loss_sum, pref_sums));
        else { /* output_router_logits: the aux loss of each micro-batch, summed into pref_sums[0], counted in [1] */
            double aux = 0;
            so.aux_loss = t->cfg->output_router_logits && t->m.cfg.n_experts > 0 ? &aux : NULL;
            TRY(step_run(&t->m, &t->l, &v, &so, scale, loss_sum, &n));
            if (so.aux_loss) pref_sums[0] += aux, pref_sums[1] += 1;
        }
        if (accum > 1 && saved_modules_any(&t->sm)) { /* modules_to_save: each micro-batch's alone, then summed */
            TRY(saved_modules_add_micro(&t->sm));
            if (i + 1 < accum) TRY(saved_modules_zero_grad(&t->sm));
        }
    }
    if (accum > 1) TRY(saved_modules_take_sum(&t->sm));
    TRY(gradsync_finish(&t->sync));
    if (t->d->world > 1 && saved_modules_any(&t->sm)) { /* modules_to_save: their gradients summed over the ranks */
        double t0 = progress_now();
        TRY(saved_modules_grad_sum(&t->sm));
        t->sync.comm_s += progress_now() - t0;
    }
    return t->head.dim ? reward_head_sum(t) : PT_OK;
}

/* What the loss of a step is a mean over: its target tokens, or a preference method's pairs. */
static double batch_units(const trainer *t, const pt_batch *b)
{
    if (!pref_method(t)) return (double)count_targets(b);
    int n = 0;
    for (int r = 0; r < b->rows * b->cols; r++) n = b->segments[r] > n ? b->segments[r] : n;
    return (double)(method_info_of(t->cfg->method)->unpaired ? n / 3 : n / 2); /* KTO: examples and KL sequences */
}

/* For the divergence tests (tests/cli/test_diverge.sh, tests/mpi/test_diverge_mpi.sh):
 * PTRAIN_TEST_NAN_STEP=N makes this rank's loss NaN at step N, PTRAIN_TEST_NAN_GRAD_STEP=N one of
 * its gradients, after the sum across ranks (so the other ranks' stay finite). */
static pt_status inject_nan(trainer *t, int64_t step, double *loss_sum)
{
    if (t->nan_step == step + 1) *loss_sum = NAN;
    lora_pair *p = lora_next(&t->l, NULL);
    return t->nan_grad_step == step + 1 && p ? backend_scale(t->l.ad.be, &p->grad_a, NAN) : PT_OK;
}

static void grpo_buffer_free(trainer *t)
{
    for (long i = 0; t->gbuf && i < t->cfg->gradient_accumulation_steps; i++) grpo_micro_free(&t->gbuf[i]);
    free(t->gbuf);
    t->gbuf = NULL;
}

/* A new generation batch: the step's micro-batches, each its prompts' completions generated and
 * scored (their metrics into sums), kept in t->gbuf for num_iterations steps. */
static pt_status grpo_generate(trainer *t, int64_t step, double *sums, double *comm)
{
    long accum = t->cfg->gradient_accumulation_steps;
    grpo_buffer_free(t);
    t->gbuf = calloc((size_t)accum, sizeof *t->gbuf);
    TRY_ALLOC(t->gbuf);
    double *counts = t->gbuf_counts;
    counts[0] = counts[1] = 0;
    pt_status st = PT_OK;
    for (long i = 0; i < accum && st == PT_OK; i++) {
        const size_t *idx;
        size_t n;
        st = next_indices(t, &idx, &n);
        /* the sampling seed: the seed and the micro-batch's number in the run over all ranks (step
         * s's i-th on rank r is (s accum + i) world + r), from the step alone: a resumed run draws
         * what the uninterrupted one drew, and W ranks what one process with W times the
         * accumulation draws (the sampler gives them the same prompts) */
        uint64_t batch_no = (uint64_t)(step * accum + i) * (uint64_t)t->d->world + (uint64_t)t->d->rank;
        uint64_t seed = (uint64_t)t->cfg->seed * 0x9e3779b97f4a7c15ULL ^ (batch_no * 1000003u);
        if (st == PT_OK) st = grpo_micro_make(t, &t->train, idx, n, seed, &t->gbuf[i], sums);
        if (st == PT_OK) counts[0] += (double)t->gbuf[i].n_tok, counts[1] += (double)t->gbuf[i].b.cols;
    }
    if (st == PT_OK) st = timed_sum(t, counts, 2, comm);
    if (st != PT_OK) grpo_buffer_free(t);
    return st;
}

/* GRPO's micro-batches of a step: a new generation batch every num_iterations steps (TRL's mu;
 * and after a resume), trained on; the loss is the mean over the step's completion tokens on every
 * rank (TRL's dapo). */
static pt_status grpo_micro_batches(trainer *t, int64_t step, double *counts, double *loss_sum, double *sums,
                                    double *comm)
{
    long accum = t->cfg->gradient_accumulation_steps, mu = t->cfg->num_iterations > 0 ? t->cfg->num_iterations : 1;
    pt_status st = PT_OK;
    if (step % mu == 0 || !t->gbuf) st = grpo_generate(t, step, sums, comm);
    if (st == PT_OK) counts[0] = t->gbuf_counts[0], counts[1] = t->gbuf_counts[1];
    step_options so = step_options_of(t);
    for (long i = 0; i < accum && st == PT_OK; i++) {
        so.dropout_seed = (uint64_t)t->cfg->seed * 1000003u + (uint64_t)(step * accum + i);
        so.noise_seed = so.dropout_seed ^ 0x4e4546544e4f4953ULL;
        gradsync_begin_micro(&t->sync, i);
        st = grpo_micro_run(t, &t->gbuf[i], so, counts[0] > 0 ? 1.0 / counts[0] : 0.0, sums);
    }
    if (st == PT_OK) st = gradsync_finish(&t->sync);
    *loss_sum = sums[GRPO_LOSS] * counts[0]; /* as a token sum: the logged loss is its mean over tokens */
    if (mu == 1 || st != PT_OK) grpo_buffer_free(t);
    return st;
}

/* One optimizer step: accumulation micro-batches, reduction, clipping, AdamW. The gradient norm
 * (of the gradients already summed across ranks) is taken before the loss sum, so whether it and
 * this rank's loss are finite ride along with the loss and the stop flag as counts of ranks:
 * every rank learns the same r->nonfinite, and then no rank applies the step (finite.c decides
 * what happens next). */
/* A mixture of experts trained with output_router_logits (not a preference method): the window's pref sums hold
 * the micro-batches' aux losses and their count, logged as aux_loss. */
static bool aux_logged(const trainer *t)
{
    return t->cfg->output_router_logits && t->m.cfg.n_experts > 0 && !pref_method(t) &&
           t->cfg->method != METHOD_GRPO;
}

static pt_status optimizer_step_run(trainer *t, int64_t step, step_result *r)
{
    double t0 = progress_now(), comm = 0;
    long accum = t->cfg->gradient_accumulation_steps;
    pt_batch *mb = calloc((size_t)accum, sizeof *mb);
    TRY_ALLOC(mb);
    pt_status st = PT_OK;
    double counts[2] = {0, 0}, loss_sum = 0; /* target tokens, input tokens */
    double pref[TRAIN_SUMS] = {0};
    bool grpo = t->cfg->method == METHOD_GRPO;
    if (grpo) st = grpo_micro_batches(t, step, counts, &loss_sum, pref, &comm);
    for (long i = 0; i < accum && st == PT_OK && !grpo; i++) {
        st = next_batch(t, &mb[i]);
        if (st == PT_OK) counts[0] += batch_units(t, &mb[i]), counts[1] += (double)mb[i].rows * mb[i].cols;
    }
    if (st == PT_OK && !grpo) st = timed_sum(t, counts, 2, &comm);
    double tokens = counts[0];
    if (st == PT_OK && !grpo)
        st = run_micro_batches(t, step, mb, tokens > 0 ? (float)(1.0 / tokens) : 0.0f, &loss_sum, pref);
    if (st == PT_OK && (pref_method(t) || grpo || aux_logged(t))) st = timed_sum(t, pref, TRAIN_SUMS, &comm);
    for (int k = 0; k < TRAIN_SUMS; k++) r->pref[k] = pref[k];
    if (st == PT_OK) st = inject_nan(t, step, &loss_sum);
    for (long i = 0; i < accum; i++) batch_free(&mb[i]);
    free(mb);
    comm += t->sync.comm_s;
    r->grad_norm = 0;
    if (st == PT_OK) st = optimizer_grad_norm(&t->l, &r->grad_norm);
    if (st == PT_OK && t->head.dim) { /* one norm over the adapters and the score head, as torch's clip */
        double sq = r->grad_norm * r->grad_norm;
        st = score_head_grad_sum_squares(&t->head, &sq);
        r->grad_norm = sqrt(sq);
    }
    if (st == PT_OK && saved_modules_any(&t->sm)) { /* and over modules_to_save's */
        double sq = r->grad_norm * r->grad_norm;
        st = saved_modules_grad_sum_squares(&t->sm, &sq);
        r->grad_norm = sqrt(sq);
    }
    double sums[4] = {loss_sum, signals_pending() ? 1.0 : 0.0, isfinite(r->grad_norm) ? 0.0 : 1.0,
                      isfinite(loss_sum) ? 0.0 : 1.0};
    if (st == PT_OK) st = timed_sum(t, sums, 4, &comm); /* the stop and non-finite flags ride along */
    loss_sum = sums[0];
    r->stop = sums[1] > 0;
    r->nonfinite = sums[2] + sums[3] > 0; /* counts of ranks: the same on every rank */
    if (sums[2] > 0) r->grad_norm = NAN;  /* not finite on some rank: then not finite */
    adamw_options ao = {t->cfg->adam_beta1, t->cfg->adam_beta2, t->cfg->adam_epsilon, t->cfg->weight_decay,
                        t->cfg->max_grad_norm};
    r->lr = schedule_lr(&t->sched, step);
    if (st == PT_OK && !r->nonfinite) st = optimizer_step(&t->l, &ao, r->grad_norm, r->lr, step + 1);
    if (st == PT_OK && !r->nonfinite && t->head.dim)
        st = score_head_step(&t->head, &ao, r->grad_norm, r->lr, step + 1);
    if (st == PT_OK && !r->nonfinite && saved_modules_any(&t->sm))
        st = saved_modules_step(&t->sm, &ao, r->grad_norm, schedule_lr(&t->sched_saved, step), step + 1);
    r->loss_sum = loss_sum;
    r->tokens = tokens;
    r->inputs = counts[1];
    r->comm_s = comm;
    r->compute_s = progress_now() - t0 - comm;
    return st;
}

/* A preference method's eval batch: its pairs' losses (the reference's and the adapter's
 * log-probs, no gradient) added to sums[0], the pairs to sums[1]. */
static pt_status evaluate_pairs(trainer *t, const pt_batch *b, double *sums)
{
    pref_rows pr;
    TRY(pref_rows_of(t, b, &pr));
    train_batch v = view_of(b);
    v.targets = pr.targets;
    double *nll = calloc(2 * (size_t)pr.n_seq + 1, sizeof *nll);
    float *scale = calloc((size_t)pr.n_seq + 1, sizeof *scale);
    pt_status st = nll && scale ? PT_OK : ERR(PT_ERR_NOMEM, "no memory for %d sequences' log-probs", pr.n_seq);
    if (st == PT_OK && method_info_of(t->cfg->method)->reference)
        st = step_sequence_nll(&t->m, NULL, &v, pr.row_seq, pr.n_seq, &t->arena, nll + pr.n_seq);
    if (st == PT_OK) st = step_sequence_nll(&t->m, &t->l.ad, &v, pr.row_seq, pr.n_seq, &t->arena, nll);
    double pref[PREF_COUNT] = {0};
    pref_step p = {t, nll + pr.n_seq, pr.tokens, 1.0, pr.pairs, pref, NULL};
    if (st == PT_OK) st = pref_seq_grad(&p, nll, scale);
    sums[0] += pref[PREF_LOSS], sums[1] += pref[PREF_PAIRS];
    free(scale);
    free(nll);
    pref_rows_free(&pr);
    return st;
}

/* Reward modelling's eval batch: the pairs' losses from their scores, through a step whose gradients
 * go nowhere that counts (the adapters' are overwritten by the next step, the head's into scratch);
 * its own arena, since the run's is sized for an eval batch without a backward pass. */
static pt_status evaluate_reward(trainer *t, const pt_batch *b, double *sums)
{
    score_head h = t->head;
    h.host_grad = calloc((size_t)t->head.dim, sizeof(float));
    TRY_ALLOC(h.host_grad);
    score_head real = t->head;
    t->head = h;
    double pref[PREF_COUNT] = {0}, loss = 0;
    step_options so = step_options_for(t->cfg->use_gradient_checkpointing, t->be->device >= 0, 0.0f);
    so.act = t->be->act, so.offload_host = NULL, so.arena = NULL; /* both sized for this batch by step_run */
    pt_status st = reward_micro_batch(t, b, so, 1.0f, &loss, pref);
    free(h.host_grad);
    t->head = real;
    sums[0] += pref[PREF_LOSS], sums[1] += pref[PREF_PAIRS];
    return st;
}

/* Mean loss over the eval set: rank r evaluates batches r, r + world, ...; the sums meet. The
 * mean token loss, or for a preference method the mean over pairs of its loss. */
static pt_status evaluate(trainer *t, double *eval_loss)
{
    double sums[2] = {0, 0}; /* loss, target tokens */
    size_t bs = (size_t)t->cfg->per_device_eval_batch_size;
    if (bs > 256) bs = 256;
    for (size_t i = (size_t)t->d->rank * bs; i < t->eval.n; i += bs * (size_t)t->d->world) {
        size_t idx[256], k = 0;
        for (; k < bs && i + k < t->eval.n; k++) idx[k] = i + k;
        pt_batch b;
        bool kto = method_info_of(t->cfg->method)->unpaired;
        TRY(kto ? batch_collate_unpaired(&t->eval, idx, k, (int32_t)t->cfg->max_seq_length, &b)
                : batch_collate(&t->eval, idx, k, &b));
        train_batch v = view_of(&b);
        int64_t n = 0;
        pt_status st = kto                                    ? evaluate_kto(t, &b, sums)
                       : t->head.dim                           ? evaluate_reward(t, &b, sums)
                       : method_info_of(t->cfg->method)->pairs ? evaluate_pairs(t, &b, sums)
                                                               : step_loss(&t->m, &t->l.ad, &v, &t->arena, &sums[0], &n);
        sums[1] += (double)n;
        batch_free(&b);
        TRY(st);
    }
    TRY(dist_sum_f64(t->d, sums, 2));
    *eval_loss = sums[1] > 0 ? sums[0] / sums[1] : NAN;
    return PT_OK;
}

/* This rank's memory by part, from the model, the adapters and the largest micro-batch (and
 * evaluation batch): the arena is sized for them by a dry run of the step's buffers. */
static void plan_memory(trainer *t)
{
    const pt_config *c = t->cfg;
    step_options so = step_options_of(t);
    long eval_batch = c->per_device_eval_batch_size < 256 ? c->per_device_eval_batch_size : 256;
    /* a preference pair is two sequences of up to max_seq_length each; a KTO example and its KL sequence too */
    long seq = c->max_seq_length * (method_info_of(c->method)->pairs || method_info_of(c->method)->unpaired ? 2 : 1);
    if (c->method == METHOD_GRPO) { /* the longest prompt and the longest completion */
        long longest = 0;
        for (size_t i = 0; i < t->train.n + t->eval.n; i++) { /* eval's prompts are generated from too */
            const pt_example *e = i < t->train.n ? &t->train.ex[i] : &t->eval.ex[i - t->train.n];
            long np = 0;
            while (np < e->len && e->segments[np] == 1) np++;
            longest = np > longest ? np : longest;
        }
        seq = longest + grpo_max_new(c);
    }
    pt_memplan_run r = {.batch = c->per_device_train_batch_size, .seq = seq,
                        .eval_rows = t->eval.n ? eval_batch * seq : 0,
                        .weight_bytes = t->m.weight_bytes,
                        .lora_params = adapter_param_count(&t->l.ad) + t->head.dim + saved_modules_params(&t->sm) +
                                       /* the plan counts 4 floats a parameter; with accumulation the modules have a 5th */
                                       (c->gradient_accumulation_steps > 1 ? saved_modules_params(&t->sm) / 4 : 0),
                        .cuda = t->be->device >= 0};
    memplan_of_run(&t->m, &t->l.ad, &so, &r, &t->plan);
}

/* The nodes, their ranks, and how many ranks read the weights from the model file (train_load.c
 * counts them). */
static void print_nodes(const trainer *t)
{
    const pt_dist *d = t->d;
    char shape[64];
    int lo = t->node_ranks_min, hi = t->node_ranks_max;
    if (d->nodes == 1) snprintf(shape, sizeof shape, "1 node of %d ranks", hi);
    else if (lo == hi) snprintf(shape, sizeof shape, "%d nodes of %d rank%s each", d->nodes, hi, hi > 1 ? "s" : "");
    else snprintf(shape, sizeof shape, "%d nodes of %d to %d ranks", d->nodes, lo, hi);
    const char *how = "";
    if (t->model_readers == 1 && d->nodes > 1) how = " (rank 0, sent to the other nodes)";
    else if (t->model_readers == d->nodes) how = d->nodes > 1 ? " (one per node)" : " (one for the node)";
    else if (t->model_readers == d->world) how = " (each rank its own copy)";
    log_info("nodes      %s; the weights read by %d of %d ranks%s\n", shape, t->model_readers, d->world, how);
}

/* The learning rate of modules_to_save: cpt's embedding_learning_rate (default a tenth of
 * learning_rate, as the seed system sets UnslothTrainer's), else learning_rate. */
static double saved_lr(const pt_config *c)
{
    if (c->method != METHOD_CPT) return c->learning_rate;
    return config_is_set(c, "embedding_learning_rate") ? c->embedding_learning_rate : c->learning_rate / 10.0;
}

static void print_summary(const trainer *t, int threads, int64_t total)
{
    const pt_config *c = t->cfg;
    const pt_model_config *g = &t->m.cfg;
    long eff = c->per_device_train_batch_size * c->gradient_accumulation_steps * t->d->world;
    log_info("model      %s (%s, %d layers, dim %d, vocab %d, %.1f MB of weights)\n", shown_text(t->model_path).s,
             arch_name(g->arch), g->n_layers, g->dim, g->vocab, (double)t->m.weight_bytes / 1048576.0);
    log_info("backend    %s, %d rank%s x %d thread%s\n", t->be->ops->name, t->d->world, t->d->world > 1 ? "s" : "",
             threads, threads > 1 ? "s" : "");
    if (t->d->world > 1) print_nodes(t);
    if (t->be->device < 0 && t->d->rank == 0) {
        char blas[512];
        blas_kernel_describe(blas, sizeof blas);
        log_info("blas       %s; sgemm %.0f GFLOP/s on %d thread%s\n", blas, blas_sgemm_rate(), threads,
                 threads > 1 ? "s" : "");
    }
    double base = (double)g->vocab * g->dim * (g->tied_embeddings ? 1 : 2);
    for (int i = 0; i < g->n_layers; i++)
        for (int w = 0; w < W_COUNT; w++)
            if (t->m.layers[i].w[w].data) base += (double)tensor_numel(&t->m.layers[i].w[w]);
    /* reward: the score head too; modules_to_save: the embedding and LM head */
    int64_t trainable = adapter_param_count(&t->l.ad) + t->head.dim + saved_modules_params(&t->sm);
    log_info("lora       r %d, alpha %g, %lld trainable parameters (%.2f%% of the base's %.1fM)%s%s\n", t->l.ad.r,
             t->l.ad.alpha, (long long)trainable, 100.0 * (double)trainable / base, base / 1e6,
             t->head.dim ? ", the score head's included" : "", saved_modules_any(&t->sm) ? ", modules_to_save's included" : "");
    if (saved_modules_any(&t->sm))
        log_info("modules    %s%s%s trained in full (fp32) at learning rate %g%s\n",
                 t->sm.on[SAVED_EMBED] ? "embed_tokens" : "", t->sm.on[SAVED_EMBED] && t->sm.on[SAVED_HEAD] ? " and " : "",
                 t->sm.on[SAVED_HEAD] ? "lm_head" : "", saved_lr(c),
                 g->tied_embeddings && t->sm.on[SAVED_EMBED] + t->sm.on[SAVED_HEAD] ? " (the model ties them: "
                 "each module gets its own copy, as PEFT makes them)" : "");
    if (c->method == METHOD_GRPO) { /* per_device_train_batch_size counts completions, as TRL's */
        log_info("data       %zu train prompts; %ld completions of each sampled, up to %ld tokens\n", t->train.n,
                 c->num_generations, grpo_max_new(c));
        log_info("batch      %ld completions (%ld prompts) per rank x %ld accumulation x %d rank%s = %ld completions "
                 "per step; %lld steps\n", c->per_device_train_batch_size, c->per_device_train_batch_size /
                 c->num_generations, c->gradient_accumulation_steps, t->d->world, t->d->world > 1 ? "s" : "", eff,
                 (long long)total);
        memplan_print(&t->plan, t->be->ops->name);
        return;
    }
    log_info("data       %zu train / %zu eval sequences, %zu train tokens%s\n", t->train.n, t->eval.n,
             dataset_tokens(&t->train), t->train.packed ? " (packed)" : ", batches without padding");
    log_info("batch      %ld per rank x %ld accumulation x %d rank%s = %ld sequences per step; %lld steps\n",
             c->per_device_train_batch_size, c->gradient_accumulation_steps, t->d->world, t->d->world > 1 ? "s" : "",
             eff, (long long)total);
    memplan_print(&t->plan, t->be->ops->name);
}

/* The optimizers whose names promise 8-bit states. */
static bool optim_is_8bit(pt_optim o)
{
    return o == OPTIM_ADAMW_8BIT || o == OPTIM_ADAMW_BNB_8BIT || o == OPTIM_PAGED_ADAMW_8BIT;
}

/* Settings that run differently from what their name promises get one line each. */
static void warn_settings(const trainer *t)
{
    const pt_config *c = t->cfg;
    if (optim_is_8bit(c->optim))
        log_warn("optim: %s runs as AdamW with fp32 states (%.1f MB for these adapters; 8-bit states would save "
                 "three quarters of that)", config_optim_choices[c->optim],
                 2.0 * 4.0 * (double)adapter_param_count(&t->l.ad) / 1048576.0);
}

/* pissa/olora (adapter_decomp.c): PEFT's own save_pretrained form, the trained pairs for the residual base
 * with init_lora_weights "pissa"/"olora" (PEFT recomputes that base from the original on loading), in
 * final_model_dir/residual_adapter; *conv the same adapter converted for the original base (rank 2r), which
 * every other file takes. */
static pt_status save_decomp(trainer *t, const adapter_info *info, pt_adapter *conv)
{
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/residual_adapter", t->cfg->final_model_dir);
    TRY(peft_save(dir, &t->l.ad, info));
    TRY(adapter_decomp_converted(&t->l.ad, &t->m, conv));
    char how[32];
    adapter_decomp_text(&t->l.ad, how, sizeof how);
    log_info("adapter    init_lora_weights %s: %s holds the adapter for the residual base (PEFT's save_pretrained); "
             "the files below hold it converted for the original model (rank %d, as PEFT's "
             "path_initial_model_for_weight_conversion writes it)\n", how, shown_text(dir).s, conv->r);
    return PT_OK;
}

/* DoRA: the PEFT files only, with the trained magnitudes (also copied to the host for the merged
 * exports); adapter.h5 and llama.cpp's LoRA adapter.gguf hold A and B pairs only, so neither is
 * written (an older run's are removed, so the directory holds one adapter). */
static pt_status save_dora(trainer *t, const adapter_info *info)
{
    TRY(adapter_dora_host(&t->l.ad));
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter.h5", t->cfg->final_model_dir);
    unlink(path);
    log_info("adapter    use_dora: no adapter.h5 nor adapter.gguf (ptrain's and llama.cpp's LoRA files have no DoRA "
             "magnitudes); the PEFT files hold them\n");
    return peft_save(t->cfg->final_model_dir, &t->l.ad, info);
}

static pt_status save_adapter(trainer *t)
{
    if (t->d->rank != 0) return PT_OK;
    char what[4200];
    snprintf(what, sizeof what, "the final adapter (%s/adapter.h5, PEFT, GGUF)", t->cfg->final_model_dir);
    TRY(trainer_check_adapters(t, what));
    adapter_info info = trainer_adapter_info(t);
    float *host[2];
    pt_adapter conv = {0};
    const pt_adapter *ad = &t->l.ad;
    pt_status st = trainer_saved_info(t, &info, host);
    char how[32];
    if (st == PT_OK && adapter_decomp_text(ad, how, sizeof how)) {
        st = save_decomp(t, &info, &conv);
        ad = &conv;
    }
    if (st == PT_OK && ad->dora) st = save_dora(t, &info);
    else if (st == PT_OK) st = adapter_save(t->cfg->final_model_dir, ad, &info);
    if (st == PT_OK && !ad->dora) st = peft_save(t->cfg->final_model_dir, ad, &info);
    trainer_saved_free(host);
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter.gguf", t->cfg->final_model_dir);
    if (st == PT_OK && ad->dora) {
        unlink(path); /* not an older run's */
    } else if (st == PT_OK && saved_modules_any(&t->sm)) { /* llama.cpp's LoRA files carry A and B pairs only */
        log_info("adapter    no adapter.gguf: llama.cpp's LoRA adapters cannot carry the modules_to_save trained in "
                 "full\n");
        unlink(path); /* not an older run's */
    } else if (st == PT_OK && (arch_info(t->m.cfg.arch)->gated_delta || arch_info(t->m.cfg.arch)->not_yet)) {
        /* qwen35, gemma4: llama.cpp's names not built */
        log_info("adapter    no adapter.gguf: llama.cpp's tensor names of %s models are not built yet\n",
                 arch_name(t->m.cfg.arch));
        unlink(path); /* not an older run's */
    } else if (st == PT_OK)
        st = adapter_gguf_save(path, ad, &t->m.cfg, t->cfg->model_name);
    if (st == PT_OK && ad->dora)
        log_info("adapter    written to %s: adapter_config.json + adapter_model.safetensors (PEFT, use_dora); try: "
                 "ptrain generate --model %s --adapter %s --chat --prompt \"...\"\n",
                 shown_text(t->cfg->final_model_dir).s, t->model_path, t->cfg->final_model_dir);
    else if (st == PT_OK && (saved_modules_any(&t->sm) || arch_info(t->m.cfg.arch)->gated_delta ||
                             arch_info(t->m.cfg.arch)->not_yet))
        log_info("adapter    written to %s: adapter.h5 (ptrain), adapter_config.json + adapter_model.safetensors (PEFT%s)\n",
                 shown_text(t->cfg->final_model_dir).s, saved_modules_any(&t->sm) ? ", with modules_to_save" : "");
    else if (st == PT_OK)
        log_info("adapter    written to %s: adapter.h5 (ptrain), adapter_config.json + adapter_model.safetensors "
                 "(PEFT), adapter.gguf (llama.cpp, Ollama); try: ptrain generate --model %s --adapter %s --chat "
                 "--prompt \"...\"\n", shown_text(t->cfg->final_model_dir).s, t->model_path,
                 t->cfg->final_model_dir); /* a command to paste: the whole paths */
    if (st == PT_OK) {
        export_options eo = export_options_from_config(t->cfg);
        pt_adapter with = *ad; /* modules_to_save: the merged model takes the trained modules (borrowed, not freed) */
        for (int i = 0; i < SAVED_COUNT; i++)
            if (t->sm.on[i]) with.saved[i] = t->sm.w[i];
        st = export_after_training(&eo, &with, info.chat_template); /* from the original base: residual + delta */
    }
    adapter_free(&conv);
    return st;
}

static pt_status copy_pairs(pt_adapter *to, const pt_adapter *from)
{
    for (adapter_pair *p = adapter_next(to, NULL), *q = adapter_next(from, NULL); p && q;
         p = adapter_next(to, p), q = adapter_next(from, q)) {
        float *host = malloc(p->a.nbytes > p->b.nbytes ? p->a.nbytes : p->b.nbytes);
        TRY_ALLOC(host);
        pt_status st = backend_download(from->be, &q->a, host, q->a.nbytes);
        bool given = false; /* a pair the file leaves out (A zero) keeps its fresh initialisation */
        for (int64_t i = 0; st == PT_OK && i < tensor_numel(&q->a) && !given; i++) given = host[i] != 0.0f;
        if (!given) {
            free(host);
            TRY(st);
            continue;
        }
        if (st == PT_OK) st = backend_upload(to->be, &p->a, host, p->a.nbytes);
        if (st == PT_OK) st = backend_download(from->be, &q->b, host, q->b.nbytes);
        if (st == PT_OK) st = backend_upload(to->be, &p->b, host, p->b.nbytes);
        free(host);
        TRY(st);
    }
    return PT_OK;
}

/* use_dora with lora_model_dir: a DoRA adapter's magnitudes are continued; a plain LoRA adapter's
 * pairs get fresh ones, ||W + s B A|| of its A and B (PEFT's dora_init), so training starts from the
 * model that adapter gives. */
static pt_status copy_magnitudes(trainer *t, const pt_adapter *from)
{
    if (!from->dora) {
        log_info("lora       use_dora: %s is a plain LoRA adapter; its pairs get DoRA magnitudes ||W + s B A|| "
                 "(the model starts as that adapter's)\n", shown_text(t->cfg->lora_model_dir).s);
        return adapter_dora_init(&t->l.ad, &t->m);
    }
    for (int layer = 0; layer < from->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            const adapter_pair *q = adapter_at(from, layer, w);
            if (q && q->mag) TRY(adapter_dora_set(&t->l.ad, layer, w, q->mag));
        }
    return PT_OK;
}

/* lora_model_dir of a reward model (a SEQ_CLS adapter, PEFT's files with the score in
 * modules_to_save): method reward starts its score head as that adapter's; another method refuses
 * it (the score would be dropped); a plain adapter under reward gets a new score head, said. */
static pt_status load_initial_score(trainer *t, const char *dir)
{
    float *w = NULL;
    TRY(peft_read_score(dir, t->m.cfg.dim, &w));
    pt_status st = PT_OK;
    if (w && !t->head.dim)
        st = ERR(PT_ERR_USER, "%s: lora_model_dir %s is a reward model's adapter (task_type SEQ_CLS, with its score "
                 "head); this config's method is %s: set method: reward to continue it",
                 shown_text(t->cfg->path).s, shown_text(dir).s, method_info_of(t->cfg->method)->name);
    else if (w) st = score_head_set(&t->head, w, NULL, NULL);
    else if (t->head.dim)
        log_info("reward     %s has no score head (base_model.model.score.weight); a new one is drawn\n",
                 shown_text(dir).s);
    if (st == PT_OK && w) log_info("reward     the score head starts as %s's\n", shown_text(dir).s);
    free(w);
    return st;
}

/* lora_model_dir: the adapters start as that adapter's (continued training); r, targets and the
 * scale must be the config's, so the run means what its config says. */
static pt_status load_initial_adapter(trainer *t)
{
    const char *dir = t->cfg->lora_model_dir;
    if (!dir || !*dir) return PT_OK;
    pt_adapter from;
    TRY(adapter_load(dir, &t->m, &from));
    pt_status ok = adapter_applicable(&from, dir, t->cfg->use_dora); /* DoRA: under use_dora only */
    if (ok != PT_OK) {
        adapter_free(&from);
        return ok;
    }
    const pt_adapter *to = &t->l.ad;
    char have[128], want[128];
    adapter_targets_text(from.arch, from.target, have, sizeof have);
    adapter_targets_text(to->arch, to->target, want, sizeof want);
    pt_status st = PT_OK;
    if (from.r != to->r || strcmp(have, want) || fabsf(from.scale - to->scale) > 1e-6f * to->scale)
        st = ERR(PT_ERR_USER, "%s: lora_model_dir %s has r %d, scale %g and targets %s; this config has r %ld, scale "
                 "%g and targets %s: set lora_r, lora_alpha, use_rslora and lora_target_modules to the adapter's",
                 shown_text(t->cfg->path).s, shown_text(dir).s, from.r, from.scale, shown_text(have).s, t->cfg->lora_r,
                 to->scale, shown_text(want).s);
    for (int layer = 0; st == PT_OK && layer < to->n_layers; layer++)
        for (int w = 0; st == PT_OK && w < W_COUNT; w++) {
            const adapter_pair *p = adapter_at(to, layer, w), *q = adapter_at(&from, layer, w);
            if (!p && !q) continue;
            if (!p || !q || p->r != q->r || fabsf(p->scale - q->scale) > 1e-6f * p->scale)
                st = ERR(PT_ERR_USER, "%s: lora_model_dir %s has %s at layer %d's %s; this config has %s there: "
                         "set layers_to_transform (or finetune_last_n_layers), rank_pattern and alpha_pattern to "
                         "the adapter's", shown_text(t->cfg->path).s, shown_text(dir).s,
                         q ? "an adapter" : "no adapter", layer,
                         adapter_module_name(to->arch, w) ? adapter_module_name(to->arch, w) : adapter_param_target(w),
                         p ? (q ? "another rank or scale" : "an adapter") : "none");
        }
    if (st == PT_OK) st = copy_pairs(&t->l.ad, &from);
    if (st == PT_OK && t->l.ad.dora) st = copy_magnitudes(t, &from);
    for (int i = 0; i < 2 && st == PT_OK; i++) { /* modules_to_save: they start as the adapter's */
        if (!from.saved[i].data) continue;
        if (!t->sm.on[i]) {
            st = ERR(PT_ERR_USER, "%s: lora_model_dir %s trained %s in full (modules_to_save); this config does not: "
                     "add %s to modules_to_save", shown_text(t->cfg->path).s, shown_text(dir).s,
                     adapter_saved_module(i), adapter_saved_module(i));
            break;
        }
        float *host = malloc(from.saved[i].nbytes);
        st = host ? backend_download(from.be, &from.saved[i], host, from.saved[i].nbytes) : ERR(PT_ERR_NOMEM, "out of memory");
        if (st == PT_OK) st = saved_modules_set(&t->sm, i, host, NULL, NULL);
        free(host);
    }
    adapter_free(&from);
    if (st == PT_OK) st = load_initial_score(t, dir);
    if (st == PT_OK) log_info("lora       starting from the adapter in %s\n", shown_text(dir).s);
    return st;
}

/* Every rank's adapters must be the same bits; `when` says at which point (for the message). */
static pt_status check_replicas(trainer *t, const char *when)
{
    if (t->d->world == 1) return PT_OK;
    uint64_t hash;
    TRY(adapter_checksum(&t->l.ad, &hash));
    char what[64];
    snprintf(what, sizeof what, "adapter %s", when);
    return dist_check_same(t->d, hash, what,
                           "the replicas diverged; this is a bug in ptrain or faulty hardware on this node");
}

/* The record of a logging step: loss and tokens/s over the window, the slowest rank's compute
 * time and the mean time in communication per step. */
static pt_status log_progress(trainer *t, int64_t step, const step_result *r)
{
    log_window *w = &t->w;
    double now = progress_now(), slowest = 0, comm = w->comm_s;
    int who = 0;
    TRY(dist_max_loc(t->d, w->compute_s, &slowest, &who));
    TRY(dist_sum_f64(t->d, &comm, 1));
    double steps = (double)(w->steps > 0 ? w->steps : 1);
    progress_record rec = {step, t->total,
                           (double)t->epoch + (double)sampler_seen(&t->sampler, t->next_batch) / (double)t->train.n,
                           w->loss / fmax(w->tokens, 1), r->lr, r->grad_norm, w->tokens / fmax(now - w->start, 1e-9),
                           w->inputs / fmax(now - w->start, 1e-9), t->d->world, slowest / steps, who, comm / t->d->world / steps,
                           0, NULL, NULL};
    double means[TRAIN_SUMS];
    const char *names[TRAIN_SUMS], *funcs[GRPO_MAX_FUNCS];
    char name_buf[GRPO_MAX_FUNCS * 192];
    if (t->cfg->method == METHOD_GRPO) { /* TRL's metrics of the window's completions */
        int nf = reward_count(t->reward) < GRPO_MAX_FUNCS ? reward_count(t->reward) : GRPO_MAX_FUNCS;
        for (int f = 0; f < nf; f++) funcs[f] = reward_name(t->reward, f);
        rec.n_extra = grpo_log_values(w->pref, nf, funcs, t->cfg->beta != 0, name_buf, names, means);
        rec.extra_names = names, rec.extra = means;
    } else if (pref_method(t)) { /* TRL's metrics: means over the window's pairs or KTO's examples */
        rec.n_extra = preference_log_values((int)t->cfg->method, w->pref, names, means);
        rec.extra_names = names, rec.extra = means;
    } else if (aux_logged(t)) { /* transformers' aux_loss, the mean over the window's micro-batches */
        names[0] = "aux_loss", means[0] = w->pref[0] / fmax(w->pref[1], 1);
        rec.n_extra = 1, rec.extra_names = names, rec.extra = means;
    }
    *w = (log_window){.start = now};
    TRY(progress_log(&t->p, &rec));
    return trainer_watch_log(t, &rec);
}

/* Epochs fully consumed: what tells that a step ended an epoch (save/eval_strategy: epoch). */
static long epochs_done(const trainer *t)
{
    return t->epoch + (t->next_batch >= sampler_batches(&t->sampler) ? 1 : 0);
}

/* Whether a "steps" or "epoch" strategy fires after step (1-based); every: save/eval_steps,
 * whole or a fraction of the total (transformers rounds the fraction up). */
static bool strategy_due(pt_strategy strategy, double every, int64_t step, int64_t total, bool epoch_end)
{
    if (strategy == STRATEGY_EPOCH) return epoch_end;
    if (strategy != STRATEGY_STEPS) return false;
    int64_t n = every < 1 ? (int64_t)ceil(every * (double)total) : (int64_t)every;
    return step % (n > 0 ? n : 1) == 0;
}

/* Evaluate, log, and keep the best metric and early stopping's patience (t->run). */
static pt_status evaluate_step(trainer *t, int64_t step, bool *stop)
{
    double loss;
    grpo_eval_metrics gm = {0};
    if (t->cfg->method == METHOD_GRPO) TRY(grpo_evaluate(t, step, &loss, &gm));
    else TRY(evaluate(t, &loss));
    TRY(progress_eval(&t->p, step, loss, gm.n, gm.names, gm.values));
    TRY(trainer_watch_eval(t, step, loss));
    double value = t->run.metric_for_best_model == METRIC_EVAL_PERPLEXITY ? exp(loss) : loss;
    best_result r;
    TRY(best_record(&t->run, step, value, t->cfg->early_stopping_threshold, t->cfg->early_stopping_patience, &r));
    if (r.stop)
        log_info("early stop %s has not improved by more than %g for %ld evaluations (best %.6g at step %lld)\n",
                 config_metric_choices[t->run.metric_for_best_model], t->cfg->early_stopping_threshold,
                 t->cfg->early_stopping_patience, t->run.best_metric, (long long)t->run.best_step);
    *stop = r.stop;
    return PT_OK;
}

/* Test hooks: PTRAIN_TEST_KILL_STEP=N kills rank PTRAIN_TEST_KILL_RANK (default 0) as kill -9
 * would at the start of step N; PTRAIN_TEST_STEP_DELAY_MS slows every step (signal tests). */
static void test_hooks(const trainer *t, int64_t step)
{
    if (t->kill_step == step + 1 && t->kill_rank == t->d->rank) raise(SIGKILL);
    struct timespec left = {t->step_delay_ms / 1000, (t->step_delay_ms % 1000) * 1000000L};
    while (t->step_delay_ms > 0 && nanosleep(&left, &left) != 0) continue; /* a signal does not cut it short */
}

/* After step (1-based): log, evaluate, save as the strategies say. *stop: early stopping. A skipped
 * step is not logged: the window carries on to the next logging step. */
static pt_status after_step(trainer *t, int64_t step, const step_result *r, bool epoch_end, bool *stop)
{
    const pt_config *c = t->cfg;
    bool last = step == t->total;
    if ((step % c->logging_steps == 0 || last || (step == 1 && c->logging_first_step)) && !r->skipped) {
        char when[48];
        TRY(log_progress(t, step, r));
        snprintf(when, sizeof when, "after step %lld", (long long)step);
        TRY(check_replicas(t, when));
    }
    bool eval_due = strategy_due(c->eval_strategy, c->eval_steps, step, t->total, epoch_end);
    if (t->eval.n && c->eval_strategy != STRATEGY_NO && (eval_due || last)) TRY(evaluate_step(t, step, stop));
    bool save_due = strategy_due(c->save_strategy, c->save_steps, step, t->total, epoch_end);
    if (save_due || (c->save_strategy != STRATEGY_NO && (last || *stop)) || r->stop) TRY(trainer_save(t, step));
    return PT_OK;
}

/* After a stop signal: rank 0 says which signal reached which rank (the largest signal number
 * received, and the lowest rank that got it). */
static pt_status stop_report(trainer *t, int64_t step)
{
    double sig = 0;
    int who = 0;
    TRY(dist_max_loc(t->d, (double)signals_pending(), &sig, &who));
    char by[64] = "", how[2600];
    if (t->d->world > 1) snprintf(by, sizeof by, " on rank %d", who);
    trainer_continue_text(t, how, sizeof how);
    log_info("stopped    by %s%s after step %lld: checkpoint written; %s (exit status %d)\n", signals_name((int)sig), by,
             (long long)step, how, PT_CHECKPOINTED);
    return PT_CHECKPOINTED;
}

/* The optimizer steps from t->first_step on. Returns PT_CHECKPOINTED after a stop signal. */
static pt_status train_loop(trainer *t, int64_t *last_step)
{
    t->w.start = progress_now();
    *last_step = t->first_step;
    int early = signals_pending() != 0; /* a signal while loading: nothing new to save yet */
    TRY(dist_any(t->d, &early));
    if (early && t->first_step < t->total) {
        log_info("stopped    by a signal before the first step; nothing new to save: run the same command again "
                 "(exit status %d)\n", PT_CHECKPOINTED);
        return PT_CHECKPOINTED;
    }
    for (int64_t step = t->first_step; step < t->total; step++) {
        step_result r = {0};
        t->step = step;
        test_hooks(t, step);
        long epochs_before = epochs_done(t);
        double t0 = util_now();
        TRY(optimizer_step_run(t, step, &r));
        if (!t->start.reported) { /* the first step of this run */
            t->start.s[START_FIRST_STEP] = util_now() - t0;
            TRY(startup_report(t));
        }
        TRY(trainer_check_step(t, step + 1, r.nonfinite, r.loss_sum / fmax(r.tokens, 1), r.grad_norm, &r.skipped));
        if (!r.skipped) { /* a skipped step adds nothing to the logged loss nor to the checkpoint's */
            t->w.loss += r.loss_sum, t->w.tokens += r.tokens, t->w.inputs += r.inputs;
            for (int k = 0; k < TRAIN_SUMS; k++) t->w.pref[k] += r.pref[k];
            t->last_loss = r.loss_sum / fmax(r.tokens, 1);
        }
        t->w.compute_s += r.compute_s, t->w.comm_s += r.comm_s;
        t->w.steps++;
        t->last_lr = r.lr;
        *last_step = step + 1;
        trainer_watch_step(t, step + 1);
        bool stop = false;
        TRY(after_step(t, step + 1, &r, epochs_done(t) > epochs_before, &stop));
        if (r.stop && step + 1 < t->total) return stop_report(t, step + 1);
        if (stop) break;
    }
    return PT_OK;
}

/* How the loop ended. A stop signal and a divergence (finite.c: a step's non-finite loss or
 * gradient norm, which all ranks see alike, or parameters that a checkpoint refused, agreed by
 * trainer_save) are decisions every rank took together: rank 0 alone says why. Any other failure
 * may be one rank's alone while the others wait in a step's collective: it ends the job
 * (dist_fail_fast); with one process it is printed here. */
static pt_status loop_outcome(const pt_dist *d, pt_status st)
{
    if (st == PT_OK || st == PT_CHECKPOINTED) return st;
    if (st != PT_ERR_DIVERGED) dist_fail_fast(d, st);
    if (!err_reported() && (d->rank == 0 || st != PT_ERR_DIVERGED)) log_error(st);
    return st;
}

static void trainer_free(trainer *t)
{
    progress_close(&t->p);
    sampler_free(&t->sampler);
    dataset_free(&t->train);
    dataset_free(&t->eval);
    ckpt_layout_free(&t->lay);
    ckpt_state_free(&t->run);
    arena_close(&t->arena);
    backend_host_free(t->be, t->offload_host);
    lora_free(&t->l);
    score_head_free(&t->head);
    saved_modules_free(&t->sm); /* the model's own embedding and LM head back before it is freed */
    model_free(&t->m);
    tokenizer_free(t->tok);
    reward_close(t->reward);
    grpo_buffer_free(t);
    dirlock_release(&t->lock);
}

static int64_t env_int(const char *name) { return getenv(name) ? atoll(getenv(name)) : 0; }

/* The steps of the run, the schedule, the start-up summary and metrics.jsonl. */
static pt_status plan_run(trainer *t, int threads)
{
    const pt_config *cfg = t->cfg;
    /* GRPO: each generation batch is num_iterations steps (TRL repeats its prompts that many times) */
    int64_t mu = cfg->method == METHOD_GRPO && cfg->num_iterations > 1 ? cfg->num_iterations : 1;
    t->total = schedule_total_steps(cfg->max_steps, cfg->num_train_epochs,
                                    (int64_t)sampler_full_batches(&t->sampler), cfg->gradient_accumulation_steps);
    if (cfg->max_steps <= 0) t->total *= mu;
    t->sched = schedule_make(cfg->lr_scheduler_type, &cfg->sched_args, cfg->learning_rate, t->total,
                             cfg->warmup_steps, config_is_set(cfg, "warmup_ratio") ? cfg->warmup_ratio : -1.0);
    /* modules_to_save's parameter group: the same schedule from its own learning rate */
    t->sched_saved = schedule_make(cfg->lr_scheduler_type, &cfg->sched_args, saved_lr(cfg), t->total,
                                   cfg->warmup_steps, config_is_set(cfg, "warmup_ratio") ? cfg->warmup_ratio : -1.0);
    plan_memory(t);
    print_summary(t, threads, t->total);
    warn_settings(t);
    TRY(dist_agree(t->d, memplan_check(t->be, &t->plan)));
    TRY(dist_agree(t->d, backend_weight_cache(t->be, t->plan.weight_cache)));
    TRY(dist_agree(t->d, arena_open(&t->arena, t->be, t->plan.activations)));
    if (t->plan.offloaded) TRY(dist_agree(t->d, backend_host_alloc(t->be, t->plan.offloaded, &t->offload_host)));
    if (t->first_step >= t->total && t->resumed_from >= 0)
        log_info("resume     the checkpoint is at step %lld of %lld: nothing left to train\n",
                 (long long)t->first_step, (long long)t->total);
    TRY(dist_agree(t->d, progress_open(&t->p, cfg->output_dir, t->d->rank, t->resumed_from)));
    return dist_agree(t->d, trainer_watch_open(t));
}

/* imatrix_file, read (and dropped) before training, so a bad file stops the run now, not after it
 * (the export at the end reads it again). */
static pt_status check_imatrix(const pt_config *cfg)
{
    if (!cfg->huggingface_save_gguf || !cfg->imatrix_file) return PT_OK;
    pt_imatrix im;
    TRY(imatrix_load(cfg->imatrix_file, &im));
    imatrix_free(&im);
    return PT_OK;
}

pt_status train_run(const pt_config *cfg, const pt_dist *d, pt_backend *be, int threads)
{
    trainer t = {.cfg = cfg, .d = d, .be = be, .resumed_from = -1, .last_saved = -1};
    t.fail_step = env_int("PTRAIN_TEST_FAIL_STEP"), t.kill_step = env_int("PTRAIN_TEST_KILL_STEP");
    t.kill_rank = (int)env_int("PTRAIN_TEST_KILL_RANK"), t.step_delay_ms = (int)env_int("PTRAIN_TEST_STEP_DELAY_MS");
    t.nan_step = env_int("PTRAIN_TEST_NAN_STEP"), t.nan_grad_step = env_int("PTRAIN_TEST_NAN_GRAD_STEP");
    /* the signal handlers are installed by main.c: a signal during loading stops after the first step */
    t.lock.fd = t.tb.fd = -1;
    /* rank 0 looks before anything is written: no start over on top of an earlier run (outdir.h) */
    pt_status st = dist_agree(d, d->rank == 0 ? outdir_check(cfg) : PT_OK);
    if (st == PT_OK) st = dist_agree(d, d->rank == 0 ? check_imatrix(cfg) : PT_OK);
    if (st == PT_OK) st = dist_agree(d, d->rank == 0 ? dirlock_acquire(cfg->output_dir, &t.lock) : PT_OK);
    if (st == PT_OK) st = dist_agree(d, d->rank == 0 ? outdir_clear(cfg) : PT_OK); /* overwrite_output_dir */
    if (st == PT_OK) st = dist_agree(d, trainer_watch_start(&t)); /* the heartbeat, from here to the end */
    double t0 = util_now(), up0 = be->upload_s;
    if (st == PT_OK) st = trainer_load_model(&t); /* agreed inside */
    startup_model(&t, util_now() - t0, be->upload_s - up0);
    t0 = util_now();
    if (st == PT_OK) st = trainer_load_data(&t); /* agreed inside */
    if (st == PT_OK) st = trainer_agree_data(&t); /* agreed inside */
    t.start.s[START_DATASET] = util_now() - t0;
    if (st == PT_OK) st = dist_agree(d, lora_init(&t.l, &t.m, cfg));
    if (st == PT_OK && cfg->use_dora) st = dist_agree(d, lora_dora_enable(&t.l, &t.m)); /* m = ||W + s B A|| */
    /* reward: the score head, normal(0, 0.02) (transformers' default initializer_range) from random_state */
    if (st == PT_OK && cfg->method == METHOD_REWARD)
        st = dist_agree(d, score_head_create(&t.head, be, t.m.cfg.dim, 0.02, (uint64_t)cfg->random_state ^ 0x5c0e));
    if (st == PT_OK && (cfg->save_embed_tokens || cfg->save_lm_head)) {
        st = dist_agree(d, saved_modules_create(&t.sm, &t.m, cfg->save_embed_tokens, cfg->save_lm_head));
        if (st == PT_OK && cfg->gradient_accumulation_steps > 1) st = dist_agree(d, saved_modules_accumulate(&t.sm));
    }
    if (st == PT_OK && cfg->method == METHOD_GRPO) st = dist_agree(d, reward_open(&cfg->reward_funcs, NULL, d, &t.reward));
    if (st == PT_OK) st = dist_agree(d, load_initial_adapter(&t));
    if (st == PT_OK) st = dist_agree(d, check_replicas(&t, "at the start"));
    if (st == PT_OK) st = dist_agree(d, trainer_identify(&t));
    if (st == PT_OK) st = trainer_resume(&t);
    if (st == PT_OK) st = dist_agree(d, check_replicas(&t, "after resuming"));
    gradsync_init(&t.sync, &t.l, d->world, cfg->gradient_accumulation_steps);
    if (st == PT_OK) st = plan_run(&t, threads);
    if (st == PT_OK) trainer_hub_start(&t);
    int64_t last = 0;
    if (st == PT_OK) st = loop_outcome(d, train_loop(&t, &last));
    if (st == PT_OK) st = trainer_load_best(&t, last);
    if (st == PT_OK) st = dist_agree(d, check_replicas(&t, "before saving"));
    if (st == PT_OK) st = dist_agree(d, save_adapter(&t));
    trainer_hub_end(&t, st, last);
    if (st == PT_OK && memplan_peak_bytes(be) > 0)
        log_info("peak device memory: %zu bytes (%.0f MiB; plan %.0f MiB)\n", memplan_peak_bytes(be),
                 memplan_peak_bytes(be) / 1048576.0, t.plan.total / 1048576.0);
    trainer_watch_end(&t, st);
    trainer_free(&t);
    return st;
}
