/* parquet.c — rows from a Parquet file, one row group at a time: each column chunk's pages (v1
 * and v2, a dictionary page) are decompressed (Snappy, GZIP, ZSTD, LZ4, LZ4_RAW, Brotli through
 * their libraries), their repetition and definition levels (RLE/bit-packed hybrid) and values
 * (PLAIN, RLE_DICTIONARY/PLAIN_DICTIONARY, DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY,
 * DELTA_BYTE_ARRAY, BYTE_STREAM_SPLIT, RLE booleans) decoded, and the rows assembled from the
 * levels as datasets gives them: a struct an object, a LIST (three-level or legacy two-level) an
 * array, a null where a level says so; each value by its type (parquet_types.c: strings, numbers,
 * dates and times, decimals). Whatever is wrong with a file
 * is one error naming it, the row group, the column and the byte. */
#include <brotli/decode.h>
#include <lz4.h>
#include <math.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "data_internal.h"

#define PQ_MAX_PAGE ((int64_t)1 << 28)   /* bytes of one page, uncompressed */
#define PQ_MAX_ENTRIES ((size_t)1 << 26) /* levels of one row group, all its columns */
#define PQ_MAX_DEPTH 16                  /* nesting of the schema */
#define PQ_BATCH_ROWS 4096               /* rows handed to a sink at a time within a row group */

enum { ENC_PLAIN = 0, ENC_PLAIN_DICT = 2, ENC_RLE = 3, ENC_BIT_PACKED = 4, ENC_DELTA = 5, ENC_DELTA_LENGTH = 6,
       ENC_DELTA_BYTES = 7, ENC_RLE_DICT = 8, ENC_SPLIT = 9 };
enum { CODEC_NONE, CODEC_SNAPPY, CODEC_GZIP, CODEC_LZO, CODEC_BROTLI, CODEC_LZ4, CODEC_ZSTD, CODEC_LZ4_RAW };
enum { CT_MAP = 1, CT_MAP_KV = 2, CT_LIST = 3 };
enum { LT_MAP = 2, LT_LIST = 3 };

/* One leaf column's levels and values in the current row group. */
typedef struct {
    uint8_t *def, *rep;
    size_t n, pos;
    pq_val *val;
    size_t nval, vpos;
    pq_val *dict;
    size_t ndict;
    bool has_dict;
    unsigned char **bufs; /* decompressed pages and built strings the values point into */
    int nbufs;
} column;

typedef struct node {
    const pq_schema *s;
    char *path; /* dotted, for messages */
    struct node *child;
    int n_child;
    int def, rep;       /* levels at this node */
    int leaf, leaf_end; /* its leaves [leaf, leaf_end) */
} node;

typedef struct {
    const unsigned char *map;
    size_t len;
    const char *file;
    node root;
    node **leaves;
    int n_leaves;
    column *cols;
    int group;
    size_t unpacked;  /* bytes decompressed in this row group */
    size_t entries;   /* levels read in this row group, all columns */
    size_t max_unpacked, max_entries; /* the bounds of a row group, from the file's size */
    const node *at;   /* the column being read */
    size_t byte;      /* where in the file */
} pq_file;

