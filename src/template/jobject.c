/* jobject.c — what a render does with a value, as Jinja2's sandbox does it: attributes (a
 * method first, then the item) and subscripts (the item first, then the attribute), slices, the
 * list a for loop walks, the methods of str, dict and list that templates call (startswith,
 * split, strip, format, get, items, ...), call arguments, and the render's step and output
 * limits. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

/* ---- limits, output, arguments ---- */

void jrender_count(jrender *r, int line, int col)
{
    long max = r->opts && r->opts->max_steps ? r->opts->max_steps : JINJA_MAX_STEPS;
    if (++r->steps > max)
        j_fail(line, col, "the template ran more than %ld loop iterations and calls (the limit of one render)", max);
}

void jrender_out(jrender *r, const char *p, size_t n, int line, int col)
{
    size_t max = r->opts && r->opts->max_output ? r->opts->max_output : JINJA_MAX_OUTPUT;
    if (r->out->len + n > max) j_fail(line, col, "the template rendered more than %zu bytes", max);
    sb_append(r->out, p, n);
}

jval jargs_get(const jargs *args, int pos, const char *kw, jval dflt)
{
    for (int i = 0; i < args->n; i++)
        if (args->kw[i] ? kw && !strcmp(args->kw[i], kw) : i == pos) return args->v[i];
    return dflt;
}

static const char *str_arg(jrender *r, const jargs *args, int pos, const char *kw, size_t *n, int line, int col)
{
    jval v = jargs_get(args, pos, kw, J_UNDEF);
    if (v.t == JT_UNDEF || v.t == JT_NONE) return NULL;
    if (v.t != JT_STR) j_fail(line, col, "expected a string argument, got %s", jv_type_name(v));
    (void)r;
    *n = v.s->n;
    return v.s->p;
}

/* ---- strings by code point ---- */

/* The byte offset of code point k of s (k may be its length). */
static size_t cp_offset(const jstr *s, size_t k)
{
    size_t i = 0;
    for (; i < s->n && k; k--) i += utf8_len_at(s->p, i, s->n);
    return i;
}

static bool ascii_only(const jstr *s)
{
    for (size_t i = 0; i < s->n; i++)
        if ((unsigned char)s->p[i] >= 0x80) return false;
    return true;
}

/* ---- attributes and items ---- */

static const char *const str_methods[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip", "rstrip",
                                          "replace", "upper", "lower", "title", "capitalize", "format", "find",
                                          "rfind", "count", "join", "isdigit", "isalpha", "isspace", "isalnum",
                                          "isupper", "islower", "splitlines", "index", NULL};
static const char *const dict_methods[] = {"get", "items", "keys", "values", "update", "pop", "setdefault", "clear",
                                           "copy", "popitem", NULL};
static const char *const list_methods[] = {"index", "count", "append", "extend", "pop", "insert", "remove", "sort",
                                           "reverse", "clear", "copy", NULL};

static bool in_names(const char *const *names, const char *name, size_t n)
{
    for (; *names; names++)
        if (strlen(*names) == n && !memcmp(*names, name, n)) return true;
    return false;
}

bool jmethod_exists(jval self, const char *name)
{
    size_t n = strlen(name);
    return (self.t == JT_STR && in_names(str_methods, name, n)) || (self.t == JT_DICT && in_names(dict_methods, name, n)) ||
           (self.t == JT_LIST && in_names(list_methods, name, n)) || (self.t == JT_LOOP && (!strcmp(name, "cycle") || !strcmp(name, "changed")));
}

static jval bound(jrender *r, jval self, const char *name, size_t n)
{
    jfunc *fn = ja_alloc(r->a, sizeof *fn);
    *fn = (jfunc){.kind = JF_METHOD, .self = self, .name = jv_str(r->a, name, n).s->p};
    return (jval){.t = JT_FUNC, .fn = fn};
}

static jval undef_named(jrender *r, const char *name, size_t n)
{
    jval u = J_UNDEF;
    u.undef_name = n < 200 ? jv_str(r->a, name, n).s->p : NULL;
    return u;
}

