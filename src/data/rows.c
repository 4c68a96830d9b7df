/* rows.c — the per-entry row transforms, in the order the peer trainer applies them: rename
 * columns ({source: destination}, all at once, so swaps work), keep the rows whose
 * filter_column_value equals filter_value (compared as text; numbers also by value), take the
 * first num_samples rows; the readers hand the rows over in batches (a Parquet row group, a file),
 * so these run batch by batch with what they must remember across batches in a rows_state. The
 * shuffle (seeded by the entry's seed) is a permutation of the rows left (dataset.c applies it to
 * the examples they make). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "data_internal.h"

/* ---- rename ---- */

static void rename_row(const pt_strmap *map, json_t *obj, long *hits)
{
    json_t **vals = calloc((size_t)map->n, sizeof *vals);
    if (!vals) abort();
    for (int k = 0; k < map->n; k++) {
        vals[k] = json_incref(json_object_get(obj, map->keys[k]));
        if (vals[k]) json_object_del(obj, map->keys[k]);
    }
    for (int k = 0; k < map->n; k++)
        if (vals[k]) {
            hits[k]++;
            json_object_set_new(obj, map->values[k], vals[k]);
        }
    free(vals);
}

static void rename_rows(const pt_strmap *map, rows_state *s, data_rows *rows)
{
    if (!s->hits) {
        s->hits = calloc((size_t)map->n + 1, sizeof *s->hits);
        if (!s->hits) abort();
    }
    for (size_t i = 0; i < rows->n; i++) rename_row(map, rows->v[i].obj, s->hits);
    s->renamed += (long)rows->n;
}

/* ---- filter ---- */

static char *number_text(double x)
{
    char buf[64];
    for (int p = 1; p <= 17; p++) { /* the shortest text that reads back, as Python's repr */
        snprintf(buf, sizeof buf, "%.*g", p, x);
        if (strtod(buf, NULL) == x) break;
    }
    if (isfinite(x) && !strpbrk(buf, ".e")) strcat(buf, ".0");
    return xstrdup(buf);
}

char *rows_value_text(const json_t *v)
{
    char buf[32];
    switch (json_typeof(v)) {
    case JSON_STRING: return xstrdup(json_string_value(v));
    case JSON_INTEGER: snprintf(buf, sizeof buf, "%lld", (long long)json_integer_value(v)); return xstrdup(buf);
    case JSON_REAL: return number_text(json_real_value(v));
    case JSON_TRUE: return xstrdup("true");
    case JSON_FALSE: return xstrdup("false");
    case JSON_NULL: return xstrdup("null");
    default: return NULL;
    }
}

static bool matches(const json_t *v, const char *want)
{
    if (!v) return false;
    if (json_is_number(v)) {
        char *end;
        double x = strtod(want, &end);
        if (end != want && *end == '\0' && x == json_number_value(v)) return true;
    }
    char *text = rows_value_text(v);
    bool eq = text && (json_is_boolean(v) || json_is_null(v) ? !strcasecmp(text, want) : !strcmp(text, want));
    free(text);
    return eq;
}

static void filter_rows(const pt_dataset_config *d, data_rows *rows, pt_dataset_stats *st)
{
    size_t n = 0;
    for (size_t i = 0; i < rows->n; i++) {
        if (matches(json_object_get(rows->v[i].obj, d->filter_column_value), d->filter_value)) {
            rows->v[n++] = rows->v[i];
            continue;
        }
        json_decref(rows->v[i].obj);
        st->filtered++;
    }
    rows->n = n;
}

/* ---- num_samples ---- */

/* Keep the rows of this batch that are among the first limit rows of the entry. */
static void limit_rows(long limit, rows_state *s, data_rows *rows, pt_dataset_stats *st)
{
    size_t room = limit < 0 ? rows->n : s->taken >= limit ? 0 : (size_t)(limit - s->taken);
    if (rows->n > room) {
        for (size_t i = room; i < rows->n; i++) json_decref(rows->v[i].obj);
        st->limited += (long)(rows->n - room);
        rows->n = room;
    }
    s->taken += (long)rows->n;
}

void rows_step(const pt_dataset_config *d, rows_state *s, data_rows *rows, pt_dataset_stats *st)
{
    if (d->rename.n) rename_rows(&d->rename, s, rows);
    if (d->filter_data && d->filter_column_value && d->filter_value) filter_rows(d, rows, st);
    limit_rows(d->num_samples, s, rows, st);
}

void rows_end(const pt_dataset_config *d, int index, rows_state *s, FILE *warn)
{
    for (int k = 0; s->hits && k < d->rename.n; k++)
        if (!s->hits[k] && s->renamed && warn)
            fprintf(warn, "warning: dataset[%d].rename: no row has a column \"%s\"\n", index,
                    shown_text(d->rename.keys[k]).s);
    free(s->hits);
    *s = (rows_state){0};
}
