/* util.c — string buffer, string copies, hashing and the seeded generator shared by the modules. */
#include "ptrain/util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Room for n more bytes and the terminating NUL. */
static void sb_reserve(strbuf *sb, size_t n)
{
    if (sb->len + n + 1 <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 256;
    while (cap < sb->len + n + 1) cap *= 2;
    char *grown = realloc(sb->data, cap);
    if (!grown) abort();
    sb->data = grown;
    sb->cap = cap;
}

void sb_append(strbuf *sb, const void *data, size_t n)
{
    sb_reserve(sb, n);
    if (n) memcpy(sb->data + sb->len, data, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void sb_vprintf(strbuf *sb, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int need = vsnprintf(NULL, 0, fmt, ap);
    if (need >= 0) {
        sb_reserve(sb, (size_t)need);
        vsnprintf(sb->data + sb->len, sb->cap - sb->len, fmt, again);
        sb->len += (size_t)need;
    }
    va_end(again);
}

void sb_printf(strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(sb, fmt, ap);
    va_end(ap);
}

void sb_free(strbuf *sb)
{
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}

const char *sb_text(const strbuf *sb) { return sb->data ? sb->data : ""; }

void sb_shell_quote(strbuf *sb, const char *s)
{
    sb_printf(sb, "'");
    for (; *s; s++) sb_printf(sb, *s == '\'' ? "'\\''" : "%c", *s);
    sb_printf(sb, "'");
}

char *xstrdup(const char *s)
{
    char *copy = strdup(s ? s : "");
    if (!copy) abort();
    return copy;
}

uint64_t util_fnv1a(uint64_t h, const void *data, size_t len)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

double util_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
