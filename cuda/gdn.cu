/* gdn.cu — the CUDA backend's Gated DeltaNet ops, twins of src/cpu/gdn.c (backend.h describes each): the
 * depthwise causal conv1d with SiLU (one thread per sequence and channel walking its rows in order, then writing the
 * conv state), the gates beta and g, the gated delta rule token by token (one block per sequence and value head, each
 * thread owning value columns of the fp32 state, q and k L2-normalised in shared memory with a fixed-order block
 * sum) and y *= sigmoid(gate). Activations bf16 or fp32, everything computed in fp32. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256, RULE_THREADS = 128 };

template <typename T>
__global__ static void conv_kernel(T *y, const T *x, const float *w, T *state, const int32_t *seg, int batch, int seq,
                                   int64_t ch, int k)
{
    GRID_STRIDE(i, (int64_t)batch * ch)
    {
        int b = (int)(i / ch), keep = k - 1;
        int64_t c = i % ch, r0 = (int64_t)b * seq;
        for (int t = 0, start = 0; t < seq; t++) {
            int64_t r = r0 + t;
            if (t > 0 && seg && seg[r] != seg[r - 1]) start = t;
            float acc = 0.0f;
            for (int j = 0; j < k; j++) {
                int p = t - keep + j;
                float v = p >= start ? act_ld(x, (r0 + p) * ch + c)
                          : state && start == 0 ? act_ld(state, ((int64_t)b * keep + keep + p) * ch + c) : 0.0f;
                acc += w[c * k + j] * v;
            }
            act_st(y, r * ch + c, acc / (1.0f + expf(-acc)));
        }
        for (int j = 0; state && j < keep; j++) { /* row seq+j (read) >= j (written): in order, in place */
            int p = seq + j - keep;
            float v = p >= 0 ? act_ld(x, (r0 + p) * ch + c) : act_ld(state, ((int64_t)b * keep + seq + j) * ch + c);
            act_st(state, ((int64_t)b * keep + j) * ch + c, v);
        }
    }
}

template <typename T>
static pt_status conv_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                             const int32_t *seg, const pt_delta *d)
{
    int64_t ch = x->shape[1], n = (int64_t)d->batch * ch;
    auto kernel = conv_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const T *)x->data, (const float *)w->data,
                                                     state ? (T *)state->data : NULL, seg, d->batch, d->seq, ch,
                                                     d->conv);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_conv1d_silu(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                           const pt_delta *d)
{
    cuda_ctx *c = ctx_of(be);
    void *seg = NULL;
    if (d->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, d->segments, sizeof(int32_t) * (size_t)d->batch * d->seq, &seg));
    return ACT_CALL(y, conv_launch, c->stream, y, x, w, state, (const int32_t *)seg, d);
}

template <typename T>
__global__ static void gates_kernel(float *beta, float *g, const T *b, const T *a, const float *a_log,
                                    const float *dt_bias, int64_t h, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float z = act_ld(a, i) + dt_bias[i % h];
        float sp = z > 20.0f ? z : log1pf(expf(z));
        beta[i] = 1.0f / (1.0f + expf(-act_ld(b, i)));
        g[i] = -expf(a_log[i % h]) * sp;
    }
}

