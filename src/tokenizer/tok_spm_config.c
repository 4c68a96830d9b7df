/* tok_spm_config.c — what the tokenizer_config.json beside a tokenizer.model decides when
 * transformers 5 converts the model (tok_spm_model.c builds the rest):
 *   - the conversion, by tokenizer_class alone: LlamaTokenizer(Fast) or none / TokenizersBackend /
 *     PreTrainedTokenizerFast (any other class is refused), with legacy (LlamaTokenizer default
 *     false, TokenizersBackend default true) and LlamaTokenizer's add_prefix_space (default true);
 *   - the added tokens, in transformers' order: control pieces (special) and, under
 *     LlamaTokenizer, user-defined pieces (not special); then added_tokens_decoder by id, whose
 *     flags replace those of a token already added (normalized forced off when TokenizersBackend
 *     matches added tokens on the raw text, under a dummy prefix); then the named special tokens
 *     (bos, eos, unk, sep, pad, cls, mask; LlamaTokenizer defaults <s> </s> <unk>,
 *     TokenizersBackend the model's own pieces) that are not added yet. A token takes the id of
 *     the piece it spells, else the next free id;
 *   - bos/eos/pad, add_bos_token / add_eos_token (default false: transformers 5 adds nothing
 *     unless told), the chat template, and the texts of unk/sep/pad/cls/mask a template sees.
 * Errors name the file and the key. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "tok_impl.h"

pt_status tok_spm_conv_init(const pt_tokenizer *t, spm_conv *cv, const spm_model *m, const json_t *cfg,
                            const char *cfg_path)
{
    *cv = (spm_conv){m, cfg, cfg_path ? cfg_path : t->source, false, true, true};
    const json_t *cls = json_object_get(cfg, "tokenizer_class");
    const char *name = json_string_value(cls);
    if (cls && !json_is_null(cls) && !name)
        return tok_jerr(cv->cfg_path, PT_ERR_USER, "tokenizer_class", "expected a string");
    cv->llama = name && (!strcmp(name, "LlamaTokenizer") || !strcmp(name, "LlamaTokenizerFast"));
    if (name && !cv->llama && strcmp(name, "TokenizersBackend") && strcmp(name, "PreTrainedTokenizerFast"))
        return tok_jerr(cv->cfg_path, PT_ERR_UNSUPPORTED, "tokenizer_class",
                        "\"%s\" with only a tokenizer.model is not supported: ptrain converts a tokenizer.model as "
                        "LlamaTokenizer (or TokenizersBackend, with no tokenizer_class) does; save a tokenizer.json "
                        "with transformers (AutoTokenizer.from_pretrained(dir).save_pretrained(dir))", name);
    TRY(tok_json_flag(cv->cfg_path, cfg, "legacy", "legacy", !cv->llama, &cv->legacy));
    return tok_json_flag(cv->cfg_path, cfg, "add_prefix_space", "add_prefix_space", true, &cv->prefix);
}

/* ---- adding ---- */

/* Add content as an added token with flags f (its piece's id, else the next free one); a token
 * already added keeps its id and, with update, takes f. *id gets the id. */
static pt_status conf_add(pt_tokenizer *t, const char *content, size_t len, added_token f, bool update, int32_t *id)
{
    for (int k = 0; k < t->n_added; k++) {
        added_token *a = &t->added[k];
        if (a->len != len || memcmp(t->bytes + a->off, content, len) != 0) continue;
        *id = a->id;
        if (update) a->special = f.special, a->single_word = f.single_word, a->lstrip = f.lstrip,
                    a->rstrip = f.rstrip, a->normalized = f.normalized;
        if (update && a->special) t->tok[a->id].flags |= TOKF_SPECIAL;
        return PT_OK;
    }
    *id = tok_find_text(t, content, len);
    if (*id < 0) *id = t->n_tok;
    return tok_add_added(t, *id, content, len, f);
}

/* The control pieces (special), and under LlamaTokenizer the user-defined ones (not special). */
static pt_status conf_pieces(pt_tokenizer *t, const spm_conv *cv)
{
    for (size_t i = 0; i < cv->m->n_pieces; i++) {
        const spm_piece *p = &cv->m->pieces[i];
        if (p->type != SPM_CONTROL && (p->type != SPM_USER_DEFINED || !cv->llama)) continue;
        TRY(tok_add_added(t, (int32_t)i, p->text.p, p->text.len, (added_token){.special = p->type == SPM_CONTROL}));
    }
    return PT_OK;
}

/* An AddedToken written as an object: its flags (normalized defaults to not special). */
static pt_status conf_flags(const spm_conv *cv, const json_t *o, const char *path, added_token *f)
{
    static const char *const keys[] = {"special", "single_word", "lstrip", "rstrip"};
    bool *const vals[] = {&f->special, &f->single_word, &f->lstrip, &f->rstrip};
    char where[160];
    for (int k = 0; k < 4; k++) {
        snprintf(where, sizeof where, "%s.%s", path, keys[k]);
        TRY(tok_json_flag(cv->cfg_path, o, keys[k], where, false, vals[k]));
    }
    snprintf(where, sizeof where, "%s.normalized", path);
    return tok_json_flag(cv->cfg_path, o, "normalized", where, !f->special, &f->normalized);
}

