/* test_dataset.c — the data pipeline (include/ptrain/dataset.h): every format (messages,
 * ShareGPT conversations, Alpaca, plain text) through the chatml, smollm2, llama-3 and alpaca
 * templates gives exactly the expected token ids and labels, computed independently here from
 * hand-written renderings (labels: the tokens between the token counts of the text before and
 * after each assistant content + end-of-turn token, and their decoded text must be exactly those
 * pieces); the offset and prefix labelling methods agree; assistant masks on real templates equal
 * to TRL 1.16's (tests/reference/make_mask_goldens.py: {% generation %} blocks, Qwen3's template
 * without them), and the error when no method finds a turn; rename, filter, num_samples, shuffle;
 * several datasets concatenated; truncation and no-loss counts; packing; the train/eval split;
 * the per-rank sampler; batch collation; directories, data_files and split selection; the reader
 * an entry's format picks for a file of another extension; the HF
 * cache (tests/data/datasets/hfcache) and its miss message; bad rows with their line numbers;
 * CSV/TSV rows equal to datasets.load_dataset("csv")'s (tests/reference/make_csv_rows.py);
 * Parquet rows equal to datasets.load_dataset("parquet")'s for every codec and encoding
 * (tests/reference/make_parquet_rows.py), a damaged Parquet file one error naming it;
 * the errors for no usable row, Arrow files, missing paths and special files (a device, a
 * FIFO, a socket); the demo dataset's
 * tokenizing time; and independence from the thread count. Fixtures: tests/data/datasets/ and
 * the SmolLM2, Llama-3-mini and Qwen2-mini tokenizers under tests/data/tokenizer/. Runs with
 * cwd = the build dir; PTRAIN_SRCDIR points at the sources. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "data/data_internal.h"
#include "ptrain/config.h"
#include "ptrain/config_options.h"
#include "ptrain/dataset.h"
#include "ptrain/error.h"
#include "ptrain/tokenizer.h"

static struct {
    pt_tokenizer *smol, *llama, *qwen;
} T;

#define SMOL_SYSTEM                                                                                                    \
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
#define ALPACA_HEAD                                                                                                    \
    "Below are some instructions that describe some tasks. Write responses that appropriately complete each "          \
    "request.\n\n"

/* ---- files and configs ---- */

static const char *srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s && *s ? s : "..";
}

/* A fixture path; four buffers in turn, so one call can use several. */
static const char *D(const char *rel)
{
    static char buf[4][1024];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/tests/data/datasets/%s", srcdir(), rel);
    return buf[k];
}

static pt_status load_tok(const char *name, pt_tokenizer **tok)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", srcdir(), name);
    return tokenizer_from_json(path, tok);
}

/* Parse the YAML (a printf format) and load its datasets with tok. */
static pt_status load(const pt_tokenizer *tok, pt_dataset *ds, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static pt_status load(const pt_tokenizer *tok, pt_dataset *ds, const char *fmt, ...)
{
    char yaml[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(yaml, sizeof yaml, fmt, ap);
    va_end(ap);
    pt_config cfg;
    pt_status rc = config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL);
    if (rc != PT_OK) {
        print_error("config: %s\n", err_message());
        return rc;
    }
    dataset_options o = dataset_options_from_config(&cfg);
    rc = dataset_load(&o, tok, NULL, ds);
    config_free(&cfg);
    return rc;
}

static void expect_error(pt_status rc, pt_status want, const char *message)
{
    assert_int_equal(rc, want);
    assert_string_equal(err_message(), message);
}

/* ---- expected examples ---- */

typedef struct {
    const char *text;
    bool labelled;
} piece;

static size_t count_tokens(const pt_tokenizer *tok, const char *text, size_t len)
{
    int32_t *ids;
    size_t n;
    assert_int_equal(tokenizer_encode(tok, text, len, true, &ids, &n), PT_OK);
    free(ids);
    return n;
}

static void decode_labelled(const pt_tokenizer *tok, const pt_example *ex, strbuf *out)
{
    for (int32_t t = 0; t < ex->len; t++)
        if (ex->labels[t] != PT_IGNORE_INDEX) {
            assert_int_equal(ex->labels[t], ex->ids[t]);
            assert_int_equal(tokenizer_decode_token(tok, ex->labels[t], out), PT_OK);
        }
}

/* ex must be the tokens of the concatenated pieces, labelled exactly on the labelled pieces. */
static void expect_example(const pt_tokenizer *tok, const pt_example *ex, const piece *p, int n)
{
    strbuf full = {0}, want_text = {0}, got_text = {0};
    for (int i = 0; i < n; i++) sb_printf(&full, "%s", p[i].text);
    int32_t *ids;
    size_t n_ids;
    assert_int_equal(tokenizer_encode(tok, full.data, full.len, true, &ids, &n_ids), PT_OK);
    int32_t *labels = malloc(sizeof *labels * (n_ids + 1));
    for (size_t t = 0; t < n_ids; t++) labels[t] = PT_IGNORE_INDEX;
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        size_t from = count_tokens(tok, full.data, at);
        at += strlen(p[i].text);
        size_t to = count_tokens(tok, full.data, at);
        if (!p[i].labelled) continue;
        for (size_t t = from; t < to; t++) labels[t] = ids[t];
        sb_printf(&want_text, "%s", p[i].text);
    }
    assert_int_equal(ex->len, (int32_t)n_ids);
    assert_null(ex->segments);
    assert_memory_equal(ex->ids, ids, n_ids * sizeof *ids);
    assert_memory_equal(ex->labels, labels, n_ids * sizeof *labels);
    decode_labelled(tok, ex, &got_text);
    assert_string_equal(sb_text(&got_text), sb_text(&want_text));
    free(ids);
    free(labels);
    sb_free(&full);
    sb_free(&want_text);
    sb_free(&got_text);
}

#define EXPECT(tok, ex, ...)                                                                                           \
    do {                                                                                                               \
        const piece p_[] = {__VA_ARGS__};                                                                             \
        expect_example((tok), (ex), p_, (int)(sizeof p_ / sizeof p_[0]));                                              \
    } while (0)

/* ---- formats and templates ---- */

static void test_messages_smollm2(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\ndataset:\n  - name: \"%s\"\n", D("messages.jsonl")),
                     PT_OK);
    assert_int_equal(ds.n, 2);
    assert_string_equal(ds.stats[0].format, "messages");
    assert_string_equal(ds.stats[0].template, "smollm2");
    assert_true(ds.stats[0].assistant_only);
    EXPECT(T.smol, &ds.ex[0],
           {SMOL_SYSTEM "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n", false},
           {"Arr, Paris it be!<|im_end|>", true}, {"\n", false});
    EXPECT(
        T.smol, &ds.ex[1],
        {"<|im_start|>system\nTalk like a pirate.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
         false},
        {"Ahoy, matey!<|im_end|>", true}, {"\n<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n", false},
        {"Fair winds!<|im_end|>", true}, {"\n", false});
    dataset_free(&ds);
}

/* A row with messages beside prompt/chosen/rejected (ultrafeedback_binarized's train_sft) is a
 * conversation to SFT, as to TRL's SFTTrainer; to a preference method, a pair. */
static void test_messages_beside_pairs(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_dataset_XXXXXX", path[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/uf.jsonl", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"prompt\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"chosen\": [{\"role\": \"assistant\", "
          "\"content\": \"Ahoy!\"}], \"rejected\": [{\"role\": \"assistant\", \"content\": \"Go away.\"}], "
          "\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": \"Ahoy!\"}]}\n",
          f);
    fclose(f);
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\ndataset:\n  - name: \"%s\"\n", path), PT_OK);
    assert_int_equal(ds.n, 1);
    assert_string_equal(ds.stats[0].format, "messages");
    dataset_free(&ds);
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\nmethod: dpo\ndataset:\n  - name: \"%s\"\n", path), PT_OK);
    assert_int_equal(ds.n, 1);
    assert_string_equal(ds.stats[0].format, "preference");
    dataset_free(&ds);
    unlink(path);
    rmdir(dir);
}

static void test_sharegpt_chatml(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n",
                          D("sharegpt.json")), PT_OK);
    assert_int_equal(ds.n, 2);
    assert_string_equal(ds.stats[0].format, "conversations");
    assert_string_equal(ds.stats[0].template, "chatml");
    EXPECT(
        T.smol, &ds.ex[0],
        {"<|im_start|>system\nTalk like a pirate.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
         false},
        {"Ahoy, matey!<|im_end|>", true}, {"\n", false});
    EXPECT(T.smol, &ds.ex[1], {"<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n", false},
           {"Four, arr.<|im_end|>", true}, {"\n", false});
    dataset_free(&ds);
}

static void test_alpaca_chatml(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n",
                          D("alpaca.json")), PT_OK);
    assert_int_equal(ds.n, 2);
    assert_string_equal(ds.stats[0].format, "alpaca");
    EXPECT(T.smol, &ds.ex[0],
           {"<|im_start|>user\nTranslate to pirate.\nInput: Hello friend<|im_end|>\n<|im_start|>assistant\n", false},
           {"Ahoy, matey!<|im_end|>", true}, {"\n", false});
    EXPECT(T.smol, &ds.ex[1], {"<|im_start|>user\nName a sea.<|im_end|>\n<|im_start|>assistant\n", false},
           {"The Caribbean, arr.<|im_end|>", true}, {"\n", false});
    dataset_free(&ds);
}

/* The alpaca template with SmolLM2's bos (<|im_start|>) and eos (<|im_end|>), as Unsloth renders it. */
static void test_alpaca_template(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\nchat_template: alpaca\ndataset:\n  - name: \"%s\"\n",
                          D("alpaca.json")), PT_OK);
    assert_int_equal(ds.n, 2);
    EXPECT(T.smol, &ds.ex[0],
           {"<|im_start|>" ALPACA_HEAD "### Instruction:\nTranslate to pirate.\n\n### Input:\nHello friend\n\n"
            "### Response:\n", false},
           {"Ahoy, matey!<|im_end|>", true}, {"\n\n", false});
    EXPECT(T.smol, &ds.ex[1], {"<|im_start|>" ALPACA_HEAD "### Instruction:\nName a sea.\n\n### Response:\n", false},
           {"The Caribbean, arr.<|im_end|>", true}, {"\n\n", false});
    dataset_free(&ds);
}

/* Llama 3: the template detected from the tokenizer, bos first, contents trimmed. */
static void test_llama3(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.llama, &ds, "max_seq_length: 512\ndataset:\n  - name: \"%s\"\n  - name: \"%s\"\n",
                          D("messages.jsonl"), D("llama-trim.jsonl")), PT_OK);
    assert_int_equal(ds.n, 3);
    assert_string_equal(ds.stats[0].template, "llama-3");
#define HDR(role) "<|start_header_id|>" role "<|end_header_id|>\n\n"
    EXPECT(T.llama, &ds.ex[0],
           {"<|begin_of_text|>" HDR("user") "What is the capital of France?<|eot_id|>" HDR("assistant"), false},
           {"Arr, Paris it be!<|eot_id|>", true});
    EXPECT(
        T.llama, &ds.ex[1],
        {"<|begin_of_text|>" HDR("system") "Talk like a pirate.<|eot_id|>" HDR("user") "Hi<|eot_id|>" HDR("assistant"),
         false},
        {"Ahoy, matey!<|eot_id|>", true}, {HDR("user") "Bye<|eot_id|>" HDR("assistant"), false},
        {"Fair winds!<|eot_id|>", true});
    EXPECT(T.llama, &ds.ex[2], {"<|begin_of_text|>" HDR("user") "Hi<|eot_id|>" HDR("assistant"), false},
           {"Ahoy!<|eot_id|>", true});
#undef HDR
    dataset_free(&ds);
}

static void test_plain_text(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\ndataset_text_field: content\ndataset:\n  - name: \"%s\"\n",
                          D("text.jsonl")), PT_OK);
    assert_int_equal(ds.n, 2);
    assert_string_equal(ds.stats[0].format, "text");
    assert_null(ds.stats[0].template);
    assert_false(ds.stats[0].assistant_only);
    const char *texts[] = {"The sea is wide.", "Yo ho ho."};
    for (int i = 0; i < 2; i++) {
        int32_t *ids;
        size_t n;
        assert_int_equal(tokenizer_encode(T.smol, texts[i], strlen(texts[i]), true, &ids, &n), PT_OK);
        assert_int_equal(ds.ex[i].len, (int32_t)n + 1);
        assert_memory_equal(ds.ex[i].ids, ids, n * sizeof *ids);
        assert_int_equal(ds.ex[i].ids[n], tokenizer_eos(T.smol));
        assert_memory_equal(ds.ex[i].labels, ds.ex[i].ids, (n + 1) * sizeof *ids);
        free(ids);
    }
    dataset_free(&ds);
}

static void test_loss_on_all_tokens(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\nassistant_only_loss: false\ndataset:\n  - name: \"%s\"\n",
                          D("messages.jsonl")), PT_OK);
    assert_false(ds.stats[0].assistant_only);
    for (size_t i = 0; i < ds.n; i++)
        assert_memory_equal(ds.ex[i].labels, ds.ex[i].ids, ds.ex[i].len * sizeof(int32_t));
    dataset_free(&ds);
}

