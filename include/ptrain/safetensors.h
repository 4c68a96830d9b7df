/* safetensors.h — a bounds-checked reader of Hugging Face .safetensors files and of sharded models
 * (model.safetensors.index.json naming the shard of every tensor).
 *
 * A file is an 8-byte little-endian header length N, N bytes of JSON
 * {"name": {"dtype": "BF16", "shape": [...], "data_offsets": [begin, end]}, ..., "__metadata__": {...}},
 * then the data area, which the offsets index (end exclusive). The file is mapped read-only and
 * tensor data points into the mapping. Before anything is used, the header length is checked
 * against the file, the JSON is parsed (duplicate names refused), and every tensor's dtype, shape
 * and offsets are checked: the byte count equals shape x dtype size (overflow-safe), the range lies
 * inside the data area, starts at a multiple of the element size, and overlaps no other tensor.
 * A bad file yields one PT_ERR_USER message naming the file, the problem and the fix. */
#ifndef PTRAIN_SAFETENSORS_H
#define PTRAIN_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

typedef enum {
    ST_BOOL, ST_U8, ST_I8, ST_U16, ST_I16, ST_U32, ST_I32, ST_U64, ST_I64,
    ST_F16, ST_BF16, ST_F32, ST_F64, ST_F8_E4M3, ST_F8_E5M2,
    ST_DTYPE_COUNT
} st_dtype;

#define ST_MAX_DIMS 8
#define ST_MAX_HEADER ((uint64_t)100 << 20) /* as the reference reader: 100 MB of JSON */

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t begin, end; /* data_offsets: relative to the data area, end exclusive */
    const void *data;    /* in the mapping; not necessarily aligned in memory (read with memcpy) */
    size_t nbytes;
} st_tensor;

typedef struct {
    char *key, *value;
} st_meta;

typedef struct {
    char *path;
    void *map;
    size_t size;
    bool mapped;         /* map came from mmap (else it belongs to the caller) */
    uint64_t header_len; /* N */
    size_t data_offset;  /* 8 + N: where the data area starts */
    st_tensor *tensors;  /* sorted by name */
    size_t n_tensors;
    st_meta *meta; /* the string values of __metadata__ */
    size_t n_meta;
} st_file;

pt_status st_open(const char *path, st_file *f);
/* Parse a safetensors image already in memory (fuzzing, tests); name is used in messages. */
pt_status st_open_memory(const char *name, const void *data, size_t size, st_file *f);
/* Hand the mapping's pages back (they are read from the file again if touched): the pages of tensors already
 * consumed would otherwise stay in the process's memory until st_close. Nothing for an image the caller owns. */
void st_release(const st_file *f);
void st_close(st_file *f);

const st_tensor *st_find(const st_file *f, const char *name);
/* The string value of key in __metadata__, or NULL. */
const char *st_metadata(const st_file *f, const char *key);
/* "BF16", "F32", ...; "?" for values outside st_dtype. */
const char *st_dtype_name(st_dtype d);
size_t st_dtype_size(st_dtype d); /* bytes per element; 0 for values outside st_dtype */
int64_t st_numel(const st_tensor *t);
/* "BF16 [64, 128]" into buf. */
const char *st_describe(const st_tensor *t, char *buf, size_t len);
/* Convert n values of a float tensor (F32, F16, BF16, F64) to fp32, starting at element first;
 * PT_ERR_USER naming the tensor (and where) for other dtypes or a range past its end. */
pt_status st_read_f32(const st_tensor *t, const char *where, int64_t first, int64_t n, float *out);

/* ---- a model's tensors, in one file or in shards (st_index.c) ---- */

typedef struct {
    const char *name; /* the tensor's own name (owned by its file) */
    int file;         /* index into files */
    const st_tensor *tensor;
} st_entry;

typedef struct {
    char *dir;        /* the model directory */
    char *index_path; /* DIR/model.safetensors.index.json, or NULL for a single file */
    st_file *files;   /* each shard opened once */
    int n_files;
    st_entry *entries; /* every tensor of every file, sorted by name */
    size_t n_entries;
} st_set;

/* Open a model's safetensors: path is a directory (model.safetensors.index.json and its shards,
 * else model.safetensors) or one .safetensors file. With an index, every shard it names must exist
 * and hold the tensors the index puts in it. */
pt_status st_set_open(const char *path, st_set *s);
/* st_release on every file of s (loading calls it after each layer: the peak holds one layer's pages, not the file's) */
void st_set_release(const st_set *s);
void st_set_close(st_set *s);
/* The tensor called name in whichever file holds it (*file, may be NULL, gets that file), or NULL. */
const st_tensor *st_set_find(const st_set *s, const char *name, const st_file **file);

#endif
