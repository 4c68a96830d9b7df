/* config.h — the typed, validated contents of config.yaml.
 *
 * config_load() reads the YAML with libyaml, converts every known key to its C type, applies the
 * defaults of the Python trainer users come from (see docs/configuration.md), and validates the
 * values one by one and together. Errors name file:line:column, the key, what was expected and
 * what was found. Unknown keys warn with a did-you-mean suggestion. The value types, and the enum
 * that holds each enum-valued key, are in settings.h (device's, pt_device, in backend.h). */
#ifndef PTRAIN_CONFIG_H
#define PTRAIN_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ptrain/backend.h"
#include "ptrain/error.h"
#include "ptrain/repo_id.h"
#include "ptrain/settings.h"

typedef struct {
    char *path; /* the file this came from */

    /* model and precision */
    char *model_name;
    char *revision;
    long max_seq_length;
    bool load_in_4bit;
    bool load_in_8bit;
    pt_compute_dtype dtype;
    bool full_finetuning;
    char *chat_template;
    pt_strmap chat_template_kwargs;
    pt_tristate assistant_only_loss;
    bool train;
    char *device_map;
    pt_device device;
    pt_model_read model_read;
    long threads; /* 0: cores of the node / ranks on the node */

    pt_dataset_config *datasets;
    int n_datasets;

    /* LoRA */
    long lora_r;
    double lora_alpha;
    double lora_dropout;
    pt_lora_bias lora_bias;
    pt_strlist lora_target_modules;
    bool lora_all_linear; /* lora_target_modules was all-linear: the seven llama names, and on a family with more
                           * linear projections (qwen35's Gated DeltaNet) those too, as PEFT's all-linear (lora.c) */
    pt_strlist target_parameters; /* PEFT's: the experts' fused weights (mlp.experts.gate_up_proj, .down_proj) */
    bool output_router_logits;    /* a mixture of experts' aux load-balancing loss added (times the coefficient) */
    double router_aux_loss_coef;
    pt_checkpointing use_gradient_checkpointing;
    long gradient_checkpointing_keep_layers; /* with checkpointing: the last N layers keep their activations */
    long random_state;
    bool use_rslora;
    bool use_dora; /* PEFT's DoRA: a trained magnitude per adapted output row */
    char *lora_model_dir; /* start from this adapter (continued training) */
    /* PEFT's selectors (adapter_select.c): layer numbers, the layer list's name, per-module r and alpha */
    pt_strlist layers_to_transform, layers_pattern;
    long finetune_last_n_layers; /* -1: unset; else layers_to_transform = the last N layers */
    pt_strmap rank_pattern, alpha_pattern;
    char *init_lora_weights; /* PEFT's init_lora_weights as written; its meaning: lora_init */
    pt_strlist modules_to_save; /* PEFT's modules_to_save: embed_tokens, lm_head (trained in full) */
    bool save_embed_tokens, save_lm_head; /* what modules_to_save names (config_check) */
    int targets_moved; /* lora_target_modules' embed_tokens (1) and lm_head (2), moved to modules_to_save */
    pt_lora_init lora_init;
    int lora_init_niter; /* LORA_INIT_PISSA_NITER: N of "pissa_niter_N" */

    /* training */
    long per_device_train_batch_size;
    long gradient_accumulation_steps;
    long warmup_steps;
    double warmup_ratio; /* used when set (config_is_set) */
    double learning_rate;
    double num_train_epochs;
    long max_steps; /* -1: run num_train_epochs */
    pt_optim optim;
    pt_lr_scheduler lr_scheduler_type;
    pt_strmap lr_scheduler_kwargs;
    pt_sched_args sched_args; /* lr_scheduler_kwargs resolved for lr_scheduler_type (config_check.c) */
    double weight_decay;
    bool group_by_length;       /* transformers' LengthGroupedSampler order (sampler.c) */
    double neftune_noise_alpha; /* NEFTune's alpha (transformers' neftune_noise_alpha); 0: no noise */
    double max_grad_norm;
    bool skip_nonfinite_steps; /* skip a step with a non-finite loss or gradient norm instead of stopping */
    double adam_beta1, adam_beta2, adam_epsilon;
    long seed;
    long data_seed; /* the sampler's seed: seed unless given (config_check.c) */
    char *output_dir;
    long logging_steps;
    bool logging_first_step;
    pt_strlist report_to; /* "none", "all", "tensorboard", or services ptrain names and does not send to */
    char *logging_dir;    /* TensorBoard's directory; NULL: output_dir/runs/<run_name> */
    char *run_name;       /* NULL: the start time and host, kept in heartbeat.json across resumes */
    bool packing;
    char *dataset_text_field;
    long per_device_eval_batch_size;

    /* the training method (method.h) and its keys, as TRL's configs name them */
    pt_method method;
    double beta;                    /* DPO/ORPO/CPO/KTO/GRPO: the method's default when unset (method.h) */
    double temperature, top_p;      /* GRPO: sampling, and the log-probs taken at temperature (TRL's) */
    long max_prompt_length;         /* prompt tokens kept (left-truncated, as TRL); 0: no limit */
    long max_completion_length;     /* completion tokens kept (right-truncated); 0: no limit */
    long num_generations;           /* GRPO: completions per prompt */
    long num_generations_eval;      /* GRPO: ... per eval prompt (default num_generations, TRL's) */
    long num_iterations;            /* GRPO: optimizer steps per generation batch (TRL's mu) */
    double epsilon, epsilon_high;   /* GRPO: the ratio clipped to [1 - epsilon, 1 + epsilon_high] (TRL's) */
    long top_k;                     /* GRPO: sample among the top_k most probable tokens; 0: all */
    double desirable_weight, undesirable_weight; /* KTO */
    double center_rewards_coefficient;           /* reward: TRL's RewardConfig key; 0 (unset): none */
    double embedding_learning_rate; /* CPT: the embedding and LM head; 0: learning_rate */
    pt_strlist reward_funcs;        /* GRPO: module:function paths or built-in names */

    /* multi-GPU, checkpoints, evaluation */
    bool ddp_find_unused_parameters;
    pt_strategy save_strategy;
    double save_steps;     /* >= 1: steps; below 1: a fraction of the total steps */
    bool save_only_model;
    long save_total_limit; /* 0: keep all */
    char *final_model_dir;
    pt_resume resume_from_checkpoint;
    bool overwrite_output_dir; /* start over on top of an earlier run's checkpoints (src/train/outdir.c) */
    double val_split_ratio; /* 0: no eval set */
    pt_strategy eval_strategy;
    double eval_steps;
    bool load_best_model_at_end;
    pt_metric metric_for_best_model;
    bool greater_is_better;
    long early_stopping_patience; /* 0: no early stopping */
    double early_stopping_threshold;

    /* publishing (rank 0 only) */
    bool push_to_hub;
    char *hub_model_id;
    pt_hub_strategy hub_strategy;
    bool hub_private;
    double hub_upload_timeout; /* seconds the end of a run waits for its pushes */
    bool huggingface_save;
    char *hf_model_name;
    char *merged_save_dir; /* the merged Hugging Face directory (NULL: final_model_dir/merged) */
    char *imatrix_file;    /* llama.cpp's importance matrix for the GGUF quantizations (NULL: none) */
    bool huggingface_save_gguf;
    pt_strlist quantization_method;
    bool ollama_save;
    char *ollama_model;
    pt_strlist tags;      /* more tags for the model cards pushed to the Hub */
    char *commit_message; /* the title of the end-of-training Hub commits (NULL: ptrain's own) */
    pt_strmap model_parameters;

    unsigned char *is_set; /* one flag per key of the key table: given in the file */
    int *key_line, *key_col; /* where each given key's value starts (1-based) */
} pt_config;

