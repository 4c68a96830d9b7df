/* attention_bwd.cu — the gradient of causal grouped-query attention (attention.cu) on the GPU,
 * the twin of src/cpu/attention_bwd.c. Scores are recomputed from the log-sum-exp the forward
 * saved, so memory stays O(T): with S = cap(scale q.k), P = exp(S - lse) under the mask,
 * dP = dO.v, delta = rowsum(dO * O), dR = S'(raw) P (dP - delta) (S' = scale (1 - tanh^2) with a
 * soft-cap, else scale):
 *   dQ_i = sum_j dR_ij k_j                       query-major kernel: a block takes Q_TILE query
 *                                                rows, walks the keys they may see in tiles of 32
 *   dK_j = sum_h,i dR_ij q_i, dV_j = sum_h,i P_ij dO_i   key-major kernel: a block takes KR key
 *                                                rows of one kv head, walks every query head of
 *                                                its group and the query rows that may see them
 * delta comes first, from a small kernel, into a temporary of the stream-ordered pool. Each
 * output element is summed by one thread in a fixed order: no atomics, the result is
 * deterministic, and dK/dV are overwritten for all batch*n_kv rows (0 where no query looks).
 * Arithmetic is fp32 (delta in double, as on the CPU). head_dim: a multiple of 4 up to 256 (lanes past head_dim idle).
 * delta is computed here for both; dQ, dK and dV go to the tensor-core kernels (attention_tc_bwd.cu)
 * when the forward's would (attn_tc_usable), else to these fp32 ones, the reference. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>

#include "attention.h"

enum { TILE = 32 }; /* keys (dq) or query rows (dk/dv) per staged tile: one per lane */

/* ---- delta = rowsum(dO * O) per (row, head), laid out as lse ------------------------------ */

/* One warp per (row, head), grid-stride over them; the sum in double as on the CPU. The loop
 * bound is the same for every lane of a warp, so all of them reach the shuffles. */
template <typename T>
__global__ static void attention_delta_kernel(float *delta, const T *dout, const T *out, int64_t n, int n_heads,
                                              int head_dim)
{
    int lane = threadIdx.x % 32;
    int64_t warps = (int64_t)gridDim.x * (blockDim.x / 32);
    for (int64_t w = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32; w < n; w += warps) {
        int64_t base = w * head_dim; /* row w / n_heads, head w % n_heads: (row * n_heads + h) * head_dim */
        double s = 0.0;
        for (int d = lane; d < head_dim; d += 32) s += (double)act_ld(dout, base + d) * act_ld(out, base + d);
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL_MASK, s, o);
        if (lane == 0) delta[w] = (float)s;
    }
}

/* ---- dQ: query-major ------------------------------------------------------------------------ */

/* Shared memory in floats: q and dO rows [BLOCK_ROWS][D] (read by a whole warp at once), the key
 * and value tiles [TILE][D + 4] (padded: lane j reads row j along d, and reads column d along j
 * for the sum over keys), the keys' segment ids [TILE]. Every part starts 16-byte aligned. */
static size_t dq_smem_bytes(int d)
{
    return sizeof(float) * (2 * (size_t)BLOCK_ROWS * d + 2 * (size_t)TILE * (d + 4) + TILE);
}

/* Grid (query tiles, heads, sequences), WARPS * 32 threads. No thread returns early and a warp's
 * rows and tiles are the same for all its lanes, so every lane reaches every shuffle. */
