/* test_safetensors.c — the safetensors reader (src/model/safetensors.c), sharded sets
 * (src/model/st_index.c) and config.json (src/model/hf_config.c).
 *
 * Images are built in memory (exact-size heap copies, so ASan sees any over-read): a valid file
 * with every dtype, __metadata__, padding and an empty tensor reads back, values convert to fp32;
 * every byte prefix of it fails cleanly; every kind of corruption gives its exact message:
 * empty, short, truncated header, header length past the file or absurd, no '{', other formats
 * (GGUF, JSON, HTML, LFS pointer, zip, pickle), bad JSON, duplicate names, entries that are not
 * objects, unknown or missing dtype, bad shapes, bad offsets, offsets past the data (truncated)
 * or far past it (corrupt), shape x dtype != bytes, misaligned, overlapping. Sharded sets: the
 * committed tiny model, and an index naming a missing shard, a tensor its shard lacks, a shard
 * outside the directory, no weight_map, no weights at all. config.json: llama, mistral (null
 * sliding window), qwen2, gemma2, old-style rope_scaling, and bad inputs (missing keys, wrong
 * types, out-of-range values, unknown architecture and rope type, other quantizations). */
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

#include "ptrain/hf_model.h"
#include "ptrain/quant.h"
#include "ptrain/safetensors.h"
#include "tmpdir.h"

static const char *srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s ? s : "..";
}

/* ---- building images ---- */

typedef struct {
    uint8_t *p;
    size_t n;
} image;

/* 8-byte length of json, json, then data_len bytes of data (NULL: the pattern i * 7). */
static image make(const char *json, const void *data, size_t data_len)
{
    size_t hl = strlen(json);
    image im = {malloc(8 + hl + data_len + 1), 8 + hl + data_len};
    assert_non_null(im.p);
    for (int i = 0; i < 8; i++) im.p[i] = (uint8_t)((uint64_t)hl >> (8 * i));
    memcpy(im.p + 8, json, hl);
    for (size_t i = 0; i < data_len; i++) im.p[8 + hl + i] = data ? ((const uint8_t *)data)[i] : (uint8_t)(i * 7);
    return im;
}

static image raw(const void *bytes, size_t n)
{
    image im = {malloc(n + 1), n};
    assert_non_null(im.p);
    memcpy(im.p, bytes, n);
    return im;
}

#define expect_error(im, expected) expect_error_((im), (expected), __LINE__)
static void expect_error_(image im, const char *expected, int line)
{
    /* an exact-size copy, so reading one byte too far is an ASan report */
    uint8_t *copy = malloc(im.n ? im.n : 1);
    if (im.n) memcpy(copy, im.p, im.n);
    st_file f, zero;
    memset(&zero, 0, sizeof zero);
    pt_status st = st_open_memory("t.safetensors", im.n ? copy : NULL, im.n, &f);
    if (st != PT_ERR_USER || strcmp(err_message(), expected) != 0)
        fail_msg("line %d: status %d\n got:      %s\n expected: %s", line, st, st ? err_message() : "(ok)", expected);
    assert_memory_equal(&f, &zero, sizeof f);
    err_clear();
    free(copy);
    free(im.p);
}

/* ---- a valid file ---- */

static const char valid_json[] =
    "{\"__metadata__\":{\"format\":\"pt\",\"count\":3},"
    "\"w\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"h\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[32,36]},"
    "\"u\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[36,39]},"
    "\"i8\":{\"dtype\":\"I8\",\"shape\":[1],\"data_offsets\":[39,40]},"
    "\"d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[40,48]},"
    "\"i32\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[48,52]},"
    "\"ok\":{\"dtype\":\"BOOL\",\"shape\":[],\"data_offsets\":[52,53]},"
    "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[56,56]},"
    "\"i64\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[56,64],\"extra\":1}}      ";

static image valid_image(void)
{
    uint8_t data[64] = {0};
    float w[6] = {1, -2, 3.5f, 0.25f, -1e-3f, 42};
    memcpy(data, w, sizeof w);
    float bv[4] = {1.5f, -3, 0.125f, 65536};
    for (int i = 0; i < 4; i++) {
        uint16_t b = quant_f32_to_bf16(bv[i]);
        memcpy(data + 24 + 2 * i, &b, 2);
    }
    uint16_t h[2] = {quant_f32_to_f16(0.5f), quant_f32_to_f16(-2)};
    memcpy(data + 32, h, 4);
    double d = 3.25;
    memcpy(data + 40, &d, 8);
    return make(valid_json, data, sizeof data);
}

static void test_valid(void **state)
{
    (void)state;
    image im = valid_image();
    st_file f;
    assert_int_equal(st_open_memory("t.safetensors", im.p, im.n, &f), PT_OK);
    assert_int_equal(f.n_tensors, 10);
    assert_int_equal(f.header_len, strlen(valid_json));
    assert_string_equal(st_metadata(&f, "format"), "pt");
    assert_null(st_metadata(&f, "count")); /* not a string: tolerated, skipped */
    const st_tensor *w = st_find(&f, "w"), *e = st_find(&f, "empty");
    assert_non_null(w);
    assert_int_equal(w->dtype, ST_F32);
    assert_int_equal(w->ndim, 2);
    assert_int_equal(w->shape[1], 3);
    assert_ptr_equal(w->data, im.p + 8 + strlen(valid_json));
    assert_int_equal(e->nbytes, 0);
    assert_int_equal(st_numel(st_find(&f, "ok")), 1);
    assert_int_equal(st_find(&f, "i64")->dtype, ST_I64);
    assert_null(st_find(&f, "missing"));
    assert_null(st_find(&f, "__metadata__"));
    float out[6];
    assert_int_equal(st_read_f32(w, "t", 1, 5, out), PT_OK);
    assert_true(out[0] == -2 && out[4] == 42);
    assert_int_equal(st_read_f32(st_find(&f, "b"), "t", 0, 4, out), PT_OK);
    assert_true(out[0] == 1.5f && out[1] == -3 && out[3] == 65536);
    assert_int_equal(st_read_f32(st_find(&f, "h"), "t", 0, 2, out), PT_OK);
    assert_true(out[0] == 0.5f && out[1] == -2);
    assert_int_equal(st_read_f32(st_find(&f, "d"), "t", 0, 1, out), PT_OK);
    assert_true(out[0] == 3.25f);
    assert_int_equal(st_read_f32(st_find(&f, "u"), "t", 0, 1, out), PT_ERR_USER);
    assert_string_equal(err_message(), "t: tensor u has dtype U8; ptrain expects floating-point weights here (F32, "
                                       "F16, BF16)");
    char desc[64];
    assert_string_equal(st_describe(w, desc, sizeof desc), "F32 [2, 3]");
    st_close(&f);
    free(im.p);
}

