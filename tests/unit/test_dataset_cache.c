/* test_dataset_cache.c — the dataset cache (include/ptrain/dataset_cache.h) and tokenizing split
 * into parts (dataset.h, dataset_work):
 * - a cache written and read back (mapped, and from bytes in memory) gives the same examples, eval
 *   set, packing and per-entry counts, bad rows and files as the data it was made from;
 * - missing, stale (other dataset bytes, another name) and damaged (a flipped byte, cut short, not a
 *   cache, a link) files are told apart and never opened; files whose bytes were changed with a
 *   valid CRC (random mutations, sections out of bounds) fail with an error, never a crash;
 * - the key: every data key changes the options hash and a non-data key does not; the files' bytes
 *   change the files hash only; the tokenizer fingerprint tells tokenizers and chat templates apart;
 * - three parts tokenizing in threads (with a gather built on a barrier, as ranks would over MPI)
 *   give part 0 exactly the dataset one part makes, and a failure on one part stops all three.
 * Fixtures: tests/data/datasets/, tests/data/tokenizer/. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data/data_internal.h"
#include "ptrain/config.h"
#include "ptrain/config_options.h"
#include "ptrain/dataset.h"
#include "ptrain/dataset_cache.h"
#include "ptrain/tokenizer.h"
#include "tmpdir.h"

static struct {
    pt_tokenizer *smol, *llama, *qwen;
    char dir[TMPDIR_SIZE];
} T;

static const char *srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s && *s ? s : "..";
}

static pt_status load_tok(const char *name, pt_tokenizer **tok)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", srcdir(), name);
    return tokenizer_from_json(path, tok);
}

static int setup(void **state)
{
    (void)state;
    if (tmpdir_create(T.dir, sizeof T.dir, "ptrain-dscache")) return -1;
    return load_tok("smollm2", &T.smol) || load_tok("llama3-mini", &T.llama) || load_tok("qwen2-mini", &T.qwen);
}

static int teardown(void **state)
{
    (void)state;
    tokenizer_free(T.smol), tokenizer_free(T.llama), tokenizer_free(T.qwen);
    return tmpdir_remove(T.dir);
}

/* A file under the test's directory (two buffers in turn). */
static const char *F(const char *name)
{
    static char buf[2][256];
    static int k;
    k ^= 1;
    snprintf(buf[k], sizeof buf[k], "%s/%s", T.dir, name);
    return buf[k];
}

/* ---- configs ---- */

