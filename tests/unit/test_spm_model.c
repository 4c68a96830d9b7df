/* test_spm_model.c — SentencePiece tokenizer.model files and the NFC/NFD/NFKC/NFKD and
 * Precompiled normalizers against Hugging Face, with the data of
 * tests/reference/make_spmmodel_goldens.py (tests/data/tokenizer/spm-model/):
 *   - every configuration of configs.json (a model directory with the model as tokenizer.model
 *     and, unless null, a tokenizer_config.json: LlamaTokenizer's conversion and transformers'
 *     generic one, legacy or not, added_tokens_decoder flags, the nmt_nfkc charsmap), loaded the
 *     way ptrain loads a model directory: ids of every corpus line, chunk and extra text equal to
 *     transformers' (ids.txt for "llama", hashes in variants.txt for the rest), with and without
 *     special tokens parsed, decoded texts, vocabulary size, bos/eos and whether bos/eos are added;
 *   - tokenizer.json with NFKC, NFC, NFD, NFKD and Precompiled normalizers, against `tokenizers`;
 *   - Mistral's real V1 tokenizer.model (MODELS/mistral-v1-tokenizer.model), when it is there;
 *   - errors: truncated and malformed protobuf (every prefix of a small model), Unigram models,
 *     bad charsmaps and base64, unsupported tokenizer classes — one clear message, never a crash;
 *     a directory with both files takes tokenizer.json.
 * Every mismatch is counted and the first one shown. Runs with cwd = the build dir;
 * PTRAIN_SRCDIR points at the sources. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/error.h"
#include "ptrain/jsonfile.h"
#include "ptrain/model_io.h"
#include "ptrain/tokenizer.h"
#include "tmpdir.h"
#include "tok_corpus.h"
#include "tokenizer/spm_proto.h"

#define DIR "spm-model/"
#define SP_ "\xe2\x96\x81"

static struct {
    tok_corpus c;
    tok_variants v; /* variants.txt */
    json_t *configs;
    char tmpdir[TMPDIR_SIZE];
} S;

/* ---- the data ---- */

static int setup(void **state)
{
    (void)state;
    char path[4096];
    tok_data_path(path, sizeof path, DIR "configs.json");
    S.configs = jsonfile_load(path, 0, NULL); /* model_max_length 1e30 as transformers writes it */
    if (!S.configs || corpus_load_extra(&S.c, DIR "extra.json") != 0 ||
        variants_load(&S.v, DIR "variants.txt", S.c.n) != 0)
        return -1;
    return tmpdir_create(S.tmpdir, sizeof S.tmpdir, "ptrain-spmmodel");
}

static int teardown(void **state)
{
    (void)state;
    corpus_free(&S.c);
    variants_free(&S.v);
    json_decref(S.configs);
    return tmpdir_remove(S.tmpdir);
}

static int column(const char *name) { return variants_column(&S.v, name); }

/* ---- comparing ---- */

typedef struct {
    size_t mismatches;
    char first[1200];
} tally;

static void note(tally *t, size_t i, const char *what, const int32_t *ids, size_t n)
{
    if (t->mismatches++) return;
    char text[300], a[600];
    tok_fmt_text(text, sizeof text, &S.c.texts[i]);
    tok_fmt_ids(a, sizeof a, ids, n);
    snprintf(t->first, sizeof t->first, "%s on %s \"%s\"\n  ptrain:%s", what, corpus_where(&S.c, i), text, a);
}

static int32_t *encode(const pt_tokenizer *tok, size_t i, bool special, size_t *n)
{
    int32_t *ids;
    if (tokenizer_encode(tok, S.c.texts[i].text, S.c.texts[i].len, special, &ids, n) != PT_OK)
        fail_msg("%s: %s", corpus_where(&S.c, i), err_message());
    return ids;
}

