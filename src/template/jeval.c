/* jeval.c — running the tree: expressions with Python's operators (int/float arithmetic, str
 * and list + and *, floor division and modulo as Python rounds them, chained comparisons, and/or
 * giving an operand), statements with Jinja's scopes (a for loop's sets stay in the loop, a
 * namespace carries values out), macros and call blocks, recursive loops, the globals transformers
 * gives (range, namespace, dict, raise_exception, strftime_now), and the spans {% generation %}
 * writes. Loop iterations and calls are counted against the render's limit, macro nesting too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_impl.h"

typedef enum { FLOW_NEXT, FLOW_BREAK, FLOW_CONTINUE } flow;

static jval eval(jrender *r, jframe *f, const jnode *n);
static flow exec(jrender *r, jframe *f, const jnode *n);

/* ---- frames ---- */

static jframe *frame_new(jrender *r, jframe *parent)
{
    jframe *f = ja_alloc(r->a, sizeof *f);
    *f = (jframe){.parent = parent};
    return f;
}

static void frame_set(jrender *r, jframe *f, int sym, jval v)
{
    for (int i = 0; i < f->n; i++)
        if (f->syms[i] == sym) {
            f->vals[i] = v;
            return;
        }
    if (f->n == f->cap) {
        int cap = f->cap ? 2 * f->cap : 8;
        int *s = ja_alloc(r->a, (size_t)cap * sizeof *s);
        jval *v2 = ja_alloc(r->a, (size_t)cap * sizeof *v2);
        if (f->n) memcpy(s, f->syms, (size_t)f->n * sizeof *s), memcpy(v2, f->vals, (size_t)f->n * sizeof *v2);
        f->syms = s, f->vals = v2, f->cap = cap;
    }
    f->syms[f->n] = sym;
    f->vals[f->n++] = v;
}

static const jval *frame_find(const jframe *f, int sym)
{
    for (; f; f = f->parent)
        for (int i = 0; i < f->n; i++)
            if (f->syms[i] == sym) return &f->vals[i];
    return NULL;
}

static const char *const builtins[] = {"range", "namespace", "dict", "raise_exception", "strftime_now", NULL};

static jval lookup(jrender *r, const jframe *f, const jnode *n)
{
    const jval *v = frame_find(f, n->sym);
    if (v) return *v;
    const char *name = r->t->syms[n->sym];
    for (int i = 0; builtins[i]; i++)
        if (!strcmp(builtins[i], name)) {
            jfunc *fn = ja_alloc(r->a, sizeof *fn);
            *fn = (jfunc){.kind = JF_GLOBAL, .name = builtins[i]};
            return (jval){.t = JT_FUNC, .fn = fn};
        }
    jval u = J_UNDEF;
    u.undef_name = name;
    return u;
}

/* ---- output captured into a string (macros, set and filter blocks) ---- */

static strbuf *capture_begin(jrender *r, strbuf **saved)
{
    struct jcapture *c = ja_alloc(r->a, sizeof *c);
    *c = (struct jcapture){.next = r->captures};
    r->captures = c;
    *saved = r->out;
    r->out = &c->sb;
    r->capturing++;
    return &c->sb;
}

static jval capture_end(jrender *r, strbuf *saved)
{
    struct jcapture *c = r->captures;
    jval s = jv_str(r->a, sb_text(&c->sb), c->sb.len);
    sb_free(&c->sb);
    r->captures = c->next;
    r->out = saved;
    r->capturing--;
    return s;
}

/* ---- arithmetic ---- */

_Noreturn static void bad_operands(const jnode *n, const char *op, jval a, jval b)
{
    if (a.t == JT_UNDEF || b.t == JT_UNDEF) {
        jval u = a.t == JT_UNDEF ? a : b;
        j_fail(n->line, n->col, "'%s' is undefined", u.undef_name ? u.undef_name : "value");
    }
    j_fail(n->line, n->col, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_type_name(a), jv_type_name(b));
}

static bool intlike(jval v) { return v.t == JT_INT || v.t == JT_BOOL; }
static int64_t ival(jval v) { return v.t == JT_INT ? v.i : v.b; }
static bool numlike(jval v) { return intlike(v) || v.t == JT_FLOAT; }
static double fval(jval v) { return v.t == JT_FLOAT ? v.f : (double)ival(v); }

