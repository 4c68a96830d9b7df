/* format.c — one row as a conversation or as plain text. ShareGPT `conversations` ({from, value}
 * turns; human/user, gpt/assistant, system, tool), `messages` ({role, content}; system, user,
 * assistant, tool; a turn's other fields such as reasoning_content and tool_calls kept for the
 * template, the content optional beside tool_calls; the row's "tools" too), Alpaca (instruction, optional input, output: the user turn is the instruction plus
 * "\nInput: " + input when input is non-empty, or an "input" message for the alpaca template),
 * or the plain-text column. A row whose texts are all blank is empty; a missing or mistyped field
 * or text that was not valid UTF-8 makes it bad, with the reason. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

data_format format_detect(const json_t *obj, const char *text_field, bool pairs, bool singles)
{
    if (json_object_get(obj, "completion") && json_object_get(obj, "label")) return FMT_UNPAIRED;
    bool pair = json_object_get(obj, "chosen") && json_object_get(obj, "rejected");
    if (pair && pairs) return FMT_PREFERENCE;
    /* a row with both (ultrafeedback's train_sft: prompt, chosen, rejected, messages) is a
     * conversation to SFT, as to TRL's SFTTrainer */
    if (json_object_get(obj, "conversations")) return FMT_CONVERSATIONS;
    if (json_object_get(obj, "messages")) return FMT_MESSAGES;
    if (pair) return FMT_PREFERENCE;
    if (json_object_get(obj, "instruction") || json_object_get(obj, "output")) return FMT_ALPACA;
    if (singles && json_object_get(obj, "prompt") && json_object_get(obj, "completion")) return FMT_COMPLETION;
    if (text_field && json_object_get(obj, text_field)) return FMT_TEXT;
    return FMT_NONE;
}

const char *format_name(data_format f)
{
    static const char *const names[] = {NULL, "conversations", "messages", "alpaca", "text", "preference", "unpaired", "prompt",
                                         "completion"};
    return names[f];
}

const char *format_name_known(const char *name)
{
    for (data_format f = FMT_CONVERSATIONS; name && f <= FMT_COMPLETION; f++)
        if (!strcmp(name, format_name(f))) return format_name(f);
    return NULL;
}

static bool blank(const char *s)
{
    for (; *s; s++)
        if (!isspace((unsigned char)*s)) return false;
    return true;
}

/* The string field key of obj (named name in messages) into *out; a missing or null optional
 * field reads as "". */
static bool get_text(const json_t *obj, const char *key, const char *name, bool required, const char **out,
                     strbuf *why)
{
    const json_t *v = json_object_get(obj, key);
    *out = "";
    if (!v || json_is_null(v)) {
        if (required && v) sb_printf(why, "\"%s\" is null", shown_text(name).s);
        else if (required) sb_printf(why, "no \"%s\"", shown_text(name).s);
        return !required;
    }
    if (!json_is_string(v)) sb_printf(why, "\"%s\" is %s, expected a string", shown_text(name).s, reader_kind(v));
    else if (strstr(json_string_value(v), FORMAT_BAD_UTF8))
        sb_printf(why, "\"%s\" is not valid UTF-8", shown_text(name).s);
    else *out = json_string_value(v);
    return why->len == 0;
}

static void add_message(data_record *rec, const char *role, const char *content)
{
    chat_message *grown = realloc(rec->msgs, sizeof *grown * (size_t)(rec->n + 1));
    if (!grown) abort();
    rec->msgs = grown;
    rec->msgs[rec->n++] = (chat_message){role, content ? xstrdup(content) : NULL, NULL};
}

/* A turn's fields other than its role and content (reasoning_content, tool_calls, name,
 * tool_call_id, ...), given to the template as they are; NULL when it has none. */
static json_t *other_fields(const json_t *turn, const char *role_key, const char *content_key)
{
    json_t *out = NULL, *v;
    const char *key;
    json_object_foreach((json_t *)turn, key, v) {
        if (!strcmp(key, role_key) || !strcmp(key, content_key)) continue;
        if (!out) out = json_object();
        json_object_set_new(out, key, json_deep_copy(v));
    }
    return out;
}

/* ---- chat turns ---- */

typedef struct {
    const char *list, *role_key, *content_key, *expected, *shape;
    const char *const *roles; /* pairs: the name in the data, the role */
} turn_style;

static const char *const sharegpt_roles[] = {"human", "user", "user", "user", "gpt", "assistant",
                                             "assistant", "assistant", "system", "system", "tool", "tool", NULL};