static void config_of(pt_config *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void config_of(pt_config *cfg, const char *fmt, ...)
{
    char yaml[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(yaml, sizeof yaml, fmt, ap);
    va_end(ap);
    if (config_parse("test.yaml", yaml, strlen(yaml), cfg, NULL) != PT_OK) fail_msg("config: %s", err_message());
}

/* Two entries (one with bad rows), an eval split, packing as asked. */
static void two_entries(pt_config *cfg, bool packing)
{
    config_of(cfg,
              "model_name: m\noutput_dir: o\nmax_seq_length: 48\nval_split_ratio: 0.25\npacking: %s\n"
              "dataset:\n  - name: \"%s/tests/data/datasets/messages.jsonl\"\n"
              "  - name: \"%s/tests/data/datasets/bad.jsonl\"\n",
              packing ? "true" : "false", srcdir(), srcdir());
}

static void prepare(const pt_config *cfg, const pt_tokenizer *tok, pt_dataset *train, pt_dataset *eval)
{
    dataset_options o = dataset_options_from_config(cfg);
    if (dataset_prepare(&o, tok, NULL, train, eval) != PT_OK) fail_msg("prepare: %s", err_message());
}

/* ---- comparisons ---- */

static void expect_same_examples(const pt_dataset *a, const pt_dataset *b)
{
    assert_int_equal(a->n, b->n);
    assert_int_equal(a->max_len, b->max_len);
    assert_int_equal(a->packed, b->packed);
    for (size_t i = 0; i < a->n; i++) {
        const pt_example *x = &a->ex[i], *y = &b->ex[i];
        assert_int_equal(x->len, y->len);
        assert_memory_equal(x->ids, y->ids, sizeof(int32_t) * (size_t)x->len);
        assert_memory_equal(x->labels, y->labels, sizeof(int32_t) * (size_t)x->len);
        assert_int_equal(x->segments != NULL, y->segments != NULL);
        if (x->segments) assert_memory_equal(x->segments, y->segments, sizeof(int32_t) * (size_t)x->len);
    }
}

static void expect_same_stats(const pt_dataset_stats *a, const pt_dataset_stats *b)
{
    assert_string_equal(a->name, b->name);
    assert_ptr_equal(a->format, b->format); /* the static names, found again */
    assert_ptr_equal(a->template, b->template);
    assert_int_equal(a->assistant_only, b->assistant_only);
    long x[] = {a->read, a->bad, a->filtered, a->limited, a->empty, a->no_loss, a->kept, a->truncated};
    long y[] = {b->read, b->bad, b->filtered, b->limited, b->empty, b->no_loss, b->kept, b->truncated};
    assert_memory_equal(x, y, sizeof x);
    assert_int_equal(a->n_bad_rows, b->n_bad_rows);
    for (int i = 0; i < a->n_bad_rows; i++) assert_string_equal(a->bad_rows[i], b->bad_rows[i]);
    assert_int_equal(a->n_files, b->n_files);
    for (int i = 0; i < a->n_files; i++) {
        assert_string_equal(a->files[i].path, b->files[i].path);
        assert_int_equal(a->files[i].bytes, b->files[i].bytes);
        assert_int_equal(a->files[i].crc, b->files[i].crc);
        assert_int_equal(a->files[i].rows, b->files[i].rows);
    }
}

static void expect_same(const pt_dataset *train, const pt_dataset *eval, const pt_dataset *train2,
                        const pt_dataset *eval2)
{
    expect_same_examples(train, train2);
    expect_same_examples(eval, eval2);
    assert_int_equal(train->n_stats, train2->n_stats);
    for (int i = 0; i < train->n_stats; i++) expect_same_stats(&train->stats[i], &train2->stats[i]);
}

static void *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *p = malloc(*len + 1);
    assert_int_equal(fread(p, 1, *len, f), *len);
    fclose(f);
    return p;
}

static void write_all(const char *path, const void *p, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(p, 1, len, f), len);
    fclose(f);
}

static const dataset_cache_key KEY = {0x1234, 0x5678};

/* ---- round trip ---- */

static void roundtrip(bool packing)
{
    pt_config cfg;
    two_entries(&cfg, packing);
    pt_dataset train, eval, train2, eval2;
    prepare(&cfg, T.smol, &train, &eval);
    assert_true(train.stats[1].n_bad_rows > 0 && eval.n > 0);
    assert_int_equal(dataset_cache_write(F("c.ptdata"), &KEY, &train, &eval), PT_OK);
    assert_int_equal(dataset_cache_open(F("c.ptdata"), &KEY, true, &train2, &eval2), PT_OK);
    assert_true(train2.backing_mapped);
    expect_same(&train, &eval, &train2, &eval2);
    dataset_free(&train2), dataset_free(&eval2);
    size_t len;
    void *bytes = read_all(F("c.ptdata"), &len);
    assert_int_equal(dataset_cache_parse(bytes, len, &KEY, true, &train2, &eval2), PT_OK);
    expect_same(&train, &eval, &train2, &eval2);
    dataset_free(&train2), dataset_free(&eval2);
    dataset_free(&train), dataset_free(&eval);
    config_free(&cfg);
}

static void test_roundtrip(void **state)
{
    (void)state;
    roundtrip(false);
    roundtrip(true);
}

/* ---- what is found, stale or damaged ---- */

