/* test_spm.c — SentencePiece-style BPE (Llama 2, Mistral, Gemma) and the gemma and mistral chat
 * templates against Hugging Face, with the data of tests/reference/make_spm_goldens.py:
 *   - ids identical to `tokenizers` on every corpus line, multi-line chunk and extra text, from
 *     tokenizer.json and from the GGUF vocabulary (transformers' GGUF loader gives the same ids);
 *   - the tokenizer.json variants (Llama 2's Prepend normalizer, Metaspace always/split and never,
 *     Gemma's normalizer, no byte fallback), the Gemma GGUF and a GGUF without the space prefix,
 *     and decoding, compared by hash;
 *   - apply_chat_template renderings, refusals and detection of the two templates, and
 *     assistant-only labels with them; bos on plain-text rows (once) and on chat rows (from the
 *     template only);
 *   - the loaders' errors on malformed SentencePiece vocabularies (GGUF and tokenizer.json).
 * Every mismatch is counted and the first one shown. Runs with cwd = the build dir;
 * PTRAIN_SRCDIR points at the sources. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/tokenizer.h"
#include "tmpdir.h"
#include "tok_corpus.h"

#define SP "\xe2\x96\x81"

static struct {
    tok_corpus c; /* corpus lines, chunks, extra texts */
    tok_variants v; /* variants.txt */
    char tmpdir[TMPDIR_SIZE];
} S;

/* ---- the texts: corpus lines, chunks of 8 lines (as make_tokenizer_goldens.py), extra.json ---- */

static int setup(void **state)
{
    (void)state;
    if (corpus_load_extra(&S.c, "spm/extra.json") != 0 || variants_load(&S.v, "spm/variants.txt", S.c.n) != 0)
        return -1;
    return tmpdir_create(S.tmpdir, sizeof S.tmpdir, "ptrain-spm");
}

static int teardown(void **state)
{
    (void)state;
    corpus_free(&S.c);
    variants_free(&S.v);
    return tmpdir_remove(S.tmpdir);
}

/* ---- goldens ---- */

typedef struct {
    int32_t *ids;
    size_t n;
} idlist;

static int b64(char c)
{
    const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", *p = strchr(a, c);
    return p && c ? (int)(p - a) : -1;
}

/* ids.txt: one line per text, each id two base64url characters. */
static idlist *read_ids(void)
{
    char path[4096];
    size_t len, lines = 0;
    tok_data_path(path, sizeof path, "spm/ids.txt");
    char *b = tok_slurp(path, &len);
    if (!b) fail_msg("cannot read %s", path);
    for (size_t i = 0; i < len; i++) lines += b[i] == '\n';
    assert_int_equal(lines, S.c.n);
    idlist *g = calloc(lines, sizeof *g);
    char *p = b;
    for (size_t i = 0; i < lines; i++) {
        char *e = strchr(p, '\n');
        g[i].ids = malloc(((size_t)(e - p) / 2 + 1) * sizeof(int32_t));
        for (; p + 1 < e; p += 2) g[i].ids[g[i].n++] = b64(p[0]) << 6 | b64(p[1]);
        p = e + 1;
    }
    free(b);
    return g;
}

static void free_ids(idlist *g)
{
    for (size_t i = 0; i < S.c.n; i++) free(g[i].ids);
    free(g);
}

static int column(const char *name)
{
    int k = variants_column(&S.v, name);
    if (k < 0) fail_msg("variants.txt has no column %s", name);
    return k;
}

/* ---- comparing ---- */

typedef struct {
    size_t mismatches;
    char first[1400];
} tally;

static void note(tally *t, size_t i, const char *what, const int32_t *ours, size_t n, const int32_t *theirs, size_t m)
{
    if (t->mismatches++) return;
    char text[300], a[500], b[500];
    tok_fmt_text(text, sizeof text, &S.c.texts[i]);
    tok_fmt_ids(a, sizeof a, ours, n);
    if (theirs) tok_fmt_ids(b, sizeof b, theirs, m);
    snprintf(t->first, sizeof t->first, "%s on %s \"%s\"\n  ptrain:%s\n  HF:    %s", what, corpus_where(&S.c, i),
             text, a, theirs ? b : " (see variants.txt)");
}

static int32_t *encode(const pt_tokenizer *tok, size_t i, bool special, size_t *n)
{
    int32_t *ids;
    if (tokenizer_encode(tok, S.c.texts[i].text, S.c.texts[i].len, special, &ids, n) != PT_OK)
        fail_msg("%s: %s", corpus_where(&S.c, i), err_message());
    return ids;
}