static void test_unknown_template(void **state)
{
    (void)state;
    pt_dataset ds;
    expect_error(load(T.smol, &ds, "max_seq_length: 512\nchat_template: vicuna\ndataset:\n  - name: \"%s\"\n",
                      D("messages.jsonl")),
                 PT_ERR_USER,
                 "chat_template: unknown chat template \"vicuna\" (known: chatml, smollm2, qwen2.5, llama-3, "
                 "llama-3.1, llama-3.2, alpaca, gemma, mistral, mistral-v3, or the model's own)");
}

/* ---- assistant masks against TRL ---- */

static char *read_fixture(const char *rel)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s", srcdir(), rel);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *text = malloc((size_t)n + 1);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The labelled tokens of ex before token `to`, decoded. */
static void labelled_before(const pt_tokenizer *tok, const pt_example *ex, int32_t to, strbuf *out)
{
    for (int32_t t = 0; t < to && t < ex->len; t++)
        if (ex->labels[t] != PT_IGNORE_INDEX) assert_int_equal(tokenizer_decode_token(tok, ex->labels[t], out), PT_OK);
}

/* Rows of tests/data/templates/masks/ through the dataset loader with assistant_only_loss, the
 * Qwen2-mini tokenizer and a real template: the ids and the assistant mask TRL 1.16's SFTTrainer
 * computes (tests/reference/make_mask_goldens.py): return_assistant_tokens_mask on templates with
 * {% generation %} blocks (LFM2.5, Laguna); on those without (Qwen3, Gemma 2 and 3, Phi-3.5,
 * gpt-oss less each turn's header), its training variant's mask where that renders the same text, or (Qwen3 multi-turn, Qwen2.5) its
 * prompt + completion mask from the prompt's end ("from"), the earlier turns checked here.
 * Every mismatching token is printed before the test fails. */
static void test_masks_match_trl(void **state)
{
    (void)state;
    char *golden_text = read_fixture("templates/masks/goldens.json");
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1); /* gpt-oss's strftime_now: 2023-11-14, as the goldens */
    char *tz = getenv("TZ") ? strdup(getenv("TZ")) : NULL; /* the day in UTC, wherever the test runs */
    setenv("TZ", "UTC", 1);
    tzset();
    json_error_t jerr;
    json_t *golden = json_loads(golden_text, 0, &jerr);
    assert_non_null(golden);
    free(golden_text);
    /* what rows compared as prompt + completion label before the completion (the earlier turns,
     * which TRL's mask leaves to the prompt): each turn's text as the whole rendering has it */
    static const struct {
        const char *group;
        size_t row;
        const char *text;
    } earlier[] = {
        {"qwen3-multi", 0, "\nSure — here:\n```py\nprint(1)\n```\n <|im_end|>"},
        {"qwen3-multi", 1,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call><|im_end|>"},
        {"qwen3-multi", 2, "21<|im_end|>"},
        {"qwen2.5", 2, "\nSure — here:\n```py\nprint(1)\n```\n <|im_end|>"},
        {"qwen2.5", 3,
         "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call><|im_end|>"},
        {"qwen2.5", 4, "21<|im_end|>"},
        /* Qwen3.5 trims contents; its generation prompt opens "<think>\n", which the turn after a
         * tool call closes */
        {"qwen3.5", 2, "Sure — here:\n```py\nprint(1)\n```<|im_end|>"},
        {"qwen3.5", 3,
         "\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n"
         "</tool_call><|im_end|>"},
        {"qwen3.5", 4, "21<|im_end|>"},
        {"nemotron3-nano", 0, "</think>\n21<|im_end|>"},
    };
    size_t gi, checked = 0, wrong = 0;
    json_t *g;
    json_array_foreach(json_object_get(golden, "groups"), gi, g) {
        const char *name = json_string_value(json_object_get(g, "name"));
        char rel[512];
        snprintf(rel, sizeof rel, "templates/%s", json_string_value(json_object_get(g, "template")));
        char *template = read_fixture(rel);
        pt_tokenizer *tok;
        const char *tok_rel = json_string_value(json_object_get(g, "tokenizer")); /* gpt-oss's tokens added */
        if (tok_rel) {
            char tok_path[1024];
            snprintf(tok_path, sizeof tok_path, "%s/tests/data/%s/tokenizer.json", srcdir(), tok_rel);
            assert_int_equal(tokenizer_from_json(tok_path, &tok), PT_OK);
        } else
            assert_int_equal(load_tok("qwen2-mini", &tok), PT_OK);
        assert_int_equal(tokenizer_set_chat_template(tok, template), PT_OK);
        free(template);
        const json_t *kw = json_object_get(g, "kwargs");
        bool nothink = json_is_false(json_object_get(kw, "enable_thinking"));
        pt_dataset ds;
        pt_status rc = load(tok, &ds,
                            "max_seq_length: 4096\nassistant_only_loss: true\nchat_template: model\n%sdataset:\n"
                            "  - name: \"%s/tests/data/templates/masks/%s.jsonl\"\n",
                            nothink ? "chat_template_kwargs:\n  enable_thinking: false\n" : "", srcdir(), name);
        if (rc != PT_OK) print_error("%s: %s\n", name, err_message());
        assert_int_equal(rc, PT_OK);
        const json_t *rows = json_object_get(g, "rows");
        for (int b = 0; b < ds.stats[0].n_bad_rows; b++) print_error("%s: %s\n", name, ds.stats[0].bad_rows[b]);
        assert_int_equal(ds.n, json_array_size(rows));
        for (size_t r = 0; r < ds.n; r++) {
            const json_t *row = json_array_get(rows, r), *ids = json_object_get(row, "ids"),
                         *mask = json_object_get(row, "mask");
            const pt_example *ex = &ds.ex[r];
            int32_t from = (int32_t)json_integer_value(json_object_get(row, "from"));
            if (ex->len != (int32_t)json_array_size(ids)) print_error("%s row %zu: length\n", name, r);
            assert_int_equal(ex->len, (int32_t)json_array_size(ids));
            for (int32_t t = 0; t < ex->len; t++) {
                assert_int_equal(ex->ids[t], json_integer_value(json_array_get(ids, (size_t)t)));
                if (t < from) continue;
                bool want = json_integer_value(json_array_get(mask, (size_t)t)) != 0;
                if ((ex->labels[t] != PT_IGNORE_INDEX) != want) {
                    strbuf shown = {0};
                    (void)tokenizer_decode_token(tok, ex->ids[t], &shown);
                    print_error("%s row %zu token %d (\"%s\"): labelled %d, TRL %d\n", name, r, t, sb_text(&shown),
                                ex->labels[t] != PT_IGNORE_INDEX, want);
                    sb_free(&shown);
                    wrong++;
                }
            }
            if (from > 0) {
                strbuf sb = {0};
                labelled_before(tok, ex, from, &sb);
                const char *want = "";
                for (size_t e = 0; e < sizeof earlier / sizeof *earlier; e++)
                    if (!strcmp(earlier[e].group, name) && earlier[e].row == r) want = earlier[e].text;
                if (strcmp(sb_text(&sb), want)) print_error("%s row %zu: earlier turns labelled otherwise\n", name, r);
                assert_string_equal(sb_text(&sb), want);
                sb_free(&sb);
            }
            checked++;
        }
        dataset_free(&ds);
        tokenizer_free(tok);
    }
    unsetenv("SOURCE_DATE_EPOCH");
    if (tz) setenv("TZ", tz, 1);
    else unsetenv("TZ");
    free(tz);
    tzset();
    assert_int_equal(wrong, 0);
    assert_int_equal(checked, 53);
    json_decref(golden);
}

/* A template that renders earlier turns otherwise once more follow (here: the number of messages
 * first) has no assistant span either method finds: said, naming the turn and the way out. */
static void test_masks_not_found(void **state)
{
    (void)state;
    pt_tokenizer *tok;
    assert_int_equal(load_tok("qwen2-mini", &tok), PT_OK);
    assert_int_equal(tokenizer_set_chat_template(
                         tok, "{{ messages | length }}{% for m in messages %}{{ m.role }}: {{ m.content }}<|endoftext|>"
                              "{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}"),
                     PT_OK);
    pt_dataset ds;
    /* the two-turn row is bad (its first assistant turn cannot be found), the one-turn row kept (a
     * last turn is where the whole rendering has it) */
    assert_int_equal(load(tok, &ds, "max_seq_length: 512\nassistant_only_loss: true\ndataset:\n  - name: \"%s\"\n",
                          D("messages.jsonl")),
                     PT_OK);
    assert_int_equal(ds.stats[0].bad, 1);
    assert_int_equal(ds.stats[0].n_bad_rows, 1);
    const char *why = ds.stats[0].bad_rows[0];
    print_error("# %s\n", why);
    assert_non_null(strstr(why, "cannot find assistant turn 2 in the rendered conversation: the template has no "
                                "{% generation %} blocks"));
    assert_non_null(strstr(why, "set assistant_only_loss: false, or choose a chat_template"));
    dataset_free(&ds);
    /* without assistant-only loss the same rows load */
    assert_int_equal(load(tok, &ds, "max_seq_length: 512\nassistant_only_loss: false\ndataset:\n  - name: \"%s\"\n",
                          D("messages.jsonl")),
                     PT_OK);
    dataset_free(&ds);
    tokenizer_free(tok);
}

/* A model with named templates (transformers' chat_template dict): chat_template: NAME renders with
 * that one; with no chat_template a row with tools renders with "tool_use", others with the default
 * (apply_chat_template's choice); an unknown name lists them; named ones without a default are
 * refused unless one is chosen. */
static void test_named_templates(void **state)
{
    (void)state;
    pt_tokenizer *tok;
    assert_int_equal(load_tok("qwen2-mini", &tok), PT_OK);
    assert_int_equal(tokenizer_set_chat_template(tok, NULL), PT_OK);
    assert_int_equal(tokenizer_add_chat_template(tok, "tool_use",
                                                 "{% for m in messages %}T{{ tools | length }}:{{ m.content }};"
                                                 "{% endfor %}"),
                     PT_OK);
    assert_int_equal(tokenizer_add_chat_template(tok, "rag", "{% for m in messages %}R:{{ m.content }};{% endfor %}"),
                     PT_OK);
    char path[1024];
    snprintf(path, sizeof path, "%s/ptrain-named-%d.jsonl", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"assistant\", \"content\": \"b\"}]}\n"
          "{\"messages\": [{\"role\": \"user\", \"content\": \"c\"}, {\"role\": \"assistant\", \"content\": \"d\"}], "
          "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]}\n",
          f);
    fclose(f);
    pt_dataset ds;
    const char *cfg = "max_seq_length: 64\nassistant_only_loss: false\n%sdataset:\n  - name: \"%s\"\n";
    /* no default: refused, naming the named ones */
    assert_int_equal(load(tok, &ds, cfg, "", path), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "the model has no default chat template, only named ones (tool_use, rag); "
                                          "set chat_template to one of them or of chatml, smollm2"));
    assert_int_equal(load(tok, &ds, cfg, "chat_template: vicuna\n", path), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "unknown chat template \"vicuna\" (known: chatml, smollm2, qwen2.5, "
                                          "llama-3, llama-3.1, llama-3.2, alpaca, gemma, mistral, mistral-v3, or the "
                                          "model's own: model, tool_use, rag)"));
    strbuf sb = {0};
    assert_int_equal(load(tok, &ds, cfg, "chat_template: rag\n", path), PT_OK);
    assert_int_equal(ds.n, 2);
    assert_int_equal(tokenizer_decode(tok, ds.ex[1].ids, (size_t)ds.ex[1].len, &sb), PT_OK);
    assert_string_equal(sb_text(&sb), "R:c;R:d;");
    dataset_free(&ds);
    /* a default too: rows with tools take tool_use unless a chat_template is chosen */
    assert_int_equal(tokenizer_set_chat_template(tok, "{% for m in messages %}D:{{ m.content }};{% endfor %}"), PT_OK);
    assert_int_equal(load(tok, &ds, cfg, "", path), PT_OK);
    sb.len = 0;
    assert_int_equal(tokenizer_decode(tok, ds.ex[0].ids, (size_t)ds.ex[0].len, &sb), PT_OK);
    assert_string_equal(sb_text(&sb), "D:a;D:b;");
    sb.len = 0;
    assert_int_equal(tokenizer_decode(tok, ds.ex[1].ids, (size_t)ds.ex[1].len, &sb), PT_OK);
    assert_string_equal(sb_text(&sb), "T1:c;T1:d;");
    dataset_free(&ds);
    assert_int_equal(load(tok, &ds, cfg, "chat_template: model\n", path), PT_OK);
    sb.len = 0;
    assert_int_equal(tokenizer_decode(tok, ds.ex[1].ids, (size_t)ds.ex[1].len, &sb), PT_OK);
    assert_string_equal(sb_text(&sb), "D:c;D:d;");
    dataset_free(&ds);
    sb_free(&sb);
    unlink(path);
    tokenizer_free(tok);
}

/* The template sees the tokenizer's other special tokens as transformers passes them (its
 * special_tokens_map: those tokenizer_config.json sets; here eos and pad, no bos or unk):
 * transformers renders "<|endoftext|>|||" before the contents with this tokenizer. */
