/* optimizer.c — gradient norm, clipping and AdamW over every LoRA matrix, through the backend ops
 * so the same code runs on CPU and GPU. */
#include "ptrain/optimizer.h"

#include <math.h>

pt_status optimizer_grad_norm(const pt_lora *l, double *norm)
{
    double total = 0;
    for (lora_pair *p = lora_next(l, NULL); p; p = lora_next(l, p)) {
        TRY(backend_sum_squares(l->ad.be, &p->grad_a, &total));
        TRY(backend_sum_squares(l->ad.be, &p->grad_b, &total));
        if (p->grad_m.data) TRY(backend_sum_squares(l->ad.be, &p->grad_m, &total));
    }
    *norm = sqrt(total);
    return PT_OK;
}

pt_status optimizer_step(pt_lora *l, const adamw_options *o, double grad_norm, double lr, int64_t step)
{
    double coef = o->max_grad_norm > 0 ? o->max_grad_norm / (grad_norm + 1e-6) : 1.0;
    pt_adamw hp = {lr, o->beta1, o->beta2, o->eps, o->weight_decay, step};
    for (lora_pair *p = lora_next(l, NULL); p; p = lora_next(l, p)) {
        if (coef < 1.0) {
            TRY(backend_scale(l->ad.be, &p->grad_a, (float)coef));
            TRY(backend_scale(l->ad.be, &p->grad_b, (float)coef));
            if (p->grad_m.data) TRY(backend_scale(l->ad.be, &p->grad_m, (float)coef));
        }
        adapter_pair *w = lora_weights(l, p);
        TRY(backend_adamw_step(l->ad.be, &w->a, &p->grad_a, &p->m_a, &p->v_a, &hp));
        TRY(backend_adamw_step(l->ad.be, &w->b, &p->grad_b, &p->m_b, &p->v_b, &hp));
        if (p->grad_m.data) TRY(backend_adamw_step(l->ad.be, &w->dmag, &p->grad_m, &p->m_m, &p->v_m, &hp));
    }
    adapter_dora_stale(&l->ad); /* DoRA: the norms of the new A and B */
    return PT_OK;
}
