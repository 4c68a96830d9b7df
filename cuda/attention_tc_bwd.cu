/* attention_tc_bwd.cu — the gradient of causal grouped-query attention on the tensor cores, the
 * fast twin of attention_bwd.cu (attention_tc.h: the shapes and shared pieces). As in
 * FlashAttention-2, nothing n_q x n_kv is stored: P = exp(S - lse) is recomputed from q, k and the
 * forward's log-sum-exp, with S = cap(scale q.k), dP = dO V^T, delta = rowsum(dO * O) (computed
 * before, attention_bwd.cu), dR = S'(raw) P (dP - delta) (S' = scale, or scale (1 - tanh^2) under
 * a soft-cap). Two passes, each output element summed by one warp in a fixed order: no atomics,
 * the same bits every run.
 *   dQ, query-major: a block takes 64 query rows (16 per warp) and walks the keys they may see,
 *     tiles of 64 (32 at DMAX 256): dP = dO V^T and S = Q K^T with mma, dR in fp32 in registers,
 *     then dQ += dR K with dR, rounded to bf16, as the A operand. V of the next tile is copied
 *     while S and dR K run, K of the next while dP of the next runs.
 *   dK, dV, key-major: a block takes 64 keys (32 for DMAX 128 and 256) of one kv head and walks
 *     every query head of its group and the 64-row query tiles that may see them. Per tile each
 *     warp computes S and dP for 16 query rows and stores P and dR (bf16) in shared memory; then
 *     the warps accumulate dV += P^T dO and dK += dR^T Q, each warp 16 keys and its share of the
 *     head dims (P^T and dR^T read with ldmatrix .trans), in registers across the whole walk.
 * q, k, v and dO are rounded to bf16 by a pass first; everything else is fp32. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>

#include "attention_tc.h"

/* From the raw products s (q.k) and dp (dO.v) of a lane's fragments: s becomes P, dp becomes
 * dR; both 0 where masked. */
template <int BN>
__device__ static __forceinline__ void tc_grad_tile(float s[BN / 8][4], float dp[BN / 8][4], uint32_t vis,
                                                    const float lse[2], const float delta[2], const attn_dims &p)
{
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float dscore, pj = 0.0f, dr = 0.0f;
            if (vis >> (4 * n + i) & 1) {
                pj = expf(attn_score(s[n][i], p.scale, p.softcap, &dscore) - lse[i / 2]);
                dr = dscore * (pj * (dp[n][i] - delta[i / 2]));
            }
            s[n][i] = pj;
            dp[n][i] = dr;
        }
}

/* lse and delta of a lane's two rows of head h (0 for rows past the end). */
__device__ static __forceinline__ void tc_row_stats(float l[2], float d[2], const tc_qrow r[2], const float *lse,
                                                    const float *delta, int64_t qrow0, int n_heads, int h)
{
#pragma unroll
    for (int i = 0; i < 2; i++) {
        int64_t at = (qrow0 + r[i].t) * n_heads + h;
        l[i] = r[i].valid ? lse[at] : 0.0f;
        d[i] = r[i].valid ? delta[at] : 0.0f;
    }
}

/* Rows r0.. of a [rows, D] fp32 result at `base` (row stride w): a lane's two rows (valid only),
 * columns c0 + 8n + 2 (lane % 4) + {0, 1} for its n-tiles below D. */
template <int NT, typename O>
__device__ static __forceinline__ void tc_store(O *base, int64_t w, const float acc[NT][4], const bool valid[2],
                                                const int64_t row[2], int c0, int D)
{
    int t4 = threadIdx.x % 4;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        if (!valid[i]) continue;
        O *o = base + row[i] * w + c0 + 2 * t4;
#pragma unroll
        for (int n = 0; n < NT; n++)
            if (c0 + n * 8 < D) {
                act_st(o, 8 * n, acc[n][2 * i]);
                act_st(o, 8 * n + 1, acc[n][2 * i + 1]);
            }
    }
}

/* ---- dQ ---- */

/* Grid (query blocks, heads, sequences), 128 threads; the tensors as the forward's, dout in bf16,
 * lse and delta [batch*n_q, n_heads]. */
