/* fuzz-sources: src/model/gguf.c src/core/error.c src/backend/quant.c src/backend/backend.c src/backend/nf4.c src/core/util.c src/core/shown.c */
/* fuzz_gguf.c — libFuzzer target for the GGUF reader: the input is parsed with gguf_open_memory;
 * a failure must leave one message and a zeroed gguf_file, a success must describe only bytes
 * inside the input (checked here: every kv value, string array item and tensor extent, tensor
 * alignment and non-overlap), and then every accessor is exercised: the typed getters on each
 * key, every array element, gguf_find_tensor on each name, and the dequantizer on the first rows
 * of every tensor ptrain can compute with. Seed corpus: tests/fuzz/corpus/gguf/ (see
 * tests/fuzz/make_corpus.py). Built and run by tests/fuzz/run-fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/backend.h"
#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/quant.h"

#define FUZZ_NAME "fuzz_gguf"
#define FUZZ_STUB_CPU_BACKEND
#include "support.h"

static int inside(const uint8_t *base, size_t size, const void *p, uint64_t n)
{
    const uint8_t *q = p;
    return q >= base && (size_t)(q - base) <= size && n <= size - (size_t)(q - base);
}

static volatile float sink;

static void touch_kv(const gguf_file *f, const gguf_kv *kv, const uint8_t *data, size_t size)
{
    CHECK(kv->key.len > 0 && inside(data, size, kv->key.data, kv->key.len));
    CHECK(inside(data, size, kv->value, 0));
    char key[256];
    int has_nul = memchr(kv->key.data, 0, kv->key.len) != NULL;
    if (kv->key.len < sizeof key && !has_nul) {
        memcpy(key, kv->key.data, kv->key.len);
        key[kv->key.len] = '\0';
        CHECK(gguf_find(f, key) == kv); /* keys are unique */
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f32;
        bool b;
        gguf_str s;
        const gguf_kv *arr;
        if (gguf_get_u32(f, key, &u32) == PT_OK) sink += (float)u32;
        (void)gguf_opt_u32(f, key, &u32);
        if (gguf_get_u64(f, key, &u64) == PT_OK) sink += (float)u64;
        if (gguf_get_i64(f, key, &i64) == PT_OK) sink += (float)i64;
        if (gguf_get_f32(f, key, &f32) == PT_OK) sink += f32;
        (void)gguf_opt_f32(f, key, &f32);
        (void)gguf_get_bool(f, key, &b);
        (void)gguf_opt_bool(f, key, &b);
        if (gguf_get_str(f, key, &s) == PT_OK) {
            CHECK(inside(data, size, s.data, s.len));
            if (s.len) sink += (float)(uint8_t)s.data[s.len - 1];
        }
        (void)gguf_opt_str(f, key, &s);
        for (int t = 0; t <= GGUF_TYPE_F64; t++)
            if (gguf_get_array(f, key, (gguf_type)t, &arr) == PT_OK) CHECK(arr == kv);
        err_clear();
    }
    if (kv->type != GGUF_TYPE_ARRAY) return;
    for (uint64_t i = 0; i < kv->count; i++) {
        gguf_str e = gguf_array_str(kv, i);
        if (kv->elem_type == GGUF_TYPE_STRING) {
            CHECK(inside(data, size, kv->items[i], 8));
            CHECK(inside(data, size, e.data, e.len));
            if (e.len) sink += (float)(uint8_t)e.data[0] + (float)(uint8_t)e.data[e.len - 1];
        } else {
            CHECK(e.len == 0);
            sink += (float)gguf_array_int(kv, i) + gguf_array_f32(kv, i);
        }
    }
    (void)gguf_array_str(kv, kv->count);
    (void)gguf_array_int(kv, kv->count);
    (void)gguf_array_f32(kv, kv->count);
}

static void touch_tensor(const gguf_file *f, const gguf_tensor *t, const uint8_t *data, size_t size)
{
    CHECK(t->name.len > 0 && inside(data, size, t->name.data, t->name.len));
    CHECK(t->n_dims <= 4);
    CHECK(t->nbytes > 0 && inside(data, size, t->data, t->nbytes));
    CHECK((const uint8_t *)t->data == data + f->data_offset + t->offset);
    CHECK(t->offset % f->alignment == 0);
    uint32_t block = 0, bytes = 0;
    CHECK(gguf_ggml_type_info(t->ggml_type, NULL, &block, &bytes));
    uint64_t n = 1;
    for (int d = 0; d < 4; d++) {
        CHECK(t->dims[d] > 0);
        n *= t->dims[d];
    }
    CHECK(t->dims[0] % block == 0 && t->nbytes == n / block * bytes);
    char name[256];
    if (t->name.len < sizeof name && !memchr(t->name.data, 0, t->name.len)) {
        memcpy(name, t->name.data, t->name.len);
        name[t->name.len] = '\0';
        CHECK(gguf_find_tensor(f, name) == t); /* names are unique */
    }
    sink += (float)((const uint8_t *)t->data)[0] + (float)((const uint8_t *)t->data)[t->nbytes - 1];
    if (t->dtype == PT_DTYPE_COUNT) return;
    /* dequantize up to the first few rows, at most 4096 values */
    static float out[4096];
    uint64_t row = t->dims[0];
    if (row > 4096) return;
    size_t row_bytes = dtype_size_bytes(t->dtype, (int64_t)row);
    CHECK(row_bytes == row / block * bytes);
    for (uint64_t r = 0; r < n / row && (r + 1) * row <= 4096; r++) {
        CHECK(quant_dequantize_row(t->dtype, (const uint8_t *)t->data + r * row_bytes, out + r * row,
                                   (int64_t)row) == PT_OK);
        sink += out[r * row];
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const gguf_file zero;
    gguf_file f;
    pt_status st = gguf_open_memory("fuzz.gguf", data, size, &f);
    if (st != PT_OK) {
        CHECK(st == PT_ERR_USER || st == PT_ERR_NOMEM);
        CHECK(strncmp(err_message(), "fuzz.gguf: ", 11) == 0 || st == PT_ERR_NOMEM);
        CHECK(memcmp(&f, &zero, sizeof f) == 0);
        err_clear();
        return 0;
    }
    CHECK(f.version == 2 || f.version == 3);
    CHECK(f.alignment > 0 && (f.alignment & (f.alignment - 1)) == 0);
    CHECK(f.data_offset % f.alignment == 0);
    for (uint64_t i = 0; i < f.n_kv; i++) touch_kv(&f, &f.kv[i], data, size);
    for (uint64_t i = 0; i < f.n_tensors; i++) touch_tensor(&f, &f.tensors[i], data, size);
    /* no two tensors overlap (quadratic, but inputs are small) */
    for (uint64_t i = 0; i < f.n_tensors && f.n_tensors <= 512; i++)
        for (uint64_t j = i + 1; j < f.n_tensors; j++) {
            const gguf_tensor *a = &f.tensors[i], *b = &f.tensors[j];
            CHECK(a->offset + a->nbytes <= b->offset || b->offset + b->nbytes <= a->offset);
        }
    gguf_close(&f);
    CHECK(memcmp(&f, &zero, sizeof f) == 0);
    return 0;
}
