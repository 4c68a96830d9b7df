/* cpu.h — the CPU backend's op functions, shared between its files. */
#ifndef PTRAIN_CPU_H
#define PTRAIN_CPU_H

#include "ptrain/backend.h"

#include <mpi.h>

/* the backend's context: the MPI requests of the sums started by reduce_begin (comm.c) */
typedef struct {
    MPI_Request *req;
    int n, cap;
} cpu_comm;
pt_status cpu_allreduce_sum(pt_backend *be, pt_tensor *t);
pt_status cpu_reduce_begin(pt_backend *be, pt_tensor *t);
pt_status cpu_reduce_poll(pt_backend *be);
pt_status cpu_reduce_end(pt_backend *be);
pt_status cpu_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src);
pt_status cpu_zero(pt_backend *be, pt_tensor *t);

/* moe.c */
pt_status cpu_moe_route(pt_backend *be, int32_t *expert, float *weight, const pt_tensor *logits, int k, bool norm);
pt_status cpu_moe_gather(pt_backend *be, pt_tensor *xs, const pt_tensor *x, const int32_t *token);
pt_status cpu_moe_combine(pt_backend *be, pt_tensor *y, const pt_tensor *ys, const int32_t *row, const float *weight,
                          int k);
pt_status cpu_moe_combine_bwd(pt_backend *be, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *ys,
                              const int32_t *row, const float *weight, int k);
pt_status cpu_moe_route_bwd(pt_backend *be, pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *dw,
                            const int32_t *expert, int k, bool norm);

pt_status cpu_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta);
/* moe_matmul.c: the grouped expert products, the experts spread over the threads */
pt_status cpu_moe_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int stride,
                         const int64_t *offset, int n_experts, float beta);
pt_status cpu_moe_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                    const int64_t *offset, int n_experts, float beta);
pt_status cpu_moe_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w, int stride,
                                   const int64_t *offset, int n_experts, float beta);
pt_status cpu_matmul_rows(float *y, const float *x, const pt_tensor *w, int64_t m, float beta);
pt_status cpu_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                               float beta);
pt_status cpu_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                float beta);

/* rows [r0, r0+rows) of weight w as fp32 (out: rows x K) */
pt_status cpu_dequantize_rows(const pt_tensor *w, int64_t r0, int64_t rows, float *out);
/* fused block dot products (dot.c) for the dtypes where cpu_dot_supported() */
#include <stdbool.h>
bool cpu_dot_supported(pt_dtype dtype);
void cpu_block_sums(const float *x, int64_t k, float *xsum);
float cpu_dot_row(pt_dtype dtype, const void *row, const float *x, const float *xsum, int64_t k);
pt_status cpu_embed(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids);
pt_status cpu_embed_bwd(pt_backend *be, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids, float scale);
pt_status cpu_rmsnorm_fwd(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                          const pt_tensor *w, float eps);
pt_status cpu_rope_fwd(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                       const int32_t *pos,
                       const float *inv_freq);
pt_status cpu_pos_scale(pt_backend *be, pt_tensor *x, float beta, int period, const int32_t *pos);
pt_status cpu_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, int rot_dim, float mscale,
                       const int32_t *pos,
                       const float *inv_freq);
pt_status cpu_attention_fwd(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                            const pt_tensor *k, const pt_tensor *v, const pt_attention *a);
pt_status cpu_swiglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
pt_status cpu_swiglu_clamp_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                               float alpha);
pt_status cpu_add(pt_backend *be, pt_tensor *y, const pt_tensor *x);
/* DoRA (dora.c) */
pt_status cpu_dora_norm(pt_backend *be, pt_tensor *wnorm, const pt_tensor *w, const pt_tensor *a,
                        const pt_tensor *b, float s);
