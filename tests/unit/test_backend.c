/* test_backend.c — the backend seam: dtype helpers, the fp16/bf16/GGUF block conversions (with the
 * error of the k-quant quantizers against a plain min/max quantizer), and
 * the matmul ops (forward, input gradient, weight gradient) of the CPU backend against a
 * float64 reference, for fp32 and quantized weights. When the CUDA backend is built and a GPU is
 * visible, its matmuls are checked against the CPU backend; otherwise that test skips and says
 * why. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ptrain/backend.h"
#include "ptrain/quant.h"

static float frand(uint64_t *state)
{
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (float)((*state >> 40) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f;
}

static float *random_floats(int64_t n, uint64_t seed)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = frand(&seed);
    return v;
}

static pt_backend *open_cpu(void)
{
    pt_backend *be = NULL;
    pt_backend_options opts = {.device = DEVICE_CPU, .threads = 1};
    assert_int_equal(backend_open(&opts, &be), PT_OK);
    assert_string_equal(be->ops->name, "cpu");
    return be;
}

/* A tensor on be holding host values of the given dtype (quantized from f32 when needed). */
static pt_tensor put(pt_backend *be, pt_dtype dtype, int64_t rows, int64_t cols, const float *values)
{
    int64_t shape[2] = {rows, cols};
    pt_tensor t = tensor_make(dtype, 2, shape);
    assert_true(t.nbytes > 0);
    void *host = malloc(t.nbytes);
    assert_non_null(host);
    for (int64_t r = 0; r < rows; r++)
        assert_int_equal(quant_quantize_row(dtype, values + r * cols,
                                            (char *)host + (size_t)r * dtype_size_bytes(dtype, cols), cols),
                         PT_OK);
    assert_int_equal(backend_alloc(be, &t), PT_OK);
    assert_int_equal(backend_upload(be, &t, host, t.nbytes), PT_OK);
    free(host);
    return t;
}

static float *get(pt_backend *be, const pt_tensor *t)
{
    float *host = malloc(t->nbytes);
    assert_non_null(host);
    assert_int_equal(backend_download(be, t, host, t->nbytes), PT_OK);
    return host;
}

/* max |a-b| / max(|b|) over n values */
static double rel_err(const float *a, const double *b, int64_t n)
{
    double diff = 0, scale = 1e-30;
    for (int64_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs(b[i]));
    }
    return diff / scale;
}

static void test_dtype_sizes(void **state)
{
    (void)state;
    assert_int_equal(dtype_size_bytes(PT_F32, 10), 40);
    assert_int_equal(dtype_size_bytes(PT_BF16, 10), 20);
    assert_int_equal(dtype_size_bytes(PT_Q8_0, 64), 68);
    assert_int_equal(dtype_size_bytes(PT_Q4_0, 64), 36);
    assert_int_equal(dtype_size_bytes(PT_Q4_1, 32), 20);
    assert_int_equal(dtype_size_bytes(PT_Q4_0, 33), 0); /* not whole blocks */
    assert_string_equal(dtype_name(PT_Q4_1), "q4_1");
    for (int d = 0; d < PT_DTYPE_COUNT; d++) { /* every dtype has its row in the table, with its own name */
        int64_t block = dtype_block_values((pt_dtype)d);
        assert_non_null(dtype_name((pt_dtype)d));
        assert_true(block >= 1 && dtype_size_bytes((pt_dtype)d, block) > 0);
        for (int e = 0; e < d; e++) assert_string_not_equal(dtype_name((pt_dtype)d), dtype_name((pt_dtype)e));
    }
    assert_string_equal(dtype_name(PT_DTYPE_COUNT), "invalid");
    int64_t shape[3] = {2, 3, 64};
    pt_tensor t = tensor_make(PT_Q8_0, 3, shape);
    assert_int_equal(tensor_numel(&t), 384);
    assert_int_equal(t.nbytes, 408);
}

