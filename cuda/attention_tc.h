/* attention_tc.h — what the tensor-core attention kernels share (attention_tc.cu: the forward;
 * attention_tc_bwd.cu: the dQ and dK/dV passes), FlashAttention-2 style: bf16 operands on
 * mma.sync m16n8k16 (cuda/mma.h), fp32 scores, softmax and accumulators.
 *
 * A block is 4 warps. Tiles of bf16 rows (q, k, v, dO, converted from the fp32 activations by a
 * pass before the kernels) are copied into shared memory with cp.async, each row padded by 8
 * elements (16 bytes) so that the 8 rows an ldmatrix reads fall on distinct banks, and read into
 * mma fragments with ldmatrix. A warp computes 16 rows of a score tile; each lane holds two of
 * them (g and g + 8, g = lane / 4), as the mma C fragment lays them out. A kernel is compiled for
 * a head-dim class DMAX (64, 128, 256) and runs every multiple of 16 up to it; its register tiles
 * are sized by DMAX and the loops over head_dim stop at the real one.
 *
 * Tiles (BN keys; the query side is always 64 rows, 16 per warp) and shared memory per block in
 * bytes at head_dim = DMAX, within sm_80's 163 KiB opt-in (cudaFuncSetAttribute over 48 KiB):
 *   forward  BN 64                    (64 + 2 BN)(D + 8) 2               64: 27,648  128: 52,224  256: 101,376
 *   dQ       BN 64, 32 at DMAX 256    (128 + 2 BN)(D + 8) 2              64: 36,864  128: 69,632  256: 101,376
 *   dK/dV    BN 64, 32 at DMAX > 64   (128 + 2 BN)(D + 8) 2 + 256 (BN + 8)   55,296       62,464       111,616 */
#ifndef PTRAIN_CUDA_ATTENTION_TC_H
#define PTRAIN_CUDA_ATTENTION_TC_H

#include "attention.h"
#include "mma.h"

typedef __nv_bfloat16 bf16;

enum {
    TC_THREADS = 128, /* 4 warps */
    TC_BM = 64,       /* query rows per block (forward, dQ) or per query tile (dK/dV): 16 per warp */
    TC_PAD = 8,       /* bf16 of padding per shared row */
    TC_MAX_HEAD_DIM = 256,
    SM80_SMEM_OPTIN = 166912, /* bytes of dynamic shared memory a block may opt in to on sm_80 */
};

/* Key tile sizes: the forward's and dQ's keys per step, dK/dV's keys per block (smaller where the
 * register tiles of a larger head dim leave less room). */
__host__ __device__ constexpr int tc_fwd_bn(int dmax) { return dmax > 0 ? 64 : 0; }
__host__ __device__ constexpr int tc_dq_bn(int dmax) { return dmax > 128 ? 32 : 64; }
__host__ __device__ constexpr int tc_dkv_bn(int dmax) { return dmax > 64 ? 32 : 64; }

constexpr size_t tc_fwd_smem(int dmax, int d) { return (size_t)(TC_BM + 2 * tc_fwd_bn(dmax)) * (d + TC_PAD) * 2; }
constexpr size_t tc_dq_smem(int dmax, int d) { return (size_t)(2 * TC_BM + 2 * tc_dq_bn(dmax)) * (d + TC_PAD) * 2; }
constexpr size_t tc_dkv_smem(int dmax, int d)
{
    return (size_t)(2 * TC_BM + 2 * tc_dkv_bn(dmax)) * (d + TC_PAD) * 2 +
           (size_t)2 * TC_BM * (tc_dkv_bn(dmax) + TC_PAD) * 2;
}
static_assert(tc_fwd_smem(256, 256) <= SM80_SMEM_OPTIN && tc_dq_smem(256, 256) <= SM80_SMEM_OPTIN &&
                  tc_dkv_smem(256, 256) <= SM80_SMEM_OPTIN,
              "a tensor-core attention kernel needs more shared memory than sm_80 has");

/* The head-dim class a head_dim runs in. */
static inline int tc_dmax(int head_dim) { return head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : 256; }

/* ---- loads ---- */

/* A tile of `rows` rows: row r of src (bf16, D elements, `stride` apart, 16-byte aligned) to row r
 * of dst (ld apart); rows from `valid` on are zeros. Every thread of the block issues its share of
 * 16-byte cp.async; the caller commits the group. */