__global__ static void attention_dq_kernel(float *dq, const float *dout, const float *q, const float *k,
                                           const float *v, const float *lse, const float *delta, const int32_t *seg,
                                           attn_dims p)
{
    extern __shared__ float4 smem4[];
    const int D = p.head_dim, dpl = (D + 31) / 32, ks = D + 4;
    float *q_s = (float *)smem4, *do_s = q_s + BLOCK_ROWS * D, *k_s = do_s + BLOCK_ROWS * D, *v_s = k_s + TILE * ks;
    int *seg_s = (int *)(v_s + TILE * ks);
    const int b = blockIdx.z, h = blockIdx.y, t0 = blockIdx.x * BLOCK_ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hk = h / (p.n_heads / p.n_kv_heads);
    const int64_t qw = (int64_t)p.n_heads * D, kw = (int64_t)p.n_kv_heads * D;
    const int64_t qrow0 = (int64_t)b * p.n_q, krow0 = (int64_t)b * p.n_kv;

    for (int i = threadIdx.x; i < BLOCK_ROWS * D; i += blockDim.x) {
        int r = i / D, d = i % D, t = t0 + r;
        int64_t at = (qrow0 + t) * qw + (int64_t)h * D + d;
        q_s[i] = t < p.n_q ? q[at] : 0.0f;
        do_s[i] = t < p.n_q ? dout[at] : 0.0f;
    }

    bool valid[ROWS_PER_WARP];
    int pos[ROWS_PER_WARP], my_seg[ROWS_PER_WARP];
    float row_lse[ROWS_PER_WARP], row_delta[ROWS_PER_WARP], acc[ROWS_PER_WARP][MAX_DPL];
#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; i++) {
        int t = t0 + warp * ROWS_PER_WARP + i;
        valid[i] = t < p.n_q;
        pos[i] = p.q_pos0 + t;
        my_seg[i] = seg && valid[i] ? seg[krow0 + pos[i]] : 0;
        row_lse[i] = valid[i] ? lse[(qrow0 + t) * p.n_heads + h] : 0.0f;
        row_delta[i] = valid[i] ? delta[(qrow0 + t) * p.n_heads + h] : 0.0f;
#pragma unroll
        for (int c = 0; c < MAX_DPL; c++) acc[i][c] = 0.0f;
    }

    int t_last = min(t0 + BLOCK_ROWS, p.n_q) - 1;
    int k_begin = attn_first_key(p.q_pos0 + t0, p.window), k_end = p.q_pos0 + t_last + 1;
    for (int kt = k_begin; kt < k_end; kt += TILE) {
        __syncthreads(); /* the previous tile is consumed (and, the first time, q_s, do_s are written) */
        for (int i = threadIdx.x; i < TILE * D; i += blockDim.x) {
            int j = i / D, d = i % D, key = kt + j;
            int64_t at = (krow0 + key) * kw + (int64_t)hk * D + d;
            k_s[j * ks + d] = key < k_end ? k[at] : 0.0f;
            v_s[j * ks + d] = key < k_end ? v[at] : 0.0f;
        }
        if (threadIdx.x < TILE) {
            int key = kt + threadIdx.x;
            seg_s[threadIdx.x] = seg && key < k_end ? seg[krow0 + key] : 0;
        }
        __syncthreads();

        /* q.k and dO.v of this warp's rows with key kt + lane */
        float qk[ROWS_PER_WARP], dp[ROWS_PER_WARP];
#pragma unroll
        for (int i = 0; i < ROWS_PER_WARP; i++) qk[i] = dp[i] = 0.0f;
        const float4 *krow = (const float4 *)(k_s + lane * ks), *vrow = (const float4 *)(v_s + lane * ks);
        for (int d4 = 0; d4 < D / 4; d4++) {
            float4 kk = krow[d4], vv = vrow[d4];
#pragma unroll
            for (int i = 0; i < ROWS_PER_WARP; i++) {
                int r = warp * ROWS_PER_WARP + i;
                float4 qq = ((const float4 *)(q_s + r * D))[d4], oo = ((const float4 *)(do_s + r * D))[d4];
                qk[i] += qq.x * kk.x + qq.y * kk.y + qq.z * kk.z + qq.w * kk.w;
                dp[i] += oo.x * vv.x + oo.y * vv.y + oo.z * vv.z + oo.w * vv.w;
            }
        }

        int key = kt + lane;
#pragma unroll
        for (int i = 0; i < ROWS_PER_WARP; i++) {
            bool vis = valid[i] && key < k_end &&
                       attn_visible(pos[i], key, p.window, seg != NULL, my_seg[i], seg_s[lane]);
            if (!__any_sync(FULL_MASK, vis)) continue; /* warp-uniform */
            float dscore, ds = 0.0f;
            if (vis) {
                float pj = expf(attn_score(qk[i], p.scale, p.softcap, &dscore) - row_lse[i]);
                ds = dscore * (pj * (dp[i] - row_delta[i]));
            }
            for (int j = 0; j < TILE; j++) {
                float dsj = __shfl_sync(FULL_MASK, ds, j);
#pragma unroll
                for (int c = 0; c < MAX_DPL; c++)
                    if (c < dpl && c * 32 + lane < D) acc[i][c] += dsj * k_s[j * ks + c * 32 + lane];
            }
        }
    }

