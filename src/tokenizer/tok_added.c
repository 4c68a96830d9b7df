/* tok_added.c — added and special tokens, found in the text before pre-tokenization the way HF
 * `tokenizers` finds them: leftmost-longest matches (a byte trie stands in for its Aho-Corasick),
 * first among tokens with normalized = false on the raw text, then among normalized ones in the
 * gaps; special tokens are skipped unless parse_special; single_word, lstrip and rstrip as HF
 * applies them; the text between goes through the normalizer (tok_norm.c) before the second pass
 * (the piece that starts the text stays the start when tok_norm_align.c says its normalized text
 * still begins at offset 0, which a Metaspace "first" asks), and what is left after both passes
 * goes to the pre-tokenizer (tok_pretok.c). */
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "tok_impl.h"

/* ---- the trie ---- */

static int32_t trie_node_new(added_trie *tr, uint8_t byte)
{
    if (tr->n == tr->cap) {
        size_t cap = tr->cap ? tr->cap * 2 : 64;
        trie_node *grown = realloc(tr->nodes, cap * sizeof *grown);
        if (!grown) return -1;
        tr->nodes = grown;
        tr->cap = cap;
    }
    tr->nodes[tr->n] = (trie_node){-1, -1, -1, byte};
    return (int32_t)tr->n++;
}

static int32_t trie_child(added_trie *tr, int32_t node, uint8_t byte, bool create)
{
    int32_t ch = tr->nodes[node].child;
    while (ch >= 0 && tr->nodes[ch].byte != byte) ch = tr->nodes[ch].sibling;
    if (ch >= 0 || !create) return ch;
    ch = trie_node_new(tr, byte);
    if (ch < 0) return -1;
    tr->nodes[ch].sibling = tr->nodes[node].child;
    tr->nodes[node].child = ch;
    return ch;
}

/* Add token index k with content s; the first token with a given content keeps it. */
static bool trie_add(added_trie *tr, const uint8_t *s, size_t len, int32_t k)
{
    if (tr->n == 0 && trie_node_new(tr, 0) < 0) return false;
    int32_t node = 0;
    for (size_t i = 0; i < len; i++)
        if ((node = trie_child(tr, node, s[i], true)) < 0) return false;
    if (tr->nodes[node].token < 0) tr->nodes[node].token = k;
    tr->first[s[0] >> 3] |= (uint8_t)(1u << (s[0] & 7));
    return true;
}

/* The longest token starting at s[p]: its index (and *mlen), or -1. */
static int32_t trie_longest(const added_trie *tr, const uint8_t *s, size_t len, size_t p, size_t *mlen)
{
    int32_t best = -1, node = 0;
    for (size_t i = p; i < len; i++) {
        int32_t ch = tr->nodes[node].child;
        while (ch >= 0 && tr->nodes[ch].byte != s[i]) ch = tr->nodes[ch].sibling;
        if (ch < 0) break;
        node = ch;
        if (tr->nodes[node].token >= 0) {
            best = tr->nodes[node].token;
            *mlen = i - p + 1;
        }
    }
    return best;
}

void tok_added_free(pt_tokenizer *t)
{
    for (int i = 0; i < 2; i++) free(t->trie[i].nodes);
    free(t->added);
    pcre2_code_free(t->word_re);
}

/* Add token k to its trie: a normalized token by its normalized content. */
static pt_status added_trie_add(pt_tokenizer *t, int k)
{
    const added_token *a = &t->added[k];
    const char *s = t->bytes + a->off;
    rbuf n = {0};
    if (a->normalized && t->n_norm) {
        TRY(tok_norm_content(t, s, a->len, &n));
        s = n.p;
    }
    size_t len = n.p ? n.n : a->len;
    bool ok = len == 0 || trie_add(&t->trie[a->normalized], (const uint8_t *)s, len, k);
    free(n.p);
    return ok ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
}

/* Build the tries once all added tokens are known (empty contents are never matched). */
pt_status tok_added_build(pt_tokenizer *t)
{
    bool single_word = false;
    for (int k = 0; k < t->n_added; k++) {
        single_word |= t->added[k].single_word;
        TRY(added_trie_add(t, k));
    }
    if (!single_word) return PT_OK;
    /* Rust's regex \w: what single_word checks on both sides of a match */
    static const char word[] = "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]";
    bool jit;
    return tok_regex_compile(t->source, "single_word", word, strlen(word), false, PCRE2_ANCHORED, &t->word_re, &jit);
}

