/* gdn.c — the CPU backend's Gated DeltaNet ops (qwen35's linear_attention layers; backend.h describes each):
 * the depthwise causal conv1d with SiLU (and generation's conv state), the gates beta and g, the gated delta rule
 * token by token with an fp32 state per value head (and generation's recurrent state), and the gated attention
 * output y *= sigmoid(gate). The references are transformers' causal_conv1d_fn / _update and
 * torch_recurrent_gated_delta_rule; packed examples (segments) start each with an empty window and state. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static float silu(float x) { return x / (1.0f + expf(-x)); }

bool cpu_delta_starts(const pt_delta *d, int64_t r, int t)
{
    return t == 0 || (d->segments && d->segments[r] != d->segments[r - 1]);
}

pt_status cpu_conv1d_silu(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, pt_tensor *state,
                          const pt_delta *d)
{
    (void)be;
    int64_t ch = x->shape[1];
    int k = d->conv, keep = k - 1;
    const float *xs = x->data, *ws = w->data;
    float *ys = y->data, *st = state ? state->data : NULL;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < d->batch; b++) {
        int64_t r0 = (int64_t)b * d->seq;
        for (int t = 0, start = 0; t < d->seq; t++) {
            int64_t r = r0 + t;
            if (cpu_delta_starts(d, r, t)) start = t;
            for (int64_t c = 0; c < ch; c++) {
                float acc = 0.0f;
                for (int j = 0; j < k; j++) { /* input t - (k-1) + j */
                    int p = t - keep + j;
                    float v = p >= start ? xs[(r0 + p) * ch + c]
                              : st && start == 0 ? st[((int64_t)b * keep + keep + p) * ch + c] : 0.0f;
                    acc += ws[c * k + j] * v;
                }
                ys[r * ch + c] = silu(acc);
            }
        }
        for (int i = 0; st && i < keep; i++) /* the last keep inputs; reads old row seq+i >= i before it is written */
            for (int64_t c = 0; c < ch; c++) {
                int p = d->seq + i - keep;
                float *to = &st[((int64_t)b * keep + i) * ch + c];
                *to = p >= 0 ? xs[(r0 + p) * ch + c] : st[((int64_t)b * keep + d->seq + i) * ch + c];
            }
    }
    return PT_OK;
}

pt_status cpu_delta_gates(pt_backend *be, pt_tensor *beta, pt_tensor *g, const pt_tensor *b, const pt_tensor *a,
                          const pt_tensor *a_log, const pt_tensor *dt_bias)
{
    (void)be;
    int64_t h = b->shape[1], n = tensor_numel(b);
    const float *bs = b->data, *as = a->data, *al = a_log->data, *dt = dt_bias->data;
    float *beta_s = beta->data, *gs = g->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float z = as[i] + dt[i % h];
        float sp = z > 20.0f ? z : log1pf(expf(z)); /* torch's softplus, threshold 20 */
        beta_s[i] = 1.0f / (1.0f + expf(-bs[i]));
        gs[i] = -expf(al[i % h]) * sp;
    }
    return PT_OK;
}

/* v = x / sqrt(sum x^2 + 1e-6) * scale (transformers' l2norm, then the query scale) */
static void l2norm(float *v, const float *x, int n, float scale)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss + 1e-6f) * scale;
    for (int i = 0; i < n; i++) v[i] = x[i] * inv;
}

/* One step for value head h: S = exp(g) S; delta = beta (v - S^T k); S += k delta^T; o = S^T q. */
static void delta_step(float *s, const float *q, const float *k, const float *v, float beta, float g, int dk, int dv,
                       float *kv, float *o)
{
    float eg = expf(g);
    for (int j = 0; j < dv; j++) kv[j] = 0.0f;
    for (int i = 0; i < dk; i++)
        for (int j = 0; j < dv; j++) {
            s[i * dv + j] *= eg;
            kv[j] += s[i * dv + j] * k[i];
        }
    for (int j = 0; j < dv; j++) kv[j] = (v[j] - kv[j]) * beta;
    for (int j = 0; j < dv; j++) o[j] = 0.0f;
    for (int i = 0; i < dk; i++)
        for (int j = 0; j < dv; j++) {
            s[i * dv + j] += k[i] * kv[j];
            o[j] += s[i * dv + j] * q[i];
        }
}

pt_status cpu_delta_rule(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                         const pt_tensor *g, pt_tensor *state, const pt_delta *d)
{
    (void)be;
    int dk = d->k_dim, dv = d->v_dim, nv = d->v_heads, rep = d->v_heads / d->k_heads;
    int64_t kw = (int64_t)d->k_heads * dk, width = 2 * kw + (int64_t)nv * dv, ow = (int64_t)nv * dv;
    const float *xs = qkv->data, *bs = beta->data, *gs = g->data;
    float *os = o->data, *st = state ? state->data : NULL, qscale = 1.0f / sqrtf((float)dk);
    int bad = 0;
#pragma omp parallel
    {
        float *own = malloc(sizeof(float) * ((size_t)dk * dv + 2 * (size_t)dk + (size_t)dv));
        if (!own) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(static)
        for (int bh = 0; bh < d->batch * nv; bh++) {
            if (!own) continue;
            int b = bh / nv, h = bh % nv, kh = h / rep;
            float *s = st ? st + (int64_t)bh * dk * dv : own, *q = own + (size_t)dk * dv, *k = q + dk, *kv = k + dk;
            if (!st) memset(s, 0, sizeof(float) * (size_t)dk * dv);
            for (int t = 0; t < d->seq; t++) {
                int64_t r = (int64_t)b * d->seq + t;
                if (t > 0 && cpu_delta_starts(d, r, t)) memset(s, 0, sizeof(float) * (size_t)dk * dv);
                const float *row = xs + r * width;
                l2norm(q, row + (int64_t)kh * dk, dk, qscale);
                l2norm(k, row + kw + (int64_t)kh * dk, dk, 1.0f);
                delta_step(s, q, k, row + 2 * kw + (int64_t)h * dv, bs[r * nv + h], gs[r * nv + h], dk, dv, kv,
                           os + r * ow + (int64_t)h * dv);
            }
        }
        free(own);
    }
    return bad ? ERR(PT_ERR_NOMEM, "delta_rule: out of memory") : PT_OK;
}

pt_status cpu_sigmoid_mul(pt_backend *be, pt_tensor *y, const pt_tensor *gate)
{
    (void)be;
    int64_t n = tensor_numel(y);
    float *ys = y->data;
    const float *gs = gate->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) ys[i] *= 1.0f / (1.0f + expf(-gs[i]));
    return PT_OK;
}