template <int DMAX, typename O>
__global__ static void attention_tc_dq_kernel(O *dq, const bf16 *q, const bf16 *k, const bf16 *v,
                                              const bf16 *dout, const float *lse, const float *delta,
                                              const int32_t *seg, attn_dims p, bool seg_sorted)
{
    constexpr int BN = tc_dq_bn(DMAX);
    extern __shared__ float4 smem4[];
    const int D = p.head_dim, ld = D + TC_PAD, warp = threadIdx.x / 32;
    bf16 *q_s = (bf16 *)smem4, *do_s = q_s + TC_BM * ld, *k_s = do_s + TC_BM * ld, *v_s = k_s + BN * ld;
    const int b = blockIdx.z, h = blockIdx.y, t0 = (gridDim.x - 1 - blockIdx.x) * TC_BM;
    const int64_t qw = (int64_t)p.n_heads * D, kw = (int64_t)p.n_kv_heads * D;
    const int64_t qrow0 = (int64_t)b * p.n_q, krow0 = (int64_t)b * p.n_kv, qoff = (qrow0 + t0) * qw + (int64_t)h * D;
    const int32_t *kseg = seg ? seg + krow0 : NULL;
    const bf16 *kh = k + krow0 * kw + (int64_t)(h / (p.n_heads / p.n_kv_heads)) * D, *vh = v + (kh - k);
    tc_qrow rows[2];
    tc_qrows(rows, t0 + warp * 16, p, kseg);
    float row_lse[2], row_delta[2];
    tc_row_stats(row_lse, row_delta, rows, lse, delta, qrow0, p.n_heads, h);
    int k_begin, k_end;
    tc_key_range(t0, p, kseg, seg_sorted, &k_begin, &k_end);

    tc_load_tile(q_s, ld, q + qoff, qw, TC_BM, p.n_q - t0, D);
    tc_load_tile(do_s, ld, dout + qoff, qw, TC_BM, p.n_q - t0, D);
    tc_load_tile(v_s, ld, vh + k_begin * kw, kw, BN, k_end - k_begin, D);
    cp_async_commit();
    tc_load_tile(k_s, ld, kh + k_begin * kw, kw, BN, k_end - k_begin, D);
    cp_async_commit();

    float acc[DMAX / 8][4];
#pragma unroll
    for (int n = 0; n < DMAX / 8; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    for (int kt = k_begin; kt < k_end; kt += BN) {
        cp_async_wait<1>(); /* Q, dO and this V tile (K may still be on its way) */
        __syncthreads();
        uint32_t vis = tc_mask<BN>(rows, kt, k_end, kseg, p);
        bool work = __any_sync(FULL_MASK, vis != 0);
        float s[BN / 8][4], dp[BN / 8][4];
        if (work) tc_qk<DMAX, BN>(dp, do_s, v_s, ld, warp * 16, D);
        cp_async_wait<0>(); /* this K tile */
        __syncthreads();    /* ... is everyone's, and every warp is done with V */
        int next = kt + BN;
        if (next < k_end) tc_load_tile(v_s, ld, vh + next * kw, kw, BN, k_end - next, D);
        cp_async_commit();
        if (work) {
            tc_qk<DMAX, BN>(s, q_s, k_s, ld, warp * 16, D);
            tc_grad_tile<BN>(s, dp, vis, row_lse, row_delta, p);
            tc_pv<DMAX, BN>(acc, dp, k_s, ld, D);
        }
        __syncthreads(); /* every warp is done with K */
        if (next < k_end) tc_load_tile(k_s, ld, kh + next * kw, kw, BN, k_end - next, D);
        cp_async_commit();
    }
    bool valid[2] = {rows[0].valid, rows[1].valid};
    int64_t at[2] = {qrow0 + rows[0].t, qrow0 + rows[1].t};
    tc_store<DMAX / 8, O>(dq + (int64_t)h * D, qw, acc, valid, at, 0, D);
}

/* ---- dK, dV ---- */

/* The query rows [t_begin, t_end) that may see keys [j0, j0 + BN) of a sequence: from the first
 * key's position (and q_pos0) to the last key's + window - 1, or with sorted segments the end of
 * the last key's example, or the last query. */
template <int BN>
__device__ static __forceinline__ void tc_query_range(int j0, const attn_dims &p, const int32_t *kseg, bool sorted,
                                                      int *t_begin, int *t_end)
{
    int j_last = min(j0 + BN, p.n_kv) - 1;
    int64_t end = p.window > 0 ? (int64_t)j_last + p.window - p.q_pos0 : (int64_t)p.n_q;
    if (kseg && sorted) end = min(end, (int64_t)tc_seg_end(kseg, p.n_kv, j_last) - p.q_pos0);
    *t_begin = max(j0 - p.q_pos0, 0);
    *t_end = (int)(end < p.n_q ? end : p.n_q);
}

/* Phase 1 of a query tile: this warp's 16 query rows (from r0) against the block's keys (from j0):
 * P and dR, rounded to bf16, into rows r0 - tt.. of p_s and ds_s (zeros where nothing is seen). */
template <int DMAX, int BN>
__device__ static __forceinline__ void tc_dkv_scores(bf16 *p_s, bf16 *ds_s, const bf16 *q_s, const bf16 *do_s,
                                                     const bf16 *k_s, const bf16 *v_s, int ld, int r0, int t_end,
                                                     int j0, const float *lse, const float *delta,
                                                     const int32_t *kseg, int64_t qrow0, int h, const attn_dims &p)
{
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, ldp = BN + TC_PAD;
    tc_qrow rows[2];
    tc_qrows(rows, r0, p, kseg);
    rows[0].valid &= rows[0].t < t_end;
    rows[1].valid &= rows[1].t < t_end;
    uint32_t vis = tc_mask<BN>(rows, j0, p.n_kv, kseg, p);
    float s[BN / 8][4], dp[BN / 8][4];
    if (__any_sync(FULL_MASK, vis != 0)) {
        float row_lse[2], row_delta[2];
        tc_row_stats(row_lse, row_delta, rows, lse, delta, qrow0, p.n_heads, h);
        tc_qk<DMAX, BN>(s, q_s, k_s, ld, warp * 16, p.head_dim);
        tc_qk<DMAX, BN>(dp, do_s, v_s, ld, warp * 16, p.head_dim);
        tc_grad_tile<BN>(s, dp, vis, row_lse, row_delta, p);
    } else {
#pragma unroll
        for (int n = 0; n < BN / 8; n++)
#pragma unroll
            for (int i = 0; i < 4; i++) s[n][i] = dp[n][i] = 0.0f;
    }
    int row = warp * 16 + lane / 4, col = 2 * (lane % 4);
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int i = 0; i < 2; i++) {
            int at = (row + 8 * i) * ldp + 8 * n + col;
            *(uint32_t *)(p_s + at) = pack_bf16x2(s[n][2 * i], s[n][2 * i + 1]);
            *(uint32_t *)(ds_s + at) = pack_bf16x2(dp[n][2 * i], dp[n][2 * i + 1]);
        }
}

