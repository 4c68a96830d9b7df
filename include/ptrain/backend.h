/* backend.h — the seam between the training loop and the hardware.
 *
 * A backend is a table of operations plus its own context (CPU: OpenMP/OpenBLAS and MPI; CUDA:
 * stream, cuBLAS handle, NCCL communicator). The model and training code call only the backend_*
 * functions below, so one graph runs on both. Tensors are row-major; the last dimension is
 * contiguous. Every op has a CPU version, which is the reference the CUDA version is tested
 * against. An op a backend does not (yet) provide fails with PT_ERR_UNSUPPORTED naming it. */
#ifndef PTRAIN_BACKEND_H
#define PTRAIN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    PT_F32,
    PT_BF16,
    PT_F16,
    PT_Q8_0, /* GGUF blocks of 32, block_q8_0 (quant_blocks.h lays out every block format) */
    PT_Q4_0, /* GGUF blocks of 32, block_q4_0 */
    PT_Q4_1, /* GGUF blocks of 32, block_q4_1 */
    PT_NF4,  /* bitsandbytes NF4, blocks of 64 with double-quantized absmax (nf4.h) */
    PT_Q5_0, /* GGUF blocks of 32, block_q5_0 */
    PT_Q5_1, /* GGUF blocks of 32, block_q5_1 */
    PT_Q2_K, /* GGUF k-quant super-blocks of 256, block_q2_K */
    PT_Q3_K, /* GGUF k-quant super-blocks of 256, block_q3_K */
    PT_Q4_K, /* GGUF k-quant super-blocks of 256, block_q4_K */
    PT_Q5_K, /* GGUF k-quant super-blocks of 256, block_q5_K */
    PT_Q6_K, /* GGUF k-quant super-blocks of 256, block_q6_K */
    PT_MXFP4, /* MXFP4 blocks of 32 (E8M0 scale, FP4 E2M1 values), block_mxfp4: gpt-oss's experts, GGUF's mxfp4 */
    PT_DTYPE_COUNT
} pt_dtype;

typedef struct pt_backend pt_backend;

/* Causal grouped-query attention over a batch of `batch` sequences: query row t of a sequence
 * sits at position q_pos0 + t and sees key rows 0 .. q_pos0 + t of the same sequence (and, when
 * segments is given, only keys of its own packed example; with a window, only the last `window`
 * of them, itself included). q is [batch*n_q, n_heads*head_dim], k and v are
 * [batch*n_kv, n_kv_heads*head_dim]. A score is s = scale * q.k, soft-capped to
 * softcap * tanh(s / softcap) when softcap > 0 (Gemma 2), before the mask and the softmax. */
typedef struct {
    int batch, n_q, n_kv, q_pos0;
    int n_heads, n_kv_heads, head_dim;
    float scale;
    const int32_t *segments; /* [batch*n_kv] example ids for packing, or NULL */
    float softcap;           /* 0: scores are not capped */
    int window;              /* sliding window: key j is seen from position p when p - j < window; 0: all */
    const float *sinks;      /* gpt-oss: [n_heads] f32 in the backend's memory, head h's softmax has one more logit,
                              * sinks[h], with no value (its probability dropped; the log-sum-exp counts it); NULL: none */
} pt_attention;

/* A Gated DeltaNet pass (qwen35's linear_attention layers) over batch sequences of seq rows each (sequence b's
 * rows b*seq ..): k_heads query/key heads of k_dim values and v_heads value heads of v_dim (v_heads a multiple of
 * k_heads; value head h reads key head h / (v_heads / k_heads)); conv the causal conv1d's kernel. With segments
 * (packed examples), the conv window and the recurrent state start afresh where the example id changes. */
enum { PT_DELTA_MAX_DIM = 256 }; /* the widest key or value head delta_rule runs */
enum { PT_DELTA_CHUNK = 64 };    /* delta_rule_bwd keeps the state every this many tokens (transformers' chunk) */
typedef struct {
    int batch, seq;
    int k_heads, v_heads, k_dim, v_dim, conv;
    const int32_t *segments; /* [batch*seq] example ids, or NULL */
} pt_delta;

/* AdamW hyperparameters as torch.optim.AdamW takes them (Python floats are doubles); step is the
 * 1-based count of updates including this one, as torch's state["step"] after its increment. */
typedef struct {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step;
} pt_adamw;

/* The fp32 scalars of one AdamW update, computed in double as torch's Python code does and rounded
 * where torch hands them to its fp32 kernel (shared by every backend's adamw_step):
 *   p = p * decay;  m = lerp(m, g, w1);  v = fma(w2 * g, g, v * b2);
 *   p = p + neg_step * m / (sqrt(v) / bc2_sqrt + eps). */