static void test_special_token_vars(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/gemma2/hf/tokenizer.json", srcdir());
    pt_tokenizer *tok;
    assert_int_equal(tokenizer_from_json(path, &tok), PT_OK);
    assert_int_equal(tokenizer_set_chat_template(tok, "{{ pad_token }}|{{ unk_token }}|{{ bos_token }}|"
                                                      "{% for m in messages %}{{ m.content }}{% endfor %}"),
                     PT_OK);
    pt_dataset ds;
    assert_int_equal(load(tok, &ds,
                          "max_seq_length: 64\nassistant_only_loss: false\nchat_template: model\ndataset:\n"
                          "  - name: \"%s\"\n",
                          D("messages.jsonl")),
                     PT_OK);
    strbuf sb = {0};
    assert_int_equal(tokenizer_decode(tok, ds.ex[0].ids, (size_t)ds.ex[0].len, &sb), PT_OK);
    assert_string_equal(sb_text(&sb), "<|endoftext|>|||What is the capital of France?Arr, Paris it be!");
    sb_free(&sb);
    dataset_free(&ds);
    tokenizer_free(tok);
}

/* ---- the two labelling methods ---- */

/* Qwen2-mini has <mask> (lstrip) and [R] (rstrip): the offsets skip the white space they swallow. */
static void test_offsets_match_prefix(void **state)
{
    (void)state;
    const chat_message convs[][4] = {
        {{"user", "Hi <mask> there", NULL},
         {"assistant", "Ok <mask> and [R]   done", NULL},
         {"user", "x", NULL},
         {"assistant", " lead space", NULL}},
        {{"system", "s", NULL}, {"user", "word word", NULL}, {"assistant", "\n\nnewlines first", NULL}, {"user", "<|im", NULL}},
    };
    label_ctx lc;
    assert_int_equal(label_init(&lc, T.qwen, "chatml", true, 1 << 20), PT_OK);
    for (int c = 0; c < 2; c++) {
        strbuf text = {0};
        size_t *spans, n;
        int n_spans;
        int32_t *ids;
        assert_int_equal(label_spans(&lc, convs[c], 4, NULL, &text, &spans, &n_spans), PT_OK);
        assert_int_equal(n_spans, c == 0 ? 2 : 1);
        assert_int_equal(tokenizer_encode(T.qwen, text.data, text.len, true, &ids, &n), PT_OK);
        int32_t *a = malloc(sizeof *a * n), *b = malloc(sizeof *b * n);
        for (size_t t = 0; t < n; t++) a[t] = b[t] = PT_IGNORE_INDEX;
        assert_true(label_mark_by_offsets(&lc, text.data, text.len, ids, n, spans, n_spans, a));
        assert_int_equal(label_mark_by_prefix(&lc, text.data, ids, n, spans, n_spans, b), PT_OK);
        assert_memory_equal(a, b, n * sizeof *a);
        /* decoded tokens that do not line up with the text are refused */
        assert_false(label_mark_by_offsets(&lc, "something else", 14, ids, n, spans, n_spans, a));
        free(a), free(b), free(ids), free(spans);
        sb_free(&text);
    }
    label_free(&lc);
}

/* ---- rename, filter, num_samples, shuffle; several datasets ---- */

/* The number in the user turn ("Q7" -> 7) of a chatml example. */
static int question_number(const pt_example *ex)
{
    strbuf sb = {0};
    assert_int_equal(tokenizer_decode(T.smol, ex->ids, (size_t)ex->len, &sb), PT_OK);
    const char *q = strstr(sb.data, "user\nQ");
    assert_non_null(q);
    int n = atoi(q + 6);
    sb_free(&sb);
    return n;
}

static const char *RENAMED_YAML = "max_seq_length: 512\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n"
                                  "    rename: {prompt: instruction, response: output}\n    filter_data: true\n"
                                  "    filter_column_value: lang\n    filter_value: en\n    num_samples: 5\n%s";

static void test_rename_filter_limit(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, RENAMED_YAML, D("renamed.jsonl"), ""), PT_OK);
    const pt_dataset_stats *st = &ds.stats[0];
    assert_int_equal(st->read, 12);
    assert_int_equal(st->filtered, 4); /* rows 0, 3, 6, 9 are "fr" */
    assert_int_equal(st->limited, 3);
    assert_int_equal(st->kept, 5);
    const int want[] = {1, 2, 4, 5, 7};
    for (int i = 0; i < 5; i++) assert_int_equal(question_number(&ds.ex[i]), want[i]);
    dataset_free(&ds);
}

static void test_shuffle(void **state)
{
    (void)state;
    pt_dataset a, b, c;
    assert_int_equal(load(T.smol, &a, RENAMED_YAML, D("renamed.jsonl"), "    shuffle: true\n    seed: 11\n"), PT_OK);
    assert_int_equal(load(T.smol, &b, RENAMED_YAML, D("renamed.jsonl"), "    shuffle: true\n    seed: 11\n"), PT_OK);
    assert_int_equal(load(T.smol, &c, RENAMED_YAML, D("renamed.jsonl"), "    shuffle: true\n    seed: 12\n"), PT_OK);
    const int rows[] = {1, 2, 4, 5, 7};
    size_t perm[5];
    rng_permutation(5, 11, perm);
    bool moved = false, differs = false;
    for (int i = 0; i < 5; i++) {
        int q = question_number(&a.ex[i]);
        assert_int_equal(q, rows[perm[i]]); /* the first 5 matching rows, then shuffled */
        assert_int_equal(q, question_number(&b.ex[i]));
        moved |= q != rows[i];
        differs |= q != question_number(&c.ex[i]);
    }
    assert_true(moved);
    assert_true(differs);
    dataset_free(&a), dataset_free(&b), dataset_free(&c);
}

static void test_filter_numbers(void **state)
{
    (void)state;
    pt_dataset ds;
    const char *yaml =
        "max_seq_length: 512\ndataset:\n  - name: \"%s\"\n    rename: {prompt: instruction, response: output}\n"
        "    filter_data: true\n    filter_column_value: id\n    filter_value: \"%s\"\n";
    assert_int_equal(load(T.smol, &ds, yaml, D("renamed.jsonl"), "4"), PT_OK);
    assert_int_equal(ds.n, 1);
    assert_int_equal(ds.stats[0].filtered, 11);
    dataset_free(&ds);
    assert_int_equal(load(T.smol, &ds, yaml, D("renamed.jsonl"), "4.0"), PT_OK);
    assert_int_equal(ds.n, 1);
    dataset_free(&ds);
    json_t *v = json_real(0.1);
    char *text = rows_value_text(v);
    assert_string_equal(text, "0.1");
    free(text);
    json_decref(v);
    v = json_real(2.0);
    text = rows_value_text(v);
    assert_string_equal(text, "2.0");
    free(text);
    json_decref(v);
}

static void test_concatenate(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n"
                                       "  - name: \"%s\"\n  - name: \"%s\"\n",
                          D("messages.jsonl"), D("sharegpt.json"), D("alpaca.json")), PT_OK);
    assert_int_equal(ds.n, 6);
    assert_int_equal(ds.n_stats, 3);
    assert_string_equal(ds.stats[1].format, "conversations");
    assert_string_equal(ds.stats[2].name, D("alpaca.json"));
    EXPECT(
        T.smol, &ds.ex[2],
        {"<|im_start|>system\nTalk like a pirate.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
         false},
        {"Ahoy, matey!<|im_end|>", true}, {"\n", false});
    EXPECT(T.smol, &ds.ex[5], {"<|im_start|>user\nName a sea.<|im_end|>\n<|im_start|>assistant\n", false},
           {"The Caribbean, arr.<|im_end|>", true}, {"\n", false});
    dataset_free(&ds);
}

/* ---- truncation ---- */

static void test_truncation(void **state)
{
    (void)state;
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 3\ndataset_text_field: content\ndataset:\n  - name: \"%s\"\n",
                          D("text.jsonl")), PT_OK);
    assert_int_equal(ds.stats[0].truncated, 2);
    for (size_t i = 0; i < ds.n; i++) assert_int_equal(ds.ex[i].len, 3);
    dataset_free(&ds);
    /* chatml: cut inside the second conversation's second answer */
    const char *head = "<|im_start|>system\nTalk like a pirate.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\nAhoy, matey!<|im_end|>\n<|im_start|>user\nBye";
    size_t max = count_tokens(T.smol, head, strlen(head));
    assert_int_equal(load(T.smol, &ds, "max_seq_length: %zu\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n", max,
                          D("messages.jsonl")), PT_OK);
    assert_int_equal(ds.stats[0].kept, 2);
    assert_int_equal(ds.stats[0].truncated, 1);
    assert_int_equal(ds.ex[1].len, (int32_t)max);
    strbuf sb = {0};
    decode_labelled(T.smol, &ds.ex[1], &sb);
    assert_string_equal(sb.data, "Ahoy, matey!<|im_end|>");
    sb_free(&sb);
    dataset_free(&ds);
    /* shorter still: the answers are cut away, no token keeps a label */
    char want[2048];
    snprintf(want, sizeof want, "dataset[0] %s: no usable row (2 read, 2 without a labelled token)",
             D("messages.jsonl"));
    expect_error(load(T.smol, &ds, "max_seq_length: 8\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n",
                      D("messages.jsonl")),
                 PT_ERR_USER, want);
}

/* ---- synthetic datasets ---- */

/* Example i has lens[i] tokens: ids 1000*(i+1) + t, all labelled. */
static void make_ds(pt_dataset *ds, const int32_t *lens, size_t n, int32_t max_len)
{
    *ds = (pt_dataset){.ex = calloc(n + 1, sizeof(pt_example)), .n = n, .max_len = max_len};
    for (size_t i = 0; i < n; i++) {
        pt_example *ex = &ds->ex[i];
        ex->len = lens[i];
        ex->ids = malloc(sizeof(int32_t) * (size_t)lens[i]);
        ex->labels = malloc(sizeof(int32_t) * (size_t)lens[i]);
        for (int32_t t = 0; t < lens[i]; t++) ex->ids[t] = ex->labels[t] = 1000 * (int32_t)(i + 1) + t;
    }
}

static int example_no(const pt_example *ex, int32_t t) { return ex->ids[t] / 1000 - 1; }

static void test_pack_layout(void **state)
{
    (void)state;
    const int32_t lens[] = {5, 3, 4, 2, 6};
    pt_dataset ds;
    make_ds(&ds, lens, 5, 8);
    assert_int_equal(dataset_pack(&ds), PT_OK);
    assert_true(ds.packed);
    /* best-fit decreasing: 6 -> new A; 5 -> new B; 4 -> new C; 3 -> B (fits exactly); 2 -> A; then each
     * sequence in data order, sequences ordered by their first example: B {0, 1}, C {2}, A {3, 4} */
    const int want[][2] = {{0, 1}, {2, -1}, {3, 4}};
    const int32_t want_len[] = {8, 4, 8};
    assert_int_equal(ds.n, 3);
    for (int s = 0; s < 3; s++) {
        const pt_example *seq = &ds.ex[s];
        assert_int_equal(seq->len, want_len[s]);
        int32_t t = 0;
        for (int k = 0; k < 2 && want[s][k] >= 0; k++) {
            int e = want[s][k];
            for (int32_t u = 0; u < lens[e]; u++, t++) {
                assert_int_equal(example_no(seq, t), e);
                assert_int_equal(seq->ids[t], 1000 * (e + 1) + u);
                assert_int_equal(seq->segments[t], k + 1);
                assert_int_equal(seq->labels[t], u == 0 ? PT_IGNORE_INDEX : seq->ids[t]);
            }
        }
    }
    assert_int_equal(dataset_pack(&ds), PT_ERR_INTERNAL);
    dataset_free(&ds);
}

static void test_pack_real(void **state)
{
    (void)state;
    pt_dataset a, b;
    const char *yaml = "max_seq_length: 96\nchat_template: chatml\npacking: true\ndataset:\n  - name: \"%s\"\n"
                       "  - name: \"%s\"\n  - name: \"%s\"\n";
    assert_int_equal(load(T.smol, &a, yaml, D("messages.jsonl"), D("sharegpt.json"), D("alpaca.json")), PT_OK);
    assert_int_equal(load(T.smol, &b, yaml, D("messages.jsonl"), D("sharegpt.json"), D("alpaca.json")), PT_OK);
    size_t tokens = dataset_tokens(&a), n = a.n;
    int used[6] = {0};
    pt_example *orig = malloc(sizeof *orig * n);
    memcpy(orig, a.ex, sizeof *orig * n);
    for (size_t i = 0; i < n; i++) { /* keep copies: packing frees the originals */
        orig[i].ids = malloc(sizeof(int32_t) * (size_t)orig[i].len);
        memcpy(orig[i].ids, a.ex[i].ids, sizeof(int32_t) * (size_t)orig[i].len);
    }
    assert_int_equal(dataset_pack(&a), PT_OK);
    assert_int_equal(dataset_pack(&b), PT_OK);
    assert_true(a.n < n);
    assert_int_equal(dataset_tokens(&a), tokens);
    for (size_t s = 0; s < a.n; s++) {
        const pt_example *seq = &a.ex[s];
        assert_true(seq->len <= 96);
        assert_int_equal(seq->len, b.ex[s].len);
        assert_memory_equal(seq->ids, b.ex[s].ids, sizeof(int32_t) * (size_t)seq->len);
        for (int32_t t = 0; t < seq->len;) { /* each segment is one original example, whole */
            int32_t seg = seq->segments[t], from = t;
            assert_int_equal(seg, t == 0 ? 1 : seq->segments[t - 1] + 1);
            while (t < seq->len && seq->segments[t] == seg) t++;
            bool found = false;
            for (size_t e = 0; e < n && !found; e++)
                if (!used[e] && orig[e].len == t - from &&
                    !memcmp(orig[e].ids, seq->ids + from, sizeof(int32_t) * (size_t)(t - from)))
                    found = (used[e] = 1);
            assert_true(found);
            assert_int_equal(seq->labels[from], PT_IGNORE_INDEX);
        }
    }
    for (size_t e = 0; e < n; e++) {
        assert_int_equal(used[e], 1);
        free(orig[e].ids);
    }
    free(orig);
    dataset_free(&a), dataset_free(&b);
}