static void expect_state(const char *path, const dataset_cache_key *key, bool verify, dataset_cache_state want,
                         const char *why_part)
{
    strbuf why = {0};
    assert_int_equal(dataset_cache_check(path, key, verify, &why), want);
    if (why_part && !strstr(sb_text(&why), why_part)) fail_msg("reason '%s' lacks '%s'", sb_text(&why), why_part);
    sb_free(&why);
    pt_dataset a, b;
    pt_status st = dataset_cache_open(path, key, verify, &a, &b);
    assert_int_equal(st, want == CACHE_FOUND ? PT_OK : PT_ERR_USER);
    if (st == PT_OK) dataset_free(&a), dataset_free(&b);
}

/* A good cache at F(name), its bytes in *bytes (len). */
static void good_cache(const char *name, void **bytes, size_t *len)
{
    pt_config cfg;
    two_entries(&cfg, false);
    pt_dataset train, eval;
    prepare(&cfg, T.smol, &train, &eval);
    assert_int_equal(dataset_cache_write(F(name), &KEY, &train, &eval), PT_OK);
    dataset_free(&train), dataset_free(&eval);
    config_free(&cfg);
    *bytes = read_all(F(name), len);
}

static void test_states(void **state)
{
    (void)state;
    void *good;
    size_t len;
    good_cache("s.ptdata", &good, &len);
    expect_state(F("none.ptdata"), &KEY, true, CACHE_MISSING, NULL);
    expect_state(F("s.ptdata"), &KEY, true, CACHE_FOUND, NULL);
    dataset_cache_key other = {KEY.name, KEY.files + 1};
    expect_state(F("s.ptdata"), &other, true, CACHE_STALE, "dataset files changed");
    other = (dataset_cache_key){KEY.name + 1, KEY.files};
    expect_state(F("s.ptdata"), &other, true, CACHE_STALE, "another version");
    unsigned char *bad = malloc(len);
    memcpy(bad, good, len);
    bad[len / 2] ^= 0x10;
    write_all(F("flip.ptdata"), bad, len);
    expect_state(F("flip.ptdata"), &KEY, true, CACHE_DAMAGED, "CRC-32");
    write_all(F("cut.ptdata"), good, len - 8);
    expect_state(F("cut.ptdata"), &KEY, false, CACHE_DAMAGED, "cut short");
    write_all(F("tiny.ptdata"), good, 20);
    expect_state(F("tiny.ptdata"), &KEY, false, CACHE_DAMAGED, "shorter than its header");
    memcpy(bad, good, len);
    bad[0] = 'X';
    write_all(F("magic.ptdata"), bad, len);
    expect_state(F("magic.ptdata"), &KEY, false, CACHE_DAMAGED, "does not start as");
    assert_int_equal(symlink(F("s.ptdata"), F("link.ptdata")), 0);
    expect_state(F("link.ptdata"), &KEY, true, CACHE_DAMAGED, NULL); /* a planted link is not followed */
    free(bad);
    free(good);
}

/* The CRC the file's header must carry for its bytes (cache_write.c's rule). */
static void fix_crc(unsigned char *p, size_t len)
{
    cache_header h;
    memcpy(&h, p, sizeof h);
    h.crc = 0;
    uLong crc = crc32(crc32(0L, Z_NULL, 0), p + sizeof h, (uInt)(len - sizeof h));
    h.crc = (uint32_t)crc32(crc, (const Bytef *)&h, sizeof h);
    memcpy(p, &h, sizeof h);
}

/* Bytes changed behind a valid CRC: opened or refused, never a crash or a read out of bounds (the
 * sanitizer build checks); a section pointing past the end is refused. */
