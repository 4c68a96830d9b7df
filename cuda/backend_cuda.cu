/* backend_cuda.cu — the CUDA backend: device memory on one GPU per rank, a stream, a cuBLAS
 * handle, and matmuls in bf16 with fp32 accumulation (weights are converted to bf16 tile by tile;
 * activations arrive and leave in fp32). Tested against the CPU backend on a GPU machine. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdlib.h>

#include "cuda_backend.h"
#include "ptrain/quant.h"

extern "C" int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

__global__ void f32_to_bf16_kernel(const float *in, __nv_bfloat16 *out, int64_t n)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = __float2bfloat16(in[i]);
}

static pt_status scratch_reserve(cuda_ctx *c, size_t elems)
{
    if (elems <= c->scratch_elems) return PT_OK;
    CUDA_TRY(cudaFree(c->scratch));
    c->scratch = NULL;
    c->scratch_elems = 0;
    CUDA_TRY(cudaMalloc(&c->scratch, elems * sizeof(__nv_bfloat16)));
    c->scratch_elems = elems;
    return PT_OK;
}

/* Copy an fp32 (or bf16) device tensor into bf16 at dst; other dtypes come with the quantized
 * loaders. */
static pt_status to_bf16(cuda_ctx *c, const pt_tensor *t, __nv_bfloat16 *dst)
{
    int64_t n = tensor_numel(t);
    if (t->dtype == PT_BF16) {
        CUDA_TRY(cudaMemcpyAsync(dst, t->data, (size_t)n * 2, cudaMemcpyDeviceToDevice, c->stream));
        return PT_OK;
    }
    if (t->dtype != PT_F32)
        return ERR(PT_ERR_UNSUPPORTED, "the cuda backend has no matmul for %s weights yet", dtype_name(t->dtype));
    int threads = 256;
    int64_t blocks = (n + threads - 1) / threads;
    f32_to_bf16_kernel<<<(unsigned)blocks, threads, 0, c->stream>>>((const float *)t->data, dst, n);
    CUDA_TRY(cudaGetLastError());
    return PT_OK;
}

/* C[rows_c, cols_c] (fp32, row-major) = op(A) op(B) + beta C, with A and B staged in bf16. */
static pt_status gemm_bf16(cuda_ctx *c, const pt_tensor *a, bool ta, const pt_tensor *b, bool tb,
                           float *out, int64_t m, int64_t n, int64_t k, float beta)
{
    size_t na = (size_t)tensor_numel(a), nb = (size_t)tensor_numel(b);
    TRY(scratch_reserve(c, na + nb));
    __nv_bfloat16 *abf = c->scratch, *bbf = c->scratch + na;
    TRY(to_bf16(c, a, abf));
    TRY(to_bf16(c, b, bbf));
    /* Row-major out[m,n] = op(A)[m,k] op(B)[k,n] is column-major out^T = op(B)^T op(A)^T. */
    const float alpha = 1.0f;
    int lda = (int)(ta ? m : k), ldb = (int)(tb ? k : n);
    CUBLAS_TRY(cublasGemmEx(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N,
                            (int)n, (int)m, (int)k, &alpha, bbf, CUDA_R_16BF, ldb, abf, CUDA_R_16BF, lda,
                            &beta, out, CUDA_R_32F, (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return PT_OK;
}

static pt_status cuda_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta)
{ /* y[M,N] = x[M,K] @ w[N,K]^T */
    return gemm_bf16(ctx_of(be), x, false, w, true, (float *)y->data, x->shape[0], w->shape[0],
                     x->shape[1], beta);
}

static pt_status cuda_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy,
                                       const pt_tensor *w, float beta)
{ /* dx[M,K] = dy[M,N] @ w[N,K] */
    return gemm_bf16(ctx_of(be), dy, false, w, false, (float *)dx->data, dy->shape[0], w->shape[1],
                     w->shape[0], beta);
}

static pt_status cuda_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy,
                                        const pt_tensor *x, float beta)
{ /* dw[N,K] = dy[M,N]^T @ x[M,K] */
    return gemm_bf16(ctx_of(be), dy, true, x, false, (float *)dw->data, dw->shape[0], dw->shape[1],
                     dy->shape[0], beta);
}

