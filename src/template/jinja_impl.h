/* jinja_impl.h — the chat-template interpreter's insides, shared by src/template's files (bottom
 * up: jvalue, jjson, jlex, jparse, jfilter, jeval, jinja). Values live in an arena freed at the end
 * of a render; an error anywhere (bad template, a type error, a limit, raise_exception) records its
 * message with the template's line and column and unwinds to the render's entry with longjmp, so
 * the files below it only ever see good values. */
#ifndef PTRAIN_JINJA_IMPL_H
#define PTRAIN_JINJA_IMPL_H

#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/jinja.h"
#include "ptrain/util.h"

/* ---- the arena and the error exit (jvalue.c) ---- */

typedef struct jblock jblock;
typedef struct {
    jblock *head;
    size_t used, limit; /* bytes handed out; over limit is an error */
} jarena;

typedef struct jfail {
    jmp_buf jb;
    char msg[1024];
    int line, col;
} jfail;

extern _Thread_local jfail *j_fail_to; /* where j_fail jumps (the current parse or render) */
/* Run fn(arg) with j_fail coming back to f: false when it failed (f has the message). */
bool j_guard(jfail *f, void (*fn)(void *), void *arg);
_Noreturn void j_fail(int line, int col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void *ja_alloc(jarena *a, size_t n);
void ja_free(jarena *a);

/* ---- values ---- */

typedef enum { JT_UNDEF, JT_NONE, JT_BOOL, JT_INT, JT_FLOAT, JT_STR, JT_LIST, JT_DICT, JT_NS, JT_FUNC, JT_LOOP } jtype;

typedef struct jstr {
    const char *p;
    size_t n;
} jstr;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

typedef struct jval {
    uint8_t t;
    union {
        bool b;
        int64_t i;
        double f;
        jstr *s;
        jlist *l;
        jdict *d; /* JT_DICT, JT_NS */
        jfunc *fn;
        jloop *loop;
        const char *undef_name; /* JT_UNDEF: what was looked up, for messages (or NULL) */
    };
} jval;

struct jlist {
    jval *v;
    size_t n;
    bool tuple;
};
struct jdict {
    jval *k, *v;
    size_t n, cap;
};

extern const jval J_UNDEF, J_NONE;
jval jv_bool(bool b);
jval jv_int(int64_t i);
jval jv_float(double f);
jval jv_str(jarena *a, const char *p, size_t n); /* p is copied */
jval jv_str_ref(jarena *a, const char *p, size_t n); /* p outlives the render */
jval jv_cstr(jarena *a, const char *s);
jval jv_list(jarena *a, size_t n); /* n items, all undefined */
jval jv_dict(jarena *a);
void jd_set(jarena *a, jdict *d, jval key, jval v);
jval *jd_get(const jdict *d, jval key);
jval *jd_get_str(const jdict *d, const char *key, size_t n);
bool jv_truthy(jval v);
bool jv_equal(jval a, jval b);
int jv_compare(jval a, jval b, int line, int col); /* <0, 0, >0; fails on unorderable types */
const char *jv_type_name(jval v);
void jv_str_out(jval v, strbuf *out);   /* Python's str() */
void jv_repr_out(jval v, strbuf *out);  /* Python's repr() */
jstr *jv_to_jstr(jarena *a, jval v);     /* str(v) as a string value */
void py_float_repr(double f, strbuf *out);
/* Python's str.isspace on the code point at s[i] of s[0..n): its length in *k, 0 if not space. */
size_t py_space_at(const char *s, size_t i, size_t n);
size_t utf8_len_at(const char *s, size_t i, size_t n);
size_t utf8_count(const char *s, size_t n); /* code points */

/* ---- JSON (jjson.c) ---- */

jval jv_from_json(jarena *a, const void *json); /* a json_t */
typedef struct {
    int indent;          /* -1: none */
    const char *item_sep, *key_sep;
    bool sort_keys, ensure_ascii;
    jarena *arena;
} jjson_opts;
void jv_tojson(jval v, const jjson_opts *o, strbuf *out, int line, int col);

/* ---- tokens (jlex.c) ---- */

typedef enum { TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END, TK_NAME, TK_STRING, TK_INT,
               TK_FLOAT, TK_OP, TK_EOF } tk_kind;

typedef struct {
    uint8_t kind;
    char op[4]; /* TK_OP: the operator */
    int line, col;
    const char *p; /* TK_DATA, TK_NAME, TK_STRING (decoded): text in the arena */
    size_t n;
    int64_t i;
    double f;
} jtoken;

typedef struct {
    jtoken *t;
    size_t n;
} jtokens;

void jlex(jarena *a, const char *src, size_t len, jtokens *out);

/* ---- the tree (jparse.c) ---- */

typedef enum {
    /* statements */
    N_BODY, N_DATA, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_ATTR, N_SET_BLOCK, N_MACRO, N_CALL_BLOCK, N_GENERATION,
    N_BREAK, N_CONTINUE, N_FILTER_BLOCK,
    /* expressions */
    N_CONST, N_NAME, N_ATTR, N_ITEM, N_SLICE, N_CALL, N_FILTER, N_TEST, N_BIN, N_NEG, N_POS, N_NOT, N_AND, N_OR,
    N_COND, N_LIST, N_TUPLE, N_DICT, N_COMPARE, N_CONCAT
} jnode_kind;

typedef struct jnode jnode;
struct jnode {
    uint8_t kind;
    char op[4];        /* N_BIN: + - * / // % **; N_COMPARE: one per operand after the first in ops */
    bool flag;         /* N_TEST: negated; N_FOR/N_SET: the targets are a tuple */
    bool recursive;    /* N_FOR */
    int line, col;
    jnode *a, *b, *c, *d;
    jnode **kids;      /* N_BODY, N_CALL/N_FILTER/N_TEST args, N_LIST/N_TUPLE items, N_DICT k0 v0 k1 v1.. */
    const char **kw;   /* beside kids in calls: the keyword of each argument (NULL: positional) */
    int nkids;
    int sym;           /* N_NAME, N_SET, N_MACRO: the variable */
    int *syms;         /* N_FOR, N_SET: unpacked targets; N_MACRO, N_CALL_BLOCK: parameters */
    jnode **defaults;  /* N_MACRO: each parameter's default (NULL: none) */
    int nsyms;
    const char **ops;  /* N_COMPARE */
    const char *name;  /* N_ATTR attribute, N_FILTER/N_TEST name, N_SET_ATTR attribute */
    size_t name_len;
    jval lit;          /* N_CONST, N_DATA */
};

struct jinja_template {
    jarena arena;
    jnode *root;
    const char **syms; /* variable names by number */
    int nsyms, cap_syms;
    int sym_loop, sym_caller; /* the numbers of "loop" and "caller" */
    bool has_generation;
};

void jparse(jinja_template *t, const jtokens *toks);
int jsym(jinja_template *t, const char *name, size_t n); /* the number of a name, added if new */

/* ---- the render (jeval.c, jfilter.c) ---- */

typedef struct jframe jframe;
struct jframe {
    jframe *parent;
    int *syms;
    jval *vals;
    int n, cap;
};

struct jcapture { /* output going to a string: a macro's, a set or filter block's */
    strbuf sb;
    struct jcapture *next;
};

typedef struct jrender {
    jarena *a;
    const jinja_template *t;
    const jinja_opts *opts;
    strbuf *out;
    jframe *globals;
    size_t *spans; /* {% generation %} spans: start, end pairs */
    int n_spans, cap_spans;
    long steps;    /* loop iterations and calls so far */
    int depth;     /* macro calls in progress */
    int capturing; /* output going to a macro's or a block's own buffer */
    struct jcapture *captures; /* those buffers, freed if the render fails */
    int line, col; /* the statement running, for errors found below it */
} jrender;

struct jfunc {
    enum { JF_MACRO, JF_METHOD, JF_GLOBAL } kind;
    const jnode *macro;  /* JF_MACRO */
    jframe *closure;     /* JF_MACRO: where it was defined */
    jfunc *caller;       /* JF_MACRO called from {% call %}: the body as caller() */
    jval self;           /* JF_METHOD */
    const char *name;    /* JF_METHOD, JF_GLOBAL */
};

struct jloop {
    jval items;          /* the list iterated */
    size_t i;
    int depth;
    const jnode *node;   /* recursive loops: the for statement */
    jframe *frame;
    jval changed_last;
    bool changed_set;
};

/* Arguments of a call: positional first, keywords after (kw non-NULL). */
typedef struct {
    jval *v;
    const char **kw;
    int n;
} jargs;

jval jfilter_apply(jrender *r, const char *name, jval v, const jargs *args, int line, int col);
jval jtest_in(jrender *r, jval x, jval seq, int line, int col); /* x in seq */
bool jtest_apply(jrender *r, const char *name, jval v, const jargs *args, int line, int col);
jval jmethod_call(jrender *r, jval self, const char *name, const jargs *args, int line, int col);
bool jmethod_exists(jval self, const char *name);
jval jv_getattr(jrender *r, jval obj, const char *name, size_t n);
jval jv_getitem(jrender *r, jval obj, jval key, int line, int col);
jval jv_iter_list(jrender *r, jval v, int line, int col); /* a value as the list a for loop walks */
jval jstr_case(jrender *r, const jstr *s, char mode); /* 'u' upper, 'l' lower, 't' title, 'c' capitalize */
jval jstr_strip(jrender *r, const jstr *s, const char *chars, size_t nchars, int which); /* 1 left, 2 right, 3 both */
jval jstr_replace(jrender *r, const jstr *s, const jstr *old, const jstr *new, int64_t count);
jval jv_slice(jrender *r, jval v, jval start, jval stop, jval step, int line, int col);
jval jargs_get(const jargs *args, int pos, const char *kw, jval dflt);
void jrender_count(jrender *r, int line, int col); /* one more step: fails past the limit */
void jrender_out(jrender *r, const char *p, size_t n, int line, int col);

void jeval_render(jrender *r, const jnode *root);
jval jeval_call_macro(jrender *r, jfunc *fn, const jargs *args, int line, int col);

#endif
