/* gdn_bwd.c — the CPU backend's backward of the Gated DeltaNet ops of gdn.c (backend.h describes each): the causal
 * conv1d with SiLU (its pre-activations recomputed from the input), the gates, y *= sigmoid(gate), and the gated
 * delta rule. The delta rule's backward keeps the recurrent state only at chunk boundaries (every PT_DELTA_CHUNK
 * tokens, from a forward pass over the sequence), then walks the chunks from the last: each chunk's states are
 * recomputed from its boundary and the recurrence is run backwards through them, token by token, so a token costs
 * O(k_dim v_dim) per value head whatever the length. Packed examples: the state's gradient stops where an example
 * starts, as the state itself does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* The conv's pre-activation of channel c at row t of sequence b whose example starts at row `start` */
static float conv_pre(const float *x, const float *w, const pt_delta *d, int64_t ch, int b, int64_t c, int t, int start)
{
    int k = d->conv, keep = k - 1;
    float acc = 0.0f;
    for (int j = 0; j < k; j++) {
        int p = t - keep + j;
        if (p >= start) acc += w[c * k + j] * x[((int64_t)b * d->seq + p) * ch + c];
    }
    return acc;
}

pt_status cpu_conv1d_silu_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *x,
                              const pt_tensor *w, const pt_delta *d)
{
    (void)be;
    int64_t ch = x->shape[1];
    int k = d->conv, keep = k - 1;
    const float *xs = x->data, *ws = w->data, *dys = dy->data;
    float *dxs = dx->data;
#pragma omp parallel for schedule(static)
    for (int64_t bc = 0; bc < (int64_t)d->batch * ch; bc++) {
        int b = (int)(bc / ch);
        int64_t c = bc % ch, r0 = (int64_t)b * d->seq;
        for (int p = 0, start = 0; p < d->seq; p++) {
            if (cpu_delta_starts(d, r0 + p, p)) start = p;
            int last = p; /* the last row whose window reads row p: within the sequence and the example */
            while (last + 1 < d->seq && last + 1 <= p + keep && !cpu_delta_starts(d, r0 + last + 1, last + 1)) last++;
            float acc = 0.0f;
            for (int t = p; t <= last; t++) {
                float a = conv_pre(xs, ws, d, ch, b, c, t, start), s = sigm(a);
                acc += ws[c * k + (p - t + keep)] * dys[(r0 + t) * ch + c] * s * (1.0f + a * (1.0f - s));
            }
            dxs[(r0 + p) * ch + c] = acc;
        }
    }
    return PT_OK;
}

pt_status cpu_delta_gates_bwd(pt_backend *be, pt_tensor *db, pt_tensor *da, const pt_tensor *dbeta,
                              const pt_tensor *dg, const pt_tensor *b, const pt_tensor *a, const pt_tensor *a_log,
                              const pt_tensor *dt_bias)
{
    (void)be;
    int64_t h = b->shape[1], n = tensor_numel(b);
    const float *bs = b->data, *as = a->data, *al = a_log->data, *dt = dt_bias->data, *dbt = dbeta->data;
    const float *dgs = dg->data;
    float *dbs = db->data, *das = da->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float z = as[i] + dt[i % h], beta = sigm(bs[i]);
        float dsp = z > 20.0f ? 1.0f : sigm(z); /* torch's softplus backward, threshold 20 */
        dbs[i] = dbt[i] * beta * (1.0f - beta);
        das[i] = -dgs[i] * expf(al[i % h]) * dsp;
    }
    return PT_OK;
}

pt_status cpu_sigmoid_mul_bwd(pt_backend *be, pt_tensor *dx, pt_tensor *dgate, const pt_tensor *dy,
                              const pt_tensor *y, const pt_tensor *gate)
{
    (void)be;
    int64_t n = tensor_numel(y);
    const float *dys = dy->data, *ys = y->data, *gs = gate->data;
    float *dxs = dx->data, *dgs = dgate->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float s = sigm(gs[i]), d = dys[i];
        dgs[i] = d * ys[i] * (1.0f - s); /* y = x s: dgate = dy x s (1 - s) = dy y (1 - s) */
        dxs[i] = d * s;
    }
    return PT_OK;
}

