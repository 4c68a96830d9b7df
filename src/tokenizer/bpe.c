/* bpe.c — BPE as Hugging Face `tokenizers` runs it, byte-level (GPT-2, Llama 3, Qwen2, SmolLM2)
 * or SentencePiece-style (Llama 2, Mistral, Gemma; a word's symbols from tok_spm.c), on each word
 * the pre-tokenizer makes: merges by rank (a heap over the word's adjacent pairs, lowest rank and
 * then leftmost first, as tokenizers' Word::merge_all), with a shared word cache; and the
 * encoder's output, the ids written so far. */
#include <stdlib.h>

#include "ptrain/tokenizer.h"
#include "tok_impl.h"

/* ---- output ---- */

pt_status tok_enc_reserve(enc_ctx *c, size_t more)
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
    TRY(tok_enc_reserve(c, 1));
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
    TRY(tok_enc_reserve(c, n));
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
    TRY(tok_enc_reserve(c, len));
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
