/* gdn_bwd.cu — the CUDA backend's backward of the Gated DeltaNet ops, twins of src/cpu/gdn_bwd.c (backend.h
 * describes each): the conv (one thread per sequence and channel, the pre-activations recomputed), the gates and
 * y *= sigmoid(gate) elementwise, and the delta rule: one block per sequence and value head, the state kept in a
 * global scratch every PT_DELTA_CHUNK tokens and each chunk's states recomputed from it, then the recurrence run
 * backwards token by token; threads own value columns of the state where the sums run over key rows and key rows
 * where they run over value columns, with the block's sums in a fixed order. The gradients at each value head's
 * normalised q and k go to an fp32 scratch that a second kernel sums over the heads sharing a key head and takes
 * through the normalisation. Activations bf16 or fp32, everything computed in fp32. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256, RULE_THREADS = 128 };

__device__ static inline float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

__device__ static inline bool starts(const int32_t *seg, int64_t r, int t)
{
    return t == 0 || (seg && seg[r] != seg[r - 1]);
}

/* ---- conv1d_silu, delta_gates, sigmoid_mul ---- */

template <typename T>
__device__ static float conv_pre(const T *x, const float *w, int64_t r0, int64_t ch, int64_t c, int k, int t, int start)
{
    float acc = 0.0f;
    for (int j = 0; j < k; j++) {
        int p = t - (k - 1) + j;
        if (p >= start) acc += w[c * k + j] * act_ld(x, (r0 + p) * ch + c);
    }
    return acc;
}

template <typename T>
__global__ static void conv_bwd_kernel(T *dx, const T *dy, const T *x, const float *w, const int32_t *seg, int batch,
                                       int seq, int64_t ch, int k)
{
    GRID_STRIDE(i, (int64_t)batch * ch)
    {
        int b = (int)(i / ch), keep = k - 1;
        int64_t c = i % ch, r0 = (int64_t)b * seq;
        for (int p = 0, start = 0; p < seq; p++) {
            if (starts(seg, r0 + p, p)) start = p;
            int last = p;
            while (last + 1 < seq && last + 1 <= p + keep && !starts(seg, r0 + last + 1, last + 1)) last++;
            float acc = 0.0f;
            for (int t = p; t <= last; t++) {
                float a = conv_pre(x, w, r0, ch, c, k, t, start), s = sigm(a);
                acc += w[c * k + (p - t + keep)] * act_ld(dy, (r0 + t) * ch + c) * s * (1.0f + a * (1.0f - s));
            }
            act_st(dx, (r0 + p) * ch + c, acc);
        }
    }
}

template <typename T>
static pt_status conv_bwd_launch(cudaStream_t s, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                                 const pt_tensor *w, const int32_t *seg, const pt_delta *d)
{
    int64_t ch = x->shape[1], n = (int64_t)d->batch * ch;
    auto kernel = conv_bwd_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)dx->data, (const T *)dy->data, (const T *)x->data,
                                                     (const float *)w->data, seg, d->batch, d->seq, ch, d->conv);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_conv1d_silu_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                               const pt_tensor *w, const pt_delta *d)
{
    cuda_ctx *c = ctx_of(be);
    void *seg = NULL;
    if (d->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, d->segments, sizeof(int32_t) * (size_t)d->batch * d->seq, &seg));
    return ACT_CALL(x, conv_bwd_launch, c->stream, dx, dy, x, w, (const int32_t *)seg, d);
}

template <typename T>
__global__ static void gates_bwd_kernel(T *db, T *da, const float *dbeta, const float *dg, const T *b, const T *a,
                                        const float *a_log, const float *dt_bias, int64_t h, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float z = act_ld(a, i) + dt_bias[i % h], beta = sigm(act_ld(b, i));
        float dsp = z > 20.0f ? 1.0f : sigm(z);
        act_st(db, i, dbeta[i] * beta * (1.0f - beta));
        act_st(da, i, -dg[i] * expf(a_log[i % h]) * dsp);
    }
}

