/* matmul.c — CPU matmuls with OpenBLAS sgemm. A weight that is not fp32 (fp16, bf16, Q8_0, Q4_0,
 * Q4_1) is dequantized one tile of rows at a time into a scratch buffer that stays in cache, so
 * the base model is never held in full precision. */
#include <cblas.h>
#include <stdlib.h>

#include "cpu.h"
#include "ptrain/quant.h"

enum { TILE_ROWS = 128 };

/* Dequantize rows [r0, r0+rows) of w[N,K] into tile (rows x K fp32). */
static pt_status weight_tile(const pt_tensor *w, int64_t r0, int64_t rows, float *tile)
{
    int64_t k = w->shape[1];
    size_t row_bytes = dtype_size_bytes(w->dtype, k);
    const char *base = (const char *)w->data + (size_t)r0 * row_bytes;
    for (int64_t r = 0; r < rows; r++) TRY(quant_dequantize_row(w->dtype, base + r * row_bytes, tile + r * k, k));
    return PT_OK;
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
    if (dtype_size_bytes(w->dtype, k) == 0)
        return ERR(PT_ERR_INTERNAL, "weight rows of %lld values are not whole %s blocks", (long long)k,
                   dtype_name(w->dtype));
    float *tile = malloc(sizeof(float) * (size_t)(TILE_ROWS * k));
    TRY_ALLOC(tile);
    pt_status st = PT_OK;
    for (int64_t r0 = 0; r0 < n && st == PT_OK; r0 += TILE_ROWS) {
        int64_t rows = n - r0 < TILE_ROWS ? n - r0 : TILE_ROWS;
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

pt_status cpu_matmul(pt_backend *be, pt_tensor *y, const pt_tensor *x, const pt_tensor *w, float beta)
{
    (void)be;
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
