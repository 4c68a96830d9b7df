/* jparse.c — tokens to the tree, by Jinja2's grammar: statements (if/elif/else, for with its
 * filter, else and recursive, set in its three forms, macro, call, filter blocks, transformers'
 * generation blocks, break/continue), and expressions at Jinja's precedences (conditional, or,
 * and, not, comparisons and in, + -, ~, * / // %, ** left to right, unary - +, then postfix
 * attribute, subscript, slice and call, then filters and tests). Names become variable numbers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

#define MAX_NEST 200

typedef struct {
    jinja_template *t;
    const jtokens *tk;
    size_t i;
    int nest, loops;
} parser;

/* ---- tokens ---- */

static const jtoken *cur(const parser *P) { return &P->tk->t[P->i]; }
static const jtoken *next_tok(parser *P) { return &P->tk->t[P->i < P->tk->n - 1 ? P->i++ : P->i]; }

static bool is_op(const jtoken *t, const char *op) { return t->kind == TK_OP && !strcmp(t->op, op); }
static bool is_name(const jtoken *t, const char *name)
{
    return t->kind == TK_NAME && t->n == strlen(name) && !memcmp(t->p, name, t->n);
}

static const char *describe(const jtoken *t, char *buf, size_t n)
{
    switch (t->kind) {
    case TK_NAME: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p); break;
    case TK_OP: snprintf(buf, n, "'%s'", t->op); break;
    case TK_STRING: snprintf(buf, n, "a string"); break;
    case TK_INT:
    case TK_FLOAT: snprintf(buf, n, "a number"); break;
    case TK_VAR_END: snprintf(buf, n, "'}}'"); break;
    case TK_BLOCK_END: snprintf(buf, n, "'%%}'"); break;
    case TK_EOF: snprintf(buf, n, "the end of the template"); break;
    default: snprintf(buf, n, "text"); break;
    }
    return buf;
}

_Noreturn static void unexpected(const parser *P, const char *wanted)
{
    char buf[64];
    const jtoken *t = cur(P);
    j_fail(t->line, t->col, "expected %s, found %s", wanted, describe(t, buf, sizeof buf));
}

static void expect_op(parser *P, const char *op)
{
    if (!is_op(cur(P), op)) {
        char want[16];
        snprintf(want, sizeof want, "'%s'", op);
        unexpected(P, want);
    }
    next_tok(P);
}

static void expect_kind(parser *P, tk_kind kind, const char *what)
{
    if (cur(P)->kind != kind) unexpected(P, what);
    next_tok(P);
}

static const jtoken *expect_name(parser *P)
{
    if (cur(P)->kind != TK_NAME) unexpected(P, "a name");
    return next_tok(P);
}

/* ---- nodes ---- */

static jnode *node(parser *P, jnode_kind kind, const jtoken *at)
{
    jnode *n = ja_alloc(&P->t->arena, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = (uint8_t)kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

typedef struct {
    jnode **v;
    const char **kw;
    int n, cap;
} nodelist;

static void push(parser *P, nodelist *l, jnode *n, const char *kw)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 4;
        jnode **v = ja_alloc(&P->t->arena, (size_t)cap * sizeof *v);
        const char **k = ja_alloc(&P->t->arena, (size_t)cap * sizeof *k);
        if (l->n) memcpy(v, l->v, (size_t)l->n * sizeof *v), memcpy(k, l->kw, (size_t)l->n * sizeof *k);
        l->v = v, l->kw = k, l->cap = cap;
    }
    l->kw[l->n] = kw;
    l->v[l->n++] = n;
}

static void set_kids(jnode *n, const nodelist *l)
{
    n->kids = l->v;
    n->kw = l->kw;
    n->nkids = l->n;
}

int jsym(jinja_template *t, const char *name, size_t n)
{
    for (int i = 0; i < t->nsyms; i++)
        if (strlen(t->syms[i]) == n && !memcmp(t->syms[i], name, n)) return i;
    if (t->nsyms == t->cap_syms) {
        int cap = t->cap_syms ? 2 * t->cap_syms : 32;
        const char **s = ja_alloc(&t->arena, (size_t)cap * sizeof *s);
        if (t->nsyms) memcpy(s, t->syms, (size_t)t->nsyms * sizeof *s);
        t->syms = s;
        t->cap_syms = cap;
    }
    jval v = jv_str(&t->arena, name, n);
    t->syms[t->nsyms] = v.s->p;
    return t->nsyms++;
}