pt_status cpu_dora_scale(pt_backend *be, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm);
pt_status cpu_dora_mag_bwd(pt_backend *be, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                           const pt_tensor *wnorm);
/* Gated DeltaNet (gdn.c) */
pt_status cpu_conv1d_silu(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                          const pt_delta *d);
pt_status cpu_delta_gates(pt_backend *be, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                          const pt_tensor *a_log, const pt_tensor *dt_bias);
pt_status cpu_delta_rule(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                         const pt_tensor *g, pt_tensor *state, const pt_delta *d);
pt_status cpu_sigmoid_mul(pt_backend *be, pt_tensor *y, const pt_tensor *gate);
/* Whether row r (position t of its sequence) starts a packed example (t 0: every sequence starts one). */
bool cpu_delta_starts(const pt_delta *d, int64_t r, int t);
/* their backward (gdn_bwd.c) */
pt_status cpu_conv1d_silu_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                              const pt_tensor *w, const pt_delta *d);
pt_status cpu_delta_gates_bwd(pt_backend *be, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                              const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                              const pt_tensor *dt_bias);
pt_status cpu_delta_rule_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg, const pt_tensor *dout,
                             const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g, const pt_delta *d);
pt_status cpu_sigmoid_mul_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                              const pt_tensor *y, const pt_tensor *gate);
/* dqkv's q and k parts of row r, key head kh: the value heads' gradients at the normalised q and k (dqn, dkn [rows,
 * v_heads, k_dim]) summed in head order, then through the normalisation (u = x / |x|: dx = (du - u (u . du)) / |x|)
 * and q's scale. du: k_dim floats of scratch. */
void cpu_delta_qk_bwd(const pt_delta *d, const float *x, float *dqkv, const float *dqn, const float *dkn, int64_t r,
                      int kh, float *du);
/* the chunked (WY) delta rule (gdn_chunk.c) and its backward (gdn_chunk_bwd.c) */
pt_status cpu_delta_chunk(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                          const pt_tensor *g, pt_tensor *state, const pt_delta *d);
pt_status cpu_delta_chunk_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg, const pt_tensor *dout,
                              const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g, const pt_delta *d);
pt_status cpu_dropout(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed);
/* backward ops (layers_bwd.c, attention_bwd.c), loss (loss.c) and optimizer (optim.c) */
pt_status cpu_add_rmsnorm(pt_backend *be, pt_tensor *h, pt_tensor *y, pt_tensor *rstd, const pt_tensor *r,
                          const pt_tensor *w, float eps);
pt_status cpu_rmsnorm_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                          const pt_tensor *w, const pt_tensor *rstd,
                          const pt_tensor *res);
pt_status cpu_swiglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                         const pt_tensor *gate, const pt_tensor *up);
pt_status cpu_geglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
pt_status cpu_geglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                        const pt_tensor *gate, const pt_tensor *up);
pt_status cpu_add_bias(pt_backend *be, pt_tensor *y, const pt_tensor *bias);
pt_status cpu_softcap_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *x, float cap);
pt_status cpu_softcap_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *y, float cap);
/* one build for every x86-64: AVX-512, AVX2 and plain versions of a hot loop, chosen at load time
 * by the processor's features */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define PT_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define PT_CLONES
#endif
/* Attention helpers shared by attention.c and attention_bwd.c: the first key a query at position
 * pos may see (its sliding window), and a raw product q.k turned into the score softmax takes. */
static inline int cpu_attention_first_key(const pt_attention *a, int pos)
{
    return a->window > 0 && pos >= a->window ? pos - a->window + 1 : 0;
}
float cpu_attention_score(const pt_attention *a, float qk, float *dscore);
double cpu_exp_shift(float *row, int n, float shift);
void cpu_attention_grad_run(float *p, float *ds, int n, float scale, float lse, float delta);
pt_status cpu_attention_bwd(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                            const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *out,
                            const pt_tensor *lse, const pt_attention *a);
pt_status cpu_cross_entropy(pt_backend *be, pt_tensor *dlogits, double *loss_sum, int64_t *n_labelled,
                            const pt_tensor *logits, const int32_t *labels, float grad_scale, float softcap);
pt_status cpu_adamw_step(pt_backend *be, pt_tensor *param, const pt_tensor *grad, pt_tensor *m, pt_tensor *v,
                         const pt_adamw *hp);
pt_status cpu_sum_squares(pt_backend *be, const pt_tensor *t, double *acc);
pt_status cpu_scale(pt_backend *be, pt_tensor *t, float s);

#endif
