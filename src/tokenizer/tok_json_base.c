/* tok_json_base.c — what the tokenizer.json and tokenizer.model loaders read JSON with: an error
 * naming the file and the JSON path of the offending value, opening a JSON file (one object at
 * the top), a value read as a flag, the chat template of a tokenizer_config.json, its tokens
 * replaced by special_tokens_map.json's as transformers 5 reads that legacy file, and the special
 * tokens' texts a template sees. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/error.h"
#include "ptrain/jsonfile.h"
#include "ptrain/util.h"
#include "tok_impl.h"

/* An error naming file and the JSON path of the value. */
__attribute__((format(printf, 4, 5))) pt_status tok_jerr(const char *file, pt_status st, const char *path,
                                                         const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ERR(st, "%s: %s: %s", shown_text(file).s, path, msg);
}

/* The JSON object in the file at path (big integers read as reals). */
pt_status tok_json_open(const char *path, json_t **root)
{
    if (access(path, R_OK) != 0) return ERR(PT_ERR_USER, "%s: cannot open: %s", shown_text(path).s, strerror(errno));
    json_error_t je;
    *root = jsonfile_load(path, 0, &je); /* duplicate keys: the last wins, as in HF; big integers as reals */
    if (!*root)
        return ERR(PT_ERR_USER, "%s: invalid JSON at line %d, column %d: %s", shown_text(path).s, je.line, je.column,
                   je.text);
    if (!json_is_object(*root)) {
        json_decref(*root);
        return ERR(PT_ERR_USER, "%s: expected a JSON object at the top", shown_text(path).s);
    }
    return PT_OK;
}

/* obj[key] as a boolean: def when absent or null. */
pt_status tok_json_flag(const char *file, const json_t *obj, const char *key, const char *path, bool def, bool *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return *out = def, PT_OK;
    if (!json_is_boolean(v)) return tok_jerr(file, PT_ERR_USER, path, "expected true or false");
    *out = json_is_true(v);
    return PT_OK;
}

pt_status tok_template_token(pt_tokenizer *t, const char *key, const char *text, size_t len)
{
    json_t *v = json_stringn(text, len);
    if (!v) return PT_OK; /* not UTF-8: no text a template could print */
    if (!t->tmpl_tokens) t->tmpl_tokens = json_object();
    if (!t->tmpl_tokens) json_decref(v);
    if (!t->tmpl_tokens || json_object_set_new(t->tmpl_tokens, key, v)) return ERR(PT_ERR_NOMEM, "out of memory");
    return PT_OK;
}

pt_status tok_json_config_specials(pt_tokenizer *t, const char *file, const json_t *cfg)
{
    static const char *const keys[] = {"unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        const json_t *v = json_object_get(cfg, keys[i]);
        if (json_is_object(v)) v = json_object_get(v, "content");
        if (!v || json_is_null(v)) continue;
        if (!json_is_string(v)) return tok_jerr(file, PT_ERR_USER, keys[i], "expected a string or {\"content\": ...}");
        TRY(tok_template_token(t, keys[i], json_string_value(v), json_string_length(v)));
    }
    return PT_OK;
}

pt_status tok_json_special_tokens_map(const char *path, json_t **cfg)
{
    static const char *const keys[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                                       "cls_token", "mask_token"};
    const char *slash = strrchr(path, '/');
    char map_path[4200];
    snprintf(map_path, sizeof map_path, "%.*sspecial_tokens_map.json", slash ? (int)(slash - path + 1) : 0, path);
    if (access(map_path, F_OK) != 0 || json_object_get(*cfg, "added_tokens_decoder")) return PT_OK;
    json_t *map = NULL;
    TRY(tok_json_open(map_path, &map));
    if (!*cfg) *cfg = json_object();
    pt_status rc = *cfg ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == PT_OK && i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(map, keys[i]);
        if (v && json_object_set(*cfg, keys[i], v)) rc = ERR(PT_ERR_NOMEM, "out of memory");
    }
    json_decref(map);
    return rc;
}

/* t->chat_template from tokenizer_config.json's chat_template: a string, or a list of {name,
 * template} whose "default" one is taken, the others kept by name (file, its name, is cfg). */
pt_status tok_json_config_template(pt_tokenizer *t, const char *file, const json_t *cfg)
{
    const json_t *v = json_object_get(cfg, "chat_template"), *list = v;
    if (json_is_array(list)) v = NULL; /* [{name, template}]: the one named "default", the others by name */
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *e = json_array_get(list, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const json_t *text = json_object_get(e, "template");
        if (!name || !json_is_string(text))
            return tok_jerr(file, PT_ERR_USER, "chat_template", "expected a list of {\"name\": ..., \"template\": ...}");
        if (strcmp(name, "default") == 0) v = text;
        else TRY(tokenizer_add_chat_template(t, name, json_string_value(text)));
    }
    if (!v || json_is_null(v)) return PT_OK;
    if (!json_is_string(v)) return tok_jerr(file, PT_ERR_USER, "chat_template", "expected a string");
    t->chat_template = xstrdup(json_string_value(v));
    return PT_OK;
}
