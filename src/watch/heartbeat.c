/* heartbeat.c — rank 0's heartbeat.json (see heartbeat.h): written whole by fw_write_file, first at
 * once, then from a thread every interval, last with the final state; and read back by status. The
 * thread shares only the info under a mutex; it blocks the signals training handles, so they reach
 * the training thread. */
#include "ptrain/heartbeat.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/filewrite.h"
#include "ptrain/log.h"
#include "ptrain/safefs.h"
#include "ptrain/util.h"

const char *const heartbeat_state_names[HB_STATES] = {"starting", "running", "finished", "stopped", "failed"};

struct heartbeat {
    pthread_t thread;
    bool threaded, stop, warned;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char path[4200];
    heartbeat_info info;
};

double heartbeat_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static pt_status write_info(const char *path, const heartbeat_info *i)
{
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s, s:s, s:I, s:I, s:f, s:f, s:i}", "state",
                          heartbeat_state_names[i->state], "run_name", i->run_name, "host", i->host, "pid",
                          (json_int_t)i->pid, "slurm_job_id", i->slurm_job, "config", i->config, "logging_dir",
                          i->logging_dir, "step", (json_int_t)i->step, "total_steps", (json_int_t)i->total, "started",
                          i->started, "updated", i->updated, "interval_s", i->interval_s);
    if (o) json_object_set_new(o, "resume_from_checkpoint", json_string(i->resume));
    if (o) json_object_set_new(o, "overwrite_output_dir", json_boolean(i->overwrite));
    if (o && i->state > HB_RUNNING) json_object_set_new(o, "exit_status", json_integer(i->exit_status));
    char *text = o ? json_dumps(o, JSON_INDENT(2) | JSON_REAL_PRECISION(12)) : NULL;
    json_decref(o);
    if (!text) return ERR(PT_ERR_NOMEM, "out of memory writing %s", shown_text(path).s);
    strbuf sb = {0};
    sb_printf(&sb, "%s\n", text);
    free(text);
    pt_status st = fw_write_file(path, sb.data, sb.len);
    sb_free(&sb);
    return st;
}

/* One write of what the info says now (called without the mutex). */
static void beat_once(heartbeat *hb)
{
    pthread_mutex_lock(&hb->mu);
    hb->info.updated = heartbeat_now();
    heartbeat_info now = hb->info;
    pthread_mutex_unlock(&hb->mu);
    if (write_info(hb->path, &now) != PT_OK && !hb->warned) {
        hb->warned = true; /* only this thread writes it */
        log_warn("%s; `ptrain status` may call this run not running", err_message());
    }
}

static void *beat_loop(void *arg)
{
    heartbeat *hb = arg;
    pthread_mutex_lock(&hb->mu);
    while (!hb->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += hb->info.interval_s;
        int rc = 0;
        while (!hb->stop && rc != ETIMEDOUT) rc = pthread_cond_timedwait(&hb->cv, &hb->mu, &until);
        if (hb->stop) break;
        pthread_mutex_unlock(&hb->mu);
        beat_once(hb);
        pthread_mutex_lock(&hb->mu);
    }
    pthread_mutex_unlock(&hb->mu);
    return NULL;
}

/* This process: host, PID, Slurm job, start time, interval. */
static void fill_process(heartbeat_info *i)
{
    if (gethostname(i->host, sizeof i->host) != 0) snprintf(i->host, sizeof i->host, "?");
    i->host[sizeof i->host - 1] = '\0';
    i->pid = (long)getpid();
    snprintf(i->slurm_job, sizeof i->slurm_job, "%s", getenv("SLURM_JOB_ID") ? getenv("SLURM_JOB_ID") : "");
    i->started = i->updated = heartbeat_now();
    const char *test = getenv("PTRAIN_TEST_HEARTBEAT_S");
    i->interval_s = test && atoi(test) > 0 ? atoi(test) : HEARTBEAT_INTERVAL_S;
}

pt_status heartbeat_start(const char *output_dir, const heartbeat_info *info, heartbeat **out)
{
    *out = NULL;
    heartbeat *hb = calloc(1, sizeof *hb);
    TRY_ALLOC(hb);
    hb->info = *info;
    fill_process(&hb->info);
    snprintf(hb->path, sizeof hb->path, "%s/%s", output_dir, HEARTBEAT_NAME);
    pt_status st = write_info(hb->path, &hb->info);
    if (st != PT_OK) {
        free(hb);
        return st;
    }
    pthread_mutex_init(&hb->mu, NULL);
    pthread_cond_init(&hb->cv, NULL);
    sigset_t all, saved; /* the thread starts with every signal blocked */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    hb->threaded = pthread_create(&hb->thread, NULL, beat_loop, hb) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (!hb->threaded)
        log_warn("cannot start the heartbeat thread; %s is written at logging steps only", shown_text(hb->path).s);
    *out = hb;
    return PT_OK;
}

void heartbeat_set(heartbeat *hb, heartbeat_state state, int64_t step, int64_t total)
{
    if (!hb) return;
    pthread_mutex_lock(&hb->mu);
    hb->info.state = state, hb->info.step = step, hb->info.total = total;
    bool due = !hb->threaded && heartbeat_now() - hb->info.updated >= hb->info.interval_s;
    pthread_mutex_unlock(&hb->mu);
    if (due) beat_once(hb); /* no thread: the training thread beats when it logs */
}

