/* adapter_select.c — PEFT's module selectors, as PEFT 0.21 applies them (peft/tuners/tuners_utils.py
 * check_target_module_exists, peft/utils/other.py get_pattern_key): which layers get adapters
 * (layers_to_transform, layers_pattern) and each module's rank and alpha (rank_pattern,
 * alpha_pattern). A module's key is its name in the base model, model.layers.N.self_attn.q_proj; a
 * pattern key K names it when Python's re.match("(.*\.)?(K)$", key) does, the first such key in the
 * mapping's order winning. Python's regular expressions are read as POSIX extended ones after the
 * few spellings that differ are translated (\d, (?:...), lazy quantifiers); constructs with no
 * POSIX meaning (look-arounds, named groups, back-references) are refused, naming the pattern. */
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/adapter.h"

/* Python's pattern text -> POSIX ERE text in out (len bytes); false (why filled) when it uses a
 * construct POSIX lacks. Whether a whole key matches does not depend on greediness, so lazy
 * quantifiers become greedy ones. */
typedef struct {
    char *out;
    size_t len, o;
    bool full;
} posix_buf;

static void put(posix_buf *b, const char *str)
{
    size_t n = strlen(str);
    if (b->o + n + 1 > b->len) {
        b->full = true;
        return;
    }
    memcpy(b->out + b->o, str, n);
    b->o += n;
    b->out[b->o] = 0;
}

static bool python_to_posix(const char *py, char *out, size_t len, char *why, size_t whylen)
{
    posix_buf b = {out, len, 0, false};
    bool in_class = false;
    out[0] = 0;
    for (const char *p = py; *p; p++) {
        char one[3] = {*p, 0, 0};
        if (in_class) {
            if (*p == ']') in_class = false; /* a ] first in the class was taken with its [ */
            if (*p == '\\') {
                char e = p[1];
                if (e == 'd') put(&b, "0-9");
                else if (e && strchr(".*+?()|{}$/_:,", e)) one[0] = e, put(&b, one);
                else return snprintf(why, whylen, "\\%c inside [...] has no POSIX spelling", e ? e : ' '), false;
                p++;
                continue;
            }
            put(&b, one);
            continue;
        }
        if (*p == '[') {
            in_class = true;
            put(&b, "[");
            if (p[1] == '^') put(&b, "^"), p++;
            if (p[1] == ']') put(&b, "]"), p++;
            continue;
        }
        if (*p == '\\') {
            char e = p[1];
            if (e == 'd') put(&b, "[0-9]");
            else if (e == 'D') put(&b, "[^0-9]");
            else if (e && strchr("wWsS.*+?()[]{}|^$\\/-_", e)) one[0] = '\\', one[1] = e, put(&b, one);
            else return snprintf(why, whylen, "\\%c has no POSIX spelling", e ? e : ' '), false;
            p++;
            continue;
        }
        if (*p == '(' && p[1] == '?') {
            if (p[2] != ':') return snprintf(why, whylen, "(?%c...) has no POSIX spelling", p[2] ? p[2] : ' '), false;
            put(&b, "(");
            p += 2;
            continue;
        }
        if (*p == '?' && p > py && (p[-1] == '*' || p[-1] == '+' || p[-1] == '?' || p[-1] == '}') &&
            !(p - 1 > py && p[-2] == '\\'))
            continue; /* lazy: the same keys match */
        put(&b, one);
    }
    if (in_class) return snprintf(why, whylen, "a [ is not closed"), false;
    if (b.full) return snprintf(why, whylen, "it is too long"), false;
    return true;
}

/* re compiled from "^" prefix "(" pattern ")" suffix, pattern translated from Python's syntax. */
static pt_status compile(regex_t *re, const char *where, const char *field, const char *pattern, const char *prefix,
                         const char *suffix)
{
    char posix[1024], why[96], full[1200];
    if (!python_to_posix(pattern, posix, sizeof posix, why, sizeof why))
        return ERR(PT_ERR_USER, "%s: %s: the pattern \"%s\" cannot be used: %s (write it as a plain regular "
                   "expression: literal text, ., *, +, ?, [...], (...), |, \\d)",
                   where, field, shown_text(pattern).s, why);
    snprintf(full, sizeof full, "^%s(%s)%s", prefix, posix, suffix);
    int rc = regcomp(re, full, REG_EXTENDED | REG_NOSUB);
    if (rc) {
        regerror(rc, re, why, sizeof why);
        return ERR(PT_ERR_USER, "%s: %s: the pattern \"%s\" is not a valid regular expression: %s", where, field,
                   shown_text(pattern).s, why);
    }
    return PT_OK;
}

static void module_key(pt_arch a, char *out, size_t len, int layer, int w)
{
    if (arch_peft_param(w)) { /* the experts: the parameter's own name */
        snprintf(out, len, "model.layers.%d.%s", layer, arch_peft_param(w));
        return;
    }
    const char *block = arch_peft_block(a, w);
    snprintf(out, len, "model.layers.%d.%s.%s", layer, block, arch_peft_module(a, w));
}

