/* config_keys.c — the table of every config.yaml key: type, default, range, and how a scalar
 * becomes a typed value. One table drives parsing, defaults, `ptrain check` and the docs, so a
 * key is declared exactly once. Defaults are those of the Python trainer users come from. Keys are
 * looked up by name here too (key_index, config_is_set, config_key_names). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

#define OFF(field) offsetof(pt_config, field)
#define DOFF(field) offsetof(pt_dataset_config, field)
#define BIG 1e18

/* The choices of the enum-valued keys are settings.c's (settings.h): each enum is stored as an
 * int by key_set_scalar; so is the device key's pt_device, whose names are the backend's. */
_Static_assert(sizeof(pt_device) == sizeof(int), "pt_device is stored as an int");
/* the first seven are all-linear's; phi3's fused qkv_proj and gate_up_proj, granite4's shared MLP
 * (input_linear: gate and up fused; output_linear) and qwen35's DeltaNet projections after them;
 * embed_tokens and lm_head move to modules_to_save, as Unsloth's get_peft_model moves them
 * (config_check.c); a mixture of experts' modules as checkpoints store them one by one (Mixtral's w1, w3, w2, the
 * router gate; Qwen3-MoE's are the MLP names) map to PEFT's target_parameters (lora_moe_names.c) */
static const char *const target_choices[] = {"q_proj",       "k_proj",        "v_proj",      "o_proj",    "gate_proj",
                                             "up_proj",      "down_proj",     "qkv_proj",    "gate_up_proj", "input_linear",
                                             "output_linear", "in_proj_qkv",  "in_proj_z",   "in_proj_b", "in_proj_a",
                                             "out_proj",     "embed_tokens",  "lm_head",     "w1",        "w3",
                                             "w2",           "gate",          NULL};
static const char *const saved_choices[] = {"embed_tokens", "lm_head", NULL};
static const char *const quant_choices[] = {
    "not_quantized", "fast_quantized", "quantized", "f32",    "f16",    "bf16",   "q8_0",
    "q4_k_m",        "q5_k_m",         "q2_k",      "q3_k_l", "q3_k_m", "q3_k_s", "q4_0",
    "q4_1",          "q4_k_s",         "q4_k",      "q5_k",   "q5_0",   "q5_1",   "q5_k_s",
    "q6_k",          NULL};

