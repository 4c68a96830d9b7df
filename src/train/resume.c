/* resume.c — resuming from a checkpoint. Rank 0 alone finds the file (resume_from_checkpoint:
 * true or a path), verifies it, compares it with this run and reads it; the state then travels to
 * the other ranks over MPI, so a thousand ranks never read one file on a shared filesystem and a
 * node that cannot see output_dir still resumes. Also: the base model's cheap fingerprint and
 * save_total_limit's rotation. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrain/log.h"
#include "ptrain/resume.h"
#include "ptrain/util.h"

/* FNV-1a over a file's size, first and last MiB. */
static pt_status fingerprint_file(const char *path, uint64_t *h, int64_t *bytes)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ERR(PT_ERR_USER, "cannot open %s: %s", shown_text(path).s, strerror(errno));
    struct stat sb;
    static unsigned char buf[1 << 20];
    pt_status st =
        fstat(fd, &sb) == 0 ? PT_OK : ERR(PT_ERR_USER, "cannot stat %s: %s", shown_text(path).s, strerror(errno));
    off_t at[2] = {0, sb.st_size > (off_t)sizeof buf ? sb.st_size - (off_t)sizeof buf : 0};
    *h = util_fnv1a(*h, &sb.st_size, sizeof sb.st_size);
    for (int i = 0; i < 2 && st == PT_OK; i++) {
        ssize_t got = pread(fd, buf, sizeof buf, at[i]);
        if (got < 0) st = ERR(PT_ERR_USER, "cannot read %s: %s", shown_text(path).s, strerror(errno));
        else *h = util_fnv1a(*h, buf, (size_t)got);
    }
    *bytes += (int64_t)sb.st_size;
    close(fd);
    return st;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

pt_status resume_model_fingerprint(const char *path, uint64_t *fingerprint, int64_t *bytes)
{
    *fingerprint = UTIL_FNV_INIT, *bytes = 0;
    struct stat sb;
    if (stat(path, &sb) != 0) return ERR(PT_ERR_USER, "cannot stat %s: %s", shown_text(path).s, strerror(errno));
    if (!S_ISDIR(sb.st_mode)) return fingerprint_file(path, fingerprint, bytes);
    DIR *d = opendir(path);
    if (!d) return ERR(PT_ERR_USER, "cannot list %s: %s", shown_text(path).s, strerror(errno));
    char *names[4096];
    int n = 0;
    for (struct dirent *e; n < 4096 && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (!strcmp(e->d_name, "config.json") || (len > 12 && !strcmp(e->d_name + len - 12, ".safetensors")))
            names[n++] = xstrdup(e->d_name);
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    pt_status st = PT_OK;
    char file[8192];
    for (int i = 0; i < n; i++) {
        snprintf(file, sizeof file, "%s/%s", path, names[i]);
        if (st == PT_OK) st = fingerprint_file(file, fingerprint, bytes);
        free(names[i]);
    }
    return st;
}

/* A path the user named: as given, with .h5, and both again inside output_dir. */
static pt_status find_named(const resume_options *o, const char *name, char *path, size_t len)
{
    char want[4096];
    snprintf(want, sizeof want, "%s", name);
    for (size_t n = strlen(want); n > 1 && want[n - 1] == '/'; n--) want[n - 1] = '\0';
    const char *forms[4] = {"%s", "%s.h5", "%s/%s", "%s/%s.h5"};
    struct stat sb;
    for (int i = 0; i < 4; i++) {
        if (i < 2) snprintf(path, len, forms[i], want);
        else snprintf(path, len, forms[i], o->output_dir, want);
        if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode)) return ckpt_verify(path);
    }
    path[0] = '\0';
    return ERR(PT_ERR_USER, "%s: resume_from_checkpoint: %s not found (tried it with and without .h5, also inside "
               "output_dir %s); name an existing checkpoint-N.h5, or write resume_from_checkpoint: true to take the "
               "newest one", shown_text(o->config_path).s, shown_text(want).s, shown_text(o->output_dir).s);
}

/* The newest checkpoint of output_dir that verifies; damaged or incomplete ones are named. */
static pt_status find_newest(const char *output_dir, char *path, size_t len)
{
    char **paths;
    int64_t *steps;
    int n;
    pt_status st = ckpt_list(output_dir, &paths, &steps, &n);
    path[0] = '\0';
    for (int i = 0; i < n; i++) {
        if (st == PT_OK && !path[0]) {
            if (ckpt_verify(paths[i]) == PT_OK) snprintf(path, len, "%s", paths[i]);
            else log_warn("skipping %s; trying an older checkpoint", err_message()), err_clear();
        }
        free(paths[i]);
    }
    free(paths);
    free(steps);
    if (st == PT_OK && !path[0])
        log_info("resume     no complete checkpoint in %s: starting fresh\n", shown_text(output_dir).s);
    return st;
}

