/* cuda_backend.h — the CUDA backend's context and op functions, shared by its files (one file per
 * op family, named as their CPU twins in src/cpu/):
 *   backend_cuda.cu  memory (a stream-ordered pool), staging of small host arrays, open/close
 *   matmul.cu        the matmul ops: bf16 GEMMs with fp32 accumulation; quantized weights tile by tile
 *   lt.cu            cuBLASLt: the GEMM workspace, one plan (descriptors, algorithm) per GEMM shape
 *   dequant.cu       every stored weight format to bf16 or fp32 on the device
 *   wcache.cu        dequantized base weights kept for reuse within a pass (checkpointing)
 *   layers.cu        embedding, RMSNorm, RoPE, SwiGLU/GeGLU, bias, residual add, dropout
 *   layers_bwd.cu    their gradients
 *   attention.cu     fused causal GQA attention forward (online softmax, O(T) memory); attention.h
 *                    holds what it shares with the backward
 *   attention_bwd.cu its backward (recomputes the scores from the saved log-sum-exp)
 *   attention_tc.cu  the same on the tensor cores (bf16 mma, cuda/mma.h), for head_dim a multiple of
 *   attention_tc_bwd.cu  16 up to 256; attention_tc.h holds what they share
 *   loss.cu          soft-cap and chunked cross-entropy
 *   optim.cu         AdamW, sum of squares, scale
 *   comm.cu          NCCL sums on their own stream
 * Activations cross the seam in the backend's act dtype (backend.h): bf16 on the fast path, fp32
 * with PTRAIN_CUDA_KERNELS=reference; every activation op takes either (a template on the element
 * type, computing in fp32 registers), statistics stay fp32. Weights stay in their stored format. */
#ifndef PTRAIN_CUDA_BACKEND_H
#define PTRAIN_CUDA_BACKEND_H

#include <cuda_bf16.h>
#include <stdbool.h>

#include "cuda_check.h"
#include "ptrain/backend.h"

/* Small host arrays an op takes by pointer (ids, positions, frequencies, labels, segments) are
 * copied into one device buffer per slot, grown as needed, in stream order. */
enum { STAGE_IDS, STAGE_POS, STAGE_FREQ, STAGE_LABELS, STAGE_SEGMENTS, STAGE_MOE_WEIGHTS, STAGE_COUNT };

struct cuda_lt;     /* lt.cu's state */
struct cuda_wcache; /* wcache.cu's */

typedef struct {
    cudaStream_t stream;
    cublasHandle_t blas;
    struct cuda_lt *lt; /* cuBLASLt handle, workspace (shared with blas) and plans */
    struct cuda_wcache *wcache; /* dequantized weights kept (NULL: none) */
    cudaMemPool_t pool; /* the device's default pool: cudaMallocAsync on stream, kept, not trimmed */
    __nv_bfloat16 *scratch; /* bf16 staging for the operands of one matmul (a dequantized tile too) */
    size_t scratch_elems;
    void *stage[STAGE_COUNT];
    size_t stage_bytes[STAGE_COUNT];
    double *partials; /* per-block partial sums of the reductions (sum_squares, cross_entropy) */
    size_t partials_n;
    double *host_sums; /* pinned host memory the reductions' results are copied back to */
    int sm_count;
    int smem_optin; /* bytes of dynamic shared memory a block may opt in to on this GPU */
    /* PTRAIN_CUDA_KERNELS=reference: the plain fp32 kernels and GEMMs the fast paths are checked
     * against on the same GPU (tests/gpu/run.sh), instead of the tensor-core ones */
    bool reference;
    /* data parallel (world > 1): gradients are summed on comm_stream, after the compute stream's
     * work up to reduce_begin (event ready) and before its work after reduce_end (event done) */
    int world;
    ncclComm_t comm;
    cudaStream_t comm_stream;
    cudaEvent_t ready, done;
    /* offloaded activations (backend_to_host_async ...): copies on copy_stream, after the compute
     * stream's work up to copy_ready, and before its work after a wait on copy_done */
    cudaStream_t copy_stream;
    cudaEvent_t copy_ready, copy_done;
} cuda_ctx;

