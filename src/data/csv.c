/* csv.c — rows from CSV and TSV text, as datasets' csv loader (pandas.read_csv) gives them: RFC
 * 4180 records (a field in double quotes may hold the separator, line breaks and "" for a quote;
 * text after the closing quote joins the field, as pandas' tokenizer does), records ending at
 * \n, \r\n or \r, blank and whitespace-only lines skipped, the first record the header (an empty
 * name becomes "Unnamed: i", a repeated one "name.1"). Each column is typed over the whole file as
 * pandas infers it: the empty field and pandas' NA words are null; a column whose other values are
 * all integers is integers (numbers when it also holds a null, as pandas' float64 column), all
 * numbers is numbers, all True/False words is booleans, else text. A record with fewer fields
 * than the header has nulls for the rest; one with more is a bad row. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

typedef struct {
    char *s;  /* the field's text, unquoted (owned) */
    size_t n;
} field;

typedef struct {
    field *f;
    int n, cap;
    long line; /* where the record starts */
} record;

typedef enum { COL_NULL, COL_INT, COL_REAL, COL_BOOL, COL_TEXT } col_type;

static void record_add(record *r, strbuf *text)
{
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 8;
        field *grown = realloc(r->f, sizeof *grown * (size_t)cap);
        if (!grown) abort();
        r->f = grown;
        r->cap = cap;
    }
    r->f[r->n].n = text->len;
    r->f[r->n++].s = text->data ? text->data : xstrdup("");
    *text = (strbuf){0};
}

static void rec_free(record *r)
{
    for (int i = 0; i < r->n; i++) free(r->f[i].s);
    free(r->f);
    *r = (record){0};
}

/* ---- the tokenizer ---- */

typedef struct {
    const char *buf;
    size_t len, off;
    char sep;
    long line;
} scanner;

static bool only_space(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t') return false;
    return true;
}

/* Skip blank and whitespace-only lines (a tab is data in a TSV file's line only when it separates). */
static void skip_blank(scanner *s)
{
    while (s->off < s->len) {
        size_t end = s->off;
        while (end < s->len && s->buf[end] != '\n' && s->buf[end] != '\r') end++;
        if (!only_space(s->buf + s->off, end - s->off) || (s->sep == '\t' && memchr(s->buf + s->off, '\t', end - s->off)))
            return;
        if (end < s->len && s->buf[end] == '\r' && end + 1 < s->len && s->buf[end + 1] == '\n') end++;
        s->off = end + (end < s->len);
        s->line++;
    }
}

/* The next record into r; false at the end of the text. */
static bool next_record(scanner *s, record *r)
{
    skip_blank(s);
    if (s->off >= s->len) return false;
    r->line = s->line;
    strbuf text = {0};
    bool quoted = false, at_start = true;
    while (s->off < s->len) {
        char c = s->buf[s->off++];
        if (quoted) {
            if (c == '"') {
                if (s->off < s->len && s->buf[s->off] == '"') {
                    sb_append(&text, "\"", 1);
                    s->off++;
                } else
                    quoted = false;
                continue;
            }
            if (c == '\n' || (c == '\r' && !(s->off < s->len && s->buf[s->off] == '\n'))) s->line++;
            sb_append(&text, &c, 1);
            continue;
        }
        if (c == '"' && at_start) {
            quoted = true;
            at_start = false;
            continue;
        }
        if (c == s->sep) {
            record_add(r, &text);
            at_start = true;
            continue;
        }
        if (c == '\n' || c == '\r') {
            if (c == '\r' && s->off < s->len && s->buf[s->off] == '\n') s->off++;
            s->line++;
            break;
        }
        sb_append(&text, &c, 1);
        at_start = false;
    }
    record_add(r, &text);
    return true;
}

/* ---- typing ---- */

static bool is_na(const field *f)
{
    static const char *const words[] = {"",     "#N/A", "#N/A N/A", "#NA",  "-1.#IND", "-1.#QNAN", "-NaN", "-nan",
                                        "1.#IND", "1.#QNAN", "<NA>", "N/A",  "NA",      "NULL",     "NaN",  "None",
                                        "n/a",  "nan",  "null"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strlen(words[i]) == f->n && !memcmp(words[i], f->s, f->n)) return true;
    return false;
}

static bool is_int(const field *f, long long *v)
{
    if (f->n == 0 || strlen(f->s) != f->n) return false;
    const char *p = f->s + (f->s[0] == '+' || f->s[0] == '-');
    if (!*p) return false;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9') return false;
    errno = 0;
    long long x = strtoll(f->s, NULL, 10);
    if (errno) return false;
    if (v) *v = x;
    return true;
}

static bool is_real(const field *f, double *v)
{
    if (f->n == 0 || strlen(f->s) != f->n || strspn(f->s, "0123456789+-.eE") != f->n) return false;
    char *end;
    errno = 0;
    double x = strtod(f->s, &end);
    if (*end || errno == ERANGE) return false;
    if (v) *v = x;
    return true;
}

