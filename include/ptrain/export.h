/* export.h — what ptrain writes for other tools: merged models (base + s·B·A) as a Hugging Face
 * directory or GGUF files, streamed tensor by tensor, and an Ollama Modelfile (docs/export.md).
 * The adapter files themselves (PEFT, adapter.gguf) are src/adapter's (adapter.h, peft.h). */
#ifndef PTRAIN_EXPORT_H
#define PTRAIN_EXPORT_H

#include <stdbool.h>

#include "ptrain/adapter.h"
#include "ptrain/config.h"
#include "ptrain/imatrix.h"
#include "ptrain/model.h"
#include "ptrain/settings.h"

/* The merged model (base + s·B·A; l may be NULL: the base alone) as GGUF at path, with
 * quantization method `method` (f16, bf16, q8_0, q4_0, q4_1, q4_k_m, ...; gguf_method_list
 * names them). base is the resolved base: a GGUF file (base_is_gguf; its metadata is copied) or a
 * Hugging Face directory (metadata made by gguf_meta.c). Streams row chunks: memory stays ~32 MiB.
 * im (imatrix_file; NULL: none) weights the quantization of the tensors it has entries for, as
 * llama-quantize --imatrix does. */
pt_status export_merged_gguf(const char *path, const char *base, bool base_is_gguf, const pt_model_config *cfg,
                             const pt_adapter *l, const char *method, const pt_imatrix *im);

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
                           const pt_adapter *l, const char *dtype);

/* What `ptrain export` writes, into out (created):
 *   adapter_files: adapter_config.json + adapter_model.safetensors (PEFT) and adapter.gguf
 *   hf:            out/merged/ (or merged_dir), a Hugging Face directory in hf_dtype (default bf16)
 *   gguf[i]:       out/merged-<method>.gguf for each quantization method
 *   ollama:        out/Modelfile (and `ollama create` when ollama is on PATH) */
typedef struct {
    const char *model, *revision; /* the base, as model_resolve takes it */
    const char *adapter;          /* ptrain or PEFT adapter to read; NULL: merge nothing */
    const char *out;
    const char *merged_dir; /* where hf writes; NULL: out/merged */
    bool adapter_files, hf, ollama;
    const char *hf_dtype;
    char **gguf;
    int n_gguf;
    const char *ollama_name, *chat_template;
    const char *ollama_tag; /* model_parameters' size tag ("8b"): the name becomes NAME:TAG */
    const char *imatrix;    /* imatrix_file: llama.cpp's importance matrix for the GGUF quantizations; NULL: none */
    char **param_keys, **param_values;
    int n_params;
} export_job;
/* Run job with the adapter trained (in memory) or, when trained is NULL, the one at job->adapter. */
pt_status export_run(const export_job *job, const pt_adapter *trained);
/* `ptrain export ...` (argv[0] is "export"). */
pt_status export_main(int argc, char **argv);

/* The config's keys for export: what to write (huggingface_save, huggingface_save_gguf +
 * quantization_method, ollama_save + ollama_model + model_parameters), from which base and adapter
 * (model_name, revision, final_model_dir) with which template (export_options_from_config,
 * config_options.h, fills it; the strings and lists are the config's). */
typedef struct {
    const char *config_path; /* for messages */
    const char *model_name, *revision, *final_model_dir, *chat_template;
    const char *merged_save_dir; /* the merged Hugging Face directory; NULL: final_model_dir/merged */
    const char *imatrix_file;    /* the GGUF quantizations' importance matrix; NULL: none */
    bool huggingface_save, huggingface_save_gguf, ollama_save;
    pt_strlist quantization_method;
    const char *ollama_model;
    pt_strmap model_parameters;
} export_options;

/* At the end of training (rank 0): what o's huggingface_save, huggingface_save_gguf and
 * ollama_save ask for, from the adapter just trained, into final_model_dir. */
pt_status export_after_training(const export_options *o, const pt_adapter *l, const char *chat_template);
/* What export_after_training and `ptrain export CONFIG` take from the config (export_cmd.c). */
export_options export_options_from_config(const pt_config *cfg);

#endif
