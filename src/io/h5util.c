/* h5util.c — HDF5 attribute and dataset helpers shared by adapter.c and checkpoint.c, and the
 * atomic commit of a finished file: a file is built in memory, written under a temporary name in
 * its final directory, synced, renamed into place and the directory synced, so a crash at any
 * moment leaves either the old set of files or the new one, and a full disk is a clean error. */
#include "h5util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/filewrite.h"
#include "ptrain/safefs.h"

herr_t h5_attr_str(hid_t loc, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, strlen(value) + 1);
    hid_t attr = H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, type, value);
    if (attr >= 0) H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    return rc;
}

static herr_t attr_scalar(hid_t loc, const char *name, hid_t file_type, hid_t mem_type, const void *value)
{
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(loc, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = attr < 0 ? -1 : H5Awrite(attr, mem_type, value);
    if (attr >= 0) H5Aclose(attr);
    H5Sclose(space);
    return rc;
}

herr_t h5_attr_f64(hid_t loc, const char *name, double value)
{
    return attr_scalar(loc, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

herr_t h5_attr_i64(hid_t loc, const char *name, int64_t value)
{
    return attr_scalar(loc, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

bool h5_has_attr(hid_t loc, const char *name)
{
    return H5Aexists(loc, name) > 0;
}

/* Read a scalar numeric attribute converted to mem_type; HDF5 converts between number types. */
static pt_status get_scalar(hid_t loc, const char *path, const char *name, hid_t mem_type, void *out)
{
    hid_t attr = h5_has_attr(loc, name) ? H5Aopen(loc, name, H5P_DEFAULT) : -1;
    hid_t type = attr < 0 ? -1 : H5Aget_type(attr);
    hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
    herr_t rc = -1;
    if (type >= 0 && space >= 0 && (H5Tget_class(type) == H5T_INTEGER || H5Tget_class(type) == H5T_FLOAT) &&
        H5Sget_simple_extent_npoints(space) == 1)
        rc = H5Aread(attr, mem_type, out);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    if (attr >= 0) H5Aclose(attr);
    if (rc < 0)
        return ERR(PT_ERR_USER, "%s: attribute %s is missing or not a number", shown_text(path).s, shown_text(name).s);
    return PT_OK;
}

pt_status h5_get_f64(hid_t loc, const char *path, const char *name, double *out)
{
    return get_scalar(loc, path, name, H5T_NATIVE_DOUBLE, out);
}

pt_status h5_get_i64(hid_t loc, const char *path, const char *name, int64_t *out)
{
    return get_scalar(loc, path, name, H5T_NATIVE_INT64, out);
}

/* Open a fixed-length string attribute holding one string (a scalar: H5Aread of an array of
 * strings would write past the one-string buffer); *size gets its length in bytes. */
static hid_t open_str(hid_t loc, const char *name, hid_t *type, size_t *size)
{
    hid_t attr = h5_has_attr(loc, name) ? H5Aopen(loc, name, H5P_DEFAULT) : -1;
    hid_t space = attr < 0 ? -1 : H5Aget_space(attr);
    bool one = space >= 0 && H5Sget_simple_extent_npoints(space) == 1;
    if (space >= 0) H5Sclose(space);
    *type = attr < 0 || !one ? -1 : H5Aget_type(attr);
    if (*type < 0 || H5Tget_class(*type) != H5T_STRING || H5Tis_variable_str(*type) > 0) {
        if (*type >= 0) H5Tclose(*type);
        if (attr >= 0) H5Aclose(attr);
        return -1;
    }
    *size = H5Tget_size(*type);
    return attr;
}

pt_status h5_get_str(hid_t loc, const char *path, const char *name, char *out, size_t len)
{
    hid_t type;
    size_t size = 0;
    hid_t attr = open_str(loc, name, &type, &size);
    herr_t rc = attr >= 0 && size <= len ? H5Aread(attr, type, out) : -1;
    if (attr >= 0) H5Tclose(type), H5Aclose(attr);
    if (rc < 0)
        return ERR(PT_ERR_USER, "%s: attribute %s is missing or not a short string", shown_text(path).s,
                   shown_text(name).s);
    out[len - 1] = '\0';
    if (size < len) out[size] = '\0';
    return PT_OK;
}

pt_status h5_write_f32(hid_t loc, const char *name, int64_t rows, int64_t cols, const float *data, bool checksum)
{
    hsize_t dims[2] = {(hsize_t)rows, (hsize_t)cols};
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    /* one chunk per matrix (a chunk holds < 4 GiB: LoRA matrices are far smaller) */
    if (checksum && rows > 0 && cols > 0) {
        H5Pset_chunk(dcpl, 2, dims);
        H5Pset_fletcher32(dcpl);
    }
    hid_t set = H5Dcreate2(loc, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    herr_t rc = set < 0 ? -1 : H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (set >= 0) H5Dclose(set);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (rc < 0) return ERR(PT_ERR_USER, "cannot write dataset %s", shown_text(name).s);
    return PT_OK;
}

pt_status h5_read_f32(hid_t loc, const char *path, const char *name, int64_t rows, int64_t cols, float *out)
{
    hid_t set = H5Lexists(loc, name, H5P_DEFAULT) > 0 ? H5Dopen2(loc, name, H5P_DEFAULT) : -1;
    if (set < 0) return ERR(PT_ERR_USER, "%s: tensor %s is missing", shown_text(path).s, shown_text(name).s);
    hid_t space = H5Dget_space(set);
    hsize_t dims[2] = {0, 0};
    int nd = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    if (nd == 2) H5Sget_simple_extent_dims(space, dims, NULL);
    if (space >= 0) H5Sclose(space);
    pt_status st = PT_OK;
    if (nd != 2 || dims[0] != (hsize_t)rows || dims[1] != (hsize_t)cols)
        st = ERR(PT_ERR_USER,
                 "%s: tensor %s is [%llu, %llu], this run needs [%lld, %lld]; was it trained on another "
                 "model or with other LoRA settings?",
                 shown_text(path).s, shown_text(name).s, (unsigned long long)dims[0], (unsigned long long)dims[1],
                 (long long)rows, (long long)cols);
    else if (H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0)
        st = ERR(PT_ERR_USER, "%s: cannot read tensor %s: the file is damaged (checksum or format error)",
                 shown_text(path).s, shown_text(name).s);
    H5Dclose(set);
    return st;
}

/* The core driver's buffer, allocated through these callbacks so that it can be written out
 * while the file is still open (after a flush), without H5Fget_file_image's copy. The buffer of
 * the last file (up to 1 GiB) is kept for the next one: a checkpoint is written every few minutes,
 * and a fresh buffer costs a page fault and a zeroed page for every 4 KiB of it (15-20% of the
 * write; bench/run-ckpt.sh). Only rank 0 writes files, so only rank 0 keeps one. */
struct h5_image {
    void *mem;
    size_t cap;
    bool keep; /* on close, hand the buffer over (kept) instead of freeing it */
    void *kept;
    size_t kept_cap;
};

#define SPARE_MAX ((size_t)1 << 30)
static void *spare;
static size_t spare_cap;

static void *image_realloc(void *ptr, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    h5_image *img = udata;
    if (!ptr && spare && spare_cap >= size) { /* a new file: take the kept buffer */
        img->mem = spare, img->cap = spare_cap;
        spare = NULL, spare_cap = 0;
        return img->mem;
    }
    if (ptr && ptr == img->mem && size <= img->cap) return ptr;
    void *grown = realloc(ptr, size);
    if (grown) img->mem = grown, img->cap = size;
    return grown;
}

static void *image_malloc(size_t size, H5FD_file_image_op_t op, void *udata)
{
    return image_realloc(NULL, size, op, udata);
}

/* A buffer no file uses any more: kept for the next file when it is the larger, else freed. */
static void image_release(void *ptr, size_t cap)
{
    if (ptr && cap && cap <= SPARE_MAX && cap >= spare_cap) {
        free(spare);
        spare = ptr, spare_cap = cap;
    } else {
        free(ptr);
    }
}

static herr_t image_free(void *ptr, H5FD_file_image_op_t op, void *udata)
{
    (void)op;
    h5_image *img = udata;
    size_t cap = ptr == img->mem ? img->cap : 0;
    if (ptr == img->mem) img->mem = NULL, img->cap = 0;
    if (img->keep && cap) img->kept = ptr, img->kept_cap = cap;
    else image_release(ptr, cap);
    return 0;
}

static void *image_memcpy(void *dest, const void *src, size_t size, H5FD_file_image_op_t op, void *udata)
{
    (void)op, (void)udata;
    return memcpy(dest, src, size);
}

static void *udata_copy(void *udata) { return udata; } /* the h5_image outlives the fapl copies */
static herr_t udata_free(void *udata) { (void)udata; return 0; }

pt_status h5_memfile_create(h5_memfile *m, hsize_t userblock, size_t size_hint)
{
    m->file = -1;
    m->img = calloc(1, sizeof *m->img);
    TRY_ALLOC(m->img);
    H5FD_file_image_callbacks_t cb = {image_malloc, image_memcpy, image_realloc, image_free,
                                      udata_copy, udata_free, m->img};
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE), fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (userblock) H5Pset_userblock(fcpl, userblock);
    size_t step = size_hint > ((size_t)1 << 20) ? size_hint : (size_t)1 << 20;
    herr_t rc = H5Pset_file_image_callbacks(fapl, &cb);
    /* HDF5 1.10's file format: a single-chunk dataset needs no B-tree and links no symbol-table
     * heaps, a third of the time per tensor of the 1.8 format (readable by HDF5 >= 1.10, h5py) */
    if (rc >= 0) rc = H5Pset_libver_bounds(fapl, H5F_LIBVER_V110, H5F_LIBVER_LATEST);
    if (rc >= 0) rc = H5Pset_fapl_core(fapl, step, 0);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    if (rc >= 0) m->file = H5Fcreate("ptrain-in-memory.h5", H5F_ACC_TRUNC, fcpl, fapl);
    H5Pclose(fapl);
    H5Pclose(fcpl);
    if (m->file < 0) {
        h5_memfile_discard(m);
        return ERR(PT_ERR_INTERNAL, "HDF5 cannot create a file in memory");
    }
    return PT_OK;
}

void h5_memfile_discard(h5_memfile *m)
{
    if (m->file >= 0) H5Fclose(m->file);
    free(m->img);
    m->file = -1, m->img = NULL;
}

static pt_status write_at(pt_filewriter *w, const unsigned char *buf, size_t from, size_t to, bool crash)
{
    const size_t piece = (size_t)1 << 22;
    for (size_t off = from; off < to;) {
        size_t half = from + (to - from) / 2, len = to - off < piece ? to - off : piece;
        if (crash && off >= half) raise(SIGKILL);
        if (crash && off + len > half) len = half - off;
        ssize_t got = pwrite(w->fd, buf + off, len, (off_t)off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return safefs_write_error("write", w->tmp, got < 0 ? errno : 0);
        off += (size_t)got;
    }
    return PT_OK;
}

/* Write head, then body after it, into a new temporary file next to final (filewrite.c: created
 * with O_EXCL, never through a link); sync, rename, sync the directory. */
static pt_status commit_bytes(const char *final, const unsigned char *head, size_t head_len,
                              const unsigned char *body, size_t body_len, bool crash_halfway)
{
    pt_filewriter w;
    TRY(fw_open(&w, final));
    pt_status st = write_at(&w, body - head_len, head_len, head_len + body_len, crash_halfway);
    if (st == PT_OK) st = write_at(&w, head, 0, head_len, false);
    if (st != PT_OK) {
        fw_abort(&w);
        return st;
    }
    return fw_commit(&w);
}

pt_status h5_memfile_commit(h5_memfile *m, const char *final, size_t head, h5_head_fill fill, void *arg,
                            bool crash_halfway)
{
    /* the file's size, then close it: the core driver hands its buffer (the user block, then the
     * HDF5 image) to image_free, which keeps it for us; closing also clears the superblock's
     * "open for writing" flag that the 1.10 format sets */
    ssize_t n = H5Fflush(m->file, H5F_SCOPE_GLOBAL) < 0 ? -1 : H5Fget_file_image(m->file, NULL, 0);
    m->img->keep = true;
    herr_t closed = H5Fclose(m->file);
    m->file = -1;
    const unsigned char *all = m->img->kept;
    pt_status st = n > 0 && closed >= 0 && all && (size_t)n + head <= m->img->kept_cap
                       ? PT_OK : ERR(PT_ERR_INTERNAL, "HDF5 could not finish %s in memory", shown_text(final).s);
    unsigned char *head_bytes = st == PT_OK ? calloc(1, head + 1) : NULL;
    if (st == PT_OK && !head_bytes) st = ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK && fill) fill(head_bytes, head, all + head, (size_t)n, arg);
    if (st == PT_OK) st = commit_bytes(final, head_bytes, head, all + head, (size_t)n, crash_halfway);
    free(head_bytes);
    image_release(m->img->kept, m->img->kept_cap);
    m->img->kept = NULL;
    h5_memfile_discard(m);
    return st;
}
