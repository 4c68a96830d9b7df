/* optim.cu — the optimizer ops on the GPU, twins of src/cpu/optim.c: one torch.optim.AdamW update
 * (the scalars come from adamw_scalars() in src/backend/backend.c, the same as the CPU's; the moments use
 * fused multiply-adds as torch's kernels do), and the sum of squares and scaling that gradient-norm
 * clipping is built from. The sum of squares is taken per block in double and the blocks' sums are
 * added in a fixed order, so the norm, and the clipping it decides, repeat exactly run to run. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256, SS_THREADS = 512, SS_BLOCKS = 1024 };

/* torch's lerp(self, end, weight): its formula for weights below 0.5 and the mirrored one above */
__device__ static inline float adamw_lerp(float self, float end, float weight)
{
    return weight < 0.5f ? fmaf(weight, end - self, self) : fmaf(weight - 1.0f, end - self, end);
}

__global__ static void adamw_kernel(float *p, const float *g, float *m, float *v, pt_adamw_scalars s, int decay,
                                    int64_t n)
{
    GRID_STRIDE(i, n)
    {
        float pi = decay ? __fmul_rn(p[i], s.decay) : p[i], gi = g[i];
        float mi = adamw_lerp(m[i], gi, s.w1);
        float vi = fmaf(__fmul_rn(s.w2, gi), gi, __fmul_rn(v[i], s.b2));
        float denom = __fadd_rn(__fdiv_rn(sqrtf(vi), s.bc2_sqrt), s.eps);
        p[i] = __fadd_rn(pi, __fdiv_rn(__fmul_rn(s.neg_step, mi), denom));
        m[i] = mi;
        v[i] = vi;
    }
}

pt_status cuda_adamw_step(pt_backend *be, pt_tensor *param, const pt_tensor *grad, pt_tensor *m, pt_tensor *v,
                          const pt_adamw *hp)
{
    int64_t n = tensor_numel(param);
    adamw_kernel<<<cuda_grid(n, THREADS), THREADS, 0, ctx_of(be)->stream>>>(
        (float *)param->data, (const float *)grad->data, (float *)m->data, (float *)v->data, adamw_scalars(hp),
        hp->weight_decay != 0, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

__global__ static void sum_squares_kernel(double *partial, const float *x, int64_t n)
{
    __shared__ double shared[32];
    double s = 0;
    GRID_STRIDE(i, n) s += (double)x[i] * x[i];
    s = cuda_block_sum(s, shared);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

pt_status cuda_sum_squares(pt_backend *be, const pt_tensor *t, double *acc)
{
    cuda_ctx *c = ctx_of(be);
    int64_t n = tensor_numel(t);
    if (n == 0) return PT_OK;
    unsigned blocks = cuda_grid(n, SS_THREADS);
    if (blocks > SS_BLOCKS) blocks = SS_BLOCKS; /* the grid-stride loop covers the rest */
    TRY(cuda_partials_reserve(c, blocks + 1));
    sum_squares_kernel<<<blocks, SS_THREADS, 0, c->stream>>>(c->partials, (const float *)t->data, n);
    CUDA_LAUNCHED();
    return cuda_sum_to_host(c, c->partials, blocks, acc);
}

template <typename T>
__global__ static void scale_kernel(T *x, float s, int64_t n)
{
    GRID_STRIDE(i, n) act_st(x, i, act_ld(x, i) * s);
}

template <typename T>
static pt_status scale_launch(cudaStream_t st, pt_tensor *t, float s)
{
    int64_t n = tensor_numel(t);
    auto kernel = scale_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, st>>>((T *)t->data, s, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_scale(pt_backend *be, pt_tensor *t, float s)
{ /* gradients (fp32) and activations (either dtype) */
    return ACT_CALL(t, scale_launch, ctx_of(be)->stream, t, s);
}
