/* config.c — read config.yaml with libyaml's document loader and fill pt_config.
 *
 * The walk is driven by the key tables in config_keys.c: each mapping key is looked up, its value
 * node converted by type, and its position kept for later messages. Problems are collected so the
 * user sees every mistake at once, one line each: "file:line:col: key: expected ..., found ..."
 * (config_report.c puts them in order and keeps the report short). */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "config_internal.h"


typedef struct {
    yaml_document_t *doc;
    config_report errors;
    config_report warnings; /* and notes; collected only when there is a stream to print them to */
    FILE *warn;
    unsigned char *seen; /* per node of doc: read once already */
    int repeats;         /* nodes read again (through aliases) */
    bool stopped;        /* past CONFIG_MAX_REPEATS: read no more */
} walk;

/* "KEY: message" into report r at node's position (label: see report_add). */
static void walk_vadd(config_report *r, const char *label, size_t line, size_t col, const char *key,
                      const char *fmt, va_list ap)
{
    strbuf msg = {0};
    sb_vprintf(&msg, fmt, ap);
    report_add(r, label, line, col, "%s%s%s", key ? key : "", key ? ": " : "", sb_text(&msg));
    sb_free(&msg);
}

static void walk_error(walk *w, const yaml_node_t *node, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void walk_error(walk *w, const yaml_node_t *node, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    walk_vadd(&w->errors, NULL, node->start_mark.line + 1, node->start_mark.column + 1, key, fmt, ap);
    va_end(ap);
}

/* The same at a 1-based position kept from the walk (a value that breaks a rule). */
static void walk_error_at(walk *w, int line, int col, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void walk_error_at(walk *w, int line, int col, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    walk_vadd(&w->errors, NULL, (size_t)line, (size_t)col, key, fmt, ap);
    va_end(ap);
}

/* A warning, or (label "note") a key ptrain knows from another library and has no use for. */
static void walk_warn(walk *w, const char *label, const yaml_node_t *node, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void walk_warn(walk *w, const char *label, const yaml_node_t *node, const char *fmt, ...)
{
    if (!w->warn) return;
    va_list ap;
    va_start(ap, fmt);
    walk_vadd(&w->warnings, label, node->start_mark.line + 1, node->start_mark.column + 1, NULL, fmt, ap);
    va_end(ap);
}

/* Whether the walk may read node. A node read again (an alias repeats its anchor's values) counts
 * toward CONFIG_MAX_REPEATS; past it the walk reports once, at that node, and reads no more: a few
 * aliases of a large mapping would otherwise make a small file take hours. */
static bool walk_enter(walk *w, const yaml_node_t *node)
{
    if (w->stopped) return false;
    size_t id = (size_t)(node - w->doc->nodes.start);
    if (!w->seen[id]) {
        w->seen[id] = 1;
        return true;
    }
    if (++w->repeats <= CONFIG_MAX_REPEATS) return true;
    walk_error(w, node, NULL, "aliases repeat more than %d values in all, the most ptrain reads; write the "
               "values out instead", CONFIG_MAX_REPEATS);
    w->stopped = true;
    return false;
}

static const char *node_kind(const yaml_node_t *node)
{
    switch (node->type) {
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_MAPPING_NODE: return "a mapping";
    default: return "a scalar";
    }
}

static const char *scalar_text(const yaml_node_t *node) { return (const char *)node->data.scalar.value; }

static bool scalar_is_null(const yaml_node_t *node)
{
    if (node->type != YAML_SCALAR_NODE || node->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *t = scalar_text(node);
    return !*t || !strcmp(t, "~") || !strcmp(t, "null") || !strcmp(t, "Null") || !strcmp(t, "NULL");
}

/* A scalar node's text, or NULL (after reporting) when it is not a clean scalar. */
static const char *want_scalar(walk *w, const key_spec *spec, const char *key, yaml_node_t *node)
{
    if (node->type != YAML_SCALAR_NODE) {
        char expected[512];
        key_expected(spec, expected, sizeof expected);
        walk_error(w, node, key, "expected %s, found %s", expected, node_kind(node));
        return NULL;
    }
    if (strlen(scalar_text(node)) != node->data.scalar.length) {
        walk_error(w, node, key, "the value contains a NUL byte");
        return NULL;
    }
    return scalar_text(node);
}

static void set_scalar(walk *w, const key_spec *spec, const char *key, yaml_node_t *node, void *base)
{
    const char *text = want_scalar(w, spec, key, node);
    char why[1024];
    if (text && !key_set_scalar(spec, base, text, why, sizeof why)) walk_error(w, node, key, "%s", why);
}

static void set_list(walk *w, const key_spec *spec, const char *key, yaml_node_t *node, void *base)
{
    if (node->type != YAML_SEQUENCE_NODE) {
        set_scalar(w, spec, key, node, base);
        return;
    }
    pt_strlist *list = (pt_strlist *)((char *)base + spec->offset);
    strlist_free(list);
    pt_strlist fresh = {0};
    for (yaml_node_item_t *it = node->data.sequence.items.start; it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        if (!walk_enter(w, item)) break;
        if (item->type != YAML_SCALAR_NODE) { /* not "expected a list of ..., found a list" */
            int number = (int)(it - node->data.sequence.items.start) + 1;
            walk_error(w, item, key, "item %d is %s; write one name per item", number, node_kind(item));
            continue;
        }
        const char *text = want_scalar(w, spec, key, item);
        char why[1024];
        if (!text) continue;
        /* convert each item as if it were the whole value, then move it over */
        if (!key_set_scalar(spec, base, text, why, sizeof why)) {
            walk_error(w, item, key, "%s", why);
            continue;
        }
        for (int i = 0; i < list->n; i++) strlist_push(&fresh, list->items[i]);
        strlist_free(list);
    }
    *list = fresh;
}

/* The peer's string form of model_parameters: a size tag ("8b") that names the Ollama model
 * (ollama_model:TAG); Ollama allows letters, digits, '_', '-' and '.' in a tag. */
static void set_tag(walk *w, const key_spec *spec, const char *key, yaml_node_t *node, pt_strmap *map)
{
    const char *s = want_scalar(w, spec, key, node);
    if (!s) return;
    size_t n = strlen(s);
    if (n == 0 || n > 128 || strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.") != n ||
        s[0] == '.' || s[0] == '-') {
        walk_error(w, node, key, "\"%s\" is not an Ollama tag: use letters, digits, '_', '-' and '.' (at most 128), "
                   "e.g. \"8b\"", shown_text(s).s);
        return;
    }
    free(map->tag);
    map->tag = xstrdup(s);
}

static void set_map(walk *w, const key_spec *spec, const char *key, yaml_node_t *node, void *base)
{
    pt_strmap *map = (pt_strmap *)((char *)base + spec->offset);
    if (node->type == YAML_SCALAR_NODE && (spec->flags & F_TAG)) {
        set_tag(w, spec, key, node, map);
        return;
    }
    if (node->type != YAML_MAPPING_NODE) {
        walk_error(w, node, key, "expected a mapping of names to values%s, found %s",
                   (spec->flags & F_TAG) ? " or a size tag such as \"8b\"" : "", node_kind(node));
        return;
    }
    for (yaml_node_pair_t *p = node->data.mapping.pairs.start; p < node->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
        if (!walk_enter(w, v)) break;
        /* the mapping itself is right here; say which part of an entry is not a plain value */
        if (k->type != YAML_SCALAR_NODE) {
            walk_error(w, k, key, "expected a name, found %s", node_kind(k));
            continue;
        }
        if (v->type != YAML_SCALAR_NODE) {
            walk_error(w, v, key, "expected a plain value for \"%s\", found %s", shown_text(scalar_text(k)).s,
                       node_kind(v));
            continue;
        }
        const char *ks = want_scalar(w, spec, key, k), *vs = want_scalar(w, spec, key, v);
        if (!ks || !vs) continue;
        map->keys = realloc(map->keys, sizeof(char *) * (size_t)(map->n + 1));
        map->values = realloc(map->values, sizeof(char *) * (size_t)(map->n + 1));
        if (!map->keys || !map->values) abort();
        map->keys[map->n] = xstrdup(ks);
        map->values[map->n++] = xstrdup(vs);
    }
}

/* device_map: a word (auto, balanced, cpu, cuda:0 ...) or the mapping {"": N}. */
static void set_devmap(walk *w, const key_spec *spec, const char *key, yaml_node_t *node, void *base)
{
    char **slot = (char **)((char *)base + spec->offset);
    if (node->type != YAML_MAPPING_NODE) {
        set_scalar(w, spec, key, node, base);
        return;
    }
    yaml_node_pair_t *p = node->data.mapping.pairs.start;
    if (node->data.mapping.pairs.top - p != 1) {
        walk_error(w, node, key, "expected one entry {\"\": DEVICE}, found %d entries",
                   (int)(node->data.mapping.pairs.top - p));
        return;
    }
    yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
    yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
    if (k->type != YAML_SCALAR_NODE || *scalar_text(k) || v->type != YAML_SCALAR_NODE) {
        walk_error(w, node, key, "expected the whole model on one device, {\"\": DEVICE}");
        return;
    }
    char text[256];
    snprintf(text, sizeof text, "{\"\": %s}", scalar_text(v));
    free(*slot);
    *slot = xstrdup(text);
}

static void walk_mapping(walk *w, yaml_node_t *map, const key_spec *table, int n, void *base,
                         const char *prefix, unsigned char *is_set, int *line, int *col);

static void add_dataset(walk *w, pt_config *cfg, yaml_node_t *item, int index)
{
    pt_dataset_config *grown = realloc(cfg->datasets, sizeof *grown * (size_t)(cfg->n_datasets + 1));
    if (!grown) abort();
    cfg->datasets = grown;
    pt_dataset_config *ds = &cfg->datasets[cfg->n_datasets++];
    memset(ds, 0, sizeof *ds);
    key_apply_defaults(dataset_keys, dataset_nkeys, ds);
    ds->seed = -1;
    ds->line = (int)item->start_mark.line + 1;
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dataset[%d]", index);
    if (item->type == YAML_SCALAR_NODE && !scalar_is_null(item)) {
        ds->name = xstrdup(scalar_text(item));
        if (!*ds->name) walk_error(w, item, prefix, "name is required (an HF dataset id or a local file)");
        return;
    }
    if (item->type != YAML_MAPPING_NODE) {
        walk_error(w, item, prefix, "expected a mapping with a name (e.g. - name: \"yahma/alpaca-cleaned\"), found %s",
                   scalar_is_null(item) ? "nothing" : node_kind(item));
        return;
    }
    unsigned char seen[32] = {0};
    int line[32] = {0}, col[32] = {0};
    walk_mapping(w, item, dataset_keys, dataset_nkeys, ds, prefix, seen, line, col);
    if (w->stopped) return;
    if (!ds->name || !*ds->name)
        walk_error(w, item, prefix, "name is required (an HF dataset id or a local file)");
    /* the rules of one entry, reported at the value that breaks them (both keys were given) */
    char key[96];
    int i = key_index(dataset_keys, dataset_nkeys, "filter_data");
    if (ds->filter_data && (!ds->filter_column_value || !ds->filter_value)) {
        snprintf(key, sizeof key, "%s.filter_data", prefix);
        walk_error_at(w, line[i], col[i], key, "needs filter_column_value and filter_value");
    }
}

static void set_datasets(walk *w, pt_config *cfg, yaml_node_t *node)
{
    if (scalar_is_null(node)) {
        walk_error(w, node, "dataset", "expected a list of datasets, each a mapping with a name, found "
                                       "nothing");
        return;
    }
    if (node->type != YAML_SEQUENCE_NODE) {
        add_dataset(w, cfg, node, 0);
        return;
    }
    int i = 0;
    for (yaml_node_item_t *it = node->data.sequence.items.start; it < node->data.sequence.items.top; it++) {
        yaml_node_t *item = yaml_document_get_node(w->doc, *it);
        if (!walk_enter(w, item)) return;
        add_dataset(w, cfg, item, i++);
    }
    if (i == 0) walk_error(w, node, "dataset", "expected at least one dataset, found an empty list");
}

static void set_value(walk *w, const key_spec *spec, const char *key, yaml_node_t *node, void *base)
{
    switch (spec->type) {
    case K_STRLIST: set_list(w, spec, key, node, base); break;
    case K_STRMAP: set_map(w, spec, key, node, base); break;
    case K_DEVMAP: set_devmap(w, spec, key, node, base); break;
    case K_SECRET:
        walk_warn(w, "warning", node, "%s: a token in a config file is never used (it would reach logs and "
                                      "checkpoints); export HF_TOKEN instead", key);
        break;
    default: set_scalar(w, spec, key, node, base); break;
    }
}

/* The keys of one mapping given so far: where each was first given, and by which name. */
typedef struct {
    int first_line[128];
    const char *first_name[128];
} seen_keys;

/* The name of the top-level key whose mapping holds transformers' TrainingArguments (the seed
 * system's escape hatch): the keys in it that ptrain has are read as if given at the top level. */
#define TRAINING_ARGUMENTS "training_arguments"

static void walk_training_arguments(walk *w, yaml_node_t *map, void *base, unsigned char *is_set, int *line,
                                    int *col, seen_keys *seen);

/* One key: value pair of a mapping of table (within: NULL, or TRAINING_ARGUMENTS for a pair of that
 * mapping). Returns false for a name that is no key (reported here unless within). */
static bool walk_pair(walk *w, yaml_node_t *k, yaml_node_t *v, const key_spec *table, int n, void *base,
                      const char *prefix, unsigned char *is_set, int *line, int *col, seen_keys *seen,
                      const char *within)
{
    const char *name = scalar_text(k);
    char key[64 + sizeof(pt_shown)]; /* prefix: dataset[N] */
    snprintf(key, sizeof key, "%s%s%s", prefix ? prefix : "", prefix ? "." : "", shown_text(name).s);
    int i = key_index(table, n, name);
    const foreign_key *fk = prefix ? NULL : foreign_key_find(name);
    if (i < 0 && fk && !within && !strcmp(name, TRAINING_ARGUMENTS) && v->type == YAML_MAPPING_NODE &&
        v->data.mapping.pairs.top > v->data.mapping.pairs.start) {
        walk_training_arguments(w, v, base, is_set, line, col, seen);
        return true;
    }
    if (i < 0 && fk && !(within && !strcmp(name, TRAINING_ARGUMENTS))) {
        if (!scalar_is_null(v) && !foreign_key_accepts(fk, v)) walk_error(w, v, key, "%s", fk->refusal);
        else walk_warn(w, "note", k, "%s: %s", key, fk->note);
        return true;
    }
    if (i < 0) {
        if (within) return false;
        const char *hint = key_suggest(table, n, name);
        if (hint)
            walk_warn(w, "warning", k, "unknown key \"%s\" (did you mean \"%s\"?); ignored", key, hint);
        else
            walk_warn(w, "warning", k, "unknown key \"%s\"; ignored", key);
        return true;
    }
    if (seen->first_line[i]) {
        if (strcmp(name, seen->first_name[i]) != 0) /* once by name, once by alias: name both */
            walk_error(w, k, key, "given twice (first at line %d as \"%s\"; %s is an alias of %s)",
                       seen->first_line[i], seen->first_name[i], table[i].alias, table[i].name);
        else
            walk_error(w, k, key, "given twice (first at line %d)", seen->first_line[i]);
        return true;
    }
    seen->first_line[i] = (int)k->start_mark.line + 1;
    seen->first_name[i] = name;
    if (scalar_is_null(v) && table[i].type != K_DATASETS) return true; /* null: keep the default */
    if (table[i].type == K_DATASETS)
        set_datasets(w, base, v);
    else
        set_value(w, &table[i], key, v, base);
    is_set[i] = 1;
    if (line) line[i] = (int)v->start_mark.line + 1, col[i] = (int)v->start_mark.column + 1;
    return true;
}

static void walk_mapping(walk *w, yaml_node_t *map, const key_spec *table, int n, void *base,
                         const char *prefix, unsigned char *is_set, int *line, int *col)
{
    seen_keys seen = {{0}, {0}};
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
        if (!walk_enter(w, v)) return;
        if (k->type != YAML_SCALAR_NODE) {
            walk_error(w, k, prefix, "expected a key name, found %s", node_kind(k));
            continue;
        }
        walk_pair(w, k, v, table, n, base, prefix, is_set, line, col, &seen, NULL);
    }
}

/* training_arguments: {NAME: VALUE, ...}: each NAME that is a top-level key of ptrain's (or one it
 * reads and has no field for) as if given at the top level, where a second mention of it is "given
 * twice"; the names ptrain does not have in one error, since the run would not be the one asked for. */
static void walk_training_arguments(walk *w, yaml_node_t *map, void *base, unsigned char *is_set, int *line,
                                    int *col, seen_keys *seen)
{
    strbuf missing = {0};
    int n_missing = 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
        if (!walk_enter(w, v)) break;
        if (k->type != YAML_SCALAR_NODE) {
            walk_error(w, k, TRAINING_ARGUMENTS, "expected a key name, found %s", node_kind(k));
            continue;
        }
        if (!walk_pair(w, k, v, config_keys, config_nkeys, base, NULL, is_set, line, col, seen, TRAINING_ARGUMENTS))
            sb_printf(&missing, "%s%s", n_missing++ ? ", " : "", shown_text(scalar_text(k)).s);
    }
    if (n_missing)
        walk_error(w, map, TRAINING_ARGUMENTS,
                   "%s %s not %s ptrain has (docs/configuration.md lists the keys it reads); remove %s",
                   sb_text(&missing), n_missing > 1 ? "are" : "is",
                   n_missing > 1 ? "TrainingArguments" : "a TrainingArguments name", n_missing > 1 ? "them" : "it");
    sb_free(&missing);
}

static void config_clear(pt_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
}

/* Fill cfg from the document's top-level mapping; every problem goes to w->errors. */
static void walk_document(walk *w, pt_config *cfg)
{
    yaml_node_t *root = yaml_document_get_root_node(w->doc);
    if (!root || scalar_is_null(root))
        report_add(&w->errors, NULL, 0, 0, "the file is empty; write at least \"model_name:\" and \"dataset:\" "
                                           "(see share/examples/)");
    else if (root->type != YAML_MAPPING_NODE)
        walk_error(w, root, NULL, "expected a mapping of keys (model_name: ..., dataset: ...) at the "
                                  "top level, found %s", node_kind(root));
    else
        walk_mapping(w, root, config_keys, config_nkeys, cfg, NULL, cfg->is_set, cfg->key_line, cfg->key_col);
}

/* cfg at its defaults, with room for where each key is given. */
static pt_status config_start(pt_config *cfg, const char *name)
{
    cfg->path = xstrdup(name);
    cfg->is_set = calloc((size_t)config_nkeys, 1);
    cfg->key_line = calloc((size_t)config_nkeys, sizeof(int));
    cfg->key_col = calloc((size_t)config_nkeys, sizeof(int));
    if (!cfg->is_set || !cfg->key_line || !cfg->key_col) return ERR(PT_ERR_NOMEM, "out of memory");
    key_apply_defaults(config_keys, config_nkeys, cfg);
    return PT_OK;
}

pt_status config_parse(const char *name, const char *text, size_t len, pt_config *cfg, FILE *warn)
{
    config_clear(cfg);
    yaml_document_t doc;
    TRY(config_yaml_load(name, text, len, &doc));
    walk w = {.doc = &doc, .errors.file = name, .warnings.file = name, .warn = warn};
    w.seen = calloc((size_t)(doc.nodes.top - doc.nodes.start) + 1, 1);
    pt_status st = w.seen ? config_start(cfg, name) : ERR(PT_ERR_NOMEM, "out of memory");
    if (st == PT_OK) walk_document(&w, cfg);
    free(w.seen);
    yaml_document_delete(&doc);
    report_print(&w.warnings, warn);
    if (st == PT_OK && !w.errors.n && config_check_values(cfg, &w.errors)) config_notes(cfg, warn);
    if (st == PT_OK) st = report_fail(&w.errors);
    report_free(&w.warnings);
    report_free(&w.errors);
    if (st != PT_OK) config_free(cfg);
    return st;
}

pt_status config_load(const char *path, pt_config *cfg, FILE *warn)
{
    config_clear(cfg);
    FILE *f = fopen(path, "rb");
    if (!f) return ERR(PT_ERR_USER, "cannot open config file %s: %s", shown_text(path).s, strerror(errno));
    strbuf text = {0};
    char chunk[65536];
    size_t got;
    while (text.len <= CONFIG_MAX_BYTES && (got = fread(chunk, 1, sizeof chunk, f)) > 0) { /* past it: refused */
        if (memchr(chunk, '\0', got)) {
            fclose(f);
            sb_free(&text);
            return ERR(PT_ERR_USER, "%s: contains a NUL byte; a config file is YAML text", shown_text(path).s);
        }
        sb_printf(&text, "%.*s", (int)got, chunk);
    }
    bool failed = ferror(f);
    fclose(f);
    if (failed) {
        sb_free(&text);
        return ERR(PT_ERR_USER, "cannot read config file %s: %s", shown_text(path).s, strerror(errno));
    }
    pt_status st = config_parse(path, sb_text(&text), text.len, cfg, warn);
    sb_free(&text);
    return st;
}

void config_free(pt_config *cfg)
{
    for (int i = 0; i < config_nkeys; i++) key_free_value(&config_keys[i], cfg);
    for (int d = 0; d < cfg->n_datasets; d++)
        for (int i = 0; i < dataset_nkeys; i++) key_free_value(&dataset_keys[i], &cfg->datasets[d]);
    free(cfg->datasets);
    free(cfg->path);
    free(cfg->is_set);
    free(cfg->key_line);
    free(cfg->key_col);
    config_clear(cfg);
}