/* Every prefix of a valid file fails with one message and leaves nothing behind; so does every
 * single-byte change that breaks it (the rest must still describe only bytes of the image). */
static void test_prefixes_and_mutations(void **state)
{
    (void)state;
    image im = valid_image();
    for (size_t n = 0; n < im.n; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, im.p, n);
        st_file f;
        pt_status st = st_open_memory("t.safetensors", n ? copy : NULL, n, &f);
        if (st != PT_ERR_USER) fail_msg("prefix of %zu bytes: status %d", n, st);
        assert_true(strncmp(err_message(), "t.safetensors: ", 15) == 0);
        err_clear();
        free(copy);
    }
    for (size_t i = 0; i < 8 + strlen(valid_json); i++)
        for (int bit = 0; bit < 8; bit += 3) {
            uint8_t *copy = malloc(im.n);
            memcpy(copy, im.p, im.n);
            copy[i] ^= (uint8_t)(1 << bit);
            st_file f;
            if (st_open_memory("t.safetensors", copy, im.n, &f) == PT_OK) {
                for (size_t k = 0; k < f.n_tensors; k++) {
                    const st_tensor *t = &f.tensors[k];
                    assert_true((const uint8_t *)t->data >= copy && t->nbytes <= im.n &&
                                (size_t)((const uint8_t *)t->data - copy) <= im.n - t->nbytes);
                }
                st_close(&f);
            }
            err_clear();
            free(copy);
        }
    free(im.p);
}

/* ---- the header length and other formats ---- */

static void test_bad_header(void **state)
{
    (void)state;
    expect_error(raw("", 0), "t.safetensors: the file is empty (0 bytes): the download failed; fetch the file again");
    expect_error(raw("\x05\0\0\0\0", 5),
                 "t.safetensors: truncated: the file has 5 bytes, fewer than the 8-byte header length a safetensors "
                 "file starts with; the download is incomplete, fetch the file again");
    expect_error(raw("\x64\0\0\0\0\0\0\0{\"a\":{\"dtype\":\"F32\",", 28),
                 "t.safetensors: truncated: the JSON header takes bytes 8..108 but the file ends at byte 28; the "
                 "download is incomplete, fetch the file again");
    expect_error(raw("\0\0\0\0\0\x01\0\0{}", 10),
                 "t.safetensors: not a safetensors file: its first 8 bytes (00 00 00 00 00 01 00 00) would make the "
                 "JSON header 1099511627776 bytes long, more than 100 MB; give the path of a .safetensors file");
    expect_error(raw("\x01\0\0\0\0\0\0\0{", 9),
                 "t.safetensors: the header length is 1, too short for a JSON header: the file is corrupt");
    expect_error(raw("\x04\0\0\0\0\0\0\0abcd", 12),
                 "t.safetensors: not a safetensors file: the JSON header at byte 8 does not start with '{' (the file "
                 "starts with bytes 04 00 00 00 00 00 00 00); give the path of a .safetensors file");
    expect_error(raw("GGUF\x03\0\0\0\0\0\0\0\0\0\0\0", 16),
                 "t.safetensors: not a safetensors file: it is a GGUF model (it starts with \"GGUF\"); give it a .gguf "
                 "name, or give the path of the model's .safetensors files");
    expect_error(raw("{\n  \"architectures\": [\"LlamaForCausalLM\"]}", 41),
                 "t.safetensors: not a safetensors file: it starts with '{' and looks like JSON (a config or index "
                 "file?); give the model directory or its .safetensors file");
    expect_error(raw("<!DOCTYPE html><html>", 21),
                 "t.safetensors: not a safetensors file: it looks like an HTML page, probably an error page saved by a "
                 "failed download; fetch the file again");
    expect_error(raw("version https://git-lfs.github.com/spec/v1\noid sha256:0\n", 56),
                 "t.safetensors: not a safetensors file: it is a Git LFS pointer, not the weights; run `git lfs pull` "
                 "or download the model with huggingface-cli download");
    expect_error(raw("PK\3\4\0\0\0\0\0\0", 10),
                 "t.safetensors: not a safetensors file: it is a zip archive (a PyTorch .bin checkpoint?); save the "
                 "model with transformers' save_pretrained(safe_serialization=True)");
    expect_error(raw("\x80\x02}q\0(X\0\0\0\0", 12),
                 "t.safetensors: not a safetensors file: it is a Python pickle (an old PyTorch checkpoint); save the "
                 "model with transformers' save_pretrained(safe_serialization=True)");
}

static void test_bad_json(void **state)
{
    (void)state;
    expect_error(make("{\"a\":{\"dtype\":\"F32\",", NULL, 0),
                 "t.safetensors: the JSON header (bytes 8..28) does not parse: string or '}' expected near end of file "
                 "(line 1, column 20): the file is corrupt; fetch it again");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", NULL, 8),
                 "t.safetensors: the JSON header lists tensor \"a\" twice (the second ends at byte 65 of the file): "
                 "the file is corrupt");
    expect_error(make("{\"a\":3}", NULL, 0),
                 "t.safetensors: tensor \"a\" is described by an integer, not an object with dtype, shape and "
                 "data_offsets: the file is corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,1]}}", NULL, 1),
                 "t.safetensors: tensor \"a\" has dtype \"Q4\", which ptrain does not know (BOOL, U8, I8, U16, I16, "
                 "U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2): the file is corrupt or from a newer "
                 "safetensors");
    expect_error(make("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", NULL, 4),
                 "t.safetensors: tensor \"a\": dtype is missing, expected a string such as \"BF16\": the file is "
                 "corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":4,\"data_offsets\":[0,4]}}", NULL, 4),
                 "t.safetensors: tensor \"a\": shape is an integer, expected a list of at most 8 sizes: the file is "
                 "corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,-1],\"data_offsets\":[0,4]}}", NULL, 4),
                 "t.safetensors: tensor \"a\": shape[1] is negative, expected a size >= 0: the file is corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", NULL, 4),
                 "t.safetensors: tensor \"a\" has more than 2^63 elements: the file is corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", NULL, 8),
                 "t.safetensors: tensor \"a\": data_offsets must be [begin, end] with 0 <= begin <= end: the file is "
                 "corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", NULL, 8),
                 "t.safetensors: tensor \"a\": data_offsets must be [begin, end] with 0 <= begin <= end: the file is "
                 "corrupt");
}

