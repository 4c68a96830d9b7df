/* quant.c — fp16/bf16 conversions and the GGUF block formats: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 and
 * the k-quants Q4_K, Q5_K, Q6_K (quantize and dequantize), Q2_K and Q3_K (dequantize only). The
 * blocks are the structs of quant_blocks.h, which describes each layout. Dequantization follows
 * ggml's reference (dequantize_row_*) operation for operation, so the values match llama.cpp's bit
 * for bit. */
#include "ptrain/quant.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ptrain/quant_blocks.h"
#include "quant_search.h"

float quant_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) man <<= 1, exp--;
            bits = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t quant_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++;
    return (uint16_t)half;
}

float quant_bf16_to_f32(uint16_t b)
{
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t quant_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40); /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* One value of a dense f16 or bf16 row, which may sit at any byte of a file. */
static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* Block i of a row, copied out: quant.c's callers pass tensors of GGUF files, which may start at an
 * odd byte (general.alignment 1), where a block struct cannot be read in place (quant_blocks.h).
 * The copy also tells the compiler that the block does not alias the output, so the decoding
 * loops vectorize. */
static void block_get(void *block, const void *row, int64_t i, size_t size)
{
    memcpy(block, (const uint8_t *)row + (size_t)i * size, size);
}

/* Block i of a row written from a block made aside (the row may start at any byte, too). */
static void block_put(void *row, int64_t i, const void *block, size_t size)
{
    memcpy((uint8_t *)row + (size_t)i * size, block, size);
}

static void dequant_q8_0(const block_q8_0 *b, float *y)
{
    float d = quant_f16_to_f32(b->d);
    for (int j = 0; j < QK; j++) y[j] = (float)b->qs[j] * d;
}

static void dequant_q4_0(const block_q4_0 *b, float *y)
{
    float d = quant_f16_to_f32(b->d);
    for (int j = 0; j < QK / 2; j++) {
        y[j] = (float)((b->qs[j] & 0x0f) - 8) * d;
        y[j + QK / 2] = (float)((b->qs[j] >> 4) - 8) * d;
    }
}

static void dequant_mxfp4(const block_mxfp4 *b, float *y)
{
    for (int j = 0; j < QK / 2; j++) {
        y[j] = mxfp4_value(b->e, b->qs[j] & 0x0f);
        y[j + QK / 2] = mxfp4_value(b->e, b->qs[j] >> 4);
    }
}

static void dequant_q4_1(const block_q4_1 *b, float *y)
{
    float d = quant_f16_to_f32(b->d), m = quant_f16_to_f32(b->m);
    for (int j = 0; j < QK / 2; j++) {
        y[j] = (float)(b->qs[j] & 0x0f) * d + m;
        y[j + QK / 2] = (float)(b->qs[j] >> 4) * d + m;
    }
}