static const char *const message_roles[] = {"system", "system", "user", "user", "assistant", "assistant",
                                            "tool", "tool", NULL};

static const turn_style sharegpt_style = {"conversations", "from", "value", "human, gpt, system or tool",
                                          "{from, value}", sharegpt_roles};
static const turn_style messages_style = {"messages", "role", "content", "system, user, assistant or tool",
                                          "{role, content}", message_roles};

static const char *map_role(const turn_style *s, const char *name)
{
    for (int i = 0; s->roles[i]; i += 2)
        if (!strcmp(s->roles[i], name)) return s->roles[i + 1];
    return NULL;
}

static bool add_turn(const turn_style *s, const json_t *turn, size_t i, data_record *rec, strbuf *why)
{
    char role_name[64], content_name[64];
    snprintf(role_name, sizeof role_name, "%s[%zu].%s", s->list, i, s->role_key);
    snprintf(content_name, sizeof content_name, "%s[%zu].%s", s->list, i, s->content_key);
    if (!json_is_object(turn)) {
        sb_printf(why, "%s[%zu] is %s, expected a %s object", s->list, i, reader_kind(turn), s->shape);
        return false;
    }
    const char *name, *content;
    if (!get_text(turn, s->role_key, role_name, true, &name, why)) return false;
    const char *role = map_role(s, name);
    if (!role) {
        sb_printf(why, "\"%s\" is \"%s\" (expected %s)", role_name, shown_text(name).s, s->expected);
        return false;
    }
    const json_t *calls = json_object_get(turn, "tool_calls");
    bool optional = calls && !json_is_null(calls); /* a reply that is only tool calls may have no content */
    if (!get_text(turn, s->content_key, content_name, !optional, &content, why)) return false;
    const json_t *cv = json_object_get(turn, s->content_key);
    add_message(rec, role, optional && (!cv || json_is_null(cv)) ? NULL : content);
    rec->msgs[rec->n - 1].fields = other_fields(turn, s->role_key, s->content_key);
    return true;
}

/* The row's "tools" column (a list of JSON schemas, or that list as JSON text), for the template. */
static bool row_tools(const json_t *obj, data_record *rec, strbuf *why)
{
    const json_t *t = json_object_get(obj, "tools");
    if (!t || json_is_null(t)) return true;
    if (json_is_string(t)) {
        json_error_t e;
        rec->tools = json_loads(json_string_value(t), JSON_DECODE_ANY, &e);
        if (!json_is_array(rec->tools)) sb_printf(why, "\"tools\" is text that is not a JSON list (%s)", e.text);
    } else if (json_is_array(t)) rec->tools = json_deep_copy(t);
    else sb_printf(why, "\"tools\" is %s, expected a list of tool schemas", reader_kind(t));
    return why->len == 0;
}

static row_result format_turns(const turn_style *s, const json_t *obj, data_record *rec, strbuf *why)
{
    const json_t *list = json_object_get(obj, s->list);
    if (!list) {
        sb_printf(why, "no \"%s\"", s->list);
        return ROW_BAD;
    }
    if (!json_is_array(list)) {
        sb_printf(why, "\"%s\" is %s, expected an array of %s objects", s->list, reader_kind(list), s->shape);
        return ROW_BAD;
    }
    for (size_t i = 0; i < json_array_size(list); i++)
        if (!add_turn(s, json_array_get(list, i), i, rec, why)) return ROW_BAD;
    if (!row_tools(obj, rec, why)) return ROW_BAD;
    for (int i = 0; i < rec->n; i++)
        if (rec->msgs[i].fields || !blank(rec->msgs[i].content)) return ROW_OK;
    return ROW_EMPTY;
}

/* ---- preference pairs ---- */

/* The turns of column name (a list of {role, content}) appended to rec. */
static bool pair_turns(const json_t *obj, const char *name, data_record *rec, strbuf *why)
{
    turn_style s = messages_style;
    s.list = name;
    const json_t *list = json_object_get(obj, name);
    for (size_t i = 0; i < json_array_size(list); i++)
        if (!add_turn(&s, json_array_get(list, i), i, rec, why)) return false;
    return true;
}

/* TRL's optional `margin` column of a preference row (RewardTrainer's): a number, as float32. */
static bool pair_margin(const json_t *obj, data_record *rec, strbuf *why)
{
    const json_t *m = json_object_get(obj, "margin");
    if (!m || json_is_null(m)) return true;
    if (!json_is_number(m)) {
        sb_printf(why, "\"margin\" is %s, expected a number", reader_kind(m));
        return false;
    }
    rec->margin = (float)json_number_value(m);
    return true;
}

