/* export.h — what ptrain writes for other tools: the LoRA adapter as llama.cpp's GGUF adapter
 * (adapter.gguf, for llama.cpp --lora and Ollama's ADAPTER), and merged models (base + s·B·A) as a
 * Hugging Face directory or GGUF files, streamed tensor by tensor (docs/export.md). */
#ifndef PTRAIN_EXPORT_H
#define PTRAIN_EXPORT_H

#include <stdbool.h>

#include "ptrain/lora.h"
#include "ptrain/model.h"
#include "ptrain/settings.h"

/* llama.cpp's LoRA adapter format: general.type "adapter", adapter.type "lora",
 * adapter.lora.alpha (= scale * r, so llama.cpp's alpha/r is ptrain's scale, rsLoRA included),
 * blk.N.<tensor>.weight.lora_a [r, in] and .lora_b [out, r] in f32; for llama, lora_b's q/k rows
 * in llama.cpp's interleaved order (as its base GGUF files hold q and k). */
pt_status export_gguf_adapter(const char *path, const pt_lora *l, const pt_model_config *cfg, const char *name);
/* Read a llama.cpp LoRA adapter onto model m (its scale becomes alpha / r, as llama.cpp applies
 * it); an adapter of another architecture or shape is refused naming the tensor. */
pt_status gguf_adapter_load(const char *path, const pt_model *m, pt_lora *l);

/* The merged model (base + s·B·A; l may be NULL: the base alone) as GGUF at path, with
 * quantization method `method` (f16, bf16, q8_0, q4_0, q4_1, q4_k_m, ...; export_gguf_method_list
 * names them). base is the resolved base: a GGUF file (base_is_gguf; its metadata is copied) or a
 * Hugging Face directory (metadata made by gguf_meta.c). Streams row chunks: memory stays ~32 MiB. */
pt_status export_merged_gguf(const char *path, const char *base, bool base_is_gguf, const pt_model_config *cfg,
                             const pt_lora *l, const char *method);
bool export_gguf_method_known(const char *name);
const char *export_gguf_method_list(void);

/* An Ollama Modelfile in dir: FROM ./merged_gguf (a file in dir) when given, else FROM base_gguf
 * plus ADAPTER ./adapter.gguf; TEMPLATE and stop strings for chat_template (a name ptrain knows:
 * the chat template names; llama-3.2 as llama-3.1); one PARAMETER line per param. Runs
 * `ollama create name` when ollama is on PATH, else prints the command. */
typedef struct {
    const char *dir, *name, *merged_gguf, *base_gguf, *chat_template;
    char **param_keys, **param_values;
    int n_params;
} ollama_job;
pt_status export_ollama(const ollama_job *j);

/* The merged model as a Hugging Face directory dir (created): model.safetensors in dtype (bf16,
 * f16 or f32), config.json, tokenizer and generation files. base is the resolved base model: a GGUF
 * file (base_is_gguf) or an HF directory / .safetensors path. l may be NULL (the base alone). */
pt_status export_merged_hf(const char *dir, const char *base, bool base_is_gguf, const pt_model_config *cfg,
                           const pt_lora *l, const char *dtype);

/* What `ptrain export` writes, into out (created):
 *   adapter_files: adapter_config.json + adapter_model.safetensors (PEFT) and adapter.gguf
 *   hf:            out/merged/, a Hugging Face directory in hf_dtype (default bf16)
 *   gguf[i]:       out/merged-<method>.gguf for each quantization method
 *   ollama:        out/Modelfile (and `ollama create` when ollama is on PATH) */
typedef struct {
    const char *model, *revision; /* the base, as model_resolve takes it */
    const char *adapter;          /* ptrain or PEFT adapter to read; NULL: merge nothing */
    const char *out;
    bool adapter_files, hf, ollama;
    const char *hf_dtype;
    char **gguf;
    int n_gguf;
    const char *ollama_name, *chat_template;
    const char *ollama_tag; /* model_parameters' size tag ("8b"): the name becomes NAME:TAG */
    char **param_keys, **param_values;
    int n_params;
} export_job;
/* Run job with the adapter trained (in memory) or, when trained is NULL, the one at job->adapter. */
pt_status export_run(const export_job *job, const pt_lora *trained);
/* `ptrain export ...` (argv[0] is "export"). */
pt_status export_main(int argc, char **argv);

/* The config's keys for export: what to write (huggingface_save, huggingface_save_gguf +
 * quantization_method, ollama_save + ollama_model + model_parameters), from which base and adapter
 * (model_name, revision, final_model_dir) with which template (export_options_from_config,
 * config_options.h, fills it; the strings and lists are the config's). */
typedef struct {
    const char *config_path; /* for messages */
    const char *model_name, *revision, *final_model_dir, *chat_template;
    bool huggingface_save, huggingface_save_gguf, ollama_save;
    pt_strlist quantization_method;
    const char *ollama_model;
    pt_strmap model_parameters;
} export_options;

/* At the end of training (rank 0): what o's huggingface_save, huggingface_save_gguf and
 * ollama_save ask for, from the adapter just trained, into final_model_dir. */
pt_status export_after_training(const export_options *o, const pt_lora *l, const char *chat_template);

#endif