/* clang-format off */
const key_spec config_keys[] = {
    /* model and precision */
    {"model_name", "model", K_STR, OFF(model_name), "SmolLM2-135M-Instruct.Q4_1.gguf", NULL, 0, 0, 0,
     "HF id (local HF cache), model directory, or .gguf file; default: the embedded SmolLM2"},
    {"revision", NULL, K_STR, OFF(revision), "main", NULL, 0, 0, 0, "HF cache revision of an HF id"},
    {"max_seq_length", NULL, K_INT, OFF(max_seq_length), "2048", NULL, 1, 1 << 24, 0,
     "truncation length of every example, in tokens"},
    {"load_in_4bit", NULL, K_BOOL, OFF(load_in_4bit), "true", NULL, 0, 0, 0,
     "quantize 8/16/32-bit base weights to NF4 on load"},
    {"load_in_8bit", NULL, K_BOOL, OFF(load_in_8bit), "false", NULL, 0, 0, 0,
     "not supported by ptrain (4-bit base only)"},
    {"dtype", NULL, K_ENUM, OFF(dtype), "auto", config_dtype_choices, 0, 0, 0,
     "compute dtype: the GPU computes in bfloat16 (auto, bfloat16), the CPU in float32 (any but float16); float32 "
     "on a GPU and float16 (which needs loss scaling) are refused"},
    {"full_finetuning", NULL, K_BOOL, OFF(full_finetuning), "false", NULL, 0, 0, 0,
     "must stay false: ptrain trains LoRA adapters"},
    {"chat_template", NULL, K_STR, OFF(chat_template), NULL, NULL, 0, 0, 0,
     "chat template: a built-in name, or model (the tokenizer's own); default: the tokenizer's own"},
    {"chat_template_kwargs", NULL, K_STRMAP, OFF(chat_template_kwargs), NULL, NULL, 0, 0, 0,
     "what apply_chat_template passes as keyword arguments, e.g. {enable_thinking: false}"},
    {"assistant_only_loss", "train_on_responses_only", K_TRI, OFF(assistant_only_loss), "auto",
     NULL, 0, 0, 0, "loss only on assistant tokens (auto: when the data has turns)"},
    {"train", NULL, K_BOOL, OFF(train), "true", NULL, 0, 0, 0, "false: skip training and publishing"},
    {"device_map", NULL, K_DEVMAP, OFF(device_map), NULL, NULL, 0, 0, 0,
     "omit, or {\"\": local_rank}; auto/balanced are refused under several ranks"},
    {"device", NULL, K_ENUM, OFF(device), "auto", backend_device_names, 0, 0, 0,
     "backend: auto (CUDA when built and a GPU is visible), cpu or cuda"},
    {"model_read", NULL, K_ENUM, OFF(model_read), "per_node", config_model_read_choices, 0, 0, 0,
     "several nodes: the first rank of each node reads the model files (per_node), or rank 0 reads them and "
     "sends the loaded weights to the other nodes over MPI (broadcast: for filesystems that suffer many readers)"},
    {"threads", NULL, K_INT, OFF(threads), "auto", NULL, 0, 4096, F_AUTO,
     "OpenMP threads per rank; auto = cores of the node / ranks on the node"},
    {"dataset", NULL, K_DATASETS, 0, NULL, NULL, 0, 0, 0, "list of datasets, concatenated"},

    /* LoRA */
    {"lora_r", NULL, K_INT, OFF(lora_r), "16", NULL, 1, 4096, 0, "LoRA rank"},
    {"lora_alpha", NULL, K_FLOAT, OFF(lora_alpha), "16", NULL, 0, BIG, F_MIN_EXCL, "LoRA scale numerator"},
    {"lora_dropout", NULL, K_FLOAT, OFF(lora_dropout), "0", NULL, 0, 1, F_MAX_EXCL,
     "dropout on the LoRA input"},
    {"lora_bias", NULL, K_ENUM, OFF(lora_bias), "none", config_bias_choices, 0, 0, 0,
     "must be none: the 4-bit base has no trainable bias"},
    {"lora_target_modules", NULL, K_STRLIST, OFF(lora_target_modules),
     "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", target_choices, 0, 0, 0,
     "projections that get adapters (or all-linear)"},
    {"use_gradient_checkpointing", NULL, K_BOOL, OFF(use_gradient_checkpointing), "unsloth", NULL, 0,
     0, F_UNSLOTH, "recompute each layer in backward (true); \"unsloth\": also keep the layer inputs in host memory (GPU)"},
    {"gradient_checkpointing_keep_layers", NULL, K_INT, OFF(gradient_checkpointing_keep_layers), "0", NULL, 0, 1 << 20,
     0, "with checkpointing: the last N layers keep their activations and are not recomputed (memory for speed)"},
    {"random_state", NULL, K_INT, OFF(random_state), "3407", NULL, 0, (double)LONG_MAX, 0,
     "seed of the LoRA initialisation"},
    {"use_rslora", NULL, K_BOOL, OFF(use_rslora), "false", NULL, 0, 0, 0,
     "scale alpha/sqrt(r) instead of alpha/r"},
    {"use_dora", NULL, K_BOOL, OFF(use_dora), "false", NULL, 0, 0, 0,
     "PEFT's use_dora (DoRA): each adapted projection's output rows scaled by a trained magnitude over the row "
     "norm of W + scale B A (the norm not differentiated, as PEFT's); saved in PEFT's format with its "
     "lora_magnitude_vector (no adapter.h5, no adapter.gguf); methods sft, cpt, dpo, kto, cpo, orpo and reward "
     "(not grpo), without lora_dropout"},
    {"lora_model_dir", NULL, K_STR, OFF(lora_model_dir), NULL, NULL, 0, 0, 0,
     "start from this adapter (ptrain's or a PEFT directory; same r and targets)"},
    {"target_parameters", NULL, K_STRLIST, OFF(target_parameters), NULL, NULL, 0, 0, 0,
     "PEFT's target_parameters: a mixture of experts' fused expert weights that get adapters "
     "(mlp.experts.gate_up_proj, mlp.experts.down_proj; lora_A [E*r, in], lora_B [out, E*r]) and its router "
     "(mlp.gate.weight); default: none"},
    {"output_router_logits", NULL, K_BOOL, OFF(output_router_logits), "false", NULL, 0, 0, 0,
     "a mixture of experts: add transformers' load-balancing aux loss (router_aux_loss_coef times it) to the loss"},
    {"router_aux_loss_coef", NULL, K_FLOAT, OFF(router_aux_loss_coef), "0.001", NULL, 0, BIG, 0,
     "the aux loss's coefficient (output_router_logits)"},
    {"layers_to_transform", NULL, K_STRLIST, OFF(layers_to_transform), NULL, NULL, 0, 0, 0,
     "PEFT's layers_to_transform: the layer numbers (from 0) that get adapters; default: every layer"},
    {"layers_pattern", NULL, K_STRLIST, OFF(layers_pattern), NULL, NULL, 0, 0, 0,
     "PEFT's layers_pattern (with layers_to_transform): the name of the layer list, \"layers\" in ptrain's models"},
    {"modules_to_save", NULL, K_STRLIST, OFF(modules_to_save), NULL, saved_choices, 0, 0, 0,
     "PEFT's modules_to_save: embed_tokens and/or lm_head trained in full (fp32 copies, AdamW; saved in "
     "adapter_model.safetensors as PEFT saves them); default: none"},
    {"finetune_last_n_layers", NULL, K_INT, OFF(finetune_last_n_layers), "-1", NULL, 1, 1 << 20, F_MINUS1,
     "adapters on the last N layers only (layers_to_transform: those layers); -1: every layer"},
    {"init_lora_weights", NULL, K_STR, OFF(init_lora_weights), "true", NULL, 0, 0, 0,
     "PEFT's init_lora_weights: true (A kaiming-uniform, B zero), false (A and B as nn.Linear starts them: "
     "the adapter changes the model from the start), gaussian (A normal, std 1/r; B zero), pissa (A, B from the base "
     "weight's top-r singular vectors), pissa_niter_N (the same by a randomized SVD of N iterations) or olora "
     "(from its QR); these take the adapter out of the base (W - scale·BA)"},
    {"rank_pattern", NULL, K_STRMAP, OFF(rank_pattern), NULL, NULL, 0, 0, 0,
     "PEFT's rank_pattern: {module regex: r}, matched as PEFT matches it (e.g. {q_proj: 8, \"layers.0.mlp.down_proj\": 4})"},
    {"alpha_pattern", NULL, K_STRMAP, OFF(alpha_pattern), NULL, NULL, 0, 0, 0,
     "PEFT's alpha_pattern: {module regex: alpha}, matched as PEFT matches it"},

    /* training */
    {"per_device_train_batch_size", NULL, K_INT, OFF(per_device_train_batch_size), "2", NULL, 1,
     1 << 20, 0, "examples per rank per micro-step"},
    {"gradient_accumulation_steps", NULL, K_INT, OFF(gradient_accumulation_steps), "2", NULL, 1,
     1 << 20, 0, "micro-steps per optimizer step"},
    {"warmup_steps", NULL, K_INT, OFF(warmup_steps), "50", NULL, 0, (double)LONG_MAX, 0,
     "linear warmup steps (warmup_ratio wins when set)"},
    {"warmup_ratio", NULL, K_FLOAT, OFF(warmup_ratio), NULL, NULL, 0, 1, 0,
     "warmup as a fraction of the total steps"},
    {"group_by_length", NULL, K_BOOL, OFF(group_by_length), "false", NULL, 0, 0, 0,
     "batches of examples of similar length: transformers' LengthGroupedSampler order (megabatches of up to 50 "
     "x batch x accumulation sorted by length, the longest first)"},
    {"neftune_noise_alpha", NULL, K_FLOAT, OFF(neftune_noise_alpha), NULL, NULL, 0, BIG, 0,
     "NEFTune: uniform noise of alpha/sqrt(seq_len*hidden) on the input embeddings while training (transformers' "
     "neftune_noise_alpha; e.g. 5); unset or 0: none"},
    {"learning_rate", NULL, K_FLOAT, OFF(learning_rate), "2e-4", NULL, 0, BIG, F_MIN_EXCL,
     "peak learning rate"},
    {"num_train_epochs", NULL, K_FLOAT, OFF(num_train_epochs), "3", NULL, 0, BIG, F_MIN_EXCL,
     "epochs, used when max_steps is unset"},
    {"max_steps", NULL, K_INT, OFF(max_steps), "-1", NULL, 1, (double)LONG_MAX, F_MINUS1,
     "optimizer steps; wins over num_train_epochs"},
    {"optim", NULL, K_ENUM, OFF(optim), "adamw_8bit", config_optim_choices, 0, 0, 0, "optimizer"},
    {"lr_scheduler_type", NULL, K_ENUM, OFF(lr_scheduler_type), "linear", config_sched_choices, 0, 0, 0,
     "learning-rate schedule"},
    {"lr_scheduler_kwargs", NULL, K_STRMAP, OFF(lr_scheduler_kwargs), NULL, NULL, 0, 0, 0,
     "arguments of the schedule, as transformers names them: num_cycles (cosine, cosine_with_restarts, "
     "cosine_with_min_lr), lr_end and power (polynomial), min_lr or min_lr_rate (cosine_with_min_lr)"},
    {"weight_decay", NULL, K_FLOAT, OFF(weight_decay), "0.01", NULL, 0, BIG, 0, "AdamW weight decay"},
    {"max_grad_norm", NULL, K_FLOAT, OFF(max_grad_norm), "1.0", NULL, 0, BIG, 0,
     "gradient clipping norm (0: off)"},
    {"skip_nonfinite_steps", NULL, K_BOOL, OFF(skip_nonfinite_steps), "false", NULL, 0, 0, 0,
     "skip a step whose loss or gradient norm is NaN/inf (10 in a row stop); false: stop at once"},
    {"adam_beta1", NULL, K_FLOAT, OFF(adam_beta1), "0.9", NULL, 0, 1, F_MAX_EXCL, "AdamW beta1"},
    {"adam_beta2", NULL, K_FLOAT, OFF(adam_beta2), "0.999", NULL, 0, 1, F_MAX_EXCL, "AdamW beta2"},
    {"adam_epsilon", NULL, K_FLOAT, OFF(adam_epsilon), "1e-8", NULL, 0, 1, F_MIN_EXCL, "AdamW epsilon"},
    {"seed", NULL, K_INT, OFF(seed), "3407", NULL, 0, (double)LONG_MAX, 0, "data order and dropout seed"},
    {"data_seed", NULL, K_INT, OFF(data_seed), NULL, NULL, 0, (double)LONG_MAX, 0,
     "the seed of the data order alone (default: seed)"},
    {"output_dir", NULL, K_STR, OFF(output_dir), "outputs", NULL, 0, 0, 0,
     "checkpoints and metrics.jsonl (on the shared filesystem)"},
    {"logging_steps", NULL, K_INT, OFF(logging_steps), "15", NULL, 1, (double)LONG_MAX, 0,
     "log every N optimizer steps"},
    {"logging_first_step", NULL, K_BOOL, OFF(logging_first_step), "false", NULL, 0, 0, 0,
     "also log the first optimizer step (its loss alone)"},
    {"report_to", NULL, K_STRLIST, OFF(report_to), "none", config_report_choices, 0, 0, 0,
     "tensorboard: TensorBoard event files under logging_dir; none (or []): metrics.jsonl only; other services are "
     "named with what ptrain writes instead"},
    {"logging_dir", NULL, K_STR, OFF(logging_dir), NULL, NULL, 0, 0, 0,
     "TensorBoard's directory (default: output_dir/runs/RUN_NAME)"},
    {"run_name", NULL, K_STR, OFF(run_name), NULL, NULL, 0, 0, 0,
     "the run's name, its TensorBoard directory's (default: start time and host, as transformers names its runs; "
     "kept across resumes)"},
    {"packing", NULL, K_BOOL, OFF(packing), "false", NULL, 0, 0, 0,
     "pack several examples into one sequence"},
    {"dataset_text_field", NULL, K_STR, OFF(dataset_text_field), "text", NULL, 0, 0, 0,
     "column of plain-text datasets"},
    {"per_device_eval_batch_size", NULL, K_INT, OFF(per_device_eval_batch_size), NULL, NULL, 1,
     1 << 20, 0, "eval batch per rank (default: the train batch size)"},

    /* the training method (method.h) and its keys, as TRL's configs name them */
    {"method", NULL, K_ENUM, OFF(method), "sft", config_method_choices, 0, 0, 0,
     "what is trained: sft, cpt, dpo, orpo, cpo, kto, reward or grpo (TRL's trainers; docs/training.md)"},
    {"beta", NULL, K_FLOAT, OFF(beta), NULL, NULL, 0, BIG, 0,
     "DPO/ORPO/CPO/KTO/GRPO strength (default: TRL's for the method: 0.1, GRPO 0)"},
    {"max_prompt_length", NULL, K_INT, OFF(max_prompt_length), NULL, NULL, 1, 1 << 24, 0,
     "preference methods: prompt tokens kept, its end (the left is cut); default: no limit"},
    {"max_completion_length", NULL, K_INT, OFF(max_completion_length), NULL, NULL, 1, 1 << 24, 0,
     "preference methods: completion tokens kept (the end is cut); GRPO: tokens generated at most (default: no "
     "limit; GRPO 512)"},
    {"num_generations", NULL, K_INT, OFF(num_generations), "8", NULL, 1, 1 << 20, 0,
     "GRPO: completions sampled per prompt"},
    {"num_generations_eval", NULL, K_INT, OFF(num_generations_eval), NULL, NULL, 1, 1 << 20, 0,
     "GRPO: completions sampled per eval prompt (TRL's; fewer makes evaluation cheaper); default: num_generations"},
    {"num_iterations", NULL, K_INT, OFF(num_iterations), "1", NULL, 1, 1 << 20, 0,
     "GRPO: optimizer steps on each generation batch (TRL's mu)"},
    {"epsilon", NULL, K_FLOAT, OFF(epsilon), "0.2", NULL, 0, 1, F_MIN_EXCL,
     "GRPO: the ratio's clip range below 1 (1 - epsilon), and above it unless epsilon_high is set (TRL's 0.2)"},
    {"epsilon_high", NULL, K_FLOAT, OFF(epsilon_high), NULL, NULL, 0, BIG, F_MIN_EXCL,
     "GRPO: the ratio's clip range above 1 (1 + epsilon_high; DAPO's clip-higher, e.g. 0.28); default: epsilon"},
    {"desirable_weight", NULL, K_FLOAT, OFF(desirable_weight), "1.0", NULL, 0, BIG, F_MIN_EXCL,
     "KTO: weight of the desirable examples' loss"},
    {"undesirable_weight", NULL, K_FLOAT, OFF(undesirable_weight), "1.0", NULL, 0, BIG, F_MIN_EXCL,
     "KTO: weight of the undesirable examples' loss"},
    {"center_rewards_coefficient", NULL, K_FLOAT, OFF(center_rewards_coefficient), NULL, NULL, 0, BIG, 0,
     "reward: weight of the mean squared summed score, which centres the rewards on 0 (default: none)"},
    {"embedding_learning_rate", NULL, K_FLOAT, OFF(embedding_learning_rate), NULL, NULL, 0, BIG, F_MIN_EXCL,
     "CPT: learning rate of modules_to_save (the embedding and LM head; default: learning_rate / 10, as the "
     "seed system)"},
    {"reward_funcs", NULL, K_STRLIST, OFF(reward_funcs), NULL, NULL, 0, 0, 0,
     "GRPO: reward functions, summed: built-ins (exact_answer[:COLUMN], regex:PATTERN, think_format, length) or "
     "Python module:function paths"},
    {"temperature", NULL, K_FLOAT, OFF(temperature), "1.0", NULL, 0, BIG, F_MIN_EXCL,
     "GRPO: sampling temperature (TRL's 1.0); the training log-probs are taken at it too, as TRL's"},
    {"top_p", NULL, K_FLOAT, OFF(top_p), "1.0", NULL, 0, 1, F_MIN_EXCL,
     "GRPO: nucleus sampling, the smallest set of tokens whose probability reaches it (TRL's 1.0: all)"},
    {"top_k", NULL, K_INT, OFF(top_k), "0", NULL, 0, 1 << 24, 0,
     "GRPO: sample among the top_k most probable tokens (ties kept), before top_p, as transformers (TRL's 0: all)"},

    /* multi-GPU, checkpoints, evaluation */
    {"ddp_find_unused_parameters", NULL, K_BOOL, OFF(ddp_find_unused_parameters), "true", NULL, 0,
     0, 0, "accepted; every adapter gradient is reduced every step"},
    {"save_strategy", NULL, K_ENUM, OFF(save_strategy), NULL, config_strategy_choices, 0, 0, 0,
     "when checkpoints are written (default: steps if save_steps is set, else no)"},
    {"save_steps", NULL, K_FLOAT, OFF(save_steps), "100", NULL, 0, BIG, F_MIN_EXCL | F_STEPS,
     "checkpoint every N optimizer steps (below 1: that fraction of the total)"},
    {"save_only_model", NULL, K_BOOL, OFF(save_only_model), "false", NULL, 0, 0, 0,
     "checkpoints without optimizer state (smaller; cannot be resumed exactly)"},
    {"save_total_limit", NULL, K_INT, OFF(save_total_limit), NULL, NULL, 1, (double)LONG_MAX, 0,
     "keep only the N newest checkpoints"},
    {"final_model_dir", NULL, K_STR, OFF(final_model_dir), "lora_model", NULL, 0, 0, 0,
     "where rank 0 writes the final adapter"},
    {"resume_from_checkpoint", NULL, K_RESUME, OFF(resume_from_checkpoint), "false", NULL, 0, 0, 0,
     "true: newest complete checkpoint in output_dir; a path: that one"},
    {"overwrite_output_dir", NULL, K_BOOL, OFF(overwrite_output_dir), "false", NULL, 0, 0, 0,
     "start over in an output_dir that holds an earlier run's checkpoints, removing that run's files first"},
    {"val_split_ratio", NULL, K_FLOAT, OFF(val_split_ratio), NULL, NULL, 0, 1,
     F_MIN_EXCL | F_MAX_EXCL, "fraction of the data held out for evaluation"},
    {"eval_strategy", NULL, K_ENUM, OFF(eval_strategy), "epoch", config_strategy_choices, 0, 0, 0,
     "when the eval set is evaluated"},
    {"eval_steps", NULL, K_FLOAT, OFF(eval_steps), "100", NULL, 0, BIG, F_MIN_EXCL | F_STEPS,
     "evaluate every N optimizer steps (below 1: that fraction of the total)"},
    {"load_best_model_at_end", NULL, K_BOOL, OFF(load_best_model_at_end), "false", NULL, 0, 0, 0,
     "final adapter = best checkpoint by metric_for_best_model"},
    {"metric_for_best_model", NULL, K_ENUM, OFF(metric_for_best_model), "eval_loss", config_metric_choices, 0, 0,
     F_EVAL, "metric that picks the best checkpoint"},
    {"greater_is_better", NULL, K_BOOL, OFF(greater_is_better), "false", NULL, 0, 0, 0,
     "whether a larger metric is better"},
    {"early_stopping_patience", NULL, K_INT, OFF(early_stopping_patience), NULL, NULL, 1,
     (double)LONG_MAX, 0, "stop after N evaluations without improvement"},
    {"early_stopping_threshold", NULL, K_FLOAT, OFF(early_stopping_threshold), "0.0", NULL, 0, BIG,
     0, "smallest improvement that counts"},

    /* publishing */
    {"push_to_hub", NULL, K_BOOL, OFF(push_to_hub), "false", NULL, 0, 0, 0,
     "push adapters to the Hugging Face Hub (token from HF_TOKEN)"},
    {"hub_model_id", NULL, K_STR, OFF(hub_model_id), NULL, NULL, 0, 0, 0, "Hub repository"},
    {"hub_strategy", NULL, K_ENUM, OFF(hub_strategy), "every_save", config_hub_strategy_choices, 0, 0, 0,
     "when to push"},
    {"hub_private", "hf_private", K_BOOL, OFF(hub_private), "true", NULL, 0, 0, 0,
     "create the Hub repository private (ptrain's default: true)"},
    {"hub_upload_timeout", NULL, K_FLOAT, OFF(hub_upload_timeout), "600", NULL, 0, BIG, 0,
     "seconds the end of training waits for pushes still running"},
    {"hub_token", "hf_token", K_SECRET, 0, NULL, NULL, 0, 0, 0,
     "never read from the config: export HF_TOKEN"},
    {"huggingface_save", NULL, K_BOOL, OFF(huggingface_save), "false", NULL, 0, 0, 0,
     "write the merged model (final_model_dir/merged)"},
    {"hf_model_name", NULL, K_STR, OFF(hf_model_name), NULL, NULL, 0, 0, 0, "Hub id of the merged model"},
    {"merged_save_dir", NULL, K_STR, OFF(merged_save_dir), NULL, NULL, 0, 0, 0,
     "where huggingface_save writes the merged model (default: final_model_dir/merged)"},
    {"huggingface_save_gguf", NULL, K_BOOL, OFF(huggingface_save_gguf), "false", NULL, 0, 0, 0,
     "write merged GGUF files (final_model_dir/merged-METHOD.gguf)"},
    {"quantization_method", NULL, K_STRLIST, OFF(quantization_method), "q4_k_m", quant_choices, 0, 0,
     0, "GGUF export types (one or a list)"},
    {"imatrix_file", NULL, K_STR, OFF(imatrix_file), NULL, NULL, 0, 0, 0,
     "llama.cpp's importance matrix (llama-imatrix's .gguf or legacy .dat) weighting the GGUF quantizations "
     "(q4_0, q4_1, q5_0, q5_1 and the k-quants), as llama-quantize --imatrix does"},
    {"ollama_save", NULL, K_BOOL, OFF(ollama_save), "false", NULL, 0, 0, 0,
     "write a Modelfile and create an Ollama model"},
    {"ollama_model", NULL, K_STR, OFF(ollama_model), NULL, NULL, 0, 0, 0, "Ollama model name"},
    {"tags", NULL, K_STRLIST, OFF(tags), NULL, NULL, 0, 0, 0,
     "more tags for the model cards pushed to the Hub (after ptrain, lora, qlora)"},
    {"commit_message", NULL, K_STR, OFF(commit_message), NULL, NULL, 0, 0, 0,
     "the title of the commits of the final adapter and the merged model (default: End of training; Merged model "
     "(base + LoRA))"},
    {"model_parameters", NULL, K_STRMAP, OFF(model_parameters), NULL, NULL, 0, 0, F_TAG,
     "a size tag for the Ollama model's name (\"8b\": ollama_model:8b), or Modelfile PARAMETER lines"},
};
const int config_nkeys = (int)(sizeof config_keys / sizeof config_keys[0]);