static pt_status bad(const pq_file *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static pt_status bad(const pq_file *f, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (f->at)
        return ERR(PT_ERR_USER, "%s: row group %d, column %s, byte %zu: %s", shown_text(f->file).s, f->group,
                   shown_text(f->at->path).s, f->byte, what);
    return ERR(PT_ERR_USER, "%s: %s", shown_text(f->file).s, what);
}

/* ---- the schema as a tree ---- */

static pt_status build(pq_file *f, const pq_meta *m, int *next, node *n, int def, int rep, int depth)
{
    const pq_schema *s = n->s;
    if (depth > 0 && s->repetition != PQ_REQUIRED) def++;
    if (depth > 0 && s->repetition == PQ_REPEATED) rep++;
    n->def = def;
    n->rep = rep;
    n->leaf = f->n_leaves;
    if (depth > PQ_MAX_DEPTH) return bad(f, "the schema nests deeper than %d levels at %s", PQ_MAX_DEPTH, shown_text(n->path).s);
    if (s->num_children <= 0 && depth > 0) {
        if (s->type < 0) return bad(f, "schema element %s has neither a type nor children", shown_text(n->path).s);
        node **grown = realloc(f->leaves, sizeof *grown * (size_t)(f->n_leaves + 1));
        if (!grown) abort();
        f->leaves = grown;
        f->leaves[f->n_leaves++] = n;
        n->leaf_end = f->n_leaves;
        return PT_OK;
    }
    if (s->num_children > m->n_schema - *next)
        return bad(f, "schema element %s claims %d children, the footer has %d more elements", shown_text(n->path).s,
                   s->num_children, m->n_schema - *next);
    n->child = calloc((size_t)s->num_children, sizeof *n->child);
    if (!n->child) abort();
    n->n_child = s->num_children;
    for (int i = 0; i < n->n_child; i++) {
        node *c = &n->child[i];
        if (*next >= m->n_schema)
            return bad(f, "schema element %s claims %d children, the footer ends after %d", shown_text(n->path).s,
                       n->n_child, i);
        c->s = &m->schema[(*next)++];
        strbuf p = {0};
        if (depth > 0) sb_printf(&p, "%s.", n->path);
        sb_printf(&p, "%s", c->s->name ? c->s->name : "?");
        c->path = p.data;
        TRY(build(f, m, next, c, def, rep, depth + 1));
    }
    n->leaf_end = f->n_leaves;
    if (n->leaf_end == n->leaf) return bad(f, "group %s has no columns", depth ? shown_text(n->path).s : "(root)");
    return PT_OK;
}

static void tree_free(node *n)
{
    for (int i = 0; i < n->n_child; i++) tree_free(&n->child[i]);
    free(n->child);
    free(n->path);
}

static bool is_list(const node *n)
{
    return n->n_child > 0 && (n->s->converted == CT_LIST || n->s->logical == LT_LIST);
}

static bool is_map(const node *n)
{
    return n->n_child > 0 && (n->s->converted == CT_MAP || n->s->converted == CT_MAP_KV || n->s->logical == LT_MAP);
}

/* A leaf's type is one ptrain turns into JSON (parquet_types.c). */
static pt_status check_leaf(pq_file *f, const node *n)
{
    char what[160];
    f->at = NULL;
    if (!pq_type_known(n->s, what, sizeof what))
        return bad(f, "column %s holds %s values, which ptrain does not read (a chat row has text, numbers, booleans, "
                   "dates and times, lists and structs)", shown_text(n->path).s, what);
    return PT_OK;
}

static pt_status check_tree(pq_file *f, const node *n, int depth)
{
    if (depth > 0 && is_map(n))
        return bad(f, "column %s holds MAP values, which ptrain does not read (a chat row has text, numbers, booleans, "
                   "dates and times, lists and structs)", shown_text(n->path).s);
    if (depth > 0 && is_list(n) && (n->n_child != 1 || n->child[0].s->repetition != PQ_REPEATED))
        return bad(f, "LIST column %s does not have one repeated child", shown_text(n->path).s);
    if (n->n_child == 0 && depth > 0) return check_leaf(f, n);
    for (int i = 0; i < n->n_child; i++) TRY(check_tree(f, &n->child[i], depth + 1));
    return PT_OK;
}

/* ---- decompression ---- */

static pt_status decompress(pq_file *f, int codec, const unsigned char *src, size_t n, size_t out_n,
                            unsigned char **out)
{
    if (out_n > f->max_unpacked - f->unpacked)
        return bad(f, "the row group's pages decompress to more than %zu bytes, far more than a file of %zu bytes "
                   "holds", f->max_unpacked, f->len);
    f->unpacked += out_n;
    unsigned char *dst = malloc(out_n ? out_n : 1);
    if (!dst) return bad(f, "out of memory for a page of %zu bytes", out_n);
    bool ok = false;
    switch (codec) {
    case CODEC_SNAPPY: {
        size_t got = 0;
        ok = snappy_uncompressed_length((const char *)src, n, &got) == SNAPPY_OK && got == out_n &&
             snappy_uncompress((const char *)src, n, (char *)dst, &got) == SNAPPY_OK && got == out_n;
        break;
    }
    case CODEC_GZIP: {
        z_stream z = {0};
        if (inflateInit2(&z, 15 + 32) != Z_OK) break;
        z.next_in = (Bytef *)src;
        z.avail_in = (uInt)n;
        z.next_out = dst;
        z.avail_out = (uInt)out_n;
        int rc = inflate(&z, Z_FINISH);
        ok = (rc == Z_STREAM_END || (rc == Z_BUF_ERROR && z.avail_out == 0)) && z.total_out == out_n;
        inflateEnd(&z);
        break;
    }
    case CODEC_BROTLI: {
        size_t got = out_n;
        ok = BrotliDecoderDecompress(n, src, &got, dst) == BROTLI_DECODER_RESULT_SUCCESS && got == out_n;
        break;
    }
    case CODEC_ZSTD: {
        unsigned long long want = ZSTD_getFrameContentSize(src, n);
        if (want != ZSTD_CONTENTSIZE_ERROR && want != ZSTD_CONTENTSIZE_UNKNOWN && want != out_n) break;
        size_t got = ZSTD_decompress(dst, out_n, src, n);
        ok = !ZSTD_isError(got) && got == out_n;
        break;
    }
    case CODEC_LZ4_RAW:
        ok = n <= INT32_MAX && out_n <= INT32_MAX &&
             LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)out_n) == (int)out_n;
        break;
    case CODEC_LZ4: { /* Hadoop's framing (blocks of be32 sizes), else a raw block */
        size_t in = 0, done = 0;
        while (in + 8 <= n && done < out_n) {
            uint32_t raw = (uint32_t)src[in] << 24 | (uint32_t)src[in + 1] << 16 | (uint32_t)src[in + 2] << 8 | src[in + 3];
            uint32_t comp = (uint32_t)src[in + 4] << 24 | (uint32_t)src[in + 5] << 16 | (uint32_t)src[in + 6] << 8 |
                            src[in + 7];
            if (comp > n - in - 8 || raw > out_n - done || comp > INT32_MAX) break;
            if (LZ4_decompress_safe((const char *)src + in + 8, (char *)dst + done, (int)comp, (int)raw) != (int)raw)
                break;
            in += 8 + comp;
            done += raw;
        }
        ok = in == n && done == out_n;
        if (!ok && n <= INT32_MAX && out_n <= INT32_MAX)
            ok = LZ4_decompress_safe((const char *)src, (char *)dst, (int)n, (int)out_n) == (int)out_n;
        break;
    }
    default: {
        free(dst);
        static const char *const names[] = {"none", "Snappy", "GZIP", "LZO", "Brotli", "LZ4", "ZSTD", "LZ4_RAW"};
        char other[32];
        snprintf(other, sizeof other, "number %d", codec);
        return bad(f, "compression %s is not one ptrain reads (it reads none, Snappy, GZIP, ZSTD, LZ4, LZ4_RAW and "
                   "Brotli)", codec >= 0 && codec < 8 ? names[codec] : other);
    }
    }
    if (!ok) {
        free(dst);
        return bad(f, "the page does not decompress to the %zu bytes its header gives", out_n);
    }
    *out = dst;
    return PT_OK;
}