typedef struct {
    float decay, w1, b2, w2, bc2_sqrt, eps, neg_step;
} pt_adamw_scalars;
pt_adamw_scalars adamw_scalars(const pt_adamw *hp);

typedef struct {
    pt_dtype dtype;
    int ndim;
    int64_t shape[4];
    void *data; /* backend memory: host for CPU, device for CUDA */
    size_t nbytes;
} pt_tensor;

typedef struct {
    const char *name;
    void (*close)(pt_backend *be);
    /* memory */
    pt_status (*alloc)(pt_backend *be, pt_tensor *t);
    void (*release)(pt_backend *be, pt_tensor *t);
    pt_status (*upload)(pt_backend *be, pt_tensor *dst, const void *host, size_t nbytes);
    pt_status (*download)(pt_backend *be, const pt_tensor *src, void *host, size_t nbytes);
    pt_status (*synchronize)(pt_backend *be);
    /* linear algebra; x, y, dy, dx [M, *] f32 or the backend's act dtype; w [N, K] float or quantized */
    pt_status (*matmul)(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta);
    pt_status (*matmul_bwd_input)(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                                  float beta);
    pt_status (*matmul_bwd_weight)(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                   float beta);
    /* layers; host arrays (positions, frequencies, ids) are small and passed as pointers */
    pt_status (*embed)(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids);
    pt_status (*embed_bwd)(pt_backend *be, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids,
                           float scale); /* dtable[ids[r]] += scale * dout[r] */
    pt_status (*rmsnorm_fwd)(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                             const pt_tensor *w, float eps);
    pt_status (*add_rmsnorm)(pt_backend *be, pt_tensor *h, pt_tensor *y, pt_tensor *rstd, const pt_tensor *r,
                             const pt_tensor *w, float eps);
    pt_status (*rmsnorm_bwd)(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy,
                             const pt_tensor *x, const pt_tensor *w, const pt_tensor *rstd, const pt_tensor *res);
    /* rot_dim: the first rot_dim values of each head rotate (pairs i, i + rot_dim/2), the rest pass;
     * mscale multiplies cos and sin (LongRoPE's attention factor; 1: none) */
    pt_status (*rope_fwd)(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                          const int32_t *pos, const float *inv_freq);
    pt_status (*rope_bwd)(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, int rot_dim, float mscale,
                          const int32_t *pos, const float *inv_freq);
    /* x[t, :] *= 1 + beta ln(1 + floor(pos[t] / period)) (Ministral 3's query temperature; its own gradient) */
    pt_status (*pos_scale)(pt_backend *be, pt_tensor *x, float beta, int period, const int32_t *pos);
    pt_status (*attention_fwd)(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                               const pt_tensor *k, const pt_tensor *v, const pt_attention *desc);
    pt_status (*attention_bwd)(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv,
                               const pt_tensor *dout, const pt_tensor *q, const pt_tensor *k,
                               const pt_tensor *v, const pt_tensor *out, const pt_tensor *lse,
                               const pt_attention *desc);
    pt_status (*swiglu_fwd)(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
    pt_status (*swiglu_bwd)(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                            const pt_tensor *gate, const pt_tensor *up);
    pt_status (*geglu_fwd)(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
    pt_status (*swiglu_clamp_fwd)(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                                  float alpha);
    pt_status (*geglu_bwd)(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                           const pt_tensor *gate, const pt_tensor *up);
    pt_status (*add_bias)(pt_backend *be, pt_tensor *y, const pt_tensor *bias); /* y[r] += bias */
    pt_status (*softcap_fwd)(pt_backend *be, pt_tensor *y, const pt_tensor *x, float cap);
    pt_status (*softcap_bwd)(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *y, float cap);
    pt_status (*add)(pt_backend *be, pt_tensor *y, const pt_tensor *x); /* y += x */
    /* DoRA (f32 vectors of the N output columns; see backend_dora_norm and the two after it) */
    pt_status (*dora_norm)(pt_backend *be, pt_tensor *wnorm, const pt_tensor *w, const pt_tensor *a,
                           const pt_tensor *b, float s);
    pt_status (*dora_scale)(pt_backend *be, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm);
    pt_status (*dora_mag_bwd)(pt_backend *be, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                              const pt_tensor *wnorm);
    /* Gated DeltaNet and the gated attention output (qwen35; see backend_conv1d_silu and the three after it) */
    pt_status (*conv1d_silu)(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                             const pt_delta *d);
    pt_status (*delta_gates)(pt_backend *be, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                             const pt_tensor *a_log, const pt_tensor *dt_bias);
    pt_status (*delta_rule)(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                            const pt_tensor *g, pt_tensor *state, const pt_delta *d);
    pt_status (*delta_chunk)(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                             const pt_tensor *g, pt_tensor *state, const pt_delta *d);
    pt_status (*sigmoid_mul)(pt_backend *be, pt_tensor *y, const pt_tensor *gate); /* y *= sigmoid(gate) */
    pt_status (*conv1d_silu_bwd)(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                                 const pt_tensor *w, const pt_delta *d);
    pt_status (*delta_gates_bwd)(pt_backend *be, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                                 const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                                 const pt_tensor *dt_bias);
    pt_status (*delta_rule_bwd)(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                                const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g,
                                const pt_delta *d);
    pt_status (*delta_chunk_bwd)(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                                 const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g,
                                 const pt_delta *d);
    pt_status (*sigmoid_mul_bwd)(pt_backend *be, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                                 const pt_tensor *y, const pt_tensor *gate);
    pt_status (*cross_entropy)(pt_backend *be, pt_tensor *dlogits, double *loss_sum, int64_t *n_labelled,
                               const pt_tensor *logits, const int32_t *labels, float grad_scale, float softcap);
    /* optimizer and communication */
    pt_status (*adamw_step)(pt_backend *be, pt_tensor *param, const pt_tensor *grad, pt_tensor *m,
                            pt_tensor *v, const pt_adamw *hp);
    pt_status (*sum_squares)(pt_backend *be, const pt_tensor *t, double *acc); /* *acc += sum t^2 */
    pt_status (*scale)(pt_backend *be, pt_tensor *t, float s);                 /* t *= s */
    pt_status (*dropout)(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed);
    pt_status (*allreduce_sum)(pt_backend *be, pt_tensor *t);
    pt_status (*reduce_begin)(pt_backend *be, pt_tensor *t);
    pt_status (*reduce_poll)(pt_backend *be);
    pt_status (*reduce_end)(pt_backend *be);
    pt_status (*copy)(pt_backend *be, pt_tensor *dst, const pt_tensor *src);
    pt_status (*zero)(pt_backend *be, pt_tensor *t); /* every byte of t = 0 */
    /* host memory and copies that overlap compute (offloaded activations) */
    pt_status (*host_alloc)(pt_backend *be, size_t bytes, void **p);
    void (*host_free)(pt_backend *be, void *p);
    pt_status (*to_host_async)(pt_backend *be, void *host, const pt_tensor *src);
    pt_status (*from_host_async)(pt_backend *be, pt_tensor *dst, const void *host);
    pt_status (*copies_wait)(pt_backend *be);
    /* mixture of experts (backend_moe_route, _gather, _combine; host arrays passed as pointers) */
    pt_status (*moe_route)(pt_backend *be, int32_t *expert, float *weight, const pt_tensor *logits, int k, bool norm);
    pt_status (*moe_gather)(pt_backend *be, pt_tensor *xs, const pt_tensor *x, const int32_t *token);
    pt_status (*moe_combine)(pt_backend *be, pt_tensor *y, const pt_tensor *ys, const int32_t *row,
                             const float *weight, int k);
    pt_status (*moe_combine_bwd)(pt_backend *be, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy,
                                 const pt_tensor *ys, const int32_t *row, const float *weight, int k);
    pt_status (*moe_route_bwd)(pt_backend *be, pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *dw,
                               const int32_t *expert, int k, bool norm);
    /* optional: the grouped products in one pass over the experts (fp32 activations; NULL: one matmul per expert) */
    pt_status (*moe_matmul)(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int stride,
                            const int64_t *offset, int n_experts, float beta);
    pt_status (*moe_matmul_bwd_weight)(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                       const int64_t *offset, int n_experts, float beta);
    pt_status (*moe_matmul_bwd_input)(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                                      int stride, const int64_t *offset, int n_experts, float beta);
    /* optional: keep up to bytes of dequantized base weights for reuse (NULL: nothing to keep) */
    pt_status (*weight_cache)(pt_backend *be, size_t bytes);
} pt_backend_ops;

struct pt_backend {
    const pt_backend_ops *ops;
    void *ctx;
    int device; /* GPU index for CUDA, -1 for CPU */
    /* The dtype of activations between ops (and of their gradients): PT_F32 on the CPU and in the
     * CUDA reference mode, PT_BF16 on the CUDA fast path (issue 26; docs/cuda-backend.md, "bf16 and
     * fp32"). What precision needs stays f32 on every backend: norm statistics (rstd), attention's
     * log-sum-exp, logits and the loss, weights of norms and biases, the adapters, their gradients
     * and the optimizer state. An op's activation tensors all have this dtype. */
    pt_dtype act;
    double upload_s; /* seconds spent in backend_upload, for the start-up report */
};

/* Where the backend runs: config.yaml's device key and the --device options of generate and
 * inspect. Its text is read once, at that edge (the config's key table takes backend_device_names
 * as the key's choices; the options call backend_device_parse), and printed through
 * backend_device_names; past the edge only the enum travels (src/backend/device.c). */
typedef enum { DEVICE_AUTO, DEVICE_CPU, DEVICE_CUDA, DEVICE_COUNT } pt_device;
extern const char *const backend_device_names[DEVICE_COUNT + 1]; /* "auto", "cpu", "cuda", NULL */
/* The device named text (one of backend_device_names, exactly) into *out; false, *out unchanged,
 * for any other text. */
bool backend_device_parse(const char *text, pt_device *out);
/* The backend device would open here: DEVICE_CPU or DEVICE_CUDA (auto: CUDA when this ptrain was
 * built with it and a GPU is visible). */
pt_device backend_resolve(pt_device device);

typedef struct {
    pt_device device;   /* DEVICE_AUTO when left out */
    int local_rank;     /* picks the GPU */
    int threads;        /* OpenMP/OpenBLAS threads (CPU) */
    int rank, world;    /* MPI_COMM_WORLD, for the NCCL communicator */
    const unsigned char *nccl_id; /* rank 0's NCCL unique id (CUDA with world > 1), else NULL */
} pt_backend_options;

/* Open the backend the options ask for; auto = CUDA when built and a GPU is visible, else CPU. */
pt_status backend_open(const pt_backend_options *opts, pt_backend **out);
void backend_close(pt_backend *be);
/* The backends this binary was built with, e.g. "cpu cuda". */
const char *backend_list(void);

size_t dtype_size_bytes(pt_dtype dtype, int64_t nelem); /* bytes for nelem values, 0 if invalid */
int64_t dtype_block_values(pt_dtype dtype);              /* values per block (1: dense), 0 if invalid */
const char *dtype_name(pt_dtype dtype);
int64_t tensor_numel(const pt_tensor *t);
/* Describe a tensor of dtype and shape (fills nbytes); no memory is touched. */
pt_tensor tensor_make(pt_dtype dtype, int ndim, const int64_t *shape);

pt_status backend_alloc(pt_backend *be, pt_tensor *t);
void backend_release(pt_backend *be, pt_tensor *t);
pt_status backend_upload(pt_backend *be, pt_tensor *dst, const void *host, size_t nbytes);
pt_status backend_download(pt_backend *be, const pt_tensor *src, void *host, size_t nbytes);
/* y[M,N] = x[M,K] @ w[N,K]^T + beta * y */
pt_status backend_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta);
/* dx[M,K] = dy[M,N] @ w[N,K] + beta * dx */
pt_status backend_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy,
                                   const pt_tensor *w, float beta);
