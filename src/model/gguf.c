/* gguf.c — the bounds-checked GGUF reader (versions 2 and 3; see include/ptrain/gguf.h).
 *
 * Parsing walks the image once with a cursor that never reads past its end: every count, string
 * length, array length, dimension, offset and size is checked against what is left of the file
 * before it is used, with overflow-safe arithmetic, and arrays are grown as entries are actually
 * read, so a hostile header cannot make the reader allocate more than the file could describe.
 * After the walk: duplicate keys and tensor names (found by sorting), general.alignment, tensor
 * offsets (aligned, inside the file) and overlaps (sorted by offset) are checked. Any failure
 * frees everything and leaves one PT_ERR_USER message naming the file, the problem and, where
 * there is one, the fix. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ptrain/gguf.h"
#include "ptrain/quant_blocks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_ALIGNMENT 32u
/* The smallest possible metadata entry (u64 key length, a 1-byte key, u32 type, a u8 value) and
 * tensor info (u64 name length, a 1-byte name, u32 n_dims = 0, u32 type, u64 offset). */
#define MIN_KV_BYTES 14u
#define MIN_TENSOR_BYTES 25u
/* More than any real string, array or header needs: a length or count asking for this is corrupt,
 * not cut short. */
#define IMPLAUSIBLE_BYTES ((uint64_t)1 << 40)

/* --- ggml tensor types --- */

pt_dtype gguf_ggml_dtype(uint32_t ggml_type)
{
#define GGML_DTYPE(dtype, ggml, name, values, block) case ggml: return dtype;
    switch (ggml_type) {
        QUANT_FORMATS(GGML_DTYPE) /* the types ptrain reads: the formats of quant_blocks.h's list */
    default: return PT_DTYPE_COUNT;
    }
#undef GGML_DTYPE
}

/* The types ptrain does not read, by whose sizes the reader still checks where such a tensor ends
 * and names its type (the others' are the dtype table's, through gguf_ggml_dtype). */
