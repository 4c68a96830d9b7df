/* chat_template.c — the built-in chat templates, rendering exactly what transformers'
 * apply_chat_template renders for the models' own Jinja templates: chatml, smollm2 (ChatML with
 * SmolLM2's default system prompt), qwen2.5 (ChatML with Qwen's default system prompt and tool
 * results as user turns), llama-3 (Llama 3 Instruct: contents trimmed), llama-3.1 and llama-3.2
 * (Llama 3.1/3.3 and 3.2 Instruct: a dated system block first), alpaca (Unsloth's multi-turn
 * Alpaca, plus an "input" role for the "### Input:" block), gemma (Gemma's turns, contents
 * trimmed, a system message folded into the first turn as Gemma 3 does), mistral (Mistral's V1
 * [INST] format of Mistral-7B-Instruct-v0.1) and mistral-v3 (the format of
 * Mistral-7B-Instruct-v0.3); and detecting which of them a model's template text is. gemma and the
 * mistral ones refuse what their templates refuse (roles that do not alternate from user), with a
 * message naming the message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptrain/tokenizer.h"

#define SMOLLM2_SYSTEM "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
#define ALPACA_PREAMBLE                                                                            \
    "Below are some instructions that describe some tasks. Write responses that appropriately "   \
    "complete each request."

typedef pt_status (*render_fn)(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen,
                               strbuf *out);

static bool is_role(const chat_message *m, const char *role) { return strcmp(m->role, role) == 0; }

/* ---- chatml, smollm2 ---- */

static void chatml_turns(const chat_message *msgs, int n, bool gen, strbuf *out)
{
    for (int i = 0; i < n; i++) sb_printf(out, "<|im_start|>%s\n%s<|im_end|>\n", msgs[i].role, msgs[i].content);
    if (gen) sb_printf(out, "<|im_start|>assistant\n");
}

static pt_status render_chatml(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)bos, (void)eos;
    chatml_turns(msgs, n, gen, out);
    return PT_OK;
}

static pt_status render_smollm2(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)bos, (void)eos;
    if (n > 0 && !is_role(&msgs[0], "system")) sb_printf(out, "<|im_start|>system\n" SMOLLM2_SYSTEM "<|im_end|>\n");
    chatml_turns(msgs, n, gen, out);
    return PT_OK;
}

/* ---- llama-3 ---- */

/* Python's str.isspace, which Jinja's trim strips (on a decoded code point). */
static bool py_space(uint32_t c)
{
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The code point of the character at s[i] (UTF-8; a stray byte reads as itself) and its length. */
static uint32_t cp_at(const unsigned char *s, size_t i, size_t n, size_t *len)
{
    unsigned char c = s[i];
    size_t k = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
    if (i + k > n) k = 1;
    uint32_t cp = k == 1 ? c : (uint32_t)(c & (0x7f >> k));
    for (size_t j = 1; j < k; j++) cp = cp << 6 | (s[i + j] & 0x3f);
    *len = k;
    return cp;
}

/* content with leading and trailing white space stripped, as (start, length). */
static void py_strip(const char *content, size_t *start, size_t *len)
{
    const unsigned char *s = (const unsigned char *)content;
    size_t n = strlen(content), a = 0, b = 0, k;
    while (a < n && py_space(cp_at(s, a, n, &k))) a += k;
    for (size_t i = a; i < n; i += k)
        if (!py_space(cp_at(s, i, n, &k))) b = i + k;
    *start = a;
    *len = b > a ? b - a : 0;
}

static pt_status render_llama3(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)eos;
    for (int i = 0; i < n; i++) {
        size_t start, len;
        py_strip(msgs[i].content, &start, &len);
        sb_printf(out, "%s<|start_header_id|>%s<|end_header_id|>\n\n%.*s<|eot_id|>", i == 0 ? (bos ? bos : "<|begin_of_text|>") : "",
                  msgs[i].role, (int)len, msgs[i].content + start);
    }
    if (gen) sb_printf(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return PT_OK;
}

/* ---- llama-3.1, llama-3.2: Llama 3.1+ Instruct, a dated system block always first ---- */

/* "Today Date: " of Llama 3.2's template: strftime_now("%d %b %Y"), the day the text is rendered
 * (SOURCE_DATE_EPOCH, when set, pins it, as for reproducible builds). */
static void today_string(char *out, size_t n)
{
    time_t now = time(NULL);
    const char *epoch = getenv("SOURCE_DATE_EPOCH");
    if (epoch && *epoch) now = (time_t)strtoll(epoch, NULL, 10);
    struct tm tm;
    localtime_r(&now, &tm);
    strftime(out, n, "%d %b %Y", &tm);
}

/* Jinja's tojson of a string in transformers (Python's json.dumps, ensure_ascii=False): quoted,
 * with '"', '\\' and control characters escaped, everything else as it is. (jansson writes
 * \u001F where Python writes \u001f, so it is not used here.) */
static void py_json_string(const char *s, strbuf *out)
{
    sb_printf(out, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        const char *esc = *p == '"' ? "\\\"" : *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : *p == '\r' ? "\\r"
                        : *p == '\t' ? "\\t" : *p == '\b' ? "\\b" : *p == '\f' ? "\\f" : NULL;
        if (esc) sb_printf(out, "%s", esc);
        else if (*p < 0x20) sb_printf(out, "\\u%04x", *p);
        else sb_printf(out, "%c", *p);
    }
    sb_printf(out, "\"");
}

/* Llama 3.1's template (3.3's is the same): the system block names the knowledge cutoff and a
 * date, holds the trimmed system message (or nothing), and tool results come as "ipython", their
 * content as JSON (a string is iterable to Jinja, so tojson quotes it). */
static pt_status llama31_turns(const char *bos, const char *date, const chat_message *msgs, int n, bool gen,
                               strbuf *out)
{
    if (n == 0) return ERR(PT_ERR_USER, "chat template llama-3.1: no messages (its template reads the first one)");
    int sys = is_role(&msgs[0], "system");
    size_t start = 0, len = 0;
    if (sys) py_strip(msgs[0].content, &start, &len);
    sb_printf(out, "%s<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: "
                   "%s\n\n%.*s<|eot_id|>", bos ? bos : "<|begin_of_text|>", date, (int)len,
              sys ? msgs[0].content + start : "");
    for (int i = sys; i < n; i++) {
        if (is_role(&msgs[i], "tool") || is_role(&msgs[i], "ipython")) {
            sb_printf(out, "<|start_header_id|>ipython<|end_header_id|>\n\n");
            py_json_string(msgs[i].content, out);
            sb_printf(out, "<|eot_id|>");
            continue;
        }
        py_strip(msgs[i].content, &start, &len);
        sb_printf(out, "<|start_header_id|>%s<|end_header_id|>\n\n%.*s<|eot_id|>", msgs[i].role, (int)len,
                  msgs[i].content + start);
    }
    if (gen) sb_printf(out, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    return PT_OK;
}

static pt_status render_llama31(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)eos;
    return llama31_turns(bos, "26 Jul 2024", msgs, n, gen, out);
}

static pt_status render_llama32(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)eos;
    char date[64];
    today_string(date, sizeof date);
    return llama31_turns(bos, date, msgs, n, gen, out);
}

