/* hf_meta.h — the metadata files of a Hugging Face model directory made from a GGUF file's
 * metadata, so that a model ptrain read from a GGUF can be exported for transformers: config.json,
 * generation_config.json, tokenizer.json (byte-level BPE, or SentencePiece-style BPE with byte
 * fallback), tokenizer_config.json (with the chat template) and special_tokens_map.json. The
 * tokenizer they describe encodes text as ptrain's own GGUF tokenizer does. */
#ifndef PTRAIN_HF_META_H
#define PTRAIN_HF_META_H

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/model.h"

/* Write config.json, generation_config.json, tokenizer.json, tokenizer_config.json and
 * special_tokens_map.json for the model in GGUF file f (cfg: its hyperparameters as
 * model_config_from_gguf reads them) into dir (which must exist). torch_dtype: "bfloat16",
 * "float16" or "float32". Each file is written atomically (fw_write_file). PT_ERR_USER, before
 * anything is written, for what the files cannot express: a tokenizer other than "gpt2" or
 * "llama", a pre-tokenizer without a known split regex, a rope scaling transformers has no
 * equivalent for. */
pt_status hf_meta_from_gguf(const gguf_file *f, const pt_model_config *cfg, const char *dir, const char *torch_dtype);

#endif
