/* adapter.h — a LoRA adapter: what inference applies and adapter files store, and nothing else.
 * For each adapted projection w of each layer, y = W x + s·B(A x) with A [r, in], B [out, r] and
 * s = alpha/r (alpha/sqrt(r) with rsLoRA); fp32 on the model's backend. adapter_matmul is the one
 * place a base product gets its adapter (the forward pass calls it for every projection of every
 * family). Training keeps its gradients and optimizer state beside it (src/train, lora.h).
 *
 * Files (each in src/adapter): adapter.h5 (ptrain's own, docs/adapter-format.md), PEFT's
 * directory (peft.h) and llama.cpp's adapter.gguf; adapter_load reads any of them, or the
 * adapters inside a training checkpoint. */
#ifndef PTRAIN_ADAPTER_H
#define PTRAIN_ADAPTER_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/checkpoint.h"
#include "ptrain/model.h"

typedef struct {
    pt_tensor a, b; /* A [r, in], B [out, r] */
    int r;          /* this pair's rank (rank_pattern may change it); 0: no adapter here */
    float scale;    /* this pair's alpha/r (alpha/sqrt(r) with rsLoRA; alpha_pattern may change alpha) */
    float *mag;     /* a PEFT DoRA adapter's lora_magnitude_vector [out] (host), or NULL */
    float *start;   /* pissa/olora: the starting A [r, in] then B [out, r] (host; adapter_decomp_base), or NULL */
    /* DoRA in a forward pass (adapter_dora_part): the magnitudes on the backend and the norms of
     * the rows of W + s·B·A, [out, 1] f32, made on first use; wnorm_rows: rows of wnorm computed */
    pt_tensor dmag, wnorm;
    int64_t wnorm_rows;
} adapter_pair;

/* How fresh adapters start (PEFT's init_lora_weights): true: A kaiming-uniform (bound 1/sqrt(in)), B
 * zero; false: A and B as torch's nn.Linear starts them (bounds 1/sqrt(in), 1/sqrt(r)), so the
 * adapter changes the model from the start; "gaussian": A normal with std 1/r, B zero. */
/* pissa, olora: from the base weight's decomposition, taken out of the base (adapter_decomp_base). */
typedef enum {
    ADAPTER_INIT_TRUE,
    ADAPTER_INIT_FALSE,
    ADAPTER_INIT_GAUSSIAN,
    ADAPTER_INIT_PISSA,
    ADAPTER_INIT_OLORA,
    ADAPTER_INIT_PISSA_NITER /* pissa_niter_N, N in pt_adapter.init_niter */
} adapter_init;

typedef struct pt_adapter {
    pt_arch arch;    /* the model's family: its PEFT module names (phi3: qkv_proj, gate_up_proj) */
    bool text_tower; /* the model is a multimodal checkpoint's text model: PEFT's names have language_model. after
                      * base_model.model.model. (peft.c writes them so and reads both) */
    int r, n_layers; /* r: PEFT's r, the rank of every pair no pattern names */
    int r_max;       /* the largest rank of any pair (the scratch width) */
    float alpha, scale;
    bool rslora;          /* scale = alpha/sqrt(r) (rsLoRA), else alpha/r */
    bool target[W_COUNT]; /* which projections (W_Q ... W_DOWN) carry adapters; a fused weight's (phi3) on its
                           * lead slot (W_Q: qkv_proj, W_GATE: gate_up_proj), B over all its rows */
    /* PEFT's selectors as adapter_config.json holds them (a JSON object of layers_to_transform,
     * layers_pattern, rank_pattern, alpha_pattern; adapter_select.c), NULL: every layer, one r and alpha */
    char *select;
    adapter_init init;   /* how it started (adapter_config.json's init_lora_weights) */
    int init_niter;      /* ADAPTER_INIT_PISSA_NITER: its N */
    adapter_pair *pairs; /* [n_layers * W_COUNT]; unused slots have no memory (r 0) */
    pt_backend *be;
    /* PEFT's modules_to_save of an adapter read from a file: the trained input embedding
     * (ADAPTER_SAVED_EMBED) and LM head (ADAPTER_SAVED_HEAD), f32 [vocab, dim] on be, which every
     * pass with this adapter uses in place of the model's (data NULL: the model's own) */
    pt_tensor saved[2];
    int gate_head_dim, gate_heads; /* qwen35: q_proj's head size and heads; its pair's B keeps the query rows then
                                    * the gate rows (model_adapter_part) where PEFT's interleave them per head; 0: none */
    bool dora; /* DoRA: its pairs carry magnitudes (mag; dmag on the backend once used): read from a PEFT adapter
                * with use_dora (lora_model_dir continues it under use_dora only), or made by adapter_dora_init
                * (training: lora_dora_enable) */
} pt_adapter;

