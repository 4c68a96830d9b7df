/* layers_bwd.cu — gradients of the per-row layer ops in layers.cu, twins of src/cpu/layers_bwd.c:
 *   RMSNorm  dx = r (w∘dy) - x r³ <w∘dy, x> / dim (one block per row, the dot in double), and
 *            dw += Σ_rows dy∘x∘r: rows are cut into chunks, each chunk's column sums go to a
 *            partials buffer in double, and a second kernel adds the chunks in order (no atomics,
 *            so the result is the same on every run); dx may get the residual branch's gradient
 *            added in the same pass (backend_rmsnorm_bwd_add);
 *   Embedding  dtable[ids[r]] += scale dout[r]: a thread per column, the rows in order (no atomics);
 *   SwiGLU and GeGLU elementwise, each thread reading its inputs before writing (outputs may
 *   alias inputs). dw is computed before dx, which may overwrite dy.
 * Gradients of activations have the activations' dtype (bf16 or fp32: a template on T); dw, the
 * weights and rstd are fp32, every sum in double. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256, DW_COLS = 32, DW_ROW_LANES = 8, DW_CHUNK_ROWS = 256 };

/* partial[chunk, i] = Σ over the chunk's rows of dy[r, i] x[r, i] rstd[r] */
template <typename T>
__global__ static void rmsnorm_dw_partial_kernel(double *partial, const T *dy, const T *x, const float *rstd,
                                                 int64_t rows, int64_t dim)
{
    __shared__ double acc[DW_ROW_LANES][DW_COLS];
    int64_t col = (int64_t)blockIdx.x * DW_COLS + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * DW_CHUNK_ROWS, r1 = r0 + DW_CHUNK_ROWS < rows ? r0 + DW_CHUNK_ROWS : rows;
    double s = 0;
    if (col < dim)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += DW_ROW_LANES)
            s += (double)act_ld(dy, r * dim + col) * act_ld(x, r * dim + col) * rstd[r];
    acc[threadIdx.y][threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.y == 0 && col < dim) {
        double t = 0;
        for (int l = 0; l < DW_ROW_LANES; l++) t += acc[l][threadIdx.x];
        partial[(int64_t)blockIdx.y * dim + col] = t;
    }
}

__global__ static void rmsnorm_dw_sum_kernel(float *dw, const double *partial, int64_t chunks, int64_t dim)
{
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < dim; i += (int64_t)gridDim.x * blockDim.x) {
        double t = 0;
        for (int64_t ch = 0; ch < chunks; ch++) t += partial[ch * dim + i];
        dw[i] += (float)t;
    }
}

template <typename T>
__global__ static void rmsnorm_dx_kernel(T *dx, const T *dy, const T *x, const float *w, const float *rstd, const T *res,
                                         int64_t dim)
{
    __shared__ double shared[32];
    int64_t r = blockIdx.x;
    const T *dyr = dy + r * dim, *xr = x + r * dim;
    float rs = rstd[r];
    double dot = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dot += (double)act_ld(dyr, i) * w[i] * act_ld(xr, i);
    dot = cuda_block_sum(dot, shared); /* every thread has read its dy before any writes dx */
    float cf = (float)(dot * rs * rs * rs / (double)dim);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        float g = rs * (w[i] * act_ld(dyr, i)) - act_ld(xr, i) * cf;
        act_st(dx, r * dim + i, res ? g + act_ld(res, r * dim + i) : g); /* the residual's gradient: one rounding */
    }
}

