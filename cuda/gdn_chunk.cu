/* gdn_chunk.cu — the CUDA backend's chunked (WY) gated delta rule and its backward, twins of src/cpu/gdn_chunk.c
 * and src/cpu/gdn_chunk_bwd.c (src/cpu/gdn_chunk.h gives the sums; backend.h describes the ops). One block per
 * sequence and value head walks its chunks of PT_DELTA_CHUNK tokens: the chunk's q and k rows normalised, the
 * grams, A, P, S0^T q and S0^T k as block products (each output element one thread's dot product in a fixed order,
 * so results do not depend on timing), the triangular systems by substitution with each thread owning value
 * columns, and the state's update; the chunk's buffers and the backward's chunk start states live in a global
 * scratch per block. The backward's gradients at each value head's normalised q and k go to an fp32 scratch that
 * cuda_delta_qk_bwd (gdn_bwd.cu) sums over the heads sharing a key head and takes through the normalisation.
 * Activations bf16 or fp32, everything computed in fp32. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { CT = 128, CH = PT_DELTA_CHUNK };

struct chunk_args {
    const void *x, *dout;
    void *o, *dqkv;
    const float *beta, *g;
    float *state, *dbeta, *dg, *dqn, *dkn, *scratch;
    const int32_t *seg;
    int seq, nv, rep, dk, dv, has_state;
    int64_t kw, width, ow, per_block; /* per_block: the scratch floats of one block */
};

/* A block's chunk: scalars in shared memory, matrices in its scratch (gdn_chunk.h's chunk_buf) */
struct chunk_sh {
    int lo[CH], n, t0, fresh;
    float beta[CH], G[CH], eg[CH], gam[CH], dG[CH], dB[CH], tmp[CH], c;
    double partial[32];
};
struct chunk_mem {
    float *hk, *v, *gram, *hs, *a, *p, *u, *w;
};

__device__ static chunk_mem chunk_carve(const chunk_args &p, float *at)
{
    int64_t dk = p.dk, dv = p.dv;
    chunk_mem m;
    m.hk = at, m.v = m.hk + 2 * CH * dk, m.gram = m.v + CH * dv, m.hs = m.gram + 2 * CH * CH;
    m.a = m.hs + 2 * CH * dv, m.p = m.a + CH * CH, m.u = m.p + CH * CH, m.w = m.u + CH * dv;
    return m;
}

static int64_t chunk_mem_floats(const pt_delta *d)
{
    int64_t dk = d->k_dim, dv = d->v_dim, wide = dk > dv ? dk : dv;
    return 2 * CH * dk + CH * dv + 2 * CH * CH + 2 * CH * dv + 2 * CH * CH + CH * dv + 2 * CH * wide;
}

__device__ static bool chunk_starts(const int32_t *seg, int64_t r, int t)
{
    return t == 0 || (seg && seg[r] != seg[r - 1]);
}

/* C[M, N] = alpha op(A) op(B) (+ beta C when beta != 0), op(X) = X or X^T; the block's threads over the outputs */
__device__ static void bmm(int M, int N, int K, float alpha, const float *A, int lda, bool ta, const float *B, int ldb,
                           bool tb, float beta, float *C, int ldc)
{
    for (int idx = threadIdx.x; idx < M * N; idx += blockDim.x) {
        int i = idx / N, j = idx % N;
        float acc = 0.0f;
        for (int k = 0; k < K; k++)
            acc += (ta ? A[(int64_t)k * lda + i] : A[(int64_t)i * lda + k]) *
                   (tb ? B[(int64_t)j * ldb + k] : B[(int64_t)k * ldb + j]);
        C[(int64_t)i * ldc + j] = alpha * acc + (beta != 0.0f ? beta * C[(int64_t)i * ldc + j] : 0.0f);
    }
    __syncthreads();
}

