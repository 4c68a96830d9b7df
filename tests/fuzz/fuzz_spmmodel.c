/* fuzz-sources: src/tokenizer/spm_proto.c src/tokenizer/normalize.c src/tokenizer/tok_spm_model.c src/tokenizer/tok_spm_config.c src/tokenizer/tok_norm_align.c src/tokenizer/bpe.c src/tokenizer/tok_api.c src/tokenizer/tok_utf8.c src/tokenizer/tok_buf.c src/tokenizer/tok_regex.c src/tokenizer/tok_maps.c src/tokenizer/tok_pretok.c src/tokenizer/tok_norm.c src/tokenizer/tok_added.c src/tokenizer/tok_load.c src/tokenizer/tok_spm.c src/tokenizer/tok_json.c src/tokenizer/tok_json_base.c src/tokenizer/tok_json_spm.c src/tokenizer/tok_gguf.c src/tokenizer/tok_pre_names.c src/tokenizer/tok_gguf_base.c src/tokenizer/tok_gguf_spm.c src/tokenizer/chat_template.c src/model/arch.c src/model/gguf.c src/core/util.c src/core/jsonfile.c src/core/error.c src/core/shown.c src/tokenizer/template_builtin.c src/tokenizer/template_set.c src/template/jvalue.c src/template/jjson.c src/template/jlex.c src/template/jparse.c src/template/jobject.c src/template/jfilter.c src/template/jeval.c src/template/jinja.c src/template/jchat.c src/backend/backend.c src/backend/device.c src/backend/nf4.c src/backend/quant.c */
/* fuzz_spmmodel.c — libFuzzer target for what reads SentencePiece models and normalizes text: the
 * first input byte (mod 3) picks
 *   0: the rest is a tokenizer.model (protobuf), loaded with one of four tokenizer_config.json
 *      texts (the first byte / 3 picks it: none, LlamaTokenizer, legacy false, LlamaTokenizer
 *      legacy without add_prefix_space); a bad one must fail with PT_ERR_USER or
 *      PT_ERR_UNSUPPORTED; one that loads encodes fixed texts (ids in the vocabulary) and decodes;
 *   1: the rest is a precompiled_charsmap; one that loads normalizes fixed texts, with and without
 *      alignments, to the same valid UTF-8;
 *   2: the rest is text: through NFC/NFD/NFKC/NFKD and the charsmap of the committed nfkc.model
 *      (valid UTF-8 out, the aligned and plain results equal), and encoded by that model's
 *      tokenizer with prepend "first" (the alignment path) and decoded.
 * Seed corpus: tests/fuzz/corpus/spmmodel/ (written by tests/reference/make_spmmodel_goldens.py).
 * Built and run by tests/fuzz/run-fuzz.sh; nfkc.model is found through $PTRAIN_SRCDIR, else from
 * this file's own path. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "ptrain/tokenizer.h"
#include "tokenizer/normalize.h"
#include "tokenizer/spm_proto.h"
#define FUZZ_NAME "fuzz_spmmodel"
#define FUZZ_STUB_CPU_BACKEND
#include "support.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const texts[] = {"Hello  world", " x", "\xef\xbc\xa1\xef\xac\x81 e\xcc\x81", "<s>a</s> <t>b",
                                    "\xe2\x80\xa8\xe2\x85\xa7\x07y", "", "\xf0\x9f\x98\x80  \n\t"};
#define N_TEXTS (sizeof texts / sizeof texts[0])

static spm_model nfkc;
static charsmap *nfkc_map;
static pt_tokenizer *nfkc_tok;

static void load_nfkc(void)
{
    const char *src = getenv("PTRAIN_SRCDIR");
    char root[4096], path[4200];
    if (src && *src) {
        snprintf(root, sizeof root, "%s", src);
    } else { /* __FILE__ is <root>/tests/fuzz/fuzz_spmmodel.c as run-fuzz.sh compiles it */
        snprintf(root, sizeof root, "%s", __FILE__);
        char *cut = strstr(root, "tests/fuzz/fuzz_spmmodel.c");
        if (cut) *cut = '\0';
        if (!*root) snprintf(root, sizeof root, ".");
    }
    snprintf(path, sizeof path, "%s/tests/data/tokenizer/spm-model/nfkc.model", root);
    FILE *f = fopen(path, "rb"); /* the tokenizer, from the file's bytes */
    uint8_t *b = malloc(1 << 20);
    size_t n = f && b ? fread(b, 1, 1 << 20, f) : 0;
    if (f) fclose(f);
    if (spm_model_read(path, &nfkc) != PT_OK ||
        charsmap_load(path, "charsmap", (const uint8_t *)nfkc.charsmap.p, nfkc.charsmap.len, &nfkc_map) != PT_OK ||
        tokenizer_from_spm_memory(path, b, n, "{\"legacy\": false}", &nfkc_tok) != PT_OK) {
        fprintf(stderr, "fuzz_spmmodel: %s\n", err_message());
        abort();
    }
    free(b);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    load_nfkc();
    return 0;
}

