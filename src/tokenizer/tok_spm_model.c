/* tok_spm_model.c — a tokenizer from a SentencePiece tokenizer.model (read by spm_proto.c), as
 * transformers 5 converts a model directory that has one and no tokenizer.json (older Llama 2
 * and Mistral repositories), so that ids equal Hugging Face's. Only BPE models: Unigram ones
 * (T5, ALBERT ...) are refused. special_tokens_map.json's tokens replace tokenizer_config.json's
 * when it has no added_tokens_decoder, as transformers 5 reads the legacy file.
 * tokenizer_config.json's tokenizer_class picks the conversion (tok_spm_config.c, which also adds
 * the added tokens):
 *   - LlamaTokenizer: every piece in the vocabulary; merges: every split of a piece into two
 *     pieces, ranked by the merged piece's id, then the left half's length (transformers'
 *     generate_merges without scores); byte fallback on, no unknown token (a character without
 *     a piece or byte pieces is dropped); no normalizer (the model's charsmap is not used);
 *     Metaspace with prepend "first" ("always" when legacy, "never" without add_prefix_space);
 *     decoder Replace("▁", " "), ByteFallback, Fuse, Strip(1) (not without add_prefix_space).
 *   - TokenizersBackend (no tokenizer_class): the model's own settings, as SpmConverter.
 *     build_tokenizer_from_spm_proto: merges of normal pieces only, by score (highest first),
 *     then piece id, then left half's length; the unknown piece; byte fallback as trained;
 *     ignore_merges when there are user-defined pieces; normalizer Precompiled (the charsmap),
 *     then Replace(\A +| +\z, "") and Replace( {2,}, " ") with remove_extra_whitespaces,
 *     Replace(" ", "▁") with escape_whitespaces, Replace(\A▁, "▁▁") with add_dummy_prefix and
 *     legacy; pre-tokenizer Metaspace (with add_dummy_prefix; "always", "first" unless legacy)
 *     then a Split isolating the user-defined pieces (longest first); decoder Replace,
 *     ByteFallback (with byte fallback), Strip(1) (with add_dummy_prefix). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/jsonfile.h"
#include "ptrain/tokenizer.h"
#include "tok_impl.h"

/* ---- the pieces ---- */

static pt_status sm_check_piece(const pt_tokenizer *t, const spm_piece *p, size_t i)
{
    if (p->text.len == 0) return ERR(PT_ERR_USER, "%s: pieces[%zu]: an empty piece", shown_text(t->source).s, i);
    if (tok_utf8_invalid_at(p->text.p, p->text.len) < p->text.len)
        return ERR(PT_ERR_USER, "%s: pieces[%zu]: the piece is not valid UTF-8", shown_text(t->source).s, i);
    if (isnan(p->score)) return ERR(PT_ERR_USER, "%s: pieces[%zu].score: not a number", shown_text(t->source).s, i);
    return PT_OK;
}

static pt_status sm_check(const pt_tokenizer *t, const spm_model *m)
{
    static const char *const types[] = {"", "Unigram", "BPE", "word", "char"};
    if (m->model_type != SPM_BPE)
        return ERR(PT_ERR_UNSUPPORTED, "%s: trainer_spec.model_type is %s: ptrain reads SentencePiece BPE models only "
                   "(those of Llama 2, Mistral, Gemma), not %s ones", shown_text(t->source).s, types[m->model_type],
                   types[m->model_type]);
    if ((size_t)m->n_pieces >= TOK_MAX_ID)
        return ERR(PT_ERR_USER, "%s: %zu pieces, more than ptrain takes (%d)", shown_text(t->source).s, m->n_pieces,
                   TOK_MAX_ID);
    for (size_t i = 0; i < m->n_pieces; i++) TRY(sm_check_piece(t, &m->pieces[i], i));
    return PT_OK;
}

