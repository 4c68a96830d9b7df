/* label.c — a formatted row as token ids and labels.
 *
 * Chat rows are rendered with the chat template and tokenized once with parse_special, as they
 * are: the template writes bos where the model's own template does (apply_chat_template adds no
 * special tokens), so a chat row never gets two. With assistant-only loss the labelled tokens
 * are found from byte spans of the rendered text: the template's {% generation %} blocks where it
 * has them (transformers' return_assistant_tokens_mask), else, for assistant turn i, from where
 * the rendering of turns 0..i-1 with the generation prompt ends (TRL's prompt-completion mask;
 * else where turn i's content starts) to where the rendering of turns 0..i ends, less trailing
 * white space (the end-of-turn text is labelled, the "\n" after it is not). A template that
 * renders the last turn with more than a turn later turns follow (Qwen3's <think> block) is
 * matched by the turn's text: the longest text at the start that ends turn i's rendering as
 * the last one. The renderings used must be prefixes of the full text (checked; said when no
 * method finds a turn). A token is labelled when its bytes overlap a span (HF's
 * return_assistant_tokens_mask rule); token byte offsets come from decoding the ids one by one
 * (exact for byte-level BPE; whitespace an lstrip/rstrip special token swallowed is skipped).
 * Should the decoded tokens not line up with the text, each span's token range is found instead
 * by tokenizing the text up to its two ends. Plain text is tokenized as the model's tokenizer
 * does with its special tokens (tokenizer_encode_text: bos first when it adds one, once), eos
 * appended, every token labelled. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

/* ---- setup ---- */

static char *token_text(const pt_tokenizer *tok, int32_t id)
{
    if (id < 0) return NULL;
    strbuf sb = {0};
    if (tokenizer_decode_token(tok, id, &sb) != PT_OK) {
        sb_free(&sb);
        return NULL;
    }
    return sb.data ? sb.data : xstrdup("");
}

const char *label_template_known(const char *name) { return chat_template_name_known(name); }

/* The unknown name error, listing the built-ins and the model's own named templates. */
static pt_status unknown_template(const pt_tokenizer *tok, const char *name)
{
    strbuf names = {0};
    tokenizer_chat_template_names(tok, &names);
    pt_status rc = name ? ERR(PT_ERR_USER, "unknown chat template \"%s\" (known: %s, or the model's own%s%s)",
                              shown_text(name).s, CHAT_TEMPLATE_BUILTINS, names.len ? ": model, " : "", sb_text(&names))
                        : ERR(PT_ERR_USER, "the model has no default chat template, only named ones (%s); set "
                              "chat_template to one of them or of %s", sb_text(&names), CHAT_TEMPLATE_BUILTINS);
    sb_free(&names);
    return rc;
}

pt_status label_init(label_ctx *c, const pt_tokenizer *tok, const char *template, bool assistant_only,
                     int32_t max_len)
{
    *c = (label_ctx){.tok = tok, .assistant_only = assistant_only, .max_len = max_len};
    c->template = chat_template_name_known(template);
    /* a name among the model's own templates (tool_use, rag, ...), as apply_chat_template(chat_template=name) */
    const char *named = c->template ? NULL : tokenizer_chat_template_named(tok, template);
    const char *own = tok ? tokenizer_chat_template(tok) : NULL;
    /* "default": the model's own, as transformers names it among its named templates */
    if (!c->template && !named && own && template && !strcmp(template, "default")) c->template = template = "model";
    if (!c->template && !named && template) return unknown_template(tok, template);
    if (!named && (!template || !strcmp(template, "model")) && !own && tok) { /* named ones and no default */
        strbuf names = {0};
        tokenizer_chat_template_names(tok, &names);
        bool some = names.len > 0;
        sb_free(&names);
        if (some) return unknown_template(tok, NULL);
    }
    if (named) c->template = "model";
    pt_status rc = chat_tmpl_open(named ? "model" : template, named ? named : own, &c->ct);
    if (rc != PT_OK) return rc;
    c->bos = token_text(tok, tokenizer_bos(tok));
    c->eos = token_text(tok, tokenizer_eos(tok));
    return PT_OK;
}

pt_status label_use_tool_template(label_ctx *c)
{
    const char *text = c->tok ? tokenizer_chat_template_named(c->tok, "tool_use") : NULL;
    if (!text || c->ct_tools) return PT_OK;
    pt_status rc = chat_tmpl_open("model", text, &c->ct_tools);
    if (rc != PT_OK) err_context("the model's chat template tool_use");
    return rc;
}