/* The seed system's keys (praisonai-train's KNOWN_KEYS) and those of the libraries it passes them
 * to that ptrain has no field for (docs/configuration.md, "Keys ptrain reads but has no field
 * for"); tests/cli/test_known_keys.sh holds every key of the seed's wheel to this table and the one
 * above. */
const foreign_key config_foreign_keys[] = {
    /* data preparation */
    {"dataset_num_proc", NULL,
     "TRL's worker processes for dataset preparation; ptrain tokenizes on its own threads "
     "(threads, OMP_NUM_THREADS), so the value is not used",
     NULL},
    {"dataloader_num_workers", NULL,
     "transformers' worker processes for loading batches; ptrain prepares the data on its own threads "
     "(threads, OMP_NUM_THREADS) before the first step, so the value is not used",
     NULL},
    {"remove_unused_columns", NULL,
     "ptrain reads only the columns its dataset formats use (dataset_text_field, messages, ...) and "
     "passes nothing else to the model, so the value changes nothing",
     NULL},
    /* model access */
    {"trust_remote_code", "false",
     "ptrain runs no code from a model repository: it implements each model family it loads "
     "(docs/models.md)",
     "ptrain runs no code from a model repository (it implements each model family it loads itself, "
     "docs/models.md), so a model that needs its own code cannot be loaded; remove the key or set it to "
     "false"},
    /* LoRA variants of PEFT */
    {"loftq_config", "{}", "no LoftQ, as always in ptrain: the adapters start as PEFT's default (A random, B zero)",
     "PEFT's LoftQ initialization is not implemented in ptrain (its adapters start as PEFT's default: A "
     "random, B zero); remove the key or set it to null"},
    /* training knobs of transformers' TrainingArguments */
    {"fp16", "false", "the GPU computes in bfloat16, the CPU in float32",
     "fp16 mixed precision (with loss scaling) is not implemented in ptrain: the GPU computes in bfloat16, "
     "which needs no loss scaling, and the CPU in float32; remove the key or set it to false"},
    {"bf16", "true", "the GPU computes in bfloat16 (as with bf16: true), the CPU in float32",
     "ptrain's GPU computes in bfloat16 always (float32 or float16 on the GPU is not implemented; the CPU "
     "computes in float32); remove the key or set it to true"},
    {"save_safetensors", "true",
     "adapters and merged models are written as safetensors, as with save_safetensors: true",
     "ptrain writes adapters and merged models only as safetensors (what PEFT and transformers load by "
     "default); remove the key or set it to true"},
    {"training_arguments", "{}", "no TrainingArguments given apart",
     "expected a mapping of transformers' TrainingArguments names to values (those ptrain has are read as if "
     "given at the top level); remove the key or write it as such a mapping"},
    /* export */
    {"save_method", "merged_16bit",
     "huggingface_save writes the merged model in 16 bits (bfloat16), what save_method: merged_16bit asks "
     "for; the adapter is always written to final_model_dir",
     "ptrain always writes the adapter to final_model_dir and, with huggingface_save: true, the merged "
     "model in 16 bits (save_method: merged_16bit); a merged 4-bit model is not written (the GGUF types of "
     "quantization_method are); remove the key"},
    /* vLLM generation and the llama.cpp drafter */
    {"fast_inference", "false", "ptrain has no vLLM generation",
     "fast_inference asks Unsloth to generate with vLLM, which ptrain does not have; remove the key or "
     "set it to false"},
    {"gpu_memory_utilization", NULL,
     "vLLM's share of GPU memory, used with fast_inference, which ptrain does not have; not used",
     NULL},
    {"max_lora_rank", NULL, "vLLM's largest LoRA rank, used with fast_inference, which ptrain does not have; "
     "not used", NULL},
    {"mtp_draft", "false", "no multi-token-prediction drafter",
     "mtp_draft builds a multi-token-prediction drafter for llama.cpp's speculative decoding when "
     "serving; ptrain builds and serves no drafter; remove the key or set it to false"},
    {"mtp_draft_repo", "", "part of mtp_draft, which ptrain does not have",
     "a setting of mtp_draft's drafter, which ptrain does not build or serve; remove the key"},
    {"mtp_draft_file", "", "part of mtp_draft, which ptrain does not have",
     "a setting of mtp_draft's drafter, which ptrain does not build or serve; remove the key"},
    {"spec_draft_n_max", "", "part of mtp_draft, which ptrain does not have",
     "a setting of mtp_draft's speculative decoding, which ptrain does not serve; remove the key"},
};
const int config_nforeign = (int)(sizeof config_foreign_keys / sizeof config_foreign_keys[0]);

