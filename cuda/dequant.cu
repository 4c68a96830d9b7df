/* dequant.cu — rows of a stored weight (f32, bf16, f16, NF4, GGUF blocks) as bf16 or fp32 on the
 * device: the matmuls convert a quantized weight one tile of rows at a time into bf16 scratch, and
 * the embedding gathers the rows of its token ids. Two kernels (issue 26, point 5):
 *   dequant8_kernel      NF4, F16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: 8 consecutive
 *                        values per thread, their bits read with one 4-byte load (NF4), one
 *                        16-byte load (F16) or four 2-byte loads per array (GGUF blocks), the
 *                        (sub-)block's scale decoded once for the 8, written with one 16-byte
 *                        store (bf16) or two (fp32); NF4's table and nested map in shared memory.
 *                        The value functions' fp32 operations in their order, so the same bits.
 *   dequant_rows_kernel  every format, one thread per output value calling the format's value
 *                        function of dequant_formats.h: the reference (PTRAIN_CUDA_KERNELS=reference)
 *                        and the path for everything dequant8_kernel does not take.
 * The value functions run on the host too, in cuda_dequant_rows_host, so the CPU-only unit test
 * tests/unit/test_cuda_dequant.c proves them equal to src/backend/quant.c and src/backend/nf4.c bit for bit;
 * tests/unit/test_cuda_ops.c (on the emulator and on a GPU) proves the two kernels equal through
 * cuda_dequant_rows_test. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <string.h>

#include "cuda_backend.h"
#include "dequant_formats.h"
#include "ptrain/nf4.h"

/* DQ_THREADS: threads per block of both kernels. DQ8_BLOCKS_PER_SM: the fast kernel's grid is at
 * most this many blocks per SM (two waves of full occupancy), each then loops over more groups of
 * 8, so that NF4's shared tables are loaded by fewer blocks. DQ_NF4_MAPS: quant_map[16] and
 * nested_map[256] of an NF4 buffer, as the fast kernel holds them in shared memory. */
enum { DQ_THREADS = 256, DQ8_BLOCKS_PER_SM = 16, DQ_NF4_MAPS = 16 + 256 };

bool cuda_dequant_supported(pt_dtype dtype)
{
    switch (dtype) {
    case PT_F32:
    case PT_BF16:
    case PT_F16:
    case PT_Q8_0:
    case PT_Q4_0:
    case PT_Q4_1:
    case PT_NF4:
    case PT_Q5_0:
    case PT_Q5_1:
    case PT_Q2_K:
    case PT_Q3_K:
    case PT_Q4_K:
    case PT_Q5_K:
    case PT_Q6_K:
    case PT_MXFP4: return true;
    default: return false;
    }
}

/* Where w's values are (pointers into w->data, which may be host or device memory: only offsets
 * are computed here, nothing is read), and its number of rows. */
