/* tok_norm_align.c — whether the normalized text of the piece that starts the input still starts
 * at the input's offset 0, as Hugging Face `tokenizers`' alignments say. Metaspace's prepend
 * scheme "first" adds its "▁" only to a piece whose original offset is 0, and that offset is the
 * alignment of the normalized piece's first byte: a normalizer that deletes the leading
 * characters (Replace(\A +, "") of a tokenizer.model's remove_extra_whitespaces) or replaces them
 * (a Replace's content takes the alignment of the last byte it replaces) moves it. The steps are
 * rerun here with the original start of every byte: Prepend gives its text the first
 * character's alignment, Replace as above, Precompiled does tokenizers' own bookkeeping
 * (normalize.c), and NFC/NFD/NFKC/NFKD go grapheme cluster by cluster (character to character
 * when the counts agree, else every output character takes the cluster's first). Only the first
 * piece of a text pays for this, and only under a "first" Metaspace. */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "normalize.h"
#include "ptrain/error.h"
#include "tok_impl.h"

/* A text with the original start offset of each byte. */
typedef struct {
    rbuf t;
    uint32_t *al;
    size_t cap;
} al_text;

static void al_put(al_text *x, const char *s, size_t n, const uint32_t *al, uint32_t same)
{
    size_t at = x->t.n;
    tok_rbuf_put(&x->t, s, n);
    if (x->t.oom) return;
    if (x->t.n > x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 256;
        while (cap < x->t.n) cap *= 2;
        uint32_t *grown = realloc(x->al, cap * sizeof *grown);
        if (!grown) {
            x->t.oom = true;
            return;
        }
        x->al = grown;
        x->cap = cap;
    }
    for (size_t i = 0; i < n; i++) x->al[at + i] = al ? al[i] : same;
}

static void al_free(al_text *x)
{
    free(x->t.p);
    free(x->al);
}

static size_t char_len(const char *s, size_t n)
{
    size_t k = tok_utf8_seq_len((const uint8_t *)s, n);
    return k ? k : 1;
}

/* Prepend: the text and the first character both take that character's alignment. */
static void al_prepend(const norm_step *st, const al_text *in, al_text *out)
{
    if (!in->t.n) return;
    size_t k = char_len(in->t.p, in->t.n);
    uint32_t a = in->al[k - 1];
    al_put(out, st->text, st->len, NULL, a);
    al_put(out, in->t.p, k, NULL, a);
    al_put(out, in->t.p + k, in->t.n - k, in->al + k, 0);
}

/* Replace: each match's content takes the alignment of the match's last byte. */
static pt_status al_replace(enc_ctx *c, const norm_step *st, const al_text *in, al_text *out)
{
    size_t off = 0, ms = 0, me = 0, len = in->t.n;
    int found = 1;
    if (len == 0) return PT_OK;
    while (off < len) {
        TRY(tok_re_next(c, st->re, st->jit, in->t.p, len, off, &ms, &me, &found));
        if (!found || me == ms) break;
        al_put(out, in->t.p + off, ms - off, in->al + off, 0);
        al_put(out, st->text, st->len, NULL, in->al[me - 1]);
        off = me;
    }
    al_put(out, in->t.p + off, len - off, in->al + off, 0);
    return PT_OK;
}

/* One grapheme cluster g (n bytes, alignments al) in a normalization form. */
static pt_status al_unicode_cluster(const norm_step *st, const char *g, size_t n, const uint32_t *al, al_text *out)
{
    char *r;
    size_t rn, in_chars = 0, out_chars = 0;
    TRY(unorm_apply((unorm_form)st->form, g, n, &r, &rn));
    for (size_t k = 0; k < n; k += char_len(g + k, n - k)) in_chars++;
    for (size_t k = 0; k < rn; k += char_len(r + k, rn - k)) out_chars++;
    for (size_t k = 0, i = 0; k < rn;) {
        size_t cl = char_len(r + k, rn - k);
        al_put(out, r + k, cl, NULL, in_chars == out_chars && i < n ? al[i] : al[0]);
        k += cl;
        if (i < n) i += char_len(g + i, n - i);
    }
    free(r);
    return PT_OK;
}

static pt_status al_unicode(const norm_step *st, const al_text *in, al_text *out)
{
    utf8proc_int32_t state = 0, prev = -1;
    size_t start = 0, len = in->t.n;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)in->t.p + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) k = 1, cp = 0xfffd;
        if (prev >= 0 && utf8proc_grapheme_break_stateful(prev, cp, &state)) {
            TRY(al_unicode_cluster(st, in->t.p + start, i - start, in->al + start, out));
            start = i;
        }
        prev = cp;
        i += (size_t)k;
    }
    return len > start ? al_unicode_cluster(st, in->t.p + start, len - start, in->al + start, out) : PT_OK;
}

static pt_status al_charsmap(const norm_step *st, const al_text *in, al_text *out)
{
    char *r;
    size_t rn;
    uint32_t *ral = NULL;
    TRY(charsmap_apply_aligned(st->cmap, in->t.p ? in->t.p : "", in->t.n, in->al, &r, &rn, &ral));
    al_put(out, r, rn, ral, 0);
    free(r);
    free(ral);
    return PT_OK;
}

static pt_status al_step(enc_ctx *c, const norm_step *st, const al_text *in, al_text *out)
{
    if (st->kind == NORM_PREPEND) al_prepend(st, in, out);
    else if (st->kind == NORM_REPLACE) TRY(al_replace(c, st, in, out));
    else if (st->kind == NORM_UNICODE) TRY(al_unicode(st, in, out));
    else TRY(al_charsmap(st, in, out));
    return out->t.oom ? ERR(PT_ERR_NOMEM, "out of memory") : PT_OK;
}

/* Whether s[0, len) (the start of the input) normalizes to a text whose first byte is aligned to
 * offset 0 (an empty result: true). */
pt_status tok_norm_first_kept(enc_ctx *c, const char *s, size_t len, bool *kept)
{
    al_text cur = {0};
    for (size_t i = 0; i < len;) {
        size_t k = char_len(s + i, len - i);
        al_put(&cur, s + i, k, NULL, (uint32_t)i);
        i += k;
    }
    pt_status rc = cur.t.oom ? ERR(PT_ERR_NOMEM, "out of memory") : PT_OK;
    for (int i = 0; rc == PT_OK && i < c->tok->n_norm; i++) {
        al_text next = {0};
        rc = al_step(c, &c->tok->norm[i], &cur, &next);
        al_free(&cur);
        cur = next;
    }
    *kept = rc != PT_OK || cur.t.n == 0 || cur.al[0] == 0;
    al_free(&cur);
    return rc;
}
