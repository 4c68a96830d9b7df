/* gguf.h — a bounds-checked reader of GGUF files (llama.cpp's model format, versions 2 and 3).
 *
 * The file is mapped read-only; metadata values and tensor data point into the mapping, so
 * opening a model costs no copies. Every count, length, offset and size is checked against the
 * file before it is used: a truncated, corrupted or hostile file yields one error naming the file
 * and the problem, never an out-of-bounds read. */
#ifndef PTRAIN_GGUF_H
#define PTRAIN_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/backend.h"
#include "ptrain/error.h"

typedef enum {
    GGUF_TYPE_U8 = 0,
    GGUF_TYPE_I8 = 1,
    GGUF_TYPE_U16 = 2,
    GGUF_TYPE_I16 = 3,
    GGUF_TYPE_U32 = 4,
    GGUF_TYPE_I32 = 5,
    GGUF_TYPE_F32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_U64 = 10,
    GGUF_TYPE_I64 = 11,
    GGUF_TYPE_F64 = 12,
} gguf_type;

/* ggml tensor type ids used in GGUF tensor infos. gguf_ggml_type_info() knows the block sizes of
 * all of them (so every tensor's extent is checked); ptrain computes with those that map to a
 * pt_dtype (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K). */
enum {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34,
    GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_MXFP4 = 39,
};

typedef struct {
    const char *data; /* not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct {
    gguf_str key;
    gguf_type type;
    gguf_type elem_type; /* arrays */
    uint64_t count;      /* arrays: number of elements; scalars: 1 */
    const uint8_t *value; /* the value's bytes in the mapping (arrays: the first element;
                           * strings: the u64 length, then the bytes) */
    const uint8_t **items; /* string arrays: where each element starts (built at open) */
} gguf_kv;

typedef struct {
    gguf_str name;
    uint32_t n_dims;
    uint64_t dims[4];   /* dims[0] is the fastest-varying: an [out, in] matrix is {in, out} */
    uint32_t ggml_type;
    pt_dtype dtype;     /* ptrain's name for ggml_type; PT_DTYPE_COUNT when ptrain has none */
    uint64_t offset;    /* relative to the data section */
    const void *data;   /* in the mapping */
    size_t nbytes;
} gguf_tensor;

typedef struct {
    char *path;
    void *map;
    size_t size;
    bool mapped; /* map came from mmap (else it belongs to the caller) */
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;
    gguf_tensor *tensors;
    uint64_t alignment;
    uint64_t data_offset;
} gguf_file;

pt_status gguf_open(const char *path, gguf_file *f);
/* Parse a GGUF image already in memory (fuzzing, tests); name is used in messages. */
pt_status gguf_open_memory(const char *name, const void *data, size_t size, gguf_file *f);
void gguf_close(gguf_file *f);

const gguf_kv *gguf_find(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);
bool gguf_str_eq(gguf_str s, const char *c);

/* Typed getters: PT_ERR_USER naming the file and key when missing or of another kind. Integer
 * getters accept any integer type whose value fits. */
pt_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
pt_status gguf_get_f32(const gguf_file *f, const char *key, float *out);
pt_status gguf_get_str(const gguf_file *f, const char *key, gguf_str *out);
/* Optional variants: leave *out untouched and return PT_OK when the key is absent. */
pt_status gguf_opt_u32(const gguf_file *f, const char *key, uint32_t *out);
pt_status gguf_opt_f32(const gguf_file *f, const char *key, float *out);
/* Array accessors (bounds already checked at open): element i of an array kv. */
gguf_str gguf_array_str(const gguf_kv *kv, uint64_t i);
int64_t gguf_array_int(const gguf_kv *kv, uint64_t i);
float gguf_array_f32(const gguf_kv *kv, uint64_t i);

/* --- additions --- */
/* More typed getters, same rules: any integer type whose value fits (u64 values above INT64_MAX
 * do not fit gguf_get_i64; negative values never fit gguf_get_u64); bool only from a bool. */
pt_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
pt_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
pt_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
pt_status gguf_opt_bool(const gguf_file *f, const char *key, bool *out);
pt_status gguf_opt_str(const gguf_file *f, const char *key, gguf_str *out);
/* The array kv named key, checked to hold elem_type values. Asking for any integer type accepts
 * an array of any integer type (read it with gguf_array_int); asking for F32 accepts F32 or F64
 * (gguf_array_f32); STRING and BOOL must match exactly. PT_ERR_USER when missing or of another
 * kind. */
pt_status gguf_get_array(const gguf_file *f, const char *key, gguf_type elem_type, const gguf_kv **out);
/* Bytes of one scalar value of type t; 0 for strings, arrays and invalid ids. */
uint32_t gguf_scalar_size(uint32_t t);
/* "u8", "string", "array", ...; "invalid" for ids outside gguf_type. */
const char *gguf_type_name(gguf_type type);
/* A ggml tensor type: its name ("q4_k"), values per block and bytes per block. False (outputs
 * untouched) for type ids ptrain does not know. */
bool gguf_ggml_type_info(uint32_t ggml_type, const char **name, uint32_t *block, uint32_t *bytes);
/* The pt_dtype ptrain computes a ggml type with; PT_DTYPE_COUNT when it has none. */
pt_dtype gguf_ggml_dtype(uint32_t ggml_type);

#endif