/* Every text against ids.txt; fails with the count and the first mismatch. */
static void check_ids(const pt_tokenizer *tok, const char *form)
{
    idlist *g = read_ids();
    tally t = {0};
    for (size_t i = 0; i < S.c.n; i++) {
        size_t n;
        int32_t *ids = encode(tok, i, true, &n);
        if (n != g[i].n || memcmp(ids, g[i].ids, n * sizeof *ids) != 0) note(&t, i, "ids", ids, n, g[i].ids, g[i].n);
        free(ids);
    }
    free_ids(g);
    print_message("%s: %zu texts, %zu mismatches against HF tokenizers\n", form, S.c.n, t.mismatches);
    if (t.mismatches) fail_msg("%s: %zu of %zu texts differ; first: %s", form, t.mismatches, S.c.n, t.first);
}

/* Every text against a hash column: of the ids, or with decode, of decode(ids). */
static void check_column(const pt_tokenizer *tok, const char *name, bool special, bool decode)
{
    int k = column(name);
    tally t = {0};
    strbuf sb = {0};
    for (size_t i = 0; i < S.c.n; i++) {
        size_t n;
        int32_t *ids = encode(tok, i, special, &n);
        sb.len = 0;
        if (decode && tokenizer_decode(tok, ids, n, &sb) != PT_OK)
            fail_msg("%s: %s", corpus_where(&S.c, i), err_message());
        uint32_t h = decode ? tok_fnv1a(sb.data ? sb.data : "", sb.len, 0x811c9dc5u) : tok_ids_hash(ids, n);
        if ((h & 0xffffffu) != S.v.hash[i * (size_t)S.v.n + (size_t)k]) /* the low 24 bits are stored */
            note(&t, i, decode ? "decoded text" : "ids", ids, n, NULL, 0);
        free(ids);
    }
    sb_free(&sb);
    print_message("%s: %zu texts, %zu mismatches against HF tokenizers\n", name, S.c.n, t.mismatches);
    if (t.mismatches) fail_msg("%s: %zu of %zu texts differ; first: %s", name, t.mismatches, S.c.n, t.first);
}

/* ---- loading the forms ---- */

static pt_tokenizer *load_json_at(const char *path)
{
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_json(path, &tok) != PT_OK) fail_msg("%s", err_message());
    return tok;
}

static pt_tokenizer *load_main(void)
{
    char path[4096];
    tok_data_path(path, sizeof path, "spm/tokenizer.json");
    return load_json_at(path);
}

static pt_tokenizer *load_gguf_image(const char *name, const void *img, size_t size)
{
    gguf_file g;
    pt_tokenizer *tok = NULL;
    if (gguf_open_memory(name, img, size, &g) != PT_OK) fail_msg("%s", err_message());
    if (tokenizer_from_gguf(&g, &tok) != PT_OK) fail_msg("%s", err_message());
    gguf_close(&g);
    return tok;
}

static pt_tokenizer *load_gguf(const char *rel)
{
    char path[4096];
    gguf_file g;
    pt_tokenizer *tok = NULL;
    tok_data_path(path, sizeof path, rel);
    if (gguf_open(path, &g) != PT_OK) fail_msg("%s", err_message());
    if (tokenizer_from_gguf(&g, &tok) != PT_OK) fail_msg("%s", err_message());
    gguf_close(&g);
    return tok;
}

/* The tokenizer.json at base with what variants.json says of `name` put in, written to the temp
 * dir with the bos and eos of a tokenizer_config.json. */
static pt_tokenizer *load_variant_of(const char *base, const char *name)
{
    char path[4096];
    tok_data_path(path, sizeof path, "spm/variants.json");
    json_t *all = json_load_file(path, 0, NULL);
    const char *config = "{\"bos_token\": \"<s>\", \"eos_token\": \"</s>\"}";
    pt_tokenizer *tok = tok_load_patched(base, json_object_get(all, name), config, S.tmpdir, name);
    json_decref(all);
    return tok;
}

static pt_tokenizer *load_variant(const char *name)
{
    char base[4096];
    tok_data_path(base, sizeof base, "spm/tokenizer.json");
    return load_variant_of(base, name);
}

/* ---- parity ---- */

/* The main vocabulary in one form (freed): ids.txt, the ids without parse_special, decoding. */
static void check_main_form(pt_tokenizer *tok, const char *form)
{
    assert_string_equal(tokenizer_kind(tok), "SentencePiece BPE");
    check_ids(tok, form);
    check_column(tok, "nospecial", false, false);
    check_column(tok, "dec-main", true, true);
    tokenizer_free(tok);
}

static void test_json_parity(void **state)
{
    (void)state;
    check_main_form(load_main(), "spm/tokenizer.json");
}

/* vocab.gguf: the same vocabulary, with the dummy prefix as the model's SentencePiece and llama.cpp
 * put it (before a leading space too, and after every special token), where tokenizer.json's
 * Metaspace "first" does not. */
static void test_gguf_parity(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_gguf("spm/vocab.gguf");
    assert_string_equal(tokenizer_kind(tok), "SentencePiece BPE");
    check_column(tok, "gguf", true, false);
    check_column(tok, "gguf-nospecial", false, false);
    check_column(tok, "dec-gguf", true, true);
    tokenizer_free(tok);
}

