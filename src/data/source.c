/* source.c — which files a dataset entry names. A local file is itself; a local directory or an
 * HF dataset id (its snapshot in the HF cache) gives its data_files (relative to it, patterns
 * resolved as datasets resolves them, `**` included: pattern.c), or the files the README's
 * configs: name for the split (readme.c), or else of every .json/.jsonl/.csv/.tsv/.parquet file
 * under it (recursively, sorted by path) those of the split as datasets picks them (splits.c). Arrow files are
 * refused, saying what to name instead, and a path that is
 * neither a regular file nor a directory (a device, a FIFO, a socket) with what it is; a data file
 * is opened without blocking on a FIFO (source_open). */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_internal.h"

#define WALK_DEPTH 8

typedef enum { KIND_OTHER, KIND_DATA, KIND_CONVERT } file_kind;

static const char *extension(const char *path)
{
    const char *base = strrchr(path, '/');
    const char *dot = strrchr(base ? base + 1 : path, '.');
    return dot ? dot + 1 : "";
}

static file_kind kind_of(const char *path)
{
    const char *ext = extension(path);
    if (!strcmp(ext, "json") || !strcmp(ext, "jsonl") || !strcmp(ext, "csv") || !strcmp(ext, "tsv") ||
        !strcmp(ext, "parquet"))
        return KIND_DATA;
    if (!strcmp(ext, "arrow")) return KIND_CONVERT;
    return KIND_OTHER;
}

/* Files a Hub dataset carries beside its data that are not rows. */
static bool is_metadata(const char *path)
{
    static const char *const names[] = {"dataset_info.json", "dataset_infos.json", "dataset_dict.json", "state.json"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(base, names[i])) return true;
    return false;
}

static void push(data_files *f, char *path)
{
    char **grown = realloc(f->path, sizeof *grown * (size_t)(f->n + 1));
    if (!grown) abort();
    f->path = grown;
    f->path[f->n++] = path;
}

static int cmp_path(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

typedef enum { PATH_MISSING, PATH_FILE, PATH_DIR, PATH_SPECIAL } path_kind;

/* What path is (links followed); *mode gets its type. */
static path_kind stat_kind(const char *path, mode_t *mode)
{
    struct stat st;
    if (stat(path, &st) != 0) return PATH_MISSING;
    *mode = st.st_mode;
    return S_ISREG(st.st_mode) ? PATH_FILE : S_ISDIR(st.st_mode) ? PATH_DIR : PATH_SPECIAL;
}

static const char *mode_name(mode_t mode)
{
    return S_ISCHR(mode)    ? "a character device"
           : S_ISBLK(mode)  ? "a block device"
           : S_ISFIFO(mode) ? "a FIFO (a named pipe)"
           : S_ISSOCK(mode) ? "a socket"
           : S_ISDIR(mode)  ? "a directory"
                            : "not a regular file";
}

pt_status source_not_a_file(const char *path, mode_t mode)
{
    return ERR(PT_ERR_USER, "%s is %s, not a data file: ptrain reads regular .json, .jsonl, .csv, .tsv and .parquet "
               "files (name one, or a directory of them)", shown_text(path).s, mode_name(mode));
}

pt_status source_open(const char *path, FILE **f)
{
    *f = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO opens at once, and is refused below */
    struct stat st;
    if (fd < 0) {
        int err = errno;
        if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) return source_not_a_file(path, st.st_mode);
        return ERR(PT_ERR_USER, "cannot read %s: %s", shown_text(path).s, strerror(err));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        pt_status rc = source_not_a_file(path, st.st_mode);
        close(fd);
        return rc;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    *f = fdopen(fd, "rb");
    if (*f) return PT_OK;
    close(fd);
    return ERR(PT_ERR_NOMEM, "out of memory opening %s", shown_text(path).s);
}

/* Every data file (one ptrain reads, or an Arrow file) under dir, hidden entries skipped; a special file with a
 * data file's name (a FIFO called train.jsonl) is an error. */
static pt_status walk(const char *dir, int depth, data_files *out)
{
    DIR *d = opendir(dir);
    if (!d) return PT_OK;
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        strbuf path = {0};
        sb_printf(&path, "%s/%s", dir, e->d_name);
        mode_t mode = 0;
        path_kind k = stat_kind(path.data, &mode);
        bool data = kind_of(path.data) != KIND_OTHER && !is_metadata(path.data);
        if (k == PATH_DIR && depth < WALK_DEPTH) st = walk(path.data, depth + 1, out);
        else if (k == PATH_SPECIAL && data) st = source_not_a_file(path.data, mode);
        if (k == PATH_FILE && data) push(out, path.data);
        else sb_free(&path);
    }
    closedir(d);
    return st;
}

