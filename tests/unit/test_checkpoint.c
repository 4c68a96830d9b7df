/* test_checkpoint.c — checkpoint files (src/io/checkpoint*.c) and what training builds on them
 * (src/train/resume.c, src/data/sampler.c), with synthetic states and layouts, no model:
 *
 * - ckpt_write + ckpt_read give back every metadata field, the config text, the evaluations and
 *   bit-identical arrays (NaN payloads, -0, subnormals included); save_only_model files hold no
 *   moments; ckpt_read_meta reads no tensors; a layout that does not fit is named; inspect prints it;
 *   a config choice (lr_scheduler_type) reads back as its enum, a name this ptrain does not know is
 *   refused naming it, and resume_compare names the choice that changed;
 *   each tensor's stored chunk (written ready-made, with ptrain's own Fletcher-32) is byte for byte
 *   the chunk HDF5's filter pipeline makes of the same values.
 * - ckpt_verify: truncations at several sizes, appended bytes, a flipped bit at offsets across the
 *   whole file (every one is found: by the mark, the CRC-32, or the mark's step against
 *   /state/global_step), a zeroed user block, and the temporary file a SIGKILL in the middle of
 *   a save leaves (the earlier checkpoint intact, no checkpoint-N.h5 for the killed save).
 * - ckpt_list: newest step first, only checkpoint-<digits>.h5; resume_rotate (save_total_limit)
 *   deletes the oldest unprotected ones only.
 * - best_record against transformers' EarlyStoppingCallback.check_metric_value (patience counted
 *   against the previous best, with threshold, before Trainer._determine_best_metric updates the
 *   best, strictly better), greater_is_better both ways.
 * - the sampler's resume: after k batches per rank under W ranks of batch B, sampler_epoch_from at
 *   sampler_seen(k) under W' ranks of batch B' covers every example not yet seen exactly once
 *   (plus, under W' > 1, padding from the start of the epoch's order), and with W' = W, B' = B the
 *   very batches the uninterrupted run would have had. */
#include <dirent.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "io/checkpoint_internal.h"
#include "ptrain/checkpoint.h"
#include "ptrain/dataset.h"
#include "ptrain/resume.h"
#include "tmpdir.h"

/* ---- files and output ---- */

static char tmpdir[TMPDIR_SIZE];

static int setup_dir(void **state)
{
    (void)state;
    return tmpdir_create(tmpdir, sizeof tmpdir, "test_checkpoint");
}

static int remove_dir(void **state)
{
    (void)state;
    return tmpdir_remove(tmpdir);
}

static void path_of(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/%s", tmpdir, name);
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    rewind(f);
    unsigned char *p = malloc(*n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, *n, f), *n);
    fclose(f);
    return p;
}

