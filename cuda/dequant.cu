/* dequant.cu — rows of a stored weight (f32, bf16, f16, NF4, GGUF blocks) as bf16 or fp32 on the
 * device: the matmuls convert a quantized weight one tile of rows at a time into bf16 scratch, and
 * the embedding gathers the rows of its token ids. One kernel serves every format: one thread per
 * output value, which calls the format's value function of dequant_formats.h; a block of 32 or
 * 256 values is re-read by the threads that share it, which the L1 cache absorbs, and the writes
 * of a warp are contiguous. The same value functions run on the host in cuda_dequant_rows_host,
 * so the CPU-only unit test tests/unit/test_cuda_dequant.c proves them equal to src/quant.c and
 * src/nf4.c bit for bit. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <string.h>

#include "cuda_backend.h"
#include "dequant_formats.h"
#include "ptrain/nf4.h"

enum { DQ_THREADS = 256 };

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
    case PT_Q6_K: return true;
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

pt_status cuda_dequant_rows(cuda_ctx *c, const pt_tensor *w, const int32_t *ids, int64_t r0, int64_t rows,
                            __nv_bfloat16 *out_bf16, float *out_f32)
{
    dq_weight v;
    int64_t n;
    TRY(dq_weight_of(w, &v, &n));
    if ((out_bf16 == NULL) == (out_f32 == NULL))
        return ERR(PT_ERR_INTERNAL, "dequantize: exactly one of the bf16 and fp32 outputs must be given");
    if (rows < 0 || (ids == NULL && (r0 < 0 || r0 > n - rows)))
        return ERR(PT_ERR_INTERNAL, "dequantize: rows [%lld, %lld) of a weight of %lld rows", (long long)r0,
                   (long long)(r0 + rows), (long long)n);
    if (rows == 0) return PT_OK;
    int64_t bx = (v.k + DQ_THREADS - 1) / DQ_THREADS;
    dim3 grid((unsigned)(bx < 65535 ? bx : 65535), (unsigned)(rows < 65535 ? rows : 65535));
    dequant_rows_kernel<<<grid, DQ_THREADS, 0, c->stream>>>(v, n, ids, r0, rows, out_bf16, out_f32);
    CUDA_LAUNCHED();
    return PT_OK;
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
