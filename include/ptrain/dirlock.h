/* dirlock.h — one run per output_dir. Rank 0 of a training run holds an fcntl write lock on
 * output_dir/.ptrain.lock for the whole run; a second run in the same directory is refused with
 * the holder's host, PID and Slurm job. The kernel (or the NFS server) releases the lock when the
 * process dies, so a kill -9 never leaves a stale lock. A requeued Slurm job that finds its own
 * earlier instance still holding it (a node that died: the file server keeps the lock until its
 * lease ends, about 90 s on NFSv4) waits for it, up to DIRLOCK_WAIT_S. On a filesystem without
 * working locks ptrain warns once and runs unguarded. */
#ifndef PTRAIN_DIRLOCK_H
#define PTRAIN_DIRLOCK_H

#include "ptrain/error.h"

#define DIRLOCK_NAME ".ptrain.lock"
#define DIRLOCK_WAIT_S 180

typedef struct {
    int fd; /* -1: not held (never taken, or the filesystem has no locks) */
} pt_dirlock;

/* Create dir when missing and take its lock; what is fails says who holds it. */
pt_status dirlock_acquire(const char *dir, pt_dirlock *l);
/* Without creating or writing anything: the error dirlock_acquire would give now when another
 * process holds dir's lock (not an earlier instance of this Slurm job, which acquire waits for);
 * PT_OK otherwise. For a look at output_dir before a run writes there (outdir.h). */
pt_status dirlock_check(const char *dir);
void dirlock_release(pt_dirlock *l);

#endif