static void test_half_conversions(void **state)
{
    (void)state;
    assert_int_equal(quant_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(quant_f32_to_f16(-2.0f), 0xc000);
    assert_int_equal(quant_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(quant_f32_to_f16(1e6f), 0x7c00); /* overflow to inf */
    assert_true(quant_f16_to_f32(0x0001) == ldexpf(1.0f, -24)); /* smallest subnormal */
    assert_true(quant_f16_to_f32(0x3555) == 0.333251953125f);
    for (uint32_t h = 0; h < 0x7c00; h++) /* every finite positive half survives a round trip */
        assert_int_equal(quant_f32_to_f16(quant_f16_to_f32((uint16_t)h)), h);
    assert_int_equal(quant_f32_to_bf16(1.0f), 0x3f80);
    assert_true(quant_bf16_to_f32(0x4049) == 3.140625f);
    /* round to nearest even: 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125 */
    assert_int_equal(quant_f32_to_bf16(1.00390625f), 0x3f80);
    assert_int_equal(quant_f32_to_bf16(1.01171875f), 0x3f82);
}

/* Quantizing then dequantizing stays within the format's step; exact values survive exactly. */
static void test_block_roundtrip(void **state)
{
    (void)state;
    const pt_dtype types[] = {PT_F16, PT_BF16, PT_Q8_0, PT_Q4_0, PT_Q4_1};
    const double tol[] = {1e-3, 8e-3, 1e-2, 0.15, 0.07};
    float *x = random_floats(256, 7);
    float back[256];
    unsigned char packed[1024];
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        assert_int_equal(quant_quantize_row(types[t], x, packed, 256), PT_OK);
        assert_int_equal(quant_dequantize_row(types[t], packed, back, 256), PT_OK);
        for (int i = 0; i < 256; i++) assert_true(fabsf(back[i] - x[i]) <= tol[t]);
    }
    /* Q4_0 known block: d = 0.5, nibbles 0..15 and 15..0 */
    unsigned char block[18] = {0x00, 0x38};
    for (int j = 0; j < 16; j++) block[2 + j] = (unsigned char)(j | ((15 - j) << 4));
    assert_int_equal(quant_dequantize_row(PT_Q4_0, block, back, 32), PT_OK);
    assert_true(back[0] == -4.0f && back[15] == 3.5f && back[16] == 3.5f && back[31] == -4.0f);
    assert_int_equal(quant_dequantize_row(PT_Q4_0, block, back, 31), PT_ERR_INTERNAL);
    free(x);
}

/* A standard normal value (Box-Muller over frand). */
static float gauss(uint64_t *state)
{
    float u = (frand(state) + 1.0f) * 0.5f, v = (frand(state) + 1.0f) * 0.5f;
    if (u < 1e-7f) u = 1e-7f;
    return sqrtf(-2.0f * logf(u)) * cosf(6.2831853f * v);
}

static float to_half(float v) { return quant_f16_to_f32(quant_f32_to_f16(v)); }

/* Squared error of a plain min/max quantizer in the same format, the baseline the k-quant scale
 * search has to beat: Q4_K/Q5_K map each 32 values' [min(lo, 0), max] onto 0..nmax, Q6_K maps
 * each 16 values' largest magnitude to -32; those sub-block scales (and mins) are then stored as
 * the format does (6-bit, or int8 for Q6_K, against fp16 super-block scales) and the values
 * rounded against the stored ones. */
static double minmax_sq_err(pt_dtype dtype, const float *x, int64_t n)
{
    int six = dtype == PT_Q6_K, sub = six ? 16 : 32, nmax = dtype == PT_Q4_K ? 15 : 31;
    double err = 0;
    for (int64_t b = 0; b < n; b += 256) {
        float sc[16], mn[16], smax = 0, mmax = 0;
        for (int j = 0; j < 256 / sub; j++) {
            const float *v = x + b + j * sub;
            float lo = 0, hi = v[0], big = 0;
            for (int i = 0; i < sub; i++) {
                lo = fminf(lo, v[i]), hi = fmaxf(hi, v[i]);
                if (fabsf(v[i]) > fabsf(big)) big = v[i];
            }
            sc[j] = six ? big / -32.0f : (hi - lo) / (float)nmax, mn[j] = six ? 0 : -lo;
            smax = fmaxf(smax, fabsf(sc[j])), mmax = fmaxf(mmax, mn[j]);
        }
        float ds = to_half(smax / (six ? 127.0f : 63.0f)), dm = to_half(mmax / 63.0f);
        for (int j = 0; j < 256 / sub; j++) {
            float s = ds ? ds * rintf(sc[j] / ds) : 0, m = dm ? dm * rintf(mn[j] / dm) : 0;
            for (int i = 0; i < sub; i++) {
                float v = x[b + j * sub + i], q = s ? rintf((v + m) / s) : 0;
                q = six ? fminf(31, fmaxf(-32, q)) : fminf((float)nmax, fmaxf(0, q));
                err += ((double)(s * q - m) - v) * ((double)(s * q - m) - v);
            }
        }
    }
    return err;
}

/* Quantize x and read it back; returns the squared error and (via sq) the sum of x^2. */
static double kquant_sq_err(pt_dtype dtype, const float *x, int64_t n, double *sq, float *back)
{
    unsigned char packed[512 * 4];
    assert_int_equal(quant_quantize_row(dtype, x, packed, n), PT_OK);
    assert_int_equal(quant_dequantize_row(dtype, packed, back, n), PT_OK);
    double err = 0;
    *sq = 0;
    for (int64_t i = 0; i < n; i++) {
        err += ((double)back[i] - x[i]) * ((double)back[i] - x[i]);
        *sq += (double)x[i] * x[i];
    }
    return err;
}

/* One k-quant type over gaussian rows (256 and 512 values) and rows with an outlier: the error
 * relative to the row RMS stays under the type's bound on every row, and in total under the plain
 * min/max quantizer's (so the scale search helps). Zero rows come back exactly zero, constant rows
 * nearly so. */
static void check_kquant(pt_dtype dtype, double gauss_bound, double outlier_bound)
{
    float x[512], back[512];
    double worst[2] = {0, 0}, total[2] = {0, 0}, sq_total[2] = {0, 0}, base[2] = {0, 0};
    uint64_t seed = 99;
    for (int row = 0; row < 24; row++) {
        int64_t n = row % 2 ? 512 : 256;
        int kind = row >= 16; /* 0: gaussian, 1: gaussian plus one outlier */
        float sigma = 0.02f + 0.1f * (float)(row % 5);
        for (int64_t i = 0; i < n; i++) x[i] = sigma * gauss(&seed);
        if (kind) x[(row * 37) % n] = sigma * (row % 2 ? -25.0f : 18.0f);
        double sq, err = kquant_sq_err(dtype, x, n, &sq, back);
        worst[kind] = fmax(worst[kind], sqrt(err / sq));
        total[kind] += err, sq_total[kind] += sq, base[kind] += minmax_sq_err(dtype, x, n);
    }
    print_message("%s: relative RMS error gaussian %.4f (worst row %.4f, min/max %.4f), with outlier %.4f "
                  "(worst %.4f, min/max %.4f)\n",
                  dtype_name(dtype), sqrt(total[0] / sq_total[0]), worst[0], sqrt(base[0] / sq_total[0]),
                  sqrt(total[1] / sq_total[1]), worst[1], sqrt(base[1] / sq_total[1]));
    assert_true(worst[0] < gauss_bound);
    assert_true(worst[1] < outlier_bound);
    assert_true(total[0] < base[0] && total[1] < base[1]);

    const float constants[] = {0.0f, 0.37f, -1.25f};
    for (int c = 0; c < 3; c++) {
        for (int i = 0; i < 512; i++) x[i] = constants[c];
        double sq, err = kquant_sq_err(dtype, x, 512, &sq, back);
        print_message("%s: constant %g row, relative RMS error %.2g\n", dtype_name(dtype), constants[c],
                      c ? sqrt(err / sq) : sqrt(err));
        if (c == 0)
            for (int i = 0; i < 512; i++) assert_true(back[i] == 0.0f);
        else
            assert_true(sqrt(err / sq) < 2e-3);
    }
    unsigned char packed[512 * 4];
    assert_int_equal(quant_quantize_row(dtype, x, packed, 300), PT_ERR_INTERNAL); /* not whole blocks */
}

/* bounds: the worst row measured (gaussian / with outlier) plus about 7%: Q4_K 0.0765 / 0.0986,
 * Q5_K 0.0395 / 0.0517, Q6_K 0.0187 / 0.0328 */
static void test_kquant_q4_k(void **state) { (void)state; check_kquant(PT_Q4_K, 0.082, 0.106); }
static void test_kquant_q5_k(void **state) { (void)state; check_kquant(PT_Q5_K, 0.042, 0.055); }
static void test_kquant_q6_k(void **state) { (void)state; check_kquant(PT_Q6_K, 0.020, 0.035); }

/* A Q5_0/Q5_1 block whose values sit exactly on levels 0..31 (x = d*(j - 16) for Q5_0, d*j + m for
 * Q5_1, d = 0.25, m = 1) quantizes to the known bytes (fp16 d [, m], qh with bit j = fifth bit of
 * value j, nibbles of values j and j+16 in byte j) and reads back exactly. */
static void check_q5_known_block(pt_dtype dtype)
{
    int has_min = dtype == PT_Q5_1;
    float x[32], back[32];
    unsigned char packed[24], want[24] = {0x00, 0x34, 0x00, 0x3c}; /* fp16 0.25, 1.0 */
    for (int j = 0; j < 32; j++) x[j] = has_min ? 0.25f * (float)j + 1.0f : 0.25f * (float)(j - 16);
    unsigned char *q = want + (has_min ? 4 : 2);
    q[0] = q[1] = 0x00, q[2] = q[3] = 0xff; /* values 16..31 have the fifth bit */
    for (int j = 0; j < 16; j++) q[4 + j] = (unsigned char)(j | (j << 4));
    assert_int_equal(quant_quantize_row(dtype, x, packed, 32), PT_OK);
    assert_memory_equal(packed, want, has_min ? 24 : 22);
    assert_int_equal(quant_dequantize_row(dtype, packed, back, 32), PT_OK);
    for (int j = 0; j < 32; j++) assert_true(back[j] == x[j]);
}

/* Q5_0/Q5_1 (the fallback for rows that are not whole 256-value super-blocks) over gaussian rows
 * of 32 to 800 values, some with an outlier: the error relative to the row RMS stays under bound on
 * every row. Zero rows (of +0 and -0) come back exactly zero, and a bad n is rejected. */
static void check_q5(pt_dtype dtype, double gauss_bound, double outlier_bound)
{
    static const int64_t lens[] = {32, 96, 288, 800};
    float x[800], back[800];
    unsigned char packed[800];
    double worst[2] = {0, 0}, total[2] = {0, 0}, sq_total[2] = {0, 0};
    uint64_t seed = 5;
    for (int row = 0; row < 40; row++) {
        int64_t n = lens[row % 4];
        int kind = row >= 24; /* 0: gaussian, 1: gaussian plus one outlier */
        float sigma = 0.01f + 0.3f * (float)(row % 7);
        for (int64_t i = 0; i < n; i++) x[i] = sigma * gauss(&seed);
        if (kind) x[(row * 37) % n] = sigma * (row % 2 ? -25.0f : 18.0f);
        double sq, err = kquant_sq_err(dtype, x, n, &sq, back);
        worst[kind] = fmax(worst[kind], sqrt(err / sq));
        total[kind] += err, sq_total[kind] += sq;
    }
    print_message("%s: relative RMS error gaussian %.4f (worst row %.4f), with outlier %.4f (worst %.4f)\n",
                  dtype_name(dtype), sqrt(total[0] / sq_total[0]), worst[0], sqrt(total[1] / sq_total[1]),
                  worst[1]);
    assert_true(worst[0] < gauss_bound);
    assert_true(worst[1] < outlier_bound);

    for (int i = 0; i < 800; i++) x[i] = i % 3 ? 0.0f : -0.0f;
    assert_int_equal(quant_quantize_row(dtype, x, packed, 96), PT_OK);
    assert_int_equal(quant_dequantize_row(dtype, packed, back, 96), PT_OK);
    for (int i = 0; i < 96; i++) assert_true(back[i] == 0.0f);
    assert_int_equal(quant_quantize_row(dtype, x, packed, 33), PT_ERR_INTERNAL); /* not whole blocks */
    assert_int_equal(quant_quantize_row(dtype, x, packed, 300), PT_ERR_INTERNAL);
    check_q5_known_block(dtype);
}

/* bounds: the worst row measured (gaussian / with outlier; the worst are 32-value rows, where one
 * outlier sets Q5_0's whole scale) plus about 7%: Q5_0 0.0518 / 0.1111, Q5_1 0.0462 / 0.0608 */
static void test_quant_q5_0(void **state) { (void)state; check_q5(PT_Q5_0, 0.056, 0.119); }
static void test_quant_q5_1(void **state) { (void)state; check_q5(PT_Q5_1, 0.050, 0.065); }

/* The CPU backend's own dequantization loops (vectorized, src/cpu/dequant.c) give quant.c's values
 * bit for bit: rows read through an embedding lookup against quant_dequantize_row, on random
 * blocks (every nibble and byte value, scales and minimums of both signs). */
static void test_dequant_fast_paths(void **state)
{
    (void)state;
    const pt_dtype types[] = {PT_Q8_0, PT_Q4_0, PT_Q4_1};
    const int64_t rows = 9, cols = 160;
    pt_backend *be = open_cpu();
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        size_t row_bytes = dtype_size_bytes(types[t], cols), block = dtype_size_bytes(types[t], 32);
        unsigned char *raw = malloc(row_bytes * rows);
        assert_non_null(raw);
        srand(11 + (unsigned)t);
        for (size_t i = 0; i < row_bytes * rows; i++) raw[i] = (unsigned char)(rand() & 0xff);
        for (size_t b = 0; b < row_bytes * rows / block; b++) { /* finite f16 scales: exponent < 31 */
            raw[b * block + 1] &= 0xbb;
            if (types[t] == PT_Q4_1) raw[b * block + 3] &= 0xbb;
        }
        int64_t shape[2] = {rows, cols}, oshape[2] = {4, cols};
        pt_tensor table = tensor_make(types[t], 2, shape), out = tensor_make(PT_F32, 2, oshape);
        assert_int_equal(backend_alloc(be, &table), PT_OK);
        assert_int_equal(backend_alloc(be, &out), PT_OK);
        assert_int_equal(backend_upload(be, &table, raw, table.nbytes), PT_OK);
        const int32_t ids[4] = {8, 0, 3, 3};
        assert_int_equal(backend_embed(be, &out, &table, ids), PT_OK);
        float got[4 * 160], want[160];
        assert_int_equal(backend_download(be, &out, got, sizeof got), PT_OK);
        for (int i = 0; i < 4; i++) {
            assert_int_equal(quant_dequantize_row(types[t], raw + (size_t)ids[i] * row_bytes, want, cols), PT_OK);
            assert_memory_equal(got + i * cols, want, sizeof want);
        }
        backend_release(be, &table);
        backend_release(be, &out);
        free(raw);
    }
    backend_close(be);
}