template <typename T>
static pt_status gates_bwd_launch(cudaStream_t s, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                                  const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                                  const pt_tensor *dt_bias)
{
    int64_t n = tensor_numel(b);
    if (n == 0) return PT_OK;
    auto kernel = gates_bwd_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)db->data, (T *)da->data, (const float *)dbeta->data,
                                                     (const float *)dg->data, (const T *)b->data, (const T *)a->data,
                                                     (const float *)a_log->data, (const float *)dt_bias->data,
                                                     b->shape[1], n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_delta_gates_bwd(pt_backend *be, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                               const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                               const pt_tensor *dt_bias)
{
    return ACT_CALL(b, gates_bwd_launch, ctx_of(be)->stream, db, da, dbeta, dg, b, a, a_log, dt_bias);
}

template <typename T>
__global__ static void sigmoid_mul_bwd_kernel(T *dx, T *dgate, const T *dy, const T *y, const T *gate, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float s = sigm(act_ld(gate, i)), d = act_ld(dy, i);
        act_st(dgate, i, d * act_ld(y, i) * (1.0f - s));
        act_st(dx, i, d * s);
    }
}

template <typename T>
static pt_status sigmoid_mul_bwd_launch(cudaStream_t s, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                                        const pt_tensor *y, const pt_tensor *gate)
{
    int64_t n = tensor_numel(y);
    if (n == 0) return PT_OK;
    auto kernel = sigmoid_mul_bwd_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)dx->data, (T *)dgate->data, (const T *)dy->data,
                                                     (const T *)y->data, (const T *)gate->data, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_sigmoid_mul_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                               const pt_tensor *y, const pt_tensor *gate)
{
    return ACT_CALL(y, sigmoid_mul_bwd_launch, ctx_of(be)->stream, dx, dgate, dy, y, gate);
}

/* ---- the delta rule ---- */

struct rule_args {
    const void *x, *dout;
    void *dqkv;
    const float *beta, *g;
    float *dbeta, *dg, *dqn, *dkn, *scratch; /* scratch: per block (nch + CHUNK + 1) k_dim v_dim floats */
    const int32_t *seg;
    int seq, nv, rep, dk, dv;
    int64_t kw, width, ow;
};

/* shared v[0..n) = x[off..off+n) / sqrt(sum x^2 + 1e-6) * scale, the sum in a fixed order (as gdn.cu's) */
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

/* Thread's columns of s = exp(g) s + k (beta (v - exp(g) s^T k))^T at row r, value head h (ks: normalised k) */
template <typename T>
__device__ static void col_step(const rule_args &p, float *s, int64_t r, int h, const float *ks)
{
    const T *x = (const T *)p.x;
    float eg = expf(p.g[r * p.nv + h]), bt = p.beta[r * p.nv + h];
    for (int j = threadIdx.x; j < p.dv; j += blockDim.x) {
        float kv = 0.0f;
        for (int i = 0; i < p.dk; i++) kv += eg * s[(int64_t)i * p.dv + j] * ks[i];
        float delta = (act_ld(x, r * p.width + 2 * p.kw + (int64_t)h * p.dv + j) - kv) * bt;
        for (int i = 0; i < p.dk; i++) s[(int64_t)i * p.dv + j] = eg * s[(int64_t)i * p.dv + j] + ks[i] * delta;
    }
}

