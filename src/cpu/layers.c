/* layers.c — the CPU backend's per-row layer ops: embedding lookup, RMSNorm (alone, or after the
 * residual add in the same pass over a row), rotary embedding
 * (Hugging Face "rotate half" layout), the gated activations SwiGLU and GeGLU (tanh GELU, Gemma),
 * residual add and bias add (Qwen2). Rows are independent, so each op is one OpenMP loop over
 * rows; sums are kept in double where rounding would show. */
#include <math.h>

#include "cpu.h"

pt_status cpu_embed(pt_backend *be, pt_tensor *out, const pt_tensor *table, const int32_t *ids)
{
    (void)be;
    int64_t dim = table->shape[1], n = tensor_numel(out) / dim;
    pt_status st = PT_OK;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        pt_status s = cpu_dequantize_rows(table, ids[i], 1, (float *)out->data + i * dim);
        if (s != PT_OK) st = s; /* only fails for an unsupported dtype: the same on every row */
    }
    return st;
}

/* Row r of y = x r * w, r = 1 / sqrt(mean(x²) + eps) (the sum of squares in double); x is first
 * x += add (the residual), when add is not NULL. */
static void rmsnorm_row(float *y, float *rstd, float *x, const float *add, const float *w, int64_t dim, float eps)
{
    if (add)
        for (int64_t i = 0; i < dim; i++) x[i] += add[i];
    double ss = 0;
    for (int64_t i = 0; i < dim; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / (double)dim + eps));
    if (rstd) *rstd = inv;
    for (int64_t i = 0; i < dim; i++) y[i] = x[i] * inv * w[i];
}

/* Every row of x through rmsnorm_row (with the residual add when add is not NULL). */
static void rmsnorm_rows(pt_tensor *y, pt_tensor *rstd, const pt_tensor *x, const pt_tensor *add, const pt_tensor *w,
                         float eps)
{
    int64_t dim = x->shape[x->ndim - 1], rows = tensor_numel(x) / dim;
    float *rs = rstd ? rstd->data : NULL;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        rmsnorm_row((float *)y->data + r * dim, rs ? rs + r : NULL, (float *)x->data + r * dim,
                    add ? (const float *)add->data + r * dim : NULL, w->data, dim, eps);
}

pt_status cpu_rmsnorm_fwd(pt_backend *be, pt_tensor *y, pt_tensor *rstd, const pt_tensor *x,
                          const pt_tensor *w, float eps)
{
    (void)be;
    rmsnorm_rows(y, rstd, x, NULL, w, eps);
    return PT_OK;
}

pt_status cpu_add_rmsnorm(pt_backend *be, pt_tensor *h, pt_tensor *y, pt_tensor *rstd, const pt_tensor *r,
                          const pt_tensor *w, float eps)
{
    (void)be;
    rmsnorm_rows(y, rstd, h, r, w, eps);
    return PT_OK;
}

/* x[t, h, i] and x[t, h, i + half] rotate by angle pos[t] * inv_freq[i], half = rot_dim / 2 (the
 * values from rot_dim on pass), cos and sin times mscale */
static void rope_rows(pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale, const int32_t *pos,
                      const float *inv_freq, float sign)
{
    int64_t width = (int64_t)n_heads * head_dim, rows = tensor_numel(x) / width;
    int half = rot_dim / 2;
    float *xs = x->data;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows; t++) {
        for (int i = 0; i < half; i++) {
            double angle = (double)pos[t] * inv_freq[i];
            float c = (float)cos(angle) * mscale, s = sign * (float)sin(angle) * mscale;
            for (int h = 0; h < n_heads; h++) {
                float *p = xs + t * width + (int64_t)h * head_dim;
                float a = p[i], b = p[i + half];
                p[i] = a * c - b * s;
                p[i + half] = b * c + a * s;
            }
        }
    }
}

pt_status cpu_rope_fwd(pt_backend *be, pt_tensor *x, int n_heads, int head_dim, int rot_dim, float mscale,
                       const int32_t *pos, const float *inv_freq)
{
    (void)be;
    rope_rows(x, n_heads, head_dim, rot_dim, mscale, pos, inv_freq, 1.0f);
    return PT_OK;
}

pt_status cpu_pos_scale(pt_backend *be, pt_tensor *x, float beta, int period, const int32_t *pos)
{
    (void)be;
    int64_t width = x->shape[x->ndim - 1], rows = tensor_numel(x) / width;
    float *xs = x->data;
#pragma omp parallel for schedule(static)
    for (int64_t t = 0; t < rows; t++) {
        float s = 1.0f + beta * logf(1.0f + (float)(pos[t] / period));
        for (int64_t i = 0; i < width; i++) xs[t * width + i] *= s;
    }
    return PT_OK;
}

pt_status cpu_rope_bwd(pt_backend *be, pt_tensor *dx, int n_heads, int head_dim, int rot_dim, float mscale,
                       const int32_t *pos, const float *inv_freq)
{
    (void)be; /* m R is m times an orthogonal map: its gradient is m times the inverse rotation */
    rope_rows(dx, n_heads, head_dim, rot_dim, mscale, pos, inv_freq, -1.0f);
    return PT_OK;
}

pt_status cpu_swiglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    (void)be;
    int64_t n = tensor_numel(y);
    const float *g = gate->data, *u = up->data;
    float *ys = y->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) ys[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    return PT_OK;
}

pt_status cpu_swiglu_clamp_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up, float limit,
                               float alpha)
{
    (void)be;
    int64_t n = tensor_numel(y);
    const float *g = gate->data, *u = up->data;
    float *ys = y->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float x = fminf(g[i], limit), v = fmaxf(fminf(u[i], limit), -limit);
        ys[i] = (v + 1.0f) * (x / (1.0f + expf(-alpha * x)));
    }
    return PT_OK;
}

pt_status cpu_geglu_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *gate, const pt_tensor *up)
{
    (void)be;
    int64_t n = tensor_numel(y);
    const float *g = gate->data, *u = up->data;
    float *ys = y->data;
    const float k0 = 0.7978845608028654f, k1 = 0.044715f; /* sqrt(2/pi) */
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float x = g[i];
        ys[i] = 0.5f * x * (1.0f + tanhf(k0 * (x + k1 * x * x * x))) * u[i];
    }
    return PT_OK;
}

pt_status cpu_add_bias(pt_backend *be, pt_tensor *y, const pt_tensor *bias)
{
    (void)be;
    int64_t width = tensor_numel(bias), rows = tensor_numel(y) / width;
    float *ys = y->data;
    const float *b = bias->data;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t i = 0; i < width; i++) ys[r * width + i] += b[i];
    return PT_OK;
}

pt_status cpu_add(pt_backend *be, pt_tensor *y, const pt_tensor *x)
{
    (void)be;
    int64_t n = tensor_numel(y);
    float *ys = y->data;
    const float *xs = x->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) ys[i] += xs[i];
    return PT_OK;
}

/* A counter-based draw: the same (seed, i) always gives the same number, on any thread. */
static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

pt_status cpu_dropout(pt_backend *be, pt_tensor *y, const pt_tensor *x, float p, uint64_t seed)
{
    (void)be;
    int64_t n = tensor_numel(x);
    const float *xs = x->data;
    float *ys = y->data, keep_scale = 1.0f / (1.0f - p);
    uint64_t threshold = (uint64_t)((double)p * 18446744073709551615.0), base = mix(seed + 0x9e3779b97f4a7c15ULL);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) ys[i] = mix(base + (uint64_t)i) >= threshold ? xs[i] * keep_scale : 0.0f;
    return PT_OK;
}
