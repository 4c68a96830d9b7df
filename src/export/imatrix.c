/* imatrix.c — reading llama.cpp's importance matrix files, GGUF and legacy .dat (imatrix.h says
 * what each holds), into one value per column of each weight tensor. The formats are read from
 * their description in llama.cpp's tools (imatrix, quantize); every length is checked against the
 * file before it is used. */
#include "ptrain/imatrix.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/gguf.h"

#define IMATRIX_FIX "; give imatrix_file the output of llama-imatrix (a .gguf or a legacy .dat file)"

static pt_status add_entry(pt_imatrix *im, const char *name, size_t name_len, int64_t n, imatrix_entry **out)
{
    imatrix_entry *grown = realloc(im->entries, sizeof *grown * (size_t)(im->n + 1));
    TRY_ALLOC(grown);
    im->entries = grown;
    imatrix_entry *e = &grown[im->n];
    e->name = malloc(name_len + 1);
    e->values = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    if (!e->name || !e->values) {
        free(e->name), free(e->values);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    memcpy(e->name, name, name_len);
    e->name[name_len] = 0;
    e->n = n;
    im->n++;
    *out = e;
    return PT_OK;
}

/* ---- GGUF: NAME.in_sum2 [ne0, n_mat] and NAME.counts [n_mat], float32 ---- */

static const gguf_tensor *counts_of(const gguf_file *f, const gguf_tensor *sums, char *name, size_t len)
{
    size_t base = (size_t)sums->name.len - strlen(".in_sum2");
    snprintf(name, len, "%.*s.counts", (int)base, sums->name.data);
    return gguf_find_tensor(f, name);
}

static bool is_sums(const gguf_tensor *t)
{
    size_t k = strlen(".in_sum2");
    return t->name.len > k && !memcmp(t->name.data + t->name.len - k, ".in_sum2", k);
}

static pt_status gguf_entry(pt_imatrix *im, const gguf_file *f, const gguf_tensor *s)
{
    char cname[600];
    const gguf_tensor *c = counts_of(f, s, cname, sizeof cname);
    pt_shown sn = shown_bytes(s->name.data, (size_t)s->name.len);
    if (!c)
        return ERR(PT_ERR_USER, "%s: tensor %s has no %s beside it (each entry is NAME.in_sum2 and NAME.counts)" IMATRIX_FIX,
                   shown_text(im->path).s, sn.s, shown_text(cname).s);
    int64_t ne0 = (int64_t)s->dims[0], n_mat = 1, n_counts = 1;
    for (uint32_t k = 1; k < s->n_dims; k++) n_mat *= (int64_t)s->dims[k];
    for (uint32_t k = 0; k < c->n_dims; k++) n_counts *= (int64_t)c->dims[k];
    if (s->ggml_type != GGML_TYPE_F32 || c->ggml_type != GGML_TYPE_F32 || n_counts != n_mat || ne0 < 1)
        return ERR(PT_ERR_USER, "%s: %s and its counts are not float32 [%lld, %lld] and [%lld] (llama-imatrix's "
                   "layout)" IMATRIX_FIX, shown_text(im->path).s, sn.s, (long long)ne0, (long long)n_mat,
                   (long long)n_mat);
    imatrix_entry *e;
    TRY(add_entry(im, s->name.data, (size_t)s->name.len - strlen(".in_sum2"), ne0 * n_mat, &e));
    for (int64_t j = 0; j < n_mat; j++) {
        float count;
        memcpy(&count, (const char *)c->data + 4 * j, 4);
        for (int64_t i = 0; i < ne0; i++) {
            float sum;
            memcpy(&sum, (const char *)s->data + 4 * (j * ne0 + i), 4);
            e->values[j * ne0 + i] = count > 0.0f ? sum / count : 1.0f; /* no input met: all equal */
        }
    }
    return PT_OK;
}

static pt_status load_gguf(pt_imatrix *im)
{
    gguf_file f;
    TRY(gguf_open(im->path, &f));
    pt_status st = PT_OK;
    for (uint64_t i = 0; st == PT_OK && i < f.n_tensors; i++)
        if (is_sums(&f.tensors[i])) st = gguf_entry(im, &f, &f.tensors[i]);
    gguf_close(&f);
    if (st == PT_OK && im->n == 0)
        st = ERR(PT_ERR_USER, "%s: a GGUF file with no importance matrix entries (tensors NAME.in_sum2 and "
                 "NAME.counts)" IMATRIX_FIX, shown_text(im->path).s);
    return st;
}

/* ---- legacy .dat ---- */

typedef struct {
    const unsigned char *p;
    size_t size, at;
    const char *path;
} dat_reader;

static pt_status dat_bytes(dat_reader *r, void *out, size_t n, const char *what, int64_t entry)
{
    if (r->size - r->at < n)
        return ERR(PT_ERR_USER, "%s: the file ends inside %s of entry %lld (byte %zu of %zu): not a legacy imatrix, "
                   "or truncated" IMATRIX_FIX, shown_text(r->path).s, what, (long long)entry + 1, r->at, r->size);
    memcpy(out, r->p + r->at, n);
    r->at += n;
    return PT_OK;
}

static pt_status dat_entry(pt_imatrix *im, dat_reader *r, int64_t i)
{
    int32_t len, ncall, nval;
    TRY(dat_bytes(r, &len, 4, "the name length", i));
    if (len < 1 || (size_t)len > r->size - r->at || len > 4096)
        return ERR(PT_ERR_USER, "%s: entry %lld has a name of %d bytes (at byte %zu): not a legacy imatrix" IMATRIX_FIX,
                   shown_text(r->path).s, (long long)i + 1, len, r->at - 4);
    const char *name = (const char *)r->p + r->at;
    r->at += (size_t)len;
    TRY(dat_bytes(r, &ncall, 4, "the call count", i));
    TRY(dat_bytes(r, &nval, 4, "the value count", i));
    if (nval < 1 || (size_t)nval > (r->size - r->at) / 4)
        return ERR(PT_ERR_USER, "%s: entry %lld (%s) says %d values, which the file does not hold: not a legacy "
                   "imatrix, or truncated" IMATRIX_FIX, shown_text(r->path).s, (long long)i + 1,
                   shown_bytes(name, (size_t)len).s, nval);
    imatrix_entry *e;
    TRY(add_entry(im, name, (size_t)len, nval, &e));
    TRY(dat_bytes(r, e->values, 4 * (size_t)nval, "the values", i));
    for (int32_t k = 0; ncall > 0 && k < nval; k++) e->values[k] /= (float)ncall;
    return PT_OK;
}

static pt_status load_dat(pt_imatrix *im, const unsigned char *data, size_t size)
{
    dat_reader r = {data, size, 0, im->path};
    int32_t n;
    TRY(dat_bytes(&r, &n, 4, "the entry count", -1));
    if (n < 1)
        return ERR(PT_ERR_USER, "%s: neither a GGUF file nor a legacy imatrix (its first int32, the entry count, is "
                   "%d)" IMATRIX_FIX, shown_text(im->path).s, n);
    for (int32_t i = 0; i < n; i++) TRY(dat_entry(im, &r, i));
    return PT_OK; /* what follows (the last chunk and the dataset's name) is not needed */
}

static pt_status read_all(const char *path, unsigned char **data, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return ERR(PT_ERR_USER, "imatrix_file %s: cannot open it (%s)", shown_text(path).s, strerror(errno));
    pt_status st = PT_OK;
    long end = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    *data = end >= 0 ? malloc((size_t)end + 1) : NULL;
    *size = end >= 0 ? (size_t)end : 0;
    if (end < 0 || fseek(f, 0, SEEK_SET) != 0) st = ERR(PT_ERR_USER, "imatrix_file %s: cannot read it", shown_text(path).s);
    else if (!*data) st = ERR(PT_ERR_NOMEM, "out of memory");
    else if (fread(*data, 1, *size, f) != *size) st = ERR(PT_ERR_USER, "imatrix_file %s: cannot read it", shown_text(path).s);
    fclose(f);
    return st;
}

pt_status imatrix_load(const char *path, pt_imatrix *im)
{
    memset(im, 0, sizeof *im);
    im->path = strdup(path);
    TRY_ALLOC(im->path);
    unsigned char *data = NULL;
    size_t size = 0;
    pt_status st = read_all(path, &data, &size);
    if (st == PT_OK) st = size >= 4 && !memcmp(data, "GGUF", 4) ? load_gguf(im) : load_dat(im, data, size);
    free(data);
    if (st != PT_OK) imatrix_free(im);
    return st;
}

void imatrix_free(pt_imatrix *im)
{
    for (int64_t i = 0; i < im->n; i++) free(im->entries[i].name), free(im->entries[i].values);
    free(im->entries);
    free(im->path);
    memset(im, 0, sizeof *im);
}

pt_status imatrix_weights(const pt_imatrix *im, const char *name, int64_t cols, const float **qw)
{
    *qw = NULL;
    for (int64_t i = 0; im && i < im->n; i++) {
        const imatrix_entry *e = &im->entries[i];
        if (strcmp(e->name, name)) continue;
        if (e->n == cols) *qw = e->values;
        else if (strcmp(name, "token_embd.weight"))
            return ERR(PT_ERR_USER, "%s: the entry for tensor %s has %lld values, the tensor's rows %lld: the "
                       "importance matrix was made for another model; give imatrix_file one from llama-imatrix run "
                       "on this model (a mixture-of-experts' entries hold one row per expert)", shown_text(im->path).s,
                       shown_text(name).s, (long long)e->n, (long long)cols);
        return PT_OK;
    }
    return PT_OK;
}