__device__ static __forceinline__ void tc_load_tile(bf16 *dst, int ld, const bf16 *src, int64_t stride, int rows,
                                                    int valid, int D)
{
    int chunks = D / 8;
    for (int i = threadIdx.x; i < rows * chunks; i += blockDim.x) {
        int r = i / chunks, c = i % chunks;
        bool in = r < valid;
        cp_async_16(dst + r * ld + c * 8, src + (in ? r : 0) * stride + c * 8, in ? 16 : 0);
    }
}

/* ---- fragments (layouts: cuda/mma.h) ---- */

/* A operand: rows r0..r0+15, columns k0..k0+15 of a row-major tile. */
__device__ static __forceinline__ void tc_frag_a(uint32_t a[4], const bf16 *s, int ld, int r0, int k0)
{
    int l = threadIdx.x % 32;
    ldmatrix_x4(a, s + (r0 + l % 16) * ld + k0 + (l / 16) * 8);
}

/* A operand A[m][k] = s[k][m] (m0.., k0..) of a tile stored the other way round (P^T from P). */
__device__ static __forceinline__ void tc_frag_a_trans(uint32_t a[4], const bf16 *s, int ld, int m0, int k0)
{
    int l = threadIdx.x % 32;
    ldmatrix_x4_trans(a, s + (k0 + (l / 16) * 8 + l % 8) * ld + m0 + ((l / 8) % 2) * 8);
}

/* B operands of the n-tiles n0 and n0 + 8 (b[0..1], b[2..3]), k0..k0+15, from a tile whose rows
 * are n: B[k][n] = s[n][k] (K for Q K^T). */
__device__ static __forceinline__ void tc_frag_b_nrows(uint32_t b[4], const bf16 *s, int ld, int n0, int k0)
{
    int l = threadIdx.x % 32;
    ldmatrix_x4(b, s + (n0 + (l / 16) * 8 + l % 8) * ld + k0 + ((l / 8) % 2) * 8);
}

/* The same from a tile whose rows are k: B[k][n] = s[k][n] (V for P V). */
__device__ static __forceinline__ void tc_frag_b_krows(uint32_t b[4], const bf16 *s, int ld, int k0, int n0)
{
    int l = threadIdx.x % 32;
    ldmatrix_x4_trans(b, s + (k0 + ((l / 8) % 2) * 8 + l % 8) * ld + n0 + (l / 16) * 8);
}

/* The C fragments of n-tiles c0 and c1 (columns 0-7, 8-15), rounded to bf16, as an A operand
 * over those 16 columns. */
__device__ static __forceinline__ void tc_pack_a(uint32_t a[4], const float c0[4], const float c1[4])
{
    a[0] = pack_bf16x2(c0[0], c0[1]);
    a[1] = pack_bf16x2(c0[2], c0[3]);
    a[2] = pack_bf16x2(c1[0], c1[1]);
    a[3] = pack_bf16x2(c1[2], c1[3]);
}

/* s[BN/8][4] = rows r0..r0+15 of A (a_s) times the rows of B (b_s: rows are the BN columns of
 * the result) over the head dims: Q K^T, or dO V^T. */
template <int DMAX, int BN>
__device__ static __forceinline__ void tc_qk(float s[BN / 8][4], const bf16 *a_s, const bf16 *b_s, int ld, int r0,
                                             int D)
{
#pragma unroll
    for (int n = 0; n < BN / 8; n++) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int kc = 0; kc < DMAX / 16; kc++) {
        if (kc * 16 >= D) break;
        uint32_t a[4];
        tc_frag_a(a, a_s, ld, r0, kc * 16);
#pragma unroll
        for (int np = 0; np < BN / 16; np++) {
            uint32_t b[4];
            tc_frag_b_nrows(b, b_s, ld, np * 16, kc * 16);
            mma_bf16_16816(s[2 * np], a, b);
            mma_bf16_16816(s[2 * np + 1], a, b + 2);
        }
    }
}

/* acc[DMAX/8][4] += P (the C fragments p[BN/8][4], to bf16) times the rows of v_s (BN of them,
 * head dims along the row): P V, or dS K. */
