/* forward.h — the one forward pass of the llama, qwen2 and gemma2 families over backend ops, used
 * by generation (with a key/value cache), evaluation and training (keeping what the backward pass
 * reads, or recomputing it):
 *   x = embed(ids) (* sqrt(dim): gemma2);
 *   per layer: a = o(attn(rope(q(n1 x) + bq), rope(k(n1 x) + bk), v(n1 x) + bv))   (biases: qwen2)
 *              (qwen3: rope(nq(q(n1 x))), rope(nk(k(n1 x))), nq and nk RMSNorms of each head)
 *              h = x + a, or x + n3(a) with gemma2's post-attention norm;
 *              m = down(act(gate(n2 h)) * up(n2 h))   (act: silu, or tanh-gelu for gemma2)
 *              out = h + m, or h + n4(m);
 *   logits = lm_head(norm(x)), soft-capped (gemma2).
 * Every projection goes through adapter_matmul when an adapter is given (adapter.h): the one place
 * a base product gets its LoRA. Buffers come from an arena (arena.h); a pass takes them first
 * (forward_take, loss_take: also in measuring mode, to size the arena), then computes. */
#ifndef PTRAIN_FORWARD_H
#define PTRAIN_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/adapter.h"
#include "ptrain/arena.h"
#include "ptrain/model.h"

/* What one layer's forward writes, and what the backward pass reads: the normed inputs, q, k and
 * v (after RoPE), the attention output and its log-sum-exp, the residual after attention, gate,
 * up and their product, the norms' rstds, with post-norms the o and down outputs before their
 * norms, and each adapted projection's s·x·Aᵀ. With a KV cache, k and v live in the cache. */
enum { A_XN1, A_Q, A_K, A_V, A_ATT, A_H, A_XN2, A_GATE, A_UP, A_ACT, A_RSTD1, A_RSTD2, A_LSE,
       A_O, A_D, A_RSTD3, A_RSTD4, /* post-norms only: o and down outputs, their norms' rstd */
       A_QPRE, A_KPRE, A_QRSTD, A_KRSTD, /* q/k norms only: q and k before their per-head norm, its rstd */
       A_VPRE, A_VRSTD, /* gemma4's value norm: v before it (without k_eq_v), its rstd */
       A_H2, A_PLG, A_PLA, A_PLP, A_RSTD5, /* gemma4's per-layer input: the stream after the MLP, the gate's output,
                                           * gelu(gate) times the input, the projection, its norm's rstd */
       A_QGATE, /* qwen35's full layers: the output gate (W_Q_GATE x) */
       /* qwen35's Gated DeltaNet layers: in_proj_qkv's output before and after the conv, z, b and a, beta and g
        * (f32), the delta rule's output, the norm's output, its rstd */
       A_LQKV, A_LCONV, A_LZ, A_LB, A_LA, A_LBETA, A_LG, A_LO, A_LN, A_LRSTD,
       A_ATTG, A_LY, /* qwen35: the gated attention output and the gated norm's (o_proj's and out_proj's inputs; A_ATT
                      * and A_LO keep what the backward pass reads before them) */
       A_COUNT };

/* A sparse layer's routing and expert rows (moe.c): the router logits [rows, n_experts], and over
 * the rows·k (token, expert) pairs sorted by expert (then by token): the gathered inputs, gate, up,
 * their SwiGLU and the experts' outputs. The host arrays say who went where. */
/* M_DW: f32 [rows, k], the backward's; M_LGU, M_LDN: [rows·k, r] s·x Aₑᵀ of the experts' LoRA pairs (PEFT's
 * target_parameters: gate_up_proj's on M_XS, down_proj's on M_ACT), 0 rows without them; M_AUX [rows, E]: the
 * aux loss's gradient at the router logits (0 rows without it); M_LRT [rows, r]: s·xn Aᵀ of the router's LoRA pair
 * (target_parameters mlp.gate.weight; 0 rows without it) */
enum { M_LOGITS, M_XS, M_GATE, M_UP, M_ACT, M_YS, M_DW, M_LGU, M_LDN, M_AUX, M_LRT, M_COUNT };
typedef struct {
    pt_tensor t[M_COUNT];
    int32_t *expert; /* [rows·k] token t's experts, ascending (transformers' order of adding them) */
    float *weight;   /* [rows·k] their routing weights, in the same order */
    int32_t *token;  /* [rows·k] the token of each sorted row */
    int32_t *row;    /* [rows·k] the sorted row of token t's s-th expert */
    int64_t *offset; /* [n_experts + 1] each expert's first sorted row */
    float *ones;     /* [rows·k] 1s: the gather's backward sums each token's k rows with them */
} moe_acts;

