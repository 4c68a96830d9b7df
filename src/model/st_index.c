/* st_index.c — a model's safetensors as one set of tensors: a single model.safetensors, or the
 * shards that model.safetensors.index.json's weight_map names (tensor name -> shard file). Each
 * shard is opened (mapped) once; every tensor the index lists must be in the shard it names, so a
 * half-finished download or an index from another revision fails at open with the fix, not later
 * with a missing weight. Tensors are looked up by name across all shards. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/jsonfile.h"
#include "ptrain/safetensors.h"
#include "ptrain/util.h"

#define INDEX_NAME "model.safetensors.index.json"

static bool exists(const char *path, bool dir)
{
    struct stat st;
    return stat(path, &st) == 0 && (dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

static char *join(const char *dir, const char *name)
{
    strbuf sb = {0};
    sb_printf(&sb, "%s/%s", dir, name);
    return sb.data;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

/* Add a file to the set (opened here); *idx gets its index. */
static pt_status add_file(st_set *s, const char *path, int *idx)
{
    st_file *grown = realloc(s->files, (size_t)(s->n_files + 1) * sizeof *grown);
    TRY_ALLOC(grown);
    s->files = grown;
    TRY(st_open(path, &s->files[s->n_files]));
    *idx = s->n_files++;
    return PT_OK;
}

/* The one file of an unsharded model: every tensor becomes an entry. */
static pt_status open_single(st_set *s, const char *path)
{
    int idx;
    TRY(add_file(s, path, &idx));
    const st_file *f = &s->files[idx];
    s->entries = calloc(f->n_tensors + 1, sizeof *s->entries);
    TRY_ALLOC(s->entries);
    for (size_t i = 0; i < f->n_tensors; i++) s->entries[i] = (st_entry){f->tensors[i].name, idx, &f->tensors[i]};
    s->n_entries = f->n_tensors; /* already sorted by name */
    return PT_OK;
}

static pt_status load_index(const char *path, json_t **map_out, json_t **root)
{
    json_error_t e;
    *root = jsonfile_load(path, JSON_REJECT_DUPLICATES, &e);
    if (!*root)
        return ERR(PT_ERR_USER, "%s: does not parse: %s (line %d, column %d); fetch the model again",
                   shown_text(path).s, e.text, e.line, e.column);
    json_t *map = json_object_get(*root, "weight_map");
    if (!json_is_object(map))
        return ERR(PT_ERR_USER, "%s: no \"weight_map\" object (tensor name -> shard file): this is not a "
                   "safetensors index; fetch the model again", shown_text(path).s);
    *map_out = map;
    return PT_OK;
}

/* The file index of shard `shard` (opening it the first time it is named). */
static pt_status shard_of(st_set *s, const char *tensor, const json_t *v, int *idx)
{
    const char *shard = json_string_value(v);
    if (!shard || !*shard || strchr(shard, '/') || strcmp(shard, "..") == 0 || strcmp(shard, ".") == 0)
        return ERR(PT_ERR_USER,
                   "%s: weight_map[\"%s\"] is %s%s%s, not the name of a shard file in %s: the index is "
                   "corrupt; fetch the model again",
                   shown_text(s->index_path).s, shown_text(tensor).s, shard ? "\"" : "not a string",
                   shard ? shown_text(shard).s : "", shard ? "\"" : "", shown_text(s->dir).s);
    for (int i = 0; i < s->n_files; i++)
        if (strcmp(strrchr(s->files[i].path, '/') + 1, shard) == 0) {
            *idx = i;
            return PT_OK;
        }
    char *path = join(s->dir, shard);
    pt_status st = exists(path, false)
                       ? add_file(s, path, idx)
                       : ERR(PT_ERR_USER, "%s: shard %s (which holds tensor \"%s\") is missing from %s: the "
                             "download is incomplete; download the model again", shown_text(s->index_path).s,
                             shown_text(shard).s, shown_text(tensor).s, shown_text(s->dir).s);
    free(path);
    return st;
}