/* y = x @ W^T in float64 from the weights as the backend sees them (dequantized). */
static void reference_matmul(const float *x, const float *w, double *y, int m, int n, int k)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double acc = 0;
            for (int p = 0; p < k; p++) acc += (double)x[i * k + p] * w[j * k + p];
            y[i * n + j] = acc;
        }
}

/* Each path of a weight that is not fp32: m <= 2 rows the few-row dots, 3..16 rows (GRPO's group)
 * cpu_matmul_rows (4 x 4 blocks: m and n not multiples of 4, k not of 16, test their edges), more
 * rows dequantized tiles + sgemm. n = 11000 spans two dequantization tiles (2^20 weights each). */
static void check_matmul_shape(pt_dtype dtype, int m, int n, int k)
{
    pt_backend *be = open_cpu();
    float *xv = random_floats(m * k, 1), *wv = random_floats(n * k, 2), *dyv = random_floats(m * n, 3);
    pt_tensor x = put(be, PT_F32, m, k, xv), w = put(be, dtype, n, k, wv), dy = put(be, PT_F32, m, n, dyv);
    /* the weights as stored: dequantize them for the reference */
    float *wq = malloc(sizeof(float) * n * k);
    void *raw = malloc(w.nbytes);
    assert_non_null(wq);
    assert_non_null(raw);
    assert_int_equal(backend_download(be, &w, raw, w.nbytes), PT_OK);
    assert_int_equal(quant_dequantize_row(dtype, raw, wq, (int64_t)n * k), PT_OK);

    int64_t yshape[2] = {m, n};
    pt_tensor y = tensor_make(PT_F32, 2, yshape);
    assert_int_equal(backend_alloc(be, &y), PT_OK);
    assert_int_equal(backend_matmul(be, &y, &x, &w, 0.0f), PT_OK);
    double *ref = malloc(sizeof(double) * m * n * 2);
    assert_non_null(ref);
    reference_matmul(xv, wq, ref, m, n, k);
    float *yv = get(be, &y);
    assert_true(rel_err(yv, ref, m * n) < 1e-5);

    /* beta = 1 accumulates: y = 2 * x W^T */
    assert_int_equal(backend_matmul(be, &y, &x, &w, 1.0f), PT_OK);
    free(yv);
    yv = get(be, &y);
    for (int i = 0; i < m * n; i++) ref[i] *= 2;
    assert_true(rel_err(yv, ref, m * n) < 1e-5);

    /* dx = dy @ W */
    pt_tensor dx = put(be, PT_F32, m, k, xv); /* beta = 0 must ignore what is there */
    assert_int_equal(backend_matmul_bwd_input(be, &dx, &dy, &w, 0.0f), PT_OK);
    float *dxv = get(be, &dx);
    for (int i = 0; i < m; i++)
        for (int p = 0; p < k; p++) {
            double acc = 0;
            for (int j = 0; j < n; j++) acc += (double)dyv[i * n + j] * wq[j * k + p];
            ref[i * k + p] = acc;
        }
    assert_true(rel_err(dxv, ref, m * k) < 1e-5);

    free(yv);
    free(dxv);
    free(ref);
    free(wq);
    free(raw);
    free(xv);
    free(wv);
    free(dyv);
    pt_tensor *all[] = {&x, &w, &dy, &y, &dx};
    for (size_t i = 0; i < 5; i++) backend_release(be, all[i]);
    backend_close(be);
}

