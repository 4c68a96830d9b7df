/* cublas_v2.h (fake) — the two GEMMs cuda/matmul.cu calls, for the CPU SIMT emulator (tests/emu):
 * cuBLAS's argument checks, then OpenBLAS sgemm on fp32 copies (bf16 operands widened exactly),
 * so bf16 GEMMs are bf16 products with fp32 accumulation, as CUBLAS_COMPUTE_32F is; and the
 * workspace cuda/lt.cu gives the handle (checked for cuBLAS's 256-byte alignment). */
#ifndef EMU_CUBLAS_V2_H
#define EMU_CUBLAS_V2_H
#include "cuda_runtime.h"
typedef struct emu_cublas_s *cublasHandle_t;
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_INVALID_VALUE = 7,
               CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *workspace, size_t bytes);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                            cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                            cublasComputeType_t comp, cublasGemmAlgo_t algo);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc);
#endif
