/* error.c — the per-thread error message behind ERR(), err_context() and err_message(). */
#include "ptrain/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char err_text[ERR_MESSAGE_MAX];
static _Thread_local char err_where[256];
static _Thread_local bool err_printed;

/* err_text, whose whole form took len bytes, cut to fit when it did not: after its last whole line
 * when it has one, else between characters; "…" says where. */
static void err_fit(size_t len)
{
    static const char mark[] = "…";
    if (len < sizeof err_text) return;
    size_t keep = sizeof err_text - sizeof mark - 1; /* room for "\n…" */
    char *nl = memrchr(err_text, '\n', keep);
    if (nl) {
        keep = (size_t)(nl - err_text) + 1;
    } else {
        while (keep > 0 && ((unsigned char)err_text[keep] & 0xc0) == 0x80) keep--;
    }
    memcpy(err_text + keep, mark, sizeof mark);
}

pt_status err_set(pt_status status, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(err_text, sizeof err_text, fmt, ap);
    va_end(ap);
    if (n > 0) err_fit((size_t)n);
    snprintf(err_where, sizeof err_where, "%s:%d", file, line);
    err_printed = false;
    return status;
}

void err_context(const char *fmt, ...)
{
    char prefix[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    /* shift the message right and put "prefix: " in front; what no longer fits is cut as err_set cuts */
    size_t plen = strlen(prefix) + 2, tlen = strlen(err_text);
    if (plen >= sizeof err_text) return;
    size_t moved = plen + tlen >= sizeof err_text ? sizeof err_text - plen - 1 : tlen;
    memmove(err_text + plen, err_text, moved);
    err_text[plen + moved] = '\0';
    memcpy(err_text, prefix, plen - 2);
    memcpy(err_text + plen - 2, ": ", 2);
    err_fit(plen + tlen);
}

const char *err_message(void) { return err_text[0] ? err_text : "unknown error"; }

const char *err_origin(void) { return err_where; }

void err_mark_reported(void) { err_printed = true; }

bool err_reported(void) { return err_printed; }

void err_clear(void)
{
    err_printed = false;
    err_text[0] = '\0';
    err_where[0] = '\0';
}

const char *err_status_name(pt_status status)
{
    switch (status) {
    case PT_OK: return "ok";
    case PT_ERR_USER: return "error";
    case PT_ERR_USAGE: return "usage error";
    case PT_ERR_INTERNAL: return "internal error";
    case PT_ERR_NOMEM: return "out of memory";
    case PT_ERR_UNSUPPORTED: return "unsupported";
    case PT_ERR_DIVERGED: return "diverged";
    case PT_CHECKPOINTED: return "checkpointed";
    case PT_ERR_INTERRUPTED: return "interrupted";
    }
    return "error";
}
