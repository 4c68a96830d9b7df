/* signals.h — the signals a cluster sends before it stops a job: SIGUSR1 (Slurm's --signal
 * warning), SIGTERM (preemption, scancel, the time limit) and SIGINT (Ctrl-C). While training,
 * the first of them only sets a flag: the ranks agree on it at the next step boundary, rank 0
 * writes a checkpoint and every rank exits with PT_CHECKPOINTED. A second SIGINT ends the process
 * at once (exit 130). */
#ifndef PTRAIN_SIGNALS_H
#define PTRAIN_SIGNALS_H

/* From the start of `ptrain train` (main.c), so that a signal during start-up is not fatal. */
void signals_install(void);
/* The first signal received since signals_install, or 0. */
int signals_pending(void);
/* "SIGUSR1", "SIGTERM", "SIGINT" or "a signal" */
const char *signals_name(int sig);

#endif