const foreign_key *foreign_key_find(const char *name)
{
    for (int i = 0; i < config_nforeign; i++)
        if (!strcmp(config_foreign_keys[i].name, name)) return &config_foreign_keys[i];
    return NULL;
}

static int parse_bool_word(const char *s);

/* Whether value is the one accepted value word: a boolean word matches any spelling of its value. */
static bool foreign_value_is(const yaml_node_t *value, const char *word, size_t len)
{
    if (value->type == YAML_MAPPING_NODE)
        return len == 2 && !memcmp(word, "{}", 2) && value->data.mapping.pairs.top == value->data.mapping.pairs.start;
    if (value->type == YAML_SEQUENCE_NODE)
        return len == 2 && !memcmp(word, "[]", 2) && value->data.sequence.items.top == value->data.sequence.items.start;
    if (value->type != YAML_SCALAR_NODE || len == 0 || len >= 32) return false;
    char w[32];
    memcpy(w, word, len);
    w[len] = '\0';
    const char *text = (const char *)value->data.scalar.value;
    if (strlen(text) != value->data.scalar.length) return false;
    int want = parse_bool_word(w);
    if (want >= 0) return parse_bool_word(text) == want;
    return strcasecmp(text, w) == 0;
}

bool foreign_key_accepts(const foreign_key *fk, const yaml_node_t *value)
{
    if (!fk->accept) return true;
    for (const char *p = fk->accept; *p;) {
        size_t len = strcspn(p, "|");
        if (foreign_value_is(value, p, len)) return true;
        p += len;
        if (*p) p++;
    }
    return false;
}