/* ---- reading bits and numbers ---- */

typedef struct {
    const unsigned char *p, *end;
} bytes;

static bool get_varint(bytes *b, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && b->p < b->end; shift += 7) {
        unsigned char c = *b->p++;
        *v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) return true;
    }
    return false;
}

static bool get_zigzag(bytes *b, int64_t *v)
{
    uint64_t u;
    if (!get_varint(b, &u)) return false;
    *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return true;
}

/* w bits (<= 64) at bit offset off of p, least significant first. */
static uint64_t bits_at(const unsigned char *p, uint64_t off, int w)
{
    uint64_t v = 0;
    int got = 0, shift = (int)(off & 7);
    const unsigned char *q = p + (off >> 3);
    while (got < w) {
        v |= (uint64_t)(*q++ >> shift) << got;
        got += 8 - shift;
        shift = 0;
    }
    return w == 64 ? v : v & (((uint64_t)1 << w) - 1);
}

static uint64_t le(const unsigned char *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* n values of the RLE/bit-packed hybrid of width w (<= 32) from b into out. */
static bool hybrid(bytes *b, int w, uint32_t *out, size_t n)
{
    size_t i = 0;
    int vb = (w + 7) / 8;
    while (i < n) {
        uint64_t h;
        if (!get_varint(b, &h)) return false;
        if (h & 1) {
            uint64_t groups = h >> 1;
            if (groups > (uint64_t)(b->end - b->p) || groups * (uint64_t)w > (uint64_t)(b->end - b->p)) return false;
            uint64_t count = groups * 8;
            for (uint64_t k = 0; k < count && i < n; k++) out[i++] = (uint32_t)bits_at(b->p, k * (uint64_t)w, w);
            b->p += groups * (uint64_t)w;
        } else {
            uint64_t count = h >> 1;
            if (b->end - b->p < vb) return false;
            uint32_t v = (uint32_t)le(b->p, vb);
            b->p += vb;
            for (uint64_t k = 0; k < count && i < n; k++) out[i++] = v;
        }
    }
    return true;
}

static int width_of(int max)
{
    int w = 0;
    while (max >> w) w++;
    return w;
}

/* DELTA_BINARY_PACKED: up to n values into out; *got: how many the header says. */
static bool delta_ints(bytes *b, int64_t *out, size_t n, size_t *got)
{
    uint64_t block, minis, total;
    int64_t first;
    if (!get_varint(b, &block) || !get_varint(b, &minis) || !get_varint(b, &total) || !get_zigzag(b, &first))
        return false;
    if (block == 0 || block % 128 || block > ((uint64_t)1 << 20) || minis == 0 || block % minis ||
        (block / minis) % 32 || minis > 256 || total > n)
        return false; /* a block of at most 2^20 values: per * w below cannot overflow */
    uint64_t per = block / minis;
    *got = (size_t)total;
    if (total == 0) return true;
    uint64_t last = (uint64_t)first;
    out[0] = first;
    size_t k = 1;
    while (k < total) {
        int64_t min_delta;
        if (!get_zigzag(b, &min_delta) || (uint64_t)(b->end - b->p) < minis) return false;
        const unsigned char *widths = b->p;
        b->p += minis;
        for (uint64_t m = 0; m < minis && k < total; m++) {
            int w = widths[m];
            if (w > 64 || per * (uint64_t)w / 8 > (uint64_t)(b->end - b->p)) return false;
            for (uint64_t j = 0; j < per && k < total; j++) {
                last += (uint64_t)min_delta + (w ? bits_at(b->p, j * (uint64_t)w, w) : 0);
                out[k++] = (int64_t)last;
            }
            b->p += per * (uint64_t)w / 8;
        }
    }
    return true;
}

/* ---- values ---- */

static void keep_buf(column *c, unsigned char *buf)
{
    unsigned char **grown = realloc(c->bufs, sizeof *grown * (size_t)(c->nbufs + 1));
    if (!grown) abort();
    c->bufs = grown;
    c->bufs[c->nbufs++] = buf;
}

/* The bytes of one INT96 or FIXED_LEN_BYTE_ARRAY value of s's column, 0 for another type. */
static size_t fixed_width(const pq_schema *s)
{
    return s->type == PQ_INT96 ? 12 : s->type == PQ_FIXED && s->type_length > 0 ? (size_t)s->type_length : 0;
}

/* n PLAIN values; fixed: the width of an INT96 or FIXED_LEN_BYTE_ARRAY value (kept as bytes). */
static pt_status plain(pq_file *f, int type, size_t fixed, bytes *b, pq_val *out, size_t n)
{
    if (type == PQ_INT96 || type == PQ_FIXED) {
        if (!fixed || fixed > UINT32_MAX || (size_t)(b->end - b->p) / fixed < n)
            return bad(f, "PLAIN values of %zu bytes: %zu values in %td bytes", fixed, n, b->end - b->p);
        for (size_t i = 0; i < n; i++, b->p += fixed) out[i].s.p = (const char *)b->p, out[i].s.n = (uint32_t)fixed;
        return PT_OK;
    }
    size_t size = type == PQ_INT32 || type == PQ_FLOAT ? 4 : type == PQ_INT64 || type == PQ_DOUBLE ? 8 : 0;
    if (type == PQ_BOOLEAN) {
        if ((uint64_t)(b->end - b->p) * 8 < n) return bad(f, "PLAIN booleans: %zu values in %td bytes", n, b->end - b->p);
        for (size_t i = 0; i < n; i++) out[i].i = b->p[i >> 3] >> (i & 7) & 1;
        b->p += (n + 7) / 8;
        return PT_OK;
    }
    if (size) {
        if ((size_t)(b->end - b->p) / size < n) return bad(f, "PLAIN values: %zu values in %td bytes", n, b->end - b->p);
        for (size_t i = 0; i < n; i++, b->p += size) {
            uint64_t v = le(b->p, (int)size);
            if (type == PQ_INT32) out[i].i = (int32_t)(uint32_t)v;
            else if (type == PQ_INT64) out[i].i = (int64_t)v;
            else if (type == PQ_FLOAT) {
                uint32_t u = (uint32_t)v;
                float x;
                memcpy(&x, &u, 4);
                out[i].d = x;
            } else
                memcpy(&out[i].d, &v, 8);
        }
        return PT_OK;
    }
    for (size_t i = 0; i < n; i++) { /* BYTE_ARRAY */
        if (b->end - b->p < 4) return bad(f, "PLAIN strings: value %zu of %zu runs past the page", i, n);
        uint64_t len = le(b->p, 4);
        b->p += 4;
        if (len > (uint64_t)(b->end - b->p)) return bad(f, "PLAIN strings: value %zu (%llu bytes) runs past the page",
                                                        i, (unsigned long long)len);
        out[i].s.p = (const char *)b->p;
        out[i].s.n = (uint32_t)len;
        b->p += len;
    }
    return PT_OK;
}

static pt_status delta_lengths(pq_file *f, bytes *b, pq_val *out, size_t n)
{
    int64_t *len = malloc(sizeof *len * (n + 1));
    if (!len) abort();
    size_t got;
    if (!delta_ints(b, len, n, &got) || got != n) {
        free(len);
        return bad(f, "DELTA_LENGTH_BYTE_ARRAY: the lengths do not decode to %zu values", n);
    }
    for (size_t i = 0; i < n; i++) {
        if (len[i] < 0 || len[i] > b->end - b->p) {
            free(len);
            return bad(f, "DELTA_LENGTH_BYTE_ARRAY: value %zu runs past the page", i);
        }
        out[i].s.p = (const char *)b->p;
        out[i].s.n = (uint32_t)len[i];
        b->p += len[i];
    }
    free(len);
    return PT_OK;
}

static pt_status delta_bytes(pq_file *f, column *c, bytes *b, pq_val *out, size_t n)
{
    int64_t *pre = malloc(sizeof *pre * (n + 1));
    if (!pre) abort();
    size_t got;
    pt_status rc = PT_OK;
    if (!delta_ints(b, pre, n, &got) || got != n) rc = bad(f, "DELTA_BYTE_ARRAY: the prefix lengths do not decode");
    if (rc == PT_OK) rc = delta_lengths(f, b, out, n);
    uint64_t total = 0;
    for (size_t i = 0; rc == PT_OK && i < n; i++) {
        uint64_t prev = i ? (uint64_t)pre[i - 1] + out[i - 1].s.n : 0; /* the previous value's length */
        if (pre[i] < 0 || (uint64_t)pre[i] > prev) rc = bad(f, "DELTA_BYTE_ARRAY: prefix %zu is longer than the value before", i);
        else if ((total += (uint64_t)pre[i] + out[i].s.n) > (uint64_t)PQ_MAX_PAGE)
            rc = bad(f, "DELTA_BYTE_ARRAY: the values make more than %lld bytes", (long long)PQ_MAX_PAGE);
    }
    if (rc != PT_OK) {
        free(pre);
        return rc;
    }
    unsigned char *buf = malloc(total + 1);
    if (!buf) abort();
    keep_buf(c, buf);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t start = at;
        if (pre[i]) memcpy(buf + at, out[i - 1].s.p, (size_t)pre[i]);
        at += (size_t)pre[i];
        memcpy(buf + at, out[i].s.p, out[i].s.n);
        at += out[i].s.n;
        out[i].s.p = (const char *)buf + start;
        out[i].s.n = (uint32_t)(at - start);
    }
    free(pre);
    return PT_OK;
}

