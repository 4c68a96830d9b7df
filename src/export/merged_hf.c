/* merged_hf.c — a merged model (base + s·B·A) as a Hugging Face directory that transformers and
 * vLLM load: model.safetensors in bf16, f16 or f32, written one tensor at a time in row chunks,
 * plus config.json and the tokenizer files. From a Hugging Face base the files beside the weights
 * are copied (config.json without its quantization_config, with the new dtype); from a GGUF base
 * they are made from the GGUF metadata (hf_meta.c), tensors get their transformers names, llama's
 * q/k rows go back to Hugging Face's order and gemma's norms lose the 1 llama.cpp adds. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"
#include "ptrain/jsonfile.h"
#include "ptrain/export.h"
#include "ptrain/filewrite.h"
#include "ptrain/safefs.h"
#include "ptrain/hf_meta.h"
#include "ptrain/hf_model.h"
#include "ptrain/model_io.h"
#include "ptrain/quant.h"
#include "ptrain/st_write.h"

/* One output tensor and where its rows come from. */
typedef struct {
    char name[128];
    int64_t rows, cols;          /* rows 0: a vector of cols values */
    int layer, slot;             /* the adapter's place; -1 for none */
    const st_tensor *st;         /* a safetensors source */
    const gguf_tensor *gg;       /* or a GGUF source */
    int permute;                 /* GGUF: heads whose rows llama.cpp interleaved */
    bool minus_one;              /* GGUF gemma norms: stored as 1 + w */
    bool copy;                   /* not a float: copied as stored */
    bool scalar;                 /* a 0-dimensional tensor (gemma4's audio tower's clipping bounds): written so */
    int saved;                   /* modules_to_save: the adapter's trained tensor (ADAPTER_SAVED_*) instead; -1: none */
    bool expert;                 /* a sparse layer's experts or router: at says where its adapter rows are */
    merge_expert_place at;
} hf_item;

typedef struct {
    hf_item *items;
    size_t n;
    st_dtype dtype;
} hf_plan;

static bool is_float(st_dtype d) { return d == ST_F32 || d == ST_F16 || d == ST_BF16 || d == ST_F64; }

/* The layer and slot of a transformers tensor name (a multimodal checkpoint's: of its text model), or -1, -1. */
static void hf_slot(const pt_model_config *cfg, const char *file_name, int *layer, int *slot)
{
    *layer = -1, *slot = -1;
    int l;
    char name[256];
    if (!hf_text_own_name(cfg, file_name, name, sizeof name)) return;
    if (sscanf(name, "model.layers.%d.", &l) != 1 || l < 0 || l >= cfg->n_layers) return;
    char want[160];
    for (int w = 0; w < W_COUNT; w++)
        if (arch_hf_tensor(cfg->arch, l, w, want, sizeof want) && !strcmp(want, name)) {
            *layer = l, *slot = w;
            return;
        }
}

static pt_status plan_from_st(const st_set *s, const pt_model_config *cfg, hf_plan *p)
{
    p->items = calloc(s->n_entries + 1, sizeof *p->items); /* one more: an untied lm_head (plan_saved) */
    TRY_ALLOC(p->items);
    for (size_t i = 0; i < s->n_entries; i++) {
        const st_tensor *t = s->entries[i].tensor;
        hf_item *it = &p->items[p->n++];
        snprintf(it->name, sizeof it->name, "%s", t->name);
        it->st = t, it->saved = -1;
        it->expert = merge_expert_place_of(cfg, t->name, &it->at);
        bool fused = it->expert && t->ndim == 3; /* transformers 5's [E, rows, cols]: streamed as E·rows rows */
        it->copy = !is_float(t->dtype) || (t->ndim > 2 && !fused);
        it->scalar = t->ndim == 0;
        it->rows = t->ndim == 2 ? t->shape[0] : fused ? t->shape[0] * t->shape[1] : 0;
        it->cols = t->ndim >= 1 ? t->shape[t->ndim - 1] : 1;
        hf_slot(cfg, t->name, &it->layer, &it->slot);
        if (it->expert) it->layer = it->at.layer, it->slot = it->at.slot;
    }
    return PT_OK;
}

static pt_status add_gguf_item(hf_plan *p, const gguf_file *f, const char *gname, const char *hname, int layer,
                               int slot, int permute, bool minus_one)
{
    const gguf_tensor *g = gguf_find_tensor(f, gname);
    if (!g) return ERR(PT_ERR_USER, "%s: tensor %s is missing", shown_text(f->path).s, shown_text(gname).s);
    if (g->dtype == PT_DTYPE_COUNT)
        return ERR(PT_ERR_USER, "%s: tensor %s has ggml type %u, which ptrain cannot convert", shown_text(f->path).s,
                   shown_text(gname).s, g->ggml_type);
    hf_item *it = &p->items[p->n++];
    snprintf(it->name, sizeof it->name, "%s", hname);
    it->gg = g, it->saved = -1;
    it->rows = g->n_dims >= 2 ? (int64_t)g->dims[1] : 0;
    it->cols = (int64_t)g->dims[0];
    it->layer = layer, it->slot = slot, it->permute = permute, it->minus_one = minus_one;
    return PT_OK;
}

