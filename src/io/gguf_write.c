/* gguf_write.c — the streaming GGUF v3 writer (see include/ptrain/gguf_write.h).
 *
 * Metadata values are serialized (little-endian, as they will appear after the value type) when
 * they are added, so the header is a plain concatenation at gguf_w_begin and a copied key needs
 * no interpretation. Tensor infos are checked when declared, with the rules the reader in
 * src/model/gguf.c and llama.cpp apply, so a bad tensor fails before a byte is written. At
 * gguf_w_begin every tensor's offset is laid out exactly as llama.cpp expects (each one at the
 * previous offset plus its size rounded up to the alignment), the header goes out through the
 * atomic file writer, and gguf_w_data then only counts bytes: it pads when a tensor completes and
 * refuses bytes beyond the declared total. Any failure after the temporary file exists removes it,
 * so the final path never holds a partial model. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ptrain/gguf_write.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/filewrite.h"

#define GGUF_VERSION 3u
#define DEFAULT_ALIGNMENT 32u
#define MAX_NAME 64u /* llama.cpp's GGML_MAX_NAME: names must be shorter */

typedef struct {
    char *key;
    uint32_t type;
    uint8_t *val; /* the bytes after the type: the value, or elem type + count + elements */
    size_t len;
} wkv;

typedef struct {
    char *name;
    uint32_t type, n_dims;
    uint64_t dims[4];
    uint64_t nbytes, offset; /* offset relative to the data section */
} wtensor;

enum { W_COLLECT, W_WRITING, W_DONE, W_FAILED };

struct gguf_writer {
    wkv *kv;
    size_t n_kv, cap_kv;
    wtensor *t;
    size_t n_t, cap_t;
    uint64_t alignment;
    int state;
    pt_filewriter fw;
    char *path;
    size_t cur;               /* the tensor being streamed */
    uint64_t cur_done;        /* its bytes written so far */
    uint64_t total, written;  /* tensor bytes declared / written, all tensors */
};

/* --- a little-endian byte buffer for metadata values --- */

typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bbuf;

static void bb_put(bbuf *b, const void *d, size_t n)
{
    if (b->oom || n == 0) return;
    if (n > b->cap - b->n) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n) cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = true;
            return;
        }
        b->p = p, b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

static void bb_u32(bbuf *b, uint32_t v)
{
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    bb_put(b, t, 4);
}

static void bb_u64(bbuf *b, uint64_t v)
{
    bb_u32(b, (uint32_t)v);
    bb_u32(b, (uint32_t)(v >> 32));
}

static void bb_f32(bbuf *b, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    bb_u32(b, u);
}

static void bb_str(bbuf *b, const char *s)
{
    bb_u64(b, strlen(s));
    bb_put(b, s, strlen(s));
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* --- metadata --- */

pt_status gguf_writer_new(gguf_writer **out)
{
    gguf_writer *w = calloc(1, sizeof *w);
    TRY_ALLOC(w);
    w->alignment = DEFAULT_ALIGNMENT;
    w->fw.fd = w->fw.dir = -1; /* so fw_abort is safe before fw_open */
    *out = w;
    return PT_OK;
}

static pt_status need_collect(const gguf_writer *w, const char *what, const char *name)
{
    if (!w) return ERR(PT_ERR_INTERNAL, "gguf writer: %s '%s' on a NULL writer", what, name ? name : "");
    if (w->state != W_COLLECT)
        return ERR(PT_ERR_INTERNAL, "gguf writer: %s '%s' after gguf_w_begin; declare everything first", what,
                   name ? name : "");
    return PT_OK;
}

/* general.alignment must be a u32 power of two (llama.cpp reads it with gguf_get_val_u32). */
static pt_status check_alignment(gguf_writer *w, uint32_t type, const bbuf *b)
{
    if (type != GGUF_TYPE_U32)
        return ERR(PT_ERR_USER, "gguf writer: general.alignment must be a u32 (llama.cpp reads it as one), not %s",
                   gguf_type_name((gguf_type)type));
    uint32_t a = (uint32_t)b->p[0] | (uint32_t)b->p[1] << 8 | (uint32_t)b->p[2] << 16 | (uint32_t)b->p[3] << 24;
    if (a == 0 || a > (1u << 30) || (a & (a - 1)))
        return ERR(PT_ERR_USER, "gguf writer: general.alignment = %u is not a power of two between 1 and 2^30", a);
    w->alignment = a;
    return PT_OK;
}

static wkv *find_kv(gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->kv[i].key, key) == 0) return &w->kv[i];
    return NULL;
}

