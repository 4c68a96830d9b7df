/* gdn_chunk_bwd.c — the CPU backend's backward of the chunked (WY) gated delta rule (op delta_chunk_bwd; the sums
 * in gdn_chunk.h). Per sequence and value head, a forward pass over the chunks keeps the state only at each chunk's
 * start; then the chunks are walked from the last, each re-solved from its start state (grams, A, P, U) and taken
 * back through: dU = P^T dO + gam K dS, the triangular system's adjoint (I + A)^T dR = dU by back substitution,
 * dA = -dR U^T, dP = dO U^T, and from them dq, dk, dv, dbeta, the decays' dG (dg its reverse running sum over the
 * chunk) and the start state's gradient dS0 = c dS + Q^T diag(eg) dO - K^T diag(beta eg) dR, which the chunk before
 * takes (zero where an example starts). The chunk's products are sgemm (single-threaded inside the parallel loop
 * over the (sequence, head) pairs: results do not depend on the thread count). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gdn_chunk.h"

enum { C = PT_DELTA_CHUNK };

typedef struct {
    chunk_src s;
    const float *dout;
    float *dqkv, *dbeta, *dg, *dqn, *dkn;
} chunk_job;

/* A chunk's backward scratch */
typedef struct {
    float *du, *dp, *da, *y, *z; /* [n, dv], [n, n], [n, n], [2n, dv], [n, max(dk, dv)] */
    float dG[C], dB[C];
} chunk_grad;

static size_t grad_floats(const pt_delta *d)
{
    size_t dk = (size_t)d->k_dim, dv = (size_t)d->v_dim, wide = dk > dv ? dk : dv;
    return C * dv + 2 * C * C + 2 * C * dv + C * wide;
}

/* dU = P^T dO + gam K dS and dP = dO U^T; then dR (in du) by back substitution and dA = -dR U^T */
static void grad_u(const chunk_job *j, const chunk_buf *c, chunk_grad *q, const float *dO, const float *dS)
{
    int n = c->n, dk = j->s.dk, dv = j->s.dv, ow = (int)j->s.ow;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dv, n, 1.0f, c->p, n, dO, ow, 0.0f, q->du, dv);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dv, dk, 1.0f, c->hk + (size_t)n * dk, dk, dS, dv, 0.0f,
                q->z, dv);
    for (int i = 0; i < n; i++)
        for (int e = 0; e < dv; e++) q->du[(size_t)i * dv + e] += c->gam[i] * q->z[(size_t)i * dv + e];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dv, 1.0f, dO, ow, c->u, dv, 0.0f, q->dp, n);
    for (int i = n - 1; i >= 0; i--) { /* (I + A)^T dR = dU: dR_i is final once the rows after it are taken */
        const float *dri = q->du + (size_t)i * dv;
        for (int k = c->lo[i]; k < i; k++) {
            float aik = c->a[i * n + k];
            float *drk = q->du + (size_t)k * dv;
            for (int e = 0; e < dv; e++) drk[e] -= aik * dri[e];
        }
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, dv, -1.0f, q->du, dv, c->u, dv, 0.0f, q->da, n);
}

/* dP and dA's shares of dG and dbeta; dp and da become the gradients at the grams' entries (q_i.k_j, k_i.k_j) */
static void grad_decays(const chunk_buf *c, chunk_grad *q)
{
    int n = c->n;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < n; k++) {
            bool seen = k <= i && k >= c->lo[i];
            float e = seen ? expf(c->G[i] - c->G[k]) : 0.0f, *dp = &q->dp[i * n + k], *da = &q->da[i * n + k];
            float ep = seen ? *dp * c->p[i * n + k] : 0.0f, ea = k < i && seen ? *da * c->a[i * n + k] : 0.0f;
            q->dG[i] += ep + ea;
            q->dG[k] -= ep + ea;
            if (k < i && seen) q->dB[i] += *da * e * c->gram[(n + i) * n + k];
            *dp = *dp * e;
            *da = k < i && seen ? *da * c->beta[i] * e : 0.0f;
        }
}

