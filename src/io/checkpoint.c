/* checkpoint.c — writing checkpoint files (layout: docs/checkpoint-format.md), their completion
 * mark, and finding them in output_dir. The file is built under a temporary name with an empty
 * 512-byte HDF5 user block; once HDF5 has closed it, the user block gets the mark (size and CRC-32
 * of the rest), then the file is synced and renamed into place. A kill at any moment leaves the
 * old checkpoints as they were and at most a temporary file, never a checkpoint-N.h5 that is not
 * whole. */
#include "ptrain/checkpoint.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint_internal.h"
#include "h5util.h"

#define FLD(g, n, t, m) {g, n, t, offsetof(ckpt_state, m), sizeof(((ckpt_state *)0)->m)}
const ckpt_field ckpt_fields[] = {
    FLD("/", "ptrain_version", CF_STR, ptrain_version),
    FLD("/state", "global_step", CF_I64, global_step),
    FLD("/state", "total_steps", CF_I64, total_steps),
    FLD("/state", "epoch", CF_I64, epoch),
    FLD("/state", "examples_seen_in_epoch", CF_I64, examples_seen),
    FLD("/state", "train_sequences", CF_I64, n_train),
    FLD("/state", "data_hash", CF_HASH, data_hash),
    FLD("/state", "epoch_float", CF_F64, epoch_float),
    FLD("/state", "loss", CF_F64, last_loss),
    FLD("/state", "learning_rate", CF_F64, last_lr),
    FLD("/state", "log_window_loss_sum", CF_F64, window_loss),
    FLD("/state", "log_window_tokens", CF_F64, window_tokens),
    FLD("/state", "log_window_steps", CF_I64, window_steps),
    FLD("/state", "seed", CF_I64, seed),
    FLD("/state", "model_only", CF_BOOL, model_only),
    FLD("/run", "world_size", CF_I64, world_size),
    FLD("/run", "per_device_train_batch_size", CF_I64, per_device_batch),
    FLD("/run", "gradient_accumulation_steps", CF_I64, accumulation),
    FLD("/run", "max_steps", CF_I64, max_steps),
    FLD("/run", "logging_steps", CF_I64, logging_steps),
    FLD("/run", "warmup_steps", CF_I64, warmup_steps),
    FLD("/run", "learning_rate", CF_F64, learning_rate),
    FLD("/run", "num_train_epochs", CF_F64, num_train_epochs),
    FLD("/run", "lr_scheduler_type", CF_STR, lr_scheduler_type),
    FLD("/run", "config_hash", CF_HASH, config_hash),
    FLD("/run", "config_path", CF_STR, config_path),
    FLD("/model", "path", CF_STR, model_path),
    FLD("/model", "architecture", CF_STR, model_arch),
    FLD("/model", "bytes", CF_I64, model_bytes),
    FLD("/model", "n_layers", CF_I64, model_layers),
    FLD("/model", "dim", CF_I64, model_dim),
    FLD("/model", "vocab", CF_I64, model_vocab),
    FLD("/model", "fingerprint", CF_HASH, model_fingerprint),
    FLD("/lora", "r", CF_I64, lora_r),
    FLD("/lora", "n_layers", CF_I64, lora_layers),
    FLD("/lora", "lora_alpha", CF_F64, lora_alpha),
    FLD("/lora", "scale", CF_F64, lora_scale),
    FLD("/lora", "lora_dropout", CF_F64, lora_dropout),
    FLD("/lora", "use_rslora", CF_BOOL, use_rslora),
    FLD("/lora", "target_modules", CF_STR, target_modules),
    FLD("/lora", "chat_template", CF_STR, chat_template),
    FLD("/metrics", "metric_for_best_model", CF_STR, metric_name),
    FLD("/metrics", "greater_is_better", CF_BOOL, greater_is_better),
    FLD("/metrics", "has_best", CF_BOOL, has_best),
    FLD("/metrics", "best_metric", CF_F64, best_metric),
    FLD("/metrics", "best_step", CF_I64, best_step),
    FLD("/metrics", "patience_counter", CF_I64, patience_counter),
    FLD("/slurm", "job_id", CF_STR, slurm_job_id),
    FLD("/slurm", "restart_count", CF_I64, slurm_restart_count),
    FLD("/slurm", "nodelist", CF_STR, slurm_nodelist),
};
const int ckpt_nfields = (int)(sizeof ckpt_fields / sizeof ckpt_fields[0]);
const char *const ckpt_groups[] = {"/state", "/run", "/model", "/lora", "/metrics", "/slurm", "/adapter",
                                   "/optimizer", CKPT_EXP_AVG, CKPT_EXP_AVG_SQ};
