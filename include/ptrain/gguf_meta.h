/* gguf_meta.h — the GGUF metadata llama.cpp needs for a model exported from a Hugging Face
 * directory, as llama.cpp's convert_hf_to_gguf.py writes it: the architecture's hyperparameters
 * from config.json, and the tokenizer from tokenizer.json / tokenizer_config.json, with the
 * pre-tokenizer named the way llama.cpp knows it. The caller adds general.file_type and the
 * tensors (Llama 3.1's rope_freqs.weight among them). */
#ifndef PTRAIN_GGUF_META_H
#define PTRAIN_GGUF_META_H

#include "ptrain/gguf_write.h"
#include "ptrain/hf_model.h"

/* Add to w the key/values llama.cpp needs for the HF model in dir (hc: its parsed config.json):
 *   general.architecture (llama, qwen2, gemma2), general.name (name; NULL: the directory's name);
 *   <arch>.context_length, embedding_length, block_count, feed_forward_length, vocab_size,
 *   attention.head_count, head_count_kv, key_length, value_length, layer_norm_rms_epsilon,
 *   rope.freq_base, rope.dimension_count, rope.scaling.type/factor (linear scaling); gemma2's
 *   attention.sliding_window, attn_logit_softcapping, final_logit_softcapping;
 *   tokenizer.ggml.model ("gpt2": byte-level BPE; "llama": SentencePiece-style BPE), .pre (the
 *   pre-tokenizer llama.cpp runs: gpt-2, smollm, llama-bpe, qwen2; "default" for SentencePiece),
 *   .tokens (padded to vocab_size with [PADn]), .token_type (1 normal, 3 control, 4 user-defined,
 *   5 unused, 6 byte, 2 unknown), .merges (byte-level) or .scores and .add_space_prefix
 *   (SentencePiece), bos/eos/unknown/padding token ids, add_bos_token/add_eos_token (as the
 *   post-processor decides), and tokenizer.chat_template.
 * A tokenizer llama.cpp would split differently (an unknown Split regex, a prefix space, a
 * normalizer, a token id beyond vocab_size, two ids with one spelling) fails with PT_ERR_USER
 * naming the file and what is not supported. file_type is NOT added. */
pt_status gguf_meta_from_hf(gguf_writer *w, const char *dir, const hf_config *hc, const char *name);

#endif