/* n values of type in encoding from b, appended to c->val. */
static pt_status values(pq_file *f, column *c, const pq_schema *s, int encoding, bytes *b, size_t n)
{
    pq_val *out = c->val + c->nval;
    int type = s->type;
    switch (encoding) {
    case ENC_PLAIN: TRY(plain(f, type, fixed_width(s), b, out, n)); break;
    case ENC_PLAIN_DICT:
    case ENC_RLE_DICT: {
        if (!c->has_dict) return bad(f, "dictionary-encoded values without a dictionary page");
        if (n == 0) break;
        if (b->p >= b->end) return bad(f, "dictionary indices: the page ends before the bit width");
        int w = *b->p++;
        if (w > 32) return bad(f, "dictionary indices of %d bits", w);
        uint32_t *idx = malloc(sizeof *idx * n);
        if (!idx) abort();
        /* width 0: every index is 0, whatever follows (polars writes no runs then) */
        bool ok = w == 0 ? (memset(idx, 0, sizeof *idx * n), true) : hybrid(b, w, idx, n);
        for (size_t i = 0; ok && i < n; i++) {
            if (idx[i] >= c->ndict) {
                uint32_t bad_index = idx[i];
                free(idx);
                return bad(f, "dictionary index %u of a dictionary of %zu values", bad_index, c->ndict);
            }
            out[i] = c->dict[idx[i]];
        }
        free(idx);
        if (!ok) return bad(f, "dictionary indices: the page ends before %zu values", n);
        break;
    }
    case ENC_RLE: {
        if (type != PQ_BOOLEAN) return bad(f, "RLE values of a column that is not BOOLEAN");
        if (b->end - b->p < 4) return bad(f, "RLE booleans: no length");
        uint64_t len = le(b->p, 4);
        b->p += 4;
        if (len > (uint64_t)(b->end - b->p)) return bad(f, "RLE booleans: %llu bytes past the page", (unsigned long long)len);
        bytes r = {b->p, b->p + len};
        uint32_t *v = malloc(sizeof *v * (n + 1));
        if (!v) abort();
        bool ok = hybrid(&r, 1, v, n);
        for (size_t i = 0; ok && i < n; i++) out[i].i = v[i];
        free(v);
        if (!ok) return bad(f, "RLE booleans: the page ends before %zu values", n);
        b->p += len;
        break;
    }
    case ENC_DELTA: {
        if (type != PQ_INT32 && type != PQ_INT64) return bad(f, "DELTA_BINARY_PACKED values of a column that is not an integer");
        int64_t *v = malloc(sizeof *v * (n + 1));
        if (!v) abort();
        size_t got;
        bool ok = delta_ints(b, v, n, &got) && got == n;
        for (size_t i = 0; ok && i < n; i++) out[i].i = type == PQ_INT32 ? (int32_t)v[i] : v[i];
        free(v);
        if (!ok) return bad(f, "DELTA_BINARY_PACKED: the values do not decode to %zu", n);
        break;
    }
    case ENC_DELTA_LENGTH:
        if (type != PQ_BYTE_ARRAY) return bad(f, "DELTA_LENGTH_BYTE_ARRAY values of a column that is not BYTE_ARRAY");
        TRY(delta_lengths(f, b, out, n));
        break;
    case ENC_DELTA_BYTES:
        if (type != PQ_BYTE_ARRAY) return bad(f, "DELTA_BYTE_ARRAY values of a column that is not BYTE_ARRAY");
        TRY(delta_bytes(f, c, b, out, n));
        break;
    case ENC_SPLIT: {
        size_t k = type == PQ_INT32 || type == PQ_FLOAT ? 4 : type == PQ_INT64 || type == PQ_DOUBLE ? 8 : 0;
        if (!k) return bad(f, "BYTE_STREAM_SPLIT values of a column that is not a number");
        if ((size_t)(b->end - b->p) / k < n) return bad(f, "BYTE_STREAM_SPLIT: %zu values in %td bytes", n, b->end - b->p);
        for (size_t i = 0; i < n; i++) {
            unsigned char v[8];
            for (size_t j = 0; j < k; j++) v[j] = b->p[j * n + i];
            bytes one = {v, v + k};
            TRY(plain(f, type, 0, &one, &out[i], 1));
        }
        b->p += k * n;
        break;
    }
    default: return bad(f, "value encoding %d is not one ptrain reads", encoding);
    }
    c->nval += n;
    return PT_OK;
}