static pt_status cuda_alloc(pt_backend *be, pt_tensor *t)
{
    (void)be;
    t->data = NULL;
    if (t->nbytes) CUDA_TRY(cudaMalloc(&t->data, t->nbytes));
    return PT_OK;
}

static void cuda_release(pt_backend *be, pt_tensor *t)
{
    (void)be;
    cudaFree(t->data);
}

static pt_status cuda_upload(pt_backend *be, pt_tensor *dst, const void *host, size_t nbytes)
{
    CUDA_TRY(cudaMemcpyAsync(dst->data, host, nbytes, cudaMemcpyHostToDevice, ctx_of(be)->stream));
    CUDA_TRY(cudaStreamSynchronize(ctx_of(be)->stream));
    return PT_OK;
}

static pt_status cuda_download(pt_backend *be, const pt_tensor *src, void *host, size_t nbytes)
{
    CUDA_TRY(cudaMemcpyAsync(host, src->data, nbytes, cudaMemcpyDeviceToHost, ctx_of(be)->stream));
    CUDA_TRY(cudaStreamSynchronize(ctx_of(be)->stream));
    return PT_OK;
}

static pt_status cuda_synchronize(pt_backend *be)
{
    CUDA_TRY(cudaStreamSynchronize(ctx_of(be)->stream));
    return PT_OK;
}

static void cuda_close(pt_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    if (c) {
        cuda_comm_close(c);
        cudaFree(c->scratch);
        if (c->blas) cublasDestroy(c->blas);
        if (c->stream) cudaStreamDestroy(c->stream);
        free(c);
    }
    free(be);
}

static pt_backend_ops make_ops(void)
{
    pt_backend_ops ops = {};
    ops.name = "cuda";
    ops.close = cuda_close;
    ops.alloc = cuda_alloc;
    ops.release = cuda_release;
    ops.upload = cuda_upload;
    ops.download = cuda_download;
    ops.synchronize = cuda_synchronize;
    ops.matmul = cuda_matmul;
    ops.matmul_bwd_input = cuda_matmul_bwd_input;
    ops.matmul_bwd_weight = cuda_matmul_bwd_weight;
    ops.allreduce_sum = cuda_allreduce_sum;
    ops.reduce_begin = cuda_reduce_begin;
    ops.reduce_poll = cuda_reduce_poll;
    ops.reduce_end = cuda_reduce_end;
    ops.copy = cuda_copy;
    return ops;
}

static const pt_backend_ops cuda_ops = make_ops();

static pt_status cuda_setup(pt_backend *be, int device, const pt_backend_options *opts)
{
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    TRY_ALLOC(c);
    be->ctx = c;
    CUDA_TRY(cudaSetDevice(device));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUBLAS_TRY(cublasCreate(&c->blas));
    CUBLAS_TRY(cublasSetStream(c->blas, c->stream));
    return cuda_comm_open(c, opts);
}

extern "C" pt_status cuda_backend_open(const pt_backend_options *opts, pt_backend **out)
{
    int gpus = cuda_device_count();
    if (gpus == 0) return ERR(PT_ERR_USER, "no GPU is visible to this process");
    pt_backend *be = (pt_backend *)calloc(1, sizeof *be);
    TRY_ALLOC(be);
    be->ops = &cuda_ops;
    be->device = opts->local_rank % gpus; /* one device per rank on the node */
    pt_status st = cuda_setup(be, be->device, opts);
    if (st != PT_OK) {
        cuda_close(be);
        return st;
    }
    *out = be;
    return PT_OK;
}