/* Every text against column name (the hash of the ids, or with decode, of the decoded text). */
static void check_column(const pt_tokenizer *tok, const char *name, bool special, bool decode)
{
    int k = column(name);
    if (k < 0) fail_msg("variants.txt has no column %s", name);
    tally t = {0};
    strbuf sb = {0};
    for (size_t i = 0; i < S.c.n; i++) {
        size_t n;
        int32_t *ids = encode(tok, i, special, &n);
        sb.len = 0;
        if (decode && tokenizer_decode(tok, ids, n, &sb) != PT_OK)
            fail_msg("%s: %s", corpus_where(&S.c, i), err_message());
        uint32_t h = decode ? tok_fnv1a(sb.data ? sb.data : "", sb.len, 0x811c9dc5u) : tok_ids_hash(ids, n);
        if ((h & 0xffffffu) != S.v.hash[i * (size_t)S.v.n + (size_t)k]) note(&t, i, decode ? "decoded" : "ids", ids, n);
        free(ids);
    }
    sb_free(&sb);
    print_message("%s: %zu texts, %zu mismatches against Hugging Face\n", name, S.c.n, t.mismatches);
    if (t.mismatches) fail_msg("%s: %zu of %zu texts differ; first: %s", name, t.mismatches, S.c.n, t.first);
}

static int b64(char c)
{
    const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p = strchr(a, c);
    return p && c ? (int)(p - a) : -1;
}

/* ids.txt (configuration "llama"): one line per text, each id two base64url characters. */
static void check_ids_txt(const pt_tokenizer *tok)
{
    char path[4096];
    size_t len;
    tok_data_path(path, sizeof path, DIR "ids.txt");
    char *b = tok_slurp(path, &len), *p = b;
    if (!b) fail_msg("cannot read %s", path);
    tally t = {0};
    for (size_t i = 0; i < S.c.n; i++) {
        char *e = strchr(p, '\n');
        if (!e) fail_msg("%s: %zu lines for %zu texts", path, i, S.c.n);
        size_t n, m = 0;
        int32_t *ids = encode(tok, i, true, &n);
        bool same = n == (size_t)(e - p) / 2;
        for (; p + 1 < e; p += 2, m++) same = same && ids[m] == (b64(p[0]) << 6 | b64(p[1]));
        if (!same) note(&t, i, "ids", ids, n);
        free(ids);
        p = e + 1;
    }
    free(b);
    print_message("ids.txt: %zu texts, %zu mismatches against Hugging Face\n", S.c.n, t.mismatches);
    if (t.mismatches) fail_msg("ids.txt: %zu of %zu texts differ; first: %s", t.mismatches, S.c.n, t.first);
}

/* ---- model directories ---- */

static void copy_file(const char *from, const char *to)
{
    size_t len;
    char *b = tok_slurp(from, &len);
    if (!b) fail_msg("cannot read %s", from);
    FILE *f = fopen(to, "wb");
    if (!f || fwrite(b, 1, len, f) != len) fail_msg("cannot write %s", to);
    fclose(f);
    free(b);
}

/* tmpdir/name/ with model as tokenizer.model and config (unless null) as tokenizer_config.json. */
static void make_dir(const char *name, const char *model, const json_t *config, char *dir, size_t size)
{
    char path[4200];
    snprintf(dir, size, "%s/%s", S.tmpdir, name);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    copy_file(model, path);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    remove(path);
    if (config && !json_is_null(config) && json_dump_file(config, path, JSON_COMPACT) != 0)
        fail_msg("cannot write %s", path);
}

/* The tokenizer of configuration name, loaded as a model directory is; its sizes and ids checked. */
static pt_tokenizer *load_config(const char *name, const char *model)
{
    const json_t *c = json_object_get(S.configs, name);
    char dir[4200];
    if (!c) fail_msg("configs.json has no %s", name);
    make_dir(name, model, json_object_get(c, "config"), dir, sizeof dir);
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_hf_dir(dir, &tok) != PT_OK) fail_msg("%s: %s", name, err_message());
    assert_string_equal(tokenizer_kind(tok), "SentencePiece BPE");
    assert_int_equal(tokenizer_vocab_size(tok), json_integer_value(json_object_get(c, "vocab_size")));
    assert_int_equal(tokenizer_bos(tok), json_integer_value(json_object_get(c, "bos")));
    assert_int_equal(tokenizer_eos(tok), json_integer_value(json_object_get(c, "eos")));
    assert_int_equal(tokenizer_adds_bos(tok), json_is_true(json_object_get(c, "adds_bos")));
    assert_int_equal(tokenizer_adds_eos(tok), json_is_true(json_object_get(c, "adds_eos")));
    return tok;
}