static jval loop_attr(jrender *r, jloop *l, const char *name, size_t n)
{
    size_t len = l->items.l->n, i = l->i;
#define IS(s) (n == sizeof s - 1 && !memcmp(name, s, n))
    if (IS("index")) return jv_int((int64_t)i + 1);
    if (IS("index0")) return jv_int((int64_t)i);
    if (IS("revindex")) return jv_int((int64_t)(len - i));
    if (IS("revindex0")) return jv_int((int64_t)(len - i - 1));
    if (IS("first")) return jv_bool(i == 0);
    if (IS("last")) return jv_bool(i + 1 == len);
    if (IS("length")) return jv_int((int64_t)len);
    if (IS("depth")) return jv_int(l->depth);
    if (IS("depth0")) return jv_int(l->depth - 1);
    if (IS("previtem")) return i > 0 ? l->items.l->v[i - 1] : undef_named(r, "previtem", 8);
    if (IS("nextitem")) return i + 1 < len ? l->items.l->v[i + 1] : undef_named(r, "nextitem", 8);
    if (IS("cycle") || IS("changed")) return bound(r, (jval){.t = JT_LOOP, .loop = l}, name, n);
#undef IS
    return undef_named(r, name, n);
}

jval jv_getattr(jrender *r, jval obj, const char *name, size_t n)
{
    switch (obj.t) {
    case JT_UNDEF:
        j_fail(0, 0, "'%s' is undefined (looking up its attribute '%.*s')", obj.undef_name ? obj.undef_name : "value",
               (int)(n > 60 ? 60 : n), name);
    case JT_DICT: {
        if (in_names(dict_methods, name, n)) return bound(r, obj, name, n);
        jval *v = jd_get_str(obj.d, name, n);
        return v ? *v : undef_named(r, name, n);
    }
    case JT_NS: {
        jval *v = jd_get_str(obj.d, name, n);
        return v ? *v : undef_named(r, name, n);
    }
    case JT_STR: return in_names(str_methods, name, n) ? bound(r, obj, name, n) : undef_named(r, name, n);
    case JT_LIST: return in_names(list_methods, name, n) ? bound(r, obj, name, n) : undef_named(r, name, n);
    case JT_LOOP: return loop_attr(r, obj.loop, name, n);
    default: return undef_named(r, name, n);
    }
}

static jval list_index(jrender *r, jval obj, int64_t i, size_t len)
{
    (void)r;
    if (i < 0) i += (int64_t)len;
    if (i < 0 || (size_t)i >= len) return J_UNDEF;
    if (obj.t == JT_LIST) return obj.l->v[i];
    size_t a = cp_offset(obj.s, (size_t)i);
    return jv_str_ref(r->a, obj.s->p + a, utf8_len_at(obj.s->p, a, obj.s->n));
}

jval jv_getitem(jrender *r, jval obj, jval key, int line, int col)
{
    if (obj.t == JT_UNDEF)
        j_fail(line, col, "'%s' is undefined (subscripting it)", obj.undef_name ? obj.undef_name : "value");
    if ((obj.t == JT_LIST || obj.t == JT_STR) && (key.t == JT_INT || key.t == JT_BOOL)) {
        int64_t i = key.t == JT_INT ? key.i : key.b;
        return list_index(r, obj, i, obj.t == JT_LIST ? obj.l->n : ascii_only(obj.s) ? obj.s->n : utf8_count(obj.s->p, obj.s->n));
    }
    if (obj.t == JT_DICT || obj.t == JT_NS) {
        jval *v = jd_get(obj.d, key);
        if (v) return *v;
    }
    if (key.t == JT_STR) return jv_getattr(r, obj, key.s->p, key.s->n);
    return J_UNDEF;
}

/* ---- slices and iteration ---- */

static int64_t slice_bound(jval v, int64_t dflt, int64_t len, bool upper, int64_t step, int line, int col)
{
    if (v.t == JT_UNDEF || v.t == JT_NONE) return dflt;
    if (v.t != JT_INT && v.t != JT_BOOL) j_fail(line, col, "slice indices must be integers or None");
    int64_t i = v.t == JT_INT ? v.i : v.b;
    if (i < 0) i += len;
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? len - 1 : len;
    (void)upper;
    return i < lo ? lo : i > hi ? hi : i;
}

