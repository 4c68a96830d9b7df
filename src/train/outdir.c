/* outdir.c — an output_dir that holds an earlier run (outdir.h): a config that does not resume is
 * refused there before anything is written, naming the newest complete checkpoint and the two
 * ways on; with overwrite_output_dir the earlier run's files are removed first, by their names,
 * regular files only (a link or a directory planted at such a name is left alone). */
#include "ptrain/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrain/checkpoint.h"
#include "ptrain/dirlock.h"
#include "ptrain/heartbeat.h"
#include "ptrain/hub.h"
#include "ptrain/log.h"
#include "ptrain/tfevents.h"
#include "ptrain/util.h"

/* The newest checkpoint of dir whose completion mark verifies; path[0] = '\0' when none. */
static pt_status newest_complete(const char *dir, char *path, size_t len)
{
    char **paths;
    int64_t *steps;
    int n;
    path[0] = '\0';
    pt_status st = ckpt_list(dir, &paths, &steps, &n);
    for (int i = 0; i < n; i++) {
        if (st == PT_OK && !path[0]) {
            if (ckpt_verify(paths[i]) == PT_OK) snprintf(path, len, "%s", paths[i]);
            else err_clear(); /* incomplete or damaged: not a run to keep */
        }
        free(paths[i]);
    }
    free(paths);
    free(steps);
    return st;
}

/* Where the checkpoint stands and whether this config wrote it (its config hash). */
static void describe(const pt_config *cfg, const char *path, char *out, size_t len)
{
    ckpt_state s;
    if (ckpt_read_meta(path, &s) != PT_OK) {
        snprintf(out, len, "%s at step %lld (its settings cannot be read: %s)", shown_text(path).s,
                 (long long)ckpt_step_of(path), err_message());
        err_clear();
        return;
    }
    uint64_t now = config_hash(cfg);
    int n = snprintf(out, len, "%s at step %lld of %lld, ", shown_text(path).s, (long long)s.global_step,
                     (long long)s.total_steps);
    if (n >= 0 && (size_t)n < len && s.config_hash == now)
        snprintf(out + n, len - (size_t)n, "written with this config (the same config hash, %016" PRIx64 ")", now);
    else if (n >= 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, "written with another config (%s, config hash %016" PRIx64 "; this "
                 "config's is %016" PRIx64 ")", shown_text(s.config_path).s, s.config_hash, now);
    ckpt_state_free(&s);
}

pt_status outdir_check(const pt_config *cfg)
{
    TRY(dirlock_check(cfg->output_dir)); /* a run there now: its checkpoints are not an earlier run's */
    if (cfg->resume_from_checkpoint.on || cfg->overwrite_output_dir) return PT_OK;
    char path[4200], what[1600];
    TRY(newest_complete(cfg->output_dir, path, sizeof path));
    if (!path[0]) return PT_OK;
    describe(cfg, path, what, sizeof what);
    return ERR(PT_ERR_USER, "output_dir %s holds the checkpoints of an earlier run; the newest complete one is %s. "
               "%s does not resume (resume_from_checkpoint is false%s), so this run would start over from step 0 "
               "and write its checkpoints over those. To continue from step %lld, set resume_from_checkpoint: "
               "true in %s; to start over, set overwrite_output_dir: true (the earlier run's checkpoints, "
               "metrics.jsonl and TensorBoard files are removed first); or give this run another output_dir",
               shown_text(cfg->output_dir).s, what, shown_text(cfg->path).s,
               config_is_set(cfg, "resume_from_checkpoint") ? "" : " by default", (long long)ckpt_step_of(path),
               shown_text(cfg->path).s);
}

/* ---- overwrite_output_dir ---- */

/* Unlink name in the directory dfd (dir, for messages) when it is a regular file; *n counts it. */
static pt_status remove_file(int dfd, const char *dir, const char *name, int *n)
{
    struct stat sb;
    if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) return PT_OK;
    if (unlinkat(dfd, name, 0) != 0 && errno != ENOENT)
        return ERR(PT_ERR_USER, "overwrite_output_dir: cannot remove %s/%s: %s", shown_text(dir).s,
                   shown_text(name).s, strerror(errno));
    (*n)++;
    return PT_OK;
}

/* Which names of a directory go: each wanted(name, keep) says. */
typedef bool (*name_test)(const char *name, const char *keep);

static bool is_checkpoint(const char *name, const char *keep)
{
    (void)keep;
    return ckpt_step_of(name) >= 0;
}

static bool is_events(const char *name, const char *keep)
{
    (void)keep;
    return !strncmp(name, TFEVENTS_PREFIX, strlen(TFEVENTS_PREFIX));
}

/* dataset-<16 hex digits>.ptdata (dataset_cache_file_name), other than keep. */
static bool is_other_cache(const char *name, const char *keep)
{
    return strlen(name) == 8 + 16 + 7 && !strncmp(name, "dataset-", 8) && strspn(name + 8, "0123456789abcdef") == 16 &&
           !strcmp(name + 24, ".ptdata") && (!keep || strcmp(name, keep));
}