/* Every column of configuration name: ids, ids without special tokens, decoded text. */
static void check_config(const char *name, const char *model)
{
    char col[128];
    pt_tokenizer *tok = load_config(name, model);
    check_column(tok, name, true, false);
    snprintf(col, sizeof col, "%s/nospecial", name);
    if (column(col) >= 0) check_column(tok, col, false, false);
    snprintf(col, sizeof col, "dec-%s", name);
    if (column(col) >= 0) check_column(tok, col, true, true);
    if (strcmp(name, "llama") == 0) check_ids_txt(tok);
    tokenizer_free(tok);
}

static void test_configs(void **state)
{
    (void)state;
    const char *name;
    const json_t *c;
    int done = 0;
    json_object_foreach(S.configs, name, c)
    {
        const char *model = json_string_value(json_object_get(c, "model"));
        if (strncmp(model, "MODELS/", 7) == 0) continue;
        char path[4096], rel[256];
        snprintf(rel, sizeof rel, DIR "%s", model);
        tok_data_path(path, sizeof path, rel);
        check_config(name, path);
        done++;
    }
    assert_true(done >= 10);
}

/* Mistral's real V1 tokenizer.model (32,000 pieces), with its repository's tokenizer_config.json,
 * with legacy true, and with none. */
static void test_mistral_model(void **state)
{
    (void)state;
    char model[4096];
    if (!tok_find_model("mistral-v1-tokenizer.model", model, sizeof model)) {
        print_message("SKIP reason: no mistral-v1-tokenizer.model in $PTRAIN_MODELS, /tmp/models or ../models "
                      "(share/scripts/fetch-tokenizers.sh fetches it from PyPI)\n");
        skip();
    }
    if (column("mistral-v1-model") < 0) fail_msg("variants.txt has no mistral-v1-model columns: rerun the script");
    static const char *const names[] = {"mistral-v1-model", "mistral-v1-model-legacy", "mistral-v1-model-generic"};
    for (int k = 0; k < 3; k++) check_config(names[k], model);
    pt_tokenizer *tok = NULL; /* the file alone, with no tokenizer_config.json beside it */
    char dir[4200], path[4300];
    make_dir("mistral-alone", model, NULL, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tokenizer.model", dir);
    if (tokenizer_from_spm_model(path, &tok) != PT_OK) fail_msg("%s", err_message());
    check_column(tok, "mistral-v1-model-generic", true, false);
    tokenizer_free(tok);
}

/* ---- tokenizer.json normalizers ---- */

static char *base64(const uint8_t *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        *o++ = a[v >> 18];
        *o++ = a[(v >> 12) & 63];
        *o++ = i + 1 < n ? a[(v >> 6) & 63] : '=';
        *o++ = i + 2 < n ? a[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

/* variants.json's json-precompiled normalizer with nfkc.model's charsmap put in. */
static void fill_charsmap(json_t *norm)
{
    char path[4096];
    spm_model m;
    tok_data_path(path, sizeof path, DIR "nfkc.model");
    if (spm_model_read(path, &m) != PT_OK) fail_msg("%s", err_message());
    char *b = base64((const uint8_t *)m.charsmap.p, m.charsmap.len);
    json_object_set_new(json_array_get(json_object_get(norm, "normalizers"), 0), "precompiled_charsmap",
                        json_string(b));
    free(b);
    spm_model_free(&m);
}

static void test_json_normalizers(void **state)
{
    (void)state;
    char base[4096];
    tok_data_path(base, sizeof base, DIR "tokenizer.json");
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_json(base, &tok) != PT_OK) fail_msg("%s", err_message());
    check_column(tok, "json-nfkc", true, false);
    tokenizer_free(tok);
    json_t *variants = tok_load_json(DIR "variants.json");
    static const char *const names[] = {"json-nfc", "json-nfd", "json-nfkd", "json-precompiled"};
    for (int k = 0; k < 4; k++) {
        json_t *norm = json_object_get(variants, names[k]);
        if (k == 3) fill_charsmap(norm);
        json_t *parts = json_pack("{sO}", "normalizer", norm);
        tok = tok_load_patched(base, parts, "{}", S.tmpdir, names[k]);
        check_column(tok, names[k], true, false);
        tokenizer_free(tok);
        json_decref(parts);
    }
    json_decref(variants);
}

/* A directory with both files tokenizes with tokenizer.json (3,000 pieces, not the model's 2,000). */
static void test_json_first(void **state)
{
    (void)state;
    char model[4096], json[4096], dir[4200], path[4300];
    tok_data_path(model, sizeof model, DIR "llama.model");
    tok_data_path(json, sizeof json, "spm/tokenizer.json");
    make_dir("both", model, NULL, dir, sizeof dir);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    copy_file(json, path);
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_hf_dir(dir, &tok) != PT_OK) fail_msg("%s", err_message());
    assert_int_equal(tokenizer_vocab_size(tok), 3000);
    tokenizer_free(tok);
}

static void test_throughput(void **state)
{
    (void)state;
    char model[4096];
    tok_data_path(model, sizeof model, DIR "nfkc.model");
    pt_tokenizer *tok = load_config("nfkc", model);
    corpus_throughput(&S.c, tok, "nfkc.model, Precompiled");
    tokenizer_free(tok);
}

/* ---- errors ---- */

static void pb_varint(gbuf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) c |= 0x80;
        gbuf_put(b, &c, 1);
    } while (v);
}

