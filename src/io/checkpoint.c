/* checkpoint.c — writing checkpoint files (layout: docs/checkpoint-format.md), their completion
 * mark, and finding them in output_dir. The file is built in memory with an empty 512-byte HDF5
 * user block; the user block then gets the mark (size and CRC-32 of the rest), and the bytes go to
 * a temporary file (the mark last), which is synced and renamed into place. A kill at any moment
 * leaves the old checkpoints as they were and at most a temporary file, never a checkpoint-N.h5
 * that is not whole; a full disk is an error of ours, not one inside HDF5. */
#include "ptrain/checkpoint.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "checkpoint_internal.h"
#include "h5util.h"
#include "ptrain/log.h"

#define FLD(g, n, t, m) {g, n, t, offsetof(ckpt_state, m), sizeof(((ckpt_state *)0)->m), NULL}
#define ENUM_FLD(g, n, m, names) {g, n, CF_ENUM, offsetof(ckpt_state, m), sizeof(((ckpt_state *)0)->m), names}
_Static_assert(sizeof(pt_lr_scheduler) == sizeof(int) && sizeof(pt_metric) == sizeof(int), "a CF_ENUM field is an int");
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
    ENUM_FLD("/run", "lr_scheduler_type", lr_scheduler_type, config_sched_choices),
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
    FLD("/lora", "use_dora", CF_OBOOL, use_dora),
    FLD("/lora", "target_modules", CF_STR, target_modules),
    FLD("/lora", "select", CF_OSTR, lora_select),
    FLD("/lora", "init_lora_weights", CF_OSTR, lora_init),
    FLD("/lora", "chat_template", CF_STR, chat_template),
    ENUM_FLD("/metrics", "metric_for_best_model", metric_for_best_model, config_metric_choices),
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

int ckpt_enum_count(const ckpt_field *f)
{
    int n = 0;
    while (f->names[n]) n++;
    return n;
}

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
    case CF_OSTR: rc = *p ? h5_attr_str(loc, f->name, p) : 0; break;
    case CF_OBOOL: rc = *(const bool *)(const void *)p ? h5_attr_i64(loc, f->name, 1) : 0; break;
    case CF_HASH:
        snprintf(hex, sizeof hex, "%016" PRIx64, *(const uint64_t *)(const void *)p);
        rc = h5_attr_str(loc, f->name, hex);
        break;
    case CF_ENUM: {
        int v = *(const int *)(const void *)p;
        rc = v >= 0 && v < ckpt_enum_count(f) ? h5_attr_str(loc, f->name, f->names[v]) : -1;
        break;
    }
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
    if (rc < 0) return ERR(PT_ERR_USER, "cannot write %s", shown_text(name).s);
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

/* Fletcher-32 as HDF5's checksum filter computes it: the data as big-endian 16-bit words (n is
 * even: tensors are floats), both sums folded to 16 bits by end-around carry every 360 words and
 * once more at the end; sum2 in the high half. */
static uint32_t fletcher32(const unsigned char *p, size_t n)
{
    uint32_t sum1 = 0, sum2 = 0;
    for (size_t words = n / 2; words;) {
        size_t run = words < 360 ? words : 360;
        words -= run;
        for (size_t i = 0; i < run; i++, p += 2) sum1 += (uint32_t)p[0] << 8 | p[1], sum2 += sum1;
        sum1 = (sum1 & 0xffff) + (sum1 >> 16), sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    }
    sum1 = (sum1 & 0xffff) + (sum1 >> 16), sum2 = (sum2 & 0xffff) + (sum2 >> 16);
    return sum2 << 16 | sum1;
}

/* One tensor as h5_write_f32(..., true) stores it (a single chunk, the Fletcher-32 filter), its
 * chunk handed to HDF5 ready-made: the values, then the checksum little-endian, as the filter
 * appends it. HDF5 then neither copies the data through its chunk cache and filter pipeline nor
 * allocates per tensor (0.1 s of a SmolLM2 r=16 checkpoint's 0.5, 0.4 s for Gemma-2-2B's: see
 * bench/run-ckpt.sh); the file is the same, and every read still verifies the checksum
 * (tests/unit/test_checkpoint.c compares the chunks with HDF5's). scratch: the tensor's bytes + 4. */