/* Every piece as a token of the vocabulary; names: piece -> id (a repeated piece is refused). */
static pt_status sm_vocab(pt_tokenizer *t, const spm_model *m, smap *names)
{
    if (!tok_smap_init(names, m->n_pieces)) return ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < m->n_pieces; i++) {
        const spm_str *s = &m->pieces[i].text;
        int32_t dup = tok_smap_get(names, s->p, s->len);
        if (dup >= 0)
            return ERR(PT_ERR_USER, "%s: pieces[%zu]: \"%s\" repeats pieces[%d]", shown_text(t->source).s, i,
                       shown_bytes(s->p, s->len).s, dup);
        TRY(tok_set(t, (int32_t)i, s->p, s->len, TOKF_MODEL, true));
        if (!tok_smap_put(names, s->p, s->len, (int32_t)i)) return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

/* ---- merges ---- */

typedef struct {
    const spm_model *m;
    const smap *names;
    bool normal_only; /* TokenizersBackend: normal pieces merge from normal pieces only */
} sm_merger;

/* The splits of piece id into two pieces, left half growing: put as merges from *rank on (or
 * only counted, when put is false). */
static void sm_splits(pt_tokenizer *t, const sm_merger *g, int32_t id, bool put, int32_t *rank)
{
    const spm_str *s = &g->m->pieces[id].text;
    for (size_t i = tok_utf8_seq_len((const uint8_t *)s->p, s->len); i < s->len;
         i += tok_utf8_seq_len((const uint8_t *)s->p + i, s->len - i)) {
        int32_t a = tok_smap_get(g->names, s->p, i), b = tok_smap_get(g->names, s->p + i, s->len - i);
        if (a < 0 || b < 0) continue;
        if (g->normal_only && (g->m->pieces[a].type != SPM_NORMAL || g->m->pieces[b].type != SPM_NORMAL)) continue;
        if (put) tok_pmap_put(&t->merges, a, b, *rank, id);
        (*rank)++;
    }
}

static const spm_piece *sort_pieces; /* for sm_by_score (qsort has no context argument) */

/* Highest score first, then lowest id. */
static int sm_by_score(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    float sa = sort_pieces[a].score, sb = sort_pieces[b].score;
    if (sa != sb) return sa > sb ? -1 : 1;
    return a < b ? -1 : a > b;
}

/* The pieces whose splits are merges, in rank order. */
static int32_t *sm_merge_order(const sm_merger *g, size_t *n)
{
    int32_t *order = malloc((g->m->n_pieces + 1) * sizeof *order);
    if (!order) return NULL;
    *n = 0;
    for (size_t i = 0; i < g->m->n_pieces; i++)
        if (!g->normal_only || g->m->pieces[i].type == SPM_NORMAL) order[(*n)++] = (int32_t)i;
    if (g->normal_only) {
        sort_pieces = g->m->pieces;
        qsort(order, *n, sizeof *order, sm_by_score);
    }
    return order;
}

static pt_status sm_merges(pt_tokenizer *t, const spm_model *m, const smap *names, bool llama)
{
    sm_merger g = {m, names, !llama};
    size_t n;
    int32_t *order = sm_merge_order(&g, &n), count = 0, rank = 0;
    if (!order) return ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t k = 0; k < n; k++) sm_splits(t, &g, order[k], false, &count);
    bool ok = tok_pmap_init(&t->merges, (size_t)count);
    for (size_t k = 0; ok && k < n; k++) sm_splits(t, &g, order[k], true, &rank);
    free(order);
    return ok ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
}

/* ---- the pipeline ---- */

/* The decoder's Strip of one leading space, after Fuse (the dummy prefix). */
static void sm_strip(pt_tokenizer *t)
{
    strcpy(t->strip_char, " ");
    t->strip_start = 1;
    t->strip_fused = true;
}