static void pb_key(gbuf *b, uint32_t field, uint32_t wire) { pb_varint(b, (uint64_t)field << 3 | wire); }

static void pb_bytes(gbuf *b, uint32_t field, const void *p, size_t n)
{
    pb_key(b, field, 2);
    pb_varint(b, n);
    gbuf_put(b, p, n);
}

static void pb_int(gbuf *b, uint32_t field, int64_t v)
{
    pb_key(b, field, 0);
    pb_varint(b, (uint64_t)v);
}

static void pb_piece(gbuf *model, const char *text, float score, int type)
{
    gbuf p = {0};
    uint32_t bits;
    memcpy(&bits, &score, 4);
    uint8_t le[4] = {(uint8_t)bits, (uint8_t)(bits >> 8), (uint8_t)(bits >> 16), (uint8_t)(bits >> 24)};
    pb_bytes(&p, 1, text, strlen(text));
    pb_key(&p, 2, 5);
    gbuf_put(&p, le, 4);
    pb_int(&p, 3, type);
    pb_bytes(model, 1, p.p, p.n);
    free(p.p);
}

/* A small BPE model (model_type: 0 for none written), with extra bytes appended to its pieces. */
static uint8_t *tiny_model(int model_type, const void *extra, size_t extra_len, size_t *size)
{
    static const char *const normal[] = {SP_, "a", "b", "ab", SP_ "a", SP_ "ab"};
    gbuf m = {0}, t = {0}, n = {0};
    pb_piece(&m, "<unk>", 0, 2);
    pb_piece(&m, "<s>", 0, 3);
    pb_piece(&m, "</s>", 0, 3);
    for (int i = 0; i < 6; i++) pb_piece(&m, normal[i], -(float)i, 1);
    if (extra_len) gbuf_put(&m, extra, extra_len);
    if (model_type) pb_int(&t, 3, model_type);
    pb_int(&t, 43, -1); /* pad_id -1: a 10-byte varint */
    pb_bytes(&m, 2, t.p, t.n);
    pb_bytes(&n, 1, "identity", 8);
    pb_int(&n, 4, 0);
    pb_bytes(&m, 3, n.p, n.n);
    free(t.p);
    free(n.p);
    *size = m.n;
    return m.p;
}

