/* adapter.c — creating, indexing and applying LoRA adapters (adapter.h). The initialisation follows
 * PEFT: A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming-uniform with a = sqrt(5)), B = 0, so the adapted
 * model starts equal to the base model. A's random numbers come from a seeded splitmix64, so the
 * same random_state gives the same adapters on every rank and every run. */
#include "ptrain/adapter.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/util.h"

const char *adapter_module_name(pt_arch a, int w) { return arch_peft_module(a, w); }

/* Whether text holds name as a whole word (gate_up_proj does not hold up_proj). */
static bool has_word(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(text, name); p; p = strstr(p + 1, name)) {
        bool start = p == text || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z'));
        if (start && !(p[n] == '_' || (p[n] >= 'a' && p[n] <= 'z'))) return true;
    }
    return false;
}

void adapter_targets_parse(pt_arch a, const char *text, bool target[W_COUNT])
{
    for (int w = 0; w < W_COUNT; w++)
        target[w] = adapter_module_name(a, w) && has_word(text, adapter_module_name(a, w));
}

void adapter_targets_text(pt_arch a, const bool target[W_COUNT], char *out, size_t len)
{
    out[0] = '\0';
    for (int w = 0; w < W_COUNT; w++)
        if (target[w] && adapter_module_name(a, w))
            snprintf(out + strlen(out), len - strlen(out), "%s%s", out[0] ? "," : "", adapter_module_name(a, w));
}

bool adapter_target_slot(pt_arch a, const char *name, bool target[W_COUNT], bool *part)
{
    static const char *const parts[][2] = {{"q_proj", "qkv_proj"}, {"k_proj", "qkv_proj"}, {"v_proj", "qkv_proj"},
                                           {"gate_proj", "gate_up_proj"}, {"up_proj", "gate_up_proj"}};
    if (part) *part = false;
    if (arch_info(a)->fused)
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
            if (!strcmp(name, parts[i][0])) {
                name = parts[i][1];
                if (part) *part = true;
            }
    for (int w = 0; w < W_COUNT; w++)
        if (adapter_module_name(a, w) && !strcmp(name, adapter_module_name(a, w))) {
            target[w] = true;
            return true;
        }
    return false;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

adapter_pair *adapter_at(const pt_adapter *ad, int layer, int w)
{
    if (!ad || !ad->pairs || !ad->target[w]) return NULL;
    return &ad->pairs[(size_t)layer * W_COUNT + (size_t)w];
}

adapter_pair *adapter_next(const pt_adapter *ad, const adapter_pair *prev)
{
    if (!ad || !ad->pairs) return NULL;
    size_t total = (size_t)ad->n_layers * W_COUNT;
    for (size_t i = prev ? (size_t)(prev - ad->pairs) + 1 : 0; i < total; i++)
        if (ad->target[i % W_COUNT]) return &ad->pairs[i];
    return NULL;
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

static pt_status pair_create(pt_backend *be, adapter_pair *p, int r, int64_t out, int64_t in, uint64_t *rng)
{
    float *a = NULL;
    if (rng) {
        a = malloc(sizeof(float) * (size_t)(r * in));
        TRY_ALLOC(a);
        float bound = 1.0f / sqrtf((float)in);
        for (int64_t i = 0; i < r * in; i++)
            a[i] = bound * (2.0f * (float)((double)(splitmix(rng) >> 11) / 9007199254740992.0) - 1.0f);
    }
    pt_status st = make_matrix(be, &p->a, r, in, a);
    free(a);
    TRY(st);
    return make_matrix(be, &p->b, out, r, NULL);
}

pt_status adapter_create(pt_adapter *ad, const pt_model *m, int r, float alpha, bool rslora,
                         const bool target[W_COUNT], const uint64_t *seed)
{
    memset(ad, 0, sizeof *ad);
    ad->arch = m->cfg.arch;
    ad->r = r;
    ad->alpha = alpha;
    ad->scale = rslora ? alpha / sqrtf((float)r) : alpha / (float)r;
    ad->rslora = rslora;
    ad->n_layers = m->cfg.n_layers;
    ad->be = m->be;
    memcpy(ad->target, target, sizeof ad->target);
    int64_t out, in;
    for (int w = 0; w < W_COUNT; w++) /* the parts of a fused weight after its first have no pair */
        if (ad->target[w] && !model_adapter_shape(&m->cfg, w, &out, &in)) ad->target[w] = false;
    ad->pairs = calloc((size_t)ad->n_layers * W_COUNT, sizeof *ad->pairs);
    TRY_ALLOC(ad->pairs);
    uint64_t rng = seed ? *seed : 0;
    for (int layer = 0; layer < ad->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(ad, layer, w);
            if (!p) continue;
            model_adapter_shape(&m->cfg, w, &out, &in);
            pt_status st = pair_create(ad->be, p, r, out, in, seed ? &rng : NULL);
            if (st != PT_OK) {
                adapter_free(ad);
                return st;
            }
        }
    return PT_OK;
}

void adapter_free(pt_adapter *ad)
{
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) {
        backend_release(ad->be, &p->a);
        backend_release(ad->be, &p->b);
    }
    free(ad->pairs);
    memset(ad, 0, sizeof *ad);
}

int64_t adapter_param_count(const pt_adapter *ad)
{
    int64_t n = 0;
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) n += tensor_numel(&p->a) + tensor_numel(&p->b);
    return n;
}