static pt_status write_tensor(hid_t file, const char *name, const ckpt_entry *e, const float *data,
                              unsigned char *scratch)
{
#if H5_VERSION_GE(1, 10, 3) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (e->rows > 0 && e->cols > 0) {
        hsize_t dims[2] = {(hsize_t)e->rows, (hsize_t)e->cols}, origin[2] = {0, 0};
        size_t bytes = sizeof(float) * (size_t)(e->rows * e->cols);
        memcpy(scratch, data, bytes);
        uint32_t sum = fletcher32(scratch, bytes);
        for (int k = 0; k < 4; k++) scratch[bytes + (size_t)k] = (unsigned char)(sum >> (8 * k));
        hid_t space = H5Screate_simple(2, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
        H5Pset_chunk(dcpl, 2, dims);
        H5Pset_fletcher32(dcpl);
        hid_t set = H5Dcreate2(file, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        herr_t rc = set < 0 ? -1 : H5Dwrite_chunk(set, H5P_DEFAULT, 0, origin, bytes + 4, scratch);
        if (set >= 0) H5Dclose(set);
        H5Pclose(dcpl);
        H5Sclose(space);
        return rc < 0 ? ERR(PT_ERR_USER, "cannot write dataset %s", shown_text(name).s) : PT_OK;
    }
#endif
    (void)scratch;
    return h5_write_f32(file, name, e->rows, e->cols, data, true);
}

static pt_status write_tensors(hid_t file, const ckpt_state *s, const ckpt_layout *lay)
{
    const char *groups[3] = {CKPT_PARAMS, CKPT_EXP_AVG, CKPT_EXP_AVG_SQ};
    const float *arrays[3] = {s->params, s->exp_avg, s->exp_avg_sq};
    int n = s->model_only ? 1 : 3;
    char name[192];
    int64_t largest = 0;
    for (int i = 0; i < lay->n; i++)
        if (lay->e[i].rows * lay->e[i].cols > largest) largest = lay->e[i].rows * lay->e[i].cols;
    unsigned char *scratch = malloc(sizeof(float) * (size_t)largest + 4);
    TRY_ALLOC(scratch);
    pt_status st = PT_OK;
    for (int a = 0; a < n && st == PT_OK; a++)
        for (int i = 0; i < lay->n && st == PT_OK; i++) {
            const ckpt_entry *e = &lay->e[i];
            snprintf(name, sizeof name, "%s/%s", groups[a], e->name);
            st = write_tensor(file, name, e, arrays[a] + e->offset, scratch);
        }
    free(scratch);
    return st;
}

typedef struct {
    const unsigned char *p;
    size_t n;
    uLong crc;
} crc_job;

/* CRC-32 of a span, in calls of at most 1 GiB (crc32 takes an unsigned int length). */
static void *crc_span(void *arg)
{
    crc_job *j = arg;
    j->crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < j->n;) {
        size_t len = j->n - off < ((size_t)1 << 30) ? j->n - off : (size_t)1 << 30;
        j->crc = crc32(j->crc, j->p + off, (uInt)len);
        off += len;
    }
    return NULL;
}

/* CRC-32 of n bytes: the second half on a thread of its own, joined with crc32_combine. A plain
 * pthread, not OpenMP, so that it also works in a process forked from a threaded one. */
static unsigned long crc_of(const unsigned char *p, size_t n)
{
    crc_job a = {p, n / 2, 0}, b = {p + n / 2, n - n / 2, 0};
    pthread_t helper;
    bool threaded = n >= ((size_t)1 << 24) && pthread_create(&helper, NULL, crc_span, &b) == 0;
    crc_span(&a);
    if (threaded) pthread_join(helper, NULL);
    else crc_span(&b);
    return crc32_combine(a.crc, b.crc, (z_off_t)b.n);
}

