/* tok_gguf_spm.c — loading a SentencePiece-style BPE tokenizer from GGUF metadata
 * (tokenizer.ggml.model "llama": Llama 2, Mistral, Phi-3, Gemma) so that ids equal the model's
 * own tokenizer (SentencePiece, its Hub tokenizer.json, llama.cpp):
 *   - the file has no merges: they are every split of a token into two tokens, best first by the
 *     token's score (SentencePiece BPE merges the pair whose merged piece scores highest), then
 *     by longer left and right halves, then in file order (transformers' generate_merges);
 *   - control tokens (type 3) and the bos/eos/unk/pad tokens are special added tokens,
 *     user-defined ones (type 4) plain added tokens; byte tokens (type 6) <0x00>..<0xFF> are the
 *     byte fallback, all 256 or none;
 *   - spaces become "▁" with a "▁" prepended to each text between special tokens, even one that
 *     starts with a space (SentencePiece's add_dummy_prefix; never when
 *     tokenizer.ggml.add_space_prefix is false); Gemma (general.architecture gemma, gemma2,
 *     gemma3) has no prefix, spells its runs of spaces with real spaces (read as "▁"s) and ranks
 *     merges by file order instead of score;
 *   - tokenizer.ggml.model "gemma4" (Gemma 4, 262,144 tokens) lists its merges in the file, has no
 *     prefix, and newline runs are split from the text around them (as llama.cpp's "gemma4"). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/arch.h"
#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "tok_impl.h"

enum { GGUF_TOKEN_UNKNOWN = 2, GGUF_TOKEN_BYTE = 6, GGUF_TOKEN_TYPE_MAX = 6 };

typedef struct {
    const gguf_file *f;
    const gguf_kv *tokens, *scores, *types; /* types may be NULL */
    bool gemma;
    bool gemma4; /* tokenizer.ggml.model "gemma4": merges in the file, newline runs split apart */
    smap last;  /* spelling -> the last id spelled so (transformers' {token: index}) */
    smap first; /* spelling -> the first id spelled so */
    uint8_t *has_len; /* has_len[k]: some token is k bytes long (k <= max_len) */
    size_t max_len;
} spm_src;

typedef struct {
    int32_t a, b, id;
    uint32_t llen, rlen, seq; /* halves' lengths in characters, order of generation */
    float score;
} spm_merge;

/* ---- tokens ---- */

static size_t utf8_count(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t i = 0; i < len; i++) n += ((uint8_t)s[i] & 0xc0) != 0x80;
    return n;
}

/* Gemma files spell a token of spaces (white space with at least one space, as Python's
 * isspace has it) with the spaces themselves; the vocabulary has "▁" for each character. */
static bool gemma_space_token(const char *s, size_t len)
{
    bool space = false;
    for (size_t i = 0, k; i < len; i += k) {
        uint32_t cp = tok_utf8_decode((const uint8_t *)s + i, &k);
        if (!tok_uni_is_space(cp) && !(cp >= 0x1c && cp <= 0x1f)) return false;
        space |= cp == ' ';
    }
    return space;
}

static pt_status spm_token(pt_tokenizer *t, const spm_src *src, uint64_t i)
{
    gguf_str s = gguf_array_str(src->tokens, i);
    if (tok_utf8_invalid_at(s.data, s.len) < s.len)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens[%llu]: not valid UTF-8", shown_text(t->source).s,
                   (unsigned long long)i);
    if (!src->gemma || !gemma_space_token(s.data, s.len))
        return tok_set(t, (int32_t)i, s.data, s.len, TOKF_MODEL, true);
    size_t n = utf8_count(s.data, s.len);
    char *spaces = malloc(3 * n);
    if (!spaces) return ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) memcpy(spaces + 3 * k, SPM_SPACE, 3);
    pt_status rc = tok_set(t, (int32_t)i, spaces, 3 * n, TOKF_MODEL, true);
    free(spaces);
    return rc;
}