static pt_status sm_llama(pt_tokenizer *t, const spm_conv *cv)
{
    int prepend = !cv->prefix ? PREPEND_NEVER : cv->legacy ? PREPEND_ALWAYS : PREPEND_FIRST;
    t->byte_fallback = t->fuse_unk = t->dec_bytes = true;
    t->unk = -1;
    TRY(tok_pretok_add_metaspace(t, SPM_SPACE, 3, prepend, false));
    TRY(tok_spm_dec_add_replace(t, SPM_SPACE, 3, " ", 1));
    if (cv->prefix) sm_strip(t);
    return PT_OK;
}

static pt_status sm_normalizer(pt_tokenizer *t, const spm_model *m, bool legacy)
{
    if (m->charsmap.len)
        TRY(tok_norm_add_charsmap(t, "normalizer_spec.precompiled_charsmap", (const uint8_t *)m->charsmap.p,
                                  m->charsmap.len));
    const char *where = "normalizer_spec.remove_extra_whitespaces";
    if (m->remove_extra_whitespaces) {
        TRY(tok_norm_add_replace(t, where, "\\A +| +\\z", strlen("\\A +| +\\z"), false, "", 0));
        TRY(tok_norm_add_replace(t, where, " {2,}", 5, false, " ", 1));
    }
    if (m->escape_whitespaces)
        TRY(tok_norm_add_replace(t, "normalizer_spec.escape_whitespaces", " ", 1, true, SPM_SPACE, 3));
    if (m->add_dummy_prefix && legacy)
        TRY(tok_norm_add_replace(t, "normalizer_spec.add_dummy_prefix", "\\A" SPM_SPACE, 5, false,
                                 SPM_SPACE SPM_SPACE, 6));
    return PT_OK;
}

static size_t sm_chars(const spm_str *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->len; i++) n += ((uint8_t)s->p[i] & 0xc0) != 0x80;
    return n;
}

/* s as a regex matching it: ASCII punctuation escaped, control characters as \xNN. */
static void sm_escape(const spm_str *s, rbuf *re)
{
    for (size_t k = 0; k < s->len; k++) {
        unsigned char c = (unsigned char)s->p[k];
        char hex[8];
        bool punct = c < 0x80 && !(c >= '0' && c <= '9') && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
        if (c < 0x20 || c == 0x7f) {
            snprintf(hex, sizeof hex, "\\x%02x", c);
            tok_rbuf_put(re, hex, 4);
            continue;
        }
        if (punct) tok_rbuf_put(re, "\\", 1);
        tok_rbuf_put(re, s->p + k, 1);
    }
}

/* A regex of the user-defined pieces, longest first (in characters; ties in id order), each
 * ASCII punctuation character escaped; *any false when there are none. */
static pt_status sm_user_regex(const spm_model *m, rbuf *re, bool *any)
{
    size_t longest = 0;
    *any = false;
    for (size_t i = 0; i < m->n_pieces; i++)
        if (m->pieces[i].type == SPM_USER_DEFINED && m->pieces[i].text.len > longest) longest = m->pieces[i].text.len;
    for (size_t want = longest; want > 0; want--)
        for (size_t i = 0; i < m->n_pieces; i++) {
            const spm_str *s = &m->pieces[i].text;
            if (m->pieces[i].type != SPM_USER_DEFINED || sm_chars(s) != want) continue;
            if (*any) tok_rbuf_put(re, "|", 1);
            sm_escape(s, re);
            *any = true;
        }
    return re->oom ? ERR(PT_ERR_NOMEM, "out of memory") : PT_OK;
}