/* Phase 2: dv += P^T dO, dk += dR^T Q over the tile's 64 query rows, for this warp's 16 keys
 * (kg) and head dims (its NTW n-tiles from ds * NTW). */
template <int DMAX, int BN, int NTW>
__device__ static __forceinline__ void tc_dkv_accumulate(float dk[NTW][4], float dv[NTW][4], const bf16 *p_s,
                                                         const bf16 *ds_s, const bf16 *q_s, const bf16 *do_s, int ld,
                                                         int kg, int ds, int D)
{
    const int ldp = BN + TC_PAD;
#pragma unroll
    for (int qc = 0; qc < TC_BM / 16; qc++) {
        uint32_t ap[4], ad[4];
        tc_frag_a_trans(ap, p_s, ldp, kg * 16, qc * 16);
        tc_frag_a_trans(ad, ds_s, ldp, kg * 16, qc * 16);
#pragma unroll
        for (int np = 0; np < NTW / 2; np++) {
            int d0 = (ds * NTW + 2 * np) * 8;
            if (d0 >= D) break;
            uint32_t bm[4];
            tc_frag_b_krows(bm, do_s, ld, qc * 16, d0);
            mma_bf16_16816(dv[2 * np], ap, bm);
            mma_bf16_16816(dv[2 * np + 1], ap, bm + 2);
            tc_frag_b_krows(bm, q_s, ld, qc * 16, d0);
            mma_bf16_16816(dk[2 * np], ad, bm);
            mma_bf16_16816(dk[2 * np + 1], ad, bm + 2);
        }
    }
}