/* ---- the delta rule ---- */

typedef struct {
    const pt_delta *d;
    int dk, dv, nv, rep;
    int64_t kw, width, ow;
    float qscale;
    const float *x, *beta, *g, *dout;
    float *dqkv, *dbeta, *dg;
    float *dqn, *dkn; /* [rows, v_heads, k_dim]: the gradient at each value head's normalised q and k */
} rule_job;

/* v = x / sqrt(sum x^2 + 1e-6) * scale, as gdn.c's forward */
static void l2norm(float *v, const float *x, int n, float scale)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss + 1e-6f) * scale;
    for (int i = 0; i < n; i++) v[i] = x[i] * inv;
}

/* The normalised key (and query when q is not NULL) of row r and key head kh */
static void row_qk(const rule_job *j, int64_t r, int kh, float *q, float *k)
{
    const float *row = j->x + r * j->width + (int64_t)kh * j->dk;
    if (q) l2norm(q, row, j->dk, j->qscale);
    l2norm(k, row + j->kw, j->dk, 1.0f);
}

/* S = exp(g) S + k (beta (v - exp(g) S^T k))^T for value head h at row r (kv: dv scratch) */
static void fwd_step(const rule_job *j, float *s, int64_t r, int h, const float *k, float *kv)
{
    int dk = j->dk, dv = j->dv;
    const float *v = j->x + r * j->width + 2 * j->kw + (int64_t)h * dv;
    float eg = expf(j->g[r * j->nv + h]), bt = j->beta[r * j->nv + h];
    for (int c = 0; c < dv; c++) kv[c] = 0.0f;
    for (int i = 0; i < dk; i++)
        for (int c = 0; c < dv; c++) {
            s[i * dv + c] *= eg;
            kv[c] += s[i * dv + c] * k[i];
        }
    for (int c = 0; c < dv; c++) kv[c] = (v[c] - kv[c]) * bt;
    for (int i = 0; i < dk; i++)
        for (int c = 0; c < dv; c++) s[i * dv + c] += k[i] * kv[c];
}

/* One token's backward for value head h at row r: prev the state before the token (after a reset), q and k
 * normalised, ds the gradient at the state after the token, replaced by the gradient at prev (zero at an example's
 * start); writes dv, dbeta, dg and the gradients at q and k (dqn, dkn). tmp: 4 dv floats. */
static void back_step(const rule_job *j, int64_t r, int h, const float *prev, const float *q, const float *k,
                      float *ds, bool reset, float *tmp)
{
    int dk = j->dk, dv = j->dv;
    const float *v = j->x + r * j->width + 2 * j->kw + (int64_t)h * dv, *dov = j->dout + r * j->ow + (int64_t)h * dv;
    float eg = expf(j->g[r * j->nv + h]), bt = j->beta[r * j->nv + h], dd = 0.0f;
    float *kv = tmp, *delta = tmp + dv, *ddelta = tmp + 2 * dv, *dkv = tmp + 3 * dv;
    float *dq = j->dqn + (r * j->nv + h) * dk, *dk_ = j->dkn + (r * j->nv + h) * dk;
    for (int c = 0; c < dv; c++) kv[c] = ddelta[c] = 0.0f;
    for (int i = 0; i < dk; i++)
        for (int c = 0; c < dv; c++) kv[c] += eg * prev[i * dv + c] * k[i];
    for (int c = 0; c < dv; c++) delta[c] = bt * (v[c] - kv[c]), dd += delta[c] * dov[c];
    for (int i = 0; i < dk; i++) { /* o = S^T q with S = exp(g) prev + k delta^T */
        float acc = 0.0f;
        for (int c = 0; c < dv; c++) {
            acc += eg * prev[i * dv + c] * dov[c];
            ds[i * dv + c] += q[i] * dov[c];
            ddelta[c] += ds[i * dv + c] * k[i];
        }
        dq[i] = acc + k[i] * dd;
    }
    float dbeta = 0.0f, dgs = 0.0f, *dvo = j->dqkv + r * j->width + 2 * j->kw + (int64_t)h * dv;
    for (int c = 0; c < dv; c++) {
        dvo[c] = bt * ddelta[c];
        dbeta += ddelta[c] * (v[c] - kv[c]);
        dkv[c] = -bt * ddelta[c];
    }
    for (int i = 0; i < dk; i++) { /* delta = beta (v - S'^T k), S' = exp(g) prev */
        float acc = 0.0f;
        for (int c = 0; c < dv; c++) {
            float sp = eg * prev[i * dv + c], e = ds[i * dv + c] + k[i] * dkv[c];
            acc += ds[i * dv + c] * delta[c] + sp * dkv[c];
            dgs += e * sp;
            ds[i * dv + c] = reset ? 0.0f : eg * e;
        }
        dk_[i] = acc;
    }
    j->dbeta[r * j->nv + h] = dbeta;
    j->dg[r * j->nv + h] = dgs;
}