const int ckpt_ngroups = (int)(sizeof ckpt_groups / sizeof ckpt_groups[0]);

static herr_t write_field(hid_t file, const ckpt_field *f, const ckpt_state *s)
{
    const char *p = (const char *)s + f->offset;
    hid_t loc = H5Oopen(file, f->group, H5P_DEFAULT);
    herr_t rc = -1;
    char hex[20];
    switch (f->type) {
    case CF_I64: rc = h5_attr_i64(loc, f->name, *(const int64_t *)(const void *)p); break;
    case CF_F64: rc = h5_attr_f64(loc, f->name, *(const double *)(const void *)p); break;
    case CF_BOOL: rc = h5_attr_i64(loc, f->name, *(const bool *)(const void *)p); break;
    case CF_STR: rc = h5_attr_str(loc, f->name, p); break;
    case CF_HASH:
        snprintf(hex, sizeof hex, "%016" PRIx64, *(const uint64_t *)(const void *)p);
        rc = h5_attr_str(loc, f->name, hex);
        break;
    }
    if (loc >= 0) H5Oclose(loc);
    return loc < 0 ? -1 : rc;
}

/* A scalar fixed-length string dataset (the config file can exceed an attribute's 64 KiB). */
static pt_status write_text(hid_t file, const char *name, const char *text)
{
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, strlen(text) + 1);
    hid_t set = H5Dcreate2(file, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = set < 0 ? -1 : H5Dwrite(set, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text);
    if (set >= 0) H5Dclose(set);
    H5Sclose(space);
    H5Tclose(type);
    if (rc < 0) return ERR(PT_ERR_USER, "cannot write %s", name);
    return PT_OK;
}

