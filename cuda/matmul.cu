/* matmul.cu — the CUDA backend's matmuls, with the same contract as src/cpu/matmul.c.
 * Frozen base weights (bf16, f16, NF4, GGUF blocks) are multiplied in bf16 on the tensor cores with
 * fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F): the activations are rounded to bf16 once
 * per call, and a quantized weight is dequantized to bf16 one tile of rows at a time into a scratch
 * buffer, so no full-precision copy of the base ever exists. fp32 weights are the LoRA adapters
 * (and tiny test models): they and the adapters' weight gradients stay in fp32 (cublasSgemm), as
 * the adapters, their gradients and the optimizer state are fp32 by design. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

/* bf16 elements of weight per dequantized tile (32 MiB): big enough for full-speed GEMMs. */
enum { TILE_ELEMS = 16 << 20 };

__global__ static void f32_to_bf16_kernel(const float *in, __nv_bfloat16 *out, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = __float2bfloat16_rn(in[i]);
}

static pt_status scratch_reserve(cuda_ctx *c, size_t elems)
{
    if (elems <= c->scratch_elems) return PT_OK;
    CUDA_TRY(cudaFreeAsync(c->scratch, c->stream));
    c->scratch = NULL;
    c->scratch_elems = 0;
    CUDA_TRY(cudaMallocAsync((void **)&c->scratch, elems * sizeof(__nv_bfloat16), c->stream));
    c->scratch_elems = elems;
    return PT_OK;
}

pt_status cuda_f32_to_bf16(cuda_ctx *c, const float *in, __nv_bfloat16 *out, int64_t n)
{
    f32_to_bf16_kernel<<<cuda_grid(n, 256), 256, 0, c->stream>>>(in, out, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

/* Row-major C[m,n] (fp32, ldc) = op(A) op(B) + beta C; op(X) = Xᵀ when tx. Row-major X is
 * column-major Xᵀ, so this is column-major Cᵀ = op(B)ᵀ op(A)ᵀ. bf16 operands, fp32 accumulation. */
static pt_status gemm_bf16(cuda_ctx *c, const __nv_bfloat16 *a, int lda, bool ta, const __nv_bfloat16 *b, int ldb,
                           bool tb, float *out, int ldc, int64_t m, int64_t n, int64_t k, float beta)
{
    const float alpha = 1.0f;
    CUBLAS_TRY(cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n,
                            (int)m, (int)k, &alpha, b, CUDA_R_16BF, ldb, a, CUDA_R_16BF, lda, &beta, out,
                            CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PT_OK;
}

/* The same in fp32 (adapters): cublasSgemm with its default (non-tensor-op) math. */
static pt_status gemm_f32(cuda_ctx *c, const float *a, int lda, bool ta, const float *b, int ldb, bool tb,
                          float *out, int ldc, int64_t m, int64_t n, int64_t k, float beta)
{
    const float alpha = 1.0f;
    CUBLAS_TRY(cublasSgemm(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)n, (int)m,
                           (int)k, &alpha, b, ldb, a, lda, &beta, out, ldc));
    return PT_OK;
}

/* Rows of w per dequantized tile. */
static int64_t tile_rows(const pt_tensor *w)
{
    int64_t n = w->shape[0], k = w->shape[1], t = TILE_ELEMS / k;
    if (w->dtype == PT_BF16 || t >= n) return n;
    return t < 1 ? 1 : t;
}

/* Rows [r0, r0+rows) of w as bf16: the stored rows themselves for bf16, else a dequantized tile. */
static pt_status weight_tile(cuda_ctx *c, const pt_tensor *w, int64_t r0, int64_t rows, __nv_bfloat16 *tile,
                             const __nv_bfloat16 **out)
{
    if (w->dtype == PT_BF16) {
        *out = (const __nv_bfloat16 *)w->data + r0 * w->shape[1];
        return PT_OK;
    }
    TRY(cuda_dequant_rows(c, w, NULL, r0, rows, tile, NULL));
    *out = tile;
    return PT_OK;
}

static pt_status need_supported(const pt_tensor *w)
{
    if (w->dtype == PT_F32 || cuda_dequant_supported(w->dtype)) return PT_OK;
    return ERR(PT_ERR_UNSUPPORTED, "the cuda backend cannot multiply by %s weights", dtype_name(w->dtype));
}

pt_status cuda_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta)
{ /* y[M,N] = x[M,K] @ w[N,K]ᵀ + beta y */
    cuda_ctx *c = ctx_of(be);
    int64_t n = w->shape[0], k = w->shape[1], m = tensor_numel(x) / k;
    TRY(need_supported(w));
    if (w->dtype == PT_F32)
        return gemm_f32(c, (const float *)x->data, (int)k, false, (const float *)w->data, (int)k, true,
                        (float *)y->data, (int)n, m, n, k, beta);
    int64_t per = tile_rows(w);
    TRY(scratch_reserve(c, (size_t)(m * k + (w->dtype == PT_BF16 ? 0 : per * k))));
    __nv_bfloat16 *xb = c->scratch, *tile = c->scratch + m * k;
    TRY(cuda_f32_to_bf16(c, (const float *)x->data, xb, m * k));
    for (int64_t n0 = 0; n0 < n; n0 += per) {
        int64_t rows = n - n0 < per ? n - n0 : per;
        const __nv_bfloat16 *wt;
        TRY(weight_tile(c, w, n0, rows, tile, &wt));
        TRY(gemm_bf16(c, xb, (int)k, false, wt, (int)k, true, (float *)y->data + n0, (int)n, m, rows, k, beta));
    }
    return PT_OK;
}

pt_status cuda_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w, float beta)
{ /* dx[M,K] = dy[M,N] @ w[N,K] + beta dx; tile by tile over N, each adding its share */
    cuda_ctx *c = ctx_of(be);
    int64_t n = w->shape[0], k = w->shape[1], m = tensor_numel(dy) / n;
    TRY(need_supported(w));
    if (w->dtype == PT_F32)
        return gemm_f32(c, (const float *)dy->data, (int)n, false, (const float *)w->data, (int)k, false,
                        (float *)dx->data, (int)k, m, k, n, beta);
    int64_t per = tile_rows(w);
    TRY(scratch_reserve(c, (size_t)(m * n + (w->dtype == PT_BF16 ? 0 : per * k))));
    __nv_bfloat16 *dyb = c->scratch, *tile = c->scratch + m * n;
    TRY(cuda_f32_to_bf16(c, (const float *)dy->data, dyb, m * n));
    for (int64_t n0 = 0; n0 < n; n0 += per) {
        int64_t rows = n - n0 < per ? n - n0 : per;
        const __nv_bfloat16 *wt;
        TRY(weight_tile(c, w, n0, rows, tile, &wt));
        TRY(gemm_bf16(c, dyb + n0, (int)n, false, wt, (int)k, false, (float *)dx->data, (int)k, m, k, rows,
                      n0 == 0 ? beta : 1.0f));
    }
    return PT_OK;
}

pt_status cuda_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x, float beta)
{ /* dw[N,K] = dy[M,N]ᵀ @ x[M,K] + beta dw, in fp32: dw is an adapter's gradient */
    cuda_ctx *c = ctx_of(be);
    int64_t n = dw->shape[0], k = dw->shape[1], m = tensor_numel(dy) / n;
    return gemm_f32(c, (const float *)dy->data, (int)n, true, (const float *)x->data, (int)k, false,
                    (float *)dw->data, (int)k, n, k, m, beta);
}
