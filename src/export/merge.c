/* merge.c — the LoRA delta of one projection, s·B·A, added to a few rows of a dequantized weight
 * at a time: exporters stream a weight in row chunks and never hold it whole in float32; and the
 * walk over a model's tensors by their llama.cpp and Hugging Face names that both merged formats
 * convert with. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "export_internal.h"
#include "ptrain/hf_model.h"
#include "ptrain/model.h"

int64_t merge_hf_row(int64_t g, int64_t hd)
{
    int64_t h = g / hd, within = g % hd;
    return h * hd + (within % 2) * (hd / 2) + within / 2;
}

pt_status merge_delta_load(merge_delta *d, const pt_adapter *l, int layer, int w, int permute)
{
    memset(d, 0, sizeof *d);
    const adapter_pair *p = l && layer >= 0 && w >= 0 ? adapter_at(l, layer, w) : NULL;
    if (!p) return PT_OK;
    d->r = p->a.shape[0], d->in = p->a.shape[1], d->out = p->b.shape[0];
    d->scale = p->scale;
    d->permute = permute;
    d->a = malloc(p->a.nbytes);
    d->b = malloc(p->b.nbytes);
    if (!d->a || !d->b) {
        merge_delta_free(d);
        return ERR(PT_ERR_NOMEM, "out of memory for the adapter of layer %d", layer);
    }
    pt_status st = backend_download(l->be, &p->a, d->a, p->a.nbytes);
    if (st == PT_OK) st = backend_download(l->be, &p->b, d->b, p->b.nbytes);
    /* qwen35's q_proj: B's rows as the file's (transformers' interleaving of each head's queries and gates) */
    if (st == PT_OK) st = adapter_peft_order(l, w, d->b, d->out, d->r, true);
    if (st == PT_OK && p->mag) {
        d->mag = malloc(sizeof(float) * (size_t)d->out);
        if (d->mag) memcpy(d->mag, p->mag, sizeof(float) * (size_t)d->out);
        else st = ERR(PT_ERR_NOMEM, "out of memory for the adapter of layer %d", layer);
        if (st == PT_OK) st = adapter_peft_order(l, w, d->mag, d->out, 1, true);
    }
    if (st != PT_OK) merge_delta_free(d);
    return st;
}

pt_status merge_delta_check(const merge_delta *d, const char *tensor, int64_t rows, int64_t cols)
{
    if (!d->a || (d->out == rows && d->in == cols)) return PT_OK;
    if (d->n_exp && d->in == cols && d->per_exp > 0 && rows % d->per_exp == 0 &&
        d->e0 + rows / d->per_exp <= d->n_exp && d->b_off + d->per_exp <= d->out)
        return PT_OK;
    return ERR(PT_ERR_USER,
               "tensor %s is [%lld, %lld] but the model's configuration and the adapter make it "
               "[%lld, %lld]; the base model file is inconsistent",
               shown_text(tensor).s, (long long)rows, (long long)cols, (long long)d->out, (long long)d->in);
}

/* DoRA: each merged row (W + s·B·A) times its magnitude over its norm. */
static void dora_rows(const merge_delta *d, int64_t row0, int64_t n, float *dst)
{
    int64_t hd = d->permute ? d->out / d->permute : 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t src = d->permute ? merge_hf_row(row0 + i, hd) : row0 + i;
        float *row = dst + i * d->in;
        double ss = 0;
        for (int64_t k = 0; k < d->in; k++) ss += (double)row[k] * row[k];
        float f = (float)((double)d->mag[src] / sqrt(ss));
        for (int64_t k = 0; k < d->in; k++) row[k] *= f;
    }
}

/* Experts: the rows of each expert in [row0, row0 + n) get s·Bₑ Aₑ, one product per expert. */
static pt_status experts_add(const merge_delta *d, int64_t row0, int64_t n, float *dst)
{
    float *rows = malloc(sizeof(float) * (size_t)(n * d->r));
    TRY_ALLOC(rows);
    for (int64_t i = 0; i < n;) {
        int64_t g = row0 + i, e = d->e0 + g / d->per_exp, j = g % d->per_exp;
        int64_t run = d->per_exp - j < n - i ? d->per_exp - j : n - i;
        memcpy(rows, d->b + (e * d->out + d->b_off + j) * d->r, sizeof(float) * (size_t)(run * d->r));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)run, (int)d->in, (int)d->r, d->scale, rows,
                    (int)d->r, d->a + e * d->r * d->in, (int)d->in, 1.0f, dst + i * d->in, (int)d->in);
        i += run;
    }
    free(rows);
    return PT_OK;
}

pt_status merge_delta_add(const merge_delta *d, int64_t row0, int64_t n, float *dst)
{
    if (!d->a || n == 0) return PT_OK;
    if (d->n_exp) return experts_add(d, row0, n, dst);
    float *rows = malloc(sizeof(float) * (size_t)(n * d->r));
    TRY_ALLOC(rows);
    int64_t hd = d->permute ? d->out / d->permute : 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t src = d->permute ? merge_hf_row(row0 + i, hd) : row0 + i;
        memcpy(rows + i * d->r, d->b + src * d->r, sizeof(float) * (size_t)d->r);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)d->in, (int)d->r, d->scale, rows, (int)d->r,
                d->a, (int)d->in, 1.0f, dst, (int)d->in);
    free(rows);
    if (d->mag) dora_rows(d, row0, n, dst);
    return PT_OK;
}

void merge_delta_free(merge_delta *d)
{
    free(d->a);
    free(d->b);
    free(d->mag);
    memset(d, 0, sizeof *d);
}

void merge_release(const void *data, size_t n)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), from = ((uintptr_t)data + page - 1) / page * page;
    uintptr_t to = ((uintptr_t)data + n) / page * page;
    if (to > from) madvise((void *)from, to - from, MADV_DONTNEED); /* advice only: failure changes nothing */
}

pt_status export_each_tensor(const pt_model_config *cfg, export_tensor_fn fn, void *ctx)
{
    bool plus_one = arch_info(cfg->arch)->norm_plus_one;
    TRY(fn(ctx, &(export_tensor){"token_embd.weight", "model.embed_tokens.weight", -1, -1, 0, false}));
    char gname[96], hname[160];
    for (int l = 0; l < cfg->n_layers; l++)
        for (int w = 0; w < W_COUNT; w++) {
            int permute = 0, lead;
            int64_t row0, all;
            if (model_fused_part(cfg, w, &lead, &row0, &all) && lead != w) continue; /* phi3: the fused weight once */
            if (!model_gguf_tensor_name(cfg, l, w, gname, sizeof gname, &permute)) continue;
            if (!arch_hf_tensor(cfg->arch, l, w, hname, sizeof hname)) continue;
            TRY(fn(ctx, &(export_tensor){gname, hname, l, w, permute, plus_one && arch_slot_is_norm(w)}));
        }
    TRY(fn(ctx, &(export_tensor){"output_norm.weight", "model.norm.weight", -1, -1, 0, plus_one}));
    if (!cfg->tied_embeddings) TRY(fn(ctx, &(export_tensor){"output.weight", "lm_head.weight", -1, -1, 0, false}));
    return PT_OK;
}