/* Temporary files (.NAME.tmp.XXXXXXXXXXXX, filewrite.h) of writes that a kill interrupted: never
 * complete, never used. This run holds output_dir's lock, so no other run is writing them. */
static void remove_interrupted(const char *dir)
{
    DIR *d = opendir(dir);
    char path[8192];
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat sb;
        if (e->d_name[0] != '.' || !strstr(e->d_name, ".tmp.")) continue;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlinkat(dirfd(d), e->d_name, 0) == 0)
            log_info("resume     removed %s, left by an interrupted %s\n", shown_text(path).s,
                     strncmp(e->d_name, ".checkpoint-", 12) ? "write" : "checkpoint write");
    }
    if (d) closedir(d);
}

pt_status resume_find(const resume_options *o, char *path, size_t len)
{
    path[0] = '\0';
    remove_interrupted(o->output_dir);
    if (o->from.path) return find_named(o, o->from.path, path, len);
    return o->from.on ? find_newest(o->output_dir, path, len) : PT_OK;
}

/* ---- sending the state to every rank ---- */

static pt_status bcast_array(const pt_dist *d, void **p, size_t bytes)
{
    if (d->rank != 0) {
        *p = malloc(bytes + 1);
        TRY_ALLOC(*p);
    }
    return dist_bcast_bytes(d, *p, bytes);
}

static pt_status bcast_state(const pt_dist *d, ckpt_state *s)
{
    TRY(dist_bcast_bytes(d, s, CKPT_FIXED_BYTES));
    if (d->rank != 0) s->config_text = NULL, s->evals = NULL, s->params = s->exp_avg = s->exp_avg_sq = NULL;
    uint64_t text_len = d->rank == 0 ? strlen(s->config_text) + 1 : 0;
    TRY(dist_bcast_bytes(d, &text_len, sizeof text_len));
    TRY(bcast_array(d, (void **)&s->config_text, text_len));
    TRY(bcast_array(d, (void **)&s->evals, sizeof *s->evals * (size_t)s->n_evals));
    size_t bytes = sizeof(float) * (size_t)s->n_params;
    TRY(bcast_array(d, (void **)&s->params, bytes));
    if (s->model_only) return PT_OK;
    TRY(bcast_array(d, (void **)&s->exp_avg, bytes));
    return bcast_array(d, (void **)&s->exp_avg_sq, bytes);
}

/* Rank 0: the metadata first, so a checkpoint of another model or LoRA shape is refused by name
 * before its tensors are read. */
static pt_status read_on_root(const char *path, const ckpt_layout *lay, const ckpt_state *now, ckpt_state *s)
{
    ckpt_state meta;
    TRY(ckpt_read_meta(path, &meta));
    pt_status st = resume_compare(path, &meta, now);
    ckpt_state_free(&meta);
    TRY(st);
    return ckpt_read(path, lay, s);
}

pt_status resume_load(const pt_dist *d, const char *path, const ckpt_layout *lay, const ckpt_state *now,
                      ckpt_state *s, bool *found)
{
    memset(s, 0, sizeof *s);
    int have = d->rank == 0 && path && path[0];
    if (d->world > 1) TRY(dist_bcast_bytes(d, &have, sizeof have));
    *found = have;
    if (!have) return PT_OK;
    pt_status st = d->rank == 0 ? read_on_root(path, lay, now, s) : PT_OK;
    TRY(dist_agree(d, st));
    if (d->world > 1) st = bcast_state(d, s);
    if (st != PT_OK) ckpt_state_free(s);
    return dist_agree(d, st);
}

/* ---- comparing a checkpoint with this run ---- */

static void changed_i64(const char *what, int64_t then, int64_t now)
{
    if (then != now) log_info("resume     %s changed: %lld at the checkpoint, %lld now\n", what, (long long)then,
                              (long long)now);
}

static void changed_f64(const char *what, double then, double now)
{
    if (then != now) log_info("resume     %s changed: %g at the checkpoint, %g now\n", what, then, now);
}

static const char *modules_text(const pt_config *c)
{
    return c->save_embed_tokens && c->save_lm_head ? "[embed_tokens, lm_head]"
           : c->save_embed_tokens                  ? "[embed_tokens]"
           : c->save_lm_head                       ? "[lm_head]"
                                                   : "none";
}

/* What the checkpoint's resolved config (config_dump's YAML) and this run's say of the keys the
 * state does not hold itself: modules_to_save must be the same (the checkpoint holds those modules'
 * weights, or none); data_seed, lr_scheduler_kwargs and embedding_learning_rate are reported when
 * changed. A text that does not read back (another ptrain's) is passed over. */
