/* label.c — a formatted row as token ids and labels.
 *
 * Chat rows are rendered with the chat template and tokenized once with parse_special, as they
 * are: the template writes bos where the model's own template does (apply_chat_template adds no
 * special tokens), so a chat row never gets two. With assistant-only loss the labelled tokens
 * are found from byte spans of the rendered text: for assistant turn i, the span ends where the
 * rendering of turns 0..i ends, less the template's trailer after the end-of-turn text ("\n" for
 * chatml and gemma, "" for llama-3 and mistral, "\n\n" for alpaca), and starts where the
 * end-of-turn text begins in the rendering of turns 0..i with turn i's content emptied (so the
 * trimming of contents is accounted for). Both renderings must be prefixes of the full text
 * (checked). A token is labelled when its bytes overlap a span (HF's
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

pt_status label_init(label_ctx *c, const pt_tokenizer *tok, const char *template, bool assistant_only,
                     int32_t max_len)
{
    *c = (label_ctx){.tok = tok, .assistant_only = assistant_only, .max_len = max_len};
    c->template = chat_template_name_known(template);
    pt_status rc = chat_tmpl_open(template, tok ? tokenizer_chat_template(tok) : NULL, &c->ct);
    if (rc != PT_OK) return rc;
    c->bos = token_text(tok, tokenizer_bos(tok));
    c->eos = token_text(tok, tokenizer_eos(tok));
    return PT_OK;
}

void label_free(label_ctx *c)
{
    free(c->bos);
    free(c->eos);
    chat_tmpl_free(c->ct);
    c->bos = c->eos = NULL;
    c->ct = NULL;
}

/* ---- spans ---- */

static pt_status render(const label_ctx *c, const chat_message *m, int n, const json_t *tools, strbuf *out,
                        size_t **spans, int *n_spans)
{
    out->len = 0;
    if (out->data) out->data[0] = '\0';
    chat_args a = {.bos = c->bos, .eos = c->eos, .kwargs = c->kwargs, .tools = tools};
    return chat_tmpl_render(c->ct, &a, m, n, out, spans, n_spans);
}

static bool starts_with(const strbuf *s, const char *prefix, size_t n)
{
    return s->len >= n && memcmp(s->data, prefix, n) == 0;
}

#define SENTINEL "\xee\x80\x80" /* U+E000, in place of the content: where the content starts */

/* The span of assistant turn i by rendering the turns up to it: [*a, *b) runs from where its
 * content starts (found with the content replaced by SENTINEL) to the end of its rendering less
 * trailing white space (its end-of-turn text included). The rendering must be a prefix of the
 * whole conversation's. */
static pt_status turn_span(const label_ctx *c, chat_message *m, int i, const json_t *tools, const strbuf *full,
                           strbuf *tmp, size_t *a, size_t *b)
{
    TRY(render(c, m, i + 1, tools, tmp, NULL, NULL));
    bool ok = starts_with(full, tmp->data, tmp->len);
    size_t end = tmp->len;
    while (end > 0 && strchr(" \t\r\n", tmp->data[end - 1])) end--;
    *b = end;
    const char *content = m[i].content;
    m[i].content = SENTINEL;
    pt_status rc = render(c, m, i + 1, tools, tmp, NULL, NULL);
    m[i].content = content;
    TRY(rc);
    const char *at = strstr(sb_text(tmp), SENTINEL);
    *a = at ? (size_t)(at - tmp->data) : 0;
    ok = ok && at && *a <= *b && starts_with(full, tmp->data, *a);
    if (ok) return PT_OK;
    return ERR(PT_ERR_USER,
               "chat template %s: cannot find assistant turn %d by rendering the turns up to it (the template "
               "renders it differently once later turns follow, e.g. dropping its reasoning, and has no "
               "{%% generation %%} blocks to mark it); set assistant_only_loss: false, or choose a chat_template",
               shown_text(c->template).s, i);
}

pt_status label_spans(const label_ctx *c, const chat_message *m, int n, const json_t *tools, strbuf *text,
                      size_t **spans, int *n_spans)
{
    *spans = NULL;
    *n_spans = 0;
    bool marked = chat_tmpl_has_generation(c->ct);
    TRY(render(c, m, n, tools, text, marked ? spans : NULL, marked ? n_spans : NULL));
    if (marked) return PT_OK; /* the template's own {% generation %} spans, as transformers takes them */
    chat_message *copy = malloc(sizeof *copy * (size_t)(n + 1));
    size_t *out = malloc(sizeof *out * 2 * (size_t)(n + 1));
    if (!copy || !out) abort();
    memcpy(copy, m, sizeof *copy * (size_t)n);
    strbuf tmp = {0};
    pt_status rc = PT_OK;
    int k = 0;
    for (int i = 0; i < n && rc == PT_OK; i++) {
        if (strcmp(m[i].role, "assistant") != 0) continue;
        rc = turn_span(c, copy, i, tools, text, &tmp, &out[2 * k], &out[2 * k + 1]);
        k++;
    }
    sb_free(&tmp);
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