/* The states of chunk [t0, t1) of sequence b, value head h, from the boundary state: prev[t - t0] before token t
 * (after a reset), with the chunk's normalised q and k. */
static void chunk_states(const rule_job *j, int b, int h, int t0, int t1, const float *bound, float *prev, float *q,
                         float *k, float *kv)
{
    size_t sz = (size_t)j->dk * j->dv;
    for (int t = t0; t < t1; t++) {
        int64_t r = (int64_t)b * j->d->seq + t;
        float *p = prev + (size_t)(t - t0) * sz;
        memcpy(p, t == t0 ? bound : p - sz, sizeof(float) * sz);
        if (t > t0) fwd_step(j, p, r - 1, h, k + (size_t)(t - 1 - t0) * j->dk, kv);
        if (t > 0 && cpu_delta_starts(j->d, r, t)) memset(p, 0, sizeof(float) * sz);
        row_qk(j, r, h / j->rep, q + (size_t)(t - t0) * j->dk, k + (size_t)(t - t0) * j->dk);
    }
}

/* The backward of sequence b, value head h (bh = b v_heads + h); buf: rule_buf_floats floats */
static void head_bwd(const rule_job *j, int bh, float *buf)
{
    int b = bh / j->nv, h = bh % j->nv, seq = j->d->seq, nch = (seq + PT_DELTA_CHUNK - 1) / PT_DELTA_CHUNK;
    size_t sz = (size_t)j->dk * j->dv;
    float *bound = buf, *prev = bound + (size_t)nch * sz, *ds = prev + PT_DELTA_CHUNK * sz;
    float *q = ds + sz, *k = q + (size_t)PT_DELTA_CHUNK * j->dk, *tmp = k + (size_t)PT_DELTA_CHUNK * j->dk;
    memset(ds, 0, sizeof(float) * sz); /* the running state of the forward pass, then the state's gradient */
    for (int t = 0; t < seq; t++) {
        int64_t r = (int64_t)b * seq + t;
        if (t % PT_DELTA_CHUNK == 0) memcpy(bound + (size_t)(t / PT_DELTA_CHUNK) * sz, ds, sizeof(float) * sz);
        if (t > 0 && cpu_delta_starts(j->d, r, t)) memset(ds, 0, sizeof(float) * sz);
        row_qk(j, r, h / j->rep, NULL, k);
        fwd_step(j, ds, r, h, k, tmp);
    }
    memset(ds, 0, sizeof(float) * sz);
    for (int c = nch - 1; c >= 0; c--) {
        int t0 = c * PT_DELTA_CHUNK, t1 = t0 + PT_DELTA_CHUNK < seq ? t0 + PT_DELTA_CHUNK : seq;
        chunk_states(j, b, h, t0, t1, bound + (size_t)c * sz, prev, q, k, tmp);
        for (int t = t1 - 1; t >= t0; t--) {
            int64_t r = (int64_t)b * seq + t;
            size_t i = (size_t)(t - t0);
            back_step(j, r, h, prev + i * sz, q + i * j->dk, k + i * j->dk, ds, cpu_delta_starts(j->d, r, t), tmp);
        }
    }
}

