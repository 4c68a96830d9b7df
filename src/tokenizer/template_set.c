/* template_set.c — the chat templates a tokenizer carries beside its vocabulary: replacing the
 * default text with one found beside it (a Hugging Face model directory's chat_template.jinja,
 * which transformers 5 writes instead of tokenizer_config.json's chat_template), and the model's
 * other named templates (tool_use, rag, ...: transformers' chat_template dict), and the other
 * special tokens' texts a template sees (tokenizer_template_tokens). */
#include <stdlib.h>
#include <string.h>

#include "tok_impl.h"

pt_status tokenizer_set_chat_template(pt_tokenizer *tok, const char *text)
{
    char *copy = NULL;
    if (text) {
        copy = malloc(strlen(text) + 1);
        TRY_ALLOC(copy);
        strcpy(copy, text);
    }
    free(tok->chat_template);
    tok->chat_template = copy;
    return PT_OK;
}

static int named_index(const pt_tokenizer *tok, const char *name)
{
    for (int i = 0; name && i < tok->n_tmpl; i++)
        if (!strcmp(tok->tmpl_names[i], name)) return i;
    return -1;
}

pt_status tokenizer_add_chat_template(pt_tokenizer *tok, const char *name, const char *text)
{
    char *n = strdup(name), *t = strdup(text);
    int i = named_index(tok, name);
    char **names = i < 0 ? realloc(tok->tmpl_names, sizeof *names * (size_t)(tok->n_tmpl + 1)) : tok->tmpl_names;
    if (names) tok->tmpl_names = names;
    char **texts = i < 0 ? realloc(tok->tmpl_texts, sizeof *texts * (size_t)(tok->n_tmpl + 1)) : tok->tmpl_texts;
    if (texts) tok->tmpl_texts = texts;
    if (!n || !t || !names || !texts) {
        free(n);
        free(t);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    if (i < 0) i = tok->n_tmpl++;
    else {
        free(tok->tmpl_names[i]);
        free(tok->tmpl_texts[i]);
    }
    tok->tmpl_names[i] = n;
    tok->tmpl_texts[i] = t;
    return PT_OK;
}

const char *tokenizer_chat_template_named(const pt_tokenizer *tok, const char *name)
{
    int i = tok ? named_index(tok, name) : -1;
    return i < 0 ? NULL : tok->tmpl_texts[i];
}

void tokenizer_chat_template_names(const pt_tokenizer *tok, strbuf *out)
{
    for (int i = 0; tok && i < tok->n_tmpl; i++)
        sb_printf(out, "%s%s", i ? ", " : "", shown_text(tok->tmpl_names[i]).s);
}

void tok_named_templates_free(pt_tokenizer *tok)
{
    for (int i = 0; i < tok->n_tmpl; i++) {
        free(tok->tmpl_names[i]);
        free(tok->tmpl_texts[i]);
    }
    free(tok->tmpl_names);
    free(tok->tmpl_texts);
    tok->tmpl_names = tok->tmpl_texts = NULL;
    tok->n_tmpl = 0;
    json_decref(tok->tmpl_tokens);
    tok->tmpl_tokens = NULL;
}

const struct json_t *tokenizer_template_tokens(const pt_tokenizer *tok) { return tok ? tok->tmpl_tokens : NULL; }