/* dw[N,K] = dy[M,N]^T @ x[M,K] + beta * dw */
pt_status backend_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy,
                                    const pt_tensor *x, float beta);
/* t = sum of t over all ranks, in place; blocking. */
pt_status backend_allreduce_sum(pt_backend *be, pt_tensor *t);
/* The same sum, started now and finished by backend_reduce_end, so that it overlaps whatever
 * runs in between (the rest of the backward pass). t must not be touched until then. CPU:
 * MPI_Iallreduce, progressed by backend_reduce_poll (Open MPI has no progress thread by
 * default); CUDA: NCCL on the backend's communication stream, ordered after the work queued so
 * far. backend_reduce_end waits for every started sum. */
pt_status backend_reduce_begin(pt_backend *be, pt_tensor *t);
pt_status backend_reduce_poll(pt_backend *be);
pt_status backend_reduce_end(pt_backend *be);
/* dst = src (same dtype and size), device to device. */
pt_status backend_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src);
pt_status backend_zero(pt_backend *be, pt_tensor *t); /* t = 0 (a view zeroes only its rows) */
/* Host memory the backend copies to and from while it computes (pinned on CUDA: what
 * use_gradient_checkpointing: "unsloth" keeps the layer inputs in). */
pt_status backend_host_alloc(pt_backend *be, size_t bytes, void **p);
void backend_host_free(pt_backend *be, void *p);
/* Start copying src to host (of backend_host_alloc) or host to dst, after the work queued so far,
 * on the backend's copy stream, so it overlaps the work queued next; backend_copies_wait makes the
 * work queued after it wait for every copy started before (CPU: the copies happen at once, the
 * wait does nothing). The memory of a copy in flight must not be touched until that wait. */
