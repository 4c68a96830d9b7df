/* backend_cuda.cu — the CUDA backend's frame: one GPU per rank, a compute stream, a cuBLAS handle
 * (and cuBLASLt's, lt.cu), device memory from the stream-ordered pool (the training loop allocates
 * and frees the same activation buffers every micro-batch; the pool keeps them, so no cudaMalloc
 * or implicit device synchronization happens per step) and the op table. The staging of small host
 * arrays and the partial sums the ops share are scratch.cu's. The ops
 * themselves live in one file per op family (cuda_backend.h lists them); each is tested against
 * its CPU twin by tests/unit/test_cuda_ops on a GPU machine (tests/gpu/run.sh). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_backend.h"

extern "C" int cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

extern "C" size_t cuda_peak_bytes(pt_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    uint64_t high = 0; /* cuuint64_t */
    if (cudaMemPoolGetAttribute(c->pool, cudaMemPoolAttrUsedMemHigh, &high) != cudaSuccess) return 0;
    return (size_t)high;
}

extern "C" pt_status cuda_mem_info(pt_backend *be, size_t *free_bytes, size_t *total_bytes)
{
    (void)be;
    CUDA_TRY(cudaMemGetInfo(free_bytes, total_bytes));
    return PT_OK;
}

static pt_status cuda_alloc(pt_backend *be, pt_tensor *t)
{
    t->data = NULL;
    if (t->nbytes) CUDA_TRY(cudaMallocAsync(&t->data, t->nbytes, ctx_of(be)->stream));
    return PT_OK;
}

static void cuda_release(pt_backend *be, pt_tensor *t)
{
    if (t->data) cudaFreeAsync(t->data, ctx_of(be)->stream);
    t->data = NULL;
}

static pt_status cuda_upload(pt_backend *be, pt_tensor *dst, const void *host, size_t nbytes)
{
    CUDA_TRY(cudaMemcpyAsync(dst->data, host, nbytes, cudaMemcpyHostToDevice, ctx_of(be)->stream));
    TRY(cuda_wait(ctx_of(be)));
    return PT_OK;
}

static pt_status cuda_download(pt_backend *be, const pt_tensor *src, void *host, size_t nbytes)
{
    CUDA_TRY(cudaMemcpyAsync(host, src->data, nbytes, cudaMemcpyDeviceToHost, ctx_of(be)->stream));
    TRY(cuda_wait(ctx_of(be)));
    return PT_OK;
}

static pt_status cuda_synchronize(pt_backend *be)
{
    TRY(cuda_wait(ctx_of(be)));
    return PT_OK;
}

/* ---- offloaded activations: pinned host memory, copies overlapping compute ---- */

static pt_status cuda_host_alloc(pt_backend *be, size_t bytes, void **p)
{
    (void)be;
    CUDA_TRY(cudaMallocHost(p, bytes ? bytes : 1));
    return PT_OK;
}

static void cuda_host_free(pt_backend *be, void *p)
{
    (void)be;
    cudaFreeHost(p);
}

/* A copy on the copy stream, after the compute stream's work so far. */
static pt_status copy_after_compute(cuda_ctx *c, void *dst, const void *src, size_t n, cudaMemcpyKind kind)
{
    CUDA_TRY(cudaEventRecord(c->copy_ready, c->stream));
    CUDA_TRY(cudaStreamWaitEvent(c->copy_stream, c->copy_ready, 0));
    CUDA_TRY(cudaMemcpyAsync(dst, src, n, kind, c->copy_stream));
    CUDA_TRY(cudaEventRecord(c->copy_done, c->copy_stream)); /* the copy stream runs in order: the last covers all */
    return PT_OK;
}

static pt_status cuda_to_host_async(pt_backend *be, void *host, const pt_tensor *src)
{
    return copy_after_compute(ctx_of(be), host, src->data, src->nbytes, cudaMemcpyDeviceToHost);
}

static pt_status cuda_from_host_async(pt_backend *be, pt_tensor *dst, const void *host)
{
    return copy_after_compute(ctx_of(be), dst->data, host, dst->nbytes, cudaMemcpyHostToDevice);
}

static pt_status cuda_copies_wait(pt_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    CUDA_TRY(cudaStreamWaitEvent(c->stream, c->copy_done, 0));
    return PT_OK;
}

