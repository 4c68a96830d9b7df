/* dequant_formats.h — one value of a stored weight row as fp32, for every pt_dtype: f32, bf16,
 * f16, the GGUF blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) and NF4. The functions are
 * __host__ __device__: the CUDA kernels of dequant.cu call them on the GPU, and a plain host loop
 * calls the very same code so a CPU-only unit test can prove it equal to the CPU reference.
 *
 * They reproduce src/quant.c (ggml's dequantize_row_*) and src/nf4.c bit for bit: the same fp32
 * operations in the same order, each rounded on its own. nvcc contracts a*b+c into an fma by
 * default, so on the device every product and sum goes through __fmul_rn/__fadd_rn/__fsub_rn,
 * which are never fused; on the host plain operators suffice, as the CPU build does not contract
 * either (gcc with -std=c11 / -std=c++17 implies -ffp-contract=off). fp16 is decoded from its bits
 * exactly as quant_f16_to_f32 does (NaN payloads kept), not with the hardware conversion.
 *
 * Layouts are described at the CPU functions in src/quant.c and in include/ptrain/nf4.h; here each
 * format maps an index inside its block to the bits that hold it. Only nvcc compiles this file. */
#ifndef PTRAIN_DEQUANT_FORMATS_H
#define PTRAIN_DEQUANT_FORMATS_H

#include <stdint.h>
#include <string.h>

#include "ptrain/backend.h"

#ifdef __CUDACC__
#define PT_HD __host__ __device__
#else
#define PT_HD
#endif

/* Byte offset of the float `offset` in the NF4 buffer's header (nf4_header in src/nf4.c: char
 * magic[4], uint32 version, int64 rows, cols, nblocks, nnested, then float offset). The unit test
 * test_cuda_dequant checks the NF4 values bit for bit, which fails if this ever moves. */
enum { DQ_NF4_OFFSET_AT = 40 };

/* Where the values of a weight [n, k] live (host or device pointers, never dereferenced on the
 * other side). Block formats: row r starts at data + r * row_bytes. NF4: the parts of its buffer. */
typedef struct {
    pt_dtype dtype;
    int64_t k;        /* values per row */
    size_t row_bytes; /* block formats */
    const uint8_t *data;
    const float *nf4_quant_map, *nf4_nested_map, *nf4_nested_absmax, *nf4_offset;
    const uint8_t *nf4_codes, *nf4_packed;
} dq_weight;

/* ---- fp32 arithmetic that is never fused ---------------------------------------------------- */

static inline PT_HD float dq_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

static inline PT_HD float dq_add(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

static inline PT_HD float dq_sub(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

static inline PT_HD float dq_bits_to_f32(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

static inline PT_HD uint32_t dq_f32_to_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#endif
}

/* ---- scalar conversions --------------------------------------------------------------------- */

static inline PT_HD uint16_t dq_rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

static inline PT_HD uint32_t dq_rd32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* quant_f16_to_f32: exact. A subnormal man * 2^-24 is a normal fp32 (man < 2^10), so the one
 * product is exact and gives the same bits as quant.c's normalising loop. */
static inline PT_HD float dq_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0) return dq_bits_to_f32(sign | dq_f32_to_bits((float)man * 0x1p-24f));
    if (exp == 31) return dq_bits_to_f32(sign | 0x7f800000u | (man << 13));
    return dq_bits_to_f32(sign | ((exp + 127 - 15) << 23) | (man << 13));
}

static inline PT_HD float dq_bf16_to_f32(uint16_t b) { return dq_bits_to_f32((uint32_t)b << 16); }

/* ---- blocks of 32: p is the block, j in [0, 32) ---------------------------------------------- */

/* Q8_0 (34 bytes): fp16 d, int8 q[32]; x = q*d. */
static inline PT_HD float dq_q8_0(const uint8_t *p, int j)
{
    return dq_mul((float)(int8_t)p[2 + j], dq_f16_to_f32(dq_rd16(p)));
}

/* The 4-bit value j of 16 bytes of nibbles: low nibbles are values 0..15, high 16..31. */
static inline PT_HD int dq_nibble32(const uint8_t *qs, int j)
{
    return j < 16 ? qs[j] & 0x0f : qs[j - 16] >> 4;
}