static pt_status dq_weight_of(const pt_tensor *w, dq_weight *v, int64_t *n_rows)
{
    if (!cuda_dequant_supported(w->dtype))
        return ERR(PT_ERR_UNSUPPORTED, "the cuda backend cannot dequantize %s weights", dtype_name(w->dtype));
    if (w->ndim < 1 || w->ndim > 4 || w->data == NULL || w->shape[w->ndim - 1] <= 0)
        return ERR(PT_ERR_INTERNAL, "dequantize: a %s weight without data or rows", dtype_name(w->dtype));
    int64_t k = w->shape[w->ndim - 1], n = tensor_numel(w) / k;
    const uint8_t *base = (const uint8_t *)w->data;
    memset(v, 0, sizeof *v);
    v->dtype = w->dtype;
    v->k = k;
    v->data = base;
    if (w->dtype == PT_NF4) {
        nf4_layout l;
        if (w->ndim != 2 || nf4_layout_of(n, k, &l) == 0)
            return ERR(PT_ERR_INTERNAL, "dequantize: NF4 weight of %d dimensions, [%lld, %lld]", w->ndim,
                       (long long)n, (long long)k);
        if (w->nbytes != 0 && w->nbytes < l.total)
            return ERR(PT_ERR_INTERNAL, "dequantize: NF4 weight [%lld, %lld] holds %zu bytes, not %zu",
                       (long long)n, (long long)k, w->nbytes, l.total);
        v->nf4_quant_map = (const float *)(const void *)(base + l.quant_map);
        v->nf4_nested_map = (const float *)(const void *)(base + l.nested_map);
        v->nf4_nested_absmax = (const float *)(const void *)(base + l.nested_absmax);
        v->nf4_offset = (const float *)(const void *)(base + offsetof(nf4_header, offset));
        v->nf4_codes = base + l.absmax_code;
        v->nf4_packed = base + l.packed;
    } else {
        v->row_bytes = dtype_size_bytes(w->dtype, k);
        if (v->row_bytes == 0)
            return ERR(PT_ERR_INTERNAL, "dequantize: weight rows of %lld values are not whole %s blocks",
                       (long long)k, dtype_name(w->dtype));
        if (w->nbytes != 0 && w->nbytes < (size_t)n * v->row_bytes)
            return ERR(PT_ERR_INTERNAL, "dequantize: %s weight [%lld, %lld] holds %zu bytes, not %zu",
                       dtype_name(w->dtype), (long long)n, (long long)k, w->nbytes, (size_t)n * v->row_bytes);
    }
    *n_rows = n;
    return PT_OK;
}

/* out[r, :] = weight row ids[r] (ids given) or r0 + r, for r < rows; blockIdx.y strides over rows,
 * x over the values of a row. An id outside the weight (the front door rejects those) gives zeros
 * rather than a read out of bounds. */
__global__ static void dequant_rows_kernel(dq_weight w, int64_t n_rows, const int32_t *ids, int64_t r0,
                                           int64_t rows, __nv_bfloat16 *out_bf16, float *out_f32)
{
    for (int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        int64_t src = ids ? (int64_t)ids[r] : r0 + r;
        bool valid = src >= 0 && src < n_rows;
        for (int64_t col = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; col < w.k;
             col += (int64_t)gridDim.x * blockDim.x) {
            float x = valid ? dq_value(&w, src, col) : 0.0f;
            int64_t o = r * w.k + col;
            if (out_bf16)
                out_bf16[o] = __float2bfloat16_rn(x);
            else
                out_f32[o] = x;
        }
    }
}

/* ---- the fast kernel: 8 consecutive values per thread ------------------------------------------ */

/* 8 bytes at p (2-byte aligned: the GGUF blocks of 18, 22, 34 and 210 bytes are no more), byte
 * i in bits 8i..8i+7. */
__device__ static inline uint64_t dq_ld8(const uint8_t *p)
{
    const uint16_t *h = (const uint16_t *)(const void *)p;
    return (uint64_t)h[0] | (uint64_t)h[1] << 16 | (uint64_t)h[2] << 32 | (uint64_t)h[3] << 48;
}

/* Q8_0 values j0..j0+7 of block b (j0 a multiple of 8): dq_q8_0's x = q*d. */
__device__ static void dq8_q8_0(const block_q8_0 *b, int j0, float x[8])
{
    float d = dq_f16_to_f32(b->d);
    uint64_t q = dq_ld8((const uint8_t *)b->qs + j0);
    for (int i = 0; i < 8; i++) x[i] = dq_mul((float)(int8_t)(uint8_t)(q >> 8 * i), d);
}

/* The 4-bit values j0..j0+7 of 16 bytes of nibbles (dq_nibble32): bytes j0 % 16.., low nibbles
 * for j0 < 16, high after. */
__device__ static void dq8_nibbles(const uint8_t *qs, int j0, int q[8])
{
    uint64_t b = dq_ld8(qs + j0 % (QK / 2));
    int shift = j0 < QK / 2 ? 0 : 4;
    for (int i = 0; i < 8; i++) q[i] = (int)((b >> (8 * i + shift)) & 0x0f);
}