static void test_bad_offsets(void **state)
{
    (void)state;
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", NULL, 8),
                 "t.safetensors: tensor \"a\" is F32 [2], 2 values of 4 bytes, but its data_offsets [0, 4] span 4 "
                 "bytes: the file is corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", NULL, 8),
                 "t.safetensors: tensor \"a\" (F32) starts at data byte 2, not a multiple of its 4-byte elements: the "
                 "file is corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4,2],\"data_offsets\":[4,20]}}", NULL, 12),
                 "t.safetensors: truncated: tensor \"b\" (BF16 [4, 2]) takes data bytes 4..20, but the data area ends "
                 "at 12 (the file has 131 bytes); the download is incomplete, fetch the file again");
    expect_error(make("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4503599627370496,4503599627370500]}}",
                      NULL, 8),
                 "t.safetensors: tensor \"a\" (U8 [4]) is placed at data bytes 4503599627370496..4503599627370500, far "
                 "past the end of the file (99 bytes): the file is corrupt");
    expect_error(make("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", NULL, 12),
                 "t.safetensors: tensors \"a\" (data bytes 0..8) and \"b\" (data bytes 4..12) overlap: the file is "
                 "corrupt");
}

/* A control byte in a tensor name is shown escaped, a long name by its start and end with its length. */
static void test_names_shown_safely(void **state)
{
    (void)state;
    char json[512];
    snprintf(json, sizeof json, "{\"%s\\u0007\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,1]}}",
             "0123456789012345678901234567890123456789012345678901234567890123456789");
    expect_error(make(json, NULL, 1),
                 "t.safetensors: tensor \"0123456789012345678901234567890123456789012345678901234567890123456789\\x07\" "
                 "has dtype \"X\", which ptrain does not know (BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, "
                 "F32, F64, F8_E4M3, F8_E5M2): the file is corrupt or from a newer safetensors");
    char name[301], want[600];
    memset(name, 'n', 300), name[300] = '\0';
    snprintf(json, sizeof json, "{\"%s\":{\"dtype\":\"X\",\"shape\":[1],\"data_offsets\":[0,1]}}", name);
    snprintf(want, sizeof want, "t.safetensors: tensor \"%.68s…(300 bytes)…%.68s\" has dtype \"X\", which ptrain does "
             "not know (BOOL, U8, I8, U16, I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2): the file is "
             "corrupt or from a newer safetensors", name, name);
    expect_error(make(json, NULL, 1), want);
}

/* ---- files and sharded sets ---- */

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    write_file(path, text, strlen(text));
}

static void test_open_file(void **state)
{
    (void)state;
    char dir[TMPDIR_SIZE], path[256];
    assert_int_equal(tmpdir_create(dir, sizeof dir, "ptrain-st"), 0);
    image im = valid_image();
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    write_file(path, im.p, im.n);
    free(im.p);
    st_file f;
    assert_int_equal(st_open(path, &f), PT_OK);
    assert_int_equal(f.n_tensors, 10);
    st_close(&f);
    snprintf(path, sizeof path, "%s/none.safetensors", dir);
    assert_int_equal(st_open(path, &f), PT_ERR_USER);
    char want[512];
    snprintf(want, sizeof want, "%s: cannot open the model file: No such file or directory (is the download "
             "complete?)", path);
    assert_string_equal(err_message(), want);
    assert_int_equal(st_open(dir, &f), PT_ERR_USER);
    snprintf(want, sizeof want, "%s: not a regular file: give a .safetensors file", dir);
    assert_string_equal(err_message(), want);
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    write_file(path, "", 0);
    assert_int_equal(st_open(path, &f), PT_ERR_USER);
    snprintf(want, sizeof want, "%s: the file is empty (0 bytes): the download failed; fetch the file again", path);
    assert_string_equal(err_message(), want);
    /* a directory with one model.safetensors is a set */
    st_set s;
    assert_int_equal(st_set_open(dir, &s), PT_OK);
    assert_int_equal(s.n_files, 1);
    assert_null(s.index_path);
    const st_file *in;
    assert_non_null(st_set_find(&s, "w", &in));
    assert_ptr_equal(in, &s.files[0]);
    assert_null(st_set_find(&s, "nope", NULL));
    st_set_close(&s);
    err_clear();
    assert_int_equal(tmpdir_remove(dir), 0);
}

/* The committed sharded model: three shards, every tensor found in its own. */
static void test_sharded_model(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/tests/data/hf/tiny-llama-f32", srcdir());
    st_set s;
    pt_status st = st_set_open(dir, &s);
    if (st) fail_msg("%s", err_message());
    assert_int_equal(s.n_files, 3);
    assert_non_null(s.index_path);
    assert_int_equal(s.n_entries, 1 + 1 + 2 * 9); /* embed, norm, 9 per layer (tied: no lm_head) */
    const st_file *f0, *f1;
    const st_tensor *e = st_set_find(&s, "model.embed_tokens.weight", &f0);
    const st_tensor *d = st_set_find(&s, "model.layers.1.mlp.down_proj.weight", &f1);
    assert_non_null(e);
    assert_non_null(d);
    assert_true(f0 != f1);
    assert_int_equal(e->shape[0], 320);
    assert_ptr_equal(st_find(f1, "model.layers.1.mlp.down_proj.weight"), d);
    st_set_close(&s);
}

static void expect_set_error(const char *dir, const char *expected_fmt)
{
    st_set s, zero;
    memset(&zero, 0, sizeof zero);
    char want[2048];
    snprintf(want, sizeof want, expected_fmt, dir, dir, dir);
    assert_int_equal(st_set_open(dir, &s), PT_ERR_USER);
    if (strcmp(err_message(), want)) fail_msg("got:      %s\nexpected: %s", err_message(), want);
    assert_memory_equal(&s, &zero, sizeof s);
    err_clear();
}

static void test_bad_index(void **state)
{
    (void)state;
    char dir[TMPDIR_SIZE], path[256];
    assert_int_equal(tmpdir_create(dir, sizeof dir, "ptrain-idx"), 0);
    expect_set_error(dir, "%s: no model.safetensors or model.safetensors.index.json in this directory; give a Hugging "
                          "Face model directory (config.json and *.safetensors) or a .gguf file");
    write_text(dir, "pytorch_model.bin", "PK");
    expect_set_error(dir, "%s: the model's weights are PyTorch .bin files, which ptrain does not read; save them as "
                          "safetensors (transformers: model.save_pretrained(dir, safe_serialization=True))");
    image im = make("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", NULL, 4);
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    write_file(path, im.p, im.n);
    free(im.p);
    write_text(dir, "model.safetensors.index.json",
               "{\"metadata\":{},\"weight_map\":{\"w\":\"model-00001-of-00002.safetensors\","
               "\"v\":\"model-00002-of-00002.safetensors\"}}");
    expect_set_error(dir, "%s/model.safetensors.index.json: shard model-00002-of-00002.safetensors (which holds tensor "
                          "\"v\") is missing from %s: the download is incomplete; download the model again");
    write_text(dir, "model.safetensors.index.json",
               "{\"weight_map\":{\"w\":\"model-00001-of-00002.safetensors\","
               "\"x\":\"model-00001-of-00002.safetensors\"}}");
    expect_set_error(dir, "%s/model.safetensors.index.json: tensor \"x\" should be in shard "
                          "model-00001-of-00002.safetensors, which does not have it: the index and the shards come "
                          "from different downloads; download the model again");
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"w\":\"../model.safetensors\"}}");
    expect_set_error(dir, "%s/model.safetensors.index.json: weight_map[\"w\"] is \"../model.safetensors\", not the name "
                          "of a shard file in %s: the index is corrupt; fetch the model again");
    write_text(dir, "model.safetensors.index.json", "{\"metadata\":{\"total_size\":4}}");
    expect_set_error(dir, "%s/model.safetensors.index.json: no \"weight_map\" object (tensor name -> shard file): this "
                          "is not a safetensors index; fetch the model again");
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":");
    expect_set_error(dir, "%s/model.safetensors.index.json: does not parse: unexpected token near end of file "
                          "(line 1, column 14); fetch the model again");
    write_text(dir, "model.safetensors.index.json", "{\"weight_map\":{\"w\":\"model-00001-of-00002.safetensors\"}}");
    st_set s;
    assert_int_equal(st_set_open(dir, &s), PT_OK);
    assert_int_equal(s.n_entries, 1);
    st_set_close(&s);
    assert_int_equal(tmpdir_remove(dir), 0);
}