/* Q5_0 (x = d*(q-16)) or, has_min, Q5_1 (x = d*q + m), from the fields both blocks have. */
static void dequant_q5(bool has_min, float d, float m, const uint8_t *qh4, const uint8_t *qs, float *y)
{
    uint32_t qh = (uint32_t)qh4[0] | (uint32_t)qh4[1] << 8 | (uint32_t)qh4[2] << 16 | (uint32_t)qh4[3] << 24;
    for (int j = 0; j < 16; j++) {
        int q0 = (qs[j] & 0x0f) | (int)(((qh >> j) & 1) << 4);
        int q1 = (qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
        if (has_min) {
            y[j] = (float)q0 * d + m;
            y[j + 16] = (float)q1 * d + m;
        } else {
            y[j] = (float)(q0 - 16) * d;
            y[j + 16] = (float)(q1 - 16) * d;
        }
    }
}

static void dequant_q5_0(const block_q5_0 *b, float *y)
{
    dequant_q5(false, quant_f16_to_f32(b->d), 0.0f, b->qh, b->qs, y);
}

static void dequant_q5_1(const block_q5_1 *b, float *y)
{
    dequant_q5(true, quant_f16_to_f32(b->d), quant_f16_to_f32(b->m), b->qh, b->qs, y);
}

static void dequant_q2_k(const block_q2_K *b, float *y)
{
    const uint8_t *sc = b->scales, *q = b->qs;
    float d = quant_f16_to_f32(b->d), dmin = quant_f16_to_f32(b->dmin);
    int is = 0;
    for (int n = 0; n < QK_K; n += 128, q += 32)
        for (int shift = 0; shift < 8; shift += 2)
            for (int half = 0; half < 2; half++, is++) {
                float dl = d * (float)(sc[is] & 0x0f), ml = dmin * (float)(sc[is] >> 4);
                for (int l = 0; l < 16; l++) *y++ = dl * (float)((q[l + 16 * half] >> shift) & 3) - ml;
            }
}

static void dequant_q3_k(const block_q3_K *b, float *y)
{
    const uint8_t *hm = b->hmask, *q = b->qs;
    float d = quant_f16_to_f32(b->d);
    int scale[16];
    for (int j = 0; j < 16; j++) scale[j] = block_q3_K_scale(b->scales, j);
    int is = 0;
    unsigned bit = 1;
    for (int n = 0; n < QK_K; n += 128, q += 32)
        for (int shift = 0; shift < 8; shift += 2, bit <<= 1)
            for (int half = 0; half < 2; half++, is++) {
                float dl = d * (float)scale[is];
                for (int l = 0; l < 16; l++) {
                    int k = l + 16 * half;
                    *y++ = dl * (float)(((q[k] >> shift) & 3) - ((hm[k] & bit) ? 0 : 4));
                }
            }
}

/* Q4_K or, given the fifth bits qh, Q5_K, from the fields both blocks have. Inlined into each, so
 * that the loops are vectorized for the one format. */
static inline __attribute__((always_inline)) void dequant_k4(float d, float dmin, const uint8_t *scales,
                                                             const uint8_t *qh, const uint8_t *qs, float *y)
{
    const uint8_t *q = qs;
    unsigned u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, q += 32, u1 <<= 2, u2 <<= 2) {
        int sc, m;
        block_k4_scale_min(is, scales, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        block_k4_scale_min(is + 1, scales, &sc, &m);
        float d2 = d * (float)sc, m2 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int v = (q[l] & 0x0f) + (qh && (qh[l] & u1) ? 16 : 0);
            *y++ = d1 * (float)v - m1;
        }
        for (int l = 0; l < 32; l++) {
            int v = (q[l] >> 4) + (qh && (qh[l] & u2) ? 16 : 0);
            *y++ = d2 * (float)v - m2;
        }
    }
}

static void dequant_q4_k(const block_q4_K *b, float *y)
{
    dequant_k4(quant_f16_to_f32(b->d), quant_f16_to_f32(b->dmin), b->scales, NULL, b->qs, y);
}

static void dequant_q5_k(const block_q5_K *b, float *y)
{
    dequant_k4(quant_f16_to_f32(b->d), quant_f16_to_f32(b->dmin), b->scales, b->qh, b->qs, y);
}

static void dequant_q6_k(const block_q6_K *b, float *y)
{
    const uint8_t *ql = b->ql, *qh = b->qh;
    const int8_t *sc = b->scales;
    float d = quant_f16_to_f32(b->d);
    for (int n = 0; n < QK_K; n += 128, y += 128, ql += 64, qh += 32, sc += 8)
        for (int is = 0; is < 2; is++) /* ggml's is = l / 16, as a loop so that the inner one vectorizes */
            for (int l = 16 * is; l < 16 * is + 16; l++) {
                int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
                int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
                int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                y[l] = d * (float)sc[is] * (float)q1;
                y[l + 32] = d * (float)sc[is + 2] * (float)q2;
                y[l + 64] = d * (float)sc[is + 4] * (float)q3;
                y[l + 96] = d * (float)sc[is + 6] * (float)q4;
            }
}

/* Every block of a row (n values in, at src; dst out): copied out, then decoded by fn. */
#define DEQUANT_BLOCKS(type, values, fn)                                                           \
    do {                                                                                           \
        for (int64_t i = 0; i < n / (values); i++) {                                               \
            type blk;                                                                              \
            block_get(&blk, src, i, sizeof blk);                                                   \
            fn(&blk, dst + i * (values));                                                          \
        }                                                                                          \
    } while (0)