const chat_tmpl *label_template_for(const label_ctx *c, const json_t *tools)
{
    return tools && c->ct_tools ? c->ct_tools : c->ct;
}

void label_free(label_ctx *c)
{
    free(c->bos);
    free(c->eos);
    chat_tmpl_free(c->ct);
    chat_tmpl_free(c->ct_tools);
    c->bos = c->eos = NULL;
    c->ct = c->ct_tools = NULL;
}

/* ---- spans ---- */

static pt_status render(const label_ctx *c, const chat_message *m, int n, const json_t *tools, bool gen,
                        strbuf *out, size_t **spans, int *n_spans)
{
    out->len = 0;
    if (out->data) out->data[0] = '\0';
    chat_args a = {.bos = c->bos, .eos = c->eos, .specials = tokenizer_template_tokens(c->tok), .kwargs = c->kwargs,
                   .tools = tools, .add_generation_prompt = gen};
    return chat_tmpl_render(label_template_for(c, tools), &a, m, n, out, spans, n_spans);
}

static bool starts_with(const strbuf *s, const char *prefix, size_t n)
{
    return s->len >= n && memcmp(s->data, prefix, n) == 0;
}

static size_t trim_end(const char *s, size_t n)
{
    while (n > 0 && strchr(" \t\r\n", s[n - 1])) n--;
    return n;
}

#define SENTINEL "\xee\x80\x80" /* U+E000, in place of the content: where the content starts */

typedef struct {
    int32_t *ids; /* the whole rendering's tokens, encoded when first needed (NULL: not yet) */
    size_t n;
} full_tokens;

/* The last token boundary of full in (lo, d], else lo: the longest text up to d whose tokens
 * begin full's tokens (TRL's common prefix of the prompt's and the whole conversation's ids). */
static pt_status token_boundary(const label_ctx *c, const strbuf *full, full_tokens *ft, size_t lo, size_t d,
                                size_t *at)
{
    *at = SIZE_MAX;
    if (!ft->ids) TRY(tokenizer_encode(c->tok, sb_text(full), full->len, true, &ft->ids, &ft->n));
    const int32_t *all = ft->ids;
    size_t n_all = ft->n, n = 0;
    int32_t *ids = NULL;
    pt_status rc = PT_OK;
    for (size_t p = d; p > lo && *at == SIZE_MAX && rc == PT_OK; p--) {
        if (p < full->len && (full->data[p] & 0xC0) == 0x80) continue; /* inside a UTF-8 character */
        rc = tokenizer_encode(c->tok, full->data, p, true, &ids, &n);
        if (rc == PT_OK && n <= n_all && !memcmp(ids, all, n * sizeof *ids)) *at = p;
        free(ids);
        ids = NULL;
    }
    if (rc == PT_OK && *at == SIZE_MAX) *at = lo; /* where the turns before end */
    return rc;
}

/* Where assistant turn i starts in the whole rendering full, or SIZE_MAX: after the rendering of
 * the turns before it with the generation prompt (as TRL's prompt-completion mask: what the model
 * writes after the prompt, a <think> block the template opens included), when that begins full;
 * else, when the turns before it render as full begins but the generation prompt holds more than
 * the turn (Qwen3.5's "<think>\n", Gemma 4's empty thought channel), where the two part, backed
 * off to a token boundary of full (TRL's common prefix of token ids); else where its content
 * starts (found with the content replaced by SENTINEL, a prefix of full). */
static pt_status turn_start(const label_ctx *c, chat_message *m, int i, const json_t *tools, const strbuf *full,
                            full_tokens *ft, strbuf *tmp, size_t *a)
{
    *a = SIZE_MAX;
    size_t d = 0, before = SIZE_MAX;
    if (render(c, m, i, tools, true, tmp, NULL, NULL) == PT_OK) {
        if (starts_with(full, tmp->data, tmp->len)) return *a = tmp->len, PT_OK;
        while (d < tmp->len && d < full->len && tmp->data[d] == full->data[d]) d++;
        strbuf prior = {0};
        if (render(c, m, i, tools, false, &prior, NULL, NULL) == PT_OK) {
            if (starts_with(full, prior.data, prior.len) && starts_with(tmp, prior.data, prior.len)) before = prior.len;
        } else
            err_clear();
        sb_free(&prior);
    } else
        err_clear(); /* a template may refuse a conversation ending in a user turn: try the content */
    if (before != SIZE_MAX && d >= before) return token_boundary(c, full, ft, before, d, a);
    const char *content = m[i].content;
    m[i].content = SENTINEL;
    pt_status rc = render(c, m, i + 1, tools, false, tmp, NULL, NULL);
    m[i].content = content;
    TRY(rc);
    const char *at = strstr(sb_text(tmp), SENTINEL);
    if (at && starts_with(full, tmp->data, (size_t)(at - tmp->data))) *a = (size_t)(at - tmp->data);
    return PT_OK;
}

