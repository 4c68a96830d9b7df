/* log.c — rank-aware printing. Rank 0 alone prints progress and warnings so that N ranks do not
 * print N copies; errors are printed by the rank that has them, with its rank in the prefix. */
#include "ptrain/log.h"

#include <stdarg.h>
#include <string.h>

static int log_rank = 0, log_world = 1;

void log_init(int rank, int world)
{
    log_rank = rank;
    log_world = world;
}

void log_info(const char *fmt, ...)
{
    if (log_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stdout, fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void log_warn(const char *fmt, ...)
{
    if (log_rank != 0) return;
    va_list ap;
    va_start(ap, fmt);
    fputs("ptrain: warning: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

FILE *log_warn_stream(void) { return log_rank == 0 ? stderr : NULL; }

void log_error(pt_status status)
{
    char prefix[64];
    if (log_world > 1)
        snprintf(prefix, sizeof prefix, "ptrain: rank %d: %s: ", log_rank, err_status_name(status));
    else
        snprintf(prefix, sizeof prefix, "ptrain: %s: ", err_status_name(status));
    const char *msg = err_message();
    while (*msg) {
        const char *nl = strchr(msg, '\n');
        int len = nl ? (int)(nl - msg) : (int)strlen(msg);
        fprintf(stderr, "%s%.*s\n", prefix, len, msg);
        msg += len + (nl ? 1 : 0);
    }
    if (status == PT_ERR_INTERNAL) fprintf(stderr, "%s(raised at %s)\n", prefix, err_origin());
    fflush(stderr);
    err_mark_reported();
}