pt_status quant_dequantize_row(pt_dtype dtype, const void *src, float *dst, int64_t n)
{
    const uint8_t *p = src;
    if (dtype_size_bytes(dtype, n) == 0 && n > 0)
        return ERR(PT_ERR_INTERNAL, "%lld values are not whole %s blocks", (long long)n, dtype_name(dtype));
    switch (dtype) {
    case PT_F32: memcpy(dst, src, (size_t)n * 4); return PT_OK;
    case PT_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = quant_f16_to_f32(rd16(p + 2 * i));
        return PT_OK;
    case PT_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = quant_bf16_to_f32(rd16(p + 2 * i));
        return PT_OK;
    case PT_Q8_0: DEQUANT_BLOCKS(block_q8_0, QK, dequant_q8_0); return PT_OK;
    case PT_Q4_0: DEQUANT_BLOCKS(block_q4_0, QK, dequant_q4_0); return PT_OK;
    case PT_MXFP4: DEQUANT_BLOCKS(block_mxfp4, QK, dequant_mxfp4); return PT_OK;
    case PT_Q4_1: DEQUANT_BLOCKS(block_q4_1, QK, dequant_q4_1); return PT_OK;
    case PT_Q5_0: DEQUANT_BLOCKS(block_q5_0, QK, dequant_q5_0); return PT_OK;
    case PT_Q5_1: DEQUANT_BLOCKS(block_q5_1, QK, dequant_q5_1); return PT_OK;
    case PT_Q2_K: DEQUANT_BLOCKS(block_q2_K, QK_K, dequant_q2_k); return PT_OK;
    case PT_Q3_K: DEQUANT_BLOCKS(block_q3_K, QK_K, dequant_q3_k); return PT_OK;
    case PT_Q4_K: DEQUANT_BLOCKS(block_q4_K, QK_K, dequant_q4_k); return PT_OK;
    case PT_Q5_K: DEQUANT_BLOCKS(block_q5_K, QK_K, dequant_q5_k); return PT_OK;
    case PT_Q6_K: DEQUANT_BLOCKS(block_q6_K, QK_K, dequant_q6_k); return PT_OK;
    default: return ERR(PT_ERR_UNSUPPORTED, "no dequantizer for %s weights yet", dtype_name(dtype));
    }
}

static void quantize_q8_0(const float *x, block_q8_0 *b)
{
    float amax = 0;
    for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
    float d = amax / 127.0f, inv = d ? 1.0f / d : 0.0f;
    b->d = quant_f32_to_f16(d);
    for (int j = 0; j < QK; j++) b->qs[j] = (int8_t)lroundf(x[j] * inv);
}

/* One block of 32 values into the nibbles qs of Q4_0 (d = the largest-magnitude value / -8) or,
 * has_min, Q4_1 (d = (max - min)/15, *m = min); *d and *m get the fp32 scale and min. */
static void quantize_q4(bool has_min, const float *x, float *d_out, float *m_out, uint8_t *qs)
{
    float lo = x[0], hi = x[0], amax = 0, signed_max = 0;
    for (int j = 0; j < QK; j++) { /* compared as ggml compares (fminf/fmaxf may pick either signed zero) */
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), signed_max = x[j];
    }
    float d = has_min ? (hi - lo) / 15.0f : signed_max / -8.0f, m = has_min ? lo : 0.0f;
    /* as ggml rounds: Q4_0 x/d + 8.5, Q4_1 (x - min)/d + 0.5, truncated (byte-identical files) */
    float inv = d ? 1.0f / d : 0.0f, shift = has_min ? m : 0.0f, add = has_min ? 0.5f : 8.5f;
    for (int j = 0; j < QK / 2; j++) {
        int a = (int)(int8_t)((x[j] - shift) * inv + add), b = (int)(int8_t)((x[j + QK / 2] - shift) * inv + add);
        a = a > 15 ? 15 : a;
        b = b > 15 ? 15 : b;
        qs[j] = (uint8_t)(a | (b << 4));
    }
    *d_out = d, *m_out = m;
}

static void quantize_q4_0(const float *x, block_q4_0 *b)
{
    float d, m;
    quantize_q4(false, x, &d, &m, b->qs);
    b->d = quant_f32_to_f16(d);
}

static void quantize_q4_1(const float *x, block_q4_1 *b)
{
    float d, m;
    quantize_q4(true, x, &d, &m, b->qs);
    b->d = quant_f32_to_f16(d);
    b->m = quant_f32_to_f16(m);
}

/* Q5_0/Q5_1 levels (0..31) into the fifth bits qh and the nibbles qs, as dequant_q5 reads them. */
void quant_pack_q5_levels(const uint8_t *L, uint8_t *qh, uint8_t *qs)
{
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((L[j] & 0x0f) | ((L[j + 16] & 0x0f) << 4));
        h |= (uint32_t)(L[j] >> 4) << j | (uint32_t)(L[j + 16] >> 4) << (j + 16);
    }
    for (int i = 0; i < 4; i++) qh[i] = (uint8_t)(h >> (8 * i));
}

