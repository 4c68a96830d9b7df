/* tok_json_spm.c — the parts of a tokenizer.json that SentencePiece-style BPE uses (and that
 * byte-level BPE may): the normalizer (Prepend, Replace, NFC, NFD, NFKC, NFKD, Precompiled and
 * their Sequence), the Metaspace pre-tokenizer, the decoder (Replace, ByteFallback, Fuse, Strip,
 * Metaspace and their Sequence), and the post-processor's bos/eos. Errors name the file and the
 * JSON path of the value. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "normalize.h"
#include "ptrain/error.h"
#include "tok_impl.h"

/* node[key] as a string (path names it in errors). */
static pt_status json_str(const pt_tokenizer *t, const json_t *node, const char *key, const char *path,
                          const char **s, size_t *len)
{
    const json_t *v = json_object_get(node, key);
    char where[300];
    snprintf(where, sizeof where, "%s.%s", path, key);
    if (!json_is_string(v)) return tok_jerr(t->source, PT_ERR_USER, where, v ? "expected a string" : "missing");
    *s = json_string_value(v);
    *len = json_string_length(v);
    return PT_OK;
}

/* node.pattern: {"String": s} (*literal) or {"Regex": r}; *where gets its JSON path. */
static pt_status json_pattern(const pt_tokenizer *t, const json_t *node, const char *path, const char **pat,
                              size_t *len, bool *literal, char *where, size_t wsize)
{
    const json_t *p = json_object_get(node, "pattern");
    const json_t *re = json_object_get(p, "Regex"), *lit = json_object_get(p, "String");
    snprintf(where, wsize, "%s.pattern", path);
    if (!json_is_string(re) && !json_is_string(lit))
        return tok_jerr(t->source, PT_ERR_USER, where, "expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    const json_t *v = json_is_string(re) ? re : lit;
    snprintf(where, wsize, "%s.pattern.%s", path, v == re ? "Regex" : "String");
    *pat = json_string_value(v);
    *len = json_string_length(v);
    *literal = v == lit;
    return PT_OK;
}

/* ---- normalizer ---- */

static pt_status json_norm_one(pt_tokenizer *t, const json_t *n, const char *path);

static pt_status json_norm_sequence(pt_tokenizer *t, const json_t *n, const char *path)
{
    const json_t *list = json_object_get(n, "normalizers");
    char where[300];
    snprintf(where, sizeof where, "%s.normalizers", path);
    if (!json_is_array(list)) return tok_jerr(t->source, PT_ERR_USER, where, "expected an array");
    for (size_t i = 0; i < json_array_size(list); i++) {
        snprintf(where, sizeof where, "%s.normalizers[%zu]", path, i);
        TRY(json_norm_one(t, json_array_get(list, i), where));
    }
    return PT_OK;
}

static pt_status json_norm_replace(pt_tokenizer *t, const json_t *n, const char *path)
{
    const char *pat, *content;
    size_t plen, clen;
    bool literal;
    char where[300];
    TRY(json_str(t, n, "content", path, &content, &clen));
    TRY(json_pattern(t, n, path, &pat, &plen, &literal, where, sizeof where));
    return tok_norm_add_replace(t, where, pat, plen, literal, content, clen);
}

/* Precompiled: precompiled_charsmap, SentencePiece's compiled rules in base64. */
static pt_status json_norm_precompiled(pt_tokenizer *t, const json_t *n, const char *path)
{
    const char *b64;
    size_t len, size;
    char where[300];
    uint8_t *blob;
    TRY(json_str(t, n, "precompiled_charsmap", path, &b64, &len));
    snprintf(where, sizeof where, "%s.precompiled_charsmap", path);
    TRY(base64_decode(t->source, where, b64, len, &blob, &size));
    pt_status rc = tok_norm_add_charsmap(t, where, blob, size);
    free(blob);
    return rc;
}

static pt_status json_norm_one(pt_tokenizer *t, const json_t *n, const char *path)
{
    if (!json_is_object(n)) return tok_jerr(t->source, PT_ERR_USER, path, "expected an object");
    const char *type, *text;
    size_t tlen, len;
    TRY(json_str(t, n, "type", path, &type, &tlen));
    if (strcmp(type, "Sequence") == 0) return json_norm_sequence(t, n, path);
    if (strcmp(type, "Replace") == 0) return json_norm_replace(t, n, path);
    if (strcmp(type, "Prepend") == 0) {
        TRY(json_str(t, n, "prepend", path, &text, &len));
        return tok_norm_add_prepend(t, text, len);
    }
    unorm_form form;
    if (unorm_from_name(type, &form)) return tok_norm_add_unicode(t, (int)form);
    if (strcmp(type, "Precompiled") == 0) return json_norm_precompiled(t, n, path);
    char where[300];
    snprintf(where, sizeof where, "%s.type", path);
    return tok_jerr(t->source, PT_ERR_UNSUPPORTED, where,
                    "\"%s\" is not supported (supported: Prepend, Replace, NFC, NFD, NFKC, NFKD, Precompiled, Sequence)",
                    type);
}

pt_status tok_json_normalizer(pt_tokenizer *t, const json_t *root)
{
    const json_t *n = json_object_get(root, "normalizer");
    return !n || json_is_null(n) ? PT_OK : json_norm_one(t, n, "normalizer");
}

/* ---- Metaspace (pre-tokenizer and decoder) ---- */

/* replacement (one character, default "▁") and the prepend scheme: prepend_scheme, or the older
 * add_prefix_space (true: always). */
static pt_status json_metaspace_opts(const pt_tokenizer *t, const json_t *node, const char *path, const char **rep,
                                     size_t *rep_len, int *prepend)
{
    char where[300];
    *rep = SPM_SPACE;
    *rep_len = 3;
    if (json_object_get(node, "replacement")) {
        TRY(json_str(t, node, "replacement", path, rep, rep_len));
        snprintf(where, sizeof where, "%s.replacement", path);
        if (*rep_len == 0 || tok_utf8_seq_len((const uint8_t *)*rep, *rep_len) != *rep_len)
            return tok_jerr(t->source, PT_ERR_USER, where, "expected one character");
    }
    const json_t *scheme = json_object_get(node, "prepend_scheme");
    if (!scheme || json_is_null(scheme)) {
        bool add = true;
        snprintf(where, sizeof where, "%s.add_prefix_space", path);
        TRY(tok_json_flag(t->source, node, "add_prefix_space", where, true, &add));
        *prepend = add ? PREPEND_ALWAYS : PREPEND_NEVER;
        return PT_OK;
    }
    static const char *const names[] = {"always", "first", "never"};
    const char *s = json_string_value(scheme);
    for (int i = 0; s && i < 3; i++)
        if (strcmp(s, names[i]) == 0) return *prepend = i, PT_OK;
    snprintf(where, sizeof where, "%s.prepend_scheme", path);
    return tok_jerr(t->source, PT_ERR_USER, where, "\"%s\" is not one of always, first, never", s ? s : "?");
}

pt_status tok_json_metaspace(pt_tokenizer *t, const json_t *node, const char *path)
{
    char where[300];
    if (t->kind != TOK_SPM)
        return tok_jerr(t->source, PT_ERR_UNSUPPORTED, path, "Metaspace and ByteLevel together are not supported");
    const char *rep;
    size_t rep_len;
    int prepend;
    bool split = true;
    TRY(json_metaspace_opts(t, node, path, &rep, &rep_len, &prepend));
    snprintf(where, sizeof where, "%s.split", path);
    TRY(tok_json_flag(t->source, node, "split", where, true, &split));
    return tok_pretok_add_metaspace(t, rep, rep_len, prepend, split);
}

/* ---- decoder ---- */

typedef struct {
    bool fused, stripped;
} dec_state;

static pt_status json_dec_one(pt_tokenizer *t, const json_t *d, const char *path, dec_state *st);

static pt_status json_dec_strip(pt_tokenizer *t, const json_t *d, const char *path, dec_state *st)
{
    const char *content;
    size_t len;
    char where[300];
    if (st->stripped) return tok_jerr(t->source, PT_ERR_UNSUPPORTED, path, "a second Strip is not supported");
    TRY(json_str(t, d, "content", path, &content, &len));
    snprintf(where, sizeof where, "%s.content", path);
    if (len == 0 || len > 4 || tok_utf8_seq_len((const uint8_t *)content, len) != len)
        return tok_jerr(t->source, PT_ERR_USER, where, "expected one character");
    static const char *const keys[] = {"start", "stop"};
    uint8_t *const vals[] = {&t->strip_start, &t->strip_stop};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(d, keys[i]);
        snprintf(where, sizeof where, "%s.%s", path, keys[i]);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 255)
            return tok_jerr(t->source, PT_ERR_USER, where, "expected a count from 0 to 255");
        *vals[i] = (uint8_t)json_integer_value(v);
    }
    memcpy(t->strip_char, content, len);
    t->strip_char[len] = '\0';
    t->strip_fused = st->fused;
    st->stripped = true;
    return PT_OK;
}