/* Loads chunk t0 of sequence b, value head h (src/cpu/gdn_chunk.c's chunk_load) */
template <typename T>
__device__ static void chunk_load(const chunk_args &p, chunk_sh &s, const chunk_mem &m, int b, int h, int t0,
                                  bool has_state)
{
    const T *x = (const T *)p.x;
    int n = p.seq - t0 < CH ? p.seq - t0 : CH, kh = h / p.rep;
    int64_t r0 = (int64_t)b * p.seq + t0;
    for (int task = threadIdx.x; task < 2 * n; task += blockDim.x) { /* q rows, then k rows: one thread each */
        int i = task % n, part = task / n;
        int64_t off = (r0 + i) * p.width + part * p.kw + (int64_t)kh * p.dk;
        float ss = 0.0f, *dst = m.hk + (int64_t)task * p.dk;
        for (int e = 0; e < p.dk; e++) ss += act_ld(x, off + e) * act_ld(x, off + e);
        float inv = 1.0f / sqrtf(ss + 1e-6f) * (part ? 1.0f : 1.0f / sqrtf((float)p.dk));
        for (int e = 0; e < p.dk; e++) dst[e] = act_ld(x, off + e) * inv;
    }
    for (int idx = threadIdx.x; idx < n * p.dv; idx += blockDim.x)
        m.v[idx] = act_ld(x, (r0 + idx / p.dv) * p.width + 2 * p.kw + (int64_t)h * p.dv + idx % p.dv);
    if (threadIdx.x == 0) {
        s.n = n, s.t0 = t0, s.fresh = t0 == 0 ? !has_state : chunk_starts(p.seg, r0, t0);
        float acc = 0.0f;
        for (int i = 0, cur = 0; i < n; i++) {
            if (i > 0 && chunk_starts(p.seg, r0 + i, t0 + i)) cur = i;
            s.lo[i] = cur;
            s.beta[i] = p.beta[(r0 + i) * p.nv + h];
            acc += p.g[(r0 + i) * p.nv + h];
            s.G[i] = acc;
        }
        for (int i = 0; i < n; i++) s.eg[i] = s.lo[i] == 0 && !s.fresh ? expf(s.G[i]) : 0.0f;
        for (int j = 0; j < n; j++) s.gam[j] = j >= s.lo[n - 1] ? expf(s.G[n - 1] - s.G[j]) : 0.0f;
        s.c = s.eg[n - 1];
    }
    __syncthreads();
}

/* gram, a, p, hs and u from the loaded chunk and S0 (src/cpu/gdn_chunk.c's chunk_solve) */
__device__ static void chunk_solve(const chunk_args &p, const chunk_sh &s, const chunk_mem &m, const float *s0)
{
    int n = s.n, dk = p.dk, dv = p.dv;
    bmm(2 * n, n, dk, 1.0f, m.hk, dk, false, m.hk + (int64_t)n * dk, dk, true, 0.0f, m.gram, n);
    for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
        int i = idx / n, j = idx % n;
        bool seen = j <= i && j >= s.lo[i];
        float e = seen ? expf(s.G[i] - s.G[j]) : 0.0f;
        m.p[idx] = e * m.gram[idx];
        m.a[idx] = j < i ? s.beta[i] * e * m.gram[(int64_t)(n + i) * n + j] : 0.0f;
    }
    if (s.fresh)
        for (int idx = threadIdx.x; idx < 2 * n * dv; idx += blockDim.x) m.hs[idx] = 0.0f;
    __syncthreads();
    if (!s.fresh) bmm(2 * n, dv, dk, 1.0f, m.hk, dk, false, s0, dv, false, 0.0f, m.hs, dv);
    for (int e = threadIdx.x; e < dv; e += blockDim.x) /* each thread its columns of U: forward substitution */
        for (int i = 0; i < n; i++) {
            float acc = s.beta[i] * (m.v[(int64_t)i * dv + e] - s.eg[i] * m.hs[(int64_t)(n + i) * dv + e]);
            for (int j = s.lo[i]; j < i; j++) acc -= m.a[i * n + j] * m.u[(int64_t)j * dv + e];
            m.u[(int64_t)i * dv + e] = acc;
        }
    __syncthreads();
}