enum { ADAPTER_SAVED_EMBED, ADAPTER_SAVED_HEAD };
/* PEFT's names: the module in modules_to_save, the tensor in adapter_model.safetensors. */
const char *adapter_saved_module(int i);
const char *adapter_saved_tensor(int i);
/* PT_OK when training may start from ad (lora_model_dir) with use_dora `dora`; a DoRA adapter
 * (ad->dora) continued as plain LoRA is refused, naming path and the fix. */
pt_status adapter_applicable(const pt_adapter *ad, const char *path, bool dora);
/* The embedding table and the LM head a pass with ad (may be NULL) runs on. */
const pt_tensor *adapter_embed_table(const pt_adapter *ad, const pt_model *m);
const pt_tensor *adapter_lm_head(const pt_adapter *ad, const pt_model *m);

/* Adapters for m's projections in target: with seed, A is drawn as PEFT initialises it
 * (kaiming-uniform, bound 1/sqrt(in), from a splitmix64 stream of *seed) and B is zero, so the
 * adapted model starts equal to the base; without (NULL), A and B are zero, so a matrix a file
 * leaves out adds nothing. */
pt_status adapter_create(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                         const bool target[W_COUNT], const uint64_t *seed);
/* The same with PEFT's selectors: select is NULL or the JSON object adapter_select_plan reads
 * (layers_to_transform, layers_pattern, rank_pattern, alpha_pattern), kept in ad->select; where
 * names its source in messages. */
pt_status adapter_create_select(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                                const bool target[W_COUNT], const char *select, const char *where,
                                const uint64_t *seed);
/* PEFT's init_lora_weights "pissa" and "olora" for one fp32 row-major weight w (out x in) of rank r and
 * scale (alpha / r, or / sqrt(r)): a (r x in) and b (out x r) as PEFT sets lora_A and lora_B, and
 * residual (out x in) = w - scale·b·a, the base the adapter then applies to (adapter_decomp.c). */
pt_status adapter_pissa_init(const float *w, int64_t out, int64_t in, int r, float scale, float *a, float *b,
                             float *residual);
pt_status adapter_olora_init(const float *w, int64_t out, int64_t in, int r, float scale, float *a, float *b,
                             float *residual);
/* PEFT's "pissa_niter_N": the same from torch.svd_lowrank(W, r, niter)'s randomized SVD, its random
 * matrix drawn from seed (splitmix64) instead of torch's generator, so the factors are not PEFT's; W =
 * residual + scale·b·a holds all the same. */
pt_status adapter_pissa_niter_init(const float *w, int64_t out, int64_t in, int r, float scale, int niter, uint64_t seed,
                                   float *a, float *b, float *residual);
typedef enum { ADAPTER_DECOMP_PISSA, ADAPTER_DECOMP_OLORA, ADAPTER_DECOMP_PISSA_NITER } adapter_decomp;
const char *adapter_decomp_name(adapter_decomp how); /* "pissa", "olora", "pissa_niter" */
/* Whether ad started from a decomposition (pissa, pissa_niter_N, olora); out: PEFT's init_lora_weights text. */
bool adapter_decomp_text(const pt_adapter *ad, char *out, size_t len);
/* Start every pair of ad (made for m) as how says, each from its base weight dequantized to fp32,
 * and write the residual back into m's weight in that weight's own type (NF4, or a GGUF type ptrain
 * can quantize; else PT_ERR_UNSUPPORTED naming it); each pair keeps its start (start) and ad->init
 * says how (pissa_niter: niter subspace iterations, each weight's random matrix from seed and its place).
 * Refused on a model shared between ranks and on the fused families (phi3). */
