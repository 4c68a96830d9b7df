/* jinja.c — the interpreter's entry points: compiling a template (its size checked, newlines
 * normalized and one trailing newline dropped as Jinja2 does, lexed and parsed) and rendering it
 * with a JSON object's variables; a failure anywhere below comes back here as one message with
 * the template's line and column. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

/* src without carriage returns (\r\n and \r read as \n) and without one final newline. */
static char *normalized(jarena *a, const char *src, size_t len, size_t *out_len)
{
    char *s = ja_alloc(a, len + 1);
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[k++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[k++] = src[i];
    }
    if (k && s[k - 1] == '\n') k--;
    s[k] = '\0';
    *out_len = k;
    return s;
}

typedef struct {
    jinja_template *t;
    jarena tokens;
    const char *src;
    size_t len;
} compile_job;

static void compile_run(void *arg)
{
    compile_job *c = arg;
    size_t n;
    const char *text = normalized(&c->t->arena, c->src, c->len, &n);
    c->t->sym_loop = jsym(c->t, "loop", 4);
    c->t->sym_caller = jsym(c->t, "caller", 6);
    jtokens toks;
    jlex(&c->tokens, text, n, &toks);
    jparse(c->t, &toks);
}

pt_status jinja_compile(const char *src, size_t len, jinja_template **out)
{
    *out = NULL;
    if (len > JINJA_MAX_SOURCE)
        return ERR(PT_ERR_USER, "%zu bytes, more than the %u bytes a template may have", len,
                   JINJA_MAX_SOURCE);
    compile_job c = {.t = calloc(1, sizeof *c.t), .src = src, .len = len};
    TRY_ALLOC(c.t);
    jfail fail;
    bool ok = j_guard(&fail, compile_run, &c);
    ja_free(&c.tokens);
    if (!ok) {
        jinja_free(c.t);
        return ERR(PT_ERR_USER, "line %d col %d: %s", fail.line, fail.col, fail.msg);
    }
    *out = c.t;
    return PT_OK;
}

void jinja_free(jinja_template *t)
{
    if (!t) return;
    ja_free(&t->arena);
    free(t);
}

bool jinja_has_generation(const jinja_template *t) { return t && t->has_generation; }

static int find_sym(const jinja_template *t, const char *name)
{
    for (int i = 0; i < t->nsyms; i++)
        if (!strcmp(t->syms[i], name)) return i;
    return -1;
}

/* The globals frame: each variable of vars the template names. */
static void set_globals(jrender *r, const json_t *vars)
{
    const char *key;
    json_t *v;
    int n = 0;
    r->globals = ja_alloc(r->a, sizeof *r->globals);
    *r->globals = (jframe){0};
    if (!json_is_object(vars)) return;
    r->globals->syms = ja_alloc(r->a, (json_object_size(vars) + 1) * sizeof(int));
    r->globals->vals = ja_alloc(r->a, (json_object_size(vars) + 1) * sizeof(jval));
    json_object_foreach((json_t *)vars, key, v) {
        int sym = find_sym(r->t, key);
        if (sym < 0) continue;
        r->globals->syms[n] = sym;
        r->globals->vals[n++] = jv_from_json(r->a, v);
    }
    r->globals->n = r->globals->cap = n;
}

typedef struct {
    jrender r;
    const json_t *vars;
} render_job;

static void render_run(void *arg)
{
    render_job *j = arg;
    set_globals(&j->r, j->vars);
    jeval_render(&j->r, j->r.t->root);
}

pt_status jinja_render(const jinja_template *t, const json_t *vars, const jinja_opts *opts, strbuf *out,
                       size_t **spans, int *n_spans)
{
    if (spans) *spans = NULL, *n_spans = 0;
    jarena a = {.limit = opts && opts->max_memory ? opts->max_memory : JINJA_MAX_MEMORY};
    size_t base = out->len;
    render_job j = {.r = {.a = &a, .t = t, .opts = opts, .out = out}, .vars = vars};
    jfail fail;
    sb_append(out, "", 0);
    if (!j_guard(&fail, render_run, &j)) {
        for (struct jcapture *c = j.r.captures; c; c = c->next) sb_free(&c->sb);
        ja_free(&a);
        out->len = base;
        if (out->data) out->data[base] = '\0';
        int line = fail.line ? fail.line : j.r.line, col = fail.line ? fail.col : j.r.col;
        return ERR(PT_ERR_USER, "line %d col %d: %s", line, col, fail.msg);
    }
    pt_status rc = PT_OK;
    if (spans && j.r.n_spans) {
        *spans = malloc(2 * (size_t)j.r.n_spans * sizeof **spans);
        if (*spans) {
            for (int i = 0; i < 2 * j.r.n_spans; i++) (*spans)[i] = j.r.spans[i] - base;
            *n_spans = j.r.n_spans;
        } else rc = ERR(PT_ERR_NOMEM, "out of memory");
    }
    ja_free(&a);
    return rc;
}
