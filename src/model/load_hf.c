/* load_hf.c — a pt_model from a Hugging Face model's safetensors, by transformers' tensor names
 * (model.embed_tokens, model.layers.N.self_attn.q_proj, ..., model.norm, lm_head), in HF's own
 * row layout (no q/k permutation to undo). Shapes are checked against config.json. A fused weight
 * (phi3's qkv_proj, gate_up_proj) is read once per part, as the rows of that part (model_fused_part).
 *
 * Projections: a bitsandbytes 4-bit weight (packed U8 with absmax, quant_map, nested_absmax,
 * nested_quant_map and the quant_state JSON beside it) becomes ptrain's NF4 buffer with its codes
 * and maps copied as they are, so it dequantizes bit for bit as bitsandbytes does; F32/F16/BF16
 * weights become NF4 under load_in_4bit (when the input size is a multiple of 64), else stay as
 * stored. Embeddings and lm_head stay as stored; norms and biases become f32, and Gemma's norms,
 * which compute x * (1 + w), get the 1 added here so every norm computes x * w. Every tensor is
 * checked for NaN and infinity (bitsandbytes ones by their absmax and maps), and matrices for being
 * all zero, as it is read (weight_check.c). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/hf_model.h"
#include "ptrain/log.h"
#include "ptrain/nf4.h"
#include "ptrain/quant_blocks.h"
#include "ptrain/util.h"
#include "ptrain/weight_check.h"

typedef struct {
    const hf_config *hc;
    const st_set *s;
    pt_backend *be;
    bool nf4;
    weight_tally *tally; /* NaN, infinity and all-zero matrices seen so far (weight_check.h) */
    double *quantize_s;  /* may be NULL: time spent converting to NF4 is added */
    const char *pre;     /* the text model's names: "model.", or a multimodal checkpoint's (text_tower) */
    const char *head;    /* the lm_head's name */
} hf_loader;

/* ---- names and shapes ---- */

/* [rows, cols] of a slot of layer l; rows 0 means a vector of cols values. False: layer l has no such weight
 * (gemma4's shared layers' k, v and k norm, its global layers' v with k_eq_v). */
static bool slot_shape(const pt_model_config *c, int l, int slot, int64_t *rows, int64_t *cols)
{
    int64_t qw = (int64_t)c->n_heads * c->head_dim, kw = (int64_t)c->n_kv_heads * c->head_dim;
    *rows = 0;
    *cols = c->dim;
    if (model_layer_proj_shape(c, l, slot, rows, cols)) return true;
    switch (slot) {
    case W_Q: case W_K: case W_V: case W_O: case W_PLE_GATE: case W_PLE_PROJ: case W_PLE_MODEL: case W_PLE_EMBED:
        return false;
    case W_Q_BIAS: *cols = qw; break;
    case W_SINKS: *cols = c->n_heads; break;
    case W_K_BIAS:
    case W_V_BIAS: *cols = kw; break;
    case W_Q_NORM: *cols = c->head_dim_full ? model_layer_head_dim(c, l) : model_qk_norm_width(c, slot); break;
    case W_K_NORM:
        *cols = c->head_dim_full ? model_layer_head_dim(c, l) : model_qk_norm_width(c, slot);
        return model_kv_source(c, l) == l;
    case W_PLE_NORM: return c->ple_dim > 0;
    case W_Q_GATE:
    case W_LIN_QKV:
    case W_LIN_Z:
    case W_LIN_B:
    case W_LIN_A:
    case W_LIN_OUT: model_proj_shape(c, slot, rows, cols); break;
    case W_LIN_CONV: *rows = model_lin_conv_dim(c), *cols = c->lin_conv; break;
    case W_LIN_ALOG:
    case W_LIN_DT: *cols = c->lin_v_heads; break;
    case W_LIN_NORM: *cols = c->lin_v_dim; break;
    default: break; /* norms: dim */
    }
    return true;
}

static const char *where(const hf_loader *ld)
{
    return ld->s->index_path ? ld->s->index_path : ld->s->files[0].path;
}

static pt_status find(const hf_loader *ld, const char *name, const st_tensor **t, const st_file **f)
{
    *t = st_set_find(ld->s, name, f);
    if (!*t)
        return ERR(PT_ERR_USER,
                   "%s: tensor %s is missing; the checkpoint does not match its config.json (%s, %d "
                   "layers): is the download complete?",
                   shown_text(where(ld)).s, shown_text(name).s, arch_name(ld->hc->cfg.arch), ld->hc->cfg.n_layers);
    return PT_OK;
}

static pt_status check_shape(const st_file *f, const st_tensor *t, int64_t rows, int64_t cols)
{
    bool ok = rows ? t->ndim == 2 && t->shape[0] == rows && t->shape[1] == cols : t->ndim == 1 && t->shape[0] == cols;
    if (ok) return PT_OK;
    char desc[160];
    if (rows)
        return ERR(PT_ERR_USER,
                   "%s: tensor %s is %s, expected [%lld, %lld] from config.json: the weights and "
                   "config.json are from different models",
                   shown_text(f->path).s, shown_text(t->name).s, st_describe(t, desc, sizeof desc), (long long)rows,
                   (long long)cols);
    return ERR(PT_ERR_USER,
               "%s: tensor %s is %s, expected [%lld] from config.json: the weights and config.json are "
               "from different models",
               shown_text(f->path).s, shown_text(t->name).s, st_describe(t, desc, sizeof desc), (long long)cols);
}

/* ---- uploads ---- */

static pt_status upload(pt_backend *be, pt_tensor *t, const void *host)
{
    TRY(backend_alloc(be, t));
    return backend_upload(be, t, host, t->nbytes);
}

/* A vector as f32 (plus 1 for Gemma's norms). */
static pt_status load_vector(const hf_loader *ld, const char *name, int64_t n, bool add_one, pt_tensor *out)
{
    const st_tensor *t;
    const st_file *f;
    TRY(find(ld, name, &t, &f));
    TRY(check_shape(f, t, 0, n));
    float *v = malloc(sizeof(float) * (size_t)n);
    TRY_ALLOC(v);
    pt_status st = st_read_f32(t, f->path, 0, n, v);
    if (st == PT_OK) st = weight_check(ld->tally, f->path, name, WEIGHT_VECTOR, PT_F32, v, n, 0);
    for (int64_t i = 0; add_one && i < n; i++) v[i] += 1.0f;
    *out = tensor_make(PT_F32, 1, &n);
    if (st == PT_OK) st = upload(ld->be, out, v);
    free(v);
    return st;
}