/* h5_head_fill: the completion mark in the user block, what ckpt_verify checks. */
static void put_mark(unsigned char *head, size_t head_len, const unsigned char *body, size_t body_len, void *arg)
{
    const int64_t *step = arg;
    char mark[CKPT_USERBLOCK] = {0};
    snprintf(mark, sizeof mark, CKPT_MARK_FORMAT, CKPT_VERSION, (long long)(head_len + body_len),
             crc_of(body, body_len), (long long)*step);
    memcpy(head, mark, head_len < sizeof mark ? head_len : sizeof mark);
}

pt_status ckpt_write(const char *path, const ckpt_state *s, const ckpt_layout *lay)
{
    h5_memfile m;
    size_t tensors = sizeof(float) * (size_t)lay->total * (s->model_only ? 1 : 3);
    size_t hint = tensors + (size_t)lay->n * 3 * 2048 + ((size_t)1 << 20); /* data + per-dataset metadata */
    TRY(h5_memfile_create(&m, CKPT_USERBLOCK, hint));
    pt_status st = write_meta(m.file, s);
    if (st == PT_OK) st = write_tensors(m.file, s, lay);
    if (st == PT_OK && h5_attr_i64(m.file, "complete", 1) < 0)
        st = ERR(PT_ERR_USER, "cannot mark %s complete", shown_text(path).s);
    /* PTRAIN_TEST_CRASH_IN_SAVE=N (tests): die as kill -9 would, halfway through writing step N's file */
    const char *crash = getenv("PTRAIN_TEST_CRASH_IN_SAVE");
    int64_t step = s->global_step;
    if (st == PT_OK)
        st = h5_memfile_commit(&m, path, CKPT_USERBLOCK, put_mark, &step, crash && atoll(crash) == s->global_step);
    else
        h5_memfile_discard(&m);
    if (st != PT_OK)
        err_context("writing checkpoint %s (earlier checkpoints are intact; free space or fix output_dir, then "
                    "resume)", shown_text(path).s);
    return st;
}

/* What the mark says, when it is byte for byte a mark ptrain writes (its text, then zeros to the
 * end of the block): a flipped bit anywhere in the block is found. */
static bool parse_mark(const char *mark, long long *bytes, unsigned long *crc, long long *step)
{
    int version = 0;
    if (sscanf(mark, "PTRAIN-CHECKPOINT %d\nbytes %lld\ncrc32 %lx\nstep %lld", &version, bytes, crc, step) != 4 ||
        version < 1)
        return false;
    char again[CKPT_USERBLOCK + 1] = {0};
    snprintf(again, sizeof again, CKPT_MARK_FORMAT, version, *bytes, *crc, *step);
    return memcmp(mark, again, CKPT_USERBLOCK) == 0;
}

/* The first CKPT_USERBLOCK bytes (got of them read) against the file's size; *want and *step get
 * the CRC-32 and the step the mark names. */
static pt_status check_mark(const char *path, const char *mark, ssize_t got, off_t size, unsigned long *want,
                            int64_t *step)
{
    static const char hdf5[8] = {'\x89', 'H', 'D', 'F', '\r', '\n', '\x1a', '\n'};
    static const char zeros[CKPT_USERBLOCK];
    long long bytes = 0, at = 0;
    if (got < 0) return ERR(PT_ERR_USER, "%s: cannot read it: %s", shown_text(path).s, strerror(errno));
    if (got < CKPT_USERBLOCK)
        return ERR(PT_ERR_USER, "%s: incomplete: %lld bytes, shorter than a checkpoint's %d-byte header",
                   shown_text(path).s, (long long)size, CKPT_USERBLOCK);
    if (!memcmp(mark, hdf5, sizeof hdf5))
        return ERR(PT_ERR_USER, "%s: not a ptrain checkpoint: an HDF5 file without a checkpoint's %d-byte header "
                   "(an adapter.h5? `ptrain generate --adapter` reads those)", shown_text(path).s, CKPT_USERBLOCK);
    if (!memcmp(mark, zeros, CKPT_USERBLOCK))
        return ERR(PT_ERR_USER, "%s: incomplete: no completion mark (the write was interrupted); use an older "
                   "checkpoint", shown_text(path).s);
    if (!parse_mark(mark, &bytes, want, &at))
        return ERR(PT_ERR_USER, "%s: damaged: not a ptrain checkpoint header (first %d bytes)", shown_text(path).s,
                   CKPT_USERBLOCK);
    if (bytes != (long long)size)
        return ERR(PT_ERR_USER, "%s: damaged: %lld bytes, the completion mark says %lld (truncated or appended to)",
                   shown_text(path).s, (long long)size, bytes);
    *step = at;
    return PT_OK;
}

