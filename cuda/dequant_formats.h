/* dequant_formats.h — one value of a stored weight row as fp32, for every pt_dtype: f32, bf16,
 * f16, the GGUF blocks (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K..Q6_K) and NF4. The functions are
 * __host__ __device__: the CUDA kernels of dequant.cu call them on the GPU, and a plain host loop
 * calls the very same code so a CPU-only unit test can prove it equal to the CPU reference.
 *
 * They reproduce src/backend/quant.c (ggml's dequantize_row_*) and src/backend/nf4.c bit for bit: the same fp32
 * operations in the same order, each rounded on its own. nvcc contracts a*b+c into an fma by
 * default, so on the device every product and sum goes through __fmul_rn/__fadd_rn/__fsub_rn,
 * which are never fused; on the host plain operators suffice, as the CPU build does not contract
 * either (gcc with -std=c11 / -std=c++17 implies -ffp-contract=off). fp16 is decoded from its bits
 * exactly as quant_f16_to_f32 does (NaN payloads kept), not with the hardware conversion.
 *
 * The blocks are the structs of include/ptrain/quant_blocks.h (which src/backend/quant.c reads too), read in
 * place: the backend's memory is aligned for any type and rows are whole blocks, so a fp16 field is
 * one 16-bit load. The packed k-quant scales are unpacked by the header's block_k4_scale_min and
 * block_q3_K_scale, which the CPU calls as well. What stays written twice, here and in src/backend/quant.c,
 * is the fp32 arithmetic of each decode: the CPU decodes a block at a time in ggml's loops, a thread
 * here one value, with products and sums that must not be fused on the device (dq_mul, dq_add). The
 * NF4 layout is in include/ptrain/nf4.h. Only nvcc (and the emulator's host C++) compiles this file. */
#ifndef PTRAIN_DEQUANT_FORMATS_H
#define PTRAIN_DEQUANT_FORMATS_H

#include <stdint.h>
#include <string.h>

#include "ptrain/backend.h"
#include "ptrain/quant_blocks.h"

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

/* The four bytes of a Q5 block's qh as one little-endian uint32 (not 4-byte aligned in Q5_0). */
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

/* ---- blocks of QK: value j in [0, 32) of block b (layouts in quant_blocks.h) --------------- */

static inline PT_HD float dq_q8_0(const block_q8_0 *b, int j)
{
    return dq_mul((float)b->qs[j], dq_f16_to_f32(b->d));
}

/* The 4-bit value j of 16 bytes of nibbles: low nibbles are values 0..15, high 16..31. */
static inline PT_HD int dq_nibble32(const uint8_t *qs, int j)
{
    return j < QK / 2 ? qs[j] & 0x0f : qs[j - QK / 2] >> 4;
}

static inline PT_HD float dq_mxfp4(const block_mxfp4 *b, int j) { return mxfp4_value(b->e, dq_nibble32(b->qs, j)); }

static inline PT_HD float dq_q4_0(const block_q4_0 *b, int j)
{
    return dq_mul((float)(dq_nibble32(b->qs, j) - 8), dq_f16_to_f32(b->d));
}

static inline PT_HD float dq_q4_1(const block_q4_1 *b, int j)
{
    float d = dq_f16_to_f32(b->d), m = dq_f16_to_f32(b->m);
    return dq_add(dq_mul((float)dq_nibble32(b->qs, j), d), m);
}

/* The 5-bit level j of a Q5_0/Q5_1 block: its nibble, and bit j of qh as the fifth bit. */
static inline PT_HD int dq_q5_level(const uint8_t *qh, const uint8_t *qs, int j)
{
    return dq_nibble32(qs, j) | (int)(((dq_rd32(qh) >> j) & 1) << 4);
}

static inline PT_HD float dq_q5_0(const block_q5_0 *b, int j)
{
    return dq_mul((float)(dq_q5_level(b->qh, b->qs, j) - 16), dq_f16_to_f32(b->d));
}

static inline PT_HD float dq_q5_1(const block_q5_1 *b, int j)
{
    return dq_add(dq_mul((float)dq_q5_level(b->qh, b->qs, j), dq_f16_to_f32(b->d)), dq_f16_to_f32(b->m));
}

/* ---- k-quant super-blocks of QK_K: value i in [0, 256) of block b ----------------------------- */

