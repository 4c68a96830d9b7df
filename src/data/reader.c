/* reader.c — rows from JSON files, parsed with jansson. A .jsonl file (or a .json file that holds
 * several objects one per line, as datasets' json loader accepts) is one object per line: a bad
 * line is a bad row with its line number. A .json file is an array of objects, read item by item
 * so each keeps its line number, or an object whose "data" or "train" member is that array, or a
 * single object. Invalid UTF-8 bytes are replaced by FORMAT_BAD_UTF8 before parsing (jansson
 * refuses them), so the row survives parsing and the formatter reports the field. Each file read
 * is recorded in the entry's stats (where it resolved to, its size, the CRC-32 of its bytes taken
 * as they are read, its rows), which the ranks of a job compare. A .csv or .tsv file (or another
 * that the entry's format says is CSV) goes to csv.c after the same reading; a .parquet file (or
 * format: parquet) is mapped and goes to parquet.c. Given a sink (dataset.c), a JSON Lines file or
 * JSON array hands its rows over 4,096 at a time, a CSV file or JSON object all at once. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <zlib.h>

#include "data_internal.h"

typedef struct {
    const char *buf, *path;
    int file_no;
    size_t len, off;
    long line;        /* line at off */
    size_t line_start; /* offset where that line starts */
    const rows_sink *sink; /* rows handed over JSON_BATCH at a time (NULL: all kept) */
} cursor;

#define JSON_BATCH 4096

/* With a sink, a full batch of rows goes to it. */
static pt_status flush(const cursor *c, data_rows *rows)
{
    return c->sink && rows->n >= JSON_BATCH ? c->sink->take(c->sink->arg, rows) : PT_OK;
}

/* ---- input ---- */


/* ptrain holds every row of every file in memory (as JSON values, several times the text): one
 * file past this is refused before it is read. */
#define DATA_MAX_FILE ((size_t)4 << 30)

static pt_status too_large(const char *path)
{
    return ERR(PT_ERR_USER, "%s is larger than 4 GiB, the most ptrain reads of one data file: split it into "
               "several .jsonl files (a directory of them, or data_files)", shown_text(path).s);
}

static pt_status slurp(const char *path, char **buf, size_t *len, uint32_t *crc)
{
    FILE *f;
    TRY(source_open(path, &f));
    struct stat info;
    if (fstat(fileno(f), &info) == 0 && (uint64_t)info.st_size > DATA_MAX_FILE) {
        fclose(f);
        return too_large(path);
    }
    strbuf sb = {0};
    char chunk[65536];
    size_t n;
    uLong c = crc32(0L, Z_NULL, 0);
    while (sb.len <= DATA_MAX_FILE && (n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        sb_append(&sb, chunk, n);
        c = crc32(c, (const Bytef *)chunk, (uInt)n);
    }
    *crc = (uint32_t)c;
    bool failed = ferror(f);
    fclose(f);
    if (failed || sb.len > DATA_MAX_FILE) {
        sb_free(&sb);
        return failed ? ERR(PT_ERR_USER, "cannot read %s: read error", shown_text(path).s) : too_large(path);
    }
    *buf = sb.data ? sb.data : xstrdup("");
    *len = sb.len;
    return PT_OK;
}

/* Length of the valid UTF-8 sequence at s[i], or 0. */
static size_t utf8_seq(const unsigned char *s, size_t i, size_t n)
{
    unsigned c = s[i];
    if (c < 0x80) return 1;
    size_t k = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (!k || i + k > n) return 0;
    for (size_t j = 1; j < k; j++)
        if ((s[i + j] & 0xc0) != 0x80) return 0;
    if (c == 0xe0 && s[i + 1] < 0xa0) return 0; /* overlong */
    if (c == 0xed && s[i + 1] > 0x9f) return 0; /* surrogate */
    if (c == 0xf0 && s[i + 1] < 0x90) return 0; /* overlong */
    if (c == 0xf4 && s[i + 1] > 0x8f) return 0; /* beyond U+10FFFF */
    return k;
}

/* buf with each invalid UTF-8 byte replaced by FORMAT_BAD_UTF8 (NUL bytes are left to jansson). */
static void utf8_sanitize(char **buf, size_t *len)
{
    const unsigned char *s = (const unsigned char *)*buf;
    size_t i = 0, k;
    while (i < *len && (k = utf8_seq(s, i, *len)) > 0) i += k;
    if (i == *len) return;
    strbuf out = {0};
    sb_append(&out, *buf, i);
    while (i < *len) {
        if ((k = utf8_seq(s, i, *len)) == 0) sb_append(&out, FORMAT_BAD_UTF8, 3);
        else sb_append(&out, *buf + i, k);
        i += k ? k : 1;
    }
    free(*buf);
    *buf = out.data;
    *len = out.len;
}

/* ---- rows ---- */

const char *reader_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Take v as a row if it is an object, else count it bad (v is consumed either way). */
static void take(json_t *v, data_rows *rows, pt_dataset_stats *st, const data_row *at)
{
    st->read++;
    if (json_is_object(v)) {
        rows_push(rows, v, at);
        return;
    }
    strbuf why = {0};
    sb_printf(&why, "expected a JSON object, found %s", reader_kind(v));
    row_bad(st, at, why.data);
    sb_free(&why);
    json_decref(v);
}

/* ---- JSON Lines ---- */

static bool blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strchr(" \t\r\n", p[i])) return false;
    return true;
}

