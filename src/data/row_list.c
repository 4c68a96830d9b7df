/* row_list.c — the rows read from a dataset's files, as the readers (reader.c for JSON, csv.c,
 * parquet.c) append them: each row with where it came from, a bad row counted with that place. */
#include <stdlib.h>

#include "data_internal.h"

void rows_push(data_rows *rows, json_t *obj, const data_row *at)
{
    if (rows->n == rows->cap) {
        size_t cap = rows->cap ? rows->cap * 2 : 256;
        data_row *grown = realloc(rows->v, cap * sizeof *grown);
        if (!grown) abort();
        rows->v = grown;
        rows->cap = cap;
    }
    rows->v[rows->n] = *at;
    rows->v[rows->n++].obj = obj;
}

void rows_free(data_rows *rows)
{
    for (size_t i = 0; i < rows->n; i++) json_decref(rows->v[i].obj);
    free(rows->v);
    *rows = (data_rows){0};
}

void row_bad(pt_dataset_stats *st, const data_row *r, const char *why)
{
    strbuf where = {0};
    row_where(r, &where);
    stats_bad(st, (uint64_t)r->file_no << 40 | (uint64_t)(r->line > 0 ? r->line : r->item), where.data, why);
    sb_free(&where);
}

void row_where(const data_row *r, strbuf *out)
{
    if (r->line > 0) sb_printf(out, "%s:%ld", shown_text(r->file).s, r->line);
    else sb_printf(out, "%s: %s[%ld]", shown_text(r->file).s, r->key ? shown_text(r->key).s : "item", r->item);
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

json_t *rows_string(const char *s, size_t n)
{
    json_t *v = json_stringn(s, n);
    if (v) return v;
    const unsigned char *u = (const unsigned char *)s;
    strbuf out = {0};
    for (size_t i = 0, k; i < n; i += k ? k : 1) {
        if ((k = utf8_seq(u, i, n)) == 0) sb_append(&out, FORMAT_BAD_UTF8, 3);
        else sb_append(&out, s + i, k);
    }
    v = json_stringn(out.data ? out.data : "", out.len);
    sb_free(&out);
    return v;
}
