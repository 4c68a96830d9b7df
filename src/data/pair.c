/* pair.c — a preference row (prompt, chosen, rejected) as TRL 1.16's DPOTrainer tokenizes it.
 * Text rows: eos text appended to chosen and rejected unless they end with it, then prompt,
 * prompt + chosen and prompt + rejected each encoded as the tokenizer encodes text (its bos
 * included). Conversations: the prompt's turns rendered through the chat template with the
 * generation prompt, and prompt + chosen, prompt + rejected rendered whole, each encoded as
 * rendered text (apply_chat_template's tokenize). The completion starts where the encoded prompt
 * and prompt + completion first differ (the shorter of the two common prefixes, as TRL). Then
 * max_prompt_length keeps the prompt's last tokens (older TRL's DPOConfig), max_completion_length
 * each completion's first, and max_seq_length (TRL's max_length, keep_start) cuts each sequence;
 * a prompt that fills max_seq_length leaves nothing to learn (TRL drops such rows: no loss).
 *
 * CPO and ORPO (label_ctx.pair_legacy) keep TRL's older tokenization (the experimental trainers'
 * maybe_apply_chat_template and tokenize_row): conversations become texts first (the prompt is the
 * common prefix of the rendered prompt with its generation prompt and of prompt + chosen and
 * prompt + rejected rendered whole; each completion the rest of its rendering); then for each
 * completion prompt + completion is encoded without special tokens and the prompt's tokens are
 * those the prompt encodes to (one fewer when the last merges across the boundary); bos is put
 * before the prompt and eos after the completion where they are missing; the completion is cut so
 * that prompt + completion fits max_seq_length (TRL's max_length).
 *
 * Reward modelling (label_ctx.pair_reward, TRL's RewardTrainer): prompt + chosen and prompt +
 * rejected encoded as above (text with eos appended, or turns rendered whole) and kept whole, every
 * token labelled (the score reads the last non-pad one); a pair with either over max_seq_length
 * (TRL's max_length) is dropped, as TRL filters it.
 *
 * A row a reward model scores (label_single, ptrain score): prompt + completion, a conversation or
 * text, tokenized as the reward tokenization tokenizes a chosen, one sequence kept whole.
 *
 * GRPO (label_prompt): the prompt alone, as GRPOTrainer encodes it before generating (text as the
 * tokenizer encodes text, turns rendered with the generation prompt), beside the row's columns. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

/* The conversation m[0..n) rendered and encoded (special tokens parsed, nothing added). */
static pt_status encode_chat(const label_ctx *c, const chat_message *m, int n, const json_t *tools, bool gen,
                             int32_t **ids, size_t *len)
{
    strbuf text = {0};
    chat_args a = {.bos = c->bos, .eos = c->eos, .specials = tokenizer_template_tokens(c->tok), .kwargs = c->kwargs,
                   .tools = tools, .add_generation_prompt = gen};
    pt_status rc = chat_tmpl_render(label_template_for(c, tools), &a, m, n, &text, NULL, NULL);
    if (rc == PT_OK) rc = tokenizer_encode(c->tok, sb_text(&text), text.len, true, ids, len);
    sb_free(&text);
    return rc;
}

/* prompt + completion as text, with eos appended to the completion unless it ends with it. */
static pt_status encode_text_pair(const label_ctx *c, const char *prompt, const char *completion, int32_t **ids,
                                  size_t *len)
{
    strbuf text = {0};
    size_t ce = strlen(completion), ee = c->eos ? strlen(c->eos) : 0;
    sb_printf(&text, "%s%s", prompt, completion);
    if (ee && (ce < ee || strcmp(completion + ce - ee, c->eos) != 0)) sb_printf(&text, "%s", c->eos);
    pt_status rc = tokenizer_encode_text(c->tok, sb_text(&text), text.len, ids, len);
    sb_free(&text);
    return rc;
}

