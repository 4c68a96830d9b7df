/* nf4.c — bitsandbytes NF4 with double-quantized absmax: quantize, dequantize a range of rows,
 * import a pre-quantized checkpoint's tensors. The buffer layout is described in nf4.h. */
#include "ptrain/nf4.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/quant_blocks.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define NF4_VERSION 1u
#define NF4_ALIGN 64

/* bitsandbytes csrc/kernels.cu nf4_dequantization_lut */
static const float nf4_table[16] = {
    -1.0f, -0.6961928009986877f, -0.5250730514526367f, -0.39491748809814453f,
    -0.28444138169288635f, -0.18477343022823334f, -0.09105003625154495f, 0.0f,
    0.07958029955625534f, 0.16093020141124725f, 0.24611230194568634f, 0.33791524171829224f,
    0.44070982933044434f, 0.5626170039176941f, 0.7229568362236023f, 1.0f,
};

static size_t align_up(size_t n) { return (n + NF4_ALIGN - 1) / NF4_ALIGN * NF4_ALIGN; }

pt_status nf4_check_shape(int64_t rows, int64_t cols)
{
    if (rows <= 0 || cols <= 0)
        return ERR(PT_ERR_USER, "NF4 weight [%lld, %lld]: the shape must be positive", (long long)rows,
                   (long long)cols);
    if (cols % NF4_BLOCK != 0)
        return ERR(PT_ERR_USER,
                   "NF4 weight [%lld, %lld]: the number of columns must be a multiple of %d (the NF4 "
                   "block size)",
                   (long long)rows, (long long)cols, NF4_BLOCK);
    if (rows > (INT64_MAX / 4) / cols)
        return ERR(PT_ERR_USER, "NF4 weight [%lld, %lld]: too large", (long long)rows, (long long)cols);
    return PT_OK;
}

size_t nf4_layout_of(int64_t rows, int64_t cols, nf4_layout *l)
{
    if (rows <= 0 || cols <= 0 || cols % NF4_BLOCK != 0 || rows > (INT64_MAX / 4) / cols) return 0;
    nf4_layout x;
    x.nblocks = rows * (cols / NF4_BLOCK);
    x.nnested = (x.nblocks + NF4_NESTED_BLOCK - 1) / NF4_NESTED_BLOCK;
    x.quant_map = align_up(sizeof(nf4_header));
    x.nested_map = align_up(x.quant_map + 16 * sizeof(float));
    x.nested_absmax = align_up(x.nested_map + 256 * sizeof(float));
    x.absmax_code = align_up(x.nested_absmax + (size_t)x.nnested * sizeof(float));
    x.packed = align_up(x.absmax_code + (size_t)x.nblocks);
    x.total = align_up(x.packed + (size_t)(rows * cols / 2));
    if (l) *l = x;
    return x.total;
}

size_t nf4_bytes(int64_t rows, int64_t cols) { return nf4_layout_of(rows, cols, NULL); }

pt_status nf4_view_of(const void *buf, nf4_view *v)
{
    nf4_header h;
    nf4_layout l = {0};
    if (buf == NULL || ((uintptr_t)buf % sizeof(float)) != 0)
        return ERR(PT_ERR_INTERNAL, "NF4 buffer is NULL or misaligned");
    memcpy(&h, buf, sizeof h);
    if (memcmp(h.magic, "NF4", 4) != 0 || h.version != NF4_VERSION)
        return ERR(PT_ERR_INTERNAL, "not an NF4 buffer (bad magic or version)");
    if (nf4_layout_of(h.rows, h.cols, &l) == 0 || l.nblocks != h.nblocks || l.nnested != h.nnested)
        return ERR(PT_ERR_INTERNAL, "NF4 buffer header is inconsistent");
    const uint8_t *p = buf;
    v->rows = h.rows;
    v->cols = h.cols;
    v->nblocks = h.nblocks;
    v->nnested = h.nnested;
    v->offset = h.offset;
    v->quant_map = (const float *)(const void *)(p + l.quant_map);
    v->nested_map = (const float *)(const void *)(p + l.nested_map);
    v->nested_absmax = (const float *)(const void *)(p + l.nested_absmax);
    v->absmax_code = p + l.absmax_code;
    v->packed = p + l.packed;
    return PT_OK;
}

void nf4_quant_map(float map[16]) { memcpy(map, nf4_table, sizeof nf4_table); }

