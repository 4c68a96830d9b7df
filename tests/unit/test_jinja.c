/* test_jinja.c — the chat-template interpreter (src/template) against transformers: the small
 * templates of tests/data/templates/unit_goldens.json (one feature each, rendered by the Jinja
 * environment transformers compiles templates with) and the real chat templates of
 * tests/data/templates/ (*.jinja) with the conversations of corpus_goldens.json (rendered by
 * render_jinja_template, assistant spans where a template has {% generation %}): every rendering
 * byte for byte, every span, and every template that raises raising here too with its message.
 * Both goldens come from tests/reference/make_template_goldens.py; strftime_now is pinned to the
 * same moment on both sides. Also the limits: a template over 1 MB, 10^6 loop iterations, runaway
 * recursion, output and memory, deep nesting, each refused with a message naming line and column. PTRAIN_SRCDIR points at the sources. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/jinja.h"

#define NOW 1700000000 /* 2023-11-14 22:13:20 UTC */

static char *path_of(const char *rel)
{
    const char *src = getenv("PTRAIN_SRCDIR");
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s", src ? src : ".", rel);
    return p;
}

static json_t *load_json(const char *rel)
{
    char *p = path_of(rel);
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    if (!j) fail_msg("%s: %s", p, e.text);
    free(p);
    return j;
}

static char *read_text(const char *rel, size_t *n)
{
    char *p = path_of(rel);
    FILE *f = fopen(p, "rb");
    if (!f) fail_msg("cannot open %s", p);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    rewind(f);
    char *s = malloc((size_t)len + 1);
    *n = fread(s, 1, (size_t)len, f);
    s[*n] = '\0';
    fclose(f);
    free(p);
    return s;
}

static const jinja_opts pinned = {.fixed_time = true, .now = NOW};

/* Render src with vars: PT_OK and the text, or the status (message in err_message()). */
static pt_status render(const char *src, size_t n, const json_t *vars, strbuf *out, size_t **spans, int *n_spans)
{
    jinja_template *t;
    pt_status rc = jinja_compile(src, n, &t);
    if (rc != PT_OK) return rc;
    rc = jinja_render(t, vars, &pinned, out, spans, n_spans);
    jinja_free(t);
    return rc;
}

/* The message a template's raise_exception gives, as transformers reports it ("TemplateError: m"). */
static const char *raised_message(const char *error)
{
    static const char prefix[] = "TemplateError: ";
    return strncmp(error, prefix, sizeof prefix - 1) ? NULL : error + sizeof prefix - 1;
}

static int check_case(const char *label, const char *src, size_t n, const json_t *vars, const json_t *c)
{
    strbuf out = {0};
    size_t *spans = NULL;
    int n_spans = 0, bad = 0;
    pt_status rc = render(src, n, vars, &out, &spans, &n_spans);
    const json_t *want = json_object_get(c, "expected"), *err = json_object_get(c, "error");
    if (want && rc != PT_OK) {
        printf("# %s: failed: %s\n", label, err_message());
        bad = 1;
    } else if (want && (out.len != json_string_length(want) || memcmp(sb_text(&out), json_string_value(want), out.len))) {
        printf("# %s: differs\n#  got:  %s\n#  want: %s\n", label, shown_bytes(sb_text(&out), out.len).s,
               shown_text(json_string_value(want)).s);
        bad = 1;
    } else if (err && rc == PT_OK) {
        printf("# %s: rendered where transformers fails (%s)\n", label, json_string_value(err));
        bad = 1;
    } else if (err && raised_message(json_string_value(err)) && !strstr(err_message(), raised_message(json_string_value(err)))) {
        printf("# %s: raised %s, transformers: %s\n", label, err_message(), json_string_value(err));
        bad = 1;
    }
    const json_t *want_spans = json_object_get(c, "spans");
    if (!bad && want_spans) {
        bool same = (size_t)n_spans == json_array_size(want_spans);
        for (int i = 0; same && i < n_spans; i++) {
            const json_t *s = json_array_get(want_spans, (size_t)i);
            same = spans[2 * i] == (size_t)json_integer_value(json_array_get(s, 0)) &&
                   spans[2 * i + 1] == (size_t)json_integer_value(json_array_get(s, 1));
        }
        if (!same) printf("# %s: generation spans differ (%d spans)\n", label, n_spans);
        bad = !same;
    }
    free(spans);
    sb_free(&out);
    return bad;
}