/* dense [rows, cols] fp32 (freed here) as NF4 when quantize, else as f32. */
static pt_status upload_floats(const hf_loader *ld, float *dense, int64_t rows, int64_t cols, bool quantize,
                               pt_tensor *out)
{
    int64_t shape[2] = {rows, cols};
    *out = tensor_make(quantize ? PT_NF4 : PT_F32, 2, shape);
    void *packed = quantize ? malloc(out->nbytes) : dense;
    pt_status st = packed ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    double t0 = util_now();
    if (st == PT_OK && quantize) st = nf4_quantize(dense, rows, cols, packed);
    if (quantize && ld->quantize_s) *ld->quantize_s += util_now() - t0;
    if (st == PT_OK) st = upload(ld->be, out, packed);
    if (packed != dense) free(packed);
    free(dense);
    return st;
}

static pt_status load_dense(const hf_loader *ld, const st_file *f, const st_tensor *t, int64_t rows, int64_t cols,
                            bool quantize, pt_tensor *out)
{
    size_t n = strlen(t->name), e = strlen("embed_tokens.weight");
    bool embedding = (n >= e && !strcmp(t->name + n - e, "embed_tokens.weight")) || !strcmp(t->name, "lm_head.weight");
    TRY(weight_check_st(ld->tally, f->path, t->name, embedding ? WEIGHT_EMBEDDING : WEIGHT_PROJECTION, t->dtype,
                        t->data, rows * cols, cols));
    quantize = quantize && cols % NF4_BLOCK == 0;
    pt_dtype keep = t->dtype == ST_F32 ? PT_F32 : t->dtype == ST_F16 ? PT_F16 : t->dtype == ST_BF16 ? PT_BF16 : PT_DTYPE_COUNT;
    if (!quantize && keep != PT_DTYPE_COUNT) {
        int64_t shape[2] = {rows, cols};
        *out = tensor_make(keep, 2, shape);
        return upload(ld->be, out, t->data);
    }
    float *dense = malloc(sizeof(float) * (size_t)(rows * cols));
    TRY_ALLOC(dense);
    pt_status st = st_read_f32(t, f->path, 0, rows * cols, dense);
    if (st != PT_OK) {
        free(dense);
        return st;
    }
    return upload_floats(ld, dense, rows, cols, quantize, out);
}

/* ---- bitsandbytes 4-bit ---- */

typedef struct {
    int64_t blocksize, nested_blocksize;
    double offset;
    bool nested;
    const st_tensor *packed, *absmax, *quant_map, *nested_absmax, *nested_map;
} bnb_weight;

/* A bitsandbytes quant state is a small JSON object (quant_type, blocksize, shape, ...). */
#define QUANT_STATE_MAX ((size_t)64 << 10)

static pt_status bnb_state(const st_file *f, const char *name, const st_tensor *qs, int64_t rows, int64_t cols,
                           bnb_weight *b)
{
    if (qs->nbytes > QUANT_STATE_MAX)
        return ERR(PT_ERR_USER,
                   "%s: %s.quant_state.bitsandbytes__nf4 is %zu bytes, more than the 64 KiB ptrain reads of "
                   "a quant state (about 200 bytes of JSON): the checkpoint is corrupt",
                   shown_text(f->path).s, shown_text(name).s, (size_t)qs->nbytes);
    json_error_t e;
    json_t *j = json_loadb(qs->data, qs->nbytes, 0, &e);
    const json_t *shape = json_object_get(j, "shape");
    const char *type = json_string_value(json_object_get(j, "quant_type"));
    b->blocksize = json_integer_value(json_object_get(j, "blocksize"));
    b->nested = json_object_get(j, "nested_offset") != NULL;
    b->nested_blocksize = json_integer_value(json_object_get(j, "nested_blocksize"));
    b->offset = json_number_value(json_object_get(j, "nested_offset"));
    bool ok = j && type && !strcmp(type, "nf4") && b->blocksize > 0 && b->blocksize <= (1 << 20) &&
              json_array_size(shape) == 2 && json_integer_value(json_array_get(shape, 0)) == rows &&
              json_integer_value(json_array_get(shape, 1)) == cols &&
              (!b->nested || (b->nested_blocksize > 0 && b->nested_blocksize <= (1 << 20)));
    json_decref(j);
    if (!ok)
        return ERR(PT_ERR_USER, "%s: %s.quant_state.bitsandbytes__nf4 is not an NF4 state of a [%lld, %lld] weight "
                   "(quant_type nf4, blocksize, shape, nested_blocksize, nested_offset): the checkpoint is corrupt",
                   shown_text(f->path).s, shown_text(name).s, (long long)rows, (long long)cols);
    return PT_OK;
}

/* The companion name.suffix: dtype and element count checked. */
static pt_status companion(const hf_loader *ld, const char *name, const char *suffix, st_dtype dtype, int64_t n,
                           const st_tensor **out)
{
    char full[256];
    snprintf(full, sizeof full, "%s.%s", name, suffix);
    const st_file *f;
    TRY(find(ld, full, out, &f));
    if ((*out)->dtype != dtype || st_numel(*out) != n) {
        char desc[160];
        return ERR(PT_ERR_USER,
                   "%s: %s is %s, expected %s with %lld values for a bitsandbytes NF4 weight: the "
                   "checkpoint is corrupt",
                   shown_text(f->path).s, shown_text(full).s, st_describe(*out, desc, sizeof desc),
                   st_dtype_name(dtype), (long long)n);
    }
    return PT_OK;
}

/* The packed 4-bit codes: the weight itself, U8 with (n + 1) / 2 bytes. */
static pt_status packed_weight(const hf_loader *ld, const char *name, int64_t bytes, const st_tensor **out)
{
    const st_file *f;
    TRY(find(ld, name, out, &f));
    if ((*out)->dtype == ST_U8 && st_numel(*out) == bytes) return PT_OK;
    char desc[160];
    return ERR(PT_ERR_USER,
               "%s: %s is %s, expected U8 with %lld bytes of packed 4-bit codes (it has a bitsandbytes "
               "quant_state): the checkpoint is corrupt",
               shown_text(f->path).s, shown_text(name).s, st_describe(*out, desc, sizeof desc), (long long)bytes);
}

