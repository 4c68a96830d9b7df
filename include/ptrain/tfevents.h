/* tfevents.h — TensorBoard event files, for `report_to: tensorboard`: what TensorFlow's and
 * PyTorch's SummaryWriter write, read by TensorBoard (and by anything that reads those).
 *
 * Each start of a run creates a new file, logging_dir/events.out.tfevents.TIME.HOST.PID.0, whose
 * TIME is later than every earlier file's there, so TensorBoard reads the files of one run in the
 * order they were written. A file is only ever appended to, one whole record per write: a kill
 * leaves every record whole, and a record cut short (a full disk, a node lost) is a file's last,
 * which TensorBoard's reader skips as it skips TensorFlow's. A resumed run first writes
 * SessionLog START at the step it continues with: TensorBoard then drops what earlier runs logged
 * from that step on, so the curves continue without the steps logged twice. */
#ifndef PTRAIN_TFEVENTS_H
#define PTRAIN_TFEVENTS_H

#include <stdint.h>

#include "ptrain/error.h"

#define TFEVENTS_PREFIX "events.out.tfevents."
#define TFEVENTS_VERSION "brain.Event:2" /* the version whose SessionLog START purges later steps */

typedef struct {
    const char *tag; /* e.g. "train/loss" */
    double value;    /* stored as a float, as TensorBoard's scalars are */
} tfevents_value;

typedef struct {
    int fd; /* -1: not open */
    char path[4400];
} tfevents;

/* Create dir (under safefs's rules) and a new event file in it, starting with the file version. */
pt_status tfevents_open(tfevents *w, const char *dir);
/* SessionLog START at step: TensorBoard forgets every earlier event of step >= step. */
pt_status tfevents_start(tfevents *w, int64_t step);
/* One event at step holding n scalars. */
pt_status tfevents_scalars(tfevents *w, int64_t step, const tfevents_value *v, int n);
/* fsync the file (at checkpoints: what a checkpoint's step logged survives a lost node). */
pt_status tfevents_sync(tfevents *w);
void tfevents_close(tfevents *w);

#endif
