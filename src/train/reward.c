/* reward.c — GRPO's reward functions (reward.h): the built-ins, and the Python worker process
 * (share/reward_worker.py) for module:function paths, spoken to in JSON lines (jansson) over a
 * socket pair, so a worker that dies is an error and never a SIGPIPE. */
#include "ptrain/reward.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <regex.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrain/error.h"
#include "ptrain/util.h"

#ifndef PTRAIN_DATADIR
#define PTRAIN_DATADIR "/usr/local/share/ptrain"
#endif

extern char **environ;

enum { R_EXACT, R_REGEX, R_THINK, R_LENGTH, R_PYTHON };

typedef struct {
    int kind;
    char name[96];
    char *column;  /* R_EXACT */
    regex_t re;    /* R_REGEX */
    int py;        /* R_PYTHON: its index among the worker's functions */
} reward_fn;

struct reward_set {
    reward_fn *f;
    int n, n_py;
    pid_t pid; /* the worker, 0: none */
    int fd;
    FILE *in; /* its replies */
};

int reward_count(const reward_set *r) { return r->n; }
const char *reward_name(const reward_set *r, int f) { return r->f[f].name; }

/* ---- the Python worker ---- */

static const char *worker_script(void)
{
    static char path[4096];
    const char *env = getenv("PTRAIN_REWARD_WORKER");
    if (env && *env) return env;
    const char *src = getenv("PTRAIN_SRCDIR");
    if (src && *src) {
        snprintf(path, sizeof path, "%s/share/reward_worker.py", src);
        if (access(path, R_OK) == 0) return path;
    }
    snprintf(path, sizeof path, "%s/reward_worker.py", PTRAIN_DATADIR); /* installed */
#ifdef PTRAIN_SOURCE_SHARE
    if (access(path, R_OK) != 0) /* the build tree's ptrain, not installed */
        snprintf(path, sizeof path, "%s/reward_worker.py", PTRAIN_SOURCE_SHARE);
#endif
    return path;
}

/* One JSON line to the worker and its reply (*reply: owned by the caller). */
static pt_status worker_call(reward_set *r, json_t *req, json_t **reply)
{
    char *line = json_dumps(req, JSON_COMPACT);
    TRY_ALLOC(line);
    size_t len = strlen(line), at = 0;
    line[len] = '\n'; /* json_dumps leaves room for its NUL */
    while (at < len + 1) {
        ssize_t w = send(r->fd, line + at, len + 1 - at, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            free(line);
            return ERR(PT_ERR_USER, "reward_funcs: the Python reward worker stopped (its messages are above)");
        }
        at += (size_t)w;
    }
    free(line);
    char *buf = NULL;
    size_t cap = 0;
    ssize_t got = getline(&buf, &cap, r->in);
    if (got <= 0) {
        free(buf);
        return ERR(PT_ERR_USER, "reward_funcs: the Python reward worker stopped without an answer (its messages are "
                                "above)");
    }
    json_error_t jerr;
    *reply = json_loads(buf, 0, &jerr);
    free(buf);
    if (!*reply) return ERR(PT_ERR_INTERNAL, "reward_funcs: the reward worker's answer is not JSON: %s", jerr.text);
    return PT_OK;
}