static pt_status bnb_tensors(const hf_loader *ld, const char *name, int64_t rows, int64_t cols, bnb_weight *b)
{
    int64_t n = rows * cols, nblocks = (n + b->blocksize - 1) / b->blocksize;
    TRY(companion(ld, name, "absmax", b->nested ? ST_U8 : ST_F32, nblocks, &b->absmax));
    TRY(companion(ld, name, "quant_map", ST_F32, 16, &b->quant_map));
    if (!b->nested) return PT_OK;
    TRY(companion(ld, name, "nested_absmax", ST_F32, (nblocks + b->nested_blocksize - 1) / b->nested_blocksize,
                  &b->nested_absmax));
    return companion(ld, name, "nested_quant_map", ST_F32, 256, &b->nested_map);
}

/* Read the fp32 parts of a bnb weight into aligned memory: maps, nested absmax (or plain absmax). */
static pt_status bnb_floats(const bnb_weight *b, const char *path, float **qmap, float **nmap, float **nabs)
{
    const st_tensor *src[3] = {b->quant_map, b->nested ? b->nested_map : NULL, b->nested ? b->nested_absmax : b->absmax};
    float **dst[3] = {qmap, nmap, nabs};
    for (int i = 0; i < 3; i++) {
        if (!src[i]) continue;
        *dst[i] = malloc(sizeof(float) * (size_t)st_numel(src[i]) + 1);
        TRY_ALLOC(*dst[i]);
        TRY(st_read_f32(src[i], path, 0, st_numel(src[i]), *dst[i]));
    }
    return PT_OK;
}

/* Any other NF4 layout (plain absmax, other block sizes, rows that are not whole blocks: blocks run over
 * the flattened weight): dequantize as bitsandbytes does, in fp32. */
static void bnb_dequantize(const bnb_weight *b, const float *qmap, const float *nmap, const float *nabs, int64_t n,
                           float *out)
{
    const uint8_t *packed = b->packed->data, *codes = b->absmax->data;
    for (int64_t i = 0; i < n; i++) {
        int64_t blk = i / b->blocksize;
        float absmax;
        if (b->nested) { /* nabs holds one value per nested block */
            absmax = nmap[codes[blk]] * nabs[blk / b->nested_blocksize];
            absmax = absmax + (float)b->offset;
        } else {
            absmax = nabs[blk];
        }
        uint8_t byte = packed[i / 2];
        out[i] = qmap[i % 2 ? byte & 15 : byte >> 4] * absmax;
    }
}

/* Rows [row0, row0 + rows) of the bnb weight (all of it, or a part of a fused one: phi3) as ptrain's NF4, its
 * codes as they are when the part starts on a nested block (as in every released Phi-3 size), else dequantized
 * as bitsandbytes does and, under load_in_4bit, quantized again. */
static pt_status bnb_build(const hf_loader *ld, const bnb_weight *b, int64_t row0, int64_t rows, int64_t rows_all,
                           int64_t cols, pt_tensor *out, float *qmap, float *nmap, float *nabs)
{
    int64_t b0 = row0 * cols / NF4_BLOCK; /* the part's first absmax block */
    bool exact = b->nested && b->blocksize == NF4_BLOCK && b->nested_blocksize == NF4_NESTED_BLOCK &&
                 cols % NF4_BLOCK == 0 && b0 % NF4_NESTED_BLOCK == 0;
    int64_t shape[2] = {rows, cols};
    if (exact) {
        *out = tensor_make(PT_NF4, 2, shape);
        void *buf = malloc(out->nbytes);
        TRY_ALLOC(buf);
        pt_status st = nf4_from_bnb(rows, cols, (const uint8_t *)b->packed->data + row0 * cols / 2,
                                    (const uint8_t *)b->absmax->data + b0, nabs + b0 / NF4_NESTED_BLOCK, nmap,
                                    (float)b->offset, qmap, buf);
        if (st == PT_OK) st = upload(ld->be, out, buf);
        free(buf);
        return st;
    }
    float *dense = malloc(sizeof(float) * (size_t)(rows_all * cols));
    TRY_ALLOC(dense);
    bnb_dequantize(b, qmap, nmap, nabs, rows_all * cols, dense);
    if (row0) memmove(dense, dense + row0 * cols, sizeof(float) * (size_t)(rows * cols));
    return upload_floats(ld, dense, rows, cols, ld->nf4 && cols % NF4_BLOCK == 0, out);
}

static pt_status load_bnb(const hf_loader *ld, const st_file *f, const char *name, const st_tensor *qs,
                          int64_t row0, int64_t rows, int64_t rows_all, int64_t cols, pt_tensor *out)
{
    bnb_weight b = {0};
    TRY(bnb_state(f, name, qs, rows_all, cols, &b));
    TRY(packed_weight(ld, name, (rows_all * cols + 1) / 2, &b.packed));
    TRY(bnb_tensors(ld, name, rows_all, cols, &b));
    float *qmap = NULL, *nmap = NULL, *nabs = NULL;
    pt_status st = bnb_floats(&b, f->path, &qmap, &nmap, &nabs);
    weight_nf4 w = {qmap, nmap, nabs, b.nested ? b.absmax->data : NULL,
                    (rows_all * cols + b.blocksize - 1) / b.blocksize, b.nested_blocksize, (float)b.offset};
    if (st == PT_OK && row0 == 0) st = weight_check_nf4(ld->tally, f->path, name, &w); /* a fused one once */
    if (st == PT_OK) st = bnb_build(ld, &b, row0, rows, rows_all, cols, out, qmap, nmap, nabs);
    free(qmap);
    free(nmap);
    free(nabs);
    return st;
}

/* Rows [row0, row0 + rows) of the [rows_all, cols] weight `name` (all of it, or a part of a fused one: phi3's
 * qkv_proj, gate_up_proj) as a weight of its own: bitsandbytes 4-bit when its quant_state is there, else
 * dense. */
