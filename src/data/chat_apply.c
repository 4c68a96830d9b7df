/* chat_apply.c — one conversation rendered with the chat template training would use, for the
 * commands that are not training (generate --chat, tokenize --chat): the same choice of template
 * (dataset_template_name, label_init: a built-in name, the model's own, one of its named
 * templates, tool_use for a conversation with tools when no name is set), the same
 * chat_template_kwargs and the same special tokens' texts, so what a command shows is what
 * training renders. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

struct dataset_chat {
    label_ctx lc;
    json_t *kwargs;
};

pt_status dataset_chat_open(const pt_tokenizer *tok, const char *chat_template, const pt_strmap *kwargs,
                            dataset_chat **out)
{
    *out = NULL;
    dataset_chat *c = calloc(1, sizeof *c);
    TRY_ALLOC(c);
    pt_status rc = label_init(&c->lc, tok, dataset_template_name(chat_template, tok), false, 0);
    if (rc != PT_OK) {
        err_context("chat_template");
        free(c);
        return rc;
    }
    if (!(chat_template && *chat_template)) rc = label_use_tool_template(&c->lc);
    if (rc == PT_OK && kwargs && kwargs->n) {
        c->kwargs = data_template_kwargs(kwargs);
        if (!c->kwargs) rc = ERR(PT_ERR_NOMEM, "out of memory");
    }
    c->lc.kwargs = c->kwargs;
    if (rc != PT_OK) {
        dataset_chat_free(c);
        return rc;
    }
    *out = c;
    return PT_OK;
}

pt_status dataset_chat_render(const dataset_chat *c, const chat_message *msgs, int n, const json_t *tools,
                              bool add_generation_prompt, strbuf *out)
{
    chat_args a = {.bos = c->lc.bos, .eos = c->lc.eos, .specials = tokenizer_template_tokens(c->lc.tok),
                   .kwargs = c->kwargs, .tools = tools, .add_generation_prompt = add_generation_prompt};
    return chat_tmpl_render(label_template_for(&c->lc, tools), &a, msgs, n, out, NULL, NULL);
}

const char *dataset_chat_name(const dataset_chat *c) { return c->lc.template; }

void dataset_chat_free(dataset_chat *c)
{
    if (!c) return;
    label_free(&c->lc);
    json_decref(c->kwargs);
    free(c);
}

pt_status dataset_chat_kwarg_add(pt_strmap *kw, const char *arg)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg)
        return ERR(PT_ERR_USAGE, "--chat-template-kwarg expects KEY=VALUE (e.g. enable_thinking=false), got '%s'",
                   shown_text(arg).s);
    char *key = strndup(arg, (size_t)(eq - arg)), *value = strdup(eq + 1);
    char **keys = realloc(kw->keys, sizeof *keys * (size_t)(kw->n + 1));
    if (keys) kw->keys = keys;
    char **values = realloc(kw->values, sizeof *values * (size_t)(kw->n + 1));
    if (values) kw->values = values;
    if (!key || !value || !keys || !values) {
        free(key);
        free(value);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < kw->n; i++) /* a key given again: the last value */
        if (!strcmp(kw->keys[i], key)) {
            free(key);
            free(kw->values[i]);
            kw->values[i] = value;
            return PT_OK;
        }
    kw->keys[kw->n] = key;
    kw->values[kw->n++] = value;
    return PT_OK;
}

void dataset_chat_kwargs_free(pt_strmap *kw)
{
    for (int i = 0; i < kw->n; i++) {
        free(kw->keys[i]);
        free(kw->values[i]);
    }
    free(kw->keys);
    free(kw->values);
    kw->keys = kw->values = NULL;
    kw->n = 0;
}
