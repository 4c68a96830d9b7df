/* hub_api.c — one push as huggingface_hub's upload_folder makes it: create the repository once per
 * process (private unless asked otherwise; 409 means it exists, and after a 401/402/403 a
 * repository the token can read exists too, as huggingface_hub's create_repo(exist_ok=True)), ask
 * the preupload endpoint which files go inline and which through LFS and what the repository holds
 * now (unchanged files are not sent again), hand the LFS ones to the LFS batch endpoint and PUT
 * each to the storage URL it returns (basic, or multipart for very large files; objects the Hub
 * already holds come back without actions and are skipped), verify when asked, then one commit to
 * main as NDJSON on the head the preupload saw (parentCommit), deleting the repository files that
 * match the job's delete patterns, listed from the repository at commit time. A commit answered
 * 412 (the branch moved: another writer, or a commit of ours whose answer was lost) looks again and
 * commits what is still missing. The requests and their bodies are listed in docs/hub.md. */
#include <fnmatch.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub_internal.h"

#define REVISION "main"
#define JSON_TYPE "application/json"
#define LFS_TYPE "application/vnd.git-lfs+json"
#define COMMIT_ROUNDS 3

static pt_status exchange(hub_client *c, const hub_request *rq, hub_response *rs, const char *repo)
{
    TRY(hub_http(c, rq, rs));
    return hub_http_check(c, rq, rs, repo);
}

/* ---- the repository ---- */

static bool known_repo(const hub_client *c, const char *repo)
{
    for (int i = 0; i < c->n_repos; i++)
        if (!strcmp(c->repos[i], repo)) return true;
    return false;
}

static void remember_repo(hub_client *c, const char *repo)
{
    char **v = realloc(c->repos, (size_t)(c->n_repos + 1) * sizeof *v);
    if (!v) return; /* it is only asked again */
    c->repos = v;
    c->repos[c->n_repos++] = xstrdup(repo);
}

/* GET /api/models/{repo} with the token answers 200: the repository exists and the token sees it. */
static bool repo_exists(hub_client *c, const char *repo)
{
    char url[2048];
    snprintf(url, sizeof url, "%s/api/models/%s", c->endpoint, repo);
    hub_request rq = {.method = "GET", .url = url, .what = "look the repository up", .auth = true};
    hub_response rs;
    bool yes = hub_http(c, &rq, &rs) == PT_OK && rs.status == 200;
    hub_response_free(&rs);
    err_clear();
    return yes;
}

/* 409 "another conflicting operation is in progress": huggingface_hub asks again. */
static bool create_conflict(const hub_response *rs)
{
    return rs->status == 409 && strstr(sb_text(&rs->body), "conflicting operation is in progress");
}

static pt_status create_repo(hub_client *c, const char *repo, bool private_repo)
{
    if (known_repo(c, repo)) return PT_OK;
    char url[2048];
    snprintf(url, sizeof url, "%s/api/repos/create", c->endpoint);
    char *body = hub_json_create(repo, private_repo);
    TRY_ALLOC(body);
    hub_request rq = {.method = "POST", .url = url, .content_type = JSON_TYPE, .body = body,
                      .body_len = strlen(body), .what = "create the repository", .auth = true};
    hub_response rs = {0};
    pt_status st = hub_http(c, &rq, &rs);
    for (int i = 0; st == PT_OK && create_conflict(&rs) && i < 5 && hub_sleep(c, 1.0); i++) {
        hub_response_free(&rs);
        st = hub_http(c, &rq, &rs);
    }
    long s = rs.status;
    bool exists = st == PT_OK && (s == 409 || ((s == 401 || s == 402 || s == 403) && repo_exists(c, repo)));
    if (st == PT_OK && !exists) st = hub_http_check(c, &rq, &rs, repo);
    if (st == PT_OK) remember_repo(c, repo);
    hub_response_free(&rs);
    free(body);
    return st;
}

/* ---- preupload: how each file goes, what the repository holds, its head ---- */

/* Files whose content the repository already holds at their path are not sent (huggingface_hub's
 * remote oid check): sha256 for LFS, the git blob id for regular files. */