static pt_status load_rows(const hf_loader *ld, const char *name, int64_t row0, int64_t rows, int64_t rows_all,
                           int64_t cols, bool quantize, pt_tensor *out)
{
    char qname[256];
    snprintf(qname, sizeof qname, "%s.quant_state.bitsandbytes__nf4", name);
    const st_file *f;
    const st_tensor *qs = st_set_find(ld->s, qname, &f);
    if (qs) return load_bnb(ld, f, name, qs, row0, rows, rows_all, cols, out);
    snprintf(qname, sizeof qname, "%s.quant_state.bitsandbytes__fp4", name);
    if (st_set_find(ld->s, qname, &f))
        return ERR(PT_ERR_USER, "%s: %s is bitsandbytes FP4; ptrain reads NF4 4-bit checkpoints only: use the "
                   "unquantized model (ptrain quantizes it to NF4 on load)", shown_text(f->path).s, shown_text(name).s);
    const st_tensor *t;
    TRY(find(ld, name, &t, &f));
    TRY(check_shape(f, t, rows_all, cols));
    if (rows == rows_all) return load_dense(ld, f, t, rows, cols, quantize, out);
    st_tensor part = *t; /* the rows of the part, in place in the mapping */
    size_t esize = t->nbytes / (size_t)(rows_all * cols), skip = (size_t)(row0 * cols) * esize;
    part.shape[0] = rows;
    part.data = (const char *)t->data + skip;
    part.nbytes = (size_t)(rows * cols) * esize;
    part.begin += skip;
    part.end = part.begin + part.nbytes;
    return load_dense(ld, f, &part, rows, cols, quantize, out);
}

/* A [rows, cols] weight stored alone. */
static pt_status load_matrix(const hf_loader *ld, const char *name, int64_t rows, int64_t cols, bool quantize,
                             pt_tensor *out)
{
    return load_rows(ld, name, 0, rows, rows, cols, quantize, out);
}

/* ---- qwen35's weights of their own layout ---- */

/* q_proj of a gated full-attention layer: [heads x (query, gate) x head_dim, dim], each head's query rows then
 * its gate rows; the query rows become W_Q and the gate rows W_Q_GATE (each NF4 under load_in_4bit). */
static pt_status load_gated_q(const hf_loader *ld, const char *name, pt_layer_weights *w)
{
    const pt_model_config *c = &ld->hc->cfg;
    int64_t hd = c->head_dim, qw = (int64_t)c->n_heads * hd, d = c->dim;
    char qname[256];
    snprintf(qname, sizeof qname, "%s.quant_state.bitsandbytes__nf4", name);
    const st_file *f;
    if (st_set_find(ld->s, qname, &f))
        return ERR(PT_ERR_USER, "%s: %s is bitsandbytes 4-bit; ptrain reads Qwen3.5 from unquantized checkpoints "
                   "only, for now: use the unquantized model (ptrain quantizes it to NF4 on load)",
                   shown_text(f->path).s, shown_text(name).s);
    const st_tensor *t;
    TRY(find(ld, name, &t, &f));
    TRY(check_shape(f, t, 2 * qw, d));
    TRY(weight_check_st(ld->tally, f->path, t->name, WEIGHT_PROJECTION, t->dtype, t->data, 2 * qw * d, d));
    float *all = malloc(sizeof(float) * (size_t)(2 * qw * d)), *q = malloc(sizeof(float) * (size_t)(qw * d)),
          *g = malloc(sizeof(float) * (size_t)(qw * d));
    pt_status st = all && q && g ? st_read_f32(t, f->path, 0, 2 * qw * d, all) : ERR(PT_ERR_NOMEM, "out of memory");
    for (int64_t h = 0; st == PT_OK && h < c->n_heads; h++) {
        memcpy(q + h * hd * d, all + 2 * h * hd * d, sizeof(float) * (size_t)(hd * d));
        memcpy(g + h * hd * d, all + (2 * h + 1) * hd * d, sizeof(float) * (size_t)(hd * d));
    }
    free(all);
    bool quantize = ld->nf4 && d % NF4_BLOCK == 0;
    if (st != PT_OK) {
        free(q);
        free(g);
        return st;
    }
    st = upload_floats(ld, q, qw, d, quantize, &w->w[W_Q]); /* frees q */
    if (st != PT_OK) {
        free(g);
        return st;
    }
    return upload_floats(ld, g, qw, d, quantize, &w->w[W_Q_GATE]);
}

/* The DeltaNet's conv1d weight [channels, 1, kernel] as f32 [channels, kernel]. */
static pt_status load_conv(const hf_loader *ld, const char *name, int64_t rows, int64_t cols, pt_tensor *out)
{
    const st_tensor *t;
    const st_file *f;
    TRY(find(ld, name, &t, &f));
    if (t->ndim != 3 || t->shape[0] != rows || t->shape[1] != 1 || t->shape[2] != cols) {
        char desc[160];
        return ERR(PT_ERR_USER, "%s: tensor %s is %s, expected [%lld, 1, %lld] from config.json: the weights and "
                   "config.json are from different models", shown_text(f->path).s, shown_text(name).s,
                   st_describe(t, desc, sizeof desc), (long long)rows, (long long)cols);
    }
    float *v = malloc(sizeof(float) * (size_t)(rows * cols));
    TRY_ALLOC(v);
    pt_status st = st_read_f32(t, f->path, 0, rows * cols, v);
    if (st == PT_OK) st = weight_check(ld->tally, f->path, name, WEIGHT_VECTOR, PT_F32, v, rows * cols, 0);
    int64_t shape[2] = {rows, cols};
    *out = tensor_make(PT_F32, 2, shape);
    if (st == PT_OK) st = upload(ld->be, out, v);
    free(v);
    return st;
}

/* ---- experts ---- */

/* Rows [row0, row0 + rows) of expert e of the fused [E, rows_all, cols] tensor `name` (transformers 5's
 * mlp.experts.gate_up_proj and down_proj), as a weight of its own. */
static pt_status load_fused_expert(const hf_loader *ld, const char *name, int e, int64_t row0, int64_t rows,
                                   int64_t rows_all, int64_t cols, pt_tensor *out)
{
    const st_tensor *t;
    const st_file *f;
    TRY(find(ld, name, &t, &f));
    int64_t n_exp = ld->hc->cfg.n_experts;
    if (t->ndim != 3 || t->shape[0] != n_exp || t->shape[1] != rows_all || t->shape[2] != cols) {
        char desc[160];
        return ERR(PT_ERR_USER, "%s: tensor %s is %s, expected [%lld, %lld, %lld] from config.json (the "
                   "experts, %s and hidden_size): the weights and config.json are from different models",
                   shown_text(f->path).s, shown_text(name).s, st_describe(t, desc, sizeof desc), (long long)n_exp,
                   (long long)rows_all, (long long)cols, arch_info(ld->hc->cfg.arch)->moe_width_key);
    }
    st_tensor part = *t; /* the expert's rows, in place in the mapping */
    size_t esize = t->nbytes / (size_t)(n_exp * rows_all * cols), skip = (size_t)((e * rows_all + row0) * cols) * esize;
    part.ndim = 2;
    part.shape[0] = rows, part.shape[1] = cols;
    part.data = (const char *)t->data + skip;
    part.nbytes = (size_t)(rows * cols) * esize;
    part.begin += skip;
    part.end = part.begin + part.nbytes;
    return load_dense(ld, f, &part, rows, cols, ld->nf4, out);
}

