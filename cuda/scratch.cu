/* scratch.cu — the device scratch every op family shares: small host arrays (labels, positions,
 * row indices) staged into buffers that grow and are kept, the per-block partial sums of the
 * reductions, and their fixed-order sum, copied to the host. Below the ops and the backend frame
 * (backend_cuda.cu), which both call it. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdint.h>

#include "cuda_backend.h"

pt_status cuda_stage(cuda_ctx *c, int slot, const void *host, size_t bytes, void **dev)
{
    if (bytes > c->stage_bytes[slot]) {
        CUDA_TRY(cudaFreeAsync(c->stage[slot], c->stream));
        c->stage[slot] = NULL;
        c->stage_bytes[slot] = 0;
        size_t want = bytes < 4096 ? 4096 : bytes + bytes / 2;
        CUDA_TRY(cudaMallocAsync(&c->stage[slot], want, c->stream));
        c->stage_bytes[slot] = want;
    }
    /* From pageable memory the copy is staged before cudaMemcpyAsync returns, so the caller may
     * reuse its array at once; a later stage into this slot is ordered after the kernels that read it. */
    if (bytes) CUDA_TRY(cudaMemcpyAsync(c->stage[slot], host, bytes, cudaMemcpyHostToDevice, c->stream));
    *dev = c->stage[slot];
    return PT_OK;
}

pt_status cuda_partials_reserve(cuda_ctx *c, size_t n)
{
    if (n <= c->partials_n) return PT_OK;
    CUDA_TRY(cudaFreeAsync(c->partials, c->stream));
    c->partials = NULL;
    c->partials_n = 0;
    CUDA_TRY(cudaMallocAsync((void **)&c->partials, n * sizeof(double), c->stream));
    c->partials_n = n;
    return PT_OK;
}

__global__ static void sum_doubles_kernel(double *out, const double *in, int64_t n)
{
    __shared__ double shared[32];
    double s = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += in[i];
    s = cuda_block_sum(s, shared);
    if (threadIdx.x == 0) *out = s;
}

pt_status cuda_sum_doubles(cuda_ctx *c, const double *in, int64_t n, double *out)
{
    sum_doubles_kernel<<<1, 1024, 0, c->stream>>>(out, in, n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_sum_to_host(cuda_ctx *c, const double *in, int64_t n, double *acc)
{
    TRY(cuda_sum_doubles(c, in, n, c->partials + c->partials_n - 1));
    CUDA_TRY(cudaMemcpyAsync(c->host_sums, c->partials + c->partials_n - 1, sizeof(double), cudaMemcpyDeviceToHost,
                             c->stream));
    TRY(cuda_wait(c));
    *acc += c->host_sums[0];
    return PT_OK;
}