static void read_line(const char *p, size_t n, const data_row *at, data_rows *rows, pt_dataset_stats *st)
{
    json_error_t e;
    json_t *v = json_loadb(p, n, 0, &e);
    if (v) {
        take(v, rows, st, at);
        return;
    }
    st->read++;
    strbuf why = {0};
    sb_printf(&why, "invalid JSON: %s (column %d)", e.text, e.column);
    row_bad(st, at, why.data);
    sb_free(&why);
}

/* From the line the cursor is on to the end. */
static pt_status read_jsonl(const cursor *c, data_rows *rows, pt_dataset_stats *st)
{
    data_row at = {NULL, c->path, c->file_no, c->line, NULL, 0};
    for (size_t off = c->line_start; off < c->len; at.line++) {
        const char *nl = memchr(c->buf + off, '\n', c->len - off);
        size_t end = nl ? (size_t)(nl - c->buf) : c->len;
        if (!blank(c->buf + off, end - off)) read_line(c->buf + off, end - off, &at, rows, st);
        off = end + 1;
        TRY(flush(c, rows));
    }
    return PT_OK;
}

/* ---- a JSON array, item by item ---- */

static void skip_space(cursor *c)
{
    while (c->off < c->len && strchr(" \t\r\n", c->buf[c->off])) {
        if (c->buf[c->off] == '\n') {
            c->line++;
            c->line_start = c->off + 1;
        }
        c->off++;
    }
}

static void advance(cursor *c, size_t to)
{
    for (; c->off < to; c->off++)
        if (c->buf[c->off] == '\n') {
            c->line++;
            c->line_start = c->off + 1;
        }
}

static pt_status item_error(const cursor *c, const json_error_t *e)
{
    long line = c->line + e->line - 1;
    long col = e->line == 1 ? (long)(c->off - c->line_start) + e->column : e->column;
    return ERR(PT_ERR_USER, "%s:%ld:%ld: invalid JSON: %s", shown_text(c->path).s, line, col, e->text);
}

static pt_status read_items(cursor *c, data_rows *rows, pt_dataset_stats *st)
{
    c->off++; /* '[' */
    for (long item = 0;; item++) {
        skip_space(c);
        if (c->off < c->len && c->buf[c->off] == ']' && item == 0) break;
        json_error_t e;
        json_t *v = json_loadb(c->buf + c->off, c->len - c->off, JSON_DISABLE_EOF_CHECK | JSON_DECODE_ANY, &e);
        if (!v) return item_error(c, &e);
        data_row at = {NULL, c->path, c->file_no, c->line, NULL, item};
        take(v, rows, st, &at);
        TRY(flush(c, rows));
        advance(c, c->off + (size_t)e.position);
        skip_space(c);
        if (c->off < c->len && c->buf[c->off] == ',') c->off++;
        else if (c->off < c->len && c->buf[c->off] == ']') break;
        else
            return ERR(PT_ERR_USER, "%s:%ld: invalid JSON: expected ',' or ']' after item %ld", shown_text(c->path).s,
                       c->line, item);
    }
    c->off++;
    skip_space(c);
    if (c->off < c->len)
        return ERR(PT_ERR_USER, "%s:%ld: invalid JSON: text after the closing ']'", shown_text(c->path).s, c->line);
    return PT_OK;
}

/* ---- a JSON object: wrapper, single row, or JSON Lines ---- */

static void take_wrapped(const cursor *c, json_t *obj, const char *key, data_rows *rows, pt_dataset_stats *st)
{
    json_t *arr = json_object_get(obj, key);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        data_row at = {NULL, c->path, c->file_no, 0, key, (long)i};
        take(json_incref(json_array_get(arr, i)), rows, st, &at);
    }
    json_decref(obj);
}

static pt_status read_object(cursor *c, data_rows *rows, pt_dataset_stats *st)
{
    json_error_t e;
    json_t *v = json_loadb(c->buf, c->len, 0, &e);
    if (!v && strncmp(e.text, "end of file expected", 20) == 0) return read_jsonl(c, rows, st);
    if (!v) return ERR(PT_ERR_USER, "%s:%d:%d: invalid JSON: %s", shown_text(c->path).s, e.line, e.column, e.text);
    static const char *const keys[] = {"data", "train"};
    for (int k = 0; k < 2; k++)
        if (json_is_array(json_object_get(v, keys[k]))) {
            take_wrapped(c, v, keys[k], rows, st);
            return PT_OK;
        }
    data_row at = {NULL, c->path, c->file_no, c->line, NULL, 0};
    take(v, rows, st, &at);
    return PT_OK;
}