/* ---- gpt-oss's experts ---- */

/* A 3-D [E, a, b] tensor `name` of layer l's mlp.experts, checked. */
static pt_status gptoss_tensor(const hf_loader *ld, int l, const char *what, int64_t a, int64_t b, const st_tensor **t,
                               const st_file **f)
{
    char name[192];
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s", l, what);
    TRY(find(ld, name, t, f));
    int64_t n_exp = ld->hc->cfg.n_experts;
    if ((*t)->ndim == 3 && (*t)->shape[0] == n_exp && (*t)->shape[1] == a && (*t)->shape[2] == b) return PT_OK;
    char desc[160];
    return ERR(PT_ERR_USER, "%s: tensor %s is %s, expected [%lld, %lld, %lld] from config.json (num_local_experts, "
               "hidden_size and intermediate_size): the weights and config.json are from different models",
               shown_text((*f)->path).s, shown_text(name).s, st_describe(*t, desc, sizeof desc), (long long)n_exp,
               (long long)a, (long long)b);
}

/* Expert e's weight [rows, in] from gpt-oss's x W layout [E, in, rows * step]: the columns col0, col0 + step, ...
 * of its [in, rows * step] matrix, transposed (gate_up_proj: gate the even columns, up the odd ones; down_proj:
 * all, step 1). NF4 under load_in_4bit when in is whole 64-blocks. */
static pt_status gptoss_expert(const hf_loader *ld, const st_tensor *t, const st_file *f, int e, int64_t in,
                               int64_t rows, int step, int col0, pt_tensor *out)
{
    int64_t width = rows * step, n = in * width;
    float *all = malloc(sizeof(float) * (size_t)n), *w = malloc(sizeof(float) * (size_t)n / (size_t)step);
    pt_status st = all && w ? st_read_f32(t, f->path, e * n, n, all) : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) st = weight_check(ld->tally, f->path, t->name, WEIGHT_PROJECTION, PT_F32, all, n, width);
    for (int64_t r = 0; st == PT_OK && r < rows; r++)
        for (int64_t i = 0; i < in; i++) w[r * in + i] = all[i * width + col0 + r * step];
    free(all);
    if (st != PT_OK) {
        free(w);
        return st;
    }
    return upload_floats(ld, w, rows, in, ld->nf4 && in % NF4_BLOCK == 0, out);
}

/* The experts' biases: gate_up_proj_bias [E, 2I] into the gate's (even columns) and the up's (odd) [E, I], down_proj_bias
 * [E, dim], f32. */
static pt_status gptoss_biases(const hf_loader *ld, int l, pt_layer_weights *w)
{
    const pt_model_config *c = &ld->hc->cfg;
    int64_t n_exp = c->n_experts, f2 = 2 * (int64_t)c->moe_ffn_dim;
    const char *what[2] = {"gate_up_proj_bias", "down_proj_bias"};
    int64_t cols[2] = {f2, c->dim};
    for (int k = 0; k < 2; k++) {
        char name[192];
        const st_tensor *t;
        const st_file *f;
        snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s", l, what[k]);
        TRY(find(ld, name, &t, &f));
        TRY(check_shape(f, t, n_exp, cols[k]));
        float *v = malloc(sizeof(float) * (size_t)(n_exp * cols[k])), *split = malloc(sizeof(float) * (size_t)(n_exp * cols[k]));
        pt_status st = v && split ? st_read_f32(t, f->path, 0, n_exp * cols[k], v) : ERR(PT_ERR_NOMEM, "out of memory");
        if (st == PT_OK) st = weight_check(ld->tally, f->path, name, WEIGHT_VECTOR, PT_F32, v, n_exp * cols[k], 0);
        int64_t half = cols[k] / 2, shape[2] = {n_exp, k == 0 ? half : cols[k]};
        for (int64_t i = 0; k == 0 && i < n_exp * half; i++) /* even columns, then odd */
            split[i] = v[(i / half) * cols[k] + 2 * (i % half)], split[n_exp * half + i] = v[(i / half) * cols[k] + 2 * (i % half) + 1];
        for (int x = 0; st == PT_OK && x < (k == 0 ? 2 : 1); x++) {
            pt_tensor *out = &w->expert_bias[k == 0 ? (x == 0 ? X_GATE : X_UP) : X_DOWN];
            *out = tensor_make(PT_F32, 2, shape);
            st = upload(ld->be, out, k == 0 ? split + x * n_exp * half : v);
        }
        free(v);
        free(split);
        TRY(st);
    }
    return PT_OK;
}

/* The [E, a, b(, 16)] uint8 tensor <what> of layer l's experts (an MXFP4 pair's blocks: 4 dims, or scales: 3). */
static pt_status mxfp4_tensor(const hf_loader *ld, int l, const char *what, int64_t a, int64_t b, const st_tensor **t)
{
    char name[192];
    const st_file *f;
    snprintf(name, sizeof name, "model.layers.%d.mlp.experts.%s", l, what);
    TRY(find(ld, name, t, &f));
    bool blocks = strstr(what, "_blocks") != NULL;
    const st_tensor *x = *t;
    if (x->dtype == ST_U8 && x->ndim == (blocks ? 4 : 3) && x->shape[0] == ld->hc->cfg.n_experts && x->shape[1] == a &&
        x->shape[2] == b && (!blocks || x->shape[3] == 16))
        return PT_OK;
    char desc[160];
    return ERR(PT_ERR_USER, "%s: tensor %s is %s, expected U8 [%d, %lld, %lld%s] from config.json (MXFP4 %s of "
               "num_local_experts, rows and columns / 32): the weights and config.json are from different models",
               shown_text(f->path).s, shown_text(name).s, st_describe(x, desc, sizeof desc), ld->hc->cfg.n_experts,
               (long long)a, (long long)b, blocks ? ", 16" : "", blocks ? "blocks" : "scales");
}