/* The boundary states of the block's sequence and head: bound[c] the state before token c CHUNK (before a reset) */
template <typename T>
__device__ static void rule_bounds(const rule_args &p, int b, int h, float *bound, float *s, float *ks, double *partial)
{
    int64_t sz = (int64_t)p.dk * p.dv;
    for (int64_t e = threadIdx.x; e < sz; e += blockDim.x) s[e] = 0.0f;
    __syncthreads();
    for (int t = 0; t < p.seq; t++) {
        int64_t r = (int64_t)b * p.seq + t;
        bool reset = t > 0 && starts(p.seg, r, t);
        for (int64_t e = threadIdx.x; e < sz; e += blockDim.x) {
            if (t % PT_DELTA_CHUNK == 0) bound[(t / PT_DELTA_CHUNK) * sz + e] = s[e];
            if (reset) s[e] = 0.0f;
        }
        __syncthreads();
        l2norm_shared(ks, (const T *)p.x, r * p.width + p.kw + (int64_t)(h / p.rep) * p.dk, p.dk, 1.0f, partial);
        col_step<T>(p, s, r, h, ks);
        __syncthreads();
    }
}

/* prev[t - t0] = the state before token t of chunk [t0, t1) (after a reset), from its boundary state */
template <typename T>
__device__ static void rule_chunk(const rule_args &p, int b, int h, int t0, int t1, const float *bound, float *prev,
                                  float *ks, double *partial)
{
    int64_t sz = (int64_t)p.dk * p.dv;
    for (int t = t0; t < t1; t++) {
        int64_t r = (int64_t)b * p.seq + t;
        float *s = prev + (t - t0) * sz;
        const float *from = t == t0 ? bound : s - sz;
        for (int64_t e = threadIdx.x; e < sz; e += blockDim.x) s[e] = from[e];
        __syncthreads();
        if (t > t0) {
            l2norm_shared(ks, (const T *)p.x, (r - 1) * p.width + p.kw + (int64_t)(h / p.rep) * p.dk, p.dk, 1.0f,
                          partial);
            col_step<T>(p, s, r - 1, h, ks);
        }
        __syncthreads();
        if (t > 0 && starts(p.seg, r, t))
            for (int64_t e = threadIdx.x; e < sz; e += blockDim.x) s[e] = 0.0f;
        __syncthreads();
    }
}

/* One token's backward (src/cpu/gdn_bwd.c's back_step): prev the state before it, ds the state's gradient */
template <typename T>
__device__ static void rule_back(const rule_args &p, int64_t r, int h, const float *prev, float *ds, bool reset,
                                 const float *qs, const float *ks, float *delta_s, float *dkv_s, double *partial)
{
    const T *x = (const T *)p.x, *dout = (const T *)p.dout;
    float eg = expf(p.g[r * p.nv + h]), bt = p.beta[r * p.nv + h];
    int64_t vo = r * p.width + 2 * p.kw + (int64_t)h * p.dv, oo = r * p.ow + (int64_t)h * p.dv;
    double dbeta = 0, dd = 0, dgs = 0;
    for (int j = threadIdx.x; j < p.dv; j += blockDim.x) { /* columns: delta, dS += q do^T, ddelta, dv */
        float kv = 0.0f, ddelta = 0.0f, dov = act_ld(dout, oo + j);
        for (int i = 0; i < p.dk; i++) kv += eg * prev[(int64_t)i * p.dv + j] * ks[i];
        float vr = act_ld(x, vo + j) - kv, delta = bt * vr;
        for (int i = 0; i < p.dk; i++) {
            float e = ds[(int64_t)i * p.dv + j] + qs[i] * dov;
            ds[(int64_t)i * p.dv + j] = e;
            ddelta += e * ks[i];
        }
        act_st((T *)p.dqkv, vo + j, bt * ddelta);
        dbeta += (double)(ddelta * vr);
        dd += (double)(delta * dov);
        delta_s[j] = delta;
        dkv_s[j] = -bt * ddelta;
    }
    dbeta = cuda_block_sum(dbeta, partial);
    dd = cuda_block_sum(dd, partial);
    for (int i = threadIdx.x; i < p.dk; i += blockDim.x) { /* rows: dq, dk */
        float aq = 0.0f, ak = 0.0f;
        for (int j = 0; j < p.dv; j++) {
            float sp = eg * prev[(int64_t)i * p.dv + j];
            aq += sp * act_ld(dout, oo + j);
            ak += ds[(int64_t)i * p.dv + j] * delta_s[j] + sp * dkv_s[j];
        }
        p.dqn[(r * p.nv + h) * p.dk + i] = aq + ks[i] * (float)dd;
        p.dkn[(r * p.nv + h) * p.dk + i] = ak;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < p.dv; j += blockDim.x) /* columns: the gradient at the state before */
        for (int i = 0; i < p.dk; i++) {
            float sp = eg * prev[(int64_t)i * p.dv + j], e = ds[(int64_t)i * p.dv + j] + ks[i] * dkv_s[j];
            dgs += (double)(e * sp);
            ds[(int64_t)i * p.dv + j] = reset ? 0.0f : eg * e;
        }
    dgs = cuda_block_sum(dgs, partial);
    if (threadIdx.x == 0) p.dbeta[r * p.nv + h] = (float)dbeta, p.dg[r * p.nv + h] = (float)dgs;
}

