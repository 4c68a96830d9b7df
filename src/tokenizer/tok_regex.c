/* tok_regex.c — the tokenizer's regexes on PCRE2: compiling a pattern written for Oniguruma, which
 * `tokenizers` runs its regexes on, and finding its next match (with a bigger JIT stack when a
 * match needs one). Oniguruma's \s is Unicode White_Space; PCRE2's UCP \s differs at the edges,
 * so patterns are rewritten to spell \s and \S out before compiling. The pre-tokenizer's Split
 * steps, the normalizer's Replace steps and the single_word check of added tokens use them. */
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