/* Query tile `it` of a dK/dV block's walk (head it / tiles of its group, rows from
 * t_begin + (it % tiles) 64): q and dO into q_s and do_s; rows from t_end on are zeros. */
__device__ static __forceinline__ void tc_dkv_load_queries(bf16 *q_s, bf16 *do_s, int ld, const bf16 *q,
                                                           const bf16 *dout, int it, int tiles, int t_begin,
                                                           int t_end, int h0, int64_t qrow0, int64_t qw, int D)
{
    int h = h0 + it / tiles, tt = t_begin + it % tiles * TC_BM;
    int64_t off = (qrow0 + tt) * qw + (int64_t)h * D;
    tc_load_tile(q_s, ld, q + off, qw, TC_BM, t_end - tt, D);
    tc_load_tile(do_s, ld, dout + off, qw, TC_BM, t_end - tt, D);
}

/* Grid (key blocks, kv heads, sequences), 128 threads; every key row of the sequence is written,
 * 0 where no query sees it. Early key blocks (seen by the most queries) are launched first. Warp w
 * accumulates keys 16 (w % KG).. and n-tiles NTW (w / KG).. of the head dims. */
template <int DMAX, typename O>
__global__ static void attention_tc_dkv_kernel(O *dk, O *dv, const bf16 *q, const bf16 *k, const bf16 *v,
                                               const bf16 *dout, const float *lse, const float *delta,
                                               const int32_t *seg, attn_dims p, bool seg_sorted)
{
    constexpr int BN = tc_dkv_bn(DMAX), KG = BN / 16, NTW = DMAX / 8 / (4 / KG);
    extern __shared__ float4 smem4[];
    const int D = p.head_dim, ld = D + TC_PAD, warp = threadIdx.x / 32, kg = warp % KG, ds = warp / KG;
    bf16 *k_s = (bf16 *)smem4, *v_s = k_s + BN * ld, *q_s = v_s + BN * ld, *do_s = q_s + TC_BM * ld;
    bf16 *p_s = do_s + TC_BM * ld, *ds_s = p_s + TC_BM * (BN + TC_PAD);
    const int b = blockIdx.z, hk = blockIdx.y, j0 = blockIdx.x * BN, group = p.n_heads / p.n_kv_heads;
    const int64_t qw = (int64_t)p.n_heads * D, kw = (int64_t)p.n_kv_heads * D;
    const int64_t qrow0 = (int64_t)b * p.n_q, krow0 = (int64_t)b * p.n_kv, koff = (krow0 + j0) * kw + (int64_t)hk * D;
    const int32_t *kseg = seg ? seg + krow0 : NULL;
    int t_begin, t_end;
    tc_query_range<BN>(j0, p, kseg, seg_sorted, &t_begin, &t_end);
    const int tiles = t_end > t_begin ? (t_end - t_begin + TC_BM - 1) / TC_BM : 0, iters = group * tiles;

    tc_load_tile(k_s, ld, k + koff, kw, BN, p.n_kv - j0, D);
    tc_load_tile(v_s, ld, v + koff, kw, BN, p.n_kv - j0, D);
    if (iters > 0) tc_dkv_load_queries(q_s, do_s, ld, q, dout, 0, tiles, t_begin, t_end, hk * group, qrow0, qw, D);
    cp_async_commit();
    float dk_acc[NTW][4], dv_acc[NTW][4];
#pragma unroll
    for (int n = 0; n < NTW; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) dk_acc[n][i] = dv_acc[n][i] = 0.0f;
    for (int it = 0; it < iters; it++) {
        int h = hk * group + it / tiles, tt = t_begin + it % tiles * TC_BM;
        cp_async_wait<0>();
        __syncthreads(); /* K, V and this query tile are everyone's */
        tc_dkv_scores<DMAX, BN>(p_s, ds_s, q_s, do_s, k_s, v_s, ld, tt + warp * 16, t_end, j0, lse, delta, kseg, qrow0,
                                h, p);
        __syncthreads(); /* every warp's P and dR are in shared memory */
        tc_dkv_accumulate<DMAX, BN, NTW>(dk_acc, dv_acc, p_s, ds_s, q_s, do_s, ld, kg, ds, D);
        __syncthreads(); /* every warp is done with this query tile */
        if (it + 1 < iters)
            tc_dkv_load_queries(q_s, do_s, ld, q, dout, it + 1, tiles, t_begin, t_end, hk * group, qrow0, qw, D);
        cp_async_commit();
    }
    int key = j0 + kg * 16 + threadIdx.x % 32 / 4;
    bool valid[2] = {key < p.n_kv, key + 8 < p.n_kv};
    int64_t at[2] = {krow0 + key, krow0 + key + 8};
    tc_store<NTW, O>(dk + (int64_t)hk * D, kw, dk_acc, valid, at, ds * NTW * 8, D);
    tc_store<NTW, O>(dv + (int64_t)hk * D, kw, dv_acc, valid, at, ds * NTW * 8, D);
}

