/* checkpoint.h — training checkpoints: one HDF5 file per checkpoint, output_dir/checkpoint-<step>.h5,
 * holding everything an exact resume needs (docs/checkpoint-format.md): the adapters, AdamW's
 * moments, the step, the position in the epoch's data order, the seeds, the run's shape, the
 * config, the base model's identity, the metric history, Slurm's job id.
 *
 * Only rank 0 reads and writes these files. A checkpoint is written under a temporary name in
 * output_dir, synced, and renamed into place; its first 512 bytes (an HDF5 user block, which HDF5
 * tools skip) are written last and hold the completion mark: the file's size and the CRC-32 of
 * everything after the block. A file whose mark is missing or does not match is incomplete or
 * damaged and is never handed to the HDF5 library for more than that. Every tensor dataset also
 * carries HDF5's Fletcher-32 checksum, so h5py and h5dump verify what they read. */
#ifndef PTRAIN_CHECKPOINT_H
#define PTRAIN_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"
#include "ptrain/settings.h"

#define CKPT_FORMAT "ptrain-checkpoint"
#define CKPT_VERSION 1
#define CKPT_USERBLOCK 512

/* Where each LoRA matrix lives in the flat arrays of a ckpt_state, in layer order. */
typedef struct {
    char name[128]; /* PEFT name, e.g. base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight */
    int64_t rows, cols, offset; /* offset: in floats, into ckpt_state.params/exp_avg/exp_avg_sq */
} ckpt_entry;

typedef struct {
    ckpt_entry *e;
    int n;
    int64_t total; /* floats in each flat array */
} ckpt_layout;

/* One evaluation: the metric that picks the best model, at a step. */
typedef struct {
    int64_t step;
    double value;
} ckpt_eval;

/* Everything in a checkpoint. Strings are fixed arrays so the struct (less its pointers) can be
 * sent to the other ranks as bytes. A config choice is held as its enum and stored as its name
 * (settings.h's arrays); reading a name this ptrain does not know is an error naming it. */
typedef struct {
    /* what wrote it */
    char ptrain_version[32];
    int64_t format_version;
    bool complete; /* read only: the completion mark was found and matched */
    /* where training stands */
    int64_t global_step;   /* optimizer steps done (= AdamW's step count = the schedule position) */
    int64_t total_steps;   /* the run's planned steps when saved */
    int64_t epoch;         /* epoch of the data order in use */
    int64_t examples_seen; /* entries of that epoch's permutation already consumed by all ranks */
    int64_t n_train;       /* training sequences (after split and packing) */
    uint64_t data_hash;    /* FNV-1a over every training token id and label */
    double epoch_float;    /* epoch + fraction done, as logged */
    double last_loss, last_lr;
    /* the logging window in progress (so the resumed run logs the same averages) */
    double window_loss, window_tokens;
    int64_t window_steps;
    /* random state: the data order is seeded by seed + epoch, dropout by seed and the step */
    int64_t seed;
    /* the run's shape and the settings a resume compares */
    int64_t world_size, per_device_batch, accumulation, max_steps, logging_steps, warmup_steps;
    double learning_rate, num_train_epochs;
    pt_lr_scheduler lr_scheduler_type;
    uint64_t config_hash;
    char config_path[1024];
    /* the base model */
    char model_path[1024];
    char model_arch[32];
    int64_t model_bytes, model_layers, model_dim, model_vocab;
    uint64_t model_fingerprint;
    /* LoRA */
    int64_t lora_r, lora_layers;
    double lora_alpha, lora_scale, lora_dropout;
    bool use_rslora;
    bool use_dora; /* PEFT's DoRA: the layout has each pair's magnitudes after its A and B */
    char target_modules[256];
    char lora_select[4096]; /* PEFT's selectors (adapter.h: pt_adapter.select) as JSON; "": none */
    char lora_init[24];     /* "pissa", "pissa_niter_N", "olora": the adapters apply to the residual base; "": the original */
    char chat_template[64];
    /* best model and early stopping */
    pt_metric metric_for_best_model;
    bool greater_is_better, has_best;
    double best_metric;
    int64_t best_step, patience_counter, n_evals;
    /* Slurm, when the run was under it */
    char slurm_job_id[64], slurm_nodelist[512];
    int64_t slurm_restart_count;
    /* tensors */
    bool model_only; /* save_only_model: no optimizer state; cannot be resumed exactly */
    int64_t n_params;
    /* ---- pointers: not part of the byte image ---- */
    char *config_text; /* the resolved settings as YAML (config_dump), never the file's text */
    ckpt_eval *evals;  /* [n_evals] */
    float *params, *exp_avg, *exp_avg_sq; /* [n_params] each, in layout order (moments NULL if model_only) */
} ckpt_state;

/* Size of the fixed part of ckpt_state (everything before config_text). */
#define CKPT_FIXED_BYTES offsetof(ckpt_state, config_text)

/* Write s as path (dir/checkpoint-N.h5) atomically. PTRAIN_TEST_CRASH_IN_SAVE=N (tests only)
 * makes the process SIGKILL itself halfway through the tensors of the checkpoint of step N. */
pt_status ckpt_write(const char *path, const ckpt_state *s, const ckpt_layout *lay);
/* Check the completion mark: size and CRC-32. PT_OK, or PT_ERR_USER saying "incomplete" or
 * "damaged" and why. */
pt_status ckpt_verify(const char *path);
/* Read a checkpoint (after ckpt_verify). With lay, the tensors are read into s's arrays and must
 * have lay's names and shapes; without, only the metadata is read and every dataset is read once
 * to verify its Fletcher-32 checksum (inspect). */
pt_status ckpt_read(const char *path, const ckpt_layout *lay, ckpt_state *s);
/* The metadata only (after ckpt_verify), no tensors. */
pt_status ckpt_read_meta(const char *path, ckpt_state *s);
void ckpt_state_free(ckpt_state *s);
void ckpt_layout_free(ckpt_layout *lay);

/* The step of a file named checkpoint-<step>.h5 (any directory), or -1. */
int64_t ckpt_step_of(const char *name);
/* The complete-looking checkpoint files of dir (names matching checkpoint-<step>.h5), newest
 * step first; *n gets their count. The caller frees each path and the array. */
pt_status ckpt_list(const char *dir, char ***paths, int64_t **steps, int *n);
/* `ptrain inspect FILE.h5`: print what a checkpoint holds and verify it. */
pt_status ckpt_inspect(const char *path);
/* Whether path starts with a checkpoint's user block (so inspect knows what it was given). */
bool ckpt_is_checkpoint(const char *path);

#endif