static void check_matmul_rows(pt_dtype dtype, int m) { check_matmul_shape(dtype, m, 11000, 96); }

static void check_matmul_dtype(pt_dtype dtype)
{
    check_matmul_rows(dtype, 1);
    check_matmul_rows(dtype, 3);
    check_matmul_rows(dtype, 7);
    check_matmul_rows(dtype, 12);
    check_matmul_rows(dtype, 16);
    check_matmul_rows(dtype, 17);
    if (dtype == PT_F16 || dtype == PT_BF16) check_matmul_shape(dtype, 5, 1003, 40); /* k past 16s, n past 4s */
}

static void test_matmul_f32(void **state) { (void)state; check_matmul_dtype(PT_F32); }
static void test_matmul_f16(void **state) { (void)state; check_matmul_dtype(PT_F16); }
static void test_matmul_bf16(void **state) { (void)state; check_matmul_dtype(PT_BF16); }
static void test_matmul_q8_0(void **state) { (void)state; check_matmul_dtype(PT_Q8_0); }
static void test_matmul_q4_0(void **state) { (void)state; check_matmul_dtype(PT_Q4_0); }
static void test_matmul_q4_1(void **state) { (void)state; check_matmul_dtype(PT_Q4_1); }

static void test_matmul_bwd_weight(void **state)
{
    (void)state;
    const int m = 9, n = 5, k = 6;
    pt_backend *be = open_cpu();
    float *xv = random_floats(m * k, 4), *dyv = random_floats(m * n, 5), *init = random_floats(n * k, 6);
    pt_tensor x = put(be, PT_F32, m, k, xv), dy = put(be, PT_F32, m, n, dyv), dw = put(be, PT_F32, n, k, init);
    assert_int_equal(backend_matmul_bwd_weight(be, &dw, &dy, &x, 1.0f), PT_OK); /* accumulate */
    float *dwv = get(be, &dw);
    double ref[30];
    for (int j = 0; j < n; j++)
        for (int p = 0; p < k; p++) {
            double acc = init[j * k + p];
            for (int i = 0; i < m; i++) acc += (double)dyv[i * n + j] * xv[i * k + p];
            ref[j * k + p] = acc;
        }
    assert_true(rel_err(dwv, ref, n * k) < 1e-6);
    free(dwv);
    free(xv);
    free(dyv);
    free(init);
    backend_release(be, &x);
    backend_release(be, &dy);
    backend_release(be, &dw);
    backend_close(be);
}

