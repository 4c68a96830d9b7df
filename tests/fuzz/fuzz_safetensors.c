/* fuzz-sources: src/model/safetensors.c src/core/error.c src/backend/quant.c src/backend/backend.c src/backend/nf4.c src/core/util.c src/core/shown.c */
/* fuzz_safetensors.c — libFuzzer target for the safetensors reader: the input is parsed with
 * st_open_memory; a failure must leave one message naming the file and a zeroed st_file, a
 * success must describe only bytes of the input's data area (checked here: every tensor's extent,
 * byte count = shape x dtype size, alignment to the element size, no overlaps, names sorted and
 * unique and found by st_find), and then every float tensor's first values are converted with
 * st_read_f32 and every metadata value is read. Seed corpus: tests/fuzz/corpus/safetensors/ (see
 * tests/fuzz/make_corpus_hf.py). Built and run by tests/fuzz/run-fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/backend.h"
#include "ptrain/error.h"
#include "ptrain/safetensors.h"

#define FUZZ_NAME "fuzz_safetensors"
#define FUZZ_STUB_CPU_BACKEND
#include "support.h"

static volatile float sink;

static void touch_tensor(const st_file *f, const st_tensor *t, const uint8_t *data, size_t size)
{
    CHECK(t->name && st_find(f, t->name) == t);
    CHECK(t->ndim >= 0 && t->ndim <= ST_MAX_DIMS && (unsigned)t->dtype < ST_DTYPE_COUNT);
    uint64_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        CHECK(t->shape[d] >= 0);
        numel *= (uint64_t)t->shape[d];
    }
    CHECK(t->nbytes == numel * st_dtype_size(t->dtype) && t->end - t->begin == t->nbytes);
    CHECK(t->begin % st_dtype_size(t->dtype) == 0);
    CHECK((const uint8_t *)t->data == data + f->data_offset + t->begin);
    CHECK(f->data_offset <= size && t->end <= size - f->data_offset);
    if (t->nbytes) sink += (float)((const uint8_t *)t->data)[0] + (float)((const uint8_t *)t->data)[t->nbytes - 1];
    static float out[4096];
    int64_t n = (int64_t)numel < 4096 ? (int64_t)numel : 4096;
    pt_status st = st_read_f32(t, "fuzz", 0, n, out);
    bool is_float = t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64;
    CHECK((st == PT_OK) == is_float);
    if (st == PT_OK && n) sink += out[n - 1];
    err_clear();
    char desc[160];
    sink += (float)strlen(st_describe(t, desc, sizeof desc));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const st_file zero;
    st_file f;
    pt_status st = st_open_memory("fuzz.safetensors", data, size, &f);
    if (st != PT_OK) {
        CHECK(st == PT_ERR_USER || st == PT_ERR_NOMEM);
        CHECK(strncmp(err_message(), "fuzz.safetensors: ", 18) == 0 || st == PT_ERR_NOMEM);
        CHECK(memcmp(&f, &zero, sizeof f) == 0);
        err_clear();
        return 0;
    }
    CHECK(f.data_offset == 8 + f.header_len && f.data_offset <= size);
    for (size_t i = 0; i < f.n_tensors; i++) {
        touch_tensor(&f, &f.tensors[i], data, size);
        if (i) CHECK(strcmp(f.tensors[i - 1].name, f.tensors[i].name) < 0);
    }
    for (size_t i = 0; i < f.n_tensors && f.n_tensors <= 512; i++) /* no two tensors overlap */
        for (size_t j = i + 1; j < f.n_tensors; j++) {
            const st_tensor *a = &f.tensors[i], *b = &f.tensors[j];
            CHECK(!a->nbytes || !b->nbytes || a->end <= b->begin || b->end <= a->begin);
        }
    for (size_t i = 0; i < f.n_meta; i++) CHECK(st_metadata(&f, f.meta[i].key) != NULL);
    st_close(&f);
    CHECK(memcmp(&f, &zero, sizeof f) == 0);
    return 0;
}
