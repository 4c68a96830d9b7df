/* log.h — who prints what: rank 0 prints progress and warnings; any rank prints its own error,
 * prefixed with its rank when there are several. */
#ifndef PTRAIN_LOG_H
#define PTRAIN_LOG_H

#include <stdio.h>

#include "ptrain/error.h"

void log_init(int rank, int world);
/* Progress and results: stdout, rank 0 only. */
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Warnings: stderr, rank 0 only. */
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Where warnings go on this rank: stderr on rank 0, NULL elsewhere. */
FILE *log_warn_stream(void);
/* Print this rank's current error (err_message) for status, one "ptrain: ..." line per line. */
void log_error(pt_status status);

#endif