/* One block of 32 values into the qh and qs of Q5_0 (d = the largest-magnitude value / -16, levels
 * x/d + 16) or Q5_1 (d = (max - min)/31, m = min, levels (x - min)/d), rounding as ggml's
 * quantize_row_q5_0_ref and q5_1_ref do: add 0.5 and truncate, with the fp32 (not fp16) d and min,
 * which *d and *m get. */
static void quantize_q5(bool has_min, const float *x, float *d_out, float *m_out, uint8_t *qh, uint8_t *qs)
{
    float lo = x[0], hi = x[0], amax = 0, signed_max = 0; /* first of equals wins, as in ggml */
    for (int j = 0; j < 32; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
        if (fabsf(x[j]) > amax) amax = fabsf(x[j]), signed_max = x[j];
    }
    float d = has_min ? (hi - lo) / 31.0f : signed_max / -16.0f, m = has_min ? lo : 0.0f;
    float inv = d ? 1.0f / d : 0.0f, bias = has_min ? 0.5f : 16.5f;
    uint8_t L[32];
    for (int j = 0; j < 32; j++) {
        float v = (has_min ? (x[j] - m) * inv : x[j] * inv) + bias;
        L[j] = (uint8_t)(v <= 0 ? 0 : v >= 31 ? 31 : (int)v); /* truncated, as ggml's casts */
    }
    quant_pack_q5_levels(L, qh, qs);
    *d_out = d, *m_out = m;
}

static void quantize_q5_0(const float *x, block_q5_0 *b)
{
    float d, m;
    quantize_q5(false, x, &d, &m, b->qh, b->qs);
    b->d = quant_f32_to_f16(d);
}

static void quantize_q5_1(const float *x, block_q5_1 *b)
{
    float d, m;
    quantize_q5(true, x, &d, &m, b->qh, b->qs);
    b->d = quant_f32_to_f16(d);
    b->m = quant_f32_to_f16(m);
}

/* ---- k-quant quantizers, after ggml's quantize_row_q4_K_ref / q5_K_ref / q6_K_ref ---- */

static int nearest_int(float v) { return (int)lrintf(v); } /* round half to even, as ggml */

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* L[i] = round(iscale * (x[i] - min)), clamped to 0..nmax. */
static void affine_levels(int n, int nmax, const float *x, float iscale, float min, uint8_t *L)
{
    for (int i = 0; i < n; i++) L[i] = (uint8_t)clampi(nearest_int(iscale * (x[i] - min)), 0, nmax);
}

/* Weighted squared error of x against scale*L + min. */
static float affine_error(int n, const float *x, const float *w, const uint8_t *L, float scale, float min)
{
    float err = 0;
    for (int i = 0; i < n; i++) {
        float diff = scale * (float)L[i] + min - x[i];
        err += w[i] * (diff * diff);
    }
    return err;
}

/* Weighted least-squares scale and min for x ~ scale*L + min with the levels fixed; a positive min
 * is clamped to zero (and the scale refit alone). False when the levels are all equal. */
static bool affine_fit(int n, const float *x, const float *w, const uint8_t *L, float *scale, float *min)
{
    float sw = 0, sx = 0, sl = 0, sl2 = 0, sxl = 0;
    for (int i = 0; i < n; i++) {
        float l = (float)L[i];
        sw += w[i], sx += w[i] * x[i], sl += w[i] * l, sl2 += w[i] * l * l, sxl += w[i] * l * x[i];
    }
    float det = sw * sl2 - sl * sl;
    if (det <= 0) return false;
    *scale = (sw * sxl - sx * sl) / det;
    *min = (sl2 * sx - sl * sxl) / det;
    if (*min > 0) *min = 0, *scale = sxl / sl2;
    return true;
}

/* make_qkx2_quants: x ~ scale*L - mn, L in 0..nmax, mn >= 0. Starts from the min/max grid, then
 * for k = 0..nstep rounds against the inverse scale (rmin + rdelta*k + nmax) / (max - min) and the
 * best min so far, refits scale and min to those levels by least squares and keeps whichever has
 * the lowest weighted error (as ggml does, so the search walks on from each improvement). Returns
 * the scale; *mn gets the (non-negative) offset. */
