/* progress.h — what rank 0 shows while training: one line per logging step (step/total, loss,
 * learning rate, grad norm, tokens/s, elapsed, ETA), redrawn in place on a terminal, and the same
 * record appended as a JSON line to output_dir/metrics.jsonl. */
#ifndef PTRAIN_PROGRESS_H
#define PTRAIN_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "ptrain/error.h"

typedef struct {
    int fd; /* metrics.jsonl; -1 on ranks other than 0 */
    char path[4096];
    bool tty;
    double start;  /* seconds, monotonic */
    int64_t first_step; /* the step this process started from (a resumed run's checkpoint), for the ETA */
} progress;

typedef struct {
    int64_t step, total;
    double epoch, loss, lr, grad_norm, tokens_per_s; /* tokens with a target (that are learnt) */
    double input_tokens_per_s;                       /* all tokens of the batches */
    int ranks;
    double step_s;    /* compute seconds per step of the slowest rank (over the logging window) */
    int slowest_rank;
    double comm_s;    /* seconds per step in communication, mean over the ranks */
    int n_extra;      /* the method's own metrics (preference.h), written after the others */
    const char *const *extra_names;
    const double *extra;
} progress_record;

/* rank 0 opens (appends to) dir/metrics.jsonl; other ranks get a silent progress. First it drops
 * the records of steps after keep_until (the step a resumed run starts from, 0 for a fresh run:
 * the run logs them again) and a last record a kill or a full disk cut short. */
pt_status progress_open(progress *p, const char *dir, int rank, int64_t keep_until);
/* Print and append the record (rank 0); fails when metrics.jsonl cannot be written, leaving no
 * partial record. Values that are not finite are written as null. */
pt_status progress_log(progress *p, const progress_record *r);
/* The eval record: eval_loss and n more metrics (a method's own, e.g. GRPO's eval_reward). */
pt_status progress_eval(progress *p, int64_t step, double eval_loss, int n, const char *const *names,
                        const double *values);

/* One phase of the start-up: its seconds on the slowest rank, and that rank. */
typedef struct {
    const char *name; /* a word or two, also the JSON key (spaces as '_', "_s" appended) */
    double s;
    int rank;
} progress_phase;
/* The start-up report (rank 0): a line per phase and one for the time to the first step, and the
 * record {"step": step, "startup": {...}} in metrics.jsonl (step: where the run began). */
pt_status progress_startup(progress *p, int64_t step, const progress_phase *ph, int n, int ranks);
void progress_close(progress *p);
double progress_now(void);

#endif
