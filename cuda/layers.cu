/* layers.cu — the CUDA backend's per-row layer ops, twins of src/cpu/layers.c: embedding lookup
 * (rows of the stored table dequantized on the device), RMSNorm (one block per row, the sum of
 * squares in double as on the CPU; alone, or after the residual add in the same pass), rotary embedding (HF "rotate half", angles in double), SwiGLU,
 * GeGLU (tanh GELU), bias and residual adds, and dropout with the CPU's counter-based mask, so
 * both backends drop the same elements for the same seed. Elementwise kernels are grid-stride
 * loops on the backend's stream. Activations are bf16 or fp32 (a template on the element type T,
 * the arithmetic in fp32 registers); norm weights, biases, rstd and frequencies are fp32. */
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
    bool bf = out->dtype == PT_BF16;
    return cuda_dequant_rows(c, table, (const int32_t *)dev_ids, 0, n, bf ? (__nv_bfloat16 *)out->data : NULL,
                             bf ? NULL : (float *)out->data);
}

/* One block per row: y = x rstd w, rstd = 1 / sqrt(mean(x²) + eps); with add (ADD), x += add first
 * (the residual, fused: issue 26 point 6), the sum of squares over x as stored (rounded). A thread
 * reads back only the elements it wrote. */
template <typename T, bool ADD>
__global__ static void rmsnorm_kernel(T *y, float *rstd, T *x, const T *add, const float *w, int64_t dim, float eps)
{
    __shared__ double shared[32];
    int64_t r = blockIdx.x;
    T *xr = x + r * dim;
    double ss = 0;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) {
        if (ADD) act_st(xr, i, act_ld(xr, i) + act_ld(add + r * dim, i));
        float v = act_ld(xr, i);
        ss += (double)v * v;
    }
    ss = cuda_block_sum(ss, shared);
    float inv = (float)(1.0 / sqrt(ss / (double)dim + eps));
    if (rstd && threadIdx.x == 0) rstd[r] = inv;
    for (int64_t i = threadIdx.x; i < dim; i += blockDim.x) act_st(y, r * dim + i, act_ld(xr, i) * inv * w[i]);
}

template <typename T>
static pt_status rmsnorm_launch(cudaStream_t s, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x, const pt_tensor *add,
                                const pt_tensor *w, float eps)
{
    int64_t dim = x->shape[x->ndim - 1], rows = tensor_numel(x) / dim;
    if (rows == 0) return PT_OK;
    auto kernel = add ? rmsnorm_kernel<T, true> : rmsnorm_kernel<T, false>;
    kernel<<<(unsigned)rows, THREADS, 0, s>>>((T *)y->data, rstd ? (float *)rstd->data : NULL, (T *)x->data,
                                              add ? (const T *)add->data : NULL, (const float *)w->data, dim, eps);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_rmsnorm_fwd(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x, const pt_tensor *w,
                           float eps)
{
    return ACT_CALL(x, rmsnorm_launch, ctx_of(be)->stream, y, rstd, x, NULL, w, eps);
}

pt_status cuda_add_rmsnorm(pt_backend *be, pt_tensor *h, pt_tensor *y, pt_tensor *rstd, const pt_tensor *r,
                           const pt_tensor *w, float eps)
{
    return ACT_CALL(h, rmsnorm_launch, ctx_of(be)->stream, y, rstd, h, r, w, eps);
}

/* x[t, h, i] and x[t, h, i + half] rotate by pos[t] * inv_freq[i] (sign -1: the inverse). */
template <typename T>
__global__ static void rope_kernel(T *x, int64_t rows, int n_heads, int head_dim, int rot_dim, float mscale,
                                   const int32_t *pos, const float *inv_freq, float sign)
{
    int half = rot_dim / 2; /* values from rot_dim on pass (partial rotary) */
    int64_t width = (int64_t)n_heads * head_dim, n = rows * half;
    for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
        int64_t t = e / half;
        int i = (int)(e % half);
        double angle = (double)pos[t] * inv_freq[i];
        float cs = (float)cos(angle) * mscale, sn = sign * (float)sin(angle) * mscale;
        for (int h = 0; h < n_heads; h++) {
            T *p = x + t * width + (int64_t)h * head_dim;
            float a = act_ld(p, i), b = act_ld(p, i + half);
            act_st(p, i, a * cs - b * sn);
            act_st(p, i + half, b * cs + a * sn);
        }
    }
}

