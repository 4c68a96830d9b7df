/* pattern.c — the files a data_files pattern names, resolved as datasets resolves one (its
 * resolve_pattern over fsspec's glob): relative to a directory, `*`, `?` and `[...]` within one
 * path segment, `**` as a whole segment for any number of folders (none included), only regular
 * files (links followed), each pattern's matches sorted; hidden files and folders (a name starting
 * with a dot) and special folders (a name starting with "__") only where the pattern names as many
 * of them, and a dataset's own files (README.md, config.json, dataset_info.json, ...) only when
 * the pattern names them. */
#include <dirent.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data_internal.h"

#define PATTERN_DEPTH 16 /* folders below the pattern's fixed start */
#define PATTERN_SEGS 64

typedef struct {
    char *segs[PATTERN_SEGS];
    int n;
} segments;

/* Split a copy of path at '/', empty segments and "." dropped; false past PATTERN_SEGS. */
static bool split(char *path, segments *s)
{
    s->n = 0;
    for (char *save = NULL, *p = strtok_r(path, "/", &save); p; p = strtok_r(NULL, "/", &save)) {
        if (!strcmp(p, ".")) continue;
        if (s->n == PATTERN_SEGS) return false;
        s->segs[s->n++] = p;
    }
    return true;
}

static bool has_magic(const char *s) { return strpbrk(s, "*?[") != NULL; }

/* Whether name's segments match the pattern's (a `**` segment: any number of segments). */
static bool matches(const segments *pat, int from, char *const *name, int nn)
{
    int np = pat->n - from;
    bool ok[PATTERN_SEGS + 1][PATTERN_DEPTH + 2] = {{false}};
    ok[np][nn] = true; /* ok[i][j]: pattern segments i.. match name segments j.. */
    for (int i = np - 1; i >= 0; i--)
        for (int j = nn; j >= 0; j--) {
            const char *p = pat->segs[from + i];
            if (!strcmp(p, "**")) ok[i][j] = ok[i + 1][j] || (j < nn && ok[i][j + 1]);
            else ok[i][j] = j < nn && fnmatch(p, name[j], 0) == 0 && ok[i + 1][j + 1];
        }
    return ok[0][0];
}

/* How many of the segments (the last one left out when parents) start with prefix. */
static int count_prefixed(char *const *segs, int n, const char *prefix, bool parents)
{
    int k = 0;
    for (int i = 0; i < n - (parents ? 1 : 0); i++)
        if (!strncmp(segs[i], prefix, strlen(prefix)) && strspn(segs[i], ".") != strlen(segs[i])) k++;
    return k;
}

static bool ignored_name(const char *base, const char *pattern_base)
{
    static const char *const names[] = {"README.md", "config.json", "dataset_info.json", "dataset_infos.json",
                                        "dummy_data.zip", "dataset_dict.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(base, names[i])) return strcmp(base, pattern_base) != 0;
    return false;
}

typedef struct {
    const segments *pat;
    int fixed;       /* pattern segments before the first with a wildcard */
    char *name[PATTERN_DEPTH + 1];
    int depth;
    pt_strlist *out;
} walker;

static void keep(walker *w, const char *path)
{
    const segments *pat = w->pat;
    int n = w->depth;
    /* the hidden and special names of the path below the fixed start against the pattern's */
    char *const *psegs = pat->segs + w->fixed;
    int pn = pat->n - w->fixed;
    if (count_prefixed(w->name, n, ".", false) != count_prefixed(psegs, pn, ".", false)) return;
    if (count_prefixed(w->name, n, "__", true) != count_prefixed(psegs, pn, "__", true)) return;
    if (ignored_name(w->name[n - 1], pat->segs[pat->n - 1])) return;
    char **grown = realloc(w->out->items, sizeof *grown * (size_t)(w->out->n + 1));
    if (!grown) abort();
    w->out->items = grown;
    w->out->items[w->out->n++] = xstrdup(path);
}

static void walk(walker *w, const char *dir)
{
    if (w->depth >= PATTERN_DEPTH) return;
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        strbuf path = {0};
        sb_printf(&path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(path.data, &st) == 0) {
            w->name[w->depth++] = e->d_name;
            if (S_ISDIR(st.st_mode)) walk(w, path.data);
            else if (S_ISREG(st.st_mode) && matches(w->pat, w->fixed, w->name, w->depth)) keep(w, path.data);
            w->depth--;
        }
        sb_free(&path);
    }
    closedir(d);
}

bool pattern_matches(const char *pattern, const char *rel)
{
    char *pc = xstrdup(pattern), *rc = xstrdup(rel);
    segments pat, name;
    bool ok = split(pc, &pat) && split(rc, &name) && pat.n > 0 && name.n > 0 && name.n <= PATTERN_DEPTH &&
              matches(&pat, 0, name.segs, name.n) &&
              count_prefixed(name.segs, name.n, ".", false) == count_prefixed(pat.segs, pat.n, ".", false) &&
              count_prefixed(name.segs, name.n, "__", true) == count_prefixed(pat.segs, pat.n, "__", true) &&
              !ignored_name(name.segs[name.n - 1], pat.segs[pat.n - 1]);
    free(pc);
    free(rc);
    return ok;
}

static int cmp_text(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

pt_status pattern_files(const char *dir, const char *pattern, pt_strlist *out)
{
    *out = (pt_strlist){0};
    bool absolute = pattern[0] == '/';
    char *copy = xstrdup(pattern);
    segments pat;
    if (!split(copy, &pat) || pat.n == 0) {
        free(copy);
        return ERR(PT_ERR_USER, "data_files pattern %s: %s", shown_text(pattern).s,
                   pat.n ? "more than 64 path segments" : "names no file");
    }
    walker w = {.pat = &pat, .out = out};
    strbuf base = {0};
    sb_printf(&base, "%s", absolute ? "" : dir);
    while (w.fixed < pat.n && !has_magic(pat.segs[w.fixed])) sb_printf(&base, "/%s", pat.segs[w.fixed++]);
    struct stat st;
    if (w.fixed == pat.n) { /* no wildcard: the path itself, whatever it is (the caller says if not a file) */
        if (stat(base.data, &st) == 0) {
            out->items = malloc(sizeof *out->items);
            if (!out->items) abort();
            out->items[out->n++] = xstrdup(base.data);
        }
    } else
        walk(&w, base.len ? base.data : "/");
    if (out->n > 1) qsort(out->items, (size_t)out->n, sizeof *out->items, cmp_text);
    sb_free(&base);
    free(copy);
    return PT_OK;
}
