/* quant.h — block formats of quantized weights (GGUF Q8_0/Q4_0/Q4_1/Q5_0/Q5_1, the k-quants
 * Q2_K/Q3_K/Q4_K/Q5_K/Q6_K, fp16, bf16) and their conversion to fp32, row by row, so a matmul can
 * dequantize one tile of a weight at a time and never holds a full-precision copy of the base
 * model. */
#ifndef PTRAIN_QUANT_H
#define PTRAIN_QUANT_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

float quant_f16_to_f32(uint16_t h);
uint16_t quant_f32_to_f16(float f);
float quant_bf16_to_f32(uint16_t b);
uint16_t quant_f32_to_bf16(float f); /* round to nearest even */

/* Convert n values (a multiple of the dtype's block: 32, or 256 for the k-quants) starting at src
 * into dst, exactly as ggml's dequantize_row_* does. */
pt_status quant_dequantize_row(pt_dtype dtype, const void *src, float *dst, int64_t n);
/* Quantize n fp32 values into dtype (n a multiple of the block, else PT_ERR_INTERNAL): f32, f16,
 * bf16, q8_0, q4_0, q4_1 (to make test weights), the k-quants q4_k, q5_k, q6_k (for GGUF export,
 * e.g. Q4_K_M; byte for byte what ggml's quantize_row_*_K_ref gives, with its scale/min search) and
 * q5_0, q5_1 (byte for byte ggml's quantize_row_q5_0_ref / q5_1_ref: the fallback for rows that
 * are not whole 256-value super-blocks); others fail with PT_ERR_UNSUPPORTED. */
pt_status quant_quantize_row(pt_dtype dtype, const float *src, void *dst, int64_t n);
/* quant_quantize_row with an importance matrix: qw holds n weights (the imatrix's values for the
 * row's columns). Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K are quantized as ggml's
 * ggml_quantize_chunk does with weights, byte for byte; the other types ignore qw, as ggml does;
 * qw NULL is quant_quantize_row. n is one whole row (the 32-value formats weight by its mean
 * square). */
pt_status quant_quantize_row_imatrix(pt_dtype dtype, const float *src, void *dst, int64_t n, const float *qw);
/* Whether dtype's quantizer uses an importance matrix. */
bool quant_uses_imatrix(pt_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
