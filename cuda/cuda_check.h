/* cuda_check.h — check macros for the CUDA backend: a failing CUDA, cuBLAS or NCCL call becomes a
 * pt_status with the call, the library's own error text and this file:line. */
#ifndef PTRAIN_CUDA_CHECK_H
#define PTRAIN_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include "ptrain/error.h"

#define CUDA_TRY(call)                                                                             \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return ERR(e_ == cudaErrorMemoryAllocation ? PT_ERR_NOMEM : PT_ERR_INTERNAL,          \
                       "%s: %s", #call, cudaGetErrorString(e_));                                   \
    } while (0)

#define CUBLAS_TRY(call)                                                                           \
    do {                                                                                           \
        cublasStatus_t s_ = (call);                                                                \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                           \
            return ERR(PT_ERR_INTERNAL, "%s: cuBLAS status %d", #call, (int)s_);                   \
    } while (0)

#define NCCL_TRY(call)                                                                             \
    do {                                                                                           \
        ncclResult_t r_ = (call);                                                                  \
        if (r_ != ncclSuccess) return ERR(PT_ERR_INTERNAL, "%s: %s", #call, ncclGetErrorString(r_)); \
    } while (0)

#endif
