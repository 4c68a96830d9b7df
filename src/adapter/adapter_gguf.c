/* adapter_gguf.c — the LoRA adapter as llama.cpp loads it (`llama-cli -m base.gguf --lora
 * adapter.gguf`, Ollama's ADAPTER line): the base's architecture name, the adapter keys, and per
 * adapted projection two f32 tensors named after the base tensor; and reading such a file back
 * (ptrain's own, or one llama.cpp's convert_lora_to_gguf.py wrote), the parts of a projection that llama.cpp holds
 * apart (granite4's input_linear as ffn_gate and ffn_up) joined back into the one Hugging Face pair. llama.cpp's base files hold
 * llama's q and k rows interleaved per head for its rotary embedding; ptrain's adapters are in
 * Hugging Face's order, so lora_b's rows of q and k are interleaved the same way here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/adapter.h"
#include "ptrain/gguf_write.h"
#include "ptrain/quant.h"

/* HF row order -> llama.cpp's: GGUF row h*hd + 2i + s is HF row h*hd + s*hd/2 + i. */
static void permute_rows(const float *src, float *dst, int64_t rows, int64_t cols, int heads)
{
    int64_t hd = rows / heads, half = hd / 2;
    for (int64_t r = 0; r < rows; r++) {
        int64_t h = r / hd, within = r % hd, hf = h * hd + (within % 2) * half + within / 2;
        memcpy(dst + r * cols, src + hf * cols, sizeof(float) * (size_t)cols);
    }
}

/* The GGUF tensor pairs the pair of slot k becomes, in parts[] with each one's rows of B (row0[], rows[]; rows 0:
 * all): one, or, where llama.cpp holds apart what the Hugging Face files fuse (granite4's input_linear: its granite
 * has ffn_gate and ffn_up), one per part, each with the whole A (llama.cpp's converter splits B alike). */
static int gguf_parts(const pt_model_config *cfg, int k, int parts[2], int64_t row0[2], int64_t rows[2])
{
    int lead, n = 0;
    int64_t all, in;
    parts[0] = k, row0[0] = rows[0] = 0;
    if (!arch_info(cfg->arch)->fused_mlp || arch_fused_lead(cfg->arch, W_UP) != k) return 1;
    for (int s = k; s < W_COUNT; s++)
        if (model_fused_part(cfg, s, &lead, &row0[n], &all) && lead == k && model_proj_shape(cfg, s, &rows[n], &in))
            parts[n++] = s;
    return n;
}

/* A sparse layer's pairs as llama.cpp applies them (build_lora_mm_id in src/llama-graph.cpp: ggml_mul_mat_id of
 * lora_a, then of lora_b, with the tokens' expert ids, on the 3-D ffn_gate_exps, ffn_up_exps {H, I, E} and
 * ffn_down_exps {I, H, E}): lora_a {in, r, E} (ptrain's A [E·r, in] as it is), lora_b {r, rows, E} (each expert's
 * rows of B from b_off: gate_up's gate rows, then its up rows, in two tensors sharing A); the router's pair is a
 * plain one on ffn_gate_inp. Returns the tensors of slot k (0: not a sparse layer's slot). */
static int expert_parts(const pt_model_config *cfg, int layer, int k, char names[2][96], int64_t b_off[2],
                        int64_t per[2])
{
    static const char *const roles[3] = {"gate", "up", "down"};
    if (!model_slot_sparse(k)) return 0;
    if (k == W_ROUTER) {
        snprintf(names[0], 96, "blk.%d.ffn_gate_inp.weight", layer);
        b_off[0] = 0, per[0] = cfg->n_experts;
        return 1;
    }
    int n = k == W_EXP_GATE_UP ? 2 : 1;
    for (int i = 0; i < n; i++) {
        snprintf(names[i], 96, "blk.%d.ffn_%s_exps.weight", layer, roles[k == W_EXP_DOWN ? 2 : i]);
        per[i] = k == W_EXP_DOWN ? cfg->dim : cfg->moe_ffn_dim, b_off[i] = i * cfg->moe_ffn_dim;
    }
    return n;
}

