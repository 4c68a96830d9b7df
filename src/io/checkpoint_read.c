/* checkpoint_read.c — reading checkpoint files back (after ckpt_verify has checked the completion
 * mark), and `ptrain inspect checkpoint-N.h5`. Every tensor read passes HDF5's Fletcher-32 check;
 * a missing attribute or tensor, a wrong shape or a failed checksum is one error naming the file
 * and the item. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint_internal.h"
#include "h5util.h"
#include "ptrain/util.h"

/* A CF_ENUM field: the stored name back to its enum, once; a name this ptrain does not know (a
 * newer ptrain's) is named with the ones it knows. */
static pt_status read_enum(hid_t loc, const char *path, const ckpt_field *f, const ckpt_state *s, int *out)
{
    char name[64];
    TRY(h5_get_str(loc, path, f->name, name, sizeof name));
    int n = ckpt_enum_count(f);
    for (int i = 0; i < n; i++)
        if (!strcmp(name, f->names[i])) {
            *out = i;
            return PT_OK;
        }
    strbuf known = {0};
    for (int i = 0; i < n; i++) sb_printf(&known, "%s%s", i ? ", " : "", f->names[i]);
    pt_status st = ERR(PT_ERR_USER, "%s: %s/%s is \"%s\", not one this ptrain knows (%s); ptrain %s wrote the "
                       "checkpoint: use that ptrain to resume from it", shown_text(path).s, f->group, f->name,
                       shown_text(name).s, sb_text(&known), shown_text(s->ptrain_version).s);
    sb_free(&known);
    return st;
}

static pt_status read_field(hid_t file, const char *path, const ckpt_field *f, ckpt_state *s)
{
    char *p = (char *)s + f->offset, hex[24];
    hid_t loc = H5Lexists(file, f->group, H5P_DEFAULT) > 0 || !strcmp(f->group, "/")
                    ? H5Oopen(file, f->group, H5P_DEFAULT)
                    : -1;
    if (loc < 0)
        return ERR(PT_ERR_USER, "%s: group %s is missing; is this a ptrain checkpoint?", shown_text(path).s, f->group);
    pt_status st = PT_OK;
    int64_t v = 0;
    switch (f->type) {
    case CF_I64: st = h5_get_i64(loc, path, f->name, (int64_t *)(void *)p); break;
    case CF_F64: st = h5_get_f64(loc, path, f->name, (double *)(void *)p); break;
    case CF_BOOL:
        st = h5_get_i64(loc, path, f->name, &v);
        *(bool *)(void *)p = v != 0;
        break;
    case CF_STR: st = h5_get_str(loc, path, f->name, p, f->size); break;
    case CF_OBOOL:
        if (H5Aexists(loc, f->name) > 0) st = h5_get_i64(loc, path, f->name, &v);
        *(bool *)(void *)p = v != 0;
        break;
    case CF_OSTR:
        *p = 0;
        if (H5Aexists(loc, f->name) > 0) st = h5_get_str(loc, path, f->name, p, f->size);
        break;
    case CF_HASH:
        st = h5_get_str(loc, path, f->name, hex, sizeof hex);
        if (st == PT_OK && sscanf(hex, "%16" SCNx64, (uint64_t *)(void *)p) != 1)
            st = ERR(PT_ERR_USER, "%s: attribute %s/%s is not a hex hash", shown_text(path).s, f->group, f->name);
        break;
    case CF_ENUM: st = read_enum(loc, path, f, s, (int *)(void *)p); break;
    }
    H5Oclose(loc);
    return st;
}

/* Bytes a dataset's values may take: no more than the file holds (ptrain never compresses), so a
 * damaged file cannot ask for an allocation far beyond its size. */
static hsize_t file_limit(hid_t file)
{
    hsize_t size = 0;
    return H5Fget_filesize(file, &size) < 0 ? 0 : size;
}