static pt_status compare_config(const char *path, const ckpt_state *a, const ckpt_state *b)
{
    if (!a->config_text || !b->config_text) return PT_OK;
    pt_config then, now;
    if (config_parse("checkpoint", a->config_text, strlen(a->config_text), &then, NULL) != PT_OK) {
        err_clear();
        return PT_OK;
    }
    if (config_parse("this run", b->config_text, strlen(b->config_text), &now, NULL) != PT_OK) {
        err_clear();
        config_free(&then);
        return PT_OK;
    }
    pt_status st = PT_OK;
    if (then.save_embed_tokens != now.save_embed_tokens || then.save_lm_head != now.save_lm_head)
        st = ERR(PT_ERR_USER, "%s trained modules_to_save %s, this run %s: the checkpoint holds those modules' weights; "
                 "set modules_to_save back, or start a new output_dir", shown_text(path).s, modules_text(&then),
                 modules_text(&now));
    if (st == PT_OK) changed_i64("data_seed (the data order changes)", then.data_seed, now.data_seed);
    const pt_sched_args *x = &then.sched_args, *y = &now.sched_args;
    if (st == PT_OK && (x->num_cycles != y->num_cycles || x->lr_end != y->lr_end || x->power != y->power ||
        x->min_lr_rate != y->min_lr_rate))
        log_info("resume     lr_scheduler_kwargs changed: num_cycles %g, lr_end %g, power %g, min_lr_rate %g at the "
                 "checkpoint; %g, %g, %g, %g now\n", x->num_cycles, x->lr_end, x->power, x->min_lr_rate, y->num_cycles,
                 y->lr_end, y->power, y->min_lr_rate);
    if (st == PT_OK) changed_f64("embedding_learning_rate", then.embedding_learning_rate, now.embedding_learning_rate);
    config_free(&then);
    config_free(&now);
    return st;
}

static void report_changes(const ckpt_state *a, const ckpt_state *b)
{
    changed_f64("learning_rate", a->learning_rate, b->learning_rate);
    changed_i64("max_steps", a->max_steps, b->max_steps);
    changed_f64("num_train_epochs", a->num_train_epochs, b->num_train_epochs);
    changed_i64("logging_steps", a->logging_steps, b->logging_steps);
    changed_i64("warmup_steps", a->warmup_steps, b->warmup_steps);
    changed_f64("lora_dropout", a->lora_dropout, b->lora_dropout);
    if (a->lr_scheduler_type != b->lr_scheduler_type)
        log_info("resume     lr_scheduler_type changed: %s at the checkpoint, %s now\n",
                 config_sched_choices[a->lr_scheduler_type], config_sched_choices[b->lr_scheduler_type]);
    changed_i64("seed (the data order and dropout masks change)", a->seed, b->seed);
    double eff_a = (double)a->world_size * (double)a->per_device_batch * (double)a->accumulation;
    double eff_b = (double)b->world_size * (double)b->per_device_batch * (double)b->accumulation;
    if (a->world_size != b->world_size || a->per_device_batch != b->per_device_batch ||
        a->accumulation != b->accumulation)
        log_info("resume     ranks x batch x accumulation changed: %lld x %lld x %lld = %.0f sequences per step at the "
                 "checkpoint, %lld x %lld x %lld = %.0f now; the data continue with the sequences not yet seen\n",
                 (long long)a->world_size, (long long)a->per_device_batch, (long long)a->accumulation, eff_a,
                 (long long)b->world_size, (long long)b->per_device_batch, (long long)b->accumulation, eff_b);
    if (a->n_train != b->n_train || a->data_hash != b->data_hash)
        log_warn("resume: the training data differ from the checkpoint's (%lld sequences then, %lld now); training "
                 "continues at the same position of epoch %lld's order", (long long)a->n_train, (long long)b->n_train,
                 (long long)a->epoch);
    if (a->model_only)
        log_warn("resume: the checkpoint was written with save_only_model: true, without optimizer state; AdamW "
                 "starts again from zero moments, so this run will not match an uninterrupted one");
}

