/* readme.c — the `configs:` of a Hub dataset's README.md (its YAML front matter), as datasets reads
 * them for a repository without a loading script: each config a config_name and data_files, given
 * as a pattern, a list of patterns (the train split) or a list of {split, path} where path is a
 * pattern or a list of them. The config is the one named by config_name, else the one marked
 * default: true, else the one called "default", else the only one. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "data_internal.h"

#define README_MAX ((size_t)1 << 20)

static yaml_node_t *get(yaml_document_t *doc, yaml_node_t *map, const char *key)
{
    if (!map || map->type != YAML_MAPPING_NODE) return NULL;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
            return yaml_document_get_node(doc, p->value);
    }
    return NULL;
}

static const char *scalar(yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static void add(pt_strlist *out, const char *s)
{
    char **grown = realloc(out->items, sizeof *grown * (size_t)(out->n + 1));
    if (!grown) abort();
    out->items = grown;
    out->items[out->n++] = xstrdup(s);
}

/* A pattern or a list of them into out. */
static void patterns(yaml_document_t *doc, yaml_node_t *n, pt_strlist *out)
{
    if (scalar(n)) {
        add(out, scalar(n));
        return;
    }
    if (!n || n->type != YAML_SEQUENCE_NODE) return;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
        if (scalar(yaml_document_get_node(doc, *it))) add(out, scalar(yaml_document_get_node(doc, *it)));
}

/* The split's patterns of one config's data_files; the splits there into splits (", " between). */
static void split_files(yaml_document_t *doc, yaml_node_t *files, const char *split, pt_strlist *out, strbuf *splits)
{
    bool listed = files && files->type == YAML_SEQUENCE_NODE && files->data.sequence.items.start < files->data.sequence.items.top &&
                  yaml_document_get_node(doc, *files->data.sequence.items.start)->type == YAML_MAPPING_NODE;
    if (!listed) { /* a pattern or patterns: the train split */
        sb_printf(splits, "train");
        if (!strcmp(split, "train")) patterns(doc, files, out);
        return;
    }
    for (yaml_node_item_t *it = files->data.sequence.items.start; it < files->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(doc, *it);
        const char *name = scalar(get(doc, e, "split"));
        if (!name) name = "train";
        sb_printf(splits, "%s%s", splits->len ? ", " : "", name);
        if (!strcmp(name, split)) patterns(doc, get(doc, e, "path"), out);
    }
}

static pt_status pick(yaml_document_t *doc, const char *path, const char *config, const char *split, pt_strlist *out,
                      bool *found)
{
    yaml_node_t *configs = get(doc, yaml_document_get_root_node(doc), "configs");
    if (!configs || configs->type != YAML_SEQUENCE_NODE) return PT_OK;
    yaml_node_t *chosen = NULL, *only = NULL;
    int n = 0;
    strbuf names = {0};
    for (yaml_node_item_t *it = configs->data.sequence.items.start; it < configs->data.sequence.items.top; it++) {
        yaml_node_t *c = yaml_document_get_node(doc, *it);
        const char *name = scalar(get(doc, c, "config_name"));
        if (!name) name = "default";
        sb_printf(&names, "%s%s", names.len ? ", " : "", name);
        n++;
        only = c;
        const char *def = scalar(get(doc, c, "default"));
        if (config ? !strcmp(name, config) : (def && !strcmp(def, "true")) || (!chosen && !strcmp(name, "default")))
            chosen = c;
    }
    if (!chosen && !config && n == 1) chosen = only;
    pt_status rc = PT_OK;
    if (!chosen && config)
        rc = ERR(PT_ERR_USER, "config_name \"%s\": %s lists the configs %s", shown_text(config).s, shown_text(path).s,
                 sb_text(&names));
    else if (!chosen)
        rc = ERR(PT_ERR_USER, "%s lists the configs %s and marks none default: set config_name to one", shown_text(path).s,
                 sb_text(&names));
    strbuf splits = {0};
    if (rc == PT_OK) {
        split_files(doc, get(doc, chosen, "data_files"), split, out, &splits);
        if (out->n == 0)
            rc = ERR(PT_ERR_USER, "split \"%s\" is not in %s's data_files: its splits are %s", shown_text(split).s,
                     shown_text(path).s, sb_text(&splits));
        *found = true;
    }
    sb_free(&splits);
    sb_free(&names);
    return rc;
}

pt_status readme_data_files(const char *dir, const char *config, const char *split, pt_strlist *out, bool *found)
{
    *found = false;
    *out = (pt_strlist){0};
    strbuf path = {0};
    sb_printf(&path, "%s/README.md", dir);
    FILE *f = fopen(path.data, "rb");
    if (!f) {
        sb_free(&path);
        return PT_OK;
    }
    char *text = malloc(README_MAX + 1);
    if (!text) abort();
    size_t len = fread(text, 1, README_MAX, f);
    fclose(f);
    text[len] = '\0';
    pt_status rc = PT_OK;
    char *end = strncmp(text, "---\n", 4) ? NULL : strstr(text + 3, "\n---");
    if (end) {
        yaml_parser_t parser;
        yaml_document_t doc;
        yaml_parser_initialize(&parser);
        yaml_parser_set_input_string(&parser, (const unsigned char *)text + 4, (size_t)(end - text - 3));
        if (yaml_parser_load(&parser, &doc)) {
            rc = pick(&doc, path.data, config, split, out, found);
            yaml_document_delete(&doc);
        }
        yaml_parser_delete(&parser);
    }
    free(text);
    sb_free(&path);
    return rc;
}
