/* dora.cu — the CUDA backend's DoRA ops, twins of src/cpu/dora.c: the norm of each output row of
 * W + s·B·A (the base weight dequantized on the device to fp32 in chunks of rows, then one block
 * per row adds the low-rank product in fp32 as the CPU does and sums squares in double), the
 * per-column output scale y *= m / ‖row‖ (bf16 or fp32 activations), and the magnitude gradient
 * (one thread per column, rows summed in order in double: deterministic). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "cuda_backend.h"

enum { THREADS = 256, NORM_CHUNK = 1 << 24 }; /* NORM_CHUNK: dequantized values held at once */

__global__ static void dora_norm_kernel(float *out, const float *rows, const float *a, const float *b, int64_t r0,
                                        int64_t k, int64_t r, float s)
{
    __shared__ double shared[32];
    int64_t i = blockIdx.x, n = r0 + i;
    const float *row = rows + i * k, *brow = b + n * r;
    double ss = 0;
    for (int64_t c = threadIdx.x; c < k; c += blockDim.x) {
        float lw = 0.0f;
        for (int64_t j = 0; j < r; j++) lw += brow[j] * a[j * k + c];
        float v = row[c] + s * lw;
        ss += (double)v * v;
    }
    ss = cuda_block_sum(ss, shared);
    if (threadIdx.x == 0) out[n] = (float)sqrt(ss);
}

pt_status cuda_dora_norm(pt_backend *be, pt_tensor *wnorm, const pt_tensor *w, const pt_tensor *a, const pt_tensor *b,
                         float s)
{
    cuda_ctx *c = ctx_of(be);
    int64_t n = w->shape[0], k = w->shape[1], r = a->shape[0];
    if (n == 0) return PT_OK;
    int64_t chunk = NORM_CHUNK / (k > 0 ? k : 1);
    if (chunk < 1) chunk = 1;
    if (chunk > n) chunk = n;
    float *rows;
    CUDA_TRY(cudaMallocAsync((void **)&rows, sizeof(float) * (size_t)(chunk * k), c->stream));
    pt_status st = PT_OK;
    for (int64_t r0 = 0; r0 < n && st == PT_OK; r0 += chunk) {
        int64_t cnt = n - r0 < chunk ? n - r0 : chunk;
        if (w->dtype == PT_F32) {
            cudaError_t e = cudaMemcpyAsync(rows, (const float *)w->data + r0 * k, sizeof(float) * (size_t)(cnt * k),
                                            cudaMemcpyDeviceToDevice, c->stream);
            if (e != cudaSuccess) st = ERR(PT_ERR_INTERNAL, "dora_norm: cudaMemcpyAsync: %s", cudaGetErrorString(e));
        } else {
            st = cuda_dequant_rows(c, w, NULL, r0, cnt, NULL, rows);
        }
        if (st != PT_OK) break;
        dora_norm_kernel<<<(unsigned)cnt, THREADS, 0, c->stream>>>((float *)wnorm->data, rows, (const float *)a->data,
                                                                 (const float *)b->data, r0, k, r, s);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) st = ERR(PT_ERR_INTERNAL, "dora_norm: launch: %s", cudaGetErrorString(e));
    }
    cudaError_t e = cudaFreeAsync(rows, c->stream);
    if (st == PT_OK && e != cudaSuccess) return ERR(PT_ERR_INTERNAL, "cudaFreeAsync: %s", cudaGetErrorString(e));
    return st;
}

template <typename T>
__global__ static void dora_scale_kernel(T *y, const float *mag, const float *wnorm, int64_t width, int64_t n)
{
    GRID_STRIDE(i, n)
    {
        int64_t c = i % width;
        act_st(y, i, act_ld(y, i) * (mag[c] / wnorm[c]));
    }
}

template <typename T>
static pt_status dora_scale_launch(cudaStream_t s, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm)
{
    int64_t n = tensor_numel(y);
    if (n == 0) return PT_OK;
    auto kernel = dora_scale_kernel<T>;
    kernel<<<cuda_grid(n, THREADS), THREADS, 0, s>>>((T *)y->data, (const float *)mag->data,
                                                     (const float *)wnorm->data, tensor_numel(mag), n);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_dora_scale(pt_backend *be, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm)
{
    return ACT_CALL(y, dora_scale_launch, ctx_of(be)->stream, y, mag, wnorm);
}

template <typename T>
__global__ static void dora_mag_bwd_kernel(float *dmag, const T *dy, const T *z, const float *wnorm, int64_t width,
                                           int64_t rows)
{
    GRID_STRIDE(c, width)
    {
        double acc = 0;
        for (int64_t i = 0; i < rows; i++) acc += (double)act_ld(dy, i * width + c) * act_ld(z, i * width + c);
        dmag[c] += (float)(acc / wnorm[c]);
    }
}

template <typename T>
static pt_status dora_mag_bwd_launch(cudaStream_t s, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                                     const pt_tensor *wnorm)
{
    int64_t width = tensor_numel(dmag), rows = tensor_numel(dy) / (width ? width : 1);
    if (width == 0) return PT_OK;
    auto kernel = dora_mag_bwd_kernel<T>;
    kernel<<<cuda_grid(width, THREADS), THREADS, 0, s>>>((float *)dmag->data, (const T *)dy->data,
                                                         (const T *)z->data, (const float *)wnorm->data, width, rows);
    CUDA_LAUNCHED();
    return PT_OK;
}

pt_status cuda_dora_mag_bwd(pt_backend *be, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                            const pt_tensor *wnorm)
{
    return ACT_CALL(dy, dora_mag_bwd_launch, ctx_of(be)->stream, dmag, dy, z, wnorm);
}