/* The embedding's gradient: repeated ids add up; a bad id is the user's error, naming it. */
static void test_embed_bwd(void **state)
{
    (void)state;
    const int vocab = 7, dim = 70, n = 6; /* dim past one block of columns */
    const int32_t ids[6] = {3, 0, 3, 6, 3, 1};
    pt_backend *be = open_cpu();
    float *dyv = random_floats(n * dim, 8), *init = random_floats(vocab * dim, 9);
    pt_tensor dy = put(be, PT_F32, n, dim, dyv), dt = put(be, PT_F32, vocab, dim, init);
    assert_int_equal(backend_embed_bwd(be, &dt, &dy, ids, 0.5f), PT_OK);
    float *got = get(be, &dt);
    double *ref = malloc(sizeof(double) * (size_t)(vocab * dim));
    assert_non_null(ref);
    for (int i = 0; i < vocab * dim; i++) ref[i] = init[i];
    for (int r = 0; r < n; r++)
        for (int c = 0; c < dim; c++) ref[ids[r] * dim + c] += 0.5 * dyv[r * dim + c];
    assert_true(rel_err(got, ref, vocab * dim) < 1e-6);
    const int32_t bad[6] = {3, 0, 7, 6, 3, 1};
    assert_int_equal(backend_embed_bwd(be, &dt, &dy, bad, 1.0f), PT_ERR_USER);
    assert_string_equal(err_message(), "token id 7 is outside the vocabulary (7 tokens)");
    free(got), free(ref), free(dyv), free(init);
    backend_release(be, &dy);
    backend_release(be, &dt);
    backend_close(be);
}

