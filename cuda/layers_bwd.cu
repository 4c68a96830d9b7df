/* layers_bwd.cu — gradients of the per-row layer ops in layers.cu, twins of src/cpu/layers_bwd.c:
 *   RMSNorm  dx = r (w∘dy) - x r³ <w∘dy, x> / dim (one block per row, the dot in double), and
 *            dw += Σ_rows dy∘x∘r: rows are cut into chunks, each chunk's column sums go to a
 *            partials buffer in double, and a second kernel adds the chunks in order (no atomics,
 *            so the result is the same on every run);
 *   SwiGLU and GeGLU elementwise, each thread reading its inputs before writing (outputs may
 *   alias inputs). dw is computed before dx, which may overwrite dy. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256, DW_COLS = 32, DW_ROW_LANES = 8, DW_CHUNK_ROWS = 256 };

/* partial[chunk, i] = Σ over the chunk's rows of dy[r, i] x[r, i] rstd[r] */
__global__ static void rmsnorm_dw_partial_kernel(double *partial, const float *dy, const float *x, const float *rstd,
                                                 int64_t rows, int64_t dim)
{
    __shared__ double acc[DW_ROW_LANES][DW_COLS];
    int64_t col = (int64_t)blockIdx.x * DW_COLS + threadIdx.x;
    int64_t r0 = (int64_t)blockIdx.y * DW_CHUNK_ROWS, r1 = r0 + DW_CHUNK_ROWS < rows ? r0 + DW_CHUNK_ROWS : rows;
    double s = 0;
    if (col < dim)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += DW_ROW_LANES)
            s += (double)dy[r * dim + col] * x[r * dim + col] * rstd[r];
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

__global__ static void rmsnorm_dx_kernel(float *dx, const float *dy, const float *x, const float *w, const float *rstd,
                                         int64_t dim)
{
    __shared__ double shared[32];
    int64_t r = blockIdx.x;
    const float *dyr = dy + r * dim, *xr = x + r * dim;
    float rs = rstd[r];
    double dot = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dot += (double)dyr[i] * w[i] * xr[i];
    dot = cuda_block_sum(dot, shared); /* every thread has read its dy before any writes dx */
    float cf = (float)(dot * rs * rs * rs / (double)dim);
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) dx[r * dim + i] = rs * (w[i] * dyr[i]) - xr[i] * cf;
}

static pt_status rmsnorm_dw(cuda_ctx *c, float *dw, const float *dy, const float *x, const float *rstd, int64_t rows,
                            int64_t dim)
{
    int64_t chunks = (rows + DW_CHUNK_ROWS - 1) / DW_CHUNK_ROWS;
    TRY(cuda_partials_reserve(c, (size_t)(chunks * dim)));
    dim3 grid((unsigned)((dim + DW_COLS - 1) / DW_COLS), (unsigned)chunks), block(DW_COLS, DW_ROW_LANES);
    rmsnorm_dw_partial_kernel<<<grid, block, 0, c->stream>>>(c->partials, dy, x, rstd, rows, dim);
    CUDA_LAUNCHED();
    rmsnorm_dw_sum_kernel<<<cuda_grid(dim, THREADS), THREADS, 0, c->stream>>>(dw, c->partials, chunks, dim);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_rmsnorm_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                           const pt_tensor *w, const pt_tensor *rstd)
{
    cuda_ctx *c = ctx_of(be);
    int64_t dim = x->shape[x->ndim - 1], rows = tensor_numel(x) / dim;
    if (rows == 0) return PT_OK;
    if (dw)
        TRY(rmsnorm_dw(c, (float *)dw->data, (const float *)dy->data, (const float *)x->data,
                       (const float *)rstd->data, rows, dim));
    rmsnorm_dx_kernel<<<(unsigned)rows, THREADS, 0, c->stream>>>((float *)dx->data, (const float *)dy->data,
                                                                  (const float *)x->data, (const float *)w->data,
                                                                  (const float *)rstd->data, dim);
    CUDA_LAUNCHED();
    return PT_OK;
}

__global__ static void swiglu_bwd_kernel(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float gi = g[i], ui = u[i], di = dy[i];
        float sig = 1.0f / (1.0f + expf(-gi));
        float silu = gi * sig;
        dg[i] = di * ui * (sig * (1.0f + gi * (1.0f - sig)));
        du[i] = di * silu;
    }
}

__global__ static void geglu_bwd_kernel(float *dg, float *du, const float *dy, const float *g, const float *u, int64_t n)
{
    const float k0 = 0.7978845608028654f, k1 = 0.044715f; /* sqrt(2/pi) */
    GRID_STRIDE(i, n)
    {
        float x = g[i], ui = u[i], di = dy[i];
        float t = tanhf(k0 * (x + k1 * x * x * x));
        float gelu = 0.5f * x * (1.0f + t);
        float slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * x * x);
        dg[i] = di * ui * slope;
        du[i] = di * gelu;
    }
}

pt_status cuda_swiglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                          const pt_tensor *gate, const pt_tensor *up)
{
    int64_t n = tensor_numel(dy);
    swiglu_bwd_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)dgate->data, (float *)dup->data, (const float *)dy->data, (const float *)gate->data,
        (const float *)up->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_geglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                         const pt_tensor *gate, const pt_tensor *up)
{
    int64_t n = tensor_numel(dy);
    geglu_bwd_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)dgate->data, (float *)dup->data, (const float *)dy->data, (const float *)gate->data,
        (const float *)up->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}