static pt_status append_kv(gguf_writer *w, const char *key)
{
    if (w->n_kv == w->cap_kv) {
        size_t cap = w->cap_kv ? w->cap_kv * 2 : 32;
        wkv *kv = realloc(w->kv, cap * sizeof *kv);
        TRY_ALLOC(kv);
        w->kv = kv, w->cap_kv = cap;
    }
    char *k = strdup(key);
    TRY_ALLOC(k);
    w->kv[w->n_kv++] = (wkv){k, 0, NULL, 0};
    return PT_OK;
}

/* Store key = (type, b's bytes); b's buffer is taken over (or freed on failure). */
static pt_status set_kv_checked(gguf_writer *w, const char *key, uint32_t type, bbuf *b)
{
    if (b->oom) return ERR(PT_ERR_NOMEM, "out of memory for the value of GGUF key '%s'", shown_text(key).s);
    if (strcmp(key, "general.alignment") == 0) TRY(check_alignment(w, type, b));
    wkv *kv = find_kv(w, key);
    if (!kv) {
        TRY(append_kv(w, key));
        kv = &w->kv[w->n_kv - 1];
    }
    free(kv->val);
    kv->type = type, kv->val = b->p, kv->len = b->n;
    b->p = NULL;
    return PT_OK;
}

static pt_status set_kv(gguf_writer *w, const char *key, uint32_t type, bbuf *b)
{
    pt_status st = need_collect(w, "metadata key", key);
    if (st == PT_OK && (!key || !*key)) st = ERR(PT_ERR_USER, "gguf writer: a metadata key is empty");
    if (st == PT_OK) st = set_kv_checked(w, key, type, b);
    free(b->p);
    return st;
}

pt_status gguf_w_str(gguf_writer *w, const char *key, const char *val)
{
    if (!val) return ERR(PT_ERR_INTERNAL, "gguf writer: NULL string for key '%s'", key ? key : "");
    bbuf b = {0};
    bb_str(&b, val);
    return set_kv(w, key, GGUF_TYPE_STRING, &b);
}

pt_status gguf_w_u32(gguf_writer *w, const char *key, uint32_t v)
{
    bbuf b = {0};
    bb_u32(&b, v);
    return set_kv(w, key, GGUF_TYPE_U32, &b);
}

pt_status gguf_w_i32(gguf_writer *w, const char *key, int32_t v)
{
    bbuf b = {0};
    bb_u32(&b, (uint32_t)v);
    return set_kv(w, key, GGUF_TYPE_I32, &b);
}

pt_status gguf_w_f32(gguf_writer *w, const char *key, float v)
{
    bbuf b = {0};
    bb_f32(&b, v);
    return set_kv(w, key, GGUF_TYPE_F32, &b);
}

pt_status gguf_w_bool(gguf_writer *w, const char *key, bool v)
{
    bbuf b = {0};
    uint8_t c = v ? 1 : 0;
    bb_put(&b, &c, 1);
    return set_kv(w, key, GGUF_TYPE_BOOL, &b);
}

pt_status gguf_w_u64(gguf_writer *w, const char *key, uint64_t v)
{
    bbuf b = {0};
    bb_u64(&b, v);
    return set_kv(w, key, GGUF_TYPE_U64, &b);
}

static bbuf array_head(gguf_type elem, size_t n)
{
    bbuf b = {0};
    bb_u32(&b, elem);
    bb_u64(&b, n);
    return b;
}

pt_status gguf_w_str_array(gguf_writer *w, const char *key, const char *const *vals, size_t n)
{
    bbuf b = array_head(GGUF_TYPE_STRING, n);
    for (size_t i = 0; i < n; i++) {
        if (!vals[i]) {
            free(b.p);
            return ERR(PT_ERR_INTERNAL, "gguf writer: string %zu of array '%s' is NULL", i, key ? key : "");
        }
        bb_str(&b, vals[i]);
    }
    return set_kv(w, key, GGUF_TYPE_ARRAY, &b);
}

pt_status gguf_w_i32_array(gguf_writer *w, const char *key, const int32_t *vals, size_t n)
{
    bbuf b = array_head(GGUF_TYPE_I32, n);
    for (size_t i = 0; i < n; i++) bb_u32(&b, (uint32_t)vals[i]);
    return set_kv(w, key, GGUF_TYPE_ARRAY, &b);
}

pt_status gguf_w_f32_array(gguf_writer *w, const char *key, const float *vals, size_t n)
{
    bbuf b = array_head(GGUF_TYPE_F32, n);
    for (size_t i = 0; i < n; i++) bb_f32(&b, vals[i]);
    return set_kv(w, key, GGUF_TYPE_ARRAY, &b);
}