/* ---- split ---- */

static void ids_of(const pt_dataset *ds, int *seen, int mark)
{
    for (size_t i = 0; i < ds->n; i++) {
        int e = example_no(&ds->ex[i], 0);
        assert_int_equal(seen[e], 0);
        seen[e] = mark;
    }
}

static void test_split(void **state)
{
    (void)state;
    int32_t lens[10];
    for (int i = 0; i < 10; i++) lens[i] = 1 + i % 3;
    const struct {
        double ratio;
        size_t eval;
    } cases[] = {{0.25, 3}, {0.7, 7}, {0.1, 1}, {0.01, 1}, {0, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        pt_dataset all, train, eval;
        make_ds(&all, lens, 10, 8);
        assert_int_equal(dataset_split(&all, cases[c].ratio, 3407, &train, &eval), PT_OK);
        assert_int_equal(all.n, 0);
        assert_int_equal(eval.n, cases[c].eval);
        assert_int_equal(train.n, 10 - cases[c].eval);
        int seen[10] = {0};
        ids_of(&train, seen, 1);
        ids_of(&eval, seen, 2);
        for (int i = 0; i < 10; i++) assert_true(seen[i] != 0);
        dataset_free(&train), dataset_free(&eval);
    }
    /* same seed, same split; another seed, another */
    int first[10] = {0}, again[10] = {0}, other[10] = {0};
    uint64_t seeds[] = {3407, 3407, 1};
    int *marks[] = {first, again, other};
    for (int k = 0; k < 3; k++) {
        pt_dataset all, train, eval;
        make_ds(&all, lens, 10, 8);
        assert_int_equal(dataset_split(&all, 0.3, seeds[k], &train, &eval), PT_OK);
        ids_of(&train, marks[k], 1);
        ids_of(&eval, marks[k], 2);
        dataset_free(&train), dataset_free(&eval);
    }
    assert_memory_equal(first, again, sizeof first);
    assert_memory_not_equal(first, other, sizeof first);
    pt_dataset all, train, eval;
    make_ds(&all, lens, 10, 8);
    expect_error(dataset_split(&all, 1.0, 1, &train, &eval), PT_ERR_USER,
                 "val_split_ratio 1 leaves no training examples (10 examples, 10 for eval)");
    dataset_free(&all);
}

/* ---- sampler ---- */

/* All ranks' indices for an epoch, in global order: batch j of rank r is global batch
 * j*world + r. */
static size_t *global_order(size_t n, int world, long batch, uint64_t seed, long epoch, size_t *total)
{
    size_t bs = (size_t)batch, w = (size_t)world;
    size_t per = world == 1 ? n : (n + bs * w - 1) / (bs * w) * bs;
    size_t *all = malloc(sizeof *all * per * (size_t)world);
    for (int r = 0; r < world; r++) {
        pt_sampler s;
        assert_int_equal(sampler_init(&s, n, r, world, batch), PT_OK);
        assert_int_equal(sampler_epoch(&s, seed, epoch), PT_OK);
        assert_int_equal(s.n, per);
        size_t got = 0;
        for (size_t b = 0; b < sampler_batches(&s); b++) {
            const size_t *idx;
            size_t k = sampler_batch(&s, b, &idx);
            assert_int_equal(k, b + 1 < sampler_batches(&s) ? (size_t)batch : per - b * (size_t)batch);
            for (size_t j = 0; j < k; j++) all[(b * w + (size_t)r) * (size_t)batch + j] = idx[j];
            got += k;
        }
        assert_int_equal(got, per);
        sampler_free(&s);
    }
    *total = per * (size_t)world;
    return all;
}

static void test_sampler_cover(void **state)
{
    (void)state;
    const struct {
        size_t n;
        int world;
        long batch;
    } cases[] = {{10, 3, 2}, {12, 3, 4}, {10, 1, 4}, {2, 4, 1}, {7, 2, 3}, {1, 1, 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t n = cases[c].n, total;
        size_t *all = global_order(n, cases[c].world, cases[c].batch, 42, 0, &total);
        int *count = calloc(n, sizeof *count);
        for (size_t p = 0; p < n; p++) count[all[p]]++; /* the first n positions: a permutation */
        for (size_t i = 0; i < n; i++) assert_int_equal(count[i], 1);
        for (size_t p = n; p < total; p++) assert_int_equal(all[p], all[p % n]); /* wrap-around padding */
        free(count);
        free(all);
    }
}

/* Batch j of rank r under W ranks is batch j*W + r of one process: a step of W ranks covers the
 * batches one process covers with W times the accumulation (the data-parallel equivalence). */
static void test_sampler_same_batches(void **state)
{
    (void)state;
    const int world = 3;
    const long batch = 2;
    pt_sampler one, r;
    assert_int_equal(sampler_init(&one, 24, 0, 1, batch), PT_OK);
    assert_int_equal(sampler_epoch(&one, 5, 2), PT_OK);
    for (int rank = 0; rank < world; rank++) {
        assert_int_equal(sampler_init(&r, 24, rank, world, batch), PT_OK);
        assert_int_equal(sampler_epoch(&r, 5, 2), PT_OK);
        assert_int_equal(sampler_batches(&r) * (size_t)world, sampler_batches(&one));
        for (size_t j = 0; j < sampler_batches(&r); j++) {
            const size_t *a, *b;
            assert_int_equal(sampler_batch(&r, j, &a), (size_t)batch);
            assert_int_equal(sampler_batch(&one, j * world + (size_t)rank, &b), (size_t)batch);
            assert_memory_equal(a, b, sizeof *a * (size_t)batch);
        }
        sampler_free(&r);
    }
    sampler_free(&one);
}

static void test_sampler_order(void **state)
{
    (void)state;
    size_t total;
    size_t *a = global_order(50, 4, 3, 7, 0, &total), *b = global_order(50, 4, 3, 7, 0, &total);
    size_t *c = global_order(50, 4, 3, 7, 1, &total), *d = global_order(50, 4, 3, 8, 0, &total);
    assert_memory_equal(a, b, total * sizeof *a);
    assert_memory_not_equal(a, c, total * sizeof *a);
    assert_memory_not_equal(a, d, total * sizeof *a);
    /* seed + epoch: epoch 1 of seed 7 is epoch 0 of seed 8 */
    assert_memory_equal(c, d, total * sizeof *a);
    free(a), free(b), free(c), free(d);
    pt_sampler s;
    assert_int_equal(sampler_init(&s, 10, 3, 3, 2), PT_ERR_INTERNAL);
    assert_int_equal(sampler_init(&s, 0, 0, 1, 2), PT_ERR_USER);
    assert_string_equal(err_message(), "there are no training examples to sample");
}

/* group_by_length: sampler_group_order orders a permutation as transformers'
 * get_length_grouped_indices does (tests/data/peft/group_by_length.json, make_group_goldens.py:
 * the same permutations through transformers); a sampler with lengths draws that order from its own
 * permutation every epoch, and a resumed epoch (skip) continues it. */
static void test_group_by_length(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/group_by_length.json", srcdir());
    json_error_t jerr;
    json_t *cases = json_load_file(path, 0, &jerr);
    assert_non_null(cases);
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *k = json_array_get(cases, c);
        size_t n = (size_t)json_integer_value(json_object_get(k, "n"));
        long group = (long)json_integer_value(json_object_get(k, "group"));
        size_t *perm = malloc(sizeof *perm * n);
        int32_t *len = malloc(sizeof *len * n);
        for (size_t i = 0; i < n; i++) {
            perm[i] = (size_t)json_integer_value(json_array_get(json_object_get(k, "perm"), i));
            len[i] = (int32_t)json_integer_value(json_array_get(json_object_get(k, "lengths"), i));
        }
        assert_int_equal(sampler_group_order(perm, n, len, group), PT_OK);
        size_t same = 0;
        for (size_t i = 0; i < n; i++)
            same += perm[i] == (size_t)json_integer_value(json_array_get(json_object_get(k, "order"), i));
        print_message("group_by_length: %zu examples, batch %ld: %zu of %zu places as transformers'\n", n, group,
                      same, n);
        assert_int_equal(same, n);
        free(perm);
        free(len);
    }
    json_decref(cases);
    /* the sampler: 23 examples of lengths 1..23, batches of 2, group 4 */
    pt_dataset ds = {0};
    pt_example ex[23];
    for (int i = 0; i < 23; i++) ex[i] = (pt_example){.len = (i * 7) % 23 + 1};
    ds.ex = ex, ds.n = 23;
    pt_sampler s, t;
    assert_int_equal(sampler_init(&s, 23, 0, 1, 2), PT_OK);
    assert_int_equal(sampler_group_by_length(&s, &ds, 4), PT_OK);
    assert_int_equal(sampler_epoch(&s, 5, 1), PT_OK);
    const size_t *idx;
    assert_int_equal(sampler_batch(&s, 0, &idx), 2);
    assert_int_equal(ex[idx[0]].len, 23); /* the longest first */
    assert_int_equal(sampler_init(&t, 23, 0, 1, 2), PT_OK);
    assert_int_equal(sampler_group_by_length(&t, &ds, 4), PT_OK);
    assert_int_equal(sampler_epoch_from(&t, 5, 1, 6), PT_OK);
    assert_memory_equal(t.idx, s.idx + 6, sizeof *s.idx * 17);
    sampler_free(&s);
    sampler_free(&t);
}

/* ---- collate ---- */

static void test_collate(void **state)
{
    (void)state;
    const int32_t lens[] = {3, 2, 2};
    pt_dataset ds;
    make_ds(&ds, lens, 3, 8);
    assert_int_equal(dataset_pack(&ds), PT_OK); /* {0, 2} would not fit 3+2+2 > 8? it does: one sequence */
    assert_int_equal(ds.n, 1);
    pt_dataset plain;
    make_ds(&plain, lens, 3, 8);
    size_t idx[] = {1, 0};
    pt_batch b;
    /* padded: one row per example */
    assert_int_equal(batch_collate_padded(&plain, idx, 2, 99, &b), PT_OK);
    assert_int_equal(b.rows, 2);
    assert_int_equal(b.cols, 3);
    const int32_t ids[] = {2000, 2001, 99, 1000, 1001, 1002};
    const int32_t targets[] = {2001, -100, -100, 1001, 1002, -100};
    const int32_t pos[] = {0, 1, 0, 0, 1, 2}, seg[] = {1, 1, 0, 1, 1, 1};
    assert_memory_equal(b.ids, ids, sizeof ids);
    assert_memory_equal(b.targets, targets, sizeof targets);
    assert_memory_equal(b.pos, pos, sizeof pos);
    assert_memory_equal(b.segments, seg, sizeof seg);
    batch_free(&b);
    /* padding-free: the same examples end to end in one row, no pad, segments 1 and 2 */
    assert_int_equal(batch_collate(&plain, idx, 2, &b), PT_OK);
    assert_int_equal(b.rows, 1);
    assert_int_equal(b.cols, 5);
    const int32_t fids[] = {2000, 2001, 1000, 1001, 1002}, ftargets[] = {2001, -100, 1001, 1002, -100};
    const int32_t fpos[] = {0, 1, 0, 1, 2}, fseg[] = {1, 1, 2, 2, 2};
    assert_memory_equal(b.ids, fids, sizeof fids);
    assert_memory_equal(b.targets, ftargets, sizeof ftargets);
    assert_memory_equal(b.pos, fpos, sizeof fpos);
    assert_memory_equal(b.segments, fseg, sizeof fseg);
    batch_free(&b);
    /* a packed sequence keeps its segments; with a plain example after it they are renumbered */
    size_t one = 0;
    assert_int_equal(batch_collate(&ds, &one, 1, &b), PT_OK);
    assert_int_equal(b.cols, 7);
    const int32_t ptargets[] = {1001, 1002, -100, 2001, -100, 3001, -100};
    const int32_t ppos[] = {0, 1, 2, 0, 1, 0, 1}, pseg[] = {1, 1, 1, 2, 2, 3, 3};
    assert_memory_equal(b.targets, ptargets, sizeof ptargets);
    assert_memory_equal(b.pos, ppos, sizeof ppos);
    assert_memory_equal(b.segments, pseg, sizeof pseg);
    batch_free(&b);
    assert_int_equal(batch_collate_padded(&ds, &one, 1, 0, &b), PT_OK);
    assert_memory_equal(b.segments, pseg, sizeof pseg);
    batch_free(&b);
    dataset_free(&ds), dataset_free(&plain);
}

/* ---- dataset_prepare, warnings ---- */

static pt_status parse(const char *yaml, pt_config *cfg)
{
    return config_parse("test.yaml", yaml, strlen(yaml), cfg, NULL);
}

static void test_prepare(void **state)
{
    (void)state;
    char yaml[4096];
    snprintf(yaml, sizeof yaml, "max_seq_length: 256\nchat_template: chatml\nval_split_ratio: 0.5\npacking: true\n"
             "dataset:\n  - name: \"%s\"\n  - name: \"%s\"\n  - name: \"%s\"\n",
             D("messages.jsonl"), D("sharegpt.json"), D("alpaca.json"));
    pt_config cfg;
    assert_int_equal(parse(yaml, &cfg), PT_OK);
    pt_dataset train, eval;
    dataset_options o = dataset_options_from_config(&cfg);
    assert_int_equal(dataset_prepare(&o, T.smol, NULL, &train, &eval), PT_OK);
    assert_true(train.packed && eval.packed);
    assert_int_equal(train.n_stats, 3);
    assert_int_equal(eval.n_stats, 0);
    size_t segments = 0;
    for (size_t i = 0; i < train.n; i++) segments += (size_t)train.ex[i].segments[train.ex[i].len - 1];
    for (size_t i = 0; i < eval.n; i++) segments += (size_t)eval.ex[i].segments[eval.ex[i].len - 1];
    assert_int_equal(segments, 6);
    dataset_free(&train), dataset_free(&eval);
    config_free(&cfg);
}

static void test_warnings(void **state)
{
    (void)state;
    char yaml[4096], *text;
    size_t len;
    snprintf(yaml, sizeof yaml, "max_seq_length: 64\nassistant_only_loss: true\ndataset_text_field: content\n"
             "dataset:\n  - name: \"%s\"\n    rename: {nothing: content}\n", D("text.jsonl"));
    pt_config cfg;
    assert_int_equal(parse(yaml, &cfg), PT_OK);
    pt_dataset ds;
    FILE *warn = open_memstream(&text, &len);
    dataset_options o = dataset_options_from_config(&cfg);
    assert_int_equal(dataset_load(&o, T.smol, warn, &ds), PT_OK);
    fclose(warn);
    /* the rename warning once every row is read (the rows come in batches) */
    assert_string_equal(text, "warning: dataset[0]: assistant_only_loss is true, but plain-text rows have no assistant "
                              "turns; every token is labelled\n"
                              "warning: dataset[0].rename: no row has a column \"nothing\"\n");
    free(text);
    dataset_free(&ds);
    config_free(&cfg);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    split_type: \"train[:10%%]\"\n",
                      D("dir")),
                 PT_ERR_USER, "dataset[0]: split_type \"train[:10%]\": split slicing is not supported; name the split "
                              "(e.g. train) and use num_samples to take the first rows");
}

