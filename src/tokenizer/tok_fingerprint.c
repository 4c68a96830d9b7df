/* tok_fingerprint.c — a 64-bit hash of what decides how a tokenizer turns text into ids: its token
 * table, merges, added tokens, special ids, decoder and normalizer settings, chat template, and the
 * ids it gives a probe text that exercises the pre-tokenizer's regexes and the normalizer (which
 * are compiled code, not data). The dataset cache (dataset_cache.h) is named by it, so a cache made
 * with another tokenizer is never reused. */
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"
#include "ptrain/util.h"

/* One 64-bit word into the hash: a multiply and a shift, eight bytes at a time (FNV-1a's byte at a
 * time made the fingerprint of a 49k-token vocabulary 2 ms, most of a cached run's dataset phase). */
static uint64_t mix_word(uint64_t h, uint64_t w)
{
    h = (h ^ w) * 0x9e3779b97f4a7c15ULL;
    return h ^ (h >> 29);
}

static uint64_t mix_bytes(uint64_t h, const void *data, size_t len)
{
    const unsigned char *b = data;
    for (; len >= 8; b += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, b, 8);
        h = mix_word(h, w);
    }
    uint64_t tail = 0;
    memcpy(&tail, b, len);
    return mix_word(h, tail ^ (uint64_t)len << 56);
}

#define MIX(h, v) mix_bytes(h, &(v), sizeof(v))

static uint64_t mix_text(uint64_t h, const char *s, size_t len)
{
    if (!s) return mix_word(h, UINT64_MAX); /* NULL differs from "" */
    return mix_bytes(mix_word(h, len), s, len);
}

static uint64_t mix_tokens(uint64_t h, const pt_tokenizer *t)
{
    h = MIX(h, t->kind);
    h = MIX(h, t->n_tok);
    for (int32_t i = 0; i < t->n_tok; i++) {
        const tok_entry *e = &t->tok[i];
        h = mix_text(h, t->bytes + e->off, e->len);
        h = mix_text(h, t->bytes + e->soff, e->slen);
        h = MIX(h, e->flags);
    }
    for (int i = 0; i < t->n_added; i++) {
        const added_token *a = &t->added[i];
        uint8_t flags = (uint8_t)(a->special | a->single_word << 1 | a->lstrip << 2 | a->rstrip << 3 | a->normalized << 4);
        h = mix_text(h, t->bytes + a->off, a->len);
        h = MIX(h, a->id);
        h = MIX(h, flags);
    }
    return h;
}

static uint64_t mix_settings(uint64_t h, const pt_tokenizer *t)
{
    h = mix_bytes(h, t->byte_id, sizeof t->byte_id);
    h = mix_bytes(h, t->byte_tok, sizeof t->byte_tok);
    int32_t ids[4] = {t->unk, t->bos, t->eos, t->pad};
    uint8_t flags[8] = {t->fuse_unk, t->ignore_merges, t->byte_fallback, t->dec_bytes,
                        t->strip_fused, t->add_bos, t->add_eos, t->ms_rep_len};
    h = mix_bytes(h, ids, sizeof ids);
    h = mix_bytes(h, flags, sizeof flags);
    h = MIX(h, t->strip_start);
    h = MIX(h, t->strip_stop);
    h = mix_text(h, t->strip_char, strlen(t->strip_char));
    h = mix_text(h, t->ms_rep, t->ms_rep_len);
    for (int i = 0; i < t->n_norm; i++) {
        h = MIX(h, t->norm[i].kind);
        h = MIX(h, t->norm[i].form);
        h = mix_text(h, t->norm[i].text, t->norm[i].len);
    }
    for (int i = 0; i < t->n_steps; i++) {
        const pretok_step *p = &t->steps[i];
        uint8_t f[6] = {p->re != NULL, (uint8_t)p->behavior, p->prefix_space, p->metaspace, p->ms_split, p->prepend};
        h = mix_bytes(h, f, sizeof f);
        h = mix_text(h, p->rep, p->rep_len);
    }
    for (int i = 0; i < t->n_dec; i++) {
        h = mix_text(h, t->dec[i].from, t->dec[i].from_len);
        h = mix_text(h, t->dec[i].to, t->dec[i].to_len);
    }
    if (t->tmpl_tokens) { /* the other special tokens' texts a template sees */
        char *s = json_dumps(t->tmpl_tokens, JSON_SORT_KEYS | JSON_COMPACT);
        if (s) h = mix_text(h, s, strlen(s));
        free(s);
    }
    for (int i = 0; i < t->n_tmpl; i++) { /* the named templates (none: the hash as before there were any) */
        h = mix_text(h, t->tmpl_names[i], strlen(t->tmpl_names[i]));
        h = mix_text(h, t->tmpl_texts[i], strlen(t->tmpl_texts[i]));
    }
    return mix_text(h, t->chat_template, t->chat_template ? strlen(t->chat_template) : 0);
}

/* What the regexes and the normalizer do: contractions, digit runs, spaces and newlines, accents
 * in composed and decomposed form, CJK, an emoji, and the special tokens the text may write. */
static const char probe[] = "Hello world! It's 12345 o'clock;  two  spaces,\n\n\tnew lines.\r\n"
                            "Caf\xc3\xa9 cafe\xcc\x81 \xef\xbc\xa1\xef\xbc\xa2 \xe4\xbd\xa0\xe5\xa5\xbd "
                            "\xf0\x9f\x98\x80 <|im_start|>user<|im_end|> <s></s> <|eot_id|> x=[1,2];";

static uint64_t mix_probe(uint64_t h, const pt_tokenizer *t)
{
    int32_t *ids = NULL;
    size_t n = 0;
    pt_status st = tokenizer_encode(t, probe, sizeof probe - 1, true, &ids, &n);
    h = MIX(h, st);
    h = MIX(h, n);
    if (st == PT_OK) h = mix_bytes(h, ids, sizeof *ids * n);
    else err_clear();
    free(ids);
    return h;
}

/* splitmix64's finalizer: every input bit moves every output bit. */
static uint64_t scramble(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The merges as a set of (pair, rank, merged id): a sum of scrambled entries, so the order of the
 * hash table's slots does not matter (cheaper than listing them in rank order). */
static uint64_t mix_merges(uint64_t h, const pt_tokenizer *t)
{
    uint64_t sum = 0;
    for (size_t i = 0; t->merges.slots && i <= t->merges.mask; i++) {
        const pmap_slot *s = &t->merges.slots[i];
        if (s->key != PMAP_EMPTY) sum += scramble(scramble(s->key) ^ (uint64_t)(uint32_t)s->rank << 32 ^ (uint32_t)s->id);
    }
    h = MIX(h, t->merges.count);
    return MIX(h, sum);
}

uint64_t tokenizer_fingerprint(const pt_tokenizer *tok)
{
    uint64_t h = mix_settings(mix_tokens(UTIL_FNV_INIT, tok), tok);
    return mix_probe(mix_merges(h, tok), tok);
}