jval jv_slice(jrender *r, jval v, jval start, jval stop, jval step, int line, int col)
{
    if (v.t == JT_UNDEF) j_fail(line, col, "'%s' is undefined (slicing it)", v.undef_name ? v.undef_name : "value");
    if (v.t != JT_LIST && v.t != JT_STR) j_fail(line, col, "cannot slice %s", jv_type_name(v));
    int64_t st = step.t == JT_INT ? step.i : 1;
    if (st == 0) j_fail(line, col, "slice step cannot be zero");
    bool ascii = v.t == JT_STR && ascii_only(v.s);
    int64_t len = v.t == JT_LIST ? (int64_t)v.l->n : ascii ? (int64_t)v.s->n : (int64_t)utf8_count(v.s->p, v.s->n);
    int64_t a = slice_bound(start, st < 0 ? len - 1 : 0, len, false, st, line, col);
    int64_t b = slice_bound(stop, st < 0 ? -1 : len, len, true, st, line, col);
    if (v.t == JT_STR && st == 1) {
        if (b < a) b = a;
        size_t x = ascii ? (size_t)a : cp_offset(v.s, (size_t)a), y = ascii ? (size_t)b : cp_offset(v.s, (size_t)b);
        return jv_str_ref(r->a, v.s->p + x, y - x);
    }
    size_t count = 0;
    for (int64_t i = a; st > 0 ? i < b : i > b; i += st) count++;
    if (v.t == JT_LIST) {
        jval out = jv_list(r->a, count);
        size_t k = 0;
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st) out.l->v[k++] = v.l->v[i];
        out.l->tuple = v.l->tuple;
        return out;
    }
    strbuf sb = {0};
    for (int64_t i = a; st > 0 ? i < b : i > b; i += st) {
        size_t x = ascii ? (size_t)i : cp_offset(v.s, (size_t)i);
        sb_append(&sb, v.s->p + x, utf8_len_at(v.s->p, x, v.s->n));
    }
    jval out = jv_str(r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return out;
}

jval jv_iter_list(jrender *r, jval v, int line, int col)
{
    switch (v.t) {
    case JT_LIST: return v;
    case JT_UNDEF: return jv_list(r->a, 0);
    case JT_DICT: {
        jval l = jv_list(r->a, v.d->n);
        memcpy(l.l->v, v.d->k, v.d->n * sizeof *l.l->v);
        return l;
    }
    case JT_STR: {
        size_t n = utf8_count(v.s->p, v.s->n), off = 0;
        jval l = jv_list(r->a, n);
        for (size_t i = 0; i < n; i++) {
            size_t k = utf8_len_at(v.s->p, off, v.s->n);
            l.l->v[i] = jv_str_ref(r->a, v.s->p + off, k);
            off += k;
        }
        return l;
    }
    default: j_fail(line, col, "'%s' object is not iterable", jv_type_name(v));
    }
}

/* ---- str methods ---- */

static bool is_space_at(const jstr *s, size_t i, size_t *k)
{
    *k = py_space_at(s->p, i, s->n);
    if (*k) return true;
    *k = utf8_len_at(s->p, i, s->n);
    return false;
}

/* Python's strip family: which = 1 left, 2 right, 3 both; chars NULL: white space. */
jval jstr_strip(jrender *r, const jstr *s, const char *chars, size_t nchars, int which)
{
    size_t a = 0, b = s->n, k;
    if (which & 1)
        while (a < b && (chars ? memchr(chars, s->p[a], nchars) != NULL && (k = 1) : is_space_at(s, a, &k))) a += k;
    if (which & 2)
        while (b > a) {
            size_t c = b - 1;
            while (c > a && ((unsigned char)s->p[c] & 0xc0) == 0x80) c--;
            bool strip = chars ? (b - c == 1 && memchr(chars, s->p[c], nchars) != NULL) : py_space_at(s->p, c, b) > 0;
            if (!strip) break;
            b = c;
        }
    return jv_str_ref(r->a, s->p + a, b - a);
}

static bool has_at(const jstr *s, size_t at, const char *p, size_t n) { return at + n <= s->n && !memcmp(s->p + at, p, n); }

static bool str_fix(jrender *r, const jstr *s, jval arg, bool end, int line, int col)
{
    if (arg.t == JT_LIST) {
        for (size_t i = 0; i < arg.l->n; i++)
            if (str_fix(r, s, arg.l->v[i], end, line, col)) return true;
        return false;
    }
    if (arg.t != JT_STR) j_fail(line, col, "%s arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", jv_type_name(arg));
    if (arg.s->n > s->n) return false;
    return has_at(s, end ? s->n - arg.s->n : 0, arg.s->p, arg.s->n);
}