/* Expert e's weight [rows, cols] from an MXFP4 pair (blocks [E, rows * step, cols / 32, 16], scales [E, rows * step,
 * cols / 32]: the rows row0, row0 + step, ...), kept MXFP4 (PT_MXFP4): each block's nibbles repacked from Hugging
 * Face's order (byte i: elements 2i low, 2i + 1 high) into ggml's (byte j: elements j low, j + 16 high). */
static pt_status gptoss_mxfp4(const hf_loader *ld, const st_tensor *bl, const st_tensor *sc, int e, int64_t rows,
                              int64_t cols, int step, int row0, pt_tensor *out)
{
    int64_t nb = cols / QK, shape[2] = {rows, cols};
    *out = tensor_make(PT_MXFP4, 2, shape);
    block_mxfp4 *b = malloc(out->nbytes);
    TRY_ALLOC(b);
    const uint8_t *q = bl->data, *s = sc->data;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < nb; k++) {
            int64_t src = ((int64_t)e * rows * step + row0 + r * step) * nb + k;
            const uint8_t *p = q + src * (QK / 2);
            block_mxfp4 *d = &b[r * nb + k];
            d->e = s[src];
            for (int j = 0; j < QK / 2; j++) {
                int lo = p[j / 2] >> (j % 2 * 4) & 15, hi = p[(j + QK / 2) / 2] >> (j % 2 * 4) & 15;
                d->qs[j] = (uint8_t)(lo | hi << 4);
            }
        }
    pt_status st = upload(ld->be, out, b);
    free(b);
    return st;
}

/* gpt-oss's MXFP4 experts (quantization_config quant_method mxfp4), each weight kept 4-bit. */
static pt_status load_gptoss_mxfp4(const hf_loader *ld, int l, pt_layer_weights *w)
{
    const pt_model_config *c = &ld->hc->cfg;
    int64_t d = c->dim, f = c->moe_ffn_dim;
    if (d % QK || f % QK)
        return ERR(PT_ERR_USER, "%s: hidden_size %lld and intermediate_size %lld must be multiples of 32 for MXFP4 "
                   "experts (blocks of 32 values)", shown_text(where(ld)).s, (long long)d, (long long)f);
    const st_tensor *gb, *gs, *db, *ds;
    TRY(mxfp4_tensor(ld, l, "gate_up_proj_blocks", 2 * f, d / QK, &gb));
    TRY(mxfp4_tensor(ld, l, "gate_up_proj_scales", 2 * f, d / QK, &gs));
    TRY(mxfp4_tensor(ld, l, "down_proj_blocks", d, f / QK, &db));
    TRY(mxfp4_tensor(ld, l, "down_proj_scales", d, f / QK, &ds));
    w->experts = calloc((size_t)c->n_experts * X_COUNT, sizeof *w->experts);
    TRY_ALLOC(w->experts);
    for (int e = 0; e < c->n_experts; e++) {
        pt_tensor *x = &w->experts[(size_t)e * X_COUNT];
        TRY(gptoss_mxfp4(ld, gb, gs, e, f, d, 2, 0, &x[X_GATE]));
        TRY(gptoss_mxfp4(ld, gb, gs, e, f, d, 2, 1, &x[X_UP]));
        TRY(gptoss_mxfp4(ld, db, ds, e, d, f, 1, 0, &x[X_DOWN]));
    }
    return gptoss_biases(ld, l, w);
}

/* gpt-oss's layer l: the router (mlp.router.weight and .bias, never quantized) and the experts as GptOssExperts holds
 * them (arch.h's gptoss_moe), or MXFP4 as the published checkpoints store them (kept 4-bit). */
static pt_status load_gptoss_experts(const hf_loader *ld, int l, pt_layer_weights *w)
{
    const pt_model_config *c = &ld->hc->cfg;
    int64_t d = c->dim, f = c->moe_ffn_dim;
    char name[192];
    snprintf(name, sizeof name, "model.layers.%d.mlp.router.weight", l);
    TRY(load_matrix(ld, name, c->n_experts, d, false, &w->router));
    snprintf(name, sizeof name, "model.layers.%d.mlp.router.bias", l);
    TRY(load_vector(ld, name, c->n_experts, false, &w->router_bias));
    if (ld->hc->mxfp4) return load_gptoss_mxfp4(ld, l, w);
    const st_tensor *gu, *dn;
    const st_file *fgu, *fdn;
    TRY(gptoss_tensor(ld, l, "gate_up_proj", d, 2 * f, &gu, &fgu));
    TRY(gptoss_tensor(ld, l, "down_proj", f, d, &dn, &fdn));
    w->experts = calloc((size_t)c->n_experts * X_COUNT, sizeof *w->experts);
    TRY_ALLOC(w->experts);
    for (int e = 0; e < c->n_experts; e++) {
        pt_tensor *x = &w->experts[(size_t)e * X_COUNT];
        TRY(gptoss_expert(ld, gu, fgu, e, d, f, 2, 0, &x[X_GATE]));
        TRY(gptoss_expert(ld, gu, fgu, e, d, f, 2, 1, &x[X_UP]));
        TRY(gptoss_expert(ld, dn, fdn, e, f, d, 1, 0, &x[X_DOWN]));
    }
    return gptoss_biases(ld, l, w);
}

/* A sparse layer's router (as stored, never quantized) and its experts, one by one
 * (<block>.experts.E.<gate|up|down name>.weight with the router <block>.gate.weight, the family's names:
 * mlp and gate_proj... for Qwen3-MoE, block_sparse_moe and w1, w3, w2 for Mixtral; bitsandbytes ones too)
 * or fused as transformers 5 holds them (mlp.experts.gate_up_proj [E, 2I, H], mlp.experts.down_proj
 * [E, H, I], router mlp.gate.weight); each expert weight NF4 under load_in_4bit. */
