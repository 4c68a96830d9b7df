/* jfilter.c — Jinja2's filters and tests that chat templates use, with transformers' tojson
 * (json.dumps with ensure_ascii=False, indent, separators, sort_keys) in place of Jinja's own. A
 * filter or test not here is an error naming it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

typedef struct {
    jrender *r;
    const jargs *args;
    int line, col;
} fctx;

#define ARG(pos, kw, dflt) jargs_get(c->args, (pos), (kw), (dflt))

static jstr *text_of(fctx *c, jval v) { return jv_to_jstr(c->r->a, v); }

static jval need_list(fctx *c, jval v) { return jv_iter_list(c->r, v, c->line, c->col); }

static size_t length_of(fctx *c, jval v)
{
    switch (v.t) {
    case JT_STR: return utf8_count(v.s->p, v.s->n);
    case JT_LIST: return v.l->n;
    case JT_DICT:
    case JT_NS: return v.d->n;
    case JT_UNDEF: return 0;
    default: j_fail(c->line, c->col, "object of type '%s' has no len()", jv_type_name(v));
    }
}

/* An attribute path "a.b" of an item, as Jinja's make_attrgetter reads it (subscript first). */
static jval attr_path(fctx *c, jval item, jval attr)
{
    if (attr.t == JT_INT) return jv_getitem(c->r, item, attr, c->line, c->col);
    jstr *s = text_of(c, attr);
    size_t a = 0;
    for (size_t i = 0; i <= s->n; i++) {
        if (i < s->n && s->p[i] != '.') continue;
        jval key = jv_str_ref(c->r->a, s->p + a, i - a);
        bool digits = i > a && strspn(s->p + a, "0123456789") >= i - a;
        if (digits) key = jv_int(strtoll(s->p + a, NULL, 10));
        if (item.t == JT_UNDEF) return item;
        item = jv_getitem(c->r, item, key, c->line, c->col);
        a = i + 1;
    }
    return item;
}

/* ---- tojson ---- */