/* The Metaspace decoder: the replacement reads as a space, and in the first token it vanishes
 * unless the prepend scheme is never. */
static pt_status json_dec_metaspace(pt_tokenizer *t, const json_t *d, const char *path)
{
    const char *rep;
    size_t rep_len;
    int prepend;
    TRY(json_metaspace_opts(t, d, path, &rep, &rep_len, &prepend));
    if (t->ms_rep_len) return tok_jerr(t->source, PT_ERR_UNSUPPORTED, path, "a second Metaspace is not supported");
    TRY(tok_spm_dec_add_replace(t, rep, rep_len, " ", 1));
    if (prepend == PREPEND_NEVER) return PT_OK;
    memcpy(t->ms_rep, rep, rep_len);
    t->ms_rep_len = (uint8_t)rep_len;
    return PT_OK;
}

static pt_status json_dec_sequence(pt_tokenizer *t, const json_t *d, const char *path, dec_state *st)
{
    const json_t *list = json_object_get(d, "decoders");
    char where[300];
    snprintf(where, sizeof where, "%s.decoders", path);
    if (!json_is_array(list)) return tok_jerr(t->source, PT_ERR_USER, where, "expected an array");
    for (size_t i = 0; i < json_array_size(list); i++) {
        snprintf(where, sizeof where, "%s.decoders[%zu]", path, i);
        TRY(json_dec_one(t, json_array_get(list, i), where, st));
    }
    return PT_OK;
}

