/* hub_jobs.c — reading back the job directories hub_stage.c writes (job.json), listing the ones
 * still waiting under output_dir/hub in order, and the `hf upload` command (huggingface_hub's CLI)
 * that does what a job does, for a machine where ptrain is not installed. */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hub_internal.h"
#include "ptrain/jsonfile.h"
#include "ptrain/repo_id.h"
#include "ptrain/safefs.h"

static char *dup_or_null(json_t *v) { return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL; }

pt_status hub_job_load(const char *dir, hub_job *j)
{
    memset(j, 0, sizeof *j);
    char path[4400];
    snprintf(path, sizeof path, "%s/job.json", dir);
    json_error_t e;
    FILE *f;
    TRY(safefs_fopen_read(path, &f)); /* a planted link never says what to upload where */
    struct stat sb;
    bool big = fstat(fileno(f), &sb) == 0 && (uint64_t)sb.st_size > JSONFILE_MAX_BYTES;
    json_t *root = big ? NULL : json_loadf(f, 0, &e), *del = json_object_get(root, "delete");
    fclose(f);
    if (big)
        return ERR(PT_ERR_USER, "%s: larger than %d MiB, the most ptrain reads of one JSON file", shown_text(path).s,
                   (int)(JSONFILE_MAX_BYTES >> 20));
    if (!root) return ERR(PT_ERR_USER, "%s: %s", shown_text(path).s, e.text);
    const char *base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
    j->dir = xstrdup(dir);
    j->seq = hub_job_seq(base);
    j->repo_id = dup_or_null(json_object_get(root, "repo_id"));
    j->message = dup_or_null(json_object_get(root, "message"));
    j->key = dup_or_null(json_object_get(root, "key"));
    j->what = dup_or_null(json_object_get(root, "what"));
    j->private_repo = !json_is_false(json_object_get(root, "private"));
    j->del = calloc(json_array_size(del) + 1, sizeof *j->del);
    for (size_t i = 0; j->del && i < json_array_size(del); i++) j->del[i] = dup_or_null(json_array_get(del, i));
    json_decref(root);
    const char *bad = j->repo_id ? config_repo_id_problem(j->repo_id) : NULL;
    pt_status st = PT_OK;
    if (!j->repo_id || !j->message || !j->key || !j->what || !j->del)
        st = ERR(PT_ERR_USER, "%s lacks repo_id, message, key or what", shown_text(path).s);
    else if (bad)
        st = ERR(PT_ERR_USER, "%s: repo_id \"%s\" is not a Hub repository id: %s; edit it to NAMESPACE/NAME",
                 shown_text(path).s, shown_text(j->repo_id).s, bad);
    if (st != PT_OK) hub_job_free(j);
    return st;
}

void hub_job_free(hub_job *j)
{
    for (int i = 0; j->del && j->del[i]; i++) free(j->del[i]);
    free(j->del);
    free(j->dir);
    free(j->repo_id);
    free(j->message);
    free(j->key);
    free(j->what);
    free(j->why);
    memset(j, 0, sizeof *j);
}

static int by_seq(const void *a, const void *b) { return ((const hub_job *)a)->seq - ((const hub_job *)b)->seq; }

pt_status hub_jobs_list(const char *output_dir, hub_job **jobs, int *n, int *skipped)
{
    char hub[4200];
    snprintf(hub, sizeof hub, "%s/hub", output_dir);
    *jobs = NULL, *n = 0, *skipped = 0;
    DIR *d = opendir(hub);
    if (!d) return PT_OK;
    int cap = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char dir[4500], json[4600];
        struct stat sb;
        snprintf(dir, sizeof dir, "%s/%s", hub, e->d_name);
        snprintf(json, sizeof json, "%s/job.json", dir);
        if (hub_job_seq(e->d_name) < 0 || stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (*n == cap) {
            hub_job *v = realloc(*jobs, (size_t)(cap = cap ? 2 * cap : 8) * sizeof *v);
            if (!v) break;
            *jobs = v;
        }
        if (stat(json, &sb) != 0 || hub_job_load(dir, &(*jobs)[*n]) != PT_OK) (*skipped)++;
        else (*n)++;
    }
    closedir(d);
    if (*n) qsort(*jobs, (size_t)*n, sizeof **jobs, by_seq);
    return PT_OK;
}

pt_status hub_waiting_list(const char *output_dir, hub_waiting **jobs, int *n)
{
    hub_job *all;
    int skipped;
    *jobs = NULL, *n = 0;
    TRY(hub_jobs_list(output_dir, &all, n, &skipped));
    *jobs = *n ? calloc((size_t)*n, sizeof **jobs) : NULL;
    for (int i = 0; i < *n && *jobs; i++)
        (*jobs)[i] = (hub_waiting){xstrdup(all[i].repo_id), xstrdup(all[i].what), xstrdup(all[i].message)};
    for (int i = 0; i < *n; i++) hub_job_free(&all[i]);
    free(all);
    if (*n && !*jobs) {
        *n = 0;
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    return PT_OK;
}

void hub_waiting_free(hub_waiting *jobs, int n)
{
    for (int i = 0; i < n; i++) free(jobs[i].repo_id), free(jobs[i].what), free(jobs[i].message);
    free(jobs);
}

void hub_shell_quote(strbuf *out, const char *s)
{
    if (*s && strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@+%") == strlen(s)) {
        sb_printf(out, "%s", s);
        return;
    }
    sb_shell_quote(out, s);
}

void hub_job_command(const hub_job *j, strbuf *out)
{
    char files[4400], ep[1024];
    snprintf(files, sizeof files, "%s/files", j->dir);
    hub_endpoint(ep, sizeof ep);
    if (hub_endpoint_custom()) {
        sb_printf(out, "HF_ENDPOINT=");
        hub_shell_quote(out, ep);
        sb_printf(out, " ");
    }
    sb_printf(out, "hf upload ");
    hub_shell_quote(out, j->repo_id);
    sb_printf(out, " ");
    hub_shell_quote(out, files);
    sb_printf(out, " . %s --commit-message ", j->private_repo ? "--private" : "--no-private");
    hub_shell_quote(out, j->message);
    for (int i = 0; j->del && j->del[i]; i++) {
        sb_printf(out, " --delete ");
        hub_shell_quote(out, j->del[i]);
    }
}
