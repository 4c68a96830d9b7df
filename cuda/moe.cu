/* moe.cu — the CUDA twins of the CPU backend's mixture-of-experts ops (src/cpu/moe.c): the router's
 * fp32 softmax and top-k (one thread per token, the k experts and weights copied back to the host,
 * which sorts the tokens by expert), the gather of each expert's rows and the weighted combine into
 * the residual stream, summed in the caller's fixed order. Host index arrays are staged (scratch.cu). */
#include "cuda_backend.h"

enum { THREADS = 256 };

/* One token's row: p = softmax(z) in fp32 (max subtracted), the k largest (ties to the lower expert),
 * renormalised with norm; p is n floats of the token's own scratch. */
template <typename T>
__global__ static void route_kernel(const T *logits, int64_t rows, int64_t n, int k, bool norm, float *p,
                                    int32_t *expert, float *weight)
{
    GRID_STRIDE(t, rows) {
        const T *z = logits + t * n;
        float *pr = p + t * n;
        float mx = act_ld(z, 0);
        for (int64_t e = 1; e < n; e++) mx = fmaxf(mx, act_ld(z, e));
        float sum = 0.0f;
        for (int64_t e = 0; e < n; e++) {
            pr[e] = expf(act_ld(z, e) - mx);
            sum += pr[e];
        }
        for (int64_t e = 0; e < n; e++) pr[e] /= sum;
        float total = 0.0f;
        for (int s = 0; s < k; s++) {
            int64_t best = -1;
            for (int64_t e = 0; e < n; e++)
                if (pr[e] >= 0.0f && (best < 0 || pr[e] > pr[best])) best = e;
            if (best < 0) { /* NaN logits: no expert (the caller refuses it) */
                expert[t * k + s] = -1, weight[t * k + s] = 0.0f;
                continue;
            }
            expert[t * k + s] = (int32_t)best;
            weight[t * k + s] = pr[best];
            total += pr[best];
            pr[best] = -1.0f;
        }
        for (int s = 0; norm && s < k; s++) weight[t * k + s] /= total;
    }
}

