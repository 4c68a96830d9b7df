/* lt.cu — the CUDA backend's GEMMs through cuBLASLt (issue 26, point 2): bf16 A and B, fp32 or bf16 C,
 * fp32 accumulation, one workspace of PT_CUDA_GEMM_WORKSPACE_BYTES taken at open (cuBLAS gets it
 * too), and one plan per GEMM shape, made at the shape's first call and kept until close: its
 * descriptor, layouts and algorithm. The key is the shape (m, n, k, transposes, leading
 * dimensions) and C's type (bf16 activations, or fp32), and every plan is chosen for 16-byte-aligned operands
 * (cuda_lt_aligned checks each call), so no plan depends on where a buffer lies. A run repeats
 * exactly: cuBLAS's results are bitwise reproducible on one GPU model with one stream and the
 * caller's workspace, the algorithm of a shape is fixed, and only algorithms whose split-K sums
 * have a fixed order are taken (reduction scheme NONE or INPLACE: asked of the heuristic, and
 * checked on the algorithm where it answers). docs/cuda-backend.md says more. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <cublasLt.h>
#include <stdint.h>
#include <stdlib.h>

#include "cuda_backend.h"

enum { LT_ALIGN = 16, LT_CANDIDATES = 8 };

typedef struct {
    int64_t m, n, k, lda, ldb, ldc;
    bool ta, tb, c_bf16;
} lt_key;

typedef struct {
    lt_key key;
    cublasLtMatmulDesc_t desc;
    cublasLtMatrixLayout_t a, b, c; /* in cuBLASLt's column-major terms (plan_layouts) */
    cublasLtMatmulAlgo_t algo;
} lt_plan;

struct cuda_lt {
    cublasLtHandle_t handle;
    void *workspace; /* PT_CUDA_GEMM_WORKSPACE_BYTES from the pool; cuBLAS's too (cublasSetWorkspace) */
    lt_plan *plans;
    int n_plans, cap;
};

pt_status cuda_lt_open(cuda_ctx *c)
{
    c->lt = (struct cuda_lt *)calloc(1, sizeof *c->lt);
    TRY_ALLOC(c->lt);
    CUBLAS_TRY(cublasLtCreate(&c->lt->handle));
    CUDA_TRY(cudaMallocAsync(&c->lt->workspace, PT_CUDA_GEMM_WORKSPACE_BYTES, c->stream));
    /* after cublasSetStream, which resets a handle's workspace: the reference path's cublasGemmEx
     * and cublasSgemm use this buffer too (the same stream orders them), not one of their own */
    CUBLAS_TRY(cublasSetWorkspace(c->blas, c->lt->workspace, PT_CUDA_GEMM_WORKSPACE_BYTES));
    return PT_OK;
}

static void plan_destroy(lt_plan *p)
{
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->c) cublasLtMatrixLayoutDestroy(p->c);
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
}

void cuda_lt_close(cuda_ctx *c)
{
    struct cuda_lt *lt = c->lt;
    if (!lt) return;
    for (int i = 0; i < lt->n_plans; i++) plan_destroy(&lt->plans[i]);
    free(lt->plans);
    cudaFree(lt->workspace); /* the caller synchronized the stream */
    if (lt->handle) cublasLtDestroy(lt->handle);
    free(lt);
    c->lt = NULL;
}

static bool aligned_ptr(const void *p) { return (uintptr_t)p % LT_ALIGN == 0; }

bool cuda_lt_aligned(const cuda_gemm *g)
{
    const int64_t bf16_per = LT_ALIGN / 2, f32_per = LT_ALIGN / 4;
    return aligned_ptr(g->a) && aligned_ptr(g->b) && aligned_ptr(g->c) && g->lda % bf16_per == 0 &&
           g->ldb % bf16_per == 0 && g->ldc % (g->c_bf16 ? bf16_per : f32_per) == 0;
}

static bool key_equal(const lt_key *x, const lt_key *y)
{
    return x->m == y->m && x->n == y->n && x->k == y->k && x->lda == y->lda && x->ldb == y->ldb &&
           x->ldc == y->ldc && x->ta == y->ta && x->tb == y->tb && x->c_bf16 == y->c_bf16;
}

/* Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ: cuBLASLt's A is our B (transposed
 * when tb), its B our A (when ta), its C our C as an n x m column-major matrix. */
static pt_status plan_layouts(lt_plan *p)
{
    const lt_key *k = &p->key;
    const int32_t op_a = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CUBLAS_TRY(cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof op_a));
    CUBLAS_TRY(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof op_b));
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_16BF, (uint64_t)(k->tb ? k->k : k->n),
                                          (uint64_t)(k->tb ? k->n : k->k), k->ldb));
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_16BF, (uint64_t)(k->ta ? k->m : k->k),
                                          (uint64_t)(k->ta ? k->k : k->m), k->lda));
    CUBLAS_TRY(cublasLtMatrixLayoutCreate(&p->c, k->c_bf16 ? CUDA_R_16BF : CUDA_R_32F, (uint64_t)k->n, (uint64_t)k->m,
                                          k->ldc));
    return PT_OK;
}