template <typename T>
__global__ static void rule_bwd_kernel(rule_args p)
{
    __shared__ float qs[PT_DELTA_MAX_DIM], ks[PT_DELTA_MAX_DIM], delta_s[PT_DELTA_MAX_DIM], dkv_s[PT_DELTA_MAX_DIM];
    __shared__ double partial[32];
    int bh = blockIdx.x, b = bh / p.nv, h = bh % p.nv, nch = (p.seq + PT_DELTA_CHUNK - 1) / PT_DELTA_CHUNK;
    int64_t sz = (int64_t)p.dk * p.dv, kq = (int64_t)(h / p.rep) * p.dk;
    float *bound = p.scratch + (int64_t)bh * (nch + PT_DELTA_CHUNK + 1) * sz, *prev = bound + nch * sz;
    float *ds = prev + PT_DELTA_CHUNK * sz;
    rule_bounds<T>(p, b, h, bound, ds, ks, partial);
    for (int64_t e = threadIdx.x; e < sz; e += blockDim.x) ds[e] = 0.0f;
    __syncthreads();
    for (int c = nch - 1; c >= 0; c--) {
        int t0 = c * PT_DELTA_CHUNK, t1 = t0 + PT_DELTA_CHUNK < p.seq ? t0 + PT_DELTA_CHUNK : p.seq;
        rule_chunk<T>(p, b, h, t0, t1, bound + c * sz, prev, ks, partial);
        for (int t = t1 - 1; t >= t0; t--) {
            int64_t r = (int64_t)b * p.seq + t;
            l2norm_shared(qs, (const T *)p.x, r * p.width + kq, p.dk, 1.0f / sqrtf((float)p.dk), partial);
            l2norm_shared(ks, (const T *)p.x, r * p.width + p.kw + kq, p.dk, 1.0f, partial);
            rule_back<T>(p, r, h, prev + (t - t0) * sz, ds, starts(p.seg, r, t), qs, ks, delta_s, dkv_s, partial);
            __syncthreads();
        }
    }
}

/* dqkv's q and k parts of row r, key head kh (src/cpu/gdn_bwd.c's qk_norm_bwd) */
template <typename T>
__global__ static void qk_norm_bwd_kernel(rule_args p, int k_heads, int64_t n)
{
    const T *x = (const T *)p.x;
    GRID_STRIDE(rk, n)
    {
        int64_t r = rk / k_heads;
        int kh = (int)(rk % k_heads);
        for (int part = 0; part < 2; part++) {
            int64_t off = r * p.width + part * p.kw + (int64_t)kh * p.dk;
            const float *src = part ? p.dkn : p.dqn;
            float scale = part ? 1.0f : 1.0f / sqrtf((float)p.dk), ss = 0.0f, dot = 0.0f;
            for (int i = 0; i < p.dk; i++) ss += act_ld(x, off + i) * act_ld(x, off + i);
            float inv = 1.0f / sqrtf(ss + 1e-6f);
            for (int i = 0; i < p.dk; i++) {
                float du = 0.0f;
                for (int h = kh * p.rep; h < (kh + 1) * p.rep; h++) du += src[(r * p.nv + h) * p.dk + i];
                dot += act_ld(x, off + i) * inv * du * scale;
            }
            for (int i = 0; i < p.dk; i++) {
                float du = 0.0f;
                for (int h = kh * p.rep; h < (kh + 1) * p.rep; h++) du += src[(r * p.nv + h) * p.dk + i];
                act_st((T *)p.dqkv, off + i, inv * (du * scale - act_ld(x, off + i) * inv * dot));
            }
        }
    }
}

