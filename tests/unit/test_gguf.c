/* test_gguf.c — the GGUF reader (src/model/gguf.c) and the GGUF block dequantizers (src/backend/quant.c).
 *
 * GGUF images are built in memory by a small writer below, so every case is exact: a valid v3 and
 * v2 file parse; every metadata value type, string and numeric arrays, tensor infos, data offsets
 * and general.alignment read back; the typed getters accept what fits and refuse the rest with
 * their message. Every bad input gives its exact error and leaves the gguf_file zeroed: each byte
 * prefix of a valid file (must fail cleanly, never crash: the images are exact-size heap copies,
 * so ASan catches any over-read), single-byte mutations of it, wrong magic (safetensors, JSON,
 * HTML, LFS pointer, old GGML, big-endian), versions 1 and 4, absurd counts and lengths, array
 * count overflow, n_dims 5, zero and huge dims, rows that are not whole blocks, misaligned and
 * out-of-range offsets, overlapping tensors, unknown tensor and value types, duplicate keys and
 * tensor names, bad general.alignment values. gguf_open (the mmap path) is checked on a temp
 * file, a missing file, a directory and an empty file, and on the real SmolLM2-135M Q4_1 model
 * when it is present (else the test skips and says why). The dequantizers of Q4_0, Q4_1, Q5_0,
 * Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K are checked against tests/data/gguf/dequant_*,
 * vectors computed by the reference numpy dequantizers of the PyPI gguf package
 * (tests/data/gguf/make_vectors.py). The GGUF writer (src/io/gguf_write.c) is checked by writing
 * files (every metadata kind, copied keys, replaced keys, F32/F16/Q8_0/Q4_K tensors streamed in
 * chunks that cross tensor boundaries, default and set alignment) and reading them back with
 * gguf_open, and by its refusals: bad tensor declarations, too few or too many bytes (no file at
 * the final path, no temporary file left), a missing directory, calls out of order. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptrain/backend.h"
#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/gguf_write.h"
#include "ptrain/quant.h"
#include "tmpdir.h"

/* --- a small GGUF writer --- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static void wput(wbuf *b, const void *d, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void w8(wbuf *b, uint8_t v) { wput(b, &v, 1); }
static void w16(wbuf *b, uint16_t v)
{
    uint8_t t[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    wput(b, t, 2);
}
static void w32(wbuf *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) w8(b, (uint8_t)(v >> (8 * i)));
}
static void w64(wbuf *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) w8(b, (uint8_t)(v >> (8 * i)));
}
static void wf32(wbuf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    w32(b, u);
}
static void wf64(wbuf *b, double f)
{
    uint64_t u;
    memcpy(&u, &f, 8);
    w64(b, u);
}
static void wstr(wbuf *b, const char *s)
{
    w64(b, strlen(s));
    wput(b, s, strlen(s));
}
static void wfree(wbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

static void whdr(wbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    wput(b, "GGUF", 4);
    w32(b, version);
    w64(b, n_tensors);
    w64(b, n_kv);
}
static void kv_head(wbuf *b, const char *key, gguf_type t)
{
    wstr(b, key);
    w32(b, t);
}
static void kv_u32(wbuf *b, const char *key, uint32_t v)
{
    kv_head(b, key, GGUF_TYPE_U32);
    w32(b, v);
}
static void kv_str(wbuf *b, const char *key, const char *v)
{
    kv_head(b, key, GGUF_TYPE_STRING);
    wstr(b, v);
}

/* bytes of n values of a ggml type (the test's own table) */
static uint64_t type_bytes(uint32_t type, uint64_t n)
{
    switch (type) {
    case GGML_TYPE_F32: return n * 4;
    case GGML_TYPE_F16:
    case GGML_TYPE_BF16: return n * 2;
    case GGML_TYPE_Q4_0: return n / 32 * 18;
    case GGML_TYPE_Q4_1: return n / 32 * 20;
    case GGML_TYPE_Q5_0: return n / 32 * 22;
    case GGML_TYPE_Q5_1: return n / 32 * 24;
    case GGML_TYPE_Q8_0: return n / 32 * 34;
    case GGML_TYPE_Q2_K: return n / 256 * 84;
    case GGML_TYPE_Q3_K: return n / 256 * 110;
    case GGML_TYPE_Q4_K: return n / 256 * 144;
    case GGML_TYPE_Q5_K: return n / 256 * 176;
    case GGML_TYPE_Q6_K: return n / 256 * 210;
    case GGML_TYPE_IQ2_XXS: return n / 256 * 66;
    case GGML_TYPE_I64: return n * 8;
    default: fail_msg("type_bytes: no size for type %u", type); return 0;
    }
}

typedef struct {
    const char *name;
    uint32_t n_dims;
    uint64_t dims[4];
    uint32_t type;
    uint64_t offset;
} tinfo;

static uint64_t tinfo_bytes(const tinfo *t)
{
    uint64_t n = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) n *= t->dims[d];
    return type_bytes(t->type, n);
}

static void wtensor(wbuf *b, const tinfo *t)
{
    wstr(b, t->name);
    w32(b, t->n_dims);
    for (uint32_t d = 0; d < t->n_dims; d++) w64(b, t->dims[d]);
    w32(b, t->type);
    w64(b, t->offset);
}

/* A whole image: header, n_kv serialized entries, tensor infos, padding to align, then data
 * (byte i of the data section = (i * 7 + 3) & 0xff) up to the end of the last tensor, or
 * data_len bytes when data_len >= 0. */
static wbuf image(uint32_t version, uint64_t n_kv, const wbuf *kvs, size_t n_t, const tinfo *t, uint64_t align,
                  long data_len)
{
    wbuf b = {0};
    whdr(&b, version, n_t, n_kv);
    if (kvs) wput(&b, kvs->p, kvs->n);
    for (size_t i = 0; i < n_t; i++) wtensor(&b, &t[i]);
    while (b.n % align) w8(&b, 0);
    uint64_t end = 0;
    for (size_t i = 0; i < n_t; i++)
        if (t[i].offset + tinfo_bytes(&t[i]) > end) end = t[i].offset + tinfo_bytes(&t[i]);
    if (data_len >= 0) end = (uint64_t)data_len;
    for (uint64_t i = 0; i < end; i++) w8(&b, (uint8_t)((i * 7 + 3) & 0xff));
    return b;
}

/* The valid test file: one entry of every value type, arrays, and four tensors. */
#define VALID_N_KV 18
static wbuf valid_image(uint32_t version)
{
    wbuf kv = {0};
    kv_str(&kv, "general.architecture", "llama");
    kv_head(&kv, "t.u8", GGUF_TYPE_U8), w8(&kv, 200);
    kv_head(&kv, "t.i8", GGUF_TYPE_I8), w8(&kv, (uint8_t)-100);
    kv_head(&kv, "t.u16", GGUF_TYPE_U16), w16(&kv, 60000);
    kv_head(&kv, "t.i16", GGUF_TYPE_I16), w16(&kv, (uint16_t)-30000);
    kv_u32(&kv, "t.u32", 4000000000u);
    kv_head(&kv, "t.i32", GGUF_TYPE_I32), w32(&kv, (uint32_t)-2000000000);
    kv_head(&kv, "t.f32", GGUF_TYPE_F32), wf32(&kv, 1.5f);
    kv_head(&kv, "t.bool", GGUF_TYPE_BOOL), w8(&kv, 1);
    kv_head(&kv, "t.u64", GGUF_TYPE_U64), w64(&kv, ((uint64_t)1 << 40) + 5);
    kv_head(&kv, "t.i64", GGUF_TYPE_I64), w64(&kv, (uint64_t)-((int64_t)1 << 40));
    kv_head(&kv, "t.f64", GGUF_TYPE_F64), wf64(&kv, 2.25);
    kv_head(&kv, "t.strings", GGUF_TYPE_ARRAY), w32(&kv, GGUF_TYPE_STRING), w64(&kv, 3);
    wstr(&kv, "a"), wstr(&kv, ""), wstr(&kv, "h\xc3\xa9llo");
    kv_head(&kv, "t.ints", GGUF_TYPE_ARRAY), w32(&kv, GGUF_TYPE_I32), w64(&kv, 3);
    w32(&kv, 1), w32(&kv, (uint32_t)-2), w32(&kv, 3);
    kv_head(&kv, "t.floats", GGUF_TYPE_ARRAY), w32(&kv, GGUF_TYPE_F32), w64(&kv, 2);
    wf32(&kv, 0.5f), wf32(&kv, -1.0f);
    kv_head(&kv, "t.empty", GGUF_TYPE_ARRAY), w32(&kv, GGUF_TYPE_U8), w64(&kv, 0);
    kv_head(&kv, "t.bools", GGUF_TYPE_ARRAY), w32(&kv, GGUF_TYPE_BOOL), w64(&kv, 2);
    w8(&kv, 1), w8(&kv, 0);
    kv_u32(&kv, "llama.block_count", 2);
    const tinfo t[] = {
        {"a", 2, {4, 2}, GGML_TYPE_F32, 0},
        {"b", 2, {32, 2}, GGML_TYPE_Q8_0, 32},
        {"blk.0.c", 1, {256}, GGML_TYPE_Q4_K, 128},
        {"d", 3, {256, 1, 1}, GGML_TYPE_IQ2_XXS, 288},
    };
    wbuf b = image(version, VALID_N_KV, &kv, 4, t, 32, -1);
    wfree(&kv);
    return b;
}

/* --- helpers --- */

static const gguf_file zero_file;

/* Open an exact-size heap copy of b (so ASan sees any read past its end). */
static pt_status open_copy(const wbuf *b, size_t n, gguf_file *f)
{
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n) memcpy(copy, b->p, n);
    pt_status st = gguf_open_memory("t.gguf", copy, n, f);
    if (st == PT_OK) assert_ptr_equal(f->map, copy); /* close_copy frees it */
    else free(copy);
    return st;
}

static void close_copy(gguf_file *f)
{
    void *copy = f->map;
    gguf_close(f);
    free(copy);
}

#define expect_error(b, expected) expect_error_((b), (expected), __LINE__)
static void expect_error_(wbuf *b, const char *expected, int line)
{
    gguf_file f;
    pt_status st = open_copy(b, b->n, &f);
    if (st == PT_OK) close_copy(&f);
    if (st != PT_ERR_USER) fail_msg("line %d: status %d, expected PT_ERR_USER (%s)", line, st, expected);
    if (strcmp(err_message(), expected) != 0)
        fail_msg("line %d: wrong message\n  got:      %s\n  expected: %s", line, err_message(), expected);
    assert_memory_equal(&f, &zero_file, sizeof f);
    err_clear();
    wfree(b);
}