/* What the heuristic may return: algorithms within the workspace, for 16-byte-aligned operands,
 * whose reductions have a fixed order. */
static pt_status pref_fill(cublasLtMatmulPreference_t pref)
{
    const uint64_t ws = PT_CUDA_GEMM_WORKSPACE_BYTES;
    const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_INPLACE, align = LT_ALIGN;
    const cublasLtMatmulPreferenceAttributes_t aligns[] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                    sizeof schemes));
    for (size_t i = 0; i < sizeof aligns / sizeof aligns[0]; i++)
        CUBLAS_TRY(cublasLtMatmulPreferenceSetAttribute(pref, aligns[i], &align, sizeof align));
    return PT_OK;
}

/* Whether the algorithm's split-K sums have a fixed order, as the preference asked. An algorithm
 * that does not answer the question is taken on the preference's word: refusing it could leave a
 * shape with no algorithm for want of an answer, not for want of determinism. */
static bool fixed_order(const cublasLtMatmulAlgo_t *algo)
{
    uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_NONE;
    size_t written = 0;
    if (cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme, sizeof scheme,
                                             &written) != CUBLAS_STATUS_SUCCESS || written != sizeof scheme)
        return true;
    return scheme == CUBLASLT_REDUCTION_SCHEME_NONE || scheme == CUBLASLT_REDUCTION_SCHEME_INPLACE;
}

/* The heuristic's first (fastest by its estimate) algorithm that passes fixed_order. */
static pt_status plan_choose(struct cuda_lt *lt, lt_plan *p)
{
    cublasLtMatmulPreference_t pref;
    CUBLAS_TRY(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t found[LT_CANDIDATES];
    int n = 0;
    pt_status st = pref_fill(pref);
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    if (st == PT_OK)
        s = cublasLtMatmulAlgoGetHeuristic(lt->handle, p->desc, p->a, p->b, p->c, p->c, pref, LT_CANDIDATES, found, &n);
    cublasLtMatmulPreferenceDestroy(pref);
    TRY(st);
    if (s != CUBLAS_STATUS_SUCCESS)
        return ERR(PT_ERR_INTERNAL, "cublasLtMatmulAlgoGetHeuristic: cuBLAS status %d", (int)s);
    for (int i = 0; i < n; i++)
        if (found[i].state == CUBLAS_STATUS_SUCCESS && found[i].workspaceSize <= PT_CUDA_GEMM_WORKSPACE_BYTES &&
            fixed_order(&found[i].algo)) {
            p->algo = found[i].algo;
            return PT_OK;
        }
    const lt_key *k = &p->key;
    return ERR(PT_ERR_UNSUPPORTED, "cuBLASLt has no deterministic bf16 algorithm for m %lld n %lld k %lld (of %d)",
               (long long)k->m, (long long)k->n, (long long)k->k, n);
}

/* The plan of g's shape: found, or made and added. */
static pt_status plan_of(struct cuda_lt *lt, const cuda_gemm *g, const lt_plan **out)
{
    lt_key key = {g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->ta, g->tb, g->c_bf16};
    for (int i = 0; i < lt->n_plans; i++)
        if (key_equal(&lt->plans[i].key, &key)) {
            *out = &lt->plans[i];
            return PT_OK;
        }
    if (lt->n_plans == lt->cap) {
        int cap = lt->cap ? 2 * lt->cap : 32;
        lt_plan *grown = (lt_plan *)realloc(lt->plans, sizeof *grown * (size_t)cap);
        TRY_ALLOC(grown);
        lt->plans = grown;
        lt->cap = cap;
    }
    lt_plan p = {};
    p.key = key;
    pt_status st = plan_layouts(&p);
    if (st == PT_OK) st = plan_choose(lt, &p);
    if (st != PT_OK) {
        plan_destroy(&p);
        return st;
    }
    lt->plans[lt->n_plans] = p;
    *out = &lt->plans[lt->n_plans++];
    return PT_OK;
}

pt_status cuda_lt_matmul(cuda_ctx *c, const cuda_gemm *g)
{
    if (g->m == 0 || g->n == 0) return PT_OK;
    if (!cuda_lt_aligned(g)) return ERR(PT_ERR_INTERNAL, "cuda_lt_matmul: operands not 16-byte aligned");
    const lt_plan *p = NULL;
    TRY(plan_of(c->lt, g, &p));
    const float alpha = 1.0f;
    CUBLAS_TRY(cublasLtMatmul(c->lt->handle, p->desc, &alpha, g->b, p->a, g->a, p->b, &g->beta, g->c, p->c, g->c, p->c,
                              &p->algo, c->lt->workspace, PT_CUDA_GEMM_WORKSPACE_BYTES, c->stream));
    return PT_OK;
}