/* torch.linspace(0.1, 1, n, float32)[i] on the CPU: the halves are fma'd from either end. */
static float linspace_at(int n, int i)
{
    float step = (1.0f - 0.1f) / (float)(n - 1);
    if (i < n / 2) return fmaf(step, (float)i, 0.1f);
    return fmaf(-step, (float)(n - 1 - i), 1.0f);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void nf4_dynamic_map(float map[256])
{
    /* create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): for exponent i = 0..6,
     * the 2^i means of linspace(0.1, 1, 2^i + 1), times 10^(i-6), both signs; then 0 and 1. */
    static const double pow10[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
    int n = 0;
    for (int i = 0; i < 7; i++) {
        int items = (1 << i) + 1;
        float scale = (float)pow10[i];
        for (int j = 0; j + 1 < items; j++) {
            float mean = (linspace_at(items, j) + linspace_at(items, j + 1)) / 2.0f;
            map[n++] = mean * scale;
            map[n++] = -(mean * scale);
        }
    }
    map[n++] = 0.0f;
    map[n++] = 1.0f;
    qsort(map, 256, sizeof(float), cmp_float);
}

/* Midpoints between neighbours of a sorted table, as bitsandbytes computes them. */
static void midpoints(const float *map, int n, float *mid)
{
    for (int i = 0; i + 1 < n; i++) mid[i] = 0.5f * (map[i] + map[i + 1]);
}

/* Number of midpoints below v (= index of the nearest entry, ties to the lower one). */
static inline unsigned code4(float v, const float mid[15])
{
    unsigned c = v > mid[7] ? 8u : 0u;
    c += v > mid[c + 3] ? 4u : 0u;
    c += v > mid[c + 1] ? 2u : 0u;
    c += v > mid[c] ? 1u : 0u;
    return c;
}

static inline unsigned code8(float v, const float mid[255])
{
    unsigned c = 0;
    for (unsigned step = 128; step > 0; step >>= 1)
        if (v > mid[c + step - 1]) c += step;
    return c;
}

void nf4_quantize_blockwise8(const float *x, int64_t n, int64_t blocksize, const float map[256],
                             uint8_t *codes, float *absmax)
{
    float mid[255];
    midpoints(map, 256, mid);
    for (int64_t b0 = 0; b0 < n; b0 += blocksize) {
        int64_t end = b0 + blocksize < n ? b0 + blocksize : n;
        float m = 0.0f;
        for (int64_t i = b0; i < end; i++) m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
        absmax[b0 / blocksize] = m;
        float inv = m > 0.0f ? 1.0f / m : 0.0f;
        for (int64_t i = b0; i < end; i++) codes[i] = m > 0.0f ? (uint8_t)code8(x[i] * inv, mid) : 0;
    }
}

/* One block of 64: its absmax, and the packed nibbles. False when a value is not finite. */
static int quantize_block4(const float *x, const float mid[15], uint8_t *packed, float *absmax)
{
    float m = 0.0f;
    int finite = 1;
    for (int i = 0; i < NF4_BLOCK; i++) {
        float a = fabsf(x[i]);
        finite &= a <= FLT_MAX;
        m = a > m ? a : m;
    }
    *absmax = m;
    float scale = 1.0f / (m < 1e-38f ? 1e-38f : m); /* torch: x * (1.0 / absmax.clamp(min=1e-38)) */
    for (int j = 0; j < NF4_BLOCK / 2; j++)
        packed[j] = (uint8_t)(code4(x[2 * j] * scale, mid) << 4 | code4(x[2 * j + 1] * scale, mid));
    return finite;
}

/* Every block's absmax and codes, on all of OpenMP's threads (each block is its own: the bytes do
 * not depend on the thread count; loading a bf16 8B model quantizes 7e9 values). Returns the first
 * block with a value that is not finite, or l->nblocks. */
static int64_t quantize_blocks(const float *w, const nf4_layout *l, uint8_t *d, float *absmax)
{
    float mid[15];
    midpoints(nf4_table, 16, mid);
    int64_t bad = l->nblocks;
#pragma omp parallel for schedule(static) reduction(min : bad)
    for (int64_t b = 0; b < l->nblocks; b++)
        if (!quantize_block4(w + b * NF4_BLOCK, mid, d + l->packed + b * (NF4_BLOCK / 2), &absmax[b]) && b < bad) bad = b;
    return bad;
}

static void write_header(uint8_t *dst, int64_t rows, int64_t cols, const nf4_layout *l, float offset)
{
    nf4_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, "NF4", 4);
    h.version = NF4_VERSION;
    h.rows = rows;
    h.cols = cols;
    h.nblocks = l->nblocks;
    h.nnested = l->nnested;
    h.offset = offset;
    memcpy(dst, &h, sizeof h);
}

static float mean_of(const float *x, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += x[i];
    return (float)(s / (double)n);
}

pt_status nf4_quantize(const float *w, int64_t rows, int64_t cols, void *dst)
{
    nf4_layout l = {0};
    TRY(nf4_check_shape(rows, cols));
    if (w == NULL || dst == NULL || (uintptr_t)dst % sizeof(float) != 0)
        return ERR(PT_ERR_INTERNAL, "nf4_quantize: NULL or misaligned buffer");
    nf4_layout_of(rows, cols, &l);
    uint8_t *d = dst;
    memset(d, 0, l.total); /* the alignment gaps too: the bytes depend on the weights alone */
    float *absmax = malloc((size_t)l.nblocks * sizeof(float));
    TRY_ALLOC(absmax);
    int64_t bad = quantize_blocks(w, &l, d, absmax);
    if (bad < l.nblocks) {
        free(absmax);
        return ERR(PT_ERR_USER, "NF4 weight [%lld, %lld]: row %lld has a value that is not finite", (long long)rows,
                   (long long)cols, (long long)(bad * NF4_BLOCK / cols));
    }
    float offset = mean_of(absmax, l.nblocks);
    for (int64_t b = 0; b < l.nblocks; b++) absmax[b] -= offset;
    float *nested_map = (float *)(void *)(d + l.nested_map);
    nf4_quant_map((float *)(void *)(d + l.quant_map));
    nf4_dynamic_map(nested_map);
    nf4_quantize_blockwise8(absmax, l.nblocks, NF4_NESTED_BLOCK, nested_map, d + l.absmax_code,
                            (float *)(void *)(d + l.nested_absmax));
    write_header(d, rows, cols, &l, offset);
    free(absmax);
    return PT_OK;
}

/* absmax[b] = nested_map[code] * nested_absmax + offset, rounded after the product as bitsandbytes
 * does (two separate fp32 operations); the volatile keeps a compiler from fusing them into an fma. */
static inline float block_absmax(const nf4_view *v, int64_t b)
{
    volatile float prod = v->nested_map[v->absmax_code[b]] * v->nested_absmax[b / NF4_NESTED_BLOCK];
    return prod + v->offset;
}

/* pairs[2b], pairs[2b+1] = the codes of the high and low nibble of byte b */
static void build_pairs(const float *quant_map, float pairs[512])
{
    for (int b = 0; b < 256; b++) {
        pairs[2 * b] = quant_map[b >> 4];
        pairs[2 * b + 1] = quant_map[b & 15];
    }
}

/* 64 values from 32 bytes: each byte looks up its pair of codes, times absmax (fp32 products,
 * the same as bitsandbytes' code[nibble] * absmax). */
static inline void dequant_block(const uint8_t *p, const float *pairs, float absmax, float *out)
{
#if defined(__SSE2__)
    __m128 s = _mm_set1_ps(absmax);
    for (int j = 0; j < NF4_BLOCK / 2; j += 2) {
        __m128 x = _mm_loadl_pi(_mm_setzero_ps(), (const __m64 *)(const void *)(pairs + 2 * p[j]));
        x = _mm_loadh_pi(x, (const __m64 *)(const void *)(pairs + 2 * p[j + 1]));
        _mm_storeu_ps(out + 2 * j, _mm_mul_ps(x, s));
    }
#else
    for (int j = 0; j < NF4_BLOCK / 2; j++) {
        const float *q = pairs + 2 * p[j];
        out[2 * j] = q[0] * absmax;
        out[2 * j + 1] = q[1] * absmax;
    }
#endif
}

pt_status nf4_dequantize_rows(const void *src, int64_t rows, int64_t cols, int64_t r0, int64_t nrows,
                              float *out)
{
    nf4_view v;
    TRY(nf4_view_of(src, &v));
    if (v.rows != rows || v.cols != cols)
        return ERR(PT_ERR_INTERNAL, "NF4 weight is [%lld, %lld], not [%lld, %lld]", (long long)v.rows,
                   (long long)v.cols, (long long)rows, (long long)cols);
    if (r0 < 0 || nrows < 0 || r0 > rows - nrows)
        return ERR(PT_ERR_INTERNAL, "NF4 rows [%lld, %lld) out of range for %lld rows", (long long)r0,
                   (long long)(r0 + nrows), (long long)rows);
    if (nrows > 0 && out == NULL) return ERR(PT_ERR_INTERNAL, "nf4_dequantize_rows: NULL output");
    int64_t per_row = cols / NF4_BLOCK, b0 = r0 * per_row, b1 = (r0 + nrows) * per_row;
    float pairs[512];
    build_pairs(v.quant_map, pairs);
    for (int64_t b = b0; b < b1; b++) {
        float absmax = block_absmax(&v, b);
        dequant_block(v.packed + b * (NF4_BLOCK / 2), pairs, absmax, out + (b - b0) * NF4_BLOCK);
    }
    return PT_OK;
}

pt_status nf4_from_bnb(int64_t rows, int64_t cols, const uint8_t *packed, const uint8_t *absmax_u8,
                       const float *nested_absmax, const float *nested_map, float offset,
                       const float *quant_map, void *dst)
{
    nf4_layout l = {0};
    TRY(nf4_check_shape(rows, cols));
    if (!packed || !absmax_u8 || !nested_absmax || !nested_map || !quant_map || !dst ||
        (uintptr_t)dst % sizeof(float) != 0)
        return ERR(PT_ERR_INTERNAL, "nf4_from_bnb: NULL or misaligned buffer");
    nf4_layout_of(rows, cols, &l);
    uint8_t *d = dst;
    memset(d, 0, l.total); /* the alignment gaps too: the bytes depend on the weights alone */
    memcpy(d + l.quant_map, quant_map, 16 * sizeof(float));
    memcpy(d + l.nested_map, nested_map, 256 * sizeof(float));
    memcpy(d + l.nested_absmax, nested_absmax, (size_t)l.nnested * sizeof(float));
    memcpy(d + l.absmax_code, absmax_u8, (size_t)l.nblocks);
    memcpy(d + l.packed, packed, (size_t)(rows * cols / 2));
    write_header(d, rows, cols, &l, offset);
    return PT_OK;
}
