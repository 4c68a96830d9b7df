/* quant_imatrix.c — quantizing with an importance matrix (llama.cpp's imatrix): per column of a
 * weight, the mean square of the activations it met, which weights each value's rounding error in
 * the scale searches. Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K follow ggml's quantize_row_*_impl
 * paths (the ones ggml_quantize_chunk takes when given weights) step for step, so the bytes match
 * llama-quantize's; Q8_0, f16, bf16 and f32 do not use the weights (nor does ggml). The searches
 * and the packing are quant.c's (quant_search.h). */
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "ptrain/quant.h"
#include "ptrain/quant_blocks.h"
#include "quant_search.h"

static int round_even(float v) { return (int)lrintf(v); }

/* One mse term of make_qp_quants' search: x ~ scale * min(nmax, round(iscale * x)). */
static float qp_error(int n, int nmax, const float *x, const float *w, float iscale)
{
    float scale = 1.0f / iscale, mse = 0;
    for (int i = 0; i < n; i++) {
        int l = round_even(iscale * x[i]);
        l = l < nmax ? l : nmax;
        float diff = x[i] - scale * (float)l;
        mse += w[i] * diff * diff;
    }
    return mse;
}

/* Up to five passes moving one level at a time to the value that best fits the others, kept
 * while the fit's sum(w x l)^2 / sum(w l^2) grows (make_qp_quants' refinement). */
static void qp_refine(int n, int nmax, const float *x, const float *w, uint8_t *L, float *sumlx, float *suml2)
{
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float slx = *sumlx - w[i] * x[i] * (float)L[i], sl2 = *suml2 - w[i] * (float)L[i] * (float)L[i];
            if (!(slx > 0 && sl2 > 0)) continue;
            int nl = round_even(x[i] * sl2 / slx);
            nl = nl < nmax ? nl : nmax;
            if (nl == L[i]) continue;
            slx += w[i] * x[i] * (float)nl;
            sl2 += w[i] * (float)nl * (float)nl;
            if (slx * slx * *suml2 > *sumlx * *sumlx * sl2) L[i] = (uint8_t)nl, *sumlx = slx, *suml2 = sl2, changed++;
        }
        if (!changed) break;
    }
}

/* ggml's make_qp_quants: the non-negative x (a super-block's sub-block scales or mins) as levels
 * L in 0..nmax of one scale, weighted by w: the inverse scale nmax / max or (nmax + 0.1k) / max,
 * k = -4..4, with the least weighted error, then qp_refine. Returns the least-squares scale. */
static float qp_levels(int n, int nmax, const float *x, const float *w, uint8_t *L)
{
    float max = 0;
    for (int i = 0; i < n; i++) max = max > x[i] ? max : x[i];
    if (max < 1e-15f) {
        memset(L, 0, (size_t)n);
        return 0;
    }
    float iscale = (float)nmax / max, best = 0, scale = 1.0f / iscale;
    for (int i = 0; i < n; i++) { /* the first grid, unclamped as ggml has it */
        float diff = x[i] - scale * (float)(uint8_t)round_even(iscale * x[i]);
        best += w[i] * diff * diff;
    }
    for (int k = -4; k <= 4; k++) {
        float is = (0.1f * (float)k + (float)nmax) / max, mse = k ? qp_error(n, nmax, x, w, is) : best;
        if (mse < best) best = mse, iscale = is;
    }
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = round_even(iscale * x[i]);
        l = l < nmax ? l : nmax;
        L[i] = (uint8_t)l;
        sumlx += w[i] * x[i] * (float)l, suml2 += w[i] * (float)l * (float)l;
    }
    qp_refine(n, nmax, x, w, L, &sumlx, &suml2);
    return suml2 > 0 ? sumlx / suml2 : 0;
}

/* One Q4_K (Q5_K when five) super-block with weights qw (256): each sub-block's scale and min
 * searched with the weights qw * sqrt(sigma2 + x^2), the 8 scales and the 8 mins then quantized to
 * 6 bits by qp_levels weighted by the sub-blocks' weight sums, the values requantized against
 * them. Head into d, dmin, scales (zeroed before), levels into L. */
static void k4_weighted(bool five, const float *x, const float *qw, uint16_t *d, uint16_t *dmin, uint8_t *scales,
                        uint8_t *L)
{
    int nmax = five ? 31 : 15;
    float sum_x2 = 0, scale[8], min[8], sw[8], w[32];
    for (int i = 0; i < QK_K; i++) sum_x2 += x[i] * x[i];
    float sigma2 = 2 * sum_x2 / QK_K;
    for (int j = 0; j < 8; j++) {
        const float *xs = x + 32 * j;
        float sum = 0;
        for (int i = 0; i < 32; i++) w[i] = qw[32 * j + i] * sqrtf(sigma2 + xs[i] * xs[i]);
        for (int i = 0; i < 32; i++) sum += w[i];
        sw[j] = sum;
        scale[j] = quant_search_affine(32, nmax, xs, w, L + 32 * j, &min[j], -0.9f, 0.05f, 36);
    }
    uint8_t ls[8], lm[8];
    float d_block = qp_levels(8, 63, scale, sw, ls), m_block = qp_levels(8, 63, min, sw, lm);
    for (int j = 0; j < 8; j++) quant_pack_scale_min_k4(j, ls[j] < 63 ? ls[j] : 63, lm[j] < 63 ? lm[j] : 63, scales);
    *d = quant_f32_to_f16(d_block);
    *dmin = quant_f32_to_f16(m_block);
    quant_requant_k4(nmax, x, *d, *dmin, scales, L);
}

