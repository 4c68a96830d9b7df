/* config_dump.c — the resolved settings as YAML, which every checkpoint keeps as /run/config.yaml:
 * each key of `ptrain check`'s table with its typed value (numbers, booleans, null for unset,
 * sequences for lists, mappings for maps, the dataset list as a sequence of mappings), written by
 * libyaml's emitter, so that it reads back as the same configuration.
 *
 * Why not the file's text: a checkpoint may be uploaded (hub_strategy: checkpoint), and a text
 * keeps whatever the file held besides the settings: a commented-out token, a token under a key
 * ptrain does not know, an anchor. The parsed settings hold none of that; a token key given in the
 * file (hub_token, hf_token) reads "(not stored)". As a second guard, any string shaped like a
 * Hugging Face token (hf_, or api_org_ for organization tokens, then 30 or more letters and digits:
 * real ones are hf_ and 34 letters) or holding the value of HF_TOKEN or HUGGING_FACE_HUB_TOKEN is
 * written as "(not stored)" too, whatever key it is under. */
#include <ctype.h>
#include <stddef.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

static const char not_stored[] = "(not stored)";

/* Whether s holds prefix followed by at least 30 letters and digits. */
static bool has_token_shape(const char *s, const char *prefix)
{
    size_t k = strlen(prefix);
    for (const char *p = strstr(s, prefix); p; p = strstr(p + 1, prefix)) {
        size_t n = 0;
        while (isalnum((unsigned char)p[k + n])) n++;
        if (n >= 30) return true;
    }
    return false;
}

/* Whether s holds the token of the environment (a value of 8 characters or more: a shorter one
 * would blank half the settings and is no Hub token). */
static bool has_env_token(const char *s)
{
    static const char *const names[] = {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && strlen(v) >= 8 && strstr(s, v)) return true;
    }
    return false;
}

/* s, or "(not stored)" when it may be a token. */
static const char *storable(const char *s)
{
    return has_token_shape(s, "hf_") || has_token_shape(s, "api_org_") || has_env_token(s) ? not_stored : s;
}

/* Whether s written plain reads back as the same string, not as null, a boolean, a number, a date
 * or a merge key (YAML 1.1, as libyaml's users and PyYAML resolve it): not empty, no such word, and
 * not starting with a digit or one of + - . ~ < =. The emitter quotes it otherwise. */
static bool plain_is_string(const char *s)
{
    static const char *const words[] = {"null", "true", "false", "yes", "no", "on", "off", "y", "n"};
    if (!*s || isdigit((unsigned char)s[0]) || strchr("+-.~<=", s[0])) return false;
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (!strcasecmp(s, words[i])) return false;
    return true;
}

typedef struct {
    yaml_emitter_t em;
    bool failed;
} dump;

/* One event to the emitter; after a failure, nothing more. */
static void emit(dump *d, yaml_event_t *ev, int made)
{
    if (!made) d->failed = true;
    else if (d->failed) yaml_event_delete(ev);
    else if (!yaml_emitter_emit(&d->em, ev)) d->failed = true;
}

/* A scalar: typed (plain, read by its look: a number, true, null) or a string (quoted when its
 * plain look would read as something else). */
static void emit_scalar(dump *d, const char *text, bool typed)
{
    yaml_event_t ev;
    bool plain = typed || plain_is_string(text);
    emit(d, &ev, yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)text, (int)strlen(text), plain, !typed,
                                              typed ? YAML_PLAIN_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE));
}

static void emit_string(dump *d, const char *s)
{
    if (s) emit_scalar(d, storable(s), false);
    else emit_scalar(d, "null", true);
}

/* A scalar kept as text whose type is the user's (model_parameters, device_map values): written as
 * it was, plain when it can be. */
static void emit_as_given(dump *d, const char *s)
{
    yaml_event_t ev;
    s = storable(s);
    emit(d, &ev, yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1,
                                              YAML_ANY_SCALAR_STYLE));
}

static void emit_start(dump *d, bool mapping)
{
    yaml_event_t ev;
    if (mapping) emit(d, &ev, yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE));
    else emit(d, &ev, yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE));
}

