/* attention_tc.cu — causal grouped-query attention forward on the tensor cores (FlashAttention-2
 * style), the fast twin of attention.cu for head_dim a multiple of 16 up to 256; attention_tc.h
 * has the shared pieces and the shapes. q, k and v are rounded to bf16 by a pass before the
 * kernel (the seam is fp32); scores, the online softmax and the output accumulate in fp32.
 *
 * A block takes 64 query rows of one (sequence, head), 16 per warp, and walks the keys they may
 * see (causal, window, and with sorted packing segments from their example's first key) in tiles
 * of 64: S = Q K^T with mma (Q and K from shared memory by ldmatrix), the mask (keys of the
 * window, of the example, not after the row) and the scores' soft-cap in fp32, the running max
 * and sum per row (online softmax: the output is rescaled by exp(m_old - m_new) when the max
 * grows), then O += P V with P, rounded to bf16, taken straight from S's registers as the A
 * operand. A warp whose 16 rows see no key of a tile skips it. K of the next tile is copied
 * (cp.async) while P V runs, V of the next while S of the next runs. The log-sum-exp of each row
 * (natural log) is saved for the backward pass; the output is O / l. Also here: the host checks
 * and the bf16 conversion the backward shares. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>

#include "attention_tc.h"

/* The running max m and sum l of a lane's two rows (l: the lane's own share of the row). */
typedef struct {
    float m[2], l[2];
} tc_softmax;

/* Mask and soft-cap the scores s (raw q.k), fold them into the running max and sum, rescale the
 * output, and leave in s the probabilities exp(score - m) (0 where masked). */
template <int DMAX, int BN>
__device__ static __forceinline__ void tc_softmax_step(float s[BN / 8][4], uint32_t vis, tc_softmax *st,
                                                       float o[DMAX / 8][4], const attn_dims &p)
{
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s[n][i] = vis >> (4 * n + i) & 1 ? attn_score(s[n][i], p.scale, p.softcap, NULL) : -INFINITY;
            mx[i / 2] = fmaxf(mx[i / 2], s[n][i]);
        }
    float base[2], corr[2];
#pragma unroll
    for (int r = 0; r < 2; r++) { /* the 4 lanes of a row: lanes 4g .. 4g + 3 */
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 1));
        mx[r] = fmaxf(mx[r], __shfl_xor_sync(FULL_MASK, mx[r], 2));
        float m_new = fmaxf(st->m[r], mx[r]);
        base[r] = m_new == -INFINITY ? 0.0f : m_new; /* a row that has seen nothing yet */
        corr[r] = expf(st->m[r] - base[r]);          /* 0 while m was -inf */
        st->m[r] = m_new;
        st->l[r] *= corr[r];
    }
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            s[n][i] = vis >> (4 * n + i) & 1 ? expf(s[n][i] - base[i / 2]) : 0.0f;
            st->l[i / 2] += s[n][i];
        }
#pragma unroll
    for (int n = 0; n < DMAX / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[n][i] *= corr[i / 2];
}

/* out = O / l for the lane's valid rows (two adjacent columns per n-tile), lse = m + log(l). */
template <int DMAX, typename O>
__device__ static __forceinline__ void tc_fwd_store(O *out, float *lse, float o[DMAX / 8][4], tc_softmax *st,
                                                    const tc_qrow r[2], const attn_dims &p, int64_t qrow0, int h)
{
    const int D = p.head_dim, t4 = threadIdx.x % 4;
    const int64_t qw = (int64_t)p.n_heads * D;
    float inv[2];
#pragma unroll
    for (int i = 0; i < 2; i++) {
        st->l[i] += __shfl_xor_sync(FULL_MASK, st->l[i], 1);
        st->l[i] += __shfl_xor_sync(FULL_MASK, st->l[i], 2);
        inv[i] = 1.0f / st->l[i]; /* l > 0 for a valid row: it sees itself */
    }
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (!r[i].valid) continue;
        O *row = out + (qrow0 + r[i].t) * qw + (int64_t)h * D + 2 * t4;
#pragma unroll
        for (int n = 0; n < DMAX / 8; n++)
            if (n * 8 < D) {
                act_st(row, 8 * n, o[n][2 * i] * inv[i]);
                act_st(row, 8 * n + 1, o[n][2 * i + 1] * inv[i]);
            }
        if (lse && t4 == 0) lse[(qrow0 + r[i].t) * p.n_heads + h] = st->m[i] + logf(st->l[i]);
    }
}