/* The weights of a row's 32-value blocks: qw * sqrt(sigma2 + x^2), sigma2 the row's mean square. */
static float row_sigma2(const float *x, int64_t n)
{
    float sum_x2 = 0;
    for (int64_t i = 0; i < n; i++) sum_x2 += x[i] * x[i];
    return sum_x2 / (float)n;
}

static void block_weights(const float *x, const float *qw, float sigma2, float *w)
{
    for (int j = 0; j < QK; j++) w[j] = qw[j] * sqrtf(sigma2 + x[j] * x[j]);
}

/* One block of 32 of Q4_0/Q5_0 (bits 4 or 5: the signed search) or Q4_1/Q5_1 (has_min: the
 * affine search), weighted; levels into L, scale into *d, the min (Q4_1/Q5_1) into *m. */
static void q32_weighted(int bits, bool has_min, const float *x, const float *w, uint8_t *L, float *d, float *m)
{
    if (has_min) {
        float mn;
        *d = quant_search_affine(QK, (1 << bits) - 1, x, w, L, &mn, -0.9f, 0.05f, 36);
        *m = -mn;
    } else {
        *d = quant_search_signed(QK, 1 << (bits - 1), x, w, L);
        *m = 0;
    }
}

static void pack_nibbles(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < QK / 2; j++) qs[j] = (uint8_t)(L[j] | (L[j + QK / 2] << 4));
}

/* A row of n values of the 32-value formats with weights qw (n of them). */
static void row_q32(pt_dtype t, const float *x, const float *qw, int64_t n, uint8_t *dst)
{
    float sigma2 = row_sigma2(x, n), w[QK], d, m;
    uint8_t L[QK];
    bool has_min = t == PT_Q4_1 || t == PT_Q5_1;
    int bits = t == PT_Q5_0 || t == PT_Q5_1 ? 5 : 4;
    for (int64_t i = 0; i < n / QK; i++) {
        block_weights(x + QK * i, qw + QK * i, sigma2, w);
        q32_weighted(bits, has_min, x + QK * i, w, L, &d, &m);
        block_q4_1 b4 = {quant_f32_to_f16(d), quant_f32_to_f16(m), {0}};
        block_q5_1 b5 = {quant_f32_to_f16(d), quant_f32_to_f16(m), {0}, {0}};
        if (bits == 4) pack_nibbles(L, b4.qs);
        else quant_pack_q5_levels(L, b5.qh, b5.qs);
        if (t == PT_Q4_0) { /* the same fields without m */
            block_q4_0 b = {b4.d, {0}};
            memcpy(b.qs, b4.qs, sizeof b.qs);
            memcpy(dst + i * sizeof b, &b, sizeof b);
        } else if (t == PT_Q5_0) {
            block_q5_0 b = {b5.d, {0}, {0}};
            memcpy(b.qh, b5.qh, sizeof b.qh), memcpy(b.qs, b5.qs, sizeof b.qs);
            memcpy(dst + i * sizeof b, &b, sizeof b);
        } else if (t == PT_Q4_1) memcpy(dst + i * sizeof b4, &b4, sizeof b4);
        else memcpy(dst + i * sizeof b5, &b5, sizeof b5);
    }
}

/* A row of n values of the k-quants with weights qw (n of them). */
static void row_k(pt_dtype t, const float *x, const float *qw, int64_t n, uint8_t *dst)
{
    for (int64_t i = 0; i < n / QK_K; i++) {
        const float *xs = x + QK_K * i, *ws = qw + QK_K * i;
        uint8_t L[QK_K];
        if (t == PT_Q6_K) {
            block_q6_K b;
            quant_q6_k_block(xs, ws, &b);
            memcpy(dst + i * sizeof b, &b, sizeof b);
        } else if (t == PT_Q5_K) {
            block_q5_K b;
            memset(&b, 0, sizeof b);
            k4_weighted(true, xs, ws, &b.d, &b.dmin, b.scales, L);
            quant_pack_k4_levels(L, b.qh, b.qs);
            memcpy(dst + i * sizeof b, &b, sizeof b);
        } else {
            block_q4_K b;
            memset(&b, 0, sizeof b);
            k4_weighted(false, xs, ws, &b.d, &b.dmin, b.scales, L);
            quant_pack_k4_levels(L, NULL, b.qs);
            memcpy(dst + i * sizeof b, &b, sizeof b);
        }
    }
}

bool quant_uses_imatrix(pt_dtype dtype)
{
    switch (dtype) {
    case PT_Q4_0: case PT_Q4_1: case PT_Q5_0: case PT_Q5_1: case PT_Q4_K: case PT_Q5_K: case PT_Q6_K: return true;
    default: return false;
    }
}

pt_status quant_quantize_row_imatrix(pt_dtype dtype, const float *src, void *dst, int64_t n, const float *qw)
{
    if (!qw || !quant_uses_imatrix(dtype)) return quant_quantize_row(dtype, src, dst, n);
    if (dtype_size_bytes(dtype, n) == 0 && n > 0)
        return ERR(PT_ERR_INTERNAL, "%lld values are not whole %s blocks", (long long)n, dtype_name(dtype));
    if (dtype == PT_Q4_K || dtype == PT_Q5_K || dtype == PT_Q6_K) row_k(dtype, src, qw, n, dst);
    else row_q32(dtype, src, qw, n, dst);
    return PT_OK;
}
