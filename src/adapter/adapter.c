/* adapter.c — creating, indexing and applying LoRA adapters (adapter.h). The initialisation follows
 * PEFT's init_lora_weights: true: A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming-uniform with a = sqrt(5)),
 * B = 0, so the adapted model starts equal to the base model; false: B ~ U(-1/sqrt(r), 1/sqrt(r))
 * too; gaussian: A ~ N(0, 1/r²), B = 0. The random numbers come from a seeded splitmix64, so the
 * same random_state gives the same adapters on every rank and every run. Each pair has its own rank
 * and scale (PEFT's selectors, adapter_select.c); a pair of rank 0 is absent. */
#include "ptrain/adapter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/util.h"

const char *adapter_module_name(pt_arch a, int w) { return arch_peft_module(a, w); }

/* Whether text holds name as a whole word (gate_up_proj does not hold up_proj, mlp.experts.down_proj not
 * down_proj). */
static bool has_word(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        bool start = p == text || !(p[-1] == '_' || p[-1] == '.' || (p[-1] >= 'a' && p[-1] <= 'z'));
        if (start && !(p[n] == '_' || p[n] == '.' || (p[n] >= 'a' && p[n] <= 'z'))) return true;
    }
    return false;
}

/* Slot w's name in target lists: its PEFT module, or its target_parameters entry (the experts). */
static const char *slot_name(pt_arch a, int w)
{
    return adapter_module_name(a, w) ? adapter_module_name(a, w) : adapter_param_target(w);
}

void adapter_targets_parse(pt_arch a, const char *text, bool target[W_COUNT])
{
    for (int w = 0; w < W_COUNT; w++) target[w] = slot_name(a, w) && has_word(text, slot_name(a, w));
}

void adapter_targets_text(pt_arch a, const bool target[W_COUNT], char *out, size_t len)
{
    out[0] = '\0';
    for (int w = 0; w < W_COUNT; w++)
        if (target[w] && slot_name(a, w))
            snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? "," : "", slot_name(a, w));
}

bool adapter_target_slot(pt_arch a, const char *name, bool target[W_COUNT], bool *part)
{
    if (part) *part = false;
    for (int w = 0; w < W_COUNT; w++)
        if (adapter_module_name(a, w) && !strcmp(name, adapter_module_name(a, w))) {
            target[w] = true;
            return true;
        }
    for (int w = 0; w < W_COUNT; w++) { /* a llama name of what the family names otherwise (phi3's parts of qkv_proj
                                         * and gate_up_proj, granite4's input_linear and output_linear) */
        int lead = arch_fused_lead(a, w);
        if (!arch_llama_module(w) || strcmp(name, arch_llama_module(w)) || !adapter_module_name(a, lead)) continue;
        target[lead] = true;
        if (part) *part = true;
        return true;
    }
    return false;
}

void adapter_all_linear(pt_arch a, bool target[W_COUNT])
{
    for (int w = W_LIN_QKV; w <= W_LIN_OUT; w++)
        if (arch_info(a)->hf_names[w] && adapter_module_name(a, w)) target[w] = true;
}

const char *adapter_param_target(int w) { return arch_peft_param(w); }

bool adapter_param_slot(const char *name, bool target[W_COUNT])
{
    static const char *const tails[3] = {"experts.gate_up_proj", "experts.down_proj", "gate.weight"};
    static const int slots[3] = {W_EXP_GATE_UP, W_EXP_DOWN, W_ROUTER};
    size_t n = strlen(name);
    for (int i = 0; i < 3; i++) {
        size_t t = strlen(tails[i]);
        if (n >= t && !strcmp(name + n - t, tails[i]) && (n == t || name[n - t - 1] == '.')) {
            target[slots[i]] = true;
            return true;
        }
    }
    return false;
}

void adapter_experts_b(const float *from, float *to, int64_t out, int r, int experts, bool to_peft)
{
    for (int e = 0; e < experts; e++)
        for (int64_t o = 0; o < out; o++)
            for (int j = 0; j < r; j++) {
                size_t ours = ((size_t)e * (size_t)out + (size_t)o) * (size_t)r + (size_t)j;
                size_t peft = (size_t)o * (size_t)r * (size_t)experts + (size_t)j * (size_t)experts + (size_t)e;
                to[to_peft ? peft : ours] = from[to_peft ? ours : peft];
            }
}

