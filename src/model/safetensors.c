/* safetensors.c — the bounds-checked reader of one .safetensors file (see include/ptrain/safetensors.h).
 *
 * Order of checks: the 8-byte header length against the file (a file that is something else, a
 * GGUF model, JSON, an HTML error page, a Git LFS pointer, a PyTorch zip, is named as such), the
 * JSON header with jansson (duplicate names refused), then each tensor entry on its own (dtype,
 * shape, offsets, byte count, alignment), then all of them against the data area (truncation) and
 * against each other (overlaps). Any failure frees everything and leaves one PT_ERR_USER message
 * naming the file, the tensor and the fix. */
#include "ptrain/safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrain/quant.h"

static const struct {
    const char *name;
    size_t size;
} dtypes[ST_DTYPE_COUNT] = {
    [ST_BOOL] = {"BOOL", 1}, [ST_U8] = {"U8", 1},     [ST_I8] = {"I8", 1},       [ST_U16] = {"U16", 2},
    [ST_I16] = {"I16", 2},   [ST_U32] = {"U32", 4},   [ST_I32] = {"I32", 4},     [ST_U64] = {"U64", 8},
    [ST_I64] = {"I64", 8},   [ST_F16] = {"F16", 2},   [ST_BF16] = {"BF16", 2},   [ST_F32] = {"F32", 4},
    [ST_F64] = {"F64", 8},   [ST_F8_E4M3] = {"F8_E4M3", 1}, [ST_F8_E5M2] = {"F8_E5M2", 1},
};

const char *st_dtype_name(st_dtype d) { return (unsigned)d < ST_DTYPE_COUNT ? dtypes[d].name : "?"; }
size_t st_dtype_size(st_dtype d) { return (unsigned)d < ST_DTYPE_COUNT ? dtypes[d].size : 0; }

int64_t st_numel(const st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i]; /* checked not to overflow at open */
    return n;
}

