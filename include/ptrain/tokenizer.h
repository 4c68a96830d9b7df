/* tokenizer.h — byte-level BPE tokenization as Hugging Face `tokenizers` does it (GPT-2, Llama 3,
 * Qwen2 and SmolLM2 styles), read from GGUF metadata or from a tokenizer.json; special tokens,
 * bos/eos, decoding; and the built-in chat templates (chatml, llama-3, alpaca).
 *
 * Pre-tokenizer regexes run on PCRE2 (UTF-8, Unicode properties). Token ids are int32. */
#ifndef PTRAIN_TOKENIZER_H
#define PTRAIN_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/util.h"

typedef struct pt_tokenizer pt_tokenizer;

pt_status tokenizer_from_gguf(const gguf_file *f, pt_tokenizer **out);
pt_status tokenizer_from_json(const char *path, pt_tokenizer **out);
void tokenizer_free(pt_tokenizer *tok);

/* Encode UTF-8 text. With parse_special, special tokens written in the text (e.g. <|im_start|>)
 * become their ids; without, they are tokenized as plain text. No bos/eos is added: the chat
 * template or the caller adds them. *ids is malloc'd; the caller frees it. */
pt_status tokenizer_encode(const pt_tokenizer *tok, const char *text, size_t len, bool parse_special,
                           int32_t **ids, size_t *n);
/* Append the UTF-8 bytes of one token to out (byte-level tokens map back to raw bytes). */
pt_status tokenizer_decode_token(const pt_tokenizer *tok, int32_t id, strbuf *out);
pt_status tokenizer_decode(const pt_tokenizer *tok, const int32_t *ids, size_t n, strbuf *out);

int32_t tokenizer_vocab_size(const pt_tokenizer *tok);
int32_t tokenizer_bos(const pt_tokenizer *tok); /* -1 when the model has none */
int32_t tokenizer_eos(const pt_tokenizer *tok);
bool tokenizer_is_special(const pt_tokenizer *tok, int32_t id);
/* The chat template text stored with the model (tokenizer.chat_template), or NULL. */
const char *tokenizer_chat_template(const pt_tokenizer *tok);

/* ---- chat templates ---- */
typedef struct {
    const char *role; /* system, user, assistant */
    const char *content;
} chat_message;

/* The name of the built-in template that matches the model's own template text (or NULL). */
const char *chat_template_detect(const char *template_text);
/* Render messages with the named template (chatml, smollm2, llama-3, alpaca). With
 * add_generation_prompt the text ends where the assistant's reply begins. smollm2 is chatml with
 * SmolLM2's default system prompt; alpaca takes roles system (first only), user, input and
 * assistant. Unknown names fail with PT_ERR_USER listing the known ones. */
pt_status chat_render(const char *name, const chat_message *msgs, int n, bool add_generation_prompt,
                      strbuf *out);
/* chat_render with the model's bos and eos token texts: llama-3 starts with bos (default
 * "<|begin_of_text|>"), alpaca starts with bos and ends each reply with eos (default: none). */
pt_status chat_render_with_tokens(const char *name, const char *bos, const char *eos,
                                  const chat_message *msgs, int n, bool add_generation_prompt,
                                  strbuf *out);

#endif
