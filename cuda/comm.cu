/* comm.cu — the CUDA backend's communication: gradient sums over ranks with NCCL on a stream of
 * their own. reduce_begin orders the sum after the compute work queued so far (an event), so the
 * backward pass of earlier layers keeps running while a bucket is on the wire; reduce_end makes
 * the compute stream wait for every sum started. The communicator comes from rank 0's unique id,
 * which MPI broadcast (dist_share_nccl_id).
 *
 * No rank may hang on a peer that died or failed: the communicator is non-blocking, and every
 * host-side wait on the GPU (cuda_wait) polls the stream and NCCL's asynchronous error; on an
 * error the communicator is aborted, which ends the collectives in flight, and the wait returns
 * the error, which the training loop turns into MPI_Abort of the whole job (dist_fail_fast). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <string.h>
#include <time.h>

#include "cuda_backend.h"

/* Wait until NCCL has finished a call on a non-blocking communicator (ncclInProgress). */
static pt_status comm_settle(cuda_ctx *c, const char *what)
{
    ncclResult_t r;
    do NCCL_TRY(ncclCommGetAsyncError(c->comm, &r));
    while (r == ncclInProgress);
    if (r != ncclSuccess) {
        ncclCommAbort(c->comm);
        c->comm = NULL;
        return ERR(PT_ERR_INTERNAL, "%s: NCCL reported %s; the communicator was aborted", what, ncclGetErrorString(r));
    }
    return PT_OK;
}

pt_status cuda_comm_open(cuda_ctx *c, const pt_backend_options *opts)
{
    c->world = opts->world > 1 ? opts->world : 1;
    if (c->world == 1) return PT_OK;
    if (!opts->nccl_id)
        return ERR(PT_ERR_INTERNAL, "the cuda backend under %d ranks needs the NCCL unique id", c->world);
    ncclUniqueId id;
    memcpy(&id, opts->nccl_id, sizeof id);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(&c->comm, c->world, id, opts->rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        return ERR(PT_ERR_INTERNAL, "ncclCommInitRankConfig (rank %d of %d): %s", opts->rank, c->world,
                   ncclGetErrorString(r));
    TRY(comm_settle(c, "creating the NCCL communicator"));
    CUDA_TRY(cudaStreamCreateWithFlags(&c->comm_stream, cudaStreamNonBlocking));
    CUDA_TRY(cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming));
    CUDA_TRY(cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming));
    return PT_OK;
}

void cuda_comm_close(cuda_ctx *c)
{
    if (c->comm) {
        ncclResult_t r = ncclSuccess;
        ncclCommGetAsyncError(c->comm, &r);
        if (r == ncclSuccess) ncclCommDestroy(c->comm);
        else ncclCommAbort(c->comm);
    }
    if (c->ready) cudaEventDestroy(c->ready);
    if (c->done) cudaEventDestroy(c->done);
    if (c->comm_stream) cudaStreamDestroy(c->comm_stream);
}

pt_status cuda_wait(cuda_ctx *c)
{
    if (c->world == 1 || !c->comm) {
        CUDA_TRY(cudaStreamSynchronize(c->stream));
        return PT_OK;
    }
    for (;;) {
        cudaError_t e = cudaStreamQuery(c->stream);
        if (e == cudaSuccess) return PT_OK;
        if (e != cudaErrorNotReady) CUDA_TRY(e);
        TRY(comm_settle(c, "waiting for the GPU"));
        struct timespec nap = {0, 50000}; /* 50 us */
        nanosleep(&nap, NULL);
    }
}

pt_status cuda_reduce_begin(pt_backend *be, pt_tensor *t)
{
    cuda_ctx *c = ctx_of(be);
    if (c->world == 1) return PT_OK;
    if (!c->comm) return ERR(PT_ERR_INTERNAL, "the NCCL communicator was aborted after an earlier error");
    CUDA_TRY(cudaEventRecord(c->ready, c->stream));
    CUDA_TRY(cudaStreamWaitEvent(c->comm_stream, c->ready, 0));
    ncclResult_t r = ncclAllReduce(t->data, t->data, (size_t)tensor_numel(t), ncclFloat, ncclSum, c->comm, c->comm_stream);
    if (r != ncclSuccess && r != ncclInProgress) NCCL_TRY(r);
    return comm_settle(c, "starting a gradient sum");
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
    return cuda_wait(ctx_of(be));
}

pt_status cuda_zero(pt_backend *be, pt_tensor *t)
{
    if (t->nbytes) CUDA_TRY(cudaMemsetAsync(t->data, 0, t->nbytes, ctx_of(be)->stream));
    return PT_OK;
}

pt_status cuda_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src)
{
    CUDA_TRY(cudaMemcpyAsync(dst->data, src->data, src->nbytes, cudaMemcpyDeviceToDevice, ctx_of(be)->stream));
    return PT_OK;
}