/* ---- host ---- */

template <typename O>
static pt_status tc_bwd_launch(cuda_ctx *c, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const bf16 *qb,
                               const bf16 *kb, const bf16 *vb, const bf16 *dob, const float *lse, const float *delta,
                               const pt_attention *a, const int32_t *seg)
{
    typedef void (*tc_bwd_fn)(O *, const bf16 *, const bf16 *, const bf16 *, const bf16 *, const float *,
                              const float *, const int32_t *, attn_dims, bool);
    typedef void (*tc_dkv_fn)(O *, O *, const bf16 *, const bf16 *, const bf16 *, const bf16 *, const float *,
                              const float *, const int32_t *, attn_dims, bool);
    int dmax = tc_dmax(a->head_dim);
    bool sorted = attn_segments_sorted(a);
    attn_dims p = attn_dims_of(a);
    tc_bwd_fn dq_kernel = dmax == 64    ? attention_tc_dq_kernel<64, O>
                          : dmax == 128 ? attention_tc_dq_kernel<128, O>
                                        : attention_tc_dq_kernel<256, O>;
    size_t smem = tc_dq_smem(dmax, a->head_dim);
    CUDA_TRY(cudaFuncSetAttribute(dq_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 qgrid((unsigned)((a->n_q + TC_BM - 1) / TC_BM), (unsigned)a->n_heads, (unsigned)a->batch);
    dq_kernel<<<qgrid, TC_THREADS, smem, c->stream>>>((O *)dq->data, qb, kb, vb, dob, lse, delta, seg, p, sorted);
    CUDA_LAUNCHED();

    tc_dkv_fn dkv_kernel = dmax == 64    ? attention_tc_dkv_kernel<64, O>
                           : dmax == 128 ? attention_tc_dkv_kernel<128, O>
                                         : attention_tc_dkv_kernel<256, O>;
    int bn = dmax == 64 ? tc_dkv_bn(64) : dmax == 128 ? tc_dkv_bn(128) : tc_dkv_bn(256);
    smem = tc_dkv_smem(dmax, a->head_dim);
    CUDA_TRY(cudaFuncSetAttribute(dkv_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    dim3 kgrid((unsigned)((a->n_kv + bn - 1) / bn), (unsigned)a->n_kv_heads, (unsigned)a->batch);
    dkv_kernel<<<kgrid, TC_THREADS, smem, c->stream>>>((O *)dk->data, (O *)dv->data, qb, kb, vb, dob, lse,
                                                       delta, seg, p, sorted);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status attention_tc_bwd(cuda_ctx *c, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                           const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *lse,
                           const float *delta, const pt_attention *a, const int32_t *seg)
{
    bf16 *buf, *qb, *kb, *vb, *dob;
    TRY(attn_tc_convert(c, a, q, k, v, dout, &buf, &qb, &kb, &vb, &dob));
    pt_status st = ACT_CALL(dq, tc_bwd_launch, c, dq, dk, dv, qb, kb, vb, dob, (const float *)lse->data, delta, a, seg);
    cudaError_t e = buf ? cudaFreeAsync(buf, c->stream) : cudaSuccess;
    if (st != PT_OK) return st;
    if (e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync(bf16 q, k, v, dout): %s", cudaGetErrorString(e));
    return PT_OK;
}
