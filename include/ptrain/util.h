/* util.h — small helpers used across modules: a growable string buffer and string copies. */
#ifndef PTRAIN_UTIL_H
#define PTRAIN_UTIL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    char *data;
    size_t len, cap;
} strbuf;

void sb_printf(strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append n bytes (any bytes: the buffer stays NUL-terminated after them). */
void sb_append(strbuf *sb, const void *data, size_t n);
void sb_vprintf(strbuf *sb, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
void sb_free(strbuf *sb);
/* The buffer's text ("" when empty); stays owned by sb. */
const char *sb_text(const strbuf *sb);
/* Append s in single quotes for a POSIX shell (each ' written '\''): any text, pasted into sh or
 * bash, is then one word, run or expanded never. */
void sb_shell_quote(strbuf *sb, const char *s);

/* strdup that aborts the process on out-of-memory (strings here are tiny). */
char *xstrdup(const char *s);
/* Seconds on the monotonic clock (for durations). */
double util_now(void);
/* FNV-1a 64-bit hash, chained through h (start with UTIL_FNV_INIT). */
#define UTIL_FNV_INIT 0xcbf29ce484222325ULL
uint64_t util_fnv1a(uint64_t h, const void *data, size_t len);
/* splitmix64: the next number of the one seeded generator every module uses (a fixed, portable
 * sequence, so seeded runs are the same on every machine). */
uint64_t rng_next(uint64_t *state);

#endif
