/* dot.c — dot products straight from GGUF blocks (Q8_0, Q4_0, Q4_1) for the few-row matmul of
 * generation: per block of 32, sum_j x_j (d q_j + m) = d sum_j q_j x_j + m sum_j x_j, so a weight
 * is read as its 4 or 8 bits and never written out as a float. xsum holds sum_j x_j per block. */
#include <stdint.h>

#include "cpu.h"
#include "ptrain/quant.h"

static float f16(const uint8_t *p) { return quant_f16_to_f32((uint16_t)(p[0] | (p[1] << 8))); }

PT_CLONES static float dot_q8_0(const uint8_t *p, const float *x, int64_t k)
{
    float acc = 0;
    for (int64_t b = 0; b < k / 32; b++, p += 34, x += 32) {
        const int8_t *q = (const int8_t *)(p + 2);
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < 32; j++) s += (float)q[j] * x[j];
        acc += f16(p) * s;
    }
    return acc;
}

PT_CLONES static float dot_q4(const uint8_t *p, const float *x, const float *xsum, int64_t k, int has_min)
{
    int head = has_min ? 4 : 2;
    float acc = 0;
    for (int64_t b = 0; b < k / 32; b++, p += head + 16, x += 32) {
        const uint8_t *q = p + head;
        float s = 0;
#pragma omp simd reduction(+ : s)
        for (int j = 0; j < 16; j++) s += (float)(q[j] & 15) * x[j] + (float)(q[j] >> 4) * x[j + 16];
        float d = f16(p), m = has_min ? f16(p + 2) : -8.0f * d;
        acc += d * s + m * xsum[b];
    }
    return acc;
}

bool cpu_dot_supported(pt_dtype dtype) { return dtype == PT_Q8_0 || dtype == PT_Q4_0 || dtype == PT_Q4_1; }

void cpu_block_sums(const float *x, int64_t k, float *xsum)
{
    for (int64_t b = 0; b < k / 32; b++) {
        float s = 0;
        for (int j = 0; j < 32; j++) s += x[b * 32 + j];
        xsum[b] = s;
    }
}

float cpu_dot_row(pt_dtype dtype, const void *row, const float *x, const float *xsum, int64_t k)
{
    switch (dtype) {
    case PT_Q8_0: return dot_q8_0(row, x, k);
    case PT_Q4_0: return dot_q4(row, x, xsum, k, 0);
    default: return dot_q4(row, x, xsum, k, 1);
    }
}