static pt_status json_dec_replace(pt_tokenizer *t, const json_t *d, const char *path)
{
    const char *pat, *content;
    size_t plen, clen;
    bool literal;
    char where[300];
    TRY(json_str(t, d, "content", path, &content, &clen));
    TRY(json_pattern(t, d, path, &pat, &plen, &literal, where, sizeof where));
    if (!literal) return tok_jerr(t->source, PT_ERR_UNSUPPORTED, where, "a Regex in a Replace decoder is not supported");
    if (plen == 0) return tok_jerr(t->source, PT_ERR_USER, where, "the pattern is empty");
    return tok_spm_dec_add_replace(t, pat, plen, content, clen);
}

static pt_status json_dec_one(pt_tokenizer *t, const json_t *d, const char *path, dec_state *st)
{
    if (!json_is_object(d)) return tok_jerr(t->source, PT_ERR_USER, path, "expected an object");
    const char *type;
    size_t tlen;
    TRY(json_str(t, d, "type", path, &type, &tlen));
    if (strcmp(type, "Sequence") == 0) return json_dec_sequence(t, d, path, st);
    if (strcmp(type, "Replace") == 0) return json_dec_replace(t, d, path);
    if (strcmp(type, "Strip") == 0) return json_dec_strip(t, d, path, st);
    if (strcmp(type, "Metaspace") == 0) return json_dec_metaspace(t, d, path);
    if (strcmp(type, "ByteFallback") == 0) return t->dec_bytes = true, PT_OK;
    if (strcmp(type, "Fuse") == 0) return st->fused = true, PT_OK;
    char where[300];
    snprintf(where, sizeof where, "%s.type", path);
    return tok_jerr(t->source, PT_ERR_UNSUPPORTED, where,
                    "\"%s\" is not supported for SentencePiece-style BPE (supported: Replace, ByteFallback, Fuse, Strip, "
                    "Metaspace, Sequence)", type);
}