static void cuda_close(pt_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    if (c) {
        cuda_comm_close(c); /* first: aborts a communicator in error, which ends any collective in flight */
        if (c->stream) cudaStreamSynchronize(c->stream);
        for (int i = 0; i < STAGE_COUNT; i++) cudaFree(c->stage[i]);
        cudaFree(c->scratch);
        cudaFree(c->partials);
        cudaFreeHost(c->host_sums);
        cuda_wcache_close(c);
        cuda_lt_close(c);
        if (c->blas) cublasDestroy(c->blas);
        if (c->copy_stream) {
            cudaStreamSynchronize(c->copy_stream);
            cudaStreamDestroy(c->copy_stream);
        }
        if (c->copy_ready) cudaEventDestroy(c->copy_ready);
        if (c->copy_done) cudaEventDestroy(c->copy_done);
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
    ops.embed = cuda_embed;
    ops.embed_bwd = cuda_embed_bwd;
    ops.rmsnorm_fwd = cuda_rmsnorm_fwd;
    ops.rmsnorm_bwd = cuda_rmsnorm_bwd;
    ops.add_rmsnorm = cuda_add_rmsnorm;
    ops.rope_fwd = cuda_rope_fwd;
    ops.rope_bwd = cuda_rope_bwd;
    ops.pos_scale = cuda_pos_scale;
    ops.attention_fwd = cuda_attention_fwd;
    ops.attention_bwd = cuda_attention_bwd;
    ops.swiglu_fwd = cuda_swiglu_fwd;
    ops.swiglu_bwd = cuda_swiglu_bwd;
    ops.geglu_fwd = cuda_geglu_fwd;
    ops.swiglu_clamp_fwd = cuda_swiglu_clamp_fwd;
    ops.geglu_bwd = cuda_geglu_bwd;
    ops.add_bias = cuda_add_bias;
    ops.moe_route = cuda_moe_route;
    ops.moe_gather = cuda_moe_gather;
    ops.moe_combine = cuda_moe_combine;
    ops.moe_combine_bwd = cuda_moe_combine_bwd;
    ops.moe_route_bwd = cuda_moe_route_bwd;
    ops.dora_norm = cuda_dora_norm;
    ops.dora_scale = cuda_dora_scale;
    ops.dora_mag_bwd = cuda_dora_mag_bwd;
    ops.conv1d_silu = cuda_conv1d_silu;
    ops.delta_gates = cuda_delta_gates;
    ops.delta_rule = cuda_delta_rule;
    ops.delta_chunk = cuda_delta_chunk;
    ops.sigmoid_mul = cuda_sigmoid_mul;
    ops.conv1d_silu_bwd = cuda_conv1d_silu_bwd;
    ops.delta_gates_bwd = cuda_delta_gates_bwd;
    ops.delta_rule_bwd = cuda_delta_rule_bwd;
    ops.delta_chunk_bwd = cuda_delta_chunk_bwd;
    ops.sigmoid_mul_bwd = cuda_sigmoid_mul_bwd;
    ops.softcap_fwd = cuda_softcap_fwd;
    ops.softcap_bwd = cuda_softcap_bwd;
    ops.add = cuda_add;
    ops.cross_entropy = cuda_cross_entropy;
    ops.adamw_step = cuda_adamw_step;
    ops.sum_squares = cuda_sum_squares;
    ops.scale = cuda_scale;
    ops.dropout = cuda_dropout;
    ops.allreduce_sum = cuda_allreduce_sum;
    ops.reduce_begin = cuda_reduce_begin;
    ops.reduce_poll = cuda_reduce_poll;
    ops.reduce_end = cuda_reduce_end;
    ops.copy = cuda_copy;
    ops.zero = cuda_zero;
    ops.host_alloc = cuda_host_alloc;
    ops.host_free = cuda_host_free;
    ops.to_host_async = cuda_to_host_async;
    ops.from_host_async = cuda_from_host_async;
    ops.copies_wait = cuda_copies_wait;
    ops.weight_cache = cuda_weight_cache;
    return ops;
}

static const pt_backend_ops cuda_ops = make_ops();

static pt_status cuda_setup(pt_backend *be, int device, const pt_backend_options *opts)
{
    cuda_ctx *c = (cuda_ctx *)calloc(1, sizeof *c);
    TRY_ALLOC(c);
    be->ctx = c;
    CUDA_TRY(cudaSetDevice(device));
    CUDA_TRY(cudaDeviceGetAttribute(&c->sm_count, cudaDevAttrMultiProcessorCount, device));
    CUDA_TRY(cudaDeviceGetAttribute(&c->smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    const char *kernels = getenv("PTRAIN_CUDA_KERNELS");
    c->reference = kernels && !strcmp(kernels, "reference");
    be->act = c->reference ? PT_F32 : PT_BF16; /* the reference keeps fp32 activations */
    CUDA_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->copy_stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&c->copy_ready, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&c->copy_done, cudaEventDisableTiming));
    /* keep what the pool has taken: freed activations are reused by the next micro-batch */
    CUDA_TRY(cudaDeviceGetDefaultMemPool(&c->pool, device));
    uint64_t keep = UINT64_MAX; /* cuuint64_t */
    CUDA_TRY(cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &keep));
    CUDA_TRY(cudaMallocHost((void **)&c->host_sums, 4 * sizeof(double)));
    CUBLAS_TRY(cublasCreate(&c->blas));
    CUBLAS_TRY(cublasSetStream(c->blas, c->stream));
    TRY(cuda_lt_open(c));
    return cuda_comm_open(c, opts);
}

/* The GPU this rank uses: the one Slurm or the user left visible when there is exactly one
 * (srun --gpus-per-task=1 sets CUDA_VISIBLE_DEVICES per task), else the node-local rank's. */
static int cuda_pick_device(int local_rank, int gpus)
{
    return gpus == 1 ? 0 : local_rank % gpus;
}

extern "C" pt_status cuda_backend_open(const pt_backend_options *opts, pt_backend **out)
{
    int gpus = cuda_device_count();
    if (gpus == 0) return ERR(PT_ERR_USER, "no GPU is visible to this process");
    pt_backend *be = (pt_backend *)calloc(1, sizeof *be);
    TRY_ALLOC(be);
    be->ops = &cuda_ops;
    be->device = cuda_pick_device(opts->local_rank, gpus);
    pt_status st = cuda_setup(be, be->device, opts);
    if (st != PT_OK) {
        cuda_close(be);
        return st;
    }
    *out = be;
    return PT_OK;
}
