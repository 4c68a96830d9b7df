/* hub_worker.c — the uploads of a training run, in the background: rank 0 stages a job and hands
 * it to one worker thread, which pushes the jobs in order while training goes on. Nothing here
 * blocks the caller but a mutex held for list updates (directories are removed and lines logged
 * after it is released): a slow, failing or absent network costs training no time. A job still
 * waiting is dropped when a newer one with the same key and repository arrives (the adapter at the
 * root, last-checkpoint/). At the end, hub_queue_finish (hub_report.c) waits a bounded time,
 * cancels what is still running (curl's progress callback, the hashing and the backoff sleeps
 * watch a flag) and reports, per job left, the `hf upload` command to finish by hand. Jobs left on
 * disk are picked up by the next run in the same output_dir (a resume) or by `ptrain push`. */
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "hub_internal.h"
#include "ptrain/log.h"

void hub_job_list_add(hub_job_list *l, const hub_job *j)
{
    if (l->n == l->cap) {
        int c = l->cap ? 2 * l->cap : 8;
        hub_job *v = realloc(l->v, (size_t)c * sizeof *v);
        if (!v) abort(); /* a few structs: out of memory here is not recoverable anyway */
        l->v = v;
        l->cap = c;
    }
    l->v[l->n++] = *j;
}

void hub_job_list_discard(hub_job_list *l)
{
    for (int i = 0; i < l->n; i++) {
        hub_stage_remove(l->v[i].dir);
        hub_job_free(&l->v[i]);
    }
    free(l->v);
    memset(l, 0, sizeof *l);
}

static bool same_target(const hub_job *a, const hub_job *b)
{
    return !strcmp(a->key, b->key) && !strcmp(a->repo_id, b->repo_id);
}

/* Move the jobs of l that j supersedes to gone. */
static int move_superseded(hub_job_list *l, const hub_job *j, hub_job_list *gone)
{
    int moved = 0;
    for (int i = 0; i < l->n; i++) {
        if (!same_target(&l->v[i], j)) continue;
        hub_job_list_add(gone, &l->v[i]);
        memmove(&l->v[i], &l->v[i + 1], (size_t)(l->n - i - 1) * sizeof *l->v);
        l->n--;
        i--;
        moved++;
    }
    return moved;
}

/* Queue j, superseding the waiting and failed jobs of its key (to gone); caller holds mu. */
static void add_waiting(hub_queue *q, hub_job *j, hub_job_list *gone)
{
    q->n_dropped += move_superseded(&q->wait, j, gone);
    move_superseded(&q->fail, j, gone);
    hub_job_list_add(&q->wait, j);
}

static bool newer_waiting(const hub_queue *q, const hub_job *j)
{
    for (int i = 0; i < q->wait.n; i++)
        if (same_target(&q->wait.v[i], j)) return true;
    return false;
}

/* The running job failed with why: file it as failed, or drop it when a newer one of its key
 * waits (into gone); caller holds mu. */
static void file_failure(hub_queue *q, hub_job *j, const char *why, hub_job_list *gone)
{
    if (newer_waiting(q, j)) {
        hub_job_list_add(gone, j);
        q->n_dropped++;
        return;
    }
    j->why = xstrdup(why);
    hub_job_list_add(&q->fail, j);
}

/* Push the running job (mu not held), then file it as done or failed. */
static void run_job(hub_queue *q)
{
    hub_job j = q->running;
    char files[4400], *url = NULL, why[4096] = "";
    snprintf(files, sizeof files, "%s/files", j.dir);
    pt_status st = hub_api_push(&q->client, j.repo_id, j.private_repo, j.message, files, (const char *const *)j.del, &url);
    hub_job_list gone = {0};
    if (st == PT_OK) {
        log_info("hub        pushed %s to %s%s%s\n", shown_text(j.what).s, shown_text(j.repo_id).s, url ? ": " : "",
                 url ? shown_text(url).s : " (already there)");
        hub_job_list_add(&gone, &j);
    } else {
        snprintf(why, sizeof why, "%s", err_message());
        err_clear();
        hub_scrub(why, q->client.token);
        if (!atomic_load(&q->cancel))
            log_warn("hub: the push of %s to %s failed: %s", shown_text(j.what).s, shown_text(j.repo_id).s, why);
    }
    free(url);
    pthread_mutex_lock(&q->mu);
    if (st == PT_OK) q->n_done++;
    else file_failure(q, &j, why, &gone);
    memset(&q->running, 0, sizeof q->running);
    pthread_mutex_unlock(&q->mu);
    hub_job_list_discard(&gone); /* before idle: the final report sees the directories gone */
    pthread_mutex_lock(&q->mu);
    q->busy = false;
    pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
}