pt_status backend_to_host_async(pt_backend *be, void *host, const pt_tensor *src);
pt_status backend_from_host_async(pt_backend *be, pt_tensor *dst, const void *host);
pt_status backend_copies_wait(pt_backend *be);
/* Keep up to bytes of base weights dequantized for reuse within a pass: with gradient
 * checkpointing, a layer's recomputed forward and its backward multiply by the same weights (the
 * CUDA backend dequantizes them once for both; issue 26, point 5). 0 turns it off (the default);
 * backends that multiply stored weights directly (CPU) ignore it. */
pt_status backend_weight_cache(pt_backend *be, size_t bytes);
/* A 1-d f32 view of count values of t starting at value offset (no copy). */
pt_tensor tensor_span(const pt_tensor *t, int64_t offset, int64_t count);
pt_status backend_embed(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids);
/* The embedding's gradient (a table trained in full: modules_to_save): dtable [vocab, dim] f32,
 * row ids[r] += scale * dout[r] for every row r of the activations dout, in row order (the same
 * sums, in the same order, on every backend). */
pt_status backend_embed_bwd(pt_backend *be, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids, float scale);
pt_status backend_rmsnorm(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                          const pt_tensor *w, float eps);
/* The residual add and the RMSNorm after it in one pass (issue 26, point 6): h += r, then
 * y = rmsnorm(h) * w with rstd as backend_rmsnorm; the same numbers as backend_add then
 * backend_rmsnorm. h, r and y are activations of one dtype. */