static const struct {
    const char *name;
    uint32_t block, bytes;
} foreign_types[] = {
    [GGML_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [GGML_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [GGML_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [GGML_TYPE_IQ1_S] = {"iq1_s", 256, 50},
    [GGML_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [GGML_TYPE_IQ3_S] = {"iq3_s", 256, 110},
    [GGML_TYPE_IQ2_S] = {"iq2_s", 256, 82},
    [GGML_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [GGML_TYPE_I8] = {"i8", 1, 1},
    [GGML_TYPE_I16] = {"i16", 1, 2},
    [GGML_TYPE_I32] = {"i32", 1, 4},
    [GGML_TYPE_I64] = {"i64", 1, 8},
    [GGML_TYPE_F64] = {"f64", 1, 8},
    [GGML_TYPE_IQ1_M] = {"iq1_m", 256, 56},
    [GGML_TYPE_TQ1_0] = {"tq1_0", 256, 54},
    [GGML_TYPE_TQ2_0] = {"tq2_0", 256, 66},
    [GGML_TYPE_MXFP4] = {"mxfp4", 32, 17},
};

bool gguf_ggml_type_info(uint32_t ggml_type, const char **name, uint32_t *block, uint32_t *bytes)
{
    pt_dtype d = gguf_ggml_dtype(ggml_type);
    const char *n = NULL;
    uint32_t values = 0, size = 0;
    if (d != PT_DTYPE_COUNT) {
        n = dtype_name(d);
        values = (uint32_t)dtype_block_values(d);
        size = (uint32_t)dtype_size_bytes(d, values);
    } else if (ggml_type < sizeof foreign_types / sizeof foreign_types[0] && foreign_types[ggml_type].name) {
        n = foreign_types[ggml_type].name;
        values = foreign_types[ggml_type].block;
        size = foreign_types[ggml_type].bytes;
    } else {
        return false;
    }
    if (name) *name = n;
    if (block) *block = values;
    if (bytes) *bytes = size;
    return true;
}

static const char *const kv_type_names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                            "bool", "string", "array", "u64", "i64", "f64"};

const char *gguf_type_name(gguf_type type)
{
    return (unsigned)type <= GGUF_TYPE_F64 ? kv_type_names[type] : "invalid";
}

uint32_t gguf_scalar_size(uint32_t t)
{
    switch (t) {
    case GGUF_TYPE_U8:
    case GGUF_TYPE_I8:
    case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_U16:
    case GGUF_TYPE_I16: return 2;
    case GGUF_TYPE_U32:
    case GGUF_TYPE_I32:
    case GGUF_TYPE_F32: return 4;
    case GGUF_TYPE_U64:
    case GGUF_TYPE_I64:
    case GGUF_TYPE_F64: return 8;
    default: return 0;
    }
}

static bool is_int_type(uint32_t t)
{
    return t <= GGUF_TYPE_I32 || t == GGUF_TYPE_U64 || t == GGUF_TYPE_I64;
}

/* --- little-endian reads (the image need not be aligned) --- */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t le64(const uint8_t *p) { return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32; }

/* A scalar integer value as int64 (*big set when a u64 exceeds INT64_MAX). */
static int64_t int_value(uint32_t t, const uint8_t *p, bool *big)
{
    *big = false;
    switch (t) {
    case GGUF_TYPE_U8: return p[0];
    case GGUF_TYPE_I8: return (int8_t)p[0];
    case GGUF_TYPE_U16: return le16(p);
    case GGUF_TYPE_I16: return (int16_t)le16(p);
    case GGUF_TYPE_U32: return le32(p);
    case GGUF_TYPE_I32: return (int32_t)le32(p);
    case GGUF_TYPE_U64: {
        uint64_t v = le64(p);
        if (v > INT64_MAX) *big = true;
        return v > INT64_MAX ? INT64_MAX : (int64_t)v;
    }
    case GGUF_TYPE_I64: return (int64_t)le64(p);
    case GGUF_TYPE_BOOL: return p[0] != 0;
    default: return 0;
    }
}

static double float_value(uint32_t t, const uint8_t *p)
{
    if (t == GGUF_TYPE_F32) {
        uint32_t b = le32(p);
        float v;
        memcpy(&v, &b, 4);
        return v;
    }
    if (t == GGUF_TYPE_F64) {
        uint64_t b = le64(p);
        double v;
        memcpy(&v, &b, 8);
        return v;
    }
    bool big;
    if (t == GGUF_TYPE_U64) return (double)le64(p);
    return (double)int_value(t, p, &big);
}

/* --- messages --- */

/* A name from the file as a message shows it (error.h). */
static pt_shown show(gguf_str str) { return shown_bytes(str.data, (size_t)str.len); }

/* --- the cursor --- */

typedef struct {
    pt_shown name; /* the file, for messages */
    const uint8_t *p;
    size_t size, pos;
} rd;

static bool has(const rd *r, uint64_t n) { return n <= r->size - r->pos; }

/* The file is too short for what comes at byte pos (need bytes, or UINT64_MAX when the count
 * overflowed): truncated, unless no real model could need that much (then corrupt). A truncated
 * download can end inside any string or array, so "more than the rest of the file" alone does not
 * mean corrupt. */
static pt_status short_read(const rd *r, size_t pos, uint64_t need, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static pt_status short_read(const rd *r, size_t pos, uint64_t need, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (need > IMPLAUSIBLE_BYTES)
        return ERR(PT_ERR_USER, "%s: %s at byte %zu would need more than 2^40 bytes: the file is corrupt",
                   r->name.s, what, pos);
    return ERR(PT_ERR_USER,
               "%s: truncated at byte %zu of %zu: reading %s needs %llu bytes, only %zu remain; the "
               "download is incomplete, fetch the file again",
               r->name.s, pos, r->size, what, (unsigned long long)need, r->size - pos);
}

/* Read a string (u64 length + bytes) at the cursor; what describes it for messages. */
static pt_status read_str(rd *r, gguf_str *out, const char *what, const char *what_arg)
{
    size_t at = r->pos;
    if (!has(r, 8)) return short_read(r, at, 8, what, what_arg);
    uint64_t len = le64(r->p + r->pos);
    if (!has(r, 8 + (len > UINT64_MAX - 8 ? UINT64_MAX - 8 : len)))
        return short_read(r, at, len > UINT64_MAX - 8 ? UINT64_MAX : 8 + len, what, what_arg);
    out->data = (const char *)r->p + r->pos + 8;
    out->len = len;
    r->pos += 8 + (size_t)len;
    return PT_OK;
}

/* --- parsing --- */

static pt_status not_gguf(const rd *r)
{
    const uint8_t *p = r->p;
    size_t n = r->size;
    const char *name = r->name.s;
    if (n >= 9 && p[8] == '{' && le64(p) >= 2 && le64(p) < ((uint64_t)1 << 32)) /* header size, then JSON */
        return ERR(PT_ERR_USER,
                   "%s: not a GGUF file: it looks like a safetensors file (an 8-byte header length, then "
                   "JSON); give the path of a .gguf file, or convert the model with llama.cpp's "
                   "convert_hf_to_gguf.py",
                   name);
    size_t i = 0;
    while (i < n && i < 64 && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) i++;
    if (i < n && (p[i] == '{' || p[i] == '['))
        return ERR(PT_ERR_USER,
                   "%s: not a GGUF file: it starts with '%c' and looks like JSON (a config, tokenizer or "
                   "index file?); give the path of the .gguf model file",
                   name, p[i]);
    if (i < n && p[i] == '<')
        return ERR(PT_ERR_USER,
                   "%s: not a GGUF file: it looks like an HTML page, probably an error page saved by a "
                   "failed download; fetch the file again",
                   name);
    if (n >= 24 && memcmp(p, "version https://git-lfs", 23) == 0)
        return ERR(PT_ERR_USER,
                   "%s: not a GGUF file: it is a Git LFS pointer, not the model itself; run `git lfs pull` "
                   "or download the file directly",
                   name);
    if (n >= 4 && memcmp(p, "PK\3\4", 4) == 0)
        return ERR(PT_ERR_USER,
                   "%s: not a GGUF file: it is a zip archive (a PyTorch .bin/.pt checkpoint?); convert the "
                   "model to GGUF with llama.cpp's convert_hf_to_gguf.py",
                   name);
    if (n >= 4 && (memcmp(p, "lmgg", 4) == 0 || memcmp(p, "fmgg", 4) == 0 || memcmp(p, "tjgg", 4) == 0))
        return ERR(PT_ERR_USER,
                   "%s: not a GGUF file: it is an old GGML/GGJT model from before GGUF (2023); convert it "
                   "to GGUF with a current llama.cpp",
                   name);
    if (n >= 4 && memcmp(p, "FUGG", 4) == 0)
        return ERR(PT_ERR_USER,
                   "%s: a big-endian GGUF file; ptrain reads little-endian GGUF only: convert it with "
                   "gguf-convert-endian (PyPI package gguf)",
                   name);
    char hex[32] = "";
    for (size_t k = 0; k < 4 && k < n; k++) snprintf(hex + 3 * k, sizeof hex - 3 * k, " %02x", p[k]);
    return ERR(PT_ERR_USER,
               "%s: not a GGUF file: it starts with bytes%s, not \"GGUF\"; give the path of a .gguf model "
               "file",
               name, hex);
}

static pt_status parse_header(rd *r, gguf_file *f, uint64_t *n_kv, uint64_t *n_tensors)
{
    if (r->size == 0)
        return ERR(PT_ERR_USER, "%s: the file is empty (0 bytes): the download failed; fetch the file again",
                   r->name.s);
    if (r->size < 4 ? memcmp(r->p, "GGUF", r->size) != 0 : memcmp(r->p, "GGUF", 4) != 0) return not_gguf(r);
    if (r->size < 8) return short_read(r, 0, 8, "the header (magic and version)");
    uint32_t v = le32(r->p + 4);
    if (v == 1)
        return ERR(PT_ERR_USER,
                   "%s: GGUF version 1 (the 2023 pre-release format) is not supported; ptrain reads "
                   "versions 2 and 3: convert the model again with a current llama.cpp",
                   r->name.s);
    if (v != 2 && v != 3) {
        uint32_t swapped = (v >> 24) | ((v >> 8) & 0xff00) | ((v << 8) & 0xff0000) | (v << 24);
        if (swapped >= 1 && swapped <= 3)
            return ERR(PT_ERR_USER,
                       "%s: a big-endian GGUF file (version %u); ptrain reads little-endian GGUF only: "
                       "convert it with gguf-convert-endian (PyPI package gguf)",
                       r->name.s, swapped);
        return ERR(PT_ERR_USER,
                   "%s: GGUF version %u is not supported; ptrain reads versions 2 and 3 (the file is "
                   "newer than this ptrain, or corrupt)",
                   r->name.s, v);
    }
    f->version = v;
    if (r->size < 24) return short_read(r, 0, 24, "the header (version %u)", v);
    *n_tensors = le64(r->p + 8);
    *n_kv = le64(r->p + 16);
    r->pos = 24;
    /* each entry takes at least MIN_*_BYTES: counts the rest of the file cannot hold are refused
     * before anything is allocated for them */
    uint64_t left = r->size - 24;
    uint64_t need = UINT64_MAX;
    if (*n_kv <= UINT64_MAX / MIN_KV_BYTES &&
        *n_tensors <= (UINT64_MAX - *n_kv * MIN_KV_BYTES) / MIN_TENSOR_BYTES)
        need = *n_kv * MIN_KV_BYTES + *n_tensors * MIN_TENSOR_BYTES;
    if (need > left) {
        if (need > IMPLAUSIBLE_BYTES)
            return ERR(PT_ERR_USER,
                       "%s: the header announces %llu metadata entries and %llu tensors, more than any file "
                       "could hold: the file is corrupt",
                       r->name.s, (unsigned long long)*n_kv, (unsigned long long)*n_tensors);
        return ERR(PT_ERR_USER,
                   "%s: truncated at byte 24 of %zu: the header announces %llu metadata entries and %llu "
                   "tensors, which need at least %llu more bytes; the download is incomplete, fetch the file "
                   "again",
                   r->name.s, r->size, (unsigned long long)*n_kv, (unsigned long long)*n_tensors,
                   (unsigned long long)need);
    }
    return PT_OK;
}

/* Grow *arr (of *cap elements of size elem) to hold at least n + 1, at most limit. */
static pt_status grow(void **arr, uint64_t *cap, uint64_t n, uint64_t limit, size_t elem)
{
    if (n < *cap) return PT_OK;
    uint64_t c = *cap ? *cap * 2 : 16;
    if (c > limit) c = limit;
    if (c <= n) c = n + 1;
    if (c > SIZE_MAX / elem) return ERR(PT_ERR_NOMEM, "out of memory");
    void *p = realloc(*arr, (size_t)c * elem);
    TRY_ALLOC(p);
    memset((char *)p + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
    *arr = p;
    *cap = c;
    return PT_OK;
}

static pt_status parse_kv(rd *r, gguf_kv *kv, uint64_t idx, uint64_t n_kv)
{
    size_t at = r->pos;
    char ctx[64];
    snprintf(ctx, sizeof ctx, "metadata entry %llu of %llu", (unsigned long long)idx + 1,
             (unsigned long long)n_kv);
    TRY(read_str(r, &kv->key, "the key of %s", ctx));
    if (kv->key.len == 0)
        return ERR(PT_ERR_USER, "%s: %s (at byte %zu) has an empty key: the file is corrupt", r->name.s, ctx, at);
    pt_shown key = show(kv->key);
    at = r->pos;
    if (!has(r, 4)) return short_read(r, at, 4, "the value type of key '%s'", key.s);
    uint32_t type = le32(r->p + r->pos);
    r->pos += 4;
    if (type > GGUF_TYPE_F64)
        return ERR(PT_ERR_USER,
                   "%s: key '%s' has unknown value type %u: the file is corrupt or from a newer GGUF "
                   "version",
                   r->name.s, key.s, type);
    kv->type = (gguf_type)type;
    kv->count = 1;
    at = r->pos;
    kv->value = r->p + r->pos;
    if (type == GGUF_TYPE_STRING) {
        gguf_str s;
        return read_str(r, &s, "the string value of key '%s'", key.s);
    }
    if (type != GGUF_TYPE_ARRAY) {
        if (!has(r, gguf_scalar_size(type)))
            return short_read(r, at, gguf_scalar_size(type), "the %s value of key '%s'", kv_type_names[type], key.s);
        r->pos += gguf_scalar_size(type);
        return PT_OK;
    }
    if (!has(r, 12)) return short_read(r, at, 12, "the element type and count of array '%s'", key.s);
    uint32_t et = le32(r->p + r->pos);
    uint64_t count = le64(r->p + r->pos + 4);
    r->pos += 12;
    if (et == GGUF_TYPE_ARRAY)
        return ERR(PT_ERR_USER,
                   "%s: key '%s' is an array of arrays, which GGUF models do not use: the file is corrupt",
                   r->name.s, key.s);
    if (et > GGUF_TYPE_F64)
        return ERR(PT_ERR_USER,
                   "%s: array '%s' has unknown element type %u: the file is corrupt or from a newer GGUF "
                   "version",
                   r->name.s, key.s, et);
    kv->elem_type = (gguf_type)et;
    kv->count = count;
    kv->value = r->p + r->pos;
    at = r->pos;
    if (et != GGUF_TYPE_STRING) {
        uint32_t es = gguf_scalar_size(et);
        if (!has(r, count > UINT64_MAX / es ? UINT64_MAX : count * es))
            return short_read(r, at, count > UINT64_MAX / es ? UINT64_MAX : count * es,
                              "array '%s' of %llu %s values", key.s, (unsigned long long)count,
                              kv_type_names[et]);
        r->pos += (size_t)(count * es);
        return PT_OK;
    }
    /* strings: each takes at least its 8-byte length, so count is bounded by the file before the
     * index is allocated */
    if (!has(r, count > UINT64_MAX / 8 ? UINT64_MAX : count * 8))
        return short_read(r, at, count > UINT64_MAX / 8 ? UINT64_MAX : count * 8,
                          "array '%s' of %llu strings", key.s, (unsigned long long)count);
    if (count == 0) return PT_OK;
    kv->items = malloc((size_t)count * sizeof *kv->items);
    TRY_ALLOC(kv->items);
    char elem[64 + sizeof(pt_shown)];
    for (uint64_t i = 0; i < count; i++) {
        kv->items[i] = r->p + r->pos;
        gguf_str s;
        if (!has(r, 8) || !has(r, 8 + le64(r->p + r->pos) < 8 ? UINT64_MAX : 8 + le64(r->p + r->pos))) {
            snprintf(elem, sizeof elem, "string %llu of %llu of array '%s'", (unsigned long long)i + 1,
                     (unsigned long long)count, key.s);
            return read_str(r, &s, "%s", elem);
        }
        r->pos += 8 + (size_t)le64(r->p + r->pos);
    }
    return PT_OK;
}

static int cmp_str(gguf_str a, gguf_str b)
{
    size_t n = a.len < b.len ? (size_t)a.len : (size_t)b.len;
    int c = n ? memcmp(a.data, b.data, n) : 0;
    return c ? c : (a.len > b.len) - (a.len < b.len);
}

typedef struct {
    gguf_str s;
    uint64_t i;
} named;

static int cmp_named(const void *a, const void *b)
{
    const named *x = a, *y = b;
    int c = cmp_str(x->s, y->s);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

/* The first two equal names among n (sorted copies; *first < *second are their indices). */
static pt_status find_duplicate(gguf_str (*get)(const gguf_file *, uint64_t), const gguf_file *f, uint64_t n,
                                bool *found, uint64_t *first, uint64_t *second)
{
    *found = false;
    if (n < 2) return PT_OK;
    named *v = malloc((size_t)n * sizeof *v);
    TRY_ALLOC(v);
    for (uint64_t i = 0; i < n; i++) v[i] = (named){get(f, i), i};
    qsort(v, (size_t)n, sizeof *v, cmp_named);
    for (uint64_t i = 1; i < n && !*found; i++)
        if (cmp_str(v[i - 1].s, v[i].s) == 0) *found = true, *first = v[i - 1].i, *second = v[i].i;
    free(v);
    return PT_OK;
}

static gguf_str kv_key(const gguf_file *f, uint64_t i) { return f->kv[i].key; }
static gguf_str tensor_name(const gguf_file *f, uint64_t i) { return f->tensors[i].name; }

static pt_status check_duplicate_keys(const rd *r, const gguf_file *f)
{
    bool found;
    uint64_t a = 0, b = 0;
    TRY(find_duplicate(kv_key, f, f->n_kv, &found, &a, &b));
    if (found)
        return ERR(PT_ERR_USER, "%s: key '%s' appears twice (metadata entries %llu and %llu): the file is corrupt",
                   r->name.s, show(f->kv[a].key).s, (unsigned long long)a + 1, (unsigned long long)b + 1);
    return PT_OK;
}

static pt_status check_duplicate_tensors(const rd *r, const gguf_file *f)
{
    bool found;
    uint64_t a = 0, b = 0;
    TRY(find_duplicate(tensor_name, f, f->n_tensors, &found, &a, &b));
    if (found)
        return ERR(PT_ERR_USER, "%s: tensor '%s' appears twice (tensors %llu and %llu): the file is corrupt",
                   r->name.s, show(f->tensors[a].name).s, (unsigned long long)a + 1, (unsigned long long)b + 1);
    return PT_OK;
}

typedef struct {
    uint64_t offset, end, i;
} extent;

static int cmp_extent(const void *a, const void *b)
{
    const extent *x = a, *y = b;
    if (x->offset != y->offset) return (x->offset > y->offset) - (x->offset < y->offset);
    return (x->i > y->i) - (x->i < y->i);
}

static pt_status check_alignment(const rd *r, gguf_file *f)
{
    f->alignment = DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_find(f, "general.alignment");
    if (!kv) return PT_OK;
    if (!is_int_type(kv->type))
        return ERR(PT_ERR_USER,
                   "%s: general.alignment has type %s; it must be an unsigned integer (a power of two, "
                   "usually 32): the file is corrupt",
                   r->name.s, gguf_type_name(kv->type));
    bool big;
    int64_t a = int_value(kv->type, kv->value, &big);
    if (big || a <= 0 || a > (int64_t)1 << 30 || (a & (a - 1)) != 0)
        return ERR(PT_ERR_USER,
                   "%s: general.alignment = %lld is not a power of two between 1 and 2^30: the file is "
                   "corrupt (GGUF writers use 32)",
                   r->name.s, big ? (long long)-1 : (long long)a);
    f->alignment = (uint64_t)a;
    return PT_OK;
}

static pt_status parse_tensor(rd *r, gguf_file *f, gguf_tensor *t, uint64_t idx, uint64_t n_tensors)
{
    size_t at = r->pos;
    char ctx[64];
    snprintf(ctx, sizeof ctx, "tensor info %llu of %llu", (unsigned long long)idx + 1,
             (unsigned long long)n_tensors);
    TRY(read_str(r, &t->name, "the name of %s", ctx));
    if (t->name.len == 0)
        return ERR(PT_ERR_USER, "%s: %s (at byte %zu) has an empty name: the file is corrupt", r->name.s, ctx, at);
    pt_shown name = show(t->name);
    at = r->pos;
    if (!has(r, 4)) return short_read(r, at, 4, "the dimension count of tensor '%s'", name.s);
    t->n_dims = le32(r->p + r->pos);
    r->pos += 4;
    if (t->n_dims > 4)
        return ERR(PT_ERR_USER, "%s: tensor '%s' has %u dimensions; GGUF allows at most 4: the file is corrupt",
                   r->name.s, name.s, t->n_dims);
    at = r->pos;
    if (!has(r, 8u * t->n_dims + 12))
        return short_read(r, at, 8u * t->n_dims + 12, "the shape, type and offset of tensor '%s'", name.s);
    uint64_t numel = 1;
    for (uint32_t d = 0; d < 4; d++) {
        t->dims[d] = d < t->n_dims ? le64(r->p + r->pos + 8 * d) : 1;
        if (t->dims[d] == 0)
            return ERR(PT_ERR_USER, "%s: tensor '%s' has a dimension of size 0 (dims[%u]): the file is corrupt",
                       r->name.s, name.s, d);
        if (t->dims[d] > (uint64_t)INT64_MAX / numel)
            return ERR(PT_ERR_USER,
                       "%s: tensor '%s' has dimensions %llu x %llu x %llu x %llu, more than 2^63 values: the "
                       "file is corrupt",
                       r->name.s, name.s, (unsigned long long)le64(r->p + r->pos),
                       (unsigned long long)(t->n_dims > 1 ? le64(r->p + r->pos + 8) : 1),
                       (unsigned long long)(t->n_dims > 2 ? le64(r->p + r->pos + 16) : 1),
                       (unsigned long long)(t->n_dims > 3 ? le64(r->p + r->pos + 24) : 1));
        numel *= t->dims[d];
    }
    r->pos += 8u * t->n_dims;
    t->ggml_type = le32(r->p + r->pos);
    t->offset = le64(r->p + r->pos + 4);
    r->pos += 12;
    const char *tname;
    uint32_t block, bytes;
    if (!gguf_ggml_type_info(t->ggml_type, &tname, &block, &bytes))
        return ERR(PT_ERR_USER,
                   "%s: tensor '%s' has unknown ggml type id %u: the file is corrupt or uses a tensor type "
                   "newer than this ptrain",
                   r->name.s, name.s, t->ggml_type);
    t->dtype = gguf_ggml_dtype(t->ggml_type);
    if (t->dims[0] % block)
        return ERR(PT_ERR_USER,
                   "%s: tensor '%s' (%s) has rows of %llu values, not a multiple of the %s block of %u: the "
                   "file is corrupt",
                   r->name.s, name.s, tname, (unsigned long long)t->dims[0], tname, block);
    uint64_t blocks = numel / block;
    if (blocks > (uint64_t)SIZE_MAX / bytes || blocks * bytes > (uint64_t)INT64_MAX)
        return ERR(PT_ERR_USER,
                   "%s: tensor '%s' (%s, %llu values) would take more than 2^63 bytes: the file is corrupt",
                   r->name.s, name.s, tname, (unsigned long long)numel);
    t->nbytes = (size_t)(blocks * bytes);
    if (t->offset > (uint64_t)INT64_MAX)
        return ERR(PT_ERR_USER, "%s: tensor '%s' has data offset %llu, past any possible file: the file is corrupt",
                   r->name.s, name.s, (unsigned long long)t->offset);
    if (t->offset % f->alignment)
        return ERR(PT_ERR_USER,
                   "%s: tensor '%s' starts at data offset %llu, which is not a multiple of the alignment "
                   "%llu: the file is corrupt",
                   r->name.s, name.s, (unsigned long long)t->offset, (unsigned long long)f->alignment);
    return PT_OK;
}

static pt_status check_tensor_data(const rd *r, gguf_file *f)
{
    /* where the tensors say the file should end (saturating; offsets and sizes are < 2^63 each) */
    uint64_t expected = 0;
    const gguf_tensor *last = NULL;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        uint64_t end = f->data_offset + t->offset;
        end = end < f->data_offset || end > UINT64_MAX - t->nbytes ? UINT64_MAX : end + t->nbytes;
        if (end > expected) expected = end, last = t;
    }
    if (expected > r->size) {
        const char *tname = "";
        gguf_ggml_type_info(last->ggml_type, &tname, NULL, NULL);
        if (expected > ((uint64_t)1 << 50)) /* a petabyte: not a model, a corrupt offset */
            return ERR(PT_ERR_USER,
                       "%s: tensor '%s' (%s, %zu bytes) is placed at data offset %llu, far past the end of "
                       "the file (%zu bytes): the file is corrupt",
                       r->name.s, show(last->name).s, tname, last->nbytes, (unsigned long long)last->offset,
                       r->size);
        return ERR(PT_ERR_USER,
                   "%s: truncated at byte %zu of %llu: the data of tensor '%s' (%s, %zu bytes at byte %llu) "
                   "runs past the end of the file; the download is incomplete, fetch the file again",
                   r->name.s, r->size, (unsigned long long)expected, show(last->name).s, tname, last->nbytes,
                   (unsigned long long)(f->data_offset + last->offset));
    }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        f->tensors[i].data = r->p + f->data_offset + f->tensors[i].offset;
    if (f->n_tensors < 2) return PT_OK;
    extent *v = malloc((size_t)f->n_tensors * sizeof *v);
    TRY_ALLOC(v);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        v[i] = (extent){f->tensors[i].offset, f->tensors[i].offset + f->tensors[i].nbytes, i};
    qsort(v, (size_t)f->n_tensors, sizeof *v, cmp_extent);
    pt_status st = PT_OK;
    for (uint64_t i = 1; i < f->n_tensors && st == PT_OK; i++)
        if (v[i - 1].end > v[i].offset)
            st = ERR(PT_ERR_USER,
                     "%s: tensors '%s' (data bytes %llu..%llu) and '%s' (data bytes %llu..%llu) overlap: the "
                     "file is corrupt",
                     r->name.s, show(f->tensors[v[i - 1].i].name).s, (unsigned long long)v[i - 1].offset,
                     (unsigned long long)v[i - 1].end, show(f->tensors[v[i].i].name).s,
                     (unsigned long long)v[i].offset, (unsigned long long)v[i].end);
    free(v);
    return st;
}

static pt_status parse(gguf_file *f)
{
    rd r = {shown_text(f->path), f->map, f->size, 0};
    uint64_t n_kv = 0, n_tensors = 0, cap = 0;
    TRY(parse_header(&r, f, &n_kv, &n_tensors));
    for (uint64_t i = 0; i < n_kv; i++) {
        TRY(grow((void **)&f->kv, &cap, i, n_kv, sizeof *f->kv));
        f->n_kv = i + 1; /* so gguf_close frees this entry's items even when it fails */
        TRY(parse_kv(&r, &f->kv[i], i, n_kv));
    }
    TRY(check_duplicate_keys(&r, f));
    TRY(check_alignment(&r, f));
    cap = 0;
    for (uint64_t i = 0; i < n_tensors; i++) {
        TRY(grow((void **)&f->tensors, &cap, i, n_tensors, sizeof *f->tensors));
        f->n_tensors = i + 1;
        TRY(parse_tensor(&r, f, &f->tensors[i], i, n_tensors));
    }
    TRY(check_duplicate_tensors(&r, f));
    uint64_t pad = (f->alignment - r.pos % f->alignment) % f->alignment;
    f->data_offset = (uint64_t)r.pos + pad;
    return check_tensor_data(&r, f);
}

static pt_status open_image(gguf_file *f)
{
    pt_status st = parse(f);
    if (st != PT_OK) gguf_close(f);
    return st;
}

pt_status gguf_open_memory(const char *name, const void *data, size_t size, gguf_file *f)
{
    memset(f, 0, sizeof *f);
    f->path = strdup(name ? name : "<memory>");
    TRY_ALLOC(f->path);
    static const uint8_t empty[1];
    f->map = (void *)(data ? data : empty);
    f->size = data ? size : 0;
    f->mapped = false;
    return open_image(f);
}

pt_status gguf_open(const char *path, gguf_file *f)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return ERR(PT_ERR_USER, "%s: cannot open the model file: %s%s", shown_text(path).s, strerror(e),
                   e == ENOENT ? " (check model.path, or fetch the model first)" : "");
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return ERR(PT_ERR_USER, "%s: cannot read the model file: %s", shown_text(path).s, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return ERR(PT_ERR_USER, "%s: is a directory, not a GGUF file: give the path of the .gguf file",
                   shown_text(path).s);
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return ERR(PT_ERR_USER, "%s: not a regular file: give the path of a .gguf model file", shown_text(path).s);
    }
    if (st.st_size == 0) {
        close(fd);
        return ERR(PT_ERR_USER, "%s: the file is empty (0 bytes): the download failed; fetch the file again",
                   shown_text(path).s);
    }
    if ((uint64_t)st.st_size > SIZE_MAX) {
        close(fd);
        return ERR(PT_ERR_USER, "%s: too large to map on this machine", shown_text(path).s);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (map == MAP_FAILED)
        return ERR(e == ENOMEM ? PT_ERR_NOMEM : PT_ERR_USER, "%s: cannot map the model file into memory: %s",
                   shown_text(path).s, strerror(e));
    f->path = strdup(path);
    if (!f->path) {
        munmap(map, (size_t)st.st_size);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    f->map = map;
    f->size = (size_t)st.st_size;
    f->mapped = true;
    return open_image(f);
}

void gguf_close(gguf_file *f)
{
    if (!f) return;
    for (uint64_t i = 0; f->kv && i < f->n_kv; i++) free(f->kv[i].items);
    free(f->kv);
    free(f->tensors);
    if (f->mapped && f->map) munmap(f->map, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

/* --- lookups and getters --- */

bool gguf_str_eq(gguf_str s, const char *c)
{
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.data, c, n) == 0);
}

const gguf_kv *gguf_find(const gguf_file *f, const char *key)
{
    if (!f || !key) return NULL;
    for (uint64_t i = 0; i < f->n_kv; i++)
        if (gguf_str_eq(f->kv[i].key, key)) return &f->kv[i];
    return NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    if (!f || !name) return NULL;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (gguf_str_eq(f->tensors[i].name, name)) return &f->tensors[i];
    return NULL;
}

static pt_shown fname(const gguf_file *f) { return shown_text(f && f->path ? f->path : "<gguf>"); }

static pt_status missing(const gguf_file *f, const char *key)
{
    return ERR(PT_ERR_USER,
               "%s: metadata key '%s' is missing: the file does not describe a complete model (convert it "
               "again with a current llama.cpp)",
               fname(f).s, key);
}

static const char *kind_of(const gguf_kv *kv)
{
    static const char *const arrays[] = {"array of u8",   "array of i8",   "array of u16",    "array of i16",
                                         "array of u32",  "array of i32",  "array of f32",    "array of bool",
                                         "array of strings", "array",      "array of u64",    "array of i64",
                                         "array of f64"};
    return kv->type == GGUF_TYPE_ARRAY ? arrays[kv->elem_type] : gguf_type_name(kv->type);
}

static pt_status wrong_kind(const gguf_file *f, const gguf_kv *kv, const char *key, const char *expected)
{
    return ERR(PT_ERR_USER,
               "%s: metadata key '%s' has type %s, expected %s: the file is not a model ptrain understands", fname(f).s,
               key, kind_of(kv), expected);
}

/* An integer key as int64 (big: a u64 above INT64_MAX, returned in *u). */
static pt_status get_int(const gguf_file *f, const char *key, bool optional, const char *expected,
                         const gguf_kv **out_kv, int64_t *v, uint64_t *u, bool *big)
{
    const gguf_kv *kv = gguf_find(f, key);
    *out_kv = kv;
    if (!kv) return optional ? PT_OK : missing(f, key);
    if (!is_int_type(kv->type)) return wrong_kind(f, kv, key, expected);
    *v = int_value(kv->type, kv->value, big);
    *u = kv->type == GGUF_TYPE_U64 ? le64(kv->value) : (uint64_t)*v;
    return PT_OK;
}

static pt_status u32_getter(const gguf_file *f, const char *key, uint32_t *out, bool optional)
{
    const gguf_kv *kv;
    int64_t v = 0;
    uint64_t u = 0;
    bool big = false;
    TRY(get_int(f, key, optional, "an unsigned integer", &kv, &v, &u, &big));
    if (!kv) return PT_OK;
    if (big || v < 0 || v > UINT32_MAX)
        return ERR(PT_ERR_USER, "%s: metadata key '%s' = %s%llu does not fit an unsigned 32-bit integer",
                   fname(f).s, key, !big && v < 0 ? "-" : "",
                   (unsigned long long)(big ? u : v < 0 ? 0 - (uint64_t)v : (uint64_t)v));
    *out = (uint32_t)v;
    return PT_OK;
}

pt_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out) { return u32_getter(f, key, out, false); }
pt_status gguf_opt_u32(const gguf_file *f, const char *key, uint32_t *out) { return u32_getter(f, key, out, true); }

pt_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out)
{
    const gguf_kv *kv;
    int64_t v = 0;
    uint64_t u = 0;
    bool big = false;
    TRY(get_int(f, key, false, "an unsigned integer", &kv, &v, &u, &big));
    if (!big && v < 0)
        return ERR(PT_ERR_USER, "%s: metadata key '%s' = %lld is negative, expected an unsigned integer",
                   fname(f).s, key, (long long)v);
    *out = u;
    return PT_OK;
}

pt_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out)
{
    const gguf_kv *kv;
    int64_t v = 0;
    uint64_t u = 0;
    bool big = false;
    TRY(get_int(f, key, false, "an integer", &kv, &v, &u, &big));
    if (big)
        return ERR(PT_ERR_USER, "%s: metadata key '%s' = %llu does not fit a signed 64-bit integer", fname(f).s,
                   key, (unsigned long long)u);
    *out = v;
    return PT_OK;
}

static pt_status f32_getter(const gguf_file *f, const char *key, float *out, bool optional)
{
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return optional ? PT_OK : missing(f, key);
    if (kv->type != GGUF_TYPE_F32 && kv->type != GGUF_TYPE_F64 && !is_int_type(kv->type))
        return wrong_kind(f, kv, key, "a number");
    *out = (float)float_value(kv->type, kv->value);
    return PT_OK;
}

pt_status gguf_get_f32(const gguf_file *f, const char *key, float *out) { return f32_getter(f, key, out, false); }
pt_status gguf_opt_f32(const gguf_file *f, const char *key, float *out) { return f32_getter(f, key, out, true); }

static pt_status bool_getter(const gguf_file *f, const char *key, bool *out, bool optional)
{
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return optional ? PT_OK : missing(f, key);
    if (kv->type != GGUF_TYPE_BOOL) return wrong_kind(f, kv, key, "a bool");
    *out = kv->value[0] != 0;
    return PT_OK;
}

pt_status gguf_get_bool(const gguf_file *f, const char *key, bool *out) { return bool_getter(f, key, out, false); }
pt_status gguf_opt_bool(const gguf_file *f, const char *key, bool *out) { return bool_getter(f, key, out, true); }

static pt_status str_getter(const gguf_file *f, const char *key, gguf_str *out, bool optional)
{
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return optional ? PT_OK : missing(f, key);
    if (kv->type != GGUF_TYPE_STRING) return wrong_kind(f, kv, key, "a string");
    out->len = le64(kv->value);
    out->data = (const char *)kv->value + 8;
    return PT_OK;
}

pt_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out) { return str_getter(f, key, out, false); }
pt_status gguf_opt_str(const gguf_file *f, const char *key, gguf_str *out) { return str_getter(f, key, out, true); }

pt_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem_type, const gguf_kv **out)
{
    const gguf_kv *kv = gguf_find(f, key);
    if (!kv) return missing(f, key);
    bool ok = kv->type == GGUF_TYPE_ARRAY &&
              (kv->elem_type == elem_type || (is_int_type(elem_type) && is_int_type(kv->elem_type)) ||
               (elem_type == GGUF_TYPE_F32 && kv->elem_type == GGUF_TYPE_F64));
    if (!ok) {
        char expected[40];
        snprintf(expected, sizeof expected, "an array of %s",
                 elem_type == GGUF_TYPE_STRING ? "strings"
                 : is_int_type(elem_type)      ? "integers"
                                               : gguf_type_name(elem_type));
        return wrong_kind(f, kv, key, expected);
    }
    *out = kv;
    return PT_OK;
}

gguf_str gguf_array_str(const gguf_kv *kv, uint64_t i)
{
    gguf_str s = {"", 0};
    if (!kv || kv->type != GGUF_TYPE_ARRAY || kv->elem_type != GGUF_TYPE_STRING || i >= kv->count || !kv->items)
        return s;
    s.len = le64(kv->items[i]);
    s.data = (const char *)kv->items[i] + 8;
    return s;
}

int64_t gguf_array_int(const gguf_kv *kv, uint64_t i)
{
    if (!kv || kv->type != GGUF_TYPE_ARRAY || i >= kv->count ||
        !(is_int_type(kv->elem_type) || kv->elem_type == GGUF_TYPE_BOOL))
        return 0;
    bool big;
    return int_value(kv->elem_type, kv->value + i * gguf_scalar_size(kv->elem_type), &big);
}

float gguf_array_f32(const gguf_kv *kv, uint64_t i)
{
    if (!kv || kv->type != GGUF_TYPE_ARRAY || i >= kv->count ||
        !(is_int_type(kv->elem_type) || kv->elem_type == GGUF_TYPE_F32 || kv->elem_type == GGUF_TYPE_F64))
        return 0.0f;
    return (float)float_value(kv->elem_type, kv->value + i * gguf_scalar_size(kv->elem_type));
}