const key_spec dataset_keys[] = {
    {"name", NULL, K_STR, DOFF(name), NULL, NULL, 0, 0, 0, "HF dataset id or local file/dir"},
    {"split_type", "split", K_STR, DOFF(split_type), "train", NULL, 0, 0, 0, "split name"},
    {"config_name", "subset", K_STR, DOFF(config_name), NULL, NULL, 0, 0, 0,
     "a Hub dataset's configuration: only the files under a folder of that name (CONFIG/train-*.parquet)"},
    {"revision", NULL, K_STR, DOFF(revision), NULL, NULL, 0, 0, 0,
     "an HF dataset id's revision in the HF cache (branch or tag under refs/, or a commit; default main)"},
    {"data_files", NULL, K_STRLIST, DOFF(data_files), NULL, NULL, 0, 0, 0, "explicit files"},
    {"format", NULL, K_ENUM, DOFF(format), "json", config_format_choices, 0, 0, 0, "reader for data_files"},
    {"rename", NULL, K_STRMAP, DOFF(rename), NULL, NULL, 0, 0, 0, "{source_column: destination}"},
    {"filter_data", NULL, K_BOOL, DOFF(filter_data), "false", NULL, 0, 0, 0, "keep matching rows"},
    {"filter_column_value", NULL, K_STR, DOFF(filter_column_value), NULL, NULL, 0, 0, 0,
     "column compared"},
    {"filter_value", NULL, K_STR, DOFF(filter_value), NULL, NULL, 0, 0, 0, "value kept"},
    {"num_samples", NULL, K_INT, DOFF(num_samples), "-1", NULL, 1, (double)LONG_MAX, F_MINUS1,
     "first N rows, before any shuffle"},
    {"shuffle", NULL, K_BOOL, DOFF(shuffle), "false", NULL, 0, 0, 0, "shuffle this dataset"},
    {"seed", NULL, K_INT, DOFF(seed), NULL, NULL, 0, (double)LONG_MAX, 0,
     "shuffle seed (default: top-level seed)"},
};
const int dataset_nkeys = (int)(sizeof dataset_keys / sizeof dataset_keys[0]);
/* clang-format on */