static pt_status mark_unchanged(hub_file *files, int n)
{
    for (int i = 0; i < n; i++) {
        hub_file *f = &files[i];
        f->unchanged = false;
        if (!f->remote_oid[0]) continue;
        if (f->lfs) {
            f->unchanged = !strcmp(f->remote_oid, f->sha256);
            continue;
        }
        char blob[41];
        TRY(hub_blob_sha1_file(f->path, f->size, blob));
        f->unchanged = !strcmp(f->remote_oid, blob);
    }
    return PT_OK;
}

static pt_status preupload(hub_client *c, const char *repo, hub_file *files, int n, char head[65])
{
    char url[2048];
    snprintf(url, sizeof url, "%s/api/models/%s/preupload/%s", c->endpoint, repo, REVISION);
    char *body = hub_json_preupload(files, n);
    TRY_ALLOC(body);
    hub_request rq = {.method = "POST", .url = url, .content_type = JSON_TYPE, .body = body,
                      .body_len = strlen(body), .what = "ask the Hub how to upload the files (preupload)", .auth = true};
    hub_response rs;
    pt_status st = exchange(c, &rq, &rs, repo);
    if (st == PT_OK) st = hub_json_preupload_parse(sb_text(&rs.body), files, n, head, c->token);
    if (st == PT_OK) st = mark_unchanged(files, n);
    hub_response_free(&rs);
    free(body);
    return st;
}

/* ---- LFS ---- */

/* A storage URL the Hub returned with its default endpoint, on the configured one (a proxy). */
static void fix_endpoint(const hub_client *c, const char *href, char *out, size_t len)
{
    const char *def = "https://huggingface.co";
    if (strcmp(c->endpoint, def) && !strncmp(href, def, strlen(def)))
        snprintf(out, len, "%s%s", c->endpoint, href + strlen(def));
    else snprintf(out, len, "%s", href);
}

/* A single PUT of the whole file: no token and no other header, as lfs.py _upload_single_part. */
static pt_status put_single(hub_client *c, const hub_file *f, const char *href, const char *repo)
{
    char url[8192], what[4400];
    fix_endpoint(c, href, url, sizeof url);
    snprintf(what, sizeof what, "upload %s", f->repo_path);
    hub_request rq = {.method = "PUT", .url = url, .file = f->path, .file_len = f->size, .what = what};
    hub_response rs;
    pt_status st = exchange(c, &rq, &rs, repo);
    hub_response_free(&rs);
    return st;
}

static int by_part(const void *a, const void *b)
{
    return atoi(*(const char *const *)a) - atoi(*(const char *const *)b);
}

static bool all_digits(const char *s) { return *s && strspn(s, "0123456789") == strlen(s); }

/* PUT part i (0-based) of f; its ETag goes into parts. An empty ETag fails, as lfs.py. */
static pt_status put_part(hub_client *c, const hub_file *f, const char *href, size_t i, uint64_t chunk, json_t *parts,
                          const char *repo)
{
    char url[8192], what[4400];
    fix_endpoint(c, href, url, sizeof url);
    snprintf(what, sizeof what, "upload part %zu of %s", i + 1, f->repo_path);
    uint64_t off = i * chunk, len = f->size - off < chunk ? f->size - off : chunk;
    hub_request rq = {.method = "PUT", .url = url, .file = f->path, .file_off = off, .file_len = len, .what = what};
    hub_response rs;
    pt_status st = exchange(c, &rq, &rs, repo);
    if (st == PT_OK && !rs.etag[0])
        st = ERR(PT_ERR_USER, "cannot %s: the storage answered without an ETag", what);
    if (st == PT_OK)
        json_array_append_new(parts, json_pack("{s:I, s:s}", "partNumber", (json_int_t)(i + 1), "etag", rs.etag));
    hub_response_free(&rs);
    return st;
}

/* POST the parts' ETags to href (LFS headers, no token: lfs.py _upload_multi_part). */
static pt_status complete_parts(hub_client *c, const hub_file *f, const char *href, json_t *parts, const char *repo)
{
    json_t *done = json_pack("{s:s, s:O}", "oid", f->sha256, "parts", parts);
    char *body = done ? json_dumps(done, JSON_COMPACT) : NULL;
    json_decref(done);
    TRY_ALLOC(body);
    char url[8192];
    fix_endpoint(c, href, url, sizeof url);
    hub_request rq = {.method = "POST", .url = url, .content_type = LFS_TYPE, .accept = LFS_TYPE, .body = body,
                      .body_len = strlen(body), .what = "complete a multipart upload"};
    hub_response rs;
    pt_status st = exchange(c, &rq, &rs, repo);
    hub_response_free(&rs);
    free(body);
    return st;
}

