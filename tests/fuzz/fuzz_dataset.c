/* fuzz-sources: src/data/collate.c src/data/dataset.c src/data/parts.c src/data/format.c src/data/label.c src/data/pair.c src/data/unpaired.c src/data/pack.c src/data/random.c src/data/reader.c src/data/row_list.c src/data/csv.c src/data/parquet.c src/data/parquet_meta.c src/data/parquet_types.c src/data/rows.c src/data/sampler.c src/data/readme.c src/data/pattern.c src/data/splits.c src/data/source.c src/data/split.c src/data/stats.c src/tokenizer/bpe.c src/tokenizer/tok_api.c src/tokenizer/tok_utf8.c src/tokenizer/tok_buf.c src/tokenizer/tok_regex.c src/tokenizer/tok_maps.c src/tokenizer/tok_pretok.c src/tokenizer/tok_norm.c src/tokenizer/tok_added.c src/tokenizer/tok_load.c src/tokenizer/tok_spm.c src/tokenizer/tok_json.c src/tokenizer/tok_json_base.c src/tokenizer/tok_json_spm.c src/tokenizer/tok_gguf.c src/tokenizer/tok_pre_names.c src/tokenizer/tok_gguf_base.c src/tokenizer/tok_gguf_spm.c src/tokenizer/normalize.c src/tokenizer/tok_norm_align.c src/tokenizer/chat_template.c src/model/arch.c src/model/gguf.c src/model/hfcache.c src/core/jsonfile.c src/core/util.c src/core/error.c src/core/shown.c src/tokenizer/template_builtin.c src/template/jvalue.c src/template/jjson.c src/template/jlex.c src/template/jparse.c src/template/jobject.c src/template/jfilter.c src/template/jeval.c src/template/jinja.c src/template/jchat.c src/backend/backend.c src/backend/device.c src/backend/nf4.c src/backend/quant.c src/tokenizer/template_set.c */
/* fuzz_dataset.c — libFuzzer target for dataset rows, along the path training data takes: the
 * input after a 3-byte header is written to a file rows.json, rows.jsonl or rows.csv and read as
 * the one `dataset:` entry of a config by dataset_prepare (the JSON / JSON Lines / CSV readers, rename, filter,
 * num_samples, shuffle, format detection and formatting of ShareGPT `conversations`, `messages`,
 * Alpaca and plain text, chat rendering with a built-in template, tokenizing with the committed
 * SmolLM2 tokenizer (tests/data/tokenizer/smollm2, loaded once and found through $PTRAIN_SRCDIR,
 * else from this file's own path), labelling, the train/eval split and packing); the report is
 * written to /dev/null, and every batch of an epoch is collated both ways.
 *
 * Header: byte 0 = template (bits 0-2: chatml, smollm2, llama-3, alpaca, gemma, mistral, the
 * tokenizer's own, an unknown name), assistant_only_loss (bits 3-4: auto, false, true, auto),
 * .jsonl (bit 5), packing (bit 6), val_split_ratio 0.3 (bit 7); byte 1 = max_seq_length (bit 7:
 * 2048, else 1 + bits 0-5), mistral-v3 in place of byte 0's template (bit 6); byte 2 = shuffle
 * (bit 0), num_samples 1 + bits 6-7 (bit 1), filter lang == en (bit 2), rename prompt/response
 * to instruction/output (bit 3), dataset_text_field "content" instead of "text" (bit 4),
 * the file is rows.csv (bit 5, in place of byte 0's bit 5).
 *
 * Invariants: no crash, leak, hang or sanitizer report; a failure is a user error with a message
 * and leaves both datasets empty; a success gives examples of 1 to max_seq_length tokens, every
 * id in the vocabulary, every label -100 or its token's id and at least one label (before
 * packing), packed segments numbered 1, 2, ... in order, row counts that add up (read = bad +
 * filtered + limited + empty + no_loss + kept) and batches whose targets are labels or -100.
 * Rows that mention "label" are read a second time as KTO's (dataset_options.unpaired: prompt /
 * completion / label rows and pairs unrolled, no packing): examples of one sequence (segment 1 or
 * 2) of at most twice max_seq_length tokens, and sequential micro-batches of 2 with their KL
 * sequences (batch_collate_unpaired) whose segments follow its layout.
 * Rows that mention "chosen" are read a second time as reward modelling's pairs
 * (dataset_options.pairs_reward): each example the pair's two whole sequences (segment 1 then 2),
 * each of 1 to max_seq_length tokens, every token labelled.
 * Rows that mention "prompt" are read a third time as GRPO's (dataset_options.prompts, with a
 * max_prompt_length from the options byte): each example the prompt's tokens (segment 1, at most
 * max_prompt_length of them) then the row's columns as JSON bytes (segment 2), nothing labelled;
 * dataset_prompt_row gives the tokens back and a JSON object with the prompt.
 * Seed corpus: tests/fuzz/corpus/dataset/ (tests/fuzz/make_corpus_dataset.sh). Built and run by
 * tests/fuzz/run-fuzz.sh. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/dataset.h"
#include "ptrain/error.h"
#include "ptrain/tokenizer.h"

#define FUZZ_NAME "fuzz_dataset"
#define FUZZ_STUB_CPU_BACKEND
#include "support.h"

static pt_tokenizer *tok;
static FILE *devnull;
static char dir[64], json_path[128], jsonl_path[128], csv_path[128];

int LLVMFuzzerInitialize(int *argc, char ***argv);

static void remove_dir(void)
{
    unlink(json_path);
    unlink(jsonl_path);
    unlink(csv_path);
    rmdir(dir);
    tokenizer_free(tok);
    if (devnull) fclose(devnull);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *src = getenv("PTRAIN_SRCDIR");
    char root[4096], path[4200];
    if (src && *src) {
        snprintf(root, sizeof root, "%s", src);
    } else { /* __FILE__ is <root>/tests/fuzz/fuzz_dataset.c as run-fuzz.sh compiles it */
        snprintf(root, sizeof root, "%s", __FILE__);
        char *cut = strstr(root, "tests/fuzz/fuzz_dataset.c");
        if (cut) *cut = '\0';
        if (!*root) snprintf(root, sizeof root, ".");
    }
    snprintf(path, sizeof path, "%s/tests/data/tokenizer/smollm2/tokenizer.json", root);
    if (tokenizer_from_json(path, &tok) != PT_OK) {
        fprintf(stderr, "fuzz_dataset: %s\n", err_message());
        abort();
    }
    devnull = fopen("/dev/null", "w");
    CHECK(devnull != NULL);
    snprintf(dir, sizeof dir, "/tmp/fuzz_dataset.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    snprintf(json_path, sizeof json_path, "%s/rows.json", dir);
    snprintf(jsonl_path, sizeof jsonl_path, "%s/rows.jsonl", dir);
    snprintf(csv_path, sizeof csv_path, "%s/rows.csv", dir);
    atexit(remove_dir);
    return 0;
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
}