static void test_variants(void **state)
{
    (void)state;
    static const char *const ids_of[] = {"legacy", "always-split", "never", "gemma", "nobytes"};
    for (size_t k = 0; k < sizeof ids_of / sizeof ids_of[0]; k++) {
        pt_tokenizer *tok = load_variant(ids_of[k]);
        check_column(tok, ids_of[k], true, false);
        if (k == 0 || k == 2) check_column(tok, k == 0 ? "dec-legacy" : "dec-never", true, true);
        tokenizer_free(tok);
    }
    pt_tokenizer *tok = load_variant("metaspace-decoder");
    check_column(tok, "dec-metaspace", true, true);
    tokenizer_free(tok);
}

static void test_gguf_gemma(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_gguf("spm/gemma.gguf");
    check_column(tok, "gguf-gemma", true, false);
    assert_int_equal(tokenizer_bos(tok), 1);
    assert_int_equal(tokenizer_pad(tok), 5);
    assert_true(tokenizer_is_special(tok, 6)); /* <mask>, a control token */
    tokenizer_free(tok);
}

/* Mistral's real V1 vocabulary (32,000 pieces), as tokenizer.json and as GGUF. */
static void test_mistral_real(void **state)
{
    (void)state;
    char json[4096], gguf[4096];
    if (!tok_find_model("mistral-v1-tokenizer.json", json, sizeof json) ||
        !tok_find_model("mistral-v1-vocab.gguf", gguf, sizeof gguf)) {
        print_message("SKIP reason: no mistral-v1-tokenizer.json and mistral-v1-vocab.gguf in $PTRAIN_MODELS, /tmp/models "
                      "or ../models (share/scripts/fetch-tokenizers.sh fetches them from PyPI)\n");
        skip();
    }
    pt_tokenizer *tok = load_json_at(json);
    assert_int_equal(tokenizer_vocab_size(tok), 32000);
    check_column(tok, "mistral-v1", true, false);
    check_column(tok, "dec-mistral-v1", true, true);
    tokenizer_free(tok);
    tok = load_variant_of(json, "legacy-plain");
    check_column(tok, "mistral-v1-legacy", true, false);
    tokenizer_free(tok);
    gguf_file g;
    if (gguf_open(gguf, &g) != PT_OK || tokenizer_from_gguf(&g, &tok) != PT_OK) fail_msg("%s", err_message());
    gguf_close(&g);
    check_column(tok, "mistral-v1-gguf", true, false);
    tokenizer_free(tok);
}

/* vocab.gguf with tokenizer.ggml.add_space_prefix = false appended: Metaspace "never". */
static void test_gguf_no_prefix(void **state)
{
    (void)state;
    char path[4096];
    size_t size;
    tok_data_path(path, sizeof path, "spm/vocab.gguf");
    uint8_t *img = (uint8_t *)tok_slurp(path, &size);
    gguf_file g;
    assert_int_equal(gguf_open_memory("vocab.gguf", img, size, &g), PT_OK);
    const gguf_kv *last = &g.kv[g.n_kv - 1];
    assert_int_equal(last->type, GGUF_TYPE_STRING); /* the chat template ends the key/values */
    uint64_t slen;
    memcpy(&slen, last->value, 8);
    size_t end = (size_t)(last->value - (const uint8_t *)g.map) + 8 + slen;
    gguf_close(&g);
    static const char key[] = "tokenizer.ggml.add_space_prefix";
    uint64_t klen = sizeof key - 1, n_kv;
    uint32_t type = GGUF_TYPE_BOOL;
    uint8_t *out = calloc(end + 8 + klen + 4 + 1 + 64, 1);
    memcpy(out, img, end);
    memcpy(out + end, &klen, 8);
    memcpy(out + end + 8, key, klen);
    memcpy(out + end + 8 + klen, &type, 4); /* value 0: false */
    size_t total = end + 8 + klen + 5;
    total += (32 - total % 32) % 32;
    memcpy(&n_kv, out + 16, 8);
    n_kv++;
    memcpy(out + 16, &n_kv, 8);
    pt_tokenizer *tok = load_gguf_image("vocab-noprefix.gguf", out, total);
    check_column(tok, "never", true, false);
    check_column(tok, "dec-never", true, true);
    tokenizer_free(tok);
    free(out);
    free(img);
}

/* ---- decoding, ids, flags ---- */

static int32_t token_id(const pt_tokenizer *tok, const char *text)
{
    int32_t *ids;
    size_t n;
    assert_int_equal(tokenizer_encode(tok, text, strlen(text), true, &ids, &n), PT_OK);
    int32_t id = n == 1 ? ids[0] : -1;
    free(ids);
    return id;
}

