/* jvalue.c — the interpreter's values as Python has them (Jinja evaluates in Python): the arena
 * they live in, the error exit, truth, equality and order, str() and repr() (floats as Python's
 * shortest repr), and Python's white space and UTF-8 counting. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

_Thread_local jfail *j_fail_to;

bool j_guard(jfail *f, void (*fn)(void *), void *arg)
{
    jfail *prev = j_fail_to;
    j_fail_to = f;
    if (setjmp(f->jb)) {
        j_fail_to = prev;
        return false;
    }
    fn(arg);
    j_fail_to = prev;
    return true;
}

void j_fail(int line, int col, const char *fmt, ...)
{
    jfail *f = j_fail_to;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->msg, sizeof f->msg, fmt, ap);
    va_end(ap);
    f->line = line;
    f->col = col;
    longjmp(f->jb, 1);
}

/* ---- the arena ---- */

struct jblock {
    jblock *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *ja_alloc(jarena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->cap - a->head->used < n) {
        size_t cap = n > 32768 ? n : 32768;
        if (a->limit && a->used + cap > a->limit)
            j_fail(0, 0, "the template used more than %zu MB of memory", a->limit >> 20);
        jblock *b = malloc(sizeof *b + cap);
        if (!b) j_fail(0, 0, "out of memory");
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        a->used += cap;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

void ja_free(jarena *a)
{
    for (jblock *b = a->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- making values ---- */

const jval J_UNDEF = {.t = JT_UNDEF};
const jval J_NONE = {.t = JT_NONE};

jval jv_bool(bool b) { return (jval){.t = JT_BOOL, .b = b}; }
jval jv_int(int64_t i) { return (jval){.t = JT_INT, .i = i}; }
jval jv_float(double f) { return (jval){.t = JT_FLOAT, .f = f}; }

jval jv_str_ref(jarena *a, const char *p, size_t n)
{
    jstr *s = ja_alloc(a, sizeof *s);
    s->p = p;
    s->n = n;
    return (jval){.t = JT_STR, .s = s};
}

jval jv_str(jarena *a, const char *p, size_t n)
{
    char *copy = ja_alloc(a, n + 1);
    if (n) memcpy(copy, p, n);
    copy[n] = '\0';
    return jv_str_ref(a, copy, n);
}

jval jv_cstr(jarena *a, const char *s) { return jv_str(a, s, strlen(s)); }

jval jv_list(jarena *a, size_t n)
{
    jlist *l = ja_alloc(a, sizeof *l);
    l->v = n ? ja_alloc(a, n * sizeof *l->v) : NULL;
    for (size_t i = 0; i < n; i++) l->v[i] = J_UNDEF;
    l->n = n;
    l->tuple = false;
    return (jval){.t = JT_LIST, .l = l};
}

jval jv_dict(jarena *a)
{
    jdict *d = ja_alloc(a, sizeof *d);
    *d = (jdict){0};
    return (jval){.t = JT_DICT, .d = d};
}

jval *jd_get(const jdict *d, jval key)
{
    if (key.t == JT_STR) return jd_get_str(d, key.s->p, key.s->n);
    for (size_t i = 0; i < d->n; i++)
        if (jv_equal(d->k[i], key)) return &d->v[i];
    return NULL;
}

jval *jd_get_str(const jdict *d, const char *key, size_t n)
{
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].t == JT_STR && d->k[i].s->n == n && !memcmp(d->k[i].s->p, key, n)) return &d->v[i];
    return NULL;
}

void jd_set(jarena *a, jdict *d, jval key, jval v)
{
    jval *old = jd_get(d, key);
    if (old) {
        *old = v;
        return;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 8;
        jval *k = ja_alloc(a, cap * sizeof *k), *vs = ja_alloc(a, cap * sizeof *vs);
        if (d->n) {
            memcpy(k, d->k, d->n * sizeof *k);
            memcpy(vs, d->v, d->n * sizeof *vs);
        }
        d->k = k;
        d->v = vs;
        d->cap = cap;
    }
    d->k[d->n] = key;
    d->v[d->n++] = v;
}

/* ---- truth, equality, order ---- */

bool jv_truthy(jval v)
{
    switch (v.t) {
    case JT_BOOL: return v.b;
    case JT_INT: return v.i != 0;
    case JT_FLOAT: return v.f != 0;
    case JT_STR: return v.s->n != 0;
    case JT_LIST: return v.l->n != 0;
    case JT_DICT: return v.d->n != 0;
    case JT_UNDEF:
    case JT_NONE: return false;
    default: return true;
    }
}

static bool numeric(jval v) { return v.t == JT_INT || v.t == JT_FLOAT || v.t == JT_BOOL; }
static double num(jval v) { return v.t == JT_FLOAT ? v.f : v.t == JT_INT ? (double)v.i : v.b; }

bool jv_equal(jval a, jval b)
{
    if (numeric(a) && numeric(b)) {
        if (a.t != JT_FLOAT && b.t != JT_FLOAT) return (a.t == JT_INT ? a.i : a.b) == (b.t == JT_INT ? b.i : b.b);
        return num(a) == num(b);
    }
    if (a.t != b.t) return false;
    switch (a.t) {
    case JT_UNDEF:
    case JT_NONE: return true;
    case JT_STR: return a.s->n == b.s->n && !memcmp(a.s->p, b.s->p, a.s->n);
    case JT_LIST:
        if (a.l->n != b.l->n || a.l->tuple != b.l->tuple) return false;
        for (size_t i = 0; i < a.l->n; i++)
            if (!jv_equal(a.l->v[i], b.l->v[i])) return false;
        return true;
    case JT_DICT:
        if (a.d->n != b.d->n) return false;
        for (size_t i = 0; i < a.d->n; i++) {
            jval *w = jd_get(b.d, a.d->k[i]);
            if (!w || !jv_equal(a.d->v[i], *w)) return false;
        }
        return true;
    case JT_NS: return a.d == b.d;
    case JT_FUNC: return a.fn == b.fn;
    case JT_LOOP: return a.loop == b.loop;
    default: return false;
    }
}

int jv_compare(jval a, jval b, int line, int col)
{
    if (numeric(a) && numeric(b)) {
        if (a.t == JT_INT && b.t == JT_INT) return (a.i > b.i) - (a.i < b.i);
        double x = num(a), y = num(b);
        return (x > y) - (x < y);
    }
    if (a.t == JT_STR && b.t == JT_STR) {
        size_t n = a.s->n < b.s->n ? a.s->n : b.s->n;
        int c = memcmp(a.s->p, b.s->p, n); /* UTF-8 byte order is code point order */
        return c ? c : (a.s->n > b.s->n) - (a.s->n < b.s->n);
    }
    if (a.t == JT_LIST && b.t == JT_LIST) {
        for (size_t i = 0; i < a.l->n && i < b.l->n; i++) {
            if (jv_equal(a.l->v[i], b.l->v[i])) continue;
            return jv_compare(a.l->v[i], b.l->v[i], line, col);
        }
        return (a.l->n > b.l->n) - (a.l->n < b.l->n);
    }
    j_fail(line, col, "cannot compare %s with %s", jv_type_name(a), jv_type_name(b));
}

const char *jv_type_name(jval v)
{
    static const char *const names[] = {"undefined", "none", "bool", "int", "float", "str", "list",
                                        "dict", "namespace", "function", "loop"};
    if (v.t == JT_LIST && v.l->tuple) return "tuple";
    return names[v.t];
}

/* ---- Python's text ---- */

size_t utf8_len_at(const char *s, size_t i, size_t n)
{
    unsigned char c = (unsigned char)s[i];
    size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    return i + k > n ? 1 : k;
}

size_t utf8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

size_t py_space_at(const char *s, size_t i, size_t n)
{
    unsigned char c = (unsigned char)s[i];
    if (c < 0x80) return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20);
    size_t k = utf8_len_at(s, i, n);
    uint32_t cp = k == 1 ? c : (uint32_t)(c & (0x7f >> k));
    for (size_t j = 1; j < k; j++) cp = cp << 6 | ((unsigned char)s[i + j] & 0x3f);
    bool sp = cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 ||
              cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
    return sp ? k : 0;
}

/* Python's repr of a float: the shortest digits that read back the same, in fixed notation for
 * exponents -4..15, else d.ddde+XX. */
void py_float_repr(double f, strbuf *out)
{
    if (isnan(f)) { sb_printf(out, "nan"); return; }
    if (isinf(f)) { sb_printf(out, f < 0 ? "-inf" : "inf"); return; }
    char buf[40];
    int p = 1;
    for (; p < 17; p++) {
        snprintf(buf, sizeof buf, "%.*e", p - 1, f);
        if (strtod(buf, NULL) == f) break;
    }
    snprintf(buf, sizeof buf, "%.*e", p - 1, f);
    char *e = strchr(buf, 'e');
    int exp = atoi(e + 1);
    *e = '\0';
    char digits[40];
    size_t nd = 0;
    bool neg = buf[0] == '-';
    for (char *q = buf + neg; *q; q++)
        if (*q != '.') digits[nd++] = *q;
    digits[nd] = '\0';
    if (neg) sb_printf(out, "-");
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            sb_printf(out, "0.");
            for (int z = -1; z > exp; z--) sb_printf(out, "0");
            sb_printf(out, "%s", digits);
        } else if ((size_t)exp + 1 >= nd) {
            sb_printf(out, "%s", digits);
            for (size_t z = nd; z < (size_t)exp + 1; z++) sb_printf(out, "0");
            sb_printf(out, ".0");
        } else {
            sb_append(out, digits, (size_t)exp + 1);
            sb_printf(out, ".%s", digits + exp + 1);
        }
        return;
    }
    sb_printf(out, "%c", digits[0]);
    if (nd > 1) sb_printf(out, ".%s", digits + 1);
    sb_printf(out, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
}

