/* model_io.c — the front door: resolve a model name, then load a GGUF file (model and tokenizer
 * from the one file) or a Hugging Face directory (config.json, the safetensors, and the tokenizer
 * files: hf_tokenizer.c), and check that the tokenizer's ids fit the model's embedding. */
#include <stdio.h>
#include <string.h>

#include "ptrain/hf_model.h"
#include "ptrain/model_io.h"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

static pt_status load_gguf(const char *path, const pt_load_options *opts, pt_backend *be, pt_model *m,
                           pt_tokenizer **tok)
{
    gguf_file f;
    TRY(gguf_open(path, &f));
    pt_status st = tok ? tokenizer_from_gguf(&f, tok) : PT_OK;
    if (st == PT_OK) st = model_from_gguf(&f, be, opts, m);
    gguf_close(&f);
    return st;
}

static pt_status load_hf(const char *path, const pt_load_options *opts, pt_backend *be, pt_model *m,
                         pt_tokenizer **tok)
{
    char dir[4096], config[4200];
    model_hf_dir(path, dir, sizeof dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    hf_config hc;
    TRY(hf_config_read(config, &hc));
    st_set s;
    TRY(st_set_open(ends_with(path, ".safetensors") ? path : dir, &s));
    pt_status st = model_from_hf(&hc, &s, be, opts, m);
    st_set_close(&s);
    if (st == PT_OK && tok) st = tokenizer_from_hf_dir(dir, tok);
    return st;
}

static pt_status load_tokenizer(const char *path, pt_model_format fmt, pt_tokenizer **tok)
{
    if (fmt == PT_MODEL_HF) {
        char dir[4096];
        model_hf_dir(path, dir, sizeof dir);
        return tokenizer_from_hf_dir(dir, tok);
    }
    gguf_file f;
    TRY(gguf_open(path, &f));
    pt_status st = tokenizer_from_gguf(&f, tok);
    gguf_close(&f);
    return st;
}

pt_status model_load_tokenizer(const char *name, const char *revision, pt_tokenizer **tok, char *resolved, size_t len,
                               pt_model_format *fmt)
{
    *tok = NULL;
    char path[4096];
    TRY(model_resolve(name, revision, path, sizeof path, fmt));
    if (resolved && len) snprintf(resolved, len, "%s", path);
    return load_tokenizer(path, *fmt, tok);
}

pt_status model_check_vocab(const pt_model *m, const pt_tokenizer *tok, const char *path)
{
    int32_t n = tokenizer_vocab_size(tok);
    if (n <= m->cfg.vocab) return PT_OK;
    return ERR(PT_ERR_USER, "%s: the tokenizer has %d tokens but the model's embedding only %d rows: the tokenizer "
               "belongs to another model", shown_text(path).s, n, m->cfg.vocab);
}

pt_status model_load(const char *name, const char *revision, const pt_load_options *opts, pt_backend *be,
                     pt_model *m, pt_tokenizer **tok, char *resolved, size_t len)
{
    char path[4096];
    pt_model_format fmt;
    memset(m, 0, sizeof *m);
    if (tok) *tok = NULL;
    TRY(model_resolve(name, revision, path, sizeof path, &fmt));
    if (resolved && len) snprintf(resolved, len, "%s", path);
    pt_status st = fmt == PT_MODEL_GGUF ? load_gguf(path, opts, be, m, tok) : load_hf(path, opts, be, m, tok);
    if (st == PT_OK && tok) st = model_check_vocab(m, *tok, path);
    if (st != PT_OK) {
        model_free(m);
        if (tok) tokenizer_free(*tok), *tok = NULL;
    }
    return st;
}