pt_status adapter_decomp_base(pt_adapter *ad, pt_model *m, adapter_decomp how, int niter, uint64_t seed);
/* PEFT's conversion of a pair trained from a pissa/olora start (a0, b0) on the residual base into one
 * for the original base (save_pretrained's path_initial_model_for_weight_conversion): W + s·b2·a2 =
 * residual + s·b·a with a2 = [a; a0] (2r x in) and b2 = [b, -b0] (out x 2r); the saved adapter has
 * rank 2r and alpha 2·alpha (sqrt(2)·alpha with rsLoRA), so its scale s is the same. */
void adapter_decomp_convert(const float *a, const float *b, const float *a0, const float *b0, int64_t out,
                            int64_t in, int r, float *a2, float *b2);
/* conv (fresh) = ad, trained from adapter_decomp_base's start, converted for the original base of m:
 * every pair by adapter_decomp_convert, rank 2r, alpha doubled (times sqrt(2) with rsLoRA), init true; PEFT's
 * selectors kept, rank_pattern's ranks and alpha_pattern's alphas doubled alike. */
pt_status adapter_decomp_converted(const pt_adapter *ad, const pt_model *m, pt_adapter *conv);
/* The same with each pair's rank (0: none) and alpha given, per layer * W_COUNT + w (a file's own
 * ranks); r and alpha are the adapter's nominal ones. */
pt_status adapter_create_ranks(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                               const bool target[W_COUNT], const int *ranks, const float *alphas, const uint64_t *seed);
/* The same, fresh adapters starting as init says (with a seed). */
pt_status adapter_create_init(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                              const bool target[W_COUNT], const char *select, const char *where, adapter_init init,
                              const uint64_t *seed);
/* Per pair (layer * W_COUNT + w): rank (0: none) and alpha as PEFT's selectors give them for a
 * model of family a (its module names: phi3's qkv_proj, gate_up_proj) with n_layers, from select
 * (NULL: r and alpha everywhere target says). Errors name where. */
pt_status adapter_select_plan(pt_arch a, const char *select, const char *where, int n_layers, const bool target[W_COUNT],
                              int r, float alpha, int *ranks, float *alphas);
/* select with the layers given as a list (layers_to_transform: n layers from layers[]; n < 0: none)
 * merged in: a new JSON text (free it), or NULL when out of memory. */
char *adapter_select_with_layers(const char *select, const int *layers, int n);
/* The row of pair (layer, w)'s B (and DoRA magnitudes) that row `row` of PEFT's matrix is: row itself, but on
 * qwen35's q_proj PEFT's rows interleave each head's queries and gates, as transformers lays q_proj out. */
int64_t adapter_peft_row(const pt_adapter *ad, int w, int64_t row);
/* A host matrix of a pair of slot w ([n_rows, cols], B or the magnitudes) reordered from PEFT's row order into
 * ptrain's (to_peft false) or back; nothing where the orders agree. PT_ERR_NOMEM when out of memory. */
pt_status adapter_peft_order(const pt_adapter *ad, int w, float *m, int64_t n_rows, int64_t cols, bool to_peft);
/* t's memory as [rows, r] (the first r columns' worth of a [rows, r_max] scratch, contiguous). */
pt_tensor adapter_narrow(const pt_tensor *t, int64_t r);
void adapter_free(pt_adapter *ad);
adapter_pair *adapter_at(const pt_adapter *ad, int layer, int w); /* NULL when w carries no adapter */
/* Every adapted projection in layer order: for (p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) */
adapter_pair *adapter_next(const pt_adapter *ad, const adapter_pair *prev);
int64_t adapter_param_count(const pt_adapter *ad);
/* The parameters adapter_create would make for a model of config c (no adapter, no weights needed);
 * with dora, the magnitudes too (one per adapted output row, as adapter_param_count counts them). */