static void list_push(jrender *r, jval *list, size_t *cap, jval v)
{
    if (list->l->n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        jval *grown = ja_alloc(r->a, *cap * sizeof *grown);
        if (list->l->n) memcpy(grown, list->l->v, list->l->n * sizeof *grown);
        list->l->v = grown;
    }
    list->l->v[list->l->n++] = v;
}

static void reverse_list(jval l)
{
    for (size_t i = 0, j = l.l->n; i + 1 < j; i++, j--) {
        jval t = l.l->v[i];
        l.l->v[i] = l.l->v[j - 1];
        l.l->v[j - 1] = t;
    }
}

/* str.split / str.rsplit (from_right): on sep, or on runs of white space when sep is NULL. */
static jval str_split(jrender *r, const jstr *s, const char *sep, size_t nsep, int64_t max, bool from_right, int line, int col)
{
    if (sep && !nsep) j_fail(line, col, "empty separator");
    jval out = jv_list(r->a, 0);
    size_t cap = 0, k;
    if (!sep) {
        jstr t = *s;
        jval parts = jv_list(r->a, 0);
        size_t pcap = 0, i = 0;
        while (i < t.n) {
            while (i < t.n && is_space_at(&t, i, &k)) i += k;
            if (i >= t.n) break;
            size_t a = i;
            while (i < t.n && !is_space_at(&t, i, &k)) i += k;
            list_push(r, &parts, &pcap, jv_str_ref(r->a, t.p + a, i - a));
        }
        if (max < 0 || (size_t)max + 1 >= parts.l->n) return parts;
        /* with maxsplit: the rest after max splits keeps its inner white space */
        size_t keep = (size_t)max;
        for (size_t p = 0; p < keep; p++) list_push(r, &out, &cap, parts.l->v[from_right ? parts.l->n - keep + p : p]);
        const jstr *first = parts.l->v[from_right ? 0 : keep].s, *last = parts.l->v[from_right ? parts.l->n - keep - 1 : parts.l->n - 1].s;
        jval rest = jv_str_ref(r->a, first->p, (size_t)(last->p + last->n - first->p));
        if (!from_right) list_push(r, &out, &cap, rest);
        else {
            jval all = jv_list(r->a, 0);
            size_t acap = 0;
            list_push(r, &all, &acap, rest);
            for (size_t p = 0; p < out.l->n; p++) list_push(r, &all, &acap, out.l->v[p]);
            return all;
        }
        return out;
    }
    if (!from_right) {
        size_t a = 0;
        for (size_t i = 0; i + nsep <= s->n && (max < 0 || (int64_t)out.l->n < max);)
            if (has_at(s, i, sep, nsep)) list_push(r, &out, &cap, jv_str_ref(r->a, s->p + a, i - a)), i += nsep, a = i;
            else i++;
        list_push(r, &out, &cap, jv_str_ref(r->a, s->p + a, s->n - a));
        return out;
    }
    size_t b = s->n;
    for (size_t i = s->n; i >= nsep && (max < 0 || (int64_t)out.l->n < max);)
        if (has_at(s, i - nsep, sep, nsep)) list_push(r, &out, &cap, jv_str_ref(r->a, s->p + i, b - i)), i -= nsep, b = i;
        else i--;
    list_push(r, &out, &cap, jv_str_ref(r->a, s->p, b));
    reverse_list(out);
    return out;
}