/* The key of the entry of dec with the smallest id above *last (NULL when none); *last gets it. */
static pt_status conf_next_id(const spm_conv *cv, const json_t *dec, long long *last, const char **next)
{
    const char *key;
    const json_t *v;
    long long best = 0;
    *next = NULL;
    json_object_foreach((json_t *)dec, key, v)
    {
        char *end;
        long long id = strtoll(key, &end, 10);
        if (*end || end == key || id < 0)
            return tok_jerr(cv->cfg_path, PT_ERR_USER, "added_tokens_decoder", "\"%s\": expected an id", key);
        if (id > *last && (!*next || id < best)) *next = key, best = id;
    }
    if (*next) *last = best;
    return PT_OK;
}

/* One entry, {"content": ..., flags}; TokenizersBackend matches them on the raw text (normalized
 * off) when the model has a dummy prefix. */
static pt_status conf_decoder_entry(pt_tokenizer *t, const spm_conv *cv, const char *key, const json_t *e)
{
    char path[96];
    snprintf(path, sizeof path, "added_tokens_decoder.%s", key);
    const json_t *content = json_object_get(e, "content");
    if (!json_is_string(content) || json_string_length(content) == 0)
        return tok_jerr(cv->cfg_path, PT_ERR_USER, path, "expected {\"content\": \"...\", ...}");
    added_token f = {0};
    int32_t id;
    TRY(conf_flags(cv, e, path, &f));
    if (!cv->llama && cv->m->add_dummy_prefix) f.normalized = false;
    return conf_add(t, json_string_value(content), json_string_length(content), f, true, &id);
}

/* added_tokens_decoder's entries, by id (a token's piece decides its id, not the key). */
static pt_status conf_decoder(pt_tokenizer *t, const spm_conv *cv)
{
    const json_t *dec = json_object_get(cv->cfg, "added_tokens_decoder");
    if (!dec || json_is_null(dec)) return PT_OK;
    if (!json_is_object(dec)) return tok_jerr(cv->cfg_path, PT_ERR_USER, "added_tokens_decoder", "expected an object");
    long long last = -1;
    for (;;) {
        const char *key;
        TRY(conf_next_id(cv, dec, &last, &key));
        if (!key) return PT_OK;
        TRY(conf_decoder_entry(t, cv, key, json_object_get(dec, key)));
    }
}

/* ---- the named special tokens ---- */

/* The content of the named token key: the config's (a string, {"content": ...}, or null: none),
 * else the conversion's default. *obj gets the object form, if that is how it is written. */
static pt_status conf_named(const spm_conv *cv, const char *key, const char **s, size_t *len, const json_t **obj)
{
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token"};
    static const char *const llama[] = {"<s>", "</s>", "<unk>"};
    const spm_str *pieces[] = {&cv->m->bos_piece, &cv->m->eos_piece, &cv->m->unk_piece};
    const int32_t ids[] = {cv->m->bos_id, cv->m->eos_id, cv->m->unk_id};
    const json_t *v = json_object_get(cv->cfg, key);
    *s = NULL, *len = 0, *obj = json_is_object(v) ? v : NULL;
    if (*obj) v = json_object_get(v, "content");
    if (v && !json_is_string(v) && !json_is_null(v))
        return tok_jerr(cv->cfg_path, PT_ERR_USER, key, "expected a string, {\"content\": ...} or null");
    if (json_is_string(v)) return *s = json_string_value(v), *len = json_string_length(v), PT_OK;
    for (int k = 0; k < 3 && !v; k++) {
        if (strcmp(key, keys[k]) != 0) continue;
        if (cv->llama) *s = llama[k], *len = strlen(llama[k]);
        else if (ids[k] >= 0) *s = pieces[k]->p, *len = pieces[k]->len;
    }
    return PT_OK;
}

/* bos, eos, unk, sep, pad, cls, mask: added (special) unless already there; bos/eos/pad ids. */
static pt_status conf_specials(pt_tokenizer *t, const spm_conv *cv)
{
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                                       "cls_token", "mask_token"};
    int32_t *const dest[] = {&t->bos, &t->eos, NULL, NULL, &t->pad, NULL, NULL};
    for (int k = 0; k < 7; k++) {
        const char *s;
        size_t len;
        const json_t *obj;
        TRY(conf_named(cv, keys[k], &s, &len, &obj));
        if (!s || len == 0) continue;
        if (k >= 2) TRY(tok_template_token(t, keys[k], s, len)); /* what a chat template sees as unk_token, ... */
        added_token f = {.special = true};
        if (obj) TRY(conf_flags(cv, obj, keys[k], &f));
        f.special = true;
        int32_t id;
        TRY(conf_add(t, s, len, f, false, &id));
        if (dest[k]) *dest[k] = id;
    }
    return PT_OK;
}

pt_status tok_spm_added(pt_tokenizer *t, const spm_conv *cv)
{
    TRY(conf_pieces(t, cv));
    TRY(conf_decoder(t, cv));
    TRY(conf_specials(t, cv));
    TRY(tok_json_flag(cv->cfg_path, cv->cfg, "add_bos_token", "add_bos_token", false, &t->add_bos));
    TRY(tok_json_flag(cv->cfg_path, cv->cfg, "add_eos_token", "add_eos_token", false, &t->add_eos));
    return cv->cfg ? tok_json_config_template(t, cv->cfg_path, cv->cfg) : PT_OK;
}
