/* merged_gguf.c — a merged model as GGUF. From a GGUF base every key/value of the base (its
 * tokenizer and chat template included) is copied and general.file_type set to the method's; from
 * a Hugging Face base the metadata comes from gguf_meta.c, tensors get llama.cpp's names, llama's
 * q/k rows are interleaved as llama.cpp's converter does, gemma's norms get their 1 added, and
 * Llama 3's rope scaling becomes the rope_freqs tensor. Each tensor is streamed in row chunks:
 * rows are read as fp32, the adapter's s·B·A is added where the projection has one (in the
 * output's row order), and the result is quantized to the type the method gives that tensor. A
 * GGUF tensor whose type does not change and that has no adapter is copied byte for byte. The
 * method names and per-tensor choices follow llama.cpp's quantize tool (q4_k_m: Q6_K for the
 * output and for half of attn_v/ffn_down, Q4_K elsewhere; rows that are not whole 256-blocks fall
 * back as llama.cpp does). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"
#include "ptrain/export.h"
#include "ptrain/gguf_meta.h"
#include "ptrain/gguf_write.h"
#include "ptrain/hf_model.h"
#include "ptrain/imatrix.h"
#include "ptrain/log.h"
#include "ptrain/model_io.h"
#include "ptrain/quant.h"
#include "ptrain/quant_blocks.h"

/* llama.cpp's choice of layers that keep more bits: the first and last eighth, every third between. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* A type whose blocks fit rows of cols values, as llama.cpp falls back. */
static uint32_t fit_type(uint32_t t, uint64_t cols)
{
    uint32_t block = 1, bytes = 0;
    const char *name;
    gguf_ggml_type_info(t, &name, &block, &bytes);
    if (cols % block == 0) return t;
    if (cols % QK) return GGML_TYPE_F16; /* no 32-block type fits either */
    switch (t) {
    case GGML_TYPE_Q4_K: return GGML_TYPE_Q5_0;
    case GGML_TYPE_Q5_K: return GGML_TYPE_Q5_1;
    default: return GGML_TYPE_Q8_0;
    }
}

/* One tensor of the output and where its rows come from. */
typedef struct {
    char name[96];
    int n_dims;
    uint64_t dims[4];         /* GGUF order: dims[0] is the row length */
    int layer, slot, permute; /* the adapter's place (-1: none); heads whose q/k rows are interleaved */
    uint32_t type;            /* output ggml type */
    const gguf_tensor *gg;    /* a GGUF source (rows already in llama.cpp's order) */
    const st_tensor *st;      /* or a safetensors source (HF order) */
    bool plus_one;            /* HF gemma norms: llama.cpp stores 1 + w */
    const float *values;      /* or values made here (rope_freqs) */
    int saved;                /* modules_to_save: 1 + the adapter's trained tensor (ADAPTER_SAVED_*) instead; 0: none */
    int64_t row0, rows_all;   /* a part of a fused safetensors weight (granite4's gate and up rows of input_linear):
                               * its first row there and the fused weight's (and its adapter's) rows; 0, 0: whole */
    bool expert;              /* a sparse layer's ffn_*_exps or router: at says where its adapter rows are */
    merge_expert_place at;
} gguf_item;

typedef struct {
    gguf_item *items;
    size_t n;
    const pt_adapter *lora;
    const pt_imatrix *im;        /* imatrix_file, or NULL */
    int n_weighted, n_quantized; /* tensors quantized with the importance matrix, of those it could weight */
} gguf_plan;

/* The output type of item it (layer -1 for tensors outside the blocks). */
static uint32_t choose_type(const gguf_method *q, const gguf_item *it, int n_layers, bool tied)
{
    if (it->n_dims < 2) return GGML_TYPE_F32;
    if (it->expert && it->slot == W_ROUTER) { /* ffn_gate_inp: as llama.cpp's quantize, never quantized */
        uint32_t g = it->gg ? it->gg->ggml_type : GGML_TYPE_F32;
        return g == GGML_TYPE_F16 || g == GGML_TYPE_BF16 ? g : GGML_TYPE_F32;
    }
    uint32_t t = q->base;
    if (!strcmp(it->name, "output.weight") || (tied && !strcmp(it->name, "token_embd.weight"))) t = q->output;
    else if ((it->slot == W_V || it->slot == W_DOWN) && more_bits(it->layer, n_layers)) t = q->more;
    return fit_type(t, it->dims[0]);
}