template <typename T>
static pt_status rope_launch(cudaStream_t s, pt_tensor *x, int64_t rows, int n_heads, int head_dim, int rot_dim,
                             float mscale, const int32_t *pos, const float *freq, float sign)
{
    auto kernel = rope_kernel<T>;
    kernel<<<cuda_grid(rows * (rot_dim / 2), THREADS), THREADS, 0, s>>>((T *)x->data, rows, n_heads, head_dim, rot_dim,
                                                                        mscale, pos, freq, sign);
    CUDA_LAUNCHED();
    return PT_OK;
}

static pt_status rope(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                      const int32_t *pos, const float *inv_freq, float sign)
{
    cuda_ctx *c = ctx_of(be);
    int64_t rows = tensor_numel(x) / ((int64_t)n_heads * head_dim);
    void *dpos, *dfreq;
    TRY(cuda_stage(c, STAGE_POS, pos, (size_t)rows * sizeof(int32_t), &dpos));
    TRY(cuda_stage(c, STAGE_FREQ, inv_freq, (size_t)(rot_dim / 2) * sizeof(float), &dfreq));
    return ACT_CALL(x, rope_launch, c->stream, x, rows, n_heads, head_dim, rot_dim, mscale, (const int32_t *)dpos,
                    (const float *)dfreq, sign);
}

/* row t times 1 + beta ln(1 + floor(pos[t] / period)) */
template <typename T>
__global__ static void pos_scale_kernel(T *x, int64_t width, int64_t n, float beta, int period, const int32_t *pos)
{
    GRID_STRIDE(e, n) {
        float s = 1.0f + beta * logf(1.0f + (float)(pos[e / width] / period));
        act_st(x, e, act_ld(x, e) * s);
    }
}

template <typename T>
static pt_status pos_scale_launch(cudaStream_t s, pt_tensor *x, float beta, int period, const int32_t *pos)
{
    int64_t n = tensor_numel(x), width = x->shape[x->ndim - 1];
    auto kernel = pos_scale_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)x->data, width, n, beta, period, pos);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_pos_scale(pt_backend *be, pt_tensor *x, float beta, int period, const int32_t *pos)
{
    cuda_ctx *c = ctx_of(be);
    int64_t rows = tensor_numel(x) / x->shape[x->ndim - 1];
    void *dpos;
    TRY(cuda_stage(c, STAGE_POS, pos, (size_t)rows * sizeof(int32_t), &dpos));
    return ACT_CALL(x, pos_scale_launch, c->stream, x, beta, period, (const int32_t *)dpos);
}

pt_status cuda_rope_fwd(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                        const int32_t *pos, const float *inv_freq)
{
    return rope(be, x, n_heads, head_dim, rot_dim, mscale, pos, inv_freq, 1.0f);
}

pt_status cuda_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, int rot_dim, float mscale,
                        const int32_t *pos, const float *inv_freq)
{ /* m R is m times an orthogonal map: its gradient is m times the inverse rotation */
    return rope(be, dx, n_heads, head_dim, rot_dim, mscale, pos, inv_freq, -1.0f);
}

/* act(g) * u: SiLU (SwiGLU) or tanh GELU (GeGLU). */
template <typename T, bool GELU>
__global__ static void glu_kernel(T *y, const T *g, const T *u, int64_t n)
{
    const float k0 = 0.7978845608028654f, k1 = 0.044715f; /* sqrt(2/pi) */
    GRID_STRIDE(i, n)
    {
        float x = act_ld(g, i), a = GELU ? 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x))) : x / (1.0f + expf(-x));
        act_st(y, i, a * act_ld(u, i));
    }
}