/* ---- config.json ---- */

static const char llama_json[] =
    "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":2048,"
    "\"intermediate_size\":8192,\"num_hidden_layers\":16,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
    "\"head_dim\":64,\"vocab_size\":128256,\"max_position_embeddings\":131072,\"rms_norm_eps\":1e-05,"
    "\"rope_theta\":500000.0,\"rope_scaling\":{\"factor\":32.0,\"high_freq_factor\":4.0,\"low_freq_factor\":1.0,"
    "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"},\"tie_word_embeddings\":true,"
    "\"hidden_act\":\"silu\",\"torch_dtype\":\"bfloat16\"}";

static void test_config_llama(void **state)
{
    (void)state;
    hf_config h;
    pt_status st = hf_config_parse("config.json", llama_json, strlen(llama_json), &h);
    if (st) fail_msg("%s", err_message());
    const pt_model_config *c = &h.cfg;
    assert_string_equal(arch_name(c->arch), "llama");
    assert_true(c->n_layers == 16 && c->dim == 2048 && c->ffn_dim == 8192 && c->n_heads == 32 && c->n_kv_heads == 8);
    assert_true(c->head_dim == 64 && c->vocab == 128256 && c->ctx_len == 131072 && c->tied_embeddings);
    assert_true(c->norm_eps == 1e-5f && c->rope_theta == 500000.0f && h.rope_theta == 500000.0);
    assert_true(h.rope.type == PT_ROPE_LLAMA3 && h.rope.factor == 32 && h.rope.original_max_position_embeddings == 8192);
    assert_true(c->act == PT_ACT_SILU && c->embed_scale == 1 && !c->qkv_bias && !c->post_norms);
    assert_true(fabsf(c->attn_scale - 0.125f) < 1e-7f && c->sliding_window == 0 && c->attn_softcap == 0);
    assert_string_equal(h.torch_dtype, "bfloat16");
    assert_false(h.bnb_4bit);
    /* inv_freq with Llama 3 scaling: the highest frequency stays, the lowest is divided by 32 */
    float f[32];
    assert_int_equal(rope_inv_freq(h.rope_theta, c->head_dim, &h.rope, f), PT_OK);
    assert_true(f[0] == 1.0f && fabs(f[31] - pow(500000.0, -62.0 / 64) / 32) < 1e-12);
}

