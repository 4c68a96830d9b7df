/* attention.c — causal grouped-query attention on the CPU. Per (sequence, head): scores = q kᵀ
 * with sgemm, scaled (and soft-capped, Gemma 2), the causal, sliding-window and packing mask,
 * softmax in fp32 with the max subtracted, then out = p v with sgemm. The log-sum-exp of each row
 * is kept for the backward pass. */
#include <cblas.h>
#include <float.h>
#include <math.h>
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

/* Softmax in place of the scores of the query at position pos over the keys it may see (the
 * others become 0); returns its log-sum-exp. */
static float softmax_row(float *row, const pt_attention *a, int pos, const int32_t *seg)
{
    int lo = cpu_attention_first_key(a, pos), hi = pos + 1;
    int32_t my_seg = seg ? seg[pos] : 0;
    float max = -FLT_MAX;
    for (int j = lo; j < hi; j++) {
        if (seg && seg[j] != my_seg) continue;
        row[j] = cpu_attention_score(a, row[j], NULL);
        if (row[j] > max) max = row[j];
    }
    double sum = 0;
    for (int j = 0; j < a->n_kv; j++) {
        if (j < lo || j >= hi || (seg && seg[j] != my_seg)) {
            row[j] = 0;
            continue;
        }
        row[j] = expf(row[j] - max);
        sum += row[j];
    }
    float inv = (float)(1.0 / sum);
    for (int j = lo; j < hi; j++) row[j] *= inv;
    return max + (float)log(sum);
}

pt_status cpu_attention_fwd(pt_backend *be, pt_tensor *out, pt_tensor *lse, const pt_tensor *q,
                            const pt_tensor *k, const pt_tensor *v, const pt_attention *a)
{
    (void)be;
    int qw = a->n_heads * a->head_dim, kw = a->n_kv_heads * a->head_dim, group = a->n_heads / a->n_kv_heads;
    float *scores = malloc(sizeof(float) * (size_t)a->n_q * (size_t)a->n_kv);
    TRY_ALLOC(scores);
    for (int b = 0; b < a->batch; b++) {
        const int32_t *seg = a->segments ? a->segments + (size_t)b * a->n_kv : NULL;
        for (int h = 0; h < a->n_heads; h++) {
            const float *qh = (const float *)q->data + (size_t)b * a->n_q * qw + (size_t)h * a->head_dim;
            size_t koff = (size_t)b * a->n_kv * kw + (size_t)(h / group) * a->head_dim;
            const float *kh = (const float *)k->data + koff, *vh = (const float *)v->data + koff;
            float *oh = (float *)out->data + (size_t)b * a->n_q * qw + (size_t)h * a->head_dim;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->n_q, a->n_kv, a->head_dim, 1.0f, qh, qw,
                        kh, kw, 0.0f, scores, a->n_kv);
#pragma omp parallel for schedule(static)
            for (int t = 0; t < a->n_q; t++) {
                int pos = a->q_pos0 + t;
                float l = softmax_row(scores + (size_t)t * a->n_kv, a, pos, seg);
                if (lse) ((float *)lse->data)[((size_t)b * a->n_q + t) * a->n_heads + h] = l;
            }
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->n_q, a->head_dim, a->n_kv, 1.0f, scores,
                        a->n_kv, vh, kw, 0.0f, oh, qw);
        }
    }
    free(scores);
    return PT_OK;
}