static jval repeat(jrender *r, const jnode *n, jval seq, int64_t times)
{
    if (times < 0) times = 0;
    size_t unit = seq.t == JT_STR ? seq.s->n : seq.l->n;
    if (unit && (uint64_t)times > JINJA_MAX_OUTPUT / unit) j_fail(n->line, n->col, "repetition too large");
    if (seq.t == JT_LIST) {
        jval out = jv_list(r->a, unit * (size_t)times);
        for (int64_t k = 0; k < times; k++) memcpy(out.l->v + (size_t)k * unit, seq.l->v, unit * sizeof *seq.l->v);
        return out;
    }
    char *p = ja_alloc(r->a, unit * (size_t)times + 1);
    for (int64_t k = 0; k < times; k++) memcpy(p + (size_t)k * unit, seq.s->p, unit);
    p[unit * (size_t)times] = '\0';
    return jv_str_ref(r->a, p, unit * (size_t)times);
}

static jval concat2(jrender *r, jval a, jval b)
{
    if (a.t == JT_STR) {
        char *p = ja_alloc(r->a, a.s->n + b.s->n + 1);
        memcpy(p, a.s->p, a.s->n), memcpy(p + a.s->n, b.s->p, b.s->n);
        p[a.s->n + b.s->n] = '\0';
        return jv_str_ref(r->a, p, a.s->n + b.s->n);
    }
    jval l = jv_list(r->a, a.l->n + b.l->n);
    if (a.l->n) memcpy(l.l->v, a.l->v, a.l->n * sizeof *l.l->v);
    if (b.l->n) memcpy(l.l->v + a.l->n, b.l->v, b.l->n * sizeof *l.l->v);
    return l;
}

static jval int_op(const jnode *n, char op, int64_t x, int64_t y)
{
    int64_t z = 0;
    bool over = false;
    switch (op) {
    case '+': over = __builtin_add_overflow(x, y, &z); break;
    case '-': over = __builtin_sub_overflow(x, y, &z); break;
    case '*': over = __builtin_mul_overflow(x, y, &z); break;
    case '/':
        if (!y) j_fail(n->line, n->col, "integer division or modulo by zero");
        z = x / y;
        if ((x % y != 0) && ((x < 0) != (y < 0))) z--;
        break;
    case '%':
        if (!y) j_fail(n->line, n->col, "integer division or modulo by zero");
        z = x % y;
        if (z && ((z < 0) != (y < 0))) z += y;
        break;
    }
    if (over) j_fail(n->line, n->col, "integer overflow");
    return jv_int(z);
}

static jval power(const jnode *n, jval a, jval b)
{
    if (intlike(a) && intlike(b) && ival(b) >= 0) {
        int64_t base = ival(a), e = ival(b), z = 1;
        for (; e; e--)
            if (__builtin_mul_overflow(z, base, &z)) j_fail(n->line, n->col, "integer overflow");
        return jv_int(z);
    }
    return jv_float(pow(fval(a), fval(b)));
}

static jval arith(jrender *r, const jnode *n, jval a, jval b)
{
    const char *op = n->op;
    if (!strcmp(op, "**")) {
        if (!numlike(a) || !numlike(b)) bad_operands(n, op, a, b);
        return power(n, a, b);
    }
    if (op[0] == '+' && ((a.t == JT_STR && b.t == JT_STR) || (a.t == JT_LIST && b.t == JT_LIST))) return concat2(r, a, b);
    if (op[0] == '*' && (a.t == JT_STR || a.t == JT_LIST) && intlike(b)) return repeat(r, n, a, ival(b));
    if (op[0] == '*' && (b.t == JT_STR || b.t == JT_LIST) && intlike(a)) return repeat(r, n, b, ival(a));
    if (op[0] == '%' && a.t == JT_STR) {
        jargs args = {b.t == JT_LIST ? b.l->v : &b, NULL, b.t == JT_LIST ? (int)b.l->n : 1};
        const char *kw[64] = {0};
        if (args.n > 64) j_fail(n->line, n->col, "too many values to format");
        args.kw = kw;
        return jfilter_apply(r, "format", a, &args, n->line, n->col);
    }
    if (!numlike(a) || !numlike(b)) bad_operands(n, op, a, b);
    bool floor_div = !strcmp(op, "//");
    if (intlike(a) && intlike(b) && op[0] != '/') return int_op(n, op[0], ival(a), ival(b));
    if (intlike(a) && intlike(b) && floor_div) return int_op(n, '/', ival(a), ival(b));
    double x = fval(a), y = fval(b);
    if ((op[0] == '/' || op[0] == '%') && y == 0) j_fail(n->line, n->col, "division by zero");
    switch (op[0]) {
    case '+': return jv_float(x + y);
    case '-': return jv_float(x - y);
    case '*': return jv_float(x * y);
    case '%': {
        double m = fmod(x, y);
        return jv_float(m && ((m < 0) != (y < 0)) ? m + y : m);
    }
    default: return jv_float(floor_div ? floor(x / y) : x / y);
    }
}