static void check_examples(const pt_dataset *ds, int32_t max_len, bool packed)
{
    int32_t vocab = tokenizer_vocab_size(tok);
    CHECK(ds->n == 0 || ds->ex);
    for (size_t i = 0; i < ds->n; i++) {
        const pt_example *ex = &ds->ex[i];
        CHECK(ex->len >= 1 && ex->len <= max_len && ex->ids && ex->labels);
        CHECK(packed == (ex->segments != NULL));
        bool any = false;
        for (int32_t t = 0; t < ex->len; t++) {
            CHECK(ex->ids[t] >= 0 && ex->ids[t] < vocab);
            CHECK(ex->labels[t] == PT_IGNORE_INDEX || ex->labels[t] == ex->ids[t]);
            any |= ex->labels[t] != PT_IGNORE_INDEX;
            if (packed)
                CHECK(t == 0 ? ex->segments[t] == 1
                             : ex->segments[t] == ex->segments[t - 1] || ex->segments[t] == ex->segments[t - 1] + 1);
        }
        CHECK(any || packed);
    }
}

static void check_batches(const pt_dataset *ds)
{
    if (ds->n == 0) return;
    pt_sampler s;
    CHECK(sampler_init(&s, ds->n, 0, 1, 2) == PT_OK);
    CHECK(sampler_epoch(&s, 7, 0) == PT_OK);
    for (size_t b = 0; b < sampler_batches(&s); b++) {
        const size_t *idx;
        size_t n = sampler_batch(&s, b, &idx);
        pt_batch flat, padded;
        CHECK(batch_collate(ds, idx, n, &flat) == PT_OK);
        CHECK(batch_collate_padded(ds, idx, n, 0, &padded) == PT_OK);
        size_t cells = (size_t)flat.rows * (size_t)flat.cols;
        for (size_t c = 0; c < cells; c++) {
            CHECK(flat.targets[c] == PT_IGNORE_INDEX || flat.targets[c] == flat.labels[c + 1]);
            CHECK(flat.segments[c] >= 1 && flat.pos[c] >= 0);
        }
        batch_free(&flat);
        batch_free(&padded);
    }
    sampler_free(&s);
}