/* tokenizer_from_spm_memory on data: its status; a message that must hold want (when given). */
static pt_status load_bytes(const uint8_t *data, size_t size, const char *config, const char *want)
{
    pt_tokenizer *tok = NULL;
    pt_status rc = tokenizer_from_spm_memory("tiny.model", data, size, config, &tok);
    tokenizer_free(tok);
    if (want && (rc == PT_OK || !strstr(err_message(), want)))
        fail_msg("expected an error with \"%s\", got %s: %s", want, rc == PT_OK ? "none" : "", err_message());
    return rc;
}

static void test_tiny_model(void **state)
{
    (void)state;
    size_t size;
    uint8_t *img = tiny_model(2, NULL, 0, &size);
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_spm_memory("tiny.model", img, size, NULL, &tok) != PT_OK) fail_msg("%s", err_message());
    int32_t *ids;
    size_t n;
    assert_int_equal(tokenizer_encode(tok, "ab ab", 5, true, &ids, &n), PT_OK);
    assert_int_equal(n, 2); /* "▁ab" twice: the generic conversion's merges by score */
    assert_int_equal(ids[0], 8);
    assert_int_equal(ids[1], 8);
    free(ids);
    tokenizer_free(tok);
    free(img);
}

/* Every prefix and every one-byte change of the tiny model loads or fails with a message. */
static void test_truncated(void **state)
{
    (void)state;
    size_t size;
    uint8_t *img = tiny_model(2, NULL, 0, &size), *copy = malloc(size);
    for (size_t cut = 0; cut < size; cut++) {
        pt_status rc = load_bytes(img, cut, NULL, NULL);
        if (rc != PT_OK && rc != PT_ERR_USER && rc != PT_ERR_UNSUPPORTED) fail_msg("cut at %zu: %s", cut, err_message());
        if (rc == PT_ERR_USER && strncmp(err_message(), "tiny.model: ", 12) != 0) fail_msg("%s", err_message());
    }
    for (size_t i = 0; i < size; i++) {
        memcpy(copy, img, size);
        copy[i] ^= 0xa5;
        pt_status rc = load_bytes(copy, size, NULL, NULL);
        if (rc != PT_OK && rc != PT_ERR_USER && rc != PT_ERR_UNSUPPORTED) fail_msg("byte %zu: %s", i, err_message());
    }
    load_bytes(img, size - 5, NULL, "the file is damaged or not a SentencePiece model");
    load_bytes(img, 0, NULL, "tiny.model: byte 0: ModelProto.pieces: the file has no pieces");
    load_bytes((const uint8_t *)"{\"model\": 1}", 12, NULL, "tiny.model: byte 0: ModelProto.field 15: a group (wire type 3)");
    load_bytes(img, 9, NULL, "runs past the end of its message");
    free(copy);
    free(img);
}