static void spill(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* stdout (log_info, inspect) goes to a file while captured, so the TAP stream stays clean. */
static int saved_stdout = -1;

static void capture_begin(void)
{
    char path[512];
    path_of(path, sizeof path, "stdout.txt");
    fflush(stdout);
    saved_stdout = dup(1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(saved_stdout >= 0 && fd >= 0);
    dup2(fd, 1);
    close(fd);
}

static char *capture_end(void)
{
    char path[512];
    size_t n;
    fflush(stdout);
    dup2(saved_stdout, 1);
    close(saved_stdout);
    path_of(path, sizeof path, "stdout.txt");
    char *text = (char *)slurp(path, &n);
    text[n] = '\0';
    unlink(path);
    return text;
}

#define expect_error(st, expected) expect_error_((st), (expected), __LINE__)
/* st failed as a user error whose message starts with expected. */
static void expect_error_(pt_status st, const char *expected, int line)
{
    if (st != PT_ERR_USER || strncmp(err_message(), expected, strlen(expected)) != 0)
        fail_msg("line %d: status %d\n got:      %s\n expected: %s...", line, st, st ? err_message() : "(ok)",
                 expected);
    err_clear();
}

/* ---- a synthetic checkpoint ---- */

/* Four LoRA matrices of two layers' q and down projections, r = 3 (odd shapes on purpose). */
static void make_layout(ckpt_layout *lay)
{
    static const int64_t shapes[4][2] = {{3, 5}, {7, 3}, {3, 9}, {5, 3}};
    static const char *const names[4] = {
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight",
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight",
        "base_model.model.model.layers.1.mlp.down_proj.lora_A.weight",
        "base_model.model.model.layers.1.mlp.down_proj.lora_B.weight"};
    lay->n = 4, lay->total = 0;
    lay->e = calloc(4, sizeof *lay->e);
    assert_non_null(lay->e);
    for (int i = 0; i < 4; i++) {
        snprintf(lay->e[i].name, sizeof lay->e[i].name, "%s", names[i]);
        lay->e[i].rows = shapes[i][0], lay->e[i].cols = shapes[i][1], lay->e[i].offset = lay->total;
        lay->total += shapes[i][0] * shapes[i][1];
    }
}

/* n floats of random bits, with a NaN payload, -0, a subnormal and infinity among them. */
static float *random_floats(int64_t n, uint32_t seed)
{
    float *p = malloc(sizeof *p * (size_t)n);
    assert_non_null(p);
    uint32_t x = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        uint32_t bits = i == 0 ? 0x7fc01234u : i == 1 ? 0x80000000u : i == 2 ? 0x00000003u : i == 3 ? 0x7f800000u : x;
        memcpy(&p[i], &bits, sizeof bits);
    }
    return p;
}

/* A string of len characters (a field filled to the last byte before its NUL). */
static void fill_str(char *dst, size_t len, char first)
{
    for (size_t i = 0; i < len; i++) dst[i] = (char)(first + (char)(i % 26));
    dst[len] = '\0';
}

static void fill_run(ckpt_state *s)
{
    snprintf(s->ptrain_version, sizeof s->ptrain_version, "9.8.7-test");
    s->format_version = CKPT_VERSION;
    s->global_step = 7, s->total_steps = 100, s->epoch = 2, s->examples_seen = 33, s->n_train = 61;
    s->data_hash = 0xfedcba9876543210u, s->epoch_float = 2.0 + 33.0 / 61.0;
    s->last_loss = 1.0 / 3.0, s->last_lr = 2e-4 * 0.7, s->window_loss = 12.5, s->window_tokens = 4096;
    s->window_steps = 3, s->seed = 3407;
    s->world_size = 3, s->per_device_batch = 2, s->accumulation = 4, s->max_steps = -1, s->logging_steps = 5;
    s->warmup_steps = 10, s->learning_rate = 2e-4, s->num_train_epochs = 3.5;
    s->lr_scheduler_type = SCHED_CONSTANT_WITH_WARMUP; /* the last name: the longest */
    s->config_hash = 0x8000000000000001u;
    fill_str(s->config_path, sizeof s->config_path - 1, 'a');
    fill_str(s->model_path, sizeof s->model_path - 1, 'A');
    snprintf(s->model_arch, sizeof s->model_arch, "gemma2");
    s->model_bytes = INT64_MAX, s->model_layers = 26, s->model_dim = 2304, s->model_vocab = 256000;
    s->model_fingerprint = 0x0123456789abcdefu;
}

static void fill_rest(ckpt_state *s)
{
    s->lora_r = 3, s->lora_layers = 2, s->lora_alpha = 6.5, s->lora_scale = 6.5 / sqrt(3.0), s->lora_dropout = 0.05;
    s->use_rslora = true;
    fill_str(s->target_modules, sizeof s->target_modules - 1, 'k');
    snprintf(s->chat_template, sizeof s->chat_template, "chatml");
    s->metric_for_best_model = METRIC_EVAL_PERPLEXITY;
    s->greater_is_better = false, s->has_best = true, s->best_metric = 3.25, s->best_step = 4;
    s->patience_counter = 1;
    snprintf(s->slurm_job_id, sizeof s->slurm_job_id, "123456_7");
    fill_str(s->slurm_nodelist, sizeof s->slurm_nodelist - 1, 'n');
    s->slurm_restart_count = 2;
    s->n_evals = 3;
    s->evals = calloc(3, sizeof *s->evals);
    assert_non_null(s->evals);
    for (int i = 0; i < 3; i++) s->evals[i] = (ckpt_eval){2 * (i + 1), 3.0 + 1.0 / (i + 1)};
    size_t n = 100000; /* more than an attribute's 64 KiB */
    s->config_text = malloc(n + 1);
    assert_non_null(s->config_text);
    for (size_t i = 0; i < n; i++) s->config_text[i] = i % 61 == 60 ? '\n' : (char)('a' + i % 23);
    s->config_text[n] = '\0';
}

static void make_state(ckpt_state *s, const ckpt_layout *lay, bool model_only)
{
    memset(s, 0, sizeof *s);
    fill_run(s);
    fill_rest(s);
    s->model_only = model_only;
    s->n_params = lay->total;
    s->params = random_floats(lay->total, 1);
    if (!model_only) s->exp_avg = random_floats(lay->total, 2), s->exp_avg_sq = random_floats(lay->total, 3);
}

/* A small valid checkpoint of step 3 as tmpdir/name; its bytes (and *n) when n is not NULL. */
static unsigned char *write_small(const char *name, size_t *n)
{
    ckpt_layout lay;
    ckpt_state s;
    char path[512];
    make_layout(&lay);
    make_state(&s, &lay, false);
    s.global_step = 3;
    s.config_text[200] = '\0';
    path_of(path, sizeof path, name);
    assert_int_equal(ckpt_write(path, &s, &lay), PT_OK);
    ckpt_state_free(&s);
    ckpt_layout_free(&lay);
    return n ? slurp(path, n) : NULL;
}

/* ---- round trip ---- */

static void expect_same(const ckpt_state *w, const ckpt_state *r, const ckpt_layout *lay)
{
    ckpt_state want = *w;
    want.complete = true;
    assert_true(r->complete);
    assert_memory_equal(&want, r, CKPT_FIXED_BYTES); /* every metadata field, strings to their last byte */
    assert_string_equal(w->config_text, r->config_text);
    assert_memory_equal(w->evals, r->evals, sizeof *w->evals * (size_t)w->n_evals);
    size_t bytes = sizeof(float) * (size_t)lay->total;
    assert_memory_equal(w->params, r->params, bytes);
    if (w->model_only) {
        assert_null(r->exp_avg);
        assert_null(r->exp_avg_sq);
        return;
    }
    assert_memory_equal(w->exp_avg, r->exp_avg, bytes);
    assert_memory_equal(w->exp_avg_sq, r->exp_avg_sq, bytes);
}

/* Links in group of the HDF5 file path. */
static hsize_t links_in(const char *path, const char *group)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    H5G_info_t info = {0};
    assert_true(f >= 0 && H5Gget_info_by_name(f, group, &info, H5P_DEFAULT) >= 0);
    H5Fclose(f);
    return info.nlinks;
}

