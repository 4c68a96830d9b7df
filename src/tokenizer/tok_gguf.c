/* tok_gguf.c — loading a byte-level BPE tokenizer from GGUF metadata (tokenizer.ggml.*), with
 * the pre-tokenizer that tokenizer.ggml.pre names (the table of tok_pre_names.c); control tokens
 * (type 3) are special, user-defined ones (type 4) are added tokens, as transformers' GGUF conversion makes them (the special ids and the chat template by
 * tok_gguf_base.c); and the entry point, which hands SentencePiece vocabularies ("llama") to
 * tok_gguf_spm.c. */
#include <stdio.h>
#include <string.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "tok_impl.h"

/* The names tok_pre_names.c's table accepts, for the message that refuses another (static). */
static const char *gguf_pre_list(void)
{
    static char list[4096];
    size_t n = 0;
    list[0] = '\0';
    for (size_t i = 0; tok_pre_rule_at(i); i++) {
        const tok_pre_rule *r = tok_pre_rule_at(i);
        if (r->refused) continue;
        int w = snprintf(list + n, sizeof list - n, "%s%s", n ? ", " : "", r->name);
        if (w < 0 || (size_t)w >= sizeof list - n) break;
        n += (size_t)w;
    }
    return list;
}

/* The pre-tokenizer tokenizer.ggml.pre names: its regex splits, then ByteLevel. */
static pt_status gguf_pre(pt_tokenizer *t, const gguf_file *f)
{
    const char *key = "tokenizer.ggml.pre";
    const gguf_kv *kv = gguf_find(f, key);
    if (kv && kv->type != GGUF_TYPE_STRING)
        return ERR(PT_ERR_USER, "%s: %s: expected a string", shown_text(f->path).s, key);
    gguf_str pre = {"", 0};
    if (kv) TRY(gguf_get_str(f, key, &pre));
    const tok_pre_rule *r = tok_pre_find(pre.data, pre.len);
    if (!r)
        return ERR(PT_ERR_UNSUPPORTED, "%s: %s \"%s\" is not a pre-tokenizer ptrain knows (known: %s)",
                   shown_text(f->path).s, key, shown_bytes(pre.data, pre.len).s, gguf_pre_list());
    if (r->refused)
        return ERR(PT_ERR_UNSUPPORTED, "%s: %s \"%s\" is not supported: %s", shown_text(f->path).s, key, r->name,
                   r->refused);
    t->ignore_merges = r->ignore_merges;
    for (const char *const *re = r->regexes; *re; re++)
        TRY(tok_pretok_add_split(t, key, *re, strlen(*re), false, SPLIT_ISOLATED));
    return tok_pretok_add_bytelevel(t, key, false, r->bytelevel_regex);
}

static const gguf_kv *gguf_array_of(const gguf_file *f, const char *key, bool strings)
{
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv || kv->type != GGUF_TYPE_ARRAY) return NULL;
    bool is_int = kv->elem_type <= GGUF_TYPE_I32 && kv->elem_type != GGUF_TYPE_F32;
    is_int |= kv->elem_type == GGUF_TYPE_U64 || kv->elem_type == GGUF_TYPE_I64;
    return (strings ? kv->elem_type == GGUF_TYPE_STRING : is_int) ? kv : NULL;
}

