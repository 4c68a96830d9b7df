/* layers.cu — the CUDA backend's per-row layer ops, twins of src/cpu/layers.c: embedding lookup
 * (rows of the stored table dequantized on the device), RMSNorm (one block per row, the sum of
 * squares in double as on the CPU), rotary embedding (HF "rotate half", angles in double), SwiGLU,
 * GeGLU (tanh GELU), bias and residual adds, and dropout with the CPU's counter-based mask, so
 * both backends drop the same elements for the same seed. Elementwise kernels are grid-stride
 * loops on the backend's stream. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256 };

pt_status cuda_embed(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids)
{
    cuda_ctx *c = ctx_of(be);
    int64_t n = tensor_numel(out) / table->shape[1];
    void *dev_ids;
    TRY(cuda_stage(c, STAGE_IDS, ids, (size_t)n * sizeof(int32_t), &dev_ids));
    return cuda_dequant_rows(c, table, (const int32_t *)dev_ids, 0, n, NULL, (float *)out->data);
}

__global__ static void rmsnorm_kernel(float *y, float *rstd, const float *x, const float *w, int64_t dim, float eps)
{
    __shared__ double shared[32];
    int64_t r = blockIdx.x;
    const float *xr = x + r * dim;
    double ss = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) ss += (double)xr[i] * xr[i];
    ss = cuda_block_sum(ss, shared);
    float inv = (float)(1.0 / sqrt(ss / (double)dim + eps));
    if (rstd && threadIdx.x == 0) rstd[r] = inv;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) y[r * dim + i] = xr[i] * inv * w[i];
}

pt_status cuda_rmsnorm_fwd(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x, const pt_tensor *w,
                           float eps)
{
    int64_t dim = x->shape[x->ndim - 1], rows = tensor_numel(x) / dim;
    if (rows == 0) return PT_OK;
    rmsnorm_kernel<<<(unsigned)rows, THREADS, 0, ctx_of(be)->stream>>>(
        (float *)y->data, rstd ? (float *)rstd->data : NULL, (const float *)x->data, (const float *)w->data, dim, eps);
    CUDA_LAUNCHED();
    return PT_OK;
}

/* x[t, h, i] and x[t, h, i + half] rotate by pos[t] * inv_freq[i] (sign -1: the inverse). */
__global__ static void rope_kernel(float *x, int64_t rows, int n_heads, int head_dim, const int32_t *pos,
                                   const float *inv_freq, float sign)
{
    int half = head_dim / 2;
    int64_t width = (int64_t)n_heads * head_dim, n = rows * half;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = e / half;
        int i = (int)(e % half);
        double angle = (double)pos[t] * inv_freq[i];
        float cs = (float)cos(angle), sn = sign * (float)sin(angle);
        for (int h = 0; h < n_heads; h++) {
            float *p = x + t * width + (int64_t)h * head_dim;
            float a = p[i], b = p[i + half];
            p[i] = a * cs - b * sn;
            p[i + half] = b * cs + a * sn;
        }
    }
}

static pt_status rope(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, const int32_t *pos,
                      const float *inv_freq, float sign)
{
    cuda_ctx *c = ctx_of(be);
    int64_t rows = tensor_numel(x) / ((int64_t)n_heads * head_dim);
    void *dpos, *dfreq;
    TRY(cuda_stage(c, STAGE_POS, pos, (size_t)rows * sizeof(int32_t), &dpos));
    TRY(cuda_stage(c, STAGE_FREQ, inv_freq, (size_t)(head_dim / 2) * sizeof(float), &dfreq));
    rope_kernel<<<cuda_grid(rows * (head_dim / 2), THREADS), THREADS, 0, c->stream>>>(
        (float *)x->data, rows, n_heads, head_dim, (const int32_t *)dpos, (const float *)dfreq, sign);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_rope_fwd(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, const int32_t *pos,
                        const float *inv_freq)
{
    return rope(be, x, n_heads, head_dim, pos, inv_freq, 1.0f);
}

pt_status cuda_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, const int32_t *pos,
                        const float *inv_freq)
{ /* the rotation is orthogonal: its gradient is the inverse rotation */
    return rope(be, dx, n_heads, head_dim, pos, inv_freq, -1.0f);
}

__global__ static void swiglu_kernel(float *y, const float *g, const float *u, int64_t n)
{
    GRID_STRIDE(i, n) y[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

__global__ static void geglu_kernel(float *y, const float *g, const float *u, int64_t n)
{
    const float k0 = 0.7978845608028654f, k1 = 0.044715f; /* sqrt(2/pi) */
    GRID_STRIDE(i, n)
    {
        float x = g[i];
        y[i] = 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x))) * u[i];
    }
}

pt_status cuda_swiglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    int64_t n = tensor_numel(y);
    swiglu_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)y->data, (const float *)gate->data, (const float *)up->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_geglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    int64_t n = tensor_numel(y);
    geglu_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)y->data, (const float *)gate->data, (const float *)up->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

__global__ static void add_bias_kernel(float *y, const float *b, int64_t width, int64_t n)
{
    GRID_STRIDE(i, n) y[i] += b[i % width];
}

__global__ static void add_kernel(float *y, const float *x, int64_t n)
{
    GRID_STRIDE(i, n) y[i] += x[i];
}

pt_status cuda_add_bias(pt_backend *be, pt_tensor *y, const pt_tensor *bias)
{
    int64_t n = tensor_numel(y);
    add_bias_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)y->data, (const float *)bias->data, tensor_numel(bias), n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_add(pt_backend *be, pt_tensor *y, const pt_tensor *x)
{
    int64_t n = tensor_numel(y);
    add_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>((float *)y->data, (const float *)x->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

/* The CPU's counter-based draw (src/cpu/layers.c): the same (seed, i) gives the same number. */
__host__ __device__ static inline uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

__global__ static void dropout_kernel(float *y, const float *x, int64_t n, uint64_t base, uint64_t threshold,
                                      float keep_scale)
{
    GRID_STRIDE(i, n) y[i] = mix(base + (uint64_t)i) >= threshold ? x[i] * keep_scale : 0.0f;
}

pt_status cuda_dropout(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed)
{
    int64_t n = tensor_numel(x);
    float keep_scale = 1.0f / (1.0f - p);
    uint64_t threshold = (uint64_t)((double)p * 18446744073709551615.0), base = mix(seed + 0x9e3779b97f4a7c15ULL);
    dropout_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)y->data, (const float *)x->data, n, base, threshold, keep_scale);
    CUDA_LAUNCHED();
    return PT_OK;
}