static bool compare(jrender *r, const jnode *n, const char *op, jval a, jval b)
{
    if (!strcmp(op, "==")) return jv_equal(a, b);
    if (!strcmp(op, "!=")) return !jv_equal(a, b);
    if (!strcmp(op, "in")) return jtest_in(r, a, b, n->line, n->col).b;
    if (!strcmp(op, "notin")) return !jtest_in(r, a, b, n->line, n->col).b;
    if (a.t == JT_UNDEF || b.t == JT_UNDEF) bad_operands(n, op, a, b);
    int c = jv_compare(a, b, n->line, n->col);
    return op[0] == '<' ? (op[1] ? c <= 0 : c < 0) : (op[1] ? c >= 0 : c > 0);
}

/* ---- calls ---- */

static jargs eval_args(jrender *r, jframe *f, const jnode *n)
{
    jargs a = {ja_alloc(r->a, (size_t)(n->nkids + 1) * sizeof(jval)), n->kw, n->nkids};
    for (int i = 0; i < n->nkids; i++) a.v[i] = eval(r, f, n->kids[i]);
    if (!a.kw) a.kw = ja_alloc(r->a, sizeof(char *)); /* no arguments */
    return a;
}

static jval strftime_now(jrender *r, const jargs *args, const jnode *n)
{
    jval fmt = jargs_get(args, 0, NULL, J_UNDEF);
    if (fmt.t != JT_STR) j_fail(n->line, n->col, "strftime_now needs a format string");
    time_t now = time(NULL);
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    if (r->opts && r->opts->fixed_time) now = r->opts->now;
    else if (epoch && *epoch) now = (time_t)strtoll(epoch, NULL, 10);
    struct tm tm;
    localtime_r(&now, &tm);
    char buf[512];
    size_t k = fmt.s->n < 200 ? strftime(buf, sizeof buf, fmt.s->p, &tm) : 0;
    return jv_str(r->a, buf, k);
}

static jval make_ns(jrender *r, const jargs *args, const jnode *n, bool ns)
{
    jval d = jv_dict(r->a);
    for (int i = 0; i < args->n; i++) {
        if (!args->kw[i]) {
            jval src = args->v[i];
            if (src.t != JT_DICT) j_fail(n->line, n->col, "%s() takes keyword arguments or a dict", ns ? "namespace" : "dict");
            for (size_t k = 0; k < src.d->n; k++) jd_set(r->a, d.d, src.d->k[k], src.d->v[k]);
            continue;
        }
        if (ns && args->kw[i][0] == '_')
            j_fail(n->line, n->col, "a namespace cannot hold underscore-prefixed attributes ('%s')", args->kw[i]);
        jd_set(r->a, d.d, jv_cstr(r->a, args->kw[i]), args->v[i]);
    }
    if (ns) d.t = JT_NS;
    return d;
}