/* S = c S + K^T diag(gam) U (S0 zero when fresh) */
__device__ static void chunk_advance(const chunk_args &p, const chunk_sh &s, const chunk_mem &m, float *S)
{
    int n = s.n, dk = p.dk, dv = p.dv;
    for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) {
        int i = idx / dv, e = idx % dv;
        float acc = 0.0f;
        for (int j = 0; j < n; j++) acc += m.hk[(int64_t)(n + j) * dk + i] * s.gam[j] * m.u[(int64_t)j * dv + e];
        S[idx] = (s.fresh ? 0.0f : s.c * S[idx]) + acc;
    }
    __syncthreads();
}

template <typename T>
__global__ static void chunk_fwd_kernel(chunk_args p)
{
    __shared__ chunk_sh s[1];
    int bh = blockIdx.x, b = bh / p.nv, h = bh % p.nv;
    int64_t sz = (int64_t)p.dk * p.dv;
    float *base = p.scratch + (int64_t)bh * p.per_block, *S = p.has_state ? p.state + (int64_t)bh * sz : base;
    chunk_mem m = chunk_carve(p, base + sz);
    for (int t0 = 0; t0 < p.seq; t0 += CH) {
        chunk_load<T>(p, s[0], m, b, h, t0, p.has_state);
        chunk_solve(p, s[0], m, S);
        int n = s[0].n;
        for (int idx = threadIdx.x; idx < n * p.dv; idx += blockDim.x) { /* o = diag(eg) S0^T q + P U */
            int i = idx / p.dv, e = idx % p.dv;
            float acc = s[0].eg[i] * m.hs[idx];
            for (int j = s[0].lo[i]; j <= i; j++) acc += m.p[i * n + j] * m.u[(int64_t)j * p.dv + e];
            act_st((T *)p.o, ((int64_t)b * p.seq + t0 + i) * p.ow + (int64_t)h * p.dv + e, acc);
        }
        __syncthreads();
        chunk_advance(p, s[0], m, S);
    }
}

template <typename T>
static pt_status chunk_fwd_launch(cudaStream_t st, chunk_args p, const pt_delta *d)
{
    auto kernel = chunk_fwd_kernel<T>;
    kernel<<<(unsigned)(d->batch * d->v_heads), CT, 0, st>>>(p);
    CUDA_LAUNCHED();
    return PT_OK;
}

static chunk_args chunk_args_of(const pt_delta *d, const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g,
                                const int32_t *seg)
{
    chunk_args p = {};
    p.x = qkv->data, p.beta = (const float *)beta->data, p.g = (const float *)g->data, p.seg = seg;
    p.seq = d->seq, p.nv = d->v_heads, p.rep = d->v_heads / d->k_heads, p.dk = d->k_dim, p.dv = d->v_dim;
    p.kw = (int64_t)d->k_heads * d->k_dim, p.width = 2 * p.kw + (int64_t)d->v_heads * d->v_dim;
    p.ow = (int64_t)d->v_heads * d->v_dim;
    return p;
}

pt_status cuda_delta_chunk(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                           const pt_tensor *g, pt_tensor *state, const pt_delta *d)
{
    cuda_ctx *c = ctx_of(be);
    void *seg = NULL;
    if (d->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, d->segments, sizeof(int32_t) * (size_t)d->batch * d->seq, &seg));
    chunk_args p = chunk_args_of(d, qkv, beta, g, (const int32_t *)seg);
    p.o = o->data, p.state = state ? (float *)state->data : NULL, p.has_state = state != NULL;
    p.per_block = (int64_t)d->k_dim * d->v_dim + chunk_mem_floats(d);
    CUDA_TRY(cudaMallocAsync((void **)&p.scratch, sizeof(float) * (size_t)(p.per_block * d->batch * d->v_heads),
                             c->stream));
    pt_status st = ACT_CALL(o, chunk_fwd_launch, c->stream, p, d);
    cudaError_t e = cudaFreeAsync(p.scratch, c->stream);
    if (st == PT_OK && e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync: %s", cudaGetErrorString(e));
    return st;
}

/* ---- the backward (src/cpu/gdn_chunk_bwd.c) ---- */

struct grad_mem {
    float *dO, *du, *dp, *da, *y, *z; /* [n, dv], [n, dv], [n, n], [n, n], [2n, dv], [n, dv] */
};

