/* parquet_meta.c — a Parquet file's footer and page headers, read from the Thrift compact protocol
 * (parquet.thrift's FileMetaData, SchemaElement, RowGroup, ColumnChunk, ColumnMetaData and
 * PageHeader; fields ptrain has no use for are skipped by type). Every read is bounded by the
 * bytes given, nesting by PQ_MAX_NEST and list sizes by what the bytes can hold, so a hostile
 * footer is an error, never a crash or an allocation beyond the file's size. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

#define PQ_MAX_NEST 32

enum { T_STOP, T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY, T_LIST, T_SET, T_MAP, T_STRUCT };

typedef struct {
    const unsigned char *p, *start, *end;
    int depth;
    const char *what; /* the structure being read, for the error */
    bool bad;
} thrift;

static bool fail(thrift *t)
{
    t->bad = true;
    t->p = t->end;
    return false;
}

static uint64_t varint(thrift *t)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (t->p >= t->end) return fail(t), 0;
        unsigned char b = *t->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) return v;
    }
    return fail(t), 0;
}

static int64_t zigzag(thrift *t)
{
    uint64_t v = varint(t);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A binary field: its bytes stay in the buffer. */
static bool binary(thrift *t, const unsigned char **p, size_t *n)
{
    uint64_t len = varint(t);
    if (t->bad || len > (uint64_t)(t->end - t->p)) return fail(t);
    *p = t->p;
    *n = (size_t)len;
    t->p += len;
    return true;
}

static char *string(thrift *t)
{
    const unsigned char *p;
    size_t n;
    if (!binary(t, &p, &n)) return NULL;
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

/* A list header: element type and count (each element takes at least one byte, except bools). */
static bool list_head(thrift *t, int *type, int64_t *n)
{
    if (t->p >= t->end) return fail(t);
    unsigned char b = *t->p++;
    *type = b & 0x0f;
    *n = b >> 4;
    if (*n == 15) *n = (int64_t)varint(t);
    if (t->bad || *n < 0 || *n > t->end - t->p) return fail(t);
    return true;
}

static void skip(thrift *t, int type);

static void skip_struct(thrift *t)
{
    if (++t->depth > PQ_MAX_NEST) {
        fail(t);
        return;
    }
    int16_t id = 0;
    while (!t->bad) {
        if (t->p >= t->end) {
            fail(t);
            break;
        }
        unsigned char b = *t->p++;
        if (b == T_STOP) break;
        int delta = b >> 4;
        id = delta ? (int16_t)(id + delta) : (int16_t)zigzag(t);
        skip(t, b & 0x0f);
    }
    t->depth--;
}

static void skip(thrift *t, int type)
{
    const unsigned char *p;
    size_t n;
    int et;
    int64_t count;
    switch (type) {
    case T_TRUE:
    case T_FALSE: return;
    case T_BYTE:
        if (t->p >= t->end) fail(t);
        else t->p++;
        return;
    case T_I16:
    case T_I32:
    case T_I64: varint(t); return;
    case T_DOUBLE:
        if (t->end - t->p < 8) fail(t);
        else t->p += 8;
        return;
    case T_BINARY: binary(t, &p, &n); return;
    case T_LIST:
    case T_SET:
        if (!list_head(t, &et, &count)) return;
        if (++t->depth > PQ_MAX_NEST) {
            fail(t);
            return;
        }
        for (int64_t i = 0; i < count && !t->bad; i++) skip(t, et == T_TRUE || et == T_FALSE ? T_BYTE : et);
        t->depth--;
        return;
    case T_MAP: {
        count = (int64_t)varint(t);
        if (t->bad || count < 0 || count > t->end - t->p) {
            fail(t);
            return;
        }
        if (count == 0) return;
        if (t->p >= t->end) {
            fail(t);
            return;
        }
        unsigned char kv = *t->p++;
        if (++t->depth > PQ_MAX_NEST) {
            fail(t);
            return;
        }
        for (int64_t i = 0; i < count && !t->bad; i++) {
            skip(t, kv >> 4 == T_TRUE || kv >> 4 == T_FALSE ? T_BYTE : kv >> 4);
            skip(t, (kv & 15) == T_TRUE || (kv & 15) == T_FALSE ? T_BYTE : kv & 15);
        }
        t->depth--;
        return;
    }
    case T_STRUCT: skip_struct(t); return;
    default: fail(t);
    }
}

/* Iterate a struct's fields: *id and *type of the next, false at its end. */
static bool field(thrift *t, int16_t *id, int *type)
{
    if (t->bad || t->p >= t->end) return fail(t);
    unsigned char b = *t->p++;
    if (b == T_STOP) return false;
    int delta = b >> 4;
    *id = delta ? (int16_t)(*id + delta) : (int16_t)zigzag(t);
    *type = b & 0x0f;
    return !t->bad;
}

static int64_t int_field(thrift *t, int type)
{
    if (type == T_I16 || type == T_I32 || type == T_I64) return zigzag(t);
    if (type == T_BYTE) {
        if (t->p >= t->end) return fail(t), 0;
        return (int8_t)*t->p++;
    }
    skip(t, type);
    return 0;
}

static bool enter(thrift *t)
{
    if (++t->depth > PQ_MAX_NEST) return fail(t);
    return true;
}

/* ---- logical types: which union member is set, and the parameters ptrain uses ---- */

/* TimeUnit: MILLIS 1, MICROS 2, NANOS 3 (which member is set). */
static int time_unit(thrift *t)
{
    int16_t id = 0;
    int type, which = 0;
    if (!enter(t)) return 0;
    while (field(t, &id, &type)) {
        which = id;
        skip(t, type);
    }
    t->depth--;
    return which;
}

/* The members of TIME/TIMESTAMP (isAdjustedToUTC 1, unit 2) and DECIMAL (scale 1, precision 2). */
static void logical_params(thrift *t, int which, pq_schema *s)
{
    int16_t id = 0;
    int type;
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        if ((which == 7 || which == 8) && id == 1 && (type == T_TRUE || type == T_FALSE)) s->utc = type == T_TRUE;
        else if ((which == 7 || which == 8) && id == 2 && type == T_STRUCT) s->unit = time_unit(t);
        else if (which == 5 && id == 1) s->scale = (int)int_field(t, type);
        else if (which == 5 && id == 2) s->precision = (int)int_field(t, type);
        else skip(t, type);
    }
    t->depth--;
}

static int logical_type(thrift *t, pq_schema *s)
{
    int16_t id = 0;
    int type, which = 0;
    if (!enter(t)) return 0;
    while (field(t, &id, &type)) {
        which = id;
        if (type == T_STRUCT && (id == 5 || id == 7 || id == 8)) logical_params(t, id, s);
        else skip(t, type);
    }
    t->depth--;
    return which;
}

/* ---- the schema ---- */

static void schema_element(thrift *t, pq_schema *s)
{
    int16_t id = 0;
    int type;
    *s = (pq_schema){.type = -1, .repetition = PQ_REQUIRED, .converted = -1};
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        switch (id) {
        case 1: s->type = (int)int_field(t, type); break;
        case 2: s->type_length = (int)int_field(t, type); break;
        case 3: s->repetition = (int)int_field(t, type); break;
        case 4:
            if (type == T_BINARY) {
                free(s->name); /* a field given twice: the last counts */
                s->name = string(t);
            } else
                skip(t, type);
            break;
        case 5: s->num_children = (int)int_field(t, type); break;
        case 6: s->converted = (int)int_field(t, type); break;
        case 7: s->scale = (int)int_field(t, type); break;
        case 8: s->precision = (int)int_field(t, type); break;
        case 10:
            if (type == T_STRUCT) s->logical = logical_type(t, s);
            else skip(t, type);
            break;
        default: skip(t, type);
        }
    }
    t->depth--;
}