jval jstr_replace(jrender *r, const jstr *s, const jstr *old, const jstr *new, int64_t count)
{
    strbuf sb = {0};
    size_t i = 0;
    int64_t done = 0;
    if (old->n == 0) { /* Python inserts new between every character */
        for (; i <= s->n; done++) {
            if (count >= 0 && done >= count) break;
            sb_append(&sb, new->p, new->n);
            if (i == s->n) { i++; break; }
            size_t k = utf8_len_at(s->p, i, s->n);
            sb_append(&sb, s->p + i, k);
            i += k;
        }
        if (i < s->n) sb_append(&sb, s->p + i, s->n - i);
    } else {
        while (i < s->n) {
            const char *hit = (count < 0 || done < count) ? memmem(s->p + i, s->n - i, old->p, old->n) : NULL;
            if (!hit) break;
            sb_append(&sb, s->p + i, (size_t)(hit - s->p) - i);
            sb_append(&sb, new->p, new->n);
            i = (size_t)(hit - s->p) + old->n;
            done++;
        }
        sb_append(&sb, s->p + i, s->n - i);
    }
    jval out = jv_str(r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return out;
}

/* Case mapping of one code point: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic (the
 * scripts chat data is mostly in); other characters have no case here. */
static uint32_t cp_lower(uint32_t c)
{
    if ((c >= 'A' && c <= 'Z') || (c >= 0xc0 && c <= 0xde && c != 0xd7) || (c >= 0x391 && c <= 0x3ab && c != 0x3a2) ||
        (c >= 0x410 && c <= 0x42f))
        return c + 0x20;
    if (c >= 0x400 && c <= 0x40f) return c + 0x50;
    if (c >= 0x100 && c <= 0x17f && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
        bool odd_upper = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17e);
        if (c == 0x178) return 0xff;
        return odd_upper ? (c & 1 ? c + 1 : c) : (c & 1 ? c : c + 1);
    }
    return c;
}

static uint32_t cp_upper(uint32_t c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 0xe0 && c <= 0xfe && c != 0xf7) || (c >= 0x3b1 && c <= 0x3cb && c != 0x3c2) ||
        (c >= 0x430 && c <= 0x44f))
        return c - 0x20;
    if (c == 0xff) return 0x178;
    if (c >= 0x450 && c <= 0x45f) return c - 0x50;
    if (c >= 0x100 && c <= 0x17f && cp_lower(c) == c && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17f) {
        return c - 1;
    }
    return c;
}

static bool cp_cased(uint32_t c) { return cp_lower(c) != c || cp_upper(c) != c; }

static void put_utf8(strbuf *sb, uint32_t cp)
{
    char b[4];
    size_t k = 0;
    if (cp < 0x80) b[k++] = (char)cp;
    else if (cp < 0x800) b[k++] = (char)(0xc0 | cp >> 6), b[k++] = (char)(0x80 | (cp & 0x3f));
    else b[k++] = (char)(0xe0 | cp >> 12), b[k++] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[k++] = (char)(0x80 | (cp & 0x3f));
    sb_append(sb, b, k);
}

/* Python's upper/lower/title/capitalize (mode 'u', 'l', 't', 'c') for the characters cp_lower
 * knows; others are kept as they are. */
jval jstr_case(jrender *r, const jstr *s, char mode)
{
    strbuf sb = {0};
    bool prev_cased = false;
    for (size_t i = 0; i < s->n;) {
        size_t k = utf8_len_at(s->p, i, s->n);
        unsigned char c0 = (unsigned char)s->p[i];
        uint32_t cp = k == 1 ? c0 : (uint32_t)(c0 & (0x7f >> k));
        for (size_t j = 1; j < k; j++) cp = cp << 6 | ((unsigned char)s->p[i + j] & 0x3f);
        bool up = mode == 'u' || (mode == 't' && !prev_cased) || (mode == 'c' && i == 0);
        uint32_t m = up ? cp_upper(cp) : cp_lower(cp);
        if (m == cp || cp >= 0x800) sb_append(&sb, s->p + i, k);
        else put_utf8(&sb, m);
        prev_cased = cp_cased(cp);
        i += k;
    }
    jval out = jv_str(r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return out;
}

/* str.format: {} {0} {name} fields (with no format spec beyond them) and {{ }}. */
static jval str_format(jrender *r, const jstr *s, const jargs *args, int line, int col)
{
    strbuf sb = {0};
    int auto_i = 0;
    for (size_t i = 0; i < s->n; i++) {
        char c = s->p[i];
        if ((c == '{' || c == '}') && i + 1 < s->n && s->p[i + 1] == c) {
            sb_append(&sb, &c, 1), i++;
            continue;
        }
        if (c != '{') {
            sb_append(&sb, &c, 1);
            continue;
        }
        const char *e = memchr(s->p + i, '}', s->n - i);
        if (!e) sb_free(&sb), j_fail(line, col, "format: single '{' in the format string");
        size_t n = (size_t)(e - s->p) - i - 1;
        const char *f = s->p + i + 1;
        jval v;
        if (n == 0) v = jargs_get(args, auto_i++, NULL, J_UNDEF);
        else if (isdigit((unsigned char)f[0])) v = jargs_get(args, atoi(f), NULL, J_UNDEF);
        else {
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)(n < 63 ? n : 63), f);
            v = jargs_get(args, -1, name, J_UNDEF);
        }
        if (v.t == JT_UNDEF || memchr(f, ':', n) || memchr(f, '!', n))
            sb_free(&sb), j_fail(line, col, "format: field '{%.*s}' has no argument or has a format spec (not supported)", (int)(n > 40 ? 40 : n), f);
        jv_str_out(v, &sb);
        i += n + 1;
    }
    jval out = jv_str(r->a, sb_text(&sb), sb.len);
    sb_free(&sb);
    return out;
}