static void check_stats(const pt_dataset *ds)
{
    CHECK(ds->n_stats == 1 && ds->stats);
    const pt_dataset_stats *st = &ds->stats[0];
    CHECK(st->read == st->bad + st->filtered + st->limited + st->empty + st->no_loss + st->kept);
    CHECK(st->kept >= 1 && st->truncated <= st->kept);
    CHECK(st->n_bad_rows == (st->bad < DATASET_BAD_SHOWN ? st->bad : DATASET_BAD_SHOWN));
    for (int i = 0; i < st->n_bad_rows; i++) CHECK(st->bad_rows[i] && *st->bad_rows[i]);
}

static bool mentions_label(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i + 5 <= n; i++)
        if (!memcmp(p + i, "label", 5)) return true;
    return false;
}

static bool mentions(const uint8_t *p, size_t n, const char *word)
{
    size_t w = strlen(word);
    for (size_t i = 0; i + w <= n; i++)
        if (!memcmp(p + i, word, w)) return true;
    return false;
}

/* Reward modelling's reading of the same rows (see the header comment). */
/* dataset_prepare on opts: true with the sets made; false when it refused the input, which must
 * be one user error with a message and both sets left zeroed. */
static bool prepared(const dataset_options *opts, pt_dataset *train, pt_dataset *eval)
{
    static const pt_dataset zero;
    pt_status st = dataset_prepare(opts, tok, devnull, train, eval);
    if (st == PT_OK) return true;
    CHECK(st == PT_ERR_USER && *err_message());
    CHECK(!memcmp(train, &zero, sizeof *train) && !memcmp(eval, &zero, sizeof *eval));
    err_clear();
    return false;
}

static void check_reward(dataset_options opts)
{
    opts.pairs = opts.pairs_reward = true, opts.packing = false;
    pt_dataset train, eval;
    if (!prepared(&opts, &train, &eval)) return;
    int32_t max_len = (int32_t)opts.max_seq_length, vocab = tokenizer_vocab_size(tok);
    const pt_dataset *sets[2] = {&train, &eval};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sets[k]->n; i++) {
            const pt_example *ex = &sets[k]->ex[i];
            int32_t n1 = 0;
            CHECK(ex->len >= 2 && ex->len <= 2 * max_len && ex->segments && ex->segments[0] == 1);
            for (int32_t t = 0; t < ex->len; t++) {
                CHECK(ex->ids[t] >= 0 && ex->ids[t] < vocab && ex->labels[t] == ex->ids[t]);
                CHECK((ex->segments[t] == 1 || ex->segments[t] == 2) && (t == 0 || ex->segments[t] >= ex->segments[t - 1]));
                n1 += ex->segments[t] == 1;
            }
            CHECK(n1 >= 1 && n1 <= max_len && ex->len - n1 >= 1 && ex->len - n1 <= max_len);
        }
    dataset_free(&train);
    dataset_free(&eval);
}

/* GRPO's reading of the same rows (see the header comment). */
static void check_prompts(dataset_options opts, long max_prompt)
{
    opts.prompts = true, opts.packing = false, opts.max_prompt_length = max_prompt;
    pt_dataset train, eval;
    if (!prepared(&opts, &train, &eval)) return;
    int32_t vocab = tokenizer_vocab_size(tok);
    const pt_dataset *sets[2] = {&train, &eval};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < sets[k]->n; i++) {
            const pt_example *ex = &sets[k]->ex[i];
            const int32_t *ids;
            int32_t np;
            char *cols;
            CHECK(ex->len >= 2 && ex->segments && ex->segments[0] == 1 && ex->segments[ex->len - 1] == 2);
            CHECK(dataset_prompt_row(ex, &ids, &np, &cols) == PT_OK);
            CHECK(np >= 1 && (max_prompt == 0 || np <= max_prompt) && strlen(cols) == (size_t)(ex->len - np));
            for (int32_t t = 0; t < ex->len; t++) {
                CHECK(ex->labels[t] == PT_IGNORE_INDEX && ex->segments[t] == (t < np ? 1 : 2));
                CHECK(t < np ? ids[t] >= 0 && ids[t] < vocab : ex->ids[t] >= 1 && ex->ids[t] <= 255);
            }
            json_t *row = json_loads(cols, 0, NULL);
            CHECK(json_is_object(row) && json_object_get(row, "prompt"));
            json_decref(row);
            free(cols);
        }
    dataset_free(&train);
    dataset_free(&eval);
}

