/* train.c — the training loop, readable top to bottom in train_run():
 *   load the model and its tokenizer; read, tokenize and split the data; create the adapters;
 *   then for each optimizer step: gather gradient_accumulation_steps micro-batches, count their
 *   target tokens across all ranks, run forward+backward on each (the loss is the mean over all
 *   those tokens, as transformers computes it) while gradsync accumulates the gradients and sums
 *   them across ranks in buckets as layers finish, clip, AdamW; log every logging_steps (with
 *   the slowest rank and the time spent communicating), compare the replicas' checksums;
 *   evaluate; rank 0 writes the final adapter. A rank that fails inside the loop ends the job
 *   (dist_fail_fast), since the others are already waiting in the step's collectives. */
#include "ptrain/train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/adapter.h"
#include "ptrain/dataset.h"
#include "ptrain/gradsync.h"
#include "ptrain/log.h"
#include "ptrain/model_io.h"
#include "ptrain/optimizer.h"
#include "ptrain/progress.h"
#include "ptrain/schedule.h"
#include "ptrain/step.h"

typedef struct {
    const pt_config *cfg;
    const pt_dist *d;
    pt_backend *be;
    char model_path[4096];
    pt_tokenizer *tok;
    pt_model m;
    pt_lora l;
    pt_dataset train, eval;
    pt_sampler sampler;
    long epoch;
    size_t next_batch;
    lr_schedule sched;
    progress p;
    gradsync sync;
    int64_t step;      /* the optimizer step running (0-based) */
    int64_t fail_step; /* PTRAIN_TEST_FAIL_STEP (see on_layer_done); 0: none */
} trainer;

static pt_status load_model(trainer *t)
{
    pt_load_options lo = {.load_in_4bit = t->cfg->load_in_4bit};
    return model_load(t->cfg->model_name, t->cfg->revision, &lo, t->be, &t->m, &t->tok, t->model_path,
                      sizeof t->model_path);
}

static pt_status load_data(trainer *t)
{
    if (t->cfg->n_datasets == 0)
        return ERR(PT_ERR_USER, "%s: no dataset given; add e.g.\ndataset:\n  - name: \"yahma/alpaca-cleaned\"",
                   t->cfg->path);
    TRY(dataset_prepare(t->cfg, t->tok, log_warn_stream(), &t->train, &t->eval));
    if (t->d->rank == 0) dataset_report(&t->train, stdout);
    TRY(sampler_init(&t->sampler, t->train.n, t->d->rank, t->d->world, t->cfg->per_device_train_batch_size));
    t->epoch = 0;
    return sampler_epoch(&t->sampler, (uint64_t)t->cfg->seed, 0);
}

/* The next micro-batch of this rank, moving to the next epoch when one ends. */
static pt_status next_batch(trainer *t, pt_batch *b)
{
    if (t->next_batch >= sampler_batches(&t->sampler)) {
        TRY(sampler_epoch(&t->sampler, (uint64_t)t->cfg->seed, ++t->epoch));
        t->next_batch = 0;
    }
    const size_t *idx;
    size_t n = sampler_batch(&t->sampler, t->next_batch++, &idx);
    int32_t pad = tokenizer_eos(t->tok) >= 0 ? tokenizer_eos(t->tok) : 0;
    return batch_collate(&t->train, idx, n, pad, b);
}

static train_batch view_of(const pt_batch *b, bool packed)
{
    train_batch v = {b->rows, b->cols, b->ids, b->targets, b->pos, packed ? b->segments : NULL};
    return v;
}

static int64_t count_targets(const pt_batch *b)
{
    int64_t n = 0;
    for (int i = 0; i < b->rows * b->cols; i++) n += b->targets[i] != PT_IGNORE_INDEX;
    return n;
}