static pt_status declare_experts(gguf_writer *w, const adapter_pair *p, const pt_model_config *cfg, int layer, int k)
{
    char names[2][96], tname[128];
    int64_t b_off[2], per[2];
    int n = expert_parts(cfg, layer, k, names, b_off, per);
    uint64_t e = k == W_ROUTER ? 1 : (uint64_t)cfg->n_experts, nd = k == W_ROUTER ? 2 : 3;
    for (int i = 0; i < n; i++) {
        uint64_t da[3] = {(uint64_t)p->a.shape[1], (uint64_t)p->r, e}, db[3] = {(uint64_t)p->r, (uint64_t)per[i], e};
        snprintf(tname, sizeof tname, "%s.lora_a", names[i]);
        TRY(gguf_w_tensor(w, tname, GGML_TYPE_F32, (int)nd, da));
        snprintf(tname, sizeof tname, "%s.lora_b", names[i]);
        TRY(gguf_w_tensor(w, tname, GGML_TYPE_F32, (int)nd, db));
    }
    return PT_OK;
}

static pt_status declare(gguf_writer *w, const pt_adapter *l, const pt_model_config *cfg, const char *name)
{
    TRY(gguf_w_str(w, "general.architecture", arch_gguf_name(cfg->arch)));
    TRY(gguf_w_str(w, "general.type", "adapter"));
    TRY(gguf_w_str(w, "general.name", name ? name : "ptrain LoRA adapter"));
    TRY(gguf_w_str(w, "adapter.type", "lora"));
    TRY(gguf_w_f32(w, "adapter.lora.alpha", l->scale * (float)l->r));
    char base[96], tname[128];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int k = 0; k < W_COUNT; k++) {
            const adapter_pair *p = adapter_at(l, layer, k);
            int parts[2];
            int64_t row0[2], rows[2];
            if (p && model_slot_sparse(k)) {
                TRY(declare_experts(w, p, cfg, layer, k));
                continue;
            }
            for (int i = 0, n = p ? gguf_parts(cfg, k, parts, row0, rows) : 0; i < n; i++) {
                model_gguf_tensor_name(cfg, layer, parts[i], base, sizeof base, NULL);
                uint64_t da[2] = {(uint64_t)p->a.shape[1], (uint64_t)p->a.shape[0]};
                uint64_t db[2] = {(uint64_t)p->b.shape[1], (uint64_t)(rows[i] ? rows[i] : p->b.shape[0])};
                snprintf(tname, sizeof tname, "%s.lora_a", base);
                TRY(gguf_w_tensor(w, tname, GGML_TYPE_F32, 2, da));
                snprintf(tname, sizeof tname, "%s.lora_b", base);
                TRY(gguf_w_tensor(w, tname, GGML_TYPE_F32, 2, db));
            }
        }
    return PT_OK;
}

/* llama.cpp scales every pair by the file's one alpha over the pair's rank: a pair whose own scale
 * differs (alpha_pattern, rank_pattern with rsLoRA) has that ratio folded into its B. */
static float b_factor(const pt_adapter *l, const adapter_pair *p)
{
    float alpha = l->scale * (float)l->r;
    return p->scale * (float)p->r / alpha;
}

static pt_status stream_matrix(gguf_writer *w, pt_backend *be, const pt_tensor *t, int permute_heads, float factor)
{
    float *host = malloc(2 * t->nbytes);
    TRY_ALLOC(host);
    float *out = host + tensor_numel(t);
    pt_status st = backend_download(be, t, host, t->nbytes);
    if (st == PT_OK && factor != 1.0f)
        for (int64_t i = 0; i < tensor_numel(t); i++) host[i] *= factor;
    if (st == PT_OK && permute_heads) permute_rows(host, out, t->shape[0], t->shape[1], permute_heads);
    if (st == PT_OK) st = gguf_w_data(w, permute_heads ? out : host, t->nbytes);
    free(host);
    return st;
}

/* B's rows of the part [b_off, b_off + per) of each of the pair's experts, times factor, written in expert order. */
static pt_status stream_expert_b(gguf_writer *w, pt_backend *be, const adapter_pair *p, int64_t b_off, int64_t per,
                                 float factor)
{
    int64_t n_exp = p->a.shape[0] / p->r, out = p->b.shape[0] / n_exp, r = p->r;
    float *host = malloc(p->b.nbytes + sizeof(float) * (size_t)(n_exp * per * r));
    TRY_ALLOC(host);
    float *dst = host + tensor_numel(&p->b);
    pt_status st = backend_download(be, &p->b, host, p->b.nbytes);
    for (int64_t e = 0; st == PT_OK && e < n_exp; e++)
        for (int64_t i = 0; i < per * r; i++) dst[e * per * r + i] = factor * host[(e * out + b_off) * r + i];
    if (st == PT_OK) st = gguf_w_data(w, dst, sizeof(float) * (size_t)(n_exp * per * r));
    free(host);
    return st;
}