/* ---- column chunks and row groups ---- */

static void column_meta(thrift *t, pq_chunk *c)
{
    int16_t id = 0;
    int type;
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        switch (id) {
        case 1: c->type = (int)int_field(t, type); break;
        case 4: c->codec = (int)int_field(t, type); break;
        case 5: c->num_values = int_field(t, type); break;
        case 7: c->compressed_size = int_field(t, type); break;
        case 9: c->data_page_offset = int_field(t, type); break;
        case 11: c->dictionary_page_offset = int_field(t, type); break;
        default: skip(t, type);
        }
    }
    t->depth--;
}

static void column_chunk(thrift *t, pq_chunk *c)
{
    int16_t id = 0;
    int type;
    *c = (pq_chunk){.type = -1, .dictionary_page_offset = -1};
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        if (id == 1 && type == T_BINARY) {
            const unsigned char *p;
            size_t n;
            binary(t, &p, &n);
            c->external = true;
        } else if (id == 3 && type == T_STRUCT) {
            column_meta(t, c);
            c->has_meta = true;
        } else if (id == 8 || id == 9) {
            c->encrypted = true;
            skip(t, type);
        } else
            skip(t, type);
    }
    t->depth--;
}

static void row_group(thrift *t, pq_row_group *g)
{
    int16_t id = 0;
    int type;
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        if (id == 1 && type == T_LIST) {
            int et;
            int64_t n;
            if (!list_head(t, &et, &n) || et != T_STRUCT || g->chunks) {
                fail(t);
                break;
            }
            g->chunks = calloc((size_t)n + 1, sizeof *g->chunks);
            if (!g->chunks) abort();
            g->n_chunks = (int)n;
            for (int64_t i = 0; i < n && !t->bad; i++) column_chunk(t, &g->chunks[i]);
        } else if (id == 3)
            g->num_rows = int_field(t, type);
        else
            skip(t, type);
    }
    t->depth--;
}