static void round_trip(bool model_only, const char *name)
{
    ckpt_layout lay;
    ckpt_state s, r;
    char path[512];
    make_layout(&lay);
    make_state(&s, &lay, model_only);
    path_of(path, sizeof path, name);
    assert_int_equal(ckpt_write(path, &s, &lay), PT_OK);
    assert_int_equal(ckpt_verify(path), PT_OK);
    assert_int_equal(ckpt_read(path, &lay, &r), PT_OK);
    expect_same(&s, &r, &lay);
    ckpt_state_free(&r);
    assert_int_equal(ckpt_read_meta(path, &r), PT_OK);
    assert_true(r.complete && r.global_step == 7 && r.n_evals == 3 && r.evals[2].value == s.evals[2].value);
    assert_string_equal(r.model_path, s.model_path);
    assert_true(r.params == NULL && r.exp_avg == NULL && r.exp_avg_sq == NULL);
    ckpt_state_free(&r);
    assert_int_equal(links_in(path, "/adapter"), 4);
    assert_int_equal(links_in(path, "/optimizer/exp_avg"), model_only ? 0 : 4);
    assert_int_equal(links_in(path, "/optimizer/exp_avg_sq"), model_only ? 0 : 4);
    ckpt_state_free(&s);
    ckpt_layout_free(&lay);
}

static void test_round_trip(void **state)
{
    (void)state;
    round_trip(false, "checkpoint-7.h5");
    round_trip(true, "checkpoint-8.h5");
    char full[512], light[512];
    path_of(full, sizeof full, "checkpoint-7.h5");
    path_of(light, sizeof light, "checkpoint-8.h5");
    struct stat a, b;
    assert_true(stat(full, &a) == 0 && stat(light, &b) == 0 && b.st_size < a.st_size);
    assert_true(ckpt_is_checkpoint(full));
}

/* The chunk HDF5's own filter pipeline makes of data [rows, cols] (ckpt_write hands HDF5
 * ready-made chunks with the checksum it computes itself: they must be the same bytes). */