pt_status backend_add_rmsnorm(pt_backend *be, pt_tensor *h, pt_tensor *y, pt_tensor *rstd, const pt_tensor *r,
                              const pt_tensor *w, float eps);
pt_status backend_rope(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, const int32_t *pos,
                       const float *inv_freq);
/* Partial rotary embedding (Phi-3's partial_rotary_factor): only the first rot_dim values of each
 * head rotate, x[h, i] with x[h, i + rot_dim/2] by pos * inv_freq[i] (rot_dim/2 frequencies), cos and
 * sin times mscale (LongRoPE's attention factor; 1: a rotation); the other head_dim - rot_dim values
 * pass unchanged. rot_dim == head_dim with mscale 1 is backend_rope. */
pt_status backend_rope_part(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                            const int32_t *pos, const float *inv_freq);
/* Ministral 3's query temperature (transformers' llama_4_scaling_beta): every value of row t times
 * 1 + beta ln(1 + floor(pos[t] / period)), period the original context; 1 below it. The map is diagonal,
 * so the backward pass applies the same op to dq. */
pt_status backend_pos_scale(pt_backend *be, pt_tensor *x, float beta, int period, const int32_t *pos);
pt_status backend_attention(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                            const pt_tensor *k, const pt_tensor *v, const pt_attention *desc);
pt_status backend_swiglu(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
/* gpt-oss's clamped SwiGLU (transformers' GptOssExperts._apply_gate): g = min(gate, limit), u = up clamped to
 * [-limit, limit], y = (u + 1) g sigmoid(alpha g). */
pt_status backend_swiglu_clamp(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                               float alpha);
pt_status backend_add(pt_backend *be, pt_tensor *y, const pt_tensor *x);
/* y = gelu_tanh(gate) * up (GeGLU, Gemma), gelu_tanh(g) = g/2 (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))). */
pt_status backend_geglu(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up);
/* y[r, :] += bias for every row r (bias f32 of y's width; Qwen2's q/k/v). The bias is frozen, so
 * the backward pass of this op is the identity on dy and needs no op. */
pt_status backend_add_bias(pt_backend *be, pt_tensor *y, const pt_tensor *bias);
/* DoRA, as PEFT computes it (peft/tuners/lora/dora.py), for a base weight w [N, K] (float or
 * quantized), adapters a [r, K] and b [N, r] (f32) and scaling s:
 * backend_dora_norm: wnorm[n] = ‖w[n,:] + s·(b·a)[n,:]‖ (f32 [N]; the sum of squares in double on
 * the CPU), the weight norm PEFT detaches;
 * backend_dora_scale: y[i,n] *= mag[n] / wnorm[n] (y activations [*, N]; the forward's output
 * scale, and in the backward the gradient through it);
 * backend_dora_mag_bwd: dmag[n] += Σ_i dy[i,n]·z[i,n] / wnorm[n] (z the unscaled output base+lora). */
pt_status backend_dora_norm(pt_backend *be, pt_tensor *wnorm, const pt_tensor *w, const pt_tensor *a,
                            const pt_tensor *b, float s);
pt_status backend_dora_scale(pt_backend *be, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm);
pt_status backend_dora_mag_bwd(pt_backend *be, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                               const pt_tensor *wnorm);
/* y = cap * tanh(x / cap) elementwise (Gemma 2's final logits); y may alias x. cap > 0. */
pt_status backend_softcap(pt_backend *be, pt_tensor *y, const pt_tensor *x, float cap);
/* Gated DeltaNet (pt_delta describes the pass; activations [rows, width], all of one dtype: f32 or the backend's
 * act dtype):
 * conv1d_silu: y = SiLU(depthwise causal conv of x [rows, C] with w [C, conv] f32), a row's window reaching
 *   back conv-1 rows within its sequence (and example); before the sequence start the window reads state
 *   [batch*(conv-1), C] (act dtype) when given, else zeros, and state then holds each sequence's last conv-1
 *   inputs (generation: the conv state kept between calls). transformers' causal_conv1d_fn / _update.
 * delta_gates: beta = sigmoid(b), g = -exp(a_log[h]) * softplus(a + dt_bias[h]) ([rows, v_heads]: b, a act,
 *   beta, g, a_log, dt_bias f32).
 * delta_rule: the gated delta rule over qkv [rows, 2 k_heads k_dim + v_heads v_dim] (q, k, v, after the conv):
 *   q and k L2-normalised (eps 1e-6), q times 1/sqrt(k_dim); per value head S_t = exp(g_t) S_{t-1} + k_t
 *   (beta_t (v_t - exp(g_t) S_{t-1}^T k_t))^T, o_t = S_t^T q_t, o [rows, v_heads v_dim]; S starts at zero, or
 *   from state [batch*v_heads*k_dim, v_dim] f32 when given, which then holds the final S (generation).
 *   Computed token by token (transformers' torch_recurrent_gated_delta_rule): generation's step.
 * delta_chunk: the same o (and state) computed PT_DELTA_CHUNK tokens at a time in the WY form (transformers'
 *   torch_chunk_gated_delta_rule; chunks start on multiples of PT_DELTA_CHUNK, a packed example starting inside one
 *   cuts it): training and prompts. Equal to delta_rule up to float rounding.
 * sigmoid_mul: y *= sigmoid(gate), same shapes (qwen35's gated attention output). */
pt_status backend_conv1d_silu(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                              const pt_delta *d);
pt_status backend_delta_gates(pt_backend *be, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                              const pt_tensor *a_log, const pt_tensor *dt_bias);
pt_status backend_delta_rule(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                             const pt_tensor *g, pt_tensor *state, const pt_delta *d);
pt_status backend_delta_chunk(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                              const pt_tensor *g, pt_tensor *state, const pt_delta *d);
pt_status backend_sigmoid_mul(pt_backend *be, pt_tensor *y, const pt_tensor *gate);
/* Their backward (training; no conv or recurrent state, every sequence starting empty):
 * conv1d_silu_bwd: dx = d(conv1d_silu)/dx applied to dy (the pre-activations recomputed from x; w frozen).
 * delta_gates_bwd: db, da (act dtype) from dbeta, dg (f32) and the forward's b and a (a_log, dt_bias frozen).
 * delta_rule_bwd: dqkv (act dtype, every column written), dbeta and dg (f32) from dout, the gradient at o; the state
 *   kept every PT_DELTA_CHUNK tokens and each chunk's recomputed from it: O(k_dim v_dim) per token and value head.
 * sigmoid_mul_bwd: with y the forward's output x sigmoid(gate): dx = dy sigmoid(gate), dgate = dy y (1 -
 *   sigmoid(gate)) (dx may alias dy). */
pt_status backend_conv1d_silu_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                                  const pt_tensor *w, const pt_delta *d);
pt_status backend_delta_gates_bwd(pt_backend *be, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                                  const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                                  const pt_tensor *dt_bias);
pt_status backend_delta_rule_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                                 const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta,
                                 const pt_tensor *g, const pt_delta *d);