static inline cuda_ctx *ctx_of(pt_backend *be) { return (cuda_ctx *)be->ctx; }

/* Blocks of `threads` threads covering n items, capped for grid-stride loops. */
static inline unsigned cuda_grid(int64_t n, int threads)
{
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 65535 * 32 ? 65535 * 32 : b);
}

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024), in a fixed order so that
 * the result does not depend on timing; every thread gets it. shared holds 32 doubles. */
__device__ static inline double cuda_block_sum(double v, double *shared)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads(); /* shared may still be read by a previous call */
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The same for the maximum of floats. */
__device__ static inline float cuda_block_max(float v, float *shared)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}


/* Activations of either dtype (act_t: float or bf16) read into and written from fp32 registers:
 * a bf16 store rounds to nearest even, as cuda_f32_to_bf16. */
__host__ __device__ static inline float act_ld(const float *p, int64_t i) { return p[i]; }
__host__ __device__ static inline float act_ld(const __nv_bfloat16 *p, int64_t i) { return __bfloat162float(p[i]); }
__host__ __device__ static inline void act_st(float *p, int64_t i, float v) { p[i] = v; }
__host__ __device__ static inline void act_st(__nv_bfloat16 *p, int64_t i, float v) { p[i] = __float2bfloat16_rn(v); }

/* Call fn<T>(args...) with T the element type of activation tensor t (bf16 or float): the host
 * side of every op that takes either. */
#define ACT_CALL(t, fn, ...) \
    ((t)->dtype == PT_BF16 ? fn<__nv_bfloat16>(__VA_ARGS__) : fn<float>(__VA_ARGS__))

/* A grid-stride loop of i over [0, n). */
#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* The last launch's error as a status (a launch itself returns nothing). */
#define CUDA_LAUNCHED() CUDA_TRY(cudaGetLastError())

/* scratch.cu */
/* Copy bytes from host into the device buffer of slot (grown as needed); *dev gets its address.
 * The copy is queued on the compute stream; the host buffer may be reused on return. */
pt_status cuda_stage(cuda_ctx *c, int slot, const void *host, size_t bytes, void **dev);
/* At least n doubles of per-block partials in c->partials. */
pt_status cuda_partials_reserve(cuda_ctx *c, size_t n);
/* *out (device) = the sum of n doubles at in (device), in a fixed order (one block). */
pt_status cuda_sum_doubles(cuda_ctx *c, const double *in, int64_t n, double *out);
/* The same, then copied to the host and added to *acc (synchronizes the stream). */
pt_status cuda_sum_to_host(cuda_ctx *c, const double *in, int64_t n, double *acc);

/* backend_cuda.cu */
/* Bytes the device pool has handed out at most since open (for the memory check). */
size_t cuda_peak_bytes(pt_backend *be);

/* dequant.cu: rows of a stored weight [N, K] (f32, bf16, f16, NF4, GGUF blocks) on the device.
 * rows: rows to convert; ids (device, may be NULL): row r of out is weight row ids[r], else
 * row r0 + r. Exactly one of out_bf16 / out_f32 is given (rows x K, row-major). */
bool cuda_dequant_supported(pt_dtype dtype);
pt_status cuda_dequant_rows(cuda_ctx *c, const pt_tensor *w, const int32_t *ids, int64_t r0, int64_t rows,
                            __nv_bfloat16 *out_bf16, float *out_f32);

/* One GEMM in row-major terms: C[m,n] (ldc; fp32, or bf16 when c_bf16) = op(A) op(B) + beta C,
 * op(X) = Xᵀ when tx; A is [m,k] (or [k,m] when ta) with lda, B [k,n] (or [n,k] when tb) with
 * ldb. The operands' type (bf16 or fp32) is the called function's; the sums are fp32 either way. */