static pt_status read_json(cursor *c, data_rows *rows, pt_dataset_stats *st)
{
    skip_space(c);
    if (c->off == c->len) return PT_OK;
    if (c->buf[c->off] == '[') return read_items(c, rows, st);
    if (c->buf[c->off] == '{') return read_object(c, rows, st);
    return ERR(PT_ERR_USER, "%s:%ld: invalid JSON: expected an array or an object, found '%c'", shown_text(c->path).s,
               c->line, c->buf[c->off]);
}

/* ---- entry points ---- */

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Record the file in st->files: where it resolved to, its size and CRC-32; rows come later. */
static pt_data_file *record_file(pt_dataset_stats *st, const char *path, size_t len, uint32_t crc)
{
    pt_data_file *grown = realloc(st->files, sizeof *grown * (size_t)(st->n_files + 1));
    if (!grown) abort();
    st->files = grown;
    char real[PATH_MAX];
    pt_data_file *rec = &st->files[st->n_files++];
    *rec = (pt_data_file){xstrdup(realpath(path, real) ? real : path), (uint64_t)len, crc, 0};
    return rec;
}

/* A mapped Parquet file's pages given back before each batch goes to the caller's sink: the rows
 * are copies, so the next row group is read from the file again, and memory holds one group. */
typedef struct {
    const rows_sink *next;
    void *map;
    size_t len;
} release_sink;

static pt_status release_take(void *arg, data_rows *rows)
{
    release_sink *r = arg;
    madvise(r->map, r->len, MADV_DONTNEED);
    return r->next->take(r->next->arg, rows);
}

/* A Parquet file, mapped rather than read: parquet.c decodes one row group at a time, so memory
 * holds the rows made and one group's columns, never the whole file (with a sink, one group's rows
 * too: the pages read are given back after each group, and after each stretch of the CRC). */
static pt_status read_parquet(const char *path, int file_no, data_rows *rows, pt_dataset_stats *st,
                              const rows_sink *sink)
{
    FILE *f;
    TRY(source_open(path, &f));
    struct stat info;
    if (fstat(fileno(f), &info) != 0) {
        fclose(f);
        return ERR(PT_ERR_USER, "cannot read %s: %s", shown_text(path).s, strerror(errno));
    }
    size_t len = (size_t)info.st_size;
    void *map = len ? mmap(NULL, len, PROT_READ, MAP_PRIVATE, fileno(f), 0) : NULL;
    fclose(f);
    if (len && map == MAP_FAILED) return ERR(PT_ERR_USER, "cannot map %s: %s", shown_text(path).s, strerror(errno));
    uLong crc = crc32(0L, Z_NULL, 0);
    const size_t stretch = (size_t)1 << 26; /* crc32's length is a uInt; 64 MiB resident at a time */
    for (size_t at = 0; at < len; at += stretch) {
        size_t n = len - at < stretch ? len - at : stretch;
        crc = crc32(crc, (const Bytef *)map + at, (uInt)n);
        if (sink) madvise((char *)map + at, n, MADV_DONTNEED);
    }
    record_file(st, path, len, (uint32_t)crc);
    long before = st->read;
    release_sink rel = {sink, map, len};
    rows_sink wrapped = {release_take, &rel};
    pt_status rc = parquet_read(map ? map : (const void *)"", len, path, file_no, rows, st,
                                sink && map ? &wrapped : sink);
    st->files[st->n_files - 1].rows = st->read - before;
    if (map) munmap(map, len);
    return rc;
}

pt_status reader_stream(const char *path, int file_no, pt_dataset_format format, data_rows *rows,
                        pt_dataset_stats *st, const rows_sink *sink)
{
    bool named = ends_with(path, ".json") || ends_with(path, ".jsonl") || ends_with(path, ".csv") ||
                 ends_with(path, ".tsv");
    if (ends_with(path, ".parquet") || (!named && format == DATASET_PARQUET))
        return read_parquet(path, file_no, rows, st, sink);
    char *buf;
    size_t len;
    uint32_t crc;
    TRY(slurp(path, &buf, &len, &crc));
    pt_data_file *rec = record_file(st, path, len, crc);
    long before = st->read;
    utf8_sanitize(&buf, &len);
    size_t bom = len >= 3 && memcmp(buf, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
    cursor c = {buf, path, file_no, len, bom, 1, bom, sink};
    bool json = ends_with(path, ".json") || ends_with(path, ".jsonl");
    bool csv = ends_with(path, ".csv") || ends_with(path, ".tsv") || (!json && format == DATASET_CSV);
    bool jsonl = ends_with(path, ".jsonl") || (!ends_with(path, ".json") && format == DATASET_JSONL);
    pt_status rc = PT_OK;
    if (csv) rc = csv_read(buf + bom, len - bom, ends_with(path, ".tsv") ? '\t' : ',', path, file_no, 1, rows, st);
    else if (jsonl) rc = read_jsonl(&c, rows, st);
    else rc = read_json(&c, rows, st);
    rec->rows = st->read - before;
    free(buf);
    if (rc == PT_OK && sink) rc = sink->take(sink->arg, rows);
    return rc;
}

pt_status reader_read(const char *path, int file_no, pt_dataset_format format, data_rows *rows, pt_dataset_stats *st)
{
    return reader_stream(path, file_no, format, rows, st, NULL);
}
