/* status_print.c — `ptrain status` shown: a few lines for a person (what the run is doing, how far
 * it is, its checkpoints, resumes and uploads), or with --json one object for a script, the same
 * facts under stable names (null where a value is not known). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "watch_internal.h"

static void clock_text(double s, char *out, size_t len)
{
    if (!isfinite(s) || s < 0) {
        snprintf(out, len, "?");
        return;
    }
    long t = (long)(s + 0.5);
    snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* The state line: what the run is doing or how it ended. */
static void print_state(const run_status *s, FILE *out)
{
    const heartbeat_info *h = &s->hb;
    char ago[32], job[96] = "", how[2600];
    status_continue_text(s, how, sizeof how);
    clock_text(s->now - h->updated, ago, sizeof ago);
    if (h->slurm_job[0]) snprintf(job, sizeof job, ", Slurm job %s", h->slurm_job);
    fprintf(out, "%s: ", s->dir);
    if (!strcmp(s->state, "running") || !strcmp(s->state, "starting"))
        fprintf(out, "%s on %s (PID %ld%s), heartbeat %s ago\n", !strcmp(s->state, "running") ? "running" : "starting "
                "(loading the model and data)", h->host, h->pid, job, ago);
    else if (!strcmp(s->state, "finished")) fprintf(out, "finished on %s%s, %s ago\n", h->host, job, ago);
    else if (!strcmp(s->state, "stopped"))
        fprintf(out, "stopped by a signal after a checkpoint (exit status %d), %s ago; %s\n", h->exit_status, ago, how);
    else if (!strcmp(s->state, "failed"))
        fprintf(out, "failed (exit status %d, %s) on %s%s, %s ago\n", h->exit_status,
                err_status_name((pt_status)h->exit_status), h->host, job, ago);
    else if (!strcmp(s->state, "not_running"))
        fprintf(out, "not running: %s; %s\n", s->why, how);
    else fprintf(out, "state unknown: %s\n", s->why);
}

static void print_progress(const run_status *s, FILE *out)
{
    const runlog *l = &s->log;
    if (s->has_hb && s->hb.run_name[0]) fprintf(out, "run         %s (config %s)\n", s->hb.run_name, s->hb.config);
    fprintf(out, "step        %lld", (long long)s->step);
    if (s->total > 0) fprintf(out, " of %lld (%.0f%%)", (long long)s->total, 100.0 * (double)s->step / (double)s->total);
    if (l->has_train && isfinite(l->epoch)) fprintf(out, ", epoch %.2f", l->epoch);
    fprintf(out, "\n");
    if (l->has_train) fprintf(out, "loss        %.4f at step %lld", l->loss, (long long)l->train_step);
    if (l->has_eval) fprintf(out, "%seval_loss %.4f at step %lld", l->has_train ? ", " : "loss        ", l->eval_loss,
                             (long long)l->eval_step);
    if (l->has_train || l->has_eval) fprintf(out, "\n");
    if (!l->has_train) return;
    char elapsed[32], eta[32];
    clock_text(l->elapsed_s, elapsed, sizeof elapsed);
    clock_text(l->eta_s, eta, sizeof eta);
    fprintf(out, "speed       %.0f tokens/s, elapsed %s, eta %s (as logged at step %lld)\n", l->tokens_per_s, elapsed,
            eta, (long long)l->train_step);
}

static void print_checkpoints(const run_status *s, FILE *out)
{
    const watch_ckpts *c = &s->ck;
    if (!c->has_newest) fprintf(out, "checkpoint  none complete yet");
    else fprintf(out, "checkpoint  %s (step %lld)", c->newest_path, (long long)c->newest_step);
    if (c->skipped) fprintf(out, "; %d newer incomplete or damaged", c->skipped);
    fprintf(out, "\n");
    if (c->has_best)
        fprintf(out, "best        %s (%s %.4f at step %lld)\n", c->best_path[0] ? c->best_path : "(its file was removed)",
                c->metric, c->best_value, (long long)c->best_step);
}