/* Q4_0 (18 bytes): fp16 d, nibbles; x = (q-8)*d. */
static inline PT_HD float dq_q4_0(const uint8_t *p, int j)
{
    return dq_mul((float)(dq_nibble32(p + 2, j) - 8), dq_f16_to_f32(dq_rd16(p)));
}

/* Q4_1 (20 bytes): fp16 d, fp16 m, nibbles; x = q*d + m. */
static inline PT_HD float dq_q4_1(const uint8_t *p, int j)
{
    float d = dq_f16_to_f32(dq_rd16(p)), m = dq_f16_to_f32(dq_rd16(p + 2));
    return dq_add(dq_mul((float)dq_nibble32(p + 4, j), d), m);
}

/* Q5_0 (22 bytes: fp16 d, u32 qh, nibbles; x = (q-16)*d) and Q5_1 (24 bytes: fp16 d, fp16 m,
 * u32 qh, nibbles; x = q*d + m). Bit j of qh is the fifth bit of value j. */
static inline PT_HD float dq_q5(bool has_min, const uint8_t *p, int j)
{
    int head = has_min ? 4 : 2;
    uint32_t qh = dq_rd32(p + head);
    int q = dq_nibble32(p + head + 4, j) | (int)(((qh >> j) & 1) << 4);
    float d = dq_f16_to_f32(dq_rd16(p));
    if (has_min) return dq_add(dq_mul((float)q, d), dq_f16_to_f32(dq_rd16(p + 2)));
    return dq_mul((float)(q - 16), d);
}

/* ---- k-quant super-blocks of 256: p is the block, i in [0, 256) ------------------------------- */

/* Q2_K (84 bytes): scales[16] (low nibble scale, high nibble min), qs[64], fp16 d, fp16 dmin.
 * Value i: 128-half n = i/128 uses qs[32n..32n+31]; its bits 2*((i%128)/32) of byte i%32; scale
 * i/16. x = (d*sc)*q - dmin*m. */
static inline PT_HD float dq_q2_k(const uint8_t *p, int i)
{
    int is = i / 16, shift = 2 * ((i % 128) / 32), q = (p[16 + 32 * (i / 128) + i % 32] >> shift) & 3;
    float d = dq_f16_to_f32(dq_rd16(p + 80)), dmin = dq_f16_to_f32(dq_rd16(p + 82));
    float dl = dq_mul(d, (float)(p[is] & 0x0f)), ml = dq_mul(dmin, (float)(p[is] >> 4));
    return dq_sub(dq_mul(dl, (float)q), ml);
}

/* Q3_K (110 bytes): hmask[32], qs[64], 12 bytes of sixteen 6-bit scales (+32), fp16 d. Low bits as
 * Q2_K; the third bit is bit 4*(i/128) + (i%128)/32 of hmask[i%32] (clear: subtract 4).
 * x = (d*(scale-32))*q. */
static inline PT_HD float dq_q3_k(const uint8_t *p, int i)
{
    const uint8_t *s = p + 96;
    int is = i / 16, j = (i % 128) / 32, k = i % 32;
    int lo = is < 8 ? s[is] & 0x0f : s[is - 8] >> 4;
    int hi = (s[8 + is % 4] >> (2 * (is / 4))) & 3;
    int scale = (lo | (hi << 4)) - 32;
    unsigned bit = 1u << (4 * (i / 128) + j);
    int q = ((p[32 + 32 * (i / 128) + k] >> (2 * j)) & 3) - ((p[k] & bit) ? 0 : 4);
    float d = dq_f16_to_f32(dq_rd16(p + 108));
    return dq_mul(dq_mul(d, (float)scale), (float)q);
}