static pt_status write_evals(hid_t file, const ckpt_state *s)
{
    hsize_t dims[2] = {(hsize_t)s->n_evals, 2};
    double *rows = malloc(sizeof *rows * (size_t)(2 * s->n_evals + 1));
    TRY_ALLOC(rows);
    for (int64_t i = 0; i < s->n_evals; i++) rows[2 * i] = (double)s->evals[i].step, rows[2 * i + 1] = s->evals[i].value;
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t set = H5Dcreate2(file, CKPT_EVALS, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t rc = set < 0 ? -1 : s->n_evals ? H5Dwrite(set, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, rows) : 0;
    if (set >= 0) H5Dclose(set);
    H5Sclose(space);
    free(rows);
    if (rc < 0) return ERR(PT_ERR_USER, "cannot write %s", CKPT_EVALS);
    return PT_OK;
}

static pt_status write_meta(hid_t file, const ckpt_state *s)
{
    for (int g = 0; g < ckpt_ngroups; g++) {
        hid_t id = H5Gcreate2(file, ckpt_groups[g], H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        if (id < 0) return ERR(PT_ERR_USER, "cannot create group %s", ckpt_groups[g]);
        H5Gclose(id);
    }
    if (h5_attr_str(file, "format", CKPT_FORMAT) < 0 || h5_attr_i64(file, "format_version", CKPT_VERSION) < 0)
        return ERR(PT_ERR_USER, "cannot write the checkpoint's format attributes");
    for (int i = 0; i < ckpt_nfields; i++)
        if (write_field(file, &ckpt_fields[i], s) < 0)
            return ERR(PT_ERR_USER, "cannot write attribute %s of %s", ckpt_fields[i].name, ckpt_fields[i].group);
    TRY(write_text(file, CKPT_CONFIG_TEXT, s->config_text ? s->config_text : ""));
    return write_evals(file, s);
}

/* PTRAIN_TEST_CRASH_IN_SAVE=N: die as kill -9 would, halfway through the tensors of step N. */
static void test_crash_point(const ckpt_state *s, int i, int n)
{
    const char *v = getenv("PTRAIN_TEST_CRASH_IN_SAVE");
    if (v && atoll(v) == s->global_step && i == n / 2) raise(SIGKILL);
}

static pt_status write_tensors(hid_t file, const ckpt_state *s, const ckpt_layout *lay)
{
    const char *groups[3] = {CKPT_PARAMS, CKPT_EXP_AVG, CKPT_EXP_AVG_SQ};
    const float *arrays[3] = {s->params, s->exp_avg, s->exp_avg_sq};
    int n = s->model_only ? 1 : 3;
    char name[192];
    for (int a = 0; a < n; a++)
        for (int i = 0; i < lay->n; i++) {
            const ckpt_entry *e = &lay->e[i];
            test_crash_point(s, a * lay->n + i, n * lay->n);
            snprintf(name, sizeof name, "%s/%s", groups[a], e->name);
            TRY(h5_write_f32(file, name, e->rows, e->cols, arrays[a] + e->offset, true));
        }
    return PT_OK;
}

/* The completion mark in the user block: what ckpt_verify checks. */
static pt_status write_mark(const char *tmp, int64_t step)
{
    int fd = open(tmp, O_RDWR);
    if (fd < 0) return ERR(PT_ERR_USER, "cannot reopen %s: %s", tmp, strerror(errno));
    struct stat sb;
    uLong crc = crc32(0L, Z_NULL, 0);
    static unsigned char buf[1 << 20];
    off_t off = CKPT_USERBLOCK;
    ssize_t got = 0;
    pt_status st = fstat(fd, &sb) == 0 ? PT_OK : ERR(PT_ERR_USER, "cannot stat %s: %s", tmp, strerror(errno));
    while (st == PT_OK && (got = pread(fd, buf, sizeof buf, off)) > 0) crc = crc32(crc, buf, (uInt)got), off += got;
    if (st == PT_OK && (got < 0 || off != sb.st_size))
        st = ERR(PT_ERR_USER, "cannot read back %s: %s", tmp, strerror(errno));
    char mark[CKPT_USERBLOCK] = {0};
    snprintf(mark, sizeof mark, "PTRAIN-CHECKPOINT %d\nbytes %lld\ncrc32 %08lx\nstep %lld\n", CKPT_VERSION,
             (long long)sb.st_size, (unsigned long)crc, (long long)step);
    if (st == PT_OK && pwrite(fd, mark, sizeof mark, 0) != (ssize_t)sizeof mark)
        st = ERR(PT_ERR_USER, "cannot write the completion mark of %s: %s", tmp, strerror(errno));
    close(fd);
    return st;
}

pt_status ckpt_write(const char *path, const ckpt_state *s, const ckpt_layout *lay)
{
    char tmp[4096], dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp.%d", dirname(dir), strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
             (int)getpid());
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, CKPT_USERBLOCK);
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    H5Pclose(fcpl);
    if (file < 0) return ERR(PT_ERR_USER, "cannot create %s (is output_dir writable?)", tmp);
    pt_status st = write_meta(file, s);
    if (st == PT_OK) st = write_tensors(file, s, lay);
    if (st == PT_OK && h5_attr_i64(file, "complete", 1) < 0) st = ERR(PT_ERR_USER, "cannot mark %s complete", tmp);
    if (H5Fflush(file, H5F_SCOPE_GLOBAL) < 0 && st == PT_OK) st = ERR(PT_ERR_USER, "cannot flush %s", tmp);
    if (H5Fclose(file) < 0 && st == PT_OK) st = ERR(PT_ERR_USER, "cannot close %s", tmp);
    if (st == PT_OK) st = write_mark(tmp, s->global_step);
    if (st == PT_OK) st = h5_commit(tmp, path);
    if (st != PT_OK) {
        unlink(tmp);
        err_context("writing checkpoint %s (earlier checkpoints are intact; free space or fix output_dir, then "
                    "resume)", path);
    }
    return st;
}

/* Parse the mark; *bytes and *crc get what it says. */
static bool parse_mark(const char *mark, long long *bytes, unsigned long *crc)
{
    int version = 0;
    long long step = 0;
    return sscanf(mark, "PTRAIN-CHECKPOINT %d\nbytes %lld\ncrc32 %lx\nstep %lld", &version, bytes, crc, &step) == 4 &&
           version >= 1;
}