/* The DoRA ops against the formulas in double: the row norm of W + s·B·A for a Q4_1 weight (its
 * rows dequantized here) and an f32 one (rows over several of the op's chunks), the column scale,
 * the magnitude gradient; and a shape mismatch refused. */
static void check_dora_norm(pt_backend *be, pt_dtype dtype, int64_t n, int64_t k, int64_t r, float s)
{
    float *wv = random_floats(n * k, 11), *av = random_floats(r * k, 12), *bv = random_floats(n * r, 13);
    pt_tensor w = put(be, dtype, n, k, wv), a = put(be, PT_F32, r, k, av), b = put(be, PT_F32, n, r, bv);
    pt_tensor wn = put(be, PT_F32, 1, n, wv);
    float *wq = get(be, &w), *row = malloc(sizeof(float) * (size_t)k);
    double *want = malloc(sizeof(double) * (size_t)n);
    assert_true(row && want);
    size_t row_bytes = dtype_size_bytes(dtype, k);
    for (int64_t i = 0; i < n; i++) {
        assert_int_equal(quant_dequantize_row(dtype, (char *)wq + (size_t)i * row_bytes, row, k), PT_OK);
        double ss = 0;
        for (int64_t c = 0; c < k; c++) {
            double lw = 0;
            for (int64_t j = 0; j < r; j++) lw += (double)bv[i * r + j] * av[j * k + c];
            double v = row[c] + s * lw;
            ss += v * v;
        }
        want[i] = sqrt(ss);
    }
    assert_int_equal(backend_dora_norm(be, &wn, &w, &a, &b, s), PT_OK);
    float *got = get(be, &wn);
    double e = rel_err(got, want, n);
    if (e > 1e-6) fail_msg("dora_norm %s %lldx%lld r=%lld: relative error %g", dtype_name(dtype), (long long)n,
                           (long long)k, (long long)r, e);
    free(got), free(want), free(row), free(wq), free(wv), free(av), free(bv);
    backend_release(be, &w), backend_release(be, &a), backend_release(be, &b), backend_release(be, &wn);
}