static void test_forged(void **state)
{
    (void)state;
    void *good;
    size_t len;
    good_cache("g.ptdata", &good, &len);
    unsigned char *p = malloc(len);
    srand(7);
    int refused = 0;
    for (int round = 0; round < 300; round++) {
        memcpy(p, good, len);
        for (int k = 0; k < 1 + round % 4; k++) p[sizeof(cache_header) + (size_t)rand() % (len - sizeof(cache_header))] ^= (unsigned char)(1 + rand() % 255);
        fix_crc(p, len);
        void *copy = malloc(len);
        memcpy(copy, p, len);
        pt_dataset a, b;
        if (dataset_cache_parse(copy, len, &KEY, true, &a, &b) == PT_OK) dataset_free(&a), dataset_free(&b);
        else refused++;
    }
    assert_true(refused > 0);
    cache_header h;
    memcpy(p, good, len);
    memcpy(&h, p, sizeof h);
    h.section[CACHE_TRAIN][1] = len; /* past the end */
    memcpy(p, &h, sizeof h);
    fix_crc(p, len);
    write_all(F("oob.ptdata"), p, len);
    expect_state(F("oob.ptdata"), &KEY, true, CACHE_DAMAGED, "outside the file");
    free(p);
    free(good);
}

/* ---- the key ---- */

static uint64_t options_hash_of(const char *extra)
{
    pt_config cfg;
    config_of(&cfg,
              "model_name: m\noutput_dir: o\n%s\ndataset:\n  - name: d.jsonl\n"
              "    split: train\n%s",
              strncmp(extra, "    ", 4) ? extra : "", strncmp(extra, "    ", 4) ? "" : extra);
    dataset_options o = dataset_options_from_config(&cfg);
    uint64_t h = dataset_options_hash(&o);
    config_free(&cfg);
    return h;
}

static void test_options_hash(void **state)
{
    (void)state;
    uint64_t base = options_hash_of("");
    assert_int_equal(options_hash_of("learning_rate: 2e-4"), base); /* not a data key */
    const char *changes[] = {
        "max_seq_length: 100",          "chat_template: chatml",          "assistant_only_loss: false",
        "dataset_text_field: body",     "packing: true",                  "val_split_ratio: 0.1",
        "seed: 4",                      "    data_files: [a.jsonl]\n",    "    format: jsonl\n",
        "    rename: {a: b}\n",         "    filter_data: true\n    filter_column_value: x\n    filter_value: y\n",
        "    num_samples: 10\n",        "    shuffle: true\n",             "    seed: 9\n",
    };
    for (size_t i = 0; i < sizeof changes / sizeof *changes; i++)
        if (options_hash_of(changes[i]) == base) fail_msg("the options hash ignores: %s", changes[i]);
    /* not a data key: the same data */
    pt_config a, b;
    config_of(&a, "model_name: m\noutput_dir: o\nlearning_rate: 1e-4\ndataset:\n  - name: d.jsonl\n");
    config_of(&b, "model_name: m\noutput_dir: o2\nlearning_rate: 3e-4\nlora_r: 64\ndataset:\n  - name: d.jsonl\n");
    dataset_options oa = dataset_options_from_config(&a), ob = dataset_options_from_config(&b);
    assert_int_equal(dataset_options_hash(&oa), dataset_options_hash(&ob));
    config_free(&a), config_free(&b);
}

static void test_fingerprint(void **state)
{
    (void)state;
    pt_tokenizer *again;
    assert_int_equal(load_tok("smollm2", &again), PT_OK);
    assert_int_equal(tokenizer_fingerprint(again), tokenizer_fingerprint(T.smol));
    uint64_t f[3] = {tokenizer_fingerprint(T.smol), tokenizer_fingerprint(T.llama), tokenizer_fingerprint(T.qwen)};
    assert_int_not_equal(f[0], f[1]);
    assert_int_not_equal(f[0], f[2]);
    assert_int_not_equal(f[1], f[2]);
    assert_int_equal(tokenizer_set_chat_template(again, "{{ messages }}"), PT_OK);
    assert_int_not_equal(tokenizer_fingerprint(again), f[0]);
    tokenizer_free(again);
}

static void copy_file(const char *from, const char *to)
{
    size_t len;
    void *p = read_all(from, &len);
    write_all(to, p, len);
    free(p);
}