static void emit_end(dump *d, bool mapping)
{
    yaml_event_t ev;
    if (mapping) emit(d, &ev, yaml_mapping_end_event_initialize(&ev));
    else emit(d, &ev, yaml_sequence_end_event_initialize(&ev));
}

/* v as a user writes it: a whole number plainly (200), else the shortest text that reads back as
 * v, with a '.' before any exponent (YAML 1.1 reads 1e-08 as a string, 1.0e-08 as a number). */
static void emit_double(dump *d, double v)
{
    char text[48], *e;
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(text, sizeof text, "%.0f", v);
        emit_scalar(d, text, true);
        return;
    }
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        if (strtod(text, NULL) == v) break;
    }
    if ((e = strchr(text, 'e')) && !strchr(text, '.')) {
        memmove(e + 2, e, strlen(e) + 1);
        memcpy(e, ".0", 2);
    }
    emit_scalar(d, text, true);
}

static void emit_long(dump *d, long v)
{
    char text[32];
    snprintf(text, sizeof text, "%ld", v);
    emit_scalar(d, text, true);
}

static void emit_list(dump *d, const pt_strlist *list)
{
    emit_start(d, false);
    for (int i = 0; i < list->n; i++) emit_string(d, list->items[i]);
    emit_end(d, false);
}

/* lora_target_modules given as all-linear: written so, then the names it does not stand for (its seven are the
 * first seven choices), so that it reads back with what all-linear adds on the model (lora_init) */
static void emit_all_linear(dump *d, const key_spec *spec, const pt_strlist *list)
{
    emit_start(d, false);
    emit_scalar(d, "all-linear", false);
    for (int i = 0; i < list->n; i++) {
        bool seven = false;
        for (int k = 0; k < 7 && spec->choices[k]; k++) seven |= !strcmp(list->items[i], spec->choices[k]);
        if (!seven) emit_string(d, list->items[i]);
    }
    emit_end(d, false);
}

static void emit_map(dump *d, const pt_strmap *map)
{
    if (map->tag) {
        emit_string(d, map->tag);
        return;
    }
    emit_start(d, true);
    for (int i = 0; i < map->n; i++) {
        emit_string(d, map->keys[i]);
        emit_as_given(d, map->values[i]);
    }
    emit_end(d, true);
}

/* device_map: a word, or the mapping {"": DEVICE} it was read from (config.c keeps it as text). */
static void emit_devmap(dump *d, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    if (n < 7 || strncmp(s, "{\"\": ", 5) || s[n - 1] != '}') {
        emit_string(d, s);
        return;
    }
    char device[256];
    snprintf(device, sizeof device, "%.*s", (int)(n - 6), s + 5);
    emit_start(d, true);
    emit_scalar(d, "", false);
    emit_as_given(d, device);
    emit_end(d, true);
}

/* The value of spec at base. */
static void emit_value(dump *d, const key_spec *spec, const void *base)
{
    const void *slot = (const char *)base + spec->offset;
    switch (spec->type) {
    case K_STR: emit_string(d, *(char *const *)slot); break;
    case K_ENUM: emit_string(d, spec->choices[*(const int *)slot]); break;
    case K_DEVMAP: emit_devmap(d, *(char *const *)slot); break;
    case K_INT: {
        long v = *(const long *)slot;
        if ((spec->flags & F_MINUS1) && v == -1) emit_scalar(d, "null", true);
        else if ((spec->flags & F_AUTO) && v == 0) emit_scalar(d, "auto", false);
        else emit_long(d, v);
        break;
    }
    case K_FLOAT: emit_double(d, *(const double *)slot); break;
    case K_BOOL:
        if (spec->flags & F_UNSLOTH) {
            pt_checkpointing v = *(const pt_checkpointing *)slot;
            emit_scalar(d, config_checkpointing_names[v], v != PT_CKPT_OFFLOAD);
        } else {
            emit_scalar(d, *(const bool *)slot ? "true" : "false", true);
        }
        break;
    case K_TRI: {
        pt_tristate t = *(const pt_tristate *)slot;
        emit_scalar(d, t == PT_AUTO ? "auto" : t == PT_TRUE ? "true" : "false", t != PT_AUTO);
        break;
    }
    case K_RESUME: {
        const pt_resume *r = slot;
        if (r->path) emit_string(d, r->path);
        else emit_scalar(d, r->on ? "true" : "false", true);
        break;
    }
    case K_STRLIST: emit_list(d, slot); break;
    case K_STRMAP: emit_map(d, slot); break;
    default: emit_scalar(d, "null", true); break;
    }
}

