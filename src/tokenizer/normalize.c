/* normalize.c — NFC/NFD/NFKC/NFKD through utf8proc, and the Precompiled normalizer (a
 * SentencePiece precompiled_charsmap) as Hugging Face `tokenizers` runs it (normalize.h).
 *
 * The charsmap is darts-clone's double-array trie: unit u has a label (u & 0x800000ff; bit 31
 * set never matches a byte), a leaf flag (bit 8), an offset ((u >> 10) << (bit 9 ? 8 : 0)) and,
 * at a leaf, a value (u & 0x7fffffff): the start of a NUL-terminated replacement in the blob
 * after the trie. `tokenizers` (its spm_precompiled crate) looks a key up by walking the trie
 * byte by byte and takes the first leaf reached, the shortest key that prefixes it (not
 * SentencePiece's own longest match); it does so on each extended grapheme cluster shorter than
 * 6 bytes, replacing the whole cluster with that key's replacement, and otherwise (a longer
 * cluster, or no key) on each character of the cluster. A key stops at a NUL byte. The trie is
 * not trusted: a walk that leaves the array, or a value that is not the start of a character of
 * the blob, counts as no match (where `tokenizers` would panic). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "normalize.h"
#include "tok_impl.h" /* rbuf */

struct charsmap {
    uint32_t *array;
    size_t n;
    char *repl; /* the replacements blob */
    size_t repl_len;
};

/* ---- NFC, NFD, NFKC, NFKD ---- */

bool unorm_from_name(const char *name, unorm_form *out)
{
    static const char *const names[] = {"NFC", "NFD", "NFKC", "NFKD"};
    for (int i = 0; i < 4; i++)
        if (strcmp(name, names[i]) == 0) return *out = (unorm_form)i, true;
    return false;
}

/* Code points that `tokenizers`' Unicode tables (Unicode 9, its unicode-normalization-alignments
 * crate) do not know and so leaves alone, where utf8proc (Unicode 15) would decompose, compose
 * or reorder them. Written by tests/reference/make_spmmodel_goldens.py, which checks it. */
static const uint32_t unorm_inert[][2] = {
    {0x7FD, 0x7FD}, {0x898, 0x89F}, {0x8CA, 0x8D3}, {0x9FE, 0x9FE}, {0xC3C, 0xC3C}, {0xD3B, 0xD3C},
    {0xEBA, 0xEBA}, {0x1715, 0x1715}, {0x1ABF, 0x1ACE}, {0x1DF6, 0x1DFA}, {0x32FF, 0x32FF},
    {0xA7F2, 0xA7F4}, {0xA82C, 0xA82C}, {0xAB69, 0xAB69}, {0x10781, 0x10785}, {0x10787, 0x107B0},
    {0x107B2, 0x107BA}, {0x10D24, 0x10D27}, {0x10EAB, 0x10EAC}, {0x10EFD, 0x10EFF}, {0x10F46, 0x10F50},
    {0x10F82, 0x10F85}, {0x11070, 0x11070}, {0x1133B, 0x1133B}, {0x1145E, 0x1145E}, {0x11839, 0x1183A},
    {0x11938, 0x11938}, {0x1193D, 0x1193E}, {0x11943, 0x11943}, {0x119E0, 0x119E0}, {0x11A34, 0x11A34},
    {0x11A47, 0x11A47}, {0x11A99, 0x11A99}, {0x11D42, 0x11D42}, {0x11D44, 0x11D45}, {0x11D97, 0x11D97},
    {0x11F41, 0x11F42}, {0x16FF0, 0x16FF1}, {0x1E030, 0x1E06D}, {0x1E08F, 0x1E08F}, {0x1E130, 0x1E136},
    {0x1E2AE, 0x1E2AE}, {0x1E2EC, 0x1E2EF}, {0x1E4EC, 0x1E4EF}, {0x1F16C, 0x1F16C}, {0x1FBF0, 0x1FBF9},
};

static bool unorm_is_inert(utf8proc_int32_t cp)
{
    size_t lo = 0, hi = sizeof unorm_inert / sizeof unorm_inert[0];
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if ((uint32_t)cp > unorm_inert[mid][1]) lo = mid + 1;
        else if ((uint32_t)cp < unorm_inert[mid][0]) hi = mid;
        else return true;
    }
    return false;
}