int64_t adapter_param_count_for(const pt_model_config *c, int r, const bool target[W_COUNT], bool dora);
/* FNV-1a over every adapter value (A and B, layer order): equal on ranks holding equal adapters. */
pt_status adapter_checksum(const pt_adapter *ad, uint64_t *hash);
/* The PEFT module name of projection w in family a (q_proj ... down_proj; phi3: qkv_proj, o_proj, gate_up_proj,
 * down_proj on W_Q, W_O, W_GATE, W_DOWN), NULL for norms, biases and the other parts of a fused weight. */
const char *adapter_module_name(pt_arch a, int w);
/* PEFT's target_parameters entry of an experts slot: mlp.experts.gate_up_proj (W_EXP_GATE_UP),
 * mlp.experts.down_proj (W_EXP_DOWN); NULL for every other slot. */
const char *adapter_param_target(int w);
/* The experts slot of a target_parameters entry (the parameter's name with any module path before it that
 * ends in experts: mlp.experts.gate_up_proj, experts.down_proj), set in target; false when it names none. */
bool adapter_param_slot(const char *name, bool target[W_COUNT]);
/* B of an experts pair between ptrain's layout [E·out, r] (expert e's rows from e·out) and PEFT's lora_B
 * [out, E·r] (expert e's column j at j·E + e); to_peft says which way (host arrays, not aliased). */
void adapter_experts_b(const float *from, float *to, int64_t out, int r, int experts, bool to_peft);
/* Whether ad adapts experts (W_EXP_GATE_UP or W_EXP_DOWN: llama.cpp's adapter.gguf and the merged exports do
 * not carry them yet). */
bool adapter_has_experts(const pt_adapter *ad);
/* The targets named in text (PEFT module names of family a, any separator), e.g. "q_proj,v_proj". */
void adapter_targets_parse(pt_arch a, const char *text, bool target[W_COUNT]);
/* Their names joined by commas, in slot order. */
void adapter_targets_text(pt_arch a, const bool target[W_COUNT], char *out, size_t len);
/* The slots of family a that module name (a PEFT target_modules entry: q_proj ... down_proj, qkv_proj,
 * gate_up_proj, input_linear, output_linear) adapts, set in target; false when a has no such module. phi3 takes
 * q_proj, k_proj and v_proj each as its qkv_proj, gate_proj and up_proj as gate_up_proj; granite4 gate_proj and
 * up_proj as input_linear, down_proj as output_linear; *part (may be NULL) says the name was such a llama name. */
bool adapter_target_slot(pt_arch a, const char *name, bool target[W_COUNT], bool *part);
/* PEFT's all-linear beyond the seven llama names (which the config expands itself): the family's other linear
 * projections into target (qwen35: the Gated DeltaNet's in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj). */
void adapter_all_linear(pt_arch a, bool target[W_COUNT]);

/* y += s (x Aᵀ) Bᵀ for projection w of layer, when the adapter covers it (else nothing): x is the
 * adapters' input (the projection's, or it with dropout), xs [rows, r] receives s x Aᵀ, which the
 * backward pass reads. */
pt_status adapter_matmul(const pt_adapter *ad, int layer, int w, pt_tensor *y, const pt_tensor *x, pt_tensor *xs);
/* The same for a part of a fused weight (phi3): y += xs B[row0 : row0 + y's width]ᵀ with the pair of slot lead,
 * xs = s x Aᵀ computed first when first (the part at row 0; the other parts reuse it). */
pt_status adapter_matmul_part(const pt_adapter *ad, int layer, int lead, int64_t row0, bool first, pt_tensor *y,
                              const pt_tensor *x, pt_tensor *xs);
/* DoRA (a PEFT adapter with use_dora, no dropout: inference) on y = x Wᵀ + s (x Aᵀ) Bᵀ, the output of the
 * part of projection lead at rows row0 (w: that part's base weight): y *= m / ‖W + s·B·A‖ per output
 * column, as PEFT's DoraLinearLayer. The norms are computed from w on first use and kept in the pair (the
 * adapter does not change while it runs); nothing for a pair without magnitudes. */
