/* settings.c — the names of settings.h's enums, each array in the order of its enum and
 * NULL-terminated: a value's text is choices[value], in config.yaml, `ptrain check`, checkpoints
 * and messages alike. Apart from the key table (config_keys.c) and without its dependencies, so
 * that a reader of stored names (the checkpoint's, src/io) and its fuzz target link them alone. */
#include "ptrain/settings.h"

#include <stddef.h>

const char *const config_dtype_choices[] = {"auto", "float16", "bfloat16", "float32", NULL};
const char *const config_bias_choices[] = {"none", "all", "lora_only", NULL};
const char *const config_optim_choices[] = {"adamw_8bit",    "adamw_bnb_8bit",    "paged_adamw_8bit",
                                            "adamw_torch",   "adamw_torch_fused", "adamw",
                                            "paged_adamw_32bit", NULL};
const char *const config_sched_choices[] = {"linear",     "cosine",   "constant",           "constant_with_warmup",
                                            "cosine_with_restarts", "polynomial", "cosine_with_min_lr", NULL};
const char *const config_metric_choices[] = {"eval_loss", "eval_perplexity", NULL};
const char *const config_strategy_choices[] = {"no", "steps", "epoch", NULL};
const char *const config_hub_strategy_choices[] = {"every_save", "end", "checkpoint", "all_checkpoints", NULL};
const char *const config_format_choices[] = {"json", "jsonl", "parquet", "csv", NULL};
const char *const config_model_read_choices[] = {"per_node", "broadcast", NULL};
const char *const config_method_choices[] = {"sft", "cpt", "dpo", "orpo", "cpo", "kto", "reward", "grpo", NULL};

/* Each count is tied to its enum, and each enum is stored as an int (key_set_scalar). */
#define ENUM_CHOICES(array, type, count)                                                           \
    _Static_assert(sizeof array / sizeof array[0] == (count) + 1, #array ": one name per " #type ", then NULL"); \
    _Static_assert(sizeof(type) == sizeof(int), #type " is stored as an int")
ENUM_CHOICES(config_dtype_choices, pt_compute_dtype, COMPUTE_DTYPE_COUNT);
ENUM_CHOICES(config_bias_choices, pt_lora_bias, LORA_BIAS_COUNT);
ENUM_CHOICES(config_optim_choices, pt_optim, OPTIM_COUNT);
ENUM_CHOICES(config_sched_choices, pt_lr_scheduler, SCHED_COUNT);
ENUM_CHOICES(config_metric_choices, pt_metric, METRIC_COUNT);
ENUM_CHOICES(config_strategy_choices, pt_strategy, STRATEGY_COUNT);
ENUM_CHOICES(config_hub_strategy_choices, pt_hub_strategy, HUB_STRATEGY_COUNT);
ENUM_CHOICES(config_format_choices, pt_dataset_format, DATASET_FORMAT_COUNT);
ENUM_CHOICES(config_model_read_choices, pt_model_read, MODEL_READ_COUNT);
ENUM_CHOICES(config_method_choices, pt_method, METHOD_COUNT);

/* report_to: the names transformers takes; only tensorboard (and all, which means it here) writes
 * anything besides metrics.jsonl, the others get a note (config_notes). */
const char *const config_report_choices[] = {"none",      "all",     "tensorboard", "wandb",  "mlflow",
                                             "comet_ml",  "azure_ml", "clearml",     "codecarbon", "dagshub",
                                             "dvclive",   "flyte",   "neptune",     "swanlab", "trackio", NULL};
const char *const config_checkpointing_names[3] = {"false", "true", "unsloth"};