static jval f_tojson(fctx *c, jval v)
{
    jval indent = ARG(1, "indent", J_NONE), seps = ARG(2, "separators", J_NONE);
    jjson_opts o = {.indent = -1, .item_sep = ", ", .key_sep = ": ", .arena = c->r->a};
    o.ensure_ascii = jv_truthy(ARG(0, "ensure_ascii", jv_bool(false)));
    o.sort_keys = jv_truthy(ARG(3, "sort_keys", jv_bool(false)));
    if (indent.t == JT_INT) o.indent = indent.i < 0 ? 0 : (int)(indent.i > 64 ? 64 : indent.i), o.item_sep = ",";
    else if (indent.t != JT_NONE) j_fail(c->line, c->col, "tojson: indent must be an integer");
    if (seps.t == JT_LIST && seps.l->n == 2 && seps.l->v[0].t == JT_STR && seps.l->v[1].t == JT_STR) {
        o.item_sep = seps.l->v[0].s->p;
        o.key_sep = seps.l->v[1].s->p;
    } else if (seps.t != JT_NONE) j_fail(c->line, c->col, "tojson: separators must be two strings");
    strbuf sb = {0};
    jv_tojson(v, &o, &sb, c->line, c->col);
    jval out = jv_str(c->r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return out;
}

/* ---- strings ---- */

static jval f_trim(fctx *c, jval v)
{
    jval chars = ARG(0, "chars", J_NONE);
    const jstr *cs = chars.t == JT_STR ? chars.s : NULL;
    return jstr_strip(c->r, text_of(c, v), cs ? cs->p : NULL, cs ? cs->n : 0, 3);
}

static jval f_upper(fctx *c, jval v) { return jstr_case(c->r, text_of(c, v), 'u'); }
static jval f_lower(fctx *c, jval v) { return jstr_case(c->r, text_of(c, v), 'l'); }
static jval f_capitalize(fctx *c, jval v) { return jstr_case(c->r, text_of(c, v), 'c'); }
static jval f_string(fctx *c, jval v) { return (jval){.t = JT_STR, .s = text_of(c, v)}; }

/* Jinja's title: each piece after [-\s({[<]+ with its first character upper, the rest lower. */
static jval f_title(fctx *c, jval v)
{
    jstr *s = text_of(c, v);
    jval low = jstr_case(c->r, s, 'l');
    char *p = (char *)low.s->p;
    for (size_t i = 0; i < s->n; i++) {
        bool start = i == 0 || strchr("-({[< \t\n\r\f\v", s->p[i - 1]);
        if (start && !strchr("-({[< \t\n\r\f\v", s->p[i]) && p[i] >= 'a' && p[i] <= 'z') p[i] = (char)(p[i] - 32);
    }
    return low;
}

static jval f_replace(fctx *c, jval v)
{
    jval a = ARG(0, "old", J_UNDEF), b = ARG(1, "new", J_UNDEF), n = ARG(2, "count", J_NONE);
    return jstr_replace(c->r, text_of(c, v), text_of(c, a), text_of(c, b), n.t == JT_INT ? n.i : -1);
}

/* Jinja's indent: the lines after the first (or all, with first) indented, blank ones only with
 * blank; a final newline stays. */
static jval f_indent(fctx *c, jval v)
{
    jval w = ARG(0, "width", jv_int(4));
    bool first = jv_truthy(ARG(1, "first", jv_bool(false))), blank = jv_truthy(ARG(2, "blank", jv_bool(false)));
    strbuf ind = {0}, sb = {0};
    if (w.t == JT_STR) sb_append(&ind, w.s->p, w.s->n);
    else
        for (int64_t i = 0; i < (w.t == JT_INT ? w.i : 4) && i < 256; i++) sb_append(&ind, " ", 1);
    jstr *s = text_of(c, v);
    if (first) sb_append(&sb, sb_text(&ind), ind.len);
    for (size_t a = 0, i = 0; i <= s->n; i++) {
        if (i < s->n && s->p[i] != '\n') continue;
        if (a > 0) {
            sb_append(&sb, "\n", 1);
            if (i > a || blank) sb_append(&sb, sb_text(&ind), ind.len);
        }
        sb_append(&sb, s->p + a, i - a);
        a = i + 1;
    }
    jval out = jv_str(c->r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    sb_free(&ind);
    return out;
}

static jval f_format(fctx *c, jval v)
{
    jstr *s = text_of(c, v);
    strbuf sb = {0};
    int k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->p[i] != '%' || i + 1 >= s->n) {
            sb_append(&sb, &s->p[i], 1);
            continue;
        }
        char t = s->p[++i];
        if (t == '%') sb_append(&sb, "%", 1);
        else if (t == 's' || t == 'd') jv_str_out(ARG(k++, NULL, J_UNDEF), &sb);
        else sb_free(&sb), j_fail(c->line, c->col, "format: only %%s and %%d are supported");
    }
    jval out = jv_str(c->r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return out;
}

/* ---- numbers ---- */

static jval f_int(fctx *c, jval v)
{
    jval dflt = ARG(0, "default", jv_int(0));
    if (v.t == JT_INT) return v;
    if (v.t == JT_BOOL) return jv_int(v.b);
    if (v.t == JT_FLOAT) return isfinite(v.f) ? jv_int((int64_t)v.f) : dflt;
    if (v.t != JT_STR) return dflt;
    jstr *s = jstr_strip(c->r, v.s, NULL, 0, 3).s;
    char buf[64], *end;
    if (s->n == 0 || s->n >= sizeof buf) return dflt;
    memcpy(buf, s->p, s->n), buf[s->n] = '\0';
    long long i = strtoll(buf, &end, 10);
    if (!*end) return jv_int(i);
    double f = strtod(buf, &end);
    return !*end && isfinite(f) ? jv_int((int64_t)f) : dflt;
}

static jval f_float(fctx *c, jval v)
{
    jval dflt = ARG(0, "default", jv_float(0));
    if (v.t == JT_FLOAT) return v;
    if (v.t == JT_INT || v.t == JT_BOOL) return jv_float(v.t == JT_INT ? (double)v.i : v.b);
    if (v.t != JT_STR) return dflt;
    char buf[64], *end;
    jstr *s = jstr_strip(c->r, v.s, NULL, 0, 3).s;
    if (s->n == 0 || s->n >= sizeof buf) return dflt;
    memcpy(buf, s->p, s->n), buf[s->n] = '\0';
    double f = strtod(buf, &end);
    return *end ? dflt : jv_float(f);
}

static jval f_abs(fctx *c, jval v)
{
    if (v.t == JT_INT) return jv_int(v.i < 0 ? -v.i : v.i);
    if (v.t == JT_FLOAT) return jv_float(fabs(v.f));
    j_fail(c->line, c->col, "bad operand type for abs(): '%s'", jv_type_name(v));
}

static jval f_round(fctx *c, jval v)
{
    jval prec = ARG(0, "precision", jv_int(0)), method = ARG(1, "method", J_UNDEF);
    double x = v.t == JT_FLOAT ? v.f : v.t == JT_INT ? (double)v.i : 0, m = pow(10, prec.t == JT_INT ? (double)prec.i : 0);
    const char *how = method.t == JT_STR ? method.s->p : "common";
    double y = !strcmp(how, "ceil") ? ceil(x * m) / m : !strcmp(how, "floor") ? floor(x * m) / m : round(x * m) / m;
    return jv_float(y);
}

/* ---- sequences ---- */

static jval f_length(fctx *c, jval v) { return jv_int((int64_t)length_of(c, v)); }

static jval f_list(fctx *c, jval v)
{
    jval l = need_list(c, v), out = jv_list(c->r->a, l.l->n);
    if (l.l->n) memcpy(out.l->v, l.l->v, l.l->n * sizeof *out.l->v);
    return out;
}

static jval f_first(fctx *c, jval v)
{
    jval l = need_list(c, v);
    return l.l->n ? l.l->v[0] : J_UNDEF;
}

static jval f_last(fctx *c, jval v)
{
    jval l = need_list(c, v);
    return l.l->n ? l.l->v[l.l->n - 1] : J_UNDEF;
}

static jval f_join(fctx *c, jval v)
{
    jval sep = ARG(0, "d", J_UNDEF), attr = ARG(1, "attribute", J_NONE), l = need_list(c, v);
    jstr *d = sep.t == JT_UNDEF ? NULL : text_of(c, sep);
    strbuf sb = {0};
    for (size_t i = 0; i < l.l->n; i++) {
        if (i && d) sb_append(&sb, d->p, d->n);
        jv_str_out(attr.t == JT_NONE ? l.l->v[i] : attr_path(c, l.l->v[i], attr), &sb);
    }
    jval out = jv_str(c->r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return out;
}

static jval f_default(fctx *c, jval v)
{
    jval d = ARG(0, "default_value", jv_str_ref(c->r->a, "", 0));
    bool boolean = jv_truthy(ARG(1, "boolean", jv_bool(false)));
    return v.t == JT_UNDEF || (boolean && !jv_truthy(v)) ? d : v;
}

static jval f_items(fctx *c, jval v)
{
    if (v.t == JT_UNDEF) return jv_list(c->r->a, 0);
    if (v.t != JT_DICT) j_fail(c->line, c->col, "items: can only get item pairs from a mapping, not %s", jv_type_name(v));
    return jmethod_call(c->r, v, "items", c->args, c->line, c->col);
}

static jval f_reverse(fctx *c, jval v)
{
    if (v.t == JT_STR) {
        jval l = need_list(c, v), out;
        strbuf sb = {0};
        for (size_t i = l.l->n; i-- > 0;) sb_append(&sb, l.l->v[i].s->p, l.l->v[i].s->n);
        out = jv_str(c->r->a, sb_text(&sb), sb.len);
        sb_free(&sb);
        return out;
    }
    jval l = f_list(c, v);
    for (size_t i = 0, j = l.l->n; i + 1 < j; i++, j--) {
        jval t = l.l->v[i];
        l.l->v[i] = l.l->v[j - 1], l.l->v[j - 1] = t;
    }
    return l;
}

/* The key a sort compares: the item, or its attribute, lowered unless case-sensitive. */
static jval sort_key(fctx *c, jval item, jval attr, bool cs)
{
    jval k = attr.t == JT_NONE || attr.t == JT_UNDEF ? item : attr_path(c, item, attr);
    return !cs && k.t == JT_STR ? jstr_case(c->r, k.s, 'l') : k;
}

static void sort_items(fctx *c, jval *keys, jval *items, size_t n, bool reverse)
{
    for (size_t i = 1; i < n; i++) /* insertion sort: stable, as Python's */
        for (size_t j = i; j > 0; j--) {
            int cmp = jv_compare(keys[j - 1], keys[j], c->line, c->col);
            if (reverse ? cmp >= 0 : cmp <= 0) break;
            jval t = keys[j]; keys[j] = keys[j - 1]; keys[j - 1] = t;
            t = items[j]; items[j] = items[j - 1]; items[j - 1] = t;
        }
}

static jval f_sort(fctx *c, jval v)
{
    bool reverse = jv_truthy(ARG(0, "reverse", jv_bool(false))), cs = jv_truthy(ARG(1, "case_sensitive", jv_bool(false)));
    jval attr = ARG(2, "attribute", J_NONE), l = f_list(c, v), keys = jv_list(c->r->a, l.l->n);
    for (size_t i = 0; i < l.l->n; i++) keys.l->v[i] = sort_key(c, l.l->v[i], attr, cs);
    sort_items(c, keys.l->v, l.l->v, l.l->n, reverse);
    return l;
}

static jval f_dictsort(fctx *c, jval v)
{
    bool cs = jv_truthy(ARG(0, "case_sensitive", jv_bool(false))), reverse = jv_truthy(ARG(2, "reverse", jv_bool(false)));
    jval by = ARG(1, "by", J_UNDEF);
    if (v.t != JT_DICT) j_fail(c->line, c->col, "dictsort: expected a dict, got %s", jv_type_name(v));
    jargs none = {0};
    jval items = jmethod_call(c->r, v, "items", &none, c->line, c->col), keys = jv_list(c->r->a, items.l->n);
    int pos = by.t == JT_STR && !strcmp(by.s->p, "value");
    for (size_t i = 0; i < items.l->n; i++) keys.l->v[i] = sort_key(c, items.l->v[i].l->v[pos], J_NONE, cs);
    sort_items(c, keys.l->v, items.l->v, items.l->n, reverse);
    return items;
}

static jval f_unique(fctx *c, jval v)
{
    bool cs = jv_truthy(ARG(0, "case_sensitive", jv_bool(false)));
    jval attr = ARG(1, "attribute", J_NONE), l = need_list(c, v), out = jv_list(c->r->a, l.l->n), seen = jv_list(c->r->a, l.l->n);
    size_t n = 0;
    for (size_t i = 0; i < l.l->n; i++) {
        jval k = sort_key(c, l.l->v[i], attr, cs);
        bool dup = false;
        for (size_t j = 0; j < n && !dup; j++) dup = jv_equal(seen.l->v[j], k);
        if (!dup) seen.l->v[n] = k, out.l->v[n++] = l.l->v[i];
    }
    out.l->n = n;
    return out;
}

static jval f_minmax(fctx *c, jval v, bool max)
{
    bool cs = jv_truthy(ARG(0, "case_sensitive", jv_bool(false)));
    jval attr = ARG(1, "attribute", J_NONE), l = need_list(c, v), best = J_UNDEF, bk = J_UNDEF;
    for (size_t i = 0; i < l.l->n; i++) {
        jval k = sort_key(c, l.l->v[i], attr, cs);
        int cmp = i ? jv_compare(k, bk, c->line, c->col) : 0;
        if (!i || (max ? cmp > 0 : cmp < 0)) best = l.l->v[i], bk = k;
    }
    return best;
}

static jval f_min(fctx *c, jval v) { return f_minmax(c, v, false); }
static jval f_max(fctx *c, jval v) { return f_minmax(c, v, true); }

static jval f_sum(fctx *c, jval v)
{
    jval attr = ARG(0, "attribute", J_NONE), acc = ARG(1, "start", jv_int(0)), l = need_list(c, v);
    for (size_t i = 0; i < l.l->n; i++) {
        jval x = attr.t == JT_NONE ? l.l->v[i] : attr_path(c, l.l->v[i], attr);
        if (acc.t == JT_INT && x.t == JT_INT) acc.i += x.i;
        else if ((acc.t == JT_INT || acc.t == JT_FLOAT) && (x.t == JT_INT || x.t == JT_FLOAT))
            acc = jv_float((acc.t == JT_INT ? (double)acc.i : acc.f) + (x.t == JT_INT ? (double)x.i : x.f));
        else j_fail(c->line, c->col, "sum: cannot add %s", jv_type_name(x));
    }
    return acc;
}

/* select/reject/selectattr/rejectattr: by a test (truth when none), on the item or an attribute. */
static jval select_common(fctx *c, jval v, bool attr_mode, bool keep)
{
    jval l = need_list(c, v), out = jv_list(c->r->a, l.l->n);
    int first = attr_mode ? 1 : 0;
    jval attr = attr_mode ? ARG(0, NULL, J_UNDEF) : J_NONE, test = ARG(first, NULL, J_UNDEF);
    jargs rest = {c->args->v + first + 1, c->args->kw + first + 1, c->args->n - first - 1};
    if (rest.n < 0) rest.n = 0;
    size_t n = 0;
    for (size_t i = 0; i < l.l->n; i++) {
        jval x = attr_mode ? attr_path(c, l.l->v[i], attr) : l.l->v[i];
        bool ok = test.t == JT_STR ? jtest_apply(c->r, test.s->p, x, &rest, c->line, c->col) : jv_truthy(x);
        if (ok == keep) out.l->v[n++] = l.l->v[i];
    }
    out.l->n = n;
    return out;
}

static jval f_select(fctx *c, jval v) { return select_common(c, v, false, true); }
static jval f_reject(fctx *c, jval v) { return select_common(c, v, false, false); }
static jval f_selectattr(fctx *c, jval v) { return select_common(c, v, true, true); }
static jval f_rejectattr(fctx *c, jval v) { return select_common(c, v, true, false); }

static jval f_map(fctx *c, jval v)
{
    jval l = need_list(c, v), out = jv_list(c->r->a, l.l->n), attr = ARG(-1, "attribute", J_UNDEF);
    jval dflt = ARG(-1, "default", J_UNDEF), filter = ARG(0, NULL, J_UNDEF);
    jargs rest = {c->args->v + 1, c->args->kw + 1, c->args->n - 1};
    if (attr.t == JT_UNDEF && filter.t != JT_STR) j_fail(c->line, c->col, "map: give a filter name or attribute=");
    for (size_t i = 0; i < l.l->n; i++) {
        if (attr.t != JT_UNDEF) {
            jval x = attr_path(c, l.l->v[i], attr);
            out.l->v[i] = x.t == JT_UNDEF && dflt.t != JT_UNDEF ? dflt : x;
        } else out.l->v[i] = jfilter_apply(c->r, filter.s->p, l.l->v[i], &rest, c->line, c->col);
    }
    return out;
}

static jval f_attr(fctx *c, jval v)
{
    jstr *name = text_of(c, ARG(0, "name", J_UNDEF));
    return jv_getattr(c->r, v, name->p, name->n);
}

static jval f_batch(fctx *c, jval v)
{
    jval size = ARG(0, "linecount", jv_int(1)), fill = ARG(1, "fill_with", J_NONE), l = need_list(c, v);
    size_t k = size.t == JT_INT && size.i > 0 ? (size_t)size.i : 1, nb = (l.l->n + k - 1) / k;
    jval out = jv_list(c->r->a, nb);
    for (size_t b = 0; b < nb; b++) {
        size_t m = l.l->n - b * k < k ? l.l->n - b * k : k;
        jval row = jv_list(c->r->a, fill.t != JT_NONE ? k : m);
        for (size_t j = 0; j < row.l->n; j++) row.l->v[j] = j < m ? l.l->v[b * k + j] : fill;
        out.l->v[b] = row;
    }
    return out;
}

static jval f_safe(fctx *c, jval v) { return v.t == JT_STR ? v : f_string(c, v); }

static const struct {
    const char *name;
    jval (*fn)(fctx *, jval);
} filters[] = {
    {"tojson", f_tojson}, {"trim", f_trim}, {"upper", f_upper}, {"lower", f_lower}, {"capitalize", f_capitalize},
    {"title", f_title}, {"string", f_string}, {"replace", f_replace}, {"indent", f_indent}, {"format", f_format},
    {"int", f_int}, {"float", f_float}, {"abs", f_abs}, {"round", f_round}, {"length", f_length}, {"count", f_length},
    {"list", f_list}, {"first", f_first}, {"last", f_last}, {"join", f_join}, {"default", f_default},
    {"d", f_default}, {"items", f_items}, {"reverse", f_reverse}, {"sort", f_sort}, {"dictsort", f_dictsort},
    {"unique", f_unique}, {"min", f_min}, {"max", f_max}, {"sum", f_sum}, {"select", f_select},
    {"reject", f_reject}, {"selectattr", f_selectattr}, {"rejectattr", f_rejectattr}, {"map", f_map},
    {"attr", f_attr}, {"batch", f_batch}, {"safe", f_safe}, {"e", f_safe}, {"escape", f_safe},
};

jval jfilter_apply(jrender *r, const char *name, jval v, const jargs *args, int line, int col)
{
    fctx c = {r, args, line, col};
    for (size_t i = 0; i < sizeof filters / sizeof *filters; i++)
        if (!strcmp(filters[i].name, name)) {
            return filters[i].fn(&c, v);
        }
    j_fail(line, col, "no filter named '%s'", name);
}

/* ---- tests ---- */

static bool number(jval v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }

static bool test_in(jrender *r, jval x, jval seq, int line, int col)
{
    if (seq.t == JT_STR) {
        if (x.t != JT_STR) j_fail(line, col, "'in <string>' requires a string as left operand, not %s", jv_type_name(x));
        return x.s->n == 0 || memmem(seq.s->p, seq.s->n, x.s->p, x.s->n) != NULL;
    }
    if (seq.t == JT_DICT || seq.t == JT_NS) return jd_get(seq.d, x) != NULL;
    jval l = jv_iter_list(r, seq, line, col);
    for (size_t i = 0; i < l.l->n; i++)
        if (jv_equal(l.l->v[i], x)) return true;
    return false;
}

bool jtest_apply(jrender *r, const char *name, jval v, const jargs *args, int line, int col)
{
    jval a = jargs_get(args, 0, NULL, J_UNDEF);
#define T(s) (!strcmp(name, s))
    if (T("defined")) return v.t != JT_UNDEF;
    if (T("undefined")) return v.t == JT_UNDEF;
    if (T("none")) return v.t == JT_NONE;
    if (T("string")) return v.t == JT_STR;
    if (T("mapping")) return v.t == JT_DICT;
    if (T("iterable")) return v.t == JT_STR || v.t == JT_LIST || v.t == JT_DICT || v.t == JT_UNDEF;
    if (T("sequence")) return v.t == JT_STR || v.t == JT_LIST || v.t == JT_DICT || v.t == JT_UNDEF;
    if (T("number")) return number(v);
    if (T("integer")) return v.t == JT_INT;
    if (T("float")) return v.t == JT_FLOAT;
    if (T("boolean")) return v.t == JT_BOOL;
    if (T("true")) return v.t == JT_BOOL && v.b;
    if (T("false")) return v.t == JT_BOOL && !v.b;
    if (T("callable")) return v.t == JT_FUNC;
    if (T("in")) return test_in(r, v, a, line, col);
    if (T("equalto") || T("eq") || T("==") || T("sameas")) return jv_equal(v, a);
    if (T("ne") || T("!=")) return !jv_equal(v, a);
    if (T("lt") || T("lessthan") || T("<")) return jv_compare(v, a, line, col) < 0;
    if (T("le") || T("<=")) return jv_compare(v, a, line, col) <= 0;
    if (T("gt") || T("greaterthan") || T(">")) return jv_compare(v, a, line, col) > 0;
    if (T("ge") || T(">=")) return jv_compare(v, a, line, col) >= 0;
    if (T("odd") || T("even") || T("divisibleby")) {
        if (v.t != JT_INT) j_fail(line, col, "test %s needs an integer, got %s", name, jv_type_name(v));
        int64_t m = T("divisibleby") ? (a.t == JT_INT && a.i ? a.i : 1) : 2;
        return T("odd") ? v.i % 2 != 0 : v.i % m == 0;
    }
    if (T("lower") || T("upper")) {
        if (v.t != JT_STR) return false;
        jval conv = jstr_case(r, v.s, name[0] == 'l' ? 'l' : 'u');
        return jv_equal(conv, v);
    }
#undef T
    j_fail(line, col, "no test named '%s'", name);
}

jval jtest_in(jrender *r, jval x, jval seq, int line, int col) { return jv_bool(test_in(r, x, seq, line, col)); }
