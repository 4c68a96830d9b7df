/* attention.h — what the attention kernels of attention.cu (forward) and attention_bwd.cu
 * (backward) share: the block shape, the scalars a kernel takes, the mask and score rules of the
 * CPU twin (src/cpu/attention.c), warp reductions, and the checks both entry points make. */
#ifndef PTRAIN_CUDA_ATTENTION_H
#define PTRAIN_CUDA_ATTENTION_H

#include "cuda_backend.h"

enum {
    WARPS = 8,                         /* warps per block */
    ROWS_PER_WARP = 2,                 /* output rows each warp owns */
    BLOCK_ROWS = WARPS * ROWS_PER_WARP, /* output rows per block */
    MAX_DPL = 8,                       /* head_dim / 32 rounded up, at most (head_dim 256) */
    MAX_HEAD_DIM = 32 * MAX_DPL,
};
#define FULL_MASK 0xffffffffu

/* The scalars of pt_attention a kernel needs (the segments pointer is staged separately). */
typedef struct {
    int n_q, n_kv, q_pos0, n_heads, n_kv_heads, head_dim, window;
    float scale, softcap;
    const float *sinks; /* [n_heads] device, or NULL (pt_attention's; the SIMT forward only) */
} attn_dims;

static inline attn_dims attn_dims_of(const pt_attention *a)
{
    attn_dims p = {a->n_q, a->n_kv, a->q_pos0, a->n_heads, a->n_kv_heads, a->head_dim, a->window, a->scale,
                   a->softcap, a->sinks};
    return p;
}

/* The shapes these kernels take: head_dim a multiple of 4 (16-byte loads) up to 256 (lanes past
 * head_dim idle), heads and sequences within the grid's y and z limits. `what` names the op. */
static inline pt_status attn_check(const pt_attention *a, const char *what)
{
    if (a->head_dim <= 0 || a->head_dim % 4 || a->head_dim > MAX_HEAD_DIM)
        return ERR(PT_ERR_UNSUPPORTED, "cuda %s: head_dim %d is not supported (a multiple of 4 up to %d)", what,
                   a->head_dim, MAX_HEAD_DIM);
    if (a->n_heads > 65535 || a->batch > 65535 || a->q_pos0 < 0)
        return ERR(PT_ERR_UNSUPPORTED, "cuda %s: %d heads, %d sequences, queries at %d", what, a->n_heads, a->batch,
                   a->q_pos0);
    return PT_OK;
}

/* The first key position pos may see (cpu_attention_first_key). */
__device__ static inline int attn_first_key(int pos, int window)
{
    return window > 0 && pos >= window ? pos - window + 1 : 0;
}

/* Whether the query at pos (segment qseg) sees key j (segment kseg); segments only when has_seg. */
__device__ static inline bool attn_visible(int pos, int j, int window, bool has_seg, int qseg, int kseg)
{
    return j <= pos && j >= attn_first_key(pos, window) && (!has_seg || qseg == kseg);
}

/* The score of a raw product q.k: scaled, soft-capped when softcap > 0; *dscore (may be NULL) gets
 * its derivative by q.k (cpu_attention_score). */
__device__ static inline float attn_score(float qk, float scale, float softcap, float *dscore)
{
    float s = qk * scale;
    if (softcap <= 0.0f) {
        if (dscore) *dscore = scale;
        return s;
    }
    float t = tanhf(s / softcap);
    if (dscore) *dscore = scale * (1.0f - t * t);
    return softcap * t;
}

__device__ static inline float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL_MASK, v, o));
    return v;
}

__device__ static inline float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
    return v;
}

/* ---- host: the entry points the ops dispatch to ---- */

/* Values of q (and out, dq, dout) and of k (and v, dk, dv) a call reads or writes. */
static inline int64_t attn_q_values(const pt_attention *a)
{
    return (int64_t)a->batch * a->n_q * a->n_heads * a->head_dim;
}
static inline int64_t attn_kv_values(const pt_attention *a)
{
    return (int64_t)a->batch * a->n_kv * a->n_kv_heads * a->head_dim;
}
/* Whether the four activations are all f32 or all bf16. */
static inline bool attn_same_act(const pt_tensor *a, const pt_tensor *b, const pt_tensor *c, const pt_tensor *d)
{
    return (a->dtype == PT_F32 || a->dtype == PT_BF16) && b->dtype == a->dtype && c->dtype == a->dtype &&
           d->dtype == a->dtype;
}

/* attention_bwd.cu: delta[row, head] = rowsum(dO * O), summed in double as on the CPU, into
 * batch*n_q*n_heads floats of device memory. */
pt_status attention_delta(cuda_ctx *c, float *delta, const pt_tensor *dout, const pt_tensor *out,
                          const pt_attention *a);

/* attention_tc.cu, attention_tc_bwd.cu: the tensor-core kernels. They take a call when
 * attn_tc_usable: not PTRAIN_CUDA_KERNELS=reference, head_dim a multiple of 16 up to 256, and
 * their shared memory within what this GPU lets a block opt in to; seg is the staged segments. */
bool attn_tc_usable(const cuda_ctx *c, const pt_attention *a);
pt_status attention_tc_fwd(cuda_ctx *c, pt_tensor *out, pt_tensor *lse, const pt_tensor *q, const pt_tensor *k,
                           const pt_tensor *v, const pt_attention *a, const int32_t *seg);
pt_status attention_tc_bwd(cuda_ctx *c, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                           const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *lse,
                           const float *delta, const pt_attention *a, const int32_t *seg);

#endif