typedef struct {
    hf_plan *p;
    const gguf_file *f;
} gguf_walk;

static pt_status add_gguf_tensor(void *ctx, const export_tensor *t)
{
    const gguf_walk *w = ctx;
    return add_gguf_item(w->p, w->f, t->gguf, t->hf, t->layer, t->slot, t->permute, t->gemma_norm);
}

static pt_status plan_from_gguf(const gguf_file *f, const pt_model_config *cfg, hf_plan *p)
{
    p->items = calloc((size_t)cfg->n_layers * W_COUNT + 3, sizeof *p->items);
    TRY_ALLOC(p->items);
    return export_each_tensor(cfg, add_gguf_tensor, &(gguf_walk){p, f});
}

/* modules_to_save: the embedding and LM head rows come from the adapter's trained tensors. A base
 * with tied embeddings whose adapter trained either gets its own lm_head (the trained one, or the
 * base's embedding), as PEFT's merge_and_unload leaves the two modules apart; *untie then says that
 * config.json must say tie_word_embeddings: false. p->items has room for one more. */
static pt_status plan_saved(hf_plan *p, const pt_adapter *l, bool *untie)
{
    *untie = false;
    if (!l || (!l->saved[0].data && !l->saved[1].data)) return PT_OK;
    hf_item *embed = NULL, *head = NULL;
    for (size_t i = 0; i < p->n; i++) {
        const char *n = p->items[i].name;
        size_t len = strlen(n);
        if (len >= 19 && !strcmp(n + len - 19, "embed_tokens.weight")) embed = &p->items[i];
        if (len >= 14 && !strcmp(n + len - 14, "lm_head.weight")) head = &p->items[i]; /* a wrapper's too */
    }
    if (!embed) return ERR(PT_ERR_USER, "the base has no embed_tokens weight for the adapter's modules_to_save");
    if (!head) { /* tied: lm_head from here on is its own tensor */
        head = &p->items[p->n++];
        *head = *embed;
        snprintf(head->name, sizeof head->name, "lm_head.weight");
        *untie = true;
    }
    if (l->saved[0].data) embed->saved = 0, embed->copy = false;
    if (l->saved[1].data) head->saved = 1, head->copy = false;
    return PT_OK;
}

/* config.json (already in dir) with tie_word_embeddings false. */
static pt_status untie_config(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", dir);
    json_error_t e;
    json_t *c = jsonfile_load(path, 0, &e);
    if (!c) return ERR(PT_ERR_USER, "%s: line %d: %s", shown_text(path).s, e.line, e.text);
    json_object_set_new(c, "tie_word_embeddings", json_false());
    json_t *text_cfg = json_object_get(c, "text_config");
    if (json_is_object(text_cfg)) json_object_set_new(text_cfg, "tie_word_embeddings", json_false());
    char *text = json_dumps(c, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(c);
    TRY_ALLOC(text);
    pt_status st = fw_write_file(path, text, strlen(text));
    free(text);
    return st;
}

/* llama.cpp's row of Hugging Face row r of a q/k weight (heads of hd rows). */
static int64_t gguf_row(int64_t r, int64_t hd)
{
    int64_t h = r / hd, within = r % hd, half = hd / 2;
    return h * hd + 2 * (within % half) + within / half;
}

static pt_status read_rows(const hf_item *it, const pt_adapter *l, int64_t row0, int64_t n, float *dense)
{
    int64_t cols = it->cols;
    if (it->saved >= 0) { /* modules_to_save: the trained rows, as the adapter holds them */
        pt_tensor v = tensor_rows(&l->saved[it->saved], row0, n);
        return backend_download(l->be, &v, dense, v.nbytes);
    }
    if (it->st) TRY(st_read_f32(it->st, it->name, row0 * cols, n * cols, dense));
    else {
        size_t row_bytes = dtype_size_bytes(it->gg->dtype, cols);
        int64_t hd = it->permute ? it->rows / it->permute : 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t g = it->permute ? gguf_row(row0 + i, hd) : row0 + i;
            TRY(quant_dequantize_row(it->gg->dtype, (const char *)it->gg->data + (size_t)g * row_bytes,
                                     dense + i * cols, cols));
        }
    }
    if (it->minus_one)
        for (int64_t i = 0; i < n * cols; i++) dense[i] -= 1.0f;
    return PT_OK;
}