static void test_key_of(void **state)
{
    (void)state;
    char src[1024];
    snprintf(src, sizeof src, "%s/tests/data/datasets/messages.jsonl", srcdir());
    copy_file(src, F("k.jsonl"));
    pt_config cfg;
    config_of(&cfg, "model_name: m\noutput_dir: o\ndataset:\n  - name: \"%s\"\n", F("k.jsonl"));
    dataset_options o = dataset_options_from_config(&cfg);
    dataset_cache_key a, b, c;
    assert_int_equal(dataset_cache_key_of(&o, T.smol, &a), PT_OK);
    FILE *f = fopen(F("k.jsonl"), "r+b"); /* one byte changed, the size kept */
    assert_non_null(f);
    int ch = fgetc(f);
    fseek(f, 0, SEEK_SET);
    fputc(ch == '{' ? ' ' : '{', f);
    fclose(f);
    assert_int_equal(dataset_cache_key_of(&o, T.smol, &b), PT_OK);
    assert_int_equal(a.name, b.name);
    assert_int_not_equal(a.files, b.files);
    assert_int_equal(dataset_cache_key_of(&o, T.llama, &c), PT_OK);
    assert_int_not_equal(a.name, c.name);
    config_free(&cfg);
    config_of(&cfg, "model_name: m\noutput_dir: o\ndataset:\n  - name: \"%s\"\n", F("nowhere.jsonl"));
    o = dataset_options_from_config(&cfg);
    assert_int_equal(dataset_cache_key_of(&o, T.smol, &a), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "nowhere.jsonl"));
    config_free(&cfg);
}

/* ---- parts in threads ---- */

#define PARTS 3
typedef struct {
    pthread_barrier_t b;
    pt_status st[PARTS];
    strbuf sent[PARTS];
} exchange;

typedef struct {
    exchange *x;
    int part;
    dataset_options o;
    pt_dataset train, eval;
    pt_status rc;
} worker;

/* As train_data.c's over MPI: statuses agreed, then every part's bytes to part 0. */
static pt_status gather_threads(void *arg, pt_status local, const void *mine, size_t n, void **all, size_t *all_n)
{
    worker *w = arg;
    exchange *x = w->x;
    x->st[w->part] = local;
    x->sent[w->part] = (strbuf){0};
    sb_append(&x->sent[w->part], mine, n);
    pthread_barrier_wait(&x->b);
    pt_status worst = PT_OK;
    for (int p = 0; p < PARTS; p++)
        if (x->st[p] != PT_OK) worst = x->st[p];
    *all = NULL, *all_n = 0;
    if (worst == PT_OK && w->part == 0) {
        strbuf cat = {0};
        for (int p = 0; p < PARTS; p++) sb_append(&cat, x->sent[p].data, x->sent[p].len);
        *all = cat.data, *all_n = cat.len;
    }
    pthread_barrier_wait(&x->b);
    sb_free(&x->sent[w->part]);
    pthread_barrier_wait(&x->b);
    if (worst == PT_OK) return PT_OK;
    return local != PT_OK ? local : ERR(PT_ERR_USER, "another part failed");
}

static void *work(void *arg)
{
    worker *w = arg;
    w->rc = dataset_prepare(&w->o, T.smol, NULL, &w->train, &w->eval);
    return NULL;
}

static void run_parts(worker *w, const pt_config *cfg, const pt_config *cfg_last)
{
    static exchange x;
    pthread_barrier_init(&x.b, NULL, PARTS);
    pthread_t th[PARTS];
    for (int p = 0; p < PARTS; p++) {
        w[p] = (worker){.x = &x, .part = p, .o = dataset_options_from_config(p == PARTS - 1 ? cfg_last : cfg)};
        w[p].o.work = (dataset_work){p, PARTS, gather_threads, &w[p]};
        pthread_create(&th[p], NULL, work, &w[p]);
    }
    for (int p = 0; p < PARTS; p++) pthread_join(th[p], NULL);
    pthread_barrier_destroy(&x.b);
}