static void test_decode(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_gguf("spm/vocab.gguf");
    strbuf sb = {0};
    int32_t *ids;
    size_t n;
    assert_int_equal(tokenizer_encode(tok, "\xe4\xb8\x80x", 4, true, &ids, &n), PT_OK); /* a character it lacks */
    assert_true(n >= 4);
    assert_int_equal(tokenizer_decode_token(tok, ids[1], &sb), PT_OK); /* <0xE4> is the byte */
    assert_int_equal(sb.len, 1);
    assert_int_equal((uint8_t)sb.data[0], 0xe4);
    sb.len = 0;
    assert_int_equal(tokenizer_decode(tok, ids, n, &sb), PT_OK);
    assert_string_equal(sb_text(&sb), "\xe4\xb8\x80x"); /* the prefix space stripped */
    free(ids);
    sb.len = 0;
    int32_t hello[] = {1, token_id(tok, "hello")};
    assert_int_equal(tokenizer_decode(tok, hello, 2, &sb), PT_OK);
    assert_string_equal(sb_text(&sb), "<s> hello"); /* no strip after a token that does not start with one */
    sb.len = 0;
    assert_int_equal(tokenizer_decode_token(tok, hello[1], &sb), PT_OK);
    assert_string_equal(sb_text(&sb), " hello"); /* "▁" reads as a space */
    sb_free(&sb);
    tokenizer_free(tok);
}

static void test_ids_and_flags(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_gguf("spm/vocab.gguf"), *json = load_main();
    pt_tokenizer *both[] = {tok, json};
    for (int k = 0; k < 2; k++) {
        assert_int_equal(tokenizer_bos(both[k]), 1);
        assert_int_equal(tokenizer_eos(both[k]), 2);
        /* the GGUF's add_bos_token; the tokenizer.json's post-processor has no bos, and its
         * tokenizer_config.json's add_bos_token is ignored, as transformers 5 does */
        assert_int_equal(tokenizer_adds_bos(both[k]), k == 0);
        assert_false(tokenizer_adds_eos(both[k]));
        assert_true(tokenizer_is_special(both[k], 1));
        assert_true(tokenizer_is_special(both[k], 3)); /* <start_of_turn> */
        assert_int_equal(tokenizer_vocab_size(both[k]), 3000);
    }
    assert_int_equal(tokenizer_unk(tok), 0);
    assert_int_equal(tokenizer_pad(tok), -1);
    assert_string_equal(chat_template_detect(tokenizer_chat_template(tok)), "gemma");
    assert_string_equal(chat_template_detect(tokenizer_chat_template(json)), "mistral");
    tokenizer_free(tok);
    tokenizer_free(json);
}

/* ---- chat templates ---- */

static void check_refused(const json_t *c)
{
    const char *name = json_string_value(json_object_get(c, "template"));
    int n;
    chat_message *msgs = tok_json_messages(json_object_get(c, "messages"), &n);
    strbuf sb = {0};
    pt_status rc = chat_render(name, msgs, n, false, &sb);
    free(msgs);
    sb_free(&sb);
    if (rc != PT_ERR_USER) fail_msg("%s accepted what its template refuses (%s)", name,
                                    json_string_value(json_object_get(c, "why")));
    assert_non_null(strstr(err_message(), "chat template "));
}

static void test_chat_templates(void **state)
{
    (void)state;
    json_t *g = tok_load_json("spm/chat_goldens.json");
    const json_t *renders = json_object_get(g, "renders"), *refused = json_object_get(g, "refused");
    const json_t *detect = json_object_get(g, "detect");
    assert_true(json_array_size(renders) >= 40);
    for (size_t i = 0; i < json_array_size(renders); i++) tok_check_render(json_array_get(renders, i), i);
    assert_true(json_array_size(refused) >= 8);
    for (size_t i = 0; i < json_array_size(refused); i++) check_refused(json_array_get(refused, i));
    tok_check_detect(detect);
    json_decref(g);
}

static void test_chat_errors(void **state)
{
    (void)state;
    chat_message msgs[] = {{"system", "s", NULL}, {"user", "a", NULL}, {"tool", "t", NULL}};
    strbuf sb = {0};
    assert_int_equal(chat_render("mistral", msgs, 3, false, &sb), PT_ERR_USER);
    assert_string_equal(err_message(), "chat template mistral: line 3 col 197: the template raised: Only user and "
                                       "assistant roles are supported, with the exception of an initial optional "
                                       "system message!");
    sb.len = 0;
    assert_int_equal(chat_render("gemma", msgs + 1, 1, false, &sb), PT_OK);
    assert_int_equal(chat_render("gemma", msgs + 2, 1, false, &sb), PT_ERR_USER);
    assert_string_equal(err_message(), "chat template gemma: line 3 col 197: the template raised: Conversation roles "
                                       "must alternate user/assistant/user/assistant/...");
    sb.len = 0;
    chat_message tool_reply[] = {{"user", "a", NULL}, {"tool", " t ", NULL}};
    assert_int_equal(chat_render("gemma", tool_reply, 2, false, &sb), PT_OK); /* Gemma names other roles as they are */
    assert_string_equal(sb_text(&sb), "<bos><start_of_turn>user\na<end_of_turn>\n<start_of_turn>tool\nt<end_of_turn>\n");
    sb_free(&sb);
}

