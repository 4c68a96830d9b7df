/* train_hub.c — what a training run pushes to the Hugging Face Hub and when, as transformers'
 * Trainer does by hub_strategy (docs/hub.md): every_save pushes the adapter (PEFT files + model
 * card) at each checkpoint save and at the end; checkpoint also the newest checkpoint under
 * last-checkpoint/ (so a run can resume from the Hub); all_checkpoints each one under
 * checkpoint-N/; end only the final adapter. With huggingface_save the merged model goes to
 * hf_model_name at the end. Rank 0 only; this file only stages snapshots (a few small files, hard
 * links for checkpoints) and hands them to the upload thread (src/hub), so training never waits
 * for the network and no upload failure fails training: problems become warnings. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/config_options.h"
#include "ptrain/hub.h"
#include "ptrain/log.h"
#include "ptrain/peft.h"
#include "trainer.h"

/* What the adapter files and the model card say of this run (trainer.h); train.c's final adapter
 * uses it too. */
adapter_info trainer_adapter_info(const trainer *t)
{
    adapter_info info = {.base_model = t->model_path, .base_name = t->cfg->model_name,
                         .chat_template = dataset_template_name(t->cfg->chat_template, t->tok), .lora_dropout = t->cfg->lora_dropout,
                         .use_rslora = t->cfg->use_rslora,
                         .best_step = t->cfg->load_best_model_at_end && t->run.has_best ? t->run.best_step : -1,
                         .score = t->head.dim ? t->head.host_w : NULL, .score_dim = t->head.dim};
    return info;
}

pt_status trainer_saved_info(const trainer *t, adapter_info *info, float *host[2])
{
    host[0] = host[1] = NULL;
    for (int i = 0; i < SAVED_COUNT; i++) {
        if (!t->sm.on[i]) continue;
        host[i] = malloc(sizeof(float) * (size_t)(t->sm.rows * t->sm.cols));
        TRY_ALLOC(host[i]);
        TRY(saved_modules_get(&t->sm, i, host[i], NULL, NULL));
        info->saved[i] = host[i], info->saved_name[i] = saved_modules_name(i);
        info->saved_module[i] = saved_modules_module(i);
    }
    info->saved_rows = t->sm.rows, info->saved_cols = t->sm.cols;
    return PT_OK;
}

void trainer_saved_free(float *host[2])
{
    free(host[0]), free(host[1]);
    host[0] = host[1] = NULL;
}

static bool pushing(const trainer *t) { return t->hub != NULL; }

void trainer_hub_start(trainer *t)
{
    if (t->d->rank != 0 || !t->cfg->push_to_hub) return;
    if (hub_queue_start(t->cfg->output_dir, &t->hub) != PT_OK) {
        log_warn("hub: %s; nothing will be pushed", err_message());
        err_clear();
        t->hub = NULL;
    }
}

static void card_for(const trainer *t, int64_t step, const char *what, const char *repo, strbuf *out)
{
    hub_card_info c = {.settings = hub_card_settings_from_config(t->cfg), .repo_id = repo,
                       .chat_template = dataset_template_name(t->cfg->chat_template, t->tok), .what = what, .step = step,
                       .total_steps = t->total, .world = t->d->world, .final_loss = step > 0 ? t->last_loss : NAN,
                       .best_metric = t->run.has_best ? t->run.best_metric : NAN,
                       .best_name = config_metric_choices[t->run.metric_for_best_model], .best_step = t->run.best_step,
                       .n_params = (long)adapter_param_count(&t->l.ad)};
    hub_card_text(&c, out);
}

/* Stage files by fill(), add the card, commit and submit; any failure is a warning. */
typedef pt_status (*stage_fill)(const trainer *t, const hub_stage *s, const void *arg);

static void stage_job(trainer *t, const char *label, const hub_job_meta *meta, const char *card_what, int64_t step,
                      stage_fill fill, const void *arg)
{
    hub_stage s;
    pt_status st = hub_stage_begin(t->cfg->output_dir, label, &s);
    if (st == PT_OK) st = fill(t, &s, arg);
    if (st == PT_OK && card_what) {
        strbuf card = {0};
        card_for(t, step, card_what, meta->repo_id, &card);
        st = hub_stage_write(&s, "README.md", sb_text(&card), card.len);
        sb_free(&card);
    }
    if (st == PT_OK) st = hub_stage_commit(&s, meta);
    if (st == PT_OK) {
        hub_queue_submit(t->hub, &s);
        return;
    }
    log_warn("hub: cannot stage %s for the Hub (training goes on): %s", meta->what, err_message());
    err_clear();
    hub_stage_remove(s.dir);
    hub_stage_free(&s);
}

