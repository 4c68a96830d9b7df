/* tok_json.c — loading a Hugging Face tokenizer.json (model.type BPE: byte-level, or
 * SentencePiece-style when no ByteLevel step is there) with jansson, and the bos/eos tokens and
 * the chat template from the tokenizer_config.json beside it when there is one. Errors name the
 * file and the JSON path of the offending value (tok_json_base.c). The normalizer, Metaspace,
 * decoder and post-processor are read by tok_json_spm.c. A tokenizer_class whose pipeline
 * transformers 5 builds itself (Qwen2Tokenizer, Qwen3_5Tokenizer) gets that pipeline in place of
 * the file's, as transformers does. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/error.h"
#include "tok_impl.h"

/* ---- model ---- */

static pt_status json_model_flags(pt_tokenizer *t, const json_t *m)
{
    const char *type = json_string_value(json_object_get(m, "type"));
    if (json_object_get(m, "type") && (!type || strcmp(type, "BPE") != 0))
        return tok_jerr(t->source, PT_ERR_UNSUPPORTED, "model.type", "\"%s\" is not supported (only \"BPE\")",
                        type ? type : "?");
    const json_t *drop = json_object_get(m, "dropout");
    if (drop && !json_is_null(drop) && !(json_is_number(drop) && json_number_value(drop) == 0.0))
        return tok_jerr(t->source, PT_ERR_UNSUPPORTED, "model.dropout", "BPE dropout is not supported");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    static const char *const paths[] = {"model.continuing_subword_prefix", "model.end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(m, affixes[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && json_string_length(v) == 0))
            return tok_jerr(t->source, PT_ERR_UNSUPPORTED, paths[i],
                            "not supported (byte-level and SentencePiece BPE have none)");
    }
    TRY(tok_json_flag(t->source, m, "byte_fallback", "model.byte_fallback", false, &t->byte_fallback));
    if (t->byte_fallback && t->kind != TOK_SPM)
        return tok_jerr(t->source, PT_ERR_UNSUPPORTED, "model.byte_fallback",
                        "byte fallback with a ByteLevel pre-tokenizer is not supported");
    TRY(tok_json_flag(t->source, m, "fuse_unk", "model.fuse_unk", false, &t->fuse_unk));
    return tok_json_flag(t->source, m, "ignore_merges", "model.ignore_merges", false, &t->ignore_merges);
}

static pt_status json_vocab(pt_tokenizer *t, const json_t *vocab, smap *names)
{
    if (!json_is_object(vocab)) return tok_jerr(t->source, PT_ERR_USER, "model.vocab", "expected an object of token: id");
    if (!tok_smap_init(names, json_object_size(vocab))) return ERR(PT_ERR_NOMEM, "out of memory");
    for (void *it = json_object_iter((json_t *)vocab); it; it = json_object_iter_next((json_t *)vocab, it)) {
        const char *key = json_object_iter_key(it);
        size_t klen = json_object_iter_key_len(it);
        const json_t *v = json_object_iter_value(it);
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= TOK_MAX_ID)
            return tok_jerr(t->source, PT_ERR_USER, "model.vocab", "\"%s\": expected an id from 0 to %d",
                            shown_bytes(key, klen).s, TOK_MAX_ID - 1);
        TRY(tok_set(t, (int32_t)id, key, klen, TOKF_MODEL, false));
        if (!tok_smap_put(names, key, klen, (int32_t)id)) return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

/* One merge: "left right" or ["left", "right"]. */
static pt_status json_merge(pt_tokenizer *t, const smap *names, const json_t *m, size_t i)
{
    char where[64];
    snprintf(where, sizeof where, "model.merges[%zu]", i);
    const char *left = NULL, *right = NULL;
    size_t llen = 0, rlen = 0;
    bool ok = false;
    if (json_is_string(m)) {
        left = json_string_value(m);
        ok = tok_merge_split(left, json_string_length(m), &llen, &right, &rlen);
    } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
               json_is_string(json_array_get(m, 1))) {
        left = json_string_value(json_array_get(m, 0));
        llen = json_string_length(json_array_get(m, 0));
        right = json_string_value(json_array_get(m, 1));
        rlen = json_string_length(json_array_get(m, 1));
        ok = true;
    }
    if (!ok) return tok_jerr(t->source, PT_ERR_USER, where, "expected \"left right\" or [\"left\", \"right\"]");
    return tok_merge(t, names, where, (int32_t)i, left, llen, right, rlen);
}

