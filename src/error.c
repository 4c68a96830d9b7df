/* error.c — the per-thread error message behind ERR(), err_context() and err_message(). */
#include "ptrain/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERR_CAP 4096

static _Thread_local char err_text[ERR_CAP];
static _Thread_local char err_where[256];
static _Thread_local bool err_printed;

pt_status err_set(pt_status status, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_text, sizeof err_text, fmt, ap);
    va_end(ap);
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
    /* shift the message right and put "prefix: " in front, truncating at the end */
    size_t plen = strlen(prefix) + 2, tlen = strlen(err_text);
    if (plen >= ERR_CAP) return;
    if (plen + tlen >= ERR_CAP) tlen = ERR_CAP - plen - 1;
    memmove(err_text + plen, err_text, tlen);
    err_text[plen + tlen] = '\0';
    memcpy(err_text, prefix, plen - 2);
    memcpy(err_text + plen - 2, ": ", 2);
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