/* Parse and validate the YAML file at path. On failure *cfg is left empty and the error message
 * lists each problem as "path:line:col: key: ...". Warnings are written to warn (may be NULL). */
pt_status config_load(const char *path, pt_config *cfg, FILE *warn);
/* The same for YAML text already in memory; name is used in messages. */
pt_status config_parse(const char *name, const char *text, size_t len, pt_config *cfg, FILE *warn);
/* Checks that depend on the launch: device_map under several ranks. */
pt_status config_validate_launch(const pt_config *cfg, int world_size);
void config_free(pt_config *cfg);

/* Whether report_to asks for TensorBoard's event files (tensorboard, or all). */
bool config_report_tensorboard(const pt_config *cfg);
/* Whether key (a top-level key name, aliases resolved) was given in the file. */
bool config_is_set(const pt_config *cfg, const char *key);
/* The resolved value of a top-level key as text, as `ptrain check` prints it; NULL if unknown. */
char *config_value_text(const pt_config *cfg, const char *key);
/* Print the resolved configuration as a two-column table. */
void config_print(const pt_config *cfg, FILE *out);
/* A 64-bit hash of the resolved configuration (everything config_print shows). */
uint64_t config_hash(const pt_config *cfg);
/* One hash per top-level key, in the order of config_key_names(), of the value config_print shows
 * (the dataset entries' rows for "dataset", a constant for hub_token): what the ranks compare to
 * name the keys they resolved differently. */
void config_key_hashes(const pt_config *cfg, uint64_t *hashes);
/* The names of all top-level keys, NULL-terminated (for tests, docs and config_key_hashes). */
const char *const *config_key_names(void);

/* The resolved settings as YAML text (*yaml, malloc'd), as every checkpoint keeps them: each key of
 * config_print's table with its typed value, the dataset list as a sequence of mappings; it reads
 * back (config_parse) as the same configuration. No token: a token key given in the file reads
 * "(not stored)", and so does any string shaped like a Hugging Face token or holding the value of
 * HF_TOKEN or HUGGING_FACE_HUB_TOKEN. Made with libyaml's emitter (config_dump.c). */
pt_status config_dump(const pt_config *cfg, char **yaml);

/* Edit distance between two short strings, for did-you-mean suggestions. */
int config_edit_distance(const char *a, const char *b);

#endif
