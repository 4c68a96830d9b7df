/* matmul.c — CPU matmuls with OpenBLAS sgemm. A weight that is not fp32 (fp16, bf16, GGUF blocks,
 * NF4) is never held in full precision: for many rows of activations (prefill, training) it is
 * dequantized one tile of rows at a time (in parallel) into a scratch buffer that stays in cache
 * and multiplied with sgemm; for one or two rows (generation of one sequence) each thread takes dot
 * products straight from the weight's blocks; for 3 to 16 rows (GRPO's group decoded in step)
 * cpu_matmul_rows (matmul_rows.c) dots 4 dequantized weight rows with every row at once. */
#include <cblas.h>
#include <stdlib.h>

#include "cpu.h"
#include "ptrain/quant_blocks.h"

/* A tile holds about TILE_FLOATS weights: large enough that sgemm's repacking of the activations
 * (once per call) stays cheap, small enough to stay in the last-level cache. */
enum { TILE_FLOATS = 1 << 20, SMALL_M = 2, HANDFUL_M = 16 };

static int64_t tile_rows(int64_t k) { return k >= TILE_FLOATS ? 1 : TILE_FLOATS / k; }

/* Dequantize rows [r0, r0+rows) of w[N,K] into tile (rows x K fp32), rows split over threads. */
static pt_status weight_tile(const pt_tensor *w, int64_t r0, int64_t rows, float *tile)
{
    pt_status st = PT_OK;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        pt_status s = cpu_dequantize_rows(w, r0 + r, 1, tile + r * w->shape[1]);
        if (s != PT_OK) st = s;
    }
    return st;
}

/* Call fn(tile, r0, rows) for each tile of w's rows; fp32 weights are passed as they are. */
typedef void (*tile_fn)(const float *tile, int64_t r0, int64_t rows, void *arg);

static pt_status for_each_tile(const pt_tensor *w, tile_fn fn, void *arg)
{
    int64_t n = w->shape[0], k = w->shape[1];
    if (w->dtype == PT_F32) {
        fn(w->data, 0, n, arg);
        return PT_OK;
    }
    int64_t per_tile = tile_rows(k) < n ? tile_rows(k) : n;
    float *tile = malloc(sizeof(float) * (size_t)(per_tile * k));
    TRY_ALLOC(tile);
    pt_status st = PT_OK;
    for (int64_t r0 = 0; r0 < n && st == PT_OK; r0 += per_tile) {
        int64_t rows = n - r0 < per_tile ? n - r0 : per_tile;
        st = weight_tile(w, r0, rows, tile);
        if (st == PT_OK) fn(tile, r0, rows, arg);
    }
    free(tile);
    return st;
}

typedef struct {
    float *out;
    const float *in;
    int64_t m, n, k;
    float beta;
} gemm_args;

/* y[:, r0:r0+rows] = x @ tile^T + beta * y[:, r0:r0+rows] */
static void fwd_tile(const float *tile, int64_t r0, int64_t rows, void *arg)
{
    gemm_args *a = arg;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)a->m, (int)rows, (int)a->k, 1.0f, a->in,
                (int)a->k, tile, (int)a->k, a->beta, a->out + r0, (int)a->n);
}

/* y = x @ w^T for a few rows of x, dotting straight from the blocks. */
static pt_status matmul_few_rows_fused(float *y, const float *x, const pt_tensor *w, int64_t m, float beta)
{
    int64_t n = w->shape[0], k = w->shape[1];
    size_t row_bytes = dtype_size_bytes(w->dtype, k);
    float *xsum = malloc(sizeof(float) * (size_t)(m * (k / QK) + 1));
    TRY_ALLOC(xsum);
    for (int64_t i = 0; i < m; i++) cpu_block_sums(x + i * k, k, xsum + i * (k / QK));
#pragma omp parallel for schedule(static)
    for (int64_t j = 0; j < n; j++) {
        const char *row = (const char *)w->data + (size_t)j * row_bytes;
        for (int64_t i = 0; i < m; i++) {
            float acc = cpu_dot_row(w->dtype, row, x + i * k, xsum + i * (k / QK), k);
            y[i * n + j] = beta == 0.0f ? acc : acc + beta * y[i * n + j];
        }
    }
    free(xsum);
    return PT_OK;
}

/* y = x @ w^T for a few rows of x: one dequantized weight row at a time per thread. */
static pt_status matmul_few_rows(float *y, const float *x, const pt_tensor *w, int64_t m, float beta)
{
    int64_t n = w->shape[0], k = w->shape[1];
    if (cpu_dot_supported(w->dtype) && k % QK == 0) return matmul_few_rows_fused(y, x, w, m, beta);
    float *probe = malloc(sizeof(float) * (size_t)k);
    TRY_ALLOC(probe);
    pt_status st = cpu_dequantize_rows(w, 0, 1, probe); /* an unreadable dtype fails here, not per row */
    free(probe);
    TRY(st);
#pragma omp parallel
    {
        float *row = malloc(sizeof(float) * (size_t)k);
        if (!row) st = ERR(PT_ERR_NOMEM, "out of memory");
#pragma omp for schedule(static)
        for (int64_t j = 0; j < n; j++) {
            if (!row || cpu_dequantize_rows(w, j, 1, row) != PT_OK) continue;
            for (int64_t i = 0; i < m; i++) {
                const float *xi = x + i * k;
                float acc = 0;
#pragma omp simd reduction(+ : acc)
                for (int64_t p = 0; p < k; p++) acc += xi[p] * row[p];
                y[i * n + j] = beta == 0.0f ? acc : acc + beta * y[i * n + j];
            }
        }
        free(row);
    }
    return st;
}

pt_status cpu_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta)
{
    (void)be;
    if (x->shape[0] <= SMALL_M && w->dtype != PT_F32) return matmul_few_rows(y->data, x->data, w, x->shape[0], beta);
    if (x->shape[0] <= HANDFUL_M && w->dtype != PT_F32) return cpu_matmul_rows(y->data, x->data, w, x->shape[0], beta);
    gemm_args a = {y->data, x->data, x->shape[0], w->shape[0], x->shape[1], beta};
    return for_each_tile(w, fwd_tile, &a);
}

/* dx += dy[:, r0:r0+rows] @ tile (the first tile applies beta, later tiles accumulate) */
static void bwd_input_tile(const float *tile, int64_t r0, int64_t rows, void *arg)
{
    gemm_args *a = arg; /* out = dx[M,K], in = dy[M,N] */
    float beta = r0 == 0 ? a->beta : 1.0f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)a->m, (int)a->k, (int)rows, 1.0f,
                a->in + r0, (int)a->n, tile, (int)a->k, beta, a->out, (int)a->k);
}

pt_status cpu_matmul_bwd_input(pt_backend *be, pt_tensor *dx, const pt_tensor *dy, const pt_tensor *w,
                               float beta)
{
    (void)be;
    gemm_args a = {dx->data, dy->data, dy->shape[0], w->shape[0], w->shape[1], beta};
    return for_each_tile(w, bwd_input_tile, &a);
}

pt_status cpu_matmul_bwd_weight(pt_backend *be, pt_tensor *dw, const pt_tensor *dy, const pt_tensor *x,
                                float beta)
{
    (void)be;
    int64_t m = x->shape[0], k = x->shape[1], n = dw->shape[0];
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)k, (int)m, 1.0f, dy->data, (int)n,
                x->data, (int)k, beta, dw->data, (int)k);
    return PT_OK;
}