typedef struct {
    double loss_sum, tokens, grad_norm, lr;
    double compute_s, comm_s; /* this rank's seconds computing and in communication */
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

/* Forward and backward of the step's micro-batches; gradsync accumulates and reduces. */
static pt_status run_micro_batches(trainer *t, int64_t step, pt_batch *mb, float scale, double *loss_sum)
{
    long accum = t->cfg->gradient_accumulation_steps;
    step_options so = {.checkpointing = t->cfg->use_gradient_checkpointing,
                       .lora_dropout = (float)t->cfg->lora_dropout,
                       .layer_done = on_layer_done, .layer_done_arg = t};
    for (long i = 0; i < accum; i++) {
        train_batch v = view_of(&mb[i], t->train.packed);
        int64_t n = 0;
        so.dropout_seed = (uint64_t)t->cfg->seed * 1000003u + (uint64_t)(step * accum + i);
        gradsync_begin_micro(&t->sync, i);
        TRY(step_run(&t->m, &t->l, &v, &so, scale, loss_sum, &n));
    }
    return gradsync_finish(&t->sync);
}

/* One optimizer step: accumulation micro-batches, reduction, clipping, AdamW. */
static pt_status optimizer_step_run(trainer *t, int64_t step, step_result *r)
{
    double t0 = progress_now(), comm = 0;
    long accum = t->cfg->gradient_accumulation_steps;
    pt_batch *mb = calloc((size_t)accum, sizeof *mb);
    TRY_ALLOC(mb);
    pt_status st = PT_OK;
    double tokens = 0, loss_sum = 0;
    for (long i = 0; i < accum && st == PT_OK; i++) {
        st = next_batch(t, &mb[i]);
        if (st == PT_OK) tokens += (double)count_targets(&mb[i]);
    }
    if (st == PT_OK) st = timed_sum(t, &tokens, 1, &comm);
    if (st == PT_OK) st = run_micro_batches(t, step, mb, tokens > 0 ? (float)(1.0 / tokens) : 0.0f, &loss_sum);
    for (long i = 0; i < accum; i++) batch_free(&mb[i]);
    free(mb);
    comm += t->sync.comm_s;
    if (st == PT_OK) st = timed_sum(t, &loss_sum, 1, &comm);
    if (st == PT_OK) st = optimizer_grad_norm(&t->l, &r->grad_norm);
    adamw_options ao = {t->cfg->adam_beta1, t->cfg->adam_beta2, t->cfg->adam_epsilon, t->cfg->weight_decay,
                        t->cfg->max_grad_norm};
    r->lr = schedule_lr(&t->sched, step);
    if (st == PT_OK) st = optimizer_step(&t->l, &ao, r->grad_norm, r->lr, step + 1);
    r->loss_sum = loss_sum;
    r->tokens = tokens;
    r->comm_s = comm;
    r->compute_s = progress_now() - t0 - comm;
    return st;
}

/* Mean loss over the eval set (every rank evaluates all of it; it is small). */
static pt_status evaluate(trainer *t, double *eval_loss)
{
    double sum = 0;
    int64_t n = 0;
    size_t bs = (size_t)t->cfg->per_device_eval_batch_size;
    if (bs > 256) bs = 256;
    for (size_t i = 0; i < t->eval.n; i += bs) {
        size_t idx[256], k = 0;
        for (; k < bs && i + k < t->eval.n; k++) idx[k] = i + k;
        pt_batch b;
        TRY(batch_collate(&t->eval, idx, k, tokenizer_eos(t->tok) >= 0 ? tokenizer_eos(t->tok) : 0, &b));
        train_batch v = view_of(&b, t->eval.packed);
        pt_status st = step_loss(&t->m, &t->l, &v, &sum, &n);
        batch_free(&b);
        TRY(st);
    }
    *eval_loss = n ? sum / (double)n : NAN;
    return PT_OK;
}

static void print_summary(const trainer *t, int threads, int64_t total)
{
    const pt_config *c = t->cfg;
    const pt_model_config *g = &t->m.cfg;
    long eff = c->per_device_train_batch_size * c->gradient_accumulation_steps * t->d->world;
    double act_mb = (double)c->per_device_train_batch_size * (double)c->max_seq_length * g->dim * 4.0 *
                    (c->use_gradient_checkpointing ? g->n_layers + 24.0 : 24.0 * g->n_layers) / 1048576.0;
    log_info("model      %s (%s, %d layers, dim %d, vocab %d, %.1f MB of weights)\n", t->model_path, g->arch,
             g->n_layers, g->dim, g->vocab, (double)t->m.weight_bytes / 1048576.0);
    log_info("backend    %s, %d rank%s x %d thread%s\n", t->be->ops->name, t->d->world, t->d->world > 1 ? "s" : "",
             threads, threads > 1 ? "s" : "");
    double base = (double)g->vocab * g->dim * (g->tied_embeddings ? 1 : 2);
    for (int i = 0; i < g->n_layers; i++)
        for (int w = 0; w < W_COUNT; w++)
            if (t->m.layers[i].w[w].data) base += (double)tensor_numel(&t->m.layers[i].w[w]);
    log_info("lora       r %d, alpha %g, %lld trainable parameters (%.2f%% of the base's %.1fM)\n", t->l.r,
             t->l.alpha, (long long)lora_param_count(&t->l), 100.0 * (double)lora_param_count(&t->l) / base,
             base / 1e6);
    log_info("data       %zu train / %zu eval sequences, %zu train tokens%s\n", t->train.n, t->eval.n,
             dataset_tokens(&t->train), t->train.packed ? " (packed)" : "");
    log_info("batch      %ld per rank x %ld accumulation x %d rank%s = %ld sequences per step; %lld steps\n",
             c->per_device_train_batch_size, c->gradient_accumulation_steps, t->d->world, t->d->world > 1 ? "s" : "",
             eff, (long long)total);
    log_info("memory     about %.0f MB per rank (weights %.0f MB, activations %.0f MB%s)\n",
             (double)t->m.weight_bytes / 1048576.0 + act_mb, (double)t->m.weight_bytes / 1048576.0, act_mb,
             c->use_gradient_checkpointing ? ", gradient checkpointing" : "");
}

/* Settings that run differently from what their name promises get one line each. */
static void warn_settings(const trainer *t)
{
    const pt_config *c = t->cfg;
    if (strstr(c->optim, "8bit"))
        log_warn("optim: %s runs as AdamW with fp32 states (%.1f MB for these adapters; 8-bit states would save "
                 "three quarters of that)", c->optim, 2.0 * 4.0 * (double)lora_param_count(&t->l) / 1048576.0);
}

static pt_status save_adapter(trainer *t)
{
    if (t->d->rank != 0) return PT_OK;
    adapter_info info = {t->model_path, dataset_template_name(t->cfg, t->tok), t->cfg->lora_dropout,
                         t->cfg->use_rslora};
    TRY(adapter_save(t->cfg->final_model_dir, &t->l, &info));
    log_info("adapter    written to %s/adapter.h5 (try: ptrain generate --model %s --adapter %s --chat "
             "--prompt \"...\")\n", t->cfg->final_model_dir, t->model_path, t->cfg->final_model_dir);
    return PT_OK;
}

/* Every rank's adapters must be the same bits; `when` says at which point (for the message). */
static pt_status check_replicas(trainer *t, const char *when)
{
    if (t->d->world == 1) return PT_OK;
    uint64_t hash;
    TRY(lora_checksum(&t->l, &hash));
    char what[64];
    snprintf(what, sizeof what, "adapter %s", when);
    return dist_check_same(t->d, hash, what,
                           "the replicas diverged; this is a bug in ptrain or faulty hardware on this node");
}

typedef struct {
    double loss, tokens, compute_s, comm_s, start;
    int64_t steps;
} log_window;

/* The record of a logging step: loss and tokens/s over the window, the slowest rank's compute
 * time and the mean time in communication per step. */
static pt_status log_progress(trainer *t, int64_t step, int64_t total, const step_result *r, log_window *w)
{
    double now = progress_now(), slowest = 0, comm = w->comm_s;
    int who = 0;
    TRY(dist_max_loc(t->d, w->compute_s, &slowest, &who));
    TRY(dist_sum_f64(t->d, &comm, 1));
    double steps = (double)(w->steps > 0 ? w->steps : 1);
    progress_record rec = {step, total,
                           (double)t->epoch + (double)t->next_batch / (double)sampler_batches(&t->sampler),
                           w->loss / fmax(w->tokens, 1), r->lr, r->grad_norm, w->tokens / fmax(now - w->start, 1e-9),
                           t->d->world, slowest / steps, who, comm / t->d->world / steps};
    *w = (log_window){.start = now};
    return progress_log(&t->p, &rec);
}

static pt_status train_loop(trainer *t, int64_t total)
{
    log_window w = {.start = progress_now()};
    char when[48];
    for (int64_t step = 0; step < total; step++) {
        step_result r;
        t->step = step;
        TRY(optimizer_step_run(t, step, &r));
        w.loss += r.loss_sum;
        w.tokens += r.tokens;
        w.compute_s += r.compute_s;
        w.comm_s += r.comm_s;
        w.steps++;
        if ((step + 1) % t->cfg->logging_steps == 0 || step + 1 == total) {
            TRY(log_progress(t, step + 1, total, &r, &w));
            snprintf(when, sizeof when, "after step %lld", (long long)(step + 1));
            TRY(check_replicas(t, when));
        }
        bool eval_now = t->eval.n && !strcmp(t->cfg->eval_strategy, "steps") && (step + 1) % t->cfg->eval_steps == 0;
        if (eval_now) {
            double el;
            TRY(evaluate(t, &el));
            TRY(progress_eval(&t->p, step + 1, el));
        }
    }
    if (t->eval.n && strcmp(t->cfg->eval_strategy, "no")) {
        double el;
        TRY(evaluate(t, &el));
        TRY(progress_eval(&t->p, total, el));
    }
    return PT_OK;
}

static void trainer_free(trainer *t)
{
    progress_close(&t->p);
    sampler_free(&t->sampler);
    dataset_free(&t->train);
    dataset_free(&t->eval);
    lora_free(&t->l);
    model_free(&t->m);
    tokenizer_free(t->tok);
}

pt_status train_run(const pt_config *cfg, const pt_dist *d, pt_backend *be, int threads)
{
    trainer t = {.cfg = cfg, .d = d, .be = be};
    pt_status st = dist_agree(d, load_model(&t));
    if (st == PT_OK) st = dist_agree(d, load_data(&t));
    if (st == PT_OK) st = dist_agree(d, lora_init(&t.l, &t.m, cfg));
    if (st == PT_OK) st = dist_agree(d, check_replicas(&t, "at the start"));
    gradsync_init(&t.sync, &t.l, d->world, cfg->gradient_accumulation_steps);
    t.fail_step = getenv("PTRAIN_TEST_FAIL_STEP") ? atoll(getenv("PTRAIN_TEST_FAIL_STEP")) : 0;
    int64_t total = 0;
    if (st == PT_OK) {
        total = schedule_total_steps(cfg->max_steps, cfg->num_train_epochs, (int64_t)sampler_batches(&t.sampler),
                                     cfg->gradient_accumulation_steps);
        t.sched = schedule_make(cfg->lr_scheduler_type, cfg->learning_rate, total, cfg->warmup_steps,
                                config_is_set(cfg, "warmup_ratio") ? cfg->warmup_ratio : -1.0);
        print_summary(&t, threads, total);
        warn_settings(&t);
        st = dist_agree(d, progress_open(&t.p, cfg->output_dir, d->rank));
    }
    if (st == PT_OK) {
        st = train_loop(&t, total);
        dist_fail_fast(d, st); /* the other ranks may be inside a collective of the step */
    }
    if (st == PT_OK) st = dist_agree(d, check_replicas(&t, "before saving"));
    if (st == PT_OK) st = dist_agree(d, save_adapter(&t));
    trainer_free(&t);
    return st;
}
