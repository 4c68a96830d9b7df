/* tok_api.c — ptrain/tokenizer.h's calls on a loaded tokenizer: encoding (added tokens first, then
 * the normalizer and the pre-tokenizer, then BPE on each word: tok_added.c and the files below
 * it), plain text with the model's bos put first, decoding back to bytes, what the tokenizer
 * holds (vocabulary size, merges, special ids, kind, chat template), and freeing it. The loaders
 * that make one (tok_json.c, tok_gguf.c, tok_spm_model.c) are above it.
 *
 * The tokenizer's other parts are the tok_*.c files beside this one; tok_impl.h holds the types
 * and the functions they share. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/tokenizer.h"
#include "tok_impl.h"

/* ---- encode ---- */

static void enc_free(enc_ctx *c)
{
    pcre2_match_data_free(c->md);
    pcre2_match_context_free(c->mctx);
    pcre2_jit_stack_free(c->jstack);
    free(c->sym);
    free(c->heap);
}

pt_status tokenizer_encode(const pt_tokenizer *tok, const char *text, size_t len, bool parse_special, int32_t **ids,
                           size_t *n)
{
    *ids = NULL;
    *n = 0;
    size_t bad = tok_utf8_invalid_at(text, len);
    if (bad < len) return ERR(PT_ERR_USER, "text to tokenize is not valid UTF-8 (at byte %zu)", bad);
    enc_ctx c = {.tok = tok, .parse_special = parse_special, .md = pcre2_match_data_create(1, NULL), .text_start = text};
    pt_status rc = c.md ? tok_enc_reserve(&c, len / 3 + 16) : ERR(PT_ERR_NOMEM, "out of memory");
    if (rc == PT_OK) rc = tok_added_split(&c, 0, text, len);
    enc_free(&c);
    if (rc != PT_OK) {
        free(c.ids);
        return rc;
    }
    *ids = c.ids;
    *n = c.n;
    return PT_OK;
}

pt_status tokenizer_encode_text(const pt_tokenizer *tok, const char *text, size_t len, int32_t **ids, size_t *n)
{
    TRY(tokenizer_encode(tok, text, len, true, ids, n));
    if (!tokenizer_adds_bos(tok) || (*n > 0 && (*ids)[0] == tok->bos)) return PT_OK;
    int32_t *grown = realloc(*ids, (*n + 1) * sizeof *grown);
    if (!grown) {
        free(*ids);
        *ids = NULL;
        *n = 0;
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    memmove(grown + 1, grown, *n * sizeof *grown);
    grown[0] = tok->bos;
    *ids = grown;
    (*n)++;
    return PT_OK;
}

/* ---- decode ---- */

pt_status tokenizer_decode_token(const pt_tokenizer *tok, int32_t id, strbuf *out)
{
    if (id < 0 || id >= tok->n_tok || !(tok->tok[id].flags & TOKF_PRESENT))
        return ERR(PT_ERR_USER, "token id %d is not in the vocabulary of %s (%d ids)", id, shown_text(tok->source).s,
                   tok->n_tok);
    return tok_sb_append(out, tok->bytes + tok->tok[id].off, tok->tok[id].len);
}

/* transformers' clean_up_tokenization on out->data[start..]: each pair replaced over the whole text
 * in this order, left to right without overlaps (Python's str.replace); every replacement is
 * shorter, so it is done in place. */
static void clean_up_spaces(strbuf *out, size_t start)
{
    static const char *const pairs[][2] = {{" .", "."},    {" ?", "?"},    {" !", "!"},     {" ,", ","},
                                           {" ' ", "'"},   {" n't", "n't"}, {" 'm", "'m"},  {" 's", "'s"},
                                           {" 've", "'ve"}, {" 're", "'re"}};
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        const char *from = pairs[k][0], *to = pairs[k][1];
        size_t flen = strlen(from), tlen = strlen(to), r = start, w = start;
        while (r < out->len) {
            if (out->len - r >= flen && memcmp(out->data + r, from, flen) == 0) {
                memmove(out->data + w, to, tlen);
                w += tlen;
                r += flen;
            } else {
                out->data[w++] = out->data[r++];
            }
        }
        out->len = w;
        if (out->data) out->data[w] = '\0';
    }
}

