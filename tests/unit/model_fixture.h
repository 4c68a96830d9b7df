/* model_fixture.h — helpers the model parity tests share (test_model.c, test_hf_model.c): where
 * the sources are, a CPU backend, and the golden files the reference scripts write (token ids as
 * text, logits as raw float32), with the max-norm relative error the parity bounds use; a whole
 * file read into memory and stderr captured (the damaged-weight tests). */
#ifndef PTRAIN_TEST_MODEL_FIXTURE_H
#define PTRAIN_TEST_MODEL_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "ptrain/backend.h"
#include "ptrain/model.h"

const char *srcdir(void);                                  /* $PTRAIN_SRCDIR, else ".." */
pt_backend *cpu(void);                                     /* a CPU backend, or the test fails */
int32_t *read_ids(const char *path, int *n);               /* up to 4096 whitespace-separated ids */
float *read_f32(const char *path, size_t count);           /* exactly count float32 values */
double max_rel_err(const float *a, const float *b, size_t n); /* max|a-b| / max|b| */
void *read_file(const char *path, size_t *size);           /* the whole file (malloc'd), or the test fails */
/* What the code between the two writes to stderr (warnings), as text (malloc'd). */
void capture_stderr_begin(void);
char *capture_stderr_end(void);
/* A model load's outcome (st, and what it warned, freed here) against the expectation: the error's
 * text holds want (NULL: it loaded, and the warnings hold warn, or say nothing of all-zero
 * tensors when warn is NULL); a loaded m is freed. */
void expect_load_outcome(pt_status st, char *warned, const char *want, const char *warn, pt_model *m);

#endif
