/* progress.c — rank 0's training log: a line per logging step and metrics.jsonl. */
#include "ptrain/progress.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
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

/* Keep the records of metrics.jsonl up to step keep_until (a resumed run logs the later steps
 * again); rewritten through a temporary file and a rename, so a crash keeps the old file. */
static pt_status trim_metrics(const char *path, int64_t keep_until)
{
    FILE *in = fopen(path, "r");
    if (!in) return PT_OK;
    char tmp[4200], line[8192];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *out = fopen(tmp, "w");
    if (!out) {
        fclose(in);
        return ERR(PT_ERR_USER, "cannot write %s: %s (output_dir must be writable)", tmp, strerror(errno));
    }
    while (fgets(line, sizeof line, in)) {
        const char *at = strstr(line, "\"step\": ");
        if (!at || atoll(at + 8) <= keep_until) fputs(line, out);
    }
    fclose(in);
    bool bad = fflush(out) != 0 || ferror(out) || fsync(fileno(out)) != 0;
    fclose(out);
    if (bad || rename(tmp, path) != 0) {
        unlink(tmp);
        return ERR(PT_ERR_USER, "cannot rewrite %s: %s", path, strerror(errno));
    }
    return PT_OK;
}

pt_status progress_open(progress *p, const char *dir, int rank, int64_t keep_until)
{
    memset(p, 0, sizeof *p);
    p->start = progress_now();
    if (rank != 0) return PT_OK;
    p->tty = isatty(STDOUT_FILENO);
    TRY(make_dirs(dir));
    snprintf(p->path, sizeof p->path, "%s/metrics.jsonl", dir);
    if (keep_until >= 0) TRY(trim_metrics(p->path, keep_until));
    p->metrics = fopen(p->path, "a");
    if (!p->metrics)
        return ERR(PT_ERR_USER, "cannot write %s: %s (output_dir must be writable)", p->path, strerror(errno));
    return PT_OK;
}

static void clock_text(double s, char *out, size_t len)
{
    long t = (long)(s + 0.5);
    snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* metrics.jsonl after a record: a full disk or a vanished directory is an error, not silence */
static pt_status metrics_flush(progress *p)
{
    if (fflush(p->metrics) == 0 && !ferror(p->metrics)) return PT_OK;
    return ERR(PT_ERR_USER, "cannot write %s: %s (free space on that file system, or set output_dir elsewhere)",
               p->path, strerror(errno));
}

/* The timing columns of several ranks: "slowest rank 1 0.91 s/step, comm 0.02 s/step (2%)". */
static void timing_text(const progress_record *r, char *out, size_t len)
{
    out[0] = '\0';
    if (r->ranks > 1)
        snprintf(out, len, "  slowest rank %d %.2f s/step, comm %.3f s/step (%.0f%%)", r->slowest_rank, r->step_s,
                 r->comm_s, 100.0 * r->comm_s / fmax(r->step_s + r->comm_s, 1e-9));
}

pt_status progress_log(progress *p, const progress_record *r)
{
    if (!p->metrics) return PT_OK;
    double elapsed = progress_now() - p->start;
    double eta = r->step > 0 ? elapsed / (double)r->step * (double)(r->total - r->step) : 0;
    char e[32], left[32];
    clock_text(elapsed, e, sizeof e);
    clock_text(eta, left, sizeof left);
    int width = (int)(30.0 * (double)r->step / (double)(r->total > 0 ? r->total : 1));
    char timing[96];
    timing_text(r, timing, sizeof timing);
    printf("%sstep %lld/%lld [%.*s%*s] loss %.4f  lr %.3g  grad_norm %.3f  %.0f tok/s  elapsed %s  eta %s%s%s",
           p->tty ? "\r" : "", (long long)r->step, (long long)r->total, width, "==============================",
           30 - width, "", r->loss, r->lr, r->grad_norm, r->tokens_per_s, e, left, timing, p->tty ? "\033[K" : "\n");
    fflush(stdout);
    fprintf(p->metrics,
            "{\"step\": %lld, \"epoch\": %.4f, \"loss\": %.6f, \"learning_rate\": %.6g, \"grad_norm\": %.6f, "
            "\"tokens_per_s\": %.1f, \"input_tokens_per_s\": %.1f, \"elapsed_s\": %.1f, \"eta_s\": %.1f",
            (long long)r->step, r->epoch, r->loss, r->lr, r->grad_norm, r->tokens_per_s, r->input_tokens_per_s,
            elapsed, eta);
    if (r->ranks > 1)
        fprintf(p->metrics, ", \"ranks\": %d, \"step_time_s\": %.4f, \"slowest_rank\": %d, \"comm_time_s\": %.4f",
                r->ranks, r->step_s, r->slowest_rank, r->comm_s);
    fprintf(p->metrics, "}\n");
    return metrics_flush(p);
}

pt_status progress_eval(progress *p, int64_t step, double eval_loss)
{
    if (!p->metrics) return PT_OK;
    printf("%seval at step %lld: eval_loss %.4f\n", p->tty ? "\n" : "", (long long)step, eval_loss);
    fprintf(p->metrics, "{\"step\": %lld, \"eval_loss\": %.6f}\n", (long long)step, eval_loss);
    return metrics_flush(p);
}

void progress_close(progress *p)
{
    if (p->tty && p->metrics) printf("\n");
    if (p->metrics) fclose(p->metrics);
    p->metrics = NULL;
}