static int64_t grad_mem_floats(const pt_delta *d)
{
    int64_t dv = d->v_dim;
    return 2 * CH * dv + 2 * CH * CH + 2 * CH * dv + CH * dv;
}

__device__ static grad_mem grad_carve(const chunk_args &p, float *at)
{
    int64_t dv = p.dv;
    grad_mem g;
    g.dO = at, g.du = g.dO + CH * dv, g.dp = g.du + CH * dv, g.da = g.dp + CH * CH, g.y = g.da + CH * CH;
    g.z = g.y + 2 * CH * dv;
    return g;
}

/* dU, dP, dR (in du, by back substitution over each thread's columns) and dA (gradient_u of the CPU) */
__device__ static void grad_u(const chunk_args &p, const chunk_sh &s, const chunk_mem &m, const grad_mem &q,
                              const float *dS)
{
    int n = s.n, dk = p.dk, dv = p.dv;
    bmm(n, dv, n, 1.0f, m.p, n, true, q.dO, dv, false, 0.0f, q.du, dv);
    bmm(n, dv, dk, 1.0f, m.hk + (int64_t)n * dk, dk, false, dS, dv, false, 0.0f, q.z, dv);
    bmm(n, n, dv, 1.0f, q.dO, dv, false, m.u, dv, true, 0.0f, q.dp, n);
    for (int e = threadIdx.x; e < dv; e += blockDim.x) {
        for (int i = 0; i < n; i++) q.du[(int64_t)i * dv + e] += s.gam[i] * q.z[(int64_t)i * dv + e];
        for (int i = n - 1; i >= 0; i--)
            for (int k = s.lo[i]; k < i; k++) q.du[(int64_t)k * dv + e] -= m.a[i * n + k] * q.du[(int64_t)i * dv + e];
    }
    __syncthreads();
    bmm(n, n, dv, -1.0f, q.du, dv, false, m.u, dv, true, 0.0f, q.da, n);
}

/* dP's and dA's shares of dG and dbeta (rows and columns summed by one thread each), then dp and da scaled into the
 * gradients at the grams' entries */
__device__ static void grad_decays(chunk_sh &s, const chunk_mem &m, const grad_mem &q)
{
    int n = s.n;
    for (int task = threadIdx.x; task < 2 * n; task += blockDim.x) {
        int x = task % n;
        float sum = 0.0f, db = 0.0f;
        for (int y = 0; y < n; y++) {
            int i = task < n ? x : y, k = task < n ? y : x;
            bool seen = k <= i && k >= s.lo[i];
            if (!seen) continue;
            sum += q.dp[i * n + k] * m.p[i * n + k] + (k < i ? q.da[i * n + k] * m.a[i * n + k] : 0.0f);
            if (task < n && k < i) db += q.da[i * n + k] * expf(s.G[i] - s.G[k]) * m.gram[(int64_t)(n + i) * n + k];
        }
        if (task < n) s.dG[x] = sum, s.dB[x] = db;
        else s.tmp[x] = sum;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < n; i += blockDim.x) s.dG[i] -= s.tmp[i];
    for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
        int i = idx / n, k = idx % n;
        bool seen = k <= i && k >= s.lo[i];
        float e = seen ? expf(s.G[i] - s.G[k]) : 0.0f;
        q.dp[idx] *= e;
        q.da[idx] = k < i && seen ? q.da[idx] * s.beta[i] * e : 0.0f;
    }
    __syncthreads();
}