/* Which layer and slot a blk.N.* tensor is (-1, -1 for the others). */
static void tensor_slot(const pt_model_config *cfg, gguf_item *it)
{
    it->layer = -1, it->slot = -1, it->permute = 0;
    it->expert = merge_expert_place_of(cfg, it->name, &it->at);
    if (it->expert) {
        it->layer = it->at.layer, it->slot = it->at.slot;
        return;
    }
    int l;
    if (sscanf(it->name, "blk.%d.", &l) != 1 || l < 0 || l >= cfg->n_layers) return;
    char want[96];
    for (int w = 0; w < W_COUNT; w++) {
        int permute = 0;
        if (model_gguf_tensor_name(cfg, l, w, want, sizeof want, &permute) && !strcmp(it->name, want)) {
            it->layer = l, it->slot = w, it->permute = permute;
            return;
        }
    }
}

static pt_status plan_from_gguf(const gguf_file *f, const pt_model_config *cfg, const gguf_method *q, gguf_plan *p)
{
    p->items = calloc(f->n_tensors + 1, sizeof *p->items); /* one more: an untied output (plan_saved) */
    TRY_ALLOC(p->items);
    bool tied = gguf_find_tensor(f, "output.weight") == NULL;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *g = &f->tensors[i];
        gguf_item *it = &p->items[p->n++];
        snprintf(it->name, sizeof it->name, "%.*s", (int)(g->name.len < 95 ? g->name.len : 95), g->name.data);
        it->gg = g;
        it->n_dims = (int)g->n_dims;
        memcpy(it->dims, g->dims, sizeof it->dims);
        tensor_slot(cfg, it);
        it->type = choose_type(q, it, cfg->n_layers, tied);
        if (it->type != g->ggml_type && g->dtype == PT_DTYPE_COUNT)
            return ERR(PT_ERR_USER, "%s: tensor %s has ggml type %u, which ptrain cannot convert; export with its "
                       "own type", shown_text(f->path).s, shown_bytes(g->name.data, (size_t)g->name.len).s,
                       g->ggml_type);
    }
    return PT_OK;
}

/* An item from safetensors tensor `hname` named `gname` in the GGUF (rows 0: a vector); rows > 0: its rows
 * [row0, row0 + rows) only. */
static pt_status add_st_item(gguf_plan *p, const st_set *s, const pt_model_config *cfg, const char *hname,
                             const char *gname, const export_tensor *e, int64_t row0, int64_t rows)
{
    const st_tensor *t = hf_text_find(s, cfg, hname, NULL);
    if (!t) return ERR(PT_ERR_USER, "%s: tensor %s is missing", shown_text(s->dir).s, shown_text(hname).s);
    if (t->ndim < 1 || t->ndim > 2 || !(t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16))
        return ERR(PT_ERR_USER, "%s: tensor %s is %s; ptrain converts 16/32-bit matrices and vectors only",
                   shown_text(s->dir).s, shown_text(hname).s, st_dtype_name(t->dtype));
    if (rows > 0 && (t->ndim != 2 || row0 + rows > t->shape[0]))
        return ERR(PT_ERR_USER, "%s: tensor %s is not [%lld+, cols]: the configuration's sizes do not fit it",
                   shown_text(s->dir).s, shown_text(hname).s, (long long)(row0 + rows));
    gguf_item *it = &p->items[p->n++];
    snprintf(it->name, sizeof it->name, "%s", gname);
    it->st = t;
    it->n_dims = t->ndim;
    it->dims[0] = (uint64_t)t->shape[t->ndim - 1];
    it->dims[1] = t->ndim == 2 ? (uint64_t)(rows > 0 ? rows : t->shape[0]) : 1;
    it->row0 = rows > 0 ? row0 : 0, it->rows_all = rows > 0 ? t->shape[0] : 0;
    it->layer = e->layer, it->slot = e->slot, it->permute = e->permute, it->plus_one = e->gemma_norm;
    return PT_OK;
}

