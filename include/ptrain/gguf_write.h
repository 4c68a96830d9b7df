/* gguf_write.h — a streaming writer of GGUF version 3 files (llama.cpp's model format), the mirror
 * of the reader in gguf.h.
 *
 * Exporting a model must not need the whole model in memory, so writing has two phases. First the
 * caller declares everything that goes in the header: metadata key/values (in order; adding a key
 * again replaces its value in place) and tensor infos (name, ggml type, dims). gguf_w_begin then
 * computes every tensor's size and aligned offset and writes the header through the atomic file
 * writer (filewrite.h); the caller streams each tensor's bytes in declaration order, in as many
 * gguf_w_data calls as it likes, and the writer pads between tensors. gguf_w_finish checks that
 * every declared byte came, then fsyncs and renames: the final path holds a complete file or
 * nothing. Misuse that would write a file llama.cpp refuses (unknown types, rows that are not
 * whole blocks, duplicate tensors, names of 64 bytes or more, too many or too few bytes) fails
 * with one PT_ERR_USER message naming the file, key or tensor; calls out of order are
 * PT_ERR_INTERNAL (a bug in the caller). */
#ifndef PTRAIN_GGUF_WRITE_H
#define PTRAIN_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"

typedef struct gguf_writer gguf_writer; /* opaque */

/* A writer collecting metadata and tensor infos. Free it with gguf_writer_free. */
pt_status gguf_writer_new(gguf_writer **w);
/* Abort (remove the temporary file) unless finished, and free. NULL is fine. */
void gguf_writer_free(gguf_writer *w);

/* Metadata, written in the order first added; adding a key again replaces its value. Allowed
 * only before gguf_w_begin. A general.alignment key must be a u32 power of two (llama.cpp reads
 * it as u32); it sets the alignment of the tensor data (default 32). */
pt_status gguf_w_str(gguf_writer *w, const char *key, const char *val);
pt_status gguf_w_u32(gguf_writer *w, const char *key, uint32_t v);
pt_status gguf_w_i32(gguf_writer *w, const char *key, int32_t v);
pt_status gguf_w_f32(gguf_writer *w, const char *key, float v);
pt_status gguf_w_bool(gguf_writer *w, const char *key, bool v);
pt_status gguf_w_u64(gguf_writer *w, const char *key, uint64_t v);
pt_status gguf_w_str_array(gguf_writer *w, const char *key, const char *const *vals, size_t n);
pt_status gguf_w_i32_array(gguf_writer *w, const char *key, const int32_t *vals, size_t n);
pt_status gguf_w_f32_array(gguf_writer *w, const char *key, const float *vals, size_t n);
/* One key/value of an opened gguf_file (gguf_find, or f->kv[i]), any type, arrays included,
 * copied byte for byte (the source may be closed afterwards). */
pt_status gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv);

/* Declare a tensor: its name (1..63 bytes, unique), ggml type, and n_dims (1..4) dims in GGUF
 * order (dims[0] fastest: an [out, in] matrix is {in, out}); dims[0] must be a whole number of
 * the type's blocks. Allowed only before gguf_w_begin. */
pt_status gguf_w_tensor(gguf_writer *w, const char *name, uint32_t ggml_type, int n_dims, const uint64_t *dims);
/* Bytes of a tensor of that type and shape; 0 when the type is unknown, n_dims is not 1..4, a dim
 * is 0, dims[0] is not a multiple of the block, or the size overflows. */
size_t gguf_w_tensor_bytes(uint32_t ggml_type, const uint64_t *dims, int n_dims);

/* Write the header, metadata and tensor infos to a temporary file next to path (its directory
 * must exist). Then stream every tensor's bytes, in declaration order, with gguf_w_data: a call
 * may hold part of a tensor or run across several; the padding after each tensor is inserted
 * when its last byte arrives. More bytes than declared in all fails (and writes none of them). */
pt_status gguf_w_begin(gguf_writer *w, const char *path);
pt_status gguf_w_data(gguf_writer *w, const void *data, size_t nbytes);
/* Check every declared byte was written (else an error naming the first incomplete tensor, and
 * the temporary file is removed), then fsync and rename to the final path. */
pt_status gguf_w_finish(gguf_writer *w);

#endif
