/* chat_template.c — rendering chat templates with the Jinja interpreter (src/template), as
 * transformers' apply_chat_template renders them: a built-in name's text (template_builtin.c:
 * chatml, smollm2, qwen2.5, llama-3, llama-3.1, llama-3.2, alpaca, gemma, mistral, mistral-v3) or
 * the model's own template, whatever it is; and detecting which built-in a model's template text
 * is. Messages become the variables transformers passes (jinja_chat_vars: a message's other
 * fields such as reasoning_content and tool_calls, the tools, the special tokens, keyword
 * arguments such as enable_thinking). A template that refuses a conversation (raise_exception)
 * fails with its message. */
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/jinja.h"
#include "tok_impl.h"

struct chat_tmpl {
    jinja_template *t;
    const char *name; /* a built-in's, or "model" */
    int builtin; /* its index among the built-ins, or -1 */
};

#define N_BUILTIN 10
#define BUILTIN_NAMES CHAT_TEMPLATE_BUILTINS

pt_status chat_tmpl_open(const char *name, const char *model_text, chat_tmpl **out)
{
    *out = NULL;
    int index = -1;
    const char *text = name && strcmp(name, "model") ? tok_builtin_template(name, &index) : model_text;
    if (!text && name && strcmp(name, "model"))
        return ERR(PT_ERR_USER, "unknown chat template \"%s\" (known: %s, or the model's own)", shown_text(name).s,
                   BUILTIN_NAMES);
    if (!text) return ERR(PT_ERR_USER, "the model has no chat template of its own; set chat_template to one of %s",
                          BUILTIN_NAMES);
    chat_tmpl *c = calloc(1, sizeof *c);
    TRY_ALLOC(c);
    c->builtin = index;
    c->name = index >= 0 ? tok_builtin_name(index) : "model";
    pt_status rc = jinja_compile(text, strlen(text), &c->t);
    if (rc != PT_OK) {
        free(c);
        err_context("chat template %s", index >= 0 ? name : "model (the model's own)");
        return rc;
    }
    *out = c;
    return PT_OK;
}

void chat_tmpl_free(chat_tmpl *c)
{
    if (!c) return;
    jinja_free(c->t);
    free(c);
}

bool chat_tmpl_has_generation(const chat_tmpl *c) { return c && jinja_has_generation(c->t); }

/* The bos and eos a built-in writes when the model names none (the hand-written renderers' defaults). */
static void builtin_tokens(int index, const char **bos, const char **eos)
{
    const char *name = tok_builtin_name(index);
    if (!name) return;
    if (!*bos && !strncmp(name, "llama-3", 7)) *bos = "<|begin_of_text|>";
    if (!*bos && !strcmp(name, "gemma")) *bos = "<bos>";
    if (!strncmp(name, "mistral", 7)) {
        if (!*bos) *bos = "<s>";
        if (!*eos) *eos = "</s>";
    }
    if (!strcmp(name, "alpaca")) {
        if (!*bos) *bos = "";
        if (!*eos) *eos = "";
    }
}

static json_t *messages_json(const chat_message *msgs, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_t *m = json_object();
        json_object_set_new(m, "role", json_stringn_nocheck(msgs[i].role, strlen(msgs[i].role)));
        if (msgs[i].content) /* bytes as they are: rows were checked for UTF-8 where they were read */
            json_object_set_new(m, "content", json_stringn_nocheck(msgs[i].content, strlen(msgs[i].content)));
        if (json_is_object(msgs[i].fields)) json_object_update(m, (json_t *)msgs[i].fields);
        json_array_append_new(arr, m);
    }
    return arr;
}

pt_status chat_tmpl_render(const chat_tmpl *c, const chat_args *a, const chat_message *msgs, int n, strbuf *out,
                           size_t **spans, int *n_spans)
{
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || (!msgs[i].content && !msgs[i].fields))
            return ERR(PT_ERR_USER, "chat message %d has no role or no content", i);
    const char *bos = a ? a->bos : NULL, *eos = a ? a->eos : NULL;
    builtin_tokens(c->builtin, &bos, &eos);
    json_t *extra = json_object();
    if (a && json_is_object(a->specials)) json_object_update(extra, (json_t *)a->specials);
    if (bos) json_object_set_new(extra, "bos_token", json_string(bos));
    if (eos) json_object_set_new(extra, "eos_token", json_string(eos));
    if (a && json_is_object(a->kwargs)) json_object_update(extra, (json_t *)a->kwargs);
    json_t *m = messages_json(msgs, n);
    json_t *vars = jinja_chat_vars(m, a ? a->tools : NULL, NULL, a && a->add_generation_prompt, extra);
    pt_status rc = jinja_render(c->t, vars, NULL, out, spans, n_spans);
    if (rc != PT_OK) err_context("chat template %s", c->name);
    json_decref(vars);
    json_decref(m);
    json_decref(extra);
    return rc;
}

const char *chat_template_name_known(const char *name)
{
    int index = -1;
    if (name && !strcmp(name, "model")) return "model";
    return tok_builtin_template(name, &index) ? tok_builtin_name(index) : NULL;
}

/* The built-ins, compiled once (renders of one compiled template may run in parallel). */
static chat_tmpl *compiled[N_BUILTIN];
static pthread_mutex_t compiled_lock = PTHREAD_MUTEX_INITIALIZER;