static int64_t int_arg(const jargs *args, int pos, const char *kw, int64_t dflt)
{
    jval v = jargs_get(args, pos, kw, J_UNDEF);
    return v.t == JT_INT ? v.i : v.t == JT_BOOL ? v.b : dflt;
}

static jval str_find(const jstr *s, const jstr *sub, bool right)
{
    if (sub->n > s->n) return jv_int(-1);
    for (size_t k = 0; k + sub->n <= s->n; k++) {
        size_t i = right ? s->n - sub->n - k : k;
        if (!memcmp(s->p + i, sub->p, sub->n)) return jv_int((int64_t)utf8_count(s->p, i));
    }
    return jv_int(-1);
}

static jval str_predicate(const jstr *s, const char *name)
{
    bool ok = s->n > 0;
    for (size_t i = 0; i < s->n && ok; i++) {
        unsigned char c = (unsigned char)s->p[i];
        if (!strcmp(name, "isdigit")) ok = isdigit(c);
        else if (!strcmp(name, "isalpha")) ok = isalpha(c);
        else if (!strcmp(name, "isalnum")) ok = isalnum(c);
        else if (!strcmp(name, "isspace")) ok = isspace(c);
        else if (!strcmp(name, "isupper")) ok = !islower(c);
        else ok = !isupper(c);
    }
    return jv_bool(ok);
}

static jval str_method(jrender *r, const jstr *s, const char *name, const jargs *args, int line, int col)
{
    size_t n = 0;
    const char *p;
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith"))
        return jv_bool(str_fix(r, s, jargs_get(args, 0, NULL, J_UNDEF), name[0] == 'e', line, col));
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        p = str_arg(r, args, 0, "chars", &n, line, col);
        return jstr_strip(r, s, p, n, name[0] == 'l' ? 1 : name[0] == 'r' ? 2 : 3);
    }
    if (!strcmp(name, "split") || !strcmp(name, "rsplit")) {
        p = str_arg(r, args, 0, "sep", &n, line, col);
        return str_split(r, s, p, n, int_arg(args, 1, "maxsplit", -1), name[0] == 'r', line, col);
    }
    if (!strcmp(name, "replace")) {
        jval a = jargs_get(args, 0, "old", J_UNDEF), b = jargs_get(args, 1, "new", J_UNDEF);
        if (a.t != JT_STR || b.t != JT_STR) j_fail(line, col, "replace() takes two strings");
        return jstr_replace(r, s, a.s, b.s, int_arg(args, 2, "count", -1));
    }
    if (!strcmp(name, "upper") || !strcmp(name, "lower") || !strcmp(name, "title") || !strcmp(name, "capitalize"))
        return jstr_case(r, s, name[0] == 'u' ? 'u' : name[0] == 'l' ? 'l' : name[0] == 't' ? 't' : 'c');
    if (!strcmp(name, "format")) return str_format(r, s, args, line, col);
    if (!strcmp(name, "find") || !strcmp(name, "rfind") || !strcmp(name, "index") || !strcmp(name, "count")) {
        jval sub = jargs_get(args, 0, NULL, J_UNDEF);
        if (sub.t != JT_STR) j_fail(line, col, "%s() takes a string", name);
        if (name[0] == 'c') {
            int64_t c = 0;
            for (const char *q = s->p; sub.s->n && (q = memmem(q, s->n - (size_t)(q - s->p), sub.s->p, sub.s->n)); q += sub.s->n) c++;
            return jv_int(sub.s->n ? c : (int64_t)utf8_count(s->p, s->n) + 1);
        }
        jval at = str_find(s, sub.s, name[0] == 'r');
        if (name[0] == 'i' && at.i < 0) j_fail(line, col, "substring not found");
        return at;
    }
    if (!strcmp(name, "join")) {
        jval items = jv_iter_list(r, jargs_get(args, 0, NULL, J_UNDEF), line, col);
        strbuf sb = {0};
        for (size_t i = 0; i < items.l->n; i++) {
            if (items.l->v[i].t != JT_STR) sb_free(&sb), j_fail(line, col, "join: sequence item %zu: expected str", i);
            if (i) sb_append(&sb, s->p, s->n);
            sb_append(&sb, items.l->v[i].s->p, items.l->v[i].s->n);
        }
        jval out = jv_str(r->a, sb_text(&sb), sb.len);
        sb_free(&sb);
        return out;
    }
    if (!strcmp(name, "splitlines")) {
        jval out = str_split(r, s, "\n", 1, -1, false, line, col);
        if (out.l->n && out.l->v[out.l->n - 1].s->n == 0) out.l->n--;
        return out;
    }
    return str_predicate(s, name);
}

