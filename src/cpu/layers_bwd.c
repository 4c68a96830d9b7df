/* layers_bwd.c — the CPU backend's gradients of the per-row layer ops in layers.c:
 *   RMSNorm  y = x * r * w with r = 1/sqrt(mean(x²) + eps) (saved by the forward as rstd):
 *            dx = r * (w∘dy) - x * r³ * <w∘dy, x> / dim,   dw += Σ_rows dy∘x*r;
 *   SwiGLU   y = silu(g) * u with silu(g) = g σ(g):
 *            dg = dy * u * σ(g) (1 + g (1 - σ(g))),         du = dy * silu(g);
 *   GeGLU    y = gelu(g) * u with gelu(g) = g/2 (1 + t), t = tanh(k0 (g + k1 g³)):
 *            dg = dy * u * (1/2 (1 + t) + g/2 (1 - t²) k0 (1 + 3 k1 g²)), du = dy * gelu(g).
 *   Embedding  dtable[ids[r]] += scale * dout[r] (rows in order; threads split the columns).
 * RoPE's gradient (the inverse rotation) lives beside its forward in layers.c. Rows are
 * independent: one OpenMP loop over rows, dot products in double as in the forward. */
#include <math.h>

#include "cpu.h"

enum { DW_COLS = 64 }; /* columns of dw per task: rows are walked once per block */

/* dx for one row; dx may alias dy (the dot product is taken before anything is written). */
static void rmsnorm_bwd_row(float *dx, const float *dy, const float *x, const float *w, float r, const float *res,
                            int64_t dim)
{
    double dot = 0;
    for (int64_t i = 0; i < dim; i++) dot += (double)dy[i] * w[i] * x[i];
    float c = (float)(dot * r * r * r / (double)dim);
    for (int64_t i = 0; i < dim; i++) dx[i] = r * (w[i] * dy[i]) - x[i] * c;
    if (res) /* the residual branch's gradient, added as backend_add would */
        for (int64_t i = 0; i < dim; i++) dx[i] += res[i];
}

/* dw[i] += Σ_rows dy[r, i] * x[r, i] * rstd[r], over column blocks so threads never share a dw entry. */
static void rmsnorm_bwd_weight(float *dw, const float *dy, const float *x, const float *rstd, int64_t rows,
                               int64_t dim)
{
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < dim; c0 += DW_COLS) {
        int64_t n = dim - c0 < DW_COLS ? dim - c0 : DW_COLS;
        double acc[DW_COLS] = {0};
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < n; i++) acc[i] += (double)dy[r * dim + c0 + i] * x[r * dim + c0 + i] * rstd[r];
        for (int64_t i = 0; i < n; i++) dw[c0 + i] += (float)acc[i];
    }
}

pt_status cpu_rmsnorm_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                          const pt_tensor *w, const pt_tensor *rstd, const pt_tensor *res)
{
    (void)be;
    int64_t dim = x->shape[x->ndim - 1], rows = tensor_numel(x) / dim;
    const float *xs = x->data, *ws = w->data, *rs = rstd->data, *dys = dy->data;
    float *dxs = dx->data;
    if (dw) /* before dx, which may overwrite dy */
        rmsnorm_bwd_weight(dw->data, dys, xs, rs, rows, dim);
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        rmsnorm_bwd_row(dxs + r * dim, dys + r * dim, xs + r * dim, ws, rs[r],
                        res ? (const float *)res->data + r * dim : NULL, dim);
    return PT_OK;
}

pt_status cpu_swiglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                         const pt_tensor *gate, const pt_tensor *up)
{
    (void)be;
    int64_t n = tensor_numel(dy);
    const float *g = gate->data, *u = up->data, *d = dy->data;
    float *dg = dgate->data, *du = dup->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float gi = g[i], ui = u[i], di = d[i]; /* read all before writing: outputs may alias inputs */
        float sig = 1.0f / (1.0f + expf(-gi));
        float silu = gi * sig;
        dg[i] = di * ui * (sig * (1.0f + gi * (1.0f - sig)));
        du[i] = di * silu;
    }
    return PT_OK;
}

pt_status cpu_geglu_bwd(pt_backend *be, pt_tensor *dgate, pt_tensor *dup, const pt_tensor *dy,
                        const pt_tensor *gate, const pt_tensor *up)
{
    (void)be;
    int64_t n = tensor_numel(dy);
    const float *g = gate->data, *u = up->data, *d = dy->data;
    float *dg = dgate->data, *du = dup->data;
    const float k0 = 0.7978845608028654f, k1 = 0.044715f; /* sqrt(2/pi) */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float x = g[i], ui = u[i], di = d[i]; /* read all before writing: outputs may alias inputs */
        float t = tanhf(k0 * (x + k1 * x * x * x));
        float gelu = 0.5f * x * (1.0f + t);
        float slope = 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k0 * (1.0f + 3.0f * k1 * x * x);
        dg[i] = di * ui * slope;
        du[i] = di * gelu;
    }
    return PT_OK;
}

pt_status cpu_embed_bwd(pt_backend *be, pt_tensor *dtable, const pt_tensor *dout, const int32_t *ids, float scale)
{
    (void)be;
    int64_t dim = dtable->shape[1], n = tensor_numel(dout) / dim;
    float *dt = (float *)dtable->data;
    const float *dy = (const float *)dout->data;
#pragma omp parallel for schedule(static)
    for (int64_t c0 = 0; c0 < dim; c0 += DW_COLS) { /* a block of columns per task: no entry shared */
        int64_t c1 = c0 + DW_COLS < dim ? c0 + DW_COLS : dim;
        for (int64_t r = 0; r < n; r++) {
            float *row = dt + (int64_t)ids[r] * dim;
            for (int64_t c = c0; c < c1; c++) row[c] += scale * dy[r * dim + c];
        }
    }
    return PT_OK;
}