static pt_status stream_experts(gguf_writer *w, const pt_adapter *l, const adapter_pair *p, const pt_model_config *cfg,
                                int layer, int k)
{
    char names[2][96];
    int64_t b_off[2], per[2];
    int n = expert_parts(cfg, layer, k, names, b_off, per);
    for (int i = 0; i < n; i++) {
        TRY(stream_matrix(w, l->be, &p->a, 0, 1.0f));
        if (k == W_ROUTER) TRY(stream_matrix(w, l->be, &p->b, 0, b_factor(l, p)));
        else TRY(stream_expert_b(w, l->be, p, b_off[i], per[i], b_factor(l, p)));
    }
    return PT_OK;
}

static pt_status stream_all(gguf_writer *w, const pt_adapter *l, const pt_model_config *cfg)
{
    char base[96];
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int k = 0; k < W_COUNT; k++) {
            const adapter_pair *p = adapter_at(l, layer, k);
            int permute = 0, parts[2];
            int64_t row0[2], rows[2];
            if (p && model_slot_sparse(k)) {
                TRY(stream_experts(w, l, p, cfg, layer, k));
                continue;
            }
            for (int i = 0, n = p ? gguf_parts(cfg, k, parts, row0, rows) : 0; i < n; i++) {
                model_gguf_tensor_name(cfg, layer, parts[i], base, sizeof base, &permute);
                pt_tensor b = rows[i] ? tensor_rows(&p->b, row0[i], rows[i]) : p->b;
                TRY(stream_matrix(w, l->be, &p->a, 0, 1.0f));
                TRY(stream_matrix(w, l->be, &b, permute, b_factor(l, p)));
            }
        }
    return PT_OK;
}

pt_status adapter_gguf_save(const char *path, const pt_adapter *l, const pt_model_config *cfg, const char *name)
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

/* ---- reading: llama.cpp LoRA adapters (ptrain's, or convert_lora_to_gguf.py's) ---- */

/* The pair a GGUF tensor of slot w belongs to (gguf_parts read backwards): w itself, or for a part that llama.cpp holds
 * apart (granite4's ffn_gate and ffn_up of input_linear) the fused pair's slot, with the part's rows of B in *row0,
 * *rows (rows 0: all of B). */
static int pair_slot(const pt_model_config *cfg, int w, int64_t *row0, int64_t *rows)
{
    int lead = arch_fused_lead(cfg->arch, w), parts[2];
    int64_t r0[2], n[2];
    *row0 = *rows = 0;
    if (!arch_info(cfg->arch)->fused_mlp || lead != arch_fused_lead(cfg->arch, W_UP)) return w;
    for (int i = 0, k = gguf_parts(cfg, lead, parts, r0, n); i < k; i++)
        if (parts[i] == w) *row0 = r0[i], *rows = n[i];
    return lead;
}

/* blk.N.<suffix>.lora_a|b -> layer, slot, 'a'/'b' of model cfg, and the rows of the slot's B it holds (pair_slot);
 * false for other names. */
static bool parse_tensor(const pt_model_config *cfg, const gguf_tensor *g, int *layer, int *slot, char *which,
                         int *permute, int64_t *row0, int64_t *rows)
{
    char name[160], want[96];
    snprintf(name, sizeof name, "%.*s", (int)(g->name.len < 159 ? g->name.len : 159), g->name.data);
    size_t len = strlen(name);
    int l;
    if (len < 7 || strncmp(name + len - 7, ".lora_", 6) || (name[len - 1] != 'a' && name[len - 1] != 'b')) return false;
    *which = name[len - 1];
    name[len - 7] = 0;
    if (sscanf(name, "blk.%d.", &l) != 1 || l < 0 || l >= cfg->n_layers) return false;
    for (int w = 0; w < W_COUNT; w++) {
        int pair = pair_slot(cfg, w, row0, rows);
        if (adapter_module_name(cfg->arch, pair) && model_gguf_tensor_name(cfg, l, w, want, sizeof want, permute) &&
            !strcmp(want, name)) {
            *layer = l, *slot = pair;
            return true;
        }
    }
    return false;
}