static size_t common_prefix(const int32_t *a, size_t na, const int32_t *b, size_t nb)
{
    size_t i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}

/* One sequence: the prompt's kept tokens p[0..np), then the completion full[from..from+nc), cut to
 * max_len, into ids/labels/segments at *at. Whether it was cut; *labelled: completion tokens kept. */
static bool put_sequence(const label_ctx *c, const int32_t *p, size_t np, const int32_t *comp, size_t nc,
                         int32_t segment, pt_example *ex, size_t *labelled)
{
    size_t n = np + nc, cut = n > (size_t)c->max_len ? (size_t)c->max_len : n;
    for (size_t t = 0; t < cut; t++) {
        bool in_completion = t >= np;
        int32_t id = in_completion ? comp[t - np] : p[t];
        ex->ids[ex->len] = id;
        ex->labels[ex->len] = in_completion ? id : PT_IGNORE_INDEX;
        ex->segments[ex->len++] = segment;
    }
    *labelled = cut > np ? cut - np : 0;
    return cut < n;
}

/* ---- the older tokenization (CPO, ORPO) ---- */

/* Bytes a and b share from the start, backed off to a UTF-8 character boundary. */
static size_t common_text(const char *a, const char *b)
{
    size_t i = 0;
    while (a[i] && a[i] == b[i]) i++;
    while (i > 0 && ((unsigned char)a[i] & 0xC0) == 0x80) i--;
    return i;
}

static pt_status render(const label_ctx *c, const chat_message *m, int n, const json_t *tools, bool gen, strbuf *out)
{
    chat_args a = {.bos = c->bos, .eos = c->eos, .specials = tokenizer_template_tokens(c->tok), .kwargs = c->kwargs,
                   .tools = tools, .add_generation_prompt = gen};
    return chat_tmpl_render(label_template_for(c, tools), &a, m, n, out, NULL, NULL);
}

/* A conversational row as the texts prompt, chosen and rejected (TRL's maybe_apply_chat_template). */
static pt_status legacy_texts(const label_ctx *c, const data_record *rec, char **prompt, char **chosen, char **rejected)
{
    int nrj = rec->n - rec->n_prompt - rec->n_chosen;
    chat_message *m = malloc(sizeof *m * (size_t)(rec->n_prompt + (nrj > rec->n_chosen ? nrj : rec->n_chosen) + 1));
    TRY_ALLOC(m);
    strbuf p = {0}, pc = {0}, pr = {0};
    memcpy(m, rec->msgs, sizeof *m * (size_t)rec->n_prompt);
    pt_status rc = render(c, m, rec->n_prompt, rec->tools, true, &p);
    memcpy(m + rec->n_prompt, rec->msgs + rec->n_prompt, sizeof *m * (size_t)rec->n_chosen);
    if (rc == PT_OK) rc = render(c, m, rec->n_prompt + rec->n_chosen, rec->tools, false, &pc);
    memcpy(m + rec->n_prompt, rec->msgs + rec->n_prompt + rec->n_chosen, sizeof *m * (size_t)nrj);
    if (rc == PT_OK) rc = render(c, m, rec->n_prompt + nrj, rec->tools, false, &pr);
    free(m);
    if (rc == PT_OK) {
        size_t n = common_text(sb_text(&p), sb_text(&pc));
        if (p.data) p.data[n] = '\0'; /* an empty render has no buffer */
        n = common_text(sb_text(&p), sb_text(&pr));
        *prompt = strndup(sb_text(&p), n);
        *chosen = xstrdup(sb_text(&pc) + n);
        *rejected = xstrdup(sb_text(&pr) + n);
        if (!*prompt) abort();
    }
    sb_free(&p), sb_free(&pc), sb_free(&pr);
    return rc;
}

/* prompt + answer encoded (no special tokens added): *ids, the prompt's *np of them (TRL's
 * build_tokenized_answer), with bos put first and eos last where missing. */