static void test_unit_goldens(void **state)
{
    (void)state;
    json_t *cases = load_json("tests/data/templates/unit_goldens.json");
    int bad = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *src = json_string_value(json_object_get(c, "template"));
        bad += check_case(json_string_value(json_object_get(c, "name")), src, strlen(src), json_object_get(c, "vars"), c);
    }
    printf("# unit: %zu cases, %d differ\n", json_array_size(cases), bad);
    json_decref(cases);
    assert_int_equal(bad, 0);
}

static void test_corpus(void **state)
{
    (void)state;
    json_t *g = load_json("tests/data/templates/corpus_goldens.json");
    const json_t *convs = json_object_get(g, "conversations"), *cases = json_object_get(g, "cases");
    int bad = 0;
    char *src = NULL, current[256] = "";
    size_t n = 0;
    for (size_t i = 0; i < json_array_size(cases); i++) {
        const json_t *c = json_array_get(cases, i);
        const char *name = json_string_value(json_object_get(c, "template"));
        if (strcmp(name, current)) {
            free(src);
            char rel[512];
            snprintf(rel, sizeof rel, "tests/data/templates/%s.jinja", name);
            src = read_text(rel, &n);
            snprintf(current, sizeof current, "%s", name);
        }
        const json_t *conv = json_object_get(convs, json_string_value(json_object_get(c, "conversation")));
        json_t *vars = jinja_chat_vars(json_object_get(conv, "messages"), json_object_get(conv, "tools"), NULL,
                                       json_is_true(json_object_get(c, "add_generation_prompt")), json_object_get(c, "kwargs"));
        char label[512];
        snprintf(label, sizeof label, "%s × %s (gen %d, kwargs %s)", name,
                 json_string_value(json_object_get(c, "conversation")), json_is_true(json_object_get(c, "add_generation_prompt")),
                 json_object_get(json_object_get(c, "kwargs"), "enable_thinking") ? "thinking set" : "-");
        bad += check_case(label, src, n, vars, c);
        json_decref(vars);
    }
    printf("# corpus: %zu renderings, %zu identical\n", json_array_size(cases), json_array_size(cases) - (size_t)bad);
    free(src);
    json_decref(g);
    assert_int_equal(bad, 0);
}

/* Render src and expect a failure whose message holds want. */
static void expect_refused(const char *src, size_t n, const char *want)
{
    strbuf out = {0};
    json_t *vars = json_object();
    pt_status rc = render(src, n, vars, &out, NULL, NULL);
    json_decref(vars);
    if (rc == PT_OK) fail_msg("rendered %zu bytes where it should fail with \"%s\"", out.len, want);
    if (!strstr(err_message(), want)) fail_msg("\"%s\" does not say \"%s\"", err_message(), want);
    assert_int_equal(out.len, 0);
    sb_free(&out);
}

static void test_limits(void **state)
{
    (void)state;
    size_t big = JINJA_MAX_SOURCE + 1;
    char *huge = malloc(big);
    memset(huge, 'x', big);
    expect_refused(huge, big, "bytes, more than the 1048576 bytes a template may have");
    free(huge);
    static const struct {
        const char *src, *want;
    } cases[] = {
        {"{% for i in range(100000) %}{% for j in range(10) %}{% endfor %}{% endfor %}", "loop iterations and calls"},
        {"{% for i in range(1000000) %}{% endfor %}", "range too big"},
        {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macros nest more than 64 deep"},
        {"{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "rendered more than"},
        {"{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
         "MB"},
        {"", "nests more than"}, /* 300 parentheses, made below */
        {"line 1\n{% if x %}\n  {{ x.y.z.w }}\n{% endif %}", "line 3 col"},
        {"{{ raise_exception('no system role here') }}", "the template raised: no system role here"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *src = cases[i].src;
        char deep[700];
        if (i == 5) {
            strcpy(deep, "{{ ");
            for (int k = 0; k < 300; k++) strcat(deep, "(");
            strcat(deep, "1");
            for (int k = 0; k < 300; k++) strcat(deep, ")");
            strcat(deep, " }}");
            src = deep;
        }
        if (i == 6) {
            strbuf out = {0};
            json_t *vars = json_pack("{s:{s:{}}}", "x", "y");
            assert_int_equal(render(src, strlen(src), vars, &out, NULL, NULL), PT_ERR_USER);
            if (!strstr(err_message(), cases[i].want)) fail_msg("%s", err_message());
            json_decref(vars);
            sb_free(&out);
            continue;
        }
        expect_refused(src, strlen(src), cases[i].want);
    }
}

int main(void)
{
    setenv("TZ", "UTC", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unit_goldens),
        cmocka_unit_test(test_corpus),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