/* The memory delta_rule_bwd takes for a pass d besides its tensors: the state kept every PT_DELTA_CHUNK tokens and
 * one chunk's states recomputed from it per sequence and value head, and the gradients at the normalised q and k
 * (f32), as the CUDA backend allocates them (the CPU backend's per-thread buffers are the same states or fewer). */
size_t backend_delta_rule_bwd_bytes(const pt_delta *d);
/* delta_chunk_bwd: delta_rule_bwd's results through the chunked form: per sequence and value head the state kept at
 *   each chunk's start (a forward pass over the chunks), then the chunks walked from the last, each re-solved from
 *   its start state and taken back through (gdn_chunk_bwd.c gives the sums). backend_delta_chunk_bwd_bytes: the
 *   memory it takes besides its tensors, as the CUDA backend allocates it (every sequence and head at once: the
 *   chunk start states, one chunk's buffers each, and the gradients at the normalised q and k). */
pt_status backend_delta_chunk_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg,
                                  const pt_tensor *dout, const pt_tensor *qkv, const pt_tensor *beta,
                                  const pt_tensor *g, const pt_delta *d);
size_t backend_delta_chunk_bwd_bytes(const pt_delta *d);
pt_status backend_sigmoid_mul_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                                  const pt_tensor *y, const pt_tensor *gate);

/* Backward ops (training). Gradients are f32 and overwrite their outputs unless said otherwise;
 * all take the tensors their forward took (and what it saved: rstd, lse, out). */
