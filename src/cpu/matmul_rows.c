/* matmul_rows.c — y = x @ w^T for a handful of rows of x (3..16: GRPO's group decoded in step) and
 * a weight that is not fp32. sgemm would repack every dequantized tile for so few rows (its copy
 * cost as much as its arithmetic), so instead each thread dequantizes 4 weight rows at a time into
 * a buffer that stays in L1 and dots them with every row of x, 4 rows of x x 4 weight rows per pass
 * over k (16 accumulators of 16 lanes): the weight is read once, as its blocks, per call. */
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

enum { XROWS = 4, WROWS = 4, LANES = 16 };
typedef float lanes __attribute__((vector_size(LANES * sizeof(float))));

/* the lanes at p (any alignment) and the sum of a vector's lanes; macros, so no vector crosses a call */
#define LOAD(v, p) memcpy(&(v), (p), sizeof(lanes))
#define HSUM(out, v)                                                                                   \
    ((out) = (v)[0] + (v)[1] + (v)[2] + (v)[3] + (v)[4] + (v)[5] + (v)[6] + (v)[7] + (v)[8] + (v)[9] + \
             (v)[10] + (v)[11] + (v)[12] + (v)[13] + (v)[14] + (v)[15])

/* s[XROWS][WROWS]: the XROWS rows at x (row stride k) dotted with the WROWS rows of w (each k long);
 * multiply-adds fused where the processor has them. The 16 accumulators are named so they stay in
 * registers. */
#define ACC(i) a##i##0 = {0}, a##i##1 = {0}, a##i##2 = {0}, a##i##3 = {0}
#define FMA_ROW(i) LOAD(u, x[i] + p), a##i##0 += u * c0, a##i##1 += u * c1, a##i##2 += u * c2, a##i##3 += u * c3
#define STORE_ROW(i) HSUM(s[i * WROWS], a##i##0), HSUM(s[i * WROWS + 1], a##i##1), \
                     HSUM(s[i * WROWS + 2], a##i##2), HSUM(s[i * WROWS + 3], a##i##3)
__attribute__((optimize("fp-contract=fast"))) PT_CLONES static void dot_4x4(const float *const *x, const float *w,
                                                                            int64_t k, float *s)
{
    lanes ACC(0), ACC(1), ACC(2), ACC(3), u, c0, c1, c2, c3;
    int64_t p = 0;
    for (; p + LANES <= k; p += LANES) {
        LOAD(c0, w + p), LOAD(c1, w + k + p), LOAD(c2, w + 2 * k + p), LOAD(c3, w + 3 * k + p);
        FMA_ROW(0), FMA_ROW(1), FMA_ROW(2), FMA_ROW(3);
    }
    STORE_ROW(0), STORE_ROW(1), STORE_ROW(2), STORE_ROW(3);
    for (int i = 0; i < XROWS; i++)
        for (int r = 0; r < WROWS; r++)
            for (int64_t q = p; q < k; q++) s[i * WROWS + r] += x[i][q] * w[r * k + q];
}

/* the outputs of weight rows [j, j + rows) (rows <= WROWS, dequantized in buf) for every row of x */
static void rows_block(float *y, const float *x, const float *buf, int64_t m, int64_t n, int64_t k, int64_t j,
                       int64_t rows, float beta)
{
    for (int64_t i = 0; i < m; i += XROWS) {
        float s[XROWS * WROWS];
        const float *xr[XROWS];
        for (int q = 0; q < XROWS; q++) xr[q] = x + (i + q < m ? i + q : m - 1) * k; /* past m: repeat the last */
        dot_4x4(xr, buf, k, s);
        for (int64_t q = 0; q < XROWS && i + q < m; q++)
            for (int64_t r = 0; r < rows; r++) {
                float *o = y + (i + q) * n + j + r;
                *o = beta == 0.0f ? s[q * WROWS + r] : s[q * WROWS + r] + beta * *o;
            }
    }
}

pt_status cpu_matmul_rows(float *y, const float *x, const pt_tensor *w, int64_t m, float beta)
{
    int64_t n = w->shape[0], k = w->shape[1], blocks = (n + WROWS - 1) / WROWS;
    pt_status st = PT_OK;
#pragma omp parallel
    {
        float *buf = calloc((size_t)(WROWS * k), sizeof(float)); /* a short last block's outputs are never written */
        if (!buf) {
#pragma omp critical(matmul_rows_status)
            st = ERR(PT_ERR_NOMEM, "out of memory for a matmul of %lld rows", (long long)m);
        }
#pragma omp for schedule(static)
        for (int64_t b = 0; b < blocks; b++) {
            int64_t j = b * WROWS, rows = n - j < WROWS ? n - j : WROWS;
            if (!buf) continue;
            pt_status s = cpu_dequantize_rows(w, j, rows, buf);
            if (s != PT_OK) {
#pragma omp critical(matmul_rows_status)
                st = s;
                continue;
            }
            rows_block(y, x, buf, m, n, k, j, rows, beta);
        }
        free(buf);
    }
    return st;
}