static void *field(const key_spec *spec, void *base) { return (char *)base + spec->offset; }

static bool word_is(const char *a, const char *b) { return strcasecmp(a, b) == 0; }

static int parse_bool_word(const char *s)
{
    static const char *const yes[] = {"true", "yes", "on", "1", "y"};
    static const char *const no[] = {"false", "no", "off", "0", "n"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
        if (word_is(s, yes[i])) return 1;
        if (word_is(s, no[i])) return 0;
    }
    return -1;
}

static bool parse_long(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0') {
        /* integers written as floats, e.g. 1e3 or 100.0, are accepted when exact */
        double d = strtod(s, &end);
        if (end == s || *end != '\0' || !isfinite(d) || d != floor(d) || fabs(d) > 9e18) return false;
        v = (long)d;
    }
    *out = v;
    return true;
}

static bool parse_double(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return false;
    *out = v;
    return true;
}

static bool in_range(const key_spec *spec, double v)
{
    if ((spec->flags & F_MINUS1) && v == -1) return true;
    if (spec->flags & F_MIN_EXCL ? v <= spec->min : v < spec->min) return false;
    if (spec->flags & F_MAX_EXCL ? v >= spec->max : v > spec->max) return false;
    return true;
}

static void list_choices(const char *const *choices, char *out, size_t outlen)
{
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; choices[i] && used < outlen; i++)
        used += (size_t)snprintf(out + used, outlen - used, "%s%s", i ? ", " : "", choices[i]);
}

/* A range's upper end: "" when the words say it (the bounded forms), else " (at most N)". */
static void upper_bound(const key_spec *spec, char *out, size_t outlen)
{
    if (spec->type == K_INT && spec->max >= (double)LONG_MAX)
        snprintf(out, outlen, " (at most %ld)", LONG_MAX);
    else
        snprintf(out, outlen, " (at most %g)", spec->max);
}