typedef struct {
    gguf_plan *p;
    const st_set *s;
    const pt_model_config *cfg;
} st_walk;

/* A tensor of the walk; a fused weight whose parts llama.cpp stores apart (granite4's input_linear as ffn_gate and
 * ffn_up, as its converter splits it) becomes one item per part, each under the fused weight's adapter. */
static pt_status add_st_tensor(void *ctx, const export_tensor *t)
{
    const st_walk *w = ctx;
    int lead;
    int64_t row0, all;
    if (t->slot < 0 || !arch_info(w->cfg->arch)->fused_mlp || !model_fused_part(w->cfg, t->slot, &lead, &row0, &all))
        return add_st_item(w->p, w->s, w->cfg, t->hf, t->gguf, t, 0, 0);
    char name[96];
    int permute;
    for (int part = t->slot; part < W_COUNT; part++) {
        int64_t out, in;
        if (!model_fused_part(w->cfg, part, &lead, &row0, &all) || lead != t->slot) continue;
        if (!model_gguf_tensor_name(w->cfg, t->layer, part, name, sizeof name, &permute) ||
            !model_proj_shape(w->cfg, part, &out, &in))
            return ERR(PT_ERR_INTERNAL, "add_st_tensor: slot %d of layer %d has no GGUF name", part, t->layer);
        TRY(add_st_item(w->p, w->s, w->cfg, t->hf, name, t, row0, out));
    }
    return PT_OK;
}

static pt_status plan_from_st(const st_set *s, const pt_model_config *cfg, gguf_plan *p)
{
    p->items = calloc((size_t)cfg->n_layers * W_COUNT + 5, sizeof *p->items);
    TRY_ALLOC(p->items);
    return export_each_tensor(cfg, add_st_tensor, &(st_walk){p, s, cfg});
}

/* Llama 3's rope scaling as llama.cpp takes it: per-frequency divisors of the plain frequencies. */
static pt_status add_rope_freqs(gguf_plan *p, const hf_config *hc, float **store)
{
    int half = hc->cfg.head_dim / 2;
    float *plain = malloc(sizeof(float) * (size_t)half * 2);
    TRY_ALLOC(plain);
    float *scaled = plain + half;
    pt_status st = rope_inv_freq(hc->rope_theta, hc->cfg.head_dim, NULL, plain);
    if (st == PT_OK) st = rope_inv_freq(hc->rope_theta, hc->cfg.head_dim, &hc->rope, scaled);
    for (int i = 0; st == PT_OK && i < half; i++) plain[i] = plain[i] / scaled[i];
    if (st != PT_OK) {
        free(plain);
        return st;
    }
    gguf_item *it = &p->items[p->n++];
    snprintf(it->name, sizeof it->name, "rope_freqs.weight");
    it->n_dims = 1, it->dims[0] = (uint64_t)half, it->dims[1] = 1;
    it->layer = -1, it->slot = -1;
    it->values = *store = plain;
    return PT_OK;
}

/* Phi-3's LongRoPE as llama.cpp's converter writes it: rope_factors_long.weight and rope_factors_short.weight,
 * one value per rotated pair each (*store holds both: long, then short). */