typedef struct {
    pt_tensor t[A_COUNT];
    pt_tensor xs[W_COUNT]; /* s · x Aᵀ per adapted projection, [rows, r] */
    moe_acts moe;          /* models with experts only */
} layer_acts;

typedef struct {
    int max_seq, n_past;
    pt_tensor *k, *v; /* per layer [batch * max_seq, n_kv_heads*head_dim]: sequence b's rows from b max_seq */
    int batch;        /* sequences decoded in step (kv_cache_init_batch); 0 or 1: one */
    /* qwen35's Gated DeltaNet layers (no k, v there): per layer the conv state [batch*(conv-1), conv channels]
     * (act dtype) and the recurrent state [batch*v_heads*k_dim, v_dim] (f32), zero at the start */
    pt_tensor *conv, *state;
} pt_kv_cache;

/* One pass over `rows` rows (batch sequences of n_q tokens). */
typedef struct {
    const pt_model *m;
    const pt_adapter *ad;    /* NULL: the base model alone */
    int64_t rows;
    const int32_t *pos;      /* [rows] rotary positions */
    pt_attention attn;       /* batch, n_q, n_kv, q_pos0, segments; the layer's own settings are added */
    pt_kv_cache *kv;         /* generation: new keys and values go to the cache rows at n_past */
    float dropout;           /* training: dropout on the adapters' input (PEFT's lora_dropout); 0: none */
    uint64_t seed;           /* its masks: the same for a layer and projection every time */
    pt_tensor scratch;       /* [rows, widest projection input]: the dropped-out input */
    pt_tensor ple_in;        /* gemma4: the layers' per-layer inputs, layer l's [rows, ple] from row l * rows */
    pt_tensor ple_tmp, ple_rstd; /* and what computing them needs: [rows, ple], [rows, 1] f32 */
    pt_tensor shared_k[2], shared_v[2]; /* gemma4 without a cache: the keys and values the KV-shared layers reuse
                                         * (global [0], sliding [1]) */
    float noise_mag;         /* training with NEFTune: uniform(-mag, mag) noise on the embeddings; 0: none */
    uint64_t noise_seed;     /* its numbers: a function of the seed and the element alone */
    struct moe_aux *aux;     /* training a mixture of experts with the aux loss (moe_aux.c); NULL: none */
} fwd_ctx;

/* transformers' load_balancing_loss_func over one pass (output_router_logits): each sparse layer's router adds
 * its rows' top-k choices and softmax probabilities (rows whose mask is 0 left out); aux = E Σₑ (countₑ / total)
 * (probₑ / total), total the counted rows summed over the layers. */
typedef struct moe_aux {
    float coef;          /* router_aux_loss_coef: the backward pass adds coef times aux's gradient */
    const uint8_t *mask; /* [rows] 1: the row counts (the attention mask); NULL: every row */
    int n_experts;
    double total;        /* counted rows, summed over the sparse layers */
    double *count, *prob; /* [n_experts] (moe_aux_open) */
    bool frozen;         /* the forward pass is over: a recomputation (checkpointing) adds nothing */
} moe_aux;

/* The residual stream and the layers' activations of a pass. */
typedef struct {
    pt_tensor *x;       /* [n_x] of [rows, dim]: every layer's input kept (n_layers + 1), or 2 in turn */
    int n_x;
    layer_acts *acts;   /* [n_acts]: each layer's own (n_layers), or one for all */
    int n_acts;
} fwd_bufs;

/* A pass over rows rows of a batch (batch sequences of seq tokens from position 0, segments may be
 * NULL) of model m with adapter ad (may be NULL). */
fwd_ctx forward_ctx(const pt_model *m, const pt_adapter *ad, int batch, int seq, const int32_t *pos,
                    const int32_t *segments);
/* Take b's buffers from the arena: keep_inputs: every layer's input (else 2 in turn), keep_acts:
 * every layer's activations (else one set); dropout: the scratch of the dropped-out input. */
pt_status forward_take(pt_arena *arena, fwd_ctx *c, bool keep_inputs, bool keep_acts, fwd_bufs *b);
/* The same with sets activation sets (1 to n_layers): the last sets - 1 layers have their own, the others share one
 * (gradient checkpointing that keeps the last layers). */
pt_status forward_take_sets(pt_arena *arena, fwd_ctx *c, bool keep_inputs, int sets, fwd_bufs *b);
/* The activation set of layer `layer` in b (of a model of n_layers): its own, or 0, the shared one. */
int forward_acts_index(const fwd_bufs *b, int n_layers, int layer);
/* The host arrays of b (its buffers are the arena's). */
void forward_bufs_free(fwd_bufs *b);
/* Called before each layer of forward_run (may be NULL): when its input is ready and before it runs
 * (training's offloading of the layer inputs to host memory, step.c). */
