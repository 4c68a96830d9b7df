/* tok_gguf_base.c — what both GGUF tokenizer loaders (tok_gguf.c, byte-level; tok_gguf_spm.c,
 * SentencePiece) read the same way: a special token's id (tokenizer.ggml.*_token_id) and the chat
 * templates stored with the model (tokenizer.chat_template, and tokenizer.chat_template.NAME for
 * named ones such as tool_use), and the other special tokens' texts a template sees: unk_token and
 * pad_token from tokenizer.ggml.unknown_token_id and padding_token_id, as transformers' GGUF
 * loader (get_gguf_tokenizer) names them (it reads no sep, cls or mask token from a GGUF). */
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "tok_impl.h"

/* The id at key (a u32; absent: *id unchanged), which must be a token of t. */
pt_status tok_gguf_special_id(pt_tokenizer *t, const gguf_file *f, const char *key, int32_t *id)
{
    uint32_t v = UINT32_MAX;
    TRY(gguf_opt_u32(f, key, &v));
    if (v == UINT32_MAX) return PT_OK;
    if (v >= (uint32_t)t->n_tok)
        return ERR(PT_ERR_USER, "%s: %s: id %u is not a token (%d tokens)", shown_text(f->path).s, key, v, t->n_tok);
    *id = (int32_t)v;
    return PT_OK;
}

/* t->tmpl_tokens[name]: the text in tokenizer.ggml.tokens of the id at key, when there is one. */
static pt_status gguf_template_token(pt_tokenizer *t, const gguf_file *f, const char *key, const char *name)
{
    int32_t id = -1;
    TRY(tok_gguf_special_id(t, f, key, &id));
    const gguf_kv *tokens = NULL;
    if (id < 0) return PT_OK;
    TRY(gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens));
    if ((uint64_t)id >= tokens->count) return PT_OK;
    gguf_str s = gguf_array_str(tokens, (uint64_t)id);
    return tok_template_token(t, name, s.data, s.len);
}

/* The chat templates stored with the model, if any, and the special tokens' texts they see. */
pt_status tok_gguf_template(pt_tokenizer *t, const gguf_file *f)
{
    TRY(gguf_template_token(t, f, "tokenizer.ggml.unknown_token_id", "unk_token"));
    TRY(gguf_template_token(t, f, "tokenizer.ggml.padding_token_id", "pad_token"));
    static const char prefix[] = "tokenizer.chat_template.";
    for (uint64_t i = 0; i < f->n_kv; i++) { /* tokenizer.chat_template.NAME: the named ones (llama.cpp's) */
        const gguf_kv *kv = &f->kv[i];
        size_t n = sizeof prefix - 1;
        if (kv->type != GGUF_TYPE_STRING || kv->key.len <= n || memcmp(kv->key.data, prefix, n)) continue;
        char *name = strndup(kv->key.data + n, kv->key.len - n), *key = strndup(kv->key.data, kv->key.len);
        gguf_str s = {0};
        pt_status rc = name && key ? gguf_get_str(f, key, &s) : ERR(PT_ERR_NOMEM, "out of memory");
        char *text = rc == PT_OK ? strndup(s.data, s.len) : NULL;
        if (rc == PT_OK && !text) rc = ERR(PT_ERR_NOMEM, "out of memory");
        if (rc == PT_OK) rc = tokenizer_add_chat_template(t, name, text);
        free(text);
        free(key);
        free(name);
        TRY(rc);
    }
    const gguf_kv *tmpl = gguf_find(f, "tokenizer.chat_template");
    if (!tmpl || tmpl->type != GGUF_TYPE_STRING) return PT_OK;
    gguf_str s;
    TRY(gguf_get_str(f, "tokenizer.chat_template", &s));
    t->chat_template = strndup(s.data, s.len);
    TRY_ALLOC(t->chat_template);
    return PT_OK;
}
