/* hfcache.c — finding a Hub repo (model or dataset) in the local Hugging Face cache, offline, the
 * way huggingface_hub does: the hub directory from HF_HUB_CACHE (or the legacy
 * HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else
 * ~/.cache/huggingface/hub; the repo in <hub>/{datasets,models}--org--name; refs/<revision>
 * names the commit whose files are in snapshots/<commit>/ (a 40-hex revision is the commit). */
#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/hfcache.h"
#include "ptrain/util.h"

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool has_data_extension(const char *name)
{
    static const char *const ext[] = {".json", ".jsonl", ".parquet", ".csv", ".tsv", ".txt", ".arrow"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t k = strlen(ext[i]);
        if (n > k && strcmp(name + n - k, ext[i]) == 0) return true;
    }
    return false;
}

#define HUB_ID_PART_MAX 96 /* the most characters of NAMESPACE or NAME in a Hub repository id */

bool hfcache_is_repo_id(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/') || name[0] == '.') return false;
    /* the Hub's limit on each part (config_repo_id_problem): a longer name is a path, and its messages show it */
    if (slash - name > HUB_ID_PART_MAX || strlen(slash + 1) > HUB_ID_PART_MAX) return false;
    for (const char *p = name; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("/._-", *p)) return false;
    return !has_data_extension(name);
}

static char *join(const char *a, const char *b)
{
    strbuf sb = {0};
    sb_printf(&sb, "%s/%s", a, b);
    return sb.data;
}

char *hfcache_hub_dir(const char **from)
{
    static const char *const direct[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"};
    for (int i = 0; i < 2; i++) {
        const char *v = getenv(direct[i]);
        if (v && *v) {
            *from = direct[i];
            return xstrdup(v);
        }
    }
    const char *home = getenv("HF_HOME"), *xdg = getenv("XDG_CACHE_HOME"), *user = getenv("HOME");
    if (home && *home) {
        *from = "HF_HOME";
        return join(home, "hub");
    }
    if (xdg && *xdg) {
        *from = "XDG_CACHE_HOME";
        return join(xdg, "huggingface/hub");
    }
    *from = "the default ~/.cache/huggingface/hub";
    return join(user && *user ? user : ".", ".cache/huggingface/hub");
}

static bool is_commit(const char *rev)
{
    size_t n = 0;
    for (; rev[n]; n++)
        if (!isxdigit((unsigned char)rev[n])) return false;
    return n == 40;
}

/* The commit named by <repo>/refs/<rev>, or NULL. */
static char *read_ref(const char *repo, const char *rev)
{
    strbuf path = {0};
    sb_printf(&path, "%s/refs/%s", repo, rev);
    FILE *f = fopen(path.data, "r");
    sb_free(&path);
    if (!f) return NULL;
    char buf[128] = {0};
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    while (n > 0 && isspace((unsigned char)buf[n - 1])) buf[--n] = '\0';
    return n ? xstrdup(buf) : NULL;
}

/* what: the path that is missing and why, its values already shown (error.h) */
static pt_status miss(const char *kind, const char *id, const char *rev, const char *hub, const char *from,
                      const char *what)
{
    bool dataset = strcmp(kind, "dataset") == 0;
    strbuf opt = {0};
    if (dataset) sb_printf(&opt, " --repo-type dataset");
    if (strcmp(rev, "main") != 0) sb_printf(&opt, " --revision %s", shown_text(rev).s);
    pt_status rc = ERR(PT_ERR_USER,
                       "%s %s is not in the Hugging Face cache: %s (hub cache %s, from %s). On a machine with "
                       "internet, run\n  huggingface-cli download%s %s\n(or: hf download %s%s), then copy the "
                       "%ss--%.*s--%s directory into %s, or set HF_HUB_CACHE to the cache that has it",
                       kind, id, what, shown_text(hub).s, shown_text(from).s, sb_text(&opt), id, id,
                       sb_text(&opt), kind, (int)(strchr(id, '/') - id), id, strchr(id, '/') + 1, shown_text(hub).s);
    sb_free(&opt);
    return rc;
}

static pt_status locate(const char *kind, const char *id, const char *rev, const char *hub, const char *from,
                        const char *repo, char **dir)
{
    strbuf what = {0};
    char *commit = is_commit(rev) ? xstrdup(rev) : read_ref(repo, rev);
    pt_status rc = PT_OK;
    if (!is_dir(repo)) sb_printf(&what, "%s does not exist", shown_text(repo).s);
    else if (!commit) {
        strbuf ref = {0};
        sb_printf(&ref, "%s/refs/%s", repo, rev);
        sb_printf(&what, "%s is missing", shown_text(ref.data).s);
        sb_free(&ref);
    } else {
        strbuf snap = {0};
        sb_printf(&snap, "%s/snapshots/%s", repo, commit);
        if (is_dir(snap.data)) *dir = snap.data;
        else {
            sb_printf(&what, "%s (%s%s) is missing", shown_text(snap.data).s,
                      is_commit(rev) ? "revision " : "named by refs/", shown_text(rev).s);
            sb_free(&snap);
        }
    }
    if (what.len) rc = miss(kind, id, rev, hub, from, what.data);
    free(commit);
    sb_free(&what);
    return rc;
}

pt_status hfcache_snapshot(const char *kind, const char *id, const char *revision, char **dir)
{
    *dir = NULL;
    const char *from;
    char *hub = hfcache_hub_dir(&from);
    const char *slash = strchr(id, '/');
    strbuf repo = {0};
    sb_printf(&repo, "%s/%ss--%.*s--%s", hub, kind, (int)(slash - id), id, slash + 1);
    pt_status rc = locate(kind, id, revision && *revision ? revision : "main", hub, from, repo.data, dir);
    sb_free(&repo);
    free(hub);
    return rc;
}