template <typename T>
static pt_status gates_launch(cudaStream_t s, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                              const pt_tensor *a_log, const pt_tensor *dt_bias)
{
    int64_t n = tensor_numel(b);
    if (n == 0) return PT_OK;
    auto kernel = gates_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((float *)beta->data, (float *)g->data, (const T *)b->data,
                                                     (const T *)a->data, (const float *)a_log->data,
                                                     (const float *)dt_bias->data, b->shape[1], n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_delta_gates(pt_backend *be, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                           const pt_tensor *a_log, const pt_tensor *dt_bias)
{
    return ACT_CALL(b, gates_launch, ctx_of(be)->stream, beta, g, b, a, a_log, dt_bias);
}

/* shared v[0..n) = x[0..n) / sqrt(sum x^2 + 1e-6) * scale, the sum in a fixed order */
template <typename T>
__device__ static void l2norm_shared(float *v, const T *x, int64_t off, int n, float scale, double *partial)
{
    double ss = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float e = act_ld(x, off + i);
        v[i] = e;
        ss += (double)e * e;
    }
    ss = cuda_block_sum(ss, partial);
    float inv = 1.0f / sqrtf((float)ss + 1e-6f) * scale;
    for (int i = threadIdx.x; i < n; i += blockDim.x) v[i] *= inv;
    __syncthreads();
}

template <typename T>
__global__ static void rule_kernel(T *o, const T *qkv, const float *beta, const float *g, float *state,
                                   const int32_t *seg, int seq, int nv, int rep, int dk, int dv)
{
    __shared__ float qs[PT_DELTA_MAX_DIM], ks[PT_DELTA_MAX_DIM];
    __shared__ double partial[32];
    int bh = blockIdx.x, b = bh / nv, h = bh % nv, kh = h / rep;
    int64_t kw = (int64_t)(nv / rep) * dk, width = 2 * kw + (int64_t)nv * dv, ow = (int64_t)nv * dv;
    float *s = state + (int64_t)bh * dk * dv, qscale = 1.0f / sqrtf((float)dk);
    for (int t = 0; t < seq; t++) {
        int64_t r = (int64_t)b * seq + t;
        l2norm_shared(qs, qkv, r * width + (int64_t)kh * dk, dk, qscale, partial);
        l2norm_shared(ks, qkv, r * width + kw + (int64_t)kh * dk, dk, 1.0f, partial);
        bool reset = t > 0 && seg && seg[r] != seg[r - 1];
        float eg = expf(g[r * nv + h]), bt = beta[r * nv + h];
        for (int j = threadIdx.x; j < dv; j += blockDim.x) {
            float kv = 0.0f;
            for (int i = 0; i < dk; i++) {
                float e = reset ? 0.0f : s[(int64_t)i * dv + j] * eg;
                s[(int64_t)i * dv + j] = e;
                kv += e * ks[i];
            }
            float delta = (act_ld(qkv, r * width + 2 * kw + (int64_t)h * dv + j) - kv) * bt, out = 0.0f;
            for (int i = 0; i < dk; i++) {
                float e = s[(int64_t)i * dv + j] + ks[i] * delta;
                s[(int64_t)i * dv + j] = e;
                out += e * qs[i];
            }
            act_st(o, r * ow + (int64_t)h * dv + j, out);
        }
        __syncthreads(); /* qs and ks are read before the next token overwrites them */
    }
}

template <typename T>
static pt_status rule_launch(cudaStream_t s, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                             const pt_tensor *g, float *state, const int32_t *seg, const pt_delta *d)
{
    auto kernel = rule_kernel<T>;
    kernel<<<(unsigned)(d->batch * d->v_heads), RULE_THREADS, 0, s>>>(
        (T *)o->data, (const T *)qkv->data, (const float *)beta->data, (const float *)g->data, state, seg, d->seq,
        d->v_heads, d->v_heads / d->k_heads, d->k_dim, d->v_dim);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_delta_rule(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                          const pt_tensor *g, pt_tensor *state, const pt_delta *d)
{
    cuda_ctx *c = ctx_of(be);
    void *seg = NULL;
    if (d->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, d->segments, sizeof(int32_t) * (size_t)d->batch * d->seq, &seg));
    float *s = state ? (float *)state->data : NULL;
    size_t bytes = sizeof(float) * (size_t)d->batch * d->v_heads * d->k_dim * d->v_dim;
    if (!s) { /* a pass without a cache: the state starts at zero and is dropped */
        CUDA_TRY(cudaMallocAsync((void **)&s, bytes, c->stream));
        cudaError_t e = cudaMemsetAsync(s, 0, bytes, c->stream);
        if (e != cudaSuccess) {
            cudaFreeAsync(s, c->stream);
            return ERR(PT_ERR_INTERNAL, "delta_rule: cudaMemsetAsync: %s", cudaGetErrorString(e));
        }
    }
    pt_status st = ACT_CALL(o, rule_launch, c->stream, o, qkv, beta, g, s, (const int32_t *)seg, d);
    if (!state) {
        cudaError_t e = cudaFreeAsync(s, c->stream);
        if (st == PT_OK && e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync: %s", cudaGetErrorString(e));
    }
    return st;
}

template <typename T>
__global__ static void sigmoid_mul_kernel(T *y, const T *gate, int64_t n)
{
    GRID_STRIDE(i, n) act_st(y, i, act_ld(y, i) / (1.0f + expf(-act_ld(gate, i))));
}

template <typename T>
static pt_status sigmoid_mul_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *gate)
{
    int64_t n = tensor_numel(y);
    if (n == 0) return PT_OK;
    auto kernel = sigmoid_mul_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const T *)gate->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_sigmoid_mul(pt_backend *be, pt_tensor *y, const pt_tensor *gate)
{
    return ACT_CALL(y, sigmoid_mul_launch, ctx_of(be)->stream, y, gate);
}