#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; i++) {
        if (!valid[i]) continue;
        int t = t0 + warp * ROWS_PER_WARP + i;
        float *o = dq + (qrow0 + t) * qw + (int64_t)h * D;
#pragma unroll
        for (int c = 0; c < MAX_DPL; c++)
            if (c < dpl && c * 32 + lane < D) o[c * 32 + lane] = acc[i][c];
    }
}

/* ---- dK, dV: key-major ---------------------------------------------------------------------- */

/* Shared memory in floats: k and v rows [BLOCK_ROWS][D] (read by a whole warp at once), the
 * query and dO tiles [TILE][D + 4] (padded as the key tile of dq), then the tile's lse, delta
 * and segment ids [TILE] each. Every part starts 16-byte aligned. */
static size_t dkv_smem_bytes(int d)
{
    return sizeof(float) * (2 * (size_t)BLOCK_ROWS * d + 2 * (size_t)TILE * (d + 4) + 3 * TILE);
}

/* Grid (key tiles, kv heads, sequences), WARPS * 32 threads; every key row of the sequence is
 * written, with 0 where no query sees it. Lanes reach every shuffle as in dq. */
__global__ static void attention_dkv_kernel(float *dk, float *dv, const float *dout, const float *q,
                                            const float *k, const float *v, const float *lse, const float *delta,
                                            const int32_t *seg, attn_dims p)
{
    extern __shared__ float4 smem4[];
    const int D = p.head_dim, dpl = (D + 31) / 32, ks = D + 4;
    float *k_s = (float *)smem4, *v_s = k_s + BLOCK_ROWS * D, *q_s = v_s + BLOCK_ROWS * D, *do_s = q_s + TILE * ks;
    float *lse_s = do_s + TILE * ks, *delta_s = lse_s + TILE;
    int *seg_s = (int *)(delta_s + TILE);
    const int b = blockIdx.z, hk = blockIdx.y, j0 = blockIdx.x * BLOCK_ROWS;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int group = p.n_heads / p.n_kv_heads;
    const int64_t qw = (int64_t)p.n_heads * D, kw = (int64_t)p.n_kv_heads * D;
    const int64_t qrow0 = (int64_t)b * p.n_q, krow0 = (int64_t)b * p.n_kv;

    for (int i = threadIdx.x; i < BLOCK_ROWS * D; i += blockDim.x) {
        int r = i / D, d = i % D, j = j0 + r;
        int64_t at = (krow0 + j) * kw + (int64_t)hk * D + d;
        k_s[i] = j < p.n_kv ? k[at] : 0.0f;
        v_s[i] = j < p.n_kv ? v[at] : 0.0f;
    }

    bool valid[ROWS_PER_WARP];
    int key[ROWS_PER_WARP], key_seg[ROWS_PER_WARP];
    float dk_acc[ROWS_PER_WARP][MAX_DPL], dv_acc[ROWS_PER_WARP][MAX_DPL];
#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; i++) {
        key[i] = j0 + warp * ROWS_PER_WARP + i;
        valid[i] = key[i] < p.n_kv;
        key_seg[i] = seg && valid[i] ? seg[krow0 + key[i]] : 0;
#pragma unroll
        for (int c = 0; c < MAX_DPL; c++) dk_acc[i][c] = dv_acc[i][c] = 0.0f;
    }

    /* the query rows that may see a key of this block: positions from its first key (and from
     * q_pos0) to its last key + window - 1 (or the last query) */
    int j_last = min(j0 + BLOCK_ROWS, p.n_kv) - 1;
    int t_begin = max(j0 - p.q_pos0, 0);
    int64_t t_end64 = p.window > 0 ? (int64_t)j_last + p.window - p.q_pos0 : (int64_t)p.n_q;
    int t_end = (int)(t_end64 < p.n_q ? t_end64 : p.n_q);
    for (int g = 0; g < group; g++) {
        int h = hk * group + g;
        for (int tt = t_begin; tt < t_end; tt += TILE) {
            __syncthreads(); /* the previous tile is consumed (and, the first time, k_s, v_s are written) */
            for (int i = threadIdx.x; i < TILE * D; i += blockDim.x) {
                int r = i / D, d = i % D, t = tt + r;
                int64_t at = (qrow0 + t) * qw + (int64_t)h * D + d;
                q_s[r * ks + d] = t < t_end ? q[at] : 0.0f;
                do_s[r * ks + d] = t < t_end ? dout[at] : 0.0f;
            }
            if (threadIdx.x < TILE) {
                int t = tt + threadIdx.x;
                bool in = t < t_end;
                lse_s[threadIdx.x] = in ? lse[(qrow0 + t) * p.n_heads + h] : 0.0f;
                delta_s[threadIdx.x] = in ? delta[(qrow0 + t) * p.n_heads + h] : 0.0f;
                seg_s[threadIdx.x] = seg && in ? seg[krow0 + p.q_pos0 + t] : 0;
            }
            __syncthreads();

            /* q.k and dO.v of query row tt + lane with this warp's keys */
            float qk[ROWS_PER_WARP], dp[ROWS_PER_WARP];
#pragma unroll
            for (int i = 0; i < ROWS_PER_WARP; i++) qk[i] = dp[i] = 0.0f;
            const float4 *qrow = (const float4 *)(q_s + lane * ks), *orow = (const float4 *)(do_s + lane * ks);
            for (int d4 = 0; d4 < D / 4; d4++) {
                float4 qq = qrow[d4], oo = orow[d4];
#pragma unroll
                for (int i = 0; i < ROWS_PER_WARP; i++) {
                    int r = warp * ROWS_PER_WARP + i;
                    float4 kk = ((const float4 *)(k_s + r * D))[d4], vv = ((const float4 *)(v_s + r * D))[d4];
                    qk[i] += qq.x * kk.x + qq.y * kk.y + qq.z * kk.z + qq.w * kk.w;
                    dp[i] += oo.x * vv.x + oo.y * vv.y + oo.z * vv.z + oo.w * vv.w;
                }
            }

            int t = tt + lane, pos = p.q_pos0 + t;
#pragma unroll
            for (int i = 0; i < ROWS_PER_WARP; i++) {
                bool vis = valid[i] && t < t_end &&
                           attn_visible(pos, key[i], p.window, seg != NULL, seg_s[lane], key_seg[i]);
                if (!__any_sync(FULL_MASK, vis)) continue; /* warp-uniform */
                float dscore, pj = 0.0f, ds = 0.0f;
                if (vis) {
                    pj = expf(attn_score(qk[i], p.scale, p.softcap, &dscore) - lse_s[lane]);
                    ds = dscore * (pj * (dp[i] - delta_s[lane]));
                }
                for (int r = 0; r < TILE; r++) {
                    float pr = __shfl_sync(FULL_MASK, pj, r), dr = __shfl_sync(FULL_MASK, ds, r);
#pragma unroll
                    for (int c = 0; c < MAX_DPL; c++)
                        if (c < dpl && c * 32 + lane < D) {
                            dv_acc[i][c] += pr * do_s[r * ks + c * 32 + lane];
                            dk_acc[i][c] += dr * q_s[r * ks + c * 32 + lane];
                        }
                }
            }
        }
    }

