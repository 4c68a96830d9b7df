/* jlex.c — template text to tokens as Jinja2's lexer cuts it with transformers' settings: text,
 * {{ }} / {% %} tags and the names, numbers, strings (Python's unicode-escape decoding) and
 * operators inside them; {# #} comments and {% raw %} blocks; whitespace control: "-" strips all
 * white space on its side, trim_blocks drops the newline after a block or comment tag, and
 * lstrip_blocks the spaces and tabs before one on its line ("+" keeps them). The text it gets has
 * its newlines already normalized (jinja.c). */
#include <stdlib.h>
#include <string.h>

#include "jinja_impl.h"

typedef struct {
    jarena *a;
    const char *s;
    size_t n, pos;
    size_t lc_pos; /* line and column known up to here */
    int line, col;
    jtokens *out;
    size_t cap;
    bool line_starting;
} lexer;

static void at(lexer *L, size_t pos, int *line, int *col)
{
    for (; L->lc_pos < pos; L->lc_pos++) {
        if (L->s[L->lc_pos] == '\n') L->line++, L->col = 1;
        else if (((unsigned char)L->s[L->lc_pos] & 0xc0) != 0x80) L->col++;
    }
    *line = L->line;
    *col = L->col;
}

static jtoken *emit(lexer *L, tk_kind kind, size_t pos)
{
    if (L->out->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        jtoken *t = ja_alloc(L->a, cap * sizeof *t);
        if (L->out->n) memcpy(t, L->out->t, L->out->n * sizeof *t);
        L->out->t = t;
        L->cap = cap;
    }
    jtoken *t = &L->out->t[L->out->n++];
    memset(t, 0, sizeof *t);
    t->kind = (uint8_t)kind;
    at(L, pos, &t->line, &t->col);
    return t;
}

_Noreturn static void lex_fail(lexer *L, size_t pos, const char *msg)
{
    int line, col;
    at(L, pos, &line, &col);
    j_fail(line, col, "%s", msg);
}

static void emit_data(lexer *L, size_t from, size_t to)
{
    if (to <= from) return;
    jtoken *t = emit(L, TK_DATA, from);
    t->p = L->s + from;
    t->n = to - from;
}

static size_t skip_space(const lexer *L, size_t p)
{
    size_t k;
    while (p < L->n && (k = py_space_at(L->s, p, L->n))) p += k;
    return p;
}

/* ---- strings ---- */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void put_cp(strbuf *sb, uint32_t cp)
{
    char b[4];
    size_t k = 0;
    if (cp < 0x80) b[k++] = (char)cp;
    else if (cp < 0x800) b[k++] = (char)(0xc0 | cp >> 6), b[k++] = (char)(0x80 | (cp & 0x3f));
    else if (cp < 0x10000)
        b[k++] = (char)(0xe0 | cp >> 12), b[k++] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[k++] = (char)(0x80 | (cp & 0x3f));
    else
        b[k++] = (char)(0xf0 | cp >> 18), b[k++] = (char)(0x80 | ((cp >> 12) & 0x3f)),
        b[k++] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[k++] = (char)(0x80 | (cp & 0x3f));
    sb_append(sb, b, k);
}

/* One escape after a backslash at s[i] (i past the backslash); returns the next position. */
static size_t unescape_one(const char *s, size_t i, size_t end, strbuf *sb)
{
    static const char from[] = "\\'\"abfnrtv", to[] = "\\'\"\a\b\f\n\r\t\v";
    const char *hit = i < end ? strchr(from, s[i]) : NULL;
    if (hit && *hit) {
        sb_append(sb, &to[hit - from], 1);
        return i + 1;
    }
    if (i < end && s[i] == '\n') return i + 1;
    if (i < end && s[i] >= '0' && s[i] <= '7') {
        uint32_t v = 0;
        size_t k = 0;
        for (; k < 3 && i + k < end && s[i + k] >= '0' && s[i + k] <= '7'; k++) v = v * 8 + (uint32_t)(s[i + k] - '0');
        put_cp(sb, v);
        return i + k;
    }
    int width = i < end ? (s[i] == 'x' ? 2 : s[i] == 'u' ? 4 : s[i] == 'U' ? 8 : 0) : 0;
    if (width && i + (size_t)width < end + 0 + 1) {
        uint32_t v = 0;
        int k = 0;
        for (; k < width && i + 1 + (size_t)k < end && hexval(s[i + 1 + k]) >= 0; k++) v = v * 16 + (uint32_t)hexval(s[i + 1 + k]);
        if (k == width && v <= 0x10ffff) {
            put_cp(sb, v);
            return i + 1 + (size_t)width;
        }
    }
    sb_append(sb, "\\", 1); /* unknown: kept as written */
    return i;
}

