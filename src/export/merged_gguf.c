/* merged_gguf.c — a merged model as GGUF, from a GGUF base: every key/value of the base (its
 * tokenizer and chat template included) is copied, general.file_type is set to the method's, and
 * each tensor is streamed in row chunks: rows are dequantized, the adapter's s·B·A is added where
 * the projection has one (rows in llama.cpp's order), and the result is quantized to the type the
 * method gives that tensor. A tensor whose type does not change and that has no adapter is copied
 * byte for byte. The method names and per-tensor choices follow llama.cpp's quantize tool
 * (q4_k_m: Q6_K for the output and for half of attn_v/ffn_down, Q4_K elsewhere; rows that are not
 * whole 256-blocks fall back as llama.cpp does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"
#include "ptrain/export.h"
#include "ptrain/gguf_write.h"
#include "ptrain/quant.h"

typedef struct {
    const char *name;  /* as users write it (quantization_method) */
    uint32_t base;     /* the type of most 2-d tensors */
    uint32_t output;   /* output.weight (token_embd when tied) */
    uint32_t more;     /* attn_v / ffn_down of the layers llama.cpp gives more bits */
    uint32_t ftype;    /* general.file_type (llama_ftype) */
} quant_method;

static const quant_method methods[] = {
    {"f32", GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, 0},
    {"f16", GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F16, 1},
    {"not_quantized", GGML_TYPE_F16, GGML_TYPE_F16, GGML_TYPE_F16, 1},
    {"bf16", GGML_TYPE_BF16, GGML_TYPE_BF16, GGML_TYPE_BF16, 32},
    {"q8_0", GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 7},
    {"fast_quantized", GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 7},
    {"q4_0", GGML_TYPE_Q4_0, GGML_TYPE_Q6_K, GGML_TYPE_Q4_0, 2},
    {"q4_1", GGML_TYPE_Q4_1, GGML_TYPE_Q6_K, GGML_TYPE_Q4_1, 3},
    {"q5_0", GGML_TYPE_Q5_0, GGML_TYPE_Q6_K, GGML_TYPE_Q5_0, 8},
    {"q5_1", GGML_TYPE_Q5_1, GGML_TYPE_Q6_K, GGML_TYPE_Q5_1, 9},
    {"q4_k_s", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, 14},
    {"q4_k_m", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 15},
    {"quantized", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 15},
    {"q4_k", GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 15},
    {"q5_k_s", GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q5_K, 16},
    {"q5_k_m", GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 17},
    {"q5_k", GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 17},
    {"q6_k", GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, GGML_TYPE_Q6_K, 18},
};

static const quant_method *find_method(const char *name)
{
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
        if (!strcmp(methods[i].name, name)) return &methods[i];
    return NULL;
}

bool export_gguf_method_known(const char *name) { return find_method(name) != NULL; }

const char *export_gguf_method_list(void)
{
    return "f32, f16 (not_quantized), bf16, q8_0 (fast_quantized), q4_0, q4_1, q5_0, q5_1, q4_k_s, q4_k_m "
           "(quantized), q5_k_s, q5_k_m, q6_k";
}

/* llama.cpp's choice of layers that keep more bits: the first and last eighth, every third between. */
static bool more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

/* A type whose blocks fit rows of cols values, as llama.cpp falls back. */
static uint32_t fit_type(uint32_t t, uint64_t cols)
{
    uint32_t block = 1, bytes = 0;
    const char *name;
    gguf_ggml_type_info(t, &name, &block, &bytes);
    if (cols % block == 0) return t;
    switch (t) {
    case GGML_TYPE_Q4_K: return GGML_TYPE_Q5_0;
    case GGML_TYPE_Q5_K: return GGML_TYPE_Q5_1;
    default: return GGML_TYPE_Q8_0;
    }
}

/* The output type of tensor g (layer -1 for tensors outside the blocks). */
static uint32_t choose_type(const quant_method *q, const gguf_tensor *g, int layer, int slot, int n_layers,
                            bool tied)
{
    if (g->n_dims < 2) return GGML_TYPE_F32;
    uint32_t t = q->base;
    if (gguf_str_eq(g->name, "output.weight") || (tied && gguf_str_eq(g->name, "token_embd.weight"))) t = q->output;
    else if ((slot == W_V || slot == W_DOWN) && more_bits(layer, n_layers)) t = q->more;
    return fit_type(t, g->dims[0]);
}

/* Which layer and slot a blk.N.* tensor is (-1, -1 for the others). */
static void tensor_slot(const pt_model_config *cfg, const gguf_tensor *g, int *layer, int *slot, int *permute)
{
    *layer = -1, *slot = -1, *permute = 0;
    char name[128];
    int l;
    snprintf(name, sizeof name, "%.*s", (int)(g->name.len < 127 ? g->name.len : 127), g->name.data);
    if (sscanf(name, "blk.%d.", &l) != 1 || l < 0 || l >= cfg->n_layers) return;
    char want[96];
    for (int w = 0; w < W_COUNT; w++)
        if (model_gguf_tensor_name(cfg, l, w, want, sizeof want, permute) && !strcmp(name, want)) {
            *layer = l, *slot = w;
            return;
        }
    *permute = 0;
}

