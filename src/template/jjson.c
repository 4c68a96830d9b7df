/* jjson.c — values from JSON (jansson) and back as Python's json.dumps writes them, which is what
 * transformers' tojson filter calls: ensure_ascii (off by default there), indent, separators,
 * sort_keys, floats as their repr, control characters as \u00xx. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

jval jv_from_json(jarena *a, const void *json)
{
    const json_t *j = json;
    switch (json_typeof(j)) {
    case JSON_STRING: return jv_str_ref(a, json_string_value(j), json_string_length(j));
    case JSON_INTEGER: return jv_int((int64_t)json_integer_value(j));
    case JSON_REAL: return jv_float(json_real_value(j));
    case JSON_TRUE: return jv_bool(true);
    case JSON_FALSE: return jv_bool(false);
    case JSON_NULL: return J_NONE;
    case JSON_ARRAY: {
        jval l = jv_list(a, json_array_size(j));
        for (size_t i = 0; i < l.l->n; i++) l.l->v[i] = jv_from_json(a, json_array_get(j, i));
        return l;
    }
    case JSON_OBJECT: {
        jval d = jv_dict(a);
        const char *key;
        json_t *v;
        json_object_foreach((json_t *)j, key, v) jd_set(a, d.d, jv_str_ref(a, key, strlen(key)), jv_from_json(a, v));
        return d;
    }
    }
    return J_NONE;
}

static void py_json_str(const char *p, size_t n, bool ascii, strbuf *out)
{
    sb_append(out, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\n' ? "\\n" : c == '\r' ? "\\r"
                        : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : NULL;
        if (esc) sb_printf(out, "%s", esc);
        else if (c < 0x20 || (ascii && c == 0x7f)) sb_printf(out, "\\u%04x", c);
        else if (ascii && c >= 0x80) {
            size_t k = utf8_len_at(p, i, n);
            uint32_t cp = k == 1 ? c : (uint32_t)(c & (0x7f >> k));
            for (size_t j = 1; j < k; j++) cp = cp << 6 | ((unsigned char)p[i + j] & 0x3f);
            if (cp >= 0x10000) sb_printf(out, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + (cp & 0x3ff));
            else sb_printf(out, "\\u%04x", cp);
            i += k - 1;
        } else sb_append(out, &p[i], 1);
    }
    sb_append(out, "\"", 1);
}

static void newline_indent(const jjson_opts *o, int level, strbuf *out)
{
    sb_append(out, "\n", 1);
    for (int i = 0; i < o->indent * level; i++) sb_append(out, " ", 1);
}

static void tojson_at(jval v, const jjson_opts *o, int level, strbuf *out, int line, int col);

/* A dict key as json.dumps writes it: strings as they are, numbers, booleans and None as text. */
static void json_key(jval k, const jjson_opts *o, strbuf *out, int line, int col)
{
    if (k.t == JT_STR) {
        py_json_str(k.s->p, k.s->n, o->ensure_ascii, out);
        return;
    }
    strbuf sb = {0};
    if (k.t == JT_BOOL) sb_printf(&sb, k.b ? "true" : "false");
    else if (k.t == JT_NONE) sb_printf(&sb, "null");
    else if (k.t == JT_INT || k.t == JT_FLOAT) jv_str_out(k, &sb);
    else {
        sb_free(&sb);
        j_fail(line, col, "tojson: keys must be str, int, float, bool or None, not %s", jv_type_name(k));
    }
    py_json_str(sb_text(&sb), sb.len, o->ensure_ascii, out);
    sb_free(&sb);
}

static int cmp_keys(const void *x, const void *y)
{
    const jval *a = *(const jval *const *)x, *b = *(const jval *const *)y;
    if (a->t != JT_STR || b->t != JT_STR) return 0;
    size_t n = a->s->n < b->s->n ? a->s->n : b->s->n;
    int c = memcmp(a->s->p, b->s->p, n);
    return c ? c : (a->s->n > b->s->n) - (a->s->n < b->s->n);
}

static void tojson_dict(const jdict *d, const jjson_opts *o, int level, strbuf *out, int line, int col)
{
    if (d->n == 0) {
        sb_printf(out, "{}");
        return;
    }
    const jval **order = ja_alloc(o->arena, d->n * sizeof *order);
    for (size_t i = 0; i < d->n; i++) order[i] = &d->k[i];
    if (o->sort_keys) qsort(order, d->n, sizeof *order, cmp_keys);
    sb_printf(out, "{");
    for (size_t i = 0; i < d->n; i++) {
        size_t at = (size_t)(order[i] - d->k);
        if (i) sb_printf(out, "%s", o->item_sep);
        if (o->indent >= 0) newline_indent(o, level + 1, out);
        json_key(d->k[at], o, out, line, col);
        sb_printf(out, "%s", o->key_sep);
        tojson_at(d->v[at], o, level + 1, out, line, col);
    }
    if (o->indent >= 0) newline_indent(o, level, out);
    sb_printf(out, "}");
}

static void tojson_at(jval v, const jjson_opts *o, int level, strbuf *out, int line, int col)
{
    if (level > 200) j_fail(line, col, "tojson: nested more than 200 deep");
    switch (v.t) {
    case JT_NONE: sb_printf(out, "null"); return;
    case JT_BOOL: sb_printf(out, v.b ? "true" : "false"); return;
    case JT_INT: sb_printf(out, "%lld", (long long)v.i); return;
    case JT_FLOAT:
        if (v.f != v.f) sb_printf(out, "NaN");
        else if (v.f > 1e308 * 10) sb_printf(out, "Infinity");
        else if (v.f < -1e308 * 10) sb_printf(out, "-Infinity");
        else py_float_repr(v.f, out);
        return;
    case JT_STR: py_json_str(v.s->p, v.s->n, o->ensure_ascii, out); return;
    case JT_LIST:
        if (v.l->n == 0) {
            sb_printf(out, "[]");
            return;
        }
        sb_printf(out, "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) sb_printf(out, "%s", o->item_sep);
            if (o->indent >= 0) newline_indent(o, level + 1, out);
            tojson_at(v.l->v[i], o, level + 1, out, line, col);
        }
        if (o->indent >= 0) newline_indent(o, level, out);
        sb_printf(out, "]");
        return;
    case JT_DICT: tojson_dict(v.d, o, level, out, line, col); return;
    default: j_fail(line, col, "tojson: Object of type %s is not JSON serializable", jv_type_name(v));
    }
}

void jv_tojson(jval v, const jjson_opts *o, strbuf *out, int line, int col)
{
    tojson_at(v, o, 0, out, line, col);
}