static int is_bool(const field *f)
{
    static const char *const t[] = {"True", "TRUE", "true"}, *const fa[] = {"False", "FALSE", "false"};
    for (int i = 0; i < 3; i++) {
        if (strlen(t[i]) == f->n && !memcmp(t[i], f->s, f->n)) return 1;
        if (strlen(fa[i]) == f->n && !memcmp(fa[i], f->s, f->n)) return 0;
    }
    return -1;
}

typedef struct {
    bool any, ints, reals, bools, nulls;
} col_seen;

static void see(col_seen *c, const field *f)
{
    if (!f || is_na(f)) {
        c->nulls = true;
        return;
    }
    if (!c->any) *c = (col_seen){true, true, true, true, c->nulls};
    c->ints = c->ints && is_int(f, NULL);
    c->reals = c->reals && is_real(f, NULL);
    c->bools = c->bools && is_bool(f) >= 0;
}

static col_type type_of(const col_seen *c)
{
    if (!c->any) return COL_NULL;
    if (c->ints) return c->nulls ? COL_REAL : COL_INT;
    if (c->reals) return COL_REAL;
    if (c->bools) return COL_BOOL;
    return COL_TEXT;
}

static json_t *value(col_type t, const field *f)
{
    if (!f || t == COL_NULL || is_na(f)) return json_null();
    long long i;
    double d;
    switch (t) {
    case COL_INT: is_int(f, &i); return json_integer(i);
    case COL_REAL: is_real(f, &d); return json_real(d);
    case COL_BOOL: return json_boolean(is_bool(f) == 1);
    default: return json_stringn(f->s, f->n);
    }
}

/* ---- the header ---- */

/* The header's names as pandas makes them: "Unnamed: i" for an empty one, "name.1", "name.2" ...
 * for repeats (counted per name, so a header of many equal names stays linear). */
static char **column_names(const record *h)
{
    char **names = calloc((size_t)h->n + 1, sizeof *names);
    if (!names) abort();
    json_t *counts = json_object();
    for (int i = 0; i < h->n; i++) {
        strbuf sb = {0};
        if (h->f[i].n == 0) sb_printf(&sb, "Unnamed: %d", i);
        else sb_append(&sb, h->f[i].s, h->f[i].n);
        char *name = xstrdup(sb_text(&sb));
        sb_free(&sb);
        for (json_int_t k; (k = json_integer_value(json_object_get(counts, name))) > 0;) {
            json_object_set_new(counts, name, json_integer(k + 1));
            sb_printf(&sb, "%s.%lld", name, (long long)k);
            free(name);
            name = xstrdup(sb_text(&sb));
            sb_free(&sb);
        }
        json_object_set_new(counts, name, json_integer(1));
        names[i] = name;
    }
    json_decref(counts);
    return names;
}

pt_status csv_read(const char *buf, size_t len, char sep, const char *path, int file_no, long first_line,
                   data_rows *rows, pt_dataset_stats *st)
{
    scanner s = {buf, len, 0, sep, first_line};
    record head = {0};
    if (!next_record(&s, &head)) return PT_OK;
    int ncol = head.n;
    char **names = column_names(&head);
    rec_free(&head);
    record *recs = NULL;
    size_t n = 0, cap = 0;
    for (record r = {0}; next_record(&s, &r); r = (record){0}) {
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            record *grown = realloc(recs, sizeof *grown * cap);
            if (!grown) abort();
            recs = grown;
        }
        recs[n++] = r;
    }
    if (ncol > 0 && n > (8 * len + 4096) / (size_t)ncol) {
        for (size_t i = 0; i < n; i++) rec_free(&recs[i]);
        free(recs);
        for (int c = 0; c < ncol; c++) free(names[c]);
        free(names);
        return ERR(PT_ERR_USER, "%s: %d columns and %zu records, most of them short: more missing fields than a "
                   "CSV file of %zu bytes can mean; check the separator and the header (line %ld)", shown_text(path).s,
                   ncol, n, len, first_line);
    }
    col_seen *seen = calloc((size_t)ncol + 1, sizeof *seen);
    if (!seen) abort();
    for (size_t i = 0; i < n; i++)
        if (recs[i].n <= ncol)
            for (int c = 0; c < ncol; c++) see(&seen[c], c < recs[i].n ? &recs[i].f[c] : NULL);
    for (size_t i = 0; i < n; i++) {
        data_row at = {NULL, path, file_no, recs[i].line, NULL, 0};
        st->read++;
        if (recs[i].n > ncol) {
            strbuf why = {0};
            sb_printf(&why, "%d fields where the header has %d", recs[i].n, ncol);
            row_bad(st, &at, why.data);
            sb_free(&why);
        } else {
            json_t *obj = json_object();
            for (int c = 0; c < ncol; c++)
                json_object_set_new(obj, names[c], value(type_of(&seen[c]), c < recs[i].n ? &recs[i].f[c] : NULL));
            rows_push(rows, obj, &at);
        }
        rec_free(&recs[i]);
    }
    free(recs);
    free(seen);
    for (int c = 0; c < ncol; c++) free(names[c]);
    free(names);
    return PT_OK;
}
