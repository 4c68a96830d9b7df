/* test_llama_vocab.c — ptrain's tokenizer held to the originals: every vocabulary llama.cpp keeps
 * in its models/ folder (ggml-vocab-NAME.gguf with NAME.gguf.inp, the texts separated by lines
 * "__ggml_vocab_test__", and NAME.gguf.out, one line of ids per text, made by the model's own
 * Hugging Face tokenizer) is loaded from its GGUF and every text tokenized without special tokens,
 * as llama.cpp's test-tokenizer-0 does; every id must be equal. The files come from the source
 * archive of llama.cpp's Python bindings (share/scripts/fetch-llama-vocabs.sh) into
 * $PTRAIN_LLAMA_VOCABS, else ~/.cache/ptrain/llama-vocabs; without them the test skips, saying
 * why. Vocabularies of encoder-only models (bert-bge: WordPiece) are expected to be refused with
 * the reason; the others must load. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "ptrain/tokenizer.h"
#include "tok_corpus.h"

#define SEP "\n__ggml_vocab_test__\n"

static char vocab_dir[4096];

typedef struct {
    const char *name;
    bool refused; /* the loader must refuse it, naming why */
} vocab_case;

/* Every vocabulary with test texts in llama.cpp's models/ folder. Refused: bert-bge (WordPiece,
 * an encoder's). */
static const vocab_case cases[] = {
    {"gpt-2", false},         {"llama-bpe", false},    {"qwen2", false},          {"refact", false},
    {"starcoder", false},     {"llama-spm", false},    {"phi-3", false},          {"command-r", false},
    {"mpt", false},            {"falcon", false},        {"deepseek-coder", false},  {"deepseek-llm", false},
    {"qwen35", false},         {"gemma-4", false},       {"bert-bge", true},
};

static bool find_vocab_dir(void)
{
    const char *env = getenv("PTRAIN_LLAMA_VOCABS"), *home = getenv("HOME");
    if (env && *env) snprintf(vocab_dir, sizeof vocab_dir, "%s", env);
    else if (home) snprintf(vocab_dir, sizeof vocab_dir, "%s/.cache/ptrain/llama-vocabs", home);
    else return false;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/ggml-vocab-gpt-2.gguf.inp", vocab_dir);
    struct stat st;
    return stat(probe, &st) == 0;
}

/* The texts of an .inp file: the pieces between SEPs; the file ends with one (nothing after it)
 * or with the last text itself (gemma-4's). */
static size_t split_texts(char *b, size_t len, tok_text **out)
{
    size_t cap = 64, n = 0;
    tok_text *v = malloc(cap * sizeof *v);
    char *p = b, *end = b + len;
    while (p < end) {
        char *s = strstr(p, SEP);
        if (n == cap) v = realloc(v, (cap *= 2) * sizeof *v);
        v[n].text = p;
        v[n].len = s ? (size_t)(s - p) : (size_t)(end - p);
        n++;
        if (!s) break;
        *s = '\0';
        p = s + strlen(SEP);
    }
    *out = v;
    return n;
}

static void check_vocab(void **state)
{
    const vocab_case *c = *state;
    char path[4200], inp[4300], outp[4300];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", vocab_dir, c->name);
    snprintf(inp, sizeof inp, "%s.inp", path);
    snprintf(outp, sizeof outp, "%s.out", path);
    gguf_file g, *f = &g;
    if (gguf_open(path, f) != PT_OK) fail_msg("%s: %s", path, err_message());
    pt_tokenizer *tok = NULL;
    pt_status rc = tokenizer_from_gguf(f, &tok);
    gguf_close(f);
    if (c->refused) {
        if (rc == PT_OK) {
            tokenizer_free(tok);
            fail_msg("%s: loaded, but it should be refused", path);
        }
        print_message("%s: refused as expected: %s\n", c->name, err_message());
        assert_non_null(strstr(err_message(), c->name)); /* the message names the file */
        return;
    }
    if (rc != PT_OK) fail_msg("%s", err_message());
    size_t ilen, olen;
    char *ib = tok_slurp(inp, &ilen), *ob = tok_slurp(outp, &olen);
    if (!ib || !ob) fail_msg("cannot read %s or %s", inp, outp);
    tok_text *texts;
    size_t n = split_texts(ib, ilen, &texts), good = 0;
    char *line = ob;
    for (size_t i = 0; i < n; i++) {
        char *nl = line ? strchr(line, '\n') : NULL;
        if (!nl) fail_msg("%s: %zu texts but fewer lines of ids", outp, n);
        *nl = '\0';
        int32_t want[4096];
        size_t nwant = 0;
        for (char *q = line; *q;) {
            char *e;
            long v = strtol(q, &e, 10);
            if (e == q) break;
            if (nwant < 4096) want[nwant++] = (int32_t)v;
            q = e;
        }
        int32_t *ids = NULL;
        size_t nids = 0;
        if (tokenizer_encode(tok, texts[i].text, texts[i].len, false, &ids, &nids) != PT_OK) {
            print_message("%s text %zu: %s\n", c->name, i, err_message());
        } else if (nids == nwant && memcmp(ids, want, nids * sizeof *ids) == 0) {
            good++;
        } else {
            char shown[200];
            tok_fmt_text(shown, sizeof shown, &texts[i]);
            print_message("%s text %zu \"%s\":\n  want", c->name, i, shown);
            for (size_t k = 0; k < nwant; k++) print_message(" %d", want[k]);
            print_message("\n  got ");
            for (size_t k = 0; k < nids; k++) print_message(" %d", ids[k]);
            print_message("\n");
        }
        free(ids);
        line = nl + 1;
    }
    print_message("%s: %zu of %zu texts equal\n", c->name, good, n);
    free(texts);
    free(ib);
    free(ob);
    tokenizer_free(tok);
    assert_int_equal(good, n);
}

int main(void)
{
    if (!find_vocab_dir()) {
        /* TAP's plan for a skipped file (tests/tap-run.sh passes it on) */
        printf("1..0 # SKIP no llama.cpp vocabulary files in %s ($PTRAIN_LLAMA_VOCABS, else "
               "~/.cache/ptrain/llama-vocabs): share/scripts/fetch-llama-vocabs.sh fetches them from PyPI\n",
               vocab_dir[0] ? vocab_dir : "$HOME");
        return 0;
    }
    enum { N = sizeof cases / sizeof cases[0] };
    struct CMUnitTest tests[N];
    for (size_t i = 0; i < N; i++)
        tests[i] = (struct CMUnitTest){cases[i].name, check_vocab, NULL, NULL, (void *)&cases[i]};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