/* prompt/chosen/rejected, all text or all lists of turns (TRL's standard and conversational
 * preference rows, with an optional margin); the prompt is required (TRL's implicit prompt is not
 * extracted). */
static row_result format_pair(const json_t *obj, data_record *rec, strbuf *why)
{
    const json_t *p = json_object_get(obj, "prompt"), *c = json_object_get(obj, "chosen"),
                 *r = json_object_get(obj, "rejected");
    if (!p) {
        sb_printf(why, "no \"prompt\" (preference rows need prompt, chosen and rejected)");
        return ROW_BAD;
    }
    rec->pair_chat = json_is_array(c);
    if (!pair_margin(obj, rec, why)) return ROW_BAD;
    const char *names[3] = {"prompt", "chosen", "rejected"};
    const json_t *cols[3] = {p, c, r};
    for (int i = 0; i < 3; i++)
        if (!cols[i]) { /* a later row without a column the first row has */
            sb_printf(why, "no \"%s\" (preference rows need prompt, chosen and rejected)", names[i]);
            return ROW_BAD;
        } else if (rec->pair_chat ? !json_is_array(cols[i]) : !json_is_string(cols[i])) {
            sb_printf(why, "\"%s\" is %s, expected %s like \"chosen\"", names[i], reader_kind(cols[i]),
                      rec->pair_chat ? "a list of {role, content} turns" : "a string");
            return ROW_BAD;
        }
    if (rec->pair_chat) {
        if (!pair_turns(obj, "prompt", rec, why)) return ROW_BAD;
        rec->n_prompt = rec->n;
        if (!pair_turns(obj, "chosen", rec, why)) return ROW_BAD;
        rec->n_chosen = rec->n - rec->n_prompt;
        if (!pair_turns(obj, "rejected", rec, why) || !row_tools(obj, rec, why)) return ROW_BAD;
        if (rec->n_chosen == 0 || rec->n == rec->n_prompt + rec->n_chosen) return ROW_EMPTY;
        return ROW_OK;
    }
    char **texts[3] = {&rec->prompt, &rec->chosen, &rec->rejected};
    for (int i = 0; i < 3; i++) {
        const char *t;
        if (!get_text(obj, names[i], names[i], true, &t, why)) return ROW_BAD;
        *texts[i] = xstrdup(t);
    }
    return blank(rec->chosen) && blank(rec->rejected) ? ROW_EMPTY : ROW_OK;
}

/* prompt and completion, both text or both lists of turns: the completion as chosen (text) or the
 * n_chosen turns after the prompt's. */
static row_result prompt_completion(const json_t *obj, const json_t *p, const json_t *c, data_record *rec,
                                    strbuf *why)
{
    rec->pair_chat = json_is_array(c);
    const char *names[2] = {"prompt", "completion"};
    const json_t *cols[2] = {p, c};
    for (int i = 0; i < 2; i++)
        if (rec->pair_chat ? !json_is_array(cols[i]) : !json_is_string(cols[i])) {
            sb_printf(why, "\"%s\" is %s, expected %s like \"completion\"", names[i], reader_kind(cols[i]),
                      rec->pair_chat ? "a list of {role, content} turns" : "a string");
            return ROW_BAD;
        }
    if (rec->pair_chat) {
        if (!pair_turns(obj, "prompt", rec, why)) return ROW_BAD;
        rec->n_prompt = rec->n;
        if (!pair_turns(obj, "completion", rec, why) || !row_tools(obj, rec, why)) return ROW_BAD;
        rec->n_chosen = rec->n - rec->n_prompt;
        return rec->n_chosen == 0 ? ROW_EMPTY : ROW_OK;
    }
    const char *pt, *ct;
    if (!get_text(obj, "prompt", "prompt", true, &pt, why) || !get_text(obj, "completion", "completion", true, &ct, why))
        return ROW_BAD;
    rec->prompt = xstrdup(pt), rec->chosen = xstrdup(ct);
    return blank(rec->chosen) ? ROW_EMPTY : ROW_OK;
}

/* prompt/completion/label (TRL's unpaired preference rows, KTO's), or without the label
 * (FMT_COMPLETION, labelled false: a row a reward model scores). */