void key_expected(const key_spec *spec, char *out, size_t outlen)
{
    char buf[512], most[64];
    upper_bound(spec, most, sizeof most);
    switch (spec->type) {
    case K_INT:
        if (spec->min == 1 && spec->max >= 1e9)
            snprintf(out, outlen, "a positive integer%s", most);
        else if (spec->min == 0 && spec->max >= 1e9)
            snprintf(out, outlen, "a non-negative integer%s", most);
        else
            snprintf(out, outlen, "an integer from %.0f to %.0f", spec->min, spec->max);
        if (spec->flags & F_AUTO) snprintf(out + strlen(out), outlen - strlen(out), " or auto");
        break;
    case K_FLOAT:
        if (spec->flags & F_STEPS)
            snprintf(out, outlen, "a positive integer%s or a fraction below 1 of the total steps", most);
        else if (spec->max >= BIG)
            snprintf(out, outlen, "a %s number%s", spec->flags & F_MIN_EXCL ? "positive" : "non-negative", most);
        else
            snprintf(out, outlen, "a number in %c%g, %g%c", spec->flags & F_MIN_EXCL ? '(' : '[',
                     spec->min, spec->max, spec->flags & F_MAX_EXCL ? ')' : ']');
        break;
    case K_BOOL:
        snprintf(out, outlen, "true or false%s", spec->flags & F_UNSLOTH ? " (or \"unsloth\")" : "");
        break;
    case K_ENUM:
        list_choices(spec->choices, buf, sizeof buf);
        snprintf(out, outlen, "one of %s%s", buf,
                 spec->flags & F_EVAL ? " (the metrics ptrain evaluates; a name without eval_ gets it)" : "");
        break;
    case K_STRLIST:
        if (spec->choices) {
            list_choices(spec->choices, buf, sizeof buf);
            snprintf(out, outlen, "a list of %s", buf);
        } else {
            snprintf(out, outlen, "a string or a list of strings");
        }
        break;
    case K_TRI: snprintf(out, outlen, "auto, true or false"); break;
    case K_RESUME: snprintf(out, outlen, "true, false or a checkpoint path"); break;
    case K_STRMAP:
        snprintf(out, outlen, "%sa mapping of names to values", (spec->flags & F_TAG) ? "a tag such as \"8b\", or " : "");
        break;
    case K_DEVMAP: snprintf(out, outlen, "a device map such as {\"\": 0}"); break;
    case K_DATASETS: snprintf(out, outlen, "a list of datasets, each a mapping with a name"); break;
    default: snprintf(out, outlen, "a string"); break;
    }
}

/* The name an enum's choices are looked up by: text, or with F_EVAL and no eval_ prefix, "eval_"
 * and text (as transformers reads metric_for_best_model), in buf. */
static const char *choice_name(const key_spec *spec, const char *text, char *buf, size_t len)
{
    if (!(spec->flags & F_EVAL) || !strncasecmp(text, "eval_", 5)) return text;
    snprintf(buf, len, "eval_%s", text);
    return buf;
}

static bool fail(const key_spec *spec, const char *text, char *why, size_t whylen)
{
    char expected[512], named[64];
    key_expected(spec, expected, sizeof expected);
    const char *name = choice_name(spec, text, named, sizeof named);
    const char *hint = spec->choices ? choice_suggest(spec->choices, name) : NULL;
    snprintf(why, whylen, "expected %s, found \"%s\"%s%s%s", expected, shown_text(text).s,
             hint ? " (did you mean \"" : "", hint ? hint : "", hint ? "\"?)" : "");
    return false;
}

static void set_string(char **slot, const char *text)
{
    free(*slot);
    *slot = xstrdup(text);
}

static bool set_strlist(const key_spec *spec, pt_strlist *list, const char *text, char *why,
                        size_t whylen)
{
    if (spec->choices == target_choices && word_is(text, "all-linear")) {
        for (int i = 0; i < 7; i++) strlist_push(list, target_choices[i]);
        return true;
    }
    if (spec->choices) {
        int i = 0;
        const char *dot = spec->choices == target_choices ? strrchr(text, '.') : NULL; /* PEFT's suffix match: */
        const char *leaf = dot && dot > text && dot[1] ? dot + 1 : text; /* mlp.experts.gate_proj (lora.c decides) */
        while (spec->choices[i] && strcmp(spec->choices[i], leaf) != 0) i++;
        bool router = word_is(text, "gate") || word_is(text, "mlp.gate");
        if (!spec->choices[i] && spec->choices == saved_choices && router) {
            snprintf(why, whylen, "\"%s\" (a mixture of experts' router trained in full) is not built yet; train the "
                     "router with LoRA instead: target_parameters: [mlp.gate.weight]", shown_text(text).s);
            return false;
        }
        if (!spec->choices[i]) {
            char expected[512];
            list_choices(spec->choices, expected, sizeof expected);
            const char *hint = choice_suggest(spec->choices, text);
            snprintf(why, whylen, "expected items from %s, found \"%s\"%s%s%s", expected, shown_text(text).s,
                     hint ? " (did you mean \"" : "", hint ? hint : "", hint ? "\"?)" : "");
            return false;
        }
    }
    strlist_push(list, text);
    return true;
}

bool key_set_scalar(const key_spec *spec, void *base, const char *text, char *why, size_t whylen)
{
    void *slot = field(spec, base);
    long l;
    double d;
    int b;
    switch (spec->type) {
    case K_STR:
        set_string(slot, text);
        return true;
    case K_INT:
        if ((spec->flags & F_AUTO) && word_is(text, "auto")) {
            *(long *)slot = 0;
            return true;
        }
        if (!parse_long(text, &l) || !in_range(spec, (double)l)) return fail(spec, text, why, whylen);
        *(long *)slot = l;
        return true;
    case K_FLOAT:
        if (!parse_double(text, &d) || !in_range(spec, d)) return fail(spec, text, why, whylen);
        if ((spec->flags & F_STEPS) && d > 1 && d != floor(d)) return fail(spec, text, why, whylen);
        *(double *)slot = d;
        return true;
    case K_BOOL:
        b = parse_bool_word(text);
        if (b < 0 && (spec->flags & F_UNSLOTH) && word_is(text, "unsloth")) b = PT_CKPT_OFFLOAD;
        if (b < 0) return fail(spec, text, why, whylen);
        if (spec->flags & F_UNSLOTH) *(pt_checkpointing *)slot = (pt_checkpointing)b;
        else *(bool *)slot = b;
        return true;
    case K_ENUM: { /* the index of the choice: the value of the key's enum */
        char named[64];
        const char *name = choice_name(spec, text, named, sizeof named);
        for (int i = 0; spec->choices[i]; i++)
            if (word_is(name, spec->choices[i])) {
                *(int *)slot = i;
                return true;
            }
        return fail(spec, text, why, whylen);
    }
    case K_STRLIST:
        /* all-linear: the model decides what else it adds (lora_init). A value replacing one (the list not yet
         * emptied: a scalar, or a sequence's first item) starts unflagged; a sequence's later items add to it */
        if (spec->choices == target_choices && (word_is(text, "all-linear") || ((pt_strlist *)slot)->n))
            ((pt_config *)base)->lora_all_linear = word_is(text, "all-linear");
        strlist_free(slot);
        return set_strlist(spec, slot, text, why, whylen);
    case K_TRI:
        if (word_is(text, "auto")) {
            *(pt_tristate *)slot = PT_AUTO;
            return true;
        }
        b = parse_bool_word(text);
        if (b < 0) return fail(spec, text, why, whylen);
        *(pt_tristate *)slot = b ? PT_TRUE : PT_FALSE;
        return true;
    case K_RESUME: {
        pt_resume *r = slot;
        free(r->path);
        r->path = NULL;
        b = parse_bool_word(text);
        r->on = b != 0;
        if (b < 0) r->path = xstrdup(text);
        return true;
    }
    case K_DEVMAP:
        set_string(slot, text);
        return true;
    default:
        return fail(spec, text, why, whylen);
    }
}