/* method: cpt (continued pretraining) labels every token of a conversation, where SFT with
 * assistant_only_loss labels the assistant's only */
static void test_cpt_labels_every_token(void **state)
{
    (void)state;
    pt_dataset cpt, sft;
    const char *base = "max_seq_length: 256\nchat_template: chatml\n%sdataset:\n  - name: \"%s\"\n";
    assert_int_equal(load(T.smol, &cpt, base, "method: cpt\n", D("messages.jsonl")), PT_OK);
    assert_int_equal(load(T.smol, &sft, base, "assistant_only_loss: true\n", D("messages.jsonl")), PT_OK);
    assert_int_equal(cpt.n, sft.n);
    size_t labelled_cpt = 0, labelled_sft = 0, tokens = 0;
    for (size_t i = 0; i < cpt.n; i++) {
        tokens += (size_t)cpt.ex[i].len;
        for (int t = 0; t < cpt.ex[i].len; t++) labelled_cpt += cpt.ex[i].labels[t] == cpt.ex[i].ids[t];
        for (int t = 0; t < sft.ex[i].len; t++) labelled_sft += sft.ex[i].labels[t] != PT_IGNORE_INDEX;
    }
    assert_int_equal(labelled_cpt, tokens);
    assert_true(labelled_sft < tokens);
    dataset_free(&cpt), dataset_free(&sft);
}

/* ---- directories, data_files, JSON variants ---- */

/* The plain texts of ds's examples (without the eos), joined by "|". */
static void texts_of(const pt_dataset *ds, char *out, size_t size)
{
    strbuf sb = {0};
    for (size_t i = 0; i < ds->n; i++) {
        if (i) sb_printf(&sb, "|");
        assert_int_equal(tokenizer_decode(T.smol, ds->ex[i].ids, (size_t)ds->ex[i].len - 1, &sb), PT_OK);
    }
    snprintf(out, size, "%s", sb_text(&sb));
    sb_free(&sb);
}

static void expect_texts(const char *want, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void expect_texts(const char *want, const char *fmt, ...)
{
    char yaml[4096], got[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(yaml, sizeof yaml, fmt, ap);
    va_end(ap);
    pt_dataset ds;
    pt_status rc = load(T.smol, &ds, "max_seq_length: 64\ndataset:\n%s", yaml);
    if (rc != PT_OK) print_error("%s\n", err_message());
    assert_int_equal(rc, PT_OK);
    texts_of(&ds, got, sizeof got);
    assert_string_equal(got, want);
    dataset_free(&ds);
}

static void test_directory(void **state)
{
    (void)state;
    expect_texts("train a|train b", "  - name: \"%s\"\n", D("dir"));
    expect_texts("test a", "  - name: \"%s\"\n    split_type: test\n", D("dir"));
    expect_texts("a|b", "  - name: \"%s\"\n", D("nosplit")); /* no train file: all of them, sorted */
    expect_texts("extra|test a", "  - name: \"%s\"\n    data_files: [extra.jsonl, \"data/test-*.jsonl\"]\n", D("dir"));
    expect_texts("extra", "  - name: \"%s\"\n    data_files: extra.jsonl\n", D("dir"));
    pt_dataset ds;
    char want[2048];
    snprintf(want, sizeof want, "dataset[0]: data_files: %s/nope.jsonl does not exist", D("dir"));
    expect_error(
        load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    data_files: nope.jsonl\n", D("dir")),
        PT_ERR_USER, want);
    snprintf(want, sizeof want, "dataset[0]: data_files needs name to be a directory or an HF dataset id; %s is a file",
             D("text.jsonl"));
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    data_files: x.jsonl\n",
                      D("text.jsonl")),
                 PT_ERR_USER, want);
    expect_error(
        load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: /nonexistent/pirates.jsonl\n"), PT_ERR_USER,
        "dataset[0]: /nonexistent/pirates.jsonl does not exist (relative paths start at the current directory)");
}

/* config_name (subset): only the files under a folder of that name; a name no folder has is an
 * error listing the folders. A README's configs: (YAML front matter) name the files instead: the
 * default config or the one named, the split's patterns; a config or split not there is an error
 * listing those that are. */
static void test_config_name(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_dataset_XXXXXX", path[1024];
    assert_non_null(mkdtemp(dir));
    static const char *const files[] = {"en/train-00000-of-00001.jsonl", "fr/train-00000-of-00001.jsonl",
                                        "fr/test-00000-of-00001.jsonl"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%.2s", dir, files[i]);
        mkdir(path, 0700);
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "{\"text\": \"%.2s %s\"}\n", files[i], strstr(files[i], "train") ? "train" : "test");
        fclose(f);
    }
    expect_texts("fr train", "  - name: \"%s\"\n    config_name: fr\n", dir);
    expect_texts("en train|fr train", "  - name: \"%s\"\n", dir);
    expect_texts("fr test", "  - name: \"%s\"\n    subset: fr\n    split: test\n", dir);
    pt_dataset ds;
    char want[2048];
    snprintf(want, sizeof want, "dataset[0]: config_name \"de\": %s has no folder of that name; its folders: en, fr", dir);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    config_name: de\n", dir),
                 PT_ERR_USER, want);
    /* a README's configs: name the files (en's default, fr's test split is en's file) */
    snprintf(path, sizeof path, "%s/README.md", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "---\nlicense: mit\nconfigs:\n- config_name: fr\n  data_files:\n  - split: train\n    path: fr/train-*\n"
               "  - split: test\n    path: [en/train-*.jsonl]\n- config_name: en\n  default: true\n  data_files: en/*.jsonl\n"
               "---\n# Title\n");
    fclose(f);
    expect_texts("en train", "  - name: \"%s\"\n", dir);
    expect_texts("fr train", "  - name: \"%s\"\n    config_name: fr\n", dir);
    expect_texts("en train", "  - name: \"%s\"\n    config_name: fr\n    split: test\n", dir);
    snprintf(want, sizeof want, "dataset[0]: split \"validation\" is not in %s/README.md's data_files: its splits are "
             "train, test", dir);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    subset: fr\n    split: validation\n",
                      dir), PT_ERR_USER, want);
    snprintf(want, sizeof want, "dataset[0]: config_name \"de\": %s/README.md lists the configs fr, en", dir);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    config_name: de\n", dir),
                 PT_ERR_USER, want);
    /* a README's pattern may not leave the snapshot: another cached dataset, a file of the machine */
    static const char *const outside[] = {"../*/train-*.jsonl", "fr/../../x.jsonl", "/etc/passwd"};
    for (int i = 0; i < 3; i++) {
        f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "---\nconfigs:\n- config_name: up\n  data_files: \"%s\"\n---\n", outside[i]);
        fclose(f);
        assert_int_equal(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", dir), PT_ERR_USER);
        assert_non_null(strstr(err_message(), "leaves the dataset's folder; only paths inside it are read"));
    }
    unlink(path);
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/en", dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/fr", dir);
    rmdir(path);
    rmdir(dir);
}

/* Make dir/sub/train.jsonl: a FIFO (fifo true) or a socket; its path into path. */
static void make_special(const char *dir, const char *sub, bool fifo, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", dir, sub);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, len, "%s/%s/train.jsonl", dir, sub);
    if (fifo) {
        assert_int_equal(mkfifo(path, 0600), 0);
        return;
    }
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    close(fd); /* the socket file stays */
}

/* What a special file's error says. */
static void special_message(const char *path, const char *kind, char *out, size_t len)
{
    snprintf(out, len, "%s is %s, not a data file: ptrain reads regular .json, .jsonl, .csv, .tsv and .parquet "
             "files (name one, or a directory of them)", path, kind);
}

/* A dataset path that is neither a regular file nor a directory (a character device, a FIFO, a
 * socket), named, matched by data_files or found in a directory, is an error saying what it is, not
 * that it does not exist (issue 44); a FIFO never blocks (a hang is cut by the alarm: a failure). */
static void test_special_files(void **state)
{
    (void)state;
    char dir[] = "/tmp/ptrain-special-XXXXXX", fifo[512], sock[512], want[2200], got[2048];
    assert_non_null(mkdtemp(dir));
    make_special(dir, "f", true, fifo, sizeof fifo);
    make_special(dir, "s", false, sock, sizeof sock);
    alarm(30);
    const char *const paths[3] = {"/dev/zero", fifo, sock};
    const char *const kinds[3] = {"a character device", "a FIFO (a named pipe)", "a socket"};
    pt_dataset ds;
    for (int i = 0; i < 3; i++) {
        char parent[512];
        snprintf(parent, sizeof parent, "%.*s", (int)(strrchr(paths[i], '/') - paths[i]), paths[i]);
        special_message(paths[i], kinds[i], got, sizeof got);
        snprintf(want, sizeof want, "dataset[0]: %s", got);
        expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", paths[i]), PT_ERR_USER,
                     want);
        if (i == 0) continue; /* /dev holds more than this */
        expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    data_files: train.jsonl\n",
                          parent), PT_ERR_USER, want);
        expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", parent), PT_ERR_USER, want);
    }
    /* opened directly (a name swapped after the listing): refused, never read */
    for (int i = 0; i < 2; i++) {
        FILE *f = (FILE *)1;
        special_message(paths[i], kinds[i], want, sizeof want);
        expect_error(source_open(paths[i], &f), PT_ERR_USER, want);
        assert_null(f);
    }
    alarm(0);
    unlink(fifo), unlink(sock);
    snprintf(want, sizeof want, "%s/f", dir), rmdir(want);
    snprintf(want, sizeof want, "%s/s", dir), rmdir(want);
    rmdir(dir);
}

/* A dataset name of 200 KB (near the most a config file holds): shown by its start, end and length, and the
 * reason is whole (issue 29). */
static void test_long_name(void **state)
{
    (void)state;
    size_t n = 200u << 10;
    char *yaml = malloc(n + 128), *p = stpcpy(yaml, "max_seq_length: 64\ndataset:\n  - name: /nonexistent/");
    assert_non_null(yaml);
    memset(p, 'd', n);
    strcpy(p + n, "/pirates.jsonl\n");
    pt_config cfg;
    assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
    free(yaml);
    dataset_options o = dataset_options_from_config(&cfg);
    pt_dataset ds;
    pt_status rc = dataset_load(&o, T.smol, NULL, &ds);
    config_free(&cfg);
    char want[1024], d[56];
    memset(d, 'd', 55), d[55] = '\0';
    snprintf(want, sizeof want, "dataset[0]: /nonexistent/%s…(%zu bytes)…%.54s/pirates.jsonl does not exist "
             "(relative paths start at the current directory)", d, n + 27, d);
    expect_error(rc, PT_ERR_USER, want);
}