static pt_status fill_live_adapter(const trainer *t, const hub_stage *s, const void *arg)
{
    (void)arg;
    adapter_info info = trainer_adapter_info(t);
    info.best_step = -1; /* the adapter as it stands at this step */
    float *host[2];
    pt_status st = trainer_saved_info(t, &info, host);
    if (st == PT_OK) st = peft_save(s->files, &t->l.ad, &info);
    trainer_saved_free(host);
    return st;
}

static pt_status fill_final_adapter(const trainer *t, const hub_stage *s, const void *arg)
{
    (void)arg;
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_config.json", t->cfg->final_model_dir);
    TRY(hub_stage_link(s, path, "adapter_config.json"));
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", t->cfg->final_model_dir);
    return hub_stage_link(s, path, "adapter_model.safetensors");
}

static pt_status fill_checkpoint(const trainer *t, const hub_stage *s, const void *arg)
{
    const char *const *paths = arg; /* checkpoint file, repo path */
    (void)t;
    return hub_stage_link(s, paths[0], paths[1]);
}

static pt_status fill_merged(const trainer *t, const hub_stage *s, const void *arg)
{
    (void)arg;
    char dir[4200];
    if (t->cfg->merged_save_dir) snprintf(dir, sizeof dir, "%s", t->cfg->merged_save_dir);
    else snprintf(dir, sizeof dir, "%s/merged", t->cfg->final_model_dir);
    return hub_stage_link_dir(s, dir, "");
}

static void stage_checkpoint(trainer *t, int64_t step, const char *ckpt_path)
{
    bool last = t->cfg->hub_strategy == HUB_STRATEGY_CHECKPOINT;
    char label[64], repo_path[128], what[128], key[64], msg[128];
    const char *slash = strrchr(ckpt_path, '/');
    snprintf(label, sizeof label, last ? "last-checkpoint-%lld" : "checkpoint-%lld", (long long)step);
    snprintf(key, sizeof key, last ? "last-checkpoint" : "checkpoint-%lld", (long long)step);
    snprintf(repo_path, sizeof repo_path, "%s/%s", last ? "last-checkpoint" : label, slash ? slash + 1 : ckpt_path);
    snprintf(what, sizeof what, "checkpoint %lld (%s/)", (long long)step, last ? "last-checkpoint" : label);
    snprintf(msg, sizeof msg, "Training in progress, checkpoint %lld", (long long)step);
    const char *del[] = {"last-checkpoint/*", NULL}, *paths[] = {ckpt_path, repo_path};
    hub_job_meta m = {.repo_id = t->cfg->hub_model_id, .message = msg, .key = key, .what = what,
                      .private_repo = t->cfg->hub_private, .del = last ? del : NULL};
    stage_job(t, label, &m, NULL, step, fill_checkpoint, paths);
}

void trainer_hub_save(trainer *t, int64_t step, const char *ckpt_path)
{
    if (!pushing(t) || t->cfg->hub_strategy == HUB_STRATEGY_END) return;
    char label[64], what[64], msg[96];
    snprintf(label, sizeof label, "adapter-step-%lld", (long long)step);
    snprintf(what, sizeof what, "the adapter at step %lld", (long long)step);
    snprintf(msg, sizeof msg, "Training in progress, step %lld", (long long)step);
    hub_job_meta m = {.repo_id = t->cfg->hub_model_id, .message = msg, .key = "adapter", .what = what,
                      .private_repo = t->cfg->hub_private};
    stage_job(t, label, &m, "adapter", step, fill_live_adapter, NULL);
    if (t->cfg->hub_strategy == HUB_STRATEGY_CHECKPOINT || t->cfg->hub_strategy == HUB_STRATEGY_ALL_CHECKPOINTS)
        stage_checkpoint(t, step, ckpt_path);
}

void trainer_hub_end(trainer *t, pt_status st, int64_t last_step)
{
    if (!pushing(t)) return;
    if (st == PT_OK) {
        hub_job_meta m = {.repo_id = t->cfg->hub_model_id, .message = t->cfg->commit_message ? t->cfg->commit_message : "End of training", .key = "adapter",
                          .what = "the final adapter", .private_repo = t->cfg->hub_private};
        stage_job(t, "adapter-final", &m, "adapter", last_step, fill_final_adapter, NULL);
    }
    if (st == PT_OK && t->cfg->huggingface_save && t->cfg->hf_model_name) {
        hub_job_meta m = {.repo_id = t->cfg->hf_model_name, .message = t->cfg->commit_message ? t->cfg->commit_message : "Merged model (base + LoRA)", .key = "merged",
                          .what = "the merged model", .private_repo = t->cfg->hub_private};
        stage_job(t, "merged", &m, "merged", last_step, fill_merged, NULL);
    }
    /* after a failure or a stop signal nothing is waited for: the jobs stay staged for the resumed
     * run or `ptrain push` */
    hub_queue_finish(t->hub, st == PT_OK ? t->cfg->hub_upload_timeout : 0, stdout);
    t->hub = NULL;
}
