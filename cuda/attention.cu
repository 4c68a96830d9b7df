/* attention.cu — fused causal grouped-query attention forward on the GPU, the twin of
 * src/cpu/attention.c (FlashAttention style): the n_q x n_kv score matrix is never stored. One
 * block takes Q_TILE query rows of one (sequence, head); it walks the keys its rows may see
 * (causal, sliding window) in tiles of KT = 32 keys staged in shared memory, and each warp keeps
 * a running max, a running sum and an unnormalized output for its rows (online softmax), all in
 * fp32. Lane j of a warp scores key j of the tile (a dot product over head_dim); for the output
 * each lane owns the dims lane, lane + 32, ... of head_dim. Masked keys (causal, window, another
 * packed example) contribute exactly zero. The log-sum-exp max + log(sum) of every row is saved
 * for the backward pass (attention_bwd.cu). head_dim: a multiple of 4 up to 256 (lanes past head_dim idle).
 * These fp32 kernels are the reference: a head_dim that is a multiple of 16 goes to the tensor-core
 * kernels (attention_tc.cu) unless PTRAIN_CUDA_KERNELS=reference or the heads have sinks (gpt-oss: one more logit
 * per head, folded into the row's max and sum at the end; only this kernel has them). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>

#include "attention.h"

enum {
    KT = 32,               /* keys per tile: one per lane */
    Q_TILE = BLOCK_ROWS,   /* query rows per block */
};

/* Shared memory of one block, in floats: the query rows [Q_TILE][D], the key tile [KT][D + 4]
 * (padded so that lane j reading row j hits distinct banks), the value tile [KT][D] (read along
 * a row, lane by lane) and the keys' segment ids [KT]. Every part starts 16-byte aligned. */
static size_t fwd_smem_bytes(int d)
{
    return sizeof(float) * ((size_t)Q_TILE * d + (size_t)KT * (d + 4) + (size_t)KT * d + KT);
}

/* Grid (query tiles, heads, sequences), WARPS * 32 threads. seg: [batch*n_kv] device, or NULL.
 * Every lane of a warp reaches every shuffle: a warp's rows and tiles are the same for all its
 * lanes, and no thread returns early. */