static pt_status load_experts(const hf_loader *ld, int l, pt_layer_weights *w)
{
    const pt_model_config *c = &ld->hc->cfg;
    const pt_arch_info *a = arch_info(c->arch);
    int64_t d = c->dim, f = c->moe_ffn_dim;
    char name[192], fused[192];
    snprintf(fused, sizeof fused, "model.layers.%d.mlp.experts.gate_up_proj", l);
    bool is_fused = st_set_find(ld->s, fused, NULL) != NULL;
    const char *block = is_fused ? "mlp" : a->moe_block;
    snprintf(name, sizeof name, "model.layers.%d.%s.gate.weight", l, block);
    TRY(load_matrix(ld, name, c->n_experts, d, false, &w->router));
    w->experts = calloc((size_t)c->n_experts * X_COUNT, sizeof *w->experts);
    TRY_ALLOC(w->experts);
    for (int e = 0; e < c->n_experts; e++)
        for (int x = 0; x < X_COUNT; x++) {
            pt_tensor *out = &w->experts[(size_t)e * X_COUNT + (size_t)x];
            int64_t rows = x == X_DOWN ? d : f, cols = x == X_DOWN ? f : d;
            if (is_fused && x == X_DOWN) {
                snprintf(name, sizeof name, "model.layers.%d.mlp.experts.down_proj", l);
                TRY(load_fused_expert(ld, name, e, 0, d, d, f, out));
            } else if (is_fused) {
                TRY(load_fused_expert(ld, fused, e, x == X_UP ? f : 0, f, 2 * f, d, out));
            } else {
                snprintf(name, sizeof name, "model.layers.%d.%s.experts.%d.%s.weight", l, block, e,
                         a->expert_names[x == X_GATE ? 0 : x == X_UP ? 1 : 2]);
                TRY(load_matrix(ld, name, rows, cols, ld->nf4, out));
            }
        }
    return PT_OK;
}

/* ---- the model ---- */

/* The names of a multimodal checkpoint's text model: model.language_model.* and lm_head (transformers 5's modules),
 * or language_model.model.* and language_model.lm_head (transformers 4.x's files, which transformers 5 still
 * writes for the llava line: Mistral 3, Gemma 3); the info line counts the tensors left unread. */
static pt_status text_names(hf_loader *ld)
{
    static const char *const pre[2] = {"model.language_model.", "language_model.model."};
    static const char *const head[2] = {"lm_head.weight", "language_model.lm_head.weight"};
    char embed[64];
    for (int i = 0; i < 2; i++) {
        snprintf(embed, sizeof embed, "%sembed_tokens.weight", pre[i]);
        if (!st_set_find(ld->s, embed, NULL)) continue;
        ld->pre = pre[i], ld->head = head[i];
        size_t other = 0, np = strlen(pre[i]), nh = strlen("language_model.");
        bool audio = false; /* gemma4's audio tower */
        for (size_t e = 0; e < ld->s->n_entries; e++) {
            const char *n = ld->s->entries[e].name;
            other += strncmp(n, pre[i], np) && strncmp(n, "lm_head.", 8) && strncmp(n, "language_model.", nh);
            audio = audio || strstr(n, "audio_tower.");
        }
        log_info("%s: a multimodal %s checkpoint: ptrain loads its text model (%s*) and leaves its %zu other "
                 "tensors (%s) unread\n", shown_text(ld->s->dir).s, ld->hc->model_type, pre[i], other,
                 audio ? "the vision and audio towers, their projectors" : "the vision tower, the projector");
        return PT_OK;
    }
    return ERR(PT_ERR_USER, "%s: a multimodal %s checkpoint without model.language_model.embed_tokens.weight or "
               "language_model.model.embed_tokens.weight: ptrain finds its text model by these names; is the "
               "download complete?", shown_text(where(ld)).s, ld->hc->model_type);
}

static pt_status load_layer(const hf_loader *ld, int l, pt_layer_weights *w)
{
    const pt_model_config *c = &ld->hc->cfg;
    bool plus_one = arch_info(c->arch)->norm_plus_one, sparse = model_layer_moe(c, l);
    char name[192];
    if (sparse) TRY(arch_info(c->arch)->gptoss_moe ? load_gptoss_experts(ld, l, w) : load_experts(ld, l, w));
    for (int slot = 0; slot < W_COUNT; slot++) {
        if (sparse && (slot == W_GATE || slot == W_UP || slot == W_DOWN)) continue; /* the experts instead */
        if (!model_slot_in_layer(c, l, slot)) continue;
        snprintf(name, sizeof name, "%slayers.%d.%s", ld->pre, l, arch_info(c->arch)->hf_names[slot]);
        if (c->attn_gate && slot == W_Q_GATE) continue; /* with W_Q */
        if (c->attn_gate && slot == W_Q) {
            TRY(load_gated_q(ld, name, w));
            continue;
        }
        int64_t rows, cols, row0 = 0, rows_all;
        int lead;
        if (!slot_shape(c, l, slot, &rows, &cols)) continue;
        if (!model_fused_part(c, slot, &lead, &row0, &rows_all)) rows_all = rows;
        if (slot == W_LIN_CONV) TRY(load_conv(ld, name, rows, cols, &w->w[slot]));
        else if (rows) TRY(load_rows(ld, name, row0, rows, rows_all, cols, ld->nf4, &w->w[slot]));
        else TRY(load_vector(ld, name, cols, plus_one && arch_slot_is_norm(slot), &w->w[slot]));
    }
    return PT_OK;
}

/* Layer l's columns of embed_tokens_per_layer [ple_vocab, n_layers * ple] as a table of its own: the bytes as
 * stored (F32/F16/BF16), or NF4 under load_in_4bit when ple is whole 64-blocks. */
static pt_status ple_columns(const hf_loader *ld, const st_file *f, const st_tensor *t, int l, pt_tensor *out)
{
    const pt_model_config *c = &ld->hc->cfg;
    int64_t v = c->ple_vocab, p = c->ple_dim, width = (int64_t)c->n_layers * p, shape[2] = {v, p};
    pt_dtype keep = t->dtype == ST_F32 ? PT_F32 : t->dtype == ST_F16 ? PT_F16 : t->dtype == ST_BF16 ? PT_BF16 : PT_DTYPE_COUNT;
    if (!(ld->nf4 && p % NF4_BLOCK == 0) && keep != PT_DTYPE_COUNT) {
        size_t es = t->nbytes / (size_t)(v * width);
        char *buf = malloc((size_t)(v * p) * es);
        TRY_ALLOC(buf);
        for (int64_t r = 0; r < v; r++)
            memcpy(buf + (size_t)(r * p) * es, (const char *)t->data + (size_t)(r * width + l * p) * es, (size_t)p * es);
        *out = tensor_make(keep, 2, shape);
        pt_status st = upload(ld->be, out, buf);
        free(buf);
        return st;
    }
    float *dense = malloc(sizeof(float) * (size_t)(v * p));
    TRY_ALLOC(dense);
    pt_status st = PT_OK;
    for (int64_t r = 0; r < v && st == PT_OK; r++) st = st_read_f32(t, f->path, r * width + l * p, p, dense + r * p);
    if (st != PT_OK) {
        free(dense);
        return st;
    }
    return upload_floats(ld, dense, v, p, ld->nf4 && p % NF4_BLOCK == 0, out);
}

