/* config_report.c — the messages about one config file as the user reads them. They are collected
 * while the file is read and checked (the rules between keys come rule by rule), then put in file
 * order; identical ones, which aliases make (an alias repeats its anchor's values and so their
 * mistakes), are shown once with their count; and the first CONFIG_REPORT_MAX are shown with the
 * number left out, so a report is whole lines however many mistakes a file has: sixty bad list
 * items or ten thousand repeats of one. Errors become the one error message, warnings and notes
 * are written to the warning stream. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_internal.h"

struct report_item {
    size_t line, col; /* 1-based; 0: the file as a whole */
    int order;        /* of collection: a stable sort */
    int count;        /* identical ones merged into this one */
    const char *label; /* "warning", "note"; NULL in an error report */
    char *text;
};

void report_add(config_report *r, const char *label, size_t line, size_t col, const char *fmt, ...)
{
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        struct report_item *grown = realloc(r->items, sizeof *grown * (size_t)cap);
        if (!grown) abort();
        r->items = grown, r->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    strbuf text = {0};
    sb_vprintf(&text, fmt, ap);
    va_end(ap);
    r->items[r->n] = (struct report_item){line, col, r->n, 1, label, xstrdup(sb_text(&text))};
    r->n++;
    sb_free(&text);
}

static int item_cmp(const void *a, const void *b)
{
    const struct report_item *x = a, *y = b;
    if (x->line != y->line) return x->line < y->line ? -1 : 1;
    if (x->col != y->col) return x->col < y->col ? -1 : 1;
    return x->order - y->order;
}

static bool item_same(const struct report_item *x, const struct report_item *y)
{
    bool same_label = x->label == y->label || (x->label && y->label && !strcmp(x->label, y->label));
    return x->line == y->line && x->col == y->col && same_label && !strcmp(x->text, y->text);
}

/* Sort by place, then merge each run of identical messages into its first. */
static void report_settle(config_report *r)
{
    qsort(r->items, (size_t)r->n, sizeof *r->items, item_cmp);
    int k = 0;
    for (int i = 0; i < r->n; i++) {
        if (k > 0 && item_same(&r->items[k - 1], &r->items[i])) {
            r->items[k - 1].count++;
            free(r->items[i].text);
            continue;
        }
        r->items[k++] = r->items[i];
    }
    r->n = k;
}

/* One message: "[ptrain: LABEL: ]FILE:LINE:COL: text[ (N times)]". */
static void item_line(const config_report *r, const struct report_item *it, strbuf *out)
{
    pt_shown file = shown_text(r->file); /* an object: the .s of a returned struct lives one expression */
    if (it->label) sb_printf(out, "ptrain: %s: ", it->label);
    if (it->line) sb_printf(out, "%s:%zu:%zu: %s", file.s, it->line, it->col, it->text);
    else sb_printf(out, "%s: %s", file.s, it->text);
    if (it->count > 1) sb_printf(out, " (%d times)", it->count);
}

/* The last line of a report that leaves out the messages from item from on: "… and N more errors
 * in FILE", or as a warning "… and N more warnings (notes, warnings and notes) in FILE". */
static void rest_line(const config_report *r, int from, strbuf *out)
{
    int rest = r->n - from, notes = 0;
    pt_shown file = shown_text(r->file);
    if (!r->items[from].label) {
        sb_printf(out, "… and %d more error%s in %s\n", rest, rest == 1 ? "" : "s", file.s);
        return;
    }
    for (int i = from; i < r->n; i++) notes += !strcmp(r->items[i].label, "note");
    const char *what = notes == rest ? "note" : notes ? "warnings and note" : "warning";
    sb_printf(out, "ptrain: %s: … and %d more %s%s in %s\n", notes == rest ? "note" : "warning", rest, what,
              rest == 1 ? "" : "s", file.s);
}

/* The report as lines (each ending in '\n'): the first CONFIG_REPORT_MAX messages, fewer when the
 * next would take the text past budget bytes, then "… and N more errors in FILE". */
static void report_render(config_report *r, size_t budget, strbuf *out)
{
    report_settle(r);
    int shown = 0;
    for (; shown < r->n && shown < CONFIG_REPORT_MAX; shown++) {
        strbuf line = {0};
        item_line(r, &r->items[shown], &line);
        bool fits = out->len + line.len + 1 + 256 <= budget; /* 256: room for the last line */
        if (fits) sb_printf(out, "%s\n", sb_text(&line));
        sb_free(&line);
        if (!fits) break;
    }
    if (shown < r->n) rest_line(r, shown, out);
}

pt_status report_fail(config_report *r)
{
    if (r->n == 0) return PT_OK;
    strbuf text = {0};
    report_render(r, ERR_MESSAGE_MAX / 2, &text);
    text.data[--text.len] = '\0'; /* the message has no final newline */
    pt_status st = ERR(PT_ERR_USER, "%s", text.data);
    sb_free(&text);
    return st;
}

void report_print(config_report *r, FILE *out)
{
    if (r->n == 0 || !out) return;
    strbuf text = {0};
    report_render(r, (size_t)-1, &text);
    fputs(text.data, out); /* at once: the stream may be unbuffered */
    sb_free(&text);
}

void report_free(config_report *r)
{
    for (int i = 0; i < r->n; i++) free(r->items[i].text);
    free(r->items);
    r->items = NULL;
    r->n = r->cap = 0;
}