static pt_status open_indexed(st_set *s)
{
    json_t *root = NULL, *map = NULL;
    pt_status st = load_index(s->index_path, &map, &root);
    if (st == PT_OK) {
        s->entries = calloc(json_object_size(map) + 1, sizeof *s->entries);
        if (!s->entries) st = ERR(PT_ERR_NOMEM, "out of memory");
    }
    const char *name;
    json_t *v;
    json_object_foreach(map, name, v) {
        int idx = 0;
        if (st == PT_OK) st = shard_of(s, name, v, &idx);
        if (st != PT_OK) break;
        const st_tensor *t = st_find(&s->files[idx], name);
        if (!t) {
            st = ERR(PT_ERR_USER, "%s: tensor \"%s\" should be in shard %s, which does not have it: the index and "
                     "the shards come from different downloads; download the model again",
                     shown_text(s->index_path).s, shown_text(name).s, shown_text(json_string_value(v)).s);
            break;
        }
        s->entries[s->n_entries++] = (st_entry){t->name, idx, t};
    }
    json_decref(root);
    TRY(st);
    qsort(s->entries, s->n_entries, sizeof *s->entries, cmp_entry);
    return PT_OK;
}

/* A directory without model.safetensors: say what it has instead. */
static pt_status no_weights(const char *dir)
{
    char *bin = join(dir, "pytorch_model.bin"), *bin_index = join(dir, "pytorch_model.bin.index.json");
    bool torch = exists(bin, false) || exists(bin_index, false);
    free(bin);
    free(bin_index);
    if (torch)
        return ERR(PT_ERR_USER,
                   "%s: the model's weights are PyTorch .bin files, which ptrain does not read; save "
                   "them as safetensors (transformers: model.save_pretrained(dir, safe_serialization=True))",
                   shown_text(dir).s);
    return ERR(PT_ERR_USER, "%s: no model.safetensors or " INDEX_NAME " in this directory; give a Hugging Face "
               "model directory (config.json and *.safetensors) or a .gguf file", shown_text(dir).s);
}

static pt_status open_set(st_set *s, const char *path)
{
    if (!exists(path, true)) {
        const char *slash = strrchr(path, '/');
        s->dir = slash ? strndup(path, (size_t)(slash - path)) : xstrdup(".");
        TRY_ALLOC(s->dir);
        if (slash == path) s->dir[0] = '/', s->dir[1] = '\0';
        return open_single(s, path);
    }
    s->dir = xstrdup(path);
    s->index_path = join(path, INDEX_NAME);
    if (exists(s->index_path, false)) return open_indexed(s);
    free(s->index_path);
    s->index_path = NULL;
    char *single = join(path, "model.safetensors");
    pt_status st = exists(single, false) ? open_single(s, single) : no_weights(path);
    free(single);
    return st;
}

pt_status st_set_open(const char *path, st_set *s)
{
    memset(s, 0, sizeof *s);
    pt_status st = open_set(s, path);
    if (st != PT_OK) st_set_close(s);
    return st;
}

void st_set_release(const st_set *s)
{
    for (int i = 0; s && i < s->n_files; i++) st_release(&s->files[i]);
}

void st_set_close(st_set *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_files; i++) st_close(&s->files[i]);
    free(s->files);
    free(s->entries);
    free(s->dir);
    free(s->index_path);
    memset(s, 0, sizeof *s);
}

const st_tensor *st_set_find(const st_set *s, const char *name, const st_file **file)
{
    if (!s || !name || !s->n_entries) return NULL;
    st_entry key = {.name = name};
    const st_entry *e = bsearch(&key, s->entries, s->n_entries, sizeof key, cmp_entry);
    if (file) *file = e ? &s->files[e->file] : NULL;
    return e ? e->tensor : NULL;
}