static void test_config_families(void **state)
{
    (void)state;
    hf_config h;
    const char *mistral = "{\"model_type\":\"mistral\",\"hidden_size\":4096,\"intermediate_size\":14336,"
                          "\"num_hidden_layers\":32,\"num_attention_heads\":32,\"num_key_value_heads\":8,"
                          "\"vocab_size\":32768,\"rope_theta\":1000000.0,\"sliding_window\":null}";
    assert_int_equal(hf_config_parse("config.json", mistral, strlen(mistral), &h), PT_OK);
    assert_string_equal(arch_name(h.cfg.arch), "llama");
    assert_string_equal(h.model_type, "mistral");
    assert_true(h.cfg.sliding_window == 0 && h.cfg.head_dim == 128 && !h.cfg.tied_embeddings);
    assert_true(h.cfg.norm_eps == 1e-6f && h.cfg.ctx_len == 2048 && h.rope.type == PT_ROPE_DEFAULT);
    const char *mistral_sw = "{\"architectures\":[\"MistralForCausalLM\"],\"hidden_size\":64,\"intermediate_size\":128,"
                             "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32,\"sliding_window\":4096}";
    assert_int_equal(hf_config_parse("config.json", mistral_sw, strlen(mistral_sw), &h), PT_OK);
    assert_true(h.cfg.sliding_window == 4096 && h.cfg.sliding_pattern == 1 && h.cfg.n_kv_heads == 4);
    const char *qwen = "{\"model_type\":\"qwen2\",\"hidden_size\":896,\"intermediate_size\":4864,"
                       "\"num_hidden_layers\":24,\"num_attention_heads\":14,\"num_key_value_heads\":2,"
                       "\"vocab_size\":151936,\"rope_theta\":1000000.0,\"rope_scaling\":null,\"rms_norm_eps\":1e-06,"
                       "\"tie_word_embeddings\":true,\"use_sliding_window\":false,\"sliding_window\":32768}";
    assert_int_equal(hf_config_parse("config.json", qwen, strlen(qwen), &h), PT_OK);
    assert_string_equal(arch_name(h.cfg.arch), "qwen2");
    assert_true(h.cfg.qkv_bias && h.cfg.tied_embeddings && h.cfg.head_dim == 64 && h.cfg.sliding_window == 0);
    /* Qwen3-0.6B's config.json: head_dim 128 against 1024 / 16 heads, q/k norms, tied */
    const char *qwen3 = "{\"architectures\":[\"Qwen3ForCausalLM\"],\"attention_bias\":false,\"head_dim\":128,"
                        "\"hidden_act\":\"silu\",\"hidden_size\":1024,\"intermediate_size\":3072,"
                        "\"max_position_embeddings\":40960,\"max_window_layers\":28,\"model_type\":\"qwen3\","
                        "\"num_attention_heads\":16,\"num_hidden_layers\":28,\"num_key_value_heads\":8,"
                        "\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":1000000,\"sliding_window\":null,"
                        "\"tie_word_embeddings\":true,\"torch_dtype\":\"bfloat16\",\"use_sliding_window\":false,"
                        "\"vocab_size\":151936}";
    assert_int_equal(hf_config_parse("config.json", qwen3, strlen(qwen3), &h), PT_OK);
    assert_string_equal(arch_name(h.cfg.arch), "qwen3");
    assert_true(h.cfg.qk_norm && !h.cfg.qkv_bias && h.cfg.tied_embeddings && h.cfg.head_dim == 128 &&
                h.cfg.dim == 1024 && h.cfg.n_kv_heads == 8 && h.cfg.sliding_window == 0 && h.rope_theta == 1e6);
    /* gemma-3-1b-it's config.json (transformers 4.50), and the same sizes as transformers 5 writes them */
    const char *gemma3 = "{\"architectures\":[\"Gemma3ForCausalLM\"],\"attn_logit_softcapping\":null,"
                         "\"final_logit_softcapping\":null,\"head_dim\":256,\"hidden_activation\":\"gelu_pytorch_tanh\","
                         "\"hidden_size\":1152,\"intermediate_size\":6912,\"max_position_embeddings\":32768,"
                         "\"model_type\":\"gemma3_text\",\"num_attention_heads\":4,\"num_hidden_layers\":26,"
                         "\"num_key_value_heads\":1,\"query_pre_attn_scalar\":256,\"rms_norm_eps\":1e-06,"
                         "\"rope_local_base_freq\":10000,\"rope_scaling\":null,\"rope_theta\":1000000,"
                         "\"sliding_window\":512,\"sliding_window_pattern\":6,\"vocab_size\":262144}";
    assert_int_equal(hf_config_parse("config.json", gemma3, strlen(gemma3), &h), PT_OK);
    assert_string_equal(arch_name(h.cfg.arch), "gemma3");
    assert_true(h.cfg.qk_norm && h.cfg.post_norms && h.cfg.tied_embeddings && h.cfg.head_dim == 256 &&
                h.cfg.attn_scale == 1.0f / 16 && h.cfg.embed_scale == sqrtf(1152.0f) && h.cfg.final_softcap == 0);
    assert_true(h.cfg.sliding_window == 512 && model_layer_window(&h.cfg, 4) == 512 &&
                model_layer_window(&h.cfg, 5) == 0 && model_layer_window(&h.cfg, 25) == 512);
    assert_true(h.rope_theta == 1e6 && h.cfg.rope_theta_local == 1e4f && h.rope.type == PT_ROPE_DEFAULT);
    const char *gemma3_t5 = "{\"model_type\":\"gemma3_text\",\"hidden_size\":64,\"intermediate_size\":96,"
                            "\"num_hidden_layers\":4,\"num_attention_heads\":4,\"vocab_size\":32,"
                            "\"layer_types\":[\"sliding_attention\",\"sliding_attention\",\"full_attention\","
                            "\"sliding_attention\"],\"rope_parameters\":{\"full_attention\":{\"rope_type\":\"linear\","
                            "\"factor\":8.0,\"rope_theta\":1000000.0},\"sliding_attention\":{\"rope_type\":\"default\","
                            "\"rope_theta\":20000.0}}}";
    assert_int_equal(hf_config_parse("config.json", gemma3_t5, strlen(gemma3_t5), &h), PT_OK);
    assert_true(h.cfg.sliding_period == 3 && model_layer_window(&h.cfg, 2) == 0 && model_layer_window(&h.cfg, 3) == 4096);
    assert_true(h.rope.type == PT_ROPE_LINEAR && h.rope.factor == 8 && h.rope_theta == 1e6 &&
                h.cfg.rope_theta_local == 2e4f);
    const char *old_rope = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
                           "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32,\"rope_theta\":20000,"
                           "\"rope_scaling\":{\"type\":\"linear\",\"factor\":4}}";
    assert_int_equal(hf_config_parse("config.json", old_rope, strlen(old_rope), &h), PT_OK);
    assert_true(h.rope.type == PT_ROPE_LINEAR && h.rope.factor == 4 && h.rope_theta == 20000);
    /* YaRN as Qwen2.5's model cards add it (transformers 4's rope_scaling "type"): the defaults transformers
     * fills in (betas 32 and 1, attention factor 1 + 0.1 ln 4); then every key given, the original context
     * taken from the top level first, the factor from max / original positions when absent */
    const char *yarn = "{\"model_type\":\"qwen2\",\"hidden_size\":64,\"intermediate_size\":128,"
                       "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32,\"rope_theta\":1000000,"
                       "\"max_position_embeddings\":32768,\"rope_scaling\":{\"factor\":4.0,"
                       "\"original_max_position_embeddings\":32768,\"type\":\"yarn\"}}";
    assert_int_equal(hf_config_parse("config.json", yarn, strlen(yarn), &h), PT_OK);
    assert_true(h.rope.type == PT_ROPE_YARN && h.rope.factor == 4 && h.rope.original_max_position_embeddings == 32768);
    assert_true(fabs(h.rope.attention_factor - (1 + 0.1 * log(4.0))) < 1e-12);
    assert_true(h.cfg.rope_mscale == (float)h.rope.attention_factor);
    float f[8];
    /* the ramp's ends: floor(2.95) = 2 and ceil(4.96) = 5 */
    assert_int_equal(rope_inv_freq(h.rope_theta, 16, &h.rope, f), PT_OK);
    assert_true(f[0] == 1.0f && f[2] == (float)pow(1e6, -4.0 / 16) && f[7] == (float)(pow(1e6, -14.0 / 16) / 4));
    assert_true(fabs(f[3] - pow(1e6, -6.0 / 16) * (1.0 / 3 / 4 + 2.0 / 3)) < 1e-9);
    const char *yarn_all = "{\"model_type\":\"llama\",\"hidden_size\":64,\"intermediate_size\":128,"
                           "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32,"
                           "\"max_position_embeddings\":4096,\"original_max_position_embeddings\":512,"
                           "\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":10000,\"beta_fast\":16,"
                           "\"beta_slow\":2,\"mscale\":1,\"mscale_all_dim\":0.5,\"truncate\":false,"
                           "\"original_max_position_embeddings\":1024}}";
    assert_int_equal(hf_config_parse("config.json", yarn_all, strlen(yarn_all), &h), PT_OK);
    assert_true(h.rope.original_max_position_embeddings == 512 && h.rope.factor == 8 && h.rope.no_truncate);
    assert_true(h.rope.beta_fast == 16 && h.rope.beta_slow == 2);
    assert_true(fabs(h.rope.attention_factor - (1 + 0.1 * log(8.0)) / (1 + 0.05 * log(8.0))) < 1e-12);
    const char *yarn_attn = "{\"model_type\":\"qwen3\",\"hidden_size\":64,\"intermediate_size\":128,"
                            "\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32,"
                            "\"rope_parameters\":{\"rope_type\":\"yarn\",\"rope_theta\":10000,\"factor\":2,"
                            "\"attention_factor\":0.75}}";
    assert_int_equal(hf_config_parse("config.json", yarn_attn, strlen(yarn_attn), &h), PT_OK);
    assert_true(h.rope.attention_factor == 0.75 && h.cfg.rope_mscale == 0.75f &&
                h.rope.original_max_position_embeddings == 2048);
}

