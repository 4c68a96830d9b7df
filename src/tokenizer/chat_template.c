/* chat_template.c — the built-in chat templates, rendering exactly what transformers'
 * apply_chat_template renders for the models' own Jinja templates: chatml, smollm2 (ChatML with
 * SmolLM2's default system prompt), llama-3 (Llama 3 Instruct: contents trimmed), alpaca
 * (Unsloth's multi-turn Alpaca, plus an "input" role for the "### Input:" block), gemma (Gemma's
 * turns, contents trimmed, a system message folded into the first turn as Gemma 3 does) and
 * mistral (Mistral's V1 [INST] format of Mistral-7B-Instruct-v0.1), mistral-v3 (the format of
 * Mistral-7B-Instruct-v0.3); and detecting which of them a model's template text is. gemma and the
 * mistral ones refuse what their templates refuse (roles that do not alternate from user), with a
 * message naming the message. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
                       "and system first)", i, msgs[i].role);
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
               name, i, msgs[i].role, k % 2 == 0 ? "user" : "non-user", name);
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
            return ERR(PT_ERR_USER, "chat template mistral: message %d has role \"%s\" (mistral has user and assistant, "
                       "and system first)", i, msgs[i].role);
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
    int sys = n > 0 && is_role(&msgs[0], "system");
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
                       "assistant, and system first)", i, msgs[i].role);
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
    return ERR(PT_ERR_USER, "unknown chat template \"%s\" (known: chatml, smollm2, llama-3, alpaca, gemma, mistral, "
               "mistral-v3)",
               name ? name : "(null)");
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

const char *chat_template_detect(const char *text)
{
    if (!text) return NULL;
    if (strstr(text, "<|start_header_id|>") && strstr(text, "<|eot_id|>"))
        return strstr(text, "Cutting Knowledge Date") ? NULL : "llama-3"; /* 3.1+ write a dated system block */
    if (strstr(text, "<|im_start|>")) {
        if (strstr(text, "named SmolLM")) return "smollm2";
        return chatml_default_system(text) ? NULL : "chatml";
    }
    if (strstr(text, "### Instruction:") && strstr(text, "### Response:")) return "alpaca";
    if (strstr(text, "<start_of_turn>") && strstr(text, "<end_of_turn>")) return "gemma";
    if (strstr(text, "[INST]") && strstr(text, "[/INST]"))
        return mistral_v1(text) ? "mistral" : mistral_v3(text) ? "mistral-v3" : NULL;
    return NULL;
}