pt_status adapter_dora_part(const pt_adapter *ad, int layer, int lead, int64_t row0, const pt_tensor *w,
                            pt_tensor *y);

/* A fresh DoRA adapter (use_dora): every pair's magnitudes m = ‖W + s·B·A‖ per output row (PEFT's
 * dora_init; the base weight's row norms when B is zero), so that it starts as the plain LoRA one;
 * sets ad->dora. The magnitudes are on the backend (dmag: what training updates) and in mag. */
pt_status adapter_dora_init(pt_adapter *ad, const pt_model *m);
/* A and B (or the magnitudes) changed: the next forward pass computes the DoRA norms again. */
void adapter_dora_stale(pt_adapter *ad);
/* The trained magnitudes (dmag) copied back into mag, which the merge (merge.c) reads. */
pt_status adapter_dora_host(pt_adapter *ad);
/* Pair (layer, w)'s magnitudes set to mag (its b.shape[0] values), on the host and the backend. */
pt_status adapter_dora_set(pt_adapter *ad, int layer, int w, const float *mag);

/* ---- files ---- */

typedef struct {
    const char *base_model;    /* the model file the adapter was trained on */
    const char *base_name;     /* the model as the config names it (HF id or path); may be NULL */
    const char *chat_template; /* template name used for training, or NULL */
    double lora_dropout;
    bool use_rslora;
    int64_t best_step; /* load_best_model_at_end: the step whose checkpoint this is; -1: the last */
    const float *score; /* a reward model's score head [1, score_dim] (host), or NULL: PEFT's files are
                           then a SEQ_CLS adapter with `score` in modules_to_save (peft.h) */
    int64_t score_dim;
    /* modules_to_save trained in full (host, rows x cols each, or NULL): [0] the input embedding
     * (embed_tokens), [1] the LM head (lm_head), as saved_modules.h names them */
    const float *saved[2];
    const char *saved_name[2];   /* PEFT's tensor name of each */
    const char *saved_module[2]; /* its module name in modules_to_save */
    int64_t saved_rows, saved_cols;
} adapter_info;

/* The PEFT name of layer's projection w in family a, matrix which ('A' or 'B'; 'M': DoRA's ...lora_magnitude_vector):
 * base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight */
void adapter_tensor_name(pt_arch a, char *out, size_t len, int layer, int w, char which);
/* One entry per LoRA matrix (A then B of each projection, layer order, PEFT names): the flat
 * arrays a checkpoint stores the adapters (and their optimizer moments) in. */
pt_status adapter_layout(const pt_adapter *ad, ckpt_layout *lay);
/* Write ad into dir/adapter.h5 (dir is created if missing), atomically. */
pt_status adapter_save(const char *dir, const pt_adapter *ad, const adapter_info *info);
/* Read an adapter onto model m; shapes must match m. path is a ptrain adapter (dir/adapter.h5, or
 * the .h5 itself), a PEFT adapter directory (adapter_config.json + adapter_model.safetensors;
 * peft.h), a llama.cpp adapter (.gguf), or a training checkpoint (checkpoint-N.h5: its adapters).
 * A directory is read from adapter.h5, else its PEFT files, else adapter.gguf. */
pt_status adapter_load(const char *path, const pt_model *m, pt_adapter *ad);
/* The adapter as llama.cpp loads it (`--lora`, Ollama's ADAPTER): general.type adapter, lora_a
 * [r, in] and lora_b [out, r] per projection under the base's tensor names, alpha = scale * r;
 * name: general.name (NULL: a default). */
pt_status adapter_gguf_save(const char *path, const pt_adapter *ad, const pt_model_config *cfg, const char *name);
/* Read a llama.cpp LoRA adapter (.gguf) onto model m. */
pt_status adapter_gguf_load(const char *path, const pt_model *m, pt_adapter *ad);

#endif
