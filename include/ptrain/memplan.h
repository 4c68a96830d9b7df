/* memplan.h — the memory a training run will take on one rank, by part, printed at start and, on
 * a GPU, checked against the device's free memory so that a run that cannot fit stops with the
 * numbers instead of failing inside the first step. */
#ifndef PTRAIN_MEMPLAN_H
#define PTRAIN_MEMPLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/backend.h"
#include "ptrain/model.h"
#include "ptrain/step.h"

typedef struct {
    size_t weights;     /* the base as stored (4-bit blocks stay 4-bit) */
    size_t adapters;    /* LoRA A and B, their gradients and AdamW's two moments: 16 bytes a parameter */
    size_t activations; /* the arena of one micro-batch's buffers (forward, loss head, backward) */
    size_t workspace;   /* the CUDA backend's: the GEMMs' bf16 scratch and the cuBLASLt/cuBLAS workspace, and
                           the weight cache */
    size_t weight_cache; /* of it: one layer's projections in bf16, kept for the backward pass of a
                            recomputed layer (CUDA with checkpointing: backend_weight_cache) */
    size_t offloaded;   /* in pinned host memory, not on the device: the offloaded layer inputs */
    size_t states;      /* qwen35: the Gated DeltaNet backward's recurrent states (kept every chunk of 64 tokens and
                           one chunk recomputed) and q/k gradients, one layer at a time (backend_delta_rule_bwd_bytes) */
    size_t total;
} pt_memplan;

typedef struct {
    int64_t batch, seq;   /* rows of one micro-batch: batch x seq */
    int64_t eval_rows;    /* rows of the largest evaluation batch, 0 without evaluation */
    int64_t lora_params;
    int lora_r;
    size_t arena_bytes;   /* the activation arena (step_arena_bytes) */
    size_t offload_bytes; /* the layer inputs offloaded to host memory (step_offload_bytes), or 0 */
    int loss_chunk;       /* logit rows per loss chunk */
    bool cuda;            /* the GEMMs' scratch and workspace */
    bool checkpointing;   /* with cuda: the weight cache */
    size_t states_bytes;  /* the Gated DeltaNet backward's states (pt_memplan.states), 0 without such layers */
} pt_memplan_shape;

void memplan_compute(const pt_model_config *g, size_t weight_bytes, const pt_memplan_shape *s, pt_memplan *out);

/* A training run, as far as its memory goes. */
typedef struct {
    int64_t batch, seq;   /* the micro-batch: per_device_train_batch_size x max_seq_length */
    int64_t eval_rows;    /* rows of the largest evaluation batch; 0: no evaluation */
    size_t weight_bytes;  /* the base as loaded */
    int64_t lora_params;  /* adapter_param_count (or adapter_param_count_for) */
    bool cuda;            /* the CUDA backend: the GEMMs' scratch and workspace */
} pt_memplan_run;

/* The plan the trainer prints and checks: the arena from a dry run of step_run's buffers with so
 * (step_arena_bytes, and step_loss_arena_bytes for evaluation), the offloaded layer inputs
 * (step_offload_bytes), memplan_compute. It reads m's config and ad's r and targets only, never a
 * tensor of either: a model without weights and an adapter without tensors give the plan of the
 * real run (`ptrain inspect` prints it before anything is loaded). */
void memplan_of_run(const pt_model *m, const pt_adapter *ad, const step_options *so, const pt_memplan_run *r,
                    pt_memplan *out);
/* One line: "memory plan: N bytes (weights ..., adapters + optimizer ..., activations ..., workspace ...)",
 * one for the Gated DeltaNet's recurrent states when the model has such layers (in N), and one for the host memory
 * of offloaded layer inputs when there are any. */
void memplan_print(const pt_memplan *p, const char *device);
/* On a GPU: fails with PT_ERR_USER and the numbers when what the plan still has to allocate (all but
 * the weights, already loaded, and the GEMM workspace the backend took at open) exceeds the
 * device's free memory. Elsewhere PT_OK. */
pt_status memplan_check(pt_backend *be, const pt_memplan *p);
/* The most device memory the backend has handed out, 0 where it does not track it (CPU). */
size_t memplan_peak_bytes(pt_backend *be);

#endif
