/* tokenizer.h — BPE tokenization as Hugging Face `tokenizers` does it, of two kinds: byte-level
 * BPE (GPT-2, Llama 3, Qwen2 and SmolLM2 styles) and SentencePiece-style BPE with byte fallback
 * (Llama 2, Mistral, Gemma); read from GGUF metadata, a tokenizer.json or a SentencePiece
 * tokenizer.model, which of the two kinds is found from the file; special tokens, bos/eos,
 * decoding; and the built-in chat templates (chatml, smollm2, qwen2.5, llama-3, llama-3.1,
 * llama-3.2, alpaca, gemma, mistral, mistral-v3).
 *
 * Normalizer and pre-tokenizer regexes run on PCRE2 (UTF-8, Unicode properties); NFC/NFD/NFKC/
 * NFKD on utf8proc. Token ids are int32. */
#ifndef PTRAIN_TOKENIZER_H
#define PTRAIN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/util.h"

typedef struct pt_tokenizer pt_tokenizer;

/* From GGUF metadata: tokenizer.ggml.model "gpt2" (byte-level) or "llama" / "gemma4" (SentencePiece). */
pt_status tokenizer_from_gguf(const gguf_file *f, pt_tokenizer **out);
/* From a tokenizer.json (model BPE; byte-level when its pre-tokenizer has a ByteLevel step, else
 * SentencePiece-style), with bos/eos and the chat template from the tokenizer_config.json beside
 * it when there is one. */
pt_status tokenizer_from_json(const char *path, pt_tokenizer **out);
/* From a SentencePiece tokenizer.model (BPE; what older Llama 2 and Mistral repositories ship
 * instead of a tokenizer.json), converted as transformers 5 converts a model directory without a
 * tokenizer.json, by the tokenizer_config.json beside it when there is one: its tokenizer_class
 * LlamaTokenizer gives LlamaTokenizer's conversion (byte fallback, Metaspace, no normalizer),
 * none transformers' generic one (the model's own normalizer, its precompiled charsmap
 * included); bos/eos, add_bos_token / add_eos_token, added_tokens_decoder and the chat template
 * from it too. Unigram models are refused. Errors in the file name its byte offset and field. */
pt_status tokenizer_from_spm_model(const char *path, pt_tokenizer **out);
/* The same from size bytes at data (source names them in messages) and the text of a
 * tokenizer_config.json (NULL: none). */
pt_status tokenizer_from_spm_memory(const char *source, const uint8_t *data, size_t size, const char *config_json,
                                    pt_tokenizer **out);
void tokenizer_free(pt_tokenizer *tok);
/* The byte-level pre-tokenizer a GGUF's tokenizer.ggml.pre names, as ptrain's GGUF loader builds
 * it: *regexes, a NULL-terminated list of split regexes (Oniguruma syntax, as tokenizer.json
 * writes them; each a Split "Isolated"), then ByteLevel, splitting with GPT-2's regex itself
 * when *bytelevel_regex; *ignore_merges as the model's BPE has it. False for a name ptrain
 * refuses or does not know. */
bool tokenizer_gguf_pre(const char *name, size_t len, const char *const **regexes, bool *ignore_merges,
                        bool *bytelevel_regex);
/* A hash of everything that decides the ids of a text (tok_fingerprint.c): equal tokenizers give
 * equal fingerprints, another vocabulary, merge list, special token, normalizer, pre-tokenizer or
 * chat template another one (as good as 64 bits make it). */
uint64_t tokenizer_fingerprint(const pt_tokenizer *tok);
/* The BPE merges in rank order as (left, right) token ids: (*pairs)[2i], (*pairs)[2i + 1]; for a
 * SentencePiece vocabulary, the merges rebuilt from its scores. *pairs is malloc'd. */
pt_status tokenizer_merge_pairs(const pt_tokenizer *tok, int32_t **pairs, size_t *n);

/* Encode UTF-8 text. With parse_special, special tokens written in the text (e.g. <|im_start|>)
 * become their ids; without, they are tokenized as plain text. No bos/eos is added: the chat
 * template or the caller adds them. *ids is malloc'd; the caller frees it. */
pt_status tokenizer_encode(const pt_tokenizer *tok, const char *text, size_t len, bool parse_special,
                           int32_t **ids, size_t *n);
/* Plain text (a prompt, a dataset_text_field row) as the model's tokenizer encodes it with its
 * special tokens (transformers' encode(text), add_special_tokens=True): tokenizer_encode with
 * parse_special, and bos first when tokenizer_adds_bos() says so, unless the ids already start
 * with bos: text that writes bos itself (a rendered chat template) gets one, not two, where HF
 * would give two (TRL turns add_special_tokens off for such text). No eos: callers add it. */
pt_status tokenizer_encode_text(const pt_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n);
/* Append the UTF-8 bytes of one token to out (byte-level tokens and SentencePiece <0xXX> tokens
 * map back to raw bytes, so one token may end inside a character; "▁" reads as a space). */
pt_status tokenizer_decode_token(const pt_tokenizer *tok, int32_t id, strbuf *out);
/* Append the text of ids: their bytes joined, then (SentencePiece) what the tokenizer's decoder
 * strips removed from what was appended (Strip after Fuse: the leading space; a Metaspace
 * decoder: the first token's "▁"s). Invalid UTF-8 from byte tokens is kept as bytes. */
pt_status tokenizer_decode(const pt_tokenizer *tok, const int32_t *ids, size_t n, strbuf *out);

