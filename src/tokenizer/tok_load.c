/* tok_load.c — building a tokenizer, shared by the tokenizer.json, GGUF and tokenizer.model
 * loaders: the token table (each id's bytes, stored by tok_buf.c), added tokens, merges by name,
 * and the maps and added-token tries built at the end. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "ptrain/util.h"
#include "tok_impl.h"

pt_status tok_new(const char *source, pt_tokenizer **out)
{
    pt_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return ERR(PT_ERR_NOMEM, "out of memory");
    t->source = xstrdup(source);
    t->unk = t->bos = t->eos = t->pad = -1;
    for (int b = 0; b < 256; b++) t->byte_id[b] = t->byte_tok[b] = -1;
    tok_cache_init(t->cache);
    *out = t;
    return PT_OK;
}

static pt_status tok_reserve(pt_tokenizer *t, int32_t id)
{
    if (id < t->tok_cap) return PT_OK;
    int32_t cap = t->tok_cap ? t->tok_cap : 1024;
    while (cap <= id) cap *= 2;
    tok_entry *grown = realloc(t->tok, (size_t)cap * sizeof *grown);
    if (!grown) return ERR(PT_ERR_NOMEM, "out of memory");
    memset(grown + t->tok_cap, 0, (size_t)(cap - t->tok_cap) * sizeof *grown);
    t->tok = grown;
    t->tok_cap = cap;
    return PT_OK;
}

/* Give id the token spelled (len bytes) in the file. Byte-level: a byte-level spelling is stored
 * as the bytes it stands for, any other as is; TOKF_MODEL puts it in the BPE vocabulary, and
 * raw_model lets a non-byte-level spelling in too (GGUF, as transformers converts it).
 * SentencePiece: stored as spelled (tok_finish works out what it decodes to). */
pt_status tok_set(pt_tokenizer *t, int32_t id, const char *spelled, size_t len, uint8_t flags, bool raw_model)
{
    TRY(tok_reserve(t, id));
    char stack[256] = {0}, *buf = len <= sizeof stack ? stack : malloc(len);
    if (!buf) return ERR(PT_ERR_NOMEM, "out of memory");
    long n = t->kind == TOK_SPM ? -1 : tok_bytelevel_decode(spelled, len, buf);
    if (n < 0 && !raw_model && t->kind != TOK_SPM) flags &= (uint8_t)~TOKF_MODEL;
    tok_entry *e = &t->tok[id];
    pt_status rc = tok_store(t, n < 0 ? spelled : buf, n < 0 ? len : (size_t)n, &e->off);
    if (buf != stack) free(buf);
    e->len = n < 0 ? (uint32_t)len : (uint32_t)n;
    e->soff = e->off;
    e->slen = e->len;
    e->flags = (uint8_t)(flags | TOKF_PRESENT);
    if (id >= t->n_tok) t->n_tok = id + 1;
    return rc;
}

/* An added token; its id keeps the model's spelling when the model has one. */
pt_status tok_add_added(pt_tokenizer *t, int32_t id, const char *content, size_t len, added_token flags)
{
    added_token *grown = realloc(t->added, (size_t)(t->n_added + 1) * sizeof *grown);
    if (!grown) return ERR(PT_ERR_NOMEM, "out of memory");
    t->added = grown;
    flags.id = id;
    flags.len = (uint32_t)len;
    TRY(tok_store(t, content, len, &flags.off));
    t->added[t->n_added++] = flags;
    uint8_t f = (uint8_t)(TOKF_ADDED | (flags.special ? TOKF_SPECIAL : 0));
    if (id < t->n_tok && (t->tok[id].flags & TOKF_PRESENT)) {
        t->tok[id].flags |= f;
        return PT_OK;
    }
    return tok_set(t, id, content, len, f, false);
}

/* The id whose bytes are text (added tokens first), or -1. */
int32_t tok_find_text(const pt_tokenizer *t, const char *text, size_t len)
{
    for (int k = 0; k < t->n_added; k++)
        if (t->added[k].len == len && memcmp(t->bytes + t->added[k].off, text, len) == 0) return t->added[k].id;
    for (int32_t id = 0; id < t->n_tok; id++) {
        const tok_entry *e = &t->tok[id];
        if (!(e->flags & TOKF_PRESENT)) continue;
        if ((e->len == len && memcmp(t->bytes + e->off, text, len) == 0) ||
            (e->slen == len && memcmp(t->bytes + e->soff, text, len) == 0))
            return id;
    }
    return -1;
}

/* The maps, once every token is in (their keys point into t->bytes, which no longer moves once
 * SentencePiece tokens have their decoded bytes). The vocabulary maps spellings to ids. */
pt_status tok_finish(pt_tokenizer *t)
{
    if (t->kind == TOK_SPM) TRY(tok_spm_decoded_all(t));
    if (!tok_smap_init(&t->vocab, (size_t)t->n_tok)) return ERR(PT_ERR_NOMEM, "out of memory");
    for (int32_t id = 0; id < t->n_tok; id++) {
        const tok_entry *e = &t->tok[id];
        if ((e->flags & TOKF_MODEL) && !tok_smap_put(&t->vocab, t->bytes + e->soff, e->slen, id))
            return ERR(PT_ERR_NOMEM, "out of memory");
    }
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        t->byte_id[b] = tok_smap_get(&t->vocab, &byte, 1);
        if (t->kind == TOK_SPM) t->byte_tok[b] = tok_spm_byte_token(t, byte);
    }
    return tok_added_build(t);
}

/* ---- merges, by the tokens' spelling in the file ---- */

/* Record merge `rank` of left + right (spellings); names maps spellings to ids. */
pt_status tok_merge(pt_tokenizer *t, const smap *names, const char *where, int32_t rank, const char *left,
                    size_t llen, const char *right, size_t rlen)
{
    int32_t a = tok_smap_get(names, left, llen), b = tok_smap_get(names, right, rlen);
    char stack[512], *both = llen + rlen <= sizeof stack ? stack : malloc(llen + rlen);
    if (!both) return ERR(PT_ERR_NOMEM, "out of memory");
    memcpy(both, left, llen);
    memcpy(both + llen, right, rlen);
    int32_t id = tok_smap_get(names, both, llen + rlen);
    if (both != stack) free(both);
    if (a < 0 || b < 0 || id < 0) {
        const char *miss = a < 0 ? left : b < 0 ? right : NULL;
        int mlen = (int)(a < 0 ? llen : rlen);
        if (miss)
            return ERR(PT_ERR_USER, "%s: %s: \"%s\" is not in the vocabulary", shown_text(t->source).s, where,
                       shown_bytes(miss, (size_t)mlen).s);
        return ERR(PT_ERR_USER, "%s: %s: the merged token \"%s%s\" is not in the vocabulary", shown_text(t->source).s,
                   where, shown_bytes(left, llen).s, shown_bytes(right, rlen).s);
    }
    tok_pmap_put(&t->merges, a, b, rank, id);
    return PT_OK;
}

/* Split a merge written "left right" at its one space; false when it is not of that form. */
bool tok_merge_split(const char *s, size_t len, size_t *llen, const char **right, size_t *rlen)
{
    const char *sp = memchr(s, ' ', len);
    if (!sp || sp == s || sp + 1 == s + len || memchr(sp + 1, ' ', (size_t)(s + len - sp - 1))) return false;
    *llen = (size_t)(sp - s);
    *right = sp + 1;
    *rlen = len - *llen - 1;
    return true;
}