/* Read every accessor of an open file (the fuzz target does the same). */
static void touch_all(const gguf_file *f)
{
    volatile double sink = 0;
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len > 100 ? 100 : kv->key.len), kv->key.data);
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f32;
        bool b;
        gguf_str s;
        const gguf_kv *arr;
        (void)gguf_get_u32(f, key, &u32), (void)gguf_get_u64(f, key, &u64), (void)gguf_get_i64(f, key, &i64);
        (void)gguf_get_f32(f, key, &f32), (void)gguf_get_bool(f, key, &b);
        if (gguf_get_str(f, key, &s) == PT_OK && s.len) sink += (uint8_t)s.data[s.len - 1];
        (void)gguf_get_array(f, key, GGUF_TYPE_STRING, &arr);
        for (uint64_t j = 0; j < kv->count && j < 5000; j++) {
            gguf_str e = gguf_array_str(kv, j);
            if (e.len) sink += (uint8_t)e.data[0] + (uint8_t)e.data[e.len - 1];
            sink += (double)gguf_array_int(kv, j) + gguf_array_f32(kv, j);
        }
        err_clear();
    }
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        if (t->nbytes) sink += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
        assert_ptr_equal(gguf_find_tensor(f, "no such tensor"), NULL);
    }
    (void)sink;
}

/* --- valid files --- */

static void check_valid(uint32_t version)
{
    wbuf b = valid_image(version);
    gguf_file f;
    assert_int_equal(open_copy(&b, b.n, &f), PT_OK);
    assert_int_equal(f.version, version);
    assert_int_equal(f.n_kv, VALID_N_KV);
    assert_int_equal(f.n_tensors, 4);
    assert_int_equal(f.alignment, 32);
    assert_int_equal(f.data_offset % 32, 0);
    assert_false(f.mapped);
    assert_string_equal(f.path, "t.gguf");

    gguf_str s;
    assert_int_equal(gguf_get_str(&f, "general.architecture", &s), PT_OK);
    assert_true(gguf_str_eq(s, "llama"));
    assert_false(gguf_str_eq(s, "llam"));
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    bool bo;
    assert_int_equal(gguf_get_u32(&f, "t.u8", &u32), PT_OK), assert_int_equal(u32, 200);
    assert_int_equal(gguf_get_i64(&f, "t.i8", &i64), PT_OK), assert_int_equal(i64, -100);
    assert_int_equal(gguf_get_u32(&f, "t.u16", &u32), PT_OK), assert_int_equal(u32, 60000);
    assert_int_equal(gguf_get_i64(&f, "t.i16", &i64), PT_OK), assert_int_equal(i64, -30000);
    assert_int_equal(gguf_get_u32(&f, "t.u32", &u32), PT_OK), assert_int_equal(u32, 4000000000u);
    assert_int_equal(gguf_get_i64(&f, "t.i32", &i64), PT_OK), assert_int_equal(i64, -2000000000);
    assert_int_equal(gguf_get_f32(&f, "t.f32", &f32), PT_OK), assert_true(f32 == 1.5f);
    assert_int_equal(gguf_get_bool(&f, "t.bool", &bo), PT_OK), assert_true(bo);
    assert_int_equal(gguf_get_u64(&f, "t.u64", &u64), PT_OK), assert_true(u64 == ((uint64_t)1 << 40) + 5);
    assert_int_equal(gguf_get_i64(&f, "t.i64", &i64), PT_OK), assert_true(i64 == -((int64_t)1 << 40));
    assert_int_equal(gguf_get_f32(&f, "t.f64", &f32), PT_OK), assert_true(f32 == 2.25f);
    assert_int_equal(gguf_get_u32(&f, "llama.block_count", &u32), PT_OK), assert_int_equal(u32, 2);

    const gguf_kv *kv = gguf_find(&f, "t.u16");
    assert_non_null(kv);
    assert_int_equal(kv->type, GGUF_TYPE_U16);
    assert_int_equal(kv->count, 1);
    assert_int_equal(kv->value[0] | kv->value[1] << 8, 60000);
    assert_null(gguf_find(&f, "t.u1"));
    assert_null(gguf_find(&f, "t.u166"));

    const gguf_kv *arr;
    assert_int_equal(gguf_get_array(&f, "t.strings", GGUF_TYPE_STRING, &arr), PT_OK);
    assert_int_equal(arr->elem_type, GGUF_TYPE_STRING);
    assert_int_equal(arr->count, 3);
    assert_non_null(arr->items);
    assert_true(gguf_str_eq(gguf_array_str(arr, 0), "a"));
    assert_true(gguf_str_eq(gguf_array_str(arr, 1), ""));
    assert_true(gguf_str_eq(gguf_array_str(arr, 2), "h\xc3\xa9llo"));
    assert_int_equal(gguf_array_str(arr, 3).len, 0); /* out of range: empty */
    assert_int_equal(gguf_array_int(arr, 0), 0);      /* not an integer array */
    assert_int_equal(gguf_get_array(&f, "t.ints", GGUF_TYPE_I32, &arr), PT_OK);
    assert_int_equal(gguf_array_int(arr, 0), 1);
    assert_int_equal(gguf_array_int(arr, 1), -2);
    assert_int_equal(gguf_array_int(arr, 2), 3);
    assert_int_equal(gguf_array_int(arr, 3), 0);
    assert_true(gguf_array_f32(arr, 1) == -2.0f);
    assert_int_equal(gguf_array_str(arr, 0).len, 0);
    assert_int_equal(gguf_get_array(&f, "t.ints", GGUF_TYPE_U64, &arr), PT_OK); /* any integer kind */
    assert_int_equal(gguf_get_array(&f, "t.floats", GGUF_TYPE_F32, &arr), PT_OK);
    assert_true(gguf_array_f32(arr, 0) == 0.5f);
    assert_true(gguf_array_f32(arr, 1) == -1.0f);
    assert_int_equal(gguf_get_array(&f, "t.empty", GGUF_TYPE_U8, &arr), PT_OK);
    assert_int_equal(arr->count, 0);
    assert_int_equal(gguf_get_array(&f, "t.bools", GGUF_TYPE_BOOL, &arr), PT_OK);
    assert_int_equal(gguf_array_int(arr, 0), 1);
    assert_int_equal(gguf_array_int(arr, 1), 0);

    static const struct {
        const char *name;
        uint32_t n_dims;
        uint64_t d0, d1;
        uint32_t type;
        pt_dtype dtype;
        uint64_t offset;
        size_t nbytes;
    } want[] = {
        {"a", 2, 4, 2, GGML_TYPE_F32, PT_F32, 0, 32},
        {"b", 2, 32, 2, GGML_TYPE_Q8_0, PT_Q8_0, 32, 68},
        {"blk.0.c", 1, 256, 1, GGML_TYPE_Q4_K, PT_Q4_K, 128, 144},
        {"d", 3, 256, 1, GGML_TYPE_IQ2_XXS, PT_DTYPE_COUNT, 288, 66},
    };
    const uint8_t *base = f.map;
    for (int i = 0; i < 4; i++) {
        const gguf_tensor *t = gguf_find_tensor(&f, want[i].name);
        assert_ptr_equal(t, &f.tensors[i]);
        assert_int_equal(t->n_dims, want[i].n_dims);
        assert_int_equal(t->dims[0], want[i].d0);
        assert_int_equal(t->dims[1], want[i].d1);
        assert_int_equal(t->dims[2], 1);
        assert_int_equal(t->dims[3], 1);
        assert_int_equal(t->ggml_type, want[i].type);
        assert_int_equal(t->dtype, want[i].dtype);
        assert_int_equal(t->offset, want[i].offset);
        assert_int_equal(t->nbytes, want[i].nbytes);
        assert_ptr_equal(t->data, base + f.data_offset + want[i].offset);
        const uint8_t *d = t->data;
        for (size_t k = 0; k < t->nbytes; k++) assert_int_equal(d[k], ((want[i].offset + k) * 7 + 3) & 0xff);
    }
    assert_null(gguf_find_tensor(&f, "blk.0"));
    touch_all(&f);
    close_copy(&f);
    assert_memory_equal(&f, &zero_file, sizeof f);
    gguf_close(&f); /* closing twice is harmless */
    wfree(&b);
}

static void test_valid_v3(void **state)
{
    (void)state;
    check_valid(3);
}

static void test_valid_v2(void **state)
{
    (void)state;
    check_valid(2);
}

static void test_alignment(void **state)
{
    (void)state;
    static const struct {
        gguf_type type;
        uint64_t value;
    } ok[] = {{GGUF_TYPE_U32, 64}, {GGUF_TYPE_U64, 1}, {GGUF_TYPE_U8, 128}, {GGUF_TYPE_I32, 256}};
    for (size_t c = 0; c < sizeof ok / sizeof ok[0]; c++) {
        uint64_t a = ok[c].value;
        wbuf kv = {0};
        kv_head(&kv, "general.alignment", ok[c].type);
        if (ok[c].type == GGUF_TYPE_U8) w8(&kv, (uint8_t)a);
        else if (ok[c].type == GGUF_TYPE_U64) w64(&kv, a);
        else w32(&kv, (uint32_t)a);
        tinfo t[] = {{"x", 1, {3}, GGML_TYPE_F32, 0}, {"y", 1, {1}, GGML_TYPE_F32, a > 12 ? a : 12}};
        wbuf b = image(3, 1, &kv, 2, t, a, -1);
        gguf_file f;
        assert_int_equal(open_copy(&b, b.n, &f), PT_OK);
        assert_int_equal(f.alignment, a);
        assert_int_equal(f.data_offset % a, 0);
        assert_int_equal(f.tensors[1].offset, t[1].offset);
        close_copy(&f);
        wfree(&kv);
        wfree(&b);
    }
    /* no tensors: the data section may be missing altogether */
    wbuf kv = {0};
    kv_u32(&kv, "x", 1);
    wbuf b = image(3, 1, &kv, 0, NULL, 1, 0);
    gguf_file f;
    assert_int_equal(open_copy(&b, b.n, &f), PT_OK);
    assert_int_equal(f.n_tensors, 0);
    close_copy(&f);
    wfree(&kv);
    wfree(&b);
}

