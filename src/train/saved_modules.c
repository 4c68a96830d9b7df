/* saved_modules.c — PEFT's modules_to_save (saved_modules.h): the fp32 copies of the embedding and
 * the LM head, dequantized once from the model's weights on the host, their gradients summed over
 * the ranks, and their AdamW step through the backend's own op. */
#include "ptrain/saved_modules.h"

#include <stdlib.h>
#include <string.h>

#include "ptrain/adapter.h"
#include "ptrain/nf4.h"
#include "ptrain/quant.h"

_Static_assert((int)SAVED_EMBED == (int)ADAPTER_SAVED_EMBED && (int)SAVED_HEAD == (int)ADAPTER_SAVED_HEAD, "one order of the modules");

const char *saved_modules_name(int i) { return adapter_saved_tensor(i); }
const char *saved_modules_module(int i) { return adapter_saved_module(i); }

bool saved_modules_any(const saved_modules *s) { return s->on[SAVED_EMBED] || s->on[SAVED_HEAD]; }

int64_t saved_modules_params(const saved_modules *s)
{
    return (s->on[SAVED_EMBED] + s->on[SAVED_HEAD]) * s->rows * s->cols;
}

/* A weight of the model (any format it stores) as rows x cols floats on the host. */
static pt_status dequantize_weight(pt_backend *be, const pt_tensor *t, float *out)
{
    int64_t rows = t->shape[0], cols = t->shape[1];
    void *raw = malloc(t->nbytes);
    TRY_ALLOC(raw);
    pt_status st = backend_download(be, t, raw, t->nbytes);
    if (st == PT_OK && t->dtype == PT_NF4) st = nf4_dequantize_rows(raw, rows, cols, 0, rows, out);
    else if (st == PT_OK) {
        size_t row_bytes = dtype_size_bytes(t->dtype, cols);
        for (int64_t r = 0; r < rows && st == PT_OK; r++)
            st = quant_dequantize_row(t->dtype, (const char *)raw + (size_t)r * row_bytes, out + r * cols, cols);
    }
    free(raw);
    return st;
}

pt_status saved_modules_create(saved_modules *s, pt_model *m, bool embed, bool head)
{
    memset(s, 0, sizeof *s);
    if (!embed && !head) return PT_OK;
    if (embed && m->cfg.ple_dim > 0) /* the per-layer inputs read the scaled embeddings too: no gradient through them */
        return ERR(PT_ERR_USER, "modules_to_save: embed_tokens is not trainable on %s models yet (their per-layer "
                   "inputs are computed from the embeddings); leave it out of modules_to_save", arch_name(m->cfg.arch));
    s->model = m, s->rows = m->tok_embd.shape[0], s->cols = m->tok_embd.shape[1];
    s->base[SAVED_EMBED] = m->tok_embd, s->base[SAVED_HEAD] = m->output;
    s->on[SAVED_EMBED] = embed, s->on[SAVED_HEAD] = head;
    int64_t shape[2] = {s->rows, s->cols};
    size_t count = (size_t)(s->rows * s->cols);
    float *host = malloc(sizeof(float) * count), *zero = calloc(count, sizeof(float));
    pt_status st = host && zero ? PT_OK : ERR(PT_ERR_NOMEM, "modules_to_save: no memory for %lld x %lld values",
                                              (long long)s->rows, (long long)s->cols);
    for (int i = 0; i < SAVED_COUNT && st == PT_OK; i++) {
        if (!s->on[i]) continue;
        if (s->base[i].ndim != 2 || s->base[i].shape[0] != s->rows || s->base[i].shape[1] != s->cols)
            st = ERR(PT_ERR_UNSUPPORTED, "modules_to_save: the model's %s is not [%lld, %lld]", adapter_saved_module(i),
                     (long long)s->rows, (long long)s->cols);
        pt_tensor *t[4] = {&s->w[i], &s->grad[i], &s->m[i], &s->v[i]};
        for (int k = 0; k < 4 && st == PT_OK; k++) {
            *t[k] = tensor_make(PT_F32, 2, shape);
            st = backend_alloc(m->be, t[k]);
            if (st == PT_OK) st = backend_upload(m->be, t[k], zero, t[k]->nbytes);
        }
        if (st == PT_OK) st = dequantize_weight(m->be, &s->base[i], host);
        if (st == PT_OK) st = backend_upload(m->be, &s->w[i], host, s->w[i].nbytes);
    }
    free(host), free(zero);
    if (st != PT_OK) {
        saved_modules_free(s);
        return st;
    }
    if (embed) m->tok_embd = s->w[SAVED_EMBED];
    if (head) m->output = s->w[SAVED_HEAD];
    return PT_OK;
}