static void test_json_variants(void **state)
{
    (void)state;
    expect_texts("a|b|c", "  - name: \"%s\"\n", D("lines-in.json"));
    expect_texts("w1|w2", "  - name: \"%s\"\n", D("wrapped-train.json"));
    pt_dataset ds;
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", D("array-items.json")),
                     PT_OK);
    char want[2048];
    assert_int_equal(ds.stats[0].read, 3);
    assert_int_equal(ds.stats[0].bad, 1);
    snprintf(want, sizeof want, "%s:4: expected a JSON object, found a string", D("array-items.json"));
    assert_string_equal(ds.stats[0].bad_rows[0], want);
    dataset_free(&ds);
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", D("wrapped-bad.json")),
                     PT_OK);
    snprintf(want, sizeof want, "%s: data[1]: expected a JSON object, found a number", D("wrapped-bad.json"));
    assert_string_equal(ds.stats[0].bad_rows[0], want);
    dataset_free(&ds);
    snprintf(want, sizeof want, "dataset[0]: %s:3:18: invalid JSON: string or '}' expected near '}'",
             D("broken-array.json"));
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", D("broken-array.json")),
                 PT_ERR_USER, want);
}

/* ---- bad rows and errors ---- */

static void test_bad_rows(void **state)
{
    (void)state;
    pt_dataset ds;
    const char *f = D("bad.jsonl");
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 64\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n", f),
                     PT_OK);
    const pt_dataset_stats *st = &ds.stats[0];
    assert_int_equal(st->read, 9);
    assert_int_equal(st->bad, 6);
    assert_int_equal(st->empty, 1);
    assert_int_equal(st->kept, 2);
    assert_int_equal(st->n_bad_rows, DATASET_BAD_SHOWN);
    const char *want[] = {":2: no \"output\"", ":3: \"output\" is a number, expected a string",
                          ":4: \"output\" is not valid UTF-8",
                          ":5: invalid JSON: unexpected token near end of file (column 36)",
                          ":7: expected a JSON object, found an array"};
    for (int i = 0; i < DATASET_BAD_SHOWN; i++) {
        char line[2048];
        snprintf(line, sizeof line, "%s%s", f, want[i]);
        assert_string_equal(st->bad_rows[i], line);
    }
    char *text;
    size_t len;
    FILE *out = open_memstream(&text, &len);
    dataset_report(&ds, out);
    fclose(out);
    char report[8192];
    snprintf(
        report, sizeof report,
        "dataset[0] %s: 9 rows read, 2 kept (alpaca, chat template chatml, loss on assistant turns); dropped: 6 bad, "
        "1 empty\n  bad row %s%s\n  bad row %s%s\n  bad row %s%s\n  bad row %s%s\n  bad row %s%s\n"
        "  ... and 1 more bad rows\n2 examples, %zu tokens\n",
        f, f, want[0], f, want[1], f, want[2], f, want[3], f, want[4], dataset_tokens(&ds));
    assert_string_equal(text, report);
    free(text);
    dataset_free(&ds);
}

/* Load file with chat_template and check the counts and the first bad rows (after "file"). */
static void expect_bad(const char *file, const char *template, long kept, long empty, long no_loss,
                       const char *const *want, int n_want)
{
    pt_dataset ds;
    const char *f = D(file);
    assert_int_equal(
        load(T.smol, &ds, "max_seq_length: 64\nchat_template: %s\ndataset:\n  - name: \"%s\"\n", template, f), PT_OK);
    const pt_dataset_stats *st = &ds.stats[0];
    assert_int_equal(st->kept, kept);
    assert_int_equal(st->empty, empty);
    assert_int_equal(st->no_loss, no_loss);
    assert_int_equal(st->bad, n_want);
    for (int i = 0; i < n_want && i < DATASET_BAD_SHOWN; i++) {
        char line[2048];
        snprintf(line, sizeof line, "%s%s", f, want[i]);
        assert_string_equal(st->bad_rows[i], line);
    }
    dataset_free(&ds);
}

static void test_bad_chat_rows(void **state)
{
    (void)state;
    const char *const messages[] = {
        ":1: \"messages\" is a string, expected an array of {role, content} objects",
        ":3: no \"messages[0].content\"",
        ":4: \"messages[0].content\" is an array, expected a string",
        ":5: messages[0] is a string, expected a {role, content} object",
    };
    expect_bad("bad-chat.jsonl", "chatml", 1, 1, 2, messages, 4); /* row 2, a tool turn alone: no loss */
    const char *const sharegpt[] = {
        ":1: \"conversations[0].from\" is \"bot\" (expected human, gpt, system or tool)",
        ":2: \"conversations[0].value\" is a number, expected a string",
    };
    expect_bad("bad-sharegpt.jsonl", "chatml", 1, 0, 0, sharegpt, 2);
    const char *const alpaca[] = {
        ":1: chat template alpaca: line 14 col 33: the template raised: Only user and assistant roles are supported!",
    };
    expect_bad("alpaca-system.jsonl", "alpaca", 1, 0, 0, alpaca, 1);
}

static void test_no_usable_row(void **state)
{
    (void)state;
    pt_dataset ds;
    char want[4096];
    const char *f = D("all-bad.jsonl");
    snprintf(want, sizeof want,
             "dataset[1] %s: no usable row (2 read, 2 bad); first bad row: %s:1: no \"conversations\", \"messages\", "
             "\"instruction\"/\"output\" or \"content\" column", f, f);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset_text_field: content\ndataset:\n  - name: \"%s\"\n"
                                   "  - name: \"%s\"\n", D("text.jsonl"), f),
                 PT_ERR_USER, want);
    f = D("all-empty.jsonl");
    snprintf(want, sizeof want, "dataset[0] %s: no usable row (2 read, 2 empty)", f);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", f), PT_ERR_USER, want);
    /* no row at all to shuffle (found by fuzz_dataset: the shuffle copied from a NULL row array) */
    f = D("not-objects.jsonl");
    snprintf(want, sizeof want, "dataset[0] %s: no usable row (2 read, 2 bad); first bad row: %s:1: expected a JSON "
             "object, found an array", f, f);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n    shuffle: true\n", f),
                 PT_ERR_USER, want);
}

/* A data file past 4 GiB is refused before it is read (a sparse file here: instant). */
static void test_file_too_large(void **state)
{
    (void)state;
    char path[] = "/tmp/test_dataset_XXXXXX.jsonl";
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, ((off_t)4 << 30) + 1), 0);
    close(fd);
    pt_dataset ds;
    char want[1024];
    snprintf(want, sizeof want, "dataset[0]: %s is larger than 4 GiB, the most ptrain reads of one data file: split it "
             "into several .jsonl files (a directory of them, or data_files)", path);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", path), PT_ERR_USER, want);
    unlink(path);
}

/* A file whose extension is neither .json nor .jsonl is read as its entry's format says: the same
 * line is one JSON Lines row, or a JSON object whose "data" array holds three. */
static void test_reader_format(void **state)
{
    (void)state;
    char path[] = "/tmp/test_dataset_XXXXXX.txt";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    static const char line[] = "{\"data\": [{\"text\": \"a\"}, {\"text\": \"b\"}, {\"text\": \"c\"}]}\n";
    assert_int_equal(write(fd, line, sizeof line - 1), (long)(sizeof line - 1));
    close(fd);
    const struct {
        pt_dataset_format format;
        size_t rows;
    } cases[] = {{DATASET_JSONL, 1}, {DATASET_JSON, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        data_rows rows = {0};
        pt_dataset_stats st = {0};
        assert_int_equal(reader_read(path, 0, cases[i].format, &rows, &st), PT_OK);
        assert_int_equal(rows.n, cases[i].rows);
        rows_free(&rows);
        stats_free(&st);
    }
    unlink(path);
}

/* ---- CSV and TSV (tests/reference/make_csv_rows.py) ---- */

/* Every row ptrain reads from path equals the row datasets.load_dataset gave (PATH.rows.jsonl). */
static void expect_rows_as_datasets(const char *path, pt_dataset_format format)
{
    data_rows rows = {0};
    pt_dataset_stats st = {0};
    if (reader_read(path, 0, format, &rows, &st) != PT_OK) fail_msg("%s", err_message());
    char want_path[1200];
    snprintf(want_path, sizeof want_path, "%s.rows.jsonl", path);
    FILE *f = fopen(want_path, "r");
    assert_non_null(f);
    char line[4096];
    size_t n = 0;
    while (fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *want = json_loads(line, 0, &e);
        assert_non_null(want);
        assert_true(n < rows.n);
        if (!json_equal(want, rows.v[n].obj)) {
            char *got = json_dumps(rows.v[n].obj, JSON_SORT_KEYS), *exp = json_dumps(want, JSON_SORT_KEYS);
            fail_msg("%s row %zu: ptrain %s, datasets %s", path, n, got, exp);
        }
        json_decref(want);
        n++;
    }
    fclose(f);
    assert_int_equal(rows.n, n);
    assert_int_equal(st.bad, 0);
    rows_free(&rows);
    stats_free(&st);
}

static void test_csv_rows(void **state)
{
    (void)state;
    static const char *const files[] = {"alpaca.csv", "crlf-bom.csv", "types.csv", "short.csv",
                                        "names.csv",  "quotes.csv",   "data.tsv"};
    char path[1024];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "csv/%s", files[i]);
        expect_rows_as_datasets(D(path), DATASET_JSON);
    }
}

/* format: csv reads a file of another extension as CSV; a record with more fields than the header
 * is a bad row at its line (the line its quoted field starts on), the others are read. */
static void test_csv_format_and_bad_rows(void **state)
{
    (void)state;
    char path[] = "/tmp/test_dataset_XXXXXX.txt";
    int fd = mkstemps(path, 4);
    assert_true(fd >= 0);
    static const char text[] = "text,n\n\"a\nb\",1\n\"x\n\",2,3\nc,4\n";
    assert_int_equal(write(fd, text, sizeof text - 1), (long)(sizeof text - 1));
    close(fd);
    data_rows rows = {0};
    pt_dataset_stats st = {0};
    assert_int_equal(reader_read(path, 0, DATASET_CSV, &rows, &st), PT_OK);
    assert_int_equal(rows.n, 2);
    assert_string_equal(json_string_value(json_object_get(rows.v[0].obj, "text")), "a\nb");
    assert_int_equal(rows.v[0].line, 2);
    assert_int_equal(json_integer_value(json_object_get(rows.v[1].obj, "n")), 4);
    assert_int_equal(rows.v[1].line, 6);
    assert_int_equal(st.bad, 1);
    char want[1200];
    snprintf(want, sizeof want, "%s:4: 3 fields where the header has 2", path);
    assert_string_equal(st.bad_rows[0], want);
    rows_free(&rows);
    stats_free(&st);
    unlink(path);
}

/* ---- Parquet (tests/reference/make_parquet_rows.py) ---- */

static void test_parquet_rows(void **state)
{
    (void)state;
    static const char *const files[] = {
        "plain-none-v1.parquet", "dict-snappy-v2.parquet", "dict-gzip-v1.parquet", "zstd-v2-pages.parquet",
        "lz4-v1.parquet",        "brotli-v2.parquet",      "delta.parquet",        "delta-v2-pages.parquet",
        "pandas-alpaca.parquet", "datasets-sharegpt.parquet",
        /* the column types pyarrow, pandas and polars write; polars' own files */
        "types-pyarrow.parquet", "types-decimal-int.parquet", "types-int96.parquet", "pandas-types.parquet",
        "polars-chat.parquet", "polars-snappy-groups.parquet", "polars-sharegpt.parquet", "pirate-40.parquet"};
    char path[1024];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "pq/%s", files[i]);
        expect_rows_as_datasets(D(path), DATASET_JSON);
    }
}

/* A Hub snapshot (acme/tables, as huggingface_hub lays it out): the files ptrain picks for each
 * split, read in its order, give every row datasets.load_dataset gives for the snapshot's folder
 * (snapshot-tables.SPLIT.rows.jsonl). */
static void test_parquet_snapshot_rows(void **state)
{
    (void)state;
    static const char *const splits[] = {"train", "test"};
    char snap[1200];
    snprintf(snap, sizeof snap, "%s", D("hfcache/datasets--acme--tables/snapshots/0123456789abcdef0123456789abcdef01234567"));
    for (int k = 0; k < 2; k++) {
        pt_dataset_config d = {.name = snap, .split_type = (char *)splits[k]};
        data_files f;
        assert_int_equal(source_files(&d, &f), PT_OK);
        data_rows rows = {0};
        pt_dataset_stats st = {0};
        for (int i = 0; i < f.n; i++) assert_int_equal(reader_read(f.path[i], i, f.format, &rows, &st), PT_OK);
        char want_path[1300];
        snprintf(want_path, sizeof want_path, "%s/snapshot-tables.%s.rows.jsonl", D("pq"), splits[k]);
        FILE *in = fopen(want_path, "r");
        assert_non_null(in);
        char line[4096];
        size_t n = 0;
        while (fgets(line, sizeof line, in)) {
            json_error_t e;
            json_t *want = json_loads(line, 0, &e);
            assert_non_null(want);
            assert_true(n < rows.n);
            assert_true(json_equal(want, rows.v[n].obj));
            json_decref(want);
            n++;
        }
        fclose(in);
        assert_int_equal(n, rows.n);
        assert_int_equal(n, k == 0 ? 3 : 1);
        rows_free(&rows);
        stats_free(&st);
        source_free(&f);
    }
}