/* s[0, len) (no inert code point in it) in the form, appended to b. */
static pt_status unorm_segment(unorm_form form, const char *s, size_t len, rbuf *b)
{
    static const int opts[] = {UTF8PROC_COMPOSE, UTF8PROC_DECOMPOSE, UTF8PROC_COMPOSE | UTF8PROC_COMPAT,
                               UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT};
    if (len == 0) return PT_OK;
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t n = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &dst,
                                      (utf8proc_option_t)(UTF8PROC_STABLE | opts[form]));
    if (n < 0) {
        free(dst);
        return n == UTF8PROC_ERROR_NOMEM ? ERR(PT_ERR_NOMEM, "out of memory")
                                         : ERR(PT_ERR_USER, "Unicode normalization failed: %s", utf8proc_errmsg(n));
    }
    tok_rbuf_put(b, (const char *)dst, (size_t)n);
    free(dst);
    return PT_OK;
}

/* The text between inert code points normalized, those code points kept as they are (tokenizers
 * sees them as starters that nothing composes with). */
pt_status unorm_apply(unorm_form form, const char *s, size_t len, char **out, size_t *out_len)
{
    rbuf b = {0};
    size_t start = 0;
    pt_status rc = PT_OK;
    for (size_t i = 0; i < len && rc == PT_OK;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) return ERR(PT_ERR_USER, "Unicode normalization: not valid UTF-8 at byte %zu", i);
        if (unorm_is_inert(cp)) {
            rc = unorm_segment(form, s + start, i - start, &b);
            tok_rbuf_put(&b, (const char *)s + i, (size_t)k);
            start = i + (size_t)k;
        }
        i += (size_t)k;
    }
    if (rc == PT_OK) rc = unorm_segment(form, s + start, len - start, &b);
    if (rc == PT_OK && !b.p && !b.oom) b.p = calloc(1, 1), b.oom = !b.p;
    if (rc == PT_OK && b.oom) rc = ERR(PT_ERR_NOMEM, "out of memory");
    if (rc != PT_OK) {
        free(b.p);
        return rc;
    }
    *out = b.p;
    *out_len = b.n;
    return PT_OK;
}

/* ---- the charsmap ---- */

static size_t cm_offset(uint32_t u) { return (size_t)(u >> 10) << ((u & (1u << 9)) >> 6); }

static int64_t cm_leaf_value(const charsmap *m, size_t pos)
{
    return pos < m->n ? (int64_t)(m->array[pos] & 0x7fffffffu) : -1;
}

/* The value of the first leaf on key's path (the shortest key of the trie that prefixes
 * key[0, len), up to a NUL byte), or -1. */
static int64_t cm_first_prefix(const charsmap *m, const uint8_t *key, size_t len)
{
    size_t pos = cm_offset(m->array[0]);
    for (size_t i = 0; i < len && key[i]; i++) {
        pos ^= key[i];
        if (pos >= m->n) return -1;
        uint32_t u = m->array[pos];
        if ((u & 0x800000ffu) != key[i]) return -1;
        pos ^= cm_offset(u);
        if ((u >> 8) & 1) return cm_leaf_value(m, pos);
    }
    return -1;
}

/* The replacement for key[0, len) (*r, *rlen), or false when the trie has none. */
static bool cm_transform(const charsmap *m, const char *key, size_t len, const char **r, size_t *rlen)
{
    int64_t v = cm_first_prefix(m, (const uint8_t *)key, len);
    if (v < 0 || (size_t)v > m->repl_len) return false;
    if ((size_t)v < m->repl_len && ((uint8_t)m->repl[v] & 0xc0) == 0x80) return false; /* inside a character */
    const char *start = m->repl + v, *nul = memchr(start, '\0', m->repl_len - (size_t)v);
    *r = start;
    *rlen = nul ? (size_t)(nul - start) : m->repl_len - (size_t)v;
    return true;
}

/* The output, and when aligning (old_al set), the alignments `tokenizers` gives it. Its
 * Precompiled normalizer records, per output character, a change as NormalizedString.transform
 * takes them (0: replaces the next input character, -n: and removes n more, 1: inserted, taking
 * the alignment of the input byte before): a replacement of k characters by m gives its
 * characters 0, then 1 to the last m - k of them when m > k, or adds m - k to the change of the
 * last character recorded when m < k, which is the one before when m is 0; and at the very
 * start, with nothing recorded yet, a removal is not recorded at all (so what follows takes the
 * alignment of the characters it dropped). */
typedef struct {
    size_t off, len; /* the character in the output */
    long change;
} cm_change;

