/* st_write.h — a streaming writer of .safetensors files (the mirror of safetensors.h's reader).
 * Tensors are declared first (name, dtype, shape), so the JSON header with every offset can be
 * written before any data; then each tensor's bytes are streamed in declaration order, in as
 * many pieces as the caller likes, so an exporter never holds more than one tensor. The file
 * goes through filewrite.h: it appears under its name only when complete. */
#ifndef PTRAIN_ST_WRITE_H
#define PTRAIN_ST_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/filewrite.h"
#include "ptrain/safetensors.h"

typedef struct {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint64_t nbytes;
} st_wtensor;

typedef struct {
    st_wtensor *t;
    size_t n, cap;
    char **meta; /* key, value, key, value ... */
    size_t n_meta;
    pt_filewriter fw;
    bool begun;
    size_t cur;        /* the tensor being streamed */
    uint64_t cur_done; /* its bytes written so far */
} st_writer;

void st_writer_init(st_writer *w);
pt_status st_w_tensor(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape);
/* A string entry of __metadata__ (e.g. "format": "pt", which transformers expects). */
pt_status st_w_meta(st_writer *w, const char *key, const char *value);
/* Write the header into a temporary file next to path. */
pt_status st_w_begin(st_writer *w, const char *path);
pt_status st_w_data(st_writer *w, const void *data, size_t n);
/* Check every declared byte came, then fsync and rename into place. */
pt_status st_w_finish(st_writer *w);
/* Free; removes the temporary file when not finished. */
void st_writer_free(st_writer *w);

#endif
