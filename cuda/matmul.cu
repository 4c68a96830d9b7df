/* matmul.cu — the CUDA backend's matmuls, with the same contract as src/cpu/matmul.c.
 * Frozen base weights (bf16, f16, NF4, GGUF blocks) are multiplied in bf16 on the tensor cores with
 * fp32 accumulation: the activations are rounded to bf16 once per call, and a quantized weight is
 * dequantized to bf16 one tile of rows at a time into a scratch buffer, so no full-precision copy
 * of the base ever exists. fp32 weights are the LoRA adapters (and tiny test models): they, the
 * activations they meet and the adapters' weight gradients are rounded to bf16 as GEMM operands
 * too, with fp32 accumulation (issue 26, point 3); the adapters, their gradients and the optimizer
 * state stay fp32 in memory. Activations (x, y, dy, dx) are bf16 on the fast path (issue 26, point
 * 1): a bf16 operand is used in place, only fp32 ones are rounded into the scratch, and a bf16
 * result is rounded once from the fp32 sums (cuBLAS's epilogue); logits stay fp32.
 *
 * Two paths (issue 26, point 9): the fast one runs every GEMM through cuBLASLt (lt.cu) with an
 * algorithm fixed per shape, on tiles of a multiple of 128 rows so that every operand stays 16
 * bytes aligned; PTRAIN_CUDA_KERNELS=reference keeps the path the fast one is checked against:
 * cublasGemmEx on tiles of as many rows as fit, and the adapters in fp32 with cublasSgemm. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

/* TILE_ELEMS: bf16 values of weight per dequantized tile (32 MiB): big enough for full-speed GEMMs.
 * TILE_ROW_ALIGN: the fast path's tiles are a multiple of this many rows, so a tile's first row
 * (an offset into the output, or into the bf16 activations) is 16-byte aligned.
 * SCRATCH_ALIGN: bf16 values (256 bytes) a second operand in the scratch is aligned to. */
enum { TILE_ELEMS = PT_CUDA_TILE_ELEMS, TILE_ROW_ALIGN = 128, SCRATCH_ALIGN = 128 };

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

/* Room for two bf16 operands in the scratch: *first at its start (the pool's alignment), *second
 * at the first 256-byte boundary after first_elems values. */
static pt_status scratch_pair(cuda_ctx *c, int64_t first_elems, int64_t second_elems, __nv_bfloat16 **first,
                              __nv_bfloat16 **second)
{
    int64_t at = (first_elems + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    TRY(scratch_reserve(c, (size_t)(at + second_elems)));
    *first = c->scratch;
    *second = c->scratch + at;
    return PT_OK;
}

__global__ static void bf16_to_f32_kernel(const __nv_bfloat16 *in, float *out, int64_t n)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = __bfloat162float(in[i]);
}