void cpu_delta_qk_bwd(const pt_delta *d, const float *x, float *dqkv, const float *dqn, const float *dkn, int64_t r,
                      int kh, float *du)
{
    int dk = d->k_dim, nv = d->v_heads, rep = d->v_heads / d->k_heads;
    int64_t kw = (int64_t)d->k_heads * dk, width = 2 * kw + (int64_t)nv * d->v_dim;
    for (int part = 0; part < 2; part++) {
        const float *xs = x + r * width + part * kw + (int64_t)kh * dk, *src = part ? dkn : dqn;
        float scale = part ? 1.0f : 1.0f / sqrtf((float)dk), ss = 0.0f, dot = 0.0f;
        for (int i = 0; i < dk; i++) {
            float acc = 0.0f;
            for (int h = kh * rep; h < (kh + 1) * rep; h++) acc += src[(r * nv + h) * dk + i];
            du[i] = acc * scale;
            ss += xs[i] * xs[i];
        }
        float inv = 1.0f / sqrtf(ss + 1e-6f);
        for (int i = 0; i < dk; i++) dot += xs[i] * inv * du[i];
        float *out = dqkv + r * width + part * kw + (int64_t)kh * dk;
        for (int i = 0; i < dk; i++) out[i] = inv * (du[i] - xs[i] * inv * dot);
    }
}

static size_t rule_buf_floats(const pt_delta *d)
{
    size_t sz = (size_t)d->k_dim * d->v_dim, nch = (size_t)(d->seq + PT_DELTA_CHUNK - 1) / PT_DELTA_CHUNK;
    return (nch + PT_DELTA_CHUNK + 1) * sz + 2 * (size_t)PT_DELTA_CHUNK * d->k_dim + 4 * (size_t)d->v_dim;
}

pt_status cpu_delta_rule_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg, const pt_tensor *dout,
                             const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g, const pt_delta *d)
{
    (void)be;
    int64_t rows = (int64_t)d->batch * d->seq, kw = (int64_t)d->k_heads * d->k_dim;
    rule_job j = {.d = d, .dk = d->k_dim, .dv = d->v_dim, .nv = d->v_heads, .rep = d->v_heads / d->k_heads, .kw = kw,
                  .width = 2 * kw + (int64_t)d->v_heads * d->v_dim, .ow = (int64_t)d->v_heads * d->v_dim,
                  .qscale = 1.0f / sqrtf((float)d->k_dim), .x = qkv->data, .beta = beta->data, .g = g->data,
                  .dout = dout->data, .dqkv = dqkv->data, .dbeta = dbeta->data, .dg = dg->data};
    j.dqn = malloc(sizeof(float) * 2 * (size_t)rows * d->v_heads * d->k_dim);
    TRY_ALLOC(j.dqn);
    j.dkn = j.dqn + (size_t)rows * d->v_heads * d->k_dim;
    int bad = 0;
#pragma omp parallel
    {
        float *buf = malloc(sizeof(float) * rule_buf_floats(d));
        if (!buf) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(static)
        for (int bh = 0; bh < d->batch * d->v_heads; bh++)
            if (buf) head_bwd(&j, bh, buf);
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t rk = 0; rk < rows * d->k_heads; rk++)
            if (buf) cpu_delta_qk_bwd(d, j.x, j.dqkv, j.dqn, j.dkn, rk / d->k_heads, (int)(rk % d->k_heads), buf);
        free(buf);
    }
    free(j.dqn);
    return bad ? ERR(PT_ERR_NOMEM, "delta_rule_bwd: out of memory") : PT_OK;
}