static pt_status add_rope_factors(gguf_plan *p, const hf_config *hc, float **store)
{
    int n = hc->rope.n_factors;
    float *v = malloc(sizeof(float) * (size_t)n * 2);
    TRY_ALLOC(v);
    memcpy(v, hc->rope.long_factor, sizeof(float) * (size_t)n);
    memcpy(v + n, hc->rope.short_factor, sizeof(float) * (size_t)n);
    static const char *const names[2] = {"rope_factors_long.weight", "rope_factors_short.weight"};
    for (int i = 0; i < 2; i++) {
        gguf_item *it = &p->items[p->n++];
        snprintf(it->name, sizeof it->name, "%s", names[i]);
        it->n_dims = 1, it->dims[0] = (uint64_t)n, it->dims[1] = 1;
        it->layer = -1, it->slot = -1;
        it->values = v + i * n;
    }
    *store = v;
    return PT_OK;
}

/* modules_to_save: token_embd and output come from the adapter's trained tensors. A tied base whose
 * adapter trained either gets its own output.weight (the trained LM head, or the base's embedding),
 * as PEFT's merge_and_unload leaves the two modules apart; both are then typed as an untied model's.
 * p->items has room for one more. */
static void plan_saved(gguf_plan *p, const gguf_method *q, int n_layers)
{
    const pt_adapter *l = p->lora;
    if (!l || (!l->saved[0].data && !l->saved[1].data)) return;
    gguf_item *embed = NULL, *head = NULL;
    for (size_t i = 0; i < p->n; i++) {
        if (!strcmp(p->items[i].name, "token_embd.weight")) embed = &p->items[i];
        if (!strcmp(p->items[i].name, "output.weight")) head = &p->items[i];
    }
    if (!embed) return; /* stream_item says so */
    if (!head) {
        head = &p->items[p->n++];
        *head = *embed;
        snprintf(head->name, sizeof head->name, "output.weight");
    }
    if (l->saved[0].data) embed->saved = 1 + ADAPTER_SAVED_EMBED;
    if (l->saved[1].data) head->saved = 1 + ADAPTER_SAVED_HEAD;
    embed->type = choose_type(q, embed, n_layers, false);
    head->type = choose_type(q, head, n_layers, false);
}

/* Rows row0 .. row0+n of it as fp32 in the output's row order. */
static pt_status read_rows(const gguf_item *it, const pt_adapter *l, int64_t row0, int64_t n, float *dense)
{
    int64_t cols = (int64_t)it->dims[0];
    if (it->saved) { /* modules_to_save: the trained rows */
        const pt_tensor *t = &l->saved[it->saved - 1];
        if (t->shape[1] != cols || t->shape[0] != (int64_t)it->dims[1])
            return ERR(PT_ERR_USER, "tensor %s is [%llu, %lld]; the adapter's %s is not", shown_text(it->name).s,
                       (unsigned long long)it->dims[1], (long long)cols, adapter_saved_module(it->saved - 1));
        pt_tensor v = tensor_rows(t, row0, n);
        return backend_download(l->be, &v, dense, v.nbytes);
    }
    if (it->values) {
        memcpy(dense, it->values + row0 * cols, sizeof(float) * (size_t)(n * cols));
        return PT_OK;
    }
    if (it->gg) {
        size_t row_bytes = dtype_size_bytes(it->gg->dtype, cols);
        for (int64_t i = 0; i < n; i++)
            TRY(quant_dequantize_row(it->gg->dtype, (const char *)it->gg->data + (size_t)(row0 + i) * row_bytes,
                                     dense + i * cols, cols));
        return PT_OK;
    }
    int64_t hd = it->permute ? (int64_t)it->dims[1] / it->permute : 0;
    for (int64_t i = 0; i < n; i++) { /* HF rows; llama's q/k interleaved per head as llama.cpp's converter does */
        int64_t src = it->permute ? merge_hf_row(row0 + i, hd) : it->row0 + row0 + i;
        TRY(st_read_f32(it->st, it->name, src * cols, cols, dense + i * cols));
    }
    for (int64_t i = 0; it->plus_one && i < n * cols; i++) dense[i] += 1.0f;
    return PT_OK;
}

static size_t row_bytes(uint32_t type, int64_t cols) { return gguf_w_tensor_bytes(type, (const uint64_t[]){(uint64_t)cols}, 1); }

