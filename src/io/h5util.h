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
/* A string attribute of any length, malloc'ed into *out. */
pt_status h5_get_str_alloc(hid_t loc, const char *path, const char *name, char **out);
bool h5_has_attr(hid_t loc, const char *name);

/* A [rows, cols] float32 dataset; checksum: chunked with the Fletcher-32 filter. */
pt_status h5_write_f32(hid_t loc, const char *name, int64_t rows, int64_t cols, const float *data, bool checksum);
/* Read dataset name of exactly [rows, cols] into out; a wrong shape names both shapes. */
pt_status h5_read_f32(hid_t loc, const char *path, const char *name, int64_t rows, int64_t cols, float *out);

/* fsync a file or a directory (flags O_RDONLY or O_RDONLY | O_DIRECTORY). */
pt_status h5_fsync_path(const char *path, int flags);
/* Make the finished temporary file tmp the file final: fsync tmp, rename, fsync the directory. */
pt_status h5_commit(const char *tmp, const char *final);
#endif
