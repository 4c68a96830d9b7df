/* fuzz-sources: src/tokenizer/bpe.c src/tokenizer/tok_api.c src/tokenizer/tok_utf8.c src/tokenizer/tok_buf.c src/tokenizer/tok_regex.c src/tokenizer/tok_maps.c src/tokenizer/tok_pretok.c src/tokenizer/tok_norm.c src/tokenizer/tok_added.c src/tokenizer/tok_load.c src/tokenizer/tok_spm.c src/tokenizer/tok_json.c src/tokenizer/tok_json_base.c src/tokenizer/tok_json_spm.c src/tokenizer/tok_gguf.c src/tokenizer/tok_pre_names.c src/tokenizer/tok_gguf_base.c src/tokenizer/tok_gguf_spm.c src/tokenizer/normalize.c src/tokenizer/tok_norm_align.c src/tokenizer/template_builtin.c src/tokenizer/template_set.c src/tokenizer/chat_template.c src/template/jvalue.c src/template/jjson.c src/template/jlex.c src/template/jparse.c src/template/jobject.c src/template/jfilter.c src/template/jeval.c src/template/jinja.c src/template/jchat.c src/model/arch.c src/model/gguf.c src/core/util.c src/core/jsonfile.c src/core/error.c src/core/shown.c src/backend/backend.c src/backend/device.c src/backend/nf4.c src/backend/quant.c */
/* fuzz_tokenizer.c — libFuzzer target for the tokenizer: the first input byte (mod 5) picks one of
 * four small committed tokenizer.json files (tests/data/tokenizer/: qwen2-mini with lstrip /
 * rstrip / single_word tokens, llama3-mini with ignore_merges, gpt2-mini with add_prefix_space,
 * and (4) spm, SentencePiece-style BPE with byte fallback), loaded once, and the rest is the
 * text; or (3) the rest is a GGUF image (byte-level or SentencePiece) whose tokenizer metadata is
 * loaded with tokenizer_from_gguf and, when it loads, encodes a fixed text. The text is encoded
 * with and without parse_special: invalid UTF-8 must be refused with PT_ERR_USER; otherwise every
 * id must be in the vocabulary and, without special tokens parsed, decoding must give the text
 * back (gpt2-mini adds a prefix space, so not there; spm when the text neither starts with a
 * space nor holds a "▁", which its decoder turns into spaces). The text also goes through
 * chat_template_detect and every chat template. Seed corpus: tests/fuzz/corpus/tokenizer/.
 * Built and run by tests/fuzz/run-fuzz.sh; the data is found through $PTRAIN_SRCDIR, else from
 * this file's own path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/tokenizer.h"
#define FUZZ_NAME "fuzz_tokenizer"
#define FUZZ_STUB_CPU_BACKEND
#include "support.h"

static const char *const names[] = {"qwen2-mini", "llama3-mini", "gpt2-mini", NULL, "spm"};
static pt_tokenizer *toks[5];

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void load(int k)
{
    const char *src = getenv("PTRAIN_SRCDIR");
    char root[4096], path[4200];
    if (src && *src) {
        snprintf(root, sizeof root, "%s", src);
    } else { /* __FILE__ is <root>/tests/fuzz/fuzz_tokenizer.c as run-fuzz.sh compiles it */
        snprintf(root, sizeof root, "%s", __FILE__);
        char *cut = strstr(root, "tests/fuzz/fuzz_tokenizer.c");
        if (cut) *cut = '\0';
        if (!*root) snprintf(root, sizeof root, ".");
    }
    snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", root, names[k]);
    if (tokenizer_from_json(path, &toks[k]) != PT_OK) {
        fprintf(stderr, "fuzz_tokenizer: %s\n", err_message());
        abort();
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (int k = 0; k < 5; k++)
        if (names[k]) load(k);
    return 0;
}

static void check_encode(const pt_tokenizer *tok, const char *text, size_t len, bool special, bool roundtrip)
{
    int32_t *ids;
    size_t n;
    pt_status rc = tokenizer_encode(tok, text, len, special, &ids, &n);
    if (rc == PT_ERR_USER) return; /* invalid UTF-8, checked by the caller */
    if (rc != PT_OK) abort();
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= tokenizer_vocab_size(tok)) abort();
    strbuf sb = {0};
    if (tokenizer_decode(tok, ids, n, &sb) != PT_OK) abort();
    if (roundtrip && (sb.len != len || (len && memcmp(sb.data, text, len) != 0))) abort();
    sb_free(&sb);
    free(ids);
}

static bool valid_utf8(const pt_tokenizer *tok, const char *text, size_t len)
{
    int32_t *ids;
    size_t n;
    pt_status rc = tokenizer_encode(tok, text, len, false, &ids, &n);
    if (rc == PT_OK) free(ids);
    else if (rc != PT_ERR_USER || !strstr(err_message(), "not valid UTF-8")) abort();
    return rc == PT_OK;
}

static void check_chat(const char *text)
{
    static const char *const templates[] = {"chatml", "smollm2", "llama-3", "alpaca", "gemma", "mistral"};
    chat_message msgs[] = {{"system", text, NULL}, {"user", text, NULL}, {"assistant", text, NULL}};
    chat_template_detect(text);
    for (int k = 0; k < 6; k++) {
        strbuf sb = {0};
        if (chat_render(templates[k], msgs, 3, true, &sb) != PT_OK) abort();
        sb_free(&sb);
    }
}

static void check_gguf(const uint8_t *data, size_t size)
{
    static const char text[] = "Hello <|x|> w\xc3\xb6rld 123 \xf0\x9f\x98\x80  \n";
    gguf_file g;
    if (gguf_open_memory("fuzz.gguf", data, size, &g) != PT_OK) return;
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_gguf(&g, &tok) == PT_OK) {
        check_encode(tok, text, sizeof text - 1, true, false);
        check_encode(tok, text, sizeof text - 1, false, false);
        tokenizer_free(tok);
    }
    gguf_close(&g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int k = data[0] % 5;
    if (k == 3) {
        check_gguf(data + 1, size - 1);
        return 0;
    }
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (!valid_utf8(toks[k], text, len)) return 0;
    bool spm_exact = len == 0 || (text[0] != ' ' && !memmem(text, len, "\xe2\x96\x81", 3));
    check_encode(toks[k], text, len, true, false);
    check_encode(toks[k], text, len, false, k == 4 ? spm_exact : k != 2);
    char *z = strndup(text, len);
    if (!z) return 0;
    check_chat(z);
    free(z);
    return 0;
}