template <typename T>
static pt_status glu_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, bool gelu)
{
    int64_t n = tensor_numel(y);
    auto kernel = gelu ? glu_kernel<T, true> : glu_kernel<T, false>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const T *)gate->data, (const T *)up->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_swiglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    return ACT_CALL(y, glu_launch, ctx_of(be)->stream, y, gate, up, false);
}

pt_status cuda_geglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    return ACT_CALL(y, glu_launch, ctx_of(be)->stream, y, gate, up, true);
}

/* gpt-oss's clamped SwiGLU, the twin of cpu_swiglu_clamp_fwd */
template <typename T>
__global__ static void glu_clamp_kernel(T *y, const T *g, const T *u, int64_t n, float limit, float alpha)
{
    GRID_STRIDE(i, n)
    {
        float x = fminf(act_ld(g, i), limit), v = fmaxf(fminf(act_ld(u, i), limit), -limit);
        act_st(y, i, (v + 1.0f) * (x / (1.0f + expf(-alpha * x))));
    }
}

template <typename T>
static pt_status glu_clamp_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                                  float alpha)
{
    int64_t n = tensor_numel(y);
    auto kernel = glu_clamp_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const T *)gate->data, (const T *)up->data, n,
                                                     limit, alpha);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_swiglu_clamp_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                                float alpha)
{
    return ACT_CALL(y, glu_clamp_launch, ctx_of(be)->stream, y, gate, up, limit, alpha);
}

template <typename T>
__global__ static void add_bias_kernel(T *y, const float *b, int64_t width, int64_t n)
{
    GRID_STRIDE(i, n) act_st(y, i, act_ld(y, i) + b[i % width]);
}

template <typename T>
__global__ static void add_kernel(T *y, const T *x, int64_t n)
{
    GRID_STRIDE(i, n) act_st(y, i, act_ld(y, i) + act_ld(x, i));
}

template <typename T>
static pt_status add_bias_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *bias)
{
    int64_t n = tensor_numel(y);
    auto kernel = add_bias_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const float *)bias->data, tensor_numel(bias), n);
    CUDA_LAUNCHED();
    return PT_OK;
}

template <typename T>
static pt_status add_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *x)
{
    int64_t n = tensor_numel(y);
    auto kernel = add_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const T *)x->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_add_bias(pt_backend *be, pt_tensor *y, const pt_tensor *bias)
{
    return ACT_CALL(y, add_bias_launch, ctx_of(be)->stream, y, bias);
}

pt_status cuda_add(pt_backend *be, pt_tensor *y, const pt_tensor *x)
{
    return ACT_CALL(y, add_launch, ctx_of(be)->stream, y, x);
}

/* The CPU's counter-based draw (src/cpu/layers.c): the same (seed, i) gives the same number. */
__host__ __device__ static inline uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

template <typename T>
__global__ static void dropout_kernel(T *y, const T *x, int64_t n, uint64_t base, uint64_t threshold, float keep_scale)
{
    GRID_STRIDE(i, n) act_st(y, i, mix(base + (uint64_t)i) >= threshold ? act_ld(x, i) * keep_scale : 0.0f);
}

template <typename T>
static pt_status dropout_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *x, uint64_t base, uint64_t threshold,
                                float keep_scale)
{
    int64_t n = tensor_numel(x);
    auto kernel = dropout_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const T *)x->data, n, base, threshold, keep_scale);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_dropout(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed)
{
    float keep_scale = 1.0f / (1.0f - p);
    uint64_t threshold = (uint64_t)((double)p * 18446744073709551615.0), base = mix(seed + 0x9e3779b97f4a7c15ULL);
    return ACT_CALL(x, dropout_launch, ctx_of(be)->stream, y, x, base, threshold, keep_scale);
}
