/* gradsync.h — the LoRA gradients of one optimizer step made ready for the optimizer: summed
 * over the micro-batches of gradient accumulation and over the ranks. The backward pass reports
 * each layer as soon as its gradients are written (step_options.layer_done, last layer first);
 * that layer is accumulated at once, and on the step's last micro-batch finished layers are
 * grouped into buckets of about GRADSYNC_BUCKET_BYTES whose sum across ranks starts right away
 * (backend_reduce_begin), overlapping the backward pass of the earlier layers. The sums are
 * formed so that W ranks with accumulation A give bit-identical gradients to one process with
 * accumulation W·A when W = 2 (a + b = b + a; see docs/training.md). */
#ifndef PTRAIN_GRADSYNC_H
#define PTRAIN_GRADSYNC_H

#include "ptrain/lora.h"

#define GRADSYNC_BUCKET_BYTES ((size_t)4 << 20)

typedef struct {
    pt_lora *l;
    int world;
    long accum, micro;  /* micro-batches per step; the one whose backward is running */
    int bucket_top;     /* highest layer of the bucket being filled; -1: none */
    int buckets;        /* buckets started this step */
    double comm_s;      /* seconds spent in communication calls this step */
} gradsync;

void gradsync_init(gradsync *g, pt_lora *l, int world, long accum);
/* Before micro-batch `micro` (0 .. accum-1) of a step runs. */
void gradsync_begin_micro(gradsync *g, long micro);
/* step_options.layer_done: arg is the gradsync. */
pt_status gradsync_layer_done(void *arg, int layer);
/* After the step's last micro-batch: wait until every bucket is summed across ranks. */
pt_status gradsync_finish(gradsync *g);

#endif