static void test_dora_ops(void **state)
{
    (void)state;
    pt_backend *be = open_cpu();
    check_dora_norm(be, PT_Q4_1, 37, 96, 8, 2.0f);
    check_dora_norm(be, PT_F32, 45, 20, 3, 0.5f);
    enum { M = 7, N = 29 };
    float *yv = random_floats(M * N, 21), *zv = random_floats(M * N, 22), *mv = random_floats(N, 23),
          *nv = random_floats(N, 24), *dv = random_floats(N, 25);
    for (int i = 0; i < N; i++) nv[i] = 1.5f + nv[i]; /* a norm: positive */
    pt_tensor y = put(be, PT_F32, M, N, yv), z = put(be, PT_F32, M, N, zv), mag = put(be, PT_F32, 1, N, mv),
              wn = put(be, PT_F32, 1, N, nv), dm = put(be, PT_F32, 1, N, dv);
    double want[M * N], wantm[N];
    for (int i = 0; i < M; i++)
        for (int c = 0; c < N; c++) want[i * N + c] = (double)yv[i * N + c] * ((double)mv[c] / nv[c]);
    for (int c = 0; c < N; c++) {
        double acc = 0;
        for (int i = 0; i < M; i++) acc += (double)yv[i * N + c] * zv[i * N + c];
        wantm[c] = dv[c] + acc / nv[c];
    }
    assert_int_equal(backend_dora_mag_bwd(be, &dm, &y, &z, &wn), PT_OK);
    float *got = get(be, &dm);
    if (rel_err(got, wantm, N) > 1e-6) fail_msg("dora_mag_bwd: relative error %g", rel_err(got, wantm, N));
    free(got);
    assert_int_equal(backend_dora_scale(be, &y, &mag, &wn), PT_OK);
    got = get(be, &y);
    if (rel_err(got, want, M * N) > 1e-6) fail_msg("dora_scale: relative error %g", rel_err(got, want, M * N));
    free(got);
    assert_int_equal(backend_dora_scale(be, &y, &wn, &z), PT_ERR_INTERNAL);
    assert_string_equal(err_message(), "dora_scale: wnorm has 203 values for 29 output columns");
    free(yv), free(zv), free(mv), free(nv), free(dv);
    backend_release(be, &y), backend_release(be, &z), backend_release(be, &mag), backend_release(be, &wn);
    backend_release(be, &dm);
    backend_close(be);
}

static void test_matmul_shape_errors(void **state)
{
    (void)state;
    pt_backend *be = open_cpu();
    float v[64] = {0};
    pt_tensor x = put(be, PT_F32, 2, 4, v), w = put(be, PT_F32, 3, 5, v), y = put(be, PT_F32, 2, 3, v);
    assert_int_equal(backend_matmul(be, &y, &x, &w, 0.0f), PT_ERR_INTERNAL);
    assert_string_equal(err_message(), "matmul shapes: y[2,3] = x[2,4] @ w[3,5]^T");
    assert_int_equal(backend_upload(be, &x, v, 4), PT_ERR_INTERNAL);
    backend_release(be, &x);
    backend_release(be, &w);
    backend_release(be, &y);
    backend_close(be);
}

static void test_allreduce_single_process(void **state)
{
    (void)state; /* without MPI (or with one rank) the sum is the tensor itself */
    pt_backend *be = open_cpu();
    float v[4] = {1, 2, 3, 4};
    pt_tensor t = put(be, PT_F32, 1, 4, v);
    assert_int_equal(backend_allreduce_sum(be, &t), PT_OK);
    float *out = get(be, &t);
    assert_memory_equal(out, v, sizeof v);
    free(out);
    backend_release(be, &t);
    backend_close(be);
}

static void test_device_selection(void **state)
{
    (void)state;
    /* a device's name is parsed once, exactly as the one table spells it */
    for (int d = 0; d < DEVICE_COUNT; d++) {
        pt_device got = DEVICE_COUNT;
        assert_true(backend_device_parse(backend_device_names[d], &got));
        assert_int_equal(got, d);
    }
    assert_null(backend_device_names[DEVICE_COUNT]);
    pt_device kept = DEVICE_CPU;
    assert_false(backend_device_parse("CUDA", &kept) || backend_device_parse("cpu ", &kept) ||
                 backend_device_parse("", &kept) || backend_device_parse(NULL, &kept));
    assert_int_equal(kept, DEVICE_CPU);
    assert_int_equal(backend_resolve(DEVICE_CPU), DEVICE_CPU);
    pt_backend *be = NULL;
    pt_backend_options auto_opts = {.device = DEVICE_AUTO, .threads = 1};
    assert_int_equal(backend_open(&auto_opts, &be), PT_OK);
    assert_string_equal(be->ops->name, backend_device_names[backend_resolve(DEVICE_AUTO)]);
#ifdef PTRAIN_HAVE_CUDA
    assert_string_equal(be->ops->name, cuda_device_count() > 0 ? "cuda" : "cpu");
#else
    assert_string_equal(be->ops->name, "cpu");
#endif
    backend_close(be);
    pt_backend_options cuda_opts = {.device = DEVICE_CUDA, .threads = 1};
#ifdef PTRAIN_HAVE_CUDA
    if (cuda_device_count() == 0) {
        assert_int_equal(backend_open(&cuda_opts, &be), PT_ERR_USER);
        assert_non_null(strstr(err_message(), "no GPU is visible"));
    }
    assert_string_equal(backend_list(), "cpu cuda");
#else
    assert_int_equal(backend_open(&cuda_opts, &be), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "built without CUDA"));
    assert_string_equal(backend_list(), "cpu");
