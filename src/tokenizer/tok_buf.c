/* tok_buf.c — the growing buffers the tokenizer's parts write into: rbuf (a NUL-terminated byte
 * buffer that records running out of memory instead of failing each put), a strbuf that decoding
 * appends to, and t->bytes, where every token's and added token's text is stored. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "tok_impl.h"

void tok_rbuf_put(rbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *grown = realloc(b->p, cap);
        if (!grown) {
            b->oom = true;
            return;
        }
        b->p = grown;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

pt_status tok_sb_append(strbuf *sb, const char *p, size_t n)
{
    if (sb->len + n + 1 > sb->cap) {
        size_t cap = sb->cap ? sb->cap : 256;
        while (cap < sb->len + n + 1) cap *= 2;
        char *grown = realloc(sb->data, cap);
        if (!grown) return ERR(PT_ERR_NOMEM, "out of memory");
        sb->data = grown;
        sb->cap = cap;
    }
    memcpy(sb->data + sb->len, p, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
    return PT_OK;
}

/* Append data to t->bytes; *off gets where it starts. */
pt_status tok_store(pt_tokenizer *t, const void *data, size_t len, uint32_t *off)
{
    if (t->bytes_len + len > UINT32_MAX)
        return ERR(PT_ERR_USER, "%s: the vocabulary is too large", shown_text(t->source).s);
    if (t->bytes_len + len > t->bytes_cap) {
        size_t cap = t->bytes_cap ? t->bytes_cap * 2 : 1 << 16;
        while (cap < t->bytes_len + len) cap *= 2;
        char *grown = realloc(t->bytes, cap);
        if (!grown) return ERR(PT_ERR_NOMEM, "out of memory");
        t->bytes = grown;
        t->bytes_cap = cap;
    }
    if (len) memcpy(t->bytes + t->bytes_len, data, len);
    *off = (uint32_t)t->bytes_len;
    t->bytes_len += len;
    return PT_OK;
}
