/* runlog.h — a run's metrics.jsonl read back, for `ptrain plot`, `ptrain status` and training.png:
 * the series of each logged value against the step, the last training and evaluation records, and
 * the steps where a resumed run began (its start-up record: {"step": N, "startup": {...}} with N
 * above 0). Read while a job appends to it, from any node: a last line without its newline is a
 * record still being written and is left out, and so is any line that is not a JSON object. */
#ifndef PTRAIN_RUNLOG_H
#define PTRAIN_RUNLOG_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/error.h"

typedef struct {
    int64_t step;
    double value;
} runlog_point;

typedef struct {
    runlog_point *p;
    int n, cap;
} runlog_series;

/* The series, by the metrics.jsonl key each comes from (runlog_key). */
enum { RUNLOG_LOSS, RUNLOG_EVAL_LOSS, RUNLOG_LR, RUNLOG_GRAD_NORM, RUNLOG_TOKENS, RUNLOG_SERIES };
extern const char *const runlog_key[RUNLOG_SERIES];

typedef struct {
    runlog_series s[RUNLOG_SERIES]; /* finite values only (null, a non-finite value, is left out) */
    int64_t *resumes;               /* steps where a resumed run began, in file order */
    int n_resumes;
    int64_t last_step; /* the largest step of any record (0: none) */
    /* the last training record */
    bool has_train;
    int64_t train_step;
    double loss, epoch, tokens_per_s, elapsed_s, eta_s; /* NAN where the record had null */
    /* the last evaluation */
    bool has_eval;
    int64_t eval_step;
    double eval_loss;
} runlog;

/* Read dir/metrics.jsonl; *found false (and an empty log) when there is none. */
pt_status runlog_read(const char *dir, runlog *log, bool *found);
void runlog_free(runlog *log);

#endif