/* Well-formed UTF-8 (no overlong forms, surrogates or code points above U+10FFFF). */
static bool utf8_ok(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : c > 0xf4 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 ? 2 : 0;
        if (!k || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] & 0xc0) != 0x80) return false;
        if ((c == 0xe0 && s[i + 1] < 0xa0) || (c == 0xed && s[i + 1] >= 0xa0) || (c == 0xf0 && s[i + 1] < 0x90) ||
            (c == 0xf4 && s[i + 1] >= 0x90))
            return false;
        i += k;
    }
    return true;
}

static void check_tokenizer(const pt_tokenizer *tok, const char *text, size_t len)
{
    for (int special = 0; special < 2; special++) {
        int32_t *ids;
        size_t n;
        pt_status rc = tokenizer_encode(tok, text, len, special, &ids, &n);
        if (rc == PT_ERR_USER) continue; /* invalid UTF-8 */
        if (rc != PT_OK) abort();
        for (size_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= tokenizer_vocab_size(tok)) abort();
        strbuf sb = {0};
        if (tokenizer_decode(tok, ids, n, &sb) != PT_OK) abort();
        sb_free(&sb);
        free(ids);
    }
}

static void check_model(const uint8_t *data, size_t size, int cfg)
{
    static const char *const configs[] = {NULL, "{\"tokenizer_class\": \"LlamaTokenizer\"}", "{\"legacy\": false}",
                                          "{\"tokenizer_class\": \"LlamaTokenizer\", \"legacy\": true, "
                                          "\"add_prefix_space\": false, \"add_bos_token\": true}"};
    pt_tokenizer *tok = NULL;
    pt_status rc = tokenizer_from_spm_memory("fuzz.model", data, size, configs[cfg], &tok);
    if (rc != PT_OK) {
        if (rc != PT_ERR_USER && rc != PT_ERR_UNSUPPORTED) abort();
        return;
    }
    for (size_t k = 0; k < N_TEXTS; k++) check_tokenizer(tok, texts[k], strlen(texts[k]));
    tokenizer_free(tok);
}

/* m on s: plain and aligned results equal, valid UTF-8. */
static void check_charsmap(const charsmap *m, const char *s, size_t len)
{
    char *a, *b;
    size_t an, bn;
    uint32_t *al = calloc(len + 1, sizeof *al), *out_al = NULL;
    if (!al || charsmap_apply(m, s, len, &a, &an) != PT_OK) abort();
    if (charsmap_apply_aligned(m, s, len, al, &b, &bn, &out_al) != PT_OK) abort();
    if (an != bn || memcmp(a, b, an) != 0 || !utf8_ok(a, an)) abort();
    free(a);
    free(b);
    free(al);
    free(out_al);
}

static void check_blob(const uint8_t *data, size_t size)
{
    charsmap *m;
    if (charsmap_load("fuzz", "charsmap", data, size, &m) != PT_OK) return;
    for (size_t k = 0; k < N_TEXTS; k++) check_charsmap(m, texts[k], strlen(texts[k]));
    charsmap_free(m);
}

static void check_text(const char *text, size_t len)
{
    if (!utf8_ok(text, len)) return;
    for (int form = 0; form < 4; form++) {
        char *out;
        size_t n;
        if (unorm_apply((unorm_form)form, text, len, &out, &n) != PT_OK || !utf8_ok(out, n)) abort();
        free(out);
    }
    check_charsmap(nfkc_map, text, len);
    check_tokenizer(nfkc_tok, text, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int k = data[0] % 3;
    if (k == 0) check_model(data + 1, size - 1, data[0] / 3 % 4);
    else if (k == 1) check_blob(data + 1, size - 1);
    else check_text((const char *)data + 1, size - 1);
    return 0;
}
