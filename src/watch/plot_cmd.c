/* plot_cmd.c — `ptrain plot OUTPUT_DIR [--out FILE.png]`: the picture of a run (plot.h) from its
 * metrics.jsonl, its checkpoints (the best one marked) and its heartbeat (the run's name), drawn
 * while it runs or after; by default into OUTPUT_DIR/training.png, the file training writes. */
#include <stdio.h>
#include <string.h>

#include "ptrain/heartbeat.h"
#include "ptrain/log.h"
#include "ptrain/plot.h"
#include "ptrain/runlog.h"
#include "ptrain/watch.h"

static const char plot_usage[] =
    "Usage: ptrain plot OUTPUT_DIR [--out FILE.png]\n"
    "Draw a run's train and eval loss, learning rate, gradient norm and tokens/s against the step\n"
    "(resumes and the best checkpoint marked) from OUTPUT_DIR/metrics.jsonl into a PNG, by default\n"
    "OUTPUT_DIR/training.png. Works while the run is going, from any node that sees OUTPUT_DIR.\n";

static pt_status plot_usage_error(const char *what, const char *arg)
{
    return ERR(PT_ERR_USAGE, "plot: %s%s%s\n%s", what, arg ? " " : "", arg ? arg : "", plot_usage);
}

/* The title: the directory and, when the heartbeat names it, the run. */
static void plot_title(const char *dir, char *out, size_t len)
{
    heartbeat_info hb;
    bool found = false;
    if (heartbeat_read(dir, &hb, &found) != PT_OK) err_clear(); /* a title without the name */
    if (found && hb.run_name[0]) snprintf(out, len, "%s (%s)", dir, hb.run_name);
    else snprintf(out, len, "%s", dir);
}

static pt_status plot_dir(const char *dir, const char *out)
{
    runlog log;
    bool found;
    TRY(runlog_read(dir, &log, &found));
    if (!found)
        return ERR(PT_ERR_USER, "%s/metrics.jsonl not found: name the output_dir of a run (training writes "
                   "metrics.jsonl there from its first logging step on)", shown_text(dir).s);
    watch_ckpts c;
    pt_status st = watch_ckpts_find(dir, &c);
    char title[4300];
    plot_title(dir, title, sizeof title);
    plot_marks m = {.title = title, .has_best = c.has_best, .best_step = c.best_step, .metric = c.metric,
                    .best_value = c.best_value};
    if (st == PT_OK) st = plot_write(&log, &m, out);
    if (st == PT_OK)
        log_info("%s: %d training and %d eval records up to step %lld\n", shown_text(out).s, log.s[RUNLOG_LOSS].n,
                 log.s[RUNLOG_EVAL_LOSS].n, (long long)log.last_step);
    runlog_free(&log);
    return st;
}

pt_status plot_main(int argc, char **argv)
{
    const char *dir = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(plot_usage, stdout);
            return PT_OK;
        }
        if (!strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] == '-') return plot_usage_error("unknown option", argv[i]);
        else if (!dir) dir = argv[i];
        else return plot_usage_error("unexpected argument", argv[i]);
    }
    if (!dir) return plot_usage_error("no OUTPUT_DIR given", NULL);
    char path[4300];
    snprintf(path, sizeof path, "%s/training.png", dir);
    return plot_dir(dir, out ? out : path);
}