static pt_status json_merges(pt_tokenizer *t, const json_t *merges, const smap *names)
{
    if (!json_is_array(merges)) return tok_jerr(t->source, PT_ERR_USER, "model.merges", "expected an array");
    if (!tok_pmap_init(&t->merges, json_array_size(merges))) return ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < json_array_size(merges); i++) TRY(json_merge(t, names, json_array_get(merges, i), i));
    return PT_OK;
}

static pt_status json_unk(pt_tokenizer *t, const json_t *m, const smap *names)
{
    const json_t *unk = json_object_get(m, "unk_token");
    if (!unk || json_is_null(unk)) return PT_OK;
    if (!json_is_string(unk)) return tok_jerr(t->source, PT_ERR_USER, "model.unk_token", "expected a string or null");
    t->unk = tok_smap_get(names, json_string_value(unk), json_string_length(unk));
    if (t->unk < 0)
        return tok_jerr(t->source, PT_ERR_USER, "model.unk_token", "\"%s\" is not in model.vocab",
                        shown_text(json_string_value(unk)).s);
    return PT_OK;
}

static pt_status json_model(pt_tokenizer *t, const json_t *root)
{
    const json_t *m = json_object_get(root, "model");
    if (!json_is_object(m)) return tok_jerr(t->source, PT_ERR_USER, "model", m ? "expected an object" : "missing");
    TRY(json_model_flags(t, m));
    smap names = {0};
    pt_status rc = json_vocab(t, json_object_get(m, "vocab"), &names);
    if (rc == PT_OK) rc = json_merges(t, json_object_get(m, "merges"), &names);
    if (rc == PT_OK) rc = json_unk(t, m, &names);
    tok_smap_free(&names);
    return rc;
}

/* ---- added tokens ---- */

static pt_status json_added_one(pt_tokenizer *t, const json_t *a, size_t i)
{
    char where[96];
    snprintf(where, sizeof where, "added_tokens[%zu]", i);
    if (!json_is_object(a)) return tok_jerr(t->source, PT_ERR_USER, where, "expected an object");
    const json_t *id = json_object_get(a, "id"), *content = json_object_get(a, "content");
    json_int_t v = json_is_integer(id) ? json_integer_value(id) : -1;
    snprintf(where, sizeof where, "added_tokens[%zu].id", i);
    if (v < 0 || v >= TOK_MAX_ID) return tok_jerr(t->source, PT_ERR_USER, where, "expected an id from 0 to %d", TOK_MAX_ID - 1);
    snprintf(where, sizeof where, "added_tokens[%zu].content", i);
    if (!json_is_string(content) || json_string_length(content) == 0)
        return tok_jerr(t->source, PT_ERR_USER, where, "expected a non-empty string");
    added_token f = {0};
    static const char *const keys[] = {"special", "single_word", "lstrip", "rstrip", "normalized"};
    bool *const vals[] = {&f.special, &f.single_word, &f.lstrip, &f.rstrip, &f.normalized};
    for (int k = 0; k < 5; k++) {
        snprintf(where, sizeof where, "added_tokens[%zu].%s", i, keys[k]);
        TRY(tok_json_flag(t->source, a, keys[k], where, k == 4, vals[k]));
    }
    return tok_add_added(t, (int32_t)v, json_string_value(content), json_string_length(content), f);
}

static pt_status json_added(pt_tokenizer *t, const json_t *root)
{
    const json_t *list = json_object_get(root, "added_tokens");
    if (!list || json_is_null(list)) return PT_OK;
    if (!json_is_array(list)) return tok_jerr(t->source, PT_ERR_USER, "added_tokens", "expected an array");
    for (size_t i = 0; i < json_array_size(list); i++) TRY(json_added_one(t, json_array_get(list, i), i));
    return PT_OK;
}

/* ---- pre-tokenizer ---- */

static pt_status json_pretok(pt_tokenizer *t, const json_t *node, const char *path, bool *byte_level);

