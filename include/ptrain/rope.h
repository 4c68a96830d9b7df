/* rope.h — rotary-embedding frequencies with the scalings Hugging Face configs name
 * (rope_scaling / rope_parameters): none, linear, Llama 3's piecewise one, LongRoPE's factors and YaRN's
 * ramp between interpolated and original frequencies. One place for the
 * formula, whatever file format the model came from. */
#ifndef PTRAIN_ROPE_H
#define PTRAIN_ROPE_H

#include "ptrain/error.h"

#include <stdbool.h>

typedef enum { PT_ROPE_DEFAULT, PT_ROPE_LINEAR, PT_ROPE_LLAMA3, PT_ROPE_LONGROPE, PT_ROPE_YARN } pt_rope_type;

#define ROPE_MAX_FACTORS 512 /* LongRoPE's factors: one per rotated pair, head size 1024 at most */

typedef struct {
    pt_rope_type type;
    double factor;                              /* linear, llama3, yarn; longrope: max / original positions */
    double low_freq_factor, high_freq_factor;   /* llama3 */
    double original_max_position_embeddings;    /* llama3, longrope, yarn */
    double attention_factor;                    /* longrope, yarn: cos and sin times this */
    double beta_fast, beta_slow;                /* yarn: the ramp's ends in rotations (0: 32 and 1) */
    double mscale, mscale_all_dim;              /* yarn: weights of the default attention factor (0: none) */
    bool no_truncate;                           /* yarn: truncate false (the ramp's ends not rounded) */
    int n_factors;                              /* longrope: rotated pairs (short_factor's, long_factor's length) */
    float short_factor[ROPE_MAX_FACTORS], long_factor[ROPE_MAX_FACTORS]; /* longrope */
} pt_rope_scaling;

/* inv_freq[i] = theta^(-2i/head_dim) for i < head_dim/2, then scaled as s says (NULL: none),
 * as transformers' _compute_*_rope_parameters does; longrope: divided by short_factor[i] (the
 * frequencies of positions within original_max_position_embeddings; head_dim is the rotated width);
 * yarn: f/factor blended into f along the ramp of _compute_yarn_parameters (the attention factor is
 * the caller's: rope_yarn_attention). */
pt_status rope_inv_freq(double theta, int head_dim, const pt_rope_scaling *s, float *inv_freq);
/* "default", "linear", "llama3", "longrope", "yarn" */
const char *rope_type_name(pt_rope_type t);
/* YaRN's cos/sin multiplier as transformers derives it when the config gives no attention_factor:
 * 0.1 ln(factor) + 1 (1 for factor <= 1), or with mscale and mscale_all_dim both non-zero the ratio of
 * that formula with each as the log's weight. */
double rope_yarn_attention(double factor, double mscale, double mscale_all_dim);

#endif
