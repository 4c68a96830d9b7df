/* watch.h — watching a run from outside it, on any node that sees its output_dir, while it runs,
 * after it finished, or after it was killed: `ptrain status OUTPUT_DIR` (how far it is, whether it
 * is alive, its checkpoints, resumes and uploads waiting) and `ptrain plot OUTPUT_DIR` (the
 * picture of plot.h). They only read, and take no lock: a job writing the directory is never
 * disturbed, and what they read is whole (checkpoints and heartbeat.json appear by rename,
 * metrics.jsonl's last line is left out until it ends). */
#ifndef PTRAIN_WATCH_H
#define PTRAIN_WATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/error.h"

/* What output_dir's checkpoints say. */
typedef struct {
    bool has_newest;
    int64_t newest_step, total_steps; /* the newest complete checkpoint's step, and the run's steps then */
    char newest_path[4200];
    int skipped; /* newer checkpoint files that are incomplete or damaged */
    bool has_best; /* the best checkpoint, by the newest one's metric history */
    int64_t best_step;
    char metric[64];
    double best_value;
    char best_path[4200]; /* "" when its file is gone (save_total_limit) */
} watch_ckpts;

/* The newest checkpoint of output_dir that verifies, and the best one it names. */
pt_status watch_ckpts_find(const char *output_dir, watch_ckpts *c);

/* `ptrain status OUTPUT_DIR [--json]` (argv[0] is "status"). */
pt_status status_main(int argc, char **argv);
/* `ptrain plot OUTPUT_DIR [--out FILE.png]` (argv[0] is "plot"). */
pt_status plot_main(int argc, char **argv);

#endif
