/* train_ckpt.c — a training run and its checkpoints: what this run is (model, LoRA, config, run
 * shape, Slurm job), saving where it stands (rank 0 writes, every rank agrees on the outcome),
 * resuming from a checkpoint (rank 0 reads, MPI brings it to every rank), and taking the best
 * checkpoint's adapters at the end (load_best_model_at_end). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/config_options.h"
#include "ptrain/log.h"
#include "ptrain/resume.h"
#include "ptrain/util.h"
#include "trainer.h"

/* Copy a string into a fixed field, cut to fit. */
static void copy_str(char *dst, size_t size, const char *src)
{
    size_t n = src ? strlen(src) : 0;
    if (n >= size) n = size - 1;
    if (n) memcpy(dst, src, n);
    dst[n] = '\0';
}
#define COPY(dst, src) copy_str((dst), sizeof(dst), (src))

/* FNV-1a over each training sequence's length and first 16 ids and labels: cheap, and it changes
 * when the data, the tokenizer, max_seq_length or packing change. */
static uint64_t data_hash(const pt_dataset *ds)
{
    uint64_t h = UTIL_FNV_INIT;
    for (size_t i = 0; i < ds->n; i++) {
        const pt_example *e = &ds->ex[i];
        size_t k = e->len < 16 ? (size_t)e->len : 16;
        h = util_fnv1a(h, &e->len, sizeof e->len);
        h = util_fnv1a(h, e->ids, k * sizeof *e->ids);
        h = util_fnv1a(h, e->labels, k * sizeof *e->labels);
    }
    return h;
}

static void identify_run(trainer *t, ckpt_state *s)
{
    const pt_config *c = t->cfg;
    COPY(s->ptrain_version, PACKAGE_VERSION);
    s->format_version = CKPT_VERSION;
    s->seed = c->seed;
    s->world_size = t->d->world, s->per_device_batch = c->per_device_train_batch_size;
    s->accumulation = c->gradient_accumulation_steps, s->max_steps = c->max_steps;
    s->logging_steps = c->logging_steps, s->warmup_steps = c->warmup_steps;
    s->learning_rate = c->learning_rate, s->num_train_epochs = c->num_train_epochs;
    s->lr_scheduler_type = c->lr_scheduler_type;
    s->config_hash = config_hash(c);
    COPY(s->config_path, c->path);
    s->n_train = (int64_t)t->train.n;
    s->data_hash = data_hash(&t->train);
    s->metric_for_best_model = c->metric_for_best_model;
    s->greater_is_better = c->greater_is_better;
    s->model_only = c->save_only_model;
    COPY(s->slurm_job_id, getenv("SLURM_JOB_ID"));
    COPY(s->slurm_nodelist, getenv("SLURM_JOB_NODELIST"));
    s->slurm_restart_count = getenv("SLURM_RESTART_COUNT") ? atoll(getenv("SLURM_RESTART_COUNT")) : 0;
}

static void identify_model(trainer *t, ckpt_state *s)
{
    const pt_model_config *g = &t->m.cfg;
    COPY(s->model_path, t->model_path);
    COPY(s->model_arch, arch_name(g->arch));
    s->model_layers = g->n_layers, s->model_dim = g->dim, s->model_vocab = g->vocab;
    const pt_adapter *ad = &t->l.ad;
    s->lora_r = ad->r, s->lora_layers = ad->n_layers, s->lora_alpha = ad->alpha, s->lora_scale = ad->scale;
    s->lora_dropout = t->cfg->lora_dropout, s->use_rslora = t->cfg->use_rslora;
    s->use_dora = ad->dora;
    adapter_targets_text(ad->arch, ad->target, s->target_modules, sizeof s->target_modules);
    COPY(s->lora_select, ad->select ? ad->select : ""); /* lora_init refused a longer one */
    char decomp[32];
    adapter_decomp_text(ad, decomp, sizeof decomp);
    COPY(s->lora_init, decomp);
    COPY(s->chat_template, dataset_template_name(t->cfg->chat_template, t->tok));
}