static void test_getters(void **state)
{
    (void)state;
    wbuf b = valid_image(3);
    gguf_file f;
    assert_int_equal(open_copy(&b, b.n, &f), PT_OK);
    uint32_t u32 = 7;
    float f32 = 7;
    bool bo = false;
    gguf_str s = {"keep", 4};
    uint64_t u64;
    int64_t i64;
    const gguf_kv *arr;
    /* optional getters leave the output alone when the key is absent */
    assert_int_equal(gguf_opt_u32(&f, "nope", &u32), PT_OK), assert_int_equal(u32, 7);
    assert_int_equal(gguf_opt_f32(&f, "nope", &f32), PT_OK), assert_true(f32 == 7);
    assert_int_equal(gguf_opt_bool(&f, "nope", &bo), PT_OK), assert_false(bo);
    assert_int_equal(gguf_opt_str(&f, "nope", &s), PT_OK), assert_true(gguf_str_eq(s, "keep"));
    assert_int_equal(gguf_opt_u32(&f, "llama.block_count", &u32), PT_OK), assert_int_equal(u32, 2);
    assert_int_equal(gguf_opt_str(&f, "general.architecture", &s), PT_OK), assert_true(gguf_str_eq(s, "llama"));
    assert_int_equal(gguf_get_f32(&f, "t.u8", &f32), PT_OK), assert_true(f32 == 200); /* ints convert */

    static const struct {
        int which;
        const char *key;
        const char *msg;
    } bad[] = {
        {0, "nope",
         "t.gguf: metadata key 'nope' is missing: the file does not describe a complete model (convert it again "
         "with a current llama.cpp)"},
        {0, "general.architecture",
         "t.gguf: metadata key 'general.architecture' has type string, expected an unsigned integer: the file "
         "is not a model ptrain understands"},
        {0, "t.i8", "t.gguf: metadata key 't.i8' = -100 does not fit an unsigned 32-bit integer"},
        {0, "t.u64", "t.gguf: metadata key 't.u64' = 1099511627781 does not fit an unsigned 32-bit integer"},
        {1, "t.u32",
         "t.gguf: metadata key 't.u32' has type u32, expected a string: the file is not a model ptrain "
         "understands"},
        {1, "t.strings",
         "t.gguf: metadata key 't.strings' has type array of strings, expected a string: the file is not a "
         "model ptrain understands"},
        {2, "t.strings",
         "t.gguf: metadata key 't.strings' has type array of strings, expected a number: the file is not a "
         "model ptrain understands"},
        {2, "t.bool",
         "t.gguf: metadata key 't.bool' has type bool, expected a number: the file is not a model ptrain "
         "understands"},
        {3, "t.u8",
         "t.gguf: metadata key 't.u8' has type u8, expected a bool: the file is not a model ptrain understands"},
        {4, "t.i64", "t.gguf: metadata key 't.i64' = -1099511627776 is negative, expected an unsigned integer"},
        {5, "t.f32",
         "t.gguf: metadata key 't.f32' has type f32, expected an integer: the file is not a model ptrain "
         "understands"},
        {6, "t.ints",
         "t.gguf: metadata key 't.ints' has type array of i32, expected an array of strings: the file is not a "
         "model ptrain understands"},
        {7, "t.strings",
         "t.gguf: metadata key 't.strings' has type array of strings, expected an array of f32: the file is not "
         "a model ptrain understands"},
        {8, "t.u32",
         "t.gguf: metadata key 't.u32' has type u32, expected an array of integers: the file is not a model "
         "ptrain understands"},
        {9, "t.floats",
         "t.gguf: metadata key 't.floats' has type array of f32, expected an array of bool: the file is not a "
         "model ptrain understands"},
        {10, "general.architecture",
         "t.gguf: metadata key 'general.architecture' has type string, expected an unsigned integer: the file "
         "is not a model ptrain understands"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        pt_status st = PT_OK;
        switch (bad[i].which) {
        case 0: st = gguf_get_u32(&f, bad[i].key, &u32); break;
        case 1: st = gguf_get_str(&f, bad[i].key, &s); break;
        case 2: st = gguf_get_f32(&f, bad[i].key, &f32); break;
        case 3: st = gguf_get_bool(&f, bad[i].key, &bo); break;
        case 4: st = gguf_get_u64(&f, bad[i].key, &u64); break;
        case 5: st = gguf_get_i64(&f, bad[i].key, &i64); break;
        case 6: st = gguf_get_array(&f, bad[i].key, GGUF_TYPE_STRING, &arr); break;
        case 7: st = gguf_get_array(&f, bad[i].key, GGUF_TYPE_F32, &arr); break;
        case 8: st = gguf_get_array(&f, bad[i].key, GGUF_TYPE_I32, &arr); break;
        case 9: st = gguf_get_array(&f, bad[i].key, GGUF_TYPE_BOOL, &arr); break;
        case 10: st = gguf_opt_u32(&f, bad[i].key, &u32); break;
        }
        assert_int_equal(st, PT_ERR_USER);
        if (strcmp(err_message(), bad[i].msg) != 0)
            fail_msg("case %zu: got\n  %s\nexpected\n  %s", i, err_message(), bad[i].msg);
    }
    assert_int_equal(u32, 2); /* failed getters leave the output alone */
    err_clear();

    /* type metadata */
    const char *name = NULL;
    uint32_t block = 0, bytes = 0;
    assert_true(gguf_ggml_type_info(GGML_TYPE_Q6_K, &name, &block, &bytes));
    assert_string_equal(name, "q6_k"), assert_int_equal(block, 256), assert_int_equal(bytes, 210);
    assert_false(gguf_ggml_type_info(4, &name, &block, &bytes));
    assert_false(gguf_ggml_type_info(31, NULL, NULL, NULL));
    assert_false(gguf_ggml_type_info(1u << 31, NULL, NULL, NULL));
    assert_int_equal(gguf_ggml_dtype(GGML_TYPE_Q5_K), PT_Q5_K);
    assert_int_equal(gguf_ggml_dtype(GGML_TYPE_IQ4_XS), PT_DTYPE_COUNT);
    assert_int_equal(gguf_ggml_dtype(1000), PT_DTYPE_COUNT);
    assert_string_equal(gguf_type_name(GGUF_TYPE_STRING), "string");
    assert_string_equal(gguf_type_name((gguf_type)13), "invalid");
    close_copy(&f);
    wfree(&b);
}

/* --- bad inputs --- */

/* Every proper prefix of a valid file fails with a truncation message; never a crash. */
static void test_truncated_prefixes(void **state)
{
    (void)state;
    wbuf b = valid_image(3);
    for (size_t n = 0; n < b.n; n++) {
        gguf_file f;
        pt_status st = open_copy(&b, n, &f);
        if (st == PT_OK) {
            close_copy(&f);
            fail_msg("prefix of %zu of %zu bytes parsed", n, b.n);
        }
        assert_int_equal(st, PT_ERR_USER);
        const char *m = err_message();
        if (n == 0)
            assert_string_equal(m, "t.gguf: the file is empty (0 bytes): the download failed; fetch the file again");
        else if (strncmp(m, "t.gguf: truncated at byte ", 26) != 0 || !strstr(m, "fetch the file again"))
            fail_msg("prefix of %zu bytes: %s", n, m);
        assert_memory_equal(&f, &zero_file, sizeof f);
    }
    err_clear();
    wfree(&b);
}

/* Each byte of the valid file set to a few values: open must succeed or fail with PT_ERR_USER. */
static void test_mutations(void **state)
{
    (void)state;
    wbuf b = valid_image(3);
    static const uint8_t vals[] = {0x00, 0xff, 0x80, 0x7f, 0x05};
    int ok = 0, bad = 0;
    for (size_t i = 0; i < b.n; i++) {
        uint8_t keep = b.p[i];
        for (size_t v = 0; v < sizeof vals; v++) {
            b.p[i] = vals[v];
            gguf_file f;
            pt_status st = open_copy(&b, b.n, &f);
            if (st == PT_OK) {
                touch_all(&f);
                close_copy(&f);
                ok++;
            } else {
                assert_int_equal(st, PT_ERR_USER);
                assert_memory_equal(&f, &zero_file, sizeof f);
                bad++;
            }
        }
        b.p[i] = keep;
    }
    assert_true(ok > 0 && bad > 0);
    err_clear();
    wfree(&b);
}

static wbuf raw(const void *d, size_t n)
{
    wbuf b = {0};
    wput(&b, d, n);
    return b;
}

static void test_bad_magic(void **state)
{
    (void)state;
    wbuf b = raw("GGML\3\0\0\0", 8);
    expect_error(&b, "t.gguf: not a GGUF file: it starts with bytes 47 47 4d 4c, not \"GGUF\"; give the path of a "
                     ".gguf model file");
    b = raw("GX", 2);
    expect_error(&b, "t.gguf: not a GGUF file: it starts with bytes 47 58, not \"GGUF\"; give the path of a .gguf "
                     "model file");
    b = raw("GGU", 3);
    expect_error(&b, "t.gguf: truncated at byte 0 of 3: reading the header (magic and version) needs 8 bytes, "
                     "only 3 remain; the download is incomplete, fetch the file again");
    b = (wbuf){0};
    w64(&b, 20), wput(&b, "{\"a\":{\"dtype\":\"F32\"}}", 20);
    expect_error(&b, "t.gguf: not a GGUF file: it looks like a safetensors file (an 8-byte header length, then "
                     "JSON); give the path of a .gguf file, or convert the model with llama.cpp's "
                     "convert_hf_to_gguf.py");
    b = raw("  {\"architectures\": [\"LlamaForCausalLM\"]}", 42);
    expect_error(&b, "t.gguf: not a GGUF file: it starts with '{' and looks like JSON (a config, tokenizer or "
                     "index file?); give the path of the .gguf model file");
    b = raw("<!DOCTYPE html><html>", 21);
    expect_error(&b, "t.gguf: not a GGUF file: it looks like an HTML page, probably an error page saved by a "
                     "failed download; fetch the file again");
    const char *lfs = "version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 98362432\n";
    b = raw(lfs, strlen(lfs));
    expect_error(&b, "t.gguf: not a GGUF file: it is a Git LFS pointer, not the model itself; run `git lfs pull` "
                     "or download the file directly");
    b = raw("PK\3\4\0\0\0\0", 8);
    expect_error(&b, "t.gguf: not a GGUF file: it is a zip archive (a PyTorch .bin/.pt checkpoint?); convert the "
                     "model to GGUF with llama.cpp's convert_hf_to_gguf.py");
    b = raw("tjgg\1\0\0\0", 8);
    expect_error(&b, "t.gguf: not a GGUF file: it is an old GGML/GGJT model from before GGUF (2023); convert it "
                     "to GGUF with a current llama.cpp");
    b = raw("FUGG\0\0\0\3", 8);
    expect_error(&b, "t.gguf: a big-endian GGUF file; ptrain reads little-endian GGUF only: convert it with "
                     "gguf-convert-endian (PyPI package gguf)");
    b = raw("GGUF\0\0\0\3", 8);
    expect_error(&b, "t.gguf: a big-endian GGUF file (version 3); ptrain reads little-endian GGUF only: convert "
                     "it with gguf-convert-endian (PyPI package gguf)");
}

static void test_bad_version(void **state)
{
    (void)state;
    wbuf b = valid_image(1);
    expect_error(&b, "t.gguf: GGUF version 1 (the 2023 pre-release format) is not supported; ptrain reads "
                     "versions 2 and 3: convert the model again with a current llama.cpp");
    b = valid_image(4);
    expect_error(&b, "t.gguf: GGUF version 4 is not supported; ptrain reads versions 2 and 3 (the file is newer "
                     "than this ptrain, or corrupt)");
    b = valid_image(0);
    expect_error(&b, "t.gguf: GGUF version 0 is not supported; ptrain reads versions 2 and 3 (the file is newer "
                     "than this ptrain, or corrupt)");
}

static void test_absurd_counts(void **state)
{
    (void)state;
    wbuf b = {0};
    whdr(&b, 3, 0, (uint64_t)1 << 62);
    kv_u32(&b, "x", 1);
    expect_error(&b, "t.gguf: the header announces 4611686018427387904 metadata entries and 0 tensors, more than "
                     "any file could hold: the file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, UINT64_MAX, 1);
    kv_u32(&b, "x", 1);
    expect_error(&b, "t.gguf: the header announces 1 metadata entries and 18446744073709551615 tensors, more than "
                     "any file could hold: the file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, 2, 3);
    kv_u32(&b, "x", 1);
    expect_error(&b, "t.gguf: truncated at byte 24 of 41: the header announces 3 metadata entries and 2 tensors, "
                     "which need at least 92 more bytes; the download is incomplete, fetch the file again");

    /* a key length past the end of the file, absurd and plausible */
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    w64(&b, (uint64_t)1 << 63), wput(&b, "key", 3), w32(&b, GGUF_TYPE_U8), w8(&b, 0);
    expect_error(&b, "t.gguf: the key of metadata entry 1 of 1 at byte 24 would need more than 2^40 bytes: the "
                     "file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    w64(&b, 1000), wput(&b, "key", 3), w32(&b, GGUF_TYPE_U8), w8(&b, 0);
    expect_error(&b, "t.gguf: truncated at byte 24 of 40: reading the key of metadata entry 1 of 1 needs 1008 "
                     "bytes, only 16 remain; the download is incomplete, fetch the file again");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    w64(&b, UINT64_MAX), wput(&b, "key", 3), w32(&b, GGUF_TYPE_U8), w8(&b, 0);
    expect_error(&b, "t.gguf: the key of metadata entry 1 of 1 at byte 24 would need more than 2^40 bytes: the "
                     "file is corrupt");
    /* a string value past the end */
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "k", GGUF_TYPE_STRING), w64(&b, 5), wput(&b, "abc", 3);
    expect_error(&b, "t.gguf: truncated at byte 37 of 48: reading the string value of key 'k' needs 13 bytes, "
                     "only 11 remain; the download is incomplete, fetch the file again");
    /* array counts whose byte size overflows or is absurd */
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "arr", GGUF_TYPE_ARRAY), w32(&b, GGUF_TYPE_U32), w64(&b, (uint64_t)1 << 62), w32(&b, 1);
    expect_error(&b, "t.gguf: array 'arr' of 4611686018427387904 u32 values at byte 51 would need more than 2^40 "
                     "bytes: the file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "arr", GGUF_TYPE_ARRAY), w32(&b, GGUF_TYPE_F64), w64(&b, UINT64_MAX / 4), w32(&b, 1);
    expect_error(&b, "t.gguf: array 'arr' of 4611686018427387903 f64 values at byte 51 would need more than 2^40 "
                     "bytes: the file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "arr", GGUF_TYPE_ARRAY), w32(&b, GGUF_TYPE_STRING), w64(&b, (uint64_t)1 << 61), wstr(&b, "x");
    expect_error(&b, "t.gguf: array 'arr' of 2305843009213693952 strings at byte 51 would need more than 2^40 "
                     "bytes: the file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "arr", GGUF_TYPE_ARRAY), w32(&b, GGUF_TYPE_I16), w64(&b, 10), w16(&b, 1);
    expect_error(&b, "t.gguf: truncated at byte 51 of 53: reading array 'arr' of 10 i16 values needs 20 bytes, "
                     "only 2 remain; the download is incomplete, fetch the file again");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "tok", GGUF_TYPE_ARRAY), w32(&b, GGUF_TYPE_STRING), w64(&b, 3), wstr(&b, "a"), w64(&b, 100);
    wput(&b, "bcdefgh", 7);
    expect_error(&b, "t.gguf: truncated at byte 60 of 75: reading string 2 of 3 of array 'tok' needs 108 bytes, "
                     "only 15 remain; the download is incomplete, fetch the file again");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "tok", GGUF_TYPE_ARRAY), w32(&b, GGUF_TYPE_STRING), w64(&b, 2), wstr(&b, "a");
    w64(&b, (uint64_t)-4), wput(&b, "bcdefgh", 7);
    expect_error(&b, "t.gguf: string 2 of 2 of array 'tok' at byte 60 would need more than 2^40 bytes: the file "
                     "is corrupt");
}

static void test_bad_values(void **state)
{
    (void)state;
    wbuf b = {0};
    whdr(&b, 3, 0, 1);
    w64(&b, 0), w32(&b, GGUF_TYPE_U16), w16(&b, 0);
    expect_error(&b, "t.gguf: metadata entry 1 of 1 (at byte 24) has an empty key: the file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "k", (gguf_type)13), w64(&b, 0);
    expect_error(&b, "t.gguf: key 'k' has unknown value type 13: the file is corrupt or from a newer GGUF version");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "k", GGUF_TYPE_ARRAY), w32(&b, 99), w64(&b, 0);
    expect_error(&b, "t.gguf: array 'k' has unknown element type 99: the file is corrupt or from a newer GGUF "
                     "version");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "k", GGUF_TYPE_ARRAY), w32(&b, GGUF_TYPE_ARRAY), w64(&b, 0);
    expect_error(&b, "t.gguf: key 'k' is an array of arrays, which GGUF models do not use: the file is corrupt");
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    kv_head(&b, "k", GGUF_TYPE_U64), w32(&b, 0);
    expect_error(&b, "t.gguf: truncated at byte 37 of 41: reading the u64 value of key 'k' needs 8 bytes, only 4 "
                     "remain; the download is incomplete, fetch the file again");
    /* names in messages are shown escaped (\n), and a long one by its start and end with its length */
    b = (wbuf){0};
    whdr(&b, 3, 0, 1);
    char key[300];
    memset(key, 'k', sizeof key - 1), key[sizeof key - 1] = '\0', key[1] = '\n';
    kv_head(&b, key, (gguf_type)200);
    char want[400];
    snprintf(want, sizeof want, "t.gguf: key 'k\\n%.65s…(299 bytes)…%.68s' has unknown value type 200: the file is "
             "corrupt or from a newer GGUF version", key + 2, key + 2);
    expect_error(&b, want);
}

static void test_duplicates(void **state)
{
    (void)state;
    wbuf kv = {0};
    kv_u32(&kv, "a", 1), kv_u32(&kv, "dup", 2), kv_str(&kv, "b", "x"), kv_u32(&kv, "dup", 3);
    wbuf b = image(3, 4, &kv, 0, NULL, 32, 0);
    expect_error(&b, "t.gguf: key 'dup' appears twice (metadata entries 2 and 4): the file is corrupt");
    wfree(&kv);
    tinfo t[] = {{"w", 1, {8}, GGML_TYPE_F32, 0}, {"v", 1, {8}, GGML_TYPE_F32, 32}, {"w", 1, {8}, GGML_TYPE_F32, 64}};
    b = image(3, 0, NULL, 3, t, 32, -1);
    expect_error(&b, "t.gguf: tensor 'w' appears twice (tensors 1 and 3): the file is corrupt");
}

static void test_bad_tensors(void **state)
{
    (void)state;
    wbuf b = {0};
    whdr(&b, 3, 1, 0);
    wstr(&b, "big"), w32(&b, 5);
    for (int i = 0; i < 5; i++) w64(&b, 1);
    w32(&b, GGML_TYPE_F32), w64(&b, 0);
    expect_error(&b, "t.gguf: tensor 'big' has 5 dimensions; GGUF allows at most 4: the file is corrupt");
    tinfo t[] = {{"z", 2, {4, 0}, GGML_TYPE_F32, 0}};
    b = image(3, 0, NULL, 1, t, 32, 64);
    expect_error(&b, "t.gguf: tensor 'z' has a dimension of size 0 (dims[1]): the file is corrupt");
    tinfo h[] = {{"huge", 3, {(uint64_t)1 << 32, (uint64_t)1 << 31, 2}, GGML_TYPE_F32, 0}};
    b = image(3, 0, NULL, 1, h, 32, 64);
    expect_error(&b, "t.gguf: tensor 'huge' has dimensions 4294967296 x 2147483648 x 2 x 1, more than 2^63 values: "
                     "the file is corrupt");
    tinfo h2[] = {{"h2", 1, {UINT64_MAX}, GGML_TYPE_F32, 0}};
    b = image(3, 0, NULL, 1, h2, 32, 64);
    expect_error(&b, "t.gguf: tensor 'h2' has dimensions 18446744073709551615 x 1 x 1 x 1, more than 2^63 values: "
                     "the file is corrupt");
    tinfo h3[] = {{"h3", 2, {(uint64_t)1 << 31, (uint64_t)1 << 30}, GGML_TYPE_I64, 0}};
    b = image(3, 0, NULL, 1, h3, 32, 64);
    expect_error(&b, "t.gguf: tensor 'h3' (i64, 2305843009213693952 values) would take more than 2^63 bytes: the "
                     "file is corrupt");
    tinfo r[] = {{"rows", 2, {33, 2}, GGML_TYPE_Q4_0, 0}};
    b = image(3, 0, NULL, 1, r, 32, 64);
    expect_error(&b, "t.gguf: tensor 'rows' (q4_0) has rows of 33 values, not a multiple of the q4_0 block of 32: "
                     "the file is corrupt");
    tinfo k[] = {{"k", 1, {576}, GGML_TYPE_Q4_K, 0}};
    b = image(3, 0, NULL, 1, k, 32, 1024);
    expect_error(&b, "t.gguf: tensor 'k' (q4_k) has rows of 576 values, not a multiple of the q4_k block of 256: "
                     "the file is corrupt");
    tinfo u[] = {{"a", 1, {8}, GGML_TYPE_F32, 0}, {"odd", 1, {8}, 31, 32}};
    wbuf c = {0};
    whdr(&c, 3, 2, 0), wtensor(&c, &u[0]), wtensor(&c, &u[1]);
    expect_error(&c, "t.gguf: tensor 'odd' has unknown ggml type id 31: the file is corrupt or uses a tensor type "
                     "newer than this ptrain");
    c = (wbuf){0};
    u[1].type = 100000;
    whdr(&c, 3, 2, 0), wtensor(&c, &u[0]), wtensor(&c, &u[1]);
    expect_error(&c, "t.gguf: tensor 'odd' has unknown ggml type id 100000: the file is corrupt or uses a tensor "
                     "type newer than this ptrain");
    c = (wbuf){0};
    whdr(&c, 3, 1, 0), wstr(&c, ""), w32(&c, 1), w64(&c, 1), w32(&c, 0), w64(&c, 0);
    expect_error(&c, "t.gguf: tensor info 1 of 1 (at byte 24) has an empty name: the file is corrupt");
    c = (wbuf){0};
    whdr(&c, 3, 1, 0), wstr(&c, "t"), w32(&c, 2), w64(&c, 1), w64(&c, 1), w32(&c, 0);
    expect_error(&c, "t.gguf: truncated at byte 37 of 57: reading the shape, type and offset of tensor 't' needs "
                     "28 bytes, only 20 remain; the download is incomplete, fetch the file again");
}

static void test_bad_offsets(void **state)
{
    (void)state;
    tinfo m[] = {{"a", 1, {4}, GGML_TYPE_F32, 0}, {"mis", 1, {4}, GGML_TYPE_F32, 16}};
    wbuf b = image(3, 0, NULL, 2, m, 32, -1);
    expect_error(&b, "t.gguf: tensor 'mis' starts at data offset 16, which is not a multiple of the alignment 32: "
                     "the file is corrupt");
    wbuf kv = {0};
    kv_u32(&kv, "general.alignment", 64);
    tinfo m2[] = {{"a", 1, {4}, GGML_TYPE_F32, 0}, {"mis", 1, {4}, GGML_TYPE_F32, 32}};
    b = image(3, 1, &kv, 2, m2, 64, -1);
    wfree(&kv);
    expect_error(&b, "t.gguf: tensor 'mis' starts at data offset 32, which is not a multiple of the alignment 64: "
                     "the file is corrupt");
    /* data past the end: a plausible offset reads as a truncated download, an absurd one as corruption */
    tinfo o[] = {{"a", 1, {4}, GGML_TYPE_F32, 0}, {"far", 2, {64, 4}, GGML_TYPE_F32, 1 << 20}};
    b = image(3, 0, NULL, 2, o, 32, 64);
    expect_error(&b, "t.gguf: truncated at byte 192 of 1049728: the data of tensor 'far' (f32, 1024 bytes at byte "
                     "1048704) runs past the end of the file; the download is incomplete, fetch the file again");
    tinfo o2[] = {{"a", 1, {4}, GGML_TYPE_F32, 0}, {"far", 1, {4}, GGML_TYPE_F32, (uint64_t)1 << 55}};
    b = image(3, 0, NULL, 2, o2, 32, 64);
    expect_error(&b, "t.gguf: tensor 'far' (f32, 16 bytes) is placed at data offset 36028797018963968, far past the "
                     "end of the file (160 bytes): the file is corrupt");
    tinfo o3[] = {{"x", 1, {4}, GGML_TYPE_F32, (uint64_t)INT64_MAX + 1}};
    b = image(3, 0, NULL, 1, o3, 32, 64);
    expect_error(&b, "t.gguf: tensor 'x' has data offset 9223372036854775808, past any possible file: the file is "
                     "corrupt");
    tinfo o4[] = {{"a", 1, {8}, GGML_TYPE_F32, 0}, {"b", 1, {8}, GGML_TYPE_F32, 32}};
    b = image(3, 0, NULL, 2, o4, 32, 48);
    expect_error(&b, "t.gguf: truncated at byte 144 of 160: the data of tensor 'b' (f32, 32 bytes at byte 128) "
                     "runs past the end of the file; the download is incomplete, fetch the file again");
}

static void test_overlap(void **state)
{
    (void)state;
    tinfo v[] = {{"x", 1, {8}, GGML_TYPE_F32, 64}, {"y", 1, {24}, GGML_TYPE_F32, 0}, {"z", 1, {8}, GGML_TYPE_F32, 96}};
    wbuf b = image(3, 0, NULL, 3, v, 32, -1);
    expect_error(&b, "t.gguf: tensors 'y' (data bytes 0..96) and 'x' (data bytes 64..96) overlap: the file is "
                     "corrupt");
    tinfo same[] = {{"p", 1, {8}, GGML_TYPE_F32, 32}, {"q", 1, {8}, GGML_TYPE_F32, 32}};
    b = image(3, 0, NULL, 2, same, 32, -1);
    expect_error(&b, "t.gguf: tensors 'p' (data bytes 32..64) and 'q' (data bytes 32..64) overlap: the file is "
                     "corrupt");
    /* touching is fine */
    tinfo touch[] = {{"p", 1, {8}, GGML_TYPE_F32, 32}, {"q", 1, {8}, GGML_TYPE_F32, 0}};
    b = image(3, 0, NULL, 2, touch, 32, -1);
    gguf_file f;
    assert_int_equal(open_copy(&b, b.n, &f), PT_OK);
    close_copy(&f);
    wfree(&b);
}

static void test_bad_alignment(void **state)
{
    (void)state;
    static const struct {
        gguf_type type;
        uint64_t value;
        const char *msg;
    } cases[] = {
        {GGUF_TYPE_U32, 0,
         "t.gguf: general.alignment = 0 is not a power of two between 1 and 2^30: the file is corrupt (GGUF "
         "writers use 32)"},
        {GGUF_TYPE_U32, 48,
         "t.gguf: general.alignment = 48 is not a power of two between 1 and 2^30: the file is corrupt (GGUF "
         "writers use 32)"},
        {GGUF_TYPE_U64, (uint64_t)1 << 40,
         "t.gguf: general.alignment = 1099511627776 is not a power of two between 1 and 2^30: the file is "
         "corrupt (GGUF writers use 32)"},
        {GGUF_TYPE_I32, (uint32_t)-32,
         "t.gguf: general.alignment = -32 is not a power of two between 1 and 2^30: the file is corrupt (GGUF "
         "writers use 32)"},
        {GGUF_TYPE_F32, 0,
         "t.gguf: general.alignment has type f32; it must be an unsigned integer (a power of two, usually 32): "
         "the file is corrupt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        wbuf kv = {0};
        kv_head(&kv, "general.alignment", cases[i].type);
        if (cases[i].type == GGUF_TYPE_U64) w64(&kv, cases[i].value);
        else w32(&kv, (uint32_t)cases[i].value);
        tinfo t[] = {{"x", 1, {8}, GGML_TYPE_F32, 0}};
        wbuf b = image(3, 1, &kv, 1, t, 32, -1);
        wfree(&kv);
        expect_error(&b, cases[i].msg);
    }
}

/* --- gguf_open: the mmap path --- */

static char tmpdir[TMPDIR_SIZE];

static int setup_tmpdir(void **state)
{
    (void)state;
    return tmpdir_create(tmpdir, sizeof tmpdir, "test_gguf");
}

static int remove_tmpdir(void **state)
{
    (void)state;
    return tmpdir_remove(tmpdir);
}

static void write_file(const char *path, const void *d, size_t n)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    if (n) assert_int_equal(fwrite(d, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
}

static void test_open_file(void **state)
{
    (void)state;
    char path[128], msg[512];
    wbuf b = valid_image(3);
    snprintf(path, sizeof path, "%s/ok.gguf", tmpdir);
    write_file(path, b.p, b.n);
    gguf_file f;
    assert_int_equal(gguf_open(path, &f), PT_OK);
    assert_true(f.mapped);
    assert_int_equal(f.size, b.n);
    assert_string_equal(f.path, path);
    assert_int_equal(f.n_tensors, 4);
    assert_memory_equal(f.tensors[0].data, b.p + f.data_offset, 32);
    touch_all(&f);
    gguf_close(&f);
    assert_memory_equal(&f, &zero_file, sizeof f);

    snprintf(path, sizeof path, "%s/bad.gguf", tmpdir);
    write_file(path, b.p, b.n - 1);
    assert_int_equal(gguf_open(path, &f), PT_ERR_USER);
    snprintf(msg, sizeof msg, "%s: truncated at byte %zu of %zu: the data of tensor 'd' (iq2_xxs, 66 bytes at byte "
             "%zu) runs past the end of the file; the download is incomplete, fetch the file again",
             path, b.n - 1, b.n, b.n - 66);
    assert_string_equal(err_message(), msg);
    assert_memory_equal(&f, &zero_file, sizeof f);

    snprintf(path, sizeof path, "%s/empty.gguf", tmpdir);
    write_file(path, "", 0);
    assert_int_equal(gguf_open(path, &f), PT_ERR_USER);
    snprintf(msg, sizeof msg, "%s: the file is empty (0 bytes): the download failed; fetch the file again", path);
    assert_string_equal(err_message(), msg);

    snprintf(path, sizeof path, "%s/missing.gguf", tmpdir);
    assert_int_equal(gguf_open(path, &f), PT_ERR_USER);
    snprintf(msg, sizeof msg,
             "%s: cannot open the model file: No such file or directory (check model.path, or fetch the model "
             "first)",
             path);
    assert_string_equal(err_message(), msg);

    assert_int_equal(gguf_open("/dev/null", &f), PT_ERR_USER);
    assert_string_equal(err_message(), "/dev/null: not a regular file: give the path of a .gguf model file");

    assert_int_equal(gguf_open(tmpdir, &f), PT_ERR_USER);
    snprintf(msg, sizeof msg, "%s: is a directory, not a GGUF file: give the path of the .gguf file", tmpdir);
    assert_string_equal(err_message(), msg);
    assert_memory_equal(&f, &zero_file, sizeof f);
    err_clear();
    wfree(&b);
}

/* --- the real SmolLM2 file --- */

static const char *find_model(char *buf, size_t n)
{
    const char *name = "SmolLM2-135M-Instruct.Q4_1.gguf";
    const char *env = getenv("PTRAIN_MODELS");
    const char *dirs[] = {"/tmp/models", env, "../models", "models"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        if (!dirs[i] || !*dirs[i]) continue;
        snprintf(buf, n, "%s/%s", dirs[i], name);
        if (access(buf, R_OK) == 0) return buf;
    }
    return NULL;
}

static void test_smollm2(void **state)
{
    (void)state;
    char path[512];
    if (!find_model(path, sizeof path)) {
        print_message("SKIP reason: SmolLM2-135M-Instruct.Q4_1.gguf is not in /tmp/models, $PTRAIN_MODELS or "
                      "../models (share/scripts/fetch-model.sh DIR fetches it)\n");
        skip();
        return;
    }
    gguf_file f;
    if (gguf_open(path, &f) != PT_OK) fail_msg("%s", err_message());
    assert_int_equal(f.version, 3);
    gguf_str arch;
    assert_int_equal(gguf_get_str(&f, "general.architecture", &arch), PT_OK);
    assert_true(gguf_str_eq(arch, "llama"));
    uint32_t u;
    assert_int_equal(gguf_get_u32(&f, "llama.block_count", &u), PT_OK), assert_int_equal(u, 30);
    assert_int_equal(gguf_get_u32(&f, "llama.embedding_length", &u), PT_OK), assert_int_equal(u, 576);
    assert_int_equal(gguf_get_u32(&f, "llama.attention.head_count", &u), PT_OK), assert_int_equal(u, 9);
    assert_int_equal(gguf_get_u32(&f, "llama.attention.head_count_kv", &u), PT_OK), assert_int_equal(u, 3);
    float eps;
    assert_int_equal(gguf_get_f32(&f, "llama.attention.layer_norm_rms_epsilon", &eps), PT_OK);
    assert_true(eps == 1e-5f);
    const gguf_kv *tokens, *merges;
    assert_int_equal(gguf_get_array(&f, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &tokens), PT_OK);
    assert_int_equal(tokens->count, 49152);
    assert_true(gguf_str_eq(gguf_array_str(tokens, 0), "<|endoftext|>"));
    assert_true(gguf_str_eq(gguf_array_str(tokens, 1), "<|im_start|>"));
    assert_int_equal(gguf_get_array(&f, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges), PT_OK);
    assert_int_equal(merges->count, 48900);
    assert_int_equal(f.n_tensors, 272); /* 30 blocks x 9 + token_embd + output_norm */
    assert_int_equal(f.data_offset % f.alignment, 0);

    /* every tensor: its size from its type and dims (the test's own table), inside the file, in order */
    const uint8_t *base = f.map;
    uint64_t end = 0;
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *t = &f.tensors[i];
        uint64_t n = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) n *= t->dims[d];
        assert_int_equal(t->nbytes, type_bytes(t->ggml_type, n));
        assert_true(t->dtype == PT_F32 || t->dtype == PT_Q4_1 || t->dtype == PT_Q8_0);
        assert_ptr_equal(t->data, base + f.data_offset + t->offset);
        assert_int_equal(t->offset % f.alignment, 0);
        assert_true(t->offset >= end);
        end = t->offset + t->nbytes;
        assert_true(f.data_offset + end <= f.size);
    }
    const gguf_tensor *emb = gguf_find_tensor(&f, "token_embd.weight");
    assert_non_null(emb);
    assert_int_equal(emb->dims[0], 576), assert_int_equal(emb->dims[1], 49152);
    const gguf_tensor *q = gguf_find_tensor(&f, "blk.29.attn_q.weight");
    assert_non_null(q);
    assert_int_equal(q->ggml_type, GGML_TYPE_Q4_1);
    float row[576];
    assert_int_equal(quant_dequantize_row(q->dtype, q->data, row, 576), PT_OK);
    double ss = 0;
    for (int i = 0; i < 576; i++) assert_true(isfinite(row[i])), ss += row[i] * row[i];
    assert_true(ss > 0);
    gguf_close(&f);
}

/* --- dequantizers against the committed vectors --- */

static char srcdir[512];

static const char *source_dir(void)
{
    if (*srcdir) return srcdir;
    const char *env = getenv("PTRAIN_SRCDIR");
    if (env && *env) {
        snprintf(srcdir, sizeof srcdir, "%s", env);
    } else { /* the path this file was compiled from, relative to the build directory */
        const char *me = __FILE__, *tail = strstr(me, "tests/unit/test_gguf.c");
        int n = tail ? (int)(tail - me) : 0;
        snprintf(srcdir, sizeof srcdir, "%.*s.", n, me);
    }
    return srcdir;
}

static size_t read_file(const char *name, void *buf, size_t cap)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/gguf/%s", source_dir(), name);
    FILE *fp = fopen(path, "rb");
    if (!fp) fail_msg("cannot open %s (set PTRAIN_SRCDIR to the source tree)", path);
    size_t n = fread(buf, 1, cap, fp);
    fclose(fp);
    return n;
}

static void test_dequant_vectors(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        pt_dtype dtype;
        uint32_t ggml;
        int blocks, block;
    } types[] = {
        {"q4_0", PT_Q4_0, GGML_TYPE_Q4_0, 8, 32}, {"q4_1", PT_Q4_1, GGML_TYPE_Q4_1, 8, 32},
        {"q5_0", PT_Q5_0, GGML_TYPE_Q5_0, 8, 32}, {"q5_1", PT_Q5_1, GGML_TYPE_Q5_1, 8, 32},
        {"q8_0", PT_Q8_0, GGML_TYPE_Q8_0, 8, 32}, {"q2_k", PT_Q2_K, GGML_TYPE_Q2_K, 3, 256},
        {"q3_k", PT_Q3_K, GGML_TYPE_Q3_K, 3, 256}, {"q4_k", PT_Q4_K, GGML_TYPE_Q4_K, 3, 256},
        {"q5_k", PT_Q5_K, GGML_TYPE_Q5_K, 3, 256}, {"q6_k", PT_Q6_K, GGML_TYPE_Q6_K, 3, 256},
    };
    static uint8_t blocks[4096];
    static float want[1024], got[1024];
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
        char name[64];
        int64_t n = (int64_t)types[i].blocks * types[i].block;
        size_t bytes = dtype_size_bytes(types[i].dtype, n);
        assert_int_equal(bytes, type_bytes(types[i].ggml, (uint64_t)n));
        assert_int_equal(gguf_ggml_dtype(types[i].ggml), types[i].dtype);
        assert_string_equal(dtype_name(types[i].dtype), types[i].name);
        snprintf(name, sizeof name, "dequant_%s.bin", types[i].name);
        assert_int_equal(read_file(name, blocks, sizeof blocks), bytes);
        snprintf(name, sizeof name, "dequant_%s.f32", types[i].name);
        assert_int_equal(read_file(name, want, sizeof want), (size_t)n * 4);
        memset(got, 0xff, sizeof got);
        assert_int_equal(quant_dequantize_row(types[i].dtype, blocks, got, n), PT_OK);
        int exact = 0;
        for (int64_t j = 0; j < n; j++) {
            /* ggml's operation order is followed, so the values match exactly unless the compiler
             * contracts a*b-c into an fma; allow that one rounding */
            float tol = 1e-6f * fmaxf(1.0f, fabsf(want[j]));
            if (!(fabsf(got[j] - want[j]) <= tol))
                fail_msg("%s value %lld: got %.9g, expected %.9g", types[i].name, (long long)j, got[j], want[j]);
            exact += got[j] == want[j];
        }
        print_message("# %s: %lld values, %d bit-exact\n", types[i].name, (long long)n, exact);
        /* a length that is not whole blocks is refused */
        assert_int_equal(quant_dequantize_row(types[i].dtype, blocks, got, types[i].block + 1), PT_ERR_INTERNAL);
        err_clear();
    }
}