/* The special token text s[0..n) is exactly, or 0: its length when it is one token with special
 * tokens parsed and not without (an end-of-turn marker such as <|end|>). */
static size_t special_token(const label_ctx *c, const char *s, size_t n)
{
    int32_t *with = NULL, *without = NULL;
    size_t n_with = 0, n_without = 0;
    bool one = tokenizer_encode(c->tok, s, n, true, &with, &n_with) == PT_OK && n_with == 1 &&
               tokenizer_encode(c->tok, s, n, false, &without, &n_without) == PT_OK &&
               (n_without != 1 || without[0] != with[0]);
    free(with);
    free(without);
    err_clear();
    return one ? n : 0;
}

/* The first (or last) token of s[0..n) when it is a special token: its length, else 0. */
static size_t edge_special(const label_ctx *c, const char *s, size_t n, bool last)
{
    int32_t *ids = NULL;
    size_t k = 0, len = 0;
    strbuf t = {0};
    if (tokenizer_encode(c->tok, s, n, true, &ids, &k) == PT_OK && k > 0 &&
        tokenizer_decode_token(c->tok, ids[last ? k - 1 : 0], &t) == PT_OK && t.len && t.len <= n &&
        !memcmp(last ? s + n - t.len : s, t.data, t.len))
        len = special_token(c, t.data, t.len);
    err_clear();
    free(ids);
    sb_free(&t);
    return len;
}

/* The longest text at the start of text[0..room) that ends turn[0..n), or SIZE_MAX. */
static size_t longest_tail(const char *text, size_t room, const char *turn, size_t n)
{
    for (size_t k = n < room ? n : room; k > 0; k--)
        if (text[k - 1] == turn[n - 1] && !memcmp(text, turn + n - k, k)) return k;
    return SIZE_MAX;
}

/* Where assistant turn i (starting at a) ends in full, or SIZE_MAX: the rendering of the turns up
 * to it, less trailing white space (its end-of-turn text included), when that is a prefix of full,
 * or is once the eos a template writes at the end of a conversation is taken off (Phi-3.5).
 * A template that renders a last turn with more (Qwen3: a <think> block, dropped from turns a later
 * user turn follows) is matched by the turn's text: the longest text after a in full that ends
 * the turn's rendering as the last one; a template that ends a last turn with another special
 * token than an earlier one (gpt-oss: <|return|>, <|end|>) likewise, with that token swapped. */
static pt_status turn_end(const label_ctx *c, const chat_message *m, int i, const json_t *tools, const strbuf *full,
                          strbuf *tmp, size_t a, size_t *b)
{
    *b = SIZE_MAX;
    TRY(render(c, m, i + 1, tools, false, tmp, NULL, NULL));
    size_t end = trim_end(tmp->data, tmp->len);
    if (starts_with(full, tmp->data, tmp->len)) {
        if (end >= a) *b = end;
        return PT_OK;
    }
    size_t eos = c->eos ? strlen(c->eos) : 0; /* a conversation's end marked with eos (Phi-3.5) */
    if (eos && end >= a + eos && !memcmp(tmp->data + end - eos, c->eos, eos)) {
        size_t cut = trim_end(tmp->data, end - eos);
        if (cut > a && starts_with(full, tmp->data, cut)) return *b = cut, PT_OK;
    }
    if (!starts_with(full, tmp->data, a) || end <= a) return PT_OK;
    const char *turn = tmp->data + a, *text = full->data + a;
    size_t n = end - a, room = full->len - a, k = longest_tail(text, room, turn, n);
    if (k != SIZE_MAX) return *b = a + k, PT_OK;
    size_t last = edge_special(c, turn, n, true), next; /* its end-of-turn token, swapped */
    if (last && last < n && (k = longest_tail(text, room, turn, n - last)) != SIZE_MAX &&
        (next = edge_special(c, text + k, room - k < 64 ? room - k : 64, false)))
        *b = a + k + next;
    return PT_OK;
}

