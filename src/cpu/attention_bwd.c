/* attention_bwd.c — the gradient of causal grouped-query attention (attention.c) on the CPU.
 * Per (sequence, query head), over blocks of query rows (a block sees only the keys from the first
 * its first row may see (sliding window) to the last its last row may see, so the causal
 * triangle costs about half the square and a window only its band):
 *   S  = cap(scale * Q Kᵀ) (cap(s) = c tanh(s/c) with a soft-cap, else s),
 *   P  = exp(S - lse) under the forward's causal, window and packing mask (recomputed from the
 *        log-sum-exp the forward saved),
 *   dV += Pᵀ dO,   dP = dO Vᵀ,   dS = P ∘ (dP - rowsum(dO ∘ O)),   dR = dS ∘ S'(raw) where
 *        S' = scale (1 - tanh²) with a soft-cap, else scale,
 *   dQ = dR K,   dK += dRᵀ Q.
 * The query heads of a sequence run in parallel, one task each with single-threaded sgemm (OpenBLAS
 * runs one thread inside an OpenMP region). The query heads of a group share one kv head: each head
 * writes its own dK and dV into scratch, summed over the group afterwards in head order, so the
 * result does not depend on the thread count. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

enum { Q_BLOCK = 64 }; /* query rows per block */

/* One (sequence, head): pointers to its columns in the row-major tensors, and their strides. */
typedef struct {
    const float *q, *k, *v, *o, *dout, *lse;
    float *dq, *dk, *dv;
    const int32_t *seg; /* this sequence's segment ids, or NULL */
    int qw, kw, n_heads;
    int dkw; /* row stride of dk and dv */
} head_view;

static head_view head_select(pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                             const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *out,
                             const pt_tensor *lse, const pt_attention *a, int b, int h)
{
    int qw = a->n_heads * a->head_dim, kw = a->n_kv_heads * a->head_dim, group = a->n_heads / a->n_kv_heads;
    size_t qoff = (size_t)b * a->n_q * qw + (size_t)h * a->head_dim;
    size_t koff = (size_t)b * a->n_kv * kw + (size_t)(h / group) * a->head_dim;
    head_view hv = {
        .q = (const float *)q->data + qoff, .o = (const float *)out->data + qoff,
        .dout = (const float *)dout->data + qoff, .dq = (float *)dq->data + qoff,
        .k = (const float *)k->data + koff, .v = (const float *)v->data + koff,
        .dk = (float *)dk->data + koff, .dv = (float *)dv->data + koff,
        .lse = (const float *)lse->data + (size_t)b * a->n_q * a->n_heads + h,
        .seg = a->segments ? a->segments + (size_t)b * a->n_kv : NULL,
        .qw = qw, .kw = kw, .n_heads = a->n_heads, .dkw = kw,
    };
    return hv;
}

/* Row t of a block whose keys start at lo (nk of them): p holds the raw products q·k and becomes
 * P; ds holds dO·v and becomes dR. Keys the row may not see (causal, window, another packed
 * example) get zero. */
static void grad_row(const head_view *hv, const pt_attention *a, int t, int lo, int nk, float *p, float *ds)
{
    int pos = a->q_pos0 + t, first = cpu_attention_first_key(a, pos);
    const float *o = hv->o + (size_t)t * hv->qw, *dout = hv->dout + (size_t)t * hv->qw;
    double dd = 0;
    for (int d = 0; d < a->head_dim; d++) dd += (double)dout[d] * o[d];
    float l = hv->lse[(size_t)t * hv->n_heads], delta = (float)dd;
    int32_t my_seg = hv->seg ? hv->seg[pos] : 0;
    if (!hv->seg && a->softcap <= 0.0f) { /* the visible keys are one run: vectorized */
        int s = (first > lo ? first : lo) - lo, e = pos + 1 - lo;
        for (int jj = 0; jj < s; jj++) p[jj] = ds[jj] = 0;
        for (int jj = e; jj < nk; jj++) p[jj] = ds[jj] = 0;
        cpu_attention_grad_run(p + s, ds + s, e - s, a->scale, l, delta);
        return;
    }
    for (int jj = 0; jj < nk; jj++) {
        int j = lo + jj;
        if (j < first || j > pos || (hv->seg && hv->seg[j] != my_seg)) {
            p[jj] = ds[jj] = 0;
            continue;
        }
        float dscore, pj = expf(cpu_attention_score(a, p[jj], &dscore) - l);
        p[jj] = pj;
        ds[jj] = dscore * (pj * (ds[jj] - delta));
    }
}