/* dq and dk into dqn and dkn (grad_qk of the CPU) */
__device__ static void grad_qk(const chunk_args &p, chunk_sh &s, const chunk_mem &m, const grad_mem &q, int b, int h,
                               const float *S0, const float *dS)
{
    int n = s.n, dk = p.dk, dv = p.dv, ld = p.nv * dk;
    int64_t at = (((int64_t)b * p.seq + s.t0) * p.nv + h) * dk;
    float *dq = p.dqn + at, *dkk = p.dkn + at;
    const float *Q = m.hk, *K = m.hk + (int64_t)n * dk;
    for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x) {
        int i = idx / dv;
        q.y[idx] = s.eg[i] * q.dO[idx];
        q.y[n * dv + idx] = -s.beta[i] * s.eg[i] * q.du[idx];
        q.z[idx] = s.gam[i] * m.u[idx];
    }
    __syncthreads();
    bmm(n, dk, dv, 1.0f, q.y, dv, false, S0, dv, true, 0.0f, dq, ld);
    bmm(n, dk, n, 1.0f, q.dp, n, false, K, dk, false, 1.0f, dq, ld);
    bmm(n, dk, dv, 1.0f, q.y + (int64_t)n * dv, dv, false, S0, dv, true, 0.0f, dkk, ld);
    bmm(n, dk, n, 1.0f, q.dp, n, true, Q, dk, false, 1.0f, dkk, ld);
    bmm(n, dk, n, 1.0f, q.da, n, false, K, dk, false, 1.0f, dkk, ld);
    bmm(n, dk, n, 1.0f, q.da, n, true, K, dk, false, 1.0f, dkk, ld);
    bmm(n, dk, dv, 1.0f, q.z, dv, false, dS, dv, true, 0.0f, m.w, dk);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float dot = 0.0f;
        for (int e = 0; e < dk; e++) {
            dot += K[(int64_t)i * dk + e] * m.w[(int64_t)i * dk + e];
            dkk[(int64_t)i * ld + e] += m.w[(int64_t)i * dk + e];
        }
        s.tmp[i] = dot;
    }
    __syncthreads();
    if (threadIdx.x == 0)
        for (int i = 0; i < n; i++) s.dG[n - 1] += s.tmp[i], s.dG[i] -= s.tmp[i];
    __syncthreads();
}

/* dv, dbeta and dG's remaining shares; dg and dbeta written (grad_rows of the CPU) */
template <typename T>
__device__ static void grad_rows(const chunk_args &p, chunk_sh &s, const chunk_mem &m, const grad_mem &q, int b, int h,
                                 const float *S0, const float *dS)
{
    int n = s.n, dv = p.dv;
    int64_t r0 = (int64_t)b * p.seq + s.t0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float *dr = q.du + (int64_t)i * dv, *x = m.hs + (int64_t)(n + i) * dv, *qs = m.hs + (int64_t)i * dv;
        float vr = 0.0f, xr = 0.0f, qo = 0.0f;
        for (int e = 0; e < dv; e++) {
            act_st((T *)p.dqkv, (r0 + i) * p.width + 2 * p.kw + (int64_t)h * dv + e, s.beta[i] * dr[e]);
            vr += m.v[(int64_t)i * dv + e] * dr[e], xr += x[e] * dr[e], qo += qs[e] * q.dO[(int64_t)i * dv + e];
        }
        s.dB[i] += vr - s.eg[i] * xr;
        s.dG[i] += s.eg[i] * (qo - s.beta[i] * xr);
    }
    double dc = 0;
    for (int e = threadIdx.x; s.c != 0.0f && e < p.dk * dv; e += blockDim.x) dc += (double)(S0[e] * dS[e]);
    dc = cuda_block_sum(dc, s.partial);
    if (threadIdx.x == 0) {
        s.dG[n - 1] += s.c * (float)dc;
        float run = 0.0f;
        for (int i = n - 1; i >= 0; i--) {
            run += s.dG[i];
            p.dg[(r0 + i) * p.nv + h] = run;
            p.dbeta[(r0 + i) * p.nv + h] = s.dB[i];
        }
    }
    __syncthreads();
}

