/* tok_maps.c — the tokenizer's hash maps: byte string -> id (vocabulary), id pair -> merge
 * (merge ranks), and the sharded, locked word cache (word bytes -> ids) that encode shares
 * between threads. */
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

static uint64_t tok_hash(const void *data, size_t n)
{
    const uint8_t *s = data;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (n * 0xff51afd7ed558ccdULL);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

/* ---- byte string -> int32 ---- */

bool tok_smap_init(smap *m, size_t expect)
{
    size_t cap = 16;
    while (cap < expect * 2) cap *= 2;
    m->slots = calloc(cap, sizeof *m->slots);
    m->mask = cap - 1;
    m->count = 0;
    return m->slots != NULL;
}

void tok_smap_free(smap *m)
{
    free(m->slots);
    m->slots = NULL;
    m->mask = m->count = 0;
}

static smap_slot *smap_slot_for(const smap *m, const void *key, size_t len, uint64_t h)
{
    for (size_t i = h & m->mask;; i = (i + 1) & m->mask) {
        smap_slot *s = &m->slots[i];
        if (!s->key || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)) return s;
    }
}

int32_t tok_smap_get(const smap *m, const void *key, size_t len)
{
    if (!m->slots) return -1;
    const smap_slot *s = smap_slot_for(m, key, len, tok_hash(key, len));
    return s->key ? s->value : -1;
}

static bool smap_grow(smap *m)
{
    smap bigger = {calloc((m->mask + 1) * 2, sizeof(smap_slot)), m->mask * 2 + 1, m->count};
    if (!bigger.slots) return false;
    for (size_t i = 0; i <= m->mask; i++)
        if (m->slots[i].key) *smap_slot_for(&bigger, m->slots[i].key, m->slots[i].len, m->slots[i].hash) = m->slots[i];
    free(m->slots);
    *m = bigger;
    return true;
}

/* Insert or overwrite (the last value for a key wins, as in a Python or Rust map). */
bool tok_smap_put(smap *m, const void *key, size_t len, int32_t value)
{
    if ((m->count + 1) * 2 > m->mask + 1 && !smap_grow(m)) return false;
    uint64_t h = tok_hash(key, len);
    smap_slot *s = smap_slot_for(m, key, len, h);
    if (!s->key) m->count++;
    *s = (smap_slot){key, (uint32_t)len, value, h};
    return true;
}

/* ---- (left, right) -> (rank, merged id); lookups are inline in tok_impl.h ---- */

bool tok_pmap_init(pmap *m, size_t expect)
{
    size_t cap = 16;
    while (cap < expect * 2) cap *= 2;
    m->slots = malloc(cap * sizeof *m->slots);
    if (!m->slots) return false;
    for (size_t i = 0; i < cap; i++) m->slots[i].key = PMAP_EMPTY;
    m->mask = cap - 1;
    m->count = 0;
    return true;
}

void tok_pmap_free(pmap *m)
{
    free(m->slots);
    m->slots = NULL;
}

/* Sized once by the loader for all merges (no growth). Later merges of a pair win. */
void tok_pmap_put(pmap *m, int32_t a, int32_t b, int32_t rank, int32_t id)
{
    pmap_slot *s = tok_pmap_slot_for(m, tok_pmap_key(a, b));
    if (s->key == PMAP_EMPTY) m->count++;
    *s = (pmap_slot){tok_pmap_key(a, b), rank, id};
}

/* ---- word cache: word bytes -> ids, CACHE_SHARDS shards each behind a mutex ---- */

void tok_cache_init(cache_shard *c)
{
    for (int i = 0; i < CACHE_SHARDS; i++) {
        pthread_mutex_init(&c[i].mu, NULL);
        c[i].slots = NULL;
        c[i].count = 0;
    }
}

void tok_cache_free(cache_shard *c)
{
    for (int i = 0; i < CACHE_SHARDS; i++) {
        free(c[i].slots);
        pthread_mutex_destroy(&c[i].mu);
    }
}

uint64_t tok_cache_hash(const uint8_t *w, size_t len)
{
    uint64_t h = tok_hash(w, len);
    return h ? h : 1;
}

static cache_slot *cache_find(cache_shard *s, const uint8_t *w, size_t len, uint64_t h)
{
    for (size_t i = (h >> 8) & (CACHE_SHARD_SLOTS - 1);; i = (i + 1) & (CACHE_SHARD_SLOTS - 1)) {
        cache_slot *c = &s->slots[i];
        if (!c->hash || (c->hash == h && c->klen == len && memcmp(c->key, w, len) == 0)) return c;
    }
}

/* Copy the cached ids of word w (len <= CACHE_KEY_MAX) into dst; returns how many, or -1 when
 * the word is not cached. */
int tok_cache_get(cache_shard *cache, const uint8_t *w, size_t len, uint64_t h, int32_t *dst)
{
    cache_shard *s = &cache[h % CACHE_SHARDS];
    int n = -1;
    pthread_mutex_lock(&s->mu);
    if (s->slots) {
        const cache_slot *c = cache_find(s, w, len, h);
        if (c->hash) {
            memcpy(dst, c->ids, c->nids * sizeof(int32_t));
            n = c->nids;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Remember the ids of word w; a half-full shard is emptied first. Allocation failure skips. */
void tok_cache_put(cache_shard *cache, const uint8_t *w, size_t len, uint64_t h, const int32_t *ids, size_t n)
{
    if (n > CACHE_IDS_MAX) return;
    cache_shard *s = &cache[h % CACHE_SHARDS];
    pthread_mutex_lock(&s->mu);
    if (!s->slots) s->slots = calloc(CACHE_SHARD_SLOTS, sizeof *s->slots);
    if (s->slots && s->count * 2 >= CACHE_SHARD_SLOTS) {
        memset(s->slots, 0, CACHE_SHARD_SLOTS * sizeof *s->slots);
        s->count = 0;
    }
    cache_slot *c = s->slots ? cache_find(s, w, len, h) : NULL;
    if (c && !c->hash) {
        c->hash = h;
        c->klen = (uint8_t)len;
        c->nids = (uint8_t)n;
        memcpy(c->key, w, len);
        memcpy(c->ids, ids, n * sizeof *ids);
        s->count++;
    }
    pthread_mutex_unlock(&s->mu);
}