pt_status pq_meta_read(const unsigned char *p, size_t n, pq_meta *m, size_t *bad_at)
{
    *m = (pq_meta){0};
    thrift t = {p, p, p + n, 0, "footer", false};
    int16_t id = 0;
    int type;
    while (field(&t, &id, &type)) {
        int et;
        int64_t count;
        if (id == 2 && type == T_LIST) {
            if (!list_head(&t, &et, &count) || et != T_STRUCT || m->schema) {
                fail(&t);
                break;
            }
            m->schema = calloc((size_t)count + 1, sizeof *m->schema);
            if (!m->schema) abort();
            m->n_schema = (int)count;
            for (int64_t i = 0; i < count && !t.bad; i++) schema_element(&t, &m->schema[i]);
        } else if (id == 3)
            m->num_rows = int_field(&t, type);
        else if (id == 4 && type == T_LIST) {
            if (!list_head(&t, &et, &count) || et != T_STRUCT || m->groups) {
                fail(&t);
                break;
            }
            m->groups = calloc((size_t)count + 1, sizeof *m->groups);
            if (!m->groups) abort();
            m->n_groups = (int)count;
            for (int64_t i = 0; i < count && !t.bad; i++) row_group(&t, &m->groups[i]);
        } else if (id == 8)
            m->encrypted = true, skip(&t, type);
        else
            skip(&t, type);
    }
    *bad_at = (size_t)(t.p - t.start);
    return t.bad ? PT_ERR_USER : PT_OK;
}

void pq_meta_free(pq_meta *m)
{
    for (int i = 0; i < m->n_schema; i++) free(m->schema[i].name);
    free(m->schema);
    for (int i = 0; i < m->n_groups; i++) free(m->groups[i].chunks);
    free(m->groups);
    *m = (pq_meta){0};
}

/* ---- page headers ---- */

static void data_page_v1(thrift *t, pq_page *pg)
{
    int16_t id = 0;
    int type;
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        if (id == 1) pg->num_values = int_field(t, type);
        else if (id == 2) pg->encoding = (int)int_field(t, type);
        else if (id == 3) pg->def_encoding = (int)int_field(t, type);
        else if (id == 4) pg->rep_encoding = (int)int_field(t, type);
        else skip(t, type);
    }
    t->depth--;
}

static void data_page_v2(thrift *t, pq_page *pg)
{
    int16_t id = 0;
    int type;
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        if (id == 1) pg->num_values = int_field(t, type);
        else if (id == 4) pg->encoding = (int)int_field(t, type);
        else if (id == 5) pg->def_bytes = int_field(t, type);
        else if (id == 6) pg->rep_bytes = int_field(t, type);
        else if (id == 7) pg->compressed = type == T_TRUE;
        else skip(t, type);
    }
    t->depth--;
}

static void dictionary_page(thrift *t, pq_page *pg)
{
    int16_t id = 0;
    int type;
    if (!enter(t)) return;
    while (field(t, &id, &type)) {
        if (id == 1) pg->num_values = int_field(t, type);
        else if (id == 2) pg->encoding = (int)int_field(t, type);
        else skip(t, type);
    }
    t->depth--;
}

bool pq_page_read(const unsigned char *p, size_t n, pq_page *pg, size_t *used)
{
    *pg = (pq_page){.type = -1, .compressed = true, .num_values = -1};
    thrift t = {p, p, p + n, 0, "page header", false};
    int16_t id = 0;
    int type;
    while (field(&t, &id, &type)) {
        switch (id) {
        case 1: pg->type = (int)int_field(&t, type); break;
        case 2: pg->uncompressed_size = int_field(&t, type); break;
        case 3: pg->compressed_size = int_field(&t, type); break;
        case 5:
            if (type == T_STRUCT) data_page_v1(&t, pg);
            else skip(&t, type);
            break;
        case 7:
            if (type == T_STRUCT) dictionary_page(&t, pg);
            else skip(&t, type);
            break;
        case 8:
            if (type == T_STRUCT) data_page_v2(&t, pg);
            else skip(&t, type);
            break;
        default: skip(&t, type);
        }
    }
    *used = (size_t)(t.p - t.start);
    return !t.bad;
}