template <typename T>
static pt_status route_launch(cudaStream_t st, const pt_tensor *logits, int k, bool norm, float *p, int32_t *expert,
                              float *weight)
{
    int64_t rows = logits->shape[0];
    auto kernel = route_kernel<T>;
    kernel<<<cuda_grid(rows, THREADS), THREADS, 0, st>>>((const T *)logits->data, rows, logits->shape[1], k, norm, p,
                                                           expert, weight);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_moe_route(pt_backend *be, int32_t *expert, float *weight, const pt_tensor *logits, int k, bool norm)
{
    cuda_ctx *c = ctx_of(be);
    int64_t rows = logits->shape[0], n = logits->shape[1], picks = rows * k;
    size_t bytes = sizeof(float) * (size_t)(rows * n) + (sizeof(int32_t) + sizeof(float)) * (size_t)picks;
    char *dev = NULL;
    CUDA_TRY(cudaMallocAsync((void **)&dev, bytes ? bytes : 1, c->stream));
    float *p = (float *)dev, *dw = p + rows * n;
    int32_t *de = (int32_t *)(dw + picks);
    pt_status st = ACT_CALL(logits, route_launch, c->stream, logits, k, norm, p, de, dw);
    if (st == PT_OK && cudaMemcpyAsync(expert, de, sizeof(int32_t) * (size_t)picks, cudaMemcpyDeviceToHost, c->stream))
        st = ERR(PT_ERR_INTERNAL, "moe_route: copying the chosen experts back failed");
    if (st == PT_OK && cudaMemcpyAsync(weight, dw, sizeof(float) * (size_t)picks, cudaMemcpyDeviceToHost, c->stream))
        st = ERR(PT_ERR_INTERNAL, "moe_route: copying the routing weights back failed");
    if (st == PT_OK) st = cuda_wait(c);
    cudaFreeAsync(dev, c->stream);
    return st;
}

template <typename T>
__global__ static void gather_kernel(T *xs, const T *x, const int32_t *token, int64_t dim, int64_t n)
{
    GRID_STRIDE(i, n) xs[i] = x[(int64_t)token[i / dim] * dim + i % dim];
}

template <typename T>
static pt_status gather_launch(cudaStream_t st, pt_tensor *xs, const pt_tensor *x, const int32_t *token)
{
    int64_t n = tensor_numel(xs);
    auto kernel = gather_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, st>>>((T *)xs->data, (const T *)x->data, token, xs->shape[1], n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_moe_gather(pt_backend *be, pt_tensor *xs, const pt_tensor *x, const int32_t *token)
{
    cuda_ctx *c = ctx_of(be);
    void *dev;
    TRY(cuda_stage(c, STAGE_IDS, token, sizeof(int32_t) * (size_t)xs->shape[0], &dev));
    return ACT_CALL(xs, gather_launch, c->stream, xs, x, (const int32_t *)dev);
}

/* y[t, i] += sum over s of weight[t k + s] * ys[row[t k + s], i], the sum in fp32 in s order. */
template <typename T>
__global__ static void combine_kernel(T *y, const T *ys, const int32_t *row, const float *weight, int k, int64_t dim,
                                      int64_t n)
{
    GRID_STRIDE(i, n) {
        int64_t t = i / dim, j = i % dim;
        float acc = 0.0f;
        for (int s = 0; s < k; s++) acc += weight[t * k + s] * act_ld(ys, (int64_t)row[t * k + s] * dim + j);
        act_st(y, i, act_ld(y, i) + acc);
    }
}

template <typename T>
static pt_status combine_launch(cudaStream_t st, pt_tensor *y, const pt_tensor *ys, const int32_t *row,
                                const float *weight, int k)
{
    int64_t n = tensor_numel(y);
    auto kernel = combine_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, st>>>((T *)y->data, (const T *)ys->data, row, weight, k, y->shape[1], n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_moe_combine(pt_backend *be, pt_tensor *y, const pt_tensor *ys, const int32_t *row, const float *weight,
                           int k)
{
    cuda_ctx *c = ctx_of(be);
    size_t picks = (size_t)y->shape[0] * (size_t)k;
    void *drow, *dw;
    TRY(cuda_stage(c, STAGE_IDS, row, sizeof(int32_t) * picks, &drow));
    TRY(cuda_stage(c, STAGE_MOE_WEIGHTS, weight, sizeof(float) * picks, &dw));
    return ACT_CALL(y, combine_launch, c->stream, y, ys, (const int32_t *)drow, (const float *)dw, k);
}

/* One block per (token, slot) pair: dw = dy[t] · ys[r] (in double, a fixed order), then dys[r] = weight * dy[t]
 * (dys may be ys: the row is read in full before the block writes it). */
template <typename T>
__global__ static void combine_bwd_kernel(T *dys, float *dw, const T *dy, const T *ys, const int32_t *row,
                                          const float *weight, int k, int64_t dim)
{
    __shared__ double shared[32];
    int64_t i = blockIdx.x, t = i / k, r = row[i];
    double acc = 0;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) acc += (double)act_ld(dy, t * dim + j) * act_ld(ys, r * dim + j);
    acc = cuda_block_sum(acc, shared);
    if (threadIdx.x == 0) dw[i] = (float)acc;
    for (int64_t j = threadIdx.x; j < dim; j += blockDim.x) act_st(dys, r * dim + j, weight[i] * act_ld(dy, t * dim + j));
}

template <typename T>
static pt_status combine_bwd_launch(cudaStream_t st, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy,
                                    const pt_tensor *ys, const int32_t *row, const float *weight, int k)
{
    int64_t pairs = dy->shape[0] * k;
    if (pairs == 0) return PT_OK;
    auto kernel = combine_bwd_kernel<T>;
    kernel<<<(unsigned)pairs, THREADS, 0, st>>>((T *)dys->data, (float *)dw->data, (const T *)dy->data,
                                                 (const T *)ys->data, row, weight, k, dy->shape[1]);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_moe_combine_bwd(pt_backend *be, pt_tensor *dys, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *ys,
                               const int32_t *row, const float *weight, int k)
{
    cuda_ctx *c = ctx_of(be);
    size_t pairs = (size_t)dy->shape[0] * (size_t)k;
    void *drow, *dwt;
    TRY(cuda_stage(c, STAGE_IDS, row, sizeof(int32_t) * pairs, &drow));
    TRY(cuda_stage(c, STAGE_MOE_WEIGHTS, weight, sizeof(float) * pairs, &dwt));
    return ACT_CALL(dy, combine_bwd_launch, c->stream, dys, dw, dy, ys, (const int32_t *)drow, (const float *)dwt, k);
}

/* One thread per token: p = softmax(z) again, dp on the chosen experts (renormalised with norm),
 * dz = p (dp - Σ p dp); scratch: 2n floats per token. dz may be z (written after p is taken). */
template <typename T>
__global__ static void route_bwd_kernel(T *dz, const T *z, const float *dw, const int32_t *expert, int64_t rows,
                                        int64_t n, int k, bool norm, float *scratch)
{
    GRID_STRIDE(t, rows) {
        float *p = scratch + 2 * t * n, *dp = p + n;
        const T *zr = z + t * n;
        float mx = act_ld(zr, 0);
        for (int64_t e = 1; e < n; e++) mx = fmaxf(mx, act_ld(zr, e));
        float sum = 0.0f;
        for (int64_t e = 0; e < n; e++) {
            p[e] = expf(act_ld(zr, e) - mx);
            sum += p[e];
        }
        for (int64_t e = 0; e < n; e++) p[e] /= sum, dp[e] = 0.0f;
        const int32_t *ex = expert + t * k;
        const float *g = dw + t * k;
        double top = 0, wdw = 0;
        for (int s = 0; s < k; s++) top += p[ex[s]];
        for (int s = 0; s < k; s++) wdw += (double)g[s] * (p[ex[s]] / top);
        for (int s = 0; s < k; s++) dp[ex[s]] = norm ? (float)((g[s] - wdw) / top) : g[s];
        double pdp = 0;
        for (int64_t e = 0; e < n; e++) pdp += (double)p[e] * dp[e];
        for (int64_t e = 0; e < n; e++) act_st(dz, t * n + e, p[e] * (float)(dp[e] - pdp));
    }
}

template <typename T>
static pt_status route_bwd_launch(cudaStream_t st, pt_tensor *dz, const pt_tensor *z, const pt_tensor *dw,
                                  const int32_t *expert, int k, bool norm, float *scratch)
{
    int64_t rows = z->shape[0];
    auto kernel = route_bwd_kernel<T>;
    kernel<<<cuda_grid(rows, THREADS), THREADS, 0, st>>>((T *)dz->data, (const T *)z->data, (const float *)dw->data,
                                                           expert, rows, z->shape[1], k, norm, scratch);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_moe_route_bwd(pt_backend *be, pt_tensor *dlogits, const pt_tensor *logits, const pt_tensor *dw,
                             const int32_t *expert, int k, bool norm)
{
    cuda_ctx *c = ctx_of(be);
    int64_t rows = logits->shape[0], n = logits->shape[1];
    void *dex;
    TRY(cuda_stage(c, STAGE_IDS, expert, sizeof(int32_t) * (size_t)(rows * k), &dex));
    float *scratch = NULL;
    CUDA_TRY(cudaMallocAsync((void **)&scratch, sizeof(float) * (size_t)(2 * rows * n + 1), c->stream));
    pt_status st = ACT_CALL(logits, route_bwd_launch, c->stream, dlogits, logits, dw, (const int32_t *)dex, k, norm,
                            scratch);
    cudaFreeAsync(scratch, c->stream);
    return st;
}