/* The config text: one fixed-length string (a scalar), no longer than the file. */
static pt_status read_text(hid_t file, const char *path, char **out)
{
    hid_t set = H5Lexists(file, "/run", H5P_DEFAULT) > 0 && H5Lexists(file, CKPT_CONFIG_TEXT, H5P_DEFAULT) > 0
                    ? H5Dopen2(file, CKPT_CONFIG_TEXT, H5P_DEFAULT) : -1;
    hid_t type = set < 0 ? -1 : H5Dget_type(set), space = set < 0 ? -1 : H5Dget_space(set);
    bool scalar = space >= 0 && H5Sget_simple_extent_npoints(space) == 1;
    size_t size = scalar && type >= 0 && H5Tget_class(type) == H5T_STRING && H5Tis_variable_str(type) == 0
                      ? H5Tget_size(type) : 0;
    if (size > file_limit(file)) size = 0;
    if (space >= 0) H5Sclose(space);
    *out = size ? calloc(1, size + 1) : NULL;
    herr_t rc = *out ? H5Dread(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, *out) : -1;
    if (type >= 0) H5Tclose(type);
    if (set >= 0) H5Dclose(set);
    if (rc < 0) return ERR(PT_ERR_USER, "%s: %s is missing or unreadable", shown_text(path).s, CKPT_CONFIG_TEXT);
    return PT_OK;
}

/* An evaluation's step, stored as a double: a whole number a run can reach. */
static bool is_step(double v)
{
    return v >= 0 && v <= 9007199254740992.0 && v == (double)(int64_t)v; /* 2^53: exact in a double */
}

/* The [n, 2] (step, value) rows of /metrics/evals, n within what the file can hold. */
static pt_status read_evals(hid_t file, const char *path, ckpt_state *s)
{
    hid_t set = H5Lexists(file, "/metrics", H5P_DEFAULT) > 0 && H5Lexists(file, CKPT_EVALS, H5P_DEFAULT) > 0
                    ? H5Dopen2(file, CKPT_EVALS, H5P_DEFAULT) : -1;
    hid_t space = set < 0 ? -1 : H5Dget_space(set);
    hsize_t dims[2] = {0, 0};
    bool shape_ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 2 &&
                    H5Sget_simple_extent_dims(space, dims, NULL) == 2 && dims[1] == 2 &&
                    dims[0] <= file_limit(file) / (2 * sizeof(double));
    double *rows = shape_ok ? malloc(sizeof *rows * (size_t)(2 * dims[0] + 1)) : NULL;
    s->evals = rows ? calloc((size_t)dims[0] + 1, sizeof *s->evals) : NULL;
    herr_t rc = s->evals ? (dims[0] ? H5Dread(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) : 0) : -1;
    for (hsize_t i = 0; rc >= 0 && i < dims[0]; i++) {
        if (!is_step(rows[2 * i])) rc = -1;
        else s->evals[i] = (ckpt_eval){(int64_t)rows[2 * i], rows[2 * i + 1]};
    }
    s->n_evals = rc >= 0 ? (int64_t)dims[0] : 0;
    free(rows);
    if (space >= 0) H5Sclose(space);
    if (set >= 0) H5Dclose(set);
    if (rc < 0) return ERR(PT_ERR_USER, "%s: %s is missing, misshapen or damaged", shown_text(path).s, CKPT_EVALS);
    return PT_OK;
}

static pt_status read_meta(hid_t file, const char *path, ckpt_state *s)
{
    char format[64];
    TRY(h5_get_str(file, path, "format", format, sizeof format));
    if (strcmp(format, CKPT_FORMAT))
        return ERR(PT_ERR_USER, "%s: format \"%s\" is not a ptrain checkpoint", shown_text(path).s,
                   shown_text(format).s);
    TRY(h5_get_i64(file, path, "format_version", &s->format_version));
    if (s->format_version > CKPT_VERSION || s->format_version < 1)
        return ERR(PT_ERR_USER, "%s: checkpoint format version %lld; this ptrain reads version %d (use the ptrain that "
                   "wrote it)", shown_text(path).s, (long long)s->format_version, CKPT_VERSION);
    int64_t complete = 0;
    TRY(h5_get_i64(file, path, "complete", &complete));
    if (complete != 1)
        return ERR(PT_ERR_USER, "%s: incomplete: the completion attribute is not set", shown_text(path).s);
    for (int i = 0; i < ckpt_nfields; i++) TRY(read_field(file, path, &ckpt_fields[i], s));
    TRY(read_text(file, path, &s->config_text));
    return read_evals(file, path, s);
}

