/* error.h — status codes and the one error message a failure carries up to the user.
 *
 * Every function that can fail returns pt_status. The function that detects the failure records
 * a message (and the file:line where it happened) with ERR(); callers on the way up may prepend
 * context with err_context(); main prints it once. Exit codes are the status values.
 *
 * A value from the user or from a file goes into a message through shown_text() (src/core/shown.c):
 * however long the value, the message keeps its reason. A message longer than ERR_MESSAGE_MAX
 * (it should not be: a report of many problems shows the first ones and counts the rest) is cut
 * after its last whole line, or between characters, and ends with "…". */
#ifndef PTRAIN_ERROR_H
#define PTRAIN_ERROR_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PT_OK = 0,
    PT_ERR_USER = 1,        /* bad input: config, model file, dataset, checkpoint */
    PT_ERR_USAGE = 2,       /* bad command line */
    PT_ERR_INTERNAL = 3,    /* a bug, or a library failing for a reason not the user's */
    PT_ERR_NOMEM = 4,       /* out of host or device memory */
    PT_ERR_UNSUPPORTED = 5, /* the operation is not available in this build or backend */
    PT_ERR_DIVERGED = 6,    /* training diverged: a non-finite loss, gradient norm or weight; nothing bad saved */
    PT_CHECKPOINTED = 75,   /* stopped by a signal after writing a checkpoint: run me again */
    PT_ERR_INTERRUPTED = 130,
} pt_status;

/* The most bytes of a message, its NUL included. */
#define ERR_MESSAGE_MAX 16384

pt_status err_set(pt_status status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void err_context(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *err_message(void);
const char *err_origin(void); /* "src/x.c:12" of the ERR() that set the message */
void err_clear(void);
/* Whether the current message was already printed (log_error marks it), so no one prints it twice. */
void err_mark_reported(void);
bool err_reported(void);
const char *err_status_name(pt_status status);

/* A value a message echoes (a path, a name, a value read from a config or a model file), made to
 * fit: one line (newline, tab, CR and other control characters escaped as \n, \t, \r, \xNN) and,
 * past SHOWN_MAX bytes so written, its start and its end around "…(N bytes)…", N its full length,
 * cut between UTF-8 characters: "/scratch/me/models/llama…(10485760 bytes)…/model.gguf". Use the
 * member s within the expression: ERR(PT_ERR_USER, "model %s not found", shown_text(name).s). */
#define SHOWN_MAX 160
typedef struct {
    char s[SHOWN_MAX + 32];
} pt_shown;
pt_shown shown_text(const char *text); /* NULL shows as "" */
pt_shown shown_bytes(const void *data, size_t len); /* len bytes, NULs among them (escaped) */

/* Record an error at this file:line and evaluate to its status. */
#define ERR(status, ...) err_set((status), __FILE__, __LINE__, __VA_ARGS__)
/* Propagate a failing status to the caller. */
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        pt_status try_status_ = (expr);                                                            \
        if (try_status_ != PT_OK) return try_status_;                                              \
    } while (0)
/* Fail with PT_ERR_NOMEM when an allocation returned NULL. */
#define TRY_ALLOC(ptr)                                                                             \
    do {                                                                                           \
        if ((ptr) == NULL) return ERR(PT_ERR_NOMEM, "out of memory");                              \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif
