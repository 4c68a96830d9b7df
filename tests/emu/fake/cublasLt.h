/* cublasLt.h (fake) — the part of cuBLASLt cuda/lt.cu calls, for the CPU SIMT emulator (tests/emu):
 * descriptors and layouts are host structs that keep what was set (an attribute set with the wrong
 * size fails, as in cuBLASLt), the heuristic honours the preference (workspace, reduction schemes,
 * alignment) and stamps each algorithm with the problem it was chosen for, and cublasLtMatmul
 * checks its arguments (types, layouts against the transposes, leading dimensions, pointers against
 * the algorithm's alignment, the workspace) before OpenBLAS sgemm on the bf16 values widened
 * exactly to fp32 (bf16 products, fp32 accumulation). It also checks one thing of ptrain's design
 * rather than of the API: the heuristic is asked once per problem and handle (emu.cc). */
#ifndef EMU_CUBLASLT_H
#define EMU_CUBLASLT_H
#include "cublas_v2.h"

typedef struct emu_lt_handle_s *cublasLtHandle_t;
typedef struct emu_lt_desc_s *cublasLtMatmulDesc_t;
typedef struct emu_lt_layout_s *cublasLtMatrixLayout_t;
typedef struct emu_lt_pref_s *cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;

typedef enum { CUBLASLT_MATMUL_DESC_TRANSA = 3, CUBLASLT_MATMUL_DESC_TRANSB = 4 } cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;
typedef enum {
    CUBLASLT_REDUCTION_SCHEME_NONE = 0,
    CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
    CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
    CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
    CUBLASLT_REDUCTION_SCHEME_MASK = 0x7
} cublasLtReductionScheme_t;
typedef enum { CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3 } cublasLtMatmulAlgoConfigAttributes_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t comp, cudaDataType scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t p, int want,
                                              cublasLtMatmulHeuristicResult_t out[], int *got);
cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void *buf, size_t size,
                                                    size_t *written);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes,
                              cudaStream_t s);
#endif
