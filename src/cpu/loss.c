/* loss.c — the loss head's ops on the CPU: the logit soft-cap of Gemma 2 (y = c tanh(x/c), and
 * its gradient from y: dx = dy (1 - (y/c)²)), and token cross-entropy over a chunk of logit rows
 * fused with its gradient:
 * per labelled row, loss = logsumexp(x) - x[label] with the row's maximum subtracted before
 * exponentiating and the sum kept in double; dlogits = (softmax(x) - onehot(label)) * grad_scale,
 * written over the row (dlogits may be the logits themselves). Ignored rows (PT_IGNORE_INDEX)
 * add nothing and get a zero gradient. One OpenMP loop over rows; the rows' losses are summed in
 * double in row order after it, so the sum does not depend on the threads.
 * With a soft-cap the cross-entropy caps each row first (into a row of its own) and applies the
 * cap's gradient to the row's, the same arithmetic as the soft-cap ops around it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static float row_max(const float *x, int64_t n)
{
    float m = -INFINITY;
    for (int64_t j = 0; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

/* Σ exp(x - max) in double; when e is not NULL the exponentials are stored there (e may be x). */
static double row_sum_exp(const float *x, float *e, float max, int64_t n)
{
    double sum = 0;
    if (!e) {
        for (int64_t j = 0; j < n; j++) sum += expf(x[j] - max);
        return sum;
    }
    for (int64_t j = 0; j < n; j++) {
        float ej = expf(x[j] - max);
        e[j] = ej;
        sum += ej;
    }
    return sum;
}

/* Loss of one labelled row; d (NULL, or a row that may alias x) gets its gradient. */
static double row_loss(const float *x, float *d, int32_t label, int64_t n, float grad_scale)
{
    float max = row_max(x, n), target = x[label];
    double sum = row_sum_exp(x, d, max, n);
    if (d) {
        float c = (float)(grad_scale / sum);
        double p_label = d[label] / sum;
        for (int64_t j = 0; j < n; j++) d[j] *= c;
        d[label] = (float)((p_label - 1.0) * grad_scale);
    }
    return (double)max + log(sum) - (double)target;
}

/* Loss of one labelled row under the soft-cap: z = cap tanh(x / cap) in z (a row of scratch), then
 * the loss of z, and d = d loss / dz * (1 - (z / cap)^2). */
static double row_loss_capped(const float *x, float *z, float *d, int32_t label, int64_t n, float grad_scale,
                              float cap)
{
    float inv = 1.0f / cap;
    for (int64_t j = 0; j < n; j++) z[j] = cap * tanhf(x[j] * inv);
    double loss = row_loss(z, d, label, n, grad_scale);
    if (d)
        for (int64_t j = 0; j < n; j++) {
            float t = z[j] * inv;
            d[j] = d[j] * (1.0f - t * t);
        }
    return loss;
}

pt_status cpu_cross_entropy(pt_backend *be, pt_tensor *dlogits, double *loss_sum, int64_t *n_labelled,
                            const pt_tensor *logits, const int32_t *labels, float grad_scale, float softcap)
{
    (void)be;
    int64_t rows = logits->shape[0], vocab = logits->shape[1];
    const float *xs = logits->data;
    float *ds = dlogits ? dlogits->data : NULL;
    double *row_loss_of = malloc(sizeof(double) * (size_t)(rows > 0 ? rows : 1));
    if (!row_loss_of) return ERR(PT_ERR_NOMEM, "cross_entropy: no memory for %lld row losses", (long long)rows);
    int64_t count = 0;
    bool failed = false;
#pragma omp parallel reduction(+ : count) reduction(|| : failed)
    {
        float *z = softcap > 0.0f ? malloc(sizeof(float) * (size_t)vocab) : NULL;
        failed = softcap > 0.0f && !z;
#pragma omp for schedule(dynamic, 4)
        for (int64_t r = 0; r < rows; r++) {
            float *d = ds ? ds + r * vocab : NULL;
            row_loss_of[r] = 0;
            if (labels[r] == PT_IGNORE_INDEX || failed) {
                if (d) memset(d, 0, sizeof(float) * (size_t)vocab);
                continue;
            }
            row_loss_of[r] = z ? row_loss_capped(xs + r * vocab, z, d, labels[r], vocab, grad_scale, softcap)
                               : row_loss(xs + r * vocab, d, labels[r], vocab, grad_scale);
            count++;
        }
        free(z);
    }
    /* summed in row order: the same sum whatever the threads did (a preference method's reference and
     * policy passes over the same logits give the same log-probs, to the bit) */
    double loss = 0;
    for (int64_t r = 0; r < rows; r++) loss += row_loss_of[r];
    free(row_loss_of);
    if (failed) return ERR(PT_ERR_NOMEM, "cross_entropy: no memory for a row of %lld capped logits", (long long)vocab);
    *loss_sum += loss;
    if (n_labelled) *n_labelled += count;
    return PT_OK;
}

pt_status cpu_softcap_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *x, float cap)
{
    (void)be;
    int64_t n = tensor_numel(x);
    const float *xs = x->data;
    float *ys = y->data, inv = 1.0f / cap;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) ys[i] = cap * tanhf(xs[i] * inv);
    return PT_OK;
}

pt_status cpu_softcap_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *y, float cap)
{
    (void)be;
    int64_t n = tensor_numel(dy);
    const float *ds = dy->data, *ys = y->data;
    float *dxs = dx->data, inv = 1.0f / cap;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float t = ys[i] * inv;
        dxs[i] = ds[i] * (1.0f - t * t);
    }
    return PT_OK;
}