/* The span [*a, *b) of assistant turn i by rendering the turns up to it (turn_start, turn_end). */
static pt_status turn_span(const label_ctx *c, chat_message *m, int i, const json_t *tools, const strbuf *full,
                           full_tokens *ft, strbuf *tmp, size_t *a, size_t *b)
{
    TRY(turn_start(c, m, i, tools, full, ft, tmp, a));
    if (*a != SIZE_MAX) TRY(turn_end(c, m, i, tools, full, tmp, *a, b));
    if (*a != SIZE_MAX && *b != SIZE_MAX && *b > *a) return PT_OK;
    return ERR(PT_ERR_USER,
               "chat template %s: cannot find assistant turn %d in the rendered conversation: the template has "
               "no {%% generation %%} blocks to mark it, and neither the rendering of the turns before it "
               "(with the generation prompt) nor that of the turns up to it is where the whole conversation's "
               "rendering has them; set assistant_only_loss: false, or choose a chat_template",
               shown_text(c->template ? c->template : "model").s, i);
}

pt_status label_spans(const label_ctx *c, const chat_message *m, int n, const json_t *tools, strbuf *text,
                      size_t **spans, int *n_spans)
{
    *spans = NULL;
    *n_spans = 0;
    bool marked = chat_tmpl_has_generation(label_template_for(c, tools));
    TRY(render(c, m, n, tools, false, text, marked ? spans : NULL, marked ? n_spans : NULL));
    if (marked) return PT_OK; /* the template's own {% generation %} spans, as transformers takes them */
    chat_message *copy = malloc(sizeof *copy * (size_t)(n + 1));
    size_t *out = malloc(sizeof *out * 2 * (size_t)(n + 1));
    if (!copy || !out) abort();
    memcpy(copy, m, sizeof *copy * (size_t)n);
    strbuf tmp = {0};
    full_tokens ft = {0};
    pt_status rc = PT_OK;
    int k = 0;
    for (int i = 0; i < n && rc == PT_OK; i++) {
        if (strcmp(m[i].role, "assistant") != 0) continue;
        rc = turn_span(c, copy, i, tools, text, &ft, &tmp, &out[2 * k], &out[2 * k + 1]);
        if (rc == PT_OK && k > 0 && out[2 * k] < out[2 * k - 1])
            rc = ERR(PT_ERR_USER, "chat template %s: assistant turn %d overlaps the one before it in the rendered "
                     "conversation; set assistant_only_loss: false, or choose a chat_template",
                     shown_text(c->template ? c->template : "model").s, i);
        k++;
    }
    sb_free(&tmp);
    free(ft.ids);
    free(copy);
    if (rc != PT_OK) {
        free(out);
        return rc;
    }
    *spans = out;
    *n_spans = k;
    return PT_OK;
}

/* ---- marking ---- */

/* Where a token that decodes to piece[0..len) starts at or after pos, or SIZE_MAX. */
static size_t locate(const char *text, size_t n, size_t pos, const char *piece, size_t len)
{
    for (size_t q = pos; q + len <= n; q++) {
        if (!memcmp(text + q, piece, len)) return q;
        if (!isspace((unsigned char)text[q])) break;
    }
    return SIZE_MAX;
}

/* locate, also taking a piece whose leading space is not in the text: the "▁" a SentencePiece
 * Prepend normalizer (Llama 2's tokenizer.json) puts before the text after every special token.
 * *plen gets the length the piece covers in the text. */
static size_t locate_piece(const char *text, size_t n, size_t pos, const strbuf *piece, size_t *plen)
{
    *plen = piece->len;
    size_t s = locate(text, n, pos, sb_text(piece), piece->len);
    if (s != SIZE_MAX || piece->len == 0 || piece->data[0] != ' ') return s;
    *plen = piece->len - 1;
    return locate(text, n, pos, piece->data + 1, *plen);
}

bool label_mark_by_offsets(const label_ctx *c, const char *text, size_t len, const int32_t *ids, size_t n,
                           const size_t *spans, int n_spans, int32_t *labels)
{
    strbuf piece = {0};
    size_t pos = 0;
    int k = 0;
    bool ok = true;
    for (size_t t = 0; t < n && ok; t++) {
        piece.len = 0;
        ok = tokenizer_decode_token(c->tok, ids[t], &piece) == PT_OK;
        size_t plen = 0, s = ok ? locate_piece(text, len, pos, &piece, &plen) : SIZE_MAX;
        ok = s != SIZE_MAX;
        if (!ok) break;
        pos = s + plen;
        while (k < n_spans && spans[2 * k + 1] <= s) k++;
        if (k < n_spans && spans[2 * k] < pos && plen) labels[t] = ids[t];
    }
    for (; ok && pos < len; pos++) ok = isspace((unsigned char)text[pos]);
    for (size_t t = 0; !ok && t < n; t++) labels[t] = PT_IGNORE_INDEX; /* leave a clean slate for the fallback */
    sb_free(&piece);
    return ok;
}

