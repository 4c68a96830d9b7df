/* lora_state.c — the adapters and AdamW moments of a pt_lora (and a reward model's score head) as
 * the flat, named arrays of a checkpoint (adapter_layout's entries: one per LoRA matrix, PEFT names,
 * layer order; the score head, then modules_to_save's embedding and LM head last), and back. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/lora.h"
#include "ptrain/saved_modules.h"
#include "ptrain/score_head.h"

/* Entries per pair: A, B, and with DoRA its magnitudes M (adapter_layout's order). */
static int per_pair(const pt_lora *l) { return l->ad.dora ? 3 : 2; }

/* The tensors of entry i: A, m_a, v_a; B, m_b, v_b; DoRA's magnitudes, m_m, v_m (by i's place in its pair). */
static void entry_tensors(const pt_lora *l, const lora_pair *s, int i, pt_tensor *t[3])
{
    adapter_pair *p = lora_weights(l, s);
    lora_pair *q = (lora_pair *)s;
    int k = i % per_pair(l);
    t[0] = k == 2 ? &p->dmag : k ? &p->b : &p->a;
    t[1] = k == 2 ? &q->m_m : k ? &q->m_b : &q->m_a;
    t[2] = k == 2 ? &q->v_m : k ? &q->v_b : &q->v_a;
}

pt_status lora_export(const pt_lora *l, const ckpt_layout *lay, float *params, float *m, float *v)
{
    const lora_pair *s = NULL;
    for (int i = 0; i < lay->n; i++) {
        const ckpt_entry *e = &lay->e[i];
        if (i % per_pair(l) == 0) s = lora_next(l, s);
        if (!s) return ERR(PT_ERR_INTERNAL, "checkpoint layout does not match the adapters");
        size_t bytes = sizeof(float) * (size_t)(e->rows * e->cols);
        pt_tensor *t[3];
        entry_tensors(l, s, i, t);
        float *dst[3] = {params, m, v};
        for (int k = 0; k < 3; k++)
            if (dst[k]) TRY(backend_download(l->ad.be, t[k], dst[k] + e->offset, bytes));
    }
    return PT_OK;
}

pt_status lora_import(pt_lora *l, const ckpt_layout *lay, const float *params, const float *m, const float *v)
{
    const lora_pair *s = NULL;
    float *zeros = NULL;
    pt_status st = PT_OK;
    for (int i = 0; i < lay->n && st == PT_OK; i++) {
        const ckpt_entry *e = &lay->e[i];
        if (i % per_pair(l) == 0) s = lora_next(l, s);
        if (!s) {
            free(zeros);
            return ERR(PT_ERR_INTERNAL, "checkpoint layout does not match the adapters");
        }
        size_t count = (size_t)(e->rows * e->cols), bytes = sizeof(float) * count;
        if (!m || !v) {
            free(zeros);
            zeros = calloc(count + 1, sizeof *zeros);
            if (!zeros) return ERR(PT_ERR_NOMEM, "out of memory");
        }
        pt_tensor *t[3];
        entry_tensors(l, s, i, t);
        const float *src[3] = {params + e->offset, m ? m + e->offset : zeros, v ? v + e->offset : zeros};
        for (int k = 0; k < 3 && st == PT_OK; k++) st = backend_upload(l->ad.be, t[k], src[k], bytes);
    }
    free(zeros);
    return st;
}

/* How many entries at the layout's end are not LoRA matrices: the score head, then the saved modules. */
static int extra_entries(const score_head *h, const saved_modules *sm)
{
    int n = h && h->dim ? 1 : 0;
    for (int i = 0; sm && i < SAVED_COUNT; i++) n += sm->on[i];
    return n;
}

pt_status lora_export_all(const pt_lora *l, const score_head *h, const saved_modules *sm, const ckpt_layout *lay,
                          float *params, float *m, float *v)
{
    ckpt_layout part = *lay;
    part.n -= extra_entries(h, sm);
    TRY(lora_export(l, &part, params, m, v));
    int at = part.n;
    if (h && h->dim) {
        int64_t off = lay->e[at++].offset;
        TRY(score_head_get(h, params + off, m ? m + off : NULL, v ? v + off : NULL));
    }
    for (int i = 0; sm && i < SAVED_COUNT; i++) {
        if (!sm->on[i]) continue;
        int64_t off = lay->e[at++].offset;
        TRY(saved_modules_get(sm, i, params + off, m ? m + off : NULL, v ? v + off : NULL));
    }
    return PT_OK;
}

pt_status lora_import_all(pt_lora *l, score_head *h, saved_modules *sm, const ckpt_layout *lay, const float *params,
                          const float *m, const float *v)
{
    ckpt_layout part = *lay;
    part.n -= extra_entries(h, sm);
    TRY(lora_import(l, &part, params, m, v));
    int at = part.n;
    if (h && h->dim) {
        int64_t off = lay->e[at++].offset;
        TRY(score_head_set(h, params + off, m ? m + off : NULL, v ? v + off : NULL));
    }
    for (int i = 0; sm && i < SAVED_COUNT; i++) {
        if (!sm->on[i]) continue;
        int64_t off = lay->e[at++].offset;
        TRY(saved_modules_set(sm, i, params + off, m ? m + off : NULL, v ? v + off : NULL));
    }
    return PT_OK;
}