typedef struct {
    pt_status (*before)(void *arg, int layer);
    void *arg;
} fwd_hooks;
/* Embedding, then every layer: the last hidden states are forward_output(c, b). */
pt_status forward_run(const fwd_ctx *c, const int32_t *ids, fwd_bufs *b, const fwd_hooks *h);
pt_tensor *forward_output(const fwd_ctx *c, fwd_bufs *b);
/* out = layer(x), filling a (what the backward pass of that layer reads). */
pt_status forward_layer(const fwd_ctx *c, int layer, const pt_tensor *x, pt_tensor *out, layer_acts *a);
/* moe.c: a's buffers for a pass of c (nothing for a model without experts); the host arrays are freed by
 * forward_moe_free. */
pt_status forward_moe_take(pt_arena *arena, const fwd_ctx *c, moe_acts *a);
void forward_moe_free(moe_acts *a);
/* out += the mixture of experts of sparse layer `layer` applied to xn (the normed residual): the router,
 * top-k, the experts over their sorted rows, the weighted sum (a keeps what the backward pass reads). */
pt_status forward_moe(const fwd_ctx *c, int layer, const pt_tensor *xn, pt_tensor *out, moe_acts *a);
/* moe_aux.c: aux for a model of n_experts (zero sums), and its host arrays freed. */
pt_status moe_aux_open(moe_aux *aux, int n_experts, float coef, const uint8_t *mask);
void moe_aux_close(moe_aux *aux);
/* A sparse layer's router logits [rows, E] (any activation dtype) and its choices expert[rows·k] added. */
pt_status moe_aux_add(moe_aux *aux, pt_backend *be, const pt_tensor *logits, const int32_t *expert, int k);
/* The aux loss of what was added (0 before any layer). */
double moe_aux_value(const moe_aux *aux);
/* grad ([rows, E], f32 or bf16) = coef · d aux / d logits of this layer (logits: its router logits). */
pt_status moe_aux_backward(const moe_aux *aux, pt_backend *be, const pt_tensor *logits, pt_tensor *grad);
/* moe_lora.c: LoRA on the experts (PEFT's target_parameters), over the rows sorted by expert (offset[e] the
 * first row of expert e of n): pair p holds A [E·r, in] and B [E·out, r]. forward_experts_lora: for each expert,
 * xs rows = s·x Aₑᵀ ([n, r], what the backward reads) and y0 rows += xs B₀ₑᵀ, y1 rows += xs B₁ₑᵀ, where B₀ₑ are
 * the first split rows of Bₑ and B₁ₑ the rest (y1 NULL: split is out, one product). */
pt_status forward_experts_lora(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                               const pt_tensor *x, pt_tensor *xs, pt_tensor *y0, pt_tensor *y1, int64_t split);
/* Its gradients from dy0, dy1 (the gradients at y0, y1; dy1 NULL as y1): grad_b (B's shape) from xs, then xs
 * becomes t = s·(dy B) per row, and grad_a (A's shape) = tᵀ x per expert (an expert without rows: zeros). */
pt_status backward_experts_lora_weights(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                                        const pt_tensor *dy0, const pt_tensor *dy1, int64_t split, pt_tensor *xs,
                                        const pt_tensor *x, pt_tensor *grad_a, pt_tensor *grad_b);
/* dx rows += t Aₑ per expert (t: what backward_experts_lora_weights left in xs). */
pt_status backward_experts_lora_input(pt_backend *be, const adapter_pair *p, const int64_t *offset, int n_exp,
                                      const pt_tensor *t, pt_tensor *dx);
/* NEFTune (transformers' neftune_post_forward_hook): x += uniform(-mag, mag) noise, element i's
 * number drawn from (seed, i) alone (so a recomputation or a resumed run draws the same); buf: a
 * tensor of x's shape and dtype to stage it in. */
pt_status forward_embed_noise(pt_backend *be, pt_tensor *x, pt_tensor *buf, float mag, uint64_t seed);
/* y = x * mask / (1 - p) with the pass's dropout mask of layer's projection w, the same every time
 * (y may alias x): the adapters' input, and in the backward pass the gradient through it. */
pt_status forward_dropout(const fwd_ctx *c, int layer, int w, pt_tensor *y, const pt_tensor *x);
/* The adapters' input of projection w: x itself, or x with the pass's dropout, in c->scratch. */
pt_status forward_adapter_input(const fwd_ctx *c, int layer, int w, const pt_tensor *x, pt_tensor *out);
/* t [rows, heads * head_dim] seen as [rows * heads, head_dim] (no copy): the rows the q/k norms
 * normalize. */
