/* moe_matmul.c — the grouped expert products on the CPU (backend_moe_matmul, backend_moe_matmul_bwd_input): the
 * experts spread over the threads, each expert's weight dequantized once into its thread's buffer (the tile reused
 * for all the expert's rows) and multiplied with all its rows in one sgemm, which OpenBLAS runs single-threaded
 * inside a parallel region. One parallel region per grouped product instead of one or more per expert: with 64
 * experts of a few dozen rows each, per-expert products spend more in thread start-ups and barriers than in
 * arithmetic on 2 cores, and far more on a loaded machine, where every barrier waits for a descheduled thread.
 * Experts with no rows cost nothing; each expert's result is one thread's sgemm, the same with any thread count.
 * The weight gradients of the experts' LoRA factors (moe_lora.c) are grouped the same way. */
#include <cblas.h>
#include <stdlib.h>

#include "cpu.h"

/* The most weights any expert with rows holds (its dequantization buffer); -1 when a weight cannot be read. */
static int64_t largest(const pt_tensor *w, int stride, const int64_t *offset, int n_experts)
{
    int64_t most = 0;
    float probe[1];
    for (int e = 0; e < n_experts; e++) {
        const pt_tensor *we = &w[(size_t)e * (size_t)stride];
        if (offset[e + 1] == offset[e] || we->dtype == PT_F32) continue;
        if (we->shape[1] < 1 || cpu_dequantize_rows(we, 0, 0, probe) != PT_OK) return -1;
        most = tensor_numel(we) > most ? tensor_numel(we) : most;
    }
    return most;
}

/* Expert e's product: out = in @ W (bwd: in @ W, W [N, K] read as [N, K]; else in @ Wᵀ) + beta out. */
static void expert_gemm(float *out, const float *in, const float *wf, int64_t rows, int64_t n, int64_t k, float beta,
                        bool bwd)
{
    if (bwd) /* dx [rows, K] = dy [rows, N] @ W [N, K] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)rows, (int)k, (int)n, 1.0f, in, (int)n, wf,
                    (int)k, beta, out, (int)k);
    else /* y [rows, N] = x [rows, K] @ Wᵀ */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)rows, (int)n, (int)k, 1.0f, in, (int)k, wf,
                    (int)k, beta, out, (int)n);
}

static pt_status grouped(pt_tensor *out, const pt_tensor *in, const pt_tensor *w, int stride, const int64_t *offset,
                         int n_experts, float beta, bool bwd)
{
    int64_t most = largest(w, stride, offset, n_experts);
    if (most < 0) return ERR(PT_ERR_INTERNAL, "moe_matmul: an expert's weight cannot be dequantized");
    int failed = 0;
#pragma omp parallel
    {
        float *buf = most > 0 ? malloc(sizeof(float) * (size_t)most) : NULL;
        if (most > 0 && !buf) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(dynamic, 1)
        for (int e = 0; e < n_experts; e++) {
            int64_t rows = offset[e + 1] - offset[e];
            const pt_tensor *we = &w[(size_t)e * (size_t)stride];
            if (rows == 0 || (we->dtype != PT_F32 && !buf)) continue;
            if (we->dtype != PT_F32) cpu_dequantize_rows(we, 0, we->shape[0], buf); /* readable: largest() */
            const float *wf = we->dtype == PT_F32 ? (const float *)we->data : buf;
            expert_gemm((float *)out->data + offset[e] * out->shape[1], (const float *)in->data + offset[e] * in->shape[1],
                        wf, rows, we->shape[0], we->shape[1], beta, bwd);
        }
        free(buf);
    }
    return failed ? ERR(PT_ERR_NOMEM, "moe_matmul: out of memory for an expert's weight") : PT_OK;
}

pt_status cpu_moe_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, int stride,
                         const int64_t *offset, int n_experts, float beta)
{
    (void)be;
    return grouped(y, x, w, stride, offset, n_experts, beta, false);
}

pt_status cpu_moe_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w, int stride,
                                   const int64_t *offset, int n_experts, float beta)
{
    (void)be;
    return grouped(dx, dy, w, stride, offset, n_experts, beta, true);
}

pt_status cpu_moe_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                    const int64_t *offset, int n_experts, float beta)
{
    (void)be;
#pragma omp parallel for schedule(dynamic, 1)
    for (int e = 0; e < n_experts; e++) { /* dw[e] [N, K] = dy[rows]ᵀ [N, rows] @ x[rows] [rows, K] */
        int64_t rows = offset[e + 1] - offset[e], n = dw[e].shape[0], k = dw[e].shape[1];
        if (rows == 0) continue;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)k, (int)rows, 1.0f,
                    (const float *)dy->data + offset[e] * n, (int)n, (const float *)x->data + offset[e] * k, (int)k,
                    beta, dw[e].data, (int)k);
    }
    return PT_OK;
}