/* Q4_0: dq_q4_0's x = (q-8)*d. */
__device__ static void dq8_q4_0(const block_q4_0 *b, int j0, float x[8])
{
    float d = dq_f16_to_f32(b->d);
    int q[8];
    dq8_nibbles(b->qs, j0, q);
    for (int i = 0; i < 8; i++) x[i] = dq_mul((float)(q[i] - 8), d);
}

/* Q4_1: dq_q4_1's x = q*d + m (product, then sum). */
__device__ static void dq8_q4_1(const block_q4_1 *b, int j0, float x[8])
{
    float d = dq_f16_to_f32(b->d), m = dq_f16_to_f32(b->m);
    int q[8];
    dq8_nibbles(b->qs, j0, q);
    for (int i = 0; i < 8; i++) x[i] = dq_add(dq_mul((float)q[i], d), m);
}

/* Q5_0/Q5_1 levels j0..j0+7 (dq_q5_level): the nibbles as dq8_nibbles, bits j0.. of qh the fifth. */
__device__ static void dq8_q5_levels(const uint8_t *qh, const uint8_t *qs, int j0, int q[8])
{
    dq8_nibbles(qs, j0, q);
    uint32_t h = dq_rd32(qh);
    for (int i = 0; i < 8; i++) q[i] |= (int)(((h >> (j0 + i)) & 1) << 4);
}

/* Q5_0: dq_q5_0's x = (q-16)*d. */
__device__ static void dq8_q5_0(const block_q5_0 *b, int j0, float x[8])
{
    float d = dq_f16_to_f32(b->d);
    int q[8];
    dq8_q5_levels(b->qh, b->qs, j0, q);
    for (int i = 0; i < 8; i++) x[i] = dq_mul((float)(q[i] - 16), d);
}

/* Q5_1: dq_q5_1's x = q*d + m. */
__device__ static void dq8_q5_1(const block_q5_1 *b, int j0, float x[8])
{
    float d = dq_f16_to_f32(b->d), m = dq_f16_to_f32(b->m);
    int q[8];
    dq8_q5_levels(b->qh, b->qs, j0, q);
    for (int i = 0; i < 8; i++) x[i] = dq_add(dq_mul((float)q[i], d), m);
}

/* Q4_K, or Q5_K given qh: values i0..i0+7, all in sub-block j = i0/32. dq_k4's d1 = d*sc and
 * m1 = dmin*m once, then x = d1*q - m1; q is the nibble of qs byte 32*(i0/64) + i0%32 + i (low
 * for even j, high for odd), plus 16 where bit j of qh[i0%32 + i] is set. */
__device__ static void dq8_k4(uint16_t d16, uint16_t dmin16, const uint8_t *scales, const uint8_t *qh,
                              const uint8_t *qs, int i0, float x[8])
{
    int j = i0 / 32, l = i0 % 32, sc, m;
    block_k4_scale_min(j, scales, &sc, &m);
    float d1 = dq_mul(dq_f16_to_f32(d16), (float)sc), m1 = dq_mul(dq_f16_to_f32(dmin16), (float)m);
    uint64_t lo = dq_ld8(qs + 32 * (i0 / 64) + l), hi = qh ? dq_ld8(qh + l) : 0;
    int shift = (j & 1) ? 4 : 0;
    for (int i = 0; i < 8; i++) {
        int q = (int)((lo >> (8 * i + shift)) & 0x0f) + (((hi >> (8 * i + j)) & 1) ? 16 : 0);
        x[i] = dq_sub(dq_mul(d1, (float)q), m1);
    }
}

/* Q6_K values i0..i0+7, one quarter t of half h and one scale: dq_q6_k's d*scale once, then
 * x = (d*scale)*(q-32) with q's low 4 bits from ql, its high 2 from qh. */
__device__ static void dq8_q6_k(const block_q6_K *b, int i0, float x[8])
{
    int h = i0 / 128, t = (i0 % 128) / 32, l = i0 % 32;
    float ds = dq_mul(dq_f16_to_f32(b->d), (float)b->scales[8 * h + l / 16 + 2 * t]);
    uint64_t lo = dq_ld8(b->ql + 64 * h + l + 32 * (t & 1)), hi = dq_ld8(b->qh + 32 * h + l);
    int shift = t < 2 ? 0 : 4;
    for (int i = 0; i < 8; i++) {
        int q = (int)((lo >> (8 * i + shift)) & 0x0f) | (int)(((hi >> (8 * i + 2 * t)) & 3) << 4);
        x[i] = dq_mul(ds, (float)(q - 32));
    }
}