/* Keep the files ptrain reads, if there are any (else the Arrow files, refused next); free the others. */
static void narrow(data_files *f)
{
    int n = 0, kept = 0;
    for (int i = 0; i < f->n; i++) kept += kind_of(f->path[i]) == KIND_DATA;
    if (!kept) return;
    for (int i = 0; i < f->n; i++) {
        if (kind_of(f->path[i]) == KIND_DATA) f->path[n++] = f->path[i];
        else free(f->path[i]);
    }
    f->n = n;
}

/* An Arrow file: what it is and what ptrain reads instead (no conversion step: the data it came
 * from is read as it is). */
static pt_status arrow_error(const char *path, int others)
{
    strbuf more = {0};
    if (others) sb_printf(&more, " (and %d more such file%s)", others, others > 1 ? "s" : "");
    pt_status rc = ERR(PT_ERR_USER,
                       "%s%s is an Arrow file (the format of datasets' cache and save_to_disk), which ptrain does not "
                       "read; name the dataset's Hub id (its snapshot in the HF cache) or the .parquet, .json, .jsonl or "
                       ".csv files it was made from",
                       shown_text(path).s, sb_text(&more));
    sb_free(&more);
    return rc;
}

/* After narrowing: fail on Arrow files (only left when no file ptrain reads is). */
static pt_status check_kinds(const data_files *f)
{
    int convert = 0, first = -1;
    for (int i = 0; i < f->n; i++)
        if (kind_of(f->path[i]) == KIND_CONVERT && convert++ == 0) first = i;
    return convert ? arrow_error(f->path[first], convert - 1) : PT_OK;
}

/* Whether a folder of path (after skip) is called name. */
static bool in_folder(const char *path, const char *name)
{
    size_t k = strlen(name);
    for (const char *p = path; (p = strchr(p, '/')) != NULL; p++)
        if (!strncmp(p + 1, name, k) && p[1 + k] == '/') return true;
    return false;
}

/* config_name: keep the files under a folder of that name; none is an error naming the folders
 * the snapshot or directory has at its top. */
static pt_status keep_config(data_files *f, size_t skip, const char *config, const char *dir)
{
    int n = 0;
    for (int i = 0; i < f->n; i++) n += in_folder(f->path[i] + skip, config);
    if (n) {
        n = 0;
        for (int i = 0; i < f->n; i++) {
            if (in_folder(f->path[i] + skip, config)) f->path[n++] = f->path[i];
            else free(f->path[i]);
        }
        f->n = n;
        return PT_OK;
    }
    strbuf found = {0};
    for (int i = 0; i < f->n; i++) { /* sorted, so a folder's files are together */
        const char *rel = f->path[i] + skip + 1, *slash = strchr(rel, '/');
        if (!slash) continue;
        size_t k = (size_t)(slash - rel);
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) {
            const char *o = f->path[j] + skip + 1;
            seen = !strncmp(o, rel, k) && o[k] == '/';
        }
        if (!seen) sb_printf(&found, "%s%.*s", found.len ? ", " : "", (int)k, rel);
    }
    pt_status rc = ERR(PT_ERR_USER, "config_name \"%s\": %s has no folder of that name%s%s", shown_text(config).s,
                       shown_text(dir).s, found.len ? "; its folders: " : " (its files are in no folder)",
                       sb_text(&found));
    sb_free(&found);
    return rc;
}

static pt_status add_pattern(const char *dir, const char *pattern, data_files *out);

/* The README's configs: the chosen config's files of the split, each pattern's sorted (pattern.c). */
static pt_status from_readme(const pt_strlist *pats, const char *dir, data_files *out)
{
    for (int i = 0; i < pats->n; i++) {
        const char *pat = pats->items[i];
        bool up = !strcmp(pat, "..") || !strncmp(pat, "../", 3) || strstr(pat, "/../") ||
                  (strlen(pat) >= 3 && !strcmp(pat + strlen(pat) - 3, "/.."));
        if (pat[0] == '/' || up) /* a dataset's own README names files inside its snapshot only */
            return ERR(PT_ERR_USER, "%s/README.md: configs: data_files pattern %s leaves the dataset's folder; "
                       "only paths inside it are read", shown_text(dir).s, shown_text(pat).s);
        int before = out->n;
        TRY(add_pattern(dir, pat, out));
        qsort(out->path + before, (size_t)(out->n - before), sizeof *out->path, cmp_path);
    }
    return check_kinds(out);
}