/* Whether the labels can come from the tokens' decoded bytes lining up with the rendered text. */
static bool offsets_line_up(const label_ctx *lc, const pt_tokenizer *tok, const chat_message *m, int n)
{
    strbuf text = {0};
    size_t *spans, k;
    int n_spans;
    int32_t *ids;
    if (label_spans(lc, m, n, NULL, &text, &spans, &n_spans) != PT_OK) fail_msg("%s", err_message());
    assert_int_equal(tokenizer_encode(tok, text.data, text.len, true, &ids, &k), PT_OK);
    int32_t *labels = malloc(sizeof *labels * (k + 1));
    bool ok = label_mark_by_offsets(lc, text.data, text.len, ids, k, spans, n_spans, labels);
    free(labels), free(ids), free(spans);
    sb_free(&text);
    return ok;
}

/* Assistant-only labels: the labelled tokens decode to the replies and what ends them. */
static void check_labels(const pt_tokenizer *tok, const char *name, const char *expected, bool by_offsets)
{
    chat_message m[] = {{"system", "Be brief.", NULL}, {"user", "Hi there", NULL}, {"assistant", " Hello! ", NULL},
                        {"user", "Bye", NULL}, {"assistant", "See you", NULL}};
    label_ctx lc;
    assert_int_equal(label_init(&lc, tok, name, true, 1 << 20), PT_OK);
    if (offsets_line_up(&lc, tok, m, 5) != by_offsets)
        fail_msg("%s: the decoded tokens %s the text", name, by_offsets ? "do not line up with" : "line up with");
    pt_example ex;
    bool truncated;
    label_result res;
    assert_int_equal(label_chat(&lc, m, 5, NULL, &ex, &truncated, &res), PT_OK);
    assert_int_equal(res, LABEL_OK);
    strbuf sb = {0};
    for (int32_t t = 0; t < ex.len; t++)
        if (ex.labels[t] != PT_IGNORE_INDEX) assert_int_equal(tokenizer_decode_token(tok, ex.labels[t], &sb), PT_OK);
    if (strcmp(sb_text(&sb), expected) != 0)
        fail_msg("%s: labelled tokens decode to \"%s\", expected \"%s\"", name, sb_text(&sb), expected);
    sb_free(&sb);
    example_free(&ex);
    label_free(&lc);
}

static void test_labels(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_main();
    check_labels(tok, "gemma", "Hello!<end_of_turn>See you<end_of_turn>", true);
    check_labels(tok, "mistral", "  Hello! </s> See you</s>", true);
    tokenizer_free(tok);
    tok = load_variant("legacy"); /* Llama 2's Prepend normalizer: a "▁" after every special token */
    check_labels(tok, "gemma", "Hello!<end_of_turn>See you<end_of_turn>", true);
    check_labels(tok, "mistral", "  Hello! </s> See you</s>", true);
    tokenizer_free(tok);
}

/* A dataset_text_field row: bos first when the tokenizer adds one (once), eos last, all labelled. */
static void check_text_row(const pt_tokenizer *tok, const char *text, const int32_t *want, int32_t n)
{
    label_ctx lc;
    assert_int_equal(label_init(&lc, tok, "chatml", false, 1 << 20), PT_OK);
    pt_example ex;
    bool truncated;
    label_result res;
    assert_int_equal(label_text(&lc, text, &ex, &truncated, &res), PT_OK);
    char ours[300], theirs[300];
    tok_fmt_ids(ours, sizeof ours, ex.ids, (size_t)ex.len);
    tok_fmt_ids(theirs, sizeof theirs, want, (size_t)n);
    if (ex.len != n || memcmp(ex.ids, want, sizeof *want * (size_t)n) != 0 ||
        memcmp(ex.labels, want, sizeof *want * (size_t)n) != 0)
        fail_msg("text row \"%s\": ids%s, expected%s", text, ours, theirs);
    example_free(&ex);
    label_free(&lc);
}

/* A chat row whose template writes bos (gemma, mistral): one bos, from the template. */
static void check_chat_row(const pt_tokenizer *tok, const char *template)
{
    chat_message m[] = {{"user", "Hi", NULL}, {"assistant", "Hello", NULL}};
    label_ctx lc;
    assert_int_equal(label_init(&lc, tok, template, false, 1 << 20), PT_OK);
    pt_example ex;
    bool truncated;
    label_result res;
    assert_int_equal(label_chat(&lc, m, 2, NULL, &ex, &truncated, &res), PT_OK);
    assert_true(ex.len > 2);
    if (ex.ids[0] != 1 || ex.ids[1] == 1)
        fail_msg("%s: the row starts %d %d, not with one bos", template, ex.ids[0], ex.ids[1]);
    example_free(&ex);
    label_free(&lc);
}

