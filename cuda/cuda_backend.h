/* cuda_backend.h — the CUDA backend's context, shared by its files: the compute stream and
 * cuBLAS handle (backend_cuda.cu), and the NCCL communicator with its own stream (comm.cu). */
#ifndef PTRAIN_CUDA_BACKEND_H
#define PTRAIN_CUDA_BACKEND_H

#include <cuda_bf16.h>

#include "cuda_check.h"
#include "ptrain/backend.h"

typedef struct {
    cudaStream_t stream;
    cublasHandle_t blas;
    __nv_bfloat16 *scratch; /* bf16 staging for the operands of one matmul */
    size_t scratch_elems;
    /* data parallel (world > 1): gradients are summed on comm_stream, after the compute stream's
     * work up to reduce_begin (event ready) and before its work after reduce_end (event done) */
    int world;
    ncclComm_t comm;
    cudaStream_t comm_stream;
    cudaEvent_t ready, done;
} cuda_ctx;

static inline cuda_ctx *ctx_of(pt_backend *be) { return (cuda_ctx *)be->ctx; }

pt_status cuda_comm_open(cuda_ctx *c, const pt_backend_options *opts);
void cuda_comm_close(cuda_ctx *c);
pt_status cuda_allreduce_sum(pt_backend *be, pt_tensor *t);
pt_status cuda_reduce_begin(pt_backend *be, pt_tensor *t);
pt_status cuda_reduce_poll(pt_backend *be);
pt_status cuda_reduce_end(pt_backend *be);
pt_status cuda_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src);

#endif