typedef struct {
    const void *a;
    int64_t lda;
    bool ta;
    const void *b;
    int64_t ldb;
    bool tb;
    void *c;
    int64_t ldc, m, n, k;
    float beta;
    bool c_bf16;
} cuda_gemm;

/* lt.cu: bf16 A and B, fp32 or bf16 C, fp32 accumulation through cublasLtMatmul with an algorithm chosen
 * once per shape. cuda_lt_open makes the handle and the GEMM workspace (PT_CUDA_GEMM_WORKSPACE_BYTES
 * from the pool, which c->blas is given too); cuda_lt_aligned says whether g meets the 16-byte
 * alignment the plans are chosen for (else the caller uses cublasGemmEx). */
pt_status cuda_lt_open(cuda_ctx *c);
void cuda_lt_close(cuda_ctx *c);
bool cuda_lt_aligned(const cuda_gemm *g);
pt_status cuda_lt_matmul(cuda_ctx *c, const cuda_gemm *g);

/* wcache.cu: *out = the whole weight w in bf16 from the cache (dequantized into it on a miss), or
 * NULL when w is not cached (the cache off or too small, bf16 or fp32 weights). */
pt_status cuda_weight_cache(pt_backend *be, size_t bytes);
pt_status cuda_wcache_get(cuda_ctx *c, const pt_tensor *w, const __nv_bfloat16 **out);
void cuda_wcache_close(cuda_ctx *c);

/* matmul.cu */
/* out[0, n) = in rounded to bf16 (nearest even), or widened to fp32 (exact), on the compute stream */
pt_status cuda_f32_to_bf16(cuda_ctx *c, const float *in, __nv_bfloat16 *out, int64_t n);
pt_status cuda_bf16_to_f32(cuda_ctx *c, const __nv_bfloat16 *in, float *out, int64_t n);
pt_status cuda_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta);
pt_status cuda_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                                float beta);
pt_status cuda_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                 float beta);

/* layers.cu */
pt_status cuda_embed(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids);
pt_status cuda_rmsnorm_fwd(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                           const pt_tensor *w, float eps);
pt_status cuda_add_rmsnorm(pt_backend *be, pt_tensor *h, pt_tensor *y, pt_tensor *rstd, const pt_tensor *r,
                           const pt_tensor *w, float eps);
pt_status cuda_rope_fwd(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                       const int32_t *pos,
                        const float *inv_freq);
pt_status cuda_pos_scale(pt_backend *be, pt_tensor *x, float beta, int period, const int32_t *pos);
pt_status cuda_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, int rot_dim, float mscale,
                       const int32_t *pos,
                        const float *inv_freq);
pt_status cuda_swiglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
pt_status cuda_geglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
pt_status cuda_swiglu_clamp_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                                float alpha);
pt_status cuda_embed_bwd(pt_backend *be, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids, float scale);
pt_status cuda_add_bias(pt_backend *be, pt_tensor *y, const pt_tensor *bias);
/* moe.cu */
pt_status cuda_moe_route(pt_backend *be, int32_t *expert, float *weight, const pt_tensor *logits, int k, bool norm);
pt_status cuda_moe_gather(pt_backend *be, pt_tensor *xs, const pt_tensor *x, const int32_t *token);
pt_status cuda_moe_combine(pt_backend *be, pt_tensor *y, const pt_tensor *ys, const int32_t *row, const float *weight,
                           int k);
pt_status cuda_moe_combine_bwd(pt_backend *be, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *ys,
                               const int32_t *row, const float *weight, int k);
pt_status cuda_moe_route_bwd(pt_backend *be, pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *dw,
                             const int32_t *expert, int k, bool norm);
/* dora.cu */
pt_status cuda_dora_norm(pt_backend *be, pt_tensor *wnorm, const pt_tensor *w, const pt_tensor *a, const pt_tensor *b,
                         float s);