static const char gemma2_json[] =
    "{\"architectures\":[\"Gemma2ForCausalLM\"],\"model_type\":\"gemma2\",\"attn_logit_softcapping\":50.0,"
    "\"final_logit_softcapping\":30.0,\"head_dim\":256,\"hidden_activation\":\"gelu_pytorch_tanh\","
    "\"hidden_size\":2304,\"intermediate_size\":9216,\"max_position_embeddings\":8192,\"num_attention_heads\":8,"
    "\"num_hidden_layers\":4,\"num_key_value_heads\":4,\"query_pre_attn_scalar\":256,\"rms_norm_eps\":1e-06,"
    "\"rope_parameters\":{\"rope_theta\":10000.0,\"rope_type\":\"default\"},\"sliding_window\":4096,"
    "\"layer_types\":[\"sliding_attention\",\"full_attention\",\"sliding_attention\",\"full_attention\"],"
    "\"vocab_size\":256000}";

static void test_config_gemma2(void **state)
{
    (void)state;
    hf_config h;
    pt_status st = hf_config_parse("config.json", gemma2_json, strlen(gemma2_json), &h);
    if (st) fail_msg("%s", err_message());
    const pt_model_config *c = &h.cfg;
    assert_string_equal(arch_name(c->arch), "gemma2");
    assert_true(c->act == PT_ACT_GELU_TANH && c->post_norms && c->tied_embeddings && !c->qkv_bias);
    assert_true(c->embed_scale == 48.0f && c->attn_scale == 0.0625f);
    assert_true(c->attn_softcap == 50 && c->final_softcap == 30 && c->sliding_window == 4096 && c->sliding_pattern == 2);
    assert_true(c->head_dim == 256 && c->n_kv_heads == 4 && h.rope_theta == 10000);
    /* null soft-caps and window switch them off */
    const char *minimal = "{\"model_type\":\"gemma2\",\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,"
                          "\"num_attention_heads\":2,\"head_dim\":32,\"vocab_size\":32,\"attn_logit_softcapping\":null,"
                          "\"final_logit_softcapping\":null,\"sliding_window\":null}";
    assert_int_equal(hf_config_parse("config.json", minimal, strlen(minimal), &h), PT_OK);
    assert_true(h.cfg.attn_softcap == 0 && h.cfg.final_softcap == 0 && h.cfg.sliding_window == 0);
    assert_true(h.cfg.embed_scale == 8.0f && h.cfg.attn_scale == 0.0625f); /* query_pre_attn_scalar defaults to 256 */
}

#define expect_config_error(json, expected) expect_config_error_((json), (expected), __LINE__)
static void expect_config_error_(const char *json, const char *expected, int line)
{
    hf_config h, zero;
    memset(&zero, 0, sizeof zero);
    pt_status st = hf_config_parse("config.json", json, strlen(json), &h);
    if (st != PT_ERR_USER || strcmp(err_message(), expected))
        fail_msg("line %d: status %d\n got:      %s\n expected: %s", line, st, st ? err_message() : "(ok)", expected);
    assert_memory_equal(&h, &zero, sizeof h);
    err_clear();
}

#define SIZES "\"hidden_size\":64,\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"vocab_size\":32"