/* The tokenized training rows of a Parquet file equal those of the same rows as JSON Lines (the
 * rows datasets gave, NAME.rows.jsonl), and the counts (read, bad, kept) agree; also with rename,
 * filter, num_samples and shuffle, which the Parquet file's rows meet one row group (5 rows in
 * dict-snappy-v2) at a time and the JSON Lines file's all at once. */
static void test_parquet_as_jsonl(void **state)
{
    (void)state;
    static const char *const files[] = {"pq/dict-snappy-v2.parquet", "pq/pandas-alpaca.parquet",
                                        "pq/datasets-sharegpt.parquet", "pq/polars-snappy-groups.parquet",
                                        "pq/polars-sharegpt.parquet", "pq/dict-snappy-v2.parquet",
                                        "pq/dict-snappy-v2.parquet"};
    static const char *const keys[] = {"", "", "", "", "", "    shuffle: true\n    seed: 3\n",
                                       "    rename: {text: note, id: row_id}\n    filter_data: true\n"
                                       "    filter_column_value: flag\n    filter_value: \"true\"\n    num_samples: 6\n"
                                       "    shuffle: true\n    seed: 11\n"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char jsonl[1100];
        snprintf(jsonl, sizeof jsonl, "%s.rows.jsonl", D(files[i]));
        pt_dataset a, b;
        assert_int_equal(load(T.smol, &a, "max_seq_length: 128\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n%s",
                              D(files[i]), keys[i]), PT_OK);
        assert_int_equal(load(T.smol, &b, "max_seq_length: 128\nchat_template: chatml\ndataset:\n  - name: \"%s\"\n%s",
                              jsonl, keys[i]), PT_OK);
        assert_int_equal(a.stats[0].filtered, b.stats[0].filtered);
        assert_int_equal(a.stats[0].limited, b.stats[0].limited);
        assert_true(a.n > 0);
        assert_int_equal(a.n, b.n);
        assert_int_equal(a.stats[0].read, b.stats[0].read);
        assert_int_equal(a.stats[0].bad, b.stats[0].bad);
        assert_int_equal(a.stats[0].kept, b.stats[0].kept);
        for (size_t k = 0; k < a.n; k++) {
            assert_int_equal(a.ex[k].len, b.ex[k].len);
            assert_memory_equal(a.ex[k].ids, b.ex[k].ids, sizeof(int32_t) * (size_t)a.ex[k].len);
            assert_memory_equal(a.ex[k].labels, b.ex[k].labels, sizeof(int32_t) * (size_t)a.ex[k].len);
        }
        dataset_free(&a);
        dataset_free(&b);
    }
}

/* A copy of src (a fixture) cut or changed: every damaged file is one error naming it, never a crash. */
static void test_parquet_damaged(void **state)
{
    (void)state;
    FILE *in = fopen(D("pq/dict-snappy-v2.parquet"), "rb");
    assert_non_null(in);
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    assert_true(n > 1000 && n < sizeof buf);
    char path[] = "/tmp/test_dataset_XXXXXX.parquet";
    int fd = mkstemps(path, 8);
    assert_true(fd >= 0);
    close(fd);
    /* cut at every 97th byte, and each byte of the data flipped in turn (every 13th) */
    for (size_t cut = 0; cut < n; cut += 97) {
        FILE *f = fopen(path, "wb");
        assert_int_equal(fwrite(buf, 1, cut, f), cut);
        fclose(f);
        data_rows rows = {0};
        pt_dataset_stats st = {0};
        assert_int_equal(reader_read(path, 0, DATASET_JSON, &rows, &st), PT_ERR_USER);
        assert_non_null(strstr(err_message(), path));
        rows_free(&rows);
        stats_free(&st);
    }
    for (size_t at = 4; at < n - 8; at += 13) {
        unsigned char keep = buf[at];
        buf[at] ^= 0x5a;
        FILE *f = fopen(path, "wb");
        assert_int_equal(fwrite(buf, 1, n, f), n);
        fclose(f);
        buf[at] = keep;
        data_rows rows = {0};
        pt_dataset_stats st = {0};
        if (reader_read(path, 0, DATASET_JSON, &rows, &st) != PT_OK) assert_non_null(strstr(err_message(), path));
        rows_free(&rows);
        stats_free(&st);
    }
    /* format: parquet reads a file of another name as Parquet */
    char other[] = "/tmp/test_dataset_XXXXXX.bin";
    fd = mkstemps(other, 4);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, buf, n), (long)n);
    close(fd);
    data_rows rows = {0};
    pt_dataset_stats st = {0};
    assert_int_equal(reader_read(other, 0, DATASET_PARQUET, &rows, &st), PT_OK);
    assert_int_equal(rows.n, 23);
    assert_int_equal(st.n_files, 1);
    assert_int_equal(st.files[0].rows, 23);
    assert_int_equal(st.files[0].bytes, n);
    rows_free(&rows);
    stats_free(&st);
    st = (pt_dataset_stats){0};
    unlink(other);
    unlink(path);
    /* the fixture that is no Parquet file */
    assert_int_equal(reader_read(D("parquet/train-00000-of-00001.parquet"), 0, DATASET_JSON, &rows, &st), PT_ERR_USER);
    char want[2048];
    snprintf(want, sizeof want, "%s: the footer's length (6646625 bytes) is more than the file holds",
             shown_text(D("parquet/train-00000-of-00001.parquet")).s);
    assert_string_equal(err_message(), want);
    stats_free(&st);
}

/* Every data_files pattern of tests/reference/make_pattern_files.py (`**`, hidden and special
 * folders, a dataset's README.md) names the files datasets' resolve_pattern gives, in its order. */
static void test_patterns_as_datasets(void **state)
{
    (void)state;
    json_error_t e;
    json_t *want = json_load_file(D("patterns/patterns.json"), 0, &e);
    assert_non_null(want);
    char dir[1100];
    snprintf(dir, sizeof dir, "%s", D("patterns/tree"));
    const char *pattern;
    json_t *files;
    int checked = 0;
    json_object_foreach(want, pattern, files) {
        pt_strlist got;
        assert_int_equal(pattern_files(dir, pattern, &got), PT_OK);
        strbuf a = {0}, b = {0};
        for (int i = 0; i < got.n; i++) {
            assert_true(!strncmp(got.items[i], dir, strlen(dir)));
            sb_printf(&a, "%s ", got.items[i] + strlen(dir) + 1);
            free(got.items[i]);
        }
        free(got.items);
        for (size_t i = 0; i < json_array_size(files); i++) sb_printf(&b, "%s ", json_string_value(json_array_get(files, i)));
        if (strcmp(sb_text(&a), sb_text(&b))) fail_msg("pattern %s: ptrain [%s], datasets [%s]", pattern, sb_text(&a), sb_text(&b));
        sb_free(&a);
        sb_free(&b);
        checked++;
    }
    assert_int_equal(checked, 20);
    json_decref(want);
    /* a dataset entry's data_files: each pattern's files in order, a pattern matching none an error */
    char *pats[] = {"data/**/*.jsonl", "en/*/part-0.csv"};
    pt_dataset_config d = {.name = dir, .data_files = {pats, 2}};
    data_files f;
    assert_int_equal(source_files(&d, &f), PT_OK);
    assert_int_equal(f.n, 4);
    static const char *const order[] = {"data/extra/deeper/train-deep.jsonl", "data/extra/train-more.jsonl",
                                        "en/train/part-0.csv", "en/validation/part-0.csv"};
    for (int i = 0; i < 4; i++) assert_string_equal(f.path[i] + strlen(dir) + 1, order[i]);
    source_free(&f);
    char *none[] = {"missing/**"};
    d.data_files = (pt_strlist){none, 1};
    assert_int_equal(source_files(&d, &f), PT_ERR_USER);
    char message[1300];
    snprintf(message, sizeof message, "data_files: %s/missing/** does not exist (no file matches the pattern)",
             shown_text(dir).s);
    assert_string_equal(err_message(), message);
}

/* A folder's files of each split are those datasets' get_data_patterns picks (splits.json of
 * tests/reference/make_pattern_files.py: sharded names with a custom split, split folders, split
 * words in file names, none), in its order; a split it has not is an error listing the ones it has. */
static void test_splits_as_datasets(void **state)
{
    (void)state;
    json_error_t e;
    json_t *want = json_load_file(D("patterns/splits.json"), 0, &e);
    assert_non_null(want);
    const char *layout, *split;
    json_t *splits, *files;
    int checked = 0;
    json_object_foreach(want, layout, splits) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/%s", D("patterns/splits"), layout);
        json_object_foreach(splits, split, files) {
            pt_dataset_config d = {.name = dir, .split_type = (char *)split};
            data_files f;
            pt_status rc = source_files(&d, &f);
            strbuf got = {0}, exp = {0};
            if (json_is_array(files)) {
                if (rc != PT_OK) fail_msg("%s, split %s: %s", layout, split, err_message());
                for (int i = 0; i < f.n; i++) sb_printf(&got, "%s ", f.path[i] + strlen(dir) + 1);
                for (size_t i = 0; i < json_array_size(files); i++)
                    sb_printf(&exp, "%s ", json_string_value(json_array_get(files, i)));
                source_free(&f);
            } else {
                assert_int_equal(rc, PT_ERR_USER);
                json_t *have = json_object_get(files, "not there");
                sb_printf(&got, "%s", err_message());
                sb_printf(&exp, "split \"%s\" is not in %s: its files name the split%s ", split, shown_text(dir).s,
                          json_array_size(have) > 1 ? "s" : "");
                for (size_t i = 0; i < json_array_size(have); i++)
                    sb_printf(&exp, "%s%s", i ? ", " : "", json_string_value(json_array_get(have, i)));
                sb_printf(&exp, "; set split_type to one of them");
            }
            if (strcmp(sb_text(&got), sb_text(&exp)))
                fail_msg("%s, split %s: ptrain [%s], datasets [%s]", layout, split, sb_text(&got), sb_text(&exp));
            sb_free(&got);
            sb_free(&exp);
            checked++;
        }
    }
    assert_int_equal(checked, 16);
    json_decref(want);
}

/* A column of a type a chat row cannot use (a MAP, fixed-length bytes) is one error naming the
 * file, the column and the type, whatever the other columns hold. */
static void test_parquet_refused_types(void **state)
{
    (void)state;
    static const char *const files[] = {"pq/refused-map.parquet", "pq/refused-fixed.parquet"};
    static const char *const what[] = {"column meta holds MAP values", "column digest holds FIXED_LEN_BYTE_ARRAY(4) "
                                       "(bytes, not text) values"};
    for (size_t i = 0; i < 2; i++) {
        data_rows rows = {0};
        pt_dataset_stats st = {0};
        assert_int_equal(reader_read(D(files[i]), 0, DATASET_JSON, &rows, &st), PT_ERR_USER);
        char want[2048];
        snprintf(want, sizeof want, "%s: %s, which ptrain does not read (a chat row has text, numbers, booleans, "
                 "dates and times, lists and structs)", shown_text(D(files[i])).s, what[i]);
        assert_string_equal(err_message(), want);
        assert_int_equal(rows.n, 0);
        rows_free(&rows);
        stats_free(&st);
    }
}

/* An Arrow file is refused saying what to name instead, with no conversion step to run. */
static void test_convert_errors(void **state)
{
    (void)state;
    pt_dataset ds;
    char path[] = "/tmp/test_dataset_XXXXXX.arrow";
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: \"%s\"\n", path), PT_ERR_USER);
    char want[2048];
    snprintf(want, sizeof want, "dataset[0]: %s is an Arrow file (the format of datasets' cache and save_to_disk), "
             "which ptrain does not read; name the dataset's Hub id (its snapshot in the HF cache) or the .parquet, "
             ".json, .jsonl or .csv files it was made from", path);
    assert_string_equal(err_message(), want);
    unlink(path);
}

/* ---- the HF cache ---- */