static pt_status json_split_behavior(const pt_tokenizer *t, const json_t *node, const char *path, split_behavior *out)
{
    static const char *const names[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    const char *b = json_string_value(json_object_get(node, "behavior"));
    for (int i = 0; b && i < 5; i++)
        if (strcmp(b, names[i]) == 0) return *out = (split_behavior)i, PT_OK;
    char where[300];
    snprintf(where, sizeof where, "%s.behavior", path);
    return tok_jerr(t->source, PT_ERR_USER, where,
                    "\"%s\" is not one of Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous", b ? b : "?");
}

static pt_status json_split(pt_tokenizer *t, const json_t *node, const char *path)
{
    char where[300];
    bool invert = false;
    snprintf(where, sizeof where, "%s.invert", path);
    TRY(tok_json_flag(t->source, node, "invert", where, false, &invert));
    if (invert) return tok_jerr(t->source, PT_ERR_UNSUPPORTED, where, "an inverted Split is not supported");
    split_behavior bh = SPLIT_ISOLATED;
    TRY(json_split_behavior(t, node, path, &bh));
    const json_t *pat = json_object_get(node, "pattern");
    const json_t *re = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
    snprintf(where, sizeof where, "%s.pattern", path);
    if (!json_is_string(re) && !json_is_string(lit))
        return tok_jerr(t->source, PT_ERR_USER, where, "expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    const json_t *p = json_is_string(re) ? re : lit;
    snprintf(where, sizeof where, "%s.pattern.%s", path, p == re ? "Regex" : "String");
    return tok_pretok_add_split(t, where, json_string_value(p), json_string_length(p), p == lit, bh);
}

static pt_status json_bytelevel(pt_tokenizer *t, const json_t *node, const char *path, bool *byte_level)
{
    char where[300];
    bool prefix = true, regex = true;
    snprintf(where, sizeof where, "%s.add_prefix_space", path);
    TRY(tok_json_flag(t->source, node, "add_prefix_space", where, true, &prefix));
    snprintf(where, sizeof where, "%s.use_regex", path);
    TRY(tok_json_flag(t->source, node, "use_regex", where, true, &regex));
    *byte_level = true;
    return tok_pretok_add_bytelevel(t, path, prefix, regex);
}

static pt_status json_sequence(pt_tokenizer *t, const json_t *node, const char *path, bool *byte_level)
{
    const json_t *list = json_object_get(node, "pretokenizers");
    char where[300];
    snprintf(where, sizeof where, "%s.pretokenizers", path);
    if (!json_is_array(list)) return tok_jerr(t->source, PT_ERR_USER, where, "expected an array");
    for (size_t i = 0; i < json_array_size(list); i++) {
        snprintf(where, sizeof where, "%s.pretokenizers[%zu]", path, i);
        TRY(json_pretok(t, json_array_get(list, i), where, byte_level));
    }
    return PT_OK;
}

static pt_status json_pretok(pt_tokenizer *t, const json_t *node, const char *path, bool *byte_level)
{
    if (!json_is_object(node)) return tok_jerr(t->source, PT_ERR_USER, path, "expected an object");
    const char *type = json_string_value(json_object_get(node, "type"));
    char where[300];
    snprintf(where, sizeof where, "%s.type", path);
    if (!type) return tok_jerr(t->source, PT_ERR_USER, where, "expected a string");
    if (strcmp(type, "Sequence") == 0) return json_sequence(t, node, path, byte_level);
    if (*byte_level) return tok_jerr(t->source, PT_ERR_UNSUPPORTED, path, "steps after ByteLevel are not supported");
    if (strcmp(type, "ByteLevel") == 0) return json_bytelevel(t, node, path, byte_level);
    if (strcmp(type, "Metaspace") == 0) return tok_json_metaspace(t, node, path);
    if (strcmp(type, "Split") == 0) return json_split(t, node, path);
    if (strcmp(type, "Digits") == 0) {
        bool individual = false;
        snprintf(where, sizeof where, "%s.individual_digits", path);
        TRY(tok_json_flag(t->source, node, "individual_digits", where, false, &individual));
        return tok_pretok_add_digits(t, path, individual);
    }
    return tok_jerr(t->source, PT_ERR_UNSUPPORTED, where,
                    "\"%s\" is not supported (supported: ByteLevel, Metaspace, Split, Digits, Sequence)", type);
}

/* The pre-tokenizer: byte-level BPE needs its ByteLevel step; SentencePiece-style BPE may have
 * none, and is checked to be one. */
static pt_status json_pretokenizer(pt_tokenizer *t, const json_t *root)
{
    const json_t *node = json_object_get(root, "pre_tokenizer");
    bool byte_level = false;
    if (node && !json_is_null(node)) TRY(json_pretok(t, node, "pre_tokenizer", &byte_level));
    return t->kind == TOK_SPM ? tok_json_spm_check(t) : PT_OK;
}

/* ---- tokenizer_config.json ---- */

/* The path of the tokenizer_config.json beside path (malloc'd), or NULL when out of memory. */
static char *config_path(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0;
    char *file = malloc(dir + sizeof "tokenizer_config.json");
    if (!file) return NULL;
    memcpy(file, path, dir);
    strcpy(file + dir, "tokenizer_config.json");
    return file;
}

/* cfg[key]: a token given as "text" or {"content": "text"} (or null) -> its id in *id. */
static pt_status json_config_token(const pt_tokenizer *t, const char *file, const json_t *cfg, const char *key, int32_t *id)
{
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!v || json_is_null(v)) return PT_OK;
    if (!json_is_string(v)) return tok_jerr(file, PT_ERR_USER, key, "expected a string, {\"content\": ...} or null");
    *id = tok_find_text(t, json_string_value(v), json_string_length(v));
    if (*id < 0)
        return tok_jerr(file, PT_ERR_USER, key, "\"%s\" is not a token of %s", shown_text(json_string_value(v)).s,
                        shown_text(t->source).s);
    return PT_OK;
}

/* cfg's pad_token, when it is a token of t (one that is not is left unset: transformers would add it
 * as a new token, which no reader of ptrain's pad needs): the id a reward model pads with. */
static void json_config_pad(pt_tokenizer *t, const json_t *cfg)
{
    const json_t *v = json_object_get(cfg, "pad_token");
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (json_is_string(v)) t->pad = tok_find_text(t, json_string_value(v), json_string_length(v));
}

/* bos/eos, pad, the chat template, the other special tokens' texts and the decoder's clean-up from
 * tokenizer_config.json in the directory of path, if any (its tokens replaced by those of
 * special_tokens_map.json when it has no added_tokens_decoder, as transformers 5 reads them). Its add_bos_token/add_eos_token are not
 * read: beside a tokenizer.json, transformers 5 drops them and the post-processor alone decides.
 * clean_up_tokenization_spaces cleans decoded text only with
 * clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output also true, as
 * transformers 5.25 decides for a BPE model (without it, it ignores the flag). */
static pt_status json_config(pt_tokenizer *t, const char *path)
{
    char *file = config_path(path);
    if (!file) return ERR(PT_ERR_NOMEM, "out of memory");
    json_t *cfg = NULL;
    pt_status rc = access(file, F_OK) == 0 ? tok_json_open(file, &cfg) : PT_OK;
    if (rc == PT_OK) rc = tok_json_special_tokens_map(path, &cfg);
    if (rc == PT_OK && cfg) rc = json_config_token(t, file, cfg, "bos_token", &t->bos);
    if (rc == PT_OK && cfg) rc = json_config_token(t, file, cfg, "eos_token", &t->eos);
    if (rc == PT_OK && cfg) json_config_pad(t, cfg);
    if (rc == PT_OK && cfg) rc = tok_json_config_template(t, file, cfg);
    bool clean = false, for_bpe = false;
    if (rc == PT_OK && cfg)
        rc = tok_json_flag(file, cfg, "clean_up_tokenization_spaces", "clean_up_tokenization_spaces", false, &clean);
    if (rc == PT_OK && cfg)
        rc = tok_json_flag(file, cfg, "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output",
                           "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output", false, &for_bpe);
    t->clean_up_spaces = clean && for_bpe;
    if (rc == PT_OK && cfg) rc = tok_json_config_specials(t, file, cfg);
    json_decref(cfg);
    free(file);
    return rc;
}

/* transformers 5 builds the tokenizer of a tokenizer_class with an __init__ of its own from the
 * file's vocabulary, merges, added tokens and post-processor, and the class's own normalizer,
 * pre-tokenizer, decoder and BPE flags, whatever the file says (convert_to_native_format). For
 * Qwen2Tokenizer and Qwen3_5Tokenizer that is NFC, the class's split regex (Qwen2's; Qwen3.5's,
 * which keeps marks with letters), then ByteLevel without its regex (add_prefix_space from
 * tokenizer_config.json, default false), and BPE without unk, byte fallback, fuse_unk or
 * ignore_merges: root is changed to say so. The file's pipeline stays for other classes, whose
 * own pipelines ptrain's readers already give (the tests hold them to transformers). */
static pt_status json_class_pipeline(json_t *root, const char *path)
{
    char *file = config_path(path);
    if (!file) return ERR(PT_ERR_NOMEM, "out of memory");
    json_t *cfg = NULL;
    pt_status rc = access(file, F_OK) == 0 ? tok_json_open(file, &cfg) : PT_OK;
    const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
    const char *re = !cls                                 ? NULL
                     : strcmp(cls, "Qwen2Tokenizer") == 0   ? RE_QWEN2
                     : strcmp(cls, "Qwen3_5Tokenizer") == 0 ? RE_QWEN35
                                                            : NULL;
    json_t *model = json_object_get(root, "model");
    const char *type = json_string_value(json_object_get(model, "type"));
    bool prefix = false;
    if (rc == PT_OK && re && json_is_object(model) && (!type || strcmp(type, "BPE") == 0))
        rc = tok_json_flag(file, cfg, "add_prefix_space", "add_prefix_space", false, &prefix);
    else
        re = NULL;
    if (rc == PT_OK && re) {
        json_t *pre = json_pack("{s:s, s:[{s:s, s:{s:s}, s:s, s:b}, {s:s, s:b, s:b, s:b}]}", "type", "Sequence",
                                "pretokenizers", "type", "Split", "pattern", "Regex", re, "behavior", "Isolated",
                                "invert", 0, "type", "ByteLevel", "add_prefix_space", prefix, "trim_offsets", 1,
                                "use_regex", 0);
        bool ok = pre && json_object_set_new(root, "pre_tokenizer", pre) == 0 &&
                  json_object_set_new(root, "normalizer", json_pack("{s:s}", "type", "NFC")) == 0 &&
                  json_object_set_new(root, "decoder", json_pack("{s:s}", "type", "ByteLevel")) == 0 &&
                  json_object_set_new(model, "unk_token", json_null()) == 0 &&
                  json_object_set_new(model, "byte_fallback", json_false()) == 0 &&
                  json_object_set_new(model, "fuse_unk", json_false()) == 0 &&
                  json_object_set_new(model, "ignore_merges", json_false()) == 0;
        if (!ok) rc = ERR(PT_ERR_NOMEM, "out of memory");
    }
    json_decref(cfg);
    free(file);
    return rc;
}

static pt_status json_build(pt_tokenizer *t, json_t *root, const char *path)
{
    TRY(json_class_pipeline(root, path));
    t->kind = tok_json_has_bytelevel(json_object_get(root, "pre_tokenizer"), 0) ? TOK_BYTE_LEVEL : TOK_SPM;
    TRY(tok_json_normalizer(t, root));
    TRY(json_model(t, root));
    TRY(json_added(t, root));
    TRY(json_pretokenizer(t, root));
    if (t->kind == TOK_SPM) TRY(tok_json_decoder(t, root));
    TRY(tok_finish(t));
    tok_json_post_processor(t, json_object_get(root, "post_processor"), 0);
    return json_config(t, path);
}

pt_status tokenizer_from_json(const char *path, pt_tokenizer **out)
{
    *out = NULL;
    json_t *root;
    TRY(tok_json_open(path, &root));
    pt_tokenizer *t = NULL;
    pt_status rc = tok_new(path, &t);
    if (rc == PT_OK) rc = json_build(t, root, path);
    json_decref(root);
    if (rc != PT_OK) {
        if (t) tokenizer_free(t);
        return rc;
    }
    *out = t;
    return PT_OK;
}