float quant_search_affine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *mn, float rmin,
                          float rdelta, int nstep)
{
    float lo = x[0], hi = x[0];
    for (int i = 1; i < n; i++) { /* compared as ggml compares: the same signed zero */
        if (x[i] < lo) lo = x[i];
        if (x[i] > hi) hi = x[i];
    }
    if (lo > 0) lo = 0;
    if (hi == lo) {
        memset(L, 0, (size_t)n);
        *mn = -lo;
        return 0;
    }
    float iscale = (float)nmax / (hi - lo), scale = 1.0f / iscale, min = lo;
    affine_levels(n, nmax, x, iscale, min, L);
    float best = affine_error(n, x, w, L, scale, min);
    uint8_t cand[32];
    for (int k = 0; k <= nstep; k++) {
        float s, m;
        affine_levels(n, nmax, x, (rmin + rdelta * (float)k + (float)nmax) / (hi - min), min, cand);
        if (!affine_fit(n, x, w, cand, &s, &m)) continue;
        float err = affine_error(n, x, w, cand, s, m);
        if (err < best) best = err, scale = s, min = m, memcpy(L, cand, (size_t)n);
    }
    *mn = -min;
    return scale;
}

/* Q4_K/Q5_K sub-block weights: the sub-block's RMS plus |x|, so large values count more. */
static void subblock_weights(const float *x, float *w)
{
    float sum2 = 0;
    for (int i = 0; i < 32; i++) sum2 += x[i] * x[i];
    float av = sqrtf(sum2 / 32.0f);
    for (int i = 0; i < 32; i++) w[i] = av + fabsf(x[i]);
}

/* Inverse of block_k4_scale_min: store sub-block j's 6-bit scale and min into the 12 packed bytes
 * (which start zeroed). */
void quant_pack_scale_min_k4(int j, int sc, int m, uint8_t *q)
{
    if (j < 4) {
        q[j] |= (uint8_t)sc;
        q[j + 4] |= (uint8_t)m;
    } else {
        q[j + 4] = (uint8_t)((sc & 0x0f) | ((m & 0x0f) << 4));
        q[j - 4] |= (uint8_t)((sc >> 4) << 6);
        q[j] |= (uint8_t)((m >> 4) << 6);
    }
}

/* Quantize the 8 sub-block scales and mins to 6 bits against the super-block's fp16 d and dmin
 * (the largest of each maps to 63): the head of a Q4_K/Q5_K block (scales start zeroed). */
static void pack_k4_head(const float *scale, const float *min, uint16_t *d, uint16_t *dmin, uint8_t *scales)
{
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; j++) { /* compared as ggml compares: a min of -0 leaves max_min +0 (dmin's sign bit) */
        if (scale[j] > max_scale) max_scale = scale[j];
        if (min[j] > max_min) max_min = min[j];
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0, inv_min = max_min > 0 ? 63.0f / max_min : 0;
    for (int j = 0; j < 8; j++)
        quant_pack_scale_min_k4(j, clampi(nearest_int(inv_scale * scale[j]), 0, 63),
                          clampi(nearest_int(inv_min * min[j]), 0, 63), scales);
    *d = quant_f32_to_f16(max_scale / 63.0f);
    *dmin = quant_f32_to_f16(max_min / 63.0f);
}

/* Redo the levels against the scales as stored (quantized), as the decoder will see them. A
 * sub-block whose stored scale is zero keeps its levels. */
void quant_requant_k4(int nmax, const float *x, uint16_t d16, uint16_t dmin16, const uint8_t *scales, uint8_t *L)
{
    float d = quant_f16_to_f32(d16), dmin = quant_f16_to_f32(dmin16);
    for (int j = 0; j < 8; j++) {
        int sc, m;
        block_k4_scale_min(j, scales, &sc, &m);
        float dl = d * (float)sc, ml = dmin * (float)m;
        if (dl == 0) continue;
        for (int i = 0; i < 32; i++)
            L[32 * j + i] = (uint8_t)clampi(nearest_int((x[32 * j + i] + ml) / dl), 0, nmax);
    }
}

/* Q4_K/Q5_K levels into qs and, for Q5_K, the fifth bits into qh (zeroed before), the layout
 * dequant_k4 reads. */