const char *st_describe(const st_tensor *t, char *buf, size_t len)
{
    size_t k = (size_t)snprintf(buf, len, "%s [", st_dtype_name(t->dtype));
    for (int i = 0; i < t->ndim && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < len) snprintf(buf + k, len - k, "]");
    return buf;
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* ---- what a file that is not safetensors is ---- */

static pt_status other_format(const char *name, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && i < 64 && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n')) i++;
    if (n >= 4 && memcmp(p, "GGUF", 4) == 0)
        return ERR(PT_ERR_USER, "%s: not a safetensors file: it is a GGUF model (it starts with \"GGUF\"); give it "
                   "a .gguf name, or give the path of the model's .safetensors files", shown_text(name).s);
    if (n >= 24 && memcmp(p, "version https://git-lfs", 23) == 0)
        return ERR(PT_ERR_USER, "%s: not a safetensors file: it is a Git LFS pointer, not the weights; run `git lfs "
                   "pull` or download the model with huggingface-cli download", shown_text(name).s);
    if (i < n && (p[i] == '{' || p[i] == '['))
        return ERR(PT_ERR_USER, "%s: not a safetensors file: it starts with '%c' and looks like JSON (a config or "
                   "index file?); give the model directory or its .safetensors file", shown_text(name).s, p[i]);
    if (i < n && p[i] == '<')
        return ERR(PT_ERR_USER, "%s: not a safetensors file: it looks like an HTML page, probably an error page "
                   "saved by a failed download; fetch the file again", shown_text(name).s);
    if (n >= 4 && memcmp(p, "PK\3\4", 4) == 0)
        return ERR(PT_ERR_USER, "%s: not a safetensors file: it is a zip archive (a PyTorch .bin checkpoint?); "
                   "save the model with transformers' save_pretrained(safe_serialization=True)", shown_text(name).s);
    if (n >= 2 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5)
        return ERR(PT_ERR_USER, "%s: not a safetensors file: it is a Python pickle (an old PyTorch checkpoint); "
                   "save the model with transformers' save_pretrained(safe_serialization=True)", shown_text(name).s);
    return PT_OK;
}

static void hex_start(const uint8_t *p, size_t n, char hex[40])
{
    hex[0] = '\0';
    for (size_t k = 0; k < 8 && k < n; k++) snprintf(hex + 3 * k, 40 - 3 * k, " %02x", p[k]);
}

/* The header length at the start of the image, checked against the file. */
static pt_status check_header_len(const char *name, const uint8_t *p, size_t n, uint64_t *len)
{
    if (n == 0)
        return ERR(PT_ERR_USER, "%s: the file is empty (0 bytes): the download failed; fetch the file again",
                   shown_text(name).s);
    uint64_t hl = n >= 8 ? le64(p) : 0;
    if (n >= 8 && hl >= 2 && hl <= ST_MAX_HEADER && hl <= n - 8 && p[8] == '{') {
        *len = hl;
        return PT_OK;
    }
    TRY(other_format(name, p, n));
    char hex[40];
    hex_start(p, n, hex);
    if (n < 8)
        return ERR(PT_ERR_USER,
                   "%s: truncated: the file has %zu bytes, fewer than the 8-byte header length a "
                   "safetensors file starts with; the download is incomplete, fetch the file again",
                   shown_text(name).s, n);
    if (hl > ST_MAX_HEADER)
        return ERR(PT_ERR_USER,
                   "%s: not a safetensors file: its first 8 bytes (%s) would make the JSON header "
                   "%llu bytes long, more than 100 MB; give the path of a .safetensors file",
                   shown_text(name).s, hex + 1, (unsigned long long)hl);
    if (hl < 2)
        return ERR(PT_ERR_USER, "%s: the header length is %llu, too short for a JSON header: the file is corrupt",
                   shown_text(name).s, (unsigned long long)hl);
    if (hl > n - 8)
        return ERR(PT_ERR_USER,
                   "%s: truncated: the JSON header takes bytes 8..%llu but the file ends at byte %zu; "
                   "the download is incomplete, fetch the file again",
                   shown_text(name).s, (unsigned long long)(hl + 8), n);
    return ERR(PT_ERR_USER, "%s: not a safetensors file: the JSON header at byte 8 does not start with '{' (the "
               "file starts with bytes%s); give the path of a .safetensors file", shown_text(name).s, hex);
}

/* ---- the JSON header ---- */

static pt_status parse_json(const char *name, const uint8_t *p, uint64_t len, json_t **root)
{
    json_error_t e;
    *root = json_loadb((const char *)p + 8, (size_t)len, JSON_REJECT_DUPLICATES, &e);
    if (*root && json_is_object(*root)) return PT_OK;
    if (*root) {
        json_decref(*root);
        *root = NULL;
        return ERR(PT_ERR_USER, "%s: the JSON header is not an object of tensors: the file is corrupt",
                   shown_text(name).s);
    }
    const char *dup = strstr(e.text, "duplicate object key near '");
    if (dup) { /* jansson quotes the key as written: near '"name"' */
        dup += strlen("duplicate object key near '");
        int n = (int)strlen(dup) - (dup[0] && dup[strlen(dup) - 1] == '\'');
        return ERR(PT_ERR_USER, "%s: the JSON header lists tensor %s twice (the second ends at byte %d of the "
                   "file): the file is corrupt", shown_text(name).s, shown_bytes(dup, (size_t)n).s, e.position + 8);
    }
    return ERR(PT_ERR_USER,
               "%s: the JSON header (bytes 8..%llu) does not parse: %s (line %d, column %d): the file "
               "is corrupt; fetch it again",
               shown_text(name).s, (unsigned long long)(len + 8), e.text, e.line, e.column);
}

static const char *kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

static pt_status parse_dtype(const char *file, const char *name, const json_t *v, st_tensor *t)
{
    if (!json_is_string(v))
        return ERR(PT_ERR_USER, "%s: tensor \"%s\": dtype is %s, expected a string such as \"BF16\": the file is "
                   "corrupt", shown_text(file).s, shown_text(name).s, v ? kind(v) : "missing");
    for (int d = 0; d < ST_DTYPE_COUNT; d++)
        if (strcmp(json_string_value(v), dtypes[d].name) == 0) {
            t->dtype = (st_dtype)d;
            return PT_OK;
        }
    return ERR(PT_ERR_USER, "%s: tensor \"%s\" has dtype \"%s\", which ptrain does not know (BOOL, U8, I8, U16, "
               "I16, U32, I32, U64, I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2): the file is corrupt or from a "
               "newer safetensors", shown_text(file).s, shown_text(name).s, shown_text(json_string_value(v)).s);
}

static pt_status parse_shape(const char *file, const char *name, const json_t *v, st_tensor *t)
{
    if (!json_is_array(v) || json_array_size(v) > ST_MAX_DIMS)
        return ERR(PT_ERR_USER,
                   "%s: tensor \"%s\": shape is %s, expected a list of at most %d sizes: the file is "
                   "corrupt",
                   shown_text(file).s, shown_text(name).s,
                   !v                 ? "missing"
                   : json_is_array(v) ? "a longer list"
                                      : kind(v),
                   ST_MAX_DIMS);
    t->ndim = (int)json_array_size(v);
    uint64_t numel = 1;
    for (int i = 0; i < t->ndim; i++) {
        const json_t *d = json_array_get(v, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return ERR(PT_ERR_USER, "%s: tensor \"%s\": shape[%d] is %s, expected a size >= 0: the file is corrupt",
                       shown_text(file).s, shown_text(name).s, i, json_is_integer(d) ? "negative" : kind(d));
        t->shape[i] = json_integer_value(d);
        if (t->shape[i] && numel > (uint64_t)INT64_MAX / (uint64_t)t->shape[i])
            return ERR(PT_ERR_USER, "%s: tensor \"%s\" has more than 2^63 elements: the file is corrupt",
                       shown_text(file).s, shown_text(name).s);
        numel *= (uint64_t)t->shape[i];
    }
    return PT_OK;
}

static pt_status parse_offsets(const char *file, const char *name, const json_t *v, st_tensor *t)
{
    const json_t *b = json_array_get(v, 0), *e = json_array_get(v, 1);
    if (!json_is_array(v) || json_array_size(v) != 2 || !json_is_integer(b) || !json_is_integer(e) ||
        json_integer_value(b) < 0 || json_integer_value(e) < json_integer_value(b))
        return ERR(PT_ERR_USER, "%s: tensor \"%s\": data_offsets must be [begin, end] with 0 <= begin <= end: the "
                   "file is corrupt", shown_text(file).s, shown_text(name).s);
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(e);
    return PT_OK;
}

/* One tensor's entry, checked on its own: byte count and alignment against dtype and shape. */
static pt_status parse_entry(const char *file, const char *name, const json_t *v, st_tensor *t)
{
    if (!json_is_object(v))
        return ERR(PT_ERR_USER, "%s: tensor \"%s\" is described by %s, not an object with dtype, shape and "
                   "data_offsets: the file is corrupt", shown_text(file).s, shown_text(name).s, kind(v));
    TRY(parse_dtype(file, name, json_object_get(v, "dtype"), t));
    TRY(parse_shape(file, name, json_object_get(v, "shape"), t));
    TRY(parse_offsets(file, name, json_object_get(v, "data_offsets"), t));
    uint64_t size = dtypes[t->dtype].size, numel = (uint64_t)st_numel(t);
    char desc[160];
    if (numel > UINT64_MAX / size || numel * size != t->end - t->begin)
        return ERR(PT_ERR_USER,
                   "%s: tensor \"%s\" is %s, %llu values of %llu bytes, but its data_offsets [%llu, "
                   "%llu] span %llu bytes: the file is corrupt",
                   shown_text(file).s, shown_text(name).s, st_describe(t, desc, sizeof desc), (unsigned long long)numel,
                   (unsigned long long)size, (unsigned long long)t->begin, (unsigned long long)t->end,
                   (unsigned long long)(t->end - t->begin));
    if (t->begin % size)
        return ERR(PT_ERR_USER, "%s: tensor \"%s\" (%s) starts at data byte %llu, not a multiple of its %llu-byte "
                   "elements: the file is corrupt", shown_text(file).s, shown_text(name).s, st_dtype_name(t->dtype),
                   (unsigned long long)t->begin, (unsigned long long)size);
    t->nbytes = (size_t)(t->end - t->begin);
    t->name = strdup(name);
    TRY_ALLOC(t->name);
    return PT_OK;
}

static pt_status parse_metadata(st_file *f, const json_t *v)
{
    if (!json_is_object(v)) return PT_OK; /* tolerated: ptrain needs nothing from it */
    f->meta = calloc(json_object_size(v) + 1, sizeof *f->meta);
    TRY_ALLOC(f->meta);
    const char *key;
    const json_t *val;
    json_object_foreach((json_t *)v, key, val) {
        if (!json_is_string(val)) continue;
        st_meta *m = &f->meta[f->n_meta++];
        m->key = strdup(key);
        m->value = strdup(json_string_value(val));
        if (!m->key || !m->value) return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

static pt_status parse_entries(st_file *f, const json_t *root)
{
    f->tensors = calloc(json_object_size(root) + 1, sizeof *f->tensors);
    TRY_ALLOC(f->tensors);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        if (strcmp(key, "__metadata__") == 0) {
            TRY(parse_metadata(f, v));
            continue;
        }
        TRY(parse_entry(f->path, key, v, &f->tensors[f->n_tensors]));
        f->n_tensors++;
    }
    return PT_OK;
}

/* ---- all tensors against the data area and against each other ---- */

static pt_status check_inside(const st_file *f)
{
    uint64_t data = f->size - f->data_offset;
    const st_tensor *worst = NULL;
    for (size_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].end > data && (!worst || f->tensors[i].end > worst->end)) worst = &f->tensors[i];
    if (!worst) return PT_OK;
    char desc[160];
    if (worst->end > ((uint64_t)1 << 50))
        return ERR(PT_ERR_USER, "%s: tensor \"%s\" (%s) is placed at data bytes %llu..%llu, far past the end of the "
                   "file (%zu bytes): the file is corrupt", shown_text(f->path).s, shown_text(worst->name).s,
                   st_describe(worst, desc, sizeof desc), (unsigned long long)worst->begin,
                   (unsigned long long)worst->end, f->size);
    return ERR(PT_ERR_USER,
               "%s: truncated: tensor \"%s\" (%s) takes data bytes %llu..%llu, but the data area ends "
               "at %llu (the file has %zu bytes); the download is incomplete, fetch the file again",
               shown_text(f->path).s, shown_text(worst->name).s, st_describe(worst, desc, sizeof desc),
               (unsigned long long)worst->begin, (unsigned long long)worst->end, (unsigned long long)data, f->size);
}

static int cmp_begin(const void *a, const void *b)
{
    const st_tensor *x = *(const st_tensor *const *)a, *y = *(const st_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return (x->end > y->end) - (x->end < y->end);
}

static pt_status check_overlaps(const st_file *f)
{
    if (f->n_tensors < 2) return PT_OK;
    const st_tensor **v = malloc(f->n_tensors * sizeof *v);
    TRY_ALLOC(v);
    size_t n = 0;
    for (size_t i = 0; i < f->n_tensors; i++)
        if (f->tensors[i].nbytes) v[n++] = &f->tensors[i]; /* empty tensors occupy nothing */
    qsort(v, n, sizeof *v, cmp_begin);
    pt_status st = PT_OK;
    for (size_t i = 1; i < n && st == PT_OK; i++)
        if (v[i - 1]->end > v[i]->begin)
            st = ERR(PT_ERR_USER,
                     "%s: tensors \"%s\" (data bytes %llu..%llu) and \"%s\" (data bytes %llu..%llu) "
                     "overlap: the file is corrupt",
                     shown_text(f->path).s, shown_text(v[i - 1]->name).s, (unsigned long long)v[i - 1]->begin,
                     (unsigned long long)v[i - 1]->end, shown_text(v[i]->name).s, (unsigned long long)v[i]->begin,
                     (unsigned long long)v[i]->end);
    free(v);
    return st;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static pt_status parse(st_file *f)
{
    const uint8_t *p = f->map;
    TRY(check_header_len(f->path, p, f->size, &f->header_len));
    f->data_offset = (size_t)(8 + f->header_len);
    json_t *root;
    TRY(parse_json(f->path, p, f->header_len, &root));
    pt_status st = parse_entries(f, root);
    json_decref(root);
    TRY(st);
    TRY(check_inside(f));
    TRY(check_overlaps(f));
    for (size_t i = 0; i < f->n_tensors; i++) f->tensors[i].data = p + f->data_offset + f->tensors[i].begin;
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, cmp_name);
    return PT_OK;
}

static pt_status open_image(st_file *f)
{
    pt_status st = parse(f);
    if (st != PT_OK) st_close(f);
    return st;
}

pt_status st_open_memory(const char *name, const void *data, size_t size, st_file *f)
{
    memset(f, 0, sizeof *f);
    f->path = strdup(name ? name : "<memory>");
    TRY_ALLOC(f->path);
    static const uint8_t empty[1];
    f->map = (void *)(data ? data : empty);
    f->size = data ? size : 0;
    return open_image(f);
}

/* Map path read-only; messages name the file and what to do. */
static pt_status map_file(const char *path, void **map, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        return ERR(PT_ERR_USER, "%s: cannot open the model file: %s%s", shown_text(path).s, strerror(e),
                   e == ENOENT ? " (is the download complete?)" : "");
    }
    struct stat st;
    int bad = fstat(fd, &st) != 0 ? errno : 0;
    if (bad || !S_ISREG(st.st_mode) || st.st_size == 0) {
        close(fd);
        if (bad) return ERR(PT_ERR_USER, "%s: cannot read the model file: %s", shown_text(path).s, strerror(bad));
        if (!S_ISREG(st.st_mode))
            return ERR(PT_ERR_USER, "%s: not a regular file: give a .safetensors file", shown_text(path).s);
        return ERR(PT_ERR_USER, "%s: the file is empty (0 bytes): the download failed; fetch the file again",
                   shown_text(path).s);
    }
    *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (*map == MAP_FAILED)
        return ERR(e == ENOMEM ? PT_ERR_NOMEM : PT_ERR_USER, "%s: cannot map the model file into memory: %s",
                   shown_text(path).s, strerror(e));
    *size = (size_t)st.st_size;
    return PT_OK;
}

pt_status st_open(const char *path, st_file *f)
{
    memset(f, 0, sizeof *f);
    void *map = NULL;
    size_t size = 0;
    TRY(map_file(path, &map, &size));
    f->path = strdup(path);
    if (!f->path) {
        munmap(map, size);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    f->map = map;
    f->size = size;
    f->mapped = true;
    return open_image(f);
}

void st_release(const st_file *f)
{
    /* a clean page of a read-only private file mapping comes back from the file when touched again: nothing is lost;
     * an image the caller owns (not mapped here) is left alone */
    if (f && f->mapped && f->map) (void)madvise(f->map, f->size, MADV_DONTNEED);
}

void st_close(st_file *f)
{
    if (!f) return;
    for (size_t i = 0; f->tensors && f->tensors[i].name; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < f->n_meta; i++) free(f->meta[i].key), free(f->meta[i].value);
    free(f->meta);
    if (f->mapped && f->map) munmap(f->map, f->size);
    free(f->path);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name)
{
    if (!f || !name || !f->n_tensors) return NULL;
    st_tensor key = {.name = (char *)name};
    return bsearch(&key, f->tensors, f->n_tensors, sizeof key, cmp_name);
}

const char *st_metadata(const st_file *f, const char *key)
{
    for (size_t i = 0; f && key && i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

pt_status st_read_f32(const st_tensor *t, const char *where, int64_t first, int64_t n, float *out)
{
    if (t->dtype != ST_F32 && t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64)
        return ERR(PT_ERR_USER, "%s: tensor %s has dtype %s; ptrain expects floating-point weights here (F32, F16, "
                   "BF16)", shown_text(where).s, shown_text(t->name).s, st_dtype_name(t->dtype));
    if (first < 0 || n < 0 || first > st_numel(t) - n)
        return ERR(PT_ERR_INTERNAL, "st_read_f32: values %lld..%lld of tensor %s are out of range", (long long)first,
                   (long long)(first + n), shown_text(t->name).s);
    const uint8_t *p = (const uint8_t *)t->data + (size_t)first * dtypes[t->dtype].size;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        double d;
        switch (t->dtype) {
        case ST_F32: memcpy(&out[i], p + 4 * i, 4); break;
        case ST_F64: memcpy(&d, p + 8 * i, 8), out[i] = (float)d; break;
        case ST_F16: memcpy(&h, p + 2 * i, 2), out[i] = quant_f16_to_f32(h); break;
        default: memcpy(&h, p + 2 * i, 2), out[i] = quant_bf16_to_f32(h); break;
        }
    }
    return PT_OK;
}