static void repr_str(const jstr *s, strbuf *out)
{
    bool sq = memchr(s->p, '\'', s->n) != NULL, dq = memchr(s->p, '"', s->n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    sb_append(out, &q, 1);
    for (size_t i = 0; i < s->n; i++) {
        unsigned char c = (unsigned char)s->p[i];
        if (c == (unsigned char)q || c == '\\') sb_printf(out, "\\%c", c);
        else if (c == '\n') sb_printf(out, "\\n");
        else if (c == '\r') sb_printf(out, "\\r");
        else if (c == '\t') sb_printf(out, "\\t");
        else if (c < 0x20 || c == 0x7f) sb_printf(out, "\\x%02x", c);
        else sb_append(out, &s->p[i], 1);
    }
    sb_append(out, &q, 1);
}

void jv_repr_out(jval v, strbuf *out)
{
    switch (v.t) {
    case JT_STR: { repr_str(v.s, out); return; }
    case JT_LIST:
        sb_printf(out, v.l->tuple ? "(" : "[");
        for (size_t i = 0; i < v.l->n; i++) {
            if (i) sb_printf(out, ", ");
            jv_repr_out(v.l->v[i], out);
        }
        sb_printf(out, v.l->tuple ? (v.l->n == 1 ? ",)" : ")") : "]");
        return;
    case JT_DICT:
        sb_printf(out, "{");
        for (size_t i = 0; i < v.d->n; i++) {
            if (i) sb_printf(out, ", ");
            jv_repr_out(v.d->k[i], out);
            sb_printf(out, ": ");
            jv_repr_out(v.d->v[i], out);
        }
        sb_printf(out, "}");
        return;
    default: jv_str_out(v, out);
    }
}

void jv_str_out(jval v, strbuf *out)
{
    switch (v.t) {
    case JT_UNDEF: return;
    case JT_NONE: { sb_printf(out, "None"); return; }
    case JT_BOOL: { sb_printf(out, v.b ? "True" : "False"); return; }
    case JT_INT: { sb_printf(out, "%lld", (long long)v.i); return; }
    case JT_FLOAT: { py_float_repr(v.f, out); return; }
    case JT_STR: { sb_append(out, v.s->p, v.s->n); return; }
    case JT_LIST:
    case JT_DICT: { jv_repr_out(v, out); return; }
    case JT_NS: { sb_printf(out, "<Namespace>"); return; }
    case JT_FUNC: { sb_printf(out, "<function %s>", v.fn->name ? v.fn->name : "macro"); return; }
    case JT_LOOP: { sb_printf(out, "<LoopContext>"); return; }
    }
}

jstr *jv_to_jstr(jarena *a, jval v)
{
    if (v.t == JT_STR) return v.s;
    strbuf sb = {0};
    jv_str_out(v, &sb);
    jval s = jv_str(a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return s.s;
}
