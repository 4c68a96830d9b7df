/* lora.c — creating, indexing and freeing LoRA adapters. The initialisation follows PEFT:
 * A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming-uniform with a = sqrt(5)), B = 0, so the adapted model
 * starts equal to the base model. A's random numbers come from a seeded splitmix64, so the same
 * random_state gives the same adapters on every rank and every run. */
#include "ptrain/lora.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/util.h"

const char *lora_module_name(int w) { return arch_peft_module(w); }

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

lora_pair *lora_at(const pt_lora *l, int layer, int w)
{
    if (!l || !l->target[w]) return NULL;
    return &l->pairs[(size_t)layer * W_COUNT + (size_t)w];
}

lora_pair *lora_next(const pt_lora *l, lora_pair *prev)
{
    if (!l || !l->pairs) return NULL;
    size_t total = (size_t)l->n_layers * W_COUNT;
    for (size_t i = prev ? (size_t)(prev - l->pairs) + 1 : 0; i < total; i++)
        if (l->target[i % W_COUNT]) return &l->pairs[i];
    return NULL;
}

static pt_status alloc_zero(pt_backend *be, pt_tensor *t, int64_t rows, int64_t cols, const float *init)
{
    int64_t shape[2] = {rows, cols};
    *t = tensor_make(PT_F32, 2, shape);
    TRY(backend_alloc(be, t));
    float *host = init ? NULL : calloc((size_t)(rows * cols), sizeof(float));
    if (!init) TRY_ALLOC(host);
    pt_status st = backend_upload(be, t, init ? init : host, t->nbytes);
    free(host);
    return st;
}

static pt_status pair_create(pt_backend *be, lora_pair *p, int r, int64_t out, int64_t in, uint64_t *rng, bool train)
{
    if (!train) { /* to be read from a file: zero, so a matrix the file leaves out adds nothing */
        TRY(alloc_zero(be, &p->a, r, in, NULL));
        return alloc_zero(be, &p->b, out, r, NULL);
    }
    float *a = malloc(sizeof(float) * (size_t)(r * in));
    TRY_ALLOC(a);
    float bound = 1.0f / sqrtf((float)in);
    for (int64_t i = 0; i < r * in; i++)
        a[i] = bound * (2.0f * (float)((double)(splitmix(rng) >> 11) / 9007199254740992.0) - 1.0f);
    pt_status st = alloc_zero(be, &p->a, r, in, a);
    free(a);
    TRY(st);
    TRY(alloc_zero(be, &p->b, out, r, NULL));
    TRY(alloc_zero(be, &p->m_a, r, in, NULL));
    TRY(alloc_zero(be, &p->v_a, r, in, NULL));
    TRY(alloc_zero(be, &p->m_b, out, r, NULL));
    return alloc_zero(be, &p->v_b, out, r, NULL);
}

/* Lay out every pair's gradients in one buffer (layer by layer, A then B) and point the pairs'
 * grad_a/grad_b at their places. */
static pt_status grads_create(pt_lora *l, const pt_model *m)
{
    int64_t off = 0;
    for (int layer = 0; layer < l->n_layers; layer++) {
        l->layer_off[layer] = off;
        for (int w = 0; w < W_COUNT; w++)
            if (l->target[w]) off += (int64_t)l->r * (m->layers[layer].w[w].shape[0] + m->layers[layer].w[w].shape[1]);
    }
    l->layer_off[l->n_layers] = off;
    TRY(alloc_zero(l->be, &l->grads, 1, off, NULL));
    TRY(alloc_zero(l->be, &l->grads_sum, 1, off, NULL));
    for (int layer = 0; layer < l->n_layers; layer++) {
        int64_t at = l->layer_off[layer];
        for (int w = 0; w < W_COUNT; w++) {
            lora_pair *p = lora_at(l, layer, w);
            if (!p) continue;
            int64_t out = m->layers[layer].w[w].shape[0], in = m->layers[layer].w[w].shape[1];
            int64_t sa[2] = {l->r, in}, sb[2] = {out, l->r};
            p->grad_a = tensor_make(PT_F32, 2, sa);
            p->grad_a.data = (float *)l->grads.data + at;
            at += l->r * in;
            p->grad_b = tensor_make(PT_F32, 2, sb);
            p->grad_b.data = (float *)l->grads.data + at;
            at += l->r * out;
        }
    }
    return PT_OK;
}

