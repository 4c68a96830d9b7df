/* tok_spm.c — what SentencePiece-style BPE does differently from byte-level BPE, as Hugging Face
 * `tokenizers` runs it (Llama 2, Mistral, Gemma): a word becomes one symbol per character; a
 * character the vocabulary lacks becomes its UTF-8 bytes as <0xXX> tokens (byte fallback) when
 * all of them exist, else the unknown token (consecutive ones fused into one); and ids decode
 * through the tokenizer's decoder (Replace "▁" -> " ", ByteFallback, Strip of the leading space). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "tok_impl.h"

/* ---- loading ---- */

/* The id of the byte token <0xXX> for byte (spelled as `tokenizers` looks it up), or -1. */
int32_t tok_spm_byte_token(const pt_tokenizer *t, uint8_t byte)
{
    char name[8];
    snprintf(name, sizeof name, "<0x%02X>", byte);
    return tok_smap_get(&t->vocab, name, 6);
}

/* The byte a <0xXX> spelling stands for (hex digits of either case), or -1. */
int tok_spm_byte_value(const char *s, size_t len)
{
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char ch = s[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) return -1;
        v = v * 16 + d;
    }
    return v;
}

pt_status tok_spm_dec_add_replace(pt_tokenizer *t, const char *from, size_t flen, const char *to, size_t tlen)
{
    dec_replace r = {malloc(flen + 1), malloc(tlen + 1), flen, tlen};
    dec_replace *grown = r.from && r.to ? realloc(t->dec, (size_t)(t->n_dec + 1) * sizeof *grown) : NULL;
    if (!grown) {
        free(r.from);
        free(r.to);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    memcpy(r.from, from, flen);
    memcpy(r.to, to, tlen);
    t->dec = grown;
    t->dec[t->n_dec++] = r;
    return PT_OK;
}

void tok_spm_free(pt_tokenizer *t)
{
    for (int i = 0; i < t->n_dec; i++) {
        free(t->dec[i].from);
        free(t->dec[i].to);
    }
    free(t->dec);
}

/* s with every `from` replaced by `to`, into out. */
static void spm_replace(const dec_replace *r, const char *s, size_t len, rbuf *out)
{
    size_t from = 0;
    for (size_t i = 0; r->from_len && i + r->from_len <= len;) {
        if (memcmp(s + i, r->from, r->from_len) != 0) {
            i++;
            continue;
        }
        tok_rbuf_put(out, s + from, i - from);
        tok_rbuf_put(out, r->to, r->to_len);
        i += r->from_len;
        from = i;
    }
    tok_rbuf_put(out, s + from, len - from);
}

/* How many bytes of s[0, len) up to `count` strip characters take, from the start or the end. */
static size_t spm_strip_len(const pt_tokenizer *t, const char *s, size_t len, unsigned count, bool at_end)
{
    size_t k = strlen(t->strip_char), cut = 0;
    for (unsigned i = 0; i < count && k && cut + k <= len; i++) {
        const char *at = at_end ? s + len - cut - k : s + cut;
        if (memcmp(at, t->strip_char, k) != 0) break;
        cut += k;
    }
    return cut;
}

/* What a token spelled s[0, len) decodes to, into *out: the spelling through the replacements
 * (as the first token under a Metaspace decoder: without its replacement characters at all),
 * then ByteFallback, then a Strip that applies to each token. */
static pt_status spm_decode_spelling(const pt_tokenizer *t, const char *s, size_t len, bool first, rbuf *out)
{
    rbuf cur = {0};
    if (first && t->ms_rep_len) {
        dec_replace drop = {(char *)t->ms_rep, "", t->ms_rep_len, 0};
        spm_replace(&drop, s, len, &cur);
    } else {
        tok_rbuf_put(&cur, s, len);
    }
    for (int i = 0; i < t->n_dec && !cur.oom; i++) {
        rbuf next = {0};
        spm_replace(&t->dec[i], cur.p, cur.n, &next);
        free(cur.p);
        cur = next;
    }
    int byte = t->dec_bytes && !cur.oom ? tok_spm_byte_value(cur.p, cur.n) : -1;
    if (byte >= 0) {
        cur.p[0] = (char)byte;
        cur.n = 1;
    }
    size_t a = 0, b = cur.n;
    if (!t->strip_fused && !cur.oom) {
        a = spm_strip_len(t, cur.p, cur.n, t->strip_start, false);
        b -= spm_strip_len(t, cur.p + a, cur.n - a, t->strip_stop, true);
    }
    if (cur.oom) {
        free(cur.p);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    memmove(cur.p, cur.p + a, b - a);
    cur.n = b - a;
    *out = cur;
    return PT_OK;
}

/* Store what token id decodes to as its bytes. */
static pt_status spm_decoded(pt_tokenizer *t, int32_t id)
{
    tok_entry *e = &t->tok[id];
    rbuf d;
    TRY(spm_decode_spelling(t, t->bytes + e->soff, e->slen, false, &d));
    pt_status rc = tok_store(t, d.p, d.n, &e->off);
    e->len = (uint32_t)d.n;
    free(d.p);
    return rc;
}

/* An added token decodes from its content, normalized when it is a normalized one (what
 * `tokenizers` gives as its token string), not from the model's spelling of its id. */
static pt_status spm_decoded_added(pt_tokenizer *t, const added_token *a)
{
    rbuf n = {0}, d;
    if (a->normalized && t->n_norm) TRY(tok_norm_content(t, t->bytes + a->off, a->len, &n));
    pt_status rc = n.p ? spm_decode_spelling(t, n.p, n.n, false, &d)
                       : spm_decode_spelling(t, t->bytes + a->off, a->len, false, &d);
    free(n.p);
    TRY(rc);
    tok_entry *e = &t->tok[a->id];
    rc = tok_store(t, d.p, d.n, &e->off);
    e->len = (uint32_t)d.n;
    free(d.p);
    return rc;
}

pt_status tok_spm_decoded_all(pt_tokenizer *t)
{
    for (int32_t id = 0; id < t->n_tok; id++)
        if (t->tok[id].flags & TOKF_PRESENT) TRY(spm_decoded(t, id));
    for (int k = 0; k < t->n_added; k++) TRY(spm_decoded_added(t, &t->added[k]));
    return PT_OK;
}

/* ---- encoding ---- */

static void spm_push(enc_ctx *c, size_t *n, int32_t id)
{
    c->sym[*n] = (bpe_sym){id, (int32_t)*n - 1, (int32_t)*n + 1};
    (*n)++;
}

/* Whether every byte of the character has a <0xXX> token. */
static bool spm_has_bytes(const pt_tokenizer *t, const uint8_t *ch, size_t n)
{
    for (size_t k = 0; k < n; k++)
        if (t->byte_tok[ch[k]] < 0) return false;
    return true;
}

/* The symbols of word w as `tokenizers`' BPE makes them: a character in the vocabulary is its
 * id; else its bytes' <0xXX> ids when byte fallback has them all; else the unknown token, which
 * is held back while unknown characters follow (fuse_unk fuses them) and written when a known
 * character comes or the word ends (byte tokens in between do not write it: as `tokenizers`). */
size_t tok_spm_symbols(enc_ctx *c, const uint8_t *w, size_t len)
{
    const pt_tokenizer *t = c->tok;
    size_t n = 0;
    bool unk = false;
    for (size_t i = 0; i < len;) {
        size_t cl = tok_utf8_seq_len(w + i, len - i);
        if (cl == 0) cl = 1;
        int32_t id = cl == 1 ? t->byte_id[w[i]] : tok_smap_get(&t->vocab, w + i, cl);
        if (id >= 0) {
            if (unk) spm_push(c, &n, t->unk);
            unk = false;
            spm_push(c, &n, id);
        } else if (t->byte_fallback && spm_has_bytes(t, w + i, cl)) {
            for (size_t k = 0; k < cl; k++) spm_push(c, &n, t->byte_tok[w[i + k]]);
        } else if (t->unk >= 0) {
            if (unk && !t->fuse_unk) spm_push(c, &n, t->unk);
            unk = true;
        }
        i += cl;
    }
    if (unk) spm_push(c, &n, t->unk);
    if (n) c->sym[n - 1].next = -1;
    return n;
}

/* ---- decoding ---- */

/* Under a Metaspace decoder the first token decodes without its replacement characters. */
pt_status tok_spm_decode_first(const pt_tokenizer *t, int32_t id, strbuf *out)
{
    const tok_entry *e = &t->tok[id];
    rbuf d;
    TRY(spm_decode_spelling(t, t->bytes + e->soff, e->slen, true, &d));
    pt_status rc = tok_sb_append(out, d.p, d.n);
    free(d.p);
    return rc;
}

/* The Strip that applies to the whole decoded text, on what one decode call appended. */
void tok_spm_strip_text(const pt_tokenizer *t, strbuf *out, size_t start)
{
    if (!t->strip_fused || out->len <= start) return;
    char *s = out->data + start;
    size_t len = out->len - start;
    size_t a = spm_strip_len(t, s, len, t->strip_start, false);
    size_t b = spm_strip_len(t, s + a, len - a, t->strip_stop, true);
    memmove(s, s + a, len - a - b);
    out->len -= a + b;
    out->data[out->len] = '\0';
}