static pt_status read_tensors(hid_t file, const char *path, const ckpt_layout *lay, ckpt_state *s)
{
    const char *groups[3] = {CKPT_PARAMS, CKPT_EXP_AVG, CKPT_EXP_AVG_SQ};
    float **arrays[3] = {&s->params, &s->exp_avg, &s->exp_avg_sq};
    int n = s->model_only ? 1 : 3;
    char name[192];
    s->n_params = lay->total;
    for (int a = 0; a < n; a++) {
        *arrays[a] = malloc(sizeof(float) * (size_t)(lay->total + 1));
        TRY_ALLOC(*arrays[a]);
        for (int i = 0; i < lay->n; i++) {
            const ckpt_entry *e = &lay->e[i];
            snprintf(name, sizeof name, "%s/%s", groups[a], e->name);
            TRY(h5_read_f32(file, path, name, e->rows, e->cols, *arrays[a] + e->offset));
        }
    }
    return PT_OK;
}

typedef struct {
    const char *path;
    hsize_t limit; /* bytes one dataset may take: the file's size */
    int64_t values, sets;
    pt_status st;
} verify_walk;

/* H5Literate callback: read one dataset whole, which checks its Fletcher-32 checksum. */
static herr_t verify_one(hid_t group, const char *name, const H5L_info_t *info, void *arg)
{
    verify_walk *w = arg;
    hid_t set = info->type == H5L_TYPE_HARD ? H5Dopen2(group, name, H5P_DEFAULT) : -1; /* no links elsewhere */
    hid_t space = set < 0 ? -1 : H5Dget_space(set);
    hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    float *buf = n >= 0 && (hsize_t)n <= w->limit / sizeof *buf ? malloc(sizeof *buf * (size_t)(n + 1)) : NULL;
    herr_t rc = buf ? H5Dread(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) : -1;
    free(buf);
    if (space >= 0) H5Sclose(space);
    if (set >= 0) H5Dclose(set);
    if (rc < 0) {
        w->st = ERR(PT_ERR_USER, "%s: damaged: tensor %s fails its checksum or cannot be read", shown_text(w->path).s,
                    shown_text(name).s);
        return -1;
    }
    w->values += n, w->sets++;
    return 0;
}

static pt_status verify_group(hid_t file, const char *path, const char *group, int64_t *values, int64_t *sets)
{
    hid_t g = H5Lexists(file, group, H5P_DEFAULT) > 0 ? H5Gopen2(file, group, H5P_DEFAULT) : -1;
    if (g < 0) return ERR(PT_ERR_USER, "%s: group %s is missing", shown_text(path).s, group);
    verify_walk w = {path, file_limit(file), 0, 0, PT_OK};
    hsize_t idx = 0;
    herr_t rc = H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, verify_one, &w);
    H5Gclose(g);
    if (w.st != PT_OK) return w.st;
    if (rc < 0) return ERR(PT_ERR_USER, "%s: damaged: cannot list %s", shown_text(path).s, group);
    *values = w.values, *sets += w.sets;
    return PT_OK;
}

/* Inspect's read: every dataset once, checking sizes agree across the three groups. */
static pt_status verify_tensors(hid_t file, const char *path, ckpt_state *s, int64_t *sets)
{
    int64_t n[3] = {0, 0, 0};
    *sets = 0;
    TRY(verify_group(file, path, CKPT_PARAMS, &n[0], sets));
    if (!s->model_only) {
        TRY(verify_group(file, path, CKPT_EXP_AVG, &n[1], sets));
        TRY(verify_group(file, path, CKPT_EXP_AVG_SQ, &n[2], sets));
        if (n[1] != n[0] || n[2] != n[0])
            return ERR(PT_ERR_USER, "%s: damaged: %lld adapter values but %lld and %lld optimizer moments",
                       shown_text(path).s, (long long)n[0], (long long)n[1], (long long)n[2]);
    }
    s->n_params = n[0];
    return PT_OK;
}