static jval call_global(jrender *r, const char *name, const jargs *args, const jnode *n)
{
    if (!strcmp(name, "raise_exception")) {
        jstr *msg = jv_to_jstr(r->a, jargs_get(args, 0, "message", J_UNDEF));
        j_fail(n->line, n->col, "the template raised: %.*s", (int)(msg->n > 900 ? 900 : msg->n), msg->p);
    }
    if (!strcmp(name, "strftime_now")) return strftime_now(r, args, n);
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) return make_ns(r, args, n, name[0] == 'n');
    /* range */
    int64_t v[3] = {0, 0, 1};
    if (args->n < 1 || args->n > 3) j_fail(n->line, n->col, "range expects 1 to 3 arguments");
    for (int i = 0; i < args->n; i++) {
        if (!intlike(args->v[i])) j_fail(n->line, n->col, "range: '%s' is not an integer", jv_type_name(args->v[i]));
        v[args->n == 1 ? 1 : i] = ival(args->v[i]);
    }
    if (!v[2]) j_fail(n->line, n->col, "range() arg 3 must not be zero");
    int64_t count = v[2] > 0 ? (v[1] > v[0] ? (v[1] - v[0] + v[2] - 1) / v[2] : 0) : (v[0] > v[1] ? (v[0] - v[1] - v[2] - 1) / -v[2] : 0);
    if (count > 100000) j_fail(n->line, n->col, "range too big: the sandbox allows 100000 items (it has %lld)", (long long)count);
    jval l = jv_list(r->a, (size_t)count);
    for (int64_t i = 0; i < count; i++) l.l->v[i] = jv_int(v[0] + i * v[2]);
    return l;
}

static void run_loop(jrender *r, jframe *f, const jnode *n, jval items, int depth);

jval jeval_call_macro(jrender *r, jfunc *fn, const jargs *args, int line, int col)
{
    const jnode *m = fn->macro;
    if (++r->depth > (r->opts && r->opts->max_depth ? r->opts->max_depth : JINJA_MAX_DEPTH))
        j_fail(line, col, "macros nest more than %d deep", r->opts && r->opts->max_depth ? r->opts->max_depth : JINJA_MAX_DEPTH);
    jrender_count(r, line, col);
    jframe *f = frame_new(r, fn->closure);
    int pos = 0;
    for (int i = 0; i < args->n; i++) {
        if (args->kw[i]) continue;
        if (pos >= m->nsyms) j_fail(line, col, "macro '%s' takes %d arguments, given more", m->name ? m->name : "caller", m->nsyms);
        frame_set(r, f, m->syms[pos++], args->v[i]);
    }
    for (int k = pos; k < m->nsyms; k++) {
        jval v = jargs_get(args, -1, r->t->syms[m->syms[k]], J_UNDEF);
        if (v.t == JT_UNDEF && m->defaults[k]) v = eval(r, f, m->defaults[k]);
        if (v.t == JT_UNDEF) v.undef_name = r->t->syms[m->syms[k]];
        frame_set(r, f, m->syms[k], v);
    }
    if (fn->caller) frame_set(r, f, r->t->sym_caller, (jval){.t = JT_FUNC, .fn = fn->caller});
    strbuf *saved;
    capture_begin(r, &saved);
    exec(r, f, m->b);
    r->depth--;
    return capture_end(r, saved);
}

static jval call_value(jrender *r, jval fv, const jargs *args, const jnode *n)
{
    if (fv.t == JT_FUNC) {
        if (fv.fn->kind == JF_MACRO) return jeval_call_macro(r, fv.fn, args, n->line, n->col);
        if (fv.fn->kind == JF_METHOD) return jmethod_call(r, fv.fn->self, fv.fn->name, args, n->line, n->col);
        return call_global(r, fv.fn->name, args, n);
    }
    if (fv.t == JT_LOOP && fv.loop->node->recursive) {
        strbuf *saved;
        capture_begin(r, &saved);
        run_loop(r, fv.loop->frame, fv.loop->node, jargs_get(args, 0, NULL, J_UNDEF), fv.loop->depth + 1);
        return capture_end(r, saved);
    }
    if (fv.t == JT_UNDEF) j_fail(n->line, n->col, "'%s' is undefined (called as a function)", fv.undef_name ? fv.undef_name : "value");
    j_fail(n->line, n->col, "'%s' object is not callable", jv_type_name(fv));
}