/* dx = d rmsnorm / dx applied to dy (dx may alias dy); dw, if not NULL, += sum over rows of
 * dy * x * rstd. rstd is what backend_rmsnorm saved. */
pt_status backend_rmsnorm_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy,
                              const pt_tensor *x, const pt_tensor *w, const pt_tensor *rstd);
/* The same with the residual branch's gradient added in the same pass: dx = d rmsnorm / dx applied
 * to dy + res (the backward of backend_add_rmsnorm; res like dx, not aliasing dy). */
pt_status backend_rmsnorm_bwd_add(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy,
                                  const pt_tensor *x, const pt_tensor *w, const pt_tensor *rstd,
                                  const pt_tensor *res);
/* dx = R(pos)^T dx in place: the gradient of backend_rope. */
pt_status backend_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, const int32_t *pos,
                           const float *inv_freq);
/* The gradient of backend_rope_part, in place. */
pt_status backend_rope_part_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, int rot_dim, float mscale,
                                const int32_t *pos, const float *inv_freq);
/* dq [like q], dk, dv [batch*n_kv rows of k's width] of out = attention(q, k, v) given dout; out
 * and lse are what backend_attention returned and saved (lse: batch*n_q*n_heads f32). Keys a
 * sequence's queries never see (beyond q_pos0 + n_q - 1, other segments) get zero gradient. */
pt_status backend_attention_bwd(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv,
                                const pt_tensor *dout, const pt_tensor *q, const pt_tensor *k,
                                const pt_tensor *v, const pt_tensor *out, const pt_tensor *lse,
                                const pt_attention *desc);
/* y = silu(gate) * up: dgate = dy * up * silu'(gate), dup = dy * silu(gate). The op is
 * elementwise, so either output may alias any input (e.g. dgate over dy, dup over up). */
pt_status backend_swiglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                             const pt_tensor *gate, const pt_tensor *up);
/* The same for y = gelu_tanh(gate) * up: dgate = dy * up * gelu_tanh'(gate), dup = dy * gelu_tanh(gate). */
pt_status backend_geglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                            const pt_tensor *gate, const pt_tensor *up);
/* dx = dy * (1 - (y / cap)^2), y being what backend_softcap returned; elementwise, so dx may
 * alias dy or y. */
pt_status backend_softcap_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *y, float cap);
/* Cross-entropy over a chunk of rows of logits [rows, vocab] with labels[rows] (PT_IGNORE_INDEX
 * rows are skipped): *loss_sum += sum over labelled rows of logsumexp(row) - row[label] (double),
 * *n_labelled += their count, and dlogits (NULL: loss only; may alias logits) = (softmax - onehot)
 * * grad_scale on labelled rows, 0 on ignored ones. For a mean over a global batch pass
 * grad_scale = 1 / (labelled tokens of the whole batch). softcap > 0 (Gemma 2's final soft-cap,
 * fused: no capped copy of the logits exists): the row is z = softcap * tanh(logits / softcap)
 * first, and dlogits the gradient with respect to the logits, (softmax(z) - onehot) * grad_scale *
 * (1 - (z / softcap)^2); the same numbers as backend_softcap, this op and backend_softcap_bwd. */
#define PT_IGNORE_INDEX (-100)
pt_status backend_cross_entropy(pt_backend *be, pt_tensor *dlogits, double *loss_sum, int64_t *n_labelled,
                                const pt_tensor *logits, const int32_t *labels, float grad_scale, float softcap);
/* One torch.optim.AdamW update of param (f32) from grad, with moments m and v (f32, zero before
 * step 1), in torch's order and fp32 arithmetic. */
pt_status backend_adamw_step(pt_backend *be, pt_tensor *param, const pt_tensor *grad, pt_tensor *m,
                             pt_tensor *v, const pt_adamw *hp);
/* *acc += sum of t's squares, in double (t f32). */
pt_status backend_sum_squares(pt_backend *be, const pt_tensor *t, double *acc);
/* t *= s (t f32). */
pt_status backend_scale(pt_backend *be, pt_tensor *t, float s);
/* y = x * keep / (1 - p), keep[i] a Bernoulli(1 - p) draw that depends only on (seed, i): the
 * same seed on the gradient applies the same mask, which is the backward pass. y may alias x. */
pt_status backend_dropout(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed);
/* torch.nn.utils.clip_grad_norm_ over n gradients: total = sqrt(sum of squares); when
 * max_norm / (total + 1e-6) < 1 every gradient is multiplied by it. *total_norm (may be NULL)
 * gets the norm before clipping. */
pt_status backend_clip_grad_norm(pt_backend *be, pt_tensor *grads, int n, double max_norm,
                                 double *total_norm);