/* ---- pages ---- */

static pt_status levels_v1(pq_file *f, bytes *b, int max, uint8_t *out, size_t n, int encoding)
{
    if (max == 0) {
        memset(out, 0, n);
        return PT_OK;
    }
    if (encoding != ENC_RLE) return bad(f, "levels in encoding %d (only RLE is read)", encoding);
    if (b->end - b->p < 4) return bad(f, "the levels' length runs past the page");
    uint64_t len = le(b->p, 4);
    b->p += 4;
    if (len > (uint64_t)(b->end - b->p)) return bad(f, "levels of %llu bytes run past the page", (unsigned long long)len);
    bytes r = {b->p, b->p + len};
    b->p += len;
    uint32_t *v = malloc(sizeof *v * (n + 1));
    if (!v) abort();
    bool ok = hybrid(&r, width_of(max), v, n);
    for (size_t i = 0; ok && i < n; i++) {
        if (v[i] > (uint32_t)max) ok = false;
        else out[i] = (uint8_t)v[i];
    }
    free(v);
    return ok ? PT_OK : bad(f, "the levels do not decode to %zu values of at most %d", n, max);
}

static pt_status levels_v2(pq_file *f, bytes r, int max, uint8_t *out, size_t n)
{
    if (max == 0) {
        memset(out, 0, n);
        return PT_OK;
    }
    uint32_t *v = malloc(sizeof *v * (n + 1));
    if (!v) abort();
    bool ok = hybrid(&r, width_of(max), v, n);
    for (size_t i = 0; ok && i < n; i++) {
        if (v[i] > (uint32_t)max) ok = false;
        else out[i] = (uint8_t)v[i];
    }
    free(v);
    return ok ? PT_OK : bad(f, "the levels do not decode to %zu values of at most %d", n, max);
}

