/* progress.c — rank 0's training log: a line per logging step and metrics.jsonl. */
#include "ptrain/progress.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* mkdir -p */
static pt_status make_dirs(const char *dir)
{
    char path[4096];
    snprintf(path, sizeof path, "%s", dir);
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return ERR(PT_ERR_USER, "cannot create %s: %s", path, strerror(errno));
        *p = '/';
    }
    if (mkdir(path, 0777) != 0 && errno != EEXIST) return ERR(PT_ERR_USER, "cannot create %s: %s", path, strerror(errno));
    return PT_OK;
}

pt_status progress_open(progress *p, const char *dir, int rank)
{
    memset(p, 0, sizeof *p);
    p->start = progress_now();
    if (rank != 0) return PT_OK;
    p->tty = isatty(STDOUT_FILENO);
    TRY(make_dirs(dir));
    char path[4096];
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    p->metrics = fopen(path, "a");
    if (!p->metrics) return ERR(PT_ERR_USER, "cannot write %s: %s (output_dir must be writable)", path, strerror(errno));
    return PT_OK;
}

static void clock_text(double s, char *out, size_t len)
{
    long t = (long)(s + 0.5);
    snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

void progress_log(progress *p, const progress_record *r)
{
    if (!p->metrics) return;
    double elapsed = progress_now() - p->start;
    double eta = r->step > 0 ? elapsed / (double)r->step * (double)(r->total - r->step) : 0;
    char e[32], left[32];
    clock_text(elapsed, e, sizeof e);
    clock_text(eta, left, sizeof left);
    int width = (int)(30.0 * (double)r->step / (double)(r->total > 0 ? r->total : 1));
    printf("%sstep %lld/%lld [%.*s%*s] loss %.4f  lr %.3g  grad_norm %.3f  %.0f tok/s  elapsed %s  eta %s%s",
           p->tty ? "\r" : "", (long long)r->step, (long long)r->total, width, "==============================",
           30 - width, "", r->loss, r->lr, r->grad_norm, r->tokens_per_s, e, left, p->tty ? "\033[K" : "\n");
    fflush(stdout);
    fprintf(p->metrics,
            "{\"step\": %lld, \"epoch\": %.4f, \"loss\": %.6f, \"learning_rate\": %.6g, \"grad_norm\": %.6f, "
            "\"tokens_per_s\": %.1f, \"elapsed_s\": %.1f, \"eta_s\": %.1f}\n",
            (long long)r->step, r->epoch, r->loss, r->lr, r->grad_norm, r->tokens_per_s, elapsed, eta);
    fflush(p->metrics);
}

void progress_eval(progress *p, int64_t step, double eval_loss)
{
    if (!p->metrics) return;
    printf("%seval at step %lld: eval_loss %.4f\n", p->tty ? "\n" : "", (long long)step, eval_loss);
    fprintf(p->metrics, "{\"step\": %lld, \"eval_loss\": %.6f}\n", (long long)step, eval_loss);
    fflush(p->metrics);
}

void progress_close(progress *p)
{
    if (p->tty && p->metrics) printf("\n");
    if (p->metrics) fclose(p->metrics);
    p->metrics = NULL;
}
