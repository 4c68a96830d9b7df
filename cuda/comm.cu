/* comm.cu — the CUDA backend's communication: gradient sums over ranks with NCCL on a stream of
 * their own. reduce_begin orders the sum after the compute work queued so far (an event), so the
 * backward pass of earlier layers keeps running while a bucket is on the wire; reduce_end makes
 * the compute stream wait for every sum started. The communicator comes from rank 0's unique id,
 * which MPI broadcast (dist_share_nccl_id). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <string.h>

#include "cuda_backend.h"

pt_status cuda_comm_open(cuda_ctx *c, const pt_backend_options *opts)
{
    c->world = opts->world > 1 ? opts->world : 1;
    if (c->world == 1) return PT_OK;
    if (!opts->nccl_id)
        return ERR(PT_ERR_INTERNAL, "the cuda backend under %d ranks needs the NCCL unique id", c->world);
    ncclUniqueId id;
    memcpy(&id, opts->nccl_id, sizeof id);
    NCCL_TRY(ncclCommInitRank(&c->comm, c->world, id, opts->rank));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->comm_stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    return PT_OK;
}

void cuda_comm_close(cuda_ctx *c)
{
    if (c->comm) ncclCommDestroy(c->comm);
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->done) cudaEventDestroy(c->done);
    if (c->comm_stream) cudaStreamDestroy(c->comm_stream);
}

pt_status cuda_reduce_begin(pt_backend *be, pt_tensor *t)
{
    cuda_ctx *c = ctx_of(be);
    if (c->world == 1) return PT_OK;
    CUDA_TRY(cudaEventRecord(c->ready, c->stream));
    CUDA_TRY(cudaStreamWaitEvent(c->comm_stream, c->ready, 0));
    NCCL_TRY(ncclAllReduce(t->data, t->data, (size_t)tensor_numel(t), ncclFloat, ncclSum, c->comm, c->comm_stream));
    return PT_OK;
}

pt_status cuda_reduce_poll(pt_backend *be)
{
    (void)be; /* NCCL progresses on its own */
    return PT_OK;
}

pt_status cuda_reduce_end(pt_backend *be)
{
    cuda_ctx *c = ctx_of(be);
    if (c->world == 1) return PT_OK;
    CUDA_TRY(cudaEventRecord(c->done, c->comm_stream));
    CUDA_TRY(cudaStreamWaitEvent(c->stream, c->done, 0));
    return PT_OK;
}

pt_status cuda_allreduce_sum(pt_backend *be, pt_tensor *t)
{
    TRY(cuda_reduce_begin(be, t));
    TRY(cuda_reduce_end(be));
    CUDA_TRY(cudaStreamSynchronize(ctx_of(be)->stream));
    return PT_OK;
}

pt_status cuda_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src)
{
    CUDA_TRY(cudaMemcpyAsync(dst->data, src->data, src->nbytes, cudaMemcpyDeviceToDevice, ctx_of(be)->stream));
    return PT_OK;
}