static void test_text_rows_bos(void **state)
{
    (void)state;
    pt_tokenizer *gguf = load_gguf("spm/vocab.gguf"), *json = load_main();
    int32_t hello = token_id(gguf, "hello"), world = token_id(gguf, "world"); /* "▁hello", "▁world" */
    assert_true(hello > 2 && world > 2);
    check_text_row(gguf, "hello world", (int32_t[]){1, hello, world, 2}, 4);
    /* bos once; the dummy prefix after it, as after every special token */
    check_text_row(gguf, "<s>hello world", (int32_t[]){1, hello, world, 2}, 4);
    check_text_row(json, "hello world", (int32_t[]){hello, world, 2}, 3);         /* adds none */
    check_chat_row(gguf, "gemma");
    check_chat_row(gguf, "mistral");
    tokenizer_free(gguf);
    tokenizer_free(json);
}

/* ---- malformed GGUF vocabularies ---- */

static void garray(gbuf *b, const char *key, uint32_t elem, uint64_t n)
{
    gbuf_key(b, key, GGUF_TYPE_ARRAY);
    gbuf_u32(b, elem);
    gbuf_u64(b, n);
}

/* A small SentencePiece vocabulary: <unk> <s> </s>, bytes (n_bytes of them), then pieces. */
typedef struct {
    const char *arch;
    int n_bytes, n_scores, bad_type, byte_spelling, nan_score;
    const char *odd_token;
} tiny_spec;

static const char *const pieces[] = {SP, "a", "b", "ab", SP "a", SP "ab", "c"};
#define N_PIECES 7

static pt_status tiny_spm(const tiny_spec *sp, pt_tokenizer **tok)
{
    int n = 3 + sp->n_bytes + N_PIECES;
    gbuf b = {0};
    gbuf_key(&b, "general.architecture", GGUF_TYPE_STRING);
    gbuf_str(&b, sp->arch ? sp->arch : "llama");
    gbuf_key(&b, "tokenizer.ggml.model", GGUF_TYPE_STRING);
    gbuf_str(&b, "llama");
    garray(&b, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, (uint64_t)n);
    const char *special[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++) gbuf_str(&b, special[i]);
    for (int i = 0; i < sp->n_bytes; i++) {
        char name[16];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned)i);
        gbuf_str(&b, i == 'A' && sp->byte_spelling ? "<0xZZ>" : name);
    }
    for (int i = 0; i < N_PIECES; i++) gbuf_str(&b, i == 6 && sp->odd_token ? sp->odd_token : pieces[i]);
    garray(&b, "tokenizer.ggml.scores", GGUF_TYPE_F32, (uint64_t)sp->n_scores);
    for (int i = 0; i < sp->n_scores; i++) {
        float s = i == 5 && sp->nan_score ? NAN : -(float)i;
        gbuf_put(&b, &s, 4);
    }
    garray(&b, "tokenizer.ggml.token_type", GGUF_TYPE_I32, (uint64_t)n);
    for (int i = 0; i < n; i++) gbuf_u32(&b, (uint32_t)(i == 0 ? 2 : i < 3 ? 3 : i < 3 + sp->n_bytes ? 6 : 1));
    if (sp->bad_type) memcpy(b.p + b.n - 4, &sp->bad_type, 4);
    gbuf_key(&b, "tokenizer.ggml.unknown_token_id", GGUF_TYPE_U32);
    gbuf_u32(&b, 0);
    return gbuf_tokenizer(&b, tok);
}

static void expect_tiny(tiny_spec sp, pt_status status, const char *message)
{
    pt_tokenizer *tok = (pt_tokenizer *)1;
    pt_status rc = tiny_spm(&sp, &tok);
    if (rc != status || (message && strcmp(err_message(), message) != 0))
        fail_msg("got %d \"%s\"\n  expected %d \"%s\"", rc, err_message(), status, message ? message : "");
    if (status == PT_OK) tokenizer_free(tok);
    else assert_null(tok);
}

static void test_gguf_unk(void **state)
{
    (void)state;
    int n = 3 + N_PIECES;
    tiny_spec sp = {.n_scores = n};
    pt_tokenizer *tok = NULL;
    assert_int_equal(tiny_spm(&sp, &tok), PT_OK);
    int32_t *ids;
    size_t k;
    assert_int_equal(tokenizer_encode(tok, "ab xy\xc3\xa9" "a", 8, true, &ids, &k), PT_OK);
    int32_t want[] = {3 + 5, 3 + 0, 0, 3 + 1}; /* ▁ab ▁ <unk> (x, y and é fused) a */
    assert_int_equal(k, 4);
    assert_memory_equal(ids, want, sizeof want);
    free(ids);
    tokenizer_free(tok);
    sp = (tiny_spec){.n_bytes = 256, .n_scores = n + 256};
    assert_int_equal(tiny_spm(&sp, &tok), PT_OK);
    assert_int_equal(tokenizer_encode(tok, "x", 1, true, &ids, &k), PT_OK);
    int32_t bytes[] = {259, 3 + 'x'}; /* ▁ <0x78> */
    assert_int_equal(k, 2);
    assert_memory_equal(ids, bytes, sizeof bytes);
    free(ids);
    tokenizer_free(tok);
}