template <int DMAX, int BN>
__device__ static __forceinline__ void tc_pv(float acc[DMAX / 8][4], const float p[BN / 8][4], const bf16 *v_s,
                                             int ld, int D)
{
#pragma unroll
    for (int kc = 0; kc < BN / 16; kc++) {
        uint32_t a[4];
        tc_pack_a(a, p[2 * kc], p[2 * kc + 1]);
#pragma unroll
        for (int dp = 0; dp < DMAX / 16; dp++) {
            if (dp * 16 >= D) break;
            uint32_t b[4];
            tc_frag_b_krows(b, v_s, ld, kc * 16, dp * 16);
            mma_bf16_16816(acc[2 * dp], a, b);
            mma_bf16_16816(acc[2 * dp + 1], a, b + 2);
        }
    }
}

/* ---- rows, masks, key ranges ---- */

/* One of a lane's two query rows (g and g + 8 of its warp's 16): its index t in the sequence, its
 * position, the first key its window shows it, its segment. */
typedef struct {
    int t, pos, first, seg;
    bool valid;
} tc_qrow;

/* The rows r0 + g and r0 + 8 + g; kseg: this sequence's segment ids, or NULL. */
__device__ static __forceinline__ void tc_qrows(tc_qrow r[2], int r0, const attn_dims &p, const int32_t *kseg)
{
    int g = threadIdx.x % 32 / 4;
#pragma unroll
    for (int i = 0; i < 2; i++) {
        r[i].t = r0 + g + 8 * i;
        r[i].valid = r[i].t < p.n_q;
        r[i].pos = p.q_pos0 + r[i].t;
        r[i].first = attn_first_key(r[i].pos, p.window);
        r[i].seg = kseg && r[i].valid ? kseg[r[i].pos] : 0;
    }
}

/* Bit 4n + i: whether element i of n-tile n of a lane's C fragments (row r[i / 2], key
 * kt + 8n + 2 (lane % 4) + (i & 1)) is visible: causal, window, segment, key < k_end. */
template <int BN>
__device__ static __forceinline__ uint32_t tc_mask(const tc_qrow r[2], int kt, int k_end, const int32_t *kseg,
                                                   const attn_dims &p)
{
    int t4 = threadIdx.x % 4;
    uint32_t bits = 0;
#pragma unroll
    for (int n = 0; n < BN / 8; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int key = kt + 8 * n + 2 * t4 + (i & 1);
            const tc_qrow &q = r[i / 2];
            bool vis = q.valid && key < k_end &&
                       attn_visible(q.pos, key, p.window, kseg != NULL, q.seg, kseg && key < k_end ? kseg[key] : 0);
            bits |= (uint32_t)vis << (4 * n + i);
        }
    return bits;
}

/* With segment ids non-decreasing along the sequence (packing, checked on the host): the first
 * key of pos's example, and one past the last. */
__device__ static __forceinline__ int tc_seg_begin(const int32_t *kseg, int pos)
{
    int lo = 0, hi = pos, v = kseg[pos];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (kseg[mid] < v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}
__device__ static __forceinline__ int tc_seg_end(const int32_t *kseg, int n, int j)
{
    int lo = j, hi = n, v = kseg[j];
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (kseg[mid] <= v) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* The keys query rows [t0, t0 + TC_BM) may see: from the first key its first row sees (window,
 * and with sorted segments its example's first) to its last row's position. */
__device__ static __forceinline__ void tc_key_range(int t0, const attn_dims &p, const int32_t *kseg, bool sorted,
                                                    int *begin, int *end)
{
    int pos0 = p.q_pos0 + t0;
    *begin = attn_first_key(pos0, p.window);
    if (kseg && sorted) *begin = max(*begin, tc_seg_begin(kseg, pos0));
    *end = p.q_pos0 + min(t0 + TC_BM, p.n_q);
}

/* ---- host (attention.h has the entry points) ---- */

/* Whether every sequence's segment ids are non-decreasing (then the kernels skip the keys of
 * earlier examples); false without segments. */
bool attn_segments_sorted(const pt_attention *a);
/* q, k, v (and dout when given) as bf16: fp32 ones rounded into one buffer of the pool (*buf,
 * freed by the caller with cudaFreeAsync), bf16 ones used in place (*buf NULL); *qb, *kb, *vb,
 * *dob point to them. */
pt_status attn_tc_convert(cuda_ctx *c, const pt_attention *a, const pt_tensor *q, const pt_tensor *k,
                          const pt_tensor *v, const pt_tensor *dout, bf16 **buf, bf16 **qb, bf16 **kb, bf16 **vb,
                          bf16 **dob);

#endif