/* dq and dk of the chunk's tokens (the gradients at the normalised q and k of value head h) */
static void grad_qk(const chunk_job *j, chunk_buf *c, chunk_grad *q, const float *dO, const float *S0,
                    const float *dS)
{
    int n = c->n, dk = j->s.dk, dv = j->s.dv, ld = j->s.nv * dk, ow = (int)j->s.ow;
    int64_t at = (((int64_t)c->b * j->s.d->seq + c->t0) * j->s.nv + c->h) * dk;
    float *dq = j->dqn + at, *dkk = j->dkn + at;
    const float *Q = c->hk, *K = c->hk + (size_t)n * dk;
    for (int i = 0; i < n; i++)
        for (int e = 0; e < dv; e++) {
            q->y[(size_t)i * dv + e] = c->eg[i] * dO[(size_t)i * ow + e];
            q->y[(size_t)(n + i) * dv + e] = -c->beta[i] * c->eg[i] * q->du[(size_t)i * dv + e];
        }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dk, dv, 1.0f, q->y, dv, S0, dv, 0.0f, dq, ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dk, n, 1.0f, q->dp, n, K, dk, 1.0f, dq, ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dk, dv, 1.0f, q->y + (size_t)n * dv, dv, S0, dv, 0.0f,
                dkk, ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dk, n, 1.0f, q->dp, n, Q, dk, 1.0f, dkk, ld);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, dk, n, 1.0f, q->da, n, K, dk, 1.0f, dkk, ld);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, dk, n, 1.0f, q->da, n, K, dk, 1.0f, dkk, ld);
    for (int i = 0; i < n; i++) /* z = diag(gam) U dS^T: dk's share from the state after the chunk */
        for (int e = 0; e < dv; e++) q->z[(size_t)i * dv + e] = c->gam[i] * c->u[(size_t)i * dv + e];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, dk, dv, 1.0f, q->z, dv, dS, dv, 0.0f, c->w, dk);
    for (int i = 0; i < n; i++) {
        float dot = 0.0f;
        for (int e = 0; e < dk; e++) {
            dot += K[(size_t)i * dk + e] * c->w[(size_t)i * dk + e];
            dkk[(size_t)i * ld + e] += c->w[(size_t)i * dk + e];
        }
        q->dG[n - 1] += dot;
        q->dG[i] -= dot;
    }
}

/* dv, dbeta and dG's remaining shares (R and the S0 terms), dg and dbeta written */
static void grad_rows(const chunk_job *j, const chunk_buf *c, chunk_grad *q, const float *dO, const float *S0,
                      const float *dS)
{
    int n = c->n, dv = j->s.dv, ow = (int)j->s.ow, nv = j->s.nv;
    int64_t r0 = (int64_t)c->b * j->s.d->seq + c->t0;
    for (int i = 0; i < n; i++) {
        const float *dr = q->du + (size_t)i * dv, *x = c->hs + (size_t)(n + i) * dv, *qs = c->hs + (size_t)i * dv;
        const float *v = c->v + (size_t)i * dv, *doi = dO + (size_t)i * ow;
        float *dvo = j->dqkv + (r0 + i) * j->s.width + 2 * j->s.kw + (int64_t)c->h * dv, vr = 0.0f, xr = 0.0f, qo = 0.0f;
        for (int e = 0; e < dv; e++) {
            dvo[e] = c->beta[i] * dr[e];
            vr += v[e] * dr[e], xr += x[e] * dr[e], qo += qs[e] * doi[e];
        }
        q->dB[i] += vr - c->eg[i] * xr;
        q->dG[i] += c->eg[i] * (qo - c->beta[i] * xr);
    }
    float dc = 0.0f;
    for (size_t e = 0; c->c != 0.0f && e < (size_t)j->s.dk * dv; e++) dc += S0[e] * dS[e];
    q->dG[n - 1] += c->c * dc;
    float run = 0.0f; /* G_i sums g over the chunk up to i: dg_t sums dG over i >= t */
    for (int i = n - 1; i >= 0; i--) {
        run += q->dG[i];
        j->dg[(r0 + i) * nv + c->h] = run;
        j->dbeta[(r0 + i) * nv + c->h] = q->dB[i];
    }
}

