/* runlog.c — metrics.jsonl read back (see runlog.h): one JSON object a line, parsed with jansson;
 * training records carry "loss", evaluations "eval_loss", a run's start-up record "startup". */
#include "ptrain/runlog.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/safefs.h"

const char *const runlog_key[RUNLOG_SERIES] = {"loss", "eval_loss", "learning_rate", "grad_norm", "tokens_per_s"};

static pt_status series_add(runlog_series *s, int64_t step, double value)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        runlog_point *grown = realloc(s->p, sizeof *grown * (size_t)cap);
        TRY_ALLOC(grown);
        s->p = grown, s->cap = cap;
    }
    s->p[s->n++] = (runlog_point){step, value};
    return PT_OK;
}

/* A member's number, NAN when missing or null. */
static double number(json_t *rec, const char *key)
{
    json_t *v = json_object_get(rec, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static pt_status add_resume(runlog *log, int64_t step)
{
    int64_t *grown = realloc(log->resumes, sizeof *grown * (size_t)(log->n_resumes + 1));
    TRY_ALLOC(grown);
    log->resumes = grown;
    log->resumes[log->n_resumes++] = step;
    return PT_OK;
}

/* The last training and evaluation records, as status shows them. */
static void note_last(runlog *log, json_t *rec, int64_t step)
{
    if (json_object_get(rec, "loss")) {
        log->has_train = true, log->train_step = step;
        log->loss = number(rec, "loss"), log->epoch = number(rec, "epoch");
        log->tokens_per_s = number(rec, "tokens_per_s");
        log->elapsed_s = number(rec, "elapsed_s"), log->eta_s = number(rec, "eta_s");
    }
    if (json_object_get(rec, "eval_loss"))
        log->has_eval = true, log->eval_step = step, log->eval_loss = number(rec, "eval_loss");
}

static pt_status add_record(runlog *log, json_t *rec)
{
    json_t *s = json_object_get(rec, "step");
    if (!json_is_integer(s)) return PT_OK; /* not one of ptrain's records */
    int64_t step = (int64_t)json_integer_value(s);
    if (step > log->last_step) log->last_step = step;
    if (json_object_get(rec, "startup")) return step > 0 ? add_resume(log, step) : PT_OK;
    note_last(log, rec, step);
    for (int i = 0; i < RUNLOG_SERIES; i++) {
        double v = number(rec, runlog_key[i]);
        if (isfinite(v)) TRY(series_add(&log->s[i], step, v));
    }
    return PT_OK;
}

static pt_status read_lines(const char *path, FILE *f, runlog *log)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    pt_status st = PT_OK;
    while (st == PT_OK && (len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n') break; /* a record still being written */
        json_t *rec = json_loadb(line, (size_t)len, 0, NULL);
        if (json_is_object(rec)) st = add_record(log, rec);
        json_decref(rec);
    }
    free(line);
    if (st == PT_OK && ferror(f)) st = ERR(PT_ERR_USER, "cannot read %s: %s", shown_text(path).s, strerror(errno));
    return st;
}

pt_status runlog_read(const char *dir, runlog *log, bool *found)
{
    memset(log, 0, sizeof *log);
    log->loss = log->epoch = log->tokens_per_s = log->elapsed_s = log->eta_s = log->eval_loss = NAN;
    char path[4200];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    *found = access(path, F_OK) == 0;
    if (!*found) return PT_OK;
    FILE *f;
    TRY(safefs_fopen_read(path, &f));
    pt_status st = read_lines(path, f, log);
    fclose(f);
    if (st != PT_OK) runlog_free(log);
    return st;
}

void runlog_free(runlog *log)
{
    for (int i = 0; i < RUNLOG_SERIES; i++) free(log->s[i].p);
    free(log->resumes);
    memset(log, 0, sizeof *log);
}