/* Quantize n rows in parallel (the k-quants' search is the slow part of an export), weighted by qw
 * (an importance matrix's row of cols values) when not NULL. */
static pt_status quantize_rows(uint32_t type, const float *dense, int64_t n, int64_t cols, const float *qw, void *out)
{
    int64_t failed = -1;
    size_t bytes = row_bytes(type, cols);
#pragma omp parallel for schedule(dynamic, 16)
    for (int64_t i = 0; i < n; i++) {
        pt_status r = quant_quantize_row_imatrix(gguf_ggml_dtype(type), dense + i * cols, (char *)out + (size_t)i * bytes,
                                                 cols, qw);
        if (r != PT_OK) {
#pragma omp critical
            failed = i;
        }
    }
    /* again on this thread, so the error message (thread-local) reaches the caller */
    return failed < 0 ? PT_OK
                      : quant_quantize_row_imatrix(gguf_ggml_dtype(type), dense + failed * cols,
                                                   (char *)out + (size_t)failed * bytes, cols, qw);
}

/* The importance matrix's weights for it (NULL: none, or a type that does not use them), counted. */
static pt_status item_weights(gguf_plan *p, const gguf_item *it, const float **qw)
{
    *qw = NULL;
    if (!p->im || !quant_uses_imatrix(gguf_ggml_dtype(it->type))) return PT_OK;
    TRY(imatrix_weights(p->im, it->name, (int64_t)it->dims[0], qw));
    p->n_quantized++;
    p->n_weighted += *qw != NULL;
    return PT_OK;
}

static pt_status stream_item(gguf_writer *w, const gguf_item *it, gguf_plan *p)
{
    const pt_adapter *l = p->lora;
    merge_delta d;
    TRY(it->expert ? merge_delta_load_expert(&d, l, &it->at) : merge_delta_load(&d, l, it->layer, it->slot, it->permute));
    if (!d.a && !it->saved && it->gg && it->type == it->gg->ggml_type) {
        pt_status st = gguf_w_data(w, it->gg->data, it->gg->nbytes);
        merge_release(it->gg->data, it->gg->nbytes);
        return st;
    }
    const float *qw;
    pt_status st = item_weights(p, it, &qw);
    int64_t cols = (int64_t)it->dims[0], rows = 1;
    for (int k = 1; k < it->n_dims; k++) rows *= (int64_t)it->dims[k];
    int64_t chunk = EXPORT_CHUNK_FLOATS / cols > 0 ? EXPORT_CHUNK_FLOATS / cols : 1;
    float *dense = malloc(sizeof(float) * (size_t)(chunk * cols));
    void *out = malloc(sizeof(float) * (size_t)(chunk * cols));
    if (st == PT_OK)
        st = dense && out ? merge_delta_check(&d, it->name, it->rows_all ? it->rows_all : rows, cols)
                          : ERR(PT_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows && st == PT_OK; r += chunk) {
        int64_t n = rows - r < chunk ? rows - r : chunk;
        st = read_rows(it, l, r, n, dense);
        if (st == PT_OK) st = merge_delta_add(&d, it->row0 + r, n, dense); /* a part: its rows of B */
        if (st == PT_OK) st = quantize_rows(it->type, dense, n, cols, qw, out);
        if (st == PT_OK) st = gguf_w_data(w, out, (size_t)n * row_bytes(it->type, cols));
    }
    if (it->gg) merge_release(it->gg->data, it->gg->nbytes);
    if (it->st) merge_release(it->st->data, it->st->nbytes);
    free(dense);
    free(out);
    merge_delta_free(&d);
    return st;
}

static pt_status write_plan(gguf_writer *w, const char *path, gguf_plan *p)
{
    for (size_t i = 0; i < p->n; i++)
        TRY(gguf_w_tensor(w, p->items[i].name, p->items[i].type, p->items[i].n_dims, p->items[i].dims));
    TRY(gguf_w_begin(w, path));
    for (size_t i = 0; i < p->n; i++) TRY(stream_item(w, &p->items[i], p));
    return gguf_w_finish(w);
}