/* Multipart: the header maps part numbers to URLs and gives chunk_size; PUT each part, then POST
 * the parts' ETags to href. */
static pt_status put_parts(hub_client *c, const hub_file *f, const char *href, json_t *header, const char *repo)
{
    json_t *cs = json_object_get(header, "chunk_size"), *v;
    uint64_t chunk = json_is_string(cs) ? (uint64_t)atoll(json_string_value(cs)) : (uint64_t)json_integer_value(cs);
    size_t n = 0;
    const char *key;
    json_object_foreach(header, key, v) n += all_digits(key);
    const char **keys = calloc(n ? n : 1, sizeof *keys);
    TRY_ALLOC(keys);
    n = 0;
    json_object_foreach(header, key, v) if (all_digits(key)) keys[n++] = key;
    qsort(keys, n, sizeof *keys, by_part);
    pt_status st = PT_OK;
    if (!chunk || n != (f->size + chunk - 1) / chunk)
        st = ERR(PT_ERR_USER, "the Hub's multipart answer for %s does not fit its size", shown_text(f->repo_path).s);
    json_t *parts = json_array();
    for (size_t i = 0; st == PT_OK && i < n; i++) {
        const char *part_url = json_string_value(json_object_get(header, keys[i]));
        st = part_url ? put_part(c, f, part_url, i, chunk, parts, repo)
                      : ERR(PT_ERR_USER, "the Hub's multipart answer for %s has a part without a URL",
                            shown_text(f->repo_path).s);
    }
    if (st == PT_OK) st = complete_parts(c, f, href, parts, repo);
    json_decref(parts);
    free(keys);
    return st;
}

/* POST the verify href with the token, as lfs.py (its headers: the API's, not the action's). */
static pt_status verify(hub_client *c, const hub_file *f, json_t *action, const char *repo)
{
    char url[8192], body[256];
    fix_endpoint(c, json_string_value(json_object_get(action, "href")), url, sizeof url);
    snprintf(body, sizeof body, "{\"oid\":\"%s\",\"size\":%llu}", f->sha256, (unsigned long long)f->size);
    hub_request rq = {.method = "POST", .url = url, .content_type = JSON_TYPE, .body = body, .body_len = strlen(body),
                      .what = "verify an LFS upload", .auth = true};
    hub_response rs;
    pt_status st = exchange(c, &rq, &rs, repo);
    hub_response_free(&rs);
    return st;
}

static const hub_file *file_of(const hub_file *files, int n, const char *oid)
{
    for (int i = 0; oid && i < n; i++)
        if (files[i].lfs && !strcmp(files[i].sha256, oid)) return &files[i];
    return NULL;
}

/* One object of the batch answer: error, already present (no actions), or upload (+ verify). */
static pt_status lfs_object(hub_client *c, const hub_file *files, int n, json_t *obj, const char *repo)
{
    const hub_file *f = file_of(files, n, json_string_value(json_object_get(obj, "oid")));
    if (!f) return ERR(PT_ERR_USER, "the LFS batch answer names an object ptrain did not ask about");
    json_t *err = json_object_get(obj, "error"), *actions = json_object_get(obj, "actions");
    if (err) {
        const char *m = json_string_value(json_object_get(err, "message"));
        char *msg = xstrdup(m ? m : "(no message)"); /* the whole of it scrubbed, then shortened */
        hub_scrub(msg, c->token);
        pt_status st = ERR(PT_ERR_USER, "the Hub refused the LFS upload of %s: %s", shown_text(f->repo_path).s,
                           shown_text(msg).s);
        free(msg);
        return st;
    }
    json_t *up = json_object_get(actions, "upload"), *header = json_object_get(up, "header");
    const char *href = json_string_value(json_object_get(up, "href"));
    if (!href) return PT_OK; /* the Hub holds this content already */
    TRY(json_object_get(header, "chunk_size") ? put_parts(c, f, href, header, repo) : put_single(c, f, href, repo));
    json_t *ver = json_object_get(actions, "verify");
    return json_string_value(json_object_get(ver, "href")) ? verify(c, f, ver, repo) : PT_OK;
}