#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; i++) {
        if (!valid[i]) continue;
        int64_t at = (krow0 + key[i]) * kw + (int64_t)hk * D;
#pragma unroll
        for (int c = 0; c < MAX_DPL; c++)
            if (c < dpl && c * 32 + lane < D) {
                dk[at + c * 32 + lane] = dk_acc[i][c];
                dv[at + c * 32 + lane] = dv_acc[i][c];
            }
    }
}

/* ---- the op --------------------------------------------------------------------------------- */

template <typename T>
static pt_status delta_launch(cuda_ctx *c, float *delta, const pt_tensor *dout, const pt_tensor *out,
                              const pt_attention *a)
{
    int64_t pairs = (int64_t)a->batch * a->n_q * a->n_heads;
    auto kernel = attention_delta_kernel<T>;
    kernel<<<cuda_grid(pairs, WARPS), WARPS * 32, 0, c->stream>>>(delta, (const T *)dout->data, (const T *)out->data,
                                                                  pairs, a->n_heads, a->head_dim);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status attention_delta(cuda_ctx *c, float *delta, const pt_tensor *dout, const pt_tensor *out,
                          const pt_attention *a)
{
    return ACT_CALL(out, delta_launch, c, delta, dout, out, a);
}

/* The fp32 SIMT kernels (the reference, and every head_dim the tensor-core ones do not take) on
 * fp32 tensors. */
static pt_status simt_bwd(cuda_ctx *c, float *dq, float *dk, float *dv, const float *dout, const float *q,
                          const float *k, const float *v, const float *lse, const pt_attention *a, const int32_t *seg,
                          const float *delta)
{
    attn_dims p = attn_dims_of(a);
    size_t smem = dq_smem_bytes(a->head_dim);
    CUDA_TRY(cudaFuncSetAttribute(attention_dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 qgrid((unsigned)((a->n_q + BLOCK_ROWS - 1) / BLOCK_ROWS), (unsigned)a->n_heads, (unsigned)a->batch);
    attention_dq_kernel<<<qgrid, WARPS * 32, smem, c->stream>>>(dq, dout, q, k, v, lse, delta, seg, p);
    CUDA_LAUNCHED();

    smem = dkv_smem_bytes(a->head_dim);
    CUDA_TRY(cudaFuncSetAttribute(attention_dkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 kgrid((unsigned)((a->n_kv + BLOCK_ROWS - 1) / BLOCK_ROWS), (unsigned)a->n_kv_heads, (unsigned)a->batch);
    attention_dkv_kernel<<<kgrid, WARPS * 32, smem, c->stream>>>(dk, dv, dout, q, k, v, lse, delta, seg, p);
    CUDA_LAUNCHED();
    return PT_OK;
}

/* bf16 activations with a head_dim the tensor cores do not take: the fp32 kernels on fp32 copies
 * of dout, q, k, v, their gradients rounded back to bf16. */
static pt_status simt_bwd_bf16(cuda_ctx *c, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                               const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const float *lse,
                               const pt_attention *a, const int32_t *seg, const float *delta)
{
    int64_t nq = attn_q_values(a), nk = attn_kv_values(a);
    const pt_tensor *in[4] = {dout, q, k, v};
    pt_tensor *grads[3] = {dq, dk, dv};
    int64_t n_in[4] = {nq, nq, nk, nk}, n_out[3] = {nq, nk, nk};
    float *buf, *f[7];
    CUDA_TRY(cudaMallocAsync((void **)&buf, sizeof(float) * (size_t)(3 * nq + 4 * nk), c->stream));
    f[0] = buf;
    for (int i = 1; i < 7; i++) f[i] = f[i - 1] + (i <= 4 ? n_in[i - 1] : n_out[i - 5]);
    pt_status st = PT_OK;
    for (int i = 0; i < 4 && st == PT_OK; i++) st = cuda_bf16_to_f32(c, (const __nv_bfloat16 *)in[i]->data, f[i], n_in[i]);
    if (st == PT_OK) st = simt_bwd(c, f[4], f[5], f[6], f[0], f[1], f[2], f[3], lse, a, seg, delta);
    for (int i = 0; i < 3 && st == PT_OK; i++) st = cuda_f32_to_bf16(c, f[4 + i], (__nv_bfloat16 *)grads[i]->data, n_out[i]);
    cudaError_t e = cudaFreeAsync(buf, c->stream);
    if (st == PT_OK && e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync: %s", cudaGetErrorString(e));
    return st;
}

/* dq, dk, dv on the tensor cores when they take the call, else the SIMT kernels. */
static pt_status attention_bwd_launch(cuda_ctx *c, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                                      const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                                      const pt_tensor *lse, const pt_attention *a, const int32_t *seg, float *delta)
{
    if (attn_tc_usable(c, a)) return attention_tc_bwd(c, dq, dk, dv, dout, q, k, v, lse, delta, a, seg);
    const float *l = (const float *)lse->data;
    if (q->dtype == PT_BF16) return simt_bwd_bf16(c, dq, dk, dv, dout, q, k, v, l, a, seg, delta);
    return simt_bwd(c, (float *)dq->data, (float *)dk->data, (float *)dv->data, (const float *)dout->data,
                    (const float *)q->data, (const float *)k->data, (const float *)v->data, l, a, seg, delta);
}

pt_status cuda_attention_bwd(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                             const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *out,
                             const pt_tensor *lse, const pt_attention *a)
{
    cuda_ctx *c = ctx_of(be);
    TRY(attn_check(a, "attention_bwd"));
    if (a->sinks) /* gpt-oss trains on neither backend yet */
        return ERR(PT_ERR_UNSUPPORTED, "cuda attention_bwd: the gradient through attention sinks (gpt-oss) is not built "
                   "yet");
    if (!attn_same_act(dq, dk, dv, dout) || !attn_same_act(q, k, v, out) || q->dtype != dq->dtype ||
        lse->dtype != PT_F32)
        return ERR(PT_ERR_INTERNAL, "cuda attention_bwd: the activations and gradients must be all f32 or all bf16, "
                   "lse f32");
    if (a->batch <= 0 || a->n_kv <= 0) return PT_OK;
    if (a->n_q <= 0) { /* no query sees any key */
        CUDA_TRY(cudaMemsetAsync(dk->data, 0, dk->nbytes, c->stream));
        CUDA_TRY(cudaMemsetAsync(dv->data, 0, dv->nbytes, c->stream));
        return PT_OK;
    }
    void *seg = NULL;
    if (a->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, a->segments, sizeof(int32_t) * (size_t)a->batch * a->n_kv, &seg));
    float *delta = NULL;
    CUDA_TRY(cudaMallocAsync((void **)&delta, sizeof(float) * (size_t)a->batch * a->n_q * a->n_heads, c->stream));
    pt_status st = attention_delta(c, delta, dout, out, a);
    if (st == PT_OK) st = attention_bwd_launch(c, dq, dk, dv, dout, q, k, v, lse, a, (const int32_t *)seg, delta);
    cudaError_t e = cudaFreeAsync(delta, c->stream);
    if (st != PT_OK) return st;
    if (e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync(delta): %s", cudaGetErrorString(e));
    return PT_OK;
}
