/* attention_bwd.c — the gradient of causal grouped-query attention (attention.c) on the CPU.
 * Per (sequence, query head), over blocks of query rows (a block sees only the keys its last row
 * may see, so the causal triangle costs about half the square):
 *   P  = exp(scale * Q Kᵀ - lse) under the forward's causal and packing mask (recomputed from
 *        the log-sum-exp the forward saved),
 *   dV += Pᵀ dO,   dP = dO Vᵀ,   dS = P ∘ (dP - rowsum(dO ∘ O)),
 *   dQ = scale * dS K,   dK += scale * dSᵀ Q.
 * The query heads of a group share one kv head, so its dK and dV accumulate over the group.
 * Products are sgemm (threaded OpenBLAS); the elementwise pass is an OpenMP loop over rows. */
#include <cblas.h>
#include <math.h>
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
        .qw = qw, .kw = kw, .n_heads = a->n_heads,
    };
    return hv;
}

/* Row t of a block: p holds the raw scores q·k and becomes P; ds holds dO·v and becomes
 * scale * dS. Keys past `visible` or of another packed example get zero. */
static void grad_row(const head_view *hv, const pt_attention *a, int t, int ext, float *p, float *ds)
{
    int pos = a->q_pos0 + t, visible = pos + 1;
    const float *o = hv->o + (size_t)t * hv->qw, *dout = hv->dout + (size_t)t * hv->qw;
    double dd = 0;
    for (int d = 0; d < a->head_dim; d++) dd += (double)dout[d] * o[d];
    float l = hv->lse[(size_t)t * hv->n_heads], delta = (float)dd;
    int32_t my_seg = hv->seg ? hv->seg[pos] : 0;
    for (int j = 0; j < visible; j++) {
        if (hv->seg && hv->seg[j] != my_seg) {
            p[j] = ds[j] = 0;
            continue;
        }
        float pj = expf(p[j] * a->scale - l);
        p[j] = pj;
        ds[j] = a->scale * (pj * (ds[j] - delta));
    }
    for (int j = visible; j < ext; j++) p[j] = ds[j] = 0;
}

/* Query rows [t0, t0+rows) of one head; p and ds are rows x ext scratch. */
static void grad_block(const head_view *hv, const pt_attention *a, int t0, int rows, float *p, float *ds)
{
    int ext = a->q_pos0 + t0 + rows, hd = a->head_dim; /* keys this block may see */
    const float *q = hv->q + (size_t)t0 * hv->qw, *dout = hv->dout + (size_t)t0 * hv->qw;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, ext, hd, 1.0f, q, hv->qw, hv->k, hv->kw, 0.0f, p,
                ext);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, ext, hd, 1.0f, dout, hv->qw, hv->v, hv->kw, 0.0f,
                ds, ext);
#pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) grad_row(hv, a, t0 + r, ext, p + (size_t)r * ext, ds + (size_t)r * ext);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hd, ext, 1.0f, ds, ext, hv->k, hv->kw, 0.0f,
                hv->dq + (size_t)t0 * hv->qw, hv->qw);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ext, hd, rows, 1.0f, ds, ext, q, hv->qw, 1.0f, hv->dk,
                hv->kw);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ext, hd, rows, 1.0f, p, ext, dout, hv->qw, 1.0f, hv->dv,
                hv->kw);
}

pt_status cpu_attention_bwd(pt_backend *be, pt_tensor *dq, pt_tensor *dk, pt_tensor *dv, const pt_tensor *dout,
                            const pt_tensor *q, const pt_tensor *k, const pt_tensor *v, const pt_tensor *out,
                            const pt_tensor *lse, const pt_attention *a)
{
    (void)be;
    int block = a->n_q < Q_BLOCK ? a->n_q : Q_BLOCK;
    float *p = malloc(sizeof(float) * 2 * (size_t)block * (size_t)a->n_kv);
    TRY_ALLOC(p);
    float *ds = p + (size_t)block * a->n_kv;
    memset(dk->data, 0, dk->nbytes); /* dK and dV accumulate over query blocks and heads */
    memset(dv->data, 0, dv->nbytes);
    for (int b = 0; b < a->batch; b++)
        for (int h = 0; h < a->n_heads; h++) {
            head_view hv = head_select(dq, dk, dv, dout, q, k, v, out, lse, a, b, h);
            for (int t0 = 0; t0 < a->n_q; t0 += block)
                grad_block(&hv, a, t0, a->n_q - t0 < block ? a->n_q - t0 : block, p, ds);
        }
    free(p);
    return PT_OK;
}
