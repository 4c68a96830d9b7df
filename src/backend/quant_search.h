/* quant_search.h — the pieces of quant.c's quantizers that the importance-matrix quantizers
 * (quant_imatrix.c) share: ggml's scale searches and the packing of levels into blocks. Private
 * to src/backend. */
#ifndef PTRAIN_QUANT_SEARCH_H
#define PTRAIN_QUANT_SEARCH_H

#include <stdint.h>

#include "ptrain/quant_blocks.h"

/* ggml's make_qx_quants (rmse_type 1): x ~ scale * (L - nmax), weights qw (x^2 when NULL). */
float quant_search_signed(int n, int nmax, const float *x, const float *qw, uint8_t *L);
/* ggml's make_qkx2_quants / make_qkx3_quants: x ~ scale * L - *mn, L in 0..nmax, weights w, the
 * inverse scales (rmin + rdelta*k + nmax) / (max - min) for k = 0..nstep. */
float quant_search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn, float rmin,
                          float rdelta, int nstep);
/* Q5_0/Q5_1 levels (0..31) into qh and qs. */
void quant_pack_q5_levels(const uint8_t *L, uint8_t *qh, uint8_t *qs);
/* Sub-block j's 6-bit scale and min into the 12 packed bytes of a Q4_K/Q5_K head (zeroed before). */
void quant_pack_scale_min_k4(int j, int sc, int m, uint8_t *q);
/* The levels against the scales as stored in a Q4_K/Q5_K head (nmax 15 or 31). */
void quant_requant_k4(int nmax, const float *x, uint16_t d16, uint16_t dmin16, const uint8_t *scales, uint8_t *L);
/* Q4_K/Q5_K levels into qs and, for Q5_K (qh not NULL, zeroed before), the fifth bits. */
void quant_pack_k4_levels(const uint8_t *L, uint8_t *qh, uint8_t *qs);
/* One Q6_K super-block, its sub-block scales searched with weights qw (256 values; NULL: x^2). */
void quant_q6_k_block(const float *x, const float *qw, block_q6_K *b);

#endif