__global__ static void attention_fwd_kernel(float *out, float *lse, const float *q, const float *k, const float *v,
                                            const int32_t *seg, attn_dims p)
{
    extern __shared__ float4 smem4[];
    const int D = p.head_dim, dpl = (D + 31) / 32, ks = D + 4;
    float *q_s = (float *)smem4, *k_s = q_s + Q_TILE * D, *v_s = k_s + KT * ks;
    int *seg_s = (int *)(v_s + KT * D);
    const int b = blockIdx.z, h = blockIdx.y, t0 = blockIdx.x * Q_TILE;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hk = h / (p.n_heads / p.n_kv_heads);
    const int64_t qw = (int64_t)p.n_heads * D, kw = (int64_t)p.n_kv_heads * D;
    const int64_t qrow0 = (int64_t)b * p.n_q, krow0 = (int64_t)b * p.n_kv;

    for (int i = threadIdx.x; i < Q_TILE * D; i += blockDim.x) {
        int r = i / D, d = i % D, t = t0 + r;
        q_s[i] = t < p.n_q ? q[(qrow0 + t) * qw + (int64_t)h * D + d] : 0.0f;
    }

    /* this warp's rows */
    bool valid[ROWS_PER_WARP];
    int pos[ROWS_PER_WARP], first[ROWS_PER_WARP], my_seg[ROWS_PER_WARP];
    float m[ROWS_PER_WARP], l[ROWS_PER_WARP], acc[ROWS_PER_WARP][MAX_DPL];
#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; i++) {
        int t = t0 + warp * ROWS_PER_WARP + i;
        valid[i] = t < p.n_q;
        pos[i] = p.q_pos0 + t;
        first[i] = attn_first_key(pos[i], p.window);
        my_seg[i] = seg && valid[i] ? seg[krow0 + pos[i]] : 0;
        m[i] = -INFINITY;
        l[i] = 0.0f;
#pragma unroll
        for (int c = 0; c < MAX_DPL; c++) acc[i][c] = 0.0f;
    }

    /* the keys the block's rows may see: from the first its first row sees to its last row */
    int t_last = min(t0 + Q_TILE, p.n_q) - 1;
    int k_begin = attn_first_key(p.q_pos0 + t0, p.window), k_end = p.q_pos0 + t_last + 1;
    for (int kt = k_begin; kt < k_end; kt += KT) {
        __syncthreads(); /* the previous tile is consumed (and, the first time, q_s is written) */
        for (int i = threadIdx.x; i < KT * D; i += blockDim.x) {
            int j = i / D, d = i % D, key = kt + j;
            int64_t at = (krow0 + key) * kw + (int64_t)hk * D + d;
            k_s[j * ks + d] = key < k_end ? k[at] : 0.0f;
            v_s[j * D + d] = key < k_end ? v[at] : 0.0f;
        }
        if (threadIdx.x < KT) {
            int key = kt + threadIdx.x;
            seg_s[threadIdx.x] = seg && key < k_end ? seg[krow0 + key] : 0;
        }
        __syncthreads();

        /* raw products of this warp's rows with key kt + lane */
        float qk[ROWS_PER_WARP];
#pragma unroll
        for (int i = 0; i < ROWS_PER_WARP; i++) qk[i] = 0.0f;
        const float4 *krow = (const float4 *)(k_s + lane * ks);
        for (int d4 = 0; d4 < D / 4; d4++) {
            float4 kk = krow[d4];
#pragma unroll
            for (int i = 0; i < ROWS_PER_WARP; i++) {
                float4 qq = ((const float4 *)(q_s + (warp * ROWS_PER_WARP + i) * D))[d4];
                qk[i] += qq.x * kk.x + qq.y * kk.y + qq.z * kk.z + qq.w * kk.w;
            }
        }

        int key = kt + lane;
#pragma unroll
        for (int i = 0; i < ROWS_PER_WARP; i++) {
            bool vis = valid[i] && key < k_end && key >= first[i] && key <= pos[i] &&
                       (!seg || seg_s[lane] == my_seg[i]);
            float s = vis ? attn_score(qk[i], p.scale, p.softcap, NULL) : -INFINITY;
            float tile_max = warp_max(s);
            if (tile_max == -INFINITY) continue; /* the row sees no key of this tile (warp-uniform) */
            float m_new = fmaxf(m[i], tile_max);
            float corr = expf(m[i] - m_new); /* 0 while m[i] is still -inf */
            float pj = vis ? expf(s - m_new) : 0.0f;
            l[i] = l[i] * corr + warp_sum(pj);
            m[i] = m_new;
#pragma unroll
            for (int c = 0; c < MAX_DPL; c++) acc[i][c] *= corr;
            for (int j = 0; j < KT; j++) {
                float pjj = __shfl_sync(FULL_MASK, pj, j);
#pragma unroll
                for (int c = 0; c < MAX_DPL; c++)
                    if (c < dpl && c * 32 + lane < D) acc[i][c] += pjj * v_s[j * D + c * 32 + lane];
            }
        }
    }

#pragma unroll
    for (int i = 0; i < ROWS_PER_WARP; i++) {
        if (!valid[i]) continue;
        int t = t0 + warp * ROWS_PER_WARP + i;
        if (p.sinks) { /* gpt-oss: the head's sink, one more logit with no value, in the max and the sum */
            float sink = p.sinks[h], m_new = fmaxf(m[i], sink), corr = expf(m[i] - m_new);
            l[i] = l[i] * corr + expf(sink - m_new);
            m[i] = m_new;
#pragma unroll
            for (int c = 0; c < MAX_DPL; c++) acc[i][c] *= corr;
        }
        float inv = 1.0f / l[i]; /* l > 0: a query always sees itself */
        float *o = out + (qrow0 + t) * qw + (int64_t)h * D;
#pragma unroll
        for (int c = 0; c < MAX_DPL; c++)
            if (c < dpl && c * 32 + lane < D) o[c * 32 + lane] = acc[i][c] * inv;
        if (lse && lane == 0) lse[(qrow0 + t) * p.n_heads + h] = m[i] + logf(l[i]);
    }
}

