/* test_cuda_dequant.c — the CUDA backend's dequantization, on the CPU: cuda/dequant.cu runs its
 * __host__ __device__ value functions (cuda/dequant_formats.h) in a host loop,
 * cuda_dequant_rows_host, and this test proves that loop equal bit for bit (memcmp of the floats)
 * to the CPU reference, quant_dequantize_row (src/backend/quant.c) and nf4_dequantize_rows (src/backend/nf4.c), for
 * every stored format, several shapes and row ranges. Weights are quantized where quant.c can
 * (f16, bf16, Q8_0, Q4_0, Q4_1), made of random bytes with finite fp16 scales for every block format (MXFP4:
 * random E8M0 bytes),
 * random bits for f32/f16/bf16 (every fp16 and bf16 bit pattern is checked once), and
 * nf4_quantize of random values for NF4. Built only with the CUDA backend; needs no GPU. */
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
#include "ptrain/error.h"
#include "ptrain/nf4.h"
#include "ptrain/quant.h"

/* cuda/dequant.cu: rows [r0, r0 + rows) of w (host data) as fp32, by the device's value functions. */
pt_status cuda_dequant_rows_host(const pt_tensor *w, int64_t r0, int64_t rows, float *out);

static uint64_t next_u64(uint64_t *s)
{
    *s = *s * 6364136223846793005ULL + 1442695040888963407ULL;
    return *s >> 11;
}

/* uniform in [-1, 1) */
static float frand(uint64_t *s) { return (float)(next_u64(s) & 0xffffff) / (float)0x1000000 * 2.0f - 1.0f; }

static void wr16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static int64_t block_of(pt_dtype dtype)
{
    switch (dtype) {
    case PT_F32:
    case PT_BF16:
    case PT_F16: return 1;
    case PT_NF4: return 64;
    case PT_Q2_K:
    case PT_Q3_K:
    case PT_Q4_K:
    case PT_Q5_K:
    case PT_Q6_K: return 256;
    default: return 32;
    }
}

/* Byte offsets of the fp16 scale fields (d, and the min when there is one; -1: none) in a block. */
static void scale_fields(pt_dtype dtype, int *a, int *b)
{
    *a = 0, *b = -1;
    switch (dtype) {
    case PT_Q4_1:
    case PT_Q5_1:
    case PT_Q4_K:
    case PT_Q5_K: *b = 2; break;
    case PT_Q2_K: *a = 80, *b = 82; break;
    case PT_Q3_K: *a = 108; break;
    case PT_Q6_K: *a = 208; break;
    case PT_MXFP4: *a = -1; break; /* an E8M0 byte: every one of the 256 random values is a scale */
    default: break;
    }
}

typedef enum { FILL_QUANTIZE, FILL_RANDOM } fill_kind;

/* A host weight [rows, cols] of dtype: quantized from random values (FILL_QUANTIZE, the formats
 * quant_quantize_row and nf4_quantize make), or random bytes whose fp16 scales are finite values in
 * [-2, 2] (FILL_RANDOM: random bits for f32, f16, bf16). */
