/* score_head.c — the reward model's score head (score_head.h): its fp32 tensors on the backend,
 * its seeded normal initialisation, and its AdamW step through the backend's own op. */
#include "ptrain/score_head.h"
#include "ptrain/util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double unit(uint64_t *rng) { return ((double)(rng_next(rng) >> 11) + 0.5) / 9007199254740992.0; }

pt_status score_head_create(score_head *s, pt_backend *be, int64_t dim, double std, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->dim = dim, s->be = be;
    int64_t shape[2] = {1, dim};
    pt_tensor *t[4] = {&s->w, &s->grad, &s->m, &s->v};
    s->host_w = calloc((size_t)dim, sizeof(float));
    s->host_grad = calloc((size_t)dim, sizeof(float));
    float *zero = calloc((size_t)dim, sizeof(float));
    pt_status st = s->host_w && s->host_grad && zero ? PT_OK : ERR(PT_ERR_NOMEM, "score head: no memory");
    for (int i = 0; i < 4 && st == PT_OK; i++) {
        *t[i] = tensor_make(PT_F32, 2, shape);
        st = backend_alloc(be, t[i]);
        if (st == PT_OK) st = backend_upload(be, t[i], zero, t[i]->nbytes);
    }
    uint64_t rng = seed;
    for (int64_t k = 0; k < dim && st == PT_OK; k += 2) { /* Box-Muller: two normals from two uniforms */
        double r = sqrt(-2.0 * log(unit(&rng))), a = 2.0 * M_PI * unit(&rng);
        s->host_w[k] = (float)(std * r * cos(a));
        if (k + 1 < dim) s->host_w[k + 1] = (float)(std * r * sin(a));
    }
    if (st == PT_OK) st = backend_upload(be, &s->w, s->host_w, s->w.nbytes);
    free(zero);
    if (st != PT_OK) score_head_free(s);
    return st;
}

void score_head_free(score_head *s)
{
    if (s->be) {
        backend_release(s->be, &s->w), backend_release(s->be, &s->grad);
        backend_release(s->be, &s->m), backend_release(s->be, &s->v);
    }
    free(s->host_w), free(s->host_grad);
    memset(s, 0, sizeof *s);
}

pt_status score_head_set(score_head *s, const float *w, const float *m, const float *v)
{
    size_t bytes = s->w.nbytes;
    memcpy(s->host_w, w, bytes);
    TRY(backend_upload(s->be, &s->w, w, bytes));
    if (m && v) {
        TRY(backend_upload(s->be, &s->m, m, bytes));
        return backend_upload(s->be, &s->v, v, bytes);
    }
    float *zero = calloc((size_t)s->dim, sizeof(float));
    TRY_ALLOC(zero);
    pt_status st = backend_upload(s->be, &s->m, zero, bytes);
    if (st == PT_OK) st = backend_upload(s->be, &s->v, zero, bytes);
    free(zero);
    return st;
}

pt_status score_head_get(const score_head *s, float *w, float *m, float *v)
{
    TRY(backend_download(s->be, &s->w, w, s->w.nbytes));
    if (m) TRY(backend_download(s->be, &s->m, m, s->m.nbytes));
    if (v) TRY(backend_download(s->be, &s->v, v, s->v.nbytes));
    return PT_OK;
}

void score_head_zero_grad(score_head *s) { memset(s->host_grad, 0, sizeof(float) * (size_t)s->dim); }

pt_status score_head_grad_upload(score_head *s) { return backend_upload(s->be, &s->grad, s->host_grad, s->grad.nbytes); }

pt_status score_head_grad_sum_squares(const score_head *s, double *total)
{
    return backend_sum_squares(s->be, &s->grad, total);
}

pt_status score_head_step(score_head *s, const adamw_options *o, double grad_norm, double lr, int64_t step)
{
    double coef = o->max_grad_norm > 0 ? o->max_grad_norm / (grad_norm + 1e-6) : 1.0;
    pt_adamw hp = {lr, o->beta1, o->beta2, o->eps, o->weight_decay, step};
    if (coef < 1.0) TRY(backend_scale(s->be, &s->grad, (float)coef));
    TRY(backend_adamw_step(s->be, &s->w, &s->grad, &s->m, &s->v, &hp));
    return backend_download(s->be, &s->w, s->host_w, s->w.nbytes);
}