static pt_status grow(column *c, size_t n)
{
    size_t need = c->n + n;
    uint8_t *d = realloc(c->def, need + 1);
    if (d) c->def = d;
    uint8_t *r = d ? realloc(c->rep, need + 1) : NULL;
    if (r) c->rep = r;
    pq_val *v = r ? realloc(c->val, sizeof *v * (need + 1)) : NULL;
    if (v) c->val = v;
    return v ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory for %zu values of a Parquet column", need);
}

static pt_status data_page(pq_file *f, column *c, const node *leaf, const pq_page *pg, int codec,
                           const unsigned char *data, size_t size)
{
    if (pg->num_values < 0 || (uint64_t)pg->num_values > f->max_entries - f->entries)
        return bad(f, "a page of %lld values (at most %zu in a row group of this file)", (long long)pg->num_values,
                   f->max_entries);
    size_t n = (size_t)pg->num_values;
    f->entries += n;
    TRY(grow(c, n));
    unsigned char *buf = NULL;
    bytes b;
    if (pg->type == PQ_DATA_PAGE) {
        if (codec != CODEC_NONE) {
            TRY(decompress(f, codec, data, size, (size_t)pg->uncompressed_size, &buf));
            keep_buf(c, buf);
            b = (bytes){buf, buf + pg->uncompressed_size};
        } else
            b = (bytes){data, data + size};
        TRY(levels_v1(f, &b, leaf->rep, c->rep + c->n, n, pg->rep_encoding));
        TRY(levels_v1(f, &b, leaf->def, c->def + c->n, n, pg->def_encoding));
    } else {
        if (pg->rep_bytes < 0 || pg->def_bytes < 0 || pg->rep_bytes > (int64_t)size ||
            pg->def_bytes > (int64_t)size - pg->rep_bytes || pg->rep_bytes + pg->def_bytes > pg->uncompressed_size)
            return bad(f, "a v2 page whose levels (%lld + %lld bytes) do not fit its %zu bytes", (long long)pg->rep_bytes,
                       (long long)pg->def_bytes, size);
        TRY(levels_v2(f, (bytes){data, data + pg->rep_bytes}, leaf->rep, c->rep + c->n, n));
        TRY(levels_v2(f, (bytes){data + pg->rep_bytes, data + pg->rep_bytes + pg->def_bytes}, leaf->def, c->def + c->n, n));
        size_t skip = (size_t)(pg->rep_bytes + pg->def_bytes);
        if (codec != CODEC_NONE && pg->compressed) {
            size_t out_n = (size_t)pg->uncompressed_size - skip;
            TRY(decompress(f, codec, data + skip, size - skip, out_n, &buf));
            keep_buf(c, buf);
            b = (bytes){buf, buf + out_n};
        } else
            b = (bytes){data + skip, data + size};
    }
    size_t present = 0;
    for (size_t i = 0; i < n; i++) present += c->def[c->n + i] == leaf->def;
    c->n += n;
    return values(f, c, leaf->s, pg->encoding, &b, present);
}

static pt_status dictionary_page(pq_file *f, column *c, const node *leaf, const pq_page *pg, int codec,
                                 const unsigned char *data, size_t size)
{
    if (c->has_dict) return bad(f, "a second dictionary page");
    if (pg->encoding != ENC_PLAIN && pg->encoding != ENC_PLAIN_DICT)
        return bad(f, "a dictionary page in encoding %d (only PLAIN is read)", pg->encoding);
    bytes b = {data, data + size};
    if (codec != CODEC_NONE) {
        unsigned char *buf;
        TRY(decompress(f, codec, data, size, (size_t)pg->uncompressed_size, &buf));
        keep_buf(c, buf);
        b = (bytes){buf, buf + pg->uncompressed_size};
    }
    if (pg->num_values < 0 || (uint64_t)pg->num_values > (uint64_t)(b.end - b.p) * 8)
        return bad(f, "a dictionary of %lld values in %td bytes", (long long)pg->num_values, b.end - b.p);
    c->ndict = (size_t)pg->num_values;
    c->dict = malloc(sizeof *c->dict * (c->ndict + 1));
    if (!c->dict) abort();
    c->has_dict = true;
    return plain(f, leaf->s->type, fixed_width(leaf->s), &b, c->dict, c->ndict);
}

