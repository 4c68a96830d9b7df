/* shown.c — a value as a message echoes it (error.h): a path, a name, a config value, a string read
 * from a file. A message is one line per problem and has a reason after the value, so the value is
 * written on one line (control characters escaped) and, when long, shortened in the middle: its
 * start and its end, which name it best (the directory and the file), around "…(N bytes)…". */
#include "ptrain/error.h"

#include <stdio.h>
#include <string.h>

#define SHOWN_PART ((SHOWN_MAX - 24) / 2) /* bytes of the start and of the end a long value keeps */

/* The escaped form of byte c into out (at most 4 bytes and a NUL); returns its length. */
static size_t shown_escape(unsigned char c, char *out)
{
    if (c == '\n') return (size_t)snprintf(out, 5, "\\n");
    if (c == '\t') return (size_t)snprintf(out, 5, "\\t");
    if (c == '\r') return (size_t)snprintf(out, 5, "\\r");
    if (c < 0x20 || c == 0x7f) return (size_t)snprintf(out, 5, "\\x%02x", c);
    out[0] = (char)c, out[1] = '\0';
    return 1;
}

static bool continuation(unsigned char c) { return (c & 0xc0) == 0x80; }

/* How many bytes of p[0..len) fit in room escaped bytes, ending before a character's start. */
static size_t shown_head(const unsigned char *p, size_t len, size_t room)
{
    char esc[5];
    size_t used = 0, i = 0;
    while (i < len && used + shown_escape(p[i], esc) <= room) used += shown_escape(p[i++], esc);
    while (i > 0 && i < len && continuation(p[i])) i--;
    return i;
}

/* Where the last bytes of p[0..len) that fit in room escaped bytes start (at a character's start). */
static size_t shown_tail(const unsigned char *p, size_t len, size_t room)
{
    char esc[5];
    size_t used = 0, i = len;
    while (i > 0 && used + shown_escape(p[i - 1], esc) <= room) used += shown_escape(p[--i], esc);
    while (i < len && continuation(p[i])) i++;
    return i;
}

static void shown_append(pt_shown *out, size_t *at, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) *at += shown_escape(p[i], out->s + *at);
}

pt_shown shown_bytes(const void *data, size_t len)
{
    pt_shown out;
    const unsigned char *p = data ? data : (const unsigned char *)"";
    if (!data) len = 0;
    size_t at = 0, head = shown_head(p, len, SHOWN_MAX);
    if (head == len) {
        shown_append(&out, &at, p, len);
        out.s[at] = '\0';
        return out;
    }
    head = shown_head(p, len, SHOWN_PART);
    size_t tail = shown_tail(p, len, SHOWN_PART);
    shown_append(&out, &at, p, head);
    at += (size_t)snprintf(out.s + at, sizeof out.s - at, "…(%zu bytes)…", len);
    shown_append(&out, &at, p + tail, len - tail);
    out.s[at] = '\0';
    return out;
}

pt_shown shown_text(const char *text) { return shown_bytes(text, text ? strlen(text) : 0); }
