/* hf_tokenizer.c — the tokenizer of a Hugging Face model directory: tokenizer.json, else (older
 * Llama 2 and Mistral repositories) the SentencePiece tokenizer.model, with bos/eos from the
 * tokenizer_config.json beside it, and the chat template as transformers picks it:
 * chat_template.jinja when the directory has one (transformers 5 saves the
 * template there and may leave it out of tokenizer_config.json), else tokenizer_config.json's
 * chat_template: a string, or a list of {name, template} of which the one named "default" counts
 * (the others kept by name); and the named templates transformers saves as
 * additional_chat_templates/NAME.jinja. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/model_io.h"

#define JINJA_MAX (4 << 20) /* chat templates are kilobytes; this is not one */

static pt_status jinja_fail(const char *path, const char *why)
{
    return ERR(PT_ERR_USER, "%s: cannot read the model's chat template: %s; make the file a readable chat template "
               "or remove it (the chat_template of tokenizer_config.json is used then)", shown_text(path).s, why);
}

/* The whole of the open file f (path) as a string into *text (malloc'd). */
static pt_status jinja_slurp(FILE *f, const char *path, char **text)
{
    char *buf = malloc(JINJA_MAX + 1);
    TRY_ALLOC(buf);
    size_t n = fread(buf, 1, JINJA_MAX + 1, f);
    if (ferror(f)) {
        free(buf);
        return jinja_fail(path, strerror(errno ? errno : EIO));
    }
    if (n > JINJA_MAX) {
        free(buf);
        return jinja_fail(path, "it is larger than 4 MiB");
    }
    buf[n] = '\0';
    *text = buf;
    return PT_OK;
}

/* dir/chat_template.jinja into *text (malloc'd), or *text NULL when there is no such file. */
static pt_status jinja_read(const char *dir, char **text)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    *text = NULL;
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? PT_OK : jinja_fail(path, strerror(errno));
    errno = 0;
    pt_status st = jinja_slurp(f, path, text);
    fclose(f);
    return st;
}

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* dir/additional_chat_templates/NAME.jinja as tok's named templates (in name order). */
static pt_status named_templates(const char *dir, pt_tokenizer *tok)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/additional_chat_templates", dir);
    DIR *d = opendir(path);
    if (!d) return PT_OK;
    char **names = NULL;
    size_t n = 0;
    pt_status st = PT_OK;
    for (struct dirent *e; st == PT_OK && (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= 6 || strcmp(e->d_name + len - 6, ".jinja") || e->d_name[0] == '.') continue;
        char **grown = realloc(names, sizeof *names * (n + 1));
        char *name = grown ? strndup(e->d_name, len - 6) : NULL;
        if (grown) names = grown;
        if (!name) st = ERR(PT_ERR_NOMEM, "out of memory");
        else names[n++] = name;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, name_cmp);
    for (size_t i = 0; i < n; i++) {
        char *text = NULL;
        FILE *f = NULL;
        if (st == PT_OK) {
            snprintf(path, sizeof path, "%s/additional_chat_templates/%s.jinja", dir, names[i]);
            errno = 0;
            f = fopen(path, "rb");
            if (!f) st = jinja_fail(path, strerror(errno ? errno : EIO));
        }
        if (f) {
            errno = 0;
            st = jinja_slurp(f, path, &text);
            fclose(f);
        }
        if (st == PT_OK) st = tokenizer_add_chat_template(tok, names[i], text);
        free(text);
        free(names[i]);
    }
    free(names);
    return st;
}

/* dir's tokenizer file into path: tokenizer.json, else tokenizer.model (*spm set). */
static pt_status tokenizer_file(const char *dir, char *path, size_t size, bool *spm)
{
    snprintf(path, size, "%s/tokenizer.json", dir);
    *spm = false;
    if (access(path, F_OK) == 0) return PT_OK;
    snprintf(path, size, "%s/tokenizer.model", dir);
    *spm = access(path, F_OK) == 0;
    if (*spm) return PT_OK;
    return ERR(PT_ERR_USER, "%s: no tokenizer.json in the model directory; download the model's tokenizer files too "
               "(tokenizer.json, tokenizer_config.json)", shown_text(dir).s);
}

pt_status tokenizer_from_hf_dir(const char *dir, pt_tokenizer **out)
{
    char path[4200];
    bool spm;
    *out = NULL;
    TRY(tokenizer_file(dir, path, sizeof path, &spm));
    char *tmpl;
    TRY(jinja_read(dir, &tmpl));
    pt_status st = spm ? tokenizer_from_spm_model(path, out) : tokenizer_from_json(path, out);
    if (st == PT_OK && tmpl) st = tokenizer_set_chat_template(*out, tmpl);
    if (st == PT_OK) st = named_templates(dir, *out);
    free(tmpl);
    if (st != PT_OK) {
        tokenizer_free(*out);
        *out = NULL;
    }
    return st;
}
