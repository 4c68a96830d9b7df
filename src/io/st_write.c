/* st_write.c — streaming .safetensors output (st_write.h): an 8-byte header length, the JSON
 * header padded with spaces to 8 bytes (as the reference writer does, so every tensor starts
 * aligned), then the tensors back to back in declaration order. */
#include "ptrain/st_write.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/util.h"

void st_writer_init(st_writer *w)
{
    memset(w, 0, sizeof *w);
    w->fw.fd = w->fw.dir = -1;
}

pt_status st_w_tensor(st_writer *w, const char *name, st_dtype dtype, int ndim, const int64_t *shape)
{
    if (w->begun) return ERR(PT_ERR_INTERNAL, "safetensors: tensor %s declared after the header", shown_text(name).s);
    if (ndim < 0 || ndim > ST_MAX_DIMS || st_dtype_size(dtype) == 0)
        return ERR(PT_ERR_INTERNAL, "safetensors: tensor %s: bad dtype or rank", shown_text(name).s);
    for (size_t i = 0; i < w->n; i++)
        if (!strcmp(w->t[i].name, name))
            return ERR(PT_ERR_INTERNAL, "safetensors: tensor %s declared twice", shown_text(name).s);
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 64;
        st_wtensor *t = realloc(w->t, cap * sizeof *t);
        TRY_ALLOC(t);
        w->t = t, w->cap = cap;
    }
    st_wtensor *t = &w->t[w->n++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->dtype = dtype;
    t->ndim = ndim;
    t->nbytes = st_dtype_size(dtype);
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d], t->nbytes *= (uint64_t)shape[d];
    return PT_OK;
}

pt_status st_w_meta(st_writer *w, const char *key, const char *value)
{
    char **m = realloc(w->meta, (w->n_meta + 1) * 2 * sizeof *m);
    TRY_ALLOC(m);
    w->meta = m;
    m[2 * w->n_meta] = xstrdup(key);
    m[2 * w->n_meta + 1] = xstrdup(value);
    w->n_meta++;
    return PT_OK;
}

/* {"__metadata__": {...}, "name": {"dtype", "shape", "data_offsets"}, ...} as compact JSON. */
static char *header_json(const st_writer *w)
{
    json_t *root = json_object();
    bool ok = root != NULL; /* jansson refuses names and values that are not UTF-8 */
    if (w->n_meta) {
        json_t *meta = json_object();
        for (size_t i = 0; i < w->n_meta; i++)
            ok = ok && !json_object_set_new(meta, w->meta[2 * i], json_string(w->meta[2 * i + 1]));
        ok = ok && !json_object_set_new(root, "__metadata__", meta);
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->n; i++) {
        const st_wtensor *t = &w->t[i];
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        json_t *info = json_pack("{s:s, s:o, s:[I, I]}", "dtype", st_dtype_name(t->dtype), "shape", shape,
                                 "data_offsets", (json_int_t)off, (json_int_t)(off + t->nbytes));
        ok = ok && info && !json_object_set_new(root, t->name, info);
        off += t->nbytes;
    }
    char *text = ok ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}

pt_status st_w_begin(st_writer *w, const char *path)
{
    char *json = header_json(w);
    if (!json)
        return ERR(PT_ERR_USER, "%s: cannot build the safetensors header (a name that is not UTF-8?)",
                   shown_text(path).s);
    size_t len = strlen(json), padded = (len + 7) / 8 * 8;
    uint64_t n = padded;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(n >> (8 * i));
    pt_status st = fw_open(&w->fw, path);
    if (st == PT_OK) st = fw_write(&w->fw, le, 8);
    if (st == PT_OK) st = fw_write(&w->fw, json, len);
    for (size_t i = len; st == PT_OK && i < padded; i++) st = fw_write(&w->fw, " ", 1);
    free(json);
    w->begun = st == PT_OK;
    w->cur = 0, w->cur_done = 0;
    return st;
}

pt_status st_w_data(st_writer *w, const void *data, size_t n)
{
    if (!w->begun) return ERR(PT_ERR_INTERNAL, "safetensors: data before the header");
    const char *p = data;
    while (n) {
        if (w->cur >= w->n)
            return ERR(PT_ERR_INTERNAL, "%s: more data than the declared tensors hold", shown_text(w->fw.final).s);
        uint64_t left = w->t[w->cur].nbytes - w->cur_done, take = n < left ? n : left;
        TRY(fw_write(&w->fw, p, take));
        p += take, n -= take, w->cur_done += take;
        if (w->cur_done == w->t[w->cur].nbytes) w->cur++, w->cur_done = 0;
    }
    return PT_OK;
}

pt_status st_w_finish(st_writer *w)
{
    while (w->cur < w->n && w->t[w->cur].nbytes == 0) w->cur++;
    if (w->cur < w->n)
        return ERR(PT_ERR_INTERNAL, "%s: tensor %s is incomplete", shown_text(w->fw.final).s,
                   shown_text(w->t[w->cur].name).s);
    w->begun = false;
    return fw_commit(&w->fw);
}

void st_writer_free(st_writer *w)
{
    fw_abort(&w->fw);
    for (size_t i = 0; i < w->n; i++) free(w->t[i].name);
    for (size_t i = 0; i < 2 * w->n_meta; i++) free(w->meta[i]);
    free(w->t);
    free(w->meta);
    st_writer_init(w);
}