static void hdf5_chunk(const float *data, hsize_t rows, hsize_t cols, unsigned char *out)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t dims[2] = {rows, cols}, origin[2] = {0, 0};
    H5Pset_fapl_core(fapl, 1 << 16, 0);
    H5Pset_chunk(dcpl, 2, dims);
    H5Pset_fletcher32(dcpl);
    hid_t f = H5Fcreate("test-checkpoint-chunk.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    hid_t space = H5Screate_simple(2, dims, NULL);
    hid_t set = H5Dcreate2(f, "t", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    uint32_t mask = 1;
    assert_true(H5Dwrite(set, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    assert_true(H5Dflush(set) >= 0 && H5Dread_chunk(set, H5P_DEFAULT, origin, &mask, out) >= 0 && mask == 0);
    H5Dclose(set), H5Sclose(space), H5Fclose(f), H5Pclose(dcpl), H5Pclose(fapl);
}

static void test_chunks_as_hdf5_writes(void **state)
{
    (void)state;
    ckpt_layout lay;
    ckpt_state s;
    char path[512], name[256];
    unsigned char got[1024], want[1024];
    make_layout(&lay);
    make_state(&s, &lay, false);
    path_of(path, sizeof path, "checkpoint-7.h5");
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(f >= 0);
    for (int i = 0; i < lay.n; i++) {
        const ckpt_entry *e = &lay.e[i];
        hsize_t origin[2] = {0, 0}, bytes = 0;
        uint32_t mask = 1;
        snprintf(name, sizeof name, "/optimizer/exp_avg_sq/%s", e->name);
        hid_t set = H5Dopen2(f, name, H5P_DEFAULT);
        assert_true(set >= 0 && H5Dget_chunk_storage_size(set, origin, &bytes) >= 0);
        assert_int_equal(bytes, 4 * e->rows * e->cols + 4); /* the values and the Fletcher-32 checksum */
        assert_true(H5Dread_chunk(set, H5P_DEFAULT, origin, &mask, got) >= 0 && mask == 0);
        H5Dclose(set);
        hdf5_chunk(s.exp_avg_sq + e->offset, (hsize_t)e->rows, (hsize_t)e->cols, want);
        assert_memory_equal(got, want, (size_t)bytes);
    }
    H5Fclose(f);
    ckpt_state_free(&s);
    ckpt_layout_free(&lay);
}

static void test_inspect_output(void **state)
{
    (void)state;
    char path[512];
    path_of(path, sizeof path, "checkpoint-7.h5");
    capture_begin();
    pt_status st = ckpt_inspect(path);
    char *out = capture_end();
    assert_int_equal(st, PT_OK);
    static const char *const lines[] = {
        "complete     yes: CRC-32 of the file and Fletcher-32 of 12 tensors verified\n",
        "step         7 of 100 (epoch 2.54; 33 sequences of epoch 2's order seen)\n",
        "loss         0.3333 at learning rate 0.00014\n", "world size   3 ranks x batch 2 x accumulation 4\n",
        "(hash 8000000000000001, seed 3407)\n", "(gemma2, 26 layers, dim 2304, vocab 256000, 9223372036854775807 bytes",
        "r 3, alpha 6.5, dropout 0.05, rsLoRA, targets ", "; 78 parameters\n",
        "optimizer    AdamW moments for every parameter\n",
        "best         eval_perplexity 3.25 at step 4 (3 evaluations, patience counter 1)\n",
        "slurm        job 123456_7, restart 2, nodes nopq", "written by   ptrain 9.8.7-test, checkpoint format 1\n"};
    for (size_t i = 0; i < sizeof lines / sizeof *lines; i++)
        if (!strstr(out, lines[i])) fail_msg("inspect's output lacks \"%s\":\n%s", lines[i], out);
    free(out);
}

static void test_layout_mismatch(void **state)
{
    (void)state;
    ckpt_layout lay;
    ckpt_state r;
    char path[512], want[1024];
    path_of(path, sizeof path, "checkpoint-7.h5");
    make_layout(&lay);
    lay.e[2].rows = 9, lay.e[2].cols = 3;
    snprintf(want, sizeof want, "%s: tensor /adapter/%s is [3, 9], this run needs [9, 3]; was it trained on another "
             "model or with other LoRA settings?", path, lay.e[2].name);
    expect_error(ckpt_read(path, &lay, &r), want);
    assert_null(r.params);
    lay.e[2].rows = 3, lay.e[2].cols = 9;
    snprintf(lay.e[3].name, sizeof lay.e[3].name, "base_model.model.model.layers.1.mlp.up_proj.lora_B.weight");
    snprintf(want, sizeof want, "%s: tensor /adapter/%s is missing", path, lay.e[3].name);
    expect_error(ckpt_read(path, &lay, &r), want);
    ckpt_layout_free(&lay);
}

/* ---- config choices: an enum in ckpt_state, its name in the file ---- */

/* Rewrite the string attribute group/name of the step-3 checkpoint at path as value, and give the
 * file the completion mark of its new bytes: the file a ptrain that wrote that name would leave. */
static void restate(const char *path, const char *group, const char *name, const char *value)
{
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    hid_t g = f < 0 ? -1 : H5Oopen(f, group, H5P_DEFAULT);
    assert_true(g >= 0 && H5Adelete(g, name) >= 0);
    hid_t type = H5Tcopy(H5T_C_S1), space = H5Screate(H5S_SCALAR);
    H5Tset_size(type, strlen(value) + 1);
    hid_t a = H5Acreate2(g, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, type, value) >= 0);
    H5Aclose(a), H5Sclose(space), H5Tclose(type), H5Oclose(g);
    assert_true(H5Fclose(f) >= 0);
    size_t n;
    unsigned char *bytes = slurp(path, &n);
    char mark[CKPT_USERBLOCK] = {0};
    uLong crc = crc32(crc32(0L, Z_NULL, 0), bytes + CKPT_USERBLOCK, (uInt)(n - CKPT_USERBLOCK));
    snprintf(mark, sizeof mark, CKPT_MARK_FORMAT, CKPT_VERSION, (long long)n, (unsigned long)crc, 3LL);
    memcpy(bytes, mark, CKPT_USERBLOCK);
    spill(path, bytes, n);
    free(bytes);
    assert_int_equal(ckpt_verify(path), PT_OK);
}

/* The scheduler and the metric are read back as their enums, once; a name this ptrain does not
 * know (a newer ptrain's) is an error naming it and the names it knows, for resume and inspect
 * alike; an enum out of range is never written. */
static void test_choice_names(void **state)
{
    (void)state;
    write_small("checkpoint-3.h5", NULL);
    char path[512], want[1024];
    path_of(path, sizeof path, "checkpoint-3.h5");
    ckpt_state s;
    assert_int_equal(ckpt_read_meta(path, &s), PT_OK);
    assert_int_equal(s.lr_scheduler_type, SCHED_CONSTANT_WITH_WARMUP);
    assert_int_equal(s.metric_for_best_model, METRIC_EVAL_PERPLEXITY);
    ckpt_state_free(&s);
    restate(path, "/run", "lr_scheduler_type", "cosine");
    restate(path, "/metrics", "metric_for_best_model", "eval_loss");
    assert_int_equal(ckpt_read_meta(path, &s), PT_OK);
    assert_int_equal(s.lr_scheduler_type, SCHED_COSINE);
    assert_int_equal(s.metric_for_best_model, METRIC_EVAL_LOSS);
    ckpt_state_free(&s);
    restate(path, "/metrics", "metric_for_best_model", "eval_accuracy");
    snprintf(want, sizeof want, "%s: /metrics/metric_for_best_model is \"eval_accuracy\", not one this ptrain knows "
             "(eval_loss, eval_perplexity); ptrain 9.8.7-test wrote the checkpoint: use that ptrain to resume from it",
             path);
    expect_error(ckpt_read_meta(path, &s), want);
    restate(path, "/metrics", "metric_for_best_model", "eval_loss");
    restate(path, "/run", "lr_scheduler_type", "inverse_sqrt");
    snprintf(want, sizeof want, "%s: /run/lr_scheduler_type is \"inverse_sqrt\", not one this ptrain knows "
             "(linear, cosine, constant, constant_with_warmup, cosine_with_restarts, polynomial, cosine_with_min_lr); "
             "ptrain 9.8.7-test wrote the checkpoint: use that ptrain to resume from it", path);
    expect_error(ckpt_read_meta(path, &s), want);
    ckpt_layout lay;
    make_layout(&lay);
    expect_error(ckpt_read(path, &lay, &s), want);
    capture_begin();
    pt_status st = ckpt_inspect(path);
    free(capture_end());
    expect_error(st, want);
    unlink(path);
    make_state(&s, &lay, false);
    s.lr_scheduler_type = SCHED_COUNT;
    assert_int_equal(ckpt_write(path, &s, &lay), PT_ERR_USER);
    assert_non_null(strstr(err_message(), ": cannot write attribute lr_scheduler_type of /run"));
    err_clear();
    assert_int_equal(access(path, F_OK), -1);
    ckpt_state_free(&s);
    ckpt_layout_free(&lay);
}

/* resume_compare says which allowed settings changed, by their enums, naming them. */
static void test_resume_changes(void **state)
{
    (void)state;
    ckpt_layout lay;
    ckpt_state then, now;
    make_layout(&lay);
    make_state(&then, &lay, false);
    make_state(&now, &lay, false);
    capture_begin();
    pt_status same = resume_compare("checkpoint-7.h5", &then, &now);
    char *quiet = capture_end();
    now.lr_scheduler_type = SCHED_LINEAR;
    capture_begin();
    pt_status changed = resume_compare("checkpoint-7.h5", &then, &now);
    char *said = capture_end();
    assert_int_equal(same, PT_OK);
    assert_int_equal(changed, PT_OK);
    assert_string_equal(quiet, "");
    assert_string_equal(said, "resume     lr_scheduler_type changed: constant_with_warmup at the checkpoint, linear now\n");
    free(quiet);
    free(said);
    ckpt_state_free(&then);
    ckpt_state_free(&now);
    ckpt_layout_free(&lay);
}

/* ---- damage ---- */

/* A checkpoint path of 10 MB: shown by its start, end and length, and the reason is whole (issue 29). */
static void test_long_path(void **state)
{
    (void)state;
    size_t n = 10u << 20;
    char *path = malloc(n + 1), want[1024];
    assert_non_null(path);
    memset(path, 'c', n);
    memcpy(path, "/scratch/run/", 13);
    memcpy(path + n - 16, "/checkpoint-3.h5", 16);
    path[n] = '\0';
    snprintf(want, sizeof want, "%.68s…(10485760 bytes)…%s: cannot open: File name too long", path, path + n - 68);
    expect_error(ckpt_verify(path), want);
    free(path);
}

static void test_truncated_and_appended(void **state)
{
    (void)state;
    size_t n;
    unsigned char *good = write_small("checkpoint-3.h5", &n);
    char path[512], want[1024];
    path_of(path, sizeof path, "cut.h5");
    const size_t cuts[] = {0, 1, 17, 511};
    for (size_t i = 0; i < sizeof cuts / sizeof *cuts; i++) {
        spill(path, good, cuts[i]);
        snprintf(want, sizeof want, "%s: incomplete: %zu bytes, shorter than a checkpoint's 512-byte header", path,
                 cuts[i]);
        expect_error(ckpt_verify(path), want);
    }
    const size_t longer[] = {512, 513, 4096, n / 2, n - 1, n + 1, n + 4096};
    unsigned char *grown = calloc(1, n + 4096);
    assert_non_null(grown);
    memcpy(grown, good, n);
    for (size_t i = 0; i < sizeof longer / sizeof *longer; i++) {
        spill(path, grown, longer[i]);
        snprintf(want, sizeof want, "%s: damaged: %zu bytes, the completion mark says %zu (truncated or appended to)",
                 path, longer[i], n);
        expect_error(ckpt_verify(path), want);
        ckpt_state s;
        expect_error(ckpt_read_meta(path, &s), want);
    }
    spill(path, good, n);
    assert_int_equal(ckpt_verify(path), PT_OK);
    free(grown);
    free(good);
}

/* A file with bit (off % 8) of byte off flipped is refused, as damaged: by the mark or the CRC-32 in
 * ckpt_verify, or, for the digits of the mark's step, when read. */
static void expect_flip_found(const char *path, unsigned char *bytes, size_t n, size_t off, size_t step_at)
{
    bytes[off] ^= (unsigned char)(1u << (off % 8));
    spill(path, bytes, n);
    bytes[off] ^= (unsigned char)(1u << (off % 8));
    char want[600];
    snprintf(want, sizeof want, "%s: damaged: ", path);
    ckpt_state s;
    pt_status st = ckpt_verify(path);
    if (st == PT_OK && off == step_at) st = ckpt_read_meta(path, &s); /* "step 3" became another digit */
    if (st != PT_ERR_USER || strncmp(err_message(), want, strlen(want)))
        fail_msg("bit %zu of byte %zu flipped: %s", off % 8, off, st ? err_message() : "not found");
    err_clear();
}

static void test_flipped_bits(void **state)
{
    (void)state;
    size_t n;
    unsigned char *bytes = write_small("checkpoint-3.h5", &n);
    char path[512], want[1024];
    path_of(path, sizeof path, "flip.h5");
    const char *step = memmem(bytes, CKPT_USERBLOCK, "\nstep 3\n", 8);
    assert_non_null(step);
    size_t step_at = (size_t)(step - (const char *)bytes) + 6;
    size_t fixed[] = {0, 5, 20, 30, step_at, step_at + 2, 300, 511, 512, 513, 600, n / 2, n - 1};
    for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) expect_flip_found(path, bytes, n, fixed[i], step_at);
    for (size_t off = 0; off < n; off += 61) expect_flip_found(path, bytes, n, off, step_at);
    /* the step's digit 3 -> 2 passes the mark's own checks; reading compares it with the file */
    bytes[step_at] ^= 1;
    spill(path, bytes, n);
    assert_int_equal(ckpt_verify(path), PT_OK);
    ckpt_state s;
    snprintf(want, sizeof want, "%s: damaged: the completion mark says step 2, /state/global_step is 3", path);
    expect_error(ckpt_read_meta(path, &s), want);
    free(bytes);
}

static void test_zeroed_mark(void **state)
{
    (void)state;
    size_t n;
    unsigned char *bytes = write_small("checkpoint-3.h5", &n);
    char path[512], want[1024];
    memset(bytes, 0, CKPT_USERBLOCK);
    path_of(path, sizeof path, "checkpoint-4.h5");
    spill(path, bytes, n);
    snprintf(want, sizeof want, "%s: incomplete: no completion mark (the write was interrupted)", path);
    expect_error(ckpt_verify(path), want);
    assert_true(ckpt_is_checkpoint(path));
    unlink(path);
    /* an HDF5 file without the user block (an adapter.h5) is named as what it is */
    path_of(path, sizeof path, "adapter.h5");
    spill(path, bytes + CKPT_USERBLOCK, n - CKPT_USERBLOCK);
    snprintf(want, sizeof want, "%s: not a ptrain checkpoint: an HDF5 file without a checkpoint's 512-byte header",
             path);
    expect_error(ckpt_verify(path), want);
    assert_false(ckpt_is_checkpoint(path));
    unlink(path);
    free(bytes);
}

/* The temporary file in tmpdir whose name starts with prefix (filewrite.c names it
 * .NAME.tmp.XXXXXXXXXXXX, twelve random letters), into path. */
static bool find_tmp(const char *prefix, char *path, size_t len)
{
    DIR *d = opendir(tmpdir);
    bool found = false;
    for (struct dirent *e; d && !found && (e = readdir(d));)
        if (!strncmp(e->d_name, prefix, strlen(prefix)) && strlen(e->d_name) == strlen(prefix) + 12) {
            snprintf(path, len, "%s/%s", tmpdir, e->d_name);
            found = true;
        }
    if (d) closedir(d);
    return found;
}

/* A save killed halfway (PTRAIN_TEST_CRASH_IN_SAVE, SIGKILL in a child): no checkpoint-9.h5, a
 * temporary file that is incomplete and not listed, and the earlier checkpoint-3.h5 intact. */
static void test_crash_leaves_tmp(void **state)
{
    (void)state;
    char path[512], tmp[512], want[1024];
    path_of(path, sizeof path, "checkpoint-9.h5");
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        ckpt_layout lay;
        ckpt_state s;
        make_layout(&lay);
        make_state(&s, &lay, false);
        s.global_step = 9;
        setenv("PTRAIN_TEST_CRASH_IN_SAVE", "9", 1);
        ckpt_write(path, &s, &lay);
        _exit(0); /* not reached */
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(access(path, F_OK), -1);
    assert_true(find_tmp(".checkpoint-9.h5.tmp.", tmp, sizeof tmp));
    snprintf(want, sizeof want, "%s: incomplete: no completion mark (the write was interrupted)", tmp);
    expect_error(ckpt_verify(tmp), want);
    char **paths;
    int64_t *steps;
    int n;
    assert_int_equal(ckpt_list(tmpdir, &paths, &steps, &n), PT_OK);
    for (int i = 0; i < n; i++) {
        assert_true(steps[i] != 9);
        assert_int_equal(ckpt_verify(paths[i]), PT_OK);
        free(paths[i]);
    }
    free(paths);
    free(steps);
    unlink(tmp);
}

/* ---- listing and save_total_limit ---- */

static void touch(const char *name)
{
    char path[512];
    path_of(path, sizeof path, name);
    spill(path, "x", 1);
}

/* The steps ckpt_list finds in a fresh directory, as "10 7 2". */
static void listed(char *out, size_t len)
{
    char **paths;
    int64_t *steps;
    int n;
    assert_int_equal(ckpt_list(tmpdir, &paths, &steps, &n), PT_OK);
    out[0] = '\0';
    for (int i = 0; i < n; i++) {
        char want[512];
        snprintf(want, sizeof want, "%s/checkpoint-%lld.h5", tmpdir, (long long)steps[i]);
        assert_string_equal(paths[i], want);
        snprintf(out + strlen(out), len - strlen(out), "%s%lld", i ? " " : "", (long long)steps[i]);
        free(paths[i]);
    }
    free(paths);
    free(steps);
}

static void test_list(void **state)
{
    remove_dir(state);
    setup_dir(state);
    const char *names[] = {"checkpoint-2.h5", "checkpoint-10.h5", "checkpoint-1.h5", "checkpoint-x.h5",
                           ".checkpoint-12.h5.tmp.99", "checkpoint-5.h5.bak", "checkpoint-.h5", "checkpoint--3.h5",
                           "checkpoint-6.h5.tmp", "checkpoint-4.h5x", "checkpoint-7.h5", "model.h5", "checkpoint-8"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) touch(names[i]);
    char got[256];
    listed(got, sizeof got);
    assert_string_equal(got, "10 7 2 1");
    assert_int_equal(ckpt_step_of("/a/b/checkpoint-42.h5"), 42);
    assert_int_equal(ckpt_step_of("checkpoint-42.h5.bak"), -1);
    assert_int_equal(ckpt_step_of("checkpoint-+4.h5"), -1);
    char **paths;
    int64_t *steps;
    int n = -1;
    assert_int_equal(ckpt_list("/nonexistent/ptrain-test", &paths, &steps, &n), PT_OK);
    assert_int_equal(n, 0);
    free(paths);
    free(steps);
}

static char *rotate(long limit, const int64_t *keep, int nkeep)
{
    capture_begin();
    pt_status st = resume_rotate(tmpdir, limit, keep, nkeep);
    char *out = capture_end();
    assert_int_equal(st, PT_OK);
    return out;
}

static void test_rotate(void **state)
{
    remove_dir(state);
    setup_dir(state);
    char name[64], got[256], line[600];
    for (int step = 1; step <= 6; step++) {
        snprintf(name, sizeof name, "checkpoint-%d.h5", step * 10);
        touch(name);
    }
    touch(".checkpoint-70.h5.tmp.5");
    free(rotate(0, NULL, 0)); /* no limit: nothing goes */
    listed(got, sizeof got);
    assert_string_equal(got, "60 50 40 30 20 10");
    const int64_t keep[2] = {10, 30}; /* resumed from 10, best at 30 */
    char *out = rotate(2, keep, 2);
    listed(got, sizeof got);
    assert_string_equal(got, "60 50 30 10");
    snprintf(line, sizeof line, "checkpoint %s/checkpoint-40.h5 deleted (save_total_limit 2)\n"
             "checkpoint %s/checkpoint-20.h5 deleted (save_total_limit 2)\n", tmpdir, tmpdir);
    assert_string_equal(out, line);
    free(out);
    touch("checkpoint-70.h5");
    free(rotate(1, keep + 1, 1)); /* now only the best is protected */
    listed(got, sizeof got);
    assert_string_equal(got, "70 30");
    char tmp[512];
    path_of(tmp, sizeof tmp, ".checkpoint-70.h5.tmp.5");
    assert_int_equal(access(tmp, F_OK), 0); /* rotation leaves what it does not list */
}

/* ---- best model and early stopping ---- */

typedef struct {
    double value;
    int64_t counter;
    bool stop, improved;
    double best;
    int64_t best_step;
} eval_case;

/* Feed values (one evaluation every 10 steps) and compare with transformers' outcome. */
static void run_evals(bool greater, double threshold, long patience, const eval_case *c, int n)
{
    ckpt_state s;
    memset(&s, 0, sizeof s);
    s.greater_is_better = greater;
    for (int i = 0; i < n; i++) {
        best_result r = {0};
        assert_int_equal(best_record(&s, 10 * (i + 1), c[i].value, threshold, patience, &r), PT_OK);
        if (s.patience_counter != c[i].counter || r.stop != c[i].stop || r.improved != c[i].improved ||
            s.best_metric != c[i].best || s.best_step != c[i].best_step || !s.has_best)
            fail_msg("evaluation %d (%g): counter %lld stop %d improved %d best %g at %lld; expected %lld %d %d %g at "
                     "%lld", i + 1, c[i].value, (long long)s.patience_counter, r.stop, r.improved, s.best_metric,
                     (long long)s.best_step, (long long)c[i].counter, c[i].stop, c[i].improved, c[i].best,
                     (long long)c[i].best_step);
        assert_true(s.n_evals == i + 1 && s.evals[i].step == 10 * (i + 1) && s.evals[i].value == c[i].value);
    }
    free(s.evals);
}

static void test_best_record(void **state)
{
    (void)state;
    /* lower is better, threshold 0.1, patience 2. The counter compares with the best before this
     * evaluation: 1.95 beats 2.0 but not by more than 0.1, so it counts against patience and still
     * becomes the best; 1.8 then improves on 1.95 by 0.15 > 0.1 and resets the counter; equal is
     * not better; the second miss in a row stops. */
    static const eval_case lower[] = {
        {2.0, 0, false, true, 2.0, 10},   {1.95, 1, false, true, 1.95, 20}, {1.8, 0, false, true, 1.8, 30},
        {1.8, 1, false, false, 1.8, 30},  {1.75, 2, true, true, 1.75, 50},  {1.9, 3, true, false, 1.75, 50},
        {1.0, 0, false, true, 1.0, 70}};
    run_evals(false, 0.1, 2, lower, 7);
    /* higher is better (accuracy-like), threshold 0: any strict improvement resets */
    static const eval_case higher[] = {
        {0.5, 0, false, true, 0.5, 10},  {0.4, 1, false, false, 0.5, 10}, {0.5, 2, false, false, 0.5, 10},
        {0.51, 0, false, true, 0.51, 40}, {0.2, 1, false, false, 0.51, 40}, {0.3, 2, false, false, 0.51, 40},
        {0.1, 3, true, false, 0.51, 40}};
    run_evals(true, 0.0, 3, higher, 7);
    /* no early stopping (patience 0): the counter stays 0, the best is still tracked */
    static const eval_case off[] = {{3.0, 0, false, true, 3.0, 10}, {4.0, 0, false, false, 3.0, 10},
                                    {2.0, 0, false, true, 2.0, 30}};
    run_evals(false, 0.0, 0, off, 3);
}

/* ---- the sampler across a resume ---- */

enum { MAXN = 16 };

/* The epoch's order: one process, batch 1, no padding. */
static void epoch_order(size_t n, uint64_t seed, long epoch, size_t *perm)
{
    pt_sampler s;
    const size_t *idx;
    assert_int_equal(sampler_init(&s, n, 0, 1, 1), PT_OK);
    assert_int_equal(sampler_epoch(&s, seed, epoch), PT_OK);
    for (size_t b = 0; b < n; b++) {
        assert_int_equal(sampler_batch(&s, b, &idx), 1);
        perm[b] = idx[0];
    }
    sampler_free(&s);
}

/* W samplers (ranks 0..W-1) at the epoch's start (skip 0) or after skip entries. */
static void open_ranks(pt_sampler *s, size_t n, int world, long batch, uint64_t seed, long epoch, size_t skip)
{
    for (int r = 0; r < world; r++) {
        assert_int_equal(sampler_init(&s[r], n, r, world, batch), PT_OK);
        assert_int_equal(sampler_epoch_from(&s[r], seed, epoch, skip), PT_OK);
    }
}

/* The distinct examples of the first k batches of every rank must be exactly the first
 * sampler_seen(k) entries of the order. */
static size_t consumed(const pt_sampler *s, int world, size_t k, const size_t *perm, size_t n)
{
    size_t seen = sampler_seen(&s[0], k);
    int hit[MAXN] = {0};
    const size_t *idx;
    for (int r = 0; r < world; r++) {
        assert_int_equal(sampler_seen(&s[r], k), seen);
        for (size_t b = 0; b < k; b++)
            for (size_t i = 0, m = sampler_batch(&s[r], b, &idx); i < m; i++) hit[idx[i]] = 1;
    }
    for (size_t i = 0; i < n; i++) assert_int_equal(hit[perm[i]], i < seen);
    return seen;
}

/* After the resume at seen: every example not yet seen exactly once, plus padding that is the
 * start of the order (perm[0], perm[1], ...) only under several ranks, all ranks with as many
 * batches, only the last of them short (one process) or padded (several). */
static void expect_rest(const pt_sampler *s, int world, long batch, const size_t *perm, size_t n, size_t seen)
{
    int count[MAXN] = {0};
    size_t total = 0, batches = sampler_batches(&s[0]);
    const size_t *idx;
    for (int r = 0; r < world; r++) {
        assert_int_equal(sampler_batches(&s[r]), batches);
        for (size_t b = 0; b < batches; b++) {
            size_t m = sampler_batch(&s[r], b, &idx);
            assert_true(m == (size_t)batch || (world == 1 && b == batches - 1 && m > 0));
            for (size_t i = 0; i < m; i++) count[idx[i]]++, total++;
        }
    }
    size_t pad = total - (n - seen);
    assert_true(total >= n - seen && (world == 1 ? pad == 0 : pad < (size_t)batch * (size_t)world));
    int want[MAXN] = {0};
    for (size_t i = seen; i < n; i++) want[perm[i]]++;
    for (size_t i = 0; i < pad; i++) want[perm[i % n]]++;
    assert_memory_equal(count, want, sizeof count);
}

/* With the same world and batch, the resumed ranks get the uninterrupted run's batches k, k+1, ... */
static void expect_same_batches(const pt_sampler *before, const pt_sampler *after, int world, size_t k)
{
    const size_t *a, *b;
    for (int r = 0; r < world; r++) {
        assert_int_equal(sampler_batches(&after[r]) + k, sampler_batches(&before[r]));
        for (size_t j = 0; j < sampler_batches(&after[r]); j++) {
            size_t m = sampler_batch(&before[r], k + j, &a);
            assert_int_equal(sampler_batch(&after[r], j, &b), m);
            assert_memory_equal(a, b, m * sizeof *a);
        }
    }
}

static void resume_case(size_t n, int w, long b, int w2, long b2, size_t k)
{
    const uint64_t seed = 3407 + n;
    const long epoch = (long)(n % 3);
    size_t perm[MAXN];
    pt_sampler before[3], after[3];
    epoch_order(n, seed, epoch, perm);
    open_ranks(before, n, w, b, seed, epoch, 0);
    size_t seen = consumed(before, w, k, perm, n);
    open_ranks(after, n, w2, b2, seed, epoch, seen);
    expect_rest(after, w2, b2, perm, n, seen);
    if (w2 == w && b2 == b) expect_same_batches(before, after, w, k);
    for (int r = 0; r < w; r++) sampler_free(&before[r]);
    for (int r = 0; r < w2; r++) sampler_free(&after[r]);
}

static void test_sampler_resume(void **state)
{
    (void)state;
    const size_t sizes[] = {1, 5, 7, 12, 13};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        for (int w = 1; w <= 3; w++)
            for (long b = 1; b <= 3; b++) {
                pt_sampler probe;
                assert_int_equal(sampler_init(&probe, sizes[i], 0, w, b), PT_OK);
                size_t per_rank = sampler_full_batches(&probe);
                sampler_free(&probe);
                for (size_t k = 0; k <= per_rank; k++)
                    for (int w2 = 1; w2 <= 3; w2++)
                        for (long b2 = 1; b2 <= 3; b2++) resume_case(sizes[i], w, b, w2, b2, k);
            }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),       cmocka_unit_test(test_chunks_as_hdf5_writes),
        cmocka_unit_test(test_inspect_output),
        cmocka_unit_test(test_layout_mismatch),  cmocka_unit_test(test_choice_names),
        cmocka_unit_test(test_resume_changes),   cmocka_unit_test(test_truncated_and_appended),
        cmocka_unit_test(test_long_path),
        cmocka_unit_test(test_flipped_bits),     cmocka_unit_test(test_zeroed_mark),
        cmocka_unit_test(test_crash_leaves_tmp), cmocka_unit_test(test_list),
        cmocka_unit_test(test_rotate),           cmocka_unit_test(test_best_record),
        cmocka_unit_test(test_sampler_resume),
    };
    return cmocka_run_group_tests_name("checkpoint", tests, setup_dir, remove_dir);
}