template <typename T>
static pt_status rule_bwd_launch(cudaStream_t s, rule_args p, const pt_delta *d)
{
    auto kernel = rule_bwd_kernel<T>;
    kernel<<<(unsigned)(d->batch * d->v_heads), RULE_THREADS, 0, s>>>(p);
    CUDA_LAUNCHED();
    int64_t n = (int64_t)d->batch * d->seq * d->k_heads;
    auto norm = qk_norm_bwd_kernel<T>;
    norm<<<cuda_grid(n, THREADS), THREADS, 0, s>>>(p, d->k_heads, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_delta_rule_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg, const pt_tensor *dout,
                              const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g, const pt_delta *d)
{
    cuda_ctx *c = ctx_of(be);
    void *seg = NULL;
    if (d->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, d->segments, sizeof(int32_t) * (size_t)d->batch * d->seq, &seg));
    int64_t rows = (int64_t)d->batch * d->seq, kw = (int64_t)d->k_heads * d->k_dim;
    size_t sz = (size_t)d->k_dim * d->v_dim, nch = (size_t)(d->seq + PT_DELTA_CHUNK - 1) / PT_DELTA_CHUNK;
    size_t grads = 2 * (size_t)rows * d->v_heads * d->k_dim, states = (size_t)d->batch * d->v_heads * (nch + PT_DELTA_CHUNK + 1) * sz;
    float *buf = NULL;
    CUDA_TRY(cudaMallocAsync((void **)&buf, sizeof(float) * (grads + states), c->stream));
    rule_args p = {qkv->data, dout->data, dqkv->data, (const float *)beta->data, (const float *)g->data,
                   (float *)dbeta->data, (float *)dg->data, buf, buf + grads / 2, buf + grads, (const int32_t *)seg,
                   d->seq, d->v_heads, d->v_heads / d->k_heads, d->k_dim, d->v_dim, kw,
                   2 * kw + (int64_t)d->v_heads * d->v_dim, (int64_t)d->v_heads * d->v_dim};
    pt_status st = ACT_CALL(qkv, rule_bwd_launch, c->stream, p, d);
    cudaError_t e = cudaFreeAsync(buf, c->stream);
    if (st == PT_OK && e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync: %s", cudaGetErrorString(e));
    return st;
}

template <typename T>
static pt_status qk_bwd_launch(cudaStream_t s, rule_args p, const pt_delta *d)
{
    int64_t n = (int64_t)d->batch * d->seq * d->k_heads;
    auto norm = qk_norm_bwd_kernel<T>;
    norm<<<cuda_grid(n, THREADS), THREADS, 0, s>>>(p, d->k_heads, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_delta_qk_bwd(cudaStream_t s, pt_tensor *dqkv, const pt_tensor *qkv, const float *dqn, const float *dkn,
                            const pt_delta *d)
{
    int64_t kw = (int64_t)d->k_heads * d->k_dim;
    rule_args p = {qkv->data, NULL, dqkv->data, NULL, NULL, NULL, NULL, (float *)dqn, (float *)dkn, NULL, NULL,
                   d->seq, d->v_heads, d->v_heads / d->k_heads, d->k_dim, d->v_dim, kw,
                   2 * kw + (int64_t)d->v_heads * d->v_dim, (int64_t)d->v_heads * d->v_dim};
    return ACT_CALL(qkv, qk_bwd_launch, s, p, d);
}
