/* heartbeat.h — whether a run is alive, for `ptrain status` on any node of a shared filesystem.
 * Rank 0 rewrites output_dir/heartbeat.json from a thread of its own every HEARTBEAT_INTERVAL_S,
 * from taking output_dir's lock to the end of the run (through the model's loading too), each time
 * whole (filewrite.h: a reader sees the old file or the new one): its state, host, PID, Slurm job,
 * config (and whether it resumes), step and total, and the time. The end of the run writes the final state and its exit
 * status. A heartbeat still saying "starting" or "running" but older than HEARTBEAT_STALE_S is a
 * process that is gone (killed, or its node lost): the stale time leaves room for a busy filesystem
 * and for the attribute caches of NFS clients (up to a minute) on the reading node.
 *
 * The file also keeps the run's name (run_name), so a run that is resumed writes its TensorBoard
 * curves into the same directory as the run it continues. */
#ifndef PTRAIN_HEARTBEAT_H
#define PTRAIN_HEARTBEAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

#define HEARTBEAT_NAME "heartbeat.json"
#define HEARTBEAT_INTERVAL_S 30
#define HEARTBEAT_STALE_S 180

typedef enum { HB_STARTING, HB_RUNNING, HB_FINISHED, HB_STOPPED, HB_FAILED, HB_STATES } heartbeat_state;
/* "starting", "running", "finished", "stopped" (by a signal, after a checkpoint), "failed" */
extern const char *const heartbeat_state_names[HB_STATES];

typedef struct {
    heartbeat_state state;
    int exit_status; /* finished, stopped, failed: the process's exit status */
    char run_name[256];
    char host[256];
    long pid;
    char slurm_job[64];
    char config[1024];      /* the config file */
    /* how the same command continues (heartbeat_continue_text): the config's resume_from_checkpoint,
     * "true", "false" or the path it names ("" in the heartbeat of an older ptrain), and
     * overwrite_output_dir */
    char resume[1024];
    bool overwrite;
    char logging_dir[4200]; /* where TensorBoard's files go; "" without report_to: tensorboard */
    int64_t step, total;    /* optimizer steps done, of total (0: not known yet) */
    double started, updated; /* Unix seconds: the process's start, the last write */
    int interval_s;
} heartbeat_info;

typedef struct heartbeat heartbeat;

/* Write output_dir/heartbeat.json from info (host, PID, Slurm job, times and interval filled in
 * here), then again every interval from a thread until heartbeat_stop. PTRAIN_TEST_HEARTBEAT_S
 * shortens the interval (tests). Fails when the first write does. */
pt_status heartbeat_start(const char *output_dir, const heartbeat_info *info, heartbeat **hb);
/* What the next writes say. */
void heartbeat_set(heartbeat *hb, heartbeat_state state, int64_t step, int64_t total);
void heartbeat_set_logging_dir(heartbeat *hb, const char *dir);
/* Stop the thread and write the final state at once; hb is freed (NULL: nothing to do). */
void heartbeat_stop(heartbeat *hb, heartbeat_state state, int exit_status);

/* What to do so that a run stopped after a checkpoint continues, from resume and overwrite as in
 * heartbeat_info and the config file's name: "run the same command again to continue" only when
 * resume is "true"; otherwise what to set in the config first, and why. */
void heartbeat_continue_text(const char *resume, bool overwrite, const char *config, char *out, size_t len);

/* Read output_dir/heartbeat.json; *found false (info zeroed) when there is none. */
pt_status heartbeat_read(const char *output_dir, heartbeat_info *info, bool *found);
/* Whether info says starting or running but was last written too long before now (Unix seconds). */
bool heartbeat_stale(const heartbeat_info *info, double now);
/* The time now, in Unix seconds. */
double heartbeat_now(void);

#endif