/* f16 values col..col+7 of row r (16-byte aligned): one 16-byte load, each decoded as dq_f16_to_f32. */
__device__ static void dq8_f16(const uint16_t *r, int64_t col, float x[8])
{
    uint4 v = *(const uint4 *)(const void *)(r + col);
    uint32_t u[4] = {v.x, v.y, v.z, v.w};
    for (int i = 0; i < 8; i++) x[i] = dq_f16_to_f32((uint16_t)(u[i / 2] >> 16 * (i % 2)));
}

/* NF4 elements g0..g0+7 of the whole matrix (g0 a multiple of 8, so one 64-block and 4 aligned
 * bytes): dq_nf4's absmax once, then x = quant_map[nibble]*absmax, the high nibble first. maps:
 * quant_map then nested_map, in shared memory. */
__device__ static void dq8_nf4(const dq_weight *w, const float *maps, int64_t g0, float x[8])
{
    int64_t b = g0 / 64;
    float absmax = dq_add(dq_mul(maps[16 + w->nf4_codes[b]], w->nf4_nested_absmax[b / 256]), *w->nf4_offset);
    uint32_t bytes = *(const uint32_t *)(const void *)(w->nf4_packed + g0 / 2);
    for (int i = 0; i < 4; i++) {
        uint32_t byte = bytes >> 8 * i;
        x[2 * i] = dq_mul(maps[(byte >> 4) & 0x0f], absmax);
        x[2 * i + 1] = dq_mul(maps[byte & 0x0f], absmax);
    }
}

/* Values [row, col..col+7] of w (col a multiple of 8), for the formats dq_fast_takes admits. */
__device__ static void dq8_values(const dq_weight *w, const float *nf4_maps, int64_t row, int64_t col, float x[8])
{
    const void *r = w->data + (size_t)row * w->row_bytes;
    int j0 = (int)(col % QK);
    switch (w->dtype) {
    case PT_Q8_0: dq8_q8_0((const block_q8_0 *)r + col / QK, j0, x); break;
    case PT_Q4_0: dq8_q4_0((const block_q4_0 *)r + col / QK, j0, x); break;
    case PT_Q4_1: dq8_q4_1((const block_q4_1 *)r + col / QK, j0, x); break;
    case PT_Q5_0: dq8_q5_0((const block_q5_0 *)r + col / QK, j0, x); break;
    case PT_Q5_1: dq8_q5_1((const block_q5_1 *)r + col / QK, j0, x); break;
    case PT_Q4_K: {
        const block_q4_K *b = (const block_q4_K *)r + col / QK_K;
        dq8_k4(b->d, b->dmin, b->scales, NULL, b->qs, (int)(col % QK_K), x);
        break;
    }
    case PT_Q5_K: {
        const block_q5_K *b = (const block_q5_K *)r + col / QK_K;
        dq8_k4(b->d, b->dmin, b->scales, b->qh, b->qs, (int)(col % QK_K), x);
        break;
    }
    case PT_Q6_K: dq8_q6_k((const block_q6_K *)r + col / QK_K, (int)(col % QK_K), x); break;
    case PT_F16: dq8_f16((const uint16_t *)r, col, x); break;
    case PT_NF4: dq8_nf4(w, nf4_maps, row * w->k + col, x); break;
    default: break; /* not reached */
    }
}

/* x[0..7] to out[o..o+7] (o a multiple of 8, out 16-byte aligned): one 16-byte store of bf16
 * (rounded as the generic kernel rounds) or two of fp32. */
