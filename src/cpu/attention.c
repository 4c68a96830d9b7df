/* attention.c — causal grouped-query attention on the CPU. Per (sequence, head, block of 64 query
 * rows): scores = q kᵀ over the keys the block may see, with sgemm, scaled (and soft-capped,
 * Gemma 2), the causal, sliding-window and packing mask, softmax in fp32 with the max subtracted,
 * then out = p v with sgemm. The log-sum-exp of each row is kept for the backward pass. */
#include <cblas.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "cpu.h"

float cpu_attention_score(const pt_attention *a, float qk, float *dscore)
{
    float s = qk * a->scale;
    if (a->softcap <= 0.0f) {
        if (dscore) *dscore = a->scale;
        return s;
    }
    float t = tanhf(s / a->softcap);
    if (dscore) *dscore = a->scale * (1.0f - t * t);
    return a->softcap * t;
}

enum { Q_BLOCK = 64 }; /* query rows per block */

/* libmvec's vector expf (within 4 ulp of expf), for the loops below marked omp simd */
#pragma omp declare simd notinbranch
float expf(float);

/* row[j] = exp(row[j] - shift) over [0, n); returns their sum */
PT_CLONES double cpu_exp_shift(float *row, int n, float shift)
{
    double sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; j++) {
        row[j] = expf(row[j] - shift);
        sum += row[j];
    }
    return sum;
}

/* The backward's elementwise pass over a row's visible keys without a soft-cap: p (raw q.k)
 * becomes P = exp(scale p - lse), ds (dO.v) becomes scale P (ds - delta). */
PT_CLONES void cpu_attention_grad_run(float *p, float *ds, int n, float scale, float lse, float delta)
{
#pragma omp simd
    for (int j = 0; j < n; j++) {
        float pj = expf(p[j] * scale - lse);
        p[j] = pj;
        ds[j] = scale * (pj * (ds[j] - delta));
    }
}

/* Softmax over the keys [a, e) of a row (the others are zero), no packing segments: scores
 * scaled (soft-capped), max subtracted, exponentials vectorized; a sink (NULL: none) is one more logit in the
 * max and the sum. */
static float softmax_range(float *row, const pt_attention *x, int a, int e, int nk, const float *sink)
{
    for (int j = 0; j < a; j++) row[j] = 0;
    for (int j = e; j < nk; j++) row[j] = 0;
    float max = -FLT_MAX, *r = row + a;
    int n = e - a;
    if (x->softcap <= 0.0f) {
        float scale = x->scale;
#pragma omp simd reduction(max : max)
        for (int j = 0; j < n; j++) {
            r[j] *= scale;
            max = r[j] > max ? r[j] : max;
        }
    } else {
        for (int j = 0; j < n; j++) {
            r[j] = cpu_attention_score(x, r[j], NULL);
            if (r[j] > max) max = r[j];
        }
    }
    if (sink && *sink > max) max = *sink;
    double sum = cpu_exp_shift(r, n, max) + (sink ? exp((double)(*sink - max)) : 0.0);
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) r[j] *= inv;
    return max + (float)log(sum);
}

/* Softmax in place of the raw products of the query at position pos against the nk keys from lo
 * (row[jj] is key lo + jj); keys it may not see (causal, window, another packed example) become 0.
 * Returns its log-sum-exp (over the sink too, when there is one). */