static pt_status read_chunk(pq_file *f, const pq_chunk *ch, const node *leaf, column *c, size_t data_end)
{
    f->at = leaf;
    if (ch->encrypted) return bad(f, "the column is encrypted (ptrain reads unencrypted Parquet files)");
    if (ch->external || !ch->has_meta) return bad(f, "the column chunk is in another file or has no metadata");
    if (ch->type != leaf->s->type) return bad(f, "the chunk's type %d is not the schema's %d", ch->type, leaf->s->type);
    int64_t start = ch->data_page_offset;
    if (ch->dictionary_page_offset > 0 && ch->dictionary_page_offset < start) start = ch->dictionary_page_offset;
    if (start < 4 || ch->compressed_size < 0 || (uint64_t)start > data_end ||
        (uint64_t)ch->compressed_size > data_end - (uint64_t)start)
        return bad(f, "the chunk (at %lld, %lld bytes) is not inside the file's data", (long long)start,
                   (long long)ch->compressed_size);
    size_t at = (size_t)start, end = (size_t)(start + ch->compressed_size);
    while (at < end && c->n < (uint64_t)(ch->num_values > 0 ? ch->num_values : 0)) {
        f->byte = at;
        pq_page pg;
        size_t used;
        if (!pq_page_read(f->map + at, end - at, &pg, &used)) return bad(f, "the page header does not parse");
        at += used;
        f->byte = at;
        if (pg.compressed_size < 0 || (uint64_t)pg.compressed_size > end - at || pg.uncompressed_size < 0 ||
            pg.uncompressed_size > PQ_MAX_PAGE)
            return bad(f, "a page of %lld bytes (%lld uncompressed) does not fit the chunk", (long long)pg.compressed_size,
                       (long long)pg.uncompressed_size);
        const unsigned char *data = f->map + at;
        size_t size = (size_t)pg.compressed_size;
        if (ch->codec == CODEC_NONE && pg.type != PQ_DATA_PAGE_V2 && pg.uncompressed_size != pg.compressed_size)
            return bad(f, "an uncompressed page of %zu bytes says it has %lld", size, (long long)pg.uncompressed_size);
        if (pg.type == PQ_DICTIONARY_PAGE) TRY(dictionary_page(f, c, leaf, &pg, ch->codec, data, size));
        else if (pg.type == PQ_DATA_PAGE || pg.type == PQ_DATA_PAGE_V2) TRY(data_page(f, c, leaf, &pg, ch->codec, data, size));
        else if (pg.type != PQ_INDEX_PAGE) return bad(f, "a page of type %d", pg.type);
        at += size;
    }
    if (c->n != (uint64_t)ch->num_values)
        return bad(f, "the pages hold %zu values, the chunk says %lld", c->n, (long long)ch->num_values);
    return PT_OK;
}

static void column_free(column *c)
{
    for (int i = 0; i < c->nbufs; i++) free(c->bufs[i]);
    free(c->bufs);
    free(c->def);
    free(c->rep);
    free(c->val);
    free(c->dict);
    *c = (column){0};
}

/* ---- assembling rows ---- */

static column *first(pq_file *f, const node *n) { return &f->cols[n->leaf]; }

/* Step every leaf under n past one entry (a null or an empty list at n's level). */
static pt_status skip_entry(pq_file *f, const node *n)
{
    for (int l = n->leaf; l < n->leaf_end; l++) {
        column *c = &f->cols[l];
        if (c->pos >= c->n) return f->at = f->leaves[l], bad(f, "the levels end before the rows do");
        if (c->def[c->pos] >= n->def) return f->at = f->leaves[l], bad(f, "the columns' levels disagree at entry %zu", c->pos);
        c->pos++;
    }
    return PT_OK;
}

static pt_status read_field(pq_file *f, const node *n, json_t **out);
static pt_status read_content(pq_file *f, const node *n, json_t **out);

/* The elements of repeated node rep into an array; elem: the element (rep itself for a two-level
 * list or a bare repeated field, its child for a three-level LIST). */
static pt_status read_list(pq_file *f, const node *rep, const node *elem, json_t **out)
{
    column *c = first(f, rep);
    *out = json_array();
    if (c->pos >= c->n) return f->at = f->leaves[rep->leaf], bad(f, "the levels end before the rows do");
    if (c->def[c->pos] < rep->def) return skip_entry(f, rep);
    do {
        json_t *v = NULL;
        pt_status rc = elem == rep ? read_content(f, rep, &v) : read_field(f, elem, &v);
        if (v) json_array_append_new(*out, v);
        if (rc != PT_OK) return rc;
    } while (c->pos < c->n && c->rep[c->pos] == rep->rep);
    return PT_OK;
}

static pt_status read_content(pq_file *f, const node *n, json_t **out)
{
    if (n->n_child == 0) {
        column *c = first(f, n);
        f->at = n;
        if (c->pos >= c->n) return bad(f, "the levels end before the rows do");
        if (c->def[c->pos] != n->def) return bad(f, "the columns' levels disagree at entry %zu", c->pos);
        if (c->vpos >= c->nval) return bad(f, "fewer values than defined levels");
        if ((*out = pq_type_value(n->s, &c->val[c->vpos++])) == NULL)
            return bad(f, "value %zu cannot be read as its type says (a DECIMAL of more than 16 bytes, or an INT96 "
                       "timestamp past the day's end)", c->vpos - 1);
        c->pos++;
        return PT_OK;
    }
    if (is_list(n)) {
        const node *rep = &n->child[0];
        bool three = rep->n_child == 1 && strcmp(rep->s->name ? rep->s->name : "", "array") &&
                     !(rep->s->name && strlen(rep->s->name) > 6 && !strcmp(rep->s->name + strlen(rep->s->name) - 6, "_tuple"));
        return read_list(f, rep, three ? &rep->child[0] : rep, out);
    }
    *out = json_object();
    for (int i = 0; i < n->n_child; i++) {
        json_t *v = NULL;
        pt_status rc = read_field(f, &n->child[i], &v);
        if (v) json_object_set_new(*out, n->child[i].s->name ? n->child[i].s->name : "", v);
        if (rc != PT_OK) return rc;
    }
    return PT_OK;
}