static void convert(const float *src, int64_t n, st_dtype to, void *dst)
{
    if (to == ST_F32) memcpy(dst, src, sizeof(float) * (size_t)n);
    for (int64_t i = 0; to != ST_F32 && i < n; i++)
        ((uint16_t *)dst)[i] = to == ST_BF16 ? quant_f32_to_bf16(src[i]) : quant_f32_to_f16(src[i]);
}

static pt_status stream_item(st_writer *w, const hf_item *it, const pt_adapter *l, st_dtype to)
{
    if (it->saved >= 0 && (!l || !l->saved[it->saved].data || l->saved[it->saved].shape[0] != it->rows ||
                           l->saved[it->saved].shape[1] != it->cols))
        return ERR(PT_ERR_USER, "tensor %s is [%lld, %lld]; the adapter's %s is not", shown_text(it->name).s,
                   (long long)it->rows, (long long)it->cols, adapter_saved_module(it->saved));
    if (it->copy && l && it->layer >= 0 && it->slot >= 0 && adapter_at(l, it->layer, it->slot))
        return ERR(PT_ERR_USER, "tensor %s is %s, not a 16/32-bit matrix: ptrain cannot merge its adapter into it",
                   shown_text(it->name).s, st_dtype_name(it->st->dtype));
    if (it->copy) {
        pt_status st = st_w_data(w, it->st->data, it->st->nbytes);
        merge_release(it->st->data, it->st->nbytes);
        return st;
    }
    merge_delta d;
    TRY(it->expert ? merge_delta_load_expert(&d, l, &it->at) : merge_delta_load(&d, l, it->layer, it->slot, 0));
    int64_t rows = it->rows ? it->rows : 1, cols = it->cols;
    int64_t chunk = EXPORT_CHUNK_FLOATS / cols > 0 ? EXPORT_CHUNK_FLOATS / cols : 1;
    float *dense = malloc(sizeof(float) * (size_t)(chunk * cols));
    void *out = malloc(sizeof(float) * (size_t)(chunk * cols));
    pt_status st = dense && out ? merge_delta_check(&d, it->name, rows, cols) : ERR(PT_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows && st == PT_OK; r += chunk) {
        int64_t n = rows - r < chunk ? rows - r : chunk;
        st = read_rows(it, l, r, n, dense);
        if (st == PT_OK) st = merge_delta_add(&d, r, n, dense);
        if (st == PT_OK) convert(dense, n * cols, to, out);
        if (st == PT_OK) st = st_w_data(w, out, (size_t)(n * cols) * st_dtype_size(to));
    }
    if (it->gg) merge_release(it->gg->data, it->gg->nbytes);
    if (it->st) merge_release(it->st->data, it->st->nbytes);
    free(dense);
    free(out);
    merge_delta_free(&d);
    return st;
}

static pt_status write_weights(const char *path, const hf_plan *p, const pt_adapter *l, st_dtype to)
{
    st_writer w;
    st_writer_init(&w);
    pt_status st = st_w_meta(&w, "format", "pt");
    for (size_t i = 0; i < p->n && st == PT_OK; i++) {
        const hf_item *it = &p->items[i];
        int64_t shape[2] = {it->rows ? it->rows : it->cols, it->cols};
        if (it->copy) st = st_w_tensor(&w, it->name, it->st->dtype, it->st->ndim, it->st->shape);
        else if (it->st && it->st->ndim == 3) st = st_w_tensor(&w, it->name, to, 3, it->st->shape); /* fused experts */
        else st = st_w_tensor(&w, it->name, to, it->scalar ? 0 : it->rows ? 2 : 1, it->rows ? shape : &it->cols);
    }
    if (st == PT_OK) st = st_w_begin(&w, path);
    for (size_t i = 0; i < p->n && st == PT_OK; i++) st = stream_item(&w, &p->items[i], l, to);
    if (st == PT_OK) st = st_w_finish(&w);
    st_writer_free(&w);
    return st;
}

static const char *torch_name(st_dtype d) { return d == ST_BF16 ? "bfloat16" : d == ST_F16 ? "float16" : "float32"; }

static pt_status read_small(const char *path, char **text, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ERR(PT_ERR_USER, "cannot read %s", shown_text(path).s);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *text = malloc((size_t)(n > 0 ? n : 1));
    size_t got = *text ? fread(*text, 1, (size_t)n, f) : 0;
    fclose(f);
    if (!*text || n < 0 || got != (size_t)n) {
        free(*text);
        return ERR(PT_ERR_USER, "cannot read %s", shown_text(path).s);
    }
    *len = got;
    return PT_OK;
}