pt_status ckpt_verify(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ERR(PT_ERR_USER, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    char mark[CKPT_USERBLOCK + 1] = {0};
    pt_status st = PT_OK;
    long long bytes = 0;
    unsigned long want = 0;
    if (fstat(fd, &sb) != 0 || pread(fd, mark, CKPT_USERBLOCK, 0) != CKPT_USERBLOCK)
        st = ERR(PT_ERR_USER, "%s: incomplete: shorter than its %d-byte header", path, CKPT_USERBLOCK);
    else if (!mark[0])
        st = ERR(PT_ERR_USER, "%s: incomplete: no completion mark (the write was interrupted)", path);
    else if (!parse_mark(mark, &bytes, &want))
        st = ERR(PT_ERR_USER, "%s: damaged: not a ptrain checkpoint header", path);
    else if (bytes != (long long)sb.st_size)
        st = ERR(PT_ERR_USER, "%s: damaged: %lld bytes, the completion mark says %lld (truncated or appended to)",
                 path, (long long)sb.st_size, bytes);
    unsigned char *buf = st == PT_OK ? malloc(1 << 20) : NULL;
    if (st == PT_OK && !buf) st = ERR(PT_ERR_NOMEM, "out of memory");
    uLong crc = crc32(0L, Z_NULL, 0);
    ssize_t got = 0;
    for (off_t off = CKPT_USERBLOCK; st == PT_OK && (got = pread(fd, buf, 1 << 20, off)) > 0; off += got)
        crc = crc32(crc, buf, (uInt)got);
    if (st == PT_OK && got < 0) st = ERR(PT_ERR_USER, "%s: read error: %s", path, strerror(errno));
    if (st == PT_OK && crc != want)
        st = ERR(PT_ERR_USER, "%s: damaged: CRC-32 %08lx, the completion mark says %08lx", path, (unsigned long)crc,
                 want);
    free(buf);
    close(fd);
    return st;
}

bool ckpt_is_checkpoint(const char *path)
{
    char head[18] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    size_t got = fread(head, 1, 17, f);
    fclose(f);
    return (got == 17 && !strcmp(head, "PTRAIN-CHECKPOINT")) || ckpt_step_of(path) >= 0 || strstr(path, ".h5.tmp.");
}

int64_t ckpt_step_of(const char *name)
{
    const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
    if (strncmp(base, "checkpoint-", 11) || !isdigit((unsigned char)base[11])) return -1;
    char *end;
    long long step = strtoll(base + 11, &end, 10);
    return strcmp(end, ".h5") ? -1 : step;
}

static int by_step_desc(const void *a, const void *b)
{
    int64_t x = ckpt_step_of(*(char *const *)a), y = ckpt_step_of(*(char *const *)b);
    return x < y ? 1 : x > y ? -1 : 0;
}

pt_status ckpt_list(const char *dir, char ***paths, int64_t **steps, int *n)
{
    *paths = NULL, *steps = NULL, *n = 0;
    DIR *d = opendir(dir);
    if (!d) return errno == ENOENT ? PT_OK : ERR(PT_ERR_USER, "cannot list %s: %s", dir, strerror(errno));
    int cap = 0;
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && (e = readdir(d));) {
        if (ckpt_step_of(e->d_name) < 0) continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            char **grown = realloc(*paths, sizeof *grown * (size_t)cap);
            if (!grown) st = ERR(PT_ERR_NOMEM, "out of memory");
            else *paths = grown;
        }
        if (st == PT_OK && asprintf(&(*paths)[*n], "%s/%s", dir, e->d_name) < 0) st = ERR(PT_ERR_NOMEM, "out of memory");
        if (st == PT_OK) (*n)++;
    }
    closedir(d);
    if (*n) qsort(*paths, (size_t)*n, sizeof **paths, by_step_desc);
    *steps = st == PT_OK ? malloc(sizeof **steps * (size_t)(*n + 1)) : NULL;
    if (st == PT_OK && !*steps) st = ERR(PT_ERR_NOMEM, "out of memory");
    for (int i = 0; st == PT_OK && i < *n; i++) (*steps)[i] = ckpt_step_of((*paths)[i]);
    return st;
}

void ckpt_state_free(ckpt_state *s)
{
    free(s->config_text);
    free(s->evals);
    free(s->params);
    free(s->exp_avg);
    free(s->exp_avg_sq);
    s->config_text = NULL, s->evals = NULL, s->params = s->exp_avg = s->exp_avg_sq = NULL;
}

void ckpt_layout_free(ckpt_layout *lay)
{
    free(lay->e);
    *lay = (ckpt_layout){0};
}