/* The decoder of a SentencePiece-style tokenizer (byte-level ones decode bytes as they are). */
pt_status tok_json_decoder(pt_tokenizer *t, const json_t *root)
{
    const json_t *d = json_object_get(root, "decoder");
    if (!d || json_is_null(d))
        return tok_jerr(t->source, PT_ERR_UNSUPPORTED, "decoder",
                        "missing: SentencePiece-style BPE needs one (e.g. Replace \"" SPM_SPACE "\" -> \" \", ByteFallback, "
                        "Fuse, Strip)");
    dec_state st = {0};
    return json_dec_one(t, d, "decoder", &st);
}

/* ---- which kind ---- */

/* Whether node (a pre-tokenizer, maybe a Sequence) has a ByteLevel step (jansson bounds the
 * depth of what it parses). */
bool tok_json_has_bytelevel(const json_t *node, int depth)
{
    const char *type = json_string_value(json_object_get(node, "type"));
    if (!type || depth > 4096) return false;
    if (strcmp(type, "ByteLevel") == 0) return true;
    const json_t *list = json_object_get(node, "pretokenizers");
    for (size_t i = 0; strcmp(type, "Sequence") == 0 && i < json_array_size(list); i++)
        if (tok_json_has_bytelevel(json_array_get(list, i), depth + 1)) return true;
    return false;
}

/* A BPE without ByteLevel is read as SentencePiece-style only when something says so. */
pt_status tok_json_spm_check(const pt_tokenizer *t)
{
    bool metaspace = false, space = false;
    for (int i = 0; i < t->n_steps; i++) metaspace |= t->steps[i].metaspace;
    for (int i = 0; i < t->n_norm; i++) space |= memmem(t->norm[i].text, t->norm[i].len, SPM_SPACE, 3) != NULL;
    if (t->byte_fallback || metaspace || space) return PT_OK;
    return tok_jerr(t->source, PT_ERR_UNSUPPORTED, "pre_tokenizer",
                    "no ByteLevel step, and no byte_fallback, Metaspace or \"" SPM_SPACE "\" normalizer either: only "
                    "byte-level and SentencePiece-style BPE are supported");
}

/* ---- bos/eos the post-processor adds ---- */

/* TemplateProcessing's "single" template: a SpecialToken before the sequence adds bos, one
 * after it adds eos (a Sequence of processors is searched for one). */
void tok_json_post_processor(pt_tokenizer *t, const json_t *pp, int depth)
{
    const char *type = json_string_value(json_object_get(pp, "type"));
    if (!type || depth > 8) return;
    const json_t *list = json_object_get(pp, "processors");
    for (size_t i = 0; strcmp(type, "Sequence") == 0 && i < json_array_size(list); i++)
        tok_json_post_processor(t, json_array_get(list, i), depth + 1);
    if (strcmp(type, "TemplateProcessing") != 0) return;
    const json_t *single = json_object_get(pp, "single");
    bool seen_seq = false;
    for (size_t i = 0; i < json_array_size(single); i++) {
        const json_t *item = json_array_get(single, i);
        if (json_object_get(item, "Sequence")) seen_seq = true;
        else if (json_object_get(item, "SpecialToken")) *(seen_seq ? &t->add_eos : &t->add_bos) = true;
    }
}