static void test_config_errors(void **state)
{
    (void)state;
    expect_config_error("{\"model_type\":", "config.json: does not parse as JSON: unexpected token near end of file "
                                            "(line 1, column 14); download the model again");
    expect_config_error("[1]", "config.json: expected a JSON object of model settings");
    expect_config_error("{\"hidden_size\":64}", "config.json: has neither model_type nor architectures: is this the "
                                                "config.json of a model?");
    expect_config_error("{\"model_type\":\"bert\",\"architectures\":[\"BertForMaskedLM\"]}",
                        "config.json: model_type \"bert\" (BertForMaskedLM) is not supported; supported: llama (Llama 2/3.x, "
                        "SmolLM2, TinyLlama), mistral (loads as llama), mistral3 (Mistral Small 3.1+, Ministral 3 "
                        "multimodal: its text tower), qwen2 (Qwen2, Qwen2.5), gemma2 (Gemma 2), qwen3 (Qwen3), smollm3 "
                        "(SmolLM3), granite (Granite 3.x), olmo2 (OLMo 2), olmo3 (OLMo 3; loads as olmo2), gemma3_text (Gemma 3), "
                        "gemma3 (Gemma 3 "
                        "multimodal: its text tower), phi3 (Phi-3.5, Phi-4, Phi-4-mini), qwen3_moe (Qwen3-MoE: "
                        "Qwen3-30B-A3B, 235B-A22B), gemma4_text (Gemma 4), gemma4 (Gemma 4, its text tower), "
                        "qwen3_5_text (Qwen3.5), qwen3_5 (Qwen3.5, its "
                        "text tower), ministral3 (Ministral 3), mixtral (Mixtral 8x7B, 8x22B), "
                        "granitemoehybrid (Granite 4.0: the attention-only sizes without experts), gpt_oss (gpt-oss-20b, "
                        "gpt-oss-120b)");
    expect_config_error("{\"architectures\":[\"GPT2LMHeadModel\"]}",
                        "config.json: model_type \"not given\" (GPT2LMHeadModel) is not supported; supported: llama (Llama "
                        "2/3.x, SmolLM2, TinyLlama), mistral (loads as llama), mistral3 (Mistral Small 3.1+, Ministral 3 "
                        "multimodal: its text tower), qwen2 (Qwen2, Qwen2.5), gemma2 (Gemma 2), qwen3 (Qwen3), smollm3 "
                        "(SmolLM3), granite (Granite 3.x), olmo2 (OLMo 2), olmo3 (OLMo 3; loads as olmo2), gemma3_text (Gemma 3), "
                        "gemma3 (Gemma 3 "
                        "multimodal: its text tower), phi3 (Phi-3.5, Phi-4, Phi-4-mini), qwen3_moe (Qwen3-MoE: "
                        "Qwen3-30B-A3B, 235B-A22B), gemma4_text (Gemma 4), gemma4 (Gemma 4, its text tower), "
                        "qwen3_5_text (Qwen3.5), qwen3_5 (Qwen3.5, its "
                        "text tower), ministral3 (Ministral 3), mixtral (Mixtral 8x7B, 8x22B), "
                        "granitemoehybrid (Granite 4.0: the attention-only sizes without experts), gpt_oss (gpt-oss-20b, "
                        "gpt-oss-120b)");
    expect_config_error("{\"model_type\":\"llama\",\"architectures\":\"LlamaForCausalLM\"}",
                        "config.json: architectures: expected a list of class names such as [\"LlamaForCausalLM\"], "
                        "found the string \"LlamaForCausalLM\"");
    expect_config_error("{\"model_type\":\"llama\",\"hidden_size\":64}",
                        "config.json: num_hidden_layers is missing; every config.json of this model family has it: is "
                        "the file complete? (download the model again)");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"hidden_size\":\"64\"}",
                        "config.json: does not parse as JSON: duplicate object key near '\"hidden_size\"' (line 1, "
                        "column 138); download the model again");
    expect_config_error("{\"model_type\":\"llama\",\"hidden_size\":\"64\",\"num_hidden_layers\":2}",
                        "config.json: hidden_size: expected an integer from 1 to 16777216, found the string \"64\"");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"num_key_value_heads\":8}",
                        "config.json: num_key_value_heads: expected an integer from 1 to 4, found 8");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"num_key_value_heads\":3}",
                        "config.json: 4 heads, 3 key/value heads and head size 16 do not fit together (heads must be a "
                        "multiple of key/value heads, the head size even and at most 1024)");
    expect_config_error("{\"model_type\":\"llama\",\"hidden_size\":66,\"intermediate_size\":128,\"num_hidden_layers\":2,"
                        "\"num_attention_heads\":4,\"vocab_size\":32}",
                        "config.json: hidden_size 66 is not a multiple of num_attention_heads 4 and no head_dim is given");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"rms_norm_eps\":0}",
                        "config.json: rms_norm_eps: expected a number above 1e-20 and at most 1, found 0");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"tie_word_embeddings\":\"yes\"}",
                        "config.json: tie_word_embeddings: expected true or false, found the string \"yes\"");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"rope_scaling\":{\"rope_type\":\"dynamic\",\"factor\":4}}",
                        "config.json: rope_scaling.rope_type \"dynamic\" is not supported; supported: default, linear, "
                        "llama3, yarn (and longrope for phi3)");
    expect_config_error("{\"model_type\":\"gemma3_text\"," SIZES ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4}}",
                        "config.json: rope scaling yarn on a gemma3 model; ptrain runs yarn for llama-like families "
                        "(llama, mistral, qwen2, qwen3, ...), whose every layer shares one rotary embedding");
    expect_config_error("{\"model_type\":\"qwen2\"," SIZES ",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4,"
                        "\"beta_fast\":-1}}",
                        "config.json: rope_scaling.beta_fast: expected a number above 0 and at most 1e+09, found -1");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"rope_scaling\":{\"type\":\"longrope\","
                        "\"short_factor\":[1,1,1,1,1,1,1,1],\"long_factor\":[2,2,2,2,2,2,2,2]}}",
                        "config.json: rope scaling longrope is Phi-3's; ptrain runs it for phi3 models only, not "
                        "llama");
    expect_config_error("{\"model_type\":\"phi3\"," SIZES ",\"original_max_position_embeddings\":64,\"rope_scaling\":{"
                        "\"type\":\"longrope\",\"short_factor\":[1,1,1],\"long_factor\":[2,2,2]}}",
                        "config.json: rope scaling (longrope): short_factor and long_factor have 3 values; the 16 "
                        "rotated values of a head need 8");
    expect_config_error("{\"model_type\":\"phi3\"," SIZES ",\"rope_scaling\":{\"type\":\"longrope\","
                        "\"short_factor\":[1,1,1,1,1,1,1,1],\"long_factor\":[2,2,2,2,2,2,2]}}",
                        "config.json: rope_scaling: short_factor has 8 values and long_factor 7; they must be as long");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8}}",
                        "config.json: rope_scaling.low_freq_factor is missing; every config.json of this model family "
                        "has it: is the file complete? (download the model again)");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"rope_parameters\":{\"rope_type\":\"linear\","
                        "\"factor\":\"2\"}}",
                        "config.json: rope_parameters.factor: expected a number above 0 and at most 1e+12, found the "
                        "string \"2\"");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"rope_scaling\":[1]}",
                        "config.json: rope_scaling: expected an object such as {\"rope_type\": \"llama3\", ...}, found "
                        "a list");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"hidden_act\":\"gelu\"}",
                        "config.json: hidden_act \"gelu\" is not supported for llama models; supported: silu");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"attention_bias\":true}",
                        "config.json: attention_bias is true; ptrain's llama models have no attention biases");
    expect_config_error("{\"model_type\":\"qwen2\"," SIZES ",\"use_sliding_window\":true}",
                        "config.json: use_sliding_window is true; ptrain runs Qwen2 with full attention on every layer "
                        "only");
    expect_config_error("{\"model_type\":\"qwen3\"," SIZES ",\"use_sliding_window\":true}",
                        "config.json: use_sliding_window is true; ptrain runs Qwen3 with full attention on every layer "
                        "only");
    expect_config_error("{\"model_type\":\"qwen3\"," SIZES ",\"attention_bias\":true}",
                        "config.json: attention_bias is true; ptrain's qwen3 models have no attention biases");
    expect_config_error("{\"model_type\":\"gemma3_text\"," SIZES ",\"layer_types\":[\"full_attention\","
                        "\"sliding_attention\"]}",
                        "config.json: layer_types must list 2 layers, \"sliding_attention\" but for every P-th "
                        "\"full_attention\" (Gemma 3: P = 6)");
    expect_config_error("{\"model_type\":\"gemma3_text\"," SIZES ",\"rope_parameters\":{\"full_attention\":{},"
                        "\"sliding_attention\":{\"rope_type\":\"linear\",\"factor\":2}}}",
                        "config.json: rope_parameters.sliding_attention: rope_type \"linear\"; ptrain (and llama.cpp) "
                        "run Gemma 3's local layers unscaled");
    expect_config_error("{\"model_type\":\"gemma2\"," SIZES ",\"layer_types\":[\"full_attention\"]}",
                        "config.json: layer_types must list 2 layers, \"sliding_attention\" but for every P-th "
                        "\"full_attention\" (Gemma 2: P = 2, sliding on even layers)");
    expect_config_error("{\"model_type\":\"olmo3\"," SIZES ",\"layer_types\":[\"sliding_attention\","
                        "\"sliding_attention\"],\"sliding_window\":null}",
                        "config.json: sliding_window is null; ptrain runs OLMo 3's sliding_attention layers with a "
                        "window (4096 in every release): give it");
    expect_config_error("{\"model_type\":\"olmo3\"," SIZES ",\"layer_types\":[\"full_attention\","
                        "\"sliding_attention\"]}",
                        "config.json: layer_types must list 2 layers, \"sliding_attention\" but for every P-th "
                        "\"full_attention\" (OLMo 3: P = 4)");
    expect_config_error("{\"model_type\":\"olmo3\"," SIZES ",\"rope_parameters\":{\"full_attention\":{},"
                        "\"sliding_attention\":{\"rope_type\":\"yarn\",\"factor\":2}}}",
                        "config.json: rope_parameters.sliding_attention: rope_type \"yarn\"; ptrain (and llama.cpp) "
                        "run OLMo 3's local layers unscaled");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"quantization_config\":{\"quant_method\":\"gptq\"}}",
                        "config.json: quantization_config.quant_method \"gptq\" is not supported; ptrain reads "
                        "bitsandbytes 4-bit (NF4) checkpoints, gpt-oss's mxfp4 ones and unquantized F32/F16/BF16 ones");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"quantization_config\":{\"quant_method\":\"bitsandbytes\","
                        "\"load_in_8bit\":true}}",
                        "config.json: a bitsandbytes 8-bit checkpoint; ptrain reads bitsandbytes 4-bit (NF4) ones: use "
                        "the unquantized model (ptrain quantizes it to NF4 on load)");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"quantization_config\":{\"load_in_4bit\":true,"
                        "\"bnb_4bit_quant_type\":\"fp4\"}}",
                        "config.json: quantization_config: bnb_4bit_quant_type \"fp4\" with storage uint8 is not "
                        "supported; ptrain reads NF4 stored as uint8");
    expect_config_error("{\"model_type\":\"llama\"," SIZES ",\"quantization_config\":{\"load_in_4bit\":1}}",
                        "config.json: quantization_config.load_in_4bit: expected true or false, found 1");
    expect_config_error("{\"model_type\":\"smollm3\"," SIZES ",\"no_rope_layers\":[1,0,1]}",
                        "config.json: no_rope_layers: expected a list of 2 values 0 or 1 (one per layer)");
    expect_config_error("{\"model_type\":\"smollm3\"," SIZES ",\"no_rope_layers\":[0,1]}",
                        "config.json: no_rope_layers[1]: ptrain (as llama.cpp) runs a layer without RoPE every n-th "
                        "layer (SmolLM3: 1, 1, 1, 0, ...); this list is not of that form");
    expect_config_error("{\"model_type\":\"smollm3\"," SIZES ",\"use_sliding_window\":true}",
                        "config.json: use_sliding_window is true; ptrain runs SmolLM3 with full attention on every "
                        "layer only");
}