bool adapter_has_experts(const pt_adapter *ad)
{
    return ad && (ad->target[W_EXP_GATE_UP] || ad->target[W_EXP_DOWN] || ad->target[W_ROUTER]);
}

adapter_pair *adapter_at(const pt_adapter *ad, int layer, int w)
{
    if (!ad || !ad->pairs || !ad->target[w]) return NULL;
    adapter_pair *p = &ad->pairs[(size_t)layer * W_COUNT + (size_t)w];
    return p->r > 0 ? p : NULL;
}

adapter_pair *adapter_next(const pt_adapter *ad, const adapter_pair *prev)
{
    if (!ad || !ad->pairs) return NULL;
    size_t total = (size_t)ad->n_layers * W_COUNT;
    for (size_t i = prev ? (size_t)(prev - ad->pairs) + 1 : 0; i < total; i++)
        if (ad->target[i % W_COUNT] && ad->pairs[i].r > 0) return &ad->pairs[i];
    return NULL;
}

int64_t adapter_peft_row(const pt_adapter *ad, int w, int64_t row)
{
    int64_t hd = ad->gate_head_dim;
    if (hd <= 0 || w != W_Q) return row;
    int64_t h = row / (2 * hd), in = row % (2 * hd);
    return in < hd ? h * hd + in : (int64_t)ad->gate_heads * hd + h * hd + in - hd;
}

pt_status adapter_peft_order(const pt_adapter *ad, int w, float *m, int64_t n_rows, int64_t cols, bool to_peft)
{
    if (ad->gate_head_dim <= 0 || w != W_Q) return PT_OK;
    float *copy = malloc(sizeof(float) * (size_t)(n_rows * cols));
    TRY_ALLOC(copy);
    memcpy(copy, m, sizeof(float) * (size_t)(n_rows * cols));
    for (int64_t r = 0; r < n_rows; r++) {
        int64_t own = adapter_peft_row(ad, w, r);
        memcpy(m + (to_peft ? r : own) * cols, copy + (to_peft ? own : r) * cols, sizeof(float) * (size_t)cols);
    }
    free(copy);
    return PT_OK;
}

pt_tensor adapter_narrow(const pt_tensor *t, int64_t r)
{
    pt_tensor v = *t;
    if (t->ndim == 2 && r < t->shape[1]) {
        v.shape[1] = r;
        v.nbytes = dtype_size_bytes(t->dtype, t->shape[0] * r);
    }
    return v;
}

/* t = an f32 [rows, cols] tensor on be holding init (NULL: zeros). */
static pt_status make_matrix(pt_backend *be, pt_tensor *t, int64_t rows, int64_t cols, const float *init)
{
    int64_t shape[2] = {rows, cols};
    *t = tensor_make(PT_F32, 2, shape);
    TRY(backend_alloc(be, t));
    float *zeros = init ? NULL : calloc((size_t)(rows * cols), sizeof(float));
    if (!init) TRY_ALLOC(zeros);
    pt_status st = backend_upload(be, t, init ? init : zeros, t->nbytes);
    free(zeros);
    return st;
}

static double unit(uint64_t *rng) { return (double)(rng_next(rng) >> 11) / 9007199254740992.0; }

/* n numbers: uniform in +-bound (torch's kaiming_uniform_ with a = sqrt(5): bound 1/sqrt(fan_in)),
 * or normal with standard deviation std (Box-Muller) when bound is 0. */
static float *draw(uint64_t *rng, int64_t n, float bound, float std)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    if (!v) return NULL;
    for (int64_t i = 0; i < n; i++)
        if (bound > 0.0f) {
            v[i] = bound * (2.0f * (float)unit(rng) - 1.0f);
        } else {
            double u1 = unit(rng), u2 = unit(rng);
            v[i] = std * (float)(sqrt(-2.0 * log(1.0 - u1)) * cos(2.0 * M_PI * u2));
        }
    return v;
}

/* A [E·r, in] and B [E·out, r] (E experts: PEFT's target_parameters, each expert's rows in turn; else E 1), drawn
 * as PEFT draws its lora_A [E·r, in] and lora_B [out, E·r] (B's bound over its E·r inputs). */
