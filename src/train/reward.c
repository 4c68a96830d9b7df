/* reward.c — GRPO's reward functions (reward.h): the built-ins, and the Python worker process
 * (share/reward_worker.py) for module:function paths, spoken to in JSON lines (jansson) over a
 * socket pair, so a worker that dies is an error and never a SIGPIPE. One worker per node: the
 * node's leader rank runs it; the other ranks' request lines reach it through the node's
 * communicator (dist_node_gather_bytes), it asks the worker for each rank's line in turn (each
 * rank's batch its own call, as with a worker per rank) and the reply lines go back
 * (dist_node_scatter_bytes); each rank reads its own reply, errors included. */
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

#include "ptrain/dist.h"
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
    const pt_dist *node; /* a node of several ranks sharing the leader's worker; NULL: this process's own */
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

/* One JSON line (len bytes, no newline) to the worker and its reply line (*answer: malloc'd). */
static pt_status worker_line(reward_set *r, const char *line, size_t len, char **answer)
{
    *answer = NULL;
    for (size_t at = 0; at < len + 1;) {
        ssize_t w = at < len ? send(r->fd, line + at, len - at, MSG_NOSIGNAL) : send(r->fd, "\n", 1, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return ERR(PT_ERR_USER, "reward_funcs: the Python reward worker stopped (its messages are above)");
        at += (size_t)w;
    }
    size_t cap = 0;
    if (getline(answer, &cap, r->in) <= 0) {
        free(*answer), *answer = NULL;
        return ERR(PT_ERR_USER, "reward_funcs: the Python reward worker stopped without an answer (its messages are "
                                "above)");
    }
    return PT_OK;
}

static pt_status parse_reply(const char *answer, json_t **reply)
{
    json_error_t jerr;
    *reply = json_loads(answer, 0, &jerr);
    if (!*reply) return ERR(PT_ERR_INTERNAL, "reward_funcs: the reward worker's answer is not JSON: %s", jerr.text);
    return PT_OK;
}

/* One JSON line to the worker and its reply (*reply: owned by the caller). */
static pt_status worker_call(reward_set *r, json_t *req, json_t **reply)
{
    char *line = json_dumps(req, JSON_COMPACT), *answer = NULL;
    TRY_ALLOC(line);
    pt_status st = worker_line(r, line, strlen(line), &answer);
    free(line);
    if (st == PT_OK) st = parse_reply(answer, reply);
    free(answer);
    return st;
}

/* The leader: each local rank's request line (sizes[k] bytes of all, end to end) to the worker in
 * turn, the replies end to end in *out with their sizes; once the worker fails, that rank's and the
 * later ones' reply is {"fatal": its message}. */
static pt_status node_answers(reward_set *r, const char *all, size_t *sizes, int ranks, strbuf *out)
{
    char *fatal = NULL;
    for (size_t k = 0, at = 0, n; k < (size_t)ranks; at += n, k++) {
        char *answer = NULL;
        size_t before = out->len;
        n = sizes[k]; /* the request's bytes; sizes[k] becomes the reply's */
        if (!fatal && n == 0) answer = xstrdup("{\"rewards\": []}"); /* a rank with no completions */
        else if (!fatal && worker_line(r, all + at, n, &answer) != PT_OK) {
            json_t *f = json_pack("{ss}", "fatal", err_message());
            fatal = json_dumps(f, JSON_COMPACT);
            json_decref(f), err_clear();
        }
        sb_printf(out, "%s", fatal ? fatal : answer);
        free(answer);
        sizes[k] = out->len - before;
    }
    free(fatal);
    return PT_OK;
}

/* This rank's request line answered through the node's leader's worker (*reply: owned by the caller). */
static pt_status node_call(reward_set *r, const char *line, json_t **reply)
{
    const pt_dist *d = r->node;
    size_t *sizes = calloc((size_t)d->local_world, sizeof *sizes), n = 0;
    char *all = NULL, *answer = NULL;
    strbuf out = {0};
    TRY_ALLOC(sizes);
    pt_status st = dist_node_gather_bytes(d, line, strlen(line), &all, sizes);
    if (st == PT_OK && d->local_rank == 0) st = node_answers(r, all, sizes, d->local_world, &out);
    if (st == PT_OK) st = dist_node_scatter_bytes(d, d->local_rank == 0 ? sb_text(&out) : NULL, sizes, &answer, &n);
    if (st == PT_OK) st = parse_reply(answer, reply);
    json_t *fatal = st == PT_OK ? json_object_get(*reply, "fatal") : NULL;
    if (fatal) st = ERR(PT_ERR_USER, "%s (the node's reward worker, on its first rank)", json_string_value(fatal));
    if (fatal) json_decref(*reply), *reply = NULL;
    free(sizes), free(all), free(answer), sb_free(&out);
    return st;
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

/* The leader's worker start-up reaches the node's other ranks: the Python functions' names, or its
 * error (leader: st its own status; the others: the leader's error as theirs). */
static pt_status node_start(reward_set *r, pt_status st)
{
    const pt_dist *d = r->node;
    json_t *msg = json_array();
    if (d->local_rank == 0 && st != PT_OK) json_array_append_new(msg, json_pack("{ss}", "error", err_message()));
    for (int f = 0; d->local_rank == 0 && st == PT_OK && f < r->n; f++) json_array_append_new(msg, json_string(r->f[f].name));
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    uint64_t len = text ? strlen(text) : 0;
    pt_status got = dist_node_bcast(d, &len, sizeof len);
    char *buf = got == PT_OK ? calloc((size_t)len + 1, 1) : NULL;
    if (got == PT_OK && buf && d->local_rank == 0) memcpy(buf, text, (size_t)len);
    if (got == PT_OK) got = buf ? dist_node_bcast(d, buf, (size_t)len) : ERR(PT_ERR_NOMEM, "reward_funcs: no memory");
    free(text);
    if (d->local_rank == 0 || got != PT_OK) return free(buf), got != PT_OK ? got : st;
    json_t *names = json_loads(buf, 0, NULL), *err = json_object_get(json_array_get(names, 0), "error");
    if (err) st = ERR(PT_ERR_USER, "%s", json_string_value(err)); /* the leader's words: it alone prints them */
    for (int f = 0; !err && f < r->n && f < (int)json_array_size(names); f++)
        snprintf(r->f[f].name, sizeof r->f[f].name, "%s", json_string_value(json_array_get(names, (size_t)f)));
    json_decref(names), free(buf);
    return st;
}

pt_status reward_open(const pt_strlist *funcs, const char *python, const pt_dist *d, reward_set **out)
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
    r->node = d && d->local_world > 1 && r->n_py ? d : NULL;
    if (st == PT_OK && r->n_py && (!r->node || d->local_rank == 0)) st = worker_start(r, funcs, python);
    if (r->node) st = node_start(r, st); /* after a parse error too: every rank of the node has the same config */
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
    if (b->n == 0 && !r->node) return PT_OK;
    if (b->n == 0) { /* nothing to score, but the node's ranks meet at the leader */
        json_t *reply = NULL;
        TRY(node_call(r, "", &reply));
        json_decref(reply);
        return PT_OK;
    }
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
    pt_status st;
    if (r->node) {
        char *line = json_dumps(req, JSON_COMPACT);
        st = line ? node_call(r, line, &reply) : ERR(PT_ERR_NOMEM, "reward_funcs: no memory for the request");
        free(line);
    } else st = worker_call(r, req, &reply);
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