static pt_status count_tokens(const label_ctx *c, const char *text, size_t len, size_t *n)
{
    int32_t *ids;
    TRY(tokenizer_encode(c->tok, text, len, true, &ids, n));
    free(ids);
    return PT_OK;
}

pt_status label_mark_by_prefix(const label_ctx *c, const char *text, const int32_t *ids, size_t n,
                               const size_t *spans, int n_spans, int32_t *labels)
{
    for (int k = 0; k < n_spans; k++) {
        size_t from, to;
        TRY(count_tokens(c, text, spans[2 * k], &from));
        TRY(count_tokens(c, text, spans[2 * k + 1], &to));
        for (size_t t = from; t < to && t < n; t++) labels[t] = ids[t];
    }
    return PT_OK;
}

/* ---- examples ---- */

/* Fill ex from ids[0..n) and labels (both taken over), cut to max_len. */
static void finish(const label_ctx *c, int32_t *ids, int32_t *labels, size_t n, pt_example *ex, bool *truncated,
                   label_result *res)
{
    *truncated = n > (size_t)c->max_len;
    if (*truncated) n = (size_t)c->max_len;
    bool any = false;
    for (size_t t = 0; t < n && !any; t++) any = labels[t] != PT_IGNORE_INDEX;
    *res = any ? LABEL_OK : LABEL_NO_LOSS;
    if (!any) {
        free(ids);
        free(labels);
        *ex = (pt_example){0};
        return;
    }
    /* kept until training: no more than the tokens (the encoder's buffer may have grown past them) */
    int32_t *fit = realloc(ids, sizeof *fit * (n + 1));
    if (fit) ids = fit;
    if ((fit = realloc(labels, sizeof *fit * (n + 1)))) labels = fit;
    *ex = (pt_example){.ids = ids, .labels = labels, .segments = NULL, .len = (int32_t)n};
}

static int32_t *labels_new(const int32_t *ids, size_t n, bool all)
{
    int32_t *labels = malloc(sizeof *labels * (n + 1));
    if (!labels) abort();
    for (size_t t = 0; t < n; t++) labels[t] = all ? ids[t] : PT_IGNORE_INDEX;
    return labels;
}

pt_status label_chat(const label_ctx *c, const chat_message *m, int n, const json_t *tools, pt_example *ex,
                     bool *truncated, label_result *res)
{
    strbuf text = {0};
    size_t *spans, n_ids;
    int n_spans;
    int32_t *ids = NULL;
    pt_status rc = label_spans(c, m, n, tools, &text, &spans, &n_spans);
    if (rc == PT_OK) rc = tokenizer_encode(c->tok, sb_text(&text), text.len, true, &ids, &n_ids);
    int32_t *labels = rc == PT_OK ? labels_new(ids, n_ids, !c->assistant_only) : NULL;
    if (rc == PT_OK && c->assistant_only &&
        !label_mark_by_offsets(c, sb_text(&text), text.len, ids, n_ids, spans, n_spans, labels))
        rc = label_mark_by_prefix(c, sb_text(&text), ids, n_ids, spans, n_spans, labels);
    if (rc == PT_OK) finish(c, ids, labels, n_ids, ex, truncated, res);
    else {
        free(labels);
        free(ids);
    }
    free(spans);
    sb_free(&text);
    return rc;
}

pt_status label_text(const label_ctx *c, const char *text, pt_example *ex, bool *truncated, label_result *res)
{
    int32_t *ids;
    size_t n;
    TRY(tokenizer_encode_text(c->tok, text, strlen(text), &ids, &n));
    int32_t eos = tokenizer_eos(c->tok);
    if (eos >= 0) {
        int32_t *grown = realloc(ids, sizeof *grown * (n + 1));
        if (!grown) abort();
        ids = grown;
        ids[n++] = eos;
    }
    finish(c, ids, labels_new(ids, n, true), n, ex, truncated, res);
    return PT_OK;
}

void example_free(pt_example *ex)
{
    free(ex->ids);
    free(ex->labels);
    free(ex->segments);
    *ex = (pt_example){0};
}