/* lay: read the tensors of lay; NULL: verify every tensor (sets counts them); meta_only: neither. */
static pt_status read_file(const char *path, const ckpt_layout *lay, bool meta_only, ckpt_state *s, int64_t *sets)
{
    memset(s, 0, sizeof *s);
    int64_t mark_step = 0;
    TRY(ckpt_verify_mark(path, &mark_step));
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) return ERR(PT_ERR_USER, "%s: damaged: HDF5 cannot open it", shown_text(path).s);
    pt_status st = read_meta(file, path, s);
    if (st == PT_OK && s->global_step != mark_step)
        st = ERR(PT_ERR_USER, "%s: damaged: the completion mark says step %lld, /state/global_step is %lld",
                 shown_text(path).s, (long long)mark_step, (long long)s->global_step);
    if (st == PT_OK && !meta_only && lay) st = read_tensors(file, path, lay, s);
    if (st == PT_OK && !meta_only && !lay) st = verify_tensors(file, path, s, sets);
    H5Fclose(file);
    s->complete = st == PT_OK;
    if (st != PT_OK) ckpt_state_free(s);
    return st;
}

pt_status ckpt_read(const char *path, const ckpt_layout *lay, ckpt_state *s)
{
    int64_t sets = 0;
    return read_file(path, lay, false, s, &sets);
}

pt_status ckpt_read_meta(const char *path, ckpt_state *s)
{
    int64_t sets = 0;
    return read_file(path, NULL, true, s, &sets);
}

static void print_summary(const char *path, const ckpt_state *s, int64_t sets)
{
    printf("checkpoint   %s\n", path);
    printf("complete     yes: CRC-32 of the file and Fletcher-32 of %lld tensors verified\n", (long long)sets);
    printf("step         %lld of %lld (epoch %.2f; %lld sequences of epoch %lld's order seen)\n",
           (long long)s->global_step, (long long)s->total_steps, s->epoch_float, (long long)s->examples_seen,
           (long long)s->epoch);
    printf("loss         %.4f at learning rate %.3g\n", s->last_loss, s->last_lr);
    printf("world size   %lld rank%s x batch %lld x accumulation %lld\n", (long long)s->world_size,
           s->world_size > 1 ? "s" : "", (long long)s->per_device_batch, (long long)s->accumulation);
    printf("config       %s (hash %016" PRIx64 ", seed %lld)\n", s->config_path, s->config_hash, (long long)s->seed);
    printf("base model   %s (%s, %lld layers, dim %lld, vocab %lld, %lld bytes, fingerprint %016" PRIx64 ")\n",
           s->model_path, s->model_arch, (long long)s->model_layers, (long long)s->model_dim, (long long)s->model_vocab,
           (long long)s->model_bytes, s->model_fingerprint);
    printf("lora         r %lld, alpha %g, dropout %g%s, targets %s; %lld parameters\n", (long long)s->lora_r,
           s->lora_alpha, s->lora_dropout, s->use_rslora ? ", rsLoRA" : "", s->target_modules, (long long)s->n_params);
    if (s->use_dora) printf("dora         use_dora (a magnitude per adapted output row)\n");
    if (s->lora_select[0]) printf("selectors    %s\n", s->lora_select);
    if (s->lora_init[0]) printf("init         %s (the adapters apply to the residual base)\n", s->lora_init);
    printf("optimizer    %s\n", s->model_only ? "none (save_only_model): cannot be resumed exactly"
                                              : "AdamW moments for every parameter");
    if (s->has_best)
        printf("best         %s %.6g at step %lld (%lld evaluations, patience counter %lld)\n",
               config_metric_choices[s->metric_for_best_model],
               s->best_metric, (long long)s->best_step, (long long)s->n_evals, (long long)s->patience_counter);
    if (s->slurm_job_id[0])
        printf("slurm        job %s, restart %lld, nodes %s\n", s->slurm_job_id, (long long)s->slurm_restart_count,
               s->slurm_nodelist);
    printf("written by   ptrain %s, checkpoint format %lld\n", s->ptrain_version, (long long)s->format_version);
}

pt_status ckpt_inspect(const char *path)
{
    ckpt_state s;
    int64_t sets = 0;
    TRY(read_file(path, NULL, false, &s, &sets));
    print_summary(path, &s, sets);
    ckpt_state_free(&s);
    return PT_OK;
}
