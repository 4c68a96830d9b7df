/* fuzz-sources: src/tokenizer/bpe.c src/tokenizer/tok_api.c src/tokenizer/tok_utf8.c src/tokenizer/tok_buf.c src/tokenizer/tok_regex.c src/tokenizer/tok_maps.c src/tokenizer/tok_pretok.c src/tokenizer/tok_norm.c src/tokenizer/tok_added.c src/tokenizer/tok_load.c src/tokenizer/tok_spm.c src/tokenizer/tok_json.c src/tokenizer/tok_json_base.c src/tokenizer/tok_json_spm.c src/tokenizer/tok_gguf.c src/tokenizer/tok_pre_names.c src/tokenizer/tok_gguf_base.c src/tokenizer/tok_gguf_spm.c src/tokenizer/normalize.c src/tokenizer/tok_norm_align.c src/tokenizer/template_builtin.c src/tokenizer/chat_template.c src/tokenizer/template_set.c src/template/jvalue.c src/template/jjson.c src/template/jlex.c src/template/jparse.c src/template/jobject.c src/template/jfilter.c src/template/jeval.c src/template/jinja.c src/template/jchat.c src/model/arch.c src/model/gguf.c src/core/util.c src/core/jsonfile.c src/core/error.c src/core/shown.c src/backend/backend.c src/backend/device.c src/backend/nf4.c src/backend/quant.c */
/* fuzz_tokjson.c — libFuzzer target for the tokenizer.json path: the input is one byte (bit 0: a
 * tokenizer_config.json follows), a tokenizer.json text, and with bit 0 a 0x00 byte and the
 * tokenizer_config.json text; both are written to a temporary directory and loaded with
 * tokenizer_from_json. A bad file must be refused with PT_ERR_USER or PT_ERR_UNSUPPORTED (one
 * message); one that loads must encode fixed texts (code, CJK, emoji, white-space runs, special
 * tokens written in the text) with and without parse_special to ids of its vocabulary, decode
 * them, and refuse invalid UTF-8 saying so. Nothing is compared with another tokenizer: it must
 * not crash, leak or hang. Seed corpus: tests/fuzz/corpus/tokjson/ (tests/fuzz/make_corpus_tok.py).
 * Built and run by tests/fuzz/run-fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/error.h"
#include "ptrain/tokenizer.h"
#define FUZZ_NAME "fuzz_tokjson"
#define FUZZ_STUB_CPU_BACKEND
#include "support.h"

static char dir[256], json_path[300], config_path[300];

int LLVMFuzzerInitialize(int *argc, char ***argv);

static void cleanup(void)
{
    unlink(json_path);
    unlink(config_path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/fuzz_tokjson.XXXXXX", base);
    if (!mkdtemp(dir)) {
        perror("fuzz_tokjson: mkdtemp");
        abort();
    }
    snprintf(json_path, sizeof json_path, "%s/tokenizer.json", dir);
    snprintf(config_path, sizeof config_path, "%s/tokenizer_config.json", dir);
    atexit(cleanup);
    return 0;
}

static void put(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, size, f) == size || size == 0);
    CHECK(fclose(f) == 0);
}

static void encode_all(const pt_tokenizer *tok)
{
    static const char *const texts[] = {
        "Hello world! The quick brown fox 1234567890.", "def f(x):\n\treturn x * 2  # code\n",
        "\xe6\x9c\xba\xe5\x99\xa8\xe5\xad\xa6\xe4\xb9\xa0 \xf0\x9f\x98\x80 caf\xc3\xa9",
        "   spaces   \n\n\n\t\ttabs \xe2\x96\x81 ", "<s>x</s><|im_start|>user<start_of_turn> word <tool> y", "",
        "a , b . c ! d ? it 's I 'm we 've they 're don 't ' x ' .",
    };
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++)
        for (int special = 0; special < 2; special++) {
            int32_t *ids = NULL;
            size_t n = 0;
            pt_status rc = tokenizer_encode(tok, texts[k], strlen(texts[k]), special, &ids, &n);
            CHECK(rc == PT_OK || rc == PT_ERR_USER); /* a normalizer may make text the model cannot take */
            for (size_t i = 0; rc == PT_OK && i < n; i++) CHECK(ids[i] >= 0 && ids[i] < tokenizer_vocab_size(tok));
            strbuf sb = {0};
            if (rc == PT_OK) CHECK(tokenizer_decode(tok, ids, n, &sb) == PT_OK);
            sb_free(&sb);
            free(ids);
        }
    int32_t *ids = NULL;
    size_t n = 0;
    pt_status rc = tokenizer_encode(tok, "ab\xff", 3, true, &ids, &n);
    free(ids);
    CHECK(rc == PT_ERR_USER && strstr(err_message(), "not valid UTF-8"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    const uint8_t *json = data + 1, *cfg = NULL;
    size_t json_len = size - 1, cfg_len = 0;
    if (data[0] & 1) {
        const uint8_t *nul = memchr(json, 0, json_len);
        if (nul) {
            cfg = nul + 1;
            cfg_len = (size_t)(data + size - cfg);
            json_len = (size_t)(nul - json);
        }
    }
    put(json_path, json, json_len);
    if (cfg) put(config_path, cfg, cfg_len);
    else unlink(config_path);
    pt_tokenizer *tok = NULL;
    pt_status rc = tokenizer_from_json(json_path, &tok);
    if (rc != PT_OK) {
        CHECK(tok == NULL);
        CHECK(rc == PT_ERR_USER || rc == PT_ERR_UNSUPPORTED);
        CHECK(err_message()[0] != '\0');
        return 0;
    }
    encode_all(tok);
    tokenizer_free(tok);
    return 0;
}