static const char *spm_spelling(const pt_tokenizer *t, int32_t id, size_t *len)
{
    *len = t->tok[id].slen;
    return t->bytes + t->tok[id].soff;
}

/* Every token, and the spelling -> id maps (t->bytes no longer moves until tok_finish). */
static pt_status spm_tokens(pt_tokenizer *t, spm_src *src)
{
    uint64_t n = src->tokens->count;
    if (n == 0 || n >= TOK_MAX_ID)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: %llu tokens", shown_text(t->source).s,
                   (unsigned long long)n);
    for (uint64_t i = 0; i < n; i++) {
        TRY(spm_token(t, src, i));
        if (t->tok[i].slen > src->max_len) src->max_len = t->tok[i].slen;
    }
    src->has_len = calloc(src->max_len + 1, 1);
    if (!src->has_len || !tok_smap_init(&src->last, n) || !tok_smap_init(&src->first, n))
        return ERR(PT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < n; i++) src->has_len[t->tok[i].slen] = 1;
    for (uint64_t i = 0; i < n; i++) {
        size_t slen, rlen;
        const char *s = spm_spelling(t, (int32_t)i, &slen);
        const char *r = spm_spelling(t, (int32_t)(n - 1 - i), &rlen);
        if (!tok_smap_put(&src->last, s, slen, (int32_t)i) || !tok_smap_put(&src->first, r, rlen, (int32_t)(n - 1 - i)))
            return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

/* ---- scores and token types ---- */

static pt_status spm_scores(pt_tokenizer *t, spm_src *src)
{
    const char *key = "tokenizer.ggml.scores";
    if (!gguf_find(src->f, key) && (src->gemma || src->gemma4)) return PT_OK; /* ranked by file order */
    if (gguf_get_array(src->f, key, GGUF_TYPE_F32, &src->scores) != PT_OK)
        return ERR(PT_ERR_USER,
                   "%s: %s: missing or not an array of numbers (SentencePiece BPE ranks its merges by them)",
                   shown_text(t->source).s, key);
    if (src->scores->count != src->tokens->count)
        return ERR(PT_ERR_USER, "%s: %s: %llu scores for %llu tokens", shown_text(t->source).s, key,
                   (unsigned long long)src->scores->count, (unsigned long long)src->tokens->count);
    for (uint64_t i = 0; i < src->scores->count; i++)
        if (isnan(gguf_array_f32(src->scores, i)))
            return ERR(PT_ERR_USER, "%s: %s[%llu]: not a number", shown_text(t->source).s, key, (unsigned long long)i);
    return PT_OK;
}

static pt_status spm_type_check(const pt_tokenizer *t, const spm_src *src, uint64_t i)
{
    int64_t type = gguf_array_int(src->types, i);
    if (type < 0 || type > GGUF_TOKEN_TYPE_MAX)
        return ERR(PT_ERR_USER,
                   "%s: tokenizer.ggml.token_type[%llu]: %lld is not a token type (0 to 6: undefined, normal, unknown, "
                   "control, user-defined, unused, byte)",
                   shown_text(t->source).s, (unsigned long long)i, (long long)type);
    size_t len;
    const char *s = spm_spelling(t, (int32_t)i, &len);
    if (type == GGUF_TOKEN_BYTE && tok_spm_byte_value(s, len) < 0)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.token_type[%llu]: a byte token (6) spelled \"%s\" (byte tokens are "
                   "<0x00> to <0xFF>)", shown_text(t->source).s, (unsigned long long)i, shown_bytes(s, len).s);
    return PT_OK;
}

