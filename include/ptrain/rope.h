/* rope.h — rotary-embedding frequencies with the scalings Hugging Face configs name
 * (rope_scaling / rope_parameters): none, linear, and Llama 3's piecewise one. One place for the
 * formula, whatever file format the model came from. */
#ifndef PTRAIN_ROPE_H
#define PTRAIN_ROPE_H

#include "ptrain/error.h"

typedef enum { PT_ROPE_DEFAULT, PT_ROPE_LINEAR, PT_ROPE_LLAMA3 } pt_rope_type;

typedef struct {
    pt_rope_type type;
    double factor;                              /* linear, llama3 */
    double low_freq_factor, high_freq_factor;   /* llama3 */
    double original_max_position_embeddings;    /* llama3 */
} pt_rope_scaling;

/* inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2, then scaled as s says (NULL: none),
 * as transformers' _compute_*_rope_parameters does. */
pt_status rope_inv_freq(double theta, int head_dim, const pt_rope_scaling *s, float *inv_freq);
/* "default", "linear", "llama3" */
const char *rope_type_name(pt_rope_type t);

#endif
