/* weight_check.h — whether the weights a model file holds are numbers, checked while a model loads
 * (GGUF: model_from_gguf, safetensors: model_from_hf), so a damaged file is refused with one
 * message instead of training to NaN or at loss = ln(vocab).
 *
 * A NaN or an infinity refuses the model, naming the file, the tensor and the element (dense F32,
 * F16, BF16, F64 tensors, read in full) or the block (GGUF block formats, by their fp16 scales and
 * mins at the offsets ggml gives them; bitsandbytes NF4, by its absmax, nested absmax and code
 * maps). A matrix is all zero when every value is (dense) or every block's scale and min are zero
 * (blocks, absmax): an all-zero embedding or lm_head, or a model whose every projection is all
 * zero, is refused (every input would give the same output: the loss would stay at ln(vocab)); a
 * single all-zero projection is warned about. Norm weights and biases are checked for NaN and
 * infinity only: zero is a legitimate value there (and Gemma stores its norms as w for 1 + w).
 * One pass over the values, or over the scales alone for block formats. */
#ifndef PTRAIN_WEIGHT_CHECK_H
#define PTRAIN_WEIGHT_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/backend.h"
#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/model.h"
#include "ptrain/safetensors.h"

typedef enum { WEIGHT_VECTOR, WEIGHT_PROJECTION, WEIGHT_EMBEDDING } weight_role;

#define WEIGHT_ZERO_NAMED 4 /* all-zero projections named in the warning */

/* What the tensors checked so far add up to. */
typedef struct {
    const char *model; /* the model's path, for the verdict */
    int vocab;
    int projections, zero_projections;
    char zero_names[WEIGHT_ZERO_NAMED][128]; /* the first all-zero projections */
    char zero_embedding[128];                /* an all-zero embedding or lm_head, or "" */
} weight_tally;

void weight_tally_init(weight_tally *t, const char *model, int vocab);
/* n values of tensor (in file) stored as dtype: F32, F16, BF16, or a GGUF block format (n a
 * multiple of its block); cols: the row length, for naming where a bad value is (0: a vector).
 * Other dtypes are not checked. */
pt_status weight_check(weight_tally *t, const char *file, const char *tensor, weight_role role, pt_dtype dtype,
                       const void *data, int64_t n, int64_t cols);
/* The same for a safetensors dtype (F32, F16, BF16, F64; others are not checked). */
pt_status weight_check_st(weight_tally *t, const char *file, const char *tensor, weight_role role, st_dtype dtype,
                          const void *data, int64_t n, int64_t cols);
/* A bitsandbytes NF4 weight of nblocks blocks: its quant_map (16 values), and either its absmax
 * (nabs, nblocks values; codes NULL) or its nested form: codes (the U8 absmax, nblocks) through
 * nmap (256 values) times nabs (one per nested_blocksize blocks) plus offset. */
typedef struct {
    const float *qmap, *nmap, *nabs;
    const uint8_t *codes;
    int64_t nblocks, nested_blocksize;
    float offset;
} weight_nf4;
pt_status weight_check_nf4(weight_tally *t, const char *file, const char *tensor, const weight_nf4 *w);
/* After every tensor: refuse a model whose embedding, lm_head or every projection is all zero;
 * warn (rank 0) naming the all-zero projections of a model that is otherwise usable. */
pt_status weight_verdict(const weight_tally *t);

/* Every tensor model_from_gguf uses, checked as above into t (its verdict is the caller's, once the
 * model has loaded: a file that is not a whole model says so first). */
pt_status weight_check_gguf(const gguf_file *f, const pt_model_config *c, weight_tally *t);

#endif
