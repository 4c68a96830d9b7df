/* export_internal.h — what the exporters share: a LoRA delta s·B·A
 * produced a few rows at a time (so a merge never holds a full-precision weight), and the slot a
 * tensor name belongs to. */
#ifndef PTRAIN_EXPORT_INTERNAL_H
#define PTRAIN_EXPORT_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ptrain/adapter.h"
#include "ptrain/gguf_methods.h"


/* Rows of float32 the exporters convert at once: bounds their working memory (16 MiB). */
#define EXPORT_CHUNK_FLOATS ((int64_t)4 << 20)

typedef struct {
    float *a, *b; /* host copies: A [r, in], B [out, r] */
    float *mag;   /* DoRA: the magnitudes [out] (a copy), or NULL */
    int64_t r, in, out;
    float scale;
    int permute; /* llama.cpp's interleaved q/k row order for this many heads; 0: HF order */
    /* experts (target_parameters): A [E·r, in], B [E·out, r] (out: one expert's rows); row g of the tensor merged is
     * expert e0 + g / per_exp's row b_off + g % per_exp of its B block. n_exp 0: a plain pair */
    int n_exp, e0;
    int64_t per_exp, b_off;
} merge_delta;

/* Where a tensor of an expert layer sits among the adapter's slots: its layer, its slot (W_EXP_GATE_UP, W_EXP_DOWN or
 * W_ROUTER) and, for the experts, the rows it holds (e0 the first expert, per_exp rows each, from row b_off of each
 * expert's B block; e0 -1: every expert). */
typedef struct {
    int layer, slot, e0;
    int64_t per_exp, b_off;
} merge_expert_place;
/* The place of the tensor named `name` (Hugging Face's: model.layers.L.<block>.experts.E.<gate|up|down name>.weight,
 * the fused mlp.experts.gate_up_proj / down_proj, the router <block>.gate.weight; or llama.cpp's:
 * blk.L.ffn_{gate,up,down}_exps.weight, blk.L.ffn_gate_inp.weight) on a sparse layer of cfg; false for others. */
bool merge_expert_place_of(const pt_model_config *cfg, const char *name, merge_expert_place *at);
/* merge_delta_load of at's pair, its rows set as at says. */
pt_status merge_delta_load_expert(merge_delta *d, const pt_adapter *l, const merge_expert_place *at);

/* The delta of layer's projection w (host copies of A and B), rows in llama.cpp's order when
 * permute > 0. d->a is NULL (and PT_OK) when w carries no adapter. */
pt_status merge_delta_load(merge_delta *d, const pt_adapter *l, int layer, int w, int permute);
/* PT_ERR_USER naming the tensor unless the delta is [rows, cols] (a base whose tensors disagree
 * with its own configuration). */
pt_status merge_delta_check(const merge_delta *d, const char *tensor, int64_t rows, int64_t cols);
/* dst [n, in] += s · B[rows row0 .. row0+n) · A; with DoRA magnitudes each row then becomes
 * mag[row] / ||row|| · row, as PEFT's merge_and_unload makes it (the norm of W + s·B·A). */
pt_status merge_delta_add(const merge_delta *d, int64_t row0, int64_t n, float *dst);
void merge_delta_free(merge_delta *d);
/* Give back the pages of a read-only mapping already streamed (the base file), so an export's
 * resident memory stays about one chunk whatever the model's size. */
void merge_release(const void *data, size_t n);
/* The HF row that llama.cpp's row g of a q/k weight holds (heads of hd rows). */
int64_t merge_hf_row(int64_t g, int64_t hd);

/* One tensor of a model by both of its names, llama.cpp's (GGUF) and Hugging Face's: layer and
 * slot -1 for the embeddings, the final norm and the output; permute > 0 for llama's q/k rows,
 * which llama.cpp interleaves (heads); gemma_norm for the norms Gemma stores as weight - 1 in HF. */
typedef struct {
    const char *gguf, *hf;
    int layer, slot, permute;
    bool gemma_norm;
} export_tensor;
typedef pt_status (*export_tensor_fn)(void *ctx, const export_tensor *t);
/* Call fn on each tensor a model of cfg has, embeddings first, output last (none when tied); stops
 * at the first error. */
pt_status export_each_tensor(const pt_model_config *cfg, export_tensor_fn fn, void *ctx);

#endif