/* One more entry at the layout's end. */
static pt_status layout_add(ckpt_layout *lay, const char *name, int64_t rows, int64_t cols)
{
    ckpt_entry *e = realloc(lay->e, sizeof *e * (size_t)(lay->n + 1));
    TRY_ALLOC(e);
    lay->e = e, e += lay->n++;
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    e->rows = rows, e->cols = cols, e->offset = lay->total;
    lay->total += rows * cols;
    return PT_OK;
}

pt_status trainer_identify(trainer *t)
{
    ckpt_state *s = &t->run;
    memset(s, 0, sizeof *s);
    identify_run(t, s);
    identify_model(t, s);
    t->resumed_from = -1;
    if (s->slurm_job_id[0])
        log_info("slurm      job %s, restart %lld, nodes %s\n", shown_text(s->slurm_job_id).s,
                 (long long)s->slurm_restart_count, s->slurm_nodelist[0] ? shown_text(s->slurm_nodelist).s : "?");
    if (t->d->rank == 0) {
        TRY(config_dump(t->cfg, &s->config_text)); /* the resolved settings, never the file's text */
        TRY(resume_model_fingerprint(t->model_path, &s->model_fingerprint, &s->model_bytes));
    }
    TRY(adapter_layout(&t->l.ad, &t->lay));
    /* reward: the score head after the LoRA matrices, under the name PEFT saves it by; then
     * modules_to_save's embedding and LM head under theirs */
    if (t->head.dim) TRY(layout_add(&t->lay, "base_model.model.score.weight", 1, t->head.dim));
    for (int i = 0; i < SAVED_COUNT; i++)
        if (t->sm.on[i]) TRY(layout_add(&t->lay, saved_modules_name(i), t->sm.rows, t->sm.cols));
    return PT_OK;
}

/* ---- saving ---- */

/* A copy of t->run (sharing its text and evals) with where training stands after step. */
static ckpt_state state_at(const trainer *t, int64_t step)
{
    ckpt_state s = t->run;
    s.global_step = step, s.total_steps = t->total;
    s.epoch = t->epoch;
    s.examples_seen = (int64_t)sampler_seen(&t->sampler, t->next_batch);
    s.epoch_float = (double)t->epoch + (double)s.examples_seen / (double)(t->train.n ? t->train.n : 1);
    s.last_loss = t->last_loss, s.last_lr = t->last_lr;
    s.window_loss = t->w.loss, s.window_tokens = t->w.tokens, s.window_steps = t->w.steps;
    s.n_params = t->lay.total;
    s.params = s.exp_avg = s.exp_avg_sq = NULL;
    return s;
}

static pt_status write_on_root(trainer *t, int64_t step, char *path, size_t len)
{
    ckpt_state s = state_at(t, step);
    size_t bytes = sizeof(float) * (size_t)(t->lay.total + 1);
    s.params = malloc(bytes);
    if (!s.model_only) s.exp_avg = malloc(bytes), s.exp_avg_sq = malloc(bytes);
    pt_status st = s.params && (s.model_only || (s.exp_avg && s.exp_avg_sq)) ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) st = lora_export_all(&t->l, &t->head, &t->sm, &t->lay, s.params, s.exp_avg, s.exp_avg_sq);
    snprintf(path, len, "%s/checkpoint-%lld.h5", t->cfg->output_dir, (long long)step);
    /* AdamW's moments need no check: with every applied gradient finite they cannot be NaN */
    if (st == PT_OK) st = trainer_check_finite(t, s.params, "adapter", path);
    if (st == PT_OK) st = ckpt_write(path, &s, &t->lay);
    free(s.params);
    free(s.exp_avg);
    free(s.exp_avg_sq);
    return st;
}

static pt_status save_on_root(trainer *t, int64_t step)
{
    char path[4200];
    double t0 = progress_now();
    TRY(write_on_root(t, step, path, sizeof path));
    double mb = (double)t->lay.total * 4.0 * (t->cfg->save_only_model ? 1 : 3) / 1048576.0;
    log_info("checkpoint %s written (%.1f MB of tensors in %.2f s)\n", shown_text(path).s, mb, progress_now() - t0);
    trainer_hub_save(t, step, path);
    trainer_watch_saved(t, step);
    int64_t keep[2];
    int nkeep = 0;
    if (t->resumed_from >= 0) keep[nkeep++] = t->resumed_from;
    if (t->cfg->load_best_model_at_end && t->run.has_best) keep[nkeep++] = t->run.best_step;
    return resume_rotate(t->cfg->output_dir, t->cfg->save_total_limit, keep, nkeep);
}

