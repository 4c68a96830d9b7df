/* tok_pretok.c — pre-tokenizers on PCRE2: the Split / Digits / ByteLevel / Metaspace steps of
 * HF `tokenizers` (and their Sequence), and the GPT-2, Llama 3 and Qwen2 split regexes.
 *
 * `tokenizers` runs its regexes on Oniguruma, whose \s is Unicode White_Space; PCRE2's UCP \s
 * differs at the edges, so patterns are rewritten to spell \s and \S out before compiling.
 * Each step splits every piece the step before made; the last step's pieces go to BPE. The
 * regexes themselves are in tok_impl.h (the GGUF loader names them too). */
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "tok_impl.h"

/* Unicode White_Space as class members */
#define WS_MEMBERS                                                                                                     \
    "\\x{9}-\\x{d}\\x{20}\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

/* Length of the class opening at pat[i] == '[' that must be copied as is: "[", "[^", and a ']'
 * right after them (a literal there). */
static size_t class_open_len(const char *pat, size_t len, size_t i)
{
    size_t k = i + 1;
    if (k < len && pat[k] == '^') k++;
    if (k < len && pat[k] == ']') k++;
    return k - i;
}

/* The Oniguruma pattern pat rewritten for PCRE2 (\s, \S as White_Space); malloc'd, NULL on OOM. */
static char *regex_for_pcre2(const char *pat, size_t len)
{
    rbuf b = {0};
    bool in_class = false;
    for (size_t i = 0; i < len;) {
        if (pat[i] == '\\' && i + 1 < len) {
            char e = pat[i + 1];
            if (e == 's') tok_rbuf_put(&b, in_class ? WS_MEMBERS : "[" WS_MEMBERS "]", strlen(WS_MEMBERS) + (in_class ? 0 : 2));
            else if (e == 'S' && !in_class) tok_rbuf_put(&b, "[^" WS_MEMBERS "]", strlen(WS_MEMBERS) + 3);
            else tok_rbuf_put(&b, pat + i, 2);
            i += 2;
        } else if (pat[i] == '[' && !in_class) {
            size_t k = class_open_len(pat, len, i);
            tok_rbuf_put(&b, pat + i, k);
            in_class = true;
            i += k;
        } else {
            if (pat[i] == ']') in_class = false;
            tok_rbuf_put(&b, pat + i, 1);
            i++;
        }
    }
    tok_rbuf_put(&b, "", 0);
    if (b.oom) free(b.p);
    return b.oom ? NULL : b.p;
}

/* Compile pattern (an Oniguruma regex, or a literal string) for a pre-tokenizer or a check. */
pt_status tok_regex_compile(const char *source, const char *where, const char *pat, size_t len, bool literal,
                            uint32_t extra_opts, pcre2_code **re, bool *jit)
{
    char *rewritten = literal ? NULL : regex_for_pcre2(pat, len);
    if (!literal && !rewritten) return ERR(PT_ERR_NOMEM, "out of memory");
    int code;
    PCRE2_SIZE at;
    uint32_t opts = PCRE2_UTF | extra_opts | (literal ? PCRE2_LITERAL : PCRE2_UCP); /* LITERAL refuses UCP */
    *re = pcre2_compile((PCRE2_SPTR)(literal ? pat : rewritten), literal ? len : PCRE2_ZERO_TERMINATED, opts,
                        &code, &at, NULL);
    free(rewritten);
    if (!*re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(code, msg, sizeof msg);
        return ERR(PT_ERR_USER, "%s: %s: invalid regex \"%s\": %s", shown_text(source).s, where,
                   shown_bytes(pat, len).s, (char *)msg);
    }
    *jit = pcre2_jit_compile(*re, PCRE2_JIT_COMPLETE) == 0;
    return PT_OK;
}

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

static bool enc_big_jit_stack(enc_ctx *c)
{
    c->jstack = pcre2_jit_stack_create(64 * 1024, 64 * 1024 * 1024, NULL);
    c->mctx = pcre2_match_context_create(NULL);
    if (!c->jstack || !c->mctx) return false;
    pcre2_jit_stack_assign(c->mctx, NULL, c->jstack);
    return true;
}

/* Find the next match of re in s[0, len) from off: 1 with [*ms, *me), 0 when none. */
pt_status tok_re_next(enc_ctx *c, const pcre2_code *re, bool jit, const char *s, size_t len, size_t off,
                      size_t *ms, size_t *me, int *found)
{
    int rc;
    for (;;) {
        rc = jit ? pcre2_jit_match(re, (PCRE2_SPTR)s, len, off, 0, c->md, c->mctx)
                 : pcre2_match(re, (PCRE2_SPTR)s, len, off, PCRE2_NO_UTF_CHECK, c->md, c->mctx);
        if (rc != PCRE2_ERROR_JIT_STACKLIMIT || c->jstack) break;
        if (!enc_big_jit_stack(c)) return ERR(PT_ERR_NOMEM, "out of memory");
    }
    if (rc == PCRE2_ERROR_NOMATCH) return *found = 0, PT_OK;
    if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return ERR(PT_ERR_INTERNAL, "%s: pre-tokenizer regex failed: %s", shown_text(c->tok->source).s, (char *)msg);
    }
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
    *ms = ov[0];
    *me = ov[1];
    *found = 1;
    return PT_OK;
}

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
