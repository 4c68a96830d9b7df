/* moe_aux.c — the aux load-balancing loss of a mixture of experts, as transformers' load_balancing_loss_func
 * computes it when a model runs with output_router_logits (Switch Transformer's eqs. 4-6): over every sparse
 * layer's router, f = the top-k choices per expert and P = the softmax probabilities per expert, each summed over
 * the layers' counted rows (the attention mask's) and divided by their total; aux = E Σₑ fₑ Pₑ. The choices are
 * not differentiable, so the gradient flows through P alone: d aux / d pₜₑ = E fₑ / total on a counted row,
 * then through the softmax to the router logits. Host arithmetic in double on the logits brought over (one
 * [rows, E] matrix per layer: small beside the layer). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/forward.h"
#include "ptrain/quant.h"

pt_status moe_aux_open(moe_aux *aux, int n_experts, float coef, const uint8_t *mask)
{
    memset(aux, 0, sizeof *aux);
    aux->coef = coef, aux->mask = mask, aux->n_experts = n_experts;
    aux->count = calloc((size_t)n_experts, sizeof(double));
    aux->prob = calloc((size_t)n_experts, sizeof(double));
    if (aux->count && aux->prob) return PT_OK;
    moe_aux_close(aux);
    return ERR(PT_ERR_NOMEM, "out of memory");
}

void moe_aux_close(moe_aux *aux)
{
    free(aux->count), free(aux->prob);
    aux->count = aux->prob = NULL;
}

/* t (f32 or bf16 [rows, cols]) as f32 on the host (free it), or NULL. */
static float *host_f32(pt_backend *be, const pt_tensor *t)
{
    size_t n = (size_t)tensor_numel(t);
    float *v = malloc(sizeof(float) * n);
    if (!v || (t->dtype != PT_F32 && t->dtype != PT_BF16)) return free(v), NULL;
    if (backend_download(be, t, v, t->nbytes) != PT_OK) return free(v), NULL;
    for (size_t i = n; t->dtype == PT_BF16 && i-- > 0;) v[i] = quant_bf16_to_f32(((const uint16_t *)v)[i]);
    return v;
}

/* Row t's softmax into p (double) */
static void softmax_row(const float *z, int n, double *p)
{
    double mx = z[0], sum = 0;
    for (int e = 1; e < n; e++) mx = fmax(mx, z[e]);
    for (int e = 0; e < n; e++) sum += p[e] = exp((double)z[e] - mx);
    for (int e = 0; e < n; e++) p[e] /= sum;
}

pt_status moe_aux_add(moe_aux *aux, pt_backend *be, const pt_tensor *logits, const int32_t *expert, int k)
{
    if (aux->frozen) return PT_OK;
    int n = aux->n_experts;
    int64_t rows = logits->shape[0];
    float *z = host_f32(be, logits);
    double *p = malloc(sizeof(double) * (size_t)n);
    if (!z || !p) return free(z), free(p), ERR(PT_ERR_NOMEM, "the aux loss: out of memory (or logits not f32/bf16)");
    for (int64_t t = 0; t < rows; t++) {
        if (aux->mask && !aux->mask[t]) continue;
        softmax_row(z + t * n, n, p);
        for (int e = 0; e < n; e++) aux->prob[e] += p[e];
        for (int s = 0; s < k; s++) aux->count[expert[t * k + s]] += 1.0;
        aux->total += 1.0;
    }
    free(z), free(p);
    return PT_OK;
}

double moe_aux_value(const moe_aux *aux)
{
    if (aux->total <= 0) return 0.0;
    double sum = 0;
    for (int e = 0; e < aux->n_experts; e++) sum += (aux->count[e] / aux->total) * (aux->prob[e] / aux->total);
    return sum * aux->n_experts;
}

pt_status moe_aux_backward(const moe_aux *aux, pt_backend *be, const pt_tensor *logits, pt_tensor *grad)
{
    int n = aux->n_experts;
    int64_t rows = logits->shape[0];
    if (aux->total <= 0 || aux->coef == 0.0f) return backend_zero(be, grad);
    float *z = host_f32(be, logits);
    double *p = malloc(sizeof(double) * (size_t)n), *g = malloc(sizeof(double) * (size_t)n);
    if (!z || !p || !g) return free(z), free(p), free(g), ERR(PT_ERR_NOMEM, "the aux loss: out of memory");
    for (int e = 0; e < n; e++) g[e] = aux->coef * n * (aux->count[e] / aux->total) / aux->total;
    for (int64_t t = 0; t < rows; t++) { /* through the softmax: p (g - p·g) */
        float *d = z + t * n;
        if (aux->mask && !aux->mask[t]) {
            memset(d, 0, sizeof(float) * (size_t)n);
            continue;
        }
        softmax_row(d, n, p);
        double dot = 0;
        for (int e = 0; e < n; e++) dot += p[e] * g[e];
        for (int e = 0; e < n; e++) d[e] = (float)(p[e] * (g[e] - dot));
    }
    if (grad->dtype == PT_BF16)
        for (size_t i = 0; i < (size_t)(rows * n); i++) ((uint16_t *)z)[i] = quant_f32_to_bf16(z[i]);
    pt_status st = backend_upload(be, grad, z, grad->nbytes);
    free(z), free(p), free(g);
    return st;
}