pt_status tokenizer_decode(const pt_tokenizer *tok, const int32_t *ids, size_t n, strbuf *out)
{
    size_t start = out->len;
    for (size_t i = 0; i < n; i++) {
        bool first = i == 0 && tok->ms_rep_len && ids[0] >= 0 && ids[0] < tok->n_tok &&
                     (tok->tok[ids[0]].flags & TOKF_PRESENT);
        TRY(first ? tok_spm_decode_first(tok, ids[0], out) : tokenizer_decode_token(tok, ids[i], out));
    }
    tok_spm_strip_text(tok, out, start);
    if (tok->clean_up_spaces) clean_up_spaces(out, start);
    return PT_OK;
}

/* ---- the rest of the API ---- */

int32_t tokenizer_vocab_size(const pt_tokenizer *tok) { return tok->n_tok; }

static int slot_rank_cmp(const void *pa, const void *pb)
{
    const pmap_slot *a = pa, *b = pb;
    return a->rank < b->rank ? -1 : a->rank > b->rank;
}

pt_status tokenizer_merge_pairs(const pt_tokenizer *tok, int32_t **pairs, size_t *n)
{
    size_t cap = tok->merges.slots ? tok->merges.mask + 1 : 0, k = 0;
    pmap_slot *all = malloc((tok->merges.count + 1) * sizeof *all);
    *pairs = malloc((2 * tok->merges.count + 1) * sizeof **pairs);
    if (!all || !*pairs) {
        free(all);
        free(*pairs);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < cap; i++)
        if (tok->merges.slots[i].key != PMAP_EMPTY) all[k++] = tok->merges.slots[i];
    qsort(all, k, sizeof *all, slot_rank_cmp);
    for (size_t i = 0; i < k; i++) {
        (*pairs)[2 * i] = (int32_t)(all[i].key >> 32);
        (*pairs)[2 * i + 1] = (int32_t)(uint32_t)all[i].key;
    }
    *n = k;
    free(all);
    return PT_OK;
}
int32_t tokenizer_bos(const pt_tokenizer *tok) { return tok->bos; }
int32_t tokenizer_eos(const pt_tokenizer *tok) { return tok->eos; }
int32_t tokenizer_unk(const pt_tokenizer *tok) { return tok->unk; }
int32_t tokenizer_pad(const pt_tokenizer *tok) { return tok->pad; }
bool tokenizer_adds_bos(const pt_tokenizer *tok) { return tok->add_bos && tok->bos >= 0; }
bool tokenizer_adds_eos(const pt_tokenizer *tok) { return tok->add_eos && tok->eos >= 0; }
const char *tokenizer_kind(const pt_tokenizer *tok) { return tok->kind == TOK_SPM ? "SentencePiece BPE" : "byte-level BPE"; }
const char *tokenizer_chat_template(const pt_tokenizer *tok) { return tok->chat_template; }

bool tokenizer_is_special(const pt_tokenizer *tok, int32_t id)
{
    return id >= 0 && id < tok->n_tok && (tok->tok[id].flags & TOKF_SPECIAL);
}

void tokenizer_free(pt_tokenizer *tok)
{
    if (!tok) return;
    tok_cache_free(tok->cache);
    tok_pretok_free(tok);
    tok_norm_free(tok);
    tok_spm_free(tok);
    tok_added_free(tok);
    tok_smap_free(&tok->vocab);
    tok_pmap_free(&tok->merges);
    free(tok->tok);
    free(tok->bytes);
    free(tok->chat_template);
    tok_named_templates_free(tok);
    free(tok->source);
    free(tok);
}
