/* hub_stage.c — job directories under output_dir/hub/: NNNNNN-label/files/ holds a snapshot of what
 * one push sends, laid out as in the repository, and NNNNNN-label/job.json (written last, atomically)
 * says where it goes. Files are hard links to what training wrote (every file ptrain writes is
 * written under a temporary name and renamed, so a later save makes a new file and a rotation only
 * removes a name: the snapshot stays as it was), else copies. A job without job.json is one a kill
 * interrupted while staging; it is never uploaded, and the next run's start removes it. An uploaded
 * job's directory is removed, job.json first. */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub_internal.h"
#include "ptrain/filewrite.h"
#include "ptrain/safefs.h"

int hub_job_seq(const char *name)
{
    size_t digits = strspn(name, "0123456789");
    if (digits < 3 || digits > 9 || name[digits] != '-') return -1;
    return (int)strtol(name, NULL, 10);
}

static int next_seq(const char *hub)
{
    int seq = 0;
    DIR *d = opendir(hub);
    for (struct dirent *e; d && (e = readdir(d));) {
        int n = hub_job_seq(e->d_name);
        if (n > seq) seq = n;
    }
    if (d) closedir(d);
    return seq + 1;
}

pt_status hub_stage_begin(const char *output_dir, const char *label, hub_stage *s)
{
    memset(s, 0, sizeof *s);
    strbuf hub = {0}, dir = {0}, files = {0};
    sb_printf(&hub, "%s/hub", output_dir);
    pt_status st = safefs_mkdirs(sb_text(&hub));
    sb_printf(&dir, "%s/%06d-%s", sb_text(&hub), next_seq(sb_text(&hub)), label);
    sb_printf(&files, "%s/files", sb_text(&dir));
    if (st == PT_OK) st = safefs_mkdirs(sb_text(&files));
    sb_free(&hub);
    s->dir = dir.data;
    s->files = files.data;
    if (st != PT_OK) hub_stage_free(s);
    return st;
}

void hub_stage_free(hub_stage *s)
{
    free(s->dir);
    free(s->files);
    memset(s, 0, sizeof *s);
}

/* files/repo_path, with its directories created. */
static pt_status target(const hub_stage *s, const char *repo_path, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", s->files, repo_path);
    char *slash = strrchr(out, '/');
    *slash = '\0';
    pt_status st = safefs_mkdirs(out);
    *slash = '/';
    return st;
}

static pt_status copy_file(const char *src, const char *dst)
{
    FILE *in;
    TRY(safefs_fopen_read(src, &in));
    pt_filewriter w;
    pt_status st = fw_open(&w, dst);
    char buf[1 << 16];
    for (size_t got; st == PT_OK && (got = fread(buf, 1, sizeof buf, in)) > 0;) st = fw_write(&w, buf, got);
    if (st == PT_OK && ferror(in)) st = ERR(PT_ERR_USER, "cannot read %s", shown_text(src).s);
    fclose(in);
    if (st == PT_OK) return fw_commit(&w);
    fw_abort(&w);
    return st;
}

pt_status hub_stage_link(const hub_stage *s, const char *src, const char *repo_path)
{
    char dst[8400];
    struct stat sb;
    if (lstat(src, &sb) != 0)
        return ERR(PT_ERR_USER, "cannot stage %s for the Hub: %s", shown_text(src).s, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return ERR(PT_ERR_USER, "refusing to stage %s for the Hub: it is not a regular file (ptrain never uploads "
                   "through a link); remove it", shown_text(src).s);
    TRY(target(s, repo_path, dst, sizeof dst));
    unlink(dst);
    if (link(src, dst) == 0) return PT_OK;
    return copy_file(src, dst); /* another file system, or one without hard links */
}

pt_status hub_stage_link_dir(const hub_stage *s, const char *src, const char *repo_dir)
{
    DIR *d = opendir(src);
    if (!d) return ERR(PT_ERR_USER, "cannot read directory %s: %s", shown_text(src).s, strerror(errno));
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && (e = readdir(d));) {
        char path[4400], rel[4400];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", src, e->d_name);
        if (e->d_name[0] == '.' || lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        snprintf(rel, sizeof rel, "%s%s%s", repo_dir, *repo_dir ? "/" : "", e->d_name);
        st = hub_stage_link(s, path, rel);
    }
    closedir(d);
    return st;
}

pt_status hub_stage_write(const hub_stage *s, const char *repo_path, const void *data, size_t n)
{
    char dst[8400];
    TRY(target(s, repo_path, dst, sizeof dst));
    return fw_write_file(dst, data, n);
}

pt_status hub_stage_commit(const hub_stage *s, const hub_job_meta *m)
{
    json_t *del = json_array();
    for (int i = 0; m->del && m->del[i]; i++) json_array_append_new(del, json_string(m->del[i]));
    json_t *j = json_pack("{s:s, s:b, s:s, s:s, s:s, s:o}", "repo_id", m->repo_id, "private", m->private_repo,
                          "message", m->message, "key", m->key, "what", m->what, "delete", del);
    char *text = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    json_decref(j);
    TRY_ALLOC(text);
    char path[4400];
    snprintf(path, sizeof path, "%s/job.json", s->dir);
    pt_status st = fw_write_file(path, text, strlen(text));
    free(text);
    return st;
}

static int remove_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* job.json goes first (from then on the job is incomplete, never uploaded), then the directory is
 * renamed to a dot-name (it leaves the listing at once) and removed; what a kill leaves midway,
 * hub_jobs_clean removes at the next run's start. */
void hub_stage_remove(const char *dir)
{
    if (!dir || !*dir) return;
    char job[4400], gone[4400];
    const char *slash = strrchr(dir, '/');
    int head = slash ? (int)(slash - dir + 1) : 0;
    snprintf(job, sizeof job, "%s/job.json", dir);
    snprintf(gone, sizeof gone, "%.*s.gone-%s", head, dir, dir + head);
    unlink(job);
    const char *victim = rename(dir, gone) == 0 ? gone : dir;
    nftw(victim, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void hub_jobs_clean(const char *output_dir)
{
    char hub[4200];
    snprintf(hub, sizeof hub, "%s/hub", output_dir);
    DIR *d = opendir(hub);
    for (struct dirent *e; d && (e = readdir(d));) {
        char dir[4500], json[4600];
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", hub, e->d_name);
        snprintf(json, sizeof json, "%s/job.json", dir);
        bool half_removed = !strncmp(e->d_name, ".gone-", 6);
        bool unfinished = hub_job_seq(e->d_name) >= 0 && stat(json, &sb) != 0;
        if ((half_removed || unfinished) && lstat(dir, &sb) == 0 && S_ISDIR(sb.st_mode))
            nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    if (d) closedir(d);
}

int hub_jobs_discard(const char *output_dir)
{
    char hub[4200];
    snprintf(hub, sizeof hub, "%s/hub", output_dir);
    DIR *d = opendir(hub);
    int dropped = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        char dir[4500], json[4600];
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", hub, e->d_name);
        snprintf(json, sizeof json, "%s/job.json", dir);
        bool job = hub_job_seq(e->d_name) >= 0 || !strncmp(e->d_name, ".gone-", 6);
        if (!job || lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        dropped += unlink(json) == 0 && e->d_name[0] != '.'; /* first: from here on never uploaded */
        nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
    }
    if (d) closedir(d);
    rmdir(hub); /* fails, as it should, when something else is in it */
    return dropped;
}