static void lex_string(lexer *L)
{
    size_t start = L->pos, i = start + 1;
    char q = L->s[start];
    while (i < L->n && L->s[i] != q) i += L->s[i] == '\\' ? 2 : 1;
    if (i >= L->n) lex_fail(L, start, "unterminated string");
    strbuf sb = {0};
    for (size_t p = start + 1; p < i;) {
        if (L->s[p] == '\\') p = unescape_one(L->s, p + 1, i, &sb);
        else {
            size_t q2 = p;
            while (q2 < i && L->s[q2] != '\\') q2++;
            sb_append(&sb, L->s + p, q2 - p);
            p = q2;
        }
    }
    jtoken *t = emit(L, TK_STRING, start);
    char *copy = ja_alloc(L->a, sb.len + 1);
    memcpy(copy, sb_text(&sb), sb.len + 1);
    t->p = copy;
    t->n = sb.len;
    sb_free(&sb);
    L->pos = i + 1;
}

/* ---- numbers, names, operators ---- */

static bool digit(char c) { return c >= '0' && c <= '9'; }

static size_t digits(const lexer *L, size_t p)
{
    while (p < L->n && (digit(L->s[p]) || (L->s[p] == '_' && p + 1 < L->n && digit(L->s[p + 1])))) p++;
    return p;
}

static void lex_number(lexer *L)
{
    size_t start = L->pos, p = digits(L, start);
    bool is_float = false;
    if (p + 1 < L->n && L->s[p] == '.' && digit(L->s[p + 1])) p = digits(L, p + 1), is_float = true;
    if (p < L->n && (L->s[p] == 'e' || L->s[p] == 'E')) {
        size_t q = p + 1;
        if (q < L->n && (L->s[q] == '+' || L->s[q] == '-')) q++;
        if (q < L->n && digit(L->s[q])) p = digits(L, q), is_float = true;
    }
    char buf[128];
    size_t k = 0;
    for (size_t i = start; i < p && k < sizeof buf - 1; i++)
        if (L->s[i] != '_') buf[k++] = L->s[i];
    buf[k] = '\0';
    jtoken *t = emit(L, is_float ? TK_FLOAT : TK_INT, start);
    if (is_float) t->f = strtod(buf, NULL);
    else {
        char *end;
        unsigned long long v = strtoull(buf, &end, 10);
        if (k > 18 || v > INT64_MAX) lex_fail(L, start, "integer literal too large");
        t->i = (int64_t)v;
    }
    L->pos = p;
}

static bool name_char(char c, bool first)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (!first && digit(c));
}

static void lex_op(lexer *L, int *depth)
{
    static const char *const two[] = {"//", "**", "==", "!=", "<=", ">="};
    const char *s = L->s + L->pos;
    for (size_t k = 0; k < sizeof two / sizeof *two; k++)
        if (L->pos + 1 < L->n && s[0] == two[k][0] && s[1] == two[k][1]) {
            jtoken *t = emit(L, TK_OP, L->pos);
            memcpy(t->op, s, 2);
            L->pos += 2;
            return;
        }
    if (!strchr("+-*/%~[](){}<>=.:|,;", s[0]) || !s[0]) lex_fail(L, L->pos, "unexpected character in a tag");
    if (strchr("([{", s[0])) (*depth)++;
    if (strchr(")]}", s[0]) && *depth > 0) (*depth)--;
    jtoken *t = emit(L, TK_OP, L->pos);
    t->op[0] = s[0];
    L->pos++;
}

/* The end of a {{ }} or {% %} tag at L->pos (depth 0), consumed with its whitespace control. */
static bool tag_end(lexer *L, char close)
{
    const char *s = L->s + L->pos;
    size_t left = L->n - L->pos;
    char sign = left >= 3 && (s[0] == '-' || (s[0] == '+' && close == '%')) && s[1] == close && s[2] == '}' ? s[0] : 0;
    if (!sign && !(left >= 2 && s[0] == close && s[1] == '}')) return false;
    emit(L, close == '}' ? TK_VAR_END : TK_BLOCK_END, L->pos);
    L->pos += sign ? 3 : 2;
    if (sign == '-') L->pos = skip_space(L, L->pos);
    else if (!sign && close == '%' && L->pos < L->n && L->s[L->pos] == '\n') L->pos++;
    L->line_starting = L->s[L->pos - 1] == '\n';
    return true;
}

static void lex_tag(lexer *L, char close)
{
    int depth = 0;
    size_t start = L->pos;
    for (;;) {
        L->pos = skip_space(L, L->pos);
        if (L->pos >= L->n) lex_fail(L, start, close == '}' ? "a {{ tag is not closed with }}" : "a {% tag is not closed with %}");
        if (depth == 0 && tag_end(L, close)) return;
        char c = L->s[L->pos];
        if (c == '\'' || c == '"') lex_string(L);
        else if (digit(c)) lex_number(L);
        else if (name_char(c, true)) {
            size_t p = L->pos;
            while (p < L->n && name_char(L->s[p], false)) p++;
            jtoken *t = emit(L, TK_NAME, L->pos);
            t->p = L->s + L->pos;
            t->n = p - L->pos;
            L->pos = p;
        } else lex_op(L, &depth);
    }
}

