/* outdir.h — what a training run finds in its output_dir before it writes there (issue 44): the
 * same command run again never starts over on top of an earlier run's checkpoints. Rank 0 looks
 * before anything is written (the lock, the heartbeat, metrics.jsonl, the dataset cache): with
 * resume_from_checkpoint false and a complete checkpoint there, the run is refused, naming the
 * newest one, its step, whether its config was this one, and the two ways on. With
 * overwrite_output_dir: true the earlier run's files are removed first instead, under the lock,
 * and only ptrain's own (src/train/outdir.c). */
#ifndef PTRAIN_OUTDIR_H
#define PTRAIN_OUTDIR_H

#include "ptrain/config.h"

/* Rank 0, before anything is written: PT_ERR_USER when another run holds output_dir's lock now
 * (dirlock_check), or when cfg neither resumes nor overwrites and output_dir holds a complete
 * checkpoint (one whose completion mark verifies). */
pt_status outdir_check(const pt_config *cfg);
/* Rank 0, holding output_dir's lock; a no-op without overwrite_output_dir. Removes the earlier
 * run's files: checkpoint-N.h5, metrics.jsonl, training.png, heartbeat.json (so the run gets a
 * name of its own), TensorBoard event files in output_dir/runs/NAME/ (and the directories left
 * empty), the Hub pushes staged under output_dir/hub/; only regular files of those names, never
 * through a link. Prints one line saying what went. */
pt_status outdir_clear(const pt_config *cfg);
/* Rank 0, with overwrite_output_dir (else a no-op): remove output_dir's dataset caches
 * (dataset-*.ptdata) other than keep, the file name of this run's cache. */
pt_status outdir_clear_caches(const pt_config *cfg, const char *keep);

#endif
