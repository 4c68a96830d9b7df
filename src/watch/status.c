/* status.c — `ptrain status OUTPUT_DIR [--json]`: what a run has done and whether it is alive,
 * from what it leaves in its output_dir (heartbeat.json, metrics.jsonl, its checkpoints, the Hub
 * jobs under hub/), read without a lock so it works on a job running now, on another node. A
 * heartbeat that says running is believed while it is fresh; a stale one, or one of a process on
 * this host that no longer exists, is a job that is gone. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrain/heartbeat.h"
#include "ptrain/hub.h"
#include "ptrain/runlog.h"
#include "ptrain/watch.h"
#include "watch_internal.h"

static const char status_usage[] =
    "Usage: ptrain status OUTPUT_DIR [--json]\n"
    "What a run has done and whether it is running: step of total, last loss and eval loss,\n"
    "tokens/s, elapsed and ETA, the newest complete checkpoint and the best one, resumes so far,\n"
    "uploads still waiting for the Hub. Reads OUTPUT_DIR only; works while the run is going, from\n"
    "any node that sees OUTPUT_DIR. Exit status 0 whatever the run's state; 1 when OUTPUT_DIR holds\n"
    "no run.\n";

/* Whether process pid exists on this host (signal 0 checks without sending). */
static bool process_alive(long pid) { return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM); }

static bool on_this_host(const char *host)
{
    char me[256];
    if (gethostname(me, sizeof me) != 0) return false;
    me[sizeof me - 1] = '\0';
    return !strcmp(me, host);
}

/* The run's state from its heartbeat: a running one that is stale or whose process is gone is not. */
static void decide_state(run_status *s)
{
    const heartbeat_info *h = &s->hb;
    if (!s->has_hb) {
        s->state = "unknown";
        snprintf(s->why, sizeof s->why, "no %s in it (a run of a ptrain without heartbeats, or one that has not "
                 "started yet)", HEARTBEAT_NAME);
        return;
    }
    s->state = heartbeat_state_names[h->state];
    if (h->state > HB_RUNNING) return;
    if (heartbeat_stale(h, s->now)) {
        s->state = "not_running";
        snprintf(s->why, sizeof s->why, "its heartbeat stopped %.0f s ago (stale after %d s): the job was killed or "
                 "its node %s was lost", s->now - h->updated, HEARTBEAT_STALE_S, h->host);
    } else if (on_this_host(h->host) && !process_alive(h->pid)) {
        s->state = "not_running";
        snprintf(s->why, sizeof s->why, "its process %ld on this host (%s) is gone: it was killed", h->pid, h->host);
    }
}

/* Steps done and the total, from the freshest source. */
static void decide_steps(run_status *s)
{
    s->step = s->log.has_train ? s->log.train_step : 0;
    if (s->has_hb && s->hb.step > s->step) s->step = s->hb.step;
    if (s->ck.has_newest && s->ck.newest_step > s->step) s->step = s->ck.newest_step;
    s->total = s->has_hb && s->hb.total > 0 ? s->hb.total : s->ck.total_steps;
}

static pt_status status_read(const char *dir, run_status *s)
{
    memset(s, 0, sizeof *s);
    s->dir = dir;
    s->now = heartbeat_now();
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return ERR(PT_ERR_USER, "%s: %s; name the output_dir of a run", shown_text(dir).s, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ERR(PT_ERR_USER, "%s is not a directory; name the output_dir of a run", shown_text(dir).s);
    TRY(heartbeat_read(dir, &s->hb, &s->has_hb));
    TRY(runlog_read(dir, &s->log, &s->has_log));
    TRY(watch_ckpts_find(dir, &s->ck));
    TRY(hub_waiting_list(dir, &s->jobs, &s->n_jobs));
    if (!s->has_hb && !s->has_log && !s->ck.has_newest)
        return ERR(PT_ERR_USER, "%s holds no run (no %s, metrics.jsonl or checkpoint); name a run's output_dir",
                   shown_text(dir).s, HEARTBEAT_NAME);
    decide_state(s);
    decide_steps(s);
    return PT_OK;
}

static void status_free(run_status *s)
{
    runlog_free(&s->log);
    hub_waiting_free(s->jobs, s->n_jobs);
}

pt_status status_main(int argc, char **argv)
{
    const char *dir = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(status_usage, stdout);
            return PT_OK;
        }
        if (!strcmp(argv[i], "--json")) json = true;
        else if (argv[i][0] == '-' || dir)
            return ERR(PT_ERR_USAGE, "status: %s %s\n%s", argv[i][0] == '-' ? "unknown option" : "unexpected argument",
                       argv[i], status_usage);
        else dir = argv[i];
    }
    if (!dir) return ERR(PT_ERR_USAGE, "status: no OUTPUT_DIR given\n%s", status_usage);
    run_status s;
    pt_status st = status_read(dir, &s);
    if (st == PT_OK && json) st = status_print_json(&s, stdout);
    else if (st == PT_OK) status_print_text(&s, stdout);
    status_free(&s);
    return st;
}
