/* train_watch.c — what rank 0 leaves for those watching a run besides the progress line and
 * metrics.jsonl: the heartbeat `ptrain status` reads, TensorBoard's event files (report_to:
 * tensorboard) and output_dir/training.png (see trainer.h for when each is written). The other
 * ranks do nothing here. A run that continues another (a resume, or the same command run again
 * after a kill) keeps its name, so its TensorBoard curves continue in the same directory; the
 * START it writes there at the first step it logs makes TensorBoard drop the steps the run before
 * it logged past its checkpoint, as metrics.jsonl drops them. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/heartbeat.h"
#include "ptrain/log.h"
#include "ptrain/plot.h"
#include "ptrain/runlog.h"
#include "ptrain/tfevents.h"
#include "trainer.h"

/* run_name, else the name the heartbeat of an earlier run here kept, else "Mar05_14-02-11_node17"
 * (the start time and host, as transformers names a run's directory). */
static void resolve_run_name(trainer *t)
{
    if (t->cfg->run_name) {
        snprintf(t->run_name, sizeof t->run_name, "%s", t->cfg->run_name);
        return;
    }
    heartbeat_info before;
    bool found = false;
    if (heartbeat_read(t->cfg->output_dir, &before, &found) != PT_OK)
        log_warn("%s; the run gets a new name", err_message()), err_clear();
    if (found && before.run_name[0] && !strchr(before.run_name, '/')) {
        snprintf(t->run_name, sizeof t->run_name, "%s", before.run_name);
        return;
    }
    char when[64], host[128];
    time_t now = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%b%d_%H-%M-%S", localtime_r(&now, &tm));
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    snprintf(t->run_name, sizeof t->run_name, "%s_%s", when, host);
}

/* resume_from_checkpoint as the heartbeat keeps it: "true", "false" or the path it names. */
static const char *resume_text(const pt_config *c)
{
    const pt_resume *r = &c->resume_from_checkpoint;
    return r->path ? r->path : r->on ? "true" : "false";
}

void trainer_continue_text(const trainer *t, char *out, size_t len)
{
    heartbeat_continue_text(resume_text(t->cfg), t->cfg->overwrite_output_dir, t->cfg->path, out, len);
}

pt_status trainer_watch_start(trainer *t)
{
    t->tb.fd = -1;
    if (t->d->rank != 0) return PT_OK;
    resolve_run_name(t);
    heartbeat_info info = {.state = HB_STARTING, .overwrite = t->cfg->overwrite_output_dir};
    snprintf(info.run_name, sizeof info.run_name, "%s", t->run_name);
    snprintf(info.config, sizeof info.config, "%s", t->cfg->path);
    snprintf(info.resume, sizeof info.resume, "%s", resume_text(t->cfg));
    return heartbeat_start(t->cfg->output_dir, &info, &t->hb);
}

/* logging_dir, else output_dir/runs/RUN_NAME. */
static void logging_dir(const trainer *t, char *out, size_t len)
{
    if (t->cfg->logging_dir) snprintf(out, len, "%s", t->cfg->logging_dir);
    else snprintf(out, len, "%s/runs/%s", t->cfg->output_dir, t->run_name);
}

pt_status trainer_watch_open(trainer *t)
{
    if (t->d->rank != 0) return PT_OK;
    heartbeat_set(t->hb, HB_RUNNING, t->first_step, t->total);
    if (!config_report_tensorboard(t->cfg)) return PT_OK;
    char dir[4200];
    logging_dir(t, dir, sizeof dir);
    TRY(tfevents_open(&t->tb, dir));
    TRY(tfevents_start(&t->tb, t->first_step + 1));
    heartbeat_set_logging_dir(t->hb, dir);
    log_info("tensorboard %s (run %s): tensorboard --logdir %s\n", shown_text(t->tb.path).s, shown_text(t->run_name).s,
             dir); /* a command to paste: the whole path */
    return PT_OK;
}

void trainer_watch_step(trainer *t, int64_t steps_done)
{
    if (t->hb) heartbeat_set(t->hb, HB_RUNNING, steps_done, t->total);
}

/* This process's resident memory, MiB (from /proc; NAN where there is none). */
static double host_rss_mib(void)
{
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    bool got = f && fscanf(f, "%ld %ld", &pages, &resident) == 2;
    if (f) fclose(f);
    return got ? (double)resident * (double)sysconf(_SC_PAGESIZE) / 1048576.0 : NAN;
}

pt_status trainer_watch_log(trainer *t, const progress_record *r)
{
    if (t->tb.fd < 0) return PT_OK;
    tfevents_value v[7] = {{"train/loss", r->loss},
                           {"train/learning_rate", r->lr},
                           {"train/grad_norm", r->grad_norm},
                           {"train/epoch", r->epoch},
                           {"train/tokens_per_second", r->tokens_per_s},
                           {"memory/host_rss_mib", host_rss_mib()},
                           {"memory/device_peak_mib", (double)memplan_peak_bytes(t->be) / 1048576.0}};
    int n = t->be->device >= 0 ? 7 : 6; /* a device's peak on a GPU only */
    return tfevents_scalars(&t->tb, r->step, v, n);
}

pt_status trainer_watch_eval(trainer *t, int64_t step, double eval_loss)
{
    if (t->tb.fd < 0) return PT_OK;
    tfevents_value v = {"eval/loss", eval_loss};
    return tfevents_scalars(&t->tb, step, &v, 1);
}

/* output_dir/training.png from metrics.jsonl, the best checkpoint marked; a failure only warns. */
static void draw_png(trainer *t)
{
    runlog log;
    bool found;
    char path[4200], title[600];
    snprintf(path, sizeof path, "%s/training.png", t->cfg->output_dir);
    snprintf(title, sizeof title, "%s (%s)", t->cfg->output_dir, t->run_name);
    pt_status st = runlog_read(t->cfg->output_dir, &log, &found);
    plot_marks m = {.title = title, .has_best = t->run.has_best, .best_step = t->run.best_step,
                    .metric = config_metric_choices[t->run.metric_for_best_model], .best_value = t->run.best_metric};
    if (st == PT_OK && found) st = plot_write(&log, &m, path);
    if (st == PT_OK) runlog_free(&log);
    if (st != PT_OK) log_warn("could not draw %s: %s", shown_text(path).s, err_message()), err_clear();
}

void trainer_watch_saved(trainer *t, int64_t step)
{
    (void)step;
    if (t->d->rank != 0) return;
    if (t->tb.fd >= 0 && tfevents_sync(&t->tb) != PT_OK) log_warn("%s", err_message()), err_clear();
    draw_png(t);
}

void trainer_watch_end(trainer *t, pt_status st)
{
    if (t->d->rank != 0 || !t->hb) return;
    draw_png(t);
    tfevents_close(&t->tb);
    heartbeat_state state = st == PT_OK ? HB_FINISHED : st == PT_CHECKPOINTED ? HB_STOPPED : HB_FAILED;
    heartbeat_stop(t->hb, state, (int)st);
    t->hb = NULL;
}