typedef struct {
    rbuf b;
    const char *old;        /* the input */
    const uint32_t *old_al; /* its bytes' original starts, or NULL */
    size_t old_len;
    cm_change *ch;          /* per output character */
    size_t n_ch, ch_cap;
} cm_out;

static size_t cm_char_len(const char *s, size_t len)
{
    utf8proc_int32_t cp;
    utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)len, &cp);
    return k > 0 ? (size_t)k : 1;
}

static size_t cm_chars(const char *s, size_t len)
{
    size_t n = 0;
    for (size_t k = 0; k < len; k += cm_char_len(s + k, len - k)) n++;
    return n;
}

static void cm_record(cm_out *o, size_t off, size_t len, long change)
{
    if (o->n_ch == o->ch_cap) {
        size_t cap = o->ch_cap ? o->ch_cap * 2 : 64;
        cm_change *grown = realloc(o->ch, cap * sizeof *grown);
        if (!grown) {
            o->b.oom = true;
            return;
        }
        o->ch = grown;
        o->ch_cap = cap;
    }
    o->ch[o->n_ch++] = (cm_change){off, len, change};
}

/* r[0, rlen) in place of old_chars characters of the input. */
static void cm_emit(cm_out *o, const char *r, size_t rlen, size_t old_chars)
{
    size_t first = o->n_ch;
    for (size_t k = 0; k < rlen;) {
        size_t cl = cm_char_len(r + k, rlen - k), at = o->b.n;
        tok_rbuf_put(&o->b, (const char *)r + k, cl);
        if (o->old_al && !o->b.oom) cm_record(o, at, cl, 0);
        k += cl;
    }
    if (!o->old_al || o->b.oom) return;
    long diff = (long)(o->n_ch - first) - (long)old_chars;
    for (size_t i = o->n_ch; diff > 0 && i > first && (long)(o->n_ch - i) < diff; i--) o->ch[i - 1].change = 1;
    if (diff < 0 && o->n_ch) o->ch[o->n_ch - 1].change += diff;
}

/* NormalizedString.transform's bookkeeping over the recorded changes: each output byte's original
 * start into *al (malloc'd). */
static bool cm_align(const cm_out *o, uint32_t **al)
{
    *al = malloc((o->b.n + 1) * sizeof **al);
    if (!*al) return false;
    size_t offset = 0, last = o->old_len ? o->old_len - 1 : 0;
    for (size_t i = 0; i < o->n_ch; i++) {
        const cm_change *c = &o->ch[i];
        size_t idx = offset < last ? offset : last;
        uint32_t a = !o->old_len ? 0 : c->change > 0 ? (offset < 1 ? 0 : o->old_al[offset - 1 < last ? offset - 1 : last])
                                                      : o->old_al[idx];
        for (long k = 0; c->change <= 0 && k <= -c->change && offset < o->old_len; k++)
            offset += cm_char_len(o->old + offset, o->old_len - offset);
        for (size_t j = 0; j < c->len; j++) (*al)[c->off + j] = a;
    }
    return true;
}

/* One extended grapheme cluster g[0, len) into out. */
static void cm_cluster(const charsmap *m, const char *g, size_t len, cm_out *out)
{
    const char *r;
    size_t rlen;
    if (len < 6 && cm_transform(m, g, len, &r, &rlen)) {
        cm_emit(out, r, rlen, cm_chars(g, len));
        return;
    }
    for (size_t i = 0; i < len;) {
        size_t cl = cm_char_len(g + i, len - i);
        if (cm_transform(m, g + i, cl, &r, &rlen)) cm_emit(out, r, rlen, 1);
        else cm_emit(out, g + i, cl, 1);
        i += cl;
    }
}

pt_status charsmap_apply_aligned(const charsmap *m, const char *s, size_t len, const uint32_t *al, char **out,
                                 size_t *out_len, uint32_t **out_al)
{
    cm_out o = {.old = s, .old_al = al, .old_len = len};
    utf8proc_int32_t state = 0, prev = -1;
    size_t start = 0;
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) k = 1, cp = 0xfffd; /* inputs are valid UTF-8; never loop on a bad byte */
        if (prev >= 0 && utf8proc_grapheme_break_stateful(prev, cp, &state)) {
            cm_cluster(m, s + start, i - start, &o);
            start = i;
        }
        prev = cp;
        i += (size_t)k;
    }
    if (len > start) cm_cluster(m, s + start, len - start, &o);
    if (!o.b.p && !o.b.oom) o.b.p = calloc(1, 1), o.b.oom = !o.b.p;
    uint32_t *oal = NULL;
    if (!o.b.oom && al && !cm_align(&o, &oal)) o.b.oom = true;
    free(o.ch);
    if (o.b.oom) {
        free(o.b.p);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    *out = o.b.p;
    *out_len = o.b.n;
    if (out_al) *out_al = oal;
    else free(oal);
    return PT_OK;
}