static pt_status check_header(const gguf_file *f, const pt_model_config *cfg, float *alpha)
{
    gguf_str type, arch;
    TRY(gguf_get_str(f, "general.type", &type));
    TRY(gguf_get_str(f, "general.architecture", &arch));
    if (!gguf_str_eq(type, "adapter"))
        return ERR(PT_ERR_USER, "%s: general.type is not \"adapter\"; is it a model?", shown_text(f->path).s);
    gguf_str kind;
    TRY(gguf_get_str(f, "adapter.type", &kind));
    if (!gguf_str_eq(kind, "lora")) return ERR(PT_ERR_USER, "%s: adapter.type is not \"lora\"", shown_text(f->path).s);
    if (!gguf_str_eq(arch, arch_gguf_name(cfg->arch)))
        return ERR(PT_ERR_USER, "%s: an adapter for architecture %s; the model is %s", shown_text(f->path).s,
                   shown_bytes(arch.data, arch.len).s, arch_gguf_name(cfg->arch));
    *alpha = 0; /* as llama.cpp: a missing or zero alpha means scale 1 */
    return gguf_opt_f32(f, "adapter.lora.alpha", alpha);
}

/* Targets and ranks (per layer * W_COUNT + slot; r: the first) from the tensors; every tensor must
 * be a lora_a/lora_b of the model. */
static pt_status scan_tensors(const gguf_file *f, const pt_model_config *cfg, bool target[W_COUNT], int *r, int *ranks)
{
    memset(target, 0, sizeof(bool) * W_COUNT);
    *r = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *g = &f->tensors[i];
        int layer, slot, permute;
        int64_t row0, rows;
        char which;
        if (memmem(g->name.data, (size_t)g->name.len, "_exps.", 6) || memmem(g->name.data, (size_t)g->name.len,
                                                                             "ffn_gate_inp.", 13))
            return ERR(PT_ERR_USER, "%s: tensor %s is LoRA on a mixture's experts or router, which ptrain writes for "
                       "llama.cpp but does not read back yet: use adapter.h5 or the PEFT files (adapter_config.json + "
                       "adapter_model.safetensors) of the same run", shown_text(f->path).s,
                       shown_bytes(g->name.data, g->name.len).s);
        if (!parse_tensor(cfg, g, &layer, &slot, &which, &permute, &row0, &rows) || g->n_dims != 2 ||
            g->dtype == PT_DTYPE_COUNT)
            return ERR(PT_ERR_USER, "%s: tensor %s is not a LoRA matrix of a projection of this %d-layer %s model",
                       shown_text(f->path).s, shown_bytes(g->name.data, g->name.len).s, cfg->n_layers,
                       arch_gguf_name(cfg->arch));
        target[slot] = true;
        if (which == 'a') {
            if (g->dims[1] < 1 || g->dims[1] > 4096)
                return ERR(PT_ERR_USER, "%s: tensor %s has rank %llu; a plausible one is from 1 to 4096",
                           shown_text(f->path).s, shown_bytes(g->name.data, g->name.len).s,
                           (unsigned long long)g->dims[1]);
            ranks[layer * W_COUNT + slot] = (int)g->dims[1];
            if (!*r) *r = (int)g->dims[1];
        }
    }
    if (*r < 1) return ERR(PT_ERR_USER, "%s: no LoRA tensors of a plausible rank", shown_text(f->path).s);
    /* a projection the file leaves out in some layer gets a zero pair of the first rank: no change there */
    for (int i = 0; i < cfg->n_layers * W_COUNT; i++)
        if (target[i % W_COUNT] && !ranks[i]) ranks[i] = *r;
    return PT_OK;
}

/* One matrix into t ([rows, cols] in PyTorch order), lora_b of llama q/k back to HF row order. */
static pt_status read_matrix(const gguf_file *f, const gguf_tensor *g, pt_backend *be, pt_tensor *t, int permute)
{
    if (g->dims[0] != (uint64_t)t->shape[1] || g->dims[1] != (uint64_t)t->shape[0])
        return ERR(PT_ERR_USER, "%s: tensor %s is [%llu, %llu]; this model needs [%lld, %lld]", shown_text(f->path).s,
                   shown_bytes(g->name.data, g->name.len).s, (unsigned long long)g->dims[1],
                   (unsigned long long)g->dims[0], (long long)t->shape[0], (long long)t->shape[1]);
    int64_t rows = t->shape[0], cols = t->shape[1], hd = permute ? rows / permute : 0;
    float *host = malloc(t->nbytes);
    TRY_ALLOC(host);
    size_t row_bytes = dtype_size_bytes(g->dtype, cols);
    pt_status st = PT_OK;
    for (int64_t r = 0; r < rows && st == PT_OK; r++) {
        int64_t dst = permute ? (r / hd) * hd + (r % hd % 2) * (hd / 2) + (r % hd) / 2 : r;
        st = quant_dequantize_row(g->dtype, (const char *)g->data + (size_t)r * row_bytes, host + dst * cols, cols);
    }
    if (st == PT_OK) st = backend_upload(be, t, host, t->nbytes);
    free(host);
    return st;
}

