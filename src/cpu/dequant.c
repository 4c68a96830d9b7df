/* dequant.c — rows of a stored weight as fp32, whatever its format: the block formats dequantize
 * row by row (quant.c); NF4 keeps its scales for the whole tensor, so it is addressed by row range
 * (nf4.c). Every CPU op that reads a frozen weight goes through here.
 * The formats of the embedded default and of most GGUF files people fine-tune (Q8_0, Q4_0, Q4_1)
 * have loops here written for the vectorizer, built for AVX-512, AVX2 and plain x86-64 and chosen at
 * load time: training dequantizes every weight in each pass, and quant.c's general loop spent 7% of
 * the demo's time there. They compute the same values as quant.c's, bit for bit (d q + m rounded
 * as two operations: -std=c11 keeps GCC from fusing them). */
#include <string.h>

#include "cpu.h"
#include "ptrain/nf4.h"
#include "ptrain/quant.h"
#include "ptrain/quant_blocks.h"

/* The blocks are read in place: a backend tensor is 64-byte aligned and rows are whole blocks. */
PT_CLONES static void row_q8_0(const block_q8_0 *x, float *dst, int64_t blocks)
{
    for (int64_t b = 0; b < blocks; b++, dst += QK) {
        float d = quant_f16_to_f32(x[b].d);
        const int8_t *q = x[b].qs;
#pragma omp simd
        for (int j = 0; j < QK; j++) dst[j] = (float)q[j] * d;
    }
}

PT_CLONES static void row_q4_0(const block_q4_0 *x, float *dst, int64_t blocks)
{
    for (int64_t b = 0; b < blocks; b++, dst += QK) {
        float d = quant_f16_to_f32(x[b].d);
        const uint8_t *q = x[b].qs;
#pragma omp simd
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = (float)((q[j] & 0x0f) - 8) * d;
            dst[j + QK / 2] = (float)((q[j] >> 4) - 8) * d;
        }
    }
}

PT_CLONES static void row_q4_1(const block_q4_1 *x, float *dst, int64_t blocks)
{
    for (int64_t b = 0; b < blocks; b++, dst += QK) {
        float d = quant_f16_to_f32(x[b].d), m = quant_f16_to_f32(x[b].m);
        const uint8_t *q = x[b].qs;
#pragma omp simd
        for (int j = 0; j < QK / 2; j++) {
            dst[j] = (float)(q[j] & 0x0f) * d + m;
            dst[j + QK / 2] = (float)(q[j] >> 4) * d + m;
        }
    }
}

pt_status cpu_dequantize_rows(const pt_tensor *w, int64_t r0, int64_t rows, float *out)
{
    int64_t k = w->shape[w->ndim - 1];
    if (w->dtype == PT_NF4) return nf4_dequantize_rows(w->data, w->shape[0], k, r0, rows, out);
    size_t row_bytes = dtype_size_bytes(w->dtype, k);
    if (row_bytes == 0)
        return ERR(PT_ERR_INTERNAL, "weight rows of %lld values are not whole %s blocks", (long long)k,
                   dtype_name(w->dtype));
    const uint8_t *base = (const uint8_t *)w->data + (size_t)r0 * row_bytes;
    switch (w->dtype) { /* whole rows are whole blocks here: row_bytes said so */
    case PT_Q8_0: row_q8_0((const block_q8_0 *)(const void *)base, out, rows * (k / QK)); return PT_OK;
    case PT_Q4_0: row_q4_0((const block_q4_0 *)(const void *)base, out, rows * (k / QK)); return PT_OK;
    case PT_Q4_1: row_q4_1((const block_q4_1 *)(const void *)base, out, rows * (k / QK)); return PT_OK;
    default: break;
    }
    for (int64_t r = 0; r < rows; r++) TRY(quant_dequantize_row(w->dtype, base + r * row_bytes, out + r * k, k));
    return PT_OK;
}
