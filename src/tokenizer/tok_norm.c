/* tok_norm.c — normalizers as Hugging Face `tokenizers` runs them on the text between added
 * tokens: Prepend (text before a non-empty piece), Replace (every match of a string or regex,
 * left to right, without overlaps), NFC/NFD/NFKC/NFKD and Precompiled (SentencePiece's compiled
 * rules; both in normalize.c), in sequence. SentencePiece-style tokenizers use them to turn
 * spaces into "▁" and to add the dummy prefix (Llama 2's Prepend("▁") + Replace(" ", "▁")), and
 * a tokenizer.model's own normalization rules come as Precompiled.
 * A normalized added token is matched by its normalized content, as `tokenizers` does. */
#include <stdlib.h>
#include <string.h>

#include "normalize.h"
#include "ptrain/error.h"
#include "tok_impl.h"

static pt_status norm_push(pt_tokenizer *t, norm_step st, const char *text, size_t len)
{
    st.text = malloc(len + 1);
    norm_step *grown = st.text ? realloc(t->norm, (size_t)(t->n_norm + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(st.text);
        pcre2_code_free(st.re);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    memcpy(st.text, text, len);
    st.text[len] = '\0';
    st.len = len;
    t->norm = grown;
    t->norm[t->n_norm++] = st;
    return PT_OK;
}

pt_status tok_norm_add_prepend(pt_tokenizer *t, const char *text, size_t len)
{
    return norm_push(t, (norm_step){.kind = NORM_PREPEND}, text, len);
}

pt_status tok_norm_add_unicode(pt_tokenizer *t, int form)
{
    return norm_push(t, (norm_step){.kind = NORM_UNICODE, .form = form}, "", 0);
}

pt_status tok_norm_add_charsmap(pt_tokenizer *t, const char *where, const uint8_t *blob, size_t len)
{
    norm_step st = {.kind = NORM_CHARSMAP};
    TRY(charsmap_load(t->source, where, blob, len, &st.cmap));
    pt_status rc = norm_push(t, st, "", 0);
    if (rc != PT_OK) charsmap_free(st.cmap);
    return rc;
}

/* Replace matches of pattern (a regex, or a literal when literal) with content. A pattern that
 * can match the empty string is refused: where `tokenizers` would insert content is not defined
 * the same way by every regex engine. */
pt_status tok_norm_add_replace(pt_tokenizer *t, const char *where, const char *pat, size_t plen, bool literal,
                               const char *content, size_t clen)
{
    norm_step st = {.kind = NORM_REPLACE};
    if (plen == 0) return ERR(PT_ERR_USER, "%s: %s: the pattern is empty", shown_text(t->source).s, where);
    TRY(tok_regex_compile(t->source, where, pat, plen, literal, 0, &st.re, &st.jit));
    uint32_t minlen = 1;
    pcre2_pattern_info(st.re, PCRE2_INFO_MINLENGTH, &minlen);
    if (minlen == 0) {
        pcre2_code_free(st.re);
        return ERR(PT_ERR_UNSUPPORTED, "%s: %s: a Replace pattern that can match the empty string is not supported",
                   shown_text(t->source).s, where);
    }
    return norm_push(t, st, content, clen);
}

void tok_norm_free(pt_tokenizer *t)
{
    for (int i = 0; i < t->n_norm; i++) {
        pcre2_code_free(t->norm[i].re);
        charsmap_free(t->norm[i].cmap);
        free(t->norm[i].text);
    }
    free(t->norm);
    t->norm = NULL;
    t->n_norm = 0;
}

/* One Replace step over in[0, len) into out. */
static pt_status norm_replace(enc_ctx *c, const norm_step *st, const char *in, size_t len, rbuf *out)
{
    size_t off = 0, ms = 0, me = 0;
    int found = 1;
    while (off < len) {
        TRY(tok_re_next(c, st->re, st->jit, in, len, off, &ms, &me, &found));
        if (!found || me == ms) break; /* patterns that can match empty are refused when loaded */
        tok_rbuf_put(out, in + off, ms - off);
        tok_rbuf_put(out, st->text, st->len);
        off = me;
    }
    tok_rbuf_put(out, in + off, len - off);
    return PT_OK;
}

/* A normalization form or a charsmap over in[0, len) into out. */
static pt_status norm_table(const norm_step *st, const char *in, size_t len, rbuf *out)
{
    char *res;
    size_t n;
    if (st->kind == NORM_UNICODE) TRY(unorm_apply((unorm_form)st->form, in, len, &res, &n));
    else TRY(charsmap_apply(st->cmap, in, len, &res, &n));
    tok_rbuf_put(out, res, n);
    free(res);
    return PT_OK;
}

/* One step over in[0, len) into out. */
static pt_status norm_step_apply(enc_ctx *c, const norm_step *st, const char *in, size_t len, rbuf *out)
{
    if (st->kind == NORM_REPLACE) return norm_replace(c, st, in, len, out);
    if (st->kind != NORM_PREPEND) return norm_table(st, in, len, out);
    if (len) tok_rbuf_put(out, st->text, st->len);
    tok_rbuf_put(out, in, len);
    return PT_OK;
}

/* Normalize s[0, len) with every step into *out (malloc'd, NUL-terminated). */
pt_status tok_norm_apply(enc_ctx *c, const char *s, size_t len, rbuf *out)
{
    rbuf cur = {0};
    tok_rbuf_put(&cur, s, len);
    for (int i = 0; i < c->tok->n_norm && !cur.oom; i++) {
        const norm_step *st = &c->tok->norm[i];
        rbuf next = {0};
        pt_status rc = PT_OK;
        rc = norm_step_apply(c, st, cur.p ? cur.p : "", cur.n, &next);
        free(cur.p);
        cur = next;
        if (rc != PT_OK) {
            free(cur.p);
            return rc;
        }
    }
    if (cur.oom) {
        free(cur.p);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    *out = cur;
    return PT_OK;
}

/* The content a normalized added token is matched by (malloc'd into *out), at load time. */
pt_status tok_norm_content(const pt_tokenizer *t, const char *s, size_t len, rbuf *out)
{
    enc_ctx c = {.tok = t, .md = pcre2_match_data_create(1, NULL)};
    if (!c.md) return ERR(PT_ERR_NOMEM, "out of memory");
    pt_status rc = tok_norm_apply(&c, s, len, out);
    pcre2_match_data_free(c.md);
    pcre2_match_context_free(c.mctx);
    pcre2_jit_stack_free(c.jstack);
    return rc;
}