pt_status trainer_save(trainer *t, int64_t step)
{
    TRY(dist_agree(t->d, t->d->rank == 0 ? save_on_root(t, step) : PT_OK));
    t->last_saved = step;
    return PT_OK;
}

/* ---- resuming ---- */

/* Take the position, the log window and the metric history of s. */
static pt_status continue_from(trainer *t, ckpt_state *s)
{
    TRY(sampler_epoch_from(&t->sampler, (uint64_t)t->cfg->data_seed, (long)s->epoch, (size_t)s->examples_seen));
    t->epoch = (long)s->epoch, t->next_batch = 0;
    t->first_step = t->resumed_from = t->last_saved = s->global_step;
    t->last_loss = s->last_loss, t->last_lr = s->last_lr;
    t->w.loss = s->window_loss, t->w.tokens = s->window_tokens, t->w.steps = s->window_steps;
    if (s->metric_for_best_model != t->run.metric_for_best_model ||
        s->greater_is_better != t->run.greater_is_better) {
        log_warn("resume: metric_for_best_model or greater_is_better changed; the best model is tracked anew");
        return PT_OK;
    }
    free(t->run.evals);
    t->run.evals = s->evals, t->run.n_evals = s->n_evals;
    s->evals = NULL;
    t->run.has_best = s->has_best, t->run.best_metric = s->best_metric, t->run.best_step = s->best_step;
    t->run.patience_counter = s->patience_counter;
    return PT_OK;
}

pt_status trainer_resume(trainer *t)
{
    char path[4096] = "";
    resume_options ro = resume_options_from_config(t->cfg);
    TRY(dist_agree(t->d, t->d->rank == 0 ? resume_find(&ro, path, sizeof path) : PT_OK));
    ckpt_state s;
    bool found = false;
    TRY(resume_load(t->d, path, &t->lay, &t->run, &s, &found));
    if (!found) return PT_OK;
    pt_status st = lora_import_all(&t->l, &t->head, &t->sm, &t->lay, s.params, s.exp_avg, s.exp_avg_sq);
    if (st == PT_OK) st = continue_from(t, &s);
    if (st == PT_OK)
        log_info("resume     from %s at step %lld (epoch %.2f, loss %.4f)%s%s\n", shown_text(path).s,
                 (long long)s.global_step, s.epoch_float, s.last_loss,
                 s.slurm_job_id[0] ? ", written by Slurm job " : "", shown_text(s.slurm_job_id).s);
    ckpt_state_free(&s);
    return dist_agree(t->d, st);
}

pt_status trainer_load_best(trainer *t, int64_t last_step)
{
    if (!t->cfg->load_best_model_at_end || !t->run.has_best) return PT_OK;
    log_info("best model step %lld (%s %.6g)%s\n", (long long)t->run.best_step,
             config_metric_choices[t->run.metric_for_best_model],
             t->run.best_metric, t->run.best_step == last_step ? ", the last step" : ": its adapters become the final ones");
    if (t->run.best_step == last_step) return PT_OK;
    char path[4200] = "";
    if (t->d->rank == 0) snprintf(path, sizeof path, "%s/checkpoint-%lld.h5", t->cfg->output_dir, (long long)t->run.best_step);
    TRY(dist_agree(t->d, t->d->rank == 0 ? ckpt_verify(path) : PT_OK));
    ckpt_state s;
    bool found = false;
    TRY(resume_load(t->d, path, &t->lay, &t->run, &s, &found));
    pt_status st = found ? lora_import_all(&t->l, &t->head, &t->sm, &t->lay, s.params, NULL, NULL) : PT_OK;
    ckpt_state_free(&s);
    return dist_agree(t->d, st);
}
