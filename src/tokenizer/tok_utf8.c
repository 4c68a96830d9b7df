/* tok_utf8.c — UTF-8 helpers for the tokenizer: validation, stepping over characters, Unicode
 * White_Space, and GPT-2's byte-to-unicode map (every byte gets a printable character; byte-level
 * vocabularies spell tokens in those characters). */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tok_impl.h"

/* Length of the well-formed UTF-8 sequence at s (n bytes available), or 0 if it is not one. */
size_t tok_utf8_seq_len(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
    if (len == 0 || c > 0xf4 || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[1] < 0xa0) return 0; /* overlong */
    if (c == 0xed && s[1] >= 0xa0) return 0; /* surrogate */
    if (c == 0xf0 && s[1] < 0x90) return 0; /* overlong */
    if (c == 0xf4 && s[1] >= 0x90) return 0; /* above U+10FFFF */
    return len;
}

/* Offset of the first byte that is not well-formed UTF-8, or n when all of it is. */
size_t tok_utf8_invalid_at(const char *text, size_t n)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        size_t len = tok_utf8_seq_len(s + i, n - i);
        if (!len) return i;
        i += len;
    }
    return n;
}

/* Decode the (valid) character at s; *len gets its byte length. */
uint32_t tok_utf8_decode(const uint8_t *s, size_t *len)
{
    if (s[0] < 0x80) return *len = 1, s[0];
    if (s[0] < 0xe0) return *len = 2, (uint32_t)(s[0] & 0x1f) << 6 | (s[1] & 0x3f);
    if (s[0] < 0xf0) return *len = 3, (uint32_t)(s[0] & 0x0f) << 12 | (uint32_t)(s[1] & 0x3f) << 6 | (s[2] & 0x3f);
    *len = 4;
    return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3f) << 12 | (uint32_t)(s[2] & 0x3f) << 6 |
           (s[3] & 0x3f);
}

/* Start of the character that ends at s[end - 1] (valid UTF-8). */
size_t tok_utf8_prev(const uint8_t *s, size_t end)
{
    size_t i = end - 1;
    while (i > 0 && (s[i] & 0xc0) == 0x80) i--;
    return i;
}

/* Unicode White_Space (what \s means to Rust's regex and to Oniguruma). */
bool tok_uni_is_space(uint32_t c)
{
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0d);
    return c == 0x85 || c == 0xa0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 ||
           c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* ---- GPT-2's byte <-> unicode map ---- */

/* GPT-2's map spells the printable Latin-1 bytes as themselves and the other 68 (0x00-0x20,
 * 0x7f-0xa0, 0xad) as U+0100..U+0143 in byte order. */

/* The byte that character cp stands for, or -1 when cp is not in the map. */
static int cp_to_byte(uint32_t cp)
{
    if ((cp >= 0x21 && cp <= 0x7e) || (cp >= 0xa1 && cp <= 0xff && cp != 0xad)) return (int)cp;
    if (cp < 0x100 || cp > 0x143) return -1;
    uint32_t k = cp - 0x100;
    return k < 33 ? (int)k : k < 67 ? (int)(0x7f + k - 33) : 0xad;
}

/* Decode a byte-level spelling (s, n) into raw bytes at out (room for n bytes);
 * returns the byte count, or -1 when it is not UTF-8 or some character is outside the map. */
long tok_bytelevel_decode(const char *s, size_t n, char *out)
{
    const uint8_t *u = (const uint8_t *)s;
    long k = 0;
    for (size_t i = 0; i < n;) {
        size_t len = tok_utf8_seq_len(u + i, n - i);
        int b = len ? cp_to_byte(tok_utf8_decode(u + i, &len)) : -1;
        if (b < 0) return -1;
        out[k++] = (char)b;
        i += len;
    }
    return k;
}

/* Whether s (n bytes) is UTF-8 spelled in the byte map's characters only. */
bool tok_is_bytelevel_spelling(const char *s, size_t n)
{
    const uint8_t *u = (const uint8_t *)s;
    for (size_t i = 0; i < n;) {
        size_t len = tok_utf8_seq_len(u + i, n - i);
        if (!len || cp_to_byte(tok_utf8_decode(u + i, &len)) < 0) return false;
        i += len;
    }
    return true;
}