/* The CRC-32 of everything after the user block. */
static pt_status crc_of_body(int fd, const char *path, unsigned long *crc)
{
    unsigned char *buf = malloc(1 << 20);
    if (!buf) return ERR(PT_ERR_NOMEM, "out of memory");
    uLong c = crc32(0L, Z_NULL, 0);
    ssize_t got = 0;
    for (off_t off = CKPT_USERBLOCK; (got = pread(fd, buf, 1 << 20, off)) > 0; off += got) c = crc32(c, buf, (uInt)got);
    free(buf);
    if (got < 0) return ERR(PT_ERR_USER, "%s: read error: %s", shown_text(path).s, strerror(errno));
    *crc = c;
    return PT_OK;
}

pt_status ckpt_verify_mark(const char *path, int64_t *step)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) return ERR(PT_ERR_USER, "%s: cannot open: %s", shown_text(path).s, strerror(errno));
    struct stat sb;
    char mark[CKPT_USERBLOCK + 1] = {0};
    unsigned long want = 0, crc = 0;
    pt_status st = PT_OK;
    if (fstat(fd, &sb) != 0) st = ERR(PT_ERR_USER, "%s: cannot stat: %s", shown_text(path).s, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        st = ERR(PT_ERR_USER, "%s: not a checkpoint file (not a regular file)", shown_text(path).s);
    if (st == PT_OK) st = check_mark(path, mark, pread(fd, mark, CKPT_USERBLOCK, 0), sb.st_size, &want, step);
    if (st == PT_OK) st = crc_of_body(fd, path, &crc);
    if (st == PT_OK && crc != want)
        st = ERR(PT_ERR_USER, "%s: damaged: CRC-32 %08lx, the completion mark says %08lx", shown_text(path).s, crc,
                 want);
    close(fd);
    return st;
}

pt_status ckpt_verify(const char *path)
{
    int64_t step;
    return ckpt_verify_mark(path, &step);
}

/* Its name, a mark at its start, or an HDF5 superblock right after a checkpoint's user block. */
bool ckpt_is_checkpoint(const char *path)
{
    char head[CKPT_USERBLOCK + 8] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return ckpt_step_of(path) >= 0;
    size_t got = fread(head, 1, sizeof head, f);
    fclose(f);
    return (got >= 17 && !memcmp(head, "PTRAIN-CHECKPOINT", 17)) ||
           (got == sizeof head && !memcmp(head + CKPT_USERBLOCK, "\x89HDF\r\n\x1a\n", 8)) || ckpt_step_of(path) >= 0 ||
           strstr(path, ".h5.tmp.");
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
    if (!d)
        return errno == ENOENT ? PT_OK
                               : ERR(PT_ERR_USER, "output_dir %s cannot be read: %s (set output_dir to a writable "
                                     "directory)", shown_text(dir).s, strerror(errno));
    int cap = 0;
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && (e = readdir(d));) {
        struct stat sb;
        if (ckpt_step_of(e->d_name) < 0) continue;
        if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode)) {
            log_warn("%s/%s is not a regular file (a link?): not taken as a checkpoint", shown_text(dir).s,
                     shown_text(e->d_name).s);
            continue;
        }
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