static jval eval_call(jrender *r, jframe *f, const jnode *n)
{
    const jnode *callee = n->a;
    if (callee->kind == N_ATTR) {
        jval self = eval(r, f, callee->a);
        if (self.t == JT_UNDEF)
            j_fail(n->line, n->col, "'%s' is undefined (calling its %s)", self.undef_name ? self.undef_name : "value", callee->name);
        if (self.t != JT_NS && jmethod_exists(self, callee->name)) {
            jargs args = eval_args(r, f, n);
            return jmethod_call(r, self, callee->name, &args, n->line, n->col);
        }
        jval fv = jv_getattr(r, self, callee->name, callee->name_len);
        jargs args = eval_args(r, f, n);
        return call_value(r, fv, &args, n);
    }
    jval fv = eval(r, f, callee);
    jargs args = eval_args(r, f, n);
    return call_value(r, fv, &args, n);
}

/* ---- expressions ---- */

static jval eval_filter(jrender *r, jframe *f, const jnode *n, jval input)
{
    jval v = n->a ? (n->a->kind == N_FILTER ? eval_filter(r, f, n->a, input) : eval(r, f, n->a)) : input;
    jargs args = eval_args(r, f, n);
    return jfilter_apply(r, n->name, v, &args, n->line, n->col);
}

static jval eval_seq(jrender *r, jframe *f, const jnode *n)
{
    if (n->kind == N_DICT) {
        jval d = jv_dict(r->a);
        for (int i = 0; i + 1 < n->nkids; i += 2) jd_set(r->a, d.d, eval(r, f, n->kids[i]), eval(r, f, n->kids[i + 1]));
        return d;
    }
    jval l = jv_list(r->a, (size_t)n->nkids);
    for (int i = 0; i < n->nkids; i++) l.l->v[i] = eval(r, f, n->kids[i]);
    l.l->tuple = n->kind == N_TUPLE;
    return l;
}

static jval eval_compare(jrender *r, jframe *f, const jnode *n)
{
    jval a = eval(r, f, n->kids[0]);
    for (int i = 1; i < n->nkids; i++) {
        jval b = eval(r, f, n->kids[i]);
        if (!compare(r, n, n->ops[i - 1], a, b)) return jv_bool(false);
        a = b;
    }
    return jv_bool(true);
}

/* a ~ b ~ ...: the string grows in a buffer on r->captures, so a failure further down (which
 * leaves through j_fail) still frees it with the render's other buffers */
static jval eval_concat(jrender *r, jframe *f, const jnode *n)
{
    struct jcapture *c = ja_alloc(r->a, sizeof *c);
    *c = (struct jcapture){.next = r->captures};
    r->captures = c;
    for (int i = 0; i < n->nkids; i++) {
        jval v = eval(r, f, n->kids[i]);
        jv_str_out(v, &c->sb);
        if (c->sb.len > r->a->limit) j_fail(n->line, n->col, "a string of more than %zu MB", r->a->limit >> 20);
    }
    jval s = jv_str(r->a, sb_text(&c->sb), c->sb.len);
    sb_free(&c->sb);
    r->captures = c->next;
    return s;
}