static row_result format_unpaired(const json_t *obj, bool labelled, data_record *rec, strbuf *why)
{
    const json_t *p = json_object_get(obj, "prompt"), *c = json_object_get(obj, "completion"),
                 *l = json_object_get(obj, "label");
    const char *need = labelled ? "unpaired rows need prompt, completion and label" : "rows need prompt and completion";
    if (!p || !c || (labelled && !l)) {
        sb_printf(why, "no \"%s\" (%s)", !p ? "prompt" : !c ? "completion" : "label", need);
        return ROW_BAD;
    }
    if (labelled && !json_is_boolean(l)) {
        sb_printf(why, "\"label\" is %s, expected true or false", reader_kind(l));
        return ROW_BAD;
    }
    rec->label = labelled && json_is_true(l);
    return prompt_completion(obj, p, c, rec, why);
}

/* prompt alone (GRPO's rows): text or a list of turns; the other columns stay for the reward
 * functions (the whole row kept as JSON). */
static row_result format_prompt(const json_t *obj, data_record *rec, strbuf *why)
{
    const json_t *p = json_object_get(obj, "prompt");
    if (!p) {
        sb_printf(why, "no \"prompt\" (GRPO's rows need a prompt: text or a list of {role, content} turns)");
        return ROW_BAD;
    }
    rec->pair_chat = json_is_array(p);
    if (!rec->pair_chat && !json_is_string(p)) {
        sb_printf(why, "\"prompt\" is %s, expected a string or a list of {role, content} turns", reader_kind(p));
        return ROW_BAD;
    }
    if (rec->pair_chat) {
        if (!pair_turns(obj, "prompt", rec, why) || !row_tools(obj, rec, why)) return ROW_BAD;
        rec->n_prompt = rec->n;
        if (rec->n == 0) return ROW_EMPTY;
    } else {
        const char *t;
        if (!get_text(obj, "prompt", "prompt", true, &t, why)) return ROW_BAD;
        if (blank(t)) return ROW_EMPTY;
        rec->prompt = xstrdup(t);
    }
    rec->columns = json_dumps(obj, JSON_COMPACT);
    if (!rec->columns) abort();
    return ROW_OK;
}

/* ---- Alpaca, text ---- */

static row_result format_alpaca(const json_t *obj, bool input_role, data_record *rec, strbuf *why)
{
    const char *instruction, *input, *output;
    if (!get_text(obj, "instruction", "instruction", true, &instruction, why) ||
        !get_text(obj, "input", "input", false, &input, why) || !get_text(obj, "output", "output", true, &output, why))
        return ROW_BAD;
    if (blank(instruction) && blank(input) && blank(output)) return ROW_EMPTY;
    if (input_role || !*input) add_message(rec, "user", instruction);
    else {
        strbuf user = {0};
        sb_printf(&user, "%s\nInput: %s", instruction, input);
        add_message(rec, "user", user.data);
        sb_free(&user);
    }
    if (input_role && *input) add_message(rec, "input", input);
    add_message(rec, "assistant", output);
    return ROW_OK;
}

static row_result format_text(const json_t *obj, const char *field, data_record *rec, strbuf *why)
{
    const char *text;
    if (!get_text(obj, field, field, true, &text, why)) return ROW_BAD;
    if (blank(text)) return ROW_EMPTY;
    rec->text = xstrdup(text);
    return ROW_OK;
}

row_result format_row(data_format f, const json_t *obj, const char *text_field, bool alpaca_input_role,
                      data_record *rec, strbuf *why)
{
    *rec = (data_record){0};
    switch (f) {
    case FMT_CONVERSATIONS: return format_turns(&sharegpt_style, obj, rec, why);
    case FMT_MESSAGES: return format_turns(&messages_style, obj, rec, why);
    case FMT_ALPACA: return format_alpaca(obj, alpaca_input_role, rec, why);
    case FMT_TEXT: return format_text(obj, text_field, rec, why);
    case FMT_PREFERENCE: return format_pair(obj, rec, why);
    case FMT_UNPAIRED: return format_unpaired(obj, true, rec, why);
    case FMT_COMPLETION: return format_unpaired(obj, false, rec, why);
    case FMT_PROMPT: return format_prompt(obj, rec, why);
    default: break;
    }
    sb_printf(why, "no \"conversations\", \"messages\", \"instruction\"/\"output\" or \"%s\" column",
              shown_text(text_field).s);
    return ROW_BAD;
}

void record_free(data_record *rec)
{
    json_decref(rec->tools);
    for (int i = 0; i < rec->n; i++) {
        free((char *)rec->msgs[i].content);
        json_decref((json_t *)rec->msgs[i].fields);
    }
    free(rec->msgs);
    free(rec->text);
    free(rec->prompt), free(rec->chosen), free(rec->rejected);
    free(rec->columns);
    *rec = (data_record){0};
}