/* ---- splitting the text ---- */

static bool is_word_char_at(enc_ctx *c, const char *s, size_t len, size_t at)
{
    int rc = pcre2_match(c->tok->word_re, (PCRE2_SPTR)s, len, at, PCRE2_NO_UTF_CHECK, c->md, NULL);
    return rc >= 0;
}

/* single_word: no word character right before start nor right after stop. */
static bool single_word_ok(enc_ctx *c, const char *s, size_t len, size_t start, size_t stop)
{
    if (start > 0 && is_word_char_at(c, s, start, tok_utf8_prev((const uint8_t *)s, start))) return false;
    return stop == len || !is_word_char_at(c, s, len, stop);
}

/* Where the run of white space that ends at s[end] begins. */
static size_t space_run_start(const char *s, size_t end)
{
    const uint8_t *u = (const uint8_t *)s;
    while (end > 0) {
        size_t p = tok_utf8_prev(u, end), n;
        if (!tok_uni_is_space(tok_utf8_decode(u + p, &n))) break;
        end = p;
    }
    return end;
}

/* Length of the run of white space at the start of s[0, len). */
static size_t space_run_len(const char *s, size_t len)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t i = 0, n;
    while (i < len && tok_uni_is_space(tok_utf8_decode(u + i, &n))) i += n;
    return i;
}

static bool trie_may_start(const added_trie *tr, uint8_t b) { return tr->first[b >> 3] & (1u << (b & 7)); }

static pt_status added_gap(enc_ctx *c, int pass, const char *s, size_t len);

/* Pass `pass` over s: added tokens of that pass become ids, the text between goes on. */
pt_status tok_added_split(enc_ctx *c, int pass, const char *s, size_t len)
{
    const added_trie *tr = &c->tok->trie[pass];
    if (tr->n == 0) return added_gap(c, pass, s, len);
    const uint8_t *u = (const uint8_t *)s;
    size_t done = 0, p = 0, mlen = 0;
    while (p < len) {
        int32_t k = trie_may_start(tr, u[p]) ? trie_longest(tr, u, len, p, &mlen) : -1;
        if (k < 0) {
            p++;
            continue;
        }
        const added_token *a = &c->tok->added[k];
        size_t start = p, stop = p + mlen;
        p = stop;
        if ((a->special && !c->parse_special) || (a->single_word && !single_word_ok(c, s, len, start, stop)))
            continue;
        if (a->lstrip) start = space_run_start(s, start);
        if (start < done) start = done;
        if (a->rstrip) stop += space_run_len(s + stop, len - stop);
        if (stop <= done) continue; /* inside what an rstrip token already took */
        TRY(added_gap(c, pass, s + done, start - done));
        TRY(tok_emit_id(c, a->id));
        done = stop;
    }
    return added_gap(c, pass, s + done, len - done);
}

/* Whether a Metaspace step prepends to the input's first piece only (whose normalized text may no
 * longer start at offset 0). */
static bool norm_asks_first(const pt_tokenizer *t)
{
    for (int i = 0; i < t->n_steps; i++)
        if (t->steps[i].metaspace && t->steps[i].prepend == PREPEND_FIRST) return true;
    return false;
}

/* Text between raw-matched added tokens: normalized, then split on the normalized added tokens.
 * The piece that starts the text keeps that status in its normalized copy (Metaspace "first"). */
static pt_status added_norm_gap(enc_ctx *c, const char *s, size_t len)
{
    if (c->tok->n_norm == 0) return tok_added_split(c, 1, s, len);
    rbuf n = {0};
    TRY(tok_norm_apply(c, s, len, &n));
    bool first = s == c->text_start;
    pt_status rc = first && norm_asks_first(c->tok) ? tok_norm_first_kept(c, s, len, &first) : PT_OK;
    c->text_start = first ? n.p : NULL;
    if (rc == PT_OK && n.n) rc = tok_added_split(c, 1, n.p, n.n);
    c->text_start = NULL;
    free(n.p);
    return rc;
}

/* Text between added tokens: normalized and split on the normalized tokens after the raw pass,
 * then pre-tokenized. */
static pt_status added_gap(enc_ctx *c, int pass, const char *s, size_t len)
{
    if (len == 0) return PT_OK;
    return pass == 0 ? added_norm_gap(c, s, len) : tok_pretok_run(c, 0, s, len);
}