static jval eval(jrender *r, jframe *f, const jnode *n)
{
    switch (n->kind) {
    case N_CONST: return n->lit;
    case N_NAME: return lookup(r, f, n);
    case N_ATTR: {
        jval o = eval(r, f, n->a);
        if (o.t == JT_UNDEF)
            j_fail(n->line, n->col, "'%s' is undefined (looking up its attribute '%s')", o.undef_name ? o.undef_name : "value", n->name);
        return jv_getattr(r, o, n->name, n->name_len);
    }
    case N_ITEM: {
        jval o = eval(r, f, n->a);
        return jv_getitem(r, o, eval(r, f, n->b), n->line, n->col);
    }
    case N_SLICE: {
        jval o = eval(r, f, n->a);
        jval a = n->b ? eval(r, f, n->b) : J_NONE, b = n->c ? eval(r, f, n->c) : J_NONE, c = n->d ? eval(r, f, n->d) : J_NONE;
        return jv_slice(r, o, a, b, c, n->line, n->col);
    }
    case N_CALL: return eval_call(r, f, n);
    case N_FILTER: return eval_filter(r, f, n, J_UNDEF);
    case N_TEST: {
        jval v = eval(r, f, n->a);
        jargs args = eval_args(r, f, n);
        return jv_bool(jtest_apply(r, n->name, v, &args, n->line, n->col) != n->flag);
    }
    case N_BIN: return arith(r, n, eval(r, f, n->a), eval(r, f, n->b));
    case N_NEG:
    case N_POS: {
        jval v = eval(r, f, n->a);
        if (!numlike(v)) bad_operands(n, n->kind == N_NEG ? "unary -" : "unary +", v, v);
        if (n->kind == N_POS) return v.t == JT_BOOL ? jv_int(v.b) : v;
        if (v.t == JT_FLOAT) return jv_float(-v.f);
        if (ival(v) == INT64_MIN) j_fail(n->line, n->col, "integer overflow");
        return jv_int(-ival(v));
    }
    case N_NOT: return jv_bool(!jv_truthy(eval(r, f, n->a)));
    case N_AND: {
        jval a = eval(r, f, n->a);
        return jv_truthy(a) ? eval(r, f, n->b) : a;
    }
    case N_OR: {
        jval a = eval(r, f, n->a);
        return jv_truthy(a) ? a : eval(r, f, n->b);
    }
    case N_COND:
        if (jv_truthy(eval(r, f, n->a))) return eval(r, f, n->b);
        return n->c ? eval(r, f, n->c) : J_UNDEF;
    case N_LIST:
    case N_TUPLE:
    case N_DICT: return eval_seq(r, f, n);
    case N_COMPARE: return eval_compare(r, f, n);
    case N_CONCAT: return eval_concat(r, f, n);
    default: j_fail(n->line, n->col, "not an expression");
    }
}

/* ---- statements ---- */

static void output(jrender *r, const jnode *n, jval v)
{
    jstr *s = jv_to_jstr(r->a, v);
    jrender_out(r, s->p, s->n, n->line, n->col);
}

static void assign(jrender *r, jframe *f, const jnode *n, jval v)
{
    if (!n->flag) {
        frame_set(r, f, n->syms[0], v);
        return;
    }
    if (v.t == JT_DICT) v = jv_iter_list(r, v, n->line, n->col);
    if (v.t != JT_LIST && v.t != JT_STR) j_fail(n->line, n->col, "cannot unpack %s", jv_type_name(v));
    v = jv_iter_list(r, v, n->line, n->col);
    if ((int)v.l->n != n->nsyms)
        j_fail(n->line, n->col, "cannot unpack %zu values into %d names", v.l->n, n->nsyms);
    for (int i = 0; i < n->nsyms; i++) frame_set(r, f, n->syms[i], v.l->v[i]);
}

static void run_loop(jrender *r, jframe *f, const jnode *n, jval iterable, int depth)
{
    if (depth > (r->opts && r->opts->max_depth ? r->opts->max_depth : JINJA_MAX_DEPTH))
        j_fail(n->line, n->col, "recursive loops nest too deep");
    jval items = jv_iter_list(r, iterable, n->line, n->col);
    jframe *lf = frame_new(r, f);
    if (n->d) { /* the loop's filter: items for which it holds, loop.* counting those */
        jval kept = jv_list(r->a, items.l->n);
        size_t k = 0;
        for (size_t i = 0; i < items.l->n; i++) {
            jrender_count(r, n->line, n->col);
            assign(r, lf, n, items.l->v[i]);
            if (jv_truthy(eval(r, lf, n->d))) kept.l->v[k++] = items.l->v[i];
        }
        kept.l->n = k;
        items = kept;
    }
    jloop *L = ja_alloc(r->a, sizeof *L);
    *L = (jloop){.items = items, .depth = depth, .node = n, .frame = f};
    for (size_t i = 0; i < items.l->n; i++) { /* each iteration starts from the outer values */
        jrender_count(r, n->line, n->col);
        L->i = i;
        jframe *it = frame_new(r, f);
        assign(r, it, n, items.l->v[i]);
        frame_set(r, it, r->t->sym_loop, (jval){.t = JT_LOOP, .loop = L});
        if (exec(r, it, n->b) == FLOW_BREAK) break;
    }
    if (!items.l->n && n->c) exec(r, f, n->c);
}