/* The chunk's backward from its start state S0; dS: the gradient at the state after it, then at S0 */
static void chunk_back(const chunk_job *j, chunk_buf *c, chunk_grad *q, const float *S0, float *dS)
{
    int n = c->n, dk = j->s.dk, dv = j->s.dv;
    const float *dO = j->dout + ((int64_t)c->b * j->s.d->seq + c->t0) * j->s.ow + (int64_t)c->h * dv;
    memset(q->dG, 0, sizeof q->dG);
    memset(q->dB, 0, sizeof q->dB);
    chunk_solve(&j->s, c, S0);
    grad_u(j, c, q, dO, dS);
    grad_decays(c, q);
    grad_qk(j, c, q, dO, S0, dS);
    grad_rows(j, c, q, dO, S0, dS);
    if (c->fresh) /* the state starts empty here: no gradient reaches the chunk before */
        memset(dS, 0, sizeof(float) * (size_t)dk * dv);
    else /* dS0 = c dS + Q^T diag(eg) dO - K^T diag(beta eg) dR (y from grad_qk) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dk, dv, 2 * n, 1.0f, c->hk, dk, q->y, dv, c->c, dS, dv);
}

/* The floats one (sequence, value head) takes: the chunks' start states, the running state (then its gradient), a
 * chunk's buffers and its backward scratch */
static size_t head_floats(const pt_delta *d)
{
    size_t sz = (size_t)d->k_dim * d->v_dim, nch = (size_t)(d->seq + C - 1) / C;
    return (nch + 1) * sz + chunk_buf_floats(d) + grad_floats(d);
}

static void head_back(const chunk_job *j, int bh, float *mem)
{
    const pt_delta *d = j->s.d;
    int b = bh / d->v_heads, h = bh % d->v_heads, nch = (d->seq + C - 1) / C;
    size_t sz = (size_t)d->k_dim * d->v_dim, dv = (size_t)d->v_dim;
    float *bound = mem, *S = bound + (size_t)nch * sz, *cb = S + sz, *gb = cb + chunk_buf_floats(d);
    chunk_buf c;
    chunk_bind(&c, cb, d);
    chunk_grad q = {.du = gb, .dp = gb + C * dv, .da = gb + C * dv + C * C, .y = gb + C * dv + 2 * C * C};
    q.z = q.y + 2 * C * dv;
    for (int k = 0; k < nch; k++) { /* the start states */
        chunk_load(&j->s, &c, b, h, k * C, false);
        if (c.fresh) memset(S, 0, sizeof(float) * sz);
        memcpy(bound + (size_t)k * sz, S, sizeof(float) * sz);
        chunk_solve(&j->s, &c, S);
        chunk_advance(&j->s, &c, S);
    }
    memset(S, 0, sizeof(float) * sz);
    for (int k = nch - 1; k >= 0; k--) {
        chunk_load(&j->s, &c, b, h, k * C, false);
        chunk_back(j, &c, &q, bound + (size_t)k * sz, S);
    }
}

pt_status cpu_delta_chunk_bwd(pt_backend *be, pt_tensor *dqkv, pt_tensor *dbeta, pt_tensor *dg, const pt_tensor *dout,
                              const pt_tensor *qkv, const pt_tensor *beta, const pt_tensor *g, const pt_delta *d)
{
    (void)be;
    int64_t rows = (int64_t)d->batch * d->seq;
    chunk_job j = {.dout = dout->data, .dqkv = dqkv->data, .dbeta = dbeta->data, .dg = dg->data};
    chunk_src_init(&j.s, d, qkv->data, beta->data, g->data);
    j.dqn = malloc(sizeof(float) * 2 * (size_t)rows * d->v_heads * d->k_dim);
    TRY_ALLOC(j.dqn);
    j.dkn = j.dqn + (size_t)rows * d->v_heads * d->k_dim;
    int bad = 0;
#pragma omp parallel
    {
        float *mem = malloc(sizeof(float) * head_floats(d));
        if (!mem) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(static)
        for (int bh = 0; bh < d->batch * d->v_heads; bh++)
            if (mem) head_back(&j, bh, mem);
#pragma omp barrier
#pragma omp for schedule(static)
        for (int64_t rk = 0; rk < rows * d->k_heads; rk++)
            if (mem) cpu_delta_qk_bwd(d, j.s.x, j.dqkv, j.dqn, j.dkn, rk / d->k_heads, (int)(rk % d->k_heads), mem);
        free(mem);
    }
    free(j.dqn);
    return bad ? ERR(PT_ERR_NOMEM, "delta_chunk_bwd: out of memory") : PT_OK;
}