static inline PT_HD float dq_q2_k(const block_q2_K *b, int i)
{
    int is = i / 16, shift = 2 * ((i % 128) / 32), q = (b->qs[32 * (i / 128) + i % 32] >> shift) & 3;
    float d = dq_f16_to_f32(b->d), dmin = dq_f16_to_f32(b->dmin);
    float dl = dq_mul(d, (float)(b->scales[is] & 0x0f)), ml = dq_mul(dmin, (float)(b->scales[is] >> 4));
    return dq_sub(dq_mul(dl, (float)q), ml);
}

static inline PT_HD float dq_q3_k(const block_q3_K *b, int i)
{
    int j = (i % 128) / 32, k = i % 32;
    int scale = block_q3_K_scale(b->scales, i / 16);
    unsigned bit = 1u << (4 * (i / 128) + j);
    int q = ((b->qs[32 * (i / 128) + k] >> (2 * j)) & 3) - ((b->hmask[k] & bit) ? 0 : 4);
    float d = dq_f16_to_f32(b->d);
    return dq_mul(dq_mul(d, (float)scale), (float)q);
}

/* Q4_K, or Q5_K given its fifth bits qh, from the fields both blocks have: sub-block j = i/32 is
 * byte 32*(i/64) + i%32 of qs, low nibble for even j, high for odd; the fifth bit is bit j of
 * qh[i%32]. */
static inline PT_HD float dq_k4(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qh,
                                const uint8_t *qs, int i)
{
    int j = i / 32, l = i % 32, sc, m;
    uint8_t b = qs[32 * (i / 64) + l];
    int q = ((j & 1) ? b >> 4 : b & 0x0f) + (qh && ((qh[l] >> j) & 1) ? 16 : 0);
    block_k4_scale_min(j, scales, &sc, &m);
    float d = dq_f16_to_f32(d16), dmin = dq_f16_to_f32(dmin16);
    float d1 = dq_mul(d, (float)sc), m1 = dq_mul(dmin, (float)m);
    return dq_sub(dq_mul(d1, (float)q), m1);
}

static inline PT_HD float dq_q4_k(const block_q4_K *b, int i)
{
    return dq_k4(b->d, b->dmin, b->scales, NULL, b->qs, i);
}

static inline PT_HD float dq_q5_k(const block_q5_K *b, int i)
{
    return dq_k4(b->d, b->dmin, b->scales, b->qh, b->qs, i);
}

static inline PT_HD float dq_q6_k(const block_q6_K *b, int i)
{
    int h = i / 128, t = (i % 128) / 32, l = i % 32;
    const uint8_t *ql = b->ql + 64 * h, *qh = b->qh + 32 * h;
    const int8_t *sc = b->scales + 8 * h;
    uint8_t lb = ql[l + 32 * (t & 1)];
    int q = ((t < 2 ? lb & 0x0f : lb >> 4) | (((qh[l] >> (2 * t)) & 3) << 4)) - 32;
    float d = dq_f16_to_f32(b->d);
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
    const void *r = w->data + (size_t)row * w->row_bytes;
    int j = (int)(col % QK), i = (int)(col % QK_K);
    switch (w->dtype) {
    case PT_F32: return ((const float *)r)[col];
    case PT_BF16: return dq_bf16_to_f32(((const uint16_t *)r)[col]);
    case PT_F16: return dq_f16_to_f32(((const uint16_t *)r)[col]);
    case PT_Q8_0: return dq_q8_0((const block_q8_0 *)r + col / QK, j);
    case PT_Q4_0: return dq_q4_0((const block_q4_0 *)r + col / QK, j);
    case PT_MXFP4: return dq_mxfp4((const block_mxfp4 *)r + col / QK, j);
    case PT_Q4_1: return dq_q4_1((const block_q4_1 *)r + col / QK, j);
    case PT_Q5_0: return dq_q5_0((const block_q5_0 *)r + col / QK, j);
    case PT_Q5_1: return dq_q5_1((const block_q5_1 *)r + col / QK, j);
    case PT_Q2_K: return dq_q2_k((const block_q2_K *)r + col / QK_K, i);
    case PT_Q3_K: return dq_q3_k((const block_q3_K *)r + col / QK_K, i);
    case PT_Q4_K: return dq_q4_k((const block_q4_K *)r + col / QK_K, i);
    case PT_Q5_K: return dq_q5_k((const block_q5_K *)r + col / QK_K, i);
    case PT_Q6_K: return dq_q6_k((const block_q6_K *)r + col / QK_K, i);
    case PT_NF4: return dq_nf4(w, row * w->k + col);
    default: return 0.0f; /* not reached: dequant.cu admits only the formats above */
    }
}

#endif