pt_tensor lora_grad_span(const pt_lora *l, const pt_tensor *buf, int from, int to)
{
    return tensor_span(buf, l->layer_off[from], l->layer_off[to + 1] - l->layer_off[from]);
}

static pt_status create(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora, const bool target[W_COUNT],
                        uint64_t seed, bool train)
{
    memset(l, 0, sizeof *l);
    l->r = r;
    l->alpha = alpha;
    l->scale = rslora ? alpha / sqrtf((float)r) : alpha / (float)r;
    l->rslora = rslora;
    l->n_layers = m->cfg.n_layers;
    l->be = m->be;
    memcpy(l->target, target, sizeof l->target);
    l->pairs = calloc((size_t)l->n_layers * W_COUNT, sizeof *l->pairs);
    l->layer_off = calloc((size_t)l->n_layers + 1, sizeof *l->layer_off);
    pt_status st = l->pairs && l->layer_off ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK && train) st = grads_create(l, m);
    if (st != PT_OK) {
        lora_free(l);
        return st;
    }
    uint64_t rng = seed;
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            lora_pair *p = lora_at(l, layer, w);
            if (!p) continue;
            const pt_tensor *base = &m->layers[layer].w[w];
            st = pair_create(l->be, p, r, base->shape[0], base->shape[1], &rng, train);
            if (st != PT_OK) {
                lora_free(l);
                return st;
            }
        }
    return PT_OK;
}

pt_status lora_create(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora, const bool target[W_COUNT],
                      uint64_t seed)
{
    return create(l, m, r, alpha, rslora, target, seed, true);
}

pt_status lora_create_frozen(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora,
                             const bool target[W_COUNT])
{
    return create(l, m, r, alpha, rslora, target, 0, false);
}

pt_status lora_init(pt_lora *l, const pt_model *m, const pt_config *cfg)
{
    bool target[W_COUNT] = {0};
    for (int i = 0; i < cfg->lora_target_modules.n; i++)
        for (int w = 0; w < W_COUNT; w++)
            if (arch_peft_module(w) && !strcmp(cfg->lora_target_modules.items[i], arch_peft_module(w))) target[w] = true;
    return lora_create(l, m, (int)cfg->lora_r, (float)cfg->lora_alpha, cfg->use_rslora, target,
                       (uint64_t)cfg->random_state);
}

void lora_free(pt_lora *l)
{
    for (lora_pair *p = lora_next(l, NULL); p; p = lora_next(l, p)) {
        pt_tensor *all[] = {&p->a, &p->b, &p->m_a, &p->v_a, &p->m_b, &p->v_b};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) backend_release(l->be, all[i]);
    }
    if (l->be) {
        backend_release(l->be, &l->grads);
        backend_release(l->be, &l->grads_sum);
    }
    free(l->layer_off);
    free(l->pairs);
    memset(l, 0, sizeof *l);
}

pt_status lora_zero_grads(pt_lora *l)
{
    return l->grads.data ? backend_scale(l->be, &l->grads, 0.0f) : PT_OK;
}

pt_status lora_checksum(const pt_lora *l, uint64_t *hash)
{
    uint64_t h = UTIL_FNV_INIT;
    size_t cap = 0;
    void *host = NULL;
    pt_status st = PT_OK;
    for (lora_pair *p = lora_next(l, NULL); p && st == PT_OK; p = lora_next(l, p)) {
        const pt_tensor *both[2] = {&p->a, &p->b};
        for (int i = 0; i < 2 && st == PT_OK; i++) {
            if (both[i]->nbytes > cap) {
                free(host);
                cap = both[i]->nbytes;
                if (!(host = malloc(cap))) return ERR(PT_ERR_NOMEM, "out of memory");
            }
            st = backend_download(l->be, both[i], host, both[i]->nbytes);
            if (st == PT_OK) h = util_fnv1a(h, host, both[i]->nbytes);
        }
    }
    free(host);
    *hash = h;
    return st;
}

int64_t lora_param_count(const pt_lora *l)
{
    int64_t n = 0;
    for (lora_pair *p = lora_next(l, NULL); p; p = lora_next(l, p)) n += tensor_numel(&p->a) + tensor_numel(&p->b);
    return n;
}