void quant_pack_k4_levels(const uint8_t *L, uint8_t *qh, uint8_t *qs)
{
    for (int g = 0; g < 4; g++)
        for (int l = 0; l < 32; l++) {
            int lo = L[64 * g + l], hi = L[64 * g + 32 + l];
            qs[32 * g + l] = (uint8_t)((lo & 0x0f) | ((hi & 0x0f) << 4));
            if (qh) qh[l] |= (uint8_t)(((lo >> 4) << (2 * g)) | ((hi >> 4) << (2 * g + 1)));
        }
}

/* One super-block of 256 values into the head of a Q4_K block (Q5_K when five) and its levels L:
 * search each 32-value sub-block's scale and min (make_qkx2_quants), quantize those to 6 bits,
 * then requantize the values against them. The head's scales start zeroed. */
static void quantize_k4(bool five, const float *x, uint16_t *d, uint16_t *dmin, uint8_t *scales, uint8_t *L)
{
    int nmax = five ? 31 : 15;
    float scale[8], min[8], w[32];
    for (int j = 0; j < 8; j++) {
        subblock_weights(x + 32 * j, w);
        scale[j] = quant_search_affine(32, nmax, x + 32 * j, w, L + 32 * j, &min[j], five ? -0.5f : -1.0f, 0.1f,
                               five ? 15 : 20);
    }
    pack_k4_head(scale, min, d, dmin, scales);
    quant_requant_k4(nmax, x, *d, *dmin, scales, L);
}

static void quantize_q4_k(const float *x, block_q4_K *b)
{
    uint8_t L[QK_K];
    memset(b, 0, sizeof *b);
    quantize_k4(false, x, &b->d, &b->dmin, b->scales, L);
    quant_pack_k4_levels(L, NULL, b->qs);
}

static void quantize_q5_k(const float *x, block_q5_K *b)
{
    uint8_t L[QK_K];
    memset(b, 0, sizeof *b);
    quantize_k4(true, x, &b->d, &b->dmin, b->scales, L);
    quant_pack_k4_levels(L, b->qh, b->qs);
}

/* Signed levels round(iscale * x) clamped to -nmax..nmax-1, stored offset by nmax in L, and the
 * sums (weighted by qw, or x^2 without) the least-squares scale sum(w x l) / sum(w l^2) needs. */
static void signed_levels(int n, int nmax, const float *x, const float *qw, float iscale, uint8_t *L,
                          float *sumlx, float *suml2)
{
    *sumlx = *suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = clampi(nearest_int(iscale * x[i]), -nmax, nmax - 1);
        float w = qw ? qw[i] : x[i] * x[i];
        L[i] = (uint8_t)(l + nmax);
        *sumlx += w * x[i] * (float)l, *suml2 += w * (float)l * (float)l;
    }
}

/* make_qx_quants with rmse_type 1: x ~ scale*(L - nmax), the value of largest magnitude mapped to
 * -nmax. Tries the inverse scales -(nmax + 0.1k) / max for k = -9..9 and keeps the one whose
 * least-squares scale (weights qw, or x^2 when qw is NULL) leaves the least error. Returns the
 * scale (0 for a zero sub-block, whose levels are then 0, as ggml leaves them). */