/* Whether the worker stops taking jobs: cancelled, or closing with nothing left, or closing while
 * the Hub is unreachable (the rest would fail the same way: they stay staged). Caller holds mu. */
static bool worker_done(hub_queue *q)
{
    if (atomic_load(&q->cancel)) return true;
    return q->closing && (!q->wait.n || atomic_load(&q->client.unreachable));
}

static void *worker(void *arg)
{
    hub_queue *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->wait.n && !q->closing && !atomic_load(&q->cancel)) pthread_cond_wait(&q->wake, &q->mu);
        if (worker_done(q)) break;
        q->running = q->wait.v[0];
        memmove(&q->wait.v[0], &q->wait.v[1], (size_t)(--q->wait.n) * sizeof *q->wait.v);
        q->busy = true;
        pthread_mutex_unlock(&q->mu);
        run_job(q);
        pthread_mutex_lock(&q->mu);
    }
    q->stopped = true;
    pthread_cond_broadcast(&q->idle);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

/* Jobs an earlier run left in output_dir/hub go first; what kills left half-made is removed. */
static void take_leftovers(hub_queue *q)
{
    hub_jobs_clean(q->output_dir);
    hub_job *jobs;
    int n, skipped;
    if (hub_jobs_list(q->output_dir, &jobs, &n, &skipped) != PT_OK) {
        err_clear();
        return;
    }
    hub_job_list gone = {0};
    for (int i = 0; i < n; i++) add_waiting(q, &jobs[i], &gone);
    free(jobs);
    hub_job_list_discard(&gone);
    q->n_dropped = 0; /* superseded leftovers are not this run's */
    if (q->wait.n)
        log_info("hub        %d push%s left by an earlier run go first\n", q->wait.n, q->wait.n > 1 ? "es" : "");
}

/* The worker takes no signal: they are the training loop's business (a blocked mask is inherited,
 * so it is set around pthread_create and restored after). */
static bool start_worker(hub_queue *q)
{
    sigset_t all, saved;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    bool ok = pthread_create(&q->thread, NULL, worker, q) == 0;
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    return ok;
}

pt_status hub_queue_start(const char *output_dir, hub_queue **out)
{
    hub_queue *q = calloc(1, sizeof *q);
    TRY_ALLOC(q);
    q->output_dir = xstrdup(output_dir);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->wake, NULL);
    pthread_cond_init(&q->idle, NULL);
    atomic_init(&q->cancel, 0);
    curl_global_init(CURL_GLOBAL_DEFAULT); /* once, before the worker is the one thread using libcurl */
    take_leftovers(q);
    *out = q;
    if (hub_client_open(&q->client, &q->cancel) != PT_OK) {
        log_warn("hub: %s; the pushes are staged in %s/hub for `ptrain push %s` on a machine with a token",
                 err_message(), shown_text(output_dir).s, output_dir); /* a command to paste: the whole path */
        err_clear();
        return PT_OK;
    }
    q->online = start_worker(q);
    if (!q->online)
        log_warn("hub: cannot start the upload thread; the pushes are staged in %s/hub", shown_text(output_dir).s);
    q->started = q->online;
    return PT_OK;
}

void hub_queue_submit(hub_queue *q, hub_stage *s)
{
    hub_job j;
    pt_status st = hub_job_load(s->dir, &j);
    hub_stage_free(s);
    if (st != PT_OK) {
        log_warn("hub: %s", err_message());
        err_clear();
        return;
    }
    hub_job_list gone = {0};
    pthread_mutex_lock(&q->mu);
    add_waiting(q, &j, &gone);
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->mu);
    hub_job_list_discard(&gone);
}