static flow exec_body(jrender *r, jframe *f, const jnode *n)
{
    for (int i = 0; i < n->nkids; i++) {
        flow fl = exec(r, f, n->kids[i]);
        if (fl != FLOW_NEXT) return fl;
    }
    return FLOW_NEXT;
}

static jval block_text(jrender *r, jframe *f, const jnode *body)
{
    strbuf *saved;
    capture_begin(r, &saved);
    exec(r, f, body);
    return capture_end(r, saved);
}

static void exec_generation(jrender *r, jframe *f, const jnode *n)
{
    size_t start = r->out->len;
    exec(r, f, n->b);
    if (r->capturing) return;
    if (r->n_spans == r->cap_spans) {
        int cap = r->cap_spans ? 2 * r->cap_spans : 8;
        size_t *s = ja_alloc(r->a, 2 * (size_t)cap * sizeof *s);
        if (r->n_spans) memcpy(s, r->spans, 2 * (size_t)r->n_spans * sizeof *s);
        r->spans = s, r->cap_spans = cap;
    }
    r->spans[2 * r->n_spans] = start;
    r->spans[2 * r->n_spans++ + 1] = r->out->len;
}

static jfunc *macro_value(jrender *r, jframe *f, const jnode *n)
{
    jfunc *fn = ja_alloc(r->a, sizeof *fn);
    *fn = (jfunc){.kind = JF_MACRO, .macro = n, .closure = f, .name = n->name};
    return fn;
}

static void exec_call_block(jrender *r, jframe *f, const jnode *n)
{
    jval fv = eval(r, f, n->a->a);
    if (fv.t != JT_FUNC || fv.fn->kind != JF_MACRO) j_fail(n->line, n->col, "{%% call %%} needs a macro");
    jfunc *caller = macro_value(r, f, n);
    jfunc with = *fv.fn;
    with.caller = caller;
    jargs args = eval_args(r, f, n->a);
    jval v = jeval_call_macro(r, &with, &args, n->line, n->col);
    jrender_out(r, v.s->p, v.s->n, n->line, n->col);
}

static flow exec(jrender *r, jframe *f, const jnode *n)
{
    r->line = n->line, r->col = n->col;
    switch (n->kind) {
    case N_BODY: return exec_body(r, f, n);
    case N_DATA: jrender_out(r, n->lit.s->p, n->lit.s->n, n->line, n->col); break;
    case N_OUTPUT: output(r, n, eval(r, f, n->a)); break;
    case N_IF:
        if (jv_truthy(eval(r, f, n->a))) return exec(r, f, n->b);
        if (n->c) return exec(r, f, n->c);
        break;
    case N_FOR: run_loop(r, f, n, eval(r, f, n->a), 1); break;
    case N_SET: assign(r, f, n, eval(r, f, n->a)); break;
    case N_SET_ATTR: {
        const jval *ns = frame_find(f, n->sym);
        if (!ns || ns->t != JT_NS) j_fail(n->line, n->col, "cannot assign attribute on non-namespace object '%s'", r->t->syms[n->sym]);
        if (n->name[0] == '_') j_fail(n->line, n->col, "a namespace cannot hold underscore-prefixed attributes ('%s')", n->name);
        jd_set(r->a, ns->d, jv_str_ref(r->a, n->name, n->name_len), eval(r, f, n->a));
        break;
    }
    case N_SET_BLOCK: {
        jval v = block_text(r, f, n->b);
        assign(r, f, n, n->d ? eval_filter(r, f, n->d, v) : v);
        break;
    }
    case N_FILTER_BLOCK: {
        jval v = eval_filter(r, f, n->d, block_text(r, f, n->b));
        output(r, n, v);
        break;
    }
    case N_MACRO: frame_set(r, f, n->sym, (jval){.t = JT_FUNC, .fn = macro_value(r, f, n)}); break;
    case N_CALL_BLOCK: exec_call_block(r, f, n); break;
    case N_GENERATION: exec_generation(r, f, n); break;
    case N_BREAK: return FLOW_BREAK;
    case N_CONTINUE: return FLOW_CONTINUE;
    default: j_fail(n->line, n->col, "not a statement");
    }
    return FLOW_NEXT;
}

void jeval_render(jrender *r, const jnode *root) { exec(r, r->globals, root); }