/* Query rows [t0, t0+rows) of one head; p and ds are rows x (keys of the block) scratch. */
static void grad_block(const head_view *hv, const pt_attention *a, int t0, int rows, float *p, float *ds)
{
    int lo = cpu_attention_first_key(a, a->q_pos0 + t0), ext = a->q_pos0 + t0 + rows, hd = a->head_dim;
    int nk = ext - lo; /* the keys this block may see */
    const float *q = hv->q + (size_t)t0 * hv->qw, *dout = hv->dout + (size_t)t0 * hv->qw;
    const float *k = hv->k + (size_t)lo * hv->kw, *v = hv->v + (size_t)lo * hv->kw;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, hd, 1.0f, q, hv->qw, k, hv->kw, 0.0f, p, nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, hd, 1.0f, dout, hv->qw, v, hv->kw, 0.0f, ds, nk);
    for (int r = 0; r < rows; r++) grad_row(hv, a, t0 + r, lo, nk, p + (size_t)r * nk, ds + (size_t)r * nk);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, nk, 1.0f, ds, nk, k, hv->kw, 0.0f,
                hv->dq + (size_t)t0 * hv->qw, hv->qw);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, rows, 1.0f, ds, nk, q, hv->qw, 1.0f,
                hv->dk + (size_t)lo * hv->dkw, hv->dkw);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nk, hd, rows, 1.0f, p, nk, dout, hv->qw, 1.0f,
                hv->dv + (size_t)lo * hv->dkw, hv->dkw);
}

/* dk, dv of sequence b = the sum over each group's heads of their own (head-major scratch, each
 * head [n_kv, hd]), in head order */
static void group_sum(pt_tensor *dk, pt_tensor *dv, const float *hk, const float *hv, const pt_attention *a, int b)
{
    int hd = a->head_dim, kw = a->n_kv_heads * hd, group = a->n_heads / a->n_kv_heads;
    size_t per_head = (size_t)a->n_kv * hd;
#pragma omp parallel for schedule(static)
    for (int j = 0; j < a->n_kv; j++)
        for (int g = 0; g < a->n_kv_heads; g++)
            for (int d = 0; d < hd; d++) {
                float sk = 0, sv = 0;
                for (int i = 0; i < group; i++) {
                    size_t at = (size_t)(g * group + i) * per_head + (size_t)j * hd + d;
                    sk += hk[at];
                    sv += hv[at];
                }
                size_t out = ((size_t)b * a->n_kv + j) * kw + (size_t)g * hd + d;
                ((float *)dk->data)[out] = sk;
                ((float *)dv->data)[out] = sv;
            }
}

pt_status cpu_attention_bwd(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                            const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *out,
                            const pt_tensor *lse, const pt_attention *a)
{
    (void)be;
    int block = a->n_q < Q_BLOCK ? a->n_q : Q_BLOCK, threads = omp_get_max_threads();
    bool shared = a->n_heads > a->n_kv_heads; /* grouped-query: heads write scratch, then group_sum */
    size_t per_thread = 2 * (size_t)block * (size_t)a->n_kv, per_head = (size_t)a->n_kv * a->head_dim;
    float *p = malloc(sizeof(float) * per_thread * (size_t)threads);
    float *hk = shared ? calloc(2 * per_head * (size_t)a->n_heads, sizeof(float)) : NULL;
    if (!p || (shared && !hk)) {
        free(p);
        free(hk);
        return ERR(PT_ERR_NOMEM, "out of memory (attention backward)");
    }
    float *hvv = shared ? hk + per_head * (size_t)a->n_heads : NULL;
    memset(dk->data, 0, dk->nbytes); /* they accumulate over query blocks (in scratch when shared) */
    memset(dv->data, 0, dv->nbytes);
    for (int b = 0; b < a->batch; b++) {
        if (shared && b > 0) memset(hk, 0, sizeof(float) * 2 * per_head * (size_t)a->n_heads);
#pragma omp parallel for schedule(dynamic, 1)
        for (int h = 0; h < a->n_heads; h++) {
            head_view hv = head_select(dq, dk, dv, dout, q, k, v, out, lse, a, b, h);
            if (shared) {
                hv.dk = hk + (size_t)h * per_head;
                hv.dv = hvv + (size_t)h * per_head;
                hv.dkw = a->head_dim;
            }
            float *pt = p + per_thread * (size_t)omp_get_thread_num();
            for (int t0 = 0; t0 < a->n_q; t0 += block)
                grad_block(&hv, a, t0, a->n_q - t0 < block ? a->n_q - t0 : block, pt, pt + (size_t)block * a->n_kv);
        }
        if (shared) group_sum(dk, dv, hk, hvv, a, b);
    }
    free(p);
    free(hk);
    return PT_OK;
}
