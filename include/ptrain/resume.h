/* resume.h — what checkpoints mean to training (src/train/resume.c): finding the checkpoint to
 * resume from, reading it on rank 0 and sending it to every rank, comparing it with this run,
 * save_total_limit, and the best-model / early-stopping bookkeeping of transformers' Trainer.
 * (The adapters' flat arrays: lora_export and lora_import in lora.h.) */
#ifndef PTRAIN_RESUME_H
#define PTRAIN_RESUME_H

#include "ptrain/checkpoint.h"
#include "ptrain/dist.h"
#include "ptrain/lora.h"
#include "ptrain/settings.h"

/* A cheap identity of the base model at path (a file, or a directory of config.json and
 * *.safetensors): FNV-1a over each file's size and its first and last MiB. */
pt_status resume_model_fingerprint(const char *path, uint64_t *fingerprint, int64_t *bytes);

/* What resume_find reads of the config (resume_options_from_config, config_options.h). */
typedef struct {
    const char *config_path; /* for messages */
    const char *output_dir;
    pt_resume from; /* resume_from_checkpoint */
} resume_options;

/* Rank 0 only: the checkpoint resume_from_checkpoint names (first removing the temporary files
 * of interrupted checkpoint writes from output_dir). true: the newest checkpoint in
 * output_dir that verifies (damaged or incomplete ones are skipped with a warning naming them;
 * none: path[0] = '\0'); a path (with or without .h5, or a checkpoint-N directory name as HF
 * users write it, also relative to output_dir): that file, an error when missing, incomplete or
 * damaged. false: path[0] = '\0'. */
pt_status resume_find(const resume_options *o, char *path, size_t len);
/* Rank 0 reads path (from resume_find; "" on rank 0: nothing to resume, *found = false), first
 * its metadata, compared with this run's now (resume_compare), then its tensors in layout lay;
 * every rank receives the state over MPI. Agreed: every rank returns the same status. */
pt_status resume_load(const pt_dist *d, const char *path, const ckpt_layout *lay, const ckpt_state *now,
                      ckpt_state *s, bool *found);
/* Refuse a checkpoint that does not fit this run (base model, LoRA shape or targets), naming what
 * differs; print (rank 0) the settings that changed and are allowed to. now holds this run's
 * values in the same fields. */
pt_status resume_compare(const char *path, const ckpt_state *then, const ckpt_state *now);
/* save_total_limit: delete the oldest checkpoints of dir beyond the newest limit, never those of
 * steps keep[0..nkeep) (best, resumed-from). Prints a line per deletion. */
pt_status resume_rotate(const char *dir, long limit, const int64_t *keep, int nkeep);

/* Early stopping and the best model, as transformers' EarlyStoppingCallback and
 * Trainer._determine_best_metric: an evaluation first counts against patience (compared with the
 * best so far, with threshold), then becomes the best if it beats it. Lives in ckpt_state's
 * metric fields so it survives a resume. */
typedef struct {
    bool improved;   /* this evaluation is the new best */
    bool stop;       /* patience is exhausted */
} best_result;
pt_status best_record(ckpt_state *s, int64_t step, double value, double threshold, long patience, best_result *r);

#endif