/* A second part's lora_a of a fused pair: the same values as the A read from the first part. */
static pt_status same_a(const gguf_file *f, const gguf_tensor *g, pt_backend *be, const pt_tensor *a)
{
    pt_tensor tmp = tensor_make(a->dtype, a->ndim, a->shape);
    TRY(backend_alloc(be, &tmp));
    float *x = malloc(a->nbytes), *y = malloc(a->nbytes);
    pt_status st = x && y ? read_matrix(f, g, be, &tmp, 0) : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) st = backend_download(be, a, x, a->nbytes);
    if (st == PT_OK) st = backend_download(be, &tmp, y, a->nbytes);
    if (st == PT_OK && memcmp(x, y, a->nbytes))
        st = ERR(PT_ERR_USER, "%s: tensor %s differs from the lora_a of the other half of the same fused projection "
                 "(llama.cpp's split of one Hugging Face pair has one A): the file cannot be read back as that pair",
                 shown_text(f->path).s, shown_bytes(g->name.data, g->name.len).s);
    free(x), free(y);
    backend_release(be, &tmp);
    return st;
}

/* Every tensor into its pair; the parts of a fused pair (pair_slot) each give their rows of B and the whole A, which
 * must be the same in every part (ptrain and llama.cpp's converter write it so): a file whose parts disagree could not
 * come from one Hugging Face pair. */
static pt_status read_all(const gguf_file *f, const pt_model *m, pt_adapter *l)
{
    uint8_t *seen = calloc((size_t)m->cfg.n_layers * W_COUNT, 1);
    TRY_ALLOC(seen);
    pt_status st = PT_OK;
    for (uint64_t i = 0; i < f->n_tensors && st == PT_OK; i++) {
        const gguf_tensor *g = &f->tensors[i];
        int layer, slot, permute;
        int64_t row0, rows;
        char which;
        parse_tensor(&m->cfg, g, &layer, &slot, &which, &permute, &row0, &rows);
        adapter_pair *p = adapter_at(l, layer, slot);
        if (which == 'b') {
            pt_tensor b = rows ? tensor_rows(&p->b, row0, rows) : p->b;
            st = read_matrix(f, g, l->be, &b, permute);
        } else if (rows && seen[layer * W_COUNT + slot]) {
            st = same_a(f, g, l->be, &p->a);
        } else {
            st = read_matrix(f, g, l->be, &p->a, 0);
            seen[layer * W_COUNT + slot] = 1;
        }
    }
    free(seen);
    return st;
}

pt_status adapter_gguf_load(const char *path, const pt_model *m, pt_adapter *l)
{
    memset(l, 0, sizeof *l);
    gguf_file f;
    TRY(gguf_open(path, &f));
    float alpha = 0;
    bool target[W_COUNT];
    int r = 0, *ranks = calloc((size_t)m->cfg.n_layers * W_COUNT, sizeof *ranks);
    float *alphas = calloc((size_t)m->cfg.n_layers * W_COUNT, sizeof *alphas);
    pt_status st = ranks && alphas ? check_header(&f, &m->cfg, &alpha) : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) st = scan_tensors(&f, &m->cfg, target, &r, ranks);
    /* llama.cpp scales by alpha / r (each pair's r): that is the scale, whatever alpha and rsLoRA were in training;
     * no alpha means a scale of 1 */
    for (int i = 0; st == PT_OK && i < m->cfg.n_layers * W_COUNT; i++) alphas[i] = alpha != 0.0f ? alpha : (float)ranks[i];
    if (st == PT_OK) st = adapter_create_ranks(l, m, r, alpha != 0.0f ? alpha : (float)r, false, target, ranks, alphas, NULL);
    if (st == PT_OK) st = read_all(&f, m, l);
    free(ranks);
    free(alphas);
    gguf_close(&f);
    if (st != PT_OK) adapter_free(l);
    return st;
}