template <typename T>
static pt_status rmsnorm_bwd_launch(cuda_ctx *c, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy,
                                    const pt_tensor *x, const pt_tensor *w, const pt_tensor *rstd, const pt_tensor *res,
                                    int64_t rows, int64_t dim)
{
    const float *rs = (const float *)rstd->data;
    if (dw) {
        int64_t chunks = (rows + DW_CHUNK_ROWS - 1) / DW_CHUNK_ROWS;
        TRY(cuda_partials_reserve(c, (size_t)(chunks * dim)));
        dim3 grid((unsigned)((dim + DW_COLS - 1) / DW_COLS), (unsigned)chunks), block(DW_COLS, DW_ROW_LANES);
        auto partial = rmsnorm_dw_partial_kernel<T>;
        partial<<<grid, block, 0, c->stream>>>(c->partials, (const T *)dy->data, (const T *)x->data, rs, rows, dim);
        CUDA_LAUNCHED();
        rmsnorm_dw_sum_kernel<<<cuda_grid(dim, THREADS), THREADS, 0, c->stream>>>((float *)dw->data, c->partials,
                                                                                chunks, dim);
        CUDA_LAUNCHED();
    }
    auto kernel = rmsnorm_dx_kernel<T>;
    kernel<<<(unsigned)rows, THREADS, 0, c->stream>>>((T *)dx->data, (const T *)dy->data, (const T *)x->data,
                                                      (const float *)w->data, rs,
                                                      res ? (const T *)res->data : NULL, dim);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_rmsnorm_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                           const pt_tensor *w, const pt_tensor *rstd, const pt_tensor *res)
{
    int64_t dim = x->shape[x->ndim - 1], rows = tensor_numel(x) / dim;
    if (rows == 0) return PT_OK;
    return ACT_CALL(x, rmsnorm_bwd_launch, ctx_of(be), dx, dw, dy, x, w, rstd, res, rows, dim);
}

/* d/dg and d/du of y = act(g) * u: SiLU (SwiGLU) or tanh GELU (GeGLU) */
template <typename T, bool GELU>
__global__ static void glu_bwd_kernel(T *dg, T *du, const T *dy, const T *g, const T *u, int64_t n)
{
    const float k0 = 0.7978845608028654f, k1 = 0.044715f; /* sqrt(2/pi) */
    GRID_STRIDE(i, n)
    {
        float x = act_ld(g, i), ui = act_ld(u, i), di = act_ld(dy, i), a, slope;
        if (GELU) {
            float t = tanhf(k0 * (x + k1 * x * x * x));
            a = 0.5f * x * (1.0f + t);
            slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * x * x);
        } else {
            float sig = 1.0f / (1.0f + expf(-x));
            a = x * sig;
            slope = sig * (1.0f + x * (1.0f - sig));
        }
        act_st(dg, i, di * ui * slope);
        act_st(du, i, di * a);
    }
}

template <typename T>
static pt_status glu_bwd_launch(cudaStream_t s, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                                const pt_tensor *gate, const pt_tensor *up, bool gelu)
{
    int64_t n = tensor_numel(dy);
    auto kernel = gelu ? glu_bwd_kernel<T, true> : glu_bwd_kernel<T, false>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)dgate->data, (T *)dup->data, (const T *)dy->data,
                                                     (const T *)gate->data, (const T *)up->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_swiglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                          const pt_tensor *gate, const pt_tensor *up)
{
    return ACT_CALL(dy, glu_bwd_launch, ctx_of(be)->stream, dgate, dup, dy, gate, up, false);
}

pt_status cuda_geglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                         const pt_tensor *gate, const pt_tensor *up)
{
    return ACT_CALL(dy, glu_bwd_launch, ctx_of(be)->stream, dgate, dup, dy, gate, up, true);
}

/* The embedding's gradient: one thread per column walks the rows in order, so each sum is taken
 * in the CPU's order and no two threads touch one entry (no atomics: the same bits every run). */
template <typename T>
__global__ static void embed_bwd_kernel(float *dt, const T *dy, const int32_t *ids, int64_t rows, int64_t dim,
                                        float scale)
{
    GRID_STRIDE(c, dim)
    for (int64_t r = 0; r < rows; r++) {
        float *e = dt + (int64_t)ids[r] * dim + c;
        *e = __fadd_rn(*e, __fmul_rn(scale, act_ld(dy, r * dim + c)));
    }
}

template <typename T>
static pt_status embed_bwd_launch(cudaStream_t s, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids,
                                  float scale)
{
    int64_t dim = dtable->shape[1], rows = tensor_numel(dout) / dim;
    if (rows == 0) return PT_OK;
    auto kernel = embed_bwd_kernel<T>;
    kernel<<<cuda_grid(dim, THREADS), THREADS, 0, s>>>((float *)dtable->data, (const T *)dout->data, ids, rows, dim,
                                                       scale);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_embed_bwd(pt_backend *be, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids, float scale)
{
    cuda_ctx *c = ctx_of(be);
    int64_t n = tensor_numel(dout) / dtable->shape[1];
    void *dev_ids;
    TRY(cuda_stage(c, STAGE_IDS, ids, (size_t)n * sizeof(int32_t), &dev_ids));
    return ACT_CALL(dout, embed_bwd_launch, c->stream, dtable, dout, (const int32_t *)dev_ids, scale);
}