static void test_gguf_malformed(void **state)
{
    (void)state;
    int n = 3 + N_PIECES;
    expect_tiny((tiny_spec){.n_scores = n - 1}, PT_ERR_USER, "tiny.gguf: tokenizer.ggml.scores: 9 scores for 10 tokens");
    expect_tiny((tiny_spec){.n_bytes = 100, .n_scores = n + 100}, PT_ERR_USER,
                "tiny.gguf: tokenizer.ggml.tokens: the byte tokens are incomplete: <0x64> is missing (100 of <0x00> to "
                "<0xFF> are there; byte fallback needs all 256)");
    expect_tiny((tiny_spec){.n_scores = n, .bad_type = 9}, PT_ERR_USER,
                "tiny.gguf: tokenizer.ggml.token_type[9]: 9 is not a token type (0 to 6: undefined, normal, unknown, "
                "control, user-defined, unused, byte)");
    expect_tiny((tiny_spec){.n_scores = n, .bad_type = 6}, PT_ERR_USER,
                "tiny.gguf: tokenizer.ggml.token_type[9]: a byte token (6) spelled \"c\" (byte tokens are <0x00> to "
                "<0xFF>)");
    expect_tiny((tiny_spec){.n_bytes = 256, .n_scores = n + 256, .byte_spelling = 1}, PT_ERR_USER,
                "tiny.gguf: tokenizer.ggml.token_type[68]: a byte token (6) spelled \"<0xZZ>\" (byte tokens are <0x00> "
                "to <0xFF>)");
    expect_tiny((tiny_spec){.n_scores = n, .nan_score = 1}, PT_ERR_USER,
                "tiny.gguf: tokenizer.ggml.scores[5]: not a number");
    expect_tiny((tiny_spec){.n_scores = n, .odd_token = "\xff"}, PT_ERR_USER,
                "tiny.gguf: tokenizer.ggml.tokens[9]: not valid UTF-8");
    expect_tiny((tiny_spec){.n_scores = 0, .arch = "gemma2"}, PT_ERR_USER,
                "tiny.gguf: tokenizer.ggml.scores: 0 scores for 10 tokens");
    expect_tiny((tiny_spec){.n_scores = n, .arch = "gemma2"}, PT_OK, NULL);
}

/* ---- malformed tokenizer.json parts ---- */

#define VOCAB "\"vocab\":{\"<unk>\":0,\"" SP "\":1,\"a\":2,\"" SP "a\":3},\"merges\":[[\"" SP "\",\"a\"]]"
#define MODEL "\"model\":{\"type\":\"BPE\",\"byte_fallback\":true," VOCAB "}"
#define META                                                                                       \
    "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"" SP "\",\"prepend_scheme\":\"first\",\"split\":false}"