static float softmax_row(float *row, const pt_attention *a, int pos, int lo, int nk, const int32_t *seg,
                         const float *sink)
{
    int first = cpu_attention_first_key(a, pos);
    if (!seg) return softmax_range(row, a, (first > lo ? first : lo) - lo, pos + 1 - lo, nk, sink);
    int32_t my_seg = seg ? seg[pos] : 0;
    float max = -FLT_MAX;
    for (int jj = 0; jj < nk; jj++) {
        int j = lo + jj;
        if (j < first || j > pos || (seg && seg[j] != my_seg)) continue;
        row[jj] = cpu_attention_score(a, row[jj], NULL);
        if (row[jj] > max) max = row[jj];
    }
    if (sink && *sink > max) max = *sink;
    double sum = sink ? exp((double)(*sink - max)) : 0.0;
    for (int jj = 0; jj < nk; jj++) {
        int j = lo + jj;
        if (j < first || j > pos || (seg && seg[j] != my_seg)) {
            row[jj] = 0;
            continue;
        }
        row[jj] = expf(row[jj] - max);
        sum += row[jj];
    }
    float inv = (float)(1.0 / sum);
    for (int jj = 0; jj < nk; jj++) row[jj] *= inv;
    return max + (float)log(sum);
}

/* Query rows [t0, t0+rows) of head h of sequence b: only the keys the block may see (from the
 * first its first row may see to its last row's own), so the causal triangle costs about half
 * the square. scores is rows x (those keys) scratch. */
static void fwd_block(pt_tensor *out, pt_tensor *lse, const pt_tensor *q, const pt_tensor *k, const pt_tensor *v,
                      const pt_attention *a, int b, int h, int t0, int rows, float *scores)
{
    int qw = a->n_heads * a->head_dim, kw = a->n_kv_heads * a->head_dim, group = a->n_heads / a->n_kv_heads;
    int lo = cpu_attention_first_key(a, a->q_pos0 + t0), nk = a->q_pos0 + t0 + rows - lo;
    size_t qoff = ((size_t)b * a->n_q + t0) * qw + (size_t)h * a->head_dim;
    size_t koff = ((size_t)b * a->n_kv + lo) * kw + (size_t)(h / group) * a->head_dim;
    const int32_t *seg = a->segments ? a->segments + (size_t)b * a->n_kv : NULL;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nk, a->head_dim, 1.0f, (const float *)q->data + qoff,
                qw, (const float *)k->data + koff, kw, 0.0f, scores, nk);
    for (int r = 0; r < rows; r++) {
        float l = softmax_row(scores + (size_t)r * nk, a, a->q_pos0 + t0 + r, lo, nk, seg, a->sinks ? a->sinks + h : NULL);
        if (lse) ((float *)lse->data)[((size_t)b * a->n_q + t0 + r) * a->n_heads + h] = l;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, a->head_dim, nk, 1.0f, scores, nk,
                (const float *)v->data + koff, kw, 0.0f, (float *)out->data + qoff, qw);
}

/* The (sequence, head, query block) tasks run in parallel, each with single-threaded sgemm (OpenBLAS
 * runs one thread inside an OpenMP region): every output element is computed by the same code
 * whatever the thread count, so results do not depend on it. */
pt_status cpu_attention_fwd(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                            const pt_tensor *k, const pt_tensor *v, const pt_attention *a)
{
    (void)be;
    int blocks = (a->n_q + Q_BLOCK - 1) / Q_BLOCK, per_seq = a->n_heads * blocks;
    int threads = omp_get_max_threads();
    size_t scratch = (size_t)(a->n_q < Q_BLOCK ? a->n_q : Q_BLOCK) * (size_t)a->n_kv;
    float *scores = malloc(sizeof(float) * scratch * (size_t)threads);
    TRY_ALLOC(scores);
    long tasks = (long)a->batch * per_seq;
#pragma omp parallel for schedule(dynamic, 1)
    for (long i = 0; i < tasks; i++) {
        int b = (int)(i / per_seq), h = (int)(i % per_seq) / blocks, t0 = (int)(i % blocks) * Q_BLOCK;
        int rows = a->n_q - t0 < Q_BLOCK ? a->n_q - t0 : Q_BLOCK;
        fwd_block(out, lse, q, k, v, a, b, h, t0, rows, scores + scratch * (size_t)omp_get_thread_num());
    }
    free(scores);
    return PT_OK;
}