static pt_status pair_create(pt_backend *be, adapter_pair *p, int r, int64_t out, int64_t in, int64_t experts,
                             adapter_init init, uint64_t *rng)
{
    float *a = NULL, *b = NULL;
    int64_t ra = r * experts, ob = out * experts;
    if (rng) {
        a = init == ADAPTER_INIT_GAUSSIAN ? draw(rng, ra * in, 0.0f, 1.0f / (float)r) : draw(rng, ra * in, 1.0f / sqrtf((float)in), 0);
        TRY_ALLOC(a);
        if (init == ADAPTER_INIT_FALSE && !(b = draw(rng, ob * r, 1.0f / sqrtf((float)ra), 0))) {
            free(a);
            return ERR(PT_ERR_NOMEM, "out of memory");
        }
    }
    pt_status st = make_matrix(be, &p->a, ra, in, a);
    if (st == PT_OK) st = make_matrix(be, &p->b, ob, r, b);
    free(a);
    free(b);
    return st;
}

static float scale_of(float alpha, int r, bool rslora) { return rslora ? alpha / sqrtf((float)r) : alpha / (float)r; }

/* The pairs of ranks[] and alphas[] (per layer * W_COUNT + w) on ad, whose settings are set. */
static pt_status create_pairs(pt_adapter *ad, const pt_model *m, const int *ranks, const float *alphas,
                              const uint64_t *seed)
{
    ad->pairs = calloc((size_t)ad->n_layers * W_COUNT, sizeof *ad->pairs);
    TRY_ALLOC(ad->pairs);
    uint64_t rng = seed ? *seed : 0;
    for (int layer = 0; layer < ad->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            size_t i = (size_t)layer * W_COUNT + (size_t)w;
            int64_t out, in;
            if (!ad->target[w] || ranks[i] < 1 || !model_layer_adapter_shape(&m->cfg, layer, w, &out, &in)) continue;
            adapter_pair *p = &ad->pairs[i];
            p->r = ranks[i]; /* first: adapter_free releases what pair_create made if it fails */
            TRY(pair_create(ad->be, p, ranks[i], out, in, model_adapter_experts(&m->cfg, w), ad->init,
                            seed ? &rng : NULL));
            p->scale = scale_of(alphas[i], ranks[i], ad->rslora);
            if (p->r > ad->r_max) ad->r_max = p->r;
        }
    return PT_OK;
}

/* ad (zeroed) with its settings for model m; the parts of a fused weight after its first have no slot of their own. */
static void settings_set(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora, const bool target[W_COUNT])
{
    memset(ad, 0, sizeof *ad);
    ad->arch = m->cfg.arch;
    ad->text_tower = m->cfg.text_tower;
    ad->r = r;
    ad->alpha = alpha;
    ad->scale = scale_of(alpha, r, rslora);
    ad->rslora = rslora;
    ad->n_layers = m->cfg.n_layers;
    ad->be = m->be;
    ad->gate_head_dim = m->cfg.attn_gate ? m->cfg.head_dim : 0;
    ad->gate_heads = m->cfg.attn_gate ? m->cfg.n_heads : 0;
    memcpy(ad->target, target, sizeof ad->target);
    int64_t out, in;
    for (int w = 0; w < W_COUNT; w++)
        if (ad->target[w] && !model_adapter_shape(&m->cfg, w, &out, &in)) ad->target[w] = false;
}

pt_status adapter_create_ranks(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                               const bool target[W_COUNT], const int *ranks, const float *alphas, const uint64_t *seed)
{
    settings_set(ad, m, r, alpha, rslora, target);
    pt_status st = create_pairs(ad, m, ranks, alphas, seed);
    if (st != PT_OK) adapter_free(ad);
    return st;
}

pt_status adapter_create_select(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                                const bool target[W_COUNT], const char *select, const char *where,
                                const uint64_t *seed)
{
    return adapter_create_init(ad, m, r, alpha, rslora, target, select, where, ADAPTER_INIT_TRUE, seed);
}