static pt_status legacy_answer(const label_ctx *c, const char *prompt, const char *answer, int32_t **ids, size_t *n,
                               size_t *np)
{
    int32_t *p, *full;
    size_t lp, lf;
    strbuf text = {0};
    sb_printf(&text, "%s%s", prompt, answer);
    pt_status rc = tokenizer_encode(c->tok, prompt, strlen(prompt), true, &p, &lp);
    if (rc == PT_OK) rc = tokenizer_encode(c->tok, sb_text(&text), text.len, true, &full, &lf);
    sb_free(&text);
    if (rc != PT_OK) {
        if (lp) free(p);
        return rc;
    }
    size_t start = lp;
    if (lf < lp || memcmp(p, full, sizeof *p * lp) != 0) start = lp > 0 ? lp - 1 : 0; /* merged at the boundary */
    if (start > lf) start = lf;
    free(p);
    int32_t bos = tokenizer_bos(c->tok), eos = tokenizer_eos(c->tok);
    bool add_bos = bos >= 0 && (start == 0 || full[0] != bos);
    bool add_eos = eos >= 0 && (lf == start || full[lf - 1] != eos);
    *ids = malloc(sizeof(int32_t) * (lf + 2));
    if (!*ids) abort();
    size_t k = 0;
    if (add_bos) (*ids)[k++] = bos;
    memcpy(*ids + k, full, sizeof(int32_t) * lf);
    k += lf;
    if (add_eos) (*ids)[k++] = eos;
    free(full);
    *n = k, *np = start + add_bos;
    return PT_OK;
}

static pt_status label_pair_legacy(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated,
                                   label_result *res)
{
    char *prompt = NULL, *chosen = NULL, *rejected = NULL;
    pt_status rc = PT_OK;
    if (rec->pair_chat) rc = legacy_texts(c, rec, &prompt, &chosen, &rejected);
    const char *texts[3] = {rec->pair_chat ? prompt : rec->prompt, rec->pair_chat ? chosen : rec->chosen,
                            rec->pair_chat ? rejected : rec->rejected};
    int32_t *ids[2] = {NULL, NULL};
    size_t n[2] = {0, 0}, np[2] = {0, 0};
    for (int s = 0; s < 2 && rc == PT_OK; s++) rc = legacy_answer(c, texts[0], texts[1 + s], &ids[s], &n[s], &np[s]);
    if (rc == PT_OK) {
        size_t cap = n[0] + n[1] + 1, got[2] = {0, 0};
        ex->ids = malloc(sizeof(int32_t) * cap), ex->labels = malloc(sizeof(int32_t) * cap);
        ex->segments = malloc(sizeof(int32_t) * cap);
        if (!ex->ids || !ex->labels || !ex->segments) abort();
        for (int s = 0; s < 2; s++) {
            size_t keep = np[s], la = n[s] - np[s];
            if (c->max_prompt > 0 && keep > (size_t)c->max_prompt) keep = (size_t)c->max_prompt, *truncated = true;
            if (c->max_completion > 0 && la > (size_t)c->max_completion) la = (size_t)c->max_completion, *truncated = true;
            *truncated |= put_sequence(c, ids[s] + (np[s] - keep), keep, ids[s] + np[s], la, s + 1, ex, &got[s]);
        }
        if (got[0] && got[1]) *res = LABEL_OK;
        else example_free(ex);
    }
    free(ids[0]), free(ids[1]);
    free(prompt), free(chosen), free(rejected);
    return rc;
}