static pt_status gguf_tokens(pt_tokenizer *t, const gguf_file *f, smap *names)
{
    const gguf_kv *tokens = gguf_array_of(f, "tokenizer.ggml.tokens", true);
    if (!tokens)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: missing or not an array of strings", shown_text(f->path).s);
    if (tokens->count == 0 || tokens->count >= TOK_MAX_ID)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: %llu tokens", shown_text(f->path).s,
                   (unsigned long long)tokens->count);
    if (!tok_smap_init(names, tokens->count)) return ERR(PT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < tokens->count; i++) {
        gguf_str s = gguf_array_str(tokens, i);
        TRY(tok_set(t, (int32_t)i, s.data, s.len, TOKF_MODEL, true));
        if (!tok_smap_put(names, s.data, s.len, (int32_t)i)) return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

/* Control tokens become special added tokens (unless their spelling is not byte-level: a
 * mislabel transformers skips too), user-defined ones plain added tokens. */
static pt_status gguf_added(pt_tokenizer *t, const gguf_file *f)
{
    const gguf_kv *types = gguf_array_of(f, "tokenizer.ggml.token_type", false);
    if (!types) return PT_OK;
    const gguf_kv *tokens = gguf_find(f, "tokenizer.ggml.tokens");
    if (types->count != tokens->count)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.token_type: %llu entries for %llu tokens", shown_text(f->path).s,
                   (unsigned long long)types->count, (unsigned long long)tokens->count);
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t i = 0; i < types->count; i++) {
            int64_t want = pass == 0 ? GGUF_TOKEN_CONTROL : GGUF_TOKEN_USER_DEFINED;
            const tok_entry *e = &t->tok[i];
            if (gguf_array_int(types, i) != want || e->len == 0) continue;
            gguf_str s = gguf_array_str(tokens, i);
            if (pass == 0 && !tok_is_bytelevel_spelling(s.data, s.len)) continue;
            TRY(tok_add_added(t, (int32_t)i, s.data, s.len, (added_token){.special = pass == 0}));
        }
    return PT_OK;
}

static pt_status gguf_merges(pt_tokenizer *t, const gguf_file *f, const smap *names)
{
    const gguf_kv *merges = gguf_array_of(f, "tokenizer.ggml.merges", true);
    if (!merges)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.merges: missing or not an array of strings", shown_text(f->path).s);
    if (merges->count >= TOK_MAX_ID)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.merges: too many", shown_text(f->path).s);
    if (!tok_pmap_init(&t->merges, merges->count)) return ERR(PT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < merges->count; i++) {
        gguf_str m = gguf_array_str(merges, i);
        char where[64];
        snprintf(where, sizeof where, "tokenizer.ggml.merges[%llu]", (unsigned long long)i);
        const char *right;
        size_t llen, rlen;
        if (!tok_merge_split(m.data, m.len, &llen, &right, &rlen))
            return ERR(PT_ERR_USER, "%s: %s: expected \"left right\"", shown_text(f->path).s, where);
        TRY(tok_merge(t, names, where, (int32_t)i, m.data, llen, right, rlen));
    }
    return PT_OK;
}

static pt_status gguf_model_kind(const gguf_file *f, tok_kind *kind)
{
    gguf_str model;
    TRY(gguf_get_str(f, "tokenizer.ggml.model", &model));
    *kind = gguf_str_eq(model, "llama") || gguf_str_eq(model, "gemma4") ? TOK_SPM : TOK_BYTE_LEVEL;
    if (gguf_str_eq(model, "gpt2") || gguf_str_eq(model, "llama") || gguf_str_eq(model, "gemma4")) return PT_OK;
    return ERR(PT_ERR_UNSUPPORTED,
               "%s: tokenizer.ggml.model \"%s\" is not supported (supported: \"gpt2\", byte-level BPE, and "
               "\"llama\" and \"gemma4\", SentencePiece BPE)", shown_text(f->path).s, shown_bytes(model.data, model.len).s);
}

static pt_status gguf_build(pt_tokenizer *t, const gguf_file *f)
{
    smap names = {0};
    pt_status rc = gguf_tokens(t, f, &names);
    if (rc == PT_OK) rc = gguf_merges(t, f, &names);
    tok_smap_free(&names);
    TRY(rc);
    TRY(gguf_added(t, f));
    TRY(gguf_pre(t, f));
    TRY(tok_finish(t));
    TRY(tok_gguf_special_id(t, f, "tokenizer.ggml.bos_token_id", &t->bos));
    TRY(tok_gguf_special_id(t, f, "tokenizer.ggml.eos_token_id", &t->eos));
    TRY(gguf_opt_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos));
    TRY(gguf_opt_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos));
    return tok_gguf_template(t, f);
}

pt_status tokenizer_from_gguf(const gguf_file *f, pt_tokenizer **out)
{
    *out = NULL;
    tok_kind kind;
    TRY(gguf_model_kind(f, &kind));
    pt_tokenizer *t = NULL;
    TRY(tok_new(f->path ? f->path : "(gguf)", &t));
    pt_status rc = kind == TOK_SPM ? tok_gguf_spm_build(t, f) : gguf_build(t, f);
    if (rc != PT_OK) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return PT_OK;
}
