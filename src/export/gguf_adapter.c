/* gguf_adapter.c — the LoRA adapter as llama.cpp loads it (`llama-cli -m base.gguf --lora
 * adapter.gguf`, Ollama's ADAPTER line): the base's architecture name, the adapter keys, and per
 * adapted projection two f32 tensors named after the base tensor. llama.cpp's base files hold
 * llama's q and k rows interleaved per head for its rotary embedding; ptrain's adapters are in
 * Hugging Face's order, so lora_b's rows of q and k are interleaved the same way here. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/export.h"
#include "ptrain/gguf_write.h"

/* HF row order -> llama.cpp's: GGUF row h*hd + 2i + s is HF row h*hd + s*hd/2 + i. */
static void permute_rows(const float *src, float *dst, int64_t rows, int64_t cols, int heads)
{
    int64_t hd = rows / heads, half = hd / 2;
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r / hd, within = r % hd, hf = h * hd + (within % 2) * half + within / 2;
        memcpy(dst + r * cols, src + hf * cols, sizeof(float) * (size_t)cols);
    }
}

static pt_status declare(gguf_writer *w, const pt_lora *l, const pt_model_config *cfg, const char *name)
{
    TRY(gguf_w_str(w, "general.architecture", cfg->arch));
    TRY(gguf_w_str(w, "general.type", "adapter"));
    TRY(gguf_w_str(w, "general.name", name ? name : "ptrain LoRA adapter"));
    TRY(gguf_w_str(w, "adapter.type", "lora"));
    TRY(gguf_w_f32(w, "adapter.lora.alpha", l->scale * (float)l->r));
    char base[96], tname[128];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int k = 0; k < W_COUNT; k++) {
            const lora_pair *p = lora_at(l, layer, k);
            if (!p) continue;
            model_gguf_tensor_name(cfg, layer, k, base, sizeof base, NULL);
            uint64_t da[2] = {(uint64_t)p->a.shape[1], (uint64_t)p->a.shape[0]};
            uint64_t db[2] = {(uint64_t)p->b.shape[1], (uint64_t)p->b.shape[0]};
            snprintf(tname, sizeof tname, "%s.lora_a", base);
            TRY(gguf_w_tensor(w, tname, GGML_TYPE_F32, 2, da));
            snprintf(tname, sizeof tname, "%s.lora_b", base);
            TRY(gguf_w_tensor(w, tname, GGML_TYPE_F32, 2, db));
        }
    return PT_OK;
}

static pt_status stream_matrix(gguf_writer *w, pt_backend *be, const pt_tensor *t, int permute_heads)
{
    float *host = malloc(2 * t->nbytes);
    TRY_ALLOC(host);
    float *out = host + tensor_numel(t);
    pt_status st = backend_download(be, t, host, t->nbytes);
    if (st == PT_OK && permute_heads) permute_rows(host, out, t->shape[0], t->shape[1], permute_heads);
    if (st == PT_OK) st = gguf_w_data(w, permute_heads ? out : host, t->nbytes);
    free(host);
    return st;
}

static pt_status stream_all(gguf_writer *w, const pt_lora *l, const pt_model_config *cfg)
{
    char base[96];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int k = 0; k < W_COUNT; k++) {
            const lora_pair *p = lora_at(l, layer, k);
            int permute = 0;
            if (!p) continue;
            model_gguf_tensor_name(cfg, layer, k, base, sizeof base, &permute);
            TRY(stream_matrix(w, l->be, &p->a, 0));
            TRY(stream_matrix(w, l->be, &p->b, permute));
        }
    return PT_OK;
}

pt_status export_gguf_adapter(const char *path, const pt_lora *l, const pt_model_config *cfg, const char *name)
{
    gguf_writer *w = NULL;
    TRY(gguf_writer_new(&w));
    pt_status st = declare(w, l, cfg, name);
    if (st == PT_OK) st = gguf_w_begin(w, path);
    if (st == PT_OK) st = stream_all(w, l, cfg);
    if (st == PT_OK) st = gguf_w_finish(w);
    gguf_writer_free(w);
    return st;
}