/* The bytes of an opened kv's value as they follow its type in the file (the reader checked
 * them all against the file at open). */
static void kv_extent(const gguf_kv *kv, const uint8_t **start, size_t *len)
{
    const uint8_t *p = kv->value;
    if (kv->type == GGUF_TYPE_STRING) {
        *start = p, *len = 8 + (size_t)rd64(p);
        return;
    }
    if (kv->type != GGUF_TYPE_ARRAY) {
        *start = p, *len = gguf_scalar_size(kv->type);
        return;
    }
    if (kv->elem_type == GGUF_TYPE_STRING)
        for (uint64_t i = 0; i < kv->count; i++) p += 8 + rd64(p);
    else
        p += kv->count * gguf_scalar_size(kv->elem_type);
    *start = kv->value - 12, *len = (size_t)(p - *start); /* elem type and count precede value */
}

pt_status gguf_w_copy_kv(gguf_writer *w, const gguf_kv *kv)
{
    if (!kv || !kv->key.data || kv->key.len == 0)
        return ERR(PT_ERR_INTERNAL, "gguf writer: gguf_w_copy_kv of a NULL or empty entry");
    bool bad = kv->type > GGUF_TYPE_F64 ||
               (kv->type == GGUF_TYPE_ARRAY && (kv->elem_type > GGUF_TYPE_F64 || kv->elem_type == GGUF_TYPE_ARRAY));
    if (bad)
        return ERR(PT_ERR_USER, "gguf writer: cannot copy key '%s': type %u/%u is not a GGUF value type",
                   shown_bytes(kv->key.data, kv->key.len).s, (unsigned)kv->type, (unsigned)kv->elem_type);
    if (memchr(kv->key.data, 0, (size_t)kv->key.len))
        return ERR(PT_ERR_USER, "gguf writer: cannot copy key '%s': it contains a NUL byte",
                   shown_bytes(kv->key.data, kv->key.len).s);
    char *key = strndup(kv->key.data, (size_t)kv->key.len);
    TRY_ALLOC(key);
    const uint8_t *start;
    size_t len;
    kv_extent(kv, &start, &len);
    bbuf b = {0};
    bb_put(&b, start, len);
    pt_status st = set_kv(w, key, kv->type, &b);
    free(key);
    return st;
}

/* --- tensor infos --- */

size_t gguf_w_tensor_bytes(uint32_t ggml_type, const uint64_t *dims, int n_dims)
{
    uint32_t block, bytes;
    if (!dims || n_dims < 1 || n_dims > 4 || !gguf_ggml_type_info(ggml_type, NULL, &block, &bytes)) return 0;
    if (dims[0] % block) return 0;
    uint64_t numel = 1;
    for (int d = 0; d < n_dims; d++) {
        if (dims[d] == 0 || dims[d] > (uint64_t)INT64_MAX / numel) return 0;
        numel *= dims[d];
    }
    uint64_t blocks = numel / block;
    if (blocks > (uint64_t)INT64_MAX / bytes || blocks * bytes > SIZE_MAX) return 0;
    return (size_t)(blocks * bytes);
}

static pt_status check_shape(const char *name, uint32_t type, int n_dims, const uint64_t *dims)
{
    const char *tname;
    uint32_t block;
    if (!gguf_ggml_type_info(type, &tname, &block, NULL))
        return ERR(PT_ERR_USER, "gguf writer: tensor '%s' has unknown ggml type id %u", shown_text(name).s, type);
    if (n_dims < 1 || n_dims > 4 || !dims)
        return ERR(PT_ERR_USER, "gguf writer: tensor '%s' has %d dimensions; GGUF allows 1 to 4", shown_text(name).s,
                   n_dims);
    for (int d = 0; d < n_dims; d++)
        if (dims[d] == 0)
            return ERR(PT_ERR_USER, "gguf writer: tensor '%s' has a dimension of size 0 (dims[%d])", shown_text(name).s,
                       d);
    if (dims[0] % block)
        return ERR(PT_ERR_USER,
                   "gguf writer: tensor '%s' (%s) has rows of %llu values, not a multiple of the %s block of %u",
                   shown_text(name).s, tname, (unsigned long long)dims[0], tname, block);
    if (!gguf_w_tensor_bytes(type, dims, n_dims))
        return ERR(PT_ERR_USER, "gguf writer: tensor '%s' (%s) is too large: its size overflows", shown_text(name).s,
                   tname);
    return PT_OK;
}