#endif
}

/* The CUDA matmuls (bf16 operands, fp32 accumulation) against the CPU backend. */
static void test_cuda_matches_cpu(void **state)
{
    (void)state;
#ifndef PTRAIN_HAVE_CUDA
    print_message("SKIP reason: this build has no CUDA backend (./configure --with-cuda)\n");
    skip();
#else
    if (cuda_device_count() == 0) {
        print_message("SKIP reason: CUDA backend built, but no GPU is visible on this machine\n");
        skip();
    }
    const int m = 64, n = 384, k = 256;
    pt_backend *cpu = open_cpu(), *gpu = NULL;
    pt_backend_options opts = {.device = DEVICE_CUDA, .threads = 1};
    assert_int_equal(backend_open(&opts, &gpu), PT_OK);
    float *xv = random_floats(m * k, 11), *wv = random_floats(n * k, 12), *dyv = random_floats(m * n, 13);
    int64_t ys[2] = {m, n}, xs[2] = {m, k}, ws[2] = {n, k};
    pt_tensor yc = tensor_make(PT_F32, 2, ys), yg = yc, dxc = tensor_make(PT_F32, 2, xs), dxg = dxc;
    pt_tensor dwc = tensor_make(PT_F32, 2, ws), dwg = dwc;
    pt_tensor xc = put(cpu, PT_F32, m, k, xv), wc = put(cpu, PT_F32, n, k, wv), dyc = put(cpu, PT_F32, m, n, dyv);
    pt_tensor xg = put(gpu, PT_F32, m, k, xv), wg = put(gpu, PT_F32, n, k, wv), dyg = put(gpu, PT_F32, m, n, dyv);
    pt_tensor *outs[] = {&yc, &yg, &dxc, &dxg, &dwc, &dwg};
    for (int i = 0; i < 6; i++) assert_int_equal(backend_alloc(i % 2 ? gpu : cpu, outs[i]), PT_OK);
    assert_int_equal(backend_matmul(cpu, &yc, &xc, &wc, 0.0f), PT_OK);
    assert_int_equal(backend_matmul(gpu, &yg, &xg, &wg, 0.0f), PT_OK);
    assert_int_equal(backend_matmul_bwd_input(cpu, &dxc, &dyc, &wc, 0.0f), PT_OK);
    assert_int_equal(backend_matmul_bwd_input(gpu, &dxg, &dyg, &wg, 0.0f), PT_OK);
    assert_int_equal(backend_matmul_bwd_weight(cpu, &dwc, &dyc, &xc, 0.0f), PT_OK);
    assert_int_equal(backend_matmul_bwd_weight(gpu, &dwg, &dyg, &xg, 0.0f), PT_OK);
    for (int i = 0; i < 6; i += 2) {
        float *c = get(cpu, outs[i]), *g = get(gpu, outs[i + 1]);
        int64_t count = tensor_numel(outs[i]);
        double *cd = malloc(sizeof(double) * (size_t)count);
        for (int64_t j = 0; j < count; j++) cd[j] = c[j];
        double err = rel_err(g, cd, count);
        print_message("cuda vs cpu matmul %d: max relative error %.3g (bf16 operands)\n", i / 2, err);
        assert_true(err < 2e-2);
        free(c);
        free(g);
        free(cd);
        backend_release(cpu, outs[i]);
        backend_release(gpu, outs[i + 1]);
    }
    pt_tensor *ins[] = {&xc, &wc, &dyc, &xg, &wg, &dyg};
    for (int i = 0; i < 6; i++) backend_release(i < 3 ? cpu : gpu, ins[i]);
    free(xv);
    free(wv);
    free(dyv);
    backend_close(cpu);
    backend_close(gpu);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dtype_sizes),        cmocka_unit_test(test_half_conversions),
        cmocka_unit_test(test_block_roundtrip),    cmocka_unit_test(test_kquant_q4_k),
        cmocka_unit_test(test_kquant_q5_k),        cmocka_unit_test(test_kquant_q6_k),
        cmocka_unit_test(test_quant_q5_0),         cmocka_unit_test(test_quant_q5_1),
        cmocka_unit_test(test_dequant_fast_paths), cmocka_unit_test(test_matmul_f32),
        cmocka_unit_test(test_matmul_f16),         cmocka_unit_test(test_matmul_bf16),
        cmocka_unit_test(test_matmul_q8_0),        cmocka_unit_test(test_matmul_q4_0),
        cmocka_unit_test(test_matmul_q4_1),        cmocka_unit_test(test_matmul_bwd_weight), cmocka_unit_test(test_embed_bwd),
        cmocka_unit_test(test_dora_ops),           cmocka_unit_test(test_matmul_shape_errors), cmocka_unit_test(test_allreduce_single_process),
        cmocka_unit_test(test_device_selection),   cmocka_unit_test(test_cuda_matches_cpu),
    };
    return cmocka_run_group_tests_name("backend", tests, NULL, NULL);
}
