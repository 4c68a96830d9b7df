/* dot.c — dot products straight from GGUF blocks (Q8_0, Q4_0, Q4_1) for the few-row matmul of
 * generation: per block of 32, sum_j x_j (d q_j + m) = d sum_j q_j x_j + m sum_j x_j, so a weight
 * is read as its 4 or 8 bits and never written out as a float. xsum holds sum_j x_j per block.
 * The blocks are read in place: a backend tensor is 64-byte aligned and rows are whole blocks. */
#include <stdint.h>

#include "cpu.h"
#include "ptrain/quant.h"
#include "ptrain/quant_blocks.h"

PT_CLONES static float dot_q8_0(const block_q8_0 *w, const float *x, int64_t k)
{
    float acc = 0;
    for (int64_t b = 0; b < k / QK; b++, x += QK) {
        const int8_t *q = w[b].qs;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < QK; j++) s += (float)q[j] * x[j];
        acc += quant_f16_to_f32(w[b].d) * s;
    }
    return acc;
}

/* sum_j q_j x_j over the nibbles of a Q4_0/Q4_1 block (low nibbles are values 0..15, high 16..31).
 * Always inlined, so that it is vectorized for the target of each clone that calls it. */
static inline __attribute__((always_inline)) float dot_nibbles(const uint8_t *q, const float *x)
{
    float s = 0;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < QK / 2; j++) s += (float)(q[j] & 15) * x[j] + (float)(q[j] >> 4) * x[j + QK / 2];
    return s;
}

PT_CLONES static float dot_q4_0(const block_q4_0 *w, const float *x, const float *xsum, int64_t k)
{
    float acc = 0;
    for (int64_t b = 0; b < k / QK; b++, x += QK) {
        float s = dot_nibbles(w[b].qs, x), d = quant_f16_to_f32(w[b].d), m = -8.0f * d;
        acc += d * s + m * xsum[b];
    }
    return acc;
}

PT_CLONES static float dot_q4_1(const block_q4_1 *w, const float *x, const float *xsum, int64_t k)
{
    float acc = 0;
    for (int64_t b = 0; b < k / QK; b++, x += QK) {
        float s = dot_nibbles(w[b].qs, x), d = quant_f16_to_f32(w[b].d), m = quant_f16_to_f32(w[b].m);
        acc += d * s + m * xsum[b];
    }
    return acc;
}

bool cpu_dot_supported(pt_dtype dtype) { return dtype == PT_Q8_0 || dtype == PT_Q4_0 || dtype == PT_Q4_1; }

void cpu_block_sums(const float *x, int64_t k, float *xsum)
{
    for (int64_t b = 0; b < k / QK; b++) {
        float s = 0;
        for (int j = 0; j < QK; j++) s += x[b * QK + j];
        xsum[b] = s;
    }
}

float cpu_dot_row(pt_dtype dtype, const void *row, const float *x, const float *xsum, int64_t k)
{
    switch (dtype) {
    case PT_Q8_0: return dot_q8_0(row, x, k);
    case PT_Q4_0: return dot_q4_0(row, x, xsum, k);
    default: return dot_q4_1(row, x, xsum, k);
    }
}