static const char *tok_text(parser *P, const jtoken *t) { return jv_str(&P->t->arena, t->p, t->n).s->p; }

/* ---- expressions ---- */

static jnode *parse_expr(parser *P, bool condexpr);
static jnode *parse_or(parser *P);
static jnode *parse_unary(parser *P, bool with_filter);
static jnode *parse_tuple(parser *P, bool parens, bool condexpr);

static void enter(parser *P)
{
    if (++P->nest > MAX_NEST) j_fail(cur(P)->line, cur(P)->col, "the template nests more than %d deep", MAX_NEST);
}

/* Arguments after "(": positional and name=value, up to ")". */
static void parse_args(parser *P, jnode *call)
{
    nodelist l = {0};
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (l.n) expect_op(P, ",");
        if (is_op(cur(P), ")")) break;
        const char *kw = NULL;
        if (cur(P)->kind == TK_NAME && is_op(&P->tk->t[P->i + 1], "=")) {
            kw = tok_text(P, next_tok(P));
            next_tok(P);
        } else if (is_op(cur(P), "*") || is_op(cur(P), "**")) {
            j_fail(cur(P)->line, cur(P)->col, "*args and **kwargs in calls are not supported");
        }
        push(P, &l, parse_expr(P, true), kw);
    }
    next_tok(P);
    set_kids(call, &l);
}

static jnode *parse_literal_seq(parser *P, const jtoken *at, const char *close, jnode_kind kind)
{
    jnode *n = node(P, kind, at);
    nodelist l = {0};
    while (!is_op(cur(P), close)) {
        if (l.n) expect_op(P, ",");
        if (is_op(cur(P), close)) break;
        push(P, &l, parse_expr(P, true), NULL);
        if (kind == N_DICT) {
            expect_op(P, ":");
            push(P, &l, parse_expr(P, true), NULL);
        }
    }
    next_tok(P);
    set_kids(n, &l);
    return n;
}

static jnode *parse_primary(parser *P)
{
    const jtoken *t = next_tok(P);
    jnode *n;
    switch (t->kind) {
    case TK_NAME:
        n = node(P, N_CONST, t);
        if (is_name(t, "true") || is_name(t, "True")) n->lit = jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False")) n->lit = jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None")) n->lit = J_NONE;
        else n->kind = N_NAME, n->sym = jsym(P->t, t->p, t->n);
        return n;
    case TK_STRING: {
        strbuf sb = {0};
        sb_append(&sb, t->p, t->n);
        while (cur(P)->kind == TK_STRING) sb_append(&sb, cur(P)->p, cur(P)->n), next_tok(P);
        n = node(P, N_CONST, t);
        n->lit = jv_str(&P->t->arena, sb_text(&sb), sb.len);
        sb_free(&sb);
        return n;
    }
    case TK_INT: n = node(P, N_CONST, t), n->lit = jv_int(t->i); return n;
    case TK_FLOAT: n = node(P, N_CONST, t), n->lit = jv_float(t->f); return n;
    case TK_OP:
        if (is_op(t, "(")) {
            n = parse_tuple(P, true, true);
            expect_op(P, ")");
            return n;
        }
        if (is_op(t, "[")) return parse_literal_seq(P, t, "]", N_LIST);
        if (is_op(t, "{")) return parse_literal_seq(P, t, "}", N_DICT);
        break;
    default: break;
    }
    P->i--;
    unexpected(P, "an expression");
}

static jnode *parse_slice_part(parser *P)
{
    return is_op(cur(P), ":") || is_op(cur(P), "]") || is_op(cur(P), ",") ? NULL : parse_expr(P, true);
}

static jnode *parse_subscript(parser *P, jnode *obj, const jtoken *at)
{
    jnode *first = parse_slice_part(P);
    if (!is_op(cur(P), ":")) {
        if (!first) unexpected(P, "an expression");
        jnode *n = node(P, N_ITEM, at);
        n->a = obj, n->b = first;
        expect_op(P, "]");
        return n;
    }
    jnode *n = node(P, N_SLICE, at);
    n->a = obj, n->b = first;
    next_tok(P);
    n->c = parse_slice_part(P);
    if (is_op(cur(P), ":")) next_tok(P), n->d = parse_slice_part(P);
    expect_op(P, "]");
    return n;
}