static pt_status spm_types(pt_tokenizer *t, spm_src *src)
{
    const char *key = "tokenizer.ggml.token_type";
    if (!gguf_find(src->f, key)) return PT_OK;
    if (gguf_get_array(src->f, key, GGUF_TYPE_I32, &src->types) != PT_OK)
        return ERR(PT_ERR_USER, "%s: %s: not an array of integers", shown_text(t->source).s, key);
    if (src->types->count != src->tokens->count)
        return ERR(PT_ERR_USER, "%s: %s: %llu entries for %llu tokens", shown_text(t->source).s, key,
                   (unsigned long long)src->types->count, (unsigned long long)src->tokens->count);
    for (uint64_t i = 0; i < src->types->count; i++) TRY(spm_type_check(t, src, i));
    return PT_OK;
}

/* Byte fallback needs every byte: a vocabulary with some <0xXX> tokens has all 256. */
static pt_status spm_byte_table(pt_tokenizer *t, const spm_src *src)
{
    int have = 0, missing = -1;
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        if (tok_smap_get(&src->last, name, 6) >= 0) have++;
        else if (missing < 0) missing = b;
    }
    if (have > 0 && have < 256)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: the byte tokens are incomplete: <0x%02X> is missing (%d of "
                   "<0x00> to <0xFF> are there; byte fallback needs all 256)", shown_text(t->source).s, missing, have);
    t->byte_fallback = have == 256;
    return PT_OK;
}

/* ---- merges ---- */

static int spm_merge_cmp(const void *pa, const void *pb)
{
    const spm_merge *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->llen != b->llen) return a->llen > b->llen ? -1 : 1;
    if (a->rlen != b->rlen) return a->rlen > b->rlen ? -1 : 1;
    return a->seq < b->seq ? -1 : a->seq > b->seq;
}

/* Within one token: splits ordered by left id, then right id. */
static int spm_split_cmp(const void *pa, const void *pb)
{
    const spm_merge *a = pa, *b = pb;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return a->b < b->b ? -1 : a->b > b->b;
}

typedef struct {
    spm_merge *v;
    size_t n, cap;
} merge_list;

static bool merge_list_push(merge_list *l, spm_merge m)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        spm_merge *grown = realloc(l->v, cap * sizeof *grown);
        if (!grown) return false;
        l->v = grown;
        l->cap = cap;
    }
    l->v[l->n++] = m;
    return true;
}

/* The score a token's merges rank by: its score, or for Gemma minus its position (of the last
 * token so spelled, as a Python dict built in file order keeps it). */
static float spm_score(const spm_src *src, int32_t last)
{
    return src->gemma ? -(float)last : gguf_array_f32(src->scores, (uint64_t)last);
}

/* Every split of the token first spelled at id into two tokens, appended to l. */
static bool spm_splits(const pt_tokenizer *t, const spm_src *src, int32_t id, merge_list *l)
{
    size_t len, k;
    const char *s = spm_spelling(t, id, &len);
    int32_t whole = tok_smap_get(&src->last, s, len);
    size_t from = l->n;
    uint32_t lchars = 0, total = (uint32_t)utf8_count(s, len);
    for (size_t i = 0; i < len; i += k) {
        k = tok_utf8_seq_len((const uint8_t *)s + i, len - i);
        if (k == 0) k = 1; /* tokens were checked to be UTF-8 */
        if (i == 0) continue;
        lchars++;
        if (!src->has_len[i] || !src->has_len[len - i]) continue; /* no token that long: skip the lookups */
        int32_t a = tok_smap_get(&src->last, s, i), b = tok_smap_get(&src->last, s + i, len - i);
        if (a >= 0 && b >= 0 &&
            !merge_list_push(l, (spm_merge){a, b, whole, lchars, total - lchars, 0, spm_score(src, whole)}))
            return false;
    }
    if (l->n - from > 1) qsort(l->v + from, l->n - from, sizeof *l->v, spm_split_cmp);
    return true;
}

