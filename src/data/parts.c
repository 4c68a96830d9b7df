/* parts.c — tokenizing split across the ranks of a job (dataset.h, dataset_work): each part
 * tokenizes every parts-th row of an entry and sends its rows' outcomes (row result, label result,
 * status, message, tokens, a preference pair's segments) as bytes; part 0 puts them back in row order and counts them as if it had
 * tokenized every row itself, so the result does not depend on the number of parts. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

/* A slot as sent (with a reward pair's margin): then why_len bytes of its message, then len ids and
 * len labels. */
typedef struct {
    uint8_t row, label, truncated, has_why, has_segments;
    int32_t rc;
    uint32_t why_len;
    int32_t len;
    float margin;
} slot_head;

/* Whether the slot's example is kept (dataset.c's tally): only then do its tokens travel. */
static bool kept(row_result row, pt_status rc, label_result label)
{
    return row == ROW_OK && rc == PT_OK && label == LABEL_OK;
}

static void encode_slot(const data_slot *s, strbuf *out)
{
    slot_head h = {(uint8_t)s->row, (uint8_t)s->label, s->truncated, s->why != NULL, s->ex.segments != NULL,
                   (int32_t)s->rc,
                   s->why ? (uint32_t)strlen(s->why) : 0, kept(s->row, s->rc, s->label) ? s->ex.len : 0, s->ex.margin};
    sb_append(out, &h, sizeof h);
    if (h.why_len) sb_append(out, s->why, h.why_len);
    sb_append(out, s->ex.ids, sizeof(int32_t) * (size_t)h.len);
    sb_append(out, s->ex.labels, sizeof(int32_t) * (size_t)h.len);
    if (h.has_segments) sb_append(out, s->ex.segments, sizeof(int32_t) * (size_t)h.len);
}

void parts_encode(const data_slot *slots, size_t n, int part, int parts, strbuf *out)
{
    size_t at = out->len;
    uint64_t len = 0;
    sb_append(out, &len, sizeof len);
    for (size_t i = 0; i < n; i++)
        if (parts_mine(i, part, parts)) encode_slot(&slots[i], out);
    len = out->len - at - sizeof len;
    memcpy(out->data + at, &len, sizeof len);
}

static bool decode_slot(byte_cursor *c, data_slot *s)
{
    slot_head h;
    if (!cursor_take(c, &h, sizeof h) || h.len < 0 || (h.len > 0 && !kept(h.row, h.rc, h.label))) return false;
    *s = (data_slot){.row = (row_result)h.row, .label = (label_result)h.label, .rc = (pt_status)h.rc,
                     .truncated = h.truncated};
    if (h.has_why) {
        s->why = malloc((size_t)h.why_len + 1);
        if (!s->why) abort();
        if (!cursor_take(c, s->why, h.why_len)) return false;
        s->why[h.why_len] = '\0';
    }
    if (h.len == 0) return true;
    size_t bytes = sizeof(int32_t) * (size_t)h.len;
    s->ex = (pt_example){malloc(bytes), malloc(bytes), h.has_segments ? malloc(bytes) : NULL, h.len, h.margin};
    if (!s->ex.ids || !s->ex.labels || (h.has_segments && !s->ex.segments)) abort();
    return cursor_take(c, s->ex.ids, bytes) && cursor_take(c, s->ex.labels, bytes) &&
           (!h.has_segments || cursor_take(c, s->ex.segments, bytes));
}

static bool decode_part(byte_cursor *all, data_slot *slots, size_t n, int part, int parts)
{
    uint64_t len;
    if (!cursor_take(all, &len, sizeof len) || len > (uint64_t)(all->end - all->p)) return false;
    byte_cursor c = {all->p, all->p + len};
    all->p += len;
    for (size_t i = 0; i < n; i++)
        if (parts_mine(i, part, parts) && !decode_slot(&c, &slots[i])) return false;
    return c.p == c.end;
}

pt_status parts_decode(const void *all, size_t len, data_slot *slots, size_t n, int parts)
{
    byte_cursor c = {all, (const unsigned char *)all + len};
    for (int p = 0; p < parts; p++)
        if (!decode_part(&c, slots, n, p, parts))
            return ERR(PT_ERR_INTERNAL, "the tokenized rows of part %d of %d do not decode", p, parts);
    if (c.p != c.end) return ERR(PT_ERR_INTERNAL, "%zu bytes left over after the tokenized rows of %d parts",
                                 (size_t)(c.end - c.p), parts);
    return PT_OK;
}