pt_status label_pair(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated, label_result *res)
{
    int32_t *pid = NULL, *cid = NULL, *rid = NULL;
    size_t np = 0, nc = 0, nr = 0;
    pt_status rc;
    *ex = (pt_example){0};
    *truncated = false;
    *res = LABEL_NO_LOSS;
    if (c->pair_legacy) return label_pair_legacy(c, rec, ex, truncated, res);
    if (rec->pair_chat) {
        int nrj = rec->n - rec->n_prompt - rec->n_chosen;
        chat_message *m = malloc(sizeof *m * (size_t)(rec->n_prompt + (nrj > rec->n_chosen ? nrj : rec->n_chosen) + 1));
        TRY_ALLOC(m);
        memcpy(m, rec->msgs, sizeof *m * (size_t)rec->n_prompt);
        rc = encode_chat(c, m, rec->n_prompt, rec->tools, true, &pid, &np);
        memcpy(m + rec->n_prompt, rec->msgs + rec->n_prompt, sizeof *m * (size_t)rec->n_chosen);
        if (rc == PT_OK) rc = encode_chat(c, m, rec->n_prompt + rec->n_chosen, rec->tools, false, &cid, &nc);
        memcpy(m + rec->n_prompt, rec->msgs + rec->n_prompt + rec->n_chosen, sizeof *m * (size_t)nrj);
        if (rc == PT_OK) rc = encode_chat(c, m, rec->n_prompt + nrj, rec->tools, false, &rid, &nr);
        free(m);
    } else {
        rc = tokenizer_encode_text(c->tok, rec->prompt, strlen(rec->prompt), &pid, &np);
        if (rc == PT_OK) rc = encode_text_pair(c, rec->prompt, rec->chosen, &cid, &nc);
        if (rc == PT_OK) rc = encode_text_pair(c, rec->prompt, rec->rejected, &rid, &nr);
    }
    if (rc == PT_OK && c->pair_reward) { /* whole sequences; TRL filters out a pair longer than max_length */
        *truncated = nc > (size_t)c->max_len || nr > (size_t)c->max_len;
        if (!*truncated && nc && nr) {
            size_t got_c, got_r;
            ex->ids = malloc(sizeof(int32_t) * (nc + nr)), ex->labels = malloc(sizeof(int32_t) * (nc + nr));
            ex->segments = malloc(sizeof(int32_t) * (nc + nr));
            if (!ex->ids || !ex->labels || !ex->segments) abort();
            put_sequence(c, NULL, 0, cid, nc, 1, ex, &got_c);
            put_sequence(c, NULL, 0, rid, nr, 2, ex, &got_r);
            ex->margin = rec->margin;
            *res = LABEL_OK;
        }
    } else if (rc == PT_OK) {
        size_t pl = common_prefix(pid, np, cid, nc), pr = common_prefix(pid, np, rid, nr);
        size_t plen = pl < pr ? pl : pr, keep = plen;
        if (c->max_prompt > 0 && keep > (size_t)c->max_prompt) keep = (size_t)c->max_prompt;
        const int32_t *p = pid + (plen - keep); /* the prompt's end */
        size_t lc = nc - plen, lr = nr - plen;
        if (c->max_completion > 0 && lc > (size_t)c->max_completion) lc = (size_t)c->max_completion, *truncated = true;
        if (c->max_completion > 0 && lr > (size_t)c->max_completion) lr = (size_t)c->max_completion, *truncated = true;
        *truncated |= keep < plen;
        if (keep < (size_t)c->max_len) { /* else TRL drops the row */
            size_t cap = 2 * (keep + (lc > lr ? lc : lr)) + 1, got_c, got_r;
            ex->ids = malloc(sizeof(int32_t) * cap), ex->labels = malloc(sizeof(int32_t) * cap);
            ex->segments = malloc(sizeof(int32_t) * cap);
            if (!ex->ids || !ex->labels || !ex->segments) abort();
            *truncated |= put_sequence(c, p, keep, cid + plen, lc, 1, ex, &got_c);
            *truncated |= put_sequence(c, p, keep, rid + plen, lr, 2, ex, &got_r);
            if (got_c && got_r) *res = LABEL_OK;
            else example_free(ex);
        }
    }
    free(pid), free(cid), free(rid);
    return rc;
}

/* ---- KTO's unpaired rows ---- */