static void emit_datasets(dump *d, const pt_config *cfg)
{
    emit_start(d, false);
    for (int i = 0; i < cfg->n_datasets; i++) {
        emit_start(d, true);
        for (int k = 0; k < dataset_nkeys; k++) {
            emit_scalar(d, dataset_keys[k].name, false);
            emit_value(d, &dataset_keys[k], &cfg->datasets[i]);
        }
        emit_end(d, true);
    }
    emit_end(d, false);
}

/* Whether key i is an optional number never given: null, as `ptrain check` shows "(unset)". */
static bool number_unset(const pt_config *cfg, int i)
{
    const key_spec *spec = &config_keys[i];
    const char *slot = (const char *)cfg + spec->offset;
    if (cfg->is_set[i] || spec->def) return false;
    return (spec->type == K_INT && *(const long *)slot == 0) || (spec->type == K_FLOAT && *(const double *)slot == 0);
}

/* Whether key i is written null although it has a value: eval_strategy left at its default without
 * an eval set (given, it would be refused: there is nothing to evaluate; null reads back as the
 * same default), and any optional number never given. */
static bool written_null(const pt_config *cfg, int i)
{
    if (!strcmp(config_keys[i].name, "eval_strategy")) return !cfg->is_set[i] && !(cfg->val_split_ratio > 0);
    return number_unset(cfg, i);
}

static void emit_settings(dump *d, const pt_config *cfg)
{
    emit_start(d, true);
    for (int i = 0; i < config_nkeys; i++) {
        const key_spec *spec = &config_keys[i];
        if (spec->type == K_DATASETS && cfg->n_datasets == 0) continue; /* none given (an empty list is refused) */
        emit_scalar(d, spec->name, false);
        if (spec->type == K_DATASETS) emit_datasets(d, cfg);
        else if (spec->type == K_SECRET) emit_scalar(d, cfg->is_set[i] ? not_stored : "null", !cfg->is_set[i]);
        else if (written_null(cfg, i)) emit_scalar(d, "null", true);
        else if (spec->offset == offsetof(pt_config, lora_target_modules) && cfg->lora_all_linear)
            emit_all_linear(d, spec, &cfg->lora_target_modules);
        else emit_value(d, spec, cfg);
    }
    emit_end(d, true);
}

static int to_strbuf(void *data, unsigned char *buffer, size_t size)
{
    sb_printf(data, "%.*s", (int)size, (const char *)buffer);
    return 1;
}

pt_status config_dump(const pt_config *cfg, char **yaml)
{
    *yaml = NULL;
    dump d = {.failed = false};
    strbuf out = {0};
    if (!yaml_emitter_initialize(&d.em)) return ERR(PT_ERR_NOMEM, "out of memory starting libyaml's emitter");
    yaml_emitter_set_output(&d.em, to_strbuf, &out);
    yaml_emitter_set_unicode(&d.em, 1);
    yaml_emitter_set_width(&d.em, -1); /* no folding: one value, one line */
    yaml_event_t ev;
    emit(&d, &ev, yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING));
    emit(&d, &ev, yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1));
    emit_settings(&d, cfg);
    emit(&d, &ev, yaml_document_end_event_initialize(&ev, 1));
    emit(&d, &ev, yaml_stream_end_event_initialize(&ev));
    pt_status st = d.failed ? ERR(PT_ERR_INTERNAL, "libyaml's emitter failed writing the settings: %s",
                                  d.em.problem ? d.em.problem : "out of memory")
                            : PT_OK;
    yaml_emitter_delete(&d.em);
    if (st == PT_OK) *yaml = out.data ? out.data : xstrdup("");
    else sb_free(&out);
    return st;
}