static void test_malformed(void **state)
{
    (void)state;
    size_t size;
    gbuf bad = {0};
    pb_piece(&bad, "a", 0, 9);
    uint8_t *img = tiny_model(2, bad.p, bad.n, &size);
    load_bytes(img, size, NULL, "pieces[9].type: 9 is not a piece type (1 normal");
    free(img);
    free(bad.p);
    static const uint8_t wrong_wire[] = {0x0a, 0x02, 0x10, 0x01}; /* pieces { score: varint 1 } */
    img = tiny_model(2, wrong_wire, sizeof wrong_wire, &size);
    load_bytes(img, size, NULL, "pieces[9].score: expected a float (wire type 5), found wire type 0");
    free(img);
    static const uint8_t long_varint[] = {0x18, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    img = tiny_model(2, long_varint, sizeof long_varint, &size);
    load_bytes(img, size, NULL, "a varint longer than 10 bytes");
    free(img);
    gbuf dup = {0};
    pb_piece(&dup, "ab", 0, 1);
    img = tiny_model(2, dup.p, dup.n, &size);
    load_bytes(img, size, NULL, "tiny.model: pieces[9]: \"ab\" repeats pieces[6]");
    free(img);
    free(dup.p);
}

static void test_unsupported(void **state)
{
    (void)state;
    size_t size;
    uint8_t *img = tiny_model(1, NULL, 0, &size);
    assert_int_equal(load_bytes(img, size, NULL, "trainer_spec.model_type is Unigram: ptrain reads SentencePiece BPE "
                                                 "models only"), PT_ERR_UNSUPPORTED);
    free(img);
    img = tiny_model(0, NULL, 0, &size); /* no model_type: protobuf's default, Unigram */
    assert_int_equal(load_bytes(img, size, NULL, "Unigram"), PT_ERR_UNSUPPORTED);
    free(img);
    img = tiny_model(2, NULL, 0, &size);
    assert_int_equal(load_bytes(img, size, "{\"tokenizer_class\": \"T5Tokenizer\"}",
                                "tokenizer_config.json: tokenizer_class: \"T5Tokenizer\" with only a tokenizer.model is "
                                "not supported"), PT_ERR_UNSUPPORTED);
    load_bytes(img, size, "{\"legacy\": 3}", "tokenizer_config.json: legacy: expected true or false");
    load_bytes(img, size, "{\"added_tokens_decoder\": {\"x\": {}}}", "added_tokens_decoder: \"x\": expected an id");
    load_bytes(img, size, "[1]", "tokenizer_config.json: not a JSON object");
    free(img);
    gbuf n = {0};
    pb_bytes(&n, 2, "\x08\x00\x00", 3); /* normalizer_spec { precompiled_charsmap: 3 bytes } */
    gbuf m = {0};
    pb_bytes(&m, 3, n.p, n.n);
    img = tiny_model(2, m.p, m.n, &size);
    load_bytes(img, size, NULL, "tiny.model: normalizer_spec.precompiled_charsmap: a precompiled_charsmap of 3 bytes is "
                                "cut off");
    free(img);
    free(n.p);
    free(m.p);
}

/* Errors from files: a missing one, a cut one (named with its byte offset), bad base64. */
static void test_file_errors(void **state)
{
    (void)state;
    pt_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_from_spm_model("/nonexistent/tokenizer.model", &tok), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "/nonexistent/tokenizer.model: cannot open"));
    char model[4096], path[4300];
    size_t len;
    tok_data_path(model, sizeof model, DIR "llama.model");
    char *b = tok_slurp(model, &len);
    snprintf(path, sizeof path, "%s/cut.model", S.tmpdir);
    FILE *f = fopen(path, "wb");
    fwrite(b, 1, len / 2, f);
    fclose(f);
    free(b);
    assert_int_equal(tokenizer_from_spm_model(path, &tok), PT_ERR_USER);
    if (!strstr(err_message(), "cut.model: byte ") || !strstr(err_message(), "download the model's tokenizer.model"))
        fail_msg("%s", err_message());
    char base[4096];
    tok_data_path(base, sizeof base, DIR "tokenizer.json");
    json_t *parts = json_pack("{s{ss}}", "normalizer", "type", "Precompiled");
    json_object_set_new(json_object_get(parts, "normalizer"), "precompiled_charsmap", json_string("AAA*"));
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/badb64", S.tmpdir);
    mkdir(dir, 0700);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    json_t *root = json_load_file(base, 0, NULL);
    json_object_set(root, "normalizer", json_object_get(parts, "normalizer"));
    json_dump_file(root, path, JSON_COMPACT);
    assert_int_equal(tokenizer_from_json(path, &tok), PT_ERR_USER);
    if (!strstr(err_message(), "normalizer.precompiled_charsmap: not base64")) fail_msg("%s", err_message());
    json_decref(root);
    json_decref(parts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_configs),      cmocka_unit_test(test_mistral_model),
        cmocka_unit_test(test_json_normalizers), cmocka_unit_test(test_json_first),
        cmocka_unit_test(test_tiny_model),   cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_malformed),    cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_file_errors),  cmocka_unit_test(test_throughput),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