/* The encoded prompt and prompt + completion of one unpaired sequence, as TRL's KTOTrainer
 * tokenizes them: turns rendered (the prompt with the generation prompt) or text (eos appended
 * to the completion unless it ends with it). comp: the completion's turns or text. */
static pt_status encode_unpaired(const label_ctx *c, const data_record *rec, const chat_message *comp, int n_comp,
                                 const char *text, int32_t **pid, size_t *np, int32_t **fid, size_t *nf)
{
    if (!rec->pair_chat) {
        TRY(tokenizer_encode_text(c->tok, rec->prompt, strlen(rec->prompt), pid, np));
        pt_status rc = encode_text_pair(c, rec->prompt, text, fid, nf);
        if (rc != PT_OK) free(*pid), *pid = NULL;
        return rc;
    }
    chat_message *m = malloc(sizeof *m * (size_t)(rec->n_prompt + n_comp + 1));
    TRY_ALLOC(m);
    memcpy(m, rec->msgs, sizeof *m * (size_t)rec->n_prompt);
    memcpy(m + rec->n_prompt, comp, sizeof *m * (size_t)n_comp);
    pt_status rc = encode_chat(c, m, rec->n_prompt, rec->tools, true, pid, np);
    if (rc == PT_OK) rc = encode_chat(c, m, rec->n_prompt + n_comp, rec->tools, false, fid, nf);
    if (rc != PT_OK) free(*pid), *pid = NULL;
    free(m);
    return rc;
}

/* One unpaired sequence appended to ex as `segment`: the prompt's tokens (up to where the encoded
 * prompt and prompt + completion part), then the completion, labelled, kept to max_len tokens. How
 * many completion tokens it has (0: the prompt fills max_len, so TRL drops the row). */
static size_t put_unpaired(const label_ctx *c, const int32_t *pid, size_t np, const int32_t *fid, size_t nf,
                           int32_t segment, pt_example *ex, bool *truncated)
{
    size_t plen = common_prefix(pid, np, fid, nf), nc = nf - plen;
    if (plen >= (size_t)c->max_len || nc == 0) return 0;
    *truncated |= plen + nc > (size_t)c->max_len;
    if (nc > (size_t)c->max_len) nc = (size_t)c->max_len;
    for (size_t t = 0; t < plen + nc; t++) {
        ex->ids[ex->len] = fid[t];
        ex->labels[ex->len] = t >= plen ? fid[t] : PT_IGNORE_INDEX;
        ex->segments[ex->len++] = segment;
    }
    return nc;
}

pt_status label_unpaired(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated,
                         label_result *res)
{
    *ex = (pt_example){0};
    *truncated = false;
    *res = LABEL_NO_LOSS;
    bool pair = rec->rejected != NULL || (rec->pair_chat && rec->n > rec->n_prompt + rec->n_chosen);
    int32_t *pid[2] = {NULL, NULL}, *fid[2] = {NULL, NULL};
    size_t np[2] = {0, 0}, nf[2] = {0, 0};
    const chat_message *comp[2] = {rec->msgs ? rec->msgs + rec->n_prompt : NULL,
                                   rec->msgs ? rec->msgs + rec->n_prompt + rec->n_chosen : NULL};
    int n_comp[2] = {rec->n_chosen, rec->n - rec->n_prompt - rec->n_chosen};
    const char *text[2] = {rec->chosen, rec->rejected};
    pt_status rc = PT_OK;
    for (int s = 0; s < (pair ? 2 : 1) && rc == PT_OK; s++)
        rc = encode_unpaired(c, rec, comp[s], n_comp[s], text[s], &pid[s], &np[s], &fid[s], &nf[s]);
    if (rc == PT_OK) {
        size_t cap = nf[0] + nf[1] + 1, got[2] = {0, 0};
        ex->ids = malloc(sizeof(int32_t) * cap), ex->labels = malloc(sizeof(int32_t) * cap);
        ex->segments = malloc(sizeof(int32_t) * cap);
        if (!ex->ids || !ex->labels || !ex->segments) abort();
        if (!pair) got[0] = got[1] = put_unpaired(c, pid[0], np[0], fid[0], nf[0], rec->label ? 1 : 2, ex, truncated);
        for (int s = 0; pair && s < 2; s++) got[s] = put_unpaired(c, pid[s], np[s], fid[s], nf[s], s + 1, ex, truncated);
        if (got[0] && got[1]) *res = LABEL_OK;
        else example_free(ex);
    }
    for (int s = 0; s < 2; s++) free(pid[s]), free(fid[s]);
    return rc;
}