/* The chunk's backward from its start state S0; dS: the gradient at the state after it, then at S0 */
template <typename T>
__device__ static void chunk_back(const chunk_args &p, chunk_sh &s, const chunk_mem &m, const grad_mem &q, int b,
                                  int h, const float *S0, float *dS)
{
    int n = s.n, dk = p.dk, dv = p.dv;
    int64_t r0 = (int64_t)b * p.seq + s.t0;
    for (int idx = threadIdx.x; idx < n * dv; idx += blockDim.x)
        q.dO[idx] = act_ld((const T *)p.dout, (r0 + idx / dv) * p.ow + (int64_t)h * dv + idx % dv);
    __syncthreads();
    chunk_solve(p, s, m, S0);
    grad_u(p, s, m, q, dS);
    grad_decays(s, m, q);
    grad_qk(p, s, m, q, b, h, S0, dS);
    grad_rows<T>(p, s, m, q, b, h, S0, dS);
    for (int idx = threadIdx.x; idx < dk * dv; idx += blockDim.x) { /* dS0 = c dS + H^T y, or zero where fresh */
        int i = idx / dv, e = idx % dv;
        float acc = 0.0f;
        for (int j = 0; j < 2 * n; j++) acc += m.hk[(int64_t)j * dk + i] * q.y[(int64_t)j * dv + e];
        dS[idx] = s.fresh ? 0.0f : s.c * dS[idx] + acc;
    }
    __syncthreads();
}

template <typename T>
__global__ static void chunk_bwd_kernel(chunk_args p)
{
    __shared__ chunk_sh s[1];
    int bh = blockIdx.x, b = bh / p.nv, h = bh % p.nv, nch = (p.seq + CH - 1) / CH;
    int64_t sz = (int64_t)p.dk * p.dv;
    float *bound = p.scratch + (int64_t)bh * p.per_block, *S = bound + nch * sz;
    chunk_mem m = chunk_carve(p, S + sz);
    grad_mem q = grad_carve(p, m.w + 2 * CH * (p.dk > p.dv ? p.dk : p.dv));
    for (int k = 0; k < nch; k++) { /* the chunks' start states */
        chunk_load<T>(p, s[0], m, b, h, k * CH, false);
        for (int64_t e = threadIdx.x; e < sz; e += blockDim.x) {
            if (s[0].fresh) S[e] = 0.0f;
            bound[k * sz + e] = s[0].fresh ? 0.0f : S[e];
        }
        __syncthreads();
        chunk_solve(p, s[0], m, S);
        chunk_advance(p, s[0], m, S);
    }
    for (int64_t e = threadIdx.x; e < sz; e += blockDim.x) S[e] = 0.0f;
    __syncthreads();
    for (int k = nch - 1; k >= 0; k--) {
        chunk_load<T>(p, s[0], m, b, h, k * CH, false);
        chunk_back<T>(p, s[0], m, q, b, h, bound + k * sz, S);
    }
}

template <typename T>
static pt_status chunk_bwd_launch(cudaStream_t st, chunk_args p, const pt_delta *d)
{
    auto kernel = chunk_bwd_kernel<T>;
    kernel<<<(unsigned)(d->batch * d->v_heads), CT, 0, st>>>(p);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_delta_chunk_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                               const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g,
                               const pt_delta *d)
{
    cuda_ctx *c = ctx_of(be);
    void *seg = NULL;
    if (d->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, d->segments, sizeof(int32_t) * (size_t)d->batch * d->seq, &seg));
    chunk_args p = chunk_args_of(d, qkv, beta, g, (const int32_t *)seg);
    int64_t rows = (int64_t)d->batch * d->seq, grads = 2 * rows * d->v_heads * d->k_dim;
    int64_t nch = (d->seq + CH - 1) / CH, blocks = (int64_t)d->batch * d->v_heads;
    p.dout = dout->data, p.dqkv = dqkv->data, p.dbeta = (float *)dbeta->data, p.dg = (float *)dg->data;
    p.per_block = (nch + 1) * d->k_dim * d->v_dim + chunk_mem_floats(d) + grad_mem_floats(d);
    float *buf = NULL;
    CUDA_TRY(cudaMallocAsync((void **)&buf, sizeof(float) * (size_t)(grads + blocks * p.per_block), c->stream));
    p.dqn = buf, p.dkn = buf + grads / 2, p.scratch = buf + grads;
    pt_status st = ACT_CALL(qkv, chunk_bwd_launch, c->stream, p, d);
    if (st == PT_OK) st = cuda_delta_qk_bwd(c->stream, dqkv, qkv, p.dqn, p.dkn, d);
    cudaError_t e = cudaFreeAsync(buf, c->stream);
    if (st == PT_OK && e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync: %s", cudaGetErrorString(e));
    return st;
}