pt_status cuda_f32_to_bf16(cuda_ctx *c, const float *in, __nv_bfloat16 *out, int64_t n)
{
    if (n == 0) return PT_OK;
    f32_to_bf16_kernel<<<cuda_grid(n, 256), 256, 0, c->stream>>>(in, out, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_bf16_to_f32(cuda_ctx *c, const __nv_bfloat16 *in, float *out, int64_t n)
{
    if (n == 0) return PT_OK;
    bf16_to_f32_kernel<<<cuda_grid(n, 256), 256, 0, c->stream>>>(in, out, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

/* The reference GEMMs: row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ, so cuBLAS
 * gets B first. cublasGemmEx: bf16 operands, fp32 accumulation, fp32 or bf16 output. */
static pt_status gemm_ex_bf16(cuda_ctx *c, const cuda_gemm *g)
{
    const float alpha = 1.0f;
    CUBLAS_TRY(cublasGemmEx(c->blas, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->n,
                            (int)g->m, (int)g->k, &alpha, g->b, CUDA_R_16BF, (int)g->ldb, g->a, CUDA_R_16BF,
                            (int)g->lda, &g->beta, g->c, g->c_bf16 ? CUDA_R_16BF : CUDA_R_32F, (int)g->ldc, CUBLAS_COMPUTE_32F,
                            CUBLAS_GEMM_DEFAULT));
    return PT_OK;
}

/* The same in fp32: cublasSgemm with its default (non-tensor-op) math. */
static pt_status gemm_sgemm(cuda_ctx *c, const cuda_gemm *g)
{
    const float alpha = 1.0f;
    CUBLAS_TRY(cublasSgemm(c->blas, g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, g->ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)g->n,
                           (int)g->m, (int)g->k, &alpha, (const float *)g->b, (int)g->ldb, (const float *)g->a,
                           (int)g->lda, &g->beta, (float *)g->c, (int)g->ldc));
    return PT_OK;
}

/* bf16 operands: cuBLASLt's plan for the shape when the operands are 16-byte aligned, else (and
 * for the reference) cublasGemmEx. Alignment depends on shapes only: the arena and the pool
 * start every buffer on 256 bytes, and the offsets here are whole rows or tiles. */
static pt_status gemm_bf16(cuda_ctx *c, const cuda_gemm *g)
{
    if (c->reference || g->k == 0 || !cuda_lt_aligned(g)) return gemm_ex_bf16(c, g);
    return cuda_lt_matmul(c, g);
}

/* Operands each fp32 or bf16 (an adapter, the activations it meets, their gradients): all fp32
 * for the reference (cublasSgemm); else the fp32 ones rounded to bf16 in the scratch (the first at
 * its start, the second at a 256-byte boundary) and multiplied as gemm_bf16 does. Each operand is
 * a whole contiguous tensor (rows x ld values). */
static pt_status gemm_mixed(cuda_ctx *c, const cuda_gemm *g, pt_dtype a_type, pt_dtype b_type)
{
    if (c->reference) {
        if (a_type != PT_F32 || b_type != PT_F32 || g->c_bf16)
            return ERR(PT_ERR_INTERNAL, "the reference GEMMs take fp32 activations only");
        return gemm_sgemm(c, g);
    }
    bool fa = a_type == PT_F32, fb = b_type == PT_F32;
    int64_t a_elems = (g->ta ? g->k : g->m) * g->lda, b_elems = (g->tb ? g->n : g->k) * g->ldb;
    __nv_bfloat16 *a, *b;
    TRY(scratch_pair(c, fa ? a_elems : 0, fb ? b_elems : 0, &a, &b));
    cuda_gemm h = *g;
    if (fa) {
        TRY(cuda_f32_to_bf16(c, (const float *)g->a, a, a_elems));
        h.a = a;
    }
    if (fb) {
        TRY(cuda_f32_to_bf16(c, (const float *)g->b, b, b_elems));
        h.b = b;
    }
    return gemm_bf16(c, &h);
}

/* An activation operand of count values as bf16: a bf16 tensor in place, an fp32 one rounded into
 * dst (the scratch). */
static pt_status act_bf16(cuda_ctx *c, const pt_tensor *t, int64_t count, __nv_bfloat16 *dst,
                          const __nv_bfloat16 **out)
{
    if (t->dtype == PT_BF16) {
        *out = (const __nv_bfloat16 *)t->data;
        return PT_OK;
    }
    TRY(cuda_f32_to_bf16(c, (const float *)t->data, dst, count));
    *out = dst;
    return PT_OK;
}

/* Columns from n0 on of a row-major C of element size by c_bf16. */
static void *c_at(void *c, bool c_bf16, int64_t n0) { return (char *)c + n0 * (c_bf16 ? 2 : 4); }

/* Rows of w per dequantized tile: the whole weight when it fits TILE_ELEMS (and bf16 weights,
 * used in place), else as many rows as fit for the reference, and for the fast path tiles of
 * equal size rounded up to a multiple of TILE_ROW_ALIGN rows (gate/up of Gemma 2 2B, [9216,
 * 2304]: two tiles of 4608 rows where the reference has 7281 + 1935). A row of over
 * TILE_ELEMS / TILE_ROW_ALIGN values gets the reference's tiles, which cublasGemmEx multiplies. */
static int64_t tile_rows(const pt_tensor *w, bool aligned)
{
    int64_t n = w->shape[0], k = w->shape[1], most = TILE_ELEMS / k;
    if (w->dtype == PT_BF16 || most >= n) return n;
    if (!aligned || most < TILE_ROW_ALIGN) return most < 1 ? 1 : most;
    most -= most % TILE_ROW_ALIGN;
    int64_t tiles = (n + most - 1) / most, even = (n + tiles - 1) / tiles;
    return (even + TILE_ROW_ALIGN - 1) / TILE_ROW_ALIGN * TILE_ROW_ALIGN;
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
{ /* y[M,N] = x[M,K] @ w[N,K]ᵀ + beta y; a tile of w's rows gives the same columns of y */
    cuda_ctx *c = ctx_of(be);
    int64_t n = w->shape[0], k = w->shape[1], m = tensor_numel(x) / k;
    TRY(need_supported(w));
    bool yb = y->dtype == PT_BF16;
    cuda_gemm g = {x->data, k, false, w->data, k, true, y->data, n, m, n, k, beta, yb};
    if (w->dtype == PT_F32) return gemm_mixed(c, &g, x->dtype, PT_F32);
    const __nv_bfloat16 *cached;
    TRY(cuda_wcache_get(c, w, &cached)); /* the whole weight, dequantized once for the pass */
    int64_t per = cached ? n : tile_rows(w, !c->reference);
    __nv_bfloat16 *xb, *tile;
    TRY(scratch_pair(c, x->dtype == PT_BF16 ? 0 : m * k, w->dtype == PT_BF16 || cached ? 0 : per * k, &xb, &tile));
    const __nv_bfloat16 *xa;
    TRY(act_bf16(c, x, m * k, xb, &xa));
    g.a = xa;
    /* aligned (cuda_lt_aligned): x (the arena's) or xb at the scratch's start, the tile at a 256-byte
     * boundary (or a bf16 weight from its first row), y + n0 with n0 a multiple of 128 (fast
     * tiles); lda = ldb = K and ldc = N, multiples of 8 in real models (else cublasGemmEx) */
    for (int64_t n0 = 0; n0 < n; n0 += per) {
        const __nv_bfloat16 *wt = cached;
        g.n = n - n0 < per ? n - n0 : per;
        if (!cached) TRY(weight_tile(c, w, n0, g.n, tile, &wt));
        g.b = wt;
        g.c = c_at(y->data, yb, n0);
        TRY(gemm_bf16(c, &g));
    }
    return PT_OK;
}

pt_status cuda_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w, float beta)
{ /* dx[M,K] = dy[M,N] @ w[N,K] + beta dx; tile by tile over N, each adding its share (a bf16 dx
   * is rounded once per tile) */
    cuda_ctx *c = ctx_of(be);
    int64_t n = w->shape[0], k = w->shape[1], m = tensor_numel(dy) / n;
    TRY(need_supported(w));
    cuda_gemm g = {dy->data, n, false, w->data, k, false, dx->data, k, m, k, n, beta, dx->dtype == PT_BF16};
    if (w->dtype == PT_F32) return gemm_mixed(c, &g, dy->dtype, PT_F32);
    const __nv_bfloat16 *cached;
    TRY(cuda_wcache_get(c, w, &cached));
    int64_t per = cached ? n : tile_rows(w, !c->reference);
    __nv_bfloat16 *dyb, *tile;
    TRY(scratch_pair(c, dy->dtype == PT_BF16 ? 0 : m * n, w->dtype == PT_BF16 || cached ? 0 : per * k, &dyb, &tile));
    const __nv_bfloat16 *dya;
    TRY(act_bf16(c, dy, m * n, dyb, &dya));
    /* aligned as in cuda_matmul, with dy + n0 (n0 a multiple of 128) and dx (the pool's) */
    for (int64_t n0 = 0; n0 < n; n0 += per) {
        const __nv_bfloat16 *wt = cached;
        g.k = n - n0 < per ? n - n0 : per;
        if (!cached) TRY(weight_tile(c, w, n0, g.k, tile, &wt));
        g.a = dya + n0; /* columns n0.. of dy */
        g.b = wt;
        g.beta = n0 == 0 ? beta : 1.0f;
        TRY(gemm_bf16(c, &g));
    }
    return PT_OK;
}

pt_status cuda_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x, float beta)
{ /* dw[N,K] = dy[M,N]ᵀ @ x[M,K] + beta dw: dw is an adapter's gradient (fp32) */
    cuda_ctx *c = ctx_of(be);
    int64_t n = dw->shape[0], k = dw->shape[1], m = tensor_numel(dy) / n;
    cuda_gemm g = {dy->data, n, true, x->data, k, false, dw->data, k, n, k, m, beta, false};
    return gemm_mixed(c, &g, dy->dtype, x->dtype);
}