/* Grid (query blocks, heads, sequences), 128 threads; q [batch*n_q, n_heads*D], k and v
 * [batch*n_kv, n_kv_heads*D] in bf16; seg [batch*n_kv] or NULL. Heavy blocks (late queries see
 * more keys) are launched first. Every lane reaches every shuffle and collective: a warp's rows
 * and tiles are the same for all its lanes, and no thread returns early. */
template <int DMAX, typename O>
__global__ static void attention_tc_fwd_kernel(O *out, float *lse, const bf16 *q, const bf16 *k, const bf16 *v,
                                               const int32_t *seg, attn_dims p, bool seg_sorted)
{
    constexpr int BN = tc_fwd_bn(DMAX);
    extern __shared__ float4 smem4[];
    const int D = p.head_dim, ld = D + TC_PAD, warp = threadIdx.x / 32;
    bf16 *q_s = (bf16 *)smem4, *k_s = q_s + TC_BM * ld, *v_s = k_s + BN * ld;
    const int b = blockIdx.z, h = blockIdx.y, t0 = (gridDim.x - 1 - blockIdx.x) * TC_BM;
    const int64_t qw = (int64_t)p.n_heads * D, kw = (int64_t)p.n_kv_heads * D;
    const int64_t qrow0 = (int64_t)b * p.n_q, krow0 = (int64_t)b * p.n_kv;
    const int32_t *kseg = seg ? seg + krow0 : NULL;
    const bf16 *kh = k + krow0 * kw + (int64_t)(h / (p.n_heads / p.n_kv_heads)) * D;
    const bf16 *vh = v + (kh - k);
    tc_qrow rows[2];
    tc_qrows(rows, t0 + warp * 16, p, kseg);
    int k_begin, k_end;
    tc_key_range(t0, p, kseg, seg_sorted, &k_begin, &k_end);

    tc_load_tile(q_s, ld, q + (qrow0 + t0) * qw + (int64_t)h * D, qw, TC_BM, p.n_q - t0, D);
    tc_load_tile(k_s, ld, kh + k_begin * kw, kw, BN, k_end - k_begin, D);
    cp_async_commit();
    tc_load_tile(v_s, ld, vh + k_begin * kw, kw, BN, k_end - k_begin, D);
    cp_async_commit();

    tc_softmax st = {{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    float o[DMAX / 8][4];
#pragma unroll
    for (int n = 0; n < DMAX / 8; n++) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
    for (int kt = k_begin; kt < k_end; kt += BN) {
        cp_async_wait<1>(); /* Q and this K tile are here (V may still be on its way) */
        __syncthreads();
        uint32_t vis = tc_mask<BN>(rows, kt, k_end, kseg, p);
        bool work = __any_sync(FULL_MASK, vis != 0); /* warp-uniform */
        float s[BN / 8][4];
        if (work) {
            tc_qk<DMAX, BN>(s, q_s, k_s, ld, warp * 16, D);
            tc_softmax_step<DMAX, BN>(s, vis, &st, o, p);
        }
        cp_async_wait<0>(); /* this V tile */
        __syncthreads();    /* ... is everyone's, and every warp is done with K */
        int next = kt + BN;
        if (next < k_end) tc_load_tile(k_s, ld, kh + next * kw, kw, BN, k_end - next, D);
        cp_async_commit();
        if (work) tc_pv<DMAX, BN>(o, s, v_s, ld, D);
        __syncthreads(); /* every warp is done with V */
        if (next < k_end) tc_load_tile(v_s, ld, vh + next * kw, kw, BN, k_end - next, D);
        cp_async_commit();
    }
    tc_fwd_store<DMAX, O>(out, lse, o, &st, rows, p, qrow0, h);
}

/* ---- host ---- */

bool attn_segments_sorted(const pt_attention *a)
{
    if (!a->segments) return false;
    for (int64_t b = 0; b < a->batch; b++) {
        const int32_t *s = a->segments + b * a->n_kv;
        for (int j = 1; j < a->n_kv; j++)
            if (s[j] < s[j - 1]) return false;
    }
    return true;
}

bool attn_tc_usable(const cuda_ctx *c, const pt_attention *a)
{
    int d = a->head_dim, dmax = tc_dmax(d);
    size_t need = tc_fwd_smem(dmax, d);
    need = need > tc_dq_smem(dmax, d) ? need : tc_dq_smem(dmax, d);
    need = need > tc_dkv_smem(dmax, d) ? need : tc_dkv_smem(dmax, d);
    return !c->reference && !a->sinks && d % 16 == 0 && d <= TC_MAX_HEAD_DIM && need <= (size_t)c->smem_optin;
}

pt_status attn_tc_convert(cuda_ctx *c, const pt_attention *a, const pt_tensor *q, const pt_tensor *k,
                          const pt_tensor *v, const pt_tensor *dout, bf16 **buf, bf16 **qb, bf16 **kb, bf16 **vb,
                          bf16 **dob)
{
    if (q->dtype == PT_BF16) { /* bf16 activations: the tensors themselves */
        *buf = NULL;
        *qb = (bf16 *)q->data, *kb = (bf16 *)k->data, *vb = (bf16 *)v->data;
        if (dout) *dob = (bf16 *)dout->data;
        return PT_OK;
    }
    int64_t nq = (int64_t)a->batch * a->n_q * a->n_heads * a->head_dim;
    int64_t nk = (int64_t)a->batch * a->n_kv * a->n_kv_heads * a->head_dim;
    CUDA_TRY(cudaMallocAsync((void **)buf, sizeof(bf16) * (size_t)((dout ? 2 : 1) * nq + 2 * nk), c->stream));
    *qb = *buf;
    *kb = *qb + nq;
    *vb = *kb + nk;
    pt_status st = cuda_f32_to_bf16(c, (const float *)q->data, *qb, nq);
    if (st == PT_OK) st = cuda_f32_to_bf16(c, (const float *)k->data, *kb, nk);
    if (st == PT_OK) st = cuda_f32_to_bf16(c, (const float *)v->data, *vb, nk);
    if (st == PT_OK && dout) {
        *dob = *vb + nk;
        st = cuda_f32_to_bf16(c, (const float *)dout->data, *dob, nq);
    }
    if (st != PT_OK) cudaFreeAsync(*buf, c->stream);
    return st;
}

template <typename O>
static pt_status tc_fwd_launch(cuda_ctx *c, pt_tensor *out, pt_tensor *lse, const bf16 *qb, const bf16 *kb,
                               const bf16 *vb, const pt_attention *a, const int32_t *seg)
{
    typedef void (*tc_fwd_fn)(O *, float *, const bf16 *, const bf16 *, const bf16 *, const int32_t *, attn_dims, bool);
    int dmax = tc_dmax(a->head_dim);
    tc_fwd_fn kernel = dmax == 64    ? attention_tc_fwd_kernel<64, O>
                       : dmax == 128 ? attention_tc_fwd_kernel<128, O>
                                     : attention_tc_fwd_kernel<256, O>;
    size_t smem = tc_fwd_smem(dmax, a->head_dim);
    CUDA_TRY(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 grid((unsigned)((a->n_q + TC_BM - 1) / TC_BM), (unsigned)a->n_heads, (unsigned)a->batch);
    kernel<<<grid, TC_THREADS, smem, c->stream>>>((O *)out->data, lse ? (float *)lse->data : NULL, qb, kb, vb, seg,
                                                  attn_dims_of(a), attn_segments_sorted(a));
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status attention_tc_fwd(cuda_ctx *c, pt_tensor *out, pt_tensor *lse, const pt_tensor *q, const pt_tensor *k,
                           const pt_tensor *v, const pt_attention *a, const int32_t *seg)
{
    bf16 *buf, *qb, *kb, *vb;
    TRY(attn_tc_convert(c, a, q, k, v, NULL, &buf, &qb, &kb, &vb, NULL));
    pt_status st = ACT_CALL(out, tc_fwd_launch, c, out, lse, qb, kb, vb, a, seg);
    cudaError_t e = buf ? cudaFreeAsync(buf, c->stream) : cudaSuccess;
    if (st != PT_OK) return st;
    if (e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync(bf16 q, k, v): %s", cudaGetErrorString(e));
    return PT_OK;
}