/* ---- qwen2.5: ChatML with Qwen's default system prompt; tool results as a user turn ---- */

#define QWEN25_SYSTEM "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

static pt_status render_qwen25(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)bos, (void)eos;
    if (n == 0) return ERR(PT_ERR_USER, "chat template qwen2.5: no messages (its template reads the first one)");
    sb_printf(out, "<|im_start|>system\n%s<|im_end|>\n", is_role(&msgs[0], "system") ? msgs[0].content : QWEN25_SYSTEM);
    for (int i = 0; i < n; i++) {
        bool tool = is_role(&msgs[i], "tool");
        if (tool) { /* a run of tool results is one user turn */
            bool first = i == 0 || !is_role(&msgs[i - 1], "tool"), last = i == n - 1 || !is_role(&msgs[i + 1], "tool");
            sb_printf(out, "%s\n<tool_response>\n%s\n</tool_response>%s", first ? "<|im_start|>user" : "",
                      msgs[i].content, last ? "<|im_end|>\n" : "");
        } else if (is_role(&msgs[i], "user") || is_role(&msgs[i], "assistant") || (is_role(&msgs[i], "system") && i > 0)) {
            sb_printf(out, "<|im_start|>%s\n%s<|im_end|>\n", msgs[i].role, msgs[i].content);
        } /* any other role: the template writes nothing for it */
    }
    if (gen) sb_printf(out, "<|im_start|>assistant\n");
    return PT_OK;
}

/* ---- alpaca ---- */

static pt_status render_alpaca(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    bool system = n > 0 && is_role(&msgs[0], "system");
    sb_printf(out, "%s%s\n\n", bos ? bos : "", system ? msgs[0].content : ALPACA_PREAMBLE);
    for (int i = system ? 1 : 0; i < n; i++) {
        if (is_role(&msgs[i], "user")) sb_printf(out, "### Instruction:\n%s\n\n", msgs[i].content);
        else if (is_role(&msgs[i], "input")) sb_printf(out, "### Input:\n%s\n\n", msgs[i].content);
        else if (is_role(&msgs[i], "assistant")) sb_printf(out, "### Response:\n%s%s\n\n", msgs[i].content, eos ? eos : "");
        else
            return ERR(PT_ERR_USER,
                       "chat template alpaca: message %d has role \"%s\" (alpaca has user, input and assistant, "
                       "and system first)", i, shown_text(msgs[i].role).s);
    }
    if (gen) sb_printf(out, "### Response:\n");
    return PT_OK;
}

/* ---- gemma, mistral: an optional system message, then user/assistant alternating ---- */