/* ---- dict, list and loop methods ---- */

static jval dict_method(jrender *r, jval self, const char *name, const jargs *args, int line, int col)
{
    const jdict *d = self.d;
    if (!strcmp(name, "get")) {
        jval *v = jd_get(d, jargs_get(args, 0, "key", J_NONE));
        return v ? *v : jargs_get(args, 1, "default", J_NONE);
    }
    if (!strcmp(name, "keys") || !strcmp(name, "values") || !strcmp(name, "items")) {
        jval l = jv_list(r->a, d->n);
        for (size_t i = 0; i < d->n; i++) {
            if (name[0] == 'k') l.l->v[i] = d->k[i];
            else if (name[0] == 'v') l.l->v[i] = d->v[i];
            else {
                jval pair = jv_list(r->a, 2);
                pair.l->tuple = true;
                pair.l->v[0] = d->k[i], pair.l->v[1] = d->v[i];
                l.l->v[i] = pair;
            }
        }
        return l;
    }
    if (!strcmp(name, "copy")) {
        jval c = jv_dict(r->a);
        for (size_t i = 0; i < d->n; i++) jd_set(r->a, c.d, d->k[i], d->v[i]);
        return c;
    }
    j_fail(line, col, "dict.%s() modifies the dict, which the sandbox refuses (use a namespace)", name);
}

static jval list_method(jrender *r, jval self, const char *name, const jargs *args, int line, int col)
{
    (void)r;
    jval x = jargs_get(args, 0, NULL, J_UNDEF);
    if (!strcmp(name, "index") || !strcmp(name, "count")) {
        int64_t c = 0;
        for (size_t i = 0; i < self.l->n; i++)
            if (jv_equal(self.l->v[i], x)) {
                if (name[0] == 'i') return jv_int((int64_t)i);
                c++;
            }
        if (name[0] == 'i') j_fail(line, col, "list.index(x): x not in list");
        return jv_int(c);
    }
    if (!strcmp(name, "copy")) {
        jval c = jv_list(r->a, self.l->n);
        if (self.l->n) memcpy(c.l->v, self.l->v, self.l->n * sizeof *c.l->v);
        return c;
    }
    j_fail(line, col, "list.%s() modifies the list, which the sandbox refuses", name);
}

static jval loop_method(jrender *r, jloop *l, const char *name, const jargs *args, int line, int col)
{
    if (!strcmp(name, "cycle")) {
        if (!args->n) j_fail(line, col, "no items for cycling given");
        return args->v[l->i % (size_t)args->n];
    }
    jval v = args->n == 1 ? args->v[0] : jv_list(r->a, (size_t)args->n);
    if (args->n != 1)
        for (int i = 0; i < args->n; i++) v.l->v[i] = args->v[i];
    bool changed = !l->changed_set || !jv_equal(l->changed_last, v);
    l->changed_last = v;
    l->changed_set = true;
    return jv_bool(changed);
}

jval jmethod_call(jrender *r, jval self, const char *name, const jargs *args, int line, int col)
{
    switch (self.t) {
    case JT_STR: return str_method(r, self.s, name, args, line, col);
    case JT_DICT: return dict_method(r, self, name, args, line, col);
    case JT_LIST: return list_method(r, self, name, args, line, col);
    case JT_LOOP: return loop_method(r, self.loop, name, args, line, col);
    default: j_fail(line, col, "%s has no method %s", jv_type_name(self), name);
    }
}