static void test_parts(void **state)
{
    (void)state;
    for (int packing = 0; packing < 2; packing++) {
        pt_config cfg;
        two_entries(&cfg, packing);
        pt_dataset train, eval;
        prepare(&cfg, T.smol, &train, &eval);
        worker w[PARTS];
        run_parts(w, &cfg, &cfg);
        for (int p = 0; p < PARTS; p++) assert_int_equal(w[p].rc, PT_OK);
        expect_same(&train, &eval, &w[0].train, &w[0].eval);
        for (int p = 1; p < PARTS; p++) assert_int_equal(w[p].train.n + w[p].eval.n, 0);
        for (int p = 0; p < PARTS; p++) dataset_free(&w[p].train), dataset_free(&w[p].eval);
        dataset_free(&train), dataset_free(&eval);
        config_free(&cfg);
    }
}

/* A Parquet file of five row groups (tests/data/datasets/pq/dict-snappy-v2.parquet) is tokenized
 * a row group at a time, each group's rows shared among the parts: with shuffle, filter and
 * num_samples the parts give what one process gives. */
static void test_parts_row_groups(void **state)
{
    (void)state;
    static const char *const keys[] = {"    shuffle: true\n    seed: 7\n",
                                       "    filter_data: true\n    filter_column_value: flag\n    filter_value: \"false\"\n"
                                       "    num_samples: 4\n    shuffle: true\n"};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        pt_config cfg;
        config_of(&cfg,
                  "model_name: m\noutput_dir: o\nmax_seq_length: 48\nval_split_ratio: 0.25\n"
                  "dataset:\n  - name: \"%s/tests/data/datasets/pq/dict-snappy-v2.parquet\"\n%s"
                  "  - name: \"%s/tests/data/datasets/messages.jsonl\"\n",
                  srcdir(), keys[k], srcdir());
        pt_dataset train, eval;
        prepare(&cfg, T.smol, &train, &eval);
        assert_true(train.n + eval.n >= 3);
        worker w[PARTS];
        run_parts(w, &cfg, &cfg);
        for (int p = 0; p < PARTS; p++) assert_int_equal(w[p].rc, PT_OK);
        expect_same(&train, &eval, &w[0].train, &w[0].eval);
        for (int p = 0; p < PARTS; p++) dataset_free(&w[p].train), dataset_free(&w[p].eval);
        dataset_free(&train), dataset_free(&eval);
        config_free(&cfg);
    }
}

/* The last part cannot read the second entry: every part fails, none waits forever. */
static void test_parts_failure(void **state)
{
    (void)state;
    pt_config cfg, broken;
    two_entries(&cfg, false);
    config_of(&broken,
              "model_name: m\noutput_dir: o\nmax_seq_length: 48\nval_split_ratio: 0.25\n"
              "dataset:\n  - name: \"%s/tests/data/datasets/messages.jsonl\"\n  - name: \"%s\"\n",
              srcdir(), F("missing.jsonl"));
    worker w[PARTS];
    run_parts(w, &cfg, &broken);
    for (int p = 0; p < PARTS; p++) assert_int_not_equal(w[p].rc, PT_OK);
    config_free(&cfg), config_free(&broken);
    /* part 0 alone finds the first entry without a usable row, after the exchange: the parts stop
     * together at the next entry's */
    config_of(&cfg,
              "model_name: m\noutput_dir: o\ndataset:\n  - name: \"%s/tests/data/datasets/all-empty.jsonl\"\n"
              "  - name: \"%s/tests/data/datasets/messages.jsonl\"\n",
              srcdir(), srcdir());
    run_parts(w, &cfg, &cfg);
    for (int p = 0; p < PARTS; p++) assert_int_not_equal(w[p].rc, PT_OK);
    config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),     cmocka_unit_test(test_states),      cmocka_unit_test(test_forged),
        cmocka_unit_test(test_options_hash),  cmocka_unit_test(test_fingerprint), cmocka_unit_test(test_key_of),
        cmocka_unit_test(test_parts),         cmocka_unit_test(test_parts_failure),
        cmocka_unit_test(test_parts_row_groups),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