/* Every regular file of the directory dfd that wanted picks. */
static pt_status remove_named(int dfd, const char *dir, name_test wanted, const char *keep, int *n)
{
    int copy = dup(dfd);
    DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
    if (!d) {
        if (copy >= 0) close(copy);
        return ERR(PT_ERR_USER, "overwrite_output_dir: cannot list %s: %s", shown_text(dir).s, strerror(errno));
    }
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && (e = readdir(d));)
        if (wanted(e->d_name, keep)) st = remove_file(dfd, dir, e->d_name, n);
    closedir(d);
    return st;
}

/* Open the directory name inside dfd, never through a link; -1 when it is not one. */
static int open_subdir(int dfd, const char *name)
{
    return openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

/* TensorBoard's event files in output_dir/runs/NAME/, then the directories they leave empty. */
static pt_status remove_events(int dfd, const char *output_dir, int *n)
{
    int runs = open_subdir(dfd, "runs");
    if (runs < 0) return PT_OK;
    int copy = dup(runs);
    DIR *d = copy >= 0 ? fdopendir(copy) : NULL;
    if (!d && copy >= 0) close(copy);
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && d && (e = readdir(d));) {
        int sub = e->d_name[0] == '.' ? -1 : open_subdir(runs, e->d_name);
        if (sub < 0) continue;
        char dir[4600];
        snprintf(dir, sizeof dir, "%s/runs/%s", output_dir, e->d_name);
        st = remove_named(sub, dir, is_events, NULL, n);
        close(sub);
        unlinkat(runs, e->d_name, AT_REMOVEDIR); /* fails, as it should, when other files are there */
    }
    if (d) closedir(d);
    close(runs);
    unlinkat(dfd, "runs", AT_REMOVEDIR);
    return st;
}

/* "3 checkpoints (the newest of step 12), metrics.jsonl, ..." into out. */
static void say_removed(int64_t newest, const int *n, strbuf *out)
{
    static const char *const names[] = {"metrics.jsonl", "training.png", HEARTBEAT_NAME};
    if (n[0]) sb_printf(out, "%d checkpoint%s (the newest of step %lld)", n[0], n[0] > 1 ? "s" : "", (long long)newest);
    for (int i = 0; i < 3; i++)
        if (n[1 + i]) sb_printf(out, "%s%s", out->len ? ", " : "", names[i]);
    if (n[4]) sb_printf(out, "%s%d TensorBoard event file%s", out->len ? ", " : "", n[4], n[4] > 1 ? "s" : "");
    if (n[5]) sb_printf(out, "%s%d Hub push%s not made", out->len ? ", " : "", n[5], n[5] > 1 ? "es" : "");
}

pt_status outdir_clear(const pt_config *cfg)
{
    if (!cfg->overwrite_output_dir) return PT_OK;
    const char *dir = cfg->output_dir;
    char **paths;
    int64_t *steps;
    int count;
    TRY(ckpt_list(dir, &paths, &steps, &count));
    int64_t newest = count ? steps[0] : -1;
    for (int i = 0; i < count; i++) free(paths[i]);
    free(paths);
    free(steps);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* safefs opened it for the lock */
    if (dfd < 0)
        return ERR(PT_ERR_USER, "overwrite_output_dir: cannot open %s: %s", shown_text(dir).s, strerror(errno));
    int n[6] = {0}; /* checkpoints, metrics.jsonl, training.png, heartbeat.json, event files, Hub jobs */
    pt_status st = remove_named(dfd, dir, is_checkpoint, NULL, &n[0]);
    if (st == PT_OK) st = remove_file(dfd, dir, "metrics.jsonl", &n[1]);
    if (st == PT_OK) st = remove_file(dfd, dir, "training.png", &n[2]);
    if (st == PT_OK) st = remove_file(dfd, dir, HEARTBEAT_NAME, &n[3]);
    if (st == PT_OK) st = remove_events(dfd, dir, &n[4]);
    close(dfd);
    if (st == PT_OK) n[5] = hub_jobs_discard(dir);
    strbuf what = {0};
    say_removed(newest, n, &what);
    if (st == PT_OK && what.len)
        log_info("overwrite  output_dir %s: removed the earlier run's %s; starting over\n", dir, sb_text(&what));
    sb_free(&what);
    return st;
}

pt_status outdir_clear_caches(const pt_config *cfg, const char *keep)
{
    if (!cfg->overwrite_output_dir) return PT_OK;
    int dfd = open(cfg->output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return PT_OK; /* nothing there yet */
    int n = 0;
    pt_status st = remove_named(dfd, cfg->output_dir, is_other_cache, keep, &n);
    close(dfd);
    if (st == PT_OK && n)
        log_info("overwrite  removed %d dataset cache%s of other data or another tokenizer from %s\n", n,
                 n > 1 ? "s" : "", cfg->output_dir);
    return st;
}