/* Append a double the way a user would write it: 2e-4, 0.01, 16. */
static void text_double(strbuf *out, double v) { sb_printf(out, "%.10g", v); }

void key_value_text(const key_spec *spec, const void *base, strbuf *out)
{
    const void *slot = (const char *)base + spec->offset;
    switch (spec->type) {
    case K_STR:
    case K_DEVMAP: {
        const char *s = *(char *const *)slot;
        sb_printf(out, "%s", s ? s : "(unset)");
        break;
    }
    case K_ENUM: sb_printf(out, "%s", spec->choices[*(const int *)slot]); break;
    case K_INT:
        if ((spec->flags & F_AUTO) && *(const long *)slot == 0)
            sb_printf(out, "auto");
        else if ((spec->flags & F_MINUS1) && *(const long *)slot == -1)
            sb_printf(out, "(unset)");
        else
            sb_printf(out, "%ld", *(const long *)slot);
        break;
    case K_FLOAT: text_double(out, *(const double *)slot); break;
    case K_BOOL:
        if (spec->flags & F_UNSLOTH) sb_printf(out, "%s", config_checkpointing_names[*(const pt_checkpointing *)slot]);
        else sb_printf(out, "%s", *(const bool *)slot ? "true" : "false");
        break;
    case K_TRI: {
        pt_tristate t = *(const pt_tristate *)slot;
        sb_printf(out, "%s", t == PT_AUTO ? "auto" : t == PT_TRUE ? "true" : "false");
        break;
    }
    case K_RESUME: {
        const pt_resume *r = slot;
        sb_printf(out, "%s", r->path ? r->path : r->on ? "true (newest in output_dir)" : "false");
        break;
    }
    case K_STRLIST: {
        const pt_strlist *list = slot;
        if (list->n == 0) sb_printf(out, "(none)");
        for (int i = 0; i < list->n; i++) sb_printf(out, "%s%s", i ? ", " : "", list->items[i]);
        break;
    }
    case K_STRMAP: {
        const pt_strmap *map = slot;
        if (map->tag) sb_printf(out, "%s", map->tag);
        else if (map->n == 0) sb_printf(out, "(none)");
        for (int i = 0; i < map->n; i++)
            sb_printf(out, "%s%s: %s", i ? ", " : "", map->keys[i], map->values[i]);
        break;
    }
    case K_SECRET: sb_printf(out, "(from HF_TOKEN only)"); break;
    case K_DATASETS: break;
    }
}

bool strlist_push(pt_strlist *list, const char *item)
{
    char **grown = realloc(list->items, sizeof *grown * (size_t)(list->n + 1));
    if (!grown) abort();
    list->items = grown;
    list->items[list->n++] = xstrdup(item);
    return true;
}

void strlist_free(pt_strlist *list)
{
    for (int i = 0; i < list->n; i++) free(list->items[i]);
    free(list->items);
    list->items = NULL;
    list->n = 0;
}

static void strmap_free(pt_strmap *map)
{
    for (int i = 0; i < map->n; i++) {
        free(map->keys[i]);
        free(map->values[i]);
    }
    free(map->keys);
    free(map->values);
    free(map->tag);
    memset(map, 0, sizeof *map);
}

void key_free_value(const key_spec *spec, void *base)
{
    void *slot = field(spec, base);
    switch (spec->type) {
    case K_STR:
    case K_DEVMAP:
        free(*(char **)slot);
        *(char **)slot = NULL;
        break;
    case K_STRLIST: strlist_free(slot); break;
    case K_STRMAP: strmap_free(slot); break;
    case K_RESUME:
        free(((pt_resume *)slot)->path);
        ((pt_resume *)slot)->path = NULL;
        break;
    default: break;
    }
}

void key_apply_defaults(const key_spec *table, int n, void *base)
{
    char why[256];
    for (int i = 0; i < n; i++) {
        const key_spec *spec = &table[i];
        if (!spec->def || spec->type == K_DATASETS || spec->type == K_SECRET) continue;
        if (spec->type != K_STRLIST) {
            key_set_scalar(spec, base, spec->def, why, sizeof why);
            continue;
        }
        char *copy = xstrdup(spec->def), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            strlist_push(field(spec, base), tok);
        free(copy);
    }
}

int key_index(const key_spec *table, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0 || (table[i].alias && strcmp(table[i].alias, name) == 0))
            return i;
    return -1;
}

bool config_is_set(const pt_config *cfg, const char *key)
{
    int i = key_index(config_keys, config_nkeys, key);
    return i >= 0 && cfg->is_set && cfg->is_set[i];
}

const char *const *config_key_names(void)
{
    static const char *names[256];
    for (int i = 0; i < config_nkeys && i < 255; i++) names[i] = config_keys[i].name;
    return names;
}

int config_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 64 || lb > 64) return 99;
    int row[65];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = diag + cost;
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

/* Close enough to suggest: at most 1 edit for short words, a third of the length for long ones. */
static bool close_enough(const char *word, const char *candidate, int dist)
{
    int len = (int)strlen(candidate);
    int limit = len <= 5 ? 1 : len / 3;
    (void)word;
    return dist <= limit;
}

const char *choice_suggest(const char *const *choices, const char *word)
{
    const char *best = NULL;
    int best_d = 99;
    for (int i = 0; choices[i]; i++) {
        int d = config_edit_distance(word, choices[i]);
        if (d < best_d) best_d = d, best = choices[i];
    }
    return best && close_enough(word, best, best_d) ? best : NULL;
}

const char *key_suggest(const key_spec *table, int n, const char *name)
{
    const char *best = NULL;
    int best_d = 99;
    for (int i = 0; i < n; i++) {
        int d = config_edit_distance(name, table[i].name);
        if (d < best_d) best_d = d, best = table[i].name;
        if (table[i].alias && (d = config_edit_distance(name, table[i].alias)) < best_d)
            best_d = d, best = table[i].alias;
    }
    return best && close_enough(name, best, best_d) ? best : NULL;
}