/* The base's config.json without quantization_config, with the new dtype. */
static pt_status write_config(const char *base_dir, const char *dir, st_dtype to)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", base_dir);
    json_error_t e;
    json_t *c = jsonfile_load(path, 0, &e);
    if (!c) return ERR(PT_ERR_USER, "%s: line %d: %s", shown_text(path).s, e.line, e.text);
    json_object_del(c, "quantization_config");
    json_object_set_new(c, "torch_dtype", json_string(torch_name(to)));
    if (json_object_get(c, "dtype")) json_object_set_new(c, "dtype", json_string(torch_name(to)));
    char *text = json_dumps(c, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    json_decref(c);
    TRY_ALLOC(text);
    snprintf(path, sizeof path, "%s/config.json", dir);
    pt_status st = fw_write_file(path, text, strlen(text));
    free(text);
    return st;
}

/* Copy the tokenizer and generation files the base directory has. */
static pt_status copy_side_files(const char *base_dir, const char *dir)
{
    static const char *const names[] = {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                                        "generation_config.json", "chat_template.jinja", "tokenizer.model",
                                        "added_tokens.json", "vocab.json", "merges.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char src[4200], dst[4200], *text = NULL;
        size_t len = 0;
        snprintf(src, sizeof src, "%s/%s", base_dir, names[i]);
        FILE *probe = fopen(src, "rb");
        if (!probe) continue;
        fclose(probe);
        snprintf(dst, sizeof dst, "%s/%s", dir, names[i]);
        TRY(read_small(src, &text, &len));
        pt_status st = fw_write_file(dst, text, len);
        free(text);
        TRY(st);
    }
    return PT_OK;
}

static pt_status parse_dtype(const char *name, st_dtype *out)
{
    if (!strcmp(name, "bf16") || !strcmp(name, "bfloat16")) *out = ST_BF16;
    else if (!strcmp(name, "f16") || !strcmp(name, "float16")) *out = ST_F16;
    else if (!strcmp(name, "f32") || !strcmp(name, "float32")) *out = ST_F32;
    else return ERR(PT_ERR_USER, "merged model dtype %s: choose bf16, f16 or f32", shown_text(name).s);
    return PT_OK;
}

static pt_status from_hf(const char *dir, const char *base, const pt_model_config *cfg, const pt_adapter *l, st_dtype to)
{
    char base_dir[4096], path[4200];
    model_hf_dir(base, base_dir, sizeof base_dir);
    snprintf(path, sizeof path, "%s/config.json", base_dir);
    hf_config hc;
    TRY(hf_config_read(path, &hc));
    if (hc.bnb_4bit)
        return ERR(PT_ERR_USER,
                   "%s is a bitsandbytes 4-bit checkpoint; ptrain merges into 16/32-bit bases only: "
                   "export with the original model as model_name (e.g. the repository without -bnb-4bit)",
                   shown_text(base_dir).s);
    st_set s;
    size_t bl = strlen(base);
    TRY(st_set_open(bl > 12 && !strcmp(base + bl - 12, ".safetensors") ? base : base_dir, &s));
    hf_plan p = {0};
    bool untie = false;
    pt_status st = plan_from_st(&s, cfg, &p);
    if (st == PT_OK) st = plan_saved(&p, l, &untie);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (st == PT_OK) st = write_weights(path, &p, l, to);
    if (st == PT_OK) st = write_config(base_dir, dir, to);
    if (st == PT_OK && untie) st = untie_config(dir);
    if (st == PT_OK) st = copy_side_files(base_dir, dir);
    free(p.items);
    st_set_close(&s);
    return st;
}

static pt_status from_gguf(const char *dir, const char *base, const pt_model_config *cfg, const pt_adapter *l,
                           st_dtype to)
{
    gguf_file f;
    TRY(gguf_open(base, &f));
    hf_plan p = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    bool untie = false;
    pt_status st = plan_from_gguf(&f, cfg, &p);
    if (st == PT_OK) st = plan_saved(&p, l, &untie);
    if (st == PT_OK) st = hf_meta_from_gguf(&f, cfg, dir, torch_name(to));
    if (st == PT_OK && untie) st = untie_config(dir);
    if (st == PT_OK) st = write_weights(path, &p, l, to);
    free(p.items);
    gguf_close(&f);
    return st;
}

pt_status export_merged_hf(const char *dir, const char *base, bool base_is_gguf, const pt_model_config *cfg,
                           const pt_adapter *l, const char *dtype)
{
    st_dtype to = ST_BF16;
    TRY(parse_dtype(dtype, &to));
    TRY(safefs_mkdirs(dir));
    return base_is_gguf ? from_gguf(dir, base, cfg, l, to) : from_hf(dir, base, cfg, l, to);
}