static pt_status lfs_upload(hub_client *c, const char *repo, const hub_file *files, int n)
{
    int n_lfs = 0;
    for (int i = 0; i < n; i++) n_lfs += files[i].lfs && !files[i].unchanged && !files[i].ignore;
    if (!n_lfs) return PT_OK;
    char url[2048];
    snprintf(url, sizeof url, "%s/%s.git/info/lfs/objects/batch", c->endpoint, repo);
    char *body = hub_json_lfs_batch(files, n, REVISION);
    TRY_ALLOC(body);
    hub_request rq = {.method = "POST", .url = url, .content_type = LFS_TYPE, .accept = LFS_TYPE, .body = body,
                      .body_len = strlen(body), .what = "ask where to upload the large files (LFS batch)", .auth = true};
    hub_response rs;
    pt_status st = exchange(c, &rq, &rs, repo);
    json_t *j = st == PT_OK ? json_loads(sb_text(&rs.body), 0, NULL) : NULL, *objs = json_object_get(j, "objects");
    if (st == PT_OK && !json_is_array(objs)) st = ERR(PT_ERR_USER, "the LFS batch answer has no \"objects\" list");
    for (size_t k = 0; st == PT_OK && k < json_array_size(objs); k++)
        st = lfs_object(c, files, n, json_array_get(objs, k), repo);
    json_decref(j);
    hub_response_free(&rs);
    free(body);
    return st;
}

/* ---- deletions: what the repository holds now under the patterns ---- */

void hub_paths_free(char **paths)
{
    for (int i = 0; paths && paths[i]; i++) free(paths[i]);
    free(paths);
}

static bool sent(const hub_file *files, int n, const char *path)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(files[i].repo_path, path)) return true;
    return false;
}

char **hub_deletions(const char *const *del, char *const *remote, const hub_file *files, int n)
{
    int k = 0, cap = 0;
    for (int i = 0; remote && remote[i]; i++) cap++;
    char **out = calloc((size_t)cap + 1, sizeof *out);
    for (int i = 0; out && remote && remote[i]; i++) {
        bool match = false;
        for (int p = 0; del && del[p] && !match; p++) match = fnmatch(del[p], remote[i], 0) == 0;
        if (match && strcmp(remote[i], ".gitattributes") && !sent(files, n, remote[i])) out[k++] = xstrdup(remote[i]);
    }
    return out;
}

/* The folder a pattern lists: its part before the first wildcard, up to the last '/'. */
static void pattern_dir(const char *pattern, char *out, size_t len)
{
    size_t lit = strcspn(pattern, "*?[");
    snprintf(out, len, "%.*s", (int)lit, pattern);
    char *slash = strrchr(out, '/');
    if (slash) *slash = '\0';
    else out[0] = '\0';
}

/* Every file of the repository under dir ("" = all), following the listing's pages. */
static pt_status list_files(hub_client *c, const char *repo, const char *dir, char ***paths, int *n)
{
    char url[4400];
    snprintf(url, sizeof url, "%s/api/models/%s/tree/%s%s%s?recursive=true", c->endpoint, repo, REVISION,
             *dir ? "/" : "", dir);
    pt_status st = PT_OK;
    for (int page = 0; st == PT_OK && url[0] && page < 1000; page++) {
        hub_request rq = {.method = "GET", .url = url, .what = "list the repository's files", .auth = true};
        hub_response rs;
        st = hub_http(c, &rq, &rs);
        if (st == PT_OK && rs.status == 404 && *dir && page == 0) url[0] = '\0'; /* no such folder: nothing to delete */
        else if (st == PT_OK) st = hub_http_check(c, &rq, &rs, repo);
        if (st == PT_OK && url[0]) st = hub_json_tree_files(sb_text(&rs.body), paths, n);
        if (url[0]) snprintf(url, sizeof url, "%s", rs.next_url);
        hub_response_free(&rs);
    }
    return st;
}