static pt_status builtin_open(const char *name, const chat_tmpl **out)
{
    int index = -1;
    if (!name || !tok_builtin_template(name, &index) || index >= N_BUILTIN)
        return ERR(PT_ERR_USER, "unknown chat template \"%s\" (known: %s)", name ? shown_text(name).s : "(null)",
                   BUILTIN_NAMES);
    pthread_mutex_lock(&compiled_lock);
    pt_status rc = compiled[index] ? PT_OK : chat_tmpl_open(name, NULL, &compiled[index]);
    *out = compiled[index];
    pthread_mutex_unlock(&compiled_lock);
    return rc;
}

pt_status chat_render_with_tokens(const char *name, const char *bos, const char *eos, const chat_message *msgs, int n,
                                  bool add_generation_prompt, strbuf *out)
{
    const chat_tmpl *c = NULL;
    TRY(builtin_open(name, &c));
    chat_args a = {.bos = bos, .eos = eos, .add_generation_prompt = add_generation_prompt};
    return chat_tmpl_render(c, &a, msgs, n, out, NULL, NULL);
}

pt_status chat_render(const char *name, const chat_message *msgs, int n, bool add_generation_prompt, strbuf *out)
{
    return chat_render_with_tokens(name, NULL, NULL, msgs, n, add_generation_prompt, out);
}

/* ---- detection ---- */

/* Whether a ChatML template writes a system prompt of its own: "<|im_start|>system" followed by
 * a newline (real or escaped) and then literal text. */
static bool chatml_default_system(const char *text)
{
    static const char marker[] = "<|im_start|>system";
    for (const char *p = strstr(text, marker); p; p = strstr(p + 1, marker)) {
        const char *q = p + sizeof marker - 1;
        if (*q == '\n') q++;
        else if (q[0] == '\\' && q[1] == 'n') q += 2;
        else continue;
        if (*q && !strchr("'\"+{ <", *q)) return true;
    }
    return false;
}

/* Mistral's V1 format writes " [INST] " with a space before it (as a string in the template);
 * Llama 2 (<<SYS>>) and Mistral's later formats ("[INST]" unspaced, tools) are other templates. */
static bool mistral_v1(const char *text)
{
    if (strstr(text, "<<SYS>>") || strstr(text, "[AVAILABLE_TOOLS]") || strstr(text, "[SYSTEM_PROMPT]")) return false;
    return strstr(text, "' [INST] '") || strstr(text, "\" [INST] \"");
}

/* Mistral's v3 format as Mistral-7B-Instruct-v0.3 ships it: tools, "[INST] " unspaced before,
 * replies trimmed, the system message in the last user turn. Its tekken variant (Mistral Nemo:
 * "[INST]" with no space after, replies untrimmed) is another template. */
static bool mistral_v3(const char *text)
{
    return strstr(text, "[AVAILABLE_TOOLS]") && strstr(text, "\"[INST] \" + message[\"content\"] + \"[/INST]\"") &&
           strstr(text, "\" \" + message[\"content\"]|trim + eos_token") &&
           strstr(text, "loop.last and system_message is defined");
}

/* Llama 3.1's template (and 3.3's): the date "26 Jul 2024" unless given, trimmed contents. Llama
 * 3.2's differs in the date only: strftime_now, the day of rendering. */
static bool llama31(const char *text)
{
    return strstr(text, "{%- set date_string = \"26 Jul 2024\" %}") && !strstr(text, "strftime_now") &&
           strstr(text, "message['content'] | trim + '<|eot_id|>'");
}

static bool llama32(const char *text)
{
    return strstr(text, "strftime_now(\"%d %b %Y\")") && strstr(text, "message['content'] | trim + '<|eot_id|>'");
}

const char *chat_template_detect(const char *text)
{
    if (!text) return NULL;
    if (strstr(text, "<|start_header_id|>") && strstr(text, "<|eot_id|>")) {
        if (!strstr(text, "Cutting Knowledge Date")) return "llama-3";
        return llama31(text) ? "llama-3.1" : llama32(text) ? "llama-3.2" : NULL; /* a dated system block */
    }
    if (strstr(text, "<think>") || strstr(text, "enable_thinking")) return NULL; /* reasoning models' formats */
    if (strstr(text, "<|im_start|>")) {
        /* SmolLM2's own system line; SmolLM3's (a longer one, with thinking modes) is another template */
        if (strstr(text, "named SmolLM, trained by Hugging Face<|im_end|>")) return "smollm2";
        if (strstr(text, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.") &&
            strstr(text, "<tool_response>") && strstr(text, "(message.role == \"system\" and not loop.first)"))
            return "qwen2.5";
        return chatml_default_system(text) ? NULL : "chatml";
    }
    if (strstr(text, "### Instruction:") && strstr(text, "### Response:")) return "alpaca";
    if (strstr(text, "<start_of_turn>") && strstr(text, "<end_of_turn>")) return "gemma";
    if (strstr(text, "[INST]") && strstr(text, "[/INST]"))
        return mistral_v1(text) ? "mistral" : mistral_v3(text) ? "mistral-v3" : NULL;
    return NULL;
}