static pt_tensor make_weight(pt_dtype dtype, int64_t rows, int64_t cols, fill_kind fill, uint64_t seed)
{
    int64_t shape[2] = {rows, cols};
    pt_tensor t = tensor_make(dtype, 2, shape);
    assert_true(t.nbytes > 0);
    t.data = malloc(t.nbytes);
    assert_non_null(t.data);
    uint8_t *p = t.data;
    if (fill == FILL_QUANTIZE) {
        float *x = malloc(sizeof(float) * (size_t)(rows * cols));
        assert_non_null(x);
        for (int64_t r = 0; r < rows; r++) {
            float scale = ldexpf(1.0f, (int)(next_u64(&seed) % 12) - 6); /* rows of different size */
            for (int64_t c = 0; c < cols; c++) x[r * cols + c] = frand(&seed) * scale;
        }
        if (dtype == PT_NF4) {
            if (rows * cols >= 128) memset(x + 64, 0, 64 * sizeof(float)); /* one block of zeros */
            assert_int_equal(nf4_quantize(x, rows, cols, t.data), PT_OK);
        } else {
            size_t row_bytes = dtype_size_bytes(dtype, cols);
            for (int64_t r = 0; r < rows; r++)
                assert_int_equal(quant_quantize_row(dtype, x + r * cols, p + (size_t)r * row_bytes, cols), PT_OK);
        }
        free(x);
        return t;
    }
    for (size_t i = 0; i < t.nbytes; i++) p[i] = (uint8_t)(next_u64(&seed) >> 16);
    if (block_of(dtype) > 1) {
        size_t block_bytes = dtype_size_bytes(dtype, block_of(dtype));
        int a, b;
        scale_fields(dtype, &a, &b);
        for (size_t off = 0; off < t.nbytes; off += block_bytes) {
            if (a >= 0) wr16(p + off + a, quant_f32_to_f16(2.0f * frand(&seed)));
            if (b >= 0) wr16(p + off + b, quant_f32_to_f16(2.0f * frand(&seed)));
        }
    }
    return t;
}

/* The CPU's rows [r0, r0 + n) of w. */
static void cpu_rows(const pt_tensor *w, int64_t r0, int64_t n, float *out)
{
    int64_t cols = w->shape[1];
    if (w->dtype == PT_NF4) {
        assert_int_equal(nf4_dequantize_rows(w->data, w->shape[0], cols, r0, n, out), PT_OK);
        return;
    }
    size_t row_bytes = dtype_size_bytes(w->dtype, cols);
    for (int64_t r = 0; r < n; r++)
        assert_int_equal(quant_dequantize_row(w->dtype, (const uint8_t *)w->data + (size_t)(r0 + r) * row_bytes,
                                              out + r * cols, cols),
                         PT_OK);
}

/* cuda_dequant_rows_host == the CPU, bit for bit, for rows [r0, r0 + n). */
static void check_rows(const pt_tensor *w, int64_t r0, int64_t n)
{
    int64_t cols = w->shape[1];
    size_t bytes = sizeof(float) * (size_t)(n * cols);
    float *want = malloc(bytes), *got = malloc(bytes);
    assert_non_null(want);
    assert_non_null(got);
    cpu_rows(w, r0, n, want);
    memset(got, 0xa5, bytes);
    assert_int_equal(cuda_dequant_rows_host(w, r0, n, got), PT_OK);
    if (memcmp(want, got, bytes) != 0) {
        for (int64_t i = 0; i < n * cols; i++) {
            uint32_t a, b;
            memcpy(&a, want + i, 4);
            memcpy(&b, got + i, 4);
            if (a != b) {
                print_message("%s [%lld, %lld] rows %lld+%lld: value %lld is %08x (%g), the CPU has %08x (%g)\n",
                              dtype_name(w->dtype), (long long)w->shape[0], (long long)cols, (long long)r0,
                              (long long)n, (long long)i, b, (double)got[i], a, (double)want[i]);
                break;
            }
        }
        fail();
    }
    free(want);
    free(got);
}

/* Every row range worth trying of w: all, first, last, a middle run, all but the first. */
static void check_weight(const pt_tensor *w)
{
    int64_t rows = w->shape[0];
    check_rows(w, 0, rows);
    check_rows(w, 0, 1);
    check_rows(w, rows - 1, 1);
    if (rows >= 3) check_rows(w, rows / 3, rows / 2);
    if (rows >= 2) check_rows(w, 1, rows - 1);
    check_rows(w, rows, 0); /* empty */
}

/* rows, and cols in blocks of the format; NF4 [40, 12*64] and [300, 64] have two nested blocks */
static const int64_t shapes[][2] = {{1, 1}, {5, 3}, {17, 7}, {40, 12}, {300, 1}};

