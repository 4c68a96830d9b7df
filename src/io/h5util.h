/* h5util.h — the HDF5 helpers the adapter and checkpoint files share: scalar and string
 * attributes, 2-d float datasets (chunked with HDF5's Fletcher-32 checksum filter), and the
 * atomic commit of a finished file (fsync, rename, fsync of the directory). Internal to src/io. */
#ifndef PTRAIN_H5UTIL_H
#define PTRAIN_H5UTIL_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

/* Attributes on loc (a file or group); each returns < 0 on failure. */
herr_t h5_attr_str(hid_t loc, const char *name, const char *value);
herr_t h5_attr_f64(hid_t loc, const char *name, double value);
herr_t h5_attr_i64(hid_t loc, const char *name, int64_t value);
/* Read attributes; a missing or mistyped one fails with a message naming path and name. */
pt_status h5_get_f64(hid_t loc, const char *path, const char *name, double *out);
pt_status h5_get_i64(hid_t loc, const char *path, const char *name, int64_t *out);
pt_status h5_get_str(hid_t loc, const char *path, const char *name, char *out, size_t len);
bool h5_has_attr(hid_t loc, const char *name);

/* A [rows, cols] float32 dataset; checksum: chunked with the Fletcher-32 filter. */
pt_status h5_write_f32(hid_t loc, const char *name, int64_t rows, int64_t cols, const float *data, bool checksum);
/* Read dataset name of exactly [rows, cols] into out; a wrong shape names both shapes. */
pt_status h5_read_f32(hid_t loc, const char *path, const char *name, int64_t rows, int64_t cols, float *out);

/* Files are built in memory (HDF5's core driver, no backing store) and written by
 * h5_memfile_commit, so every disk error (a full disk) is ours to report: HDF5 never sees a
 * failing write, which it does not survive cleanly. The driver's buffer is ours (file image
 * callbacks), so the bytes go to disk without a copy. */
typedef struct h5_image h5_image;
typedef struct {
    hid_t file;
    h5_image *img;
} h5_memfile;

/* userblock: bytes reserved at the start (0, or 512, 1024...); size_hint: the expected file size
 * (the buffer grows in steps of it). */
pt_status h5_memfile_create(h5_memfile *m, hsize_t userblock, size_t size_hint);
/* Fill the head (the user block) once the body (everything after it) is final. */
typedef void (*h5_head_fill)(unsigned char *head, size_t head_len, const unsigned char *body, size_t body_len,
                             void *arg);
/* Write the file as final atomically: a temporary file in final's directory gets the body, then
 * the head from fill (a completion mark goes last; fill NULL: zeros), fsync, rename, fsync of the
 * directory. On failure the temporary file is removed and final is untouched. The memory file is
 * closed in any case. crash_halfway (tests only): SIGKILL this process halfway through the body. */
pt_status h5_memfile_commit(h5_memfile *m, const char *final, size_t head, h5_head_fill fill, void *arg,
                            bool crash_halfway);
/* Close a memory file without writing it (error paths). */
void h5_memfile_discard(h5_memfile *m);
#endif