__device__ static void dq8_store(const float x[8], int64_t o, __nv_bfloat16 *out_bf16, float *out_f32)
{
    if (out_bf16) {
        uint32_t u[4];
        for (int i = 0; i < 4; i++)
            u[i] = (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(x[2 * i])) |
                   (uint32_t)__bfloat16_as_ushort(__float2bfloat16_rn(x[2 * i + 1])) << 16;
        *(uint4 *)(void *)(out_bf16 + o) = make_uint4(u[0], u[1], u[2], u[3]);
    } else {
        float4 *p = (float4 *)(void *)(out_f32 + o);
        p[0] = make_float4(x[0], x[1], x[2], x[3]);
        p[1] = make_float4(x[4], x[5], x[6], x[7]);
    }
}

/* As dequant_rows_kernel, one group of 8 values per thread and turn of a grid-stride loop over
 * rows * k/8 groups. */
__global__ static void dequant8_kernel(dq_weight w, int64_t n_rows, const int32_t *ids, int64_t r0, int64_t rows,
                                       __nv_bfloat16 *out_bf16, float *out_f32)
{
    __shared__ float nf4_maps[DQ_NF4_MAPS];
    if (w.dtype == PT_NF4) /* the same branch for the whole grid */
        for (int i = threadIdx.x; i < DQ_NF4_MAPS; i += blockDim.x)
            nf4_maps[i] = i < 16 ? w.nf4_quant_map[i] : w.nf4_nested_map[i - 16];
    __syncthreads();
    int64_t per_row = w.k / 8, groups = rows * per_row;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < groups;
         t += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = t / per_row, col = (t - r * per_row) * 8;
        int64_t src = ids ? (int64_t)ids[r] : r0 + r;
        float x[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (src >= 0 && src < n_rows) dq8_values(&w, nf4_maps, src, col, x);
        dq8_store(x, r * w.k + col, out_bf16, out_f32);
    }
}

/* Whether dequant8_kernel takes w into out: one of its formats, rows of whole groups of 8, and
 * the alignment its loads (NF4: 4 bytes; F16: 16; blocks: 2) and 16-byte stores need. Buffers from the
 * pool and the arena always have it; a view at an odd offset would not. */
static bool dq_fast_takes(const dq_weight *v, const void *out)
{
    uintptr_t in = (uintptr_t)v->data, need = 2;
    switch (v->dtype) {
    case PT_NF4:
        in = (uintptr_t)v->nf4_packed;
        need = 4;
        break;
    case PT_F16: need = 16; break; /* one 16-byte load (rows of k % 8 == 0 values keep it) */
    case PT_Q8_0:
    case PT_Q4_0:
    case PT_Q4_1:
    case PT_Q5_0:
    case PT_Q5_1:
    case PT_Q4_K:
    case PT_Q5_K:
    case PT_Q6_K: break;
    default: return false;
    }
    return v->k % 8 == 0 && in % need == 0 && (uintptr_t)out % 16 == 0;
}

/* ---- launching ----------------------------------------------------------------------------------- */

static pt_status dq_check_call(const dq_weight *v, int64_t n, const int32_t *ids, int64_t r0, int64_t rows,
                               const void *out_bf16, const void *out_f32)
{
    if ((out_bf16 == NULL) == (out_f32 == NULL))
        return ERR(PT_ERR_INTERNAL, "dequantize: exactly one of the bf16 and fp32 outputs must be given");
    if (rows < 0 || (ids == NULL && (r0 < 0 || r0 > n - rows)))
        return ERR(PT_ERR_INTERNAL, "dequantize: rows [%lld, %lld) of a %s weight of %lld rows", (long long)r0,
                   (long long)(r0 + rows), dtype_name(v->dtype), (long long)n);
    return PT_OK;
}