pt_status cuda_dora_scale(pt_backend *be, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm);
pt_status cuda_dora_mag_bwd(pt_backend *be, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                            const pt_tensor *wnorm);
pt_status cuda_add(pt_backend *be, pt_tensor *y, const pt_tensor *x);
/* gdn.cu */
pt_status cuda_conv1d_silu(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                           const pt_delta *d);
pt_status cuda_delta_gates(pt_backend *be, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                           const pt_tensor *a_log, const pt_tensor *dt_bias);
pt_status cuda_delta_rule(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                          const pt_tensor *g, pt_tensor *state, const pt_delta *d);
pt_status cuda_sigmoid_mul(pt_backend *be, pt_tensor *y, const pt_tensor *gate);
/* their backward (gdn_bwd.cu) */
pt_status cuda_conv1d_silu_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                               const pt_tensor *w, const pt_delta *d);
pt_status cuda_delta_gates_bwd(pt_backend *be, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                               const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                               const pt_tensor *dt_bias);
pt_status cuda_delta_rule_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg, const pt_tensor *dout,
                              const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g, const pt_delta *d);
pt_status cuda_sigmoid_mul_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                               const pt_tensor *y, const pt_tensor *gate);
/* dqkv's q and k parts from the value heads' gradients at the normalised q and k (dqn, dkn [rows, v_heads, k_dim]
 * f32), queued on s (src/cpu/gdn_bwd.c's cpu_delta_qk_bwd) */
pt_status cuda_delta_qk_bwd(cudaStream_t s, pt_tensor *dqkv, const pt_tensor *qkv, const float *dqn, const float *dkn,
                            const pt_delta *d);
/* the chunked delta rule and its backward (gdn_chunk.cu) */
pt_status cuda_delta_chunk(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                           const pt_tensor *g, pt_tensor *state, const pt_delta *d);
pt_status cuda_delta_chunk_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                               const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g,
                               const pt_delta *d);
pt_status cuda_dropout(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed);

/* layers_bwd.cu */
pt_status cuda_rmsnorm_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                           const pt_tensor *w, const pt_tensor *rstd, const pt_tensor *res);
pt_status cuda_swiglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                          const pt_tensor *gate, const pt_tensor *up);
pt_status cuda_geglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                         const pt_tensor *gate, const pt_tensor *up);

/* attention.cu, attention_bwd.cu */
pt_status cuda_attention_fwd(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                             const pt_tensor *k, const pt_tensor *v, const pt_attention *a);
pt_status cuda_attention_bwd(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                             const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *out,
                             const pt_tensor *lse, const pt_attention *a);

/* loss.cu */
pt_status cuda_softcap_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *x, float cap);
pt_status cuda_softcap_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *y, float cap);
pt_status cuda_cross_entropy(pt_backend *be, pt_tensor *dlogits, double *loss_sum, int64_t *n_labelled,
                             const pt_tensor *logits, const int32_t *labels, float grad_scale, float softcap);

/* optim.cu */
pt_status cuda_adamw_step(pt_backend *be, pt_tensor *param, const pt_tensor *grad, pt_tensor *m, pt_tensor *v,
                          const pt_adamw *hp);
pt_status cuda_sum_squares(pt_backend *be, const pt_tensor *t, double *acc);
pt_status cuda_scale(pt_backend *be, pt_tensor *t, float s);

/* comm.cu */
pt_status cuda_comm_open(cuda_ctx *c, const pt_backend_options *opts);
void cuda_comm_close(cuda_ctx *c);
pt_status cuda_allreduce_sum(pt_backend *be, pt_tensor *t);
pt_status cuda_reduce_begin(pt_backend *be, pt_tensor *t);
pt_status cuda_reduce_poll(pt_backend *be);
pt_status cuda_reduce_end(pt_backend *be);
pt_status cuda_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src);
pt_status cuda_zero(pt_backend *be, pt_tensor *t);
/* Wait for the compute stream; under several ranks, polling NCCL's errors meanwhile (aborts the
 * communicator on one, so that no rank hangs on a failed peer). Every host wait goes through here. */
pt_status cuda_wait(cuda_ctx *c);

#endif
