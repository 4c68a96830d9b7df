/* rows.c — the per-entry row transforms, in the order the peer trainer applies them: rename
 * columns ({source: destination}, all at once, so swaps work), keep the rows whose
 * filter_column_value equals filter_value (compared as text; numbers also by value), take the
 * first num_samples rows, then shuffle with the entry's seed. */
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

static void rename_rows(const pt_strmap *map, int index, data_rows *rows, FILE *warn)
{
    long *hits = calloc((size_t)map->n + 1, sizeof *hits);
    if (!hits) abort();
    for (size_t i = 0; i < rows->n; i++) rename_row(map, rows->v[i].obj, hits);
    for (int k = 0; k < map->n; k++)
        if (!hits[k] && rows->n && warn)
            fprintf(warn, "warning: dataset[%d].rename: no row has a column \"%s\"\n", index,
                    shown_text(map->keys[k]).s);
    free(hits);
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

/* ---- num_samples, shuffle ---- */

static void limit_rows(long limit, data_rows *rows, pt_dataset_stats *st)
{
    if (limit < 0 || rows->n <= (size_t)limit) return;
    for (size_t i = (size_t)limit; i < rows->n; i++) json_decref(rows->v[i].obj);
    st->limited += (long)(rows->n - (size_t)limit);
    rows->n = (size_t)limit;
}

static void shuffle_rows(uint64_t seed, data_rows *rows)
{
    if (rows->n == 0) return; /* no rows: rows->v may be NULL, which memcpy must not get */
    size_t *perm = malloc((rows->n + 1) * sizeof *perm);
    data_row *out = malloc((rows->n + 1) * sizeof *out);
    if (!perm || !out) abort();
    rng_permutation(rows->n, seed, perm);
    for (size_t i = 0; i < rows->n; i++) out[i] = rows->v[perm[i]];
    memcpy(rows->v, out, rows->n * sizeof *out);
    free(out);
    free(perm);
}

void rows_transform(const pt_dataset_config *d, int index, data_rows *rows, pt_dataset_stats *st, FILE *warn)
{
    if (d->rename.n) rename_rows(&d->rename, index, rows, warn);
    if (d->filter_data && d->filter_column_value && d->filter_value) filter_rows(d, rows, st);
    limit_rows(d->num_samples, rows, st);
    if (d->shuffle) shuffle_rows((uint64_t)d->seed, rows);
}
