/* gdn_chunk.c — the CPU backend's chunked (WY) gated delta rule (op delta_chunk; gdn_chunk.h gives the sums): the
 * same output as the recurrent delta_rule of gdn.c, computed a chunk of PT_DELTA_CHUNK tokens at a time with sgemm
 * for the chunk's products (the tokens' q.k grams, S0^T q and S0^T k, P U and the state's update) and a forward
 * substitution for the triangular system (I + A) U = R, as transformers' torch_chunk_gated_delta_rule and the
 * flash-linear-attention kernels compute it. Per token and value head O(k_dim v_dim + C (k_dim + v_dim)).
 * The (sequence, value head) pairs run in parallel, each with single-threaded sgemm, so results do not depend on
 * the thread count. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_chunk.h"

enum { C = PT_DELTA_CHUNK };

static void l2norm(float *v, const float *x, int n, float scale)
{
    float ss = 0.0f;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss + 1e-6f) * scale;
    for (int i = 0; i < n; i++) v[i] = x[i] * inv;
}

void chunk_src_init(chunk_src *s, const pt_delta *d, const float *x, const float *beta, const float *g)
{
    int64_t kw = (int64_t)d->k_heads * d->k_dim;
    *s = (chunk_src){.d = d, .dk = d->k_dim, .dv = d->v_dim, .nv = d->v_heads, .rep = d->v_heads / d->k_heads,
                     .kw = kw, .width = 2 * kw + (int64_t)d->v_heads * d->v_dim,
                     .ow = (int64_t)d->v_heads * d->v_dim, .qscale = 1.0f / sqrtf((float)d->k_dim), .x = x,
                     .beta = beta, .g = g};
}

size_t chunk_buf_floats(const pt_delta *d)
{
    size_t dk = (size_t)d->k_dim, dv = (size_t)d->v_dim, wide = dk > dv ? dk : dv;
    return 2 * C * dk + C * dv + 2 * C * C + 2 * C * dv + 2 * C * C + C * dv + 2 * C * wide;
}

void chunk_bind(chunk_buf *c, float *mem, const pt_delta *d)
{
    size_t dk = (size_t)d->k_dim, dv = (size_t)d->v_dim;
    c->hk = mem, c->v = c->hk + 2 * C * dk, c->gram = c->v + C * dv, c->hs = c->gram + 2 * C * C;
    c->a = c->hs + 2 * C * dv, c->p = c->a + C * C, c->u = c->p + C * C, c->w = c->u + C * dv;
}

/* lo, G and the decays of the loaded chunk */
static void chunk_masks(chunk_buf *c)
{
    int n = c->n, last = n - 1;
    for (int i = 0; i < n; i++) c->eg[i] = c->lo[i] == 0 && !c->fresh ? expf(c->G[i]) : 0.0f;
    for (int j = 0; j < n; j++) c->gam[j] = j >= c->lo[last] ? expf(c->G[last] - c->G[j]) : 0.0f;
    c->c = c->eg[last];
}

void chunk_load(const chunk_src *s, chunk_buf *c, int b, int h, int t0, bool has_state)
{
    const pt_delta *d = s->d;
    int n = d->seq - t0 < C ? d->seq - t0 : C, kh = h / s->rep, cur = 0;
    int64_t r0 = (int64_t)b * d->seq + t0;
    c->b = b, c->h = h, c->t0 = t0, c->n = n;
    c->fresh = t0 == 0 ? !has_state : cpu_delta_starts(d, r0, t0);
    float acc = 0.0f;
    for (int i = 0; i < n; i++) {
        int64_t r = r0 + i;
        const float *row = s->x + r * s->width;
        if (i > 0 && cpu_delta_starts(d, r, t0 + i)) cur = i;
        c->lo[i] = cur;
        l2norm(c->hk + (size_t)i * s->dk, row + (int64_t)kh * s->dk, s->dk, s->qscale);
        l2norm(c->hk + (size_t)(n + i) * s->dk, row + s->kw + (int64_t)kh * s->dk, s->dk, 1.0f);
        memcpy(c->v + (size_t)i * s->dv, row + 2 * s->kw + (int64_t)h * s->dv, sizeof(float) * (size_t)s->dv);
        c->beta[i] = s->beta[r * s->nv + h];
        acc += s->g[r * s->nv + h];
        c->G[i] = acc;
    }
    chunk_masks(c);
}