static pt_status spm_merges(pt_tokenizer *t, const spm_src *src)
{
    merge_list l = {0};
    for (int32_t id = 0; id < (int32_t)src->tokens->count; id++) {
        size_t len;
        const char *s = spm_spelling(t, id, &len);
        if (tok_smap_get(&src->first, s, len) != id) continue; /* a later duplicate */
        if (!spm_splits(t, src, id, &l)) {
            free(l.v);
            return ERR(PT_ERR_NOMEM, "out of memory");
        }
    }
    for (size_t i = 0; i < l.n; i++) l.v[i].seq = (uint32_t)i;
    if (l.n > 1) qsort(l.v, l.n, sizeof *l.v, spm_merge_cmp);
    if (l.n >= INT32_MAX / 4) {
        free(l.v);
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: %zu merges, too many", shown_text(t->source).s, l.n);
    }
    bool ok = tok_pmap_init(&t->merges, l.n);
    for (size_t i = 0; ok && i < l.n; i++) tok_pmap_put(&t->merges, l.v[i].a, l.v[i].b, (int32_t)i, l.v[i].id);
    free(l.v);
    return ok ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
}

/* Gemma 4 ("gemma4"): the merges are in the file (tokenizer.ggml.merges, "left right", best
 * first), over the same "▁"-spelled tokens. */
static pt_status spm_file_merges(pt_tokenizer *t, const spm_src *src)
{
    const char *key = "tokenizer.ggml.merges";
    const gguf_kv *merges;
    if (gguf_get_array(src->f, key, GGUF_TYPE_STRING, &merges) != PT_OK)
        return ERR(PT_ERR_USER, "%s: %s: missing or not an array of strings (a \"gemma4\" vocabulary lists its merges)",
                   shown_text(t->source).s, key);
    if (merges->count >= TOK_MAX_ID)
        return ERR(PT_ERR_USER, "%s: %s: too many", shown_text(t->source).s, key);
    if (!tok_pmap_init(&t->merges, merges->count)) return ERR(PT_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < merges->count; i++) {
        gguf_str m = gguf_array_str(merges, i);
        char where[64];
        snprintf(where, sizeof where, "%s[%llu]", key, (unsigned long long)i);
        const char *right;
        size_t llen, rlen;
        if (!tok_merge_split(m.data, m.len, &llen, &right, &rlen))
            return ERR(PT_ERR_USER, "%s: %s: expected \"left right\"", shown_text(t->source).s, where);
        TRY(tok_merge(t, &src->last, where, (int32_t)i, m.data, llen, right, rlen));
    }
    return PT_OK;
}

/* ---- added tokens, pipeline, ids ---- */

static pt_status spm_added_one(pt_tokenizer *t, int32_t id, bool special)
{
    if (id < 0 || (t->tok[id].flags & TOKF_ADDED)) return PT_OK;
    size_t len;
    const char *s = spm_spelling(t, id, &len);
    return tok_add_added(t, id, s, len, (added_token){.special = special});
}

/* Control tokens and bos/eos/unk/pad are special added tokens, user-defined ones plain ones. */
static pt_status spm_added(pt_tokenizer *t, const spm_src *src, const int32_t *ids, int n_ids)
{
    for (uint64_t i = 0; src->types && i < src->types->count; i++)
        if (gguf_array_int(src->types, i) == GGUF_TOKEN_CONTROL) TRY(spm_added_one(t, (int32_t)i, true));
    for (int k = 0; k < n_ids; k++) TRY(spm_added_one(t, ids[k], true));
    for (uint64_t i = 0; src->types && i < src->types->count; i++)
        if (gguf_array_int(src->types, i) == GGUF_TOKEN_USER_DEFINED) TRY(spm_added_one(t, (int32_t)i, false));
    return PT_OK;
}