/* One launch for the rows: the fast kernel (fast: dq_fast_takes said yes) or the generic one. */
static pt_status dq_launch(cuda_ctx *c, const dq_weight *v, int64_t n, const int32_t *ids, int64_t r0, int64_t rows,
                           __nv_bfloat16 *out_bf16, float *out_f32, bool fast)
{
    if (rows == 0) return PT_OK;
    if (fast) {
        unsigned grid = cuda_grid(rows * (v->k / 8), DQ_THREADS), most = DQ8_BLOCKS_PER_SM * (unsigned)c->sm_count;
        if (c->sm_count > 0 && grid > most) grid = most;
        dequant8_kernel<<<grid, DQ_THREADS, 0, c->stream>>>(*v, n, ids, r0, rows, out_bf16, out_f32);
    } else {
        int64_t bx = (v->k + DQ_THREADS - 1) / DQ_THREADS;
        dim3 grid((unsigned)(bx < 65535 ? bx : 65535), (unsigned)(rows < 65535 ? rows : 65535));
        dequant_rows_kernel<<<grid, DQ_THREADS, 0, c->stream>>>(*v, n, ids, r0, rows, out_bf16, out_f32);
    }
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_dequant_rows(cuda_ctx *c, const pt_tensor *w, const int32_t *ids, int64_t r0, int64_t rows,
                            __nv_bfloat16 *out_bf16, float *out_f32)
{
    dq_weight v;
    int64_t n;
    TRY(dq_weight_of(w, &v, &n));
    TRY(dq_check_call(&v, n, ids, r0, rows, out_bf16, out_f32));
    bool fast = !c->reference && dq_fast_takes(&v, out_bf16 ? (const void *)out_bf16 : (const void *)out_f32);
    return dq_launch(c, &v, n, ids, r0, rows, out_bf16, out_f32, fast);
}

/* For the tests (tests/unit/test_cuda_ops.c): rows [r0, r0 + rows) of w, on be's device, by the
 * fast kernel (fast) or the generic one, copied to host_out as bf16 (bf16) or fp32. Asking the
 * fast kernel for a weight it does not take is PT_ERR_UNSUPPORTED. */
extern "C" pt_status cuda_dequant_rows_test(pt_backend *be, const pt_tensor *w, int64_t r0, int64_t rows, bool fast,
                                            bool bf16, void *host_out)
{
    cuda_ctx *c = ctx_of(be);
    dq_weight v;
    int64_t n;
    TRY(dq_weight_of(w, &v, &n));
    size_t bytes = (size_t)(rows > 0 ? rows : 0) * (size_t)v.k * (bf16 ? 2 : 4);
    void *out = NULL;
    CUDA_TRY(cudaMallocAsync(&out, bytes ? bytes : 16, c->stream));
    __nv_bfloat16 *ob = bf16 ? (__nv_bfloat16 *)out : NULL;
    float *of = bf16 ? NULL : (float *)out;
    pt_status st = dq_check_call(&v, n, NULL, r0, rows, ob, of);
    if (st == PT_OK && fast && !dq_fast_takes(&v, out))
        st = ERR(PT_ERR_UNSUPPORTED, "dequantize: the fast kernel does not take this %s weight", dtype_name(v.dtype));
    if (st == PT_OK) st = dq_launch(c, &v, n, NULL, r0, rows, ob, of, fast);
    if (st == PT_OK && cudaMemcpyAsync(host_out, out, bytes, cudaMemcpyDeviceToHost, c->stream) != cudaSuccess)
        st = ERR(PT_ERR_INTERNAL, "dequantize: copying %zu bytes to the host", bytes);
    cudaError_t e = cudaFreeAsync(out, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    if (st == PT_OK && e != cudaSuccess) st = ERR(PT_ERR_INTERNAL, "dequantize: %s", cudaGetErrorString(e));
    return st;
}

/* The same values computed on the host from a host copy of the weight (the unit test's view of the
 * device code): out [rows, k] fp32 = rows [r0, r0 + rows) of w. */
extern "C" pt_status cuda_dequant_rows_host(const pt_tensor *w, int64_t r0, int64_t rows, float *out)
{
    dq_weight v;
    int64_t n;
    TRY(dq_weight_of(w, &v, &n));
    if (rows < 0 || r0 < 0 || r0 > n - rows || (rows > 0 && out == NULL))
        return ERR(PT_ERR_INTERNAL, "dequantize: rows [%lld, %lld) of a weight of %lld rows", (long long)r0,
                   (long long)(r0 + rows), (long long)n);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t col = 0; col < v.k; col++) out[r * v.k + col] = dq_value(&v, r0 + r, col);
    return PT_OK;
}
