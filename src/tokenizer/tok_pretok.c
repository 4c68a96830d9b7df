/* tok_pretok.c — pre-tokenizers on PCRE2 (tok_regex.c): the Split / Digits / ByteLevel /
 * Metaspace steps of HF `tokenizers` (and their Sequence), and the GPT-2, Llama 3 and Qwen2 split
 * regexes. Each step splits every piece the step before made; the last step's pieces go to BPE
 * (bpe.c). The regexes themselves are in tok_impl.h (the GGUF loader names them too). */
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "tok_impl.h"

static pt_status pretok_push(pt_tokenizer *t, pretok_step step)
{
    pretok_step *grown = realloc(t->steps, (size_t)(t->n_steps + 1) * sizeof *grown);
    if (!grown) {
        pcre2_code_free(step.re);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    t->steps = grown;
    t->steps[t->n_steps++] = step;
    return PT_OK;
}

pt_status tok_pretok_add_split(pt_tokenizer *t, const char *where, const char *pat, size_t len, bool literal,
                               split_behavior behavior)
{
    pretok_step st = {.behavior = behavior};
    TRY(tok_regex_compile(t->source, where, pat, len, literal, 0, &st.re, &st.jit));
    return pretok_push(t, st);
}

/* Digits: every numeric character alone, or runs of them. */
pt_status tok_pretok_add_digits(pt_tokenizer *t, const char *where, bool individual)
{
    const char *pat = individual ? "\\p{N}" : "\\p{N}+";
    return tok_pretok_add_split(t, where, pat, strlen(pat), false, SPLIT_ISOLATED);
}

/* ByteLevel: an optional prefix space, then GPT-2's regex when use_regex. */
pt_status tok_pretok_add_bytelevel(pt_tokenizer *t, const char *where, bool prefix_space, bool use_regex)
{
    pretok_step st = {.behavior = SPLIT_ISOLATED, .prefix_space = prefix_space};
    if (use_regex) TRY(tok_regex_compile(t->source, where, RE_GPT2, strlen(RE_GPT2), false, 0, &st.re, &st.jit));
    return pretok_push(t, st);
}

/* Metaspace: spaces become rep (at most 7 bytes), which is prepended as `prepend` says, and with
 * split every rep starts a piece. */
pt_status tok_pretok_add_metaspace(pt_tokenizer *t, const char *rep, size_t rep_len, int prepend, bool split)
{
    pretok_step st = {.behavior = SPLIT_MERGED_NEXT, .metaspace = true, .ms_split = split,
                      .prepend = (uint8_t)prepend, .rep_len = (uint8_t)rep_len};
    memcpy(st.rep, rep, rep_len);
    return pretok_push(t, st);
}

void tok_pretok_free(pt_tokenizer *t)
{
    for (int i = 0; i < t->n_steps; i++) pcre2_code_free(t->steps[i].re);
    free(t->steps);
    t->steps = NULL;
    t->n_steps = 0;
}

/* ---- running the steps ---- */

typedef struct {
    enc_ctx *c;
    int next_step;
    const char *s;
    size_t prev;   /* end of what was emitted (MERGED_NEXT: start of the open piece) */
    bool pending;  /* CONTIGUOUS: a run of matches not emitted yet */
    size_t ps, pe;
} splitter;

static pt_status emit_piece(splitter *sp, size_t a, size_t b)
{
    return a < b ? tok_pretok_run(sp->c, sp->next_step, sp->s + a, b - a) : PT_OK;
}

static pt_status split_on_match(splitter *sp, split_behavior bh, size_t ms, size_t me)
{
    switch (bh) {
    case SPLIT_ISOLATED:
        TRY(emit_piece(sp, sp->prev, ms));
        TRY(emit_piece(sp, ms, me));
        break;
    case SPLIT_REMOVED: TRY(emit_piece(sp, sp->prev, ms)); break;
    case SPLIT_MERGED_PREV: TRY(emit_piece(sp, sp->prev, me)); break;
    case SPLIT_MERGED_NEXT:
        TRY(emit_piece(sp, sp->prev, ms));
        sp->prev = ms;
        return PT_OK;
    case SPLIT_CONTIGUOUS:
        if (sp->pending && ms == sp->pe) {
            sp->pe = me;
        } else {
            if (sp->pending) TRY(emit_piece(sp, sp->ps, sp->pe));
            TRY(emit_piece(sp, sp->prev, ms));
            sp->pending = true;
            sp->ps = ms;
            sp->pe = me;
        }
        break;
    }
    sp->prev = me;
    return PT_OK;
}

static pt_status split_run(enc_ctx *c, int step, const char *s, size_t len)
{
    const pretok_step *st = &c->tok->steps[step];
    splitter sp = {.c = c, .next_step = step + 1, .s = s};
    size_t off = 0, ms = 0, me = 0;
    int found = 1;
    while (off < len) {
        TRY(tok_re_next(c, st->re, st->jit, s, len, off, &ms, &me, &found));
        if (!found) break;
        if (me == ms) { /* an empty match splits nothing: step over one character */
            off = ms + (ms < len ? tok_utf8_seq_len((const uint8_t *)s + ms, len - ms) : 1);
            continue;
        }
        TRY(split_on_match(&sp, st->behavior, ms, me));
        off = me;
    }
    if (sp.pending) TRY(emit_piece(&sp, sp.ps, sp.pe));
    return emit_piece(&sp, sp.prev, len);
}

static pt_status prefix_space_run(enc_ctx *c, int step, const char *s, size_t len)
{
    char *p = malloc(len + 1);
    if (!p) return ERR(PT_ERR_NOMEM, "out of memory");
    p[0] = ' ';
    memcpy(p + 1, s, len);
    pt_status rc = tok_pretok_run(c, step, p, len + 1);
    free(p);
    return rc;
}

/* Metaspace's split: a new piece at every rep (MergedWithNext), then the next step on each. */
static pt_status metaspace_split(enc_ctx *c, int step, const char *s, size_t len)
{
    const pretok_step *st = &c->tok->steps[step];
    size_t prev = 0;
    for (size_t i = 1; i + st->rep_len <= len; i++)
        if (memcmp(s + i, st->rep, st->rep_len) == 0) {
            TRY(tok_pretok_run(c, step + 1, s + prev, i - prev));
            prev = i;
            i += st->rep_len - 1u;
        }
    return tok_pretok_run(c, step + 1, s + prev, len - prev);
}

/* Metaspace on the piece s: spaces replaced, rep prepended to the piece (every piece, or the
 * one that starts the text) unless it already starts with one, then split or passed on whole. */
static pt_status metaspace_run(enc_ctx *c, int step, const char *s, size_t len)
{
    const pretok_step *st = &c->tok->steps[step];
    bool lead = len && (s[0] == ' ' || (len >= st->rep_len && memcmp(s, st->rep, st->rep_len) == 0));
    bool prepend = !lead && (st->prepend == PREPEND_ALWAYS || (st->prepend == PREPEND_FIRST && s == c->text_start));
    rbuf b = {0};
    if (prepend) tok_rbuf_put(&b, st->rep, st->rep_len);
    for (size_t i = 0, from = 0; i <= len; i++)
        if (i == len || s[i] == ' ') {
            tok_rbuf_put(&b, s + from, i - from);
            if (i < len) tok_rbuf_put(&b, st->rep, st->rep_len);
            from = i + 1;
        }
    if (b.oom) {
        free(b.p);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    pt_status rc = st->ms_split ? metaspace_split(c, step, b.p, b.n) : tok_pretok_run(c, step + 1, b.p, b.n);
    free(b.p);
    return rc;
}

/* Run steps step.. on the piece s; the pieces the last step makes are BPE words. */
pt_status tok_pretok_run(enc_ctx *c, int step, const char *s, size_t len)
{
    if (len == 0) return PT_OK;
    if (step == c->tok->n_steps) return tok_bpe_word(c, (const uint8_t *)s, len);
    const pretok_step *st = &c->tok->steps[step];
    if (st->metaspace) return metaspace_run(c, step, s, len);
    if (st->prefix_space && s[0] != ' ') return prefix_space_run(c, step, s, len);
    if (!st->re) return tok_pretok_run(c, step + 1, s, len);
    return split_run(c, step, s, len);
}