/* Granite's multipliers: attention_multiplier replaces 1/sqrt(head_dim), 1 when absent as in transformers. */
static void test_granite_multipliers(void **state)
{
    (void)state;
    hf_config h;
    const char *full = "{\"model_type\":\"granite\"," SIZES ",\"embedding_multiplier\":12,\"attention_multiplier\":"
                       "0.015625,\"residual_multiplier\":0.22,\"logits_scaling\":8}";
    assert_int_equal(hf_config_parse("config.json", full, strlen(full), &h), PT_OK);
    assert_true(h.cfg.arch == PT_ARCH_GRANITE && !h.cfg.tied_embeddings && h.cfg.embed_scale == 12.0f);
    assert_true(h.cfg.attn_scale == 0.015625f && h.cfg.residual_scale == 0.22f && h.cfg.logit_scale == 8.0f);
    const char *bare = "{\"model_type\":\"granite\"," SIZES "}";
    assert_int_equal(hf_config_parse("config.json", bare, strlen(bare), &h), PT_OK);
    assert_true(h.cfg.embed_scale == 1.0f && h.cfg.attn_scale == 1.0f && h.cfg.residual_scale == 1.0f);
    expect_config_error("{\"model_type\":\"granite\"," SIZES ",\"logits_scaling\":0}",
                        "config.json: logits_scaling: expected a number above 1e-09 and at most 1e+09, found 0");
}

/* SmolLM3's NoPE layers: no_rope_layers (1: RoPE) or no_rope_layer_interval, 4 by default. */
static void test_smollm3_no_rope_layers(void **state)
{
    (void)state;
    hf_config h;
    const char *plain = "{\"model_type\":\"smollm3\"," SIZES "}";
    assert_int_equal(hf_config_parse("config.json", plain, strlen(plain), &h), PT_OK);
    assert_true(h.cfg.arch == PT_ARCH_SMOLLM3 && h.cfg.nope_period == 4 && h.cfg.tied_embeddings);
    const char *list = "{\"model_type\":\"smollm3\",\"hidden_size\":64,\"intermediate_size\":128,"
                       "\"num_hidden_layers\":6,\"num_attention_heads\":4,\"vocab_size\":32,"
                       "\"no_rope_layers\":[1,1,0,1,1,0],\"tie_word_embeddings\":false}";
    assert_int_equal(hf_config_parse("config.json", list, strlen(list), &h), PT_OK);
    assert_true(h.cfg.nope_period == 3 && !h.cfg.tied_embeddings);
    for (int l = 0; l < 6; l++) assert_int_equal(model_layer_rope(&h.cfg, l), l % 3 != 2);
    const char *all = "{\"model_type\":\"smollm3\"," SIZES ",\"no_rope_layers\":[1,1]}";
    assert_int_equal(hf_config_parse("config.json", all, strlen(all), &h), PT_OK);
    assert_true(h.cfg.nope_period == 0 && model_layer_rope(&h.cfg, 1));
}

static void test_config_file(void **state)
{
    (void)state;
    char path[1024];
    hf_config h;
    snprintf(path, sizeof path, "%s/tests/data/hf/tiny-llama-bnb4/config.json", srcdir());
    assert_int_equal(hf_config_read(path, &h), PT_OK);
    assert_true(h.bnb_4bit && h.bnb_double_quant && h.rope.type == PT_ROPE_LINEAR && h.rope.factor == 2);
    assert_int_equal(hf_config_read("/nonexistent/config.json", &h), PT_ERR_USER);
    assert_string_equal(err_message(), "/nonexistent/config.json: cannot open it: No such file or directory; a Hugging "
                                       "Face model directory has a config.json");
    err_clear();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),           cmocka_unit_test(test_prefixes_and_mutations),
        cmocka_unit_test(test_bad_header),      cmocka_unit_test(test_bad_json),
        cmocka_unit_test(test_bad_offsets),     cmocka_unit_test(test_names_shown_safely),
        cmocka_unit_test(test_open_file),       cmocka_unit_test(test_sharded_model),
        cmocka_unit_test(test_bad_index),       cmocka_unit_test(test_config_llama),
        cmocka_unit_test(test_config_families), cmocka_unit_test(test_config_gemma2),
        cmocka_unit_test(test_config_errors),   cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_smollm3_no_rope_layers), cmocka_unit_test(test_granite_multipliers),
    };
    return cmocka_run_group_tests_name("safetensors", tests, NULL, NULL);
}
