/* jsonfile.c — JSON with integers beyond int64 read as reals (jsonfile.h): the text is scanned
 * once outside strings; an integer literal that does not fit int64 gets ".0" appended in a copy,
 * which jansson then reads as a real. Text without such numbers is parsed as it is. Files past
 * JSONFILE_MAX_BYTES are refused before they are read. */
#include "ptrain/jsonfile.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Whether the integer literal p[0..n) (optional '-', digits) lies outside int64. */
static bool beyond_int64(const char *p, size_t n)
{
    bool neg = *p == '-';
    const char *digits = p + neg, *limit = neg ? "9223372036854775808" : "9223372036854775807";
    size_t nd = n - neg;
    while (nd > 1 && *digits == '0') digits++, nd--;
    return nd > 19 || (nd == 19 && memcmp(digits, limit, 19) > 0);
}

/* The end of the number starting at i, and whether it is an integer literal beyond int64. */
static size_t number_end(const char *t, size_t len, size_t i, bool *big)
{
    size_t j = i + (t[i] == '-');
    while (j < len && t[j] >= '0' && t[j] <= '9') j++;
    bool integer = j == len || (t[j] != '.' && t[j] != 'e' && t[j] != 'E');
    *big = integer && j > i + (t[i] == '-') && beyond_int64(t + i, j - i);
    while (j < len && strchr("0123456789.eE+-", t[j])) j++;
    return j;
}

/* A copy of t with ".0" after every integer beyond int64 (NULL when there is none, or no memory:
 * then t is parsed as it is). */
static char *widen(const char *t, size_t len, size_t *out_len)
{
    char *out = NULL;
    size_t n = 0, cap = 0;
    bool in_string = false, any = false;
    for (size_t i = 0; i < len;) {
        size_t j = i + 1;
        bool big = false;
        if (in_string) {
            if (t[i] == '\\' && i + 1 < len) j = i + 2;
            else if (t[i] == '"') in_string = false;
        } else if (t[i] == '"') in_string = true;
        else if (t[i] == '-' || (t[i] >= '0' && t[i] <= '9')) j = number_end(t, len, i, &big);
        if (n + (j - i) + 2 > cap) {
            cap = (n + (j - i) + 2) * 2 + 64;
            char *grown = realloc(out, cap);
            if (!grown) return free(out), NULL;
            out = grown;
        }
        memcpy(out + n, t + i, j - i);
        n += j - i;
        if (big) memcpy(out + n, ".0", 2), n += 2, any = true;
        i = j;
    }
    if (!any) return free(out), NULL;
    *out_len = n;
    return out;
}

json_t *jsonfile_loadb(const char *text, size_t len, size_t flags, json_error_t *e)
{
    size_t wide_len = 0;
    char *wide = widen(text, len, &wide_len);
    json_t *root = json_loadb(wide ? wide : text, wide ? wide_len : len, flags, e);
    free(wide);
    return root;
}

/* The error jansson would give, for a file past JSONFILE_MAX_BYTES (no position: line -1, as
 * jansson's own errors without one). */
static json_t *too_large(const char *path, json_error_t *e)
{
    if (!e) return NULL;
    memset(e, 0, sizeof *e);
    e->line = e->column = -1;
    snprintf(e->source, sizeof e->source, "%s", path);
    snprintf(e->text, sizeof e->text, "the file is larger than %d MiB, the most ptrain reads of one JSON file",
             (int)(JSONFILE_MAX_BYTES >> 20));
    return NULL;
}

json_t *jsonfile_load(const char *path, size_t flags, json_error_t *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) return json_load_file(path, flags, e); /* jansson says why, as before */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && st.st_size > (off_t)JSONFILE_MAX_BYTES) {
        fclose(f);
        return too_large(path, e);
    }
    char *text = NULL;
    size_t len = 0, cap = 0, got;
    do { /* the size again as read: a file that grows, or one fstat cannot size */
        if (len == cap && len > JSONFILE_MAX_BYTES) break;
        if (len == cap) {
            char *grown = realloc(text, cap = cap ? 2 * cap : 65536);
            if (!grown) break;
            text = grown;
        }
        got = fread(text + len, 1, cap - len, f);
        len += got;
    } while (got > 0);
    bool bad = ferror(f) || len == cap;
    fclose(f);
    json_t *root = len > JSONFILE_MAX_BYTES ? too_large(path, e)
                   : bad                    ? json_load_file(path, flags, e)
                                            : jsonfile_loadb(text, len, flags, e);
    free(text);
    return root;
}