static void print_rest(const run_status *s, FILE *out)
{
    const runlog *l = &s->log;
    if (l->n_resumes) {
        fprintf(out, "resumes     %d (at step", l->n_resumes);
        for (int i = 0; i < l->n_resumes; i++) fprintf(out, "%s %lld", i ? "," : l->n_resumes > 1 ? "s" : "",
                                                       (long long)l->resumes[i]);
        fprintf(out, ")\n");
    }
    if (s->n_jobs) {
        fprintf(out, "hub         %d upload%s waiting:", s->n_jobs, s->n_jobs > 1 ? "s" : "");
        for (int i = 0; i < s->n_jobs; i++) fprintf(out, "%s %s: %s", i ? ";" : "", s->jobs[i].repo_id, s->jobs[i].what);
        fprintf(out, " (the run sends them, or `ptrain push %s`)\n", s->dir);
    }
    if (s->has_hb && s->hb.logging_dir[0]) fprintf(out, "tensorboard tensorboard --logdir %s\n", s->hb.logging_dir);
}

void status_print_text(const run_status *s, FILE *out)
{
    print_state(s, out);
    print_progress(s, out);
    print_checkpoints(s, out);
    print_rest(s, out);
}

/* ---- --json ---- */

static json_t *number_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *heartbeat_json(const run_status *s)
{
    const heartbeat_info *h = &s->hb;
    if (!s->has_hb) return json_null();
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s?, s:b, s:s, s:f, s:f, s:f}", "run_name", h->run_name, "host",
                     h->host, "pid", (json_int_t)h->pid, "slurm_job_id", h->slurm_job, "config", h->config,
                     "resume_from_checkpoint", h->resume[0] ? h->resume : NULL, "overwrite_output_dir", h->overwrite,
                     "logging_dir", h->logging_dir, "started", h->started, "updated", h->updated, "age_s",
                     s->now - h->updated);
}

void status_continue_text(const run_status *s, char *out, size_t len)
{
    if (!s->ck.has_newest) snprintf(out, len, "no complete checkpoint yet: the same command starts it again");
    else heartbeat_continue_text(s->hb.resume, s->hb.overwrite, s->hb.config, out, len);
}

static json_t *checkpoints_json(const run_status *s, json_t **best)
{
    const watch_ckpts *c = &s->ck;
    *best = c->has_best ? json_pack("{s:I, s:s, s:o, s:o}", "step", (json_int_t)c->best_step, "metric", c->metric,
                                    "value", number_or_null(c->best_value),
                                    "path", c->best_path[0] ? json_string(c->best_path) : json_null())
                        : json_null();
    return c->has_newest ? json_pack("{s:I, s:s}", "step", (json_int_t)c->newest_step, "path", c->newest_path)
                         : json_null();
}

static json_t *lists_json(const run_status *s, json_t **jobs)
{
    json_t *resumes = json_array();
    for (int i = 0; i < s->log.n_resumes; i++) json_array_append_new(resumes, json_integer(s->log.resumes[i]));
    *jobs = json_array();
    for (int i = 0; i < s->n_jobs; i++)
        json_array_append_new(*jobs, json_pack("{s:s, s:s, s:s}", "repo_id", s->jobs[i].repo_id, "what",
                                               s->jobs[i].what, "message", s->jobs[i].message));
    return resumes;
}

pt_status status_print_json(const run_status *s, FILE *out)
{
    const runlog *l = &s->log;
    json_t *best, *jobs, *ck = checkpoints_json(s, &best), *resumes = lists_json(s, &jobs);
    char how[2600] = "";
    if (!strcmp(s->state, "stopped") || !strcmp(s->state, "not_running")) status_continue_text(s, how, sizeof how);
    json_t *o = json_pack(
        "{s:s, s:s, s:s?, s:s?, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:o}",
        "output_dir", s->dir, "state", s->state, "why", s->why[0] ? s->why : NULL, "to_continue", how[0] ? how : NULL,
        "heartbeat", heartbeat_json(s), "step",
        (json_int_t)s->step, "total_steps", s->total > 0 ? json_integer(s->total) : json_null(), "epoch",
        number_or_null(l->epoch), "loss", number_or_null(l->loss), "loss_step",
        l->has_train ? json_integer(l->train_step) : json_null(), "eval_loss", number_or_null(l->eval_loss),
        "eval_step", l->has_eval ? json_integer(l->eval_step) : json_null(), "tokens_per_s",
        number_or_null(l->tokens_per_s), "elapsed_s", number_or_null(l->elapsed_s), "eta_s", number_or_null(l->eta_s),
        "checkpoint", ck, "best_checkpoint", best, "resumes", resumes, "incomplete_checkpoints", s->ck.skipped,
        "hub_waiting", jobs);
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(o);
    if (!text) return ERR(PT_ERR_NOMEM, "out of memory");
    fprintf(out, "%s\n", text);
    free(text);
    return PT_OK;
}