float quant_search_signed(int n, int nmax, const float *x, const float *qw, uint8_t *L)
{
    float amax = 0, max = 0;
    for (int i = 0; i < n; i++)
        if (fabsf(x[i]) > amax) amax = fabsf(x[i]), max = x[i];
    if (amax < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float sumlx, suml2;
    signed_levels(n, nmax, x, qw, -(float)nmax / max, L, &sumlx, &suml2);
    float scale = suml2 > 0 ? sumlx / suml2 : 0, best = scale * sumlx;
    uint8_t cand[32]; /* n <= 32 */
    for (int k = -9; k <= 9; k++) {
        if (k == 0) continue;
        signed_levels(n, nmax, x, qw, -((float)nmax + 0.1f * (float)k) / max, cand, &sumlx, &suml2);
        if (suml2 > 0 && sumlx * sumlx > best * suml2)
            scale = sumlx / suml2, best = scale * sumlx, memcpy(L, cand, (size_t)n);
    }
    return scale;
}

/* Q6_K levels (0..63) into ql (low 4 bits) and qh (high 2 bits), the layout dequant_q6_k reads. */
static void pack_q6_levels(const uint8_t *L, block_q6_K *b)
{
    for (int h = 0; h < 2; h++, L += 128) {
        uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
        for (int l = 0; l < 32; l++) {
            ql[l] = (uint8_t)((L[l] & 0x0f) | ((L[l + 64] & 0x0f) << 4));
            ql[l + 32] = (uint8_t)((L[l + 32] & 0x0f) | ((L[l + 96] & 0x0f) << 4));
            qh[l] = (uint8_t)((L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) |
                              ((L[l + 96] >> 4) << 6));
        }
    }
}

/* One Q6_K super-block of 256 values: search each 16-value sub-block's scale (make_qx_quants,
 * weighted by qw when given: an importance matrix's 256 values), store them as int8 against one
 * fp16 d (the largest magnitude maps to -128), then requantize the values against the stored
 * scales. */
void quant_q6_k_block(const float *x, const float *qw, block_q6_K *b)
{
    uint8_t L[QK_K];
    float scale[16], max_scale = 0, amax = 0;
    for (int j = 0; j < 16; j++) {
        scale[j] = quant_search_signed(16, 32, x + 16 * j, qw ? qw + 16 * j : NULL, L + 16 * j);
        if (fabsf(scale[j]) > amax) amax = fabsf(scale[j]), max_scale = scale[j];
    }
    memset(b, 0, sizeof *b);
    if (amax < 1e-15f) return; /* all zero: d = 0 */
    float iscale = -128.0f / max_scale;
    b->d = quant_f32_to_f16(1.0f / iscale);
    for (int j = 0; j < 16; j++) b->scales[j] = (int8_t)clampi(nearest_int(iscale * scale[j]), -128, 127);
    float d = quant_f16_to_f32(b->d);
    for (int j = 0; j < 16; j++) {
        float dl = d * (float)b->scales[j];
        if (dl == 0) continue;
        for (int i = 0; i < 16; i++)
            L[16 * j + i] = (uint8_t)(clampi(nearest_int(x[16 * j + i] / dl), -32, 31) + 32);
    }
    pack_q6_levels(L, b);
}

static void quantize_q6_k(const float *x, block_q6_K *b) { quant_q6_k_block(x, NULL, b); }

/* Every block of a row (n values in, at src; dst out): encoded by fn aside, then copied in. */
#define QUANTIZE_BLOCKS(type, values, fn)                                                          \
    do {                                                                                           \
        for (int64_t i = 0; i < n / (values); i++) {                                               \
            type blk;                                                                              \
            fn(src + i * (values), &blk);                                                          \
            block_put(dst, i, &blk, sizeof blk);                                                   \
        }                                                                                          \
    } while (0)

pt_status quant_quantize_row(pt_dtype dtype, const float *src, void *dst, int64_t n)
{
    uint8_t *p = dst;
    if (dtype_size_bytes(dtype, n) == 0 && n > 0)
        return ERR(PT_ERR_INTERNAL, "%lld values are not whole %s blocks", (long long)n, dtype_name(dtype));
    switch (dtype) {
    case PT_F32: memcpy(dst, src, (size_t)n * 4); return PT_OK;
    case PT_F16:
        for (int64_t i = 0; i < n; i++) wr16(p + 2 * i, quant_f32_to_f16(src[i]));
        return PT_OK;
    case PT_BF16:
        for (int64_t i = 0; i < n; i++) wr16(p + 2 * i, quant_f32_to_bf16(src[i]));
        return PT_OK;
    case PT_Q8_0: QUANTIZE_BLOCKS(block_q8_0, QK, quantize_q8_0); return PT_OK;
    case PT_Q4_0: QUANTIZE_BLOCKS(block_q4_0, QK, quantize_q4_0); return PT_OK;
    case PT_Q4_1: QUANTIZE_BLOCKS(block_q4_1, QK, quantize_q4_1); return PT_OK;
    case PT_Q5_0: QUANTIZE_BLOCKS(block_q5_0, QK, quantize_q5_0); return PT_OK;
    case PT_Q5_1: QUANTIZE_BLOCKS(block_q5_1, QK, quantize_q5_1); return PT_OK;
    case PT_Q4_K: QUANTIZE_BLOCKS(block_q4_K, QK_K, quantize_q4_k); return PT_OK;
    case PT_Q5_K: QUANTIZE_BLOCKS(block_q5_K, QK_K, quantize_q5_k); return PT_OK;
    case PT_Q6_K: QUANTIZE_BLOCKS(block_q6_K, QK_K, quantize_q6_k); return PT_OK;
    default: return ERR(PT_ERR_UNSUPPORTED, "no quantizer for %s weights yet", dtype_name(dtype));
    }
}