/* layers_to_transform: on[layer] for each layer it names (all when absent or empty). */
static pt_status plan_layers(pt_arch a, const json_t *sel, const char *where, int n_layers, bool *on)
{
    const json_t *lt = json_object_get(sel, "layers_to_transform");
    bool given = lt && !json_is_null(lt) && !(json_is_array(lt) && json_array_size(lt) == 0);
    for (int l = 0; l < n_layers; l++) on[l] = !given;
    if (!given) return PT_OK;
    size_t n = json_is_array(lt) ? json_array_size(lt) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_is_array(lt) ? json_array_get(lt, i) : lt;
        if (!json_is_integer(v))
            return ERR(PT_ERR_USER, "%s: layers_to_transform: expected layer numbers (integers)", where);
        json_int_t l = json_integer_value(v);
        if (l < 0 || l >= n_layers)
            return ERR(PT_ERR_USER, "%s: layers_to_transform: layer %lld is not one of this model's layers (0 to %d)",
                       where, (long long)l, n_layers - 1);
        on[l] = true;
    }
    /* layers_pattern: the name before the layer number must match one of them (else no layer does) */
    const json_t *lp = json_object_get(sel, "layers_pattern");
    size_t np = !lp || json_is_null(lp) ? 0 : json_is_array(lp) ? json_array_size(lp) : 1;
    if (np == 0 || (json_is_string(lp) && !json_string_length(lp))) return PT_OK;
    char key[128];
    module_key(a, key, sizeof key, 0, W_Q);
    bool any = false;
    for (size_t i = 0; i < np && !any; i++) {
        const json_t *v = json_is_array(lp) ? json_array_get(lp, i) : lp;
        if (!json_is_string(v)) return ERR(PT_ERR_USER, "%s: layers_pattern: expected a name or a list of names", where);
        regex_t re;
        TRY(compile(&re, where, "layers_pattern", json_string_value(v), "(.*\\.)?", "\\.[0-9]+\\."));
        any = regexec(&re, key, 0, NULL, 0) == 0;
        regfree(&re);
    }
    if (!any)
        return ERR(PT_ERR_USER, "%s: layers_pattern: no pattern names this model's layer list (\"layers\", as in "
                   "model.layers.N), so no module would get an adapter; set layers_pattern: layers or remove it",
                   where);
    return PT_OK;
}

/* The value of the first key of pattern (a mapping) that names module key, or NULL. */
static pt_status pattern_value(const json_t *pattern, const char *where, const char *field, const char *key,
                               const json_t **value)
{
    *value = NULL;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)pattern, k, v) {
        regex_t re;
        TRY(compile(&re, where, field, k, "(.*\\.)?", "$"));
        bool hit = regexec(&re, key, 0, NULL, 0) == 0;
        regfree(&re);
        if (hit) {
            *value = v;
            return PT_OK;
        }
    }
    return PT_OK;
}

static pt_status plan(pt_arch a, const json_t *sel, const char *where, int n_layers, const bool target[W_COUNT], int r,
                      float alpha, int *ranks, float *alphas, bool *on)
{
    if (!json_is_object(sel)) return ERR(PT_ERR_USER, "%s: the adapter's selectors are not a JSON object", where);
    TRY(plan_layers(a, sel, where, n_layers, on));
    const json_t *rp = json_object_get(sel, "rank_pattern"), *ap = json_object_get(sel, "alpha_pattern");
    if (rp && !json_is_null(rp) && !json_is_object(rp))
        return ERR(PT_ERR_USER, "%s: rank_pattern: expected a mapping of module patterns to ranks", where);
    if (ap && !json_is_null(ap) && !json_is_object(ap))
        return ERR(PT_ERR_USER, "%s: alpha_pattern: expected a mapping of module patterns to alphas", where);
    char key[128];
    for (int l = 0; l < n_layers; l++)
        for (int w = 0; w < W_COUNT; w++) {
            size_t i = (size_t)l * W_COUNT + (size_t)w;
            ranks[i] = target[w] && on[l] ? r : 0, alphas[i] = alpha;
            if (!ranks[i]) continue;
            module_key(a, key, sizeof key, l, w);
            const json_t *v = NULL;
            if (json_is_object(rp)) TRY(pattern_value(rp, where, "rank_pattern", key, &v));
            if (v) {
                if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 4096)
                    return ERR(PT_ERR_USER, "%s: rank_pattern: the rank for %s must be an integer from 1 to 4096",
                               where, key);
                ranks[i] = (int)json_integer_value(v);
            }
            v = NULL;
            if (json_is_object(ap)) TRY(pattern_value(ap, where, "alpha_pattern", key, &v));
            if (v) {
                if (!json_is_number(v) || !(json_number_value(v) > 0))
                    return ERR(PT_ERR_USER, "%s: alpha_pattern: the alpha for %s must be a positive number", where,
                               key);
                alphas[i] = (float)json_number_value(v);
            }
        }
    return PT_OK;
}

pt_status adapter_select_plan(pt_arch a, const char *select, const char *where, int n_layers, const bool target[W_COUNT],
                              int r, float alpha, int *ranks, float *alphas)
{
    if (!select) {
        for (int i = 0; i < n_layers * W_COUNT; i++) ranks[i] = target[i % W_COUNT] ? r : 0, alphas[i] = alpha;
        return PT_OK;
    }
    json_error_t e;
    json_t *sel = json_loads(select, 0, &e);
    if (!sel) return ERR(PT_ERR_USER, "%s: the adapter's selectors are not JSON: %s", where, e.text);
    bool *on = calloc((size_t)n_layers + 1, sizeof *on);
    pt_status st = on ? plan(a, sel, where, n_layers, target, r, alpha, ranks, alphas, on) : ERR(PT_ERR_NOMEM, "out of memory");
    free(on);
    json_decref(sel);
    return st;
}

char *adapter_select_with_layers(const char *select, const int *layers, int n)
{
    json_t *sel = select ? json_loads(select, 0, NULL) : json_object();
    if (!sel) return NULL;
    if (n >= 0) {
        json_t *list = json_array();
        for (int i = 0; i < n; i++) json_array_append_new(list, json_integer(layers[i]));
        json_object_set_new(sel, "layers_to_transform", list);
    }
    char *text = json_dumps(sel, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(sel);
    return text;
}