/* --- the GGUF writer (src/io/gguf_write.c): written files read back through gguf_open --- */

static uint32_t lcg_state = 12345;
static uint8_t lcg_byte(void)
{
    lcg_state = lcg_state * 1103515245u + 12345u;
    return (uint8_t)(lcg_state >> 16);
}

/* Temporary files (".NAME.tmp.PID") left in tmpdir. */
static int tmp_leftovers(void)
{
    int n = 0;
    DIR *d = opendir(tmpdir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] == '.' && strstr(e->d_name, ".tmp.") != NULL;
    closedir(d);
    return n;
}

#define W_OK_(expr)                                                                                \
    do {                                                                                           \
        if ((expr) != PT_OK) fail_msg("%s: %s", #expr, err_message());                             \
    } while (0)

typedef struct {
    const char *name;
    uint32_t type;
    int n_dims;
    uint64_t dims[4];
    size_t nbytes;
} wt_spec;

static const wt_spec wt_tensors[] = {
    {"token_embd.weight", GGML_TYPE_F32, 2, {5, 3}, 60},
    {"blk.0.attn_norm.weight", GGML_TYPE_F16, 1, {7}, 14},
    {"blk.0.attn_q.weight", GGML_TYPE_Q8_0, 2, {64, 3}, 204},
    {"blk.0.ffn_down.weight", GGML_TYPE_Q4_K, 3, {256, 2, 2}, 576},
};
#define WT_N 4

/* Declare wt_tensors, begin at path, stream data (the concatenation of all tensors) in chunks of
 * cycling sizes that cross tensor boundaries. */
static void write_tensors(gguf_writer *w, const char *path, const uint8_t *data, size_t total)
{
    for (int i = 0; i < WT_N; i++) {
        const wt_spec *t = &wt_tensors[i];
        assert_int_equal(gguf_w_tensor_bytes(t->type, t->dims, t->n_dims), t->nbytes);
        W_OK_(gguf_w_tensor(w, t->name, t->type, t->n_dims, t->dims));
    }
    W_OK_(gguf_w_begin(w, path));
    static const size_t chunks[] = {1, 17, 100, 5, 250, 0};
    for (size_t off = 0, k = 0; off < total; k++) {
        size_t n = chunks[k % 6] < total - off ? chunks[k % 6] : total - off;
        W_OK_(gguf_w_data(w, data + off, n));
        off += n;
    }
}

static void check_tensors(const gguf_file *f, const uint8_t *data, uint64_t align)
{
    assert_int_equal(f->n_tensors, WT_N);
    assert_int_equal(f->alignment, align);
    assert_int_equal(f->data_offset % align, 0);
    uint64_t off = 0;
    size_t pos = 0;
    for (int i = 0; i < WT_N; i++) {
        const wt_spec *w = &wt_tensors[i];
        const gguf_tensor *t = &f->tensors[i];
        assert_true(gguf_str_eq(t->name, w->name));
        assert_int_equal(t->n_dims, w->n_dims);
        for (int d = 0; d < 4; d++) assert_int_equal(t->dims[d], d < w->n_dims ? w->dims[d] : 1);
        assert_int_equal(t->ggml_type, w->type);
        assert_int_equal(t->offset, off); /* what llama.cpp requires: previous end, padded */
        assert_int_equal(t->offset % align, 0);
        assert_int_equal(t->nbytes, w->nbytes);
        assert_memory_equal(t->data, data + pos, w->nbytes);
        pos += w->nbytes;
        off += (w->nbytes + align - 1) / align * align;
    }
    assert_int_equal(f->size, f->data_offset + off); /* the last tensor is padded too */
}

static uint8_t *random_data(size_t *total)
{
    *total = 0;
    for (int i = 0; i < WT_N; i++) *total += wt_tensors[i].nbytes;
    uint8_t *d = malloc(*total);
    assert_non_null(d);
    for (size_t i = 0; i < *total; i++) d[i] = lcg_byte();
    return d;
}

static void add_metadata(gguf_writer *w, const gguf_file *src)
{
    static const char *const strs[] = {"alpha", "", "h\xc3\xa9llo"};
    static const int32_t ints[] = {1, -2, INT32_MAX, INT32_MIN};
    static const float floats[] = {0.5f, -1.5f, 1e-30f};
    W_OK_(gguf_w_str(w, "general.architecture", "llama"));
    W_OK_(gguf_w_u32(w, "llama.block_count", 2));
    W_OK_(gguf_w_i32(w, "t.i32", -7));
    W_OK_(gguf_w_f32(w, "t.f32", 0.25f));
    W_OK_(gguf_w_bool(w, "t.bool", true));
    W_OK_(gguf_w_u64(w, "t.u64", ((uint64_t)1 << 40) + 1));
    W_OK_(gguf_w_str_array(w, "t.strs", strs, 3));
    W_OK_(gguf_w_i32_array(w, "t.ints", ints, 4));
    W_OK_(gguf_w_f32_array(w, "t.floats", floats, 3));
    static const char *const copied[] = {"t.strings", "t.f64", "t.empty", "t.i16", "t.bools"};
    for (int i = 0; i < 5; i++) {
        const gguf_kv *kv = gguf_find(src, copied[i]);
        assert_non_null(kv);
        W_OK_(gguf_w_copy_kv(w, kv));
    }
    /* a second add replaces the value and keeps the place */
    W_OK_(gguf_w_u32(w, "llama.block_count", 30));
    W_OK_(gguf_w_str(w, "general.architecture", "qwen2-longer-name"));
}

static void check_metadata(const gguf_file *f)
{
    static const char *const order[] = {"general.architecture", "llama.block_count", "t.i32", "t.f32", "t.bool",
                                        "t.u64", "t.strs", "t.ints", "t.floats", "t.strings", "t.f64", "t.empty",
                                        "t.i16", "t.bools"};
    assert_int_equal(f->version, 3);
    assert_int_equal(f->n_kv, 14);
    for (int i = 0; i < 14; i++)
        if (!gguf_str_eq(f->kv[i].key, order[i])) fail_msg("key %d is not %s", i, order[i]);
    gguf_str s;
    uint32_t u32;
    uint64_t u64;
    int64_t i64;
    float f32;
    bool bo;
    assert_int_equal(gguf_get_str(f, "general.architecture", &s), PT_OK);
    assert_true(gguf_str_eq(s, "qwen2-longer-name"));
    assert_int_equal(f->kv[1].type, GGUF_TYPE_U32);
    assert_int_equal(gguf_get_u32(f, "llama.block_count", &u32), PT_OK), assert_int_equal(u32, 30);
    assert_int_equal(f->kv[2].type, GGUF_TYPE_I32);
    assert_int_equal(gguf_get_i64(f, "t.i32", &i64), PT_OK), assert_int_equal(i64, -7);
    assert_int_equal(f->kv[3].type, GGUF_TYPE_F32);
    assert_int_equal(gguf_get_f32(f, "t.f32", &f32), PT_OK), assert_true(f32 == 0.25f);
    assert_int_equal(gguf_get_bool(f, "t.bool", &bo), PT_OK), assert_true(bo);
    assert_int_equal(f->kv[5].type, GGUF_TYPE_U64);
    assert_int_equal(gguf_get_u64(f, "t.u64", &u64), PT_OK), assert_true(u64 == ((uint64_t)1 << 40) + 1);
    const gguf_kv *a;
    assert_int_equal(gguf_get_array(f, "t.strs", GGUF_TYPE_STRING, &a), PT_OK);
    assert_int_equal(a->count, 3);
    assert_true(gguf_str_eq(gguf_array_str(a, 0), "alpha"));
    assert_true(gguf_str_eq(gguf_array_str(a, 1), ""));
    assert_true(gguf_str_eq(gguf_array_str(a, 2), "h\xc3\xa9llo"));
    assert_int_equal(gguf_get_array(f, "t.ints", GGUF_TYPE_I32, &a), PT_OK);
    assert_int_equal(a->elem_type, GGUF_TYPE_I32), assert_int_equal(a->count, 4);
    assert_int_equal(gguf_array_int(a, 0), 1), assert_int_equal(gguf_array_int(a, 1), -2);
    assert_int_equal(gguf_array_int(a, 2), INT32_MAX), assert_int_equal(gguf_array_int(a, 3), INT32_MIN);
    assert_int_equal(gguf_get_array(f, "t.floats", GGUF_TYPE_F32, &a), PT_OK);
    assert_int_equal(a->elem_type, GGUF_TYPE_F32), assert_int_equal(a->count, 3);
    assert_true(gguf_array_f32(a, 0) == 0.5f && gguf_array_f32(a, 1) == -1.5f && gguf_array_f32(a, 2) == 1e-30f);
    /* the copies, from valid_image */
    assert_int_equal(gguf_get_array(f, "t.strings", GGUF_TYPE_STRING, &a), PT_OK);
    assert_int_equal(a->count, 3);
    assert_true(gguf_str_eq(gguf_array_str(a, 0), "a"));
    assert_true(gguf_str_eq(gguf_array_str(a, 1), ""));
    assert_true(gguf_str_eq(gguf_array_str(a, 2), "h\xc3\xa9llo"));
    assert_int_equal(f->kv[10].type, GGUF_TYPE_F64);
    assert_int_equal(gguf_get_f32(f, "t.f64", &f32), PT_OK), assert_true(f32 == 2.25f);
    assert_int_equal(gguf_get_array(f, "t.empty", GGUF_TYPE_U8, &a), PT_OK);
    assert_int_equal(a->elem_type, GGUF_TYPE_U8), assert_int_equal(a->count, 0);
    assert_int_equal(f->kv[12].type, GGUF_TYPE_I16);
    assert_int_equal(gguf_get_i64(f, "t.i16", &i64), PT_OK), assert_int_equal(i64, -30000);
    assert_int_equal(gguf_get_array(f, "t.bools", GGUF_TYPE_BOOL, &a), PT_OK);
    assert_int_equal(a->count, 2);
    assert_int_equal(gguf_array_int(a, 0), 1), assert_int_equal(gguf_array_int(a, 1), 0);
}

static void test_write_roundtrip(void **state)
{
    (void)state;
    char src_path[128], path[128];
    wbuf b = valid_image(3);
    snprintf(src_path, sizeof src_path, "%s/src.gguf", tmpdir);
    write_file(src_path, b.p, b.n);
    wfree(&b);
    gguf_file src, f;
    W_OK_(gguf_open(src_path, &src));
    size_t total;
    uint8_t *data = random_data(&total);

    gguf_writer *w;
    W_OK_(gguf_writer_new(&w));
    add_metadata(w, &src);
    gguf_close(&src); /* the copies do not point into it */
    snprintf(path, sizeof path, "%s/out.gguf", tmpdir);
    write_tensors(w, path, data, total);
    assert_int_equal(access(path, F_OK), -1); /* not there until finished */
    W_OK_(gguf_w_finish(w));
    gguf_writer_free(w);
    assert_int_equal(tmp_leftovers(), 0);

    W_OK_(gguf_open(path, &f));
    check_metadata(&f);
    check_tensors(&f, data, 32);
    touch_all(&f);
    gguf_close(&f);
    free(data);
}

static void test_write_alignment(void **state)
{
    (void)state;
    char path[128];
    size_t total;
    uint8_t *data = random_data(&total);
    gguf_writer *w;
    W_OK_(gguf_writer_new(&w));
    W_OK_(gguf_w_str(w, "general.architecture", "llama"));
    W_OK_(gguf_w_u32(w, "general.alignment", 64));
    snprintf(path, sizeof path, "%s/aligned.gguf", tmpdir);
    write_tensors(w, path, data, total);
    W_OK_(gguf_w_finish(w));
    gguf_writer_free(w);
    gguf_file f;
    W_OK_(gguf_open(path, &f));
    check_tensors(&f, data, 64);
    gguf_close(&f);
    free(data);

    /* metadata only, no tensors */
    W_OK_(gguf_writer_new(&w));
    W_OK_(gguf_w_u32(w, "general.alignment", 1));
    W_OK_(gguf_w_str(w, "general.name", "empty"));
    snprintf(path, sizeof path, "%s/empty_w.gguf", tmpdir);
    W_OK_(gguf_w_begin(w, path));
    W_OK_(gguf_w_data(w, NULL, 0));
    W_OK_(gguf_w_finish(w));
    gguf_writer_free(w);
    W_OK_(gguf_open(path, &f));
    assert_int_equal(f.n_tensors, 0), assert_int_equal(f.n_kv, 2), assert_int_equal(f.alignment, 1);
    assert_int_equal(f.size, f.data_offset);
    gguf_close(&f);
}

#define expect_werr(expr, status, msg)                                                             \
    do {                                                                                           \
        assert_int_equal((expr), (status));                                                        \
        assert_string_equal(err_message(), (msg));                                                 \
        err_clear();                                                                               \
    } while (0)

static void test_write_declare_errors(void **state)
{
    (void)state;
    gguf_writer *w;
    W_OK_(gguf_writer_new(&w));
    const uint64_t d256[] = {256, 2}, d100[] = {100}, d0[] = {32, 0};
    W_OK_(gguf_w_tensor(w, "a", GGML_TYPE_Q4_K, 2, d256));
    expect_werr(gguf_w_tensor(w, "a", GGML_TYPE_F32, 1, d100), PT_ERR_USER,
                "gguf writer: tensor 'a' is declared twice (tensors 1 and 2)");
    expect_werr(gguf_w_tensor(w, "b", 4, 1, d100), PT_ERR_USER, "gguf writer: tensor 'b' has unknown ggml type id 4");
    expect_werr(gguf_w_tensor(w, "b", 99, 1, d100), PT_ERR_USER,
                "gguf writer: tensor 'b' has unknown ggml type id 99");
    expect_werr(gguf_w_tensor(w, "b", GGML_TYPE_Q4_K, 1, d100), PT_ERR_USER,
                "gguf writer: tensor 'b' (q4_k) has rows of 100 values, not a multiple of the q4_k block of 256");
    expect_werr(gguf_w_tensor(w, "b", GGML_TYPE_Q8_0, 2, d0), PT_ERR_USER,
                "gguf writer: tensor 'b' has a dimension of size 0 (dims[1])");
    expect_werr(gguf_w_tensor(w, "b", GGML_TYPE_F32, 0, d100), PT_ERR_USER,
                "gguf writer: tensor 'b' has 0 dimensions; GGUF allows 1 to 4");
    expect_werr(gguf_w_tensor(w, "b", GGML_TYPE_F32, 5, d100), PT_ERR_USER,
                "gguf writer: tensor 'b' has 5 dimensions; GGUF allows 1 to 4");
    expect_werr(gguf_w_tensor(w, "", GGML_TYPE_F32, 1, d100), PT_ERR_USER, "gguf writer: a tensor has an empty name");
    char longname[80];
    memset(longname, 'x', 64), longname[64] = 0;
    expect_werr(gguf_w_tensor(w, longname, GGML_TYPE_F32, 1, d100), PT_ERR_USER,
                "gguf writer: tensor name 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx' is 64 "
                "bytes; GGUF (llama.cpp) allows at most 63");
    longname[63] = 0;
    W_OK_(gguf_w_tensor(w, longname, GGML_TYPE_F32, 1, d100));
    expect_werr(gguf_w_u32(w, "general.alignment", 48), PT_ERR_USER,
                "gguf writer: general.alignment = 48 is not a power of two between 1 and 2^30");
    expect_werr(gguf_w_u32(w, "general.alignment", 0), PT_ERR_USER,
                "gguf writer: general.alignment = 0 is not a power of two between 1 and 2^30");
    expect_werr(gguf_w_u64(w, "general.alignment", 32), PT_ERR_USER,
                "gguf writer: general.alignment must be a u32 (llama.cpp reads it as one), not u64");
    expect_werr(gguf_w_str(w, "", "x"), PT_ERR_USER, "gguf writer: a metadata key is empty");
    expect_werr(gguf_w_data(w, "x", 1), PT_ERR_INTERNAL, "gguf writer: gguf_w_data before gguf_w_begin");
    expect_werr(gguf_w_finish(w), PT_ERR_INTERNAL, "gguf writer: gguf_w_finish before gguf_w_begin");
    gguf_writer_free(w);

    const uint64_t q[] = {32, 3}, bad[] = {33};
    assert_int_equal(gguf_w_tensor_bytes(GGML_TYPE_Q8_0, q, 2), 102);
    assert_int_equal(gguf_w_tensor_bytes(GGML_TYPE_MXFP4, q, 2), 51);
    assert_int_equal(gguf_w_tensor_bytes(GGML_TYPE_Q8_0, bad, 1), 0);
    assert_int_equal(gguf_w_tensor_bytes(5, q, 2), 0);
    assert_int_equal(gguf_w_tensor_bytes(GGML_TYPE_F32, q, 0), 0);
    assert_int_equal(gguf_w_tensor_bytes(GGML_TYPE_F32, d0, 2), 0);
    const uint64_t huge[] = {(uint64_t)1 << 40, (uint64_t)1 << 40};
    assert_int_equal(gguf_w_tensor_bytes(GGML_TYPE_F32, huge, 2), 0);
}

static void test_write_stream_errors(void **state)
{
    (void)state;
    char path[128], msg[512];
    const uint64_t d8[] = {8}, d32[] = {32, 2};
    uint8_t buf[100] = {0};
    gguf_writer *w;

    /* too few bytes: the error names the first incomplete tensor; nothing at the final path */
    snprintf(path, sizeof path, "%s/short.gguf", tmpdir);
    W_OK_(gguf_writer_new(&w));
    W_OK_(gguf_w_tensor(w, "first", GGML_TYPE_F32, 1, d8));
    W_OK_(gguf_w_tensor(w, "second", GGML_TYPE_Q8_0, 2, d32));
    W_OK_(gguf_w_begin(w, path));
    assert_int_equal(tmp_leftovers(), 1);
    W_OK_(gguf_w_data(w, buf, 32 + 10));
    W_OK_(gguf_w_data(w, buf, 5));
    snprintf(msg, sizeof msg,
             "%s: tensor 'second' (tensor 2 of 2) is incomplete: 15 of its 68 bytes were written; the file was not "
             "written",
             path);
    expect_werr(gguf_w_finish(w), PT_ERR_USER, msg);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(tmp_leftovers(), 0); /* removed at once, not only at free */
    snprintf(msg, sizeof msg, "%s: gguf_w_data after an earlier error; the file was not written", path);
    expect_werr(gguf_w_data(w, buf, 1), PT_ERR_INTERNAL, msg);
    gguf_writer_free(w);

    /* too many bytes: refused before any of them is written */
    snprintf(path, sizeof path, "%s/long.gguf", tmpdir);
    W_OK_(gguf_writer_new(&w));
    W_OK_(gguf_w_tensor(w, "only", GGML_TYPE_F32, 1, d8));
    W_OK_(gguf_w_begin(w, path));
    expect_werr(gguf_w_tensor(w, "late", GGML_TYPE_F32, 1, d8), PT_ERR_INTERNAL,
                "gguf writer: tensor 'late' after gguf_w_begin; declare everything first");
    expect_werr(gguf_w_u32(w, "late", 1), PT_ERR_INTERNAL,
                "gguf writer: metadata key 'late' after gguf_w_begin; declare everything first");
    W_OK_(gguf_w_data(w, buf, 20));
    snprintf(msg, sizeof msg,
             "%s: 20 bytes of tensor data at tensor 'only', but only 12 bytes remain to the end of the last "
             "declared tensor",
             path);
    expect_werr(gguf_w_data(w, buf, 20), PT_ERR_USER, msg);
    snprintf(msg, sizeof msg, "%s: gguf_w_finish after an earlier error; the file was not written", path);
    expect_werr(gguf_w_finish(w), PT_ERR_INTERNAL, msg);
    gguf_writer_free(w);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(tmp_leftovers(), 0);

    /* past the end of a complete file */
    W_OK_(gguf_writer_new(&w));
    W_OK_(gguf_w_tensor(w, "only", GGML_TYPE_F32, 1, d8));
    W_OK_(gguf_w_begin(w, path));
    W_OK_(gguf_w_data(w, buf, 32));
    snprintf(msg, sizeof msg, "%s: 1 more bytes of tensor data, but all 1 tensors are complete", path);
    expect_werr(gguf_w_data(w, buf, 1), PT_ERR_USER, msg);
    gguf_writer_free(w);
    assert_int_equal(access(path, F_OK), -1);

    /* a directory that does not exist; freeing an unfinished writer removes its temporary file */
    snprintf(path, sizeof path, "%s/no/such/dir/x.gguf", tmpdir);
    W_OK_(gguf_writer_new(&w));
    snprintf(msg, sizeof msg,
             "%s: cannot write the GGUF file: directory %s/no/such/dir: No such file or directory (create it first)",
             path, tmpdir);
    expect_werr(gguf_w_begin(w, path), PT_ERR_USER, msg);
    snprintf(path, sizeof path, "%s/unfinished.gguf", tmpdir);
    W_OK_(gguf_w_begin(w, path)); /* a begin that created nothing can be retried */
    assert_int_equal(tmp_leftovers(), 1);
    gguf_writer_free(w);
    assert_int_equal(tmp_leftovers(), 0);
    assert_int_equal(access(path, F_OK), -1);
    gguf_writer_free(NULL);
}

/* The ggml type table against GGUF's numbering (llama.cpp's enum ggml_type and type traits): each
 * id's name, values and bytes per block, and the pt_dtype of those ptrain reads; ids not listed are
 * unknown. Every pt_dtype but NF4 is the dtype of exactly one id, with the dtype table's name and
 * sizes. So a format of quant_blocks.h's list paired with the wrong ggml id, or a pt_dtype left
 * out of it, fails here. */
static void test_ggml_types(void **state)
{
    (void)state;
    enum { NONE = PT_DTYPE_COUNT };
    static const struct {
        uint32_t id;
        const char *name;
        uint32_t block, bytes;
        int dtype;
    } spec[] = {
        {0, "f32", 1, 4, PT_F32},          {1, "f16", 1, 2, PT_F16},          {2, "q4_0", 32, 18, PT_Q4_0},
        {3, "q4_1", 32, 20, PT_Q4_1},      {6, "q5_0", 32, 22, PT_Q5_0},      {7, "q5_1", 32, 24, PT_Q5_1},
        {8, "q8_0", 32, 34, PT_Q8_0},      {10, "q2_k", 256, 84, PT_Q2_K},    {11, "q3_k", 256, 110, PT_Q3_K},
        {12, "q4_k", 256, 144, PT_Q4_K},   {13, "q5_k", 256, 176, PT_Q5_K},   {14, "q6_k", 256, 210, PT_Q6_K},
        {16, "iq2_xxs", 256, 66, NONE},    {17, "iq2_xs", 256, 74, NONE},     {18, "iq3_xxs", 256, 98, NONE},
        {19, "iq1_s", 256, 50, NONE},      {20, "iq4_nl", 32, 18, NONE},      {21, "iq3_s", 256, 110, NONE},
        {22, "iq2_s", 256, 82, NONE},      {23, "iq4_xs", 256, 136, NONE},    {24, "i8", 1, 1, NONE},
        {25, "i16", 1, 2, NONE},           {26, "i32", 1, 4, NONE},           {27, "i64", 1, 8, NONE},
        {28, "f64", 1, 8, NONE},           {29, "iq1_m", 256, 56, NONE},      {30, "bf16", 1, 2, PT_BF16},
        {34, "tq1_0", 256, 54, NONE},      {35, "tq2_0", 256, 66, NONE},      {39, "mxfp4", 32, 17, PT_MXFP4},
    };
    size_t n = sizeof spec / sizeof spec[0], k = 0;
    for (uint32_t id = 0; id < 64; id++) {
        const char *name = NULL;
        uint32_t block = 0, bytes = 0;
        bool known = gguf_ggml_type_info(id, &name, &block, &bytes);
        if (k == n || spec[k].id != id) {
            if (known) fail_msg("ggml type %u (%s) is not a GGUF type ptrain lists", id, name);
            assert_int_equal(gguf_ggml_dtype(id), PT_DTYPE_COUNT);
            continue;
        }
        if (!known) fail_msg("ggml type %u (%s) is unknown", id, spec[k].name);
        if (strcmp(name, spec[k].name) || block != spec[k].block || bytes != spec[k].bytes)
            fail_msg("ggml type %u is %s, %u values in %u bytes; GGUF's is %s, %u values in %u bytes", id, name, block,
                     bytes, spec[k].name, spec[k].block, spec[k].bytes);
        assert_int_equal(gguf_ggml_dtype(id), spec[k].dtype);
        k++;
    }
    for (int d = 0; d < PT_DTYPE_COUNT; d++) {
        int ids = 0;
        for (size_t i = 0; i < n; i++) {
            if (spec[i].dtype != d) continue;
            ids++;
            assert_string_equal(dtype_name((pt_dtype)d), spec[i].name);
            assert_int_equal(dtype_block_values((pt_dtype)d), spec[i].block);
            assert_int_equal(dtype_size_bytes((pt_dtype)d, spec[i].block), spec[i].bytes);
        }
        if (ids != (d == PT_NF4 ? 0 : 1))
            fail_msg("pt_dtype %d (%s) is the dtype of %d ggml types", d, dtype_name((pt_dtype)d), ids);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ggml_types),
        cmocka_unit_test(test_valid_v3),
        cmocka_unit_test(test_valid_v2),
        cmocka_unit_test(test_alignment),
        cmocka_unit_test(test_getters),
        cmocka_unit_test(test_truncated_prefixes),
        cmocka_unit_test(test_mutations),
        cmocka_unit_test(test_bad_magic),
        cmocka_unit_test(test_bad_version),
        cmocka_unit_test(test_absurd_counts),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_bad_tensors),
        cmocka_unit_test(test_bad_offsets),
        cmocka_unit_test(test_overlap),
        cmocka_unit_test(test_bad_alignment),
        cmocka_unit_test(test_open_file),
        cmocka_unit_test(test_smollm2),
        cmocka_unit_test(test_dequant_vectors),
        cmocka_unit_test(test_write_roundtrip),
        cmocka_unit_test(test_write_alignment),
        cmocka_unit_test(test_write_declare_errors),
        cmocka_unit_test(test_write_stream_errors),
    };
    return cmocka_run_group_tests(tests, setup_tmpdir, remove_tmpdir);
}
