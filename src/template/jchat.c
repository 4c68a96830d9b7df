/* jchat.c — the variables transformers' apply_chat_template gives a chat template: the messages
 * with their null fields dropped (_normalize_chat_messages) and their reasoning under the names
 * templates read (_alias_reasoning_fields: "thinking" first, "reasoning_content" last, from
 * reasoning_content, thinking or reasoning), tools and documents (null when not given),
 * add_generation_prompt, then the special tokens and keyword arguments. */
#include <jansson.h>
#include <string.h>

#include "jinja_impl.h"

static json_t *chat_message(const json_t *m)
{
    if (!json_is_object(m)) return json_deep_copy(m);
    static const char *const names[] = {"reasoning_content", "thinking", "reasoning"};
    const json_t *reasoning = NULL;
    for (int i = 0; i < 3 && !reasoning; i++) {
        const json_t *r = json_object_get(m, names[i]);
        if (r && !json_is_null(r)) reasoning = r;
    }
    json_t *out = json_object();
    if (reasoning) json_object_set_new(out, "thinking", json_deep_copy(reasoning));
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)m, key, v) {
        if (json_is_null(v)) continue;
        json_object_set_new(out, key, json_deep_copy(v));
    }
    if (reasoning) json_object_set_new(out, "reasoning_content", json_deep_copy(reasoning));
    return out;
}

json_t *jinja_chat_vars(const json_t *messages, const json_t *tools, const json_t *documents,
                        bool add_generation_prompt, const json_t *extra)
{
    json_t *vars = json_object(), *msgs = json_array();
    for (size_t i = 0; i < json_array_size(messages); i++)
        json_array_append_new(msgs, chat_message(json_array_get(messages, i)));
    json_object_set_new(vars, "messages", msgs);
    json_object_set_new(vars, "tools", tools ? json_deep_copy(tools) : json_null());
    json_object_set_new(vars, "documents", documents ? json_deep_copy(documents) : json_null());
    json_object_set_new(vars, "add_generation_prompt", json_boolean(add_generation_prompt));
    const char *key;
    json_t *v;
    if (json_is_object(extra)) json_object_foreach((json_t *)extra, key, v) json_object_set_new(vars, key, json_deep_copy(v));
    return vars;
}
