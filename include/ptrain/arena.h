/* arena.h — one backend allocation that a pass carves its buffers out of. Training allocates the
 * arena once per run, sized by a dry run of the same carving (arena_measure), and resets it for
 * every micro-batch, so no activation is allocated or freed while training runs. The buffers are
 * views (never released one by one); their contents are undefined when taken. */
#ifndef PTRAIN_ARENA_H
#define PTRAIN_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/backend.h"

#define ARENA_ALIGN 256 /* bytes: every buffer starts on it (vector loads, coalesced GPU access) */

typedef struct {
    pt_backend *be;
    pt_tensor mem;  /* the allocation (none while measuring) */
    size_t used, cap, high; /* bytes taken now, available, most taken since opened */
    bool measuring; /* count only: arena_take hands out no memory */
    pt_dtype act;   /* the backend's activation dtype (backend.h): what arena_take hands out */
} pt_arena;

/* An arena of bytes on be (0: empty). */
pt_status arena_open(pt_arena *a, pt_backend *be, size_t bytes);
/* An arena that only counts what is taken from it (a->high after a dry run: the size needed), for
 * a backend whose activations are of dtype act. */
void arena_measure(pt_arena *a, pt_dtype act);
/* Everything taken so far is free again. */
void arena_reset(pt_arena *a);
/* What is taken now (a mark), and giving back everything taken after a mark: buffers of a phase
 * that is over (the loss head's before the backward pass). */
size_t arena_mark(const pt_arena *a);
void arena_back_to(pt_arena *a, size_t mark);
/* t = an activation [rows, cols] buffer (of the backend's act dtype) from the arena (cols 0 or rows
 * 0: an empty tensor, no memory); arena_take_f32 for what stays f32 on every backend (rstd, the
 * log-sum-exp, logits). */
pt_status arena_take(pt_arena *a, pt_tensor *t, int64_t rows, int64_t cols);
pt_status arena_take_f32(pt_arena *a, pt_tensor *t, int64_t rows, int64_t cols);
void arena_close(pt_arena *a);

#endif
