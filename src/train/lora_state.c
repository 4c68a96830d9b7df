/* lora_state.c — the adapters and AdamW moments of a pt_lora as the flat, named arrays of a
 * checkpoint (one entry per LoRA matrix, PEFT names, layer order), and back. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/adapter.h"
#include "ptrain/resume.h"

pt_status lora_layout(const pt_lora *l, ckpt_layout *lay)
{
    *lay = (ckpt_layout){0};
    int n = 0;
    for (lora_pair *p = lora_next(l, NULL); p; p = lora_next(l, p)) n += 2;
    lay->e = calloc((size_t)n + 1, sizeof *lay->e);
    TRY_ALLOC(lay->e);
    for (int layer = 0; layer < l->n_layers; layer++)
        for (int w = 0; w < W_COUNT; w++) {
            lora_pair *p = lora_at(l, layer, w);
            for (int ab = 0; p && ab < 2; ab++) {
                ckpt_entry *e = &lay->e[lay->n++];
                const pt_tensor *t = ab ? &p->b : &p->a;
                adapter_tensor_name(e->name, sizeof e->name, layer, w, ab ? 'B' : 'A');
                e->rows = t->shape[0], e->cols = t->shape[1], e->offset = lay->total;
                lay->total += e->rows * e->cols;
            }
        }
    return PT_OK;
}

/* The tensors of entry i: A, m_a, v_a for even i, B, m_b, v_b for odd i (lora_layout's order). */
static lora_pair *pair_of(const pt_lora *l, int i)
{
    lora_pair *p = lora_next(l, NULL);
    for (int k = 0; k < i / 2 && p; k++) p = lora_next(l, p);
    return p;
}

pt_status lora_export(const pt_lora *l, const ckpt_layout *lay, float *params, float *m, float *v)
{
    lora_pair *p = NULL;
    for (int i = 0; i < lay->n; i++) {
        const ckpt_entry *e = &lay->e[i];
        if (i % 2 == 0) p = p ? lora_next(l, p) : pair_of(l, 0);
        if (!p) return ERR(PT_ERR_INTERNAL, "checkpoint layout does not match the adapters");
        size_t bytes = sizeof(float) * (size_t)(e->rows * e->cols);
        const pt_tensor *t[3] = {i % 2 ? &p->b : &p->a, i % 2 ? &p->m_b : &p->m_a, i % 2 ? &p->v_b : &p->v_a};
        float *dst[3] = {params, m, v};
        for (int k = 0; k < 3; k++)
            if (dst[k]) TRY(backend_download(l->be, t[k], dst[k] + e->offset, bytes));
    }
    return PT_OK;
}

pt_status lora_import(pt_lora *l, const ckpt_layout *lay, const float *params, const float *m, const float *v)
{
    lora_pair *p = NULL;
    float *zeros = NULL;
    pt_status st = PT_OK;
    for (int i = 0; i < lay->n && st == PT_OK; i++) {
        const ckpt_entry *e = &lay->e[i];
        if (i % 2 == 0) p = p ? lora_next(l, p) : pair_of(l, 0);
        if (!p) {
            free(zeros);
            return ERR(PT_ERR_INTERNAL, "checkpoint layout does not match the adapters");
        }
        size_t count = (size_t)(e->rows * e->cols), bytes = sizeof(float) * count;
        if (!m || !v) {
            free(zeros);
            zeros = calloc(count + 1, sizeof *zeros);
            if (!zeros) return ERR(PT_ERR_NOMEM, "out of memory");
        }
        pt_tensor *t[3] = {i % 2 ? &p->b : &p->a, i % 2 ? &p->m_b : &p->m_a, i % 2 ? &p->v_b : &p->v_a};
        const float *src[3] = {params + e->offset, m ? m + e->offset : zeros, v ? v + e->offset : zeros};
        for (int k = 0; k < 3 && st == PT_OK; k++) st = backend_upload(l->be, t[k], src[k], bytes);
    }
    free(zeros);
    return st;
}
