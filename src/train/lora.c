/* lora.c — training LoRA adapters (lora.h): the adapter (adapter.c creates and initialises it as
 * PEFT does) and, per adapted projection, gradients laid out in one buffer and zero AdamW moments. */
#include "ptrain/lora.h"

#include <stdlib.h>
#include <string.h>

lora_pair *lora_at(const pt_lora *l, int layer, int w)
{
    if (!l || !l->pairs || !l->ad.target[w]) return NULL;
    return &l->pairs[(size_t)layer * W_COUNT + (size_t)w];
}

lora_pair *lora_next(const pt_lora *l, const lora_pair *prev)
{
    if (!l || !l->pairs) return NULL;
    size_t total = (size_t)l->ad.n_layers * W_COUNT;
    for (size_t i = prev ? (size_t)(prev - l->pairs) + 1 : 0; i < total; i++)
        if (l->ad.target[i % W_COUNT]) return &l->pairs[i];
    return NULL;
}

adapter_pair *lora_weights(const pt_lora *l, const lora_pair *p) { return &l->ad.pairs[p - l->pairs]; }

static pt_status zeros_like(pt_backend *be, pt_tensor *t, const pt_tensor *like)
{
    *t = tensor_make(PT_F32, 2, like->shape);
    TRY(backend_alloc(be, t));
    return backend_zero(be, t);
}

/* Lay out every pair's gradients in one buffer (layer by layer, A then B) and point the pairs'
 * grad_a/grad_b at their places. */
static pt_status grads_create(pt_lora *l)
{
    const pt_adapter *ad = &l->ad;
    int64_t off = 0;
    for (int layer = 0; layer < ad->n_layers; layer++) {
        l->layer_off[layer] = off;
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(ad, layer, w);
            if (p) off += tensor_numel(&p->a) + tensor_numel(&p->b);
        }
    }
    l->layer_off[ad->n_layers] = off;
    int64_t shape[2] = {1, off};
    pt_tensor like = tensor_make(PT_F32, 2, shape);
    TRY(zeros_like(ad->be, &l->grads, &like));
    TRY(zeros_like(ad->be, &l->grads_sum, &like));
    for (int layer = 0; layer < ad->n_layers; layer++) {
        int64_t at = l->layer_off[layer];
        for (int w = 0; w < W_COUNT; w++) {
            adapter_pair *p = adapter_at(ad, layer, w);
            if (!p) continue;
            lora_pair *s = lora_at(l, layer, w);
            s->grad_a = tensor_make(PT_F32, 2, p->a.shape);
            s->grad_a.data = (float *)l->grads.data + at;
            at += tensor_numel(&p->a);
            s->grad_b = tensor_make(PT_F32, 2, p->b.shape);
            s->grad_b.data = (float *)l->grads.data + at;
            at += tensor_numel(&p->b);
        }
    }
    return PT_OK;
}

static pt_status moments_create(pt_lora *l)
{
    for (lora_pair *s = lora_next(l, NULL); s; s = lora_next(l, s)) {
        const adapter_pair *p = lora_weights(l, s);
        TRY(zeros_like(l->ad.be, &s->m_a, &p->a));
        TRY(zeros_like(l->ad.be, &s->v_a, &p->a));
        TRY(zeros_like(l->ad.be, &s->m_b, &p->b));
        TRY(zeros_like(l->ad.be, &s->v_b, &p->b));
    }
    return PT_OK;
}

pt_status lora_create(pt_lora *l, const pt_model *m, int r, float alpha, bool rslora, const bool target[W_COUNT],
                      uint64_t seed)
{
    memset(l, 0, sizeof *l);
    TRY(adapter_create(&l->ad, m, r, alpha, rslora, target, &seed));
    l->pairs = calloc((size_t)l->ad.n_layers * W_COUNT, sizeof *l->pairs);
    l->layer_off = calloc((size_t)l->ad.n_layers + 1, sizeof *l->layer_off);
    pt_status st = l->pairs && l->layer_off ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) st = grads_create(l);
    if (st == PT_OK) st = moments_create(l);
    if (st != PT_OK) lora_free(l);
    return st;
}

pt_status lora_init(pt_lora *l, const pt_model *m, const pt_config *cfg)
{
    bool target[W_COUNT] = {0};
    for (int i = 0; i < cfg->lora_target_modules.n; i++)
        for (int w = 0; w < W_COUNT; w++)
            if (adapter_module_name(w) && !strcmp(cfg->lora_target_modules.items[i], adapter_module_name(w)))
                target[w] = true;
    return lora_create(l, m, (int)cfg->lora_r, (float)cfg->lora_alpha, cfg->use_rslora, target,
                       (uint64_t)cfg->random_state);
}

void lora_free(pt_lora *l)
{
    pt_backend *be = l->ad.be;
    for (lora_pair *s = lora_next(l, NULL); s; s = lora_next(l, s)) {
        pt_tensor *all[] = {&s->m_a, &s->v_a, &s->m_b, &s->v_b};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) backend_release(be, all[i]);
    }
    if (be) {
        backend_release(be, &l->grads);
        backend_release(be, &l->grads_sum);
    }
    free(l->layer_off);
    free(l->pairs);
    adapter_free(&l->ad);
    memset(l, 0, sizeof *l);
}

pt_status lora_zero_grads(pt_lora *l)
{
    return l->grads.data ? backend_scale(l->ad.be, &l->grads, 0.0f) : PT_OK;
}

pt_tensor lora_grad_span(const pt_lora *l, const pt_tensor *buf, int from, int to)
{
    return tensor_span(buf, l->layer_off[from], l->layer_off[to + 1] - l->layer_off[from]);
}