static pt_status check_name(const gguf_writer *w, const char *name)
{
    if (!name || !*name) return ERR(PT_ERR_USER, "gguf writer: a tensor has an empty name");
    if (strlen(name) >= MAX_NAME)
        return ERR(PT_ERR_USER, "gguf writer: tensor name '%s' is %zu bytes; GGUF (llama.cpp) allows at most %u",
                   shown_text(name).s, strlen(name), MAX_NAME - 1);
    for (size_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return ERR(PT_ERR_USER, "gguf writer: tensor '%s' is declared twice (tensors %zu and %zu)",
                       shown_text(name).s, i + 1, w->n_t + 1);
    return PT_OK;
}

pt_status gguf_w_tensor(gguf_writer *w, const char *name, uint32_t ggml_type, int n_dims, const uint64_t *dims)
{
    TRY(need_collect(w, "tensor", name));
    TRY(check_name(w, name));
    TRY(check_shape(name, ggml_type, n_dims, dims));
    if (w->n_t == w->cap_t) {
        size_t cap = w->cap_t ? w->cap_t * 2 : 64;
        wtensor *t = realloc(w->t, cap * sizeof *t);
        TRY_ALLOC(t);
        w->t = t, w->cap_t = cap;
    }
    wtensor t = {.type = ggml_type, .n_dims = (uint32_t)n_dims, .dims = {1, 1, 1, 1}};
    for (int d = 0; d < n_dims; d++) t.dims[d] = dims[d];
    t.nbytes = gguf_w_tensor_bytes(ggml_type, dims, n_dims);
    t.name = strdup(name);
    TRY_ALLOC(t.name);
    w->t[w->n_t++] = t;
    return PT_OK;
}

/* --- the header --- */

static uint64_t pad_of(uint64_t n, uint64_t align) { return (align - n % align) % align; }

/* Each tensor at the previous offset plus its padded size (what llama.cpp checks). */
static pt_status layout(gguf_writer *w)
{
    uint64_t off = 0;
    for (size_t i = 0; i < w->n_t; i++) {
        uint64_t padded = w->t[i].nbytes + pad_of(w->t[i].nbytes, w->alignment);
        if (off > (uint64_t)INT64_MAX - padded)
            return ERR(PT_ERR_USER, "%s: the tensors add up to more than 2^63 bytes (at tensor '%s')",
                       shown_text(w->path).s, shown_text(w->t[i].name).s);
        w->t[i].offset = off;
        off += padded;
    }
    w->total = 0;
    for (size_t i = 0; i < w->n_t; i++) w->total += w->t[i].nbytes;
    return PT_OK;
}

static pt_status hdr_u32(pt_filewriter *fw, uint32_t v)
{
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return fw_write(fw, t, 4);
}

static pt_status hdr_u64(pt_filewriter *fw, uint64_t v)
{
    TRY(hdr_u32(fw, (uint32_t)v));
    return hdr_u32(fw, (uint32_t)(v >> 32));
}

static pt_status hdr_str(pt_filewriter *fw, const char *s)
{
    TRY(hdr_u64(fw, strlen(s)));
    return fw_write(fw, s, strlen(s));
}

static pt_status write_header(gguf_writer *w)
{
    pt_filewriter *fw = &w->fw;
    TRY(fw_write(fw, "GGUF", 4));
    TRY(hdr_u32(fw, GGUF_VERSION));
    TRY(hdr_u64(fw, w->n_t));
    TRY(hdr_u64(fw, w->n_kv));
    for (size_t i = 0; i < w->n_kv; i++) {
        TRY(hdr_str(fw, w->kv[i].key));
        TRY(hdr_u32(fw, w->kv[i].type));
        TRY(fw_write(fw, w->kv[i].val, w->kv[i].len));
    }
    for (size_t i = 0; i < w->n_t; i++) {
        const wtensor *t = &w->t[i];
        TRY(hdr_str(fw, t->name));
        TRY(hdr_u32(fw, t->n_dims));
        for (uint32_t d = 0; d < t->n_dims; d++) TRY(hdr_u64(fw, t->dims[d]));
        TRY(hdr_u32(fw, t->type));
        TRY(hdr_u64(fw, t->offset));
    }
    return fw_zeros(fw, (size_t)pad_of(fw->written, w->alignment));
}

/* The target's directory must exist: say so plainly rather than failing on the temporary name. */
static pt_status check_dir(const char *path)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    const char *dir = dirname(copy);
    struct stat sb;
    if (stat(dir, &sb) != 0)
        return ERR(PT_ERR_USER, "%s: cannot write the GGUF file: directory %s: %s (create it first)",
                   shown_text(path).s, shown_text(dir).s, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ERR(PT_ERR_USER, "%s: cannot write the GGUF file: %s is not a directory", shown_text(path).s,
                   shown_text(dir).s);
    return PT_OK;
}

/* After a failure with the temporary file open: remove it; the writer accepts nothing more. */
static pt_status fail(gguf_writer *w, pt_status st)
{
    fw_abort(&w->fw);
    w->state = W_FAILED;
    return st;
}

pt_status gguf_w_begin(gguf_writer *w, const char *path)
{
    TRY(need_collect(w, "gguf_w_begin", path));
    if (!path || !*path) return ERR(PT_ERR_INTERNAL, "gguf writer: gguf_w_begin without a path");
    free(w->path); /* a begin that failed before creating the file may be retried */
    w->path = strdup(path);
    TRY_ALLOC(w->path);
    TRY(check_dir(path));
    TRY(layout(w));
    TRY(fw_open(&w->fw, path));
    w->state = W_WRITING;
    pt_status st = write_header(w);
    return st == PT_OK ? PT_OK : fail(w, st);
}

/* --- tensor data --- */

static pt_status need_writing(const gguf_writer *w, const char *what)
{
    if (!w) return ERR(PT_ERR_INTERNAL, "gguf writer: %s on a NULL writer", what);
    if (w->state == W_FAILED)
        return ERR(PT_ERR_INTERNAL, "%s: %s after an earlier error; the file was not written", shown_text(w->path).s,
                   what);
    if (w->state != W_WRITING)
        return ERR(PT_ERR_INTERNAL, "gguf writer: %s %s", what,
                   w->state == W_COLLECT ? "before gguf_w_begin" : "after gguf_w_finish");
    return PT_OK;
}

static pt_status too_many(gguf_writer *w, size_t nbytes)
{
    uint64_t left = w->total - w->written;
    if (w->cur >= w->n_t)
        return ERR(PT_ERR_USER, "%s: %zu more bytes of tensor data, but all %zu tensors are complete",
                   shown_text(w->path).s, nbytes, w->n_t);
    return ERR(PT_ERR_USER,
               "%s: %zu bytes of tensor data at tensor '%s', but only %llu bytes remain to the end of the last "
               "declared tensor",
               shown_text(w->path).s, nbytes, shown_text(w->t[w->cur].name).s, (unsigned long long)left);
}

pt_status gguf_w_data(gguf_writer *w, const void *data, size_t nbytes)
{
    TRY(need_writing(w, "gguf_w_data"));
    if (nbytes > w->total - w->written) return fail(w, too_many(w, nbytes));
    if (nbytes && !data) return fail(w, ERR(PT_ERR_INTERNAL, "%s: gguf_w_data of NULL", shown_text(w->path).s));
    const uint8_t *p = data;
    while (nbytes) {
        wtensor *t = &w->t[w->cur];
        uint64_t want = t->nbytes - w->cur_done;
        size_t take = want < nbytes ? (size_t)want : nbytes;
        pt_status st = fw_write(&w->fw, p, take);
        p += take, nbytes -= take, w->cur_done += take, w->written += take;
        if (st == PT_OK && w->cur_done == t->nbytes) {
            st = fw_zeros(&w->fw, (size_t)pad_of(t->nbytes, w->alignment));
            w->cur++, w->cur_done = 0;
        }
        if (st != PT_OK) return fail(w, st);
    }
    return PT_OK;
}

pt_status gguf_w_finish(gguf_writer *w)
{
    TRY(need_writing(w, "gguf_w_finish"));
    if (w->written < w->total) {
        const wtensor *t = &w->t[w->cur];
        return fail(w, ERR(PT_ERR_USER,
                           "%s: tensor '%s' (tensor %zu of %zu) is incomplete: %llu of its %llu bytes were "
                           "written; the file was not written",
                           shown_text(w->path).s, shown_text(t->name).s, w->cur + 1, w->n_t,
                           (unsigned long long)w->cur_done, (unsigned long long)t->nbytes));
    }
    pt_status st = fw_commit(&w->fw);
    w->state = st == PT_OK ? W_DONE : W_FAILED;
    return st;
}

void gguf_writer_free(gguf_writer *w)
{
    if (!w) return;
    fw_abort(&w->fw);
    for (size_t i = 0; i < w->n_kv; i++) free(w->kv[i].key), free(w->kv[i].val);
    for (size_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->kv);
    free(w->t);
    free(w->path);
    free(w);
}