void heartbeat_set_logging_dir(heartbeat *hb, const char *dir)
{
    if (!hb) return;
    pthread_mutex_lock(&hb->mu);
    snprintf(hb->info.logging_dir, sizeof hb->info.logging_dir, "%s", dir);
    pthread_mutex_unlock(&hb->mu);
}

void heartbeat_stop(heartbeat *hb, heartbeat_state state, int exit_status)
{
    if (!hb) return;
    pthread_mutex_lock(&hb->mu);
    hb->stop = true;
    hb->info.state = state, hb->info.exit_status = exit_status;
    pthread_cond_signal(&hb->cv);
    pthread_mutex_unlock(&hb->mu);
    if (hb->threaded) pthread_join(hb->thread, NULL);
    beat_once(hb);
    pthread_cond_destroy(&hb->cv);
    pthread_mutex_destroy(&hb->mu);
    free(hb);
}

void heartbeat_continue_text(const char *resume, bool overwrite, const char *config, char *out, size_t len)
{
    pt_shown cfg = shown_text(config), named = shown_text(resume);
    if (!strcmp(resume, "true")) snprintf(out, len, "run the same command again to continue");
    else if (!*resume)
        snprintf(out, len, "run the same command again to continue when %s says resume_from_checkpoint: true (set "
                 "it first otherwise)", cfg.s);
    else if (!strcmp(resume, "false") && overwrite)
        snprintf(out, len, "to continue, set resume_from_checkpoint: true in %s in place of overwrite_output_dir: "
                 "true (with which the same command removes these checkpoints and starts over), then run the "
                 "command again", cfg.s);
    else if (!strcmp(resume, "false"))
        snprintf(out, len, "to continue, set resume_from_checkpoint: true in %s, then run the same command again "
                 "(as it is, the config does not resume: the command would refuse to start over on top of these "
                 "checkpoints)", cfg.s);
    else
        snprintf(out, len, "to continue from the newest checkpoint, set resume_from_checkpoint: true in %s, then run "
                 "the same command again (as it is, the config names %s: the command would go back to that one)",
                 cfg.s, named.s);
}

/* ---- reading ---- */

static void copy_text(char *out, size_t len, json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    snprintf(out, len, "%s", v ? v : "");
}

static int64_t integer(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? (int64_t)json_number_value(v) : 0;
}

static pt_status parse_info(const char *path, json_t *o, heartbeat_info *i)
{
    const char *state = json_string_value(json_object_get(o, "state"));
    int k = 0;
    while (k < HB_STATES && (!state || strcmp(state, heartbeat_state_names[k]))) k++;
    if (k == HB_STATES)
        return ERR(PT_ERR_USER, "%s: \"state\" is not one of starting, running, finished, stopped, failed; the file "
                   "is not ptrain's heartbeat (remove it: the next run writes a new one)", shown_text(path).s);
    i->state = (heartbeat_state)k;
    copy_text(i->run_name, sizeof i->run_name, o, "run_name");
    copy_text(i->host, sizeof i->host, o, "host");
    copy_text(i->slurm_job, sizeof i->slurm_job, o, "slurm_job_id");
    copy_text(i->config, sizeof i->config, o, "config");
    copy_text(i->logging_dir, sizeof i->logging_dir, o, "logging_dir");
    copy_text(i->resume, sizeof i->resume, o, "resume_from_checkpoint");
    i->overwrite = json_is_true(json_object_get(o, "overwrite_output_dir"));
    i->pid = (long)integer(o, "pid");
    i->exit_status = (int)integer(o, "exit_status");
    i->step = integer(o, "step"), i->total = integer(o, "total_steps");
    i->started = json_number_value(json_object_get(o, "started"));
    i->updated = json_number_value(json_object_get(o, "updated"));
    i->interval_s = (int)integer(o, "interval_s");
    return PT_OK;
}

pt_status heartbeat_read(const char *output_dir, heartbeat_info *info, bool *found)
{
    memset(info, 0, sizeof *info);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", output_dir, HEARTBEAT_NAME);
    *found = access(path, F_OK) == 0;
    if (!*found) return PT_OK;
    FILE *f;
    TRY(safefs_fopen_read(path, &f));
    struct stat sb;
    bool big = fstat(fileno(f), &sb) == 0 && sb.st_size > (1 << 20);
    json_error_t e;
    json_t *o = big ? NULL : json_loadf(f, 0, &e);
    fclose(f);
    pt_status st = PT_OK;
    if (big) st = ERR(PT_ERR_USER, "%s: larger than 1 MiB; it is not ptrain's heartbeat (remove it)",
                      shown_text(path).s);
    else if (!json_is_object(o))
        st = ERR(PT_ERR_USER, "%s:%d: %s; remove it (the next run writes a new one)", shown_text(path).s,
                 o ? 1 : e.line, o ? "not a JSON object" : shown_text(e.text).s);
    else st = parse_info(path, o, info);
    json_decref(o);
    return st;
}

bool heartbeat_stale(const heartbeat_info *info, double now)
{
    double limit = info->interval_s * 4 > HEARTBEAT_STALE_S ? info->interval_s * 4 : HEARTBEAT_STALE_S;
    return info->state <= HB_RUNNING && now - info->updated > limit;
}