/* ---- a row a reward model scores (ptrain score) ---- */

pt_status label_single(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated, label_result *res)
{
    *ex = (pt_example){0};
    *truncated = false;
    *res = LABEL_NO_LOSS;
    int32_t *ids = NULL;
    size_t n = 0, got;
    if (rec->text) TRY(encode_text_pair(c, "", rec->text, &ids, &n));
    else if (rec->prompt) TRY(encode_text_pair(c, rec->prompt, rec->chosen, &ids, &n));
    else TRY(encode_chat(c, rec->msgs, rec->n, rec->tools, false, &ids, &n)); /* turns, or prompt + completion */
    *truncated = n > (size_t)c->max_len;
    if (!*truncated && n) {
        ex->ids = malloc(sizeof(int32_t) * n), ex->labels = malloc(sizeof(int32_t) * n);
        ex->segments = malloc(sizeof(int32_t) * n);
        if (!ex->ids || !ex->labels || !ex->segments) abort();
        put_sequence(c, NULL, 0, ids, n, 1, ex, &got);
        *res = LABEL_OK;
    }
    free(ids);
    return PT_OK;
}

pt_status label_prompt(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated,
                       label_result *res)
{
    *ex = (pt_example){0};
    *truncated = false;
    *res = LABEL_NO_LOSS;
    int32_t *pid = NULL;
    size_t np = 0;
    TRY(rec->pair_chat ? encode_chat(c, rec->msgs, rec->n_prompt, rec->tools, true, &pid, &np)
                       : tokenizer_encode_text(c->tok, rec->prompt, strlen(rec->prompt), &pid, &np));
    size_t from = c->max_prompt > 0 && np > (size_t)c->max_prompt ? np - (size_t)c->max_prompt : 0;
    size_t nj = strlen(rec->columns), len = np - from + nj;
    *truncated = from > 0;
    if (np > from && len < (size_t)INT32_MAX) {
        ex->ids = malloc(sizeof(int32_t) * len), ex->labels = malloc(sizeof(int32_t) * len);
        ex->segments = malloc(sizeof(int32_t) * len);
        if (!ex->ids || !ex->labels || !ex->segments) abort();
        for (size_t t = 0; t < len; t++) {
            ex->ids[t] = t < np - from ? pid[from + t] : (int32_t)(unsigned char)rec->columns[t - (np - from)];
            ex->labels[t] = PT_IGNORE_INDEX;
            ex->segments[t] = t < np - from ? 1 : 2;
        }
        ex->len = (int32_t)len;
        *res = LABEL_OK;
    }
    free(pid);
    return PT_OK;
}

pt_status dataset_prompt_row(const pt_example *ex, const int32_t **ids, int32_t *n, char **columns)
{
    int32_t np = 0;
    while (np < ex->len && ex->segments && ex->segments[np] == 1) np++;
    if (np == 0 || !ex->segments) return ERR(PT_ERR_INTERNAL, "dataset: an example without a GRPO prompt");
    *ids = ex->ids, *n = np;
    *columns = malloc((size_t)(ex->len - np) + 1);
    TRY_ALLOC(*columns);
    for (int32_t t = np; t < ex->len; t++) (*columns)[t - np] = (char)ex->ids[t];
    (*columns)[ex->len - np] = '\0';
    return PT_OK;
}