pt_status adapter_create_init(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                              const bool target[W_COUNT], const char *select, const char *where, adapter_init init,
                              const uint64_t *seed)
{
    settings_set(ad, m, r, alpha, rslora, target);
    ad->init = init;
    size_t n = (size_t)ad->n_layers * W_COUNT;
    int *ranks = malloc(sizeof *ranks * n);
    float *alphas = malloc(sizeof *alphas * n);
    pt_status st = ranks && alphas ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK && select && !(ad->select = strdup(select))) st = ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) st = adapter_select_plan(ad->arch, select, where, ad->n_layers, ad->target, r, alpha, ranks, alphas);
    if (st == PT_OK) st = create_pairs(ad, m, ranks, alphas, seed);
    free(ranks);
    free(alphas);
    if (st != PT_OK) adapter_free(ad);
    return st;
}

pt_status adapter_create(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                         const bool target[W_COUNT], const uint64_t *seed)
{
    return adapter_create_select(ad, m, r, alpha, rslora, target, NULL, "the adapter", seed);
}

static const char *const saved_modules[2] = {"embed_tokens", "lm_head"};
static const char *const saved_tensors[2] = {"base_model.model.model.embed_tokens.weight",
                                             "base_model.model.lm_head.weight"};

const char *adapter_saved_module(int i) { return i == 0 || i == 1 ? saved_modules[i] : "?"; }
const char *adapter_saved_tensor(int i) { return i == 0 || i == 1 ? saved_tensors[i] : "?"; }

const pt_tensor *adapter_embed_table(const pt_adapter *ad, const pt_model *m)
{
    return ad && ad->saved[ADAPTER_SAVED_EMBED].data ? &ad->saved[ADAPTER_SAVED_EMBED] : &m->tok_embd;
}

const pt_tensor *adapter_lm_head(const pt_adapter *ad, const pt_model *m)
{
    return ad && ad->saved[ADAPTER_SAVED_HEAD].data ? &ad->saved[ADAPTER_SAVED_HEAD] : &m->output;
}

pt_status adapter_applicable(const pt_adapter *ad, const char *path, bool dora)
{
    if (!ad || !ad->dora || dora) return PT_OK;
    return ERR(PT_ERR_USER, "%s is a DoRA adapter (use_dora: a magnitude per adapted output row); training it on as "
               "plain LoRA would drop its magnitudes and change the model: set use_dora: true to continue it",
               shown_text(path).s);
}

void adapter_free(pt_adapter *ad)
{
    for (int i = 0; i < 2; i++)
        if (ad->saved[i].data) backend_release(ad->be, &ad->saved[i]);
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) {
        backend_release(ad->be, &p->a);
        backend_release(ad->be, &p->b);
        if (p->dmag.data) backend_release(ad->be, &p->dmag);
        if (p->wnorm.data) backend_release(ad->be, &p->wnorm);
        free(p->mag);
        free(p->start);
    }
    free(ad->pairs);
    free(ad->select);
    memset(ad, 0, sizeof *ad);
}

int64_t adapter_param_count(const pt_adapter *ad)
{
    int64_t n = 0;
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p))
        n += tensor_numel(&p->a) + tensor_numel(&p->b) + (ad->dora ? p->b.shape[0] : 0); /* DoRA: its magnitudes */
    return n;
}

int64_t adapter_param_count_for(const pt_model_config *c, int r, const bool target[W_COUNT], bool dora)
{
    int64_t n = 0, out, in;
    for (int l = 0; l < c->n_layers; l++)
        for (int w = 0; w < W_COUNT; w++)
            if (target[w] && model_layer_adapter_shape(c, l, w, &out, &in))
                n += (int64_t)r * (out + in) * model_adapter_experts(c, w) + (dora ? out : 0);
    return n;
}

pt_status adapter_checksum(const pt_adapter *ad, uint64_t *hash)
{
    uint64_t h = UTIL_FNV_INIT;
    size_t cap = 0;
    void *host = NULL;
    pt_status st = PT_OK;
    for (adapter_pair *p = adapter_next(ad, NULL); p && st == PT_OK; p = adapter_next(ad, p)) {
        const pt_tensor *both[2] = {&p->a, &p->b};
        for (int i = 0; i < 2 && st == PT_OK; i++) {
            if (both[i]->nbytes > cap) {
                free(host);
                cap = both[i]->nbytes;
                if (!(host = malloc(cap))) return ERR(PT_ERR_NOMEM, "out of memory");
            }
            st = backend_download(ad->be, both[i], host, both[i]->nbytes);
            if (st == PT_OK) h = util_fnv1a(h, host, both[i]->nbytes);
        }
    }
    free(host);
    *hash = h;
    return st;
}

