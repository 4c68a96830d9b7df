/* rope.h — rotary-embedding frequencies with the scalings Hugging Face configs name
 * (rope_scaling / rope_parameters): none, linear, and Llama 3's piecewise one. One place for the
 * formula, whatever file format the model came from. */
#ifndef PTRAIN_ROPE_H
#define PTRAIN_ROPE_H

#include "ptrain/error.h"

typedef enum { PT_ROPE_DEFAULT, PT_ROPE_LINEAR, PT_ROPE_LLAMA3, PT_ROPE_LONGROPE } pt_rope_type;

#define ROPE_MAX_FACTORS 512 /* LongRoPE's factors: one per rotated pair, head size 1024 at most */

typedef struct {
    pt_rope_type type;
    double factor;                              /* linear, llama3; longrope: max / original positions */
    double low_freq_factor, high_freq_factor;   /* llama3 */
    double original_max_position_embeddings;    /* llama3, longrope */
    double attention_factor;                    /* longrope: cos and sin times this */
    int n_factors;                              /* longrope: rotated pairs (short_factor's, long_factor's length) */
    float short_factor[ROPE_MAX_FACTORS], long_factor[ROPE_MAX_FACTORS]; /* longrope */
} pt_rope_scaling;

/* inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2, then scaled as s says (NULL: none),
 * as transformers' _compute_*_rope_parameters does; longrope: divided by short_factor[i] (the
 * frequencies of positions within original_max_position_embeddings; head_dim is the rotated width). */
pt_status rope_inv_freq(double theta, int head_dim, const pt_rope_scaling *s, float *inv_freq);
/* "default", "linear", "llama3", "longrope" */
const char *rope_type_name(pt_rope_type t);

#endif