/* The deletedFile paths of this commit: the repository files matching del, not sent again. */
static pt_status deletions(hub_client *c, const char *repo, const char *const *del, const hub_file *files, int n,
                           char ***out)
{
    char **remote = NULL;
    int n_remote = 0;
    pt_status st = PT_OK;
    for (int p = 0; del && del[p] && st == PT_OK; p++) {
        char dir[1024];
        pattern_dir(del[p], dir, sizeof dir);
        bool listed = false; /* an earlier pattern listed the same folder */
        for (int q = 0; q < p && !listed; q++) {
            char other[1024];
            pattern_dir(del[q], other, sizeof other);
            listed = !strcmp(other, dir);
        }
        if (!listed) st = list_files(c, repo, dir, &remote, &n_remote);
    }
    *out = st == PT_OK ? hub_deletions(del, remote, files, n) : NULL;
    hub_paths_free(remote);
    return st == PT_OK && !*out ? ERR(PT_ERR_NOMEM, "out of memory") : st;
}

/* ---- the commit ---- */

static pt_status commit(hub_client *c, const char *repo, const char *message, const char *parent, const hub_file *files,
                        int n, const char *const *del, char **commit_url, long *status)
{
    strbuf body = {0};
    pt_status st = hub_json_commit(message, parent, files, n, del, &body);
    char url[2048];
    snprintf(url, sizeof url, "%s/api/models/%s/commit/%s", c->endpoint, repo, REVISION);
    hub_request rq = {.method = "POST", .url = url, .content_type = "application/x-ndjson", .body = body.data,
                      .body_len = body.len, .what = "commit the files", .auth = true};
    hub_response rs = {0};
    if (st == PT_OK) st = hub_http(c, &rq, &rs);
    *status = rs.status;
    if (st == PT_OK) st = hub_http_check(c, &rq, &rs, repo);
    json_t *j = st == PT_OK ? json_loads(sb_text(&rs.body), 0, NULL) : NULL;
    const char *u = json_string_value(json_object_get(j, "commitUrl"));
    *commit_url = u ? xstrdup(u) : NULL;
    json_decref(j);
    hub_response_free(&rs);
    sb_free(&body);
    return st;
}

static bool anything_to_send(const hub_file *files, int n, char *const *gone)
{
    for (int i = 0; i < n; i++)
        if (!files[i].unchanged && !files[i].ignore) return true;
    return gone && gone[0];
}

/* Commit on head; on 412 look at the repository again (its head, what it holds, what to delete)
 * and commit what is still missing: nothing, when the lost answer was our own commit's. */
static pt_status commit_rounds(hub_client *c, const char *repo, const char *message, hub_file *files, int n,
                               const char *const *del, char head[65], char **url)
{
    pt_status st = PT_OK;
    for (int round = 1; round <= COMMIT_ROUNDS; round++) {
        if (round > 1) TRY(preupload(c, repo, files, n, head));
        char **gone = NULL;
        TRY(deletions(c, repo, del, files, n, &gone));
        long status = 0;
        bool any = anything_to_send(files, n, gone);
        st = any ? commit(c, repo, message, head, files, n, (const char *const *)gone, url, &status) : PT_OK;
        hub_paths_free(gone);
        if (st == PT_OK || status != 412) return st;
        if (round < COMMIT_ROUNDS) err_clear();
    }
    return st;
}

pt_status hub_api_push(hub_client *c, const char *repo_id, bool private_repo, const char *message, const char *dir,
                       const char *const *del, char **url)
{
    *url = NULL;
    hub_file *files = NULL;
    int n = 0;
    char head[65] = "";
    TRY(hub_files_scan(dir, &files, &n, c->cancel));
    pt_status st =
        n ? create_repo(c, repo_id, private_repo) : ERR(PT_ERR_USER, "%s holds no files to push", shown_text(dir).s);
    if (st == PT_OK) st = preupload(c, repo_id, files, n, head);
    if (st == PT_OK) st = lfs_upload(c, repo_id, files, n);
    if (st == PT_OK) st = commit_rounds(c, repo_id, message, files, n, del, head, url);
    hub_files_free(files, n);
    return st;
}
