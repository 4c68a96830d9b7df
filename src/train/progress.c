/* progress.c — rank 0's training log: a line per logging step and metrics.jsonl (whole records
 * appended with one write each, never through a link; see safefs.h). */
#include "ptrain/progress.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/filewrite.h"
#include "ptrain/safefs.h"
#include "ptrain/util.h"

double progress_now(void) { return util_now(); }

/* The lines of metrics.jsonl to keep: whole records (a kill or a full disk can leave a last line
 * without its newline) of steps up to keep_until; the run logs the later steps again. */
static pt_status keep_records(const char *path, FILE *in, int64_t keep_until, pt_filewriter *out, bool *changed)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    pt_status st = PT_OK;
    while (st == PT_OK && (len = getline(&line, &cap, in)) > 0) {
        const char *at = strstr(line, "\"step\": ");
        bool keep = line[len - 1] == '\n' && at && atoll(at + 8) <= keep_until;
        if (keep) st = fw_write(out, line, (size_t)len);
        else *changed = true;
    }
    free(line);
    if (st == PT_OK && ferror(in)) st = ERR(PT_ERR_USER, "cannot read %s: %s", shown_text(path).s, strerror(errno));
    return st;
}

/* Rewrite metrics.jsonl with the records keep_records keeps, through a temporary file and a
 * rename, so a crash keeps the old file. */
static pt_status trim_metrics(const char *path, int64_t keep_until)
{
    if (access(path, F_OK) != 0 && errno == ENOENT) return PT_OK;
    FILE *in;
    TRY(safefs_fopen_read(path, &in));
    pt_filewriter out;
    pt_status st = fw_open(&out, path);
    bool changed = false;
    if (st == PT_OK) st = keep_records(path, in, keep_until, &out, &changed);
    fclose(in);
    if (st == PT_OK && changed) return fw_commit(&out);
    fw_abort(&out);
    return st;
}

pt_status progress_open(progress *p, const char *dir, int rank, int64_t keep_until)
{
    memset(p, 0, sizeof *p);
    p->fd = -1;
    p->start = progress_now();
    p->first_step = keep_until > 0 ? keep_until : 0;
    if (rank != 0) return PT_OK;
    p->tty = isatty(STDOUT_FILENO);
    TRY(safefs_mkdirs(dir));
    snprintf(p->path, sizeof p->path, "%s/metrics.jsonl", dir);
    TRY(trim_metrics(p->path, keep_until > 0 ? keep_until : 0));
    return safefs_open_append(p->path, &p->fd);
}

static void clock_text(double s, char *out, size_t len)
{
    long t = (long)(s + 0.5);
    snprintf(out, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

/* One record appended with one write: a full disk or a vanished directory is an error, and a
 * record cut short is taken back (ptrain is the file's only writer: it holds output_dir's lock). */
static pt_status metrics_append(progress *p, const strbuf *rec)
{
    off_t before = lseek(p->fd, 0, SEEK_END);
    size_t off = 0;
    while (off < rec->len) {
        ssize_t got = write(p->fd, rec->data + off, rec->len - off);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            int err = got < 0 ? errno : ENOSPC;
            if (before >= 0 && ftruncate(p->fd, before) != 0) { /* the next run drops the cut line */ }
            return safefs_write_error("write", p->path, err);
        }
        off += (size_t)got;
    }
    return PT_OK;
}

/* ", "name": value" with JSON's null for what is not a finite number (NaN, inf). */
static void json_number(strbuf *sb, const char *name, const char *fmt, double v)
{
    sb_printf(sb, ", \"%s\": ", name);
    if (isfinite(v)) sb_printf(sb, fmt, v);
    else sb_printf(sb, "null");
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
    if (p->fd < 0) return PT_OK;
    double elapsed = progress_now() - p->start;
    int64_t done = r->step - p->first_step; /* the steps this process ran in elapsed */
    double eta = done > 0 ? elapsed / (double)done * (double)(r->total - r->step) : 0;
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
    strbuf rec = {0};
    sb_printf(&rec, "{\"step\": %lld", (long long)r->step);
    json_number(&rec, "epoch", "%.4f", r->epoch);
    json_number(&rec, "loss", "%.6f", r->loss);
    json_number(&rec, "learning_rate", "%.6g", r->lr);
    json_number(&rec, "grad_norm", "%.6f", r->grad_norm);
    json_number(&rec, "tokens_per_s", "%.1f", r->tokens_per_s);
    json_number(&rec, "input_tokens_per_s", "%.1f", r->input_tokens_per_s);
    json_number(&rec, "elapsed_s", "%.1f", elapsed);
    json_number(&rec, "eta_s", "%.1f", eta);
    if (r->ranks > 1) {
        sb_printf(&rec, ", \"ranks\": %d", r->ranks);
        json_number(&rec, "step_time_s", "%.4f", r->step_s);
        sb_printf(&rec, ", \"slowest_rank\": %d", r->slowest_rank);
        json_number(&rec, "comm_time_s", "%.4f", r->comm_s);
    }
    for (int i = 0; i < r->n_extra; i++) json_number(&rec, r->extra_names[i], "%.6f", r->extra[i]);
    sb_printf(&rec, "}\n");
    pt_status st = metrics_append(p, &rec);
    sb_free(&rec);
    return st;
}

pt_status progress_eval(progress *p, int64_t step, double eval_loss, int n, const char *const *names,
                        const double *values)
{
    if (p->fd < 0) return PT_OK;
    printf("%seval at step %lld: eval_loss %.4f", p->tty ? "\n" : "", (long long)step, eval_loss);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], "eval_reward")) printf(", eval_reward %.4f", values[i]);
    printf("\n");
    strbuf rec = {0};
    sb_printf(&rec, "{\"step\": %lld", (long long)step);
    json_number(&rec, "eval_loss", "%.6f", eval_loss);
    for (int i = 0; i < n; i++) json_number(&rec, names[i], "%.6f", values[i]);
    sb_printf(&rec, "}\n");
    pt_status st = metrics_append(p, &rec);
    sb_free(&rec);
    return st;
}

/* "model read" -> "model_read_s" */
static void json_key(const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s_s", name);
    for (char *c = out; *c; c++) *c = *c == ' ' ? '_' : (char)tolower((unsigned char)*c);
}

pt_status progress_startup(progress *p, int64_t step, const progress_phase *ph, int n, int ranks)
{
    if (p->fd < 0) return PT_OK;
    strbuf rec = {0};
    sb_printf(&rec, "{\"step\": %lld, \"startup\": {\"ranks\": %d", (long long)step, ranks);
    for (int i = 0; i < n; i++) {
        char key[64], who[48] = "";
        if (ranks > 1) snprintf(who, sizeof who, "  (slowest: rank %d)", ph[i].rank);
        printf("%sstartup    %-14s %8.2f s%s\n", p->tty && i == 0 ? "\r\033[K" : "", ph[i].name, ph[i].s, who);
        json_key(ph[i].name, key, sizeof key);
        json_number(&rec, key, "%.4f", ph[i].s); /* a cached dataset phase takes milliseconds */
        if (ranks > 1) sb_printf(&rec, ", \"%.*s_rank\": %d", (int)strlen(key) - 2, key, ph[i].rank);
    }
    fflush(stdout);
    sb_printf(&rec, "}}\n");
    pt_status st = metrics_append(p, &rec);
    sb_free(&rec);
    return st;
}

void progress_close(progress *p)
{
    if (p->tty && p->fd >= 0) printf("\n");
    if (p->fd >= 0) close(p->fd);
    p->fd = -1;
}
