/* imatrix.h — llama.cpp's importance matrix (llama-imatrix's output), read for the GGUF export's
 * quantizers (imatrix_file, docs/export.md): per weight tensor, the mean square of the
 * activations each of its columns met. Both of llama.cpp's formats: GGUF (tensors NAME.in_sum2
 * and NAME.counts: a value is in_sum2 / count, or 1 where the count is 0) and the legacy .dat
 * (int32 entry count; per entry int32 name length, the name, int32 ncall, int32 nval and nval
 * float32 sums, divided by ncall when it is positive; an optional trailer). Names are the GGUF
 * tensor names (blk.0.attn_q.weight, output.weight). */
#ifndef PTRAIN_IMATRIX_H
#define PTRAIN_IMATRIX_H

#include <stdint.h>

#include "ptrain/error.h"

typedef struct {
    char *name;
    float *values;
    int64_t n;
} imatrix_entry;

typedef struct {
    char *path;
    imatrix_entry *entries;
    int64_t n;
} pt_imatrix;

/* Read path, in either format (told apart by GGUF's magic). A file that is neither, or an entry
 * that is malformed, is one PT_ERR_USER naming the file, the place and the fix. */
pt_status imatrix_load(const char *path, pt_imatrix *im);
void imatrix_free(pt_imatrix *im);
/* The weights of tensor `name` whose rows have cols values: *qw NULL when the matrix has no
 * entry for it (quantized without, as llama-quantize does). PT_ERR_USER naming the tensor when
 * its entry is not cols values long, except for token_embd.weight, which is then quantized
 * without (as llama-quantize has it). */
pt_status imatrix_weights(const pt_imatrix *im, const char *name, int64_t cols, const float **qw);

#endif
