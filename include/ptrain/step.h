/* step.h — one micro-batch of LoRA training: the forward pass (forward.h) keeping the activations
 * backward needs (or only each layer's input, with gradient checkpointing), the chunked
 * cross-entropy over the vocabulary, and the backward pass that writes the LoRA gradients. The base
 * weights are frozen: gradients flow through them (input gradients only). Every buffer comes from
 * one arena, which training allocates once per run (step_arena_bytes sizes it). */
#ifndef PTRAIN_STEP_H
#define PTRAIN_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/arena.h"
#include "ptrain/lora.h"
#include "ptrain/model.h"
#include "ptrain/settings.h"

typedef struct {
    int batch, seq;           /* B sequences of T tokens */
    const int32_t *ids;       /* [B*T] */
    const int32_t *targets;   /* [B*T]: the token row t must predict (already shifted), -100: none */
    const int32_t *pos;       /* [B*T] rotary positions (restart per packed example) */
    const int32_t *segments;  /* [B*T] packed-example ids, or NULL */
} train_batch;

typedef struct {
    bool checkpointing;    /* keep only layer inputs; recompute each layer in backward */
    int keep_layers;       /* with checkpointing: the last keep_layers layers keep their activations (not recomputed) */
    bool offload;          /* with checkpointing: the layer inputs in host memory, copied out in the
                              forward pass and back in the backward pass while the backend computes
                              (use_gradient_checkpointing: "unsloth" on a GPU); the device holds two */
    void *offload_host;    /* n_layers x rows x dim activations of backend_host_alloc; NULL: made for this call */
    int loss_chunk;        /* rows of logits alive at once (0: 256) */
    bool full_lm_head;     /* logits on every row, labelled or not: the plain computation the
                              default (only rows whose target counts) is tested against */
    float lora_dropout;    /* dropout on the adapters' input (PEFT's lora_dropout) */
    uint64_t dropout_seed; /* change it every micro-batch; masks are recomputed from it */
    float neftune_alpha;   /* NEFTune: noise of alpha / sqrt(seq * dim) on the embeddings; 0: none */
    uint64_t noise_seed;   /* its numbers: change it every micro-batch */
    /* Called as soon as layer `layer`'s LoRA gradients are written (last layer first), so the
     * caller can accumulate and start reducing them while the earlier layers run; may be NULL. */
    pt_status (*layer_done)(void *arg, int layer);
    void *layer_done_arg;
    pt_arena *arena;       /* the run's activation arena; NULL: one made for this call */
    pt_dtype act;          /* the activation dtype the memory plan counts (the backend's act; from
                              step_options_for: bf16 on a GPU, its fast path) */
    /* Preference methods (method.h): row_seq[r] the sequence (0-based) batch row r belongs to, n_seq
     * sequences. The loss head then runs twice: first without a gradient, handing each sequence's
     * summed token loss (-log p of its labelled tokens) to seq_grad, which writes each sequence's
     * gradient scale, d L / d(-log p) (the step's grad_scale is not used); then with those scales,
     * and the backward pass follows. NULL: the token loss, one scale. */
    const int32_t *row_seq;
    int n_seq;
    pt_status (*seq_grad)(void *arg, const double *nll, float *scale);
    void *seq_grad_arg;
    double *seq_entropy; /* with row_seq: each sequence's summed entropy of its labelled rows' next-token
                            distributions, from the first pass, added here (GRPO's metric); NULL: none */
    /* Reward modelling (a sequence-classification head of one label, transformers' `score`): with
     * score_w set, no LM head runs; sequence i's score is score_w · the final-normed hidden state of
     * batch row score_row[i] (its last token that is not the pad token), for i < n_seq, handed to
     * seq_grad in place of the summed token losses, which writes d L / d score; the hidden states'
     * gradient is then scale[i] score_w on those rows, and scale[i] times row score_row[i]'s hidden
     * state is added to score_grad[dim] (host, fp32). row_seq is not used. */
    const float *score_w;
    const int32_t *score_row;
    float *score_grad;
    /* modules_to_save (saved_modules.h): the gradients of the model's embedding table and LM head
     * (f32 [vocab, dim], those tensors being trained copies), added to by every micro-batch; NULL:
     * frozen. */
    pt_tensor *embed_grad, *head_grad;
    /* a mixture of experts' aux load-balancing loss (transformers' load_balancing_loss_func, output_router_logits):
     * coef times it added to the loss (its gradient through the routers' softmax); 0: none. aux_loss (may be
     * NULL) receives the value of this micro-batch (without coef), aux_mask (may be NULL: every row) the rows
     * it counts (transformers' attention_mask, 0 on padding) */
    float router_aux_coef;
    double *aux_loss;
    const uint8_t *aux_mask;
} step_options;

/* The options a run's settings give (no hooks, no arena): checkpointing unless `false`, and with
 * "unsloth" on a GPU the layer inputs offloaded to host memory (on the CPU they are there already);
 * the loss head over 256 rows of logits at a time; bf16 activations on a GPU (its fast path). */
step_options step_options_for(pt_checkpointing ck, bool on_gpu, float lora_dropout);

/* Forward + backward of one micro-batch: adds the summed token loss to *loss_sum and the number
 * of predicted tokens to *n_tokens, and writes this micro-batch's grad_scale-weighted LoRA
 * gradients (overwriting the previous ones: accumulating is the caller's, see train.c). */
pt_status step_run(pt_model *m, pt_lora *l, const train_batch *b, const step_options *o, float grad_scale,
                   double *loss_sum, int64_t *n_tokens);
/* The loss only (no gradients), for evaluation and checks: the model with adapter ad (may be
 * NULL), buffers from arena (NULL: one made for this call). */
pt_status step_loss(const pt_model *m, const pt_adapter *ad, const train_batch *b, pt_arena *arena, double *loss_sum,
                    int64_t *n_tokens);
/* The arena bytes step_run (with o's checkpointing, offloading, dropout and chunk) and step_loss
 * need for rows rows, when every row is labelled (the most); the host bytes offloading takes. */
/* Each sequence's summed token loss (-log p of its labelled tokens, row r in sequence row_seq[r])
 * under the model with adapter ad (NULL: the base alone, the preference methods' reference), into
 * nll[0..n_seq) (overwritten); no gradient. */
pt_status step_sequence_nll(const pt_model *m, const pt_adapter *ad, const train_batch *b, const int32_t *row_seq,
                            int n_seq, pt_arena *arena, double *nll);
/* The reward model's forward without a gradient: the scores score[0..n) of the sequences whose last
 * token is row score_row[i] (score_w · the final-normed hidden state, as step_options' score head),
 * the model with adapter ad; buffers from arena (NULL: one made for this call). */
pt_status step_scores(const pt_model *m, const pt_adapter *ad, const train_batch *b, const float *score_w,
                      const int32_t *score_row, int n, pt_arena *arena, double *score);
/* The same, and each sequence's summed entropy of its labelled rows' next-token distributions into
 * ent[0..n_seq) (overwritten; GRPO's evaluation). */
pt_status step_sequence_nll_entropy(const pt_model *m, const pt_adapter *ad, const train_batch *b,
                                    const int32_t *row_seq, int n_seq, pt_arena *arena, double *nll, double *ent);
size_t step_arena_bytes(const pt_model *m, const pt_adapter *ad, int64_t rows, const step_options *o);
size_t step_loss_arena_bytes(const pt_model *m, const pt_adapter *ad, int64_t rows, pt_dtype act);
size_t step_offload_bytes(const pt_model *m, int64_t rows, pt_dtype act);

#endif
