/* moe.c — the CPU backend's mixture-of-experts ops (backend.h, "Mixture of experts"): the router's
 * softmax and top-k, the gather of each expert's rows, and the weighted combine back into the
 * residual stream. The expert products themselves are matmuls (backend_moe_matmul). Each op is one
 * OpenMP loop over rows; the reference the CUDA twins (cuda/moe.cu) are tested against. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

/* Row t of the router: softmax over n logits in fp32 (max subtracted), the k largest (ties to the lower
 * expert), optionally renormalised; p is n floats of scratch. */
static void route_row(const float *z, int64_t n, int k, bool norm, float *p, int32_t *expert, float *weight)
{
    float mx = z[0];
    for (int64_t e = 1; e < n; e++) mx = z[e] > mx ? z[e] : mx;
    float sum = 0.0f;
    for (int64_t e = 0; e < n; e++) sum += p[e] = expf(z[e] - mx);
    for (int64_t e = 0; e < n; e++) p[e] /= sum;
    float total = 0.0f;
    for (int s = 0; s < k; s++) {
        int64_t best = -1;
        for (int64_t e = 0; e < n; e++)
            if (p[e] >= 0.0f && (best < 0 || p[e] > p[best])) best = e;
        if (best < 0) { /* NaN logits: no expert (the caller refuses it) */
            expert[s] = -1, weight[s] = 0.0f;
            continue;
        }
        expert[s] = (int32_t)best;
        weight[s] = p[best];
        total += p[best];
        p[best] = -1.0f; /* taken */
    }
    for (int s = 0; norm && s < k; s++) weight[s] /= total;
}

pt_status cpu_moe_route(pt_backend *be, int32_t *expert, float *weight, const pt_tensor *logits, int k, bool norm)
{
    (void)be;
    int64_t rows = logits->shape[0], n = logits->shape[1];
    float *scratch = malloc(sizeof(float) * (size_t)(rows * n));
    TRY_ALLOC(scratch);
    const float *z = logits->data;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows; t++)
        route_row(z + t * n, n, k, norm, scratch + t * n, expert + t * k, weight + t * k);
    free(scratch);
    return PT_OK;
}

pt_status cpu_moe_gather(pt_backend *be, pt_tensor *xs, const pt_tensor *x, const int32_t *token)
{
    (void)be;
    int64_t rows = xs->shape[0], dim = xs->shape[1];
    float *out = xs->data;
    const float *in = x->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; i++) memcpy(out + i * dim, in + (int64_t)token[i] * dim, sizeof(float) * (size_t)dim);
    return PT_OK;
}

pt_status cpu_moe_combine(pt_backend *be, pt_tensor *y, const pt_tensor *ys, const int32_t *row, const float *weight,
                          int k)
{
    (void)be;
    int64_t rows = y->shape[0], dim = y->shape[1];
    float *out = y->data;
    const float *in = ys->data;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows; t++)
        for (int64_t i = 0; i < dim; i++) {
            float acc = 0.0f;
            for (int s = 0; s < k; s++) acc += weight[t * k + s] * in[(int64_t)row[t * k + s] * dim + i];
            out[t * dim + i] += acc;
        }
    return PT_OK;
}

pt_status cpu_moe_combine_bwd(pt_backend *be, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *ys,
                              const int32_t *row, const float *weight, int k)
{
    (void)be;
    int64_t rows = dy->shape[0], dim = dy->shape[1];
    const float *g = dy->data, *y = ys->data;
    float *out = dys->data, *w = dw->data;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows; t++)
        for (int s = 0; s < k; s++) {
            int64_t r = row[t * k + s];
            double acc = 0;
            for (int64_t i = 0; i < dim; i++) acc += (double)g[t * dim + i] * y[r * dim + i];
            w[t * k + s] = (float)acc;
            for (int64_t i = 0; i < dim; i++) out[r * dim + i] = weight[t * k + s] * g[t * dim + i];
        }
    return PT_OK;
}

/* Row t's gradient of the k routing weights (dw) back to its logits z: p = softmax(z) again, dp on the
 * chosen experts (through the renormalisation with norm), dz = p (dp - Σ p dp); scratch: 2n floats. */
static void route_bwd_row(float *dz, const float *z, const float *dw, const int32_t *expert, int64_t n, int k,
                          bool norm, float *scratch)
{
    float *p = scratch, *dp = scratch + n;
    float mx = z[0];
    for (int64_t e = 1; e < n; e++) mx = z[e] > mx ? z[e] : mx;
    float sum = 0.0f;
    for (int64_t e = 0; e < n; e++) sum += p[e] = expf(z[e] - mx);
    for (int64_t e = 0; e < n; e++) p[e] /= sum, dp[e] = 0.0f;
    double top = 0, wdw = 0;
    for (int s = 0; s < k; s++) top += p[expert[s]];
    for (int s = 0; s < k; s++) wdw += (double)dw[s] * (p[expert[s]] / top);
    for (int s = 0; s < k; s++) dp[expert[s]] = norm ? (float)((dw[s] - wdw) / top) : dw[s];
    double pdp = 0;
    for (int64_t e = 0; e < n; e++) pdp += (double)p[e] * dp[e];
    for (int64_t e = 0; e < n; e++) dz[e] = p[e] * (float)(dp[e] - pdp);
}

pt_status cpu_moe_route_bwd(pt_backend *be, pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *dw,
                            const int32_t *expert, int k, bool norm)
{
    (void)be;
    int64_t rows = logits->shape[0], n = logits->shape[1];
    float *scratch = malloc(sizeof(float) * (size_t)(2 * rows * n));
    TRY_ALLOC(scratch);
    const float *z = logits->data, *g = dw->data;
    float *out = dlogits->data;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows; t++)
        route_bwd_row(out + t * n, z + t * n, g + t * k, expert + t * k, n, k, norm, scratch + 2 * t * n);
    free(scratch);
    return PT_OK;
}
