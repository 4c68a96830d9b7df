/* loss.cu — the loss head on the GPU, twins of src/cpu/loss.c: the logit soft-cap of Gemma 2 and its
 * gradient, and token cross-entropy over a chunk of logit rows fused with its gradient. One block
 * per row: the row's maximum, Σ exp(x - max) in double, then dlogits = (softmax - onehot) *
 * grad_scale written over the row (dlogits may be the logits themselves: the label's logit is read
 * before anything is written). Each row's loss goes to a partials buffer in double and is summed in
 * a fixed order, so the loss is the same on every run. The vocabulary never leaves the chunk the
 * caller passes, so tokens x vocab logits never exist at once; Gemma 2's soft-cap is applied inside
 * the cross-entropy (issue 26, point 6), so no capped copy of a chunk exists either. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256, CE_THREADS = 512 };

__global__ static void softcap_kernel(float *y, const float *x, float cap, float inv, int64_t n)
{
    GRID_STRIDE(i, n) y[i] = cap * tanhf(x[i] * inv);
}

__global__ static void softcap_bwd_kernel(float *dx, const float *dy, const float *y, float inv, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float t = y[i] * inv;
        dx[i] = dy[i] * (1.0f - t * t);
    }
}

pt_status cuda_softcap_fwd(pt_backend *be, pt_tensor *y, const pt_tensor *x, float cap)
{
    int64_t n = tensor_numel(x);
    softcap_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>((float *)y->data, (const float *)x->data,
                                                                               cap, 1.0f / cap, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_softcap_bwd(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *y, float cap)
{
    int64_t n = tensor_numel(dy);
    softcap_bwd_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)dx->data, (const float *)dy->data, (const float *)y->data, 1.0f / cap, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

/* Row r: loss[r] = logsumexp(z) - z[label] (0 when ignored) of z = x, or with CAP z = cap tanh(x / cap)
 * (inv = 1 / cap); d (may be NULL or alias x) its gradient with respect to x. With CAP the first pass
 * keeps z in d and the last recomputes exp(z - max) from it, so the arithmetic is softcap_kernel's,
 * the uncapped one's and softcap_bwd_kernel's. */
template <bool CAP>
__global__ static void cross_entropy_kernel(double *loss, float *d, const float *x, const int32_t *labels,
                                            int64_t vocab, float grad_scale, float cap, float inv)
{
    __shared__ double sums[32];
    __shared__ float maxes[32];
    int64_t r = blockIdx.x;
    const float *xr = x + r * vocab;
    float *dr = d ? d + r * vocab : NULL;
    int32_t label = labels[r];
    if (label == PT_IGNORE_INDEX) { /* no loss, zero gradient (backend_cross_entropy rejected other labels) */
        if (dr)
            for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) dr[j] = 0.0f;
        if (threadIdx.x == 0) loss[r] = 0.0;
        return;
    }
    float target = CAP ? cap * tanhf(xr[label] * inv) : xr[label], m = -INFINITY;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) m = fmaxf(m, CAP ? cap * tanhf(xr[j] * inv) : xr[j]);
    m = cuda_block_max(m, maxes); /* its barriers: every thread has read target before any write */
    double s = 0;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
        float z = CAP ? cap * tanhf(xr[j] * inv) : xr[j], e = expf(z - m);
        if (dr) dr[j] = CAP ? z : e;
        s += e;
    }
    s = cuda_block_sum(s, sums);
    if (threadIdx.x == 0) loss[r] = (double)m + log(s) - (double)target;
    if (!dr) return;
    float cf = (float)(grad_scale / s);
    double p_label = expf(target - m) / s;
    for (int64_t j = threadIdx.x; j < vocab; j += blockDim.x) {
        float g = j == label ? (float)((p_label - 1.0) * grad_scale) : (CAP ? expf(dr[j] - m) : dr[j]) * cf;
        if (CAP) {
            float t = dr[j] * inv;
            g = g * (1.0f - t * t);
        }
        dr[j] = g;
    }
}

pt_status cuda_cross_entropy(pt_backend *be, pt_tensor *dlogits, double *loss_sum, int64_t *n_labelled,
                             const pt_tensor *logits, const int32_t *labels, float grad_scale, float softcap)
{
    cuda_ctx *c = ctx_of(be);
    int64_t rows = logits->shape[0], vocab = logits->shape[1], count = 0;
    if (rows == 0) return PT_OK;
    for (int64_t r = 0; r < rows; r++) count += labels[r] != PT_IGNORE_INDEX;
    void *dev_labels;
    TRY(cuda_stage(c, STAGE_LABELS, labels, (size_t)rows * sizeof(int32_t), &dev_labels));
    TRY(cuda_partials_reserve(c, (size_t)rows + 1)); /* the last slot takes the total */
    auto kernel = softcap > 0.0f ? cross_entropy_kernel<true> : cross_entropy_kernel<false>;
    kernel<<<(unsigned)rows, CE_THREADS, 0, c->stream>>>(c->partials, dlogits ? (float *)dlogits->data : NULL,
                                                         (const float *)logits->data, (const int32_t *)dev_labels,
                                                         vocab, grad_scale, softcap, softcap > 0.0f ? 1.0f / softcap : 0.0f);
    CUDA_LAUNCHED();
    TRY(cuda_sum_to_host(c, c->partials, rows, loss_sum));
    if (n_labelled) *n_labelled += count;
    return PT_OK;
}