void saved_modules_free(saved_modules *s)
{
    if (!s->model) return;
    pt_model *m = s->model;
    m->tok_embd = s->base[SAVED_EMBED], m->output = s->base[SAVED_HEAD];
    for (int i = 0; i < SAVED_COUNT; i++) {
        pt_tensor *t[5] = {&s->w[i], &s->grad[i], &s->m[i], &s->v[i], &s->sum[i]};
        for (int k = 0; k < 5; k++)
            if (t[k]->data) backend_release(m->be, t[k]);
    }
    memset(s, 0, sizeof *s);
}

pt_status saved_modules_zero_grad(saved_modules *s)
{
    for (int i = 0; i < SAVED_COUNT; i++)
        if (s->on[i]) TRY(backend_zero(s->model->be, &s->grad[i]));
    return PT_OK;
}

pt_status saved_modules_accumulate(saved_modules *s)
{
    for (int i = 0; i < SAVED_COUNT; i++) {
        if (!s->on[i] || s->sum[i].data) continue;
        s->sum[i] = tensor_make(PT_F32, 2, s->w[i].shape);
        TRY(backend_alloc(s->model->be, &s->sum[i]));
    }
    return PT_OK;
}

pt_status saved_modules_zero_sum(saved_modules *s)
{
    for (int i = 0; i < SAVED_COUNT; i++)
        if (s->on[i] && s->sum[i].data) TRY(backend_zero(s->model->be, &s->sum[i]));
    return PT_OK;
}

pt_status saved_modules_add_micro(saved_modules *s)
{
    for (int i = 0; i < SAVED_COUNT; i++)
        if (s->on[i] && s->sum[i].data) TRY(backend_add(s->model->be, &s->sum[i], &s->grad[i]));
    return PT_OK;
}

pt_status saved_modules_take_sum(saved_modules *s)
{
    for (int i = 0; i < SAVED_COUNT; i++)
        if (s->on[i] && s->sum[i].data) TRY(backend_copy(s->model->be, &s->grad[i], &s->sum[i]));
    return PT_OK;
}

pt_status saved_modules_grad_sum(saved_modules *s)
{
    for (int i = 0; i < SAVED_COUNT; i++)
        if (s->on[i]) TRY(backend_allreduce_sum(s->model->be, &s->grad[i]));
    return PT_OK;
}

pt_status saved_modules_grad_sum_squares(const saved_modules *s, double *total)
{
    for (int i = 0; i < SAVED_COUNT; i++)
        if (s->on[i]) TRY(backend_sum_squares(s->model->be, &s->grad[i], total));
    return PT_OK;
}

pt_status saved_modules_step(saved_modules *s, const adamw_options *o, double grad_norm, double lr, int64_t step)
{
    double coef = o->max_grad_norm > 0 ? o->max_grad_norm / (grad_norm + 1e-6) : 1.0;
    pt_adamw hp = {lr, o->beta1, o->beta2, o->eps, o->weight_decay, step};
    for (int i = 0; i < SAVED_COUNT; i++) {
        if (!s->on[i]) continue;
        if (coef < 1.0) TRY(backend_scale(s->model->be, &s->grad[i], (float)coef));
        TRY(backend_adamw_step(s->model->be, &s->w[i], &s->grad[i], &s->m[i], &s->v[i], &hp));
    }
    return PT_OK;
}

pt_status saved_modules_get(const saved_modules *s, int i, float *w, float *m, float *v)
{
    pt_backend *be = s->model->be;
    TRY(backend_download(be, &s->w[i], w, s->w[i].nbytes));
    if (m) TRY(backend_download(be, &s->m[i], m, s->m[i].nbytes));
    if (v) TRY(backend_download(be, &s->v[i], v, s->v[i].nbytes));
    return PT_OK;
}

pt_status saved_modules_set(saved_modules *s, int i, const float *w, const float *m, const float *v)
{
    pt_backend *be = s->model->be;
    TRY(backend_upload(be, &s->w[i], w, s->w[i].nbytes));
    if (m && v) {
        TRY(backend_upload(be, &s->m[i], m, s->m[i].nbytes));
        return backend_upload(be, &s->v[i], v, s->v[i].nbytes);
    }
    TRY(backend_zero(be, &s->m[i]));
    return backend_zero(be, &s->v[i]);
}