static char *saved_env[5];
static const char *const env_names[] = {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"};

static void env_save(void)
{
    for (int i = 0; i < 5; i++) {
        const char *v = getenv(env_names[i]);
        saved_env[i] = v ? strdup(v) : NULL;
        unsetenv(env_names[i]);
    }
}

static void env_restore(void)
{
    for (int i = 0; i < 5; i++) {
        if (saved_env[i]) setenv(env_names[i], saved_env[i], 1);
        else unsetenv(env_names[i]);
        free(saved_env[i]);
        saved_env[i] = NULL;
    }
}

static void expect_hub(const char *want, const char *want_from)
{
    const char *from;
    char *hub = hfcache_hub_dir(&from);
    assert_string_equal(hub, want);
    assert_string_equal(from, want_from);
    free(hub);
}

static void test_hub_dir(void **state)
{
    (void)state;
    env_save();
    setenv("HOME", "/home/cap", 1);
    expect_hub("/home/cap/.cache/huggingface/hub", "the default ~/.cache/huggingface/hub");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    expect_hub("/xdg/huggingface/hub", "XDG_CACHE_HOME");
    setenv("HF_HOME", "/hf", 1);
    expect_hub("/hf/hub", "HF_HOME");
    setenv("HUGGINGFACE_HUB_CACHE", "/legacy", 1);
    expect_hub("/legacy", "HUGGINGFACE_HUB_CACHE");
    setenv("HF_HUB_CACHE", "/hub", 1);
    expect_hub("/hub", "HF_HUB_CACHE");
    env_restore();
    assert_true(hfcache_is_repo_id("yahma/alpaca-cleaned"));
    assert_true(hfcache_is_repo_id("acme/pirates.v2"));
    assert_false(hfcache_is_repo_id("data/train.jsonl"));
    assert_false(hfcache_is_repo_id("./x/y"));
    assert_false(hfcache_is_repo_id("/abs/path"));
    assert_false(hfcache_is_repo_id("a/b/c"));
    assert_false(hfcache_is_repo_id("pirates"));
    char id[200]; /* each part of a Hub id has at most 96 characters */
    memset(id, 'a', sizeof id), id[96] = '/', id[96 + 97] = '\0';
    assert_true(hfcache_is_repo_id(id));
    id[96 + 97] = 'a', id[96 + 98] = '\0';
    assert_false(hfcache_is_repo_id(id));
    memset(id, 'a', sizeof id), id[97] = '/', id[97 + 2] = '\0';
    assert_false(hfcache_is_repo_id(id));
}

static void test_hfcache_load(void **state)
{
    (void)state;
    env_save();
    setenv("HF_HUB_CACHE", D("hfcache"), 1);
    pt_dataset ds;
    assert_int_equal(
        load(T.smol, &ds, "max_seq_length: 128\nchat_template: chatml\ndataset:\n  - name: acme/pirates\n"), PT_OK);
    assert_int_equal(ds.n, 2); /* the train file (a symlink into blobs/), not test, not README.md */
    EXPECT(T.smol, &ds.ex[1], {"<|im_start|>user\nWhere be the gold?<|im_end|>\n<|im_start|>assistant\n", false},
           {"In the snapshot, arr.<|im_end|>", true}, {"\n", false});
    dataset_free(&ds);
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 128\ndataset:\n  - name: acme/pirates\n    split_type: test\n"),
                     PT_OK);
    assert_int_equal(ds.n, 1);
    dataset_free(&ds);
    /* a Parquet snapshot (tests/reference/make_parquet_rows.py): the train split's two shards in order */
    assert_int_equal(
        load(T.smol, &ds, "max_seq_length: 128\nchat_template: chatml\ndataset:\n  - name: acme/tables\n"), PT_OK);
    assert_int_equal(ds.n, 3);
    assert_int_equal(ds.stats[0].n_files, 2);
    assert_non_null(strstr(ds.stats[0].files[0].path, "train-00000-of-00002.parquet"));
    assert_int_equal(ds.stats[0].files[0].rows, 2);
    assert_int_equal(ds.stats[0].files[1].rows, 1);
    EXPECT(T.smol, &ds.ex[2], {"<|im_start|>user\nQuestion 2?<|im_end|>\n<|im_start|>assistant\n", false},
           {"Answer 2.<|im_end|>", true}, {"\n", false});
    char *report = NULL;
    size_t report_len = 0;
    FILE *rf = open_memstream(&report, &report_len);
    dataset_report(&ds, rf);
    fclose(rf);
    char line[4096];
    snprintf(line, sizeof line, "\n  file %s: 1 row\n", shown_text(ds.stats[0].files[1].path).s);
    assert_non_null(strstr(report, line));
    assert_non_null(strstr(ds.stats[0].files[1].path, "train-00001-of-00002.parquet"));
    free(report);
    dataset_free(&ds);
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 128\ndataset:\n  - name: acme/tables\n    split: test\n"),
                     PT_OK);
    assert_int_equal(ds.n, 1);
    dataset_free(&ds);
    char split_want[4096];
    snprintf(split_want, sizeof split_want, "dataset[0]: split \"validation\" is not in %s: its files name the splits train, "
             "test; set split_type to one of them",
             shown_text(D("hfcache/datasets--acme--tables/snapshots/0123456789abcdef0123456789abcdef01234567")).s);
    expect_error(load(T.smol, &ds, "max_seq_length: 128\ndataset:\n  - name: acme/tables\n    split: validation\n"),
                 PT_ERR_USER, split_want);
    char *dir, want[4096];
    const char *c0 = "89abcdef0123456789abcdef0123456789abcdef";
    snprintf(want, sizeof want, "%s/datasets--acme--pirates/snapshots/%s", D("hfcache"), c0);
    assert_int_equal(hfcache_snapshot("dataset", "acme/pirates", "v1", &dir), PT_OK);
    assert_string_equal(dir, want);
    free(dir);
    assert_int_equal(hfcache_snapshot("dataset", "acme/pirates", c0, &dir), PT_OK);
    assert_string_equal(dir, want);
    free(dir);
    /* a dataset entry's revision picks that snapshot, as a model's does */
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 128\ndataset:\n  - name: acme/pirates\n    revision: v1\n"),
                     PT_OK);
    assert_non_null(strstr(ds.stats[0].files[0].path, c0));
    dataset_free(&ds);
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 128\ndataset:\n  - name: acme/pirates\n    revision: v9\n"),
                     PT_ERR_USER);
    assert_non_null(strstr(err_message(), "v9"));
    env_restore();
}

#define MISS_TAIL                                                                                                      \
    " (hub cache %s, from HF_HUB_CACHE). On a machine with internet, run\n  huggingface-cli download --repo-type "    \
    "dataset %s\n(or: hf download %s --repo-type dataset), then copy the datasets--acme--%s directory into %s, or "   \
    "set HF_HUB_CACHE to the cache that has it"

static void test_hfcache_miss(void **state)
{
    (void)state;
    env_save();
    char hub[1024], want[8192], path[2048];
    snprintf(hub, sizeof hub, "%s", D("hfcache"));
    setenv("HF_HUB_CACHE", hub, 1);
    /* the message shows its paths as shown_text does, so that a deep build directory changes nothing here */
    char shown_hub[sizeof(pt_shown)];
    snprintf(shown_hub, sizeof shown_hub, "%s", shown_text(hub).s);
    pt_dataset ds;
    snprintf(path, sizeof path, "%s/datasets--acme--missing", hub);
    snprintf(want, sizeof want,
             "dataset[0]: dataset acme/missing is not in the Hugging Face cache: %s does not exist" MISS_TAIL,
             shown_text(path).s, shown_hub, "acme/missing", "acme/missing", "missing", shown_hub);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: acme/missing\n"), PT_ERR_USER, want);
    snprintf(path, sizeof path, "%s/datasets--acme--norefs/refs/main", hub);
    snprintf(want, sizeof want,
             "dataset[0]: dataset acme/norefs is not in the Hugging Face cache: %s is missing" MISS_TAIL,
             shown_text(path).s, shown_hub, "acme/norefs", "acme/norefs", "norefs", shown_hub);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: acme/norefs\n"), PT_ERR_USER, want);
    snprintf(path, sizeof path, "%s/datasets--acme--dangling/snapshots/fedcba9876543210fedcba9876543210fedcba98", hub);
    snprintf(want, sizeof want,
             "dataset[0]: dataset acme/dangling is not in the Hugging Face cache: %s (named by refs/main) is "
             "missing" MISS_TAIL,
             shown_text(path).s, shown_hub, "acme/dangling", "acme/dangling", "dangling", shown_hub);
    expect_error(load(T.smol, &ds, "max_seq_length: 64\ndataset:\n  - name: acme/dangling\n"), PT_ERR_USER, want);
    char *dir;
    assert_int_equal(hfcache_snapshot("model", "acme/nothing", "v2", &dir), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "\n  huggingface-cli download --revision v2 acme/nothing\n"));
    env_restore();
}

/* ---- the demo dataset, speed, threads ---- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void test_demo_dataset(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/share/data/pirate-instructions.jsonl", srcdir());
    pt_dataset ds;
    double t0 = now();
    assert_int_equal(load(T.smol, &ds, "max_seq_length: 512\ndataset:\n  - name: \"%s\"\n", path), PT_OK);
    double dt = now() - t0;
    assert_int_equal(ds.stats[0].read, 372);
    assert_int_equal(ds.stats[0].kept, 372);
    assert_int_equal(ds.stats[0].truncated, 0);
    size_t labelled = 0;
    for (size_t i = 0; i < ds.n; i++) {
        strbuf sb = {0};
        decode_labelled(T.smol, &ds.ex[i], &sb);
        const char *end = sb.data + sb.len - strlen("<|im_end|>");
        assert_true(sb.len > 10 && strcmp(end, "<|im_end|>") == 0);
        for (int32_t t = 0; t < ds.ex[i].len; t++) labelled += ds.ex[i].labels[t] != PT_IGNORE_INDEX;
        sb_free(&sb);
    }
    printf("# demo dataset: %zu conversations, %zu tokens (%zu labelled) in %.0f ms with %d threads\n", ds.n,
           dataset_tokens(&ds), labelled, dt * 1e3, omp_get_max_threads());
    assert_true(dt < 5.0); /* well under a second in an optimised build; sanitizers are slower */
    dataset_free(&ds);
}

static void test_threads(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/share/data/pirate-instructions.jsonl", srcdir());
    pt_dataset a, b;
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(load(T.smol, &a, "max_seq_length: 512\ndataset:\n  - name: \"%s\"\n    shuffle: true\n", path),
                     PT_OK);
    omp_set_num_threads(4);
    assert_int_equal(load(T.smol, &b, "max_seq_length: 512\ndataset:\n  - name: \"%s\"\n    shuffle: true\n", path),
                     PT_OK);
    omp_set_num_threads(threads);
    assert_int_equal(a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.ex[i].len, b.ex[i].len);
        assert_memory_equal(a.ex[i].ids, b.ex[i].ids, sizeof(int32_t) * (size_t)a.ex[i].len);
        assert_memory_equal(a.ex[i].labels, b.ex[i].labels, sizeof(int32_t) * (size_t)a.ex[i].len);
    }
    dataset_free(&a), dataset_free(&b);
}

/* ---- main ---- */

static int setup(void **state)
{
    (void)state;
    if (load_tok("smollm2", &T.smol) || load_tok("llama3-mini", &T.llama) || load_tok("qwen2-mini", &T.qwen)) {
        print_error("tokenizer: %s\n", err_message());
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    tokenizer_free(T.smol);
    tokenizer_free(T.llama);
    tokenizer_free(T.qwen);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_smollm2),  cmocka_unit_test(test_sharegpt_chatml),
        cmocka_unit_test(test_alpaca_chatml),     cmocka_unit_test(test_alpaca_template),
        cmocka_unit_test(test_llama3),            cmocka_unit_test(test_plain_text),
        cmocka_unit_test(test_loss_on_all_tokens), cmocka_unit_test(test_unknown_template),
        cmocka_unit_test(test_reader_format),     cmocka_unit_test(test_csv_rows),
        cmocka_unit_test(test_csv_format_and_bad_rows), cmocka_unit_test(test_parquet_rows),
        cmocka_unit_test(test_parquet_damaged),   cmocka_unit_test(test_parquet_refused_types),
        cmocka_unit_test(test_patterns_as_datasets), cmocka_unit_test(test_splits_as_datasets),
        cmocka_unit_test(test_parquet_snapshot_rows),   cmocka_unit_test(test_parquet_as_jsonl),
        cmocka_unit_test(test_offsets_match_prefix), cmocka_unit_test(test_masks_match_trl),
        cmocka_unit_test(test_masks_not_found),   cmocka_unit_test(test_named_templates),
        cmocka_unit_test(test_special_token_vars),
        cmocka_unit_test(test_rename_filter_limit),
        cmocka_unit_test(test_shuffle),           cmocka_unit_test(test_filter_numbers),
        cmocka_unit_test(test_concatenate),       cmocka_unit_test(test_truncation),
        cmocka_unit_test(test_pack_layout),       cmocka_unit_test(test_pack_real),
        cmocka_unit_test(test_split),             cmocka_unit_test(test_sampler_cover),
        cmocka_unit_test(test_sampler_order),     cmocka_unit_test(test_sampler_same_batches),
        cmocka_unit_test(test_group_by_length),
        cmocka_unit_test(test_collate),
        cmocka_unit_test(test_prepare),           cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_cpt_labels_every_token),
        cmocka_unit_test(test_directory),         cmocka_unit_test(test_special_files),
        cmocka_unit_test(test_config_name),
        cmocka_unit_test(test_messages_beside_pairs),
        cmocka_unit_test(test_long_name),
        cmocka_unit_test(test_json_variants),
        cmocka_unit_test(test_bad_rows),          cmocka_unit_test(test_bad_chat_rows),
        cmocka_unit_test(test_no_usable_row),
        cmocka_unit_test(test_convert_errors),    cmocka_unit_test(test_file_too_large),    cmocka_unit_test(test_hub_dir),
        cmocka_unit_test(test_hfcache_load),      cmocka_unit_test(test_hfcache_miss),
        cmocka_unit_test(test_demo_dataset),      cmocka_unit_test(test_threads),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