static void check_dtype(pt_dtype dtype, fill_kind fill)
{
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int64_t rows = shapes[s][0], cols = shapes[s][1] * block_of(dtype);
        pt_tensor w = make_weight(dtype, rows, cols, fill, 1000 * (uint64_t)dtype + s + 17 * fill);
        check_weight(&w);
        free(w.data);
    }
}

static void test_float_formats(void **state)
{
    (void)state;
    const pt_dtype types[] = {PT_F32, PT_BF16, PT_F16};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        check_dtype(types[i], FILL_RANDOM);
        check_dtype(types[i], FILL_QUANTIZE);
    }
}

/* Every fp16 and bf16 bit pattern (subnormals, infinities, NaN payloads) in one row each. */
static void test_every_half(void **state)
{
    (void)state;
    const pt_dtype types[] = {PT_F16, PT_BF16};
    for (size_t i = 0; i < 2; i++) {
        int64_t shape[2] = {2, 65536};
        pt_tensor w = tensor_make(types[i], 2, shape);
        uint8_t *p = malloc(w.nbytes);
        assert_non_null(p);
        for (uint32_t h = 0; h < 65536; h++) {
            wr16(p + 2 * h, (uint16_t)h);
            wr16(p + 2 * (65536 + h), (uint16_t)(65535 - h));
        }
        w.data = p;
        check_weight(&w);
        free(p);
    }
}

static void test_block32_formats(void **state)
{
    (void)state;
    const pt_dtype quantized[] = {PT_Q8_0, PT_Q4_0, PT_Q4_1};
    const pt_dtype all[] = {PT_Q8_0, PT_Q4_0, PT_Q4_1, PT_Q5_0, PT_Q5_1, PT_MXFP4};
    for (size_t i = 0; i < sizeof quantized / sizeof quantized[0]; i++) check_dtype(quantized[i], FILL_QUANTIZE);
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) check_dtype(all[i], FILL_RANDOM);
}

static void test_k_quants(void **state)
{
    (void)state;
    const pt_dtype types[] = {PT_Q2_K, PT_Q3_K, PT_Q4_K, PT_Q5_K, PT_Q6_K};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) check_dtype(types[i], FILL_RANDOM);
}

static void test_nf4(void **state)
{
    (void)state;
    check_dtype(PT_NF4, FILL_QUANTIZE);
    /* a bigger one: 2048 blocks, 8 nested blocks */
    pt_tensor w = make_weight(PT_NF4, 64, 2048, FILL_QUANTIZE, 99);
    check_weight(&w);
    free(w.data);
}

/* Rows out of range and rows that are not whole blocks fail cleanly. */
static void test_bad_calls(void **state)
{
    (void)state;
    float out[256];
    pt_tensor w = make_weight(PT_Q4_0, 4, 64, FILL_QUANTIZE, 5);
    assert_int_equal(cuda_dequant_rows_host(&w, 3, 2, out), PT_ERR_INTERNAL);
    assert_int_equal(cuda_dequant_rows_host(&w, -1, 1, out), PT_ERR_INTERNAL);
    assert_int_equal(cuda_dequant_rows_host(&w, 0, -1, out), PT_ERR_INTERNAL);
    w.shape[0] = 8, w.shape[1] = 32; /* the same bytes as [8, 32] are fine ... */
    assert_int_equal(cuda_dequant_rows_host(&w, 0, 8, out), PT_OK);
    w.shape[0] = 16, w.shape[1] = 16; /* ... as [16, 16] they are not whole blocks */
    assert_int_equal(cuda_dequant_rows_host(&w, 0, 1, out), PT_ERR_INTERNAL);
    assert_non_null(strstr(err_message(), "not whole"));
    free(w.data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_formats), cmocka_unit_test(test_every_half),
        cmocka_unit_test(test_block32_formats), cmocka_unit_test(test_k_quants),
        cmocka_unit_test(test_nf4), cmocka_unit_test(test_bad_calls),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
