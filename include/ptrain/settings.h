/* settings.h — the types of config.yaml's values: lists, maps, the auto/false/true value, a
 * `dataset:` entry, and one C enum per enum-valued key.
 *
 * Why apart from config.h: the modules the trainer drives (src/data, src/hub, src/export) take
 * their own small option structs made of these values, not the whole configuration, so they
 * include this header instead of config.h. Each enum lists its key's choices in the order of the
 * key's choices array (settings.c, where a _Static_assert ties the count to the array); the
 * array gives a value's text, e.g. config_optim_choices[cfg->optim]. After `ptrain check`, code
 * compares enums, never strings. The device key's enum and names belong to the backend it picks
 * (pt_device and backend_device_names, backend.h). */
#ifndef PTRAIN_SETTINGS_H
#define PTRAIN_SETTINGS_H

#include <stdbool.h>

typedef struct {
    char **items;
    int n;
} pt_strlist;

typedef struct {
    char **keys;
    char **values;
    int n;
    char *tag; /* model_parameters only: the peer's string form, an Ollama size tag such as "8b" */
} pt_strmap;

/* A value that is auto, false or true (assistant_only_loss). */
typedef enum { PT_AUTO = -1, PT_FALSE = 0, PT_TRUE = 1 } pt_tristate;

/* resume_from_checkpoint: false, true (newest in output_dir) or a path. */
typedef struct {
    bool on;
    char *path; /* NULL when on means "newest complete checkpoint in output_dir" */
} pt_resume;

/* use_gradient_checkpointing: false (every layer's activations kept), true (each layer's input kept,
 * the layer run again before its backward) or "unsloth" (the same, with the layer inputs in host
 * memory, copied while the GPU computes). A boolean key's value, or 2. */
typedef enum { PT_CKPT_OFF, PT_CKPT_ON, PT_CKPT_OFFLOAD } pt_checkpointing;
extern const char *const config_checkpointing_names[3]; /* "false", "true", "unsloth" */

/* dtype: the compute dtype on a GPU. */
typedef enum { COMPUTE_AUTO, COMPUTE_FLOAT16, COMPUTE_BFLOAT16, COMPUTE_FLOAT32, COMPUTE_DTYPE_COUNT } pt_compute_dtype;
/* lora_bias (only none is accepted). */
typedef enum { LORA_BIAS_NONE, LORA_BIAS_ALL, LORA_BIAS_LORA_ONLY, LORA_BIAS_COUNT } pt_lora_bias;
/* PEFT's init_lora_weights (config_check.c reads the text): true, false, "gaussian", "pissa", "pissa_niter_N"
 * or "olora" */
typedef enum {
    LORA_INIT_TRUE,
    LORA_INIT_FALSE,
    LORA_INIT_GAUSSIAN,
    LORA_INIT_PISSA,
    LORA_INIT_OLORA,
    LORA_INIT_PISSA_NITER
} pt_lora_init;
/* optim: every one runs as AdamW with fp32 states; the 8-bit names say so with a warning. */
typedef enum {
    OPTIM_ADAMW_8BIT,
    OPTIM_ADAMW_BNB_8BIT,
    OPTIM_PAGED_ADAMW_8BIT,
    OPTIM_ADAMW_TORCH,
    OPTIM_ADAMW_TORCH_FUSED,
    OPTIM_ADAMW,
    OPTIM_PAGED_ADAMW_32BIT,
    OPTIM_COUNT
} pt_optim;
/* lr_scheduler_type: transformers' schedules of those names (schedule.h). */
typedef enum {
    SCHED_LINEAR,
    SCHED_COSINE,
    SCHED_CONSTANT,
    SCHED_CONSTANT_WITH_WARMUP,
    SCHED_COSINE_WITH_RESTARTS,
    SCHED_POLYNOMIAL,
    SCHED_COSINE_WITH_MIN_LR,
    SCHED_COUNT
} pt_lr_scheduler;
/* lr_scheduler_kwargs, resolved (config_check.c): the arguments of transformers' schedules, each at
 * its default where the schedule takes it and the config does not give it. */
typedef struct {
    double num_cycles;  /* cosine (0.5), cosine_with_restarts (1), cosine_with_min_lr (0.5) */
    double lr_end;      /* polynomial: the final learning rate (1e-7) */
    double power;       /* polynomial (1.0) */
    double min_lr_rate; /* cosine_with_min_lr: the final learning rate over the peak (min_lr / learning_rate) */
} pt_sched_args;
/* metric_for_best_model: the metrics ptrain evaluates (a name without eval_ gets it, as in
 * transformers); eval_perplexity is exp(eval_loss). */
typedef enum { METRIC_EVAL_LOSS, METRIC_EVAL_PERPLEXITY, METRIC_COUNT } pt_metric;
/* save_strategy and eval_strategy (one choices array, so one enum). */
typedef enum { STRATEGY_NO, STRATEGY_STEPS, STRATEGY_EPOCH, STRATEGY_COUNT } pt_strategy;
/* hub_strategy. */
typedef enum {
    HUB_STRATEGY_EVERY_SAVE,
    HUB_STRATEGY_END,
    HUB_STRATEGY_CHECKPOINT,
    HUB_STRATEGY_ALL_CHECKPOINTS,
    HUB_STRATEGY_COUNT
} pt_hub_strategy;
/* model_read: how the ranks of several nodes get the weights: the first rank of each node reads the
 * model files (per_node), or rank 0 alone reads them and sends the loaded weights (broadcast). */
typedef enum { MODEL_READ_PER_NODE, MODEL_READ_BROADCAST, MODEL_READ_COUNT } pt_model_read;
/* method: what is trained and how (TRL's trainers of those names; the table in method.h). */
typedef enum {
    METHOD_SFT,
    METHOD_CPT,
    METHOD_DPO,
    METHOD_ORPO,
    METHOD_CPO,
    METHOD_KTO,
    METHOD_REWARD,
    METHOD_GRPO,
    METHOD_COUNT
} pt_method;
/* A dataset entry's format: the reader of files whose extension names none. */
typedef enum { DATASET_JSON, DATASET_JSONL, DATASET_PARQUET, DATASET_CSV, DATASET_FORMAT_COUNT } pt_dataset_format;

/* The choices of each enum-valued key, NULL-terminated, indexed by its enum (settings.c). */
extern const char *const config_dtype_choices[];
extern const char *const config_bias_choices[];
extern const char *const config_optim_choices[];
extern const char *const config_sched_choices[];
extern const char *const config_metric_choices[];
extern const char *const config_strategy_choices[];
extern const char *const config_hub_strategy_choices[];
extern const char *const config_format_choices[];
extern const char *const config_model_read_choices[];
extern const char *const config_method_choices[];
/* report_to's names (a list key, not an enum): "none", "all", "tensorboard", then the services */
extern const char *const config_report_choices[];

/* One `dataset:` entry. */
typedef struct {
    char *name; /* HF dataset id (resolved in the local HF cache) or a local file/dir */
    char *split_type;
    char *config_name; /* a Hub dataset's configuration (subset): its folder, e.g. CONFIG/train-*.parquet */
    char *revision;    /* an HF dataset id's revision in the HF cache (a branch or tag under refs/, or a commit) */
    pt_strlist data_files;
    pt_dataset_format format;
    pt_strmap rename;
    bool filter_data;
    char *filter_column_value;
    char *filter_value;
    long num_samples; /* -1: all rows */
    bool shuffle;
    long seed;
    int line; /* where this entry starts in the config file */
} pt_dataset_config;

#endif