static pt_status turn_order(const char *name, const chat_message *msgs, int i, int k)
{
    if (is_role(&msgs[i], "user") == (k % 2 == 0)) return PT_OK;
    return ERR(PT_ERR_USER,
               "chat template %s: message %d has role \"%s\" where a %s turn belongs (%s takes an optional system "
               "message, then user and assistant turns alternating, starting with user)",
               shown_text(name).s, i, shown_text(msgs[i].role).s, k % 2 == 0 ? "user" : "non-user", shown_text(name).s);
}

static pt_status render_gemma(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)eos;
    int sys = n > 0 && is_role(&msgs[0], "system");
    sb_printf(out, "%s", bos ? bos : "<bos>");
    for (int i = sys; i < n; i++) {
        TRY(turn_order("gemma", msgs, i, i - sys));
        size_t start, len;
        py_strip(msgs[i].content, &start, &len);
        bool fold = sys && i == 1;
        const char *role = is_role(&msgs[i], "assistant") ? "model" : msgs[i].role;
        sb_printf(out, "<start_of_turn>%s\n%s%s%.*s<end_of_turn>\n", role, fold ? msgs[0].content : "",
                  fold ? "\n\n" : "", (int)len, msgs[i].content + start);
    }
    if (gen) sb_printf(out, "<start_of_turn>model\n");
    return PT_OK;
}

/* The prompt ends with " [/INST]" whether or not a generation prompt is asked for. */
static pt_status render_mistral(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen, strbuf *out)
{
    (void)gen;
    int sys = n > 0 && is_role(&msgs[0], "system");
    sb_printf(out, "%s", bos ? bos : "<s>");
    for (int i = sys; i < n; i++) {
        TRY(turn_order("mistral", msgs, i, i - sys));
        bool fold = sys && i == 1;
        if (is_role(&msgs[i], "user"))
            sb_printf(out, " [INST] %s%s%s [/INST]", fold ? msgs[0].content : "", fold ? "\n\n" : "", msgs[i].content);
        else if (is_role(&msgs[i], "assistant"))
            sb_printf(out, " %s%s", msgs[i].content, eos ? eos : "</s>");
        else
            return ERR(PT_ERR_USER,
                       "chat template mistral: message %d has role \"%s\" (mistral has user and assistant, "
                       "and system first)",
                       i, shown_text(msgs[i].role).s);
    }
    return PT_OK;
}

/* Mistral's v3 format (Mistral-7B-Instruct-v0.3): "[INST] " with no space before it, the system
 * message only in the last message and only when that is a user turn (so a conversation that
 * ends with a reply renders without it, as the template does), replies trimmed after a space. */
static pt_status render_mistral_v3(const char *bos, const char *eos, const chat_message *msgs, int n, bool gen,
                                   strbuf *out)
{
    (void)gen;
    if (n == 0) return ERR(PT_ERR_USER, "chat template mistral-v3: no messages (its template reads the first one)");
    int sys = is_role(&msgs[0], "system");
    sb_printf(out, "%s", bos ? bos : "<s>");
    for (int i = sys; i < n; i++) {
        TRY(turn_order("mistral-v3", msgs, i, i - sys));
        bool with_system = sys && i == n - 1;
        size_t start, len;
        if (is_role(&msgs[i], "user")) {
            sb_printf(out, "[INST] %s%s%s[/INST]", with_system ? msgs[0].content : "", with_system ? "\n\n" : "",
                      msgs[i].content);
        } else if (is_role(&msgs[i], "assistant")) {
            py_strip(msgs[i].content, &start, &len);
            sb_printf(out, " %.*s%s", (int)len, msgs[i].content + start, eos ? eos : "</s>");
        } else {
            return ERR(PT_ERR_USER, "chat template mistral-v3: message %d has role \"%s\" (mistral-v3 has user and "
                       "assistant, and system first)", i, shown_text(msgs[i].role).s);
        }
    }
    return PT_OK;
}

/* ---- names ---- */

static const struct {
    const char *name;
    render_fn fn;
} templates[] = {
    {"chatml", render_chatml},
    {"smollm2", render_smollm2},
    {"llama-3", render_llama3},
    {"llama-3.1", render_llama31},
    {"llama-3.2", render_llama32},
    {"qwen2.5", render_qwen25},
    {"alpaca", render_alpaca},
    {"gemma", render_gemma},
    {"mistral", render_mistral},
    {"mistral-v3", render_mistral_v3},
};

#define N_TEMPLATES (int)(sizeof templates / sizeof templates[0])

pt_status chat_render_with_tokens(const char *name, const char *bos, const char *eos, const chat_message *msgs, int n,
                                  bool add_generation_prompt, strbuf *out)
{
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content) return ERR(PT_ERR_USER, "chat message %d has no role or no content", i);
    for (int k = 0; name && k < N_TEMPLATES; k++)
        if (strcmp(name, templates[k].name) == 0) return templates[k].fn(bos, eos, msgs, n, add_generation_prompt, out);
    return ERR(PT_ERR_USER, "unknown chat template \"%s\" (known: chatml, smollm2, qwen2.5, llama-3, llama-3.1, "
               "llama-3.2, alpaca, gemma, mistral, mistral-v3)",
               name ? shown_text(name).s : "(null)");
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
