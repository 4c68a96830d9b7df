/* model_share.h — a model loaded once into one block of host memory (a weight image) that other
 * processes map and bind to, so that the ranks of a node read and quantize the model file once and
 * hold one copy of the weights (the image lives in an MPI shared window, src/runtime/dist.c; this module
 * knows nothing of MPI).
 *
 * The loading rank loads as always, onto an image backend (weight_image_open): its allocations are
 * carved from the block and its uploads are copies into it. model_describe then writes what the
 * other ranks need to rebuild the model — the config, each tensor's dtype, shape and offset in the
 * block, the rotary frequencies — as bytes that travel over MPI; model_bind builds a model on a
 * rank's own backend from those bytes and the block: on the CPU backend the tensors point into the
 * block (no copy; the model does not free them), on a GPU they are uploaded from it. */
#ifndef PTRAIN_MODEL_SHARE_H
#define PTRAIN_MODEL_SHARE_H

#include <stdbool.h>
#include <stddef.h>

#include "ptrain/model.h"
#include "ptrain/model_io.h"

typedef struct {
    pt_backend be;        /* load onto &image.be */
    pt_backend_ops ops;
    unsigned char *base;  /* the block */
    size_t used, cap;
} weight_image;

/* An image backend over the block [base, base + cap). */
void weight_image_open(weight_image *im, void *base, size_t cap);
/* An upper bound of the image of the model at path (format fmt, as model_resolve found it): its
 * tensors as stored, norms and biases as f32, alignment; the pages of the block past what the
 * loader writes are never touched, so a loose bound costs address space, not memory. */
pt_status model_image_bound(const char *path, pt_model_format fmt, size_t *bytes);
/* m (loaded onto an image over base) as bytes (malloc'd into *out) that model_bind reads. */
pt_status model_describe(const pt_model *m, const void *base, void **out, size_t *n);
/* The model the bytes describe, its weights in the block at base, on backend be: pointing into the
 * block when in_place (a CPU backend; model_free then leaves the weights), else uploaded. */
pt_status model_bind(const void *desc, size_t n, const void *base, pt_backend *be, bool in_place, pt_model *m);

#endif