/* The fp32 SIMT kernel on fp32 q, k, v, out. */
static pt_status simt_fwd(cuda_ctx *c, float *out, float *lse, const float *q, const float *k, const float *v,
                         const pt_attention *a, const int32_t *seg)
{
    attn_dims p = attn_dims_of(a);
    size_t smem = fwd_smem_bytes(a->head_dim);
    CUDA_TRY(cudaFuncSetAttribute(attention_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)((a->n_q + Q_TILE - 1) / Q_TILE), (unsigned)a->n_heads, (unsigned)a->batch);
    attention_fwd_kernel<<<grid, WARPS * 32, smem, c->stream>>>(out, lse, q, k, v, seg, p);
    CUDA_LAUNCHED();
    return PT_OK;
}

/* bf16 activations with a head_dim the tensor cores do not take: the fp32 kernel on fp32 copies
 * of q, k, v, its output rounded back to bf16. */
static pt_status simt_fwd_bf16(cuda_ctx *c, pt_tensor *out, float *lse, const pt_tensor *q, const pt_tensor *k,
                              const pt_tensor *v, const pt_attention *a, const int32_t *seg)
{
    int64_t nq = attn_q_values(a), nk = attn_kv_values(a);
    float *buf;
    CUDA_TRY(cudaMallocAsync((void **)&buf, sizeof(float) * (size_t)(2 * nq + 2 * nk), c->stream));
    float *qf = buf, *kf = qf + nq, *vf = kf + nk, *of = vf + nk;
    pt_status st = cuda_bf16_to_f32(c, (const __nv_bfloat16 *)q->data, qf, nq);
    if (st == PT_OK) st = cuda_bf16_to_f32(c, (const __nv_bfloat16 *)k->data, kf, nk);
    if (st == PT_OK) st = cuda_bf16_to_f32(c, (const __nv_bfloat16 *)v->data, vf, nk);
    if (st == PT_OK) st = simt_fwd(c, of, lse, qf, kf, vf, a, seg);
    if (st == PT_OK) st = cuda_f32_to_bf16(c, of, (__nv_bfloat16 *)out->data, nq);
    cudaError_t e = cudaFreeAsync(buf, c->stream);
    if (st == PT_OK && e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync: %s", cudaGetErrorString(e));
    return st;
}

pt_status cuda_attention_fwd(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                             const pt_tensor *k, const pt_tensor *v, const pt_attention *a)
{
    cuda_ctx *c = ctx_of(be);
    TRY(attn_check(a, "attention"));
    if (!attn_same_act(out, q, k, v) || (lse && lse->dtype != PT_F32))
        return ERR(PT_ERR_INTERNAL, "cuda attention: q, k, v and out must be all f32 or all bf16, lse f32");
    if (a->batch <= 0 || a->n_q <= 0) return PT_OK;
    void *seg = NULL;
    if (a->segments)
        TRY(cuda_stage(c, STAGE_SEGMENTS, a->segments, sizeof(int32_t) * (size_t)a->batch * a->n_kv, &seg));
    float *lsep = lse ? (float *)lse->data : NULL;
    if (attn_tc_usable(c, a)) return attention_tc_fwd(c, out, lse, q, k, v, a, (const int32_t *)seg);
    if (q->dtype == PT_BF16) return simt_fwd_bf16(c, out, lsep, q, k, v, a, (const int32_t *)seg);
    return simt_fwd(c, (float *)out->data, lsep, (const float *)q->data, (const float *)k->data,
                    (const float *)v->data, a, (const int32_t *)seg);
}