pt_status adapter_matmul_part(const pt_adapter *ad, int layer, int lead, int64_t row0, bool first, pt_tensor *y,
                              const pt_tensor *x, pt_tensor *xs)
{
    adapter_pair *p = adapter_at(ad, layer, lead);
    if (!p) return PT_OK;
    pt_tensor v = adapter_narrow(xs, p->r);
    if (first) {
        TRY(backend_matmul(ad->be, &v, x, &p->a, 0.0f));
        TRY(backend_scale(ad->be, &v, p->scale));
    }
    if (row0 < 0 || row0 + y->shape[1] > p->b.shape[0])
        return ERR(PT_ERR_INTERNAL, "adapter_matmul_part: rows %lld + %lld of a B of %lld", (long long)row0,
                   (long long)y->shape[1], (long long)p->b.shape[0]);
    pt_tensor b = tensor_rows(&p->b, row0, y->shape[1]);
    return backend_matmul(ad->be, y, &v, &b, 1.0f);
}

/* A pair's DoRA tensors on the backend: the magnitudes uploaded, the norms allocated (none computed). */
static pt_status dora_tensors(pt_backend *be, adapter_pair *p)
{
    int64_t shape[2] = {p->b.shape[0], 1};
    p->dmag = tensor_make(PT_F32, 2, shape);
    p->wnorm = tensor_make(PT_F32, 2, shape);
    p->wnorm_rows = 0;
    pt_status st = backend_alloc(be, &p->dmag);
    if (st == PT_OK) st = backend_upload(be, &p->dmag, p->mag, p->dmag.nbytes);
    if (st == PT_OK) st = backend_alloc(be, &p->wnorm);
    if (st != PT_OK) {
        if (p->dmag.data) backend_release(be, &p->dmag);
        p->dmag = p->wnorm = (pt_tensor){0};
    }
    return st;
}

pt_status adapter_dora_part(const pt_adapter *ad, int layer, int lead, int64_t row0, const pt_tensor *w,
                            pt_tensor *y)
{
    adapter_pair *p = adapter_at(ad, layer, lead);
    if (!p || !p->mag) return PT_OK;
    int64_t n = y->shape[y->ndim - 1];
    if (w->ndim != 2 || w->shape[0] != n || row0 < 0 || row0 + n > p->b.shape[0])
        return ERR(PT_ERR_INTERNAL, "adapter_dora_part: rows %lld + %lld of a B of %lld", (long long)row0, (long long)n,
                   (long long)p->b.shape[0]);
    if (!p->dmag.data) TRY(dora_tensors(ad->be, p));
    pt_tensor wn = tensor_rows(&p->wnorm, row0, n), mag = tensor_rows(&p->dmag, row0, n);
    if (row0 + n > p->wnorm_rows) { /* parts run in row order: this part's norms are not computed yet */
        pt_tensor b = tensor_rows(&p->b, row0, n);
        TRY(backend_dora_norm(ad->be, &wn, w, &p->a, &b, p->scale));
        p->wnorm_rows = row0 + n;
    }
    return backend_dora_scale(ad->be, y, &mag, &wn);
}

