/* model_io.h — the one front door to models: find a model by name (a path, a name in the models
 * directories, or a Hugging Face id in the local HF cache) and load it, GGUF or Hugging Face
 * safetensors alike, with its tokenizer. */
#ifndef PTRAIN_MODEL_IO_H
#define PTRAIN_MODEL_IO_H

#include <stddef.h>

#include "ptrain/model.h"
#include "ptrain/tokenizer.h"

typedef enum { PT_MODEL_GGUF, PT_MODEL_HF } pt_model_format;

/* Find the model called name and write its path into path (size len):
 *   - an existing file or directory as given (a directory or a .safetensors file, or a config.json,
 *     is a Hugging Face model; any other file is read as GGUF);
 *   - a bare name (no '/') in $PTRAIN_MODELS, ./models and the installed models directory;
 *   - an HF id "org/name" in the local HF cache (HF_HUB_CACHE, HF_HOME/hub, ~/.cache/huggingface/hub)
 *     at revision (NULL or "": main), as its snapshot directory.
 * A miss fails with PT_ERR_USER saying where it looked and how to fetch the model. */
pt_status model_resolve(const char *name, const char *revision, char *path, size_t len, pt_model_format *fmt);

/* The directory of a resolved Hugging Face model path (the path itself, or the directory of a
 * .safetensors or config.json file) into dir. */
void model_hf_dir(const char *path, char *dir, size_t len);

/* The tokenizer of a Hugging Face model directory: tokenizer.json, else a SentencePiece
 * tokenizer.model (tokenizer_from_spm_model), with bos/eos and the chat template from
 * tokenizer_config.json beside it (a string, or a list of {name, template}: the one named
 * "default"); the template in chat_template.jinja, when the directory has one, comes first. */
pt_status tokenizer_from_hf_dir(const char *dir, pt_tokenizer **out);

/* Resolve name (see model_resolve) and load it onto be with its tokenizer (tok may be NULL: no
 * tokenizer). resolved (may be NULL) gets the path it came from. opts may be NULL (load_in_4bit). */
pt_status model_load(const char *name, const char *revision, const pt_load_options *opts, pt_backend *be,
                     pt_model *m, pt_tokenizer **tok, char *resolved, size_t len);

/* Resolve name and load its tokenizer alone (*fmt: the model's format): for ranks that bind to a
 * model another rank loaded (model_share.h). */
pt_status model_load_tokenizer(const char *name, const char *revision, pt_tokenizer **tok, char *resolved, size_t len,
                               pt_model_format *fmt);
/* PT_ERR_USER naming path when the tokenizer has more ids than the model's embedding rows. */
pt_status model_check_vocab(const pt_model *m, const pt_tokenizer *tok, const char *path);

#endif