/* Mixture of experts (moe.c; Qwen3-MoE's router and experts as transformers computes them).
 * backend_moe_route: for each row t of logits [rows, n_experts] (activations), p = softmax(row) in
 * fp32 over all experts, then the k largest p (ties to the lower expert) as expert[t*k + s] (host
 * int32, largest first) and weight[t*k + s] (host f32): p itself, or p / (sum of the k) with norm.
 * backend_moe_gather: xs[i] = x[token[i]] (token: host, one per row of xs).
 * backend_moe_matmul: the grouped expert product over rows sorted by expert: rows [offset[e],
 * offset[e+1]) of y = those rows of x times w[e * stride]ᵀ (w: n_experts weights of one role, stride
 * apart; offset host, n_experts + 1 values); experts with no rows are skipped, so no work is done for
 * an expert no token chose, and the rows are taken in one fixed order.
 * backend_moe_combine: y[t] += sum over s < k of weight[t*k + s] * ys[row[t*k + s]], summed in fp32 in
 * s order (the caller orders each token's k by expert, as transformers' index_add_ adds them), then
 * added to y (the residual). */
pt_status backend_moe_route(pt_backend *be, int32_t *expert, float *weight, const pt_tensor *logits, int k, bool norm);
pt_status backend_moe_gather(pt_backend *be, pt_tensor *xs, const pt_tensor *x, const int32_t *token);
pt_status backend_moe_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int stride,
                             const int64_t *offset, int n_experts);
/* The same plus beta times y (backend_moe_matmul is beta 0). */
pt_status backend_moe_matmul_beta(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int stride,
                                  const int64_t *offset, int n_experts, float beta);
/* The grouped weight gradients: dw[e] = dy[rows of e]ᵀ x[rows of e] + beta dw[e] for each expert e with rows (dw: one
 * fp32 [N, K] tensor per expert; experts without rows are left as they are). */
pt_status backend_moe_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                        const int64_t *offset, int n_experts, float beta);
pt_status backend_moe_combine(pt_backend *be, pt_tensor *y, const pt_tensor *ys, const int32_t *row,
                              const float *weight, int k);
/* Their gradients (the router and experts frozen). backend_moe_combine_bwd: dys[row[t*k + s]] =
 * weight[t*k + s] * dy[t] and dw[t*k + s] (f32 [rows, k]) = dy[t] · ys[row[t*k + s]] (the dot in double);
 * dys may alias ys (each sorted row belongs to one pair, read before it is written).
 * backend_moe_route_bwd: dlogits (activations, may alias logits) = the gradient of the routing weights'
 * dw (f32 [rows, k], for expert[t*k + s], host) through the renormalisation (norm) and the softmax, p
 * recomputed from logits: dp_e = dw_s (norm: (dw_s - Σ_j dw_j w_j) / Σ_S p), dz = p (dp - Σ p dp).
 * backend_moe_matmul_bwd_input: dx rows of each expert (+ beta dx) = dy rows times w[e * stride], as
 * backend_moe_matmul groups them. */
pt_status backend_moe_combine_bwd(pt_backend *be, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy,
                                  const pt_tensor *ys, const int32_t *row, const float *weight, int k);
pt_status backend_moe_route_bwd(pt_backend *be, pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *dw,
                                const int32_t *expert, int k, bool norm);
pt_status backend_moe_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                                       int stride, const int64_t *offset, int n_experts, float beta);
/* A view of rows [r0, r0+rows) of a 2-d tensor (no copy). */
pt_tensor tensor_rows(const pt_tensor *t, int64_t r0, int64_t rows);

/* Shape checks shared by every backend's matmul: returns M, N, K through the pointers. */
pt_status matmul_shapes(const pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int64_t *m,
                        int64_t *n, int64_t *k);

/* Backend constructors (cpu/backend_cpu.c, cuda/backend_cuda.cu). */
pt_status cpu_backend_open(const pt_backend_options *opts, pt_backend **out);
#ifdef PTRAIN_HAVE_CUDA
pt_status cuda_backend_open(const pt_backend_options *opts, pt_backend **out);
int cuda_device_count(void); /* 0 when no GPU or driver is visible */
/* The most bytes the CUDA backend's memory pool has handed out since it opened; free and total
 * device memory now. */
size_t cuda_peak_bytes(pt_backend *be);
pt_status cuda_mem_info(pt_backend *be, size_t *free_bytes, size_t *total_bytes);
#endif
/* The CUDA backend's fixed GEMM buffers, which the memory plan (src/train/memplan.c) counts: the
 * workspace cuBLASLt and cuBLAS share, allocated at open, and the most bf16 values of a quantized
 * weight dequantized at once (a tile of whole rows; cuda/matmul.cu). */
enum { PT_CUDA_GEMM_WORKSPACE_BYTES = 32 << 20, PT_CUDA_TILE_ELEMS = 16 << 20 };

#ifdef __cplusplus
}
#endif
#endif