/* ggml's get_scale_min_k4 (as scale_min_k4 in quant.c). */
static inline PT_HD void dq_scale_min_k4(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Q4_K (144 bytes: fp16 d, fp16 dmin, 12 bytes of scales/mins, qs[128]) and Q5_K (176 bytes: the
 * same with qh[32] before qs). Sub-block j = i/32: byte 32*(i/64) + i%32 of qs, low nibble for
 * even j, high for odd; Q5_K's fifth bit is bit j of qh[i%32]. x = (d*sc)*q - dmin*m. */
static inline PT_HD float dq_q45_k(bool five, const uint8_t *p, int i)
{
    int j = i / 32, l = i % 32, sc, m;
    uint8_t b = p[(five ? 48 : 16) + 32 * (i / 64) + l];
    int q = ((j & 1) ? b >> 4 : b & 0x0f) + (five && ((p[16 + l] >> j) & 1) ? 16 : 0);
    dq_scale_min_k4(j, p + 4, &sc, &m);
    float d = dq_f16_to_f32(dq_rd16(p)), dmin = dq_f16_to_f32(dq_rd16(p + 2));
    float d1 = dq_mul(d, (float)sc), m1 = dq_mul(dmin, (float)m);
    return dq_sub(dq_mul(d1, (float)q), m1);
}

/* Q6_K (210 bytes): ql[128], qh[64], int8 scales[16], fp16 d. 128-half h = i/128 uses ql[64h..],
 * qh[32h..], scales[8h..]; quarter t = (i%128)/32, l = i%32: low 4 bits from ql[l + 32*(t&1)]
 * (low nibble for t < 2, high otherwise), high 2 bits (qh[l] >> 2t) & 3, scale l/16 + 2t.
 * x = (d*scale)*(q-32). */
static inline PT_HD float dq_q6_k(const uint8_t *p, int i)
{
    int h = i / 128, t = (i % 128) / 32, l = i % 32;
    const uint8_t *ql = p + 64 * h, *qh = p + 128 + 32 * h;
    const int8_t *sc = (const int8_t *)(p + 192 + 8 * h);
    uint8_t lb = ql[l + 32 * (t & 1)];
    int q = ((t < 2 ? lb & 0x0f : lb >> 4) | (((qh[l] >> (2 * t)) & 3) << 4)) - 32;
    float d = dq_f16_to_f32(dq_rd16(p + 208));
    return dq_mul(dq_mul(d, (float)sc[l / 16 + 2 * t]), (float)q);
}

/* ---- NF4: element g = row*k + col of the whole matrix ----------------------------------------- */

/* absmax = nested_map[code]*nested_absmax + offset (product, then sum), x = quant_map[nibble]*absmax;
 * element 2j is the high nibble of byte j. */
static inline PT_HD float dq_nf4(const dq_weight *w, int64_t g)
{
    int64_t b = g / 64;
    uint8_t byte = w->nf4_packed[g / 2];
    int nib = (g & 1) ? byte & 0x0f : byte >> 4;
    float absmax = dq_add(dq_mul(w->nf4_nested_map[w->nf4_codes[b]], w->nf4_nested_absmax[b / 256]),
                          *w->nf4_offset);
    return dq_mul(w->nf4_quant_map[nib], absmax);
}

/* ---- any format ---------------------------------------------------------------------------- */

/* Value [row, col] of w (both in range; col < w->k). */
static inline PT_HD float dq_value(const dq_weight *w, int64_t row, int64_t col)
{
    const uint8_t *r = w->data + (size_t)row * w->row_bytes;
    int j = (int)(col % 32), i = (int)(col % 256);
    switch (w->dtype) {
    case PT_F32: return ((const float *)(const void *)r)[col];
    case PT_BF16: return dq_bf16_to_f32(((const uint16_t *)(const void *)r)[col]);
    case PT_F16: return dq_f16_to_f32(((const uint16_t *)(const void *)r)[col]);
    case PT_Q8_0: return dq_q8_0(r + (col / 32) * 34, j);
    case PT_Q4_0: return dq_q4_0(r + (col / 32) * 18, j);
    case PT_Q4_1: return dq_q4_1(r + (col / 32) * 20, j);
    case PT_Q5_0: return dq_q5(false, r + (col / 32) * 22, j);
    case PT_Q5_1: return dq_q5(true, r + (col / 32) * 24, j);
    case PT_Q2_K: return dq_q2_k(r + (col / 256) * 84, i);
    case PT_Q3_K: return dq_q3_k(r + (col / 256) * 110, i);
    case PT_Q4_K: return dq_q45_k(false, r + (col / 256) * 144, i);
    case PT_Q5_K: return dq_q45_k(true, r + (col / 256) * 176, i);
    case PT_Q6_K: return dq_q6_k(r + (col / 256) * 210, i);
    case PT_NF4: return dq_nf4(w, row * w->k + col);
    default: return 0.0f; /* not reached: dequant.cu admits only the formats above */
    }
}

#endif