static pt_status sm_generic(pt_tokenizer *t, const spm_model *m, const smap *names, bool legacy)
{
    t->unk = tok_smap_get(names, m->unk_piece.p, m->unk_piece.len);
    if (t->unk < 0)
        return ERR(PT_ERR_USER, "%s: trainer_spec.unk_piece \"%s\" is not a piece", shown_text(t->source).s,
                   shown_bytes(m->unk_piece.p, m->unk_piece.len).s);
    t->byte_fallback = t->dec_bytes = m->byte_fallback;
    t->fuse_unk = true;
    TRY(sm_normalizer(t, m, legacy));
    if (m->add_dummy_prefix)
        TRY(tok_pretok_add_metaspace(t, SPM_SPACE, 3, legacy ? PREPEND_ALWAYS : PREPEND_FIRST, false));
    rbuf re = {0};
    pt_status rc = sm_user_regex(m, &re, &t->ignore_merges);
    if (rc == PT_OK && t->ignore_merges)
        rc = tok_pretok_add_split(t, "pieces (user-defined)", re.p, re.n, false, SPLIT_ISOLATED);
    free(re.p);
    TRY(rc);
    TRY(tok_spm_dec_add_replace(t, SPM_SPACE, 3, " ", 1));
    if (m->add_dummy_prefix) sm_strip(t);
    return PT_OK;
}

/* ---- building ---- */

static pt_status sm_build(pt_tokenizer *t, const spm_model *m, const json_t *cfg, const char *cfg_path)
{
    spm_conv cv;
    TRY(sm_check(t, m));
    TRY(tok_spm_conv_init(t, &cv, m, cfg, cfg_path));
    t->kind = TOK_SPM;
    smap names = {0};
    pt_status rc = sm_vocab(t, m, &names);
    if (rc == PT_OK) rc = sm_merges(t, m, &names, cv.llama);
    if (rc == PT_OK) rc = cv.llama ? sm_llama(t, &cv) : sm_generic(t, m, &names, cv.legacy);
    tok_smap_free(&names);
    TRY(rc);
    TRY(tok_spm_added(t, &cv));
    return tok_finish(t);
}

/* The tokenizer of model m (cfg: its tokenizer_config.json, or NULL), into *out. */
static pt_status sm_new(const spm_model *m, const json_t *cfg, const char *cfg_path, pt_tokenizer **out)
{
    pt_tokenizer *t = NULL;
    pt_status rc = tok_new(m->source, &t);
    if (rc == PT_OK) rc = sm_build(t, m, cfg, cfg_path);
    if (rc != PT_OK) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return PT_OK;
}

pt_status tokenizer_from_spm_memory(const char *source, const uint8_t *data, size_t size, const char *config_json,
                                    pt_tokenizer **out)
{
    *out = NULL;
    json_t *cfg = NULL;
    if (config_json) {
        json_error_t je;
        cfg = jsonfile_loadb(config_json, strlen(config_json), 0, &je);
        if (!json_is_object(cfg)) {
            pt_status rc = cfg ? ERR(PT_ERR_USER, "%s: tokenizer_config.json: not a JSON object", shown_text(source).s)
                               : ERR(PT_ERR_USER, "%s: tokenizer_config.json: invalid JSON at line %d, column %d: %s",
                                     shown_text(source).s, je.line, je.column, je.text);
            json_decref(cfg);
            return rc;
        }
    }
    spm_model m;
    pt_status rc = spm_model_parse(source, data, size, &m);
    if (rc == PT_OK) rc = sm_new(&m, cfg, "tokenizer_config.json", out);
    spm_model_free(&m);
    json_decref(cfg);
    return rc;
}

pt_status tokenizer_from_spm_model(const char *path, pt_tokenizer **out)
{
    *out = NULL;
    const char *slash = strrchr(path, '/');
    char cfg_path[4200];
    snprintf(cfg_path, sizeof cfg_path, "%.*stokenizer_config.json", slash ? (int)(slash - path + 1) : 0, path);
    json_t *cfg = NULL;
    if (access(cfg_path, F_OK) == 0) TRY(tok_json_open(cfg_path, &cfg));
    pt_status rc = tok_json_special_tokens_map(path, &cfg);
    if (rc != PT_OK) {
        json_decref(cfg);
        return rc;
    }
    spm_model m;
    rc = spm_model_read(path, &m);
    if (rc == PT_OK) rc = sm_new(&m, cfg, cfg_path, out);
    spm_model_free(&m);
    json_decref(cfg);
    return rc;
}
