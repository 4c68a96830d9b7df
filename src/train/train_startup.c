/* train_startup.c — the start-up report (issue 27): the seconds of each phase (MPI, model read,
 * quantize, upload, dataset, first step) on the slowest rank, and the time from MPI's start to the
 * end of the first step, printed by rank 0 after the first step and kept in metrics.jsonl. A run
 * that starts slowly on a cluster says where the time went, and on which rank. */
#include <math.h>

#include "ptrain/util.h"
#include "trainer.h"

static const char *const phase_names[START_COUNT] = {"MPI", "model read", "quantize", "upload", "dataset",
                                                     "first step"};

void startup_model(trainer *t, double wall_s, double upload_s)
{
    startup_times *s = &t->start;
    s->s[START_UPLOAD] = upload_s;
    s->s[START_READ] = fmax(0, wall_s - upload_s - s->s[START_QUANTIZE]);
}

pt_status startup_report(trainer *t)
{
    if (t->start.reported) return PT_OK;
    t->start.reported = true;
    t->start.s[START_MPI] = t->d->init_s;
    progress_phase ph[START_COUNT + 1];
    for (int i = 0; i < START_COUNT; i++) {
        ph[i].name = phase_names[i];
        TRY(dist_max_loc(t->d, t->start.s[i], &ph[i].s, &ph[i].rank));
    }
    ph[START_COUNT].name = "to first step";
    TRY(dist_max_loc(t->d, util_now() - t->d->start, &ph[START_COUNT].s, &ph[START_COUNT].rank));
    return progress_startup(&t->p, t->first_step, ph, START_COUNT + 1, t->d->world);
}
