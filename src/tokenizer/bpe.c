/* bpe.c — BPE as Hugging Face `tokenizers` runs it, byte-level (GPT-2, Llama 3, Qwen2, SmolLM2)
 * or SentencePiece-style (Llama 2, Mistral, Gemma): added tokens first, then the normalizer and
 * the pre-tokenizer, then merges by rank on each word (a heap over the word's adjacent pairs,
 * lowest rank and then leftmost first, as tokenizers' Word::merge_all), with a shared word cache;
 * plain text with the model's bos put first; and decoding back to bytes.
 *
 * The tokenizer's other parts are the tok_*.c files beside this one; tok_impl.h holds the types
 * and the functions they share. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/tokenizer.h"
#include "tok_impl.h"

/* ---- output ---- */

static pt_status enc_reserve(enc_ctx *c, size_t more)
{
    if (c->n + more <= c->cap) return PT_OK;
    size_t cap = c->cap ? c->cap * 2 : 256;
    while (cap < c->n + more) cap *= 2;
    int32_t *grown = realloc(c->ids, cap * sizeof *grown);
    if (!grown) return ERR(PT_ERR_NOMEM, "out of memory");
    c->ids = grown;
    c->cap = cap;
    return PT_OK;
}

pt_status tok_emit_id(enc_ctx *c, int32_t id)
{
    TRY(enc_reserve(c, 1));
    c->ids[c->n++] = id;
    return PT_OK;
}

/* ---- the merge heap: lowest rank first, then lowest position ---- */

static bool cand_less(const bpe_cand *a, const bpe_cand *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(enc_ctx *c, bpe_cand x)
{
    size_t i = c->heap_n++;
    while (i > 0 && cand_less(&x, &c->heap[(i - 1) / 2])) {
        c->heap[i] = c->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    c->heap[i] = x;
}

static bpe_cand heap_pop(enc_ctx *c)
{
    bpe_cand top = c->heap[0], last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t k = 2 * i + 1;
        if (k >= n) break;
        if (k + 1 < n && cand_less(&c->heap[k + 1], &c->heap[k])) k++;
        if (!cand_less(&c->heap[k], &last)) break;
        c->heap[i] = c->heap[k];
        i = k;
    }
    if (n) c->heap[i] = last;
    return top;
}

/* Make room for a word of len bytes: len symbols, and at most 2 * len heap entries (the first
 * len - 1 pairs; then each step pops one and, when it merges, pushes at most two, and there are
 * at most len - 1 merges). */
static pt_status bpe_reserve(enc_ctx *c, size_t len)
{
    if (len > c->sym_cap) {
        bpe_sym *s = realloc(c->sym, len * sizeof *s);
        if (!s) return ERR(PT_ERR_NOMEM, "out of memory");
        c->sym = s;
        c->sym_cap = len;
    }
    if (2 * len > c->heap_cap) {
        bpe_cand *h = realloc(c->heap, 2 * len * sizeof *h);
        if (!h) return ERR(PT_ERR_NOMEM, "out of memory");
        c->heap = h;
        c->heap_cap = 2 * len;
    }
    return PT_OK;
}

/* One symbol per byte; bytes the vocabulary lacks become unk (fused when fuse_unk) or vanish. */
static size_t bpe_symbols(enc_ctx *c, const uint8_t *w, size_t len)
{
    const pt_tokenizer *t = c->tok;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = t->byte_id[w[i]];
        if (id < 0) {
            if (t->unk < 0 || (t->fuse_unk && n && c->sym[n - 1].id == t->unk)) continue;
            id = t->unk;
        }
        c->sym[n] = (bpe_sym){id, (int32_t)n - 1, (int32_t)n + 1};
        n++;
    }
    if (n) c->sym[n - 1].next = -1;
    return n;
}

static void bpe_push_pair(enc_ctx *c, int32_t pos)
{
    int32_t next = c->sym[pos].next;
    if (next < 0) return;
    const pmap_slot *m = tok_pmap_get(&c->tok->merges, c->sym[pos].id, c->sym[next].id);
    if (m) heap_push(c, (bpe_cand){m->rank, pos, m->id});
}

/* Apply the candidate top if it still stands (the pair there still merges into top.id). */
static void bpe_apply(enc_ctx *c, bpe_cand top)
{
    bpe_sym *s = c->sym;
    if (s[top.pos].id < 0 || s[top.pos].next < 0) return;
    int32_t right = s[top.pos].next;
    const pmap_slot *m = tok_pmap_get(&c->tok->merges, s[top.pos].id, s[right].id);
    if (!m || m->id != top.id) return;
    s[top.pos].id = top.id;
    s[top.pos].next = s[right].next;
    s[right].id = -1;
    if (s[right].next >= 0) s[s[right].next].prev = top.pos;
    if (s[top.pos].prev >= 0) bpe_push_pair(c, s[top.pos].prev);
    bpe_push_pair(c, top.pos);
}

static pt_status bpe_merge(enc_ctx *c, const uint8_t *w, size_t len)
{
    TRY(bpe_reserve(c, len));
    size_t n = c->tok->kind == TOK_SPM ? tok_spm_symbols(c, w, len) : bpe_symbols(c, w, len);
    c->heap_n = 0;
    for (size_t i = 0; i + 1 < n; i++) bpe_push_pair(c, (int32_t)i);
    while (c->heap_n) bpe_apply(c, heap_pop(c));
    TRY(enc_reserve(c, n));
    for (int32_t i = n ? 0 : -1; i >= 0; i = c->sym[i].next) c->ids[c->n++] = c->sym[i].id;
    return PT_OK;
}

pt_status tok_bpe_word(enc_ctx *c, const uint8_t *w, size_t len)
{
    const pt_tokenizer *t = c->tok;
    if (len == 1 && t->byte_id[w[0]] >= 0) return tok_emit_id(c, t->byte_id[w[0]]);
    if (t->ignore_merges) {
        int32_t id = tok_smap_get(&t->vocab, w, len);
        if (id >= 0) return tok_emit_id(c, id);
    }
    if (len > CACHE_KEY_MAX) return bpe_merge(c, w, len);
    cache_shard *cache = (cache_shard *)t->cache; /* the cache is the one mutable part */
    uint64_t h = tok_cache_hash(w, len);
    TRY(enc_reserve(c, len));
    int hit = tok_cache_get(cache, w, len, h, c->ids + c->n);
    if (hit >= 0) {
        c->n += (size_t)hit;
        return PT_OK;
    }
    size_t start = c->n;
    TRY(bpe_merge(c, w, len));
    tok_cache_put(cache, w, len, h, c->ids + start, c->n - start);
    return PT_OK;
}

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
    pt_status rc = c.md ? enc_reserve(&c, len / 3 + 16) : ERR(PT_ERR_NOMEM, "out of memory");
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

pt_status tokenizer_decode(const pt_tokenizer *tok, const int32_t *ids, size_t n, strbuf *out)
{
    size_t start = out->len;
    for (size_t i = 0; i < n; i++) {
        bool first = i == 0 && tok->ms_rep_len && ids[0] >= 0 && ids[0] < tok->n_tok &&
                     (tok->tok[ids[0]].flags & TOKF_PRESENT);
        TRY(first ? tok_spm_decode_first(tok, ids[0], out) : tokenizer_decode_token(tok, ids[i], out));
    }
    tok_spm_strip_text(tok, out, start);
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
    free(tok->source);
    free(tok);
}
