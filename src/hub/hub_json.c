/* hub_json.c — the request bodies of the Hub API and the answers ptrain reads, field for field as
 * huggingface_hub 2.x sends them (hf_api.py create_repo, _commit_api.py _fetch_upload_modes and
 * _prepare_commit_payload, lfs.py post_lfs_batch_info) and the answers it reads (preupload, the
 * tree listing). Pure: no network, so tests/unit checks them. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub_internal.h"
#include "ptrain/safefs.h"

static char *dump(json_t *j)
{
    char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return s;
}

char *hub_json_create(const char *repo_id, bool private_repo)
{
    const char *slash = strchr(repo_id, '/');
    json_t *j = json_object();
    json_object_set_new(j, "name", json_string(slash ? slash + 1 : repo_id));
    json_object_set_new(j, "organization", slash ? json_stringn(repo_id, (size_t)(slash - repo_id)) : json_null());
    json_object_set_new(j, "visibility", json_string(private_repo ? "private" : "public"));
    json_object_set_new(j, "type", json_string("model"));
    return dump(j);
}

char *hub_json_preupload(const hub_file *files, int n)
{
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        char *sample = hub_base64(files[i].sample, files[i].sample_len);
        json_array_append_new(list, json_pack("{s:s, s:s, s:I}", "path", files[i].repo_path, "sample",
                                              sample ? sample : "", "size", (json_int_t)files[i].size));
        free(sample);
    }
    return dump(json_pack("{s:o}", "files", list));
}

/* One entry of the preupload answer onto the file of its path. */
static void preupload_entry(json_t *f, hub_file *files, int n)
{
    const char *path = json_string_value(json_object_get(f, "path"));
    const char *mode = json_string_value(json_object_get(f, "uploadMode"));
    const char *oid = json_string_value(json_object_get(f, "oid"));
    for (int i = 0; path && mode && i < n; i++) {
        if (strcmp(files[i].repo_path, path)) continue;
        files[i].lfs = !strcmp(mode, "lfs") && files[i].size > 0; /* an empty file goes inline, as huggingface_hub */
        files[i].ignore = json_is_true(json_object_get(f, "shouldIgnore"));
        snprintf(files[i].remote_oid, sizeof files[i].remote_oid, "%s", oid && strlen(oid) < 65 ? oid : "");
    }
}

pt_status hub_json_preupload_parse(const char *text, hub_file *files, int n, char head[65], const char *token)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e), *list = json_object_get(j, "files");
    if (!json_is_array(list)) {
        json_decref(j);
        char *answer = xstrdup(text); /* the whole of it scrubbed, then shortened */
        hub_scrub(answer, token);
        pt_status st =
            ERR(PT_ERR_USER, "the Hub's preupload answer is not {\"files\": [...]}: %s", shown_text(answer).s);
        free(answer);
        return st;
    }
    for (int i = 0; i < n; i++) { /* a file it leaves out: LFS if not empty */
        files[i].lfs = files[i].size > 0;
        files[i].ignore = false;
        files[i].remote_oid[0] = '\0';
    }
    size_t k;
    json_t *f;
    json_array_foreach(list, k, f) preupload_entry(f, files, n);
    const char *oid = json_string_value(json_object_get(j, "commitOid"));
    snprintf(head, 65, "%s", oid && strlen(oid) < 65 ? oid : "");
    json_decref(j);
    return PT_OK;
}

char *hub_json_lfs_batch(const hub_file *files, int n, const char *revision)
{
    json_t *objs = json_array();
    for (int i = 0; i < n; i++)
        if (files[i].lfs && !files[i].unchanged && !files[i].ignore)
            json_array_append_new(objs, json_pack("{s:s, s:I}", "oid", files[i].sha256, "size", (json_int_t)files[i].size));
    return dump(json_pack("{s:s, s:[s,s], s:o, s:s, s:{s:s}}", "operation", "upload", "transfers", "basic",
                          "multipart", "objects", objs, "hash_algo", "sha256", "ref", "name", revision));
}

static pt_status add_line(strbuf *out, json_t *line)
{
    char *s = dump(line);
    TRY_ALLOC(s);
    sb_printf(out, "%s\n", s);
    free(s);
    return PT_OK;
}

static pt_status file_line(const hub_file *f, strbuf *out)
{
    if (f->lfs)
        return add_line(out, json_pack("{s:s, s:{s:s, s:s, s:s, s:I}}", "key", "lfsFile", "value", "path", f->repo_path,
                                       "algo", "sha256", "oid", f->sha256, "size", (json_int_t)f->size));
    FILE *in;
    TRY(safefs_fopen_read(f->path, &in));
    unsigned char *data = malloc(f->size ? f->size : 1);
    size_t got = data ? fread(data, 1, f->size, in) : 0;
    fclose(in);
    char *b64 = data && got == f->size ? hub_base64(data, f->size) : NULL;
    free(data);
    if (!b64)
        return ERR(PT_ERR_USER, "cannot read %s whole (%llu bytes)", shown_text(f->path).s,
                   (unsigned long long)f->size);
    pt_status st = add_line(out, json_pack("{s:s, s:{s:s, s:s, s:s}}", "key", "file", "value", "content", b64, "path",
                                           f->repo_path, "encoding", "base64"));
    free(b64);
    return st;
}

static json_t *header_line(const char *summary, const char *parent)
{
    json_t *v = json_pack("{s:s, s:s}", "summary", summary, "description", "");
    if (v && parent && *parent) json_object_set_new(v, "parentCommit", json_string(parent));
    return json_pack("{s:s, s:o}", "key", "header", "value", v);
}

pt_status hub_json_commit(const char *summary, const char *parent, const hub_file *files, int n,
                          const char *const *del, strbuf *out)
{
    TRY(add_line(out, header_line(summary, parent)));
    for (int i = 0; i < n; i++)
        if (!files[i].unchanged && !files[i].ignore) TRY(file_line(&files[i], out));
    for (int i = 0; del && del[i]; i++) {
        bool replaced = false; /* a path this commit also writes stays */
        for (int k = 0; k < n && !replaced; k++) replaced = !strcmp(files[k].repo_path, del[i]);
        if (!replaced) TRY(add_line(out, json_pack("{s:s, s:{s:s}}", "key", "deletedFile", "value", "path", del[i])));
    }
    return PT_OK;
}

pt_status hub_json_tree_files(const char *text, char ***paths, int *n)
{
    json_t *j = json_loads(text, 0, NULL);
    if (!json_is_array(j)) {
        json_decref(j);
        return ERR(PT_ERR_USER, "the Hub's tree listing is not a list");
    }
    size_t k;
    json_t *e;
    json_array_foreach(j, k, e) {
        const char *type = json_string_value(json_object_get(e, "type"));
        const char *path = json_string_value(json_object_get(e, "path"));
        if (!type || strcmp(type, "file") || !path) continue;
        char **v = realloc(*paths, (size_t)(*n + 2) * sizeof *v);
        if (!v) abort();
        *paths = v;
        v[(*n)++] = xstrdup(path);
        v[*n] = NULL;
    }
    json_decref(j);
    return PT_OK;
}