static pt_status worker_start(reward_set *r, const pt_strlist *funcs, const char *python)
{
    if (!python) python = getenv("PTRAIN_PYTHON");
    if (!python || !*python) python = "python3";
    const char *script = worker_script();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
        return ERR(PT_ERR_INTERNAL, "reward_funcs: no socket pair for the reward worker: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
    posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
    char *argv[] = {(char *)python, "-u", (char *)script, NULL};
    int rc = posix_spawnp(&r->pid, python, &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(sv[1]);
    if (rc != 0) {
        close(sv[0]);
        r->pid = 0;
        return ERR(PT_ERR_USER, "reward_funcs: cannot start %s for the Python reward functions: %s; set PTRAIN_PYTHON to "
                   "a Python 3 interpreter", shown_text(python).s, strerror(rc));
    }
    r->fd = sv[0];
    r->in = fdopen(dup(sv[0]), "r");
    TRY_ALLOC(r->in);
    json_t *req = json_object(), *list = json_array(), *path = json_array();
    for (int i = 0; i < funcs->n; i++)
        if (strchr(funcs->items[i], ':') && strncmp(funcs->items[i], "regex:", 6) && strncmp(funcs->items[i], "exact_answer:", 13))
            json_array_append_new(list, json_string(funcs->items[i]));
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) json_array_append_new(path, json_string(cwd));
    json_object_set_new(req, "funcs", list);
    json_object_set_new(req, "path", path);
    json_t *reply = NULL;
    pt_status st = worker_call(r, req, &reply);
    json_decref(req);
    if (st != PT_OK) {
        err_context("reward_funcs: %s %s", shown_text(python).s, shown_text(script).s);
        return st;
    }
    json_t *err = json_object_get(reply, "error"), *names = json_object_get(reply, "names");
    if (err || json_array_size(names) != (size_t)r->n_py) {
        st = ERR(PT_ERR_USER, "reward_funcs: %s", err ? json_string_value(err) : "the reward worker's answer has no names");
        json_decref(reply);
        return st;
    }
    for (int f = 0; f < r->n; f++)
        if (r->f[f].kind == R_PYTHON)
            snprintf(r->f[f].name, sizeof r->f[f].name, "%s", json_string_value(json_array_get(names, (size_t)r->f[f].py)));
    json_decref(reply);
    return PT_OK;
}

/* ---- built-ins ---- */

static pt_status fn_parse(reward_fn *f, const char *s, int *n_py)
{
    if (!strcmp(s, "exact_answer") || !strncmp(s, "exact_answer:", 13)) {
        f->kind = R_EXACT;
        f->column = xstrdup(s[12] == ':' ? s + 13 : "answer");
        snprintf(f->name, sizeof f->name, "exact_answer");
    } else if (!strncmp(s, "regex:", 6)) {
        f->kind = R_REGEX;
        int rc = regcomp(&f->re, s + 6, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            char msg[256];
            regerror(rc, &f->re, msg, sizeof msg);
            f->kind = R_LENGTH; /* nothing compiled to free */
            return ERR(PT_ERR_USER, "reward_funcs: %s: %s (a POSIX extended regular expression)", shown_text(s).s, msg);
        }
        snprintf(f->name, sizeof f->name, "regex");
    } else if (!strcmp(s, "think_format")) {
        f->kind = R_THINK;
        snprintf(f->name, sizeof f->name, "think_format");
    } else if (!strcmp(s, "length")) {
        f->kind = R_LENGTH;
        snprintf(f->name, sizeof f->name, "length");
    } else if (strchr(s, ':')) {
        f->kind = R_PYTHON, f->py = (*n_py)++;
        snprintf(f->name, sizeof f->name, "%s", strrchr(s, ':') + 1);
    } else
        return ERR(PT_ERR_USER, "reward_funcs: %s is neither a built-in reward (exact_answer, exact_answer:COLUMN, "
                   "regex:PATTERN, think_format, length) nor a Python module:function path", shown_text(s).s);
    return PT_OK;
}

pt_status reward_open(const pt_strlist *funcs, const char *python, reward_set **out)
{
    *out = NULL;
    if (!funcs || funcs->n == 0) return ERR(PT_ERR_USER, "reward_funcs: GRPO needs at least one reward function");
    reward_set *r = calloc(1, sizeof *r);
    TRY_ALLOC(r);
    r->f = calloc((size_t)funcs->n, sizeof *r->f);
    r->fd = -1;
    if (!r->f) {
        free(r);
        return ERR(PT_ERR_NOMEM, "no memory for the reward functions");
    }
    pt_status st = PT_OK;
    for (int i = 0; i < funcs->n && st == PT_OK; i++, r->n++) st = fn_parse(&r->f[i], funcs->items[i], &r->n_py);
    if (st == PT_OK && r->n_py) st = worker_start(r, funcs, python);
    if (st != PT_OK) {
        reward_close(r);
        return st;
    }
    *out = r;
    return PT_OK;
}

static void trim(const char **s, size_t *n)
{
    while (*n && strchr(" \t\r\n", **s)) (*s)++, (*n)--;
    while (*n && strchr(" \t\r\n", (*s)[*n - 1])) (*n)--;
}

/* The text of the row's column (a string as is, another value as JSON), or NULL. Malloc'd. */
static char *column_text(const char *columns_json, const char *column)
{
    json_t *row = json_loads(columns_json, 0, NULL);
    json_t *v = json_object_get(row, column);
    char *out = !v ? NULL : json_is_string(v) ? xstrdup(json_string_value(v)) : json_dumps(v, JSON_ENCODE_ANY);
    json_decref(row);
    return out;
}

static double exact_answer(const reward_fn *f, const char *text, const char *columns)
{
    char *want = column_text(columns, f->column);
    if (!want) return 0;
    const char *a = text, *open = NULL;
    for (const char *p = strstr(text, "<answer>"); p; p = strstr(p + 1, "<answer>")) open = p;
    size_t n = strlen(text);
    if (open) {
        const char *close = strstr(open, "</answer>");
        if (close) a = open + 8, n = (size_t)(close - a);
    }
    const char *w = want;
    size_t wn = strlen(want);
    trim(&a, &n), trim(&w, &wn);
    double v = n == wn && memcmp(a, w, n) == 0 ? 1.0 : 0.0;
    free(want);
    return v;
}

static double think_format(const char *text)
{
    if (strncmp(text, "<think>", 7)) return 0;
    return !strstr(text + 7, "<think>") && strstr(text + 7, "</think>") ? 1.0 : 0.0;
}

static pt_status builtin(const reward_fn *f, const reward_batch *b, double *out)
{
    for (int i = 0; i < b->n; i++) {
        const char *t = b->text[i];
        switch (f->kind) {
        case R_EXACT: out[i] = exact_answer(f, t, b->columns_json[i]); break;
        case R_REGEX: out[i] = regexec(&f->re, t, 0, NULL, 0) == 0 ? 1.0 : 0.0; break;
        case R_THINK: out[i] = think_format(t); break;
        default:
            out[i] = b->max_completion_length > 0 ? 1.0 - (double)b->len[i] / (double)b->max_completion_length : 0.0;
        }
    }
    return PT_OK;
}

/* The Python functions' values into per_func (their rows), or the error naming function and row. */
static pt_status python_score(reward_set *r, const reward_batch *b, double *per_func)
{
    json_t *req = json_object(), *prompts = json_array(), *texts = json_array(), *ids = json_array(),
           *cols = json_object();
    for (int i = 0; i < b->n; i++) {
        json_array_append_new(prompts, json_loads(b->prompt_json[i], JSON_DECODE_ANY, NULL));
        json_t *text = json_string(b->text[i]); /* NULL for bytes that are no UTF-8: sent as "" */
        json_array_append_new(texts, text ? text : json_string(""));
        json_t *one = json_array();
        for (int32_t t = 0; t < b->len[i]; t++) json_array_append_new(one, json_integer(b->ids[i][t]));
        json_array_append_new(ids, one);
        json_t *row = json_loads(b->columns_json[i], 0, NULL);
        const char *key;
        json_t *v;
        json_object_foreach(row, key, v) {
            json_t *list = json_object_get(cols, key);
            if (!list) {
                list = json_array();
                for (int k = 0; k < i; k++) json_array_append_new(list, json_null());
                json_object_set_new(cols, key, list);
            }
            json_array_append(list, v);
        }
        json_object_foreach(cols, key, v) /* a column this row lacks: null */
            if (json_array_size(v) < (size_t)i + 1) json_array_append_new(v, json_null());
        json_decref(row);
    }
    json_object_set_new(req, "prompts", prompts);
    json_object_set_new(req, "completions", texts);
    json_object_set_new(req, "completion_ids", ids);
    json_object_set_new(req, "columns", cols);
    json_t *reply = NULL;
    pt_status st = worker_call(r, req, &reply);
    json_decref(req);
    TRY(st);
    json_t *err = json_object_get(reply, "error"), *rewards = json_object_get(reply, "rewards");
    if (err) {
        json_t *row = json_object_get(reply, "row");
        const char *fn = json_string_value(json_object_get(reply, "func"));
        strbuf where = {0};
        if (json_is_integer(row) && json_integer_value(row) >= 0 && json_integer_value(row) < b->n) {
            int i = (int)json_integer_value(row);
            sb_printf(&where, " (completion %d: prompt %s, completion %s)", i, shown_text(b->prompt_json[i]).s,
                      shown_text(b->text[i]).s);
        }
        st = ERR(PT_ERR_USER, "reward function %s: %s%s; nothing of this step was saved",
                 shown_text(fn ? fn : "?").s, shown_text(json_string_value(err)).s, sb_text(&where));
        sb_free(&where);
    }
    for (int f = 0; st == PT_OK && f < r->n; f++) {
        if (r->f[f].kind != R_PYTHON) continue;
        json_t *vals = json_array_get(rewards, (size_t)r->f[f].py);
        if (json_array_size(vals) != (size_t)b->n) {
            st = ERR(PT_ERR_INTERNAL, "reward worker: %zu values for %d completions", json_array_size(vals), b->n);
            break;
        }
        for (int i = 0; i < b->n; i++) {
            json_t *v = json_array_get(vals, (size_t)i);
            per_func[f * b->n + i] = json_is_number(v) ? json_number_value(v) : NAN;
        }
    }
    json_decref(reply);
    return st;
}

pt_status reward_score(reward_set *r, const reward_batch *b, double *per_func)
{
    for (int f = 0; f < r->n; f++)
        if (r->f[f].kind != R_PYTHON) TRY(builtin(&r->f[f], b, per_func + (size_t)f * (size_t)b->n));
    return r->n_py ? python_score(r, b, per_func) : PT_OK;
}

void reward_close(reward_set *r)
{
    if (!r) return;
    if (r->in) fclose(r->in);
    if (r->fd >= 0) close(r->fd); /* the worker reads end of input and exits */
    if (r->pid > 0) {
        int status;
        while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {}
    }
    for (int f = 0; f < r->n; f++) {
        if (r->f[f].kind == R_REGEX) regfree(&r->f[f].re);
        free(r->f[f].column);
    }
    free(r->f);
    free(r);
}