static jnode *parse_postfix(parser *P, jnode *n)
{
    for (;;) {
        const jtoken *t = cur(P);
        if (is_op(t, ".")) {
            next_tok(P);
            const jtoken *a = next_tok(P);
            jnode *g = node(P, a->kind == TK_INT ? N_ITEM : N_ATTR, t);
            g->a = n;
            if (a->kind == TK_INT) g->b = node(P, N_CONST, a), g->b->lit = jv_int(a->i);
            else if (a->kind == TK_NAME) g->name = tok_text(P, a), g->name_len = a->n;
            else P->i--, unexpected(P, "an attribute name");
            n = g;
        } else if (is_op(t, "[")) {
            next_tok(P);
            n = parse_subscript(P, n, t);
        } else if (is_op(t, "(")) {
            jnode *c = node(P, N_CALL, t);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else return n;
    }
}

static jnode *parse_filter(parser *P, jnode *value)
{
    const jtoken *t = expect_name(P);
    size_t first = P->i - 1, parts = 1;
    /* the dotted name's tokens first: a parse error jumps out before anything is allocated */
    while (is_op(cur(P), ".")) next_tok(P), expect_name(P), parts++;
    jnode *f = node(P, N_FILTER, t);
    strbuf name = {0};
    for (size_t k = 0; k < parts; k++) {
        const jtoken *part = &P->tk->t[first + 2 * k];
        if (k) sb_printf(&name, ".");
        sb_append(&name, part->p, part->n);
    }
    f->a = value;
    f->name = jv_str(&P->t->arena, sb_text(&name), name.len).s->p;
    sb_free(&name);
    if (is_op(cur(P), "(")) parse_args(P, f);
    return f;
}

static jnode *parse_test(parser *P, jnode *value)
{
    jnode *f = node(P, N_TEST, cur(P));
    if (is_name(cur(P), "not")) next_tok(P), f->flag = true;
    const jtoken *t = expect_name(P);
    f->a = value;
    f->name = tok_text(P, t);
    const jtoken *c = cur(P);
    if (is_op(c, "(")) parse_args(P, f);
    else if ((c->kind == TK_NAME || c->kind == TK_STRING || c->kind == TK_INT || c->kind == TK_FLOAT || is_op(c, "(") ||
              is_op(c, "[") || is_op(c, "{")) && !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is")) j_fail(c->line, c->col, "tests cannot be chained with 'is'");
        nodelist l = {0};
        push(P, &l, parse_postfix(P, parse_primary(P)), NULL);
        set_kids(f, &l);
    }
    return f;
}

static jnode *parse_filter_expr(parser *P, jnode *n)
{
    for (;;) {
        const jtoken *t = cur(P);
        if (is_op(t, "|")) next_tok(P), n = parse_filter(P, n);
        else if (is_name(t, "is")) next_tok(P), n = parse_test(P, n);
        else if (is_op(t, "(")) {
            jnode *c = node(P, N_CALL, t);
            c->a = n;
            parse_args(P, c);
            n = c;
        } else return n;
    }
}

static jnode *parse_unary(parser *P, bool with_filter)
{
    enter(P);
    const jtoken *t = cur(P);
    jnode *n;
    if (is_op(t, "-") || is_op(t, "+")) {
        next_tok(P);
        n = node(P, is_op(t, "-") ? N_NEG : N_POS, t);
        n->a = parse_unary(P, false);
    } else n = parse_primary(P);
    n = parse_postfix(P, n);
    if (with_filter) n = parse_filter_expr(P, n);
    P->nest--;
    return n;
}

static jnode *binary(parser *P, const jtoken *t, jnode *a, jnode *b)
{
    jnode *n = node(P, N_BIN, t);
    memcpy(n->op, t->op, sizeof n->op);
    n->a = a, n->b = b;
    return n;
}

static jnode *parse_pow(parser *P)
{
    jnode *n = parse_unary(P, true);
    while (is_op(cur(P), "**")) {
        const jtoken *t = next_tok(P);
        n = binary(P, t, n, parse_unary(P, true));
    }
    return n;
}

static jnode *parse_math2(parser *P)
{
    jnode *n = parse_pow(P);
    while (is_op(cur(P), "*") || is_op(cur(P), "/") || is_op(cur(P), "//") || is_op(cur(P), "%")) {
        const jtoken *t = next_tok(P);
        n = binary(P, t, n, parse_pow(P));
    }
    return n;
}

static jnode *parse_concat(parser *P)
{
    jnode *n = parse_math2(P);
    if (!is_op(cur(P), "~")) return n;
    jnode *c = node(P, N_CONCAT, cur(P));
    nodelist l = {0};
    push(P, &l, n, NULL);
    while (is_op(cur(P), "~")) next_tok(P), push(P, &l, parse_math2(P), NULL);
    set_kids(c, &l);
    return c;
}

static jnode *parse_math1(parser *P)
{
    jnode *n = parse_concat(P);
    while (is_op(cur(P), "+") || is_op(cur(P), "-")) {
        const jtoken *t = next_tok(P);
        n = binary(P, t, n, parse_concat(P));
    }
    return n;
}

static const char *compare_op(parser *P)
{
    static const char *const ops[] = {"==", "!=", "<", "<=", ">", ">="};
    const jtoken *t = cur(P);
    for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
        if (is_op(t, ops[k])) return next_tok(P), ops[k];
    if (is_name(t, "in")) return next_tok(P), "in";
    if (is_name(t, "not") && is_name(&P->tk->t[P->i + 1], "in")) return P->i += 2, "notin";
    return NULL;
}

static jnode *parse_compare(parser *P)
{
    const jtoken *at = cur(P);
    jnode *first = parse_math1(P);
    const char *op = compare_op(P);
    if (!op) return first;
    jnode *n = node(P, N_COMPARE, at);
    nodelist l = {0}, ops = {0};
    push(P, &l, first, NULL);
    for (; op; op = compare_op(P)) push(P, &l, parse_math1(P), NULL), push(P, &ops, NULL, op);
    set_kids(n, &l);
    n->ops = ops.kw;
    return n;
}

static jnode *parse_not(parser *P)
{
    if (!is_name(cur(P), "not")) return parse_compare(P);
    enter(P);
    jnode *n = node(P, N_NOT, next_tok(P));
    n->a = parse_not(P);
    P->nest--;
    return n;
}

static jnode *parse_and(parser *P)
{
    jnode *n = parse_not(P);
    while (is_name(cur(P), "and")) {
        jnode *b = node(P, N_AND, next_tok(P));
        b->a = n, b->b = parse_not(P);
        n = b;
    }
    return n;
}

static jnode *parse_or(parser *P)
{
    jnode *n = parse_and(P);
    while (is_name(cur(P), "or")) {
        jnode *b = node(P, N_OR, next_tok(P));
        b->a = n, b->b = parse_and(P);
        n = b;
    }
    return n;
}

static jnode *parse_expr(parser *P, bool condexpr)
{
    enter(P);
    jnode *n = parse_or(P);
    while (condexpr && is_name(cur(P), "if")) {
        jnode *c = node(P, N_COND, next_tok(P));
        c->b = n;
        c->a = parse_or(P);
        if (is_name(cur(P), "else")) next_tok(P), c->c = parse_expr(P, true);
        n = c;
    }
    P->nest--;
    return n;
}

/* Expressions separated by commas: one, or a tuple when there is a comma (or "()"). */
static jnode *parse_tuple(parser *P, bool parens, bool condexpr)
{
    const jtoken *at = cur(P);
    nodelist l = {0};
    bool comma = false;
    for (;;) {
        if (l.n) {
            if (!is_op(cur(P), ",")) break;
            next_tok(P), comma = true;
        }
        const jtoken *t = cur(P);
        if (t->kind == TK_VAR_END || t->kind == TK_BLOCK_END || is_op(t, ")") || is_name(t, "recursive") ||
            (l.n && is_op(t, "=")))
            break;
        push(P, &l, parse_expr(P, condexpr), NULL);
    }
    if (l.n == 1 && !comma) return l.v[0];
    if (!l.n && !parens) unexpected(P, "an expression");
    jnode *n = node(P, N_TUPLE, at);
    set_kids(n, &l);
    return n;
}

/* ---- statements ---- */

static jnode *parse_body(parser *P, const char *const *ends);

/* The names a for or set binds: one, or several as a tuple ("a, b" or "(a, b)"). */
static void parse_targets(parser *P, jnode *n)
{
    bool paren = is_op(cur(P), "(");
    if (paren) next_tok(P);
    int syms[16], k = 0;
    do {
        if (k && is_op(cur(P), ",")) next_tok(P);
        if (k == 16) j_fail(cur(P)->line, cur(P)->col, "more than 16 names to unpack");
        const jtoken *t = expect_name(P);
        syms[k++] = jsym(P->t, t->p, t->n);
    } while (is_op(cur(P), ","));
    if (paren) expect_op(P, ")");
    n->syms = ja_alloc(&P->t->arena, (size_t)k * sizeof *n->syms);
    memcpy(n->syms, syms, (size_t)k * sizeof *syms);
    n->nsyms = k;
    n->flag = k > 1 || paren;
}

static bool at_end_name(parser *P, const char *name)
{
    if (!is_name(cur(P), name)) return false;
    next_tok(P);
    return true;
}

static jnode *parse_if(parser *P, const jtoken *at)
{
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    jnode *n = node(P, N_IF, at);
    n->a = parse_tuple(P, false, false);
    expect_kind(P, TK_BLOCK_END, "'%}'");
    n->b = parse_body(P, ends);
    const jtoken *t = next_tok(P);
    if (is_name(t, "elif")) n->c = parse_if(P, t);
    else if (is_name(t, "else")) {
        static const char *const end[] = {"endif", NULL};
        expect_kind(P, TK_BLOCK_END, "'%}'");
        n->c = parse_body(P, end);
        next_tok(P);
    }
    return n;
}

static jnode *parse_for(parser *P, const jtoken *at)
{
    static const char *const ends[] = {"endfor", "else", NULL}, *const end[] = {"endfor", NULL};
    jnode *n = node(P, N_FOR, at);
    parse_targets(P, n);
    if (!at_end_name(P, "in")) unexpected(P, "'in'");
    n->a = parse_tuple(P, false, false);
    if (at_end_name(P, "if")) n->d = parse_expr(P, true);
    if (at_end_name(P, "recursive")) n->recursive = true;
    expect_kind(P, TK_BLOCK_END, "'%}'");
    P->loops++;
    n->b = parse_body(P, ends);
    P->loops--;
    if (is_name(next_tok(P), "else")) {
        expect_kind(P, TK_BLOCK_END, "'%}'");
        n->c = parse_body(P, end);
        next_tok(P);
    }
    return n;
}

static jnode *parse_set(parser *P, const jtoken *at)
{
    jnode *n = node(P, N_SET, at);
    if (cur(P)->kind == TK_NAME && is_op(&P->tk->t[P->i + 1], ".")) {
        n->kind = N_SET_ATTR;
        const jtoken *t = next_tok(P);
        n->sym = jsym(P->t, t->p, t->n);
        next_tok(P);
        const jtoken *a = expect_name(P);
        n->name = tok_text(P, a), n->name_len = a->n;
        expect_op(P, "=");
        n->a = parse_tuple(P, false, true);
        return n;
    }
    parse_targets(P, n);
    if (is_op(cur(P), "=")) {
        next_tok(P);
        n->a = parse_tuple(P, false, true);
        return n;
    }
    static const char *const end[] = {"endset", NULL};
    n->kind = N_SET_BLOCK;
    jnode *filters = NULL;
    while (is_op(cur(P), "|")) next_tok(P), filters = parse_filter(P, filters);
    n->d = filters;
    expect_kind(P, TK_BLOCK_END, "'%}'");
    n->b = parse_body(P, end);
    next_tok(P);
    return n;
}

/* "(a, b=default, ...)" of a macro or a call block's caller. */
static void parse_params(parser *P, jnode *n)
{
    int syms[64], k = 0;
    jnode *defaults[64];
    expect_op(P, "(");
    while (!is_op(cur(P), ")")) {
        if (k) expect_op(P, ",");
        if (k == 64) j_fail(cur(P)->line, cur(P)->col, "more than 64 parameters");
        const jtoken *t = expect_name(P);
        syms[k] = jsym(P->t, t->p, t->n);
        defaults[k] = NULL;
        if (is_op(cur(P), "=")) next_tok(P), defaults[k] = parse_expr(P, true);
        k++;
    }
    next_tok(P);
    n->syms = ja_alloc(&P->t->arena, (size_t)(k + 1) * sizeof *n->syms);
    n->defaults = ja_alloc(&P->t->arena, (size_t)(k + 1) * sizeof *n->defaults);
    memcpy(n->syms, syms, (size_t)k * sizeof *syms);
    memcpy(n->defaults, defaults, (size_t)k * sizeof *defaults);
    n->nsyms = k;
}

static jnode *parse_macro(parser *P, const jtoken *at)
{
    static const char *const end[] = {"endmacro", NULL};
    jnode *n = node(P, N_MACRO, at);
    const jtoken *t = expect_name(P);
    n->sym = jsym(P->t, t->p, t->n);
    n->name = tok_text(P, t);
    parse_params(P, n);
    expect_kind(P, TK_BLOCK_END, "'%}'");
    int loops = P->loops;
    P->loops = 0;
    n->b = parse_body(P, end);
    P->loops = loops;
    next_tok(P);
    return n;
}

static jnode *parse_call_block(parser *P, const jtoken *at)
{
    static const char *const end[] = {"endcall", NULL};
    jnode *n = node(P, N_CALL_BLOCK, at);
    if (is_op(cur(P), "(")) parse_params(P, n);
    n->a = parse_expr(P, true);
    if (n->a->kind != N_CALL) j_fail(at->line, at->col, "{%% call %%} needs a call expression");
    expect_kind(P, TK_BLOCK_END, "'%}'");
    n->b = parse_body(P, end);
    next_tok(P);
    return n;
}

static jnode *parse_block_of(parser *P, const jtoken *at, jnode_kind kind, const char *endname)
{
    const char *const end[] = {endname, NULL};
    jnode *n = node(P, kind, at);
    if (kind == N_FILTER_BLOCK) {
        n->d = parse_filter(P, NULL);
        while (is_op(cur(P), "|")) next_tok(P), n->d = parse_filter(P, n->d);
    }
    expect_kind(P, TK_BLOCK_END, "'%}'");
    n->b = parse_body(P, end);
    next_tok(P);
    return n;
}

static jnode *parse_statement(parser *P)
{
    const jtoken *t = expect_name(P);
    jnode *n;
    if (is_name(t, "if")) n = parse_if(P, t);
    else if (is_name(t, "for")) n = parse_for(P, t);
    else if (is_name(t, "set")) n = parse_set(P, t);
    else if (is_name(t, "macro")) n = parse_macro(P, t);
    else if (is_name(t, "call")) n = parse_call_block(P, t);
    else if (is_name(t, "filter")) n = parse_block_of(P, t, N_FILTER_BLOCK, "endfilter");
    else if (is_name(t, "generation")) n = parse_block_of(P, t, N_GENERATION, "endgeneration"), P->t->has_generation = true;
    else if (is_name(t, "break") || is_name(t, "continue")) {
        if (!P->loops) j_fail(t->line, t->col, "'%.*s' outside of a loop", (int)t->n, t->p);
        n = node(P, is_name(t, "break") ? N_BREAK : N_CONTINUE, t);
    } else {
        j_fail(t->line, t->col, "unknown tag '%.*s' (chat templates may use if, for, set, macro, call, filter, "
               "generation, break, continue)", (int)(t->n > 40 ? 40 : t->n), t->p);
    }
    expect_kind(P, TK_BLOCK_END, "'%}'");
    return n;
}

/* Statements and text up to a {% tag named in ends (left at that name), or the end (ends NULL). */
static jnode *parse_body(parser *P, const char *const *ends)
{
    enter(P);
    jnode *body = node(P, N_BODY, cur(P));
    nodelist l = {0};
    for (;;) {
        const jtoken *t = cur(P);
        if (t->kind == TK_EOF) {
            if (!ends) break;
            j_fail(t->line, t->col, "the template ends where '{%% %s %%}' was expected", ends[0]);
        }
        if (t->kind == TK_DATA) {
            jnode *d = node(P, N_DATA, t);
            d->lit = jv_str_ref(&P->t->arena, t->p, t->n);
            push(P, &l, d, NULL);
            next_tok(P);
        } else if (t->kind == TK_VAR_BEGIN) {
            next_tok(P);
            jnode *o = node(P, N_OUTPUT, t);
            o->a = parse_tuple(P, false, true);
            expect_kind(P, TK_VAR_END, "'}}'");
            push(P, &l, o, NULL);
        } else if (t->kind == TK_BLOCK_BEGIN) {
            next_tok(P);
            bool end = false;
            for (int k = 0; ends && ends[k] && !end; k++) end = is_name(cur(P), ends[k]);
            if (end) break;
            push(P, &l, parse_statement(P), NULL);
        } else unexpected(P, "text or a tag");
    }
    set_kids(body, &l);
    P->nest--;
    return body;
}

void jparse(jinja_template *t, const jtokens *toks)
{
    parser P = {.t = t, .tk = toks};
    t->root = parse_body(&P, NULL);
}