static pt_status spm_ids(pt_tokenizer *t, const spm_src *src)
{
    const gguf_file *f = src->f;
    TRY(tok_gguf_special_id(t, f, "tokenizer.ggml.bos_token_id", &t->bos));
    TRY(tok_gguf_special_id(t, f, "tokenizer.ggml.eos_token_id", &t->eos));
    TRY(tok_gguf_special_id(t, f, "tokenizer.ggml.unknown_token_id", &t->unk));
    TRY(tok_gguf_special_id(t, f, "tokenizer.ggml.padding_token_id", &t->pad));
    int32_t keyed[] = {t->bos, t->eos, t->unk, t->pad};
    for (uint64_t i = 0; t->unk < 0 && src->types && i < src->types->count; i++)
        if (gguf_array_int(src->types, i) == GGUF_TOKEN_UNKNOWN) t->unk = (int32_t)i;
    t->add_bos = true;
    TRY(gguf_opt_bool(f, "tokenizer.ggml.add_bos_token", &t->add_bos));
    TRY(gguf_opt_bool(f, "tokenizer.ggml.add_eos_token", &t->add_eos));
    return spm_added(t, src, keyed, 4);
}

/* Normalizer and decoder as SentencePiece (and llama.cpp) tokenize: the dummy prefix "▁" before
 * every text between special tokens, also one that starts with a space (Llama 2's tokenizer.json:
 * normalizer Prepend("▁") then Replace(" ", "▁"), no pre-tokenizer; transformers' GGUF loader
 * uses Metaspace "first" instead, which drops the prefix before a leading space); no prefix when
 * tokenizer.ggml.add_space_prefix is false, and never for Gemma. */
static pt_status spm_pipeline(pt_tokenizer *t, const spm_src *src)
{
    bool prefix = !src->gemma;
    TRY(gguf_opt_bool(src->f, "tokenizer.ggml.add_space_prefix", &prefix));
    if (src->gemma || src->gemma4) prefix = false;
    if (prefix) TRY(tok_norm_add_prepend(t, SPM_SPACE, 3));
    TRY(tok_norm_add_replace(t, "normalizer", " ", 1, true, SPM_SPACE, 3));
    if (src->gemma4) {
        static const char lines[] = "[^\n]+|[\n]+"; /* newline runs apart from the text around them */
        TRY(tok_pretok_add_split(t, "tokenizer.ggml.model", lines, sizeof lines - 1, false, SPLIT_ISOLATED));
    }
    TRY(tok_spm_dec_add_replace(t, SPM_SPACE, 3, " ", 1));
    t->dec_bytes = true;
    t->fuse_unk = true;
    if (prefix) {
        strcpy(t->strip_char, " ");
        t->strip_start = 1;
        t->strip_fused = true;
    }
    return PT_OK;
}

static bool spm_is_gemma(const gguf_file *f)
{
    gguf_str arch = {"", 0};
    if (gguf_opt_str(f, "general.architecture", &arch) != PT_OK) return false;
    return arch_gguf_gemma_line(arch.data, arch.len);
}

static pt_status spm_build_src(pt_tokenizer *t, spm_src *src)
{
    TRY(spm_tokens(t, src));
    TRY(spm_scores(t, src));
    TRY(spm_types(t, src));
    TRY(spm_byte_table(t, src));
    TRY(src->gemma4 ? spm_file_merges(t, src) : spm_merges(t, src));
    TRY(spm_ids(t, src));
    return spm_pipeline(t, src);
}

pt_status tok_gguf_spm_build(pt_tokenizer *t, const gguf_file *f)
{
    t->kind = TOK_SPM;
    gguf_str model = {"", 0};
    TRY(gguf_opt_str(f, "tokenizer.ggml.model", &model));
    spm_src src = {.f = f, .gemma4 = gguf_str_eq(model, "gemma4")};
    src.gemma = !src.gemma4 && spm_is_gemma(f);
    if (gguf_get_array(f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &src.tokens) != PT_OK)
        return ERR(PT_ERR_USER, "%s: tokenizer.ggml.tokens: missing or not an array of strings",
                   shown_text(t->source).s);
    pt_status rc = spm_build_src(t, &src);
    tok_smap_free(&src.last);
    tok_smap_free(&src.first);
    free(src.has_len);
    TRY(rc);
    TRY(tok_finish(t));
    return tok_gguf_template(t, f);
}