pt_status adapter_dora_init(pt_adapter *ad, const pt_model *m)
{
    pt_status st = PT_OK;
    for (int layer = 0; layer < ad->n_layers && st == PT_OK; layer++)
        for (int w = 0; w < W_COUNT && st == PT_OK; w++) {
            int lead = w;
            int64_t row0 = 0, all;
            model_adapter_part(&m->cfg, w, &lead, &row0, &all);
            adapter_pair *p = adapter_at(ad, layer, lead);
            const pt_tensor *wt = &m->layers[layer].w[w];
            if (!p) continue;
            int64_t n = wt->shape[0];
            if (row0 == 0 && !p->mag && !(p->mag = calloc((size_t)p->b.shape[0], sizeof(float))))
                return ERR(PT_ERR_NOMEM, "out of memory");
            if (row0 + n > p->b.shape[0])
                return ERR(PT_ERR_INTERNAL, "adapter_dora_init: rows %lld + %lld of a B of %lld", (long long)row0,
                           (long long)n, (long long)p->b.shape[0]);
            int64_t shape[2] = {n, 1};
            pt_tensor wn = tensor_make(PT_F32, 2, shape), b = tensor_rows(&p->b, row0, n);
            TRY(backend_alloc(ad->be, &wn));
            st = backend_dora_norm(ad->be, &wn, wt, &p->a, &b, p->scale);
            if (st == PT_OK) st = backend_download(ad->be, &wn, p->mag + row0, wn.nbytes);
            backend_release(ad->be, &wn);
        }
    for (adapter_pair *p = adapter_next(ad, NULL); p && st == PT_OK; p = adapter_next(ad, p))
        st = p->dmag.data ? backend_upload(ad->be, &p->dmag, p->mag, p->dmag.nbytes) : dora_tensors(ad->be, p);
    if (st == PT_OK) ad->dora = true;
    return st;
}

pt_status adapter_dora_host(pt_adapter *ad)
{
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p))
        if (p->mag && p->dmag.data) TRY(backend_download(ad->be, &p->dmag, p->mag, p->dmag.nbytes));
    return PT_OK;
}

pt_status adapter_dora_set(pt_adapter *ad, int layer, int w, const float *mag)
{
    adapter_pair *p = adapter_at(ad, layer, w);
    if (!p || !p->mag) return ERR(PT_ERR_INTERNAL, "adapter_dora_set: layer %d's %d has no DoRA pair", layer, w);
    memcpy(p->mag, mag, sizeof(float) * (size_t)p->b.shape[0]);
    p->wnorm_rows = 0;
    return p->dmag.data ? backend_upload(ad->be, &p->dmag, p->mag, p->dmag.nbytes) : PT_OK;
}

void adapter_dora_stale(pt_adapter *ad)
{
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) p->wnorm_rows = 0;
}

pt_status adapter_matmul(const pt_adapter *ad, int layer, int w, pt_tensor *y, const pt_tensor *x, pt_tensor *xs)
{
    return adapter_matmul_part(ad, layer, w, 0, true, y, x, xs);
}

void adapter_tensor_name(pt_arch a, char *out, size_t len, int layer, int w, char which)
{
    if (w == W_ROUTER) { /* a ParamWrapper of its own on mlp.gate */
        snprintf(out, len, "base_model.model.model.layers.%d.mlp.gate.lora_%c.weight", layer, which);
        return;
    }
    if (model_slot_experts(w)) { /* PEFT's nested ParamWrappers with both targets: gate_up_proj innermost */
        snprintf(out, len, "base_model.model.model.layers.%d.mlp.experts%s.lora_%c.weight", layer,
                 w == W_EXP_GATE_UP ? ".base_layer" : "", which);
        return;
    }
    const char *block = arch_peft_block(a, w);
    if (which == 'M') { /* DoRA's magnitudes, as PEFT's state dict names them */
        snprintf(out, len, "base_model.model.model.layers.%d.%s.%s.lora_magnitude_vector", layer, block,
                 adapter_module_name(a, w));
        return;
    }
    snprintf(out, len, "base_model.model.model.layers.%d.%s.%s.lora_%c.weight", layer, block,
             adapter_module_name(a, w), which);
}

pt_status adapter_layout(const pt_adapter *ad, ckpt_layout *lay)
{
    *lay = (ckpt_layout){0};
    int n = 0;
    int per = ad->dora ? 3 : 2; /* A, B (, DoRA's magnitudes M [out, 1]) */
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) n += per;
    lay->e = calloc((size_t)n + 1, sizeof *lay->e);
    TRY_ALLOC(lay->e);
    for (int layer = 0; layer < ad->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(ad, layer, w);
            for (int ab = 0; p && ab < per; ab++) {
                ckpt_entry *e = &lay->e[lay->n++];
                const pt_tensor *t = ab ? &p->b : &p->a;
                adapter_tensor_name(ad->arch, e->name, sizeof e->name, layer, w, "ABM"[ab]);
                e->rows = t->shape[0], e->cols = ab == 2 ? 1 : t->shape[1], e->offset = lay->total;
                lay->total += e->rows * e->cols;
            }
        }
    return PT_OK;
}