/* Gemma 4's model-level parts: the per-layer embedding table cut into the layers' W_PLE_EMBED (kept as stored,
 * or NF4 under load_in_4bit: on the small sizes it outweighs the rest of the model; never widened to f32 whole),
 * the model projection's rows of each layer (W_PLE_MODEL), its norm, the layers' scalars and the value norm's vector of ones. */
static pt_status load_gemma4(const hf_loader *ld, pt_model *m)
{
    const pt_model_config *c = &m->cfg;
    int64_t width = (int64_t)c->n_layers * c->ple_dim, hd = model_layer_head_dim(c, c->n_layers - 1);
    if (c->head_dim > hd) hd = c->head_dim;
    float *host = malloc(sizeof(float) * (size_t)(hd > c->n_layers ? hd : c->n_layers));
    TRY_ALLOC(host);
    for (int64_t i = 0; i < hd; i++) host[i] = 1.0f;
    m->ones = tensor_make(PT_F32, 1, &hd);
    pt_status st = upload(ld->be, &m->ones, host);
    m->layer_scalar = malloc(sizeof(float) * (size_t)c->n_layers);
    if (st == PT_OK && !m->layer_scalar) st = ERR(PT_ERR_NOMEM, "out of memory");
    for (int l = 0; st == PT_OK && l < c->n_layers; l++) {
        char name[96];
        const st_tensor *t;
        const st_file *f;
        snprintf(name, sizeof name, "%slayers.%d.layer_scalar", ld->pre, l);
        st = find(ld, name, &t, &f);
        if (st == PT_OK) st = check_shape(f, t, 0, 1);
        if (st == PT_OK) st = st_read_f32(t, f->path, 0, 1, &m->layer_scalar[l]);
        if (st == PT_OK) st = weight_check(ld->tally, f->path, name, WEIGHT_VECTOR, PT_F32, &m->layer_scalar[l], 1, 0);
    }
    free(host);
    TRY(st);
    if (c->ple_dim <= 0) return PT_OK;
    char table[96], proj[96], norm[96];
    snprintf(table, sizeof table, "%sembed_tokens_per_layer.weight", ld->pre);
    snprintf(proj, sizeof proj, "%sper_layer_model_projection.weight", ld->pre);
    snprintf(norm, sizeof norm, "%sper_layer_projection_norm.weight", ld->pre);
    TRY(load_vector(ld, norm, c->ple_dim, false, &m->ple_norm));
    const st_tensor *t;
    const st_file *f;
    TRY(find(ld, table, &t, &f));
    TRY(check_shape(f, t, c->ple_vocab, width));
    TRY(weight_check_st(ld->tally, f->path, table, WEIGHT_EMBEDDING, t->dtype, t->data, c->ple_vocab * width, width));
    for (int l = 0; l < c->n_layers; l++) TRY(ple_columns(ld, f, t, l, &m->layers[l].w[W_PLE_EMBED]));
    for (int l = 0; l < c->n_layers; l++)
        TRY(load_rows(ld, proj, (int64_t)l * c->ple_dim, c->ple_dim, width,
                      c->dim, ld->nf4, &m->layers[l].w[W_PLE_MODEL]));
    return PT_OK;
}

static pt_status load_all(const hf_loader *ld, pt_model *m)
{
    const pt_model_config *c = &m->cfg;
    bool plus_one = arch_info(c->arch)->norm_plus_one;
    m->layers = calloc((size_t)c->n_layers, sizeof *m->layers);
    TRY_ALLOC(m->layers);
    /* embeddings and the lm_head stay as stored, as QLoRA keeps them out of 4-bit */
    char embed[64], norm[64];
    snprintf(embed, sizeof embed, "%sembed_tokens.weight", ld->pre);
    snprintf(norm, sizeof norm, "%snorm.weight", ld->pre);
    TRY(load_matrix(ld, embed, c->vocab, c->dim, false, &m->tok_embd));
    TRY(load_vector(ld, norm, c->dim, plus_one, &m->out_norm));
    if (c->tied_embeddings) m->output = m->tok_embd;
    else TRY(load_matrix(ld, ld->head, c->vocab, c->dim, false, &m->output));
    /* the 16-bit pages read so far are quantized or copied: out of the process's memory (they would otherwise all stay
     * mapped until the end of the load, the size of the file on top of the model made of it) */
    st_set_release(ld->s);
    for (int l = 0; l < c->n_layers; l++) {
        TRY(load_layer(ld, l, &m->layers[l]));
        st_set_release(ld->s);
    }
    if (c->arch == PT_ARCH_GEMMA4) TRY(load_gemma4(ld, m));
    return model_rope_freqs(m, ld->hc->rope_theta, &ld->hc->rope);
}

pt_status model_from_hf(const hf_config *hc, const st_set *s, pt_backend *be, const pt_load_options *opts,
                        pt_model *m)
{
    memset(m, 0, sizeof *m);
    m->be = be;
    m->cfg = hc->cfg;
    weight_tally tally;
    weight_tally_init(&tally, s->dir, hc->cfg.vocab);
    hf_loader ld = {hc, s, be, opts ? opts->load_in_4bit : true, &tally, opts ? opts->quantize_s : NULL,
                    "model.", "lm_head.weight"};
    pt_status st = s->n_files ? PT_OK : ERR(PT_ERR_INTERNAL, "model_from_hf: no safetensors files");
    if (st == PT_OK && hc->text_tower) st = text_names(&ld);
    if (st == PT_OK) st = load_all(&ld, m);
    if (st == PT_OK) st = weight_verdict(&tally);
    if (st != PT_OK) {
        model_free(m);
        return st;
    }
    const pt_model_config *c = &m->cfg;
    m->weight_bytes = m->tok_embd.nbytes + m->out_norm.nbytes + (c->tied_embeddings ? 0 : m->output.nbytes) +
                      m->ple_norm.nbytes + m->ones.nbytes;
    m->weight_bytes += model_expert_bytes(m);
    for (int l = 0; l < c->n_layers; l++)
        for (int i = 0; i < W_COUNT; i++) m->weight_bytes += m->layers[l].w[i].nbytes;
    return PT_OK;
}
