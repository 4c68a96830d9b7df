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

/* A block's fp16 scale as fp32, the same value as quant_f16_to_f32's but inlined and without its
 * branches (the call per block cost a quarter of the dequantization): the half's exponent and
 * mantissa placed in a float's low bits are its value times 2^-112 (subnormals included), so one
 * exact multiplication by 2^112 rescales it; infinities and NaNs are rebuilt, the sign put back. */
static inline float half(uint16_t h)
{
    uint32_t bits = (uint32_t)(h & 0x7fff) << 13;
    float f;
    memcpy(&f, &bits, sizeof f);
    f *= 0x1p112f;
    memcpy(&bits, &f, sizeof f);
    if ((h & 0x7c00) == 0x7c00) bits = 0x7f800000u | (uint32_t)(h & 0x3ff) << 13;
    bits |= (uint32_t)(h & 0x8000) << 16;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* The blocks are read in place: a backend tensor is 64-byte aligned and rows are whole blocks.
 * A Q4 block is two vectors of 16: its 16 bytes as 16 lanes widened to floats (GCC's vector types;
 * the vectorizer made 4-lane code of the plain loop), scaled (and offset) lane by lane. */
typedef uint8_t bytes16 __attribute__((vector_size(16)));
typedef int32_t ints16 __attribute__((vector_size(64)));
typedef float floats16 __attribute__((vector_size(64)));
#define STORE16(dst, v) memcpy((dst), &(v), sizeof(floats16))
/* bytes to floats through 32-bit integers (a direct conversion is done one lane at a time) */
#define FLOATS16(q) __builtin_convertvector(__builtin_convertvector((q), ints16), floats16)

PT_CLONES static void row_q8_0(const block_q8_0 *x, float *dst, int64_t blocks)
{
    for (int64_t b = 0; b < blocks; b++, dst += QK) {
        float d = half(x[b].d);
        const int8_t *q = x[b].qs;
#pragma omp simd
        for (int j = 0; j < QK; j++) dst[j] = (float)q[j] * d;
    }
}

PT_CLONES static void row_q4_0(const block_q4_0 *x, float *dst, int64_t blocks)
{
    for (int64_t b = 0; b < blocks; b++, dst += QK) {
        float d = half(x[b].d);
        bytes16 q;
        memcpy(&q, x[b].qs, sizeof q);
        floats16 lo = (FLOATS16(q & 0x0f) - 8.0f) * d;
        floats16 hi = (FLOATS16(q >> 4) - 8.0f) * d;
        STORE16(dst, lo), STORE16(dst + QK / 2, hi);
    }
}

PT_CLONES static void row_q4_1(const block_q4_1 *x, float *dst, int64_t blocks)
{
    for (int64_t b = 0; b < blocks; b++, dst += QK) {
        float d = half(x[b].d), m = half(x[b].m);
        bytes16 q;
        memcpy(&q, x[b].qs, sizeof q);
        floats16 lo = FLOATS16(q & 0x0f) * d + m;
        floats16 hi = FLOATS16(q >> 4) * d + m;
        STORE16(dst, lo), STORE16(dst + QK / 2, hi);
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