/* a and p from the grams, cut to each token's example */
static void chunk_decays(chunk_buf *c)
{
    int n = c->n;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            bool seen = j <= i && j >= c->lo[i];
            float e = seen ? expf(c->G[i] - c->G[j]) : 0.0f;
            c->p[i * n + j] = e * c->gram[i * n + j];
            c->a[i * n + j] = j < i ? c->beta[i] * e * c->gram[(n + i) * n + j] : 0.0f;
        }
}

void chunk_solve(const chunk_src *s, chunk_buf *c, const float *s0)
{
    int n = c->n, dk = s->dk, dv = s->dv;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 2 * n, n, dk, 1.0f, c->hk, dk, c->hk + (size_t)n * dk, dk,
                0.0f, c->gram, n);
    chunk_decays(c);
    if (c->fresh) memset(c->hs, 0, sizeof(float) * 2 * (size_t)n * dv);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2 * n, dv, dk, 1.0f, c->hk, dk, s0, dv, 0.0f, c->hs,
                    dv);
    for (int i = 0; i < n; i++) { /* R, then (I + A) U = R by forward substitution */
        float *ui = c->u + (size_t)i * dv;
        const float *x = c->hs + (size_t)(n + i) * dv, *vi = c->v + (size_t)i * dv;
        for (int e = 0; e < dv; e++) ui[e] = c->beta[i] * (vi[e] - c->eg[i] * x[e]);
        for (int j = c->lo[i]; j < i; j++) {
            float aij = c->a[i * n + j];
            const float *uj = c->u + (size_t)j * dv;
            for (int e = 0; e < dv; e++) ui[e] -= aij * uj[e];
        }
    }
}

void chunk_advance(const chunk_src *s, chunk_buf *c, float *S)
{
    int n = c->n, dk = s->dk, dv = s->dv;
    for (int j = 0; j < n; j++)
        for (int e = 0; e < dv; e++) c->w[(size_t)j * dv + e] = c->gam[j] * c->u[(size_t)j * dv + e];
    if (c->fresh) memset(S, 0, sizeof(float) * (size_t)dk * dv);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dk, dv, n, 1.0f, c->hk + (size_t)n * dk, dk, c->w, dv, c->c,
                S, dv);
}

/* o rows of the chunk: exp(G_i) S0^T q_i + (P U)_i */
static void chunk_out(const chunk_src *s, const chunk_buf *c, float *o)
{
    int n = c->n, dv = s->dv;
    float *out = o + ((int64_t)c->b * s->d->seq + c->t0) * s->ow + (int64_t)c->h * dv;
    for (int i = 0; i < n; i++)
        for (int e = 0; e < dv; e++) out[i * s->ow + e] = c->eg[i] * c->hs[(size_t)i * dv + e];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, n, 1.0f, c->p, n, c->u, dv, 1.0f, out,
                (int)s->ow);
}

pt_status cpu_delta_chunk(pt_backend *be, pt_tensor *o, const pt_tensor *qkv, const pt_tensor *beta,
                          const pt_tensor *g, pt_tensor *state, const pt_delta *d)
{
    (void)be;
    chunk_src s;
    chunk_src_init(&s, d, qkv->data, beta->data, g->data);
    size_t sz = (size_t)d->k_dim * d->v_dim;
    float *st = state ? state->data : NULL;
    int bad = 0;
#pragma omp parallel
    {
        float *mem = malloc(sizeof(float) * (chunk_buf_floats(d) + sz));
        if (!mem) {
#pragma omp atomic write
            bad = 1;
        }
        chunk_buf c;
        if (mem) chunk_bind(&c, mem, d);
#pragma omp for schedule(static)
        for (int bh = 0; bh < d->batch * d->v_heads; bh++) {
            if (!mem) continue;
            float *S = st ? st + (size_t)bh * sz : mem + chunk_buf_floats(d);
            for (int t0 = 0; t0 < d->seq; t0 += C) {
                chunk_load(&s, &c, bh / d->v_heads, bh % d->v_heads, t0, st != NULL);
                chunk_solve(&s, &c, S);
                chunk_out(&s, &c, o->data);
                chunk_advance(&s, &c, S);
            }
        }
        free(mem);
    }
    return bad ? ERR(PT_ERR_NOMEM, "delta_chunk: out of memory") : PT_OK;
}
