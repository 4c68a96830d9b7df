/* hub_report.c — the end of a run's uploads: wait up to hub_upload_timeout for the worker to drain
 * its queue (in short slices, so that SIGTERM or SIGINT ends the wait at once, and no longer once
 * the Hub proves unreachable), cancel what still runs, and say what went up and what did not —
 * each job left with the `hf upload` command that finishes it from a machine with internet, and
 * `ptrain push`. The queue is freed; the jobs left stay on disk under output_dir/hub. */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub_internal.h"
#include "ptrain/log.h"
#include "ptrain/signals.h"

#define SLICE_S 0.25

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static struct timespec at(double s)
{
    struct timespec t;
    t.tv_sec = (time_t)s;
    t.tv_nsec = (long)((s - (double)t.tv_sec) * 1e9);
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* Wait (mu held) until the worker is idle with nothing queued or stopped, a signal came, or end. */
static void wait_idle(hub_queue *q, double end)
{
    while (q->started && !q->stopped && (q->wait.n || q->busy)) {
        if ((q->signal = signals_pending()) != 0) return;
        double t = now_s();
        if (t >= end) return;
        struct timespec until = at(t + (end - t < SLICE_S ? end - t : SLICE_S));
        int rc = pthread_cond_timedwait(&q->idle, &q->mu, &until);
        if (rc != 0 && rc != ETIMEDOUT) return;
    }
}

/* Wait until the worker is done or timeout_s passed; then stop it. A push cancelled midway is
 * filed as failed by the worker. */
static void drain(hub_queue *q, double timeout_s)
{
    double end = now_s() + (timeout_s > 0 ? (timeout_s < 1e7 ? timeout_s : 1e7) : 0);
    pthread_mutex_lock(&q->mu);
    q->closing = true;
    atomic_store(&q->client.hurry, 1);
    pthread_cond_broadcast(&q->wake);
    int left = q->wait.n + (q->busy ? 1 : 0);
    pthread_mutex_unlock(&q->mu);
    if (q->started && left && timeout_s > 0)
        log_info("hub        waiting up to %.0f s (hub_upload_timeout) for %d push%s\n", timeout_s, left,
                 left > 1 ? "es" : "");
    pthread_mutex_lock(&q->mu);
    wait_idle(q, end);
    atomic_store(&q->cancel, 1);
    pthread_cond_broadcast(&q->wake);
    pthread_mutex_unlock(&q->mu);
    if (q->started) pthread_join(q->thread, NULL);
    q->started = false;
}

static void print_left(const hub_job *j, const char *why, FILE *out)
{
    strbuf cmd = {0};
    hub_job_command(j, &cmd);
    fprintf(out, "hub          not pushed: %s to %s%s%s\n", shown_text(j->what).s, shown_text(j->repo_id).s,
            why ? ": " : "", why ? why : "");
    fprintf(out, "hub            %s\n", sb_text(&cmd)); /* a command to paste: the whole paths, shell-quoted */
    sb_free(&cmd);
}

/* Why a job never started. */
static const char *not_started(const hub_queue *q)
{
    if (!q->online) return "no token here";
    if (q->signal) return "not started: the wait ended on a signal";
    if (atomic_load(&q->client.unreachable)) return "not tried: the Hub could not be reached";
    return "not started before the wait ended";
}

static void print_jobs(const hub_queue *q, FILE *out)
{
    const hub_job_list *f = &q->fail, *w = &q->wait;
    for (int i = 0, k = 0; i < f->n || k < w->n;) { /* failed and never started jobs, in their order */
        bool fail_first = i < f->n && (k >= w->n || f->v[i].seq < w->v[k].seq);
        if (fail_first) {
            print_left(&f->v[i], f->v[i].why, out);
            i++;
        } else {
            print_left(&w->v[k], not_started(q), out);
            k++;
        }
    }
}

static void report(hub_queue *q, FILE *out)
{
    int left = q->fail.n + q->wait.n;
    if (q->signal)
        fprintf(out, "hub        %s: the wait for uploads ended, what was still running is cancelled\n",
                signals_name(q->signal));
    if (!left) {
        if (q->n_done) fprintf(out, "hub        every push done (%d)\n", q->n_done);
        fflush(out);
        return;
    }
    strbuf dir = {0};
    hub_shell_quote(&dir, q->output_dir);
    if (q->client.last_error[0]) fprintf(out, "hub        (the last network error: %s)\n", q->client.last_error);
    fprintf(out, "hub        %d push%s done, %d not: finish from a machine with internet and a write token "
            "(HF_TOKEN), with\nhub          ptrain push %s\nhub        or, without ptrain, huggingface_hub's CLI "
            "(in this order):\n", q->n_done, q->n_done == 1 ? "" : "es", left, sb_text(&dir));
    sb_free(&dir);
    print_jobs(q, out);
    fflush(out);
    log_warn("hub: %d push%s did not finish; the commands above finish %s", left, left > 1 ? "es" : "",
             left > 1 ? "them" : "it");
}

static void queue_free(hub_queue *q)
{
    for (int i = 0; i < q->wait.n; i++) hub_job_free(&q->wait.v[i]);
    for (int i = 0; i < q->fail.n; i++) hub_job_free(&q->fail.v[i]);
    free(q->wait.v);
    free(q->fail.v);
    free(q->output_dir);
    hub_client_close(&q->client);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->wake);
    pthread_cond_destroy(&q->idle);
    free(q);
}

int hub_queue_finish(hub_queue *q, double timeout_s, FILE *out)
{
    if (!q) return 0;
    drain(q, timeout_s);
    report(q, out);
    int left = q->fail.n + q->wait.n;
    queue_free(q);
    return left;
}