#define DEC "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"" SP "\"},"  \
            "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"},{\"type\":\"Strip\",\"content\":\" \","  \
            "\"start\":1,\"stop\":0}]}"

static const struct {
    const char *json;
    pt_status status;
    const char *message; /* after "<file>: " */
} bad_json[] = {
    {"{\"model\":{\"type\":\"BPE\",\"byte_fallback\":true," VOCAB "},\"pre_tokenizer\":{\"type\":\"ByteLevel\"}}",
     PT_ERR_UNSUPPORTED, "model.byte_fallback: byte fallback with a ByteLevel pre-tokenizer is not supported"},
    {"{" MODEL ",\"pre_tokenizer\":{\"type\":\"Metaspace\",\"prepend_scheme\":\"sometimes\"}," DEC "}", PT_ERR_USER,
     "pre_tokenizer.prepend_scheme: \"sometimes\" is not one of always, first, never"},
    {"{" MODEL ",\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"__\"}," DEC "}", PT_ERR_USER,
     "pre_tokenizer.replacement: expected one character"},
    {"{" MODEL ",\"pre_tokenizer\":{\"type\":\"Metaspace\",\"split\":\"no\"}," DEC "}", PT_ERR_USER,
     "pre_tokenizer.split: expected true or false"},
    {"{" MODEL "," META "}", PT_ERR_UNSUPPORTED,
     "decoder: missing: SentencePiece-style BPE needs one (e.g. Replace \"" SP "\" -> \" \", ByteFallback, Fuse, Strip)"},
    {"{" MODEL "," META ",\"decoder\":{\"type\":\"WordPiece\"}}", PT_ERR_UNSUPPORTED,
     "decoder.type: \"WordPiece\" is not supported for SentencePiece-style BPE (supported: Replace, ByteFallback, Fuse, "
     "Strip, Metaspace, Sequence)"},
    {"{" MODEL "," META ",\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"Regex\":"
     "\"x\"},\"content\":\" \"}]}}",
     PT_ERR_UNSUPPORTED, "decoder.decoders[0].pattern.Regex: a Regex in a Replace decoder is not supported"},
    {"{" MODEL "," META ",\"decoder\":{\"type\":\"Strip\",\"content\":\"ab\",\"start\":1,\"stop\":0}}", PT_ERR_USER,
     "decoder.content: expected one character"},
    {"{" MODEL "," META ",\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":-1,\"stop\":0}}", PT_ERR_USER,
     "decoder.start: expected a count from 0 to 255"},
    {"{" MODEL "," META ",\"decoder\":{\"type\":\"Replace\",\"content\":\" \"}}", PT_ERR_USER,
     "decoder.pattern: expected {\"Regex\": \"...\"} or {\"String\": \"...\"}"},
    {"{\"normalizer\":{\"type\":\"Lowercase\"}," MODEL "," META "," DEC "}", PT_ERR_UNSUPPORTED,
     "normalizer.type: \"Lowercase\" is not supported (supported: Prepend, Replace, NFC, NFD, NFKC, NFKD, "
     "Precompiled, Sequence)"},
    {"{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"Prepend\"}]}," MODEL "," DEC "}", PT_ERR_USER,
     "normalizer.normalizers[0].prepend: missing"},
    {"{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\" *\"},\"content\":\"" SP "\"}," MODEL "," DEC "}",
     PT_ERR_UNSUPPORTED, "normalizer.pattern.Regex: a Replace pattern that can match the empty string is not supported"},
    {"{\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"(\"},\"content\":\"" SP "\"}," MODEL "," DEC "}",
     PT_ERR_USER, "normalizer.pattern.Regex: invalid regex \"(\": missing closing parenthesis"},
    {"{\"model\":{\"type\":\"BPE\"," VOCAB "}," DEC "}", PT_ERR_UNSUPPORTED,
     "pre_tokenizer: no ByteLevel step, and no byte_fallback, Metaspace or \"" SP "\" normalizer either: only "
     "byte-level and SentencePiece-style BPE are supported"},
    {"{" MODEL ",\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Metaspace\"},{\"type\":"
     "\"ByteLevel\"}]}," DEC "}",
     PT_ERR_UNSUPPORTED, "model.byte_fallback: byte fallback with a ByteLevel pre-tokenizer is not supported"},
    {"{\"model\":{\"type\":\"BPE\"," VOCAB "},\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":"
     "\"Metaspace\"},{\"type\":\"ByteLevel\"}]}}",
     PT_ERR_UNSUPPORTED, "pre_tokenizer.pretokenizers[0]: Metaspace and ByteLevel together are not supported"},
};

static void test_bad_json(void **state)
{
    (void)state;
    char file[256], expected[2048];
    snprintf(file, sizeof file, "%s/tokenizer.json", S.tmpdir);
    for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
        tok_write_file(file, bad_json[i].json);
        pt_tokenizer *tok = (pt_tokenizer *)1;
        pt_status rc = tokenizer_from_json(file, &tok);
        snprintf(expected, sizeof expected, "%s: %s", file, bad_json[i].message);
        if (rc != bad_json[i].status || strcmp(err_message(), expected) != 0)
            fail_msg("case %zu: %s\n  got      %d \"%s\"\n  expected %d \"%s\"", i, bad_json[i].json, rc, err_message(),
                     bad_json[i].status, expected);
        assert_null(tok);
    }
    tok_write_file(file, "{" MODEL "," META "," DEC "}"); /* the good one loads */
    pt_tokenizer *tok = NULL;
    assert_int_equal(tokenizer_from_json(file, &tok), PT_OK);
    assert_int_equal(token_id(tok, "a"), 3);
    tokenizer_free(tok);
}

/* ---- throughput ---- */

static void test_throughput(void **state)
{
    (void)state;
    pt_tokenizer *tok = load_main();
    corpus_throughput(&S.c, tok, "SentencePiece BPE, corpus, chunks and extras");
    tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_parity),   cmocka_unit_test(test_gguf_parity),
        cmocka_unit_test(test_variants),      cmocka_unit_test(test_gguf_gemma),
        cmocka_unit_test(test_gguf_no_prefix), cmocka_unit_test(test_mistral_real),
        cmocka_unit_test(test_decode),
        cmocka_unit_test(test_ids_and_flags), cmocka_unit_test(test_chat_templates),
        cmocka_unit_test(test_chat_errors),   cmocka_unit_test(test_labels),
        cmocka_unit_test(test_text_rows_bos),
        cmocka_unit_test(test_gguf_unk),      cmocka_unit_test(test_gguf_malformed),
        cmocka_unit_test(test_bad_json),      cmocka_unit_test(test_throughput),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
