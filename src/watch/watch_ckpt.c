/* watch_ckpt.c — a run's checkpoints as status and plot show them: the newest that verifies (newer
 * ones that do not are counted, not used) and the best one its metric history names. The reading
 * is checkpoint.h's, as a resume does it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/checkpoint.h"
#include "ptrain/watch.h"

/* The best checkpoint named by the newest one's metadata, and whether its file is still there. */
static pt_status read_best(watch_ckpts *c, char **paths, const int64_t *steps, int n)
{
    ckpt_state s;
    TRY(ckpt_read_meta(c->newest_path, &s));
    c->total_steps = s.total_steps;
    c->has_best = s.has_best;
    c->best_step = s.best_step, c->best_value = s.best_metric;
    snprintf(c->metric, sizeof c->metric, "%s", config_metric_choices[s.metric_for_best_model]);
    for (int i = 0; c->has_best && i < n; i++)
        if (steps[i] == s.best_step) snprintf(c->best_path, sizeof c->best_path, "%s", paths[i]);
    ckpt_state_free(&s);
    return PT_OK;
}

pt_status watch_ckpts_find(const char *output_dir, watch_ckpts *c)
{
    memset(c, 0, sizeof *c);
    char **paths;
    int64_t *steps;
    int n;
    TRY(ckpt_list(output_dir, &paths, &steps, &n));
    for (int i = 0; i < n && !c->has_newest; i++) {
        if (ckpt_verify(paths[i]) != PT_OK) {
            c->skipped += access(paths[i], F_OK) == 0; /* not one rotated away meanwhile */
            err_clear();
            continue;
        }
        c->has_newest = true, c->newest_step = steps[i];
        snprintf(c->newest_path, sizeof c->newest_path, "%s", paths[i]);
    }
    pt_status st = c->has_newest ? read_best(c, paths, steps, n) : PT_OK;
    for (int i = 0; i < n; i++) free(paths[i]);
    free(paths);
    free(steps);
    return st;
}