pt_status charsmap_apply(const charsmap *m, const char *s, size_t len, char **out, size_t *out_len)
{
    return charsmap_apply_aligned(m, s, len, NULL, out, out_len, NULL);
}

/* Where s[0, len) stops being valid UTF-8 (len when it does not). */
static size_t utf8_bad_at(const uint8_t *s, size_t len)
{
    for (size_t i = 0; i < len;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate(s + i, (utf8proc_ssize_t)(len - i), &cp);
        if (k <= 0) return i;
        i += (size_t)k;
    }
    return len;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }

pt_status charsmap_load(const char *source, const char *where, const uint8_t *blob, size_t len, charsmap **out)
{
    *out = NULL;
    size_t units = len >= 4 ? le32(blob) / 4 : 0;
    if (len < 4 || units > (len - 4) / 4)
        return ERR(PT_ERR_USER,
                   "%s: %s: a precompiled_charsmap of %zu bytes is cut off (its trie needs %zu); the "
                   "model's tokenizer file is damaged: download it again",
                   shown_text(source).s, where, len, len >= 4 ? 4 + 4 * units : 4);
    if (units == 0)
        return ERR(PT_ERR_USER, "%s: %s: the precompiled_charsmap's trie is empty", shown_text(source).s, where);
    const uint8_t *repl = blob + 4 + 4 * units;
    size_t repl_len = len - 4 - 4 * units, bad = utf8_bad_at(repl, repl_len);
    if (bad < repl_len)
        return ERR(PT_ERR_USER, "%s: %s: the precompiled_charsmap's replacements are not valid UTF-8 (at byte %zu of "
                   "them)", shown_text(source).s, where, bad);
    charsmap *m = calloc(1, sizeof *m);
    if (m) m->array = malloc(units * sizeof *m->array), m->repl = malloc(repl_len + 1);
    if (!m || !m->array || !m->repl) {
        charsmap_free(m);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < units; i++) m->array[i] = le32(blob + 4 + 4 * i);
    m->n = units;
    memcpy(m->repl, repl, repl_len);
    m->repl[repl_len] = '\0';
    m->repl_len = repl_len;
    *out = m;
    return PT_OK;
}

void charsmap_free(charsmap *m)
{
    if (!m) return;
    free(m->array);
    free(m->repl);
    free(m);
}

/* ---- base64 ---- */

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

pt_status base64_decode(const char *source, const char *where, const char *s, size_t len, uint8_t **out,
                        size_t *out_len)
{
    size_t pad = len >= 1 && s[len - 1] == '=' ? (len >= 2 && s[len - 2] == '=' ? 2 : 1) : 0;
    if (len % 4 != 0)
        return ERR(PT_ERR_USER, "%s: %s: not base64 (%zu characters, not a multiple of 4)", shown_text(source).s, where,
                   len);
    uint8_t *b = malloc(len / 4 * 3 + 1);
    TRY_ALLOC(b);
    size_t n = 0;
    uint32_t acc = 0;
    for (size_t i = 0; i < len - pad; i++) {
        int v = b64_value(s[i]);
        if (v < 0) {
            free(b);
            return ERR(PT_ERR_USER, "%s: %s: not base64 (character %zu)", shown_text(source).s, where, i);
        }
        acc = acc << 6 | (uint32_t)v;
        if (i % 4 == 3) {
            b[n++] = (uint8_t)(acc >> 16), b[n++] = (uint8_t)(acc >> 8), b[n++] = (uint8_t)acc;
            acc = 0;
        }
    }
    if (pad == 2) b[n++] = (uint8_t)(acc >> 4);
    if (pad == 1) b[n++] = (uint8_t)(acc >> 10), b[n++] = (uint8_t)(acc >> 2);
    if ((pad == 2 && (acc & 0xf)) || (pad == 1 && (acc & 0x3))) {
        free(b);
        return ERR(PT_ERR_USER, "%s: %s: not base64 (bits left over at the end)", shown_text(source).s, where);
    }
    *out = b;
    *out_len = n;
    return PT_OK;
}
