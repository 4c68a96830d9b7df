/* hub.h — publishing to the Hugging Face Hub (docs/hub.md). Rank 0 stages what a push sends as a
 * job directory under output_dir/hub/ (NNNNNN-label/files/ laid out as in the repository, plus
 * job.json, written last), and a worker thread uploads the jobs in order with libcurl, speaking the
 * Hub's HTTP API as huggingface_hub does. Training never waits for it; at the end the program waits
 * up to hub_upload_timeout seconds (less when the Hub is unreachable or a signal comes), then
 * reports what went up and, for the rest, the `hf upload` command that finishes the job from a
 * machine with internet (`ptrain push OUTPUT_DIR` does the same). A job directory that uploaded is
 * removed, so output_dir/hub/ holds exactly what is still to push. The token (HF_TOKEN, else
 * huggingface_hub's token file) is never printed or written. */
#ifndef PTRAIN_HUB_H
#define PTRAIN_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ptrain/error.h"
#include "ptrain/settings.h"
#include "ptrain/util.h"

/* ---- staging a job (hub_stage.c) ---- */

typedef struct {
    char *dir;   /* output_dir/hub/NNNNNN-label */
    char *files; /* dir/files: the repository's layout */
} hub_stage;

/* What job.json says: where the files go and what the commit is called. key: a newer job with the
 * same key and repository supersedes an older one still waiting (the adapter at the repository
 * root, the last-checkpoint/ folder); del: patterns (fnmatch, as `hf upload --delete`) of the
 * repository files the commit deletes unless it sends them again (the checkpoint strategy: every
 * file under last-checkpoint/); NULL-terminated, may be NULL. */
typedef struct {
    const char *repo_id, *message, *key, *what;
    bool private_repo;
    const char *const *del;
} hub_job_meta;

/* Create output_dir/hub/NNNNNN-label/files/ with the next free number. */
pt_status hub_stage_begin(const char *output_dir, const char *label, hub_stage *s);
/* Put the file src at repo_path in the job: a hard link (files are written atomically, so a later
 * save or a rotation cannot change or delete the staged copy), else a copy. */
pt_status hub_stage_link(const hub_stage *s, const char *src, const char *repo_path);
/* Every regular file of the directory src (not recursive) under the job's repo_dir ("" = root). */
pt_status hub_stage_link_dir(const hub_stage *s, const char *src, const char *repo_dir);
/* Write data as repo_path in the job. */
pt_status hub_stage_write(const hub_stage *s, const char *repo_path, const void *data, size_t n);
/* Write job.json: from now on the job is complete. */
pt_status hub_stage_commit(const hub_stage *s, const hub_job_meta *meta);
/* Remove the job directory (an aborted stage, or an uploaded job): job.json first. */
void hub_stage_remove(const char *dir);
/* A run that starts over (overwrite_output_dir): remove every job directory under output_dir/hub,
 * complete or not, so no push of the earlier run is made by this one; output_dir/hub goes too when
 * nothing else is left in it. Only where no other process stages (a run's start, under the lock).
 * Returns how many complete jobs (pushes not made) were dropped. */
int hub_jobs_discard(const char *output_dir);
void hub_stage_free(hub_stage *s);

/* ---- the upload queue (hub_worker.c) ---- */

typedef struct hub_queue hub_queue;

/* Start the worker for output_dir; complete jobs left by an earlier run go first (half-made ones
 * are removed). Without a token (or a thread) no worker starts: a warning says how to give one, and
 * the jobs are only staged, for the report and `ptrain push`. Fails only when out of memory. */
pt_status hub_queue_start(const char *output_dir, hub_queue **q);
/* Hand a committed stage to the worker (s is freed; the worker owns the directory now). A job
 * still waiting with the same key is dropped and its directory removed. */
void hub_queue_submit(hub_queue *q, hub_stage *s);
/* Wait up to timeout_s for the queue to drain (a SIGTERM/SIGINT ends the wait at once, and so does
 * an unreachable Hub), stop the worker, print to out what was uploaded and, for what was not, the
 * commands to finish by hand. Returns how many jobs are left. */
int hub_queue_finish(hub_queue *q, double timeout_s, FILE *out);

/* ---- what is still to upload (hub_jobs.c), for `ptrain status` ---- */

typedef struct {
    char *repo_id, *what, *message; /* where it goes, what it is ("checkpoint 200"), the commit's title */
} hub_waiting;

/* The complete jobs staged under output_dir/hub and not uploaded yet, in order; *n their count.
 * Read only: works on the directory of a run that is still uploading. */
pt_status hub_waiting_list(const char *output_dir, hub_waiting **jobs, int *n);
void hub_waiting_free(hub_waiting *jobs, int n);

/* ---- the model card (hub_card.c) ---- */

/* The training settings a card shows (filled from the config by hub_card_settings_from_config,
 * config_options.h; the strings and entries are the config's). */
typedef struct {
    const char *model_name;
    const pt_dataset_config *datasets; /* names (Hub ids go in the front matter) and num_samples */
    int n_datasets;
    double learning_rate, num_train_epochs;
    const char *lr_scheduler_type, *optim; /* as the config names them */
    long warmup_steps, max_steps, per_device_train_batch_size, gradient_accumulation_steps, max_seq_length;
    bool packing, load_in_4bit, use_rslora;
    long lora_r;
    double lora_alpha, lora_dropout, weight_decay;
    pt_strlist lora_target_modules;
    long seed;
    pt_strlist tags; /* the config's tags: front matter tags after ptrain's own */
} hub_card_settings;

typedef struct {
    hub_card_settings settings;
    const char *repo_id;       /* where the card goes */
    const char *chat_template; /* or NULL */
    const char *what;          /* "adapter" (PEFT LoRA) or "merged" (a full model) */
    int64_t step, total_steps;
    int world;
    double final_loss, best_metric; /* NAN: not known */
    const char *best_name;          /* metric_for_best_model when best_metric is known */
    int64_t best_step;
    long n_params;
} hub_card_info;

/* README.md for the repository: YAML front matter (base_model when the config names a Hub id,
 * library_name, tags) and a body with the base, the data, the settings, the losses and how to use
 * it with ptrain and PEFT. */
void hub_card_text(const hub_card_info *c, strbuf *out);

/* ---- `ptrain push` (hub_push_cmd.c) ---- */

/* `ptrain push OUTPUT_DIR [--repo ID] [--public]` (argv[0] is "push"). */
pt_status hub_push_main(int argc, char **argv);

#endif