pt_tensor forward_head_rows(const pt_tensor *t, int head_dim);

/* ---- the loss head: final norm, lm_head (and soft-cap), cross-entropy ---- */

enum { H_XF, H_RSTD, H_XL, H_DXL, H_DXF, H_LOGITS, H_COUNT };
typedef struct {
    pt_tensor t[H_COUNT];
    int64_t *start, *len; /* the labelled rows, as runs of consecutive rows */
    int64_t n_runs, labelled;
    int32_t *targets;     /* [labelled] */
    int chunk;
    bool grad;
    /* Per-sequence sums (preference methods; loss_by_sequence): seq[i] the sequence (0-based) of
     * labelled row i; each sequence's summed token loss (-log p of its labelled tokens) is added to
     * seq_nll[s], and with a gradient its tokens' losses are scaled by seq_scale[s] instead of
     * grad_scale. NULL: one sum, one scale. */
    int32_t *seq;
    double *seq_nll;
    const float *seq_scale;
    double *seq_ent;      /* with seq: each sequence's summed entropy of its rows' distributions (the
                             logits after the soft-cap) is added to seq_ent[s] (GRPO's metric); NULL: none */
    pt_tensor *head_grad; /* with a gradient: d loss / d lm_head weight (f32 [vocab, dim]) is added here; NULL: none */
} loss_bufs;

/* Find the rows whose target counts (all rows with all_rows), then take the head's buffers: `chunk`
 * rows of logits alive at once; grad: also the gradient with respect to the hidden states. */
pt_status loss_take(pt_arena *arena, const fwd_ctx *c, const int32_t *targets, bool all_rows, int chunk, bool grad,
                    loss_bufs *h);
/* The loss head's buffers for `labelled` labelled rows (loss_take's, for sizing). */
pt_status loss_take_rows(pt_arena *arena, const fwd_ctx *c, int64_t labelled, int chunk, bool grad, loss_bufs *h);
/* Cross-entropy over the labelled rows of the last hidden states hid: adds the summed token loss to
 * *loss_sum and the rows to *n_tokens; with h->grad, dh = d(grad_scale · loss)/d hid. Only labelled
 * rows reach the lm_head: an unlabelled row's logits change neither the loss nor any gradient. */
pt_status forward_loss(const fwd_ctx *c, loss_bufs *h, const pt_tensor *hid, pt_tensor *dh, float grad_scale,
                       double *loss_sum, int64_t *n_tokens);
void loss_free(loss_bufs *h);
/* After loss_take: sum per sequence, row r of the batch being in sequence row_seq[r] (>= 0 on every
 * labelled row), into nll[0..) (added to); scale: with a gradient, each sequence's scale (may be
 * set later, before forward_loss). */
pt_status loss_by_sequence(loss_bufs *h, const int32_t *row_seq, double *nll, const float *scale);

/* ---- generation ---- */

pt_status kv_cache_init(const pt_model *m, int max_seq, pt_kv_cache *kv);
void kv_cache_free(const pt_model *m, pt_kv_cache *kv);
/* A cache of batch sequences decoded in step (all at the same position), zeroed. */
pt_status kv_cache_init_batch(const pt_model *m, int batch, int max_seq, pt_kv_cache *kv);
/* Batched generation: n new tokens of each of kv->batch sequences (ids [batch * n], sequence by
 * sequence) at positions n_past .. n_past+n-1, their keys and values into each sequence's rows,
 * and each sequence's last token's logits into logits [batch, vocab] (host memory). */
pt_status forward_tokens_batch(const pt_model *m, const pt_adapter *ad, pt_kv_cache *kv, const int32_t *ids, int n,
                               float *logits);
/* The same n tokens (ids [n]) for every sequence of the batch cache: run once, their keys and values
 * copied to each sequence's rows; the last token's logits in every row of logits [batch, vocab]. */
pt_status forward_tokens_shared(const pt_model *m, const pt_adapter *ad, pt_kv_cache *kv, const int32_t *ids, int n,
                                float *logits);
/* Run n tokens at positions kv->n_past .. n_past+n-1 through m with adapter ad (may be NULL),
 * append their keys/values to the cache and write logits (host memory): [n, vocab], or [1, vocab]
 * for the last token when last_only. */
pt_status forward_tokens(const pt_model *m, const pt_adapter *ad, pt_kv_cache *kv, const int32_t *ids, int n,
                         float *logits, bool last_only);

#endif
