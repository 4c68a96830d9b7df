/* hub_push_cmd.c — `ptrain push DIR [--repo ID] [--public]`: the uploads a run could not make
 * (compute nodes without internet), made later from any machine with a token. DIR is a run's
 * output_dir: every job still staged in DIR/hub goes up in order, exactly as the run would have
 * pushed it (a newer job of the same key and repository supersedes an older one), and is removed
 * once uploaded. DIR may also be an adapter directory (final_model_dir: adapter_config.json,
 * adapter_model.safetensors, README.md when there) pushed to --repo: it is staged in a temporary
 * directory under $TMPDIR, never in DIR itself, and that is removed afterwards. */
#include <curl/curl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "hub_internal.h"
#include "ptrain/log.h"
#include "ptrain/repo_id.h"

static const char push_usage[] =
    "Usage: ptrain push DIR [--repo ID] [--public]\n"
    "  DIR: a training run's output_dir; the pushes it staged in DIR/hub (what push_to_hub could\n"
    "       not upload) go to the Hub in order. Or an adapter directory (final_model_dir), pushed to --repo.\n"
    "  --repo ID   the adapter's repository instead of hub_model_id (the merged model keeps hf_model_name)\n"
    "  --public    create a missing repository public (default: private, or as the run's hub_private)\n"
    "The token comes from HF_TOKEN, else huggingface_hub's token file (`hf auth login`); HF_ENDPOINT is honoured.\n";

typedef struct {
    const char *dir, *repo;
    bool public_repo, help;
} push_args;

static pt_status parse(int argc, char **argv, push_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            a->help = true;
            return PT_OK;
        }
        if (!strcmp(argv[i], "--repo") && i + 1 < argc) a->repo = argv[++i];
        else if (!strcmp(argv[i], "--public")) a->public_repo = true;
        else if (argv[i][0] == '-' || a->dir)
            return ERR(PT_ERR_USAGE, "push: unexpected argument '%s'\n%s", shown_text(argv[i]).s, push_usage);
        else a->dir = argv[i];
    }
    if (!a->dir) return ERR(PT_ERR_USAGE, "push: no directory given\n%s", push_usage);
    const char *bad = a->repo ? config_repo_id_problem(a->repo) : NULL;
    if (bad)
        return ERR(PT_ERR_USAGE, "push: --repo %s is not a Hub repository id: %s; give NAMESPACE/NAME",
                   shown_text(a->repo).s, bad);
    return PT_OK;
}

/* Stage DIR's PEFT files (and README.md) as one job under stage_root/hub. */
static pt_status stage_adapter_dir(const push_args *a, const char *stage_root)
{
    hub_stage s;
    TRY(hub_stage_begin(stage_root, "adapter", &s));
    const char *names[] = {"adapter_config.json", "adapter_model.safetensors", "README.md"};
    pt_status st = PT_OK;
    for (int i = 0; i < 3 && st == PT_OK; i++) {
        char path[4200];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", a->dir, names[i]);
        if (i < 2 || stat(path, &sb) == 0) st = hub_stage_link(&s, path, names[i]);
    }
    hub_job_meta m = {.repo_id = a->repo, .message = "Upload the adapter with ptrain push", .key = "adapter",
                      .what = "the adapter", .private_repo = !a->public_repo};
    if (st == PT_OK) st = hub_stage_commit(&s, &m);
    if (st != PT_OK) hub_stage_remove(s.dir);
    hub_stage_free(&s);
    return st;
}

static const char *target_repo(const push_args *a, const hub_job *j)
{
    return a->repo && strcmp(j->key, "merged") ? a->repo : j->repo_id;
}

static pt_status push_one(hub_client *c, const push_args *a, hub_job *j)
{
    const char *repo = target_repo(a, j);
    bool priv = a->public_repo ? false : j->private_repo;
    char files[4400], *url = NULL;
    snprintf(files, sizeof files, "%s/files", j->dir);
    log_info("push       %s to %s (%s)...\n", shown_text(j->what).s, shown_text(repo).s, priv ? "private" : "public");
    pt_status st = hub_api_push(c, repo, priv, j->message, files, (const char *const *)j->del, &url);
    if (st == PT_OK) {
        log_info("push       done%s%s\n", url ? ": " : " (already there)", url ? shown_text(url).s : "");
        hub_stage_remove(j->dir);
    }
    free(url);
    return st;
}