pt_status resume_compare(const char *path, const ckpt_state *a, const ckpt_state *b)
{
    if (a->model_fingerprint != b->model_fingerprint || a->model_layers != b->model_layers ||
        a->model_dim != b->model_dim || a->model_vocab != b->model_vocab)
        return ERR(PT_ERR_USER, "%s was trained on another base model: %s (%s, %lld layers, dim %lld, %lld bytes, "
                   "fingerprint %016" PRIx64 "), this run has %s (%s, %lld layers, dim %lld, %lld bytes, fingerprint "
                   "%016" PRIx64 "); set model_name back, or start a new output_dir",
                   shown_text(path).s, shown_text(a->model_path).s, shown_text(a->model_arch).s,
                   (long long)a->model_layers, (long long)a->model_dim, (long long)a->model_bytes, a->model_fingerprint,
                   shown_text(b->model_path).s, shown_text(b->model_arch).s, (long long)b->model_layers,
                   (long long)b->model_dim, (long long)b->model_bytes, b->model_fingerprint);
    if (a->lora_r != b->lora_r || a->lora_alpha != b->lora_alpha || a->use_rslora != b->use_rslora ||
        strcmp(a->target_modules, b->target_modules) || a->lora_layers != b->lora_layers)
        return ERR(PT_ERR_USER, "%s has other LoRA settings: r %lld, lora_alpha %g, use_rslora %s, targets %s; this "
                   "run has r %lld, lora_alpha %g, use_rslora %s, targets %s; set them back, or start a new output_dir",
                   shown_text(path).s, (long long)a->lora_r, a->lora_alpha, a->use_rslora ? "true" : "false",
                   shown_text(a->target_modules).s, (long long)b->lora_r, b->lora_alpha,
                   b->use_rslora ? "true" : "false", shown_text(b->target_modules).s);
    if (strcmp(a->lora_select, b->lora_select))
        return ERR(PT_ERR_USER, "%s has adapters on other layers or with other ranks: layers_to_transform, "
                   "rank_pattern and alpha_pattern were %s then, %s now; set them back, or start a new output_dir",
                   shown_text(path).s, a->lora_select[0] ? shown_text(a->lora_select).s : "not given",
                   b->lora_select[0] ? shown_text(b->lora_select).s : "not given");
    if (strcmp(a->lora_init, b->lora_init))
        return ERR(PT_ERR_USER, "%s was trained with init_lora_weights %s, this run has %s: the adapters apply to "
                   "another base; set it back, or start a new output_dir", shown_text(path).s,
                   a->lora_init[0] ? a->lora_init : "true/false/gaussian", b->lora_init[0] ? b->lora_init : "true/false/gaussian");
    if (a->use_dora != b->use_dora)
        return ERR(PT_ERR_USER, "%s was trained with use_dora %s, this run has %s: the checkpoint %s DoRA's magnitudes; "
                   "set use_dora back, or start a new output_dir", shown_text(path).s, a->use_dora ? "true" : "false",
                   b->use_dora ? "true" : "false", a->use_dora ? "holds" : "has no");
    TRY(compare_config(path, a, b));
    report_changes(a, b);
    return PT_OK;
}

/* ---- save_total_limit ---- */

pt_status resume_rotate(const char *dir, long limit, const int64_t *keep, int nkeep)
{
    if (limit <= 0) return PT_OK;
    char **paths;
    int64_t *steps;
    int n;
    pt_status st = ckpt_list(dir, &paths, &steps, &n);
    long kept = 0;
    for (int i = 0; i < n; i++) {
        bool protect = false;
        for (int k = 0; k < nkeep; k++) protect |= keep[k] == steps[i];
        if (st == PT_OK && !protect && kept >= limit) {
            if (unlink(paths[i]) == 0)
                log_info("checkpoint %s deleted (save_total_limit %ld)\n", shown_text(paths[i]).s, limit);
            else
                st = ERR(PT_ERR_USER, "cannot delete %s (save_total_limit): %s", shown_text(paths[i]).s,
                         strerror(errno));
        } else if (!protect) {
            kept++;
        }
        free(paths[i]);
    }
    free(paths);
    free(steps);
    return st;
}

/* ---- best model and early stopping ---- */

pt_status best_record(ckpt_state *s, int64_t step, double value, double threshold, long patience, best_result *r)
{
    /* transformers starts the best at -inf/+inf at the first evaluation; NaN never improves */
    double best = s->has_best ? s->best_metric : s->greater_is_better ? -INFINITY : INFINITY;
    bool better = s->greater_is_better ? value > best : value < best;
    if (patience > 0) {
        if (s->n_evals == 0 || (better && fabs(value - best) > threshold)) s->patience_counter = 0;
        else s->patience_counter++;
    }
    r->stop = patience > 0 && s->patience_counter >= patience;
    r->improved = better;
    if (better) s->best_metric = value, s->best_step = step, s->has_best = true;
    ckpt_eval *grown = realloc(s->evals, sizeof *grown * (size_t)(s->n_evals + 1));
    TRY_ALLOC(grown);
    s->evals = grown;
    s->evals[s->n_evals++] = (ckpt_eval){step, value};
    return PT_OK;
}