/* ---- text, comments, raw ---- */

/* The text before a tag that starts at `tag` with sign (0, '-', '+'), its whitespace control done. */
static void text_before(lexer *L, size_t tag, char sign, bool block)
{
    size_t end = tag, from = L->pos;
    if (sign == '-') {
        while (end > from) { /* Python's rstrip, code point by code point from the end */
            size_t b = end - 1;
            while (b > from && ((unsigned char)L->s[b] & 0xc0) == 0x80) b--;
            if (!py_space_at(L->s, b, end)) break;
            end = b;
        }
    } else if (sign != '+' && block) {
        size_t l = end;
        while (l > from && L->s[l - 1] != '\n') l--;
        bool blank = true;
        for (size_t i = l; i < end && blank; i++) blank = L->s[i] == ' ' || L->s[i] == '\t';
        if (blank && (l > from || L->line_starting)) end = l;
    }
    emit_data(L, from, end);
}

static void lex_comment(lexer *L, size_t tag, size_t body)
{
    const char *e = NULL;
    for (size_t i = body; i + 1 < L->n && !e; i++)
        if (L->s[i] == '#' && L->s[i + 1] == '}') e = L->s + i;
    if (!e) lex_fail(L, tag, "a {# comment is not closed with #}");
    size_t q = (size_t)(e - L->s);
    char sign = q > body && (L->s[q - 1] == '-' || L->s[q - 1] == '+') ? L->s[q - 1] : 0;
    L->pos = q + 2;
    if (sign == '-') L->pos = skip_space(L, L->pos);
    else if (!sign && L->pos < L->n && L->s[L->pos] == '\n') L->pos++;
    L->line_starting = L->s[L->pos - 1] == '\n';
}

/* {% raw %} at tag (p after "{%" and its sign): its body is text up to {% endraw %}. */
static bool lex_raw(lexer *L, size_t p)
{
    p = skip_space(L, p);
    if (L->n - p < 3 || memcmp(L->s + p, "raw", 3) != 0) return false;
    p = skip_space(L, p + 3);
    char sign = p < L->n && (L->s[p] == '-' || L->s[p] == '+') ? L->s[p] : 0;
    if (L->n - p < (size_t)(sign ? 3 : 2) || memcmp(L->s + p + (sign != 0), "%}", 2) != 0) return false;
    p += sign ? 3 : 2;
    if (sign == '-') p = skip_space(L, p);
    for (size_t i = p; i + 1 < L->n; i++) {
        if (L->s[i] != '{' || L->s[i + 1] != '%') continue;
        size_t q = i + 2;
        char s2 = q < L->n && (L->s[q] == '-' || L->s[q] == '+') ? L->s[q++] : 0;
        q = skip_space(L, q);
        if (L->n - q < 6 || memcmp(L->s + q, "endraw", 6) != 0) continue;
        q = skip_space(L, q + 6);
        char s3 = q < L->n && (L->s[q] == '-' || L->s[q] == '+') ? L->s[q++] : 0;
        if (L->n - q < 2 || memcmp(L->s + q, "%}", 2) != 0) continue;
        L->pos = p;
        text_before(L, i, s2 == '-' ? '-' : '+', false);
        L->pos = q + 2;
        if (s3 == '-') L->pos = skip_space(L, L->pos);
        else if (!s3 && L->pos < L->n && L->s[L->pos] == '\n') L->pos++;
        L->line_starting = L->s[L->pos - 1] == '\n';
        return true;
    }
    lex_fail(L, p, "a {% raw %} block is not closed with {% endraw %}");
}

void jlex(jarena *a, const char *src, size_t len, jtokens *out)
{
    lexer L = {.a = a, .s = src, .n = len, .line = 1, .col = 1, .out = out, .line_starting = true};
    *out = (jtokens){0};
    while (L.pos < L.n) {
        const char *open = NULL;
        for (size_t i = L.pos; i + 1 < L.n && !open; i++)
            if (src[i] == '{' && (src[i + 1] == '{' || src[i + 1] == '%' || src[i + 1] == '#')) open = src + i;
        if (!open) {
            emit_data(&L, L.pos, L.n);
            break;
        }
        size_t tag = (size_t)(open - src), p = tag + 2;
        char kind = open[1], sign = p < L.n && (src[p] == '-' || src[p] == '+') ? src[p] : 0;
        p += sign != 0;
        text_before(&L, tag, sign, kind != '{');
        L.pos = p;
        if (kind == '#') lex_comment(&L, tag, p);
        else if (kind == '%' && lex_raw(&L, p)) continue;
        else {
            emit(&L, kind == '{' ? TK_VAR_BEGIN : TK_BLOCK_BEGIN, tag);
            lex_tag(&L, kind == '{' ? '}' : '%');
        }
    }
    emit(&L, TK_EOF, L.n);
}