/* Whether a later job of jobs goes to the same place as jobs[i] (it replaces it). */
static bool superseded(const push_args *a, const hub_job *jobs, int n, int i)
{
    for (int k = i + 1; k < n; k++)
        if (!strcmp(jobs[k].key, jobs[i].key) && !strcmp(target_repo(a, &jobs[k]), target_repo(a, &jobs[i])))
            return true;
    return false;
}

static pt_status push_jobs(const push_args *a, hub_job *jobs, int n, const char *where)
{
    hub_client c;
    signal(SIGPIPE, SIG_IGN); /* a connection the server closes is an error to retry, not the end */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    TRY(hub_client_open(&c, NULL));
    pt_status st = PT_OK;
    int done = 0;
    for (int i = 0; i < n && st == PT_OK; i++) {
        if (superseded(a, jobs, n, i)) hub_stage_remove(jobs[i].dir);
        else st = push_one(&c, a, &jobs[i]);
        if (st == PT_OK) done++;
    }
    if (st != PT_OK) err_context("push: %d of %d pushes done; %s: run the same command again", done, n, where);
    hub_client_close(&c);
    return st;
}

static void free_jobs(hub_job *jobs, int n)
{
    for (int i = 0; i < n; i++) hub_job_free(&jobs[i]);
    free(jobs);
}

/* An adapter directory: staged in a temporary directory, pushed, and that removed. */
static pt_status push_adapter_dir(const push_args *a)
{
    if (!a->repo)
        return ERR(PT_ERR_USAGE, "push: %s is an adapter directory: say where it goes with --repo ID",
                   shown_text(a->dir).s);
    const char *tmp = getenv("TMPDIR");
    char root[4200];
    snprintf(root, sizeof root, "%s/ptrain-push-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return ERR(PT_ERR_USER, "push: cannot create a temporary directory %s", shown_text(root).s);
    hub_job *jobs = NULL;
    int n = 0, skipped = 0;
    pt_status st = stage_adapter_dir(a, root);
    if (st == PT_OK) st = hub_jobs_list(root, &jobs, &n, &skipped);
    if (st == PT_OK) st = push_jobs(a, jobs, n, "nothing was staged in the adapter directory");
    if (st == PT_OK) log_info("push       every push done (%d)\n", n);
    free_jobs(jobs, n);
    hub_stage_remove(root);
    return st;
}

pt_status hub_push_main(int argc, char **argv)
{
    push_args a;
    TRY(parse(argc, argv, &a));
    if (a.help) {
        fputs(push_usage, stdout);
        return PT_OK;
    }
    hub_job *jobs = NULL;
    int n = 0, skipped = 0;
    TRY(hub_jobs_list(a.dir, &jobs, &n, &skipped));
    char peft[4200];
    snprintf(peft, sizeof peft, "%s/adapter_config.json", a.dir);
    struct stat sb;
    if (!n && stat(peft, &sb) == 0) {
        free(jobs);
        return push_adapter_dir(&a);
    }
    if (skipped) log_warn("push: %d incomplete job%s in %s/hub (a run killed while staging) skipped", skipped,
                          skipped > 1 ? "s" : "", shown_text(a.dir).s);
    if (!n) {
        free(jobs);
        return ERR(PT_ERR_USER,
                   "push: nothing to push in %s: no pushes staged in %s/hub (a run with push_to_hub leaves "
                   "them there) and no adapter_config.json (give final_model_dir and --repo)",
                   shown_text(a.dir).s, shown_text(a.dir).s);
    }
    char where[4400];
    snprintf(where, sizeof where, "the rest stay in %s/hub", shown_text(a.dir).s);
    pt_status st = push_jobs(&a, jobs, n, where);
    free_jobs(jobs, n);
    if (st == PT_OK) log_info("push       every push done (%d)\n", n);
    return st;
}