static pt_status from_walk(const pt_dataset_config *d, const char *dir, data_files *out)
{
    if (d->split_type && strpbrk(d->split_type, "[:%+"))
        return ERR(PT_ERR_USER, "split_type \"%s\": split slicing is not supported; name the split (e.g. train) and "
                   "use num_samples to take the first rows", shown_text(d->split_type).s);
    const char *split = d->split_type && *d->split_type ? d->split_type : "train";
    pt_strlist pats;
    bool readme;
    pt_status rc = readme_data_files(dir, d->config_name && *d->config_name ? d->config_name : NULL, split, &pats,
                                     &readme);
    if (rc == PT_OK && readme) rc = from_readme(&pats, dir, out);
    for (int i = 0; i < pats.n; i++) free(pats.items[i]);
    free(pats.items);
    if (rc != PT_OK || readme) return rc;
    TRY(walk(dir, 0, out));
    qsort(out->path, (size_t)out->n, sizeof *out->path, cmp_path);
    if (d->config_name && *d->config_name) TRY(keep_config(out, strlen(dir), d->config_name, dir));
    TRY(splits_pick(out, strlen(dir) + 1, split, dir));
    narrow(out);
    if (out->n == 0) return ERR(PT_ERR_USER, "%s has no .json, .jsonl, .csv, .tsv or .parquet files", shown_text(dir).s);
    return check_kinds(out);
}

static pt_status add_pattern(const char *dir, const char *pattern, data_files *out)
{
    pt_strlist found;
    TRY(pattern_files(dir, pattern, &found));
    pt_status st = PT_OK;
    if (found.n == 0) {
        strbuf path = {0};
        if (pattern[0] == '/') sb_printf(&path, "%s", pattern);
        else sb_printf(&path, "%s/%s", dir, pattern);
        st = ERR(PT_ERR_USER, "data_files: %s does not exist%s", shown_text(path.data).s,
                 strpbrk(pattern, "*?[") ? " (no file matches the pattern)" : "");
        sb_free(&path);
    }
    for (int i = 0; i < found.n; i++) {
        mode_t mode = 0;
        if (st == PT_OK && stat_kind(found.items[i], &mode) != PATH_FILE) st = source_not_a_file(found.items[i], mode);
        if (st == PT_OK) push(out, found.items[i]);
        else free(found.items[i]);
    }
    free(found.items);
    return st;
}

static pt_status from_data_files(const pt_dataset_config *d, const char *dir, data_files *out)
{
    for (int i = 0; i < d->data_files.n; i++) {
        int before = out->n;
        TRY(add_pattern(dir, d->data_files.items[i], out));
        qsort(out->path + before, (size_t)(out->n - before), sizeof *out->path, cmp_path);
    }
    return check_kinds(out);
}

static pt_status from_dir(const pt_dataset_config *d, const char *dir, data_files *out)
{
    return d->data_files.n ? from_data_files(d, dir, out) : from_walk(d, dir, out);
}

static pt_status from_name(const pt_dataset_config *d, data_files *out)
{
    mode_t mode = 0;
    path_kind k = stat_kind(d->name, &mode);
    if (k == PATH_SPECIAL) return source_not_a_file(d->name, mode);
    if (k != PATH_MISSING) {
        if (k == PATH_DIR) return from_dir(d, d->name, out);
        if (d->data_files.n)
            return ERR(PT_ERR_USER, "data_files needs name to be a directory or an HF dataset id; %s is a file",
                       shown_text(d->name).s);
        push(out, xstrdup(d->name));
        return check_kinds(out);
    }
    if (!hfcache_is_repo_id(d->name))
        return ERR(PT_ERR_USER, "%s does not exist (relative paths start at the current directory)",
                   shown_text(d->name).s);
    char *snap;
    TRY(hfcache_snapshot("dataset", d->name, d->revision && *d->revision ? d->revision : NULL, &snap));
    pt_status rc = from_dir(d, snap, out);
    free(snap);
    return rc;
}

pt_status source_files(const pt_dataset_config *d, data_files *out)
{
    *out = (data_files){.format = d->format};
    pt_status rc = from_name(d, out);
    if (rc != PT_OK) source_free(out);
    return rc;
}

void source_free(data_files *f)
{
    for (int i = 0; i < f->n; i++) free(f->path[i]);
    free(f->path);
    f->path = NULL;
    f->n = 0;
}