/* KTO's reading of the same rows (see the header comment). */
static void check_unpaired(dataset_options opts)
{
    opts.unpaired = true, opts.packing = false;
    pt_dataset train, eval;
    if (!prepared(&opts, &train, &eval)) return;
    int32_t max_len = (int32_t)opts.max_seq_length, vocab = tokenizer_vocab_size(tok);
    const pt_dataset *sets[2] = {&train, &eval};
    for (int k = 0; k < 2; k++) {
        const pt_dataset *ds = sets[k];
        for (size_t i = 0; i < ds->n; i++) {
            const pt_example *ex = &ds->ex[i];
            CHECK(ex->len >= 1 && ex->len <= 2 * max_len && ex->segments);
            bool any = false;
            for (int32_t t = 0; t < ex->len; t++) {
                CHECK(ex->ids[t] >= 0 && ex->ids[t] < vocab && ex->segments[t] == ex->segments[0]);
                CHECK(ex->labels[t] == PT_IGNORE_INDEX || ex->labels[t] == ex->ids[t]);
                any |= ex->labels[t] != PT_IGNORE_INDEX;
            }
            CHECK(any && (ex->segments[0] == 1 || ex->segments[0] == 2));
        }
        for (size_t from = 0; from < ds->n; from += 2) {
            size_t idx[2] = {from, from + 1}, n = from + 1 < ds->n ? 2 : 1;
            pt_batch b;
            CHECK(batch_collate_unpaired(ds, idx, n, max_len, &b) == PT_OK);
            int32_t last = 0;
            for (int c = 0; c < b.cols; c++) {
                CHECK(b.segments[c] >= last && b.segments[c] >= 1 && b.segments[c] <= 3 * (int32_t)n);
                CHECK(b.targets[c] == PT_IGNORE_INDEX || b.targets[c] == b.labels[c + 1]);
                last = b.segments[c];
            }
            CHECK(last == 3 * (int32_t)n);
            batch_free(&b);
        }
    }
    dataset_free(&train);
    dataset_free(&eval);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const templates[] = {"chatml", "smollm2", "llama-3", "alpaca", "gemma", "mistral", NULL, "nope"};
    static const pt_tristate assistant_only[] = {PT_AUTO, PT_FALSE, PT_TRUE, PT_AUTO};
    static char *rename_from[] = {"prompt", "response"}, *rename_to[] = {"instruction", "output"};
    if (size < 3) return 0;
    uint8_t o0 = data[0], o1 = data[1], o2 = data[2];
    const char *path = o2 & 0x20 ? csv_path : o0 & 0x20 ? jsonl_path : json_path;
    write_file(path, data + 3, size - 3);

    pt_dataset_config d = {
        .name = (char *)path,
        .split_type = "train",
        .format = DATASET_JSON,
        .filter_data = o2 & 0x04,
        .filter_column_value = "lang",
        .filter_value = "en",
        .num_samples = o2 & 0x02 ? 1 + (o2 >> 6) : -1,
        .shuffle = o2 & 0x01,
        .seed = 11,
        .line = 1,
    };
    if (o2 & 0x08) d.rename = (pt_strmap){.keys = rename_from, .values = rename_to, .n = 2};
    dataset_options opts = {
        .max_seq_length = o1 & 0x80 ? 2048 : 1 + (o1 & 0x3f),
        .chat_template = (char *)(o1 & 0x40 ? "mistral-v3" : templates[o0 & 7]),
        .assistant_only_loss = assistant_only[(o0 >> 3) & 3],
        .datasets = &d,
        .n_datasets = 1,
        .dataset_text_field = o2 & 0x10 ? "content" : "text",
        .packing = o0 & 0x40,
        .val_split_ratio = o0 & 0x80 ? 0.3 : 0,
        .seed = 3407,
    };

    if (mentions_label(data + 3, size - 3)) check_unpaired(opts);
    if (mentions(data + 3, size - 3, "chosen")) check_reward(opts);
    if (mentions(data + 3, size - 3, "prompt")) check_prompts(opts, o1 & 0x20 ? 1 + (o1 & 0x1f) : 0);
    pt_dataset train, eval;
    if (!prepared(&opts, &train, &eval)) return 0;
    int32_t max_len = (int32_t)opts.max_seq_length;
    CHECK(train.n >= 1 && train.max_len == max_len && train.packed == opts.packing);
    CHECK(opts.val_split_ratio == 0 ? eval.n == 0 : eval.n >= 1);
    check_examples(&train, max_len, opts.packing);
    check_examples(&eval, max_len, opts.packing);
    check_stats(&train);
    dataset_report(&train, devnull);
    check_batches(&train);
    check_batches(&eval);
    dataset_free(&train);
    dataset_free(&eval);
    err_clear();
    return 0;
}
