/* dora.c — the CPU backend's DoRA ops (weight-decomposed LoRA, as PEFT computes it): the norm of
 * each output row of W + s·B·A (the base weight dequantized row by row, the low-rank product added
 * in fp32, the sum of squares in double), the per-output-column scale y *= m / ‖row‖, and the
 * magnitude gradient dm[n] += Σ_rows dy·z / ‖row‖. */
#include <math.h>
#include <stdlib.h>

#include "cpu.h"

enum { NORM_ROWS = 16 }; /* weight rows dequantized at once by one thread */

pt_status cpu_dora_norm(pt_backend *be, pt_tensor *wnorm, const pt_tensor *w, const pt_tensor *a,
                        const pt_tensor *b, float s)
{
    (void)be;
    int64_t n = w->shape[0], k = w->shape[1], r = a->shape[0];
    const float *as = a->data, *bs = b->data;
    float *out = wnorm->data;
    int bad = 0;
#pragma omp parallel
    {
        float *rows = malloc(sizeof(float) * (size_t)(NORM_ROWS * k));
        if (!rows) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r0 = 0; r0 < n; r0 += NORM_ROWS) {
            int64_t cnt = n - r0 < NORM_ROWS ? n - r0 : NORM_ROWS;
            if (!rows || cpu_dequantize_rows(w, r0, cnt, rows) != PT_OK) {
#pragma omp atomic write
                bad = 1;
                continue;
            }
            for (int64_t i = 0; i < cnt; i++) {
                float *row = rows + i * k;
                const float *brow = bs + (r0 + i) * r;
                double ss = 0;
                for (int64_t c = 0; c < k; c++) {
                    float lw = 0.0f;
                    for (int64_t j = 0; j < r; j++) lw += brow[j] * as[j * k + c];
                    float v = row[c] + s * lw;
                    ss += (double)v * v;
                }
                out[r0 + i] = (float)sqrt(ss);
            }
        }
        free(rows);
    }
    if (bad) return ERR(PT_ERR_INTERNAL, "dora_norm: dequantizing %lld rows of %lld failed (out of memory or a bad "
                        "weight type)", (long long)n, (long long)k);
    return PT_OK;
}

pt_status cpu_dora_scale(pt_backend *be, pt_tensor *y, const pt_tensor *mag, const pt_tensor *wnorm)
{
    (void)be;
    int64_t width = tensor_numel(mag), rows = tensor_numel(y) / width;
    float *ys = y->data;
    const float *m = mag->data, *wn = wnorm->data;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < rows; i++)
        for (int64_t c = 0; c < width; c++) ys[i * width + c] *= m[c] / wn[c];
    return PT_OK;
}

pt_status cpu_dora_mag_bwd(pt_backend *be, pt_tensor *dmag, const pt_tensor *dy, const pt_tensor *z,
                           const pt_tensor *wnorm)
{
    (void)be;
    int64_t width = tensor_numel(dmag), rows = tensor_numel(dy) / width;
    const float *d = dy->data, *zs = z->data, *wn = wnorm->data;
    float *dm = dmag->data;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < width; c++) {
        double acc = 0;
        for (int64_t i = 0; i < rows; i++) acc += (double)d[i * width + c] * zs[i * width + c];
        dm[c] += (float)(acc / wn[c]);
    }
    return PT_OK;
}