typedef struct {
    const gguf_file *base;
    const pt_model_config *cfg;
    const pt_lora *lora;
    const quant_method *q;
    uint32_t *types; /* the output type of each base tensor */
} gguf_merge;

static pt_status declare_all(gguf_writer *w, gguf_merge *m)
{
    const gguf_file *f = m->base;
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (!gguf_str_eq(f->kv[i].key, "general.file_type")) TRY(gguf_w_copy_kv(w, &f->kv[i]));
    TRY(gguf_w_u32(w, "general.file_type", m->q->ftype));
    bool tied = gguf_find_tensor(f, "output.weight") == NULL;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *g = &f->tensors[i];
        int layer, slot, permute;
        tensor_slot(m->cfg, g, &layer, &slot, &permute);
        m->types[i] = choose_type(m->q, g, layer, slot, m->cfg->n_layers, tied);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)g->name.len, g->name.data);
        TRY(gguf_w_tensor(w, name, m->types[i], (int)g->n_dims, g->dims));
    }
    return PT_OK;
}

/* Rows row0 .. row0+n of g: dequantized, delta added, quantized to type into out. */
static pt_status convert_rows(const gguf_tensor *g, uint32_t type, const merge_delta *d, int64_t row0, int64_t n,
                              float *dense, void *out)
{
    int64_t cols = (int64_t)g->dims[0];
    size_t in_row = dtype_size_bytes(g->dtype, cols);
    for (int64_t i = 0; i < n; i++)
        TRY(quant_dequantize_row(g->dtype, (const char *)g->data + (size_t)(row0 + i) * in_row, dense + i * cols, cols));
    TRY(merge_delta_add(d, row0, n, dense));
    size_t out_row = gguf_w_tensor_bytes(type, (const uint64_t[]){(uint64_t)cols}, 1);
    for (int64_t i = 0; i < n; i++)
        TRY(quant_quantize_row(gguf_ggml_dtype(type), dense + i * cols, (char *)out + (size_t)i * out_row, cols));
    return PT_OK;
}

static pt_status stream_tensor(gguf_writer *w, const gguf_merge *m, const gguf_tensor *g, uint32_t type)
{
    int layer, slot, permute;
    tensor_slot(m->cfg, g, &layer, &slot, &permute);
    merge_delta d;
    TRY(merge_delta_load(&d, m->lora, layer, slot, permute));
    if (!d.a && type == g->ggml_type) return gguf_w_data(w, g->data, g->nbytes); /* unchanged: the same bytes */
    if (g->dtype == PT_DTYPE_COUNT) {
        merge_delta_free(&d);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)g->name.len, g->name.data);
        return ERR(PT_ERR_USER, "tensor %s has ggml type %u, which ptrain cannot convert; export with its own type",
                   name, g->ggml_type);
    }
    int64_t cols = (int64_t)g->dims[0], rows = (int64_t)(g->nbytes / dtype_size_bytes(g->dtype, cols));
    int64_t chunk = EXPORT_CHUNK_FLOATS / cols > 0 ? EXPORT_CHUNK_FLOATS / cols : 1;
    float *dense = malloc(sizeof(float) * (size_t)(chunk * cols));
    void *out = malloc(sizeof(float) * (size_t)(chunk * cols));
    pt_status st = dense && out ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    for (int64_t r = 0; r < rows && st == PT_OK; r += chunk) {
        int64_t n = rows - r < chunk ? rows - r : chunk;
        st = convert_rows(g, type, &d, r, n, dense, out);
        if (st == PT_OK)
            st = gguf_w_data(w, out, (size_t)n * gguf_w_tensor_bytes(type, (const uint64_t[]){(uint64_t)cols}, 1));
    }
    free(dense);
    free(out);
    merge_delta_free(&d);
    return st;
}

pt_status export_merged_gguf(const char *path, const gguf_file *base, const pt_model_config *cfg, const pt_lora *l,
                             const char *method)
{
    gguf_merge m = {base, cfg, l, find_method(method), NULL};
    if (!m.q)
        return ERR(PT_ERR_USER, "quantization_method %s: ptrain cannot write it yet; choose from %s", method,
                   export_gguf_method_list());
    m.types = calloc(base->n_tensors ? base->n_tensors : 1, sizeof *m.types);
    TRY_ALLOC(m.types);
    gguf_writer *w = NULL;
    pt_status st = gguf_writer_new(&w);
    if (st == PT_OK) st = declare_all(w, &m);
    if (st == PT_OK) st = gguf_w_begin(w, path);
    for (uint64_t i = 0; i < base->n_tensors && st == PT_OK; i++)
        st = stream_tensor(w, &m, &base->tensors[i], m.types[i]);
    if (st == PT_OK) st = gguf_w_finish(w);
    gguf_writer_free(w);
    free(m.types);
    return st;
}