static pt_status copy_kvs(gguf_writer *w, const gguf_file *f, const gguf_method *q)
{
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!gguf_str_eq(f->kv[i].key, "general.file_type")) TRY(gguf_w_copy_kv(w, &f->kv[i]));
    TRY(gguf_w_u32(w, "general.quantization_version", 2));
    return gguf_w_u32(w, "general.file_type", q->ftype);
}

static pt_status from_gguf(const char *path, const char *base, const pt_model_config *cfg, const gguf_method *q,
                           gguf_writer *w, gguf_plan *p)
{
    gguf_file f;
    TRY(gguf_open(base, &f));
    pt_status st = copy_kvs(w, &f, q);
    if (st == PT_OK) st = plan_from_gguf(&f, cfg, q, p);
    if (st == PT_OK) plan_saved(p, q, cfg->n_layers);
    if (st == PT_OK) st = write_plan(w, path, p);
    gguf_close(&f);
    return st;
}

static pt_status hf_metadata(gguf_writer *w, const char *dir, const hf_config *hc, const gguf_method *q)
{
    if (hc->bnb_4bit)
        return ERR(PT_ERR_USER, "%s is a bitsandbytes 4-bit checkpoint; ptrain merges into 16/32-bit bases only: "
                   "export with the original model as model_name", shown_text(dir).s);
    TRY(gguf_meta_from_hf(w, dir, hc, NULL));
    TRY(gguf_w_u32(w, "general.file_type", q->ftype));
    return gguf_w_u32(w, "general.quantization_version", 2);
}

static pt_status from_hf(const char *path, const char *base, const gguf_method *q, gguf_writer *w, gguf_plan *p)
{
    char dir[4096], config[4200];
    model_hf_dir(base, dir, sizeof dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    hf_config hc;
    TRY(hf_config_read(config, &hc));
    TRY(hf_metadata(w, dir, &hc, q));
    st_set s;
    size_t bl = strlen(base);
    TRY(st_set_open(bl > 12 && !strcmp(base + bl - 12, ".safetensors") ? base : dir, &s));
    float *freqs = NULL;
    pt_status st = plan_from_st(&s, &hc.cfg, p);
    if (st == PT_OK && hc.rope.type == PT_ROPE_LLAMA3) st = add_rope_freqs(p, &hc, &freqs);
    if (st == PT_OK && hc.rope.type == PT_ROPE_LONGROPE) st = add_rope_factors(p, &hc, &freqs);
    for (size_t i = 0; st == PT_OK && i < p->n; i++) p->items[i].type = choose_type(q, &p->items[i], hc.cfg.n_layers, hc.cfg.tied_embeddings);
    if (st == PT_OK) plan_saved(p, q, hc.cfg.n_layers);
    if (st == PT_OK) st = write_plan(w, path, p);
    free(freqs);
    st_set_close(&s);
    return st;
}

pt_status export_merged_gguf(const char *path, const char *base, bool base_is_gguf, const pt_model_config *cfg,
                             const pt_adapter *l, const char *method, const pt_imatrix *im)
{
    const gguf_method *q = gguf_method_find(method);
    if (!q)
        return ERR(PT_ERR_USER, "quantization_method %s: ptrain cannot write it yet; choose from %s",
                   shown_text(method).s, gguf_method_list());
    gguf_writer *w = NULL;
    TRY(gguf_writer_new(&w));
    gguf_plan p = {.lora = l, .im = im};
    pt_status st = base_is_gguf ? from_gguf(path, base, cfg, q, w, &p) : from_hf(path, base, q, w, &p);
    gguf_writer_free(w);
    free(p.items);
    if (st == PT_OK && im)
        log_info("export     %s: %d of the %d tensors whose type uses an importance matrix quantized with %s's (the "
                 "others have no entry in it)\n", shown_text(path).s, p.n_weighted, p.n_quantized, shown_text(im->path).s);
    return st;
}