static pt_status read_field(pq_file *f, const node *n, json_t **out)
{
    *out = NULL;
    if (n->s->repetition == PQ_REPEATED) return read_list(f, n, n, out);
    if (n->s->repetition == PQ_OPTIONAL) {
        column *c = first(f, n);
        if (c->pos >= c->n) return f->at = f->leaves[n->leaf], bad(f, "the levels end before the rows do");
        if (c->def[c->pos] < n->def) {
            *out = json_null();
            return skip_entry(f, n);
        }
    }
    return read_content(f, n, out);
}

static pt_status read_group(pq_file *f, const pq_row_group *g, size_t data_end, long *row, int file_no,
                            data_rows *rows, pt_dataset_stats *st, const rows_sink *sink)
{
    f->at = NULL;
    if (g->n_chunks != f->n_leaves)
        return bad(f, "row group %d has %d column chunks for %d columns", f->group, g->n_chunks, f->n_leaves);
    if (g->num_rows < 0) return bad(f, "row group %d has %lld rows", f->group, (long long)g->num_rows);
    for (int l = 0; l < f->n_leaves; l++) TRY(read_chunk(f, &g->chunks[l], f->leaves[l], &f->cols[l], data_end));
    for (int64_t r = 0; r < g->num_rows; r++) {
        for (int l = 0; l < f->n_leaves; l++) {
            const column *c = &f->cols[l];
            f->at = f->leaves[l];
            f->byte = 0;
            if (c->pos >= c->n) return bad(f, "the levels end at row %lld of %lld", (long long)r, (long long)g->num_rows);
            if (c->rep[c->pos] != 0) return bad(f, "row %lld does not start at repetition level 0", (long long)r);
        }
        json_t *obj = NULL;
        pt_status rc = read_content(f, &f->root, &obj);
        if (rc != PT_OK) {
            json_decref(obj);
            return rc;
        }
        data_row at = {NULL, f->file, file_no, 0, "row", (*row)++};
        st->read++;
        rows_push(rows, obj, &at);
        if (sink && rows->n >= PQ_BATCH_ROWS) TRY(sink->take(sink->arg, rows)); /* the group's columns stay */
    }
    for (int l = 0; l < f->n_leaves; l++)
        if (f->cols[l].pos != f->cols[l].n) {
            f->at = f->leaves[l];
            return bad(f, "%zu levels after the group's %lld rows", f->cols[l].n - f->cols[l].pos,
                       (long long)g->num_rows);
        }
    return PT_OK;
}

pt_status parquet_read(const unsigned char *map, size_t len, const char *path, int file_no, data_rows *rows,
                       pt_dataset_stats *st, const rows_sink *sink)
{
    pq_file f = {.map = map, .len = len, .file = path};
    /* generous for real files (a column of a million nulls takes a few bytes), small for hostile ones */
    f.max_entries = len < PQ_MAX_ENTRIES / 64 ? 64 * len + ((size_t)1 << 20) : PQ_MAX_ENTRIES;
    f.max_unpacked = len < (SIZE_MAX >> 6) - PQ_MAX_PAGE ? 32 * len + (size_t)PQ_MAX_PAGE : SIZE_MAX;
    if (len >= 8 && !memcmp(map + len - 4, "PARE", 4))
        return bad(&f, "the file is encrypted (its footer's magic is PARE); ptrain reads unencrypted Parquet files");
    if (len < 12 || memcmp(map, "PAR1", 4) || memcmp(map + len - 4, "PAR1", 4))
        return bad(&f, "not a Parquet file (it does not start and end with PAR1)");
    uint64_t meta_len = le(map + len - 8, 4);
    if (meta_len > len - 12) return bad(&f, "the footer's length (%llu bytes) is more than the file holds",
                                        (unsigned long long)meta_len);
    size_t meta_at = len - 8 - (size_t)meta_len;
    pq_meta m;
    size_t bad_at;
    if (pq_meta_read(map + meta_at, (size_t)meta_len, &m, &bad_at) != PT_OK) {
        pq_meta_free(&m);
        return bad(&f, "the footer (file metadata) does not parse at byte %zu", meta_at + bad_at);
    }
    pt_status rc = PT_OK;
    if (m.encrypted) rc = bad(&f, "the file is encrypted; ptrain reads unencrypted Parquet files");
    else if (m.n_schema < 1 || m.schema[0].num_children < 1) rc = bad(&f, "the schema has no columns");
    int next = 1;
    if (rc == PT_OK) {
        f.root.s = &m.schema[0];
        f.root.path = xstrdup("");
        rc = build(&f, &m, &next, &f.root, 0, 0, 0);
    }
    if (rc == PT_OK && next != m.n_schema)
        rc = bad(&f, "the schema has %d elements outside its tree", m.n_schema - next);
    if (rc == PT_OK) rc = check_tree(&f, &f.root, 0);
    long row = 0;
    for (int g = 0; rc == PT_OK && g < m.n_groups; g++) {
        f.group = g;
        f.unpacked = f.entries = 0;
        f.cols = calloc((size_t)f.n_leaves + 1, sizeof *f.cols);
        rc = f.cols ? read_group(&f, &m.groups[g], meta_at, &row, file_no, rows, st, sink)
                    : ERR(PT_ERR_NOMEM, "out of memory for a row group's columns");
        for (int l = 0; f.cols && l < f.n_leaves; l++) column_free(&f.cols[l]);
        free(f.cols);
        f.cols = NULL;
        if (rc == PT_OK && sink) rc = sink->take(sink->arg, rows); /* the group's rows, its columns freed */
    }
    tree_free(&f.root);
    free(f.leaves);
    pq_meta_free(&m);
    return rc;
}