int32_t tokenizer_vocab_size(const pt_tokenizer *tok);
int32_t tokenizer_bos(const pt_tokenizer *tok); /* -1 when the model has none */
int32_t tokenizer_eos(const pt_tokenizer *tok);
int32_t tokenizer_unk(const pt_tokenizer *tok); /* -1 when none */
int32_t tokenizer_pad(const pt_tokenizer *tok); /* -1 when none */
/* Whether the model's own tokenizer puts bos before (eos after) plain text it encodes, as
 * transformers 5 decides: from a tokenizer.json, its post-processor alone (a TemplateProcessing
 * "single" with a special token before/after $A; tokenizer_config.json's add_bos_token and
 * add_eos_token are ignored beside a tokenizer.json); from a GGUF, tokenizer.ggml.add_bos_token /
 * add_eos_token (bos by default for SentencePiece vocabularies, as llama.cpp). Llama 2, Mistral,
 * Gemma and Llama 3 add bos; SmolLM2 and Qwen2 do not. tokenizer_encode never adds them;
 * tokenizer_encode_text adds bos. */
bool tokenizer_adds_bos(const pt_tokenizer *tok);
bool tokenizer_adds_eos(const pt_tokenizer *tok);
/* "byte-level BPE" or "SentencePiece BPE" (for `ptrain inspect` and messages). */
const char *tokenizer_kind(const pt_tokenizer *tok);
bool tokenizer_is_special(const pt_tokenizer *tok, int32_t id);
/* The chat template text stored with the model (tokenizer.chat_template), or NULL. */
const char *tokenizer_chat_template(const pt_tokenizer *tok);
/* Replace it with a copy of text (NULL: none), e.g. a model directory's chat_template.jinja. */
pt_status tokenizer_set_chat_template(pt_tokenizer *tok, const char *text);
/* The model's named chat templates beside its default one (tokenizer_config.json's chat_template
 * as a list of {name, template}, a directory's additional_chat_templates/NAME.jinja, a GGUF's
 * tokenizer.chat_template.NAME), as transformers' tokenizer.chat_template dict has them: add (or
 * replace) one; the text of name (NULL when the model has none of that name); their names, ", "
 * between them, appended to out ("" when none). */
pt_status tokenizer_add_chat_template(pt_tokenizer *tok, const char *name, const char *text);
const char *tokenizer_chat_template_named(const pt_tokenizer *tok, const char *name);
void tokenizer_chat_template_names(const pt_tokenizer *tok, strbuf *out);
/* The special tokens beside bos and eos that transformers passes a template (its
 * special_tokens_map: unk_token, sep_token, pad_token, cls_token, mask_token as tokenizer_config.json
 * names them), as a JSON object of texts, or NULL when there are none. */
const struct json_t *tokenizer_template_tokens(const pt_tokenizer *tok);

/* ---- chat templates ---- */
struct json_t;
typedef struct {
    const char *role;    /* system, user, assistant, tool, ... */
    const char *content; /* may be NULL when fields has what the message says (tool_calls) */
    const struct json_t *fields; /* the message's other fields (reasoning_content, tool_calls, name,
                                  * tool_call_id, ...) as a JSON object, or NULL */
} chat_message;

/* The name of the built-in template that matches the model's own template text (or NULL). */
const char *chat_template_detect(const char *template_text);

/* A chat template compiled for rendering (Jinja, src/template): one of the built-in names
 * (chatml, smollm2, qwen2.5, llama-3, llama-3.1, llama-3.2, alpaca, gemma, mistral, mistral-v3, the
 * Jinja texts of template_builtin.c), or "model" (or NULL): model_text, the model's own template.
 * An unknown name, no text, or text that is not a template fails with PT_ERR_USER. */
typedef struct chat_tmpl chat_tmpl;
/* The built-in names, as messages list them. */
#define CHAT_TEMPLATE_BUILTINS "chatml, smollm2, qwen2.5, llama-3, llama-3.1, llama-3.2, alpaca, gemma, mistral, mistral-v3"
/* The static text of a name chat_tmpl_open takes (a built-in's, or "model"), NULL for others. */
const char *chat_template_name_known(const char *name);
pt_status chat_tmpl_open(const char *name, const char *model_text, chat_tmpl **out);
void chat_tmpl_free(chat_tmpl *c);
/* Whether it marks assistant text with {% generation %} blocks. */
bool chat_tmpl_has_generation(const chat_tmpl *c);
/* What transformers passes a template beside the messages. */
typedef struct {
    const char *bos, *eos;        /* the model's bos_token / eos_token text (NULL: not passed) */
    const struct json_t *specials; /* the other special tokens' texts (tokenizer_template_tokens), or NULL */
    const struct json_t *kwargs;  /* chat_template_kwargs (enable_thinking, ...), or NULL */
    const struct json_t *tools;   /* the tools' JSON schemas (an array), or NULL */
    bool add_generation_prompt;   /* end where the assistant's reply begins */
} chat_args;
/* Render messages as apply_chat_template(..., tokenize=False) does, appending to out; spans
 * (when non-NULL) gets the {% generation %} spans (start, end byte pairs from where out began). A
 * template that raises fails with PT_ERR_USER and its message. */
pt_status chat_tmpl_render(const chat_tmpl *c, const chat_args *a, const chat_message *msgs, int n, strbuf *out,
                           size_t **spans, int *n_spans);
/* Render with a built-in template by name. The built-ins write the model's bos/eos where its own
 * template does, with defaults when not given: llama-3* bos "<|begin_of_text|>", gemma bos
 * "<bos>", mistral and mistral-v3 bos "<s>" and eos "</s>", alpaca none. Unknown names and
 * conversations a template refuses fail with PT_ERR_USER. */
pt_status chat_render(const char *name, const chat_message *msgs, int n, bool add_generation_prompt,
                      strbuf *out);
pt_status chat_render_with_tokens(const char *name, const char *bos, const char *eos,
                                  const chat_message *msgs, int n, bool add_generation_prompt,
                                  strbuf *out);

#endif