int64_t adapter_param_count_for(const pt_model_config *c, int r, const bool target[W_COUNT])
{
    int64_t n = 0, out, in;
    for (int w = 0; w < W_COUNT; w++)
        if (target[w] && model_adapter_shape(c, w, &out, &in)) n += (int64_t)r * (out + in);
    return n * c->n_layers;
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
    if (first) {
        TRY(backend_matmul(ad->be, xs, x, &p->a, 0.0f));
        TRY(backend_scale(ad->be, xs, ad->scale));
    }
    if (row0 < 0 || row0 + y->shape[1] > p->b.shape[0])
        return ERR(PT_ERR_INTERNAL, "adapter_matmul_part: rows %lld + %lld of a B of %lld", (long long)row0,
                   (long long)y->shape[1], (long long)p->b.shape[0]);
    pt_tensor b = tensor_rows(&p->b, row0, y->shape[1]);
    return backend_matmul(ad->be, y, xs, &b, 1.0f);
}

pt_status adapter_matmul(const pt_adapter *ad, int layer, int w, pt_tensor *y, const pt_tensor *x, pt_tensor *xs)
{
    return adapter_matmul_part(ad, layer, w, 0, true, y, x, xs);
}

void adapter_tensor_name(pt_arch a, char *out, size_t len, int layer, int w, char which)
{
    const char *block = w == W_GATE || w == W_UP || w == W_DOWN ? "mlp" : "self_attn";
    snprintf(out, len, "base_model.model.model.layers.%d.%s.%s.lora_%c.weight", layer, block,
             adapter_module_name(a, w), which);
}

pt_status adapter_layout(const pt_adapter *ad, ckpt_layout *lay)
{
    *lay = (ckpt_layout){0};
    int n = 0;
    for (adapter_pair *p = adapter_next(ad, NULL); p; p = adapter_next(ad, p)) n += 2;
    lay->e = calloc((size_t)n + 1, sizeof *lay->e);
    TRY_ALLOC(lay->e);
    for (int layer = 0; layer < ad->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(ad, layer, w);
            for (int ab = 0; p && ab < 2; ab++) {
                ckpt_entry *e = &lay->e[lay->n++];
                const pt_tensor *t = ab ? &p->b : &p->a;
                adapter_tensor_name(ad->arch, e->name, sizeof e->name, layer, w, ab ? 'B' : 'A');
                e->rows = t->shape[0], e->cols = t->shape[1], e->offset = lay->total;
                lay->total += e->rows * e->cols;
            }
        }
    return PT_OK;
}
