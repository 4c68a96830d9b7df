/* stats.c — counting what happened to the rows of each dataset entry, keeping the first bad
 * rows as "file:line: reason", and the report the trainer prints after loading. */
#include <stdlib.h>
#include <string.h>

#include "data_internal.h"

void stats_bad(pt_dataset_stats *st, uint64_t pos, const char *where, const char *reason)
{
    st->bad++;
    int at = st->n_bad_rows;
    while (at > 0 && st->bad_pos[at - 1] > pos) at--;
    if (at == DATASET_BAD_SHOWN) return;
    if (st->n_bad_rows == DATASET_BAD_SHOWN) free(st->bad_rows[--st->n_bad_rows]);
    memmove(st->bad_rows + at + 1, st->bad_rows + at, sizeof *st->bad_rows * (size_t)(st->n_bad_rows - at));
    memmove(st->bad_pos + at + 1, st->bad_pos + at, sizeof *st->bad_pos * (size_t)(st->n_bad_rows - at));
    strbuf sb = {0};
    sb_printf(&sb, "%s: %s", where, reason);
    st->bad_rows[at] = sb.data;
    st->bad_pos[at] = pos;
    st->n_bad_rows++;
}

void stats_free(pt_dataset_stats *st)
{
    for (int i = 0; i < st->n_bad_rows; i++) free(st->bad_rows[i]);
    for (int i = 0; i < st->n_files; i++) free(st->files[i].path);
    free(st->files);
    free(st->name);
    memset(st, 0, sizeof *st);
}

static void count(strbuf *sb, long n, const char *what)
{
    if (n) sb_printf(sb, "%s%ld %s", sb->len ? ", " : "", n, what);
}

static void report_entry(const pt_dataset_stats *st, int index, int32_t max_len, FILE *out)
{
    strbuf drop = {0};
    count(&drop, st->bad, "bad");
    count(&drop, st->filtered, "filtered out");
    count(&drop, st->limited, "beyond num_samples");
    count(&drop, st->empty, "empty");
    count(&drop, st->no_loss, "without a labelled token");
    fprintf(out, "dataset[%d] %s: %ld rows read, %ld kept (%s", index, shown_text(st->name).s, st->read, st->kept,
            st->format ? st->format : "no format found");
    if (st->template) fprintf(out, ", chat template %s", st->template);
    bool prompts = st->format && !strcmp(st->format, "prompt"); /* GRPO's: the completions are generated */
    if (prompts) fprintf(out, ", completions generated in training)");
    else fprintf(out, ", loss on %s)", st->assistant_only ? "assistant turns" : "all tokens");
    if (drop.len) fprintf(out, "; dropped: %s", drop.data);
    if (st->truncated && prompts) fprintf(out, "; %ld prompts cut to their last max_prompt_length tokens", st->truncated);
    else if (st->truncated) fprintf(out, "; %ld truncated to %d tokens", st->truncated, (int)max_len);
    fprintf(out, "\n");
    if (st->n_files > 1) /* a directory, a snapshot or data_files: which files, in order */
        for (int i = 0; i < st->n_files; i++) {
            if (i == 8 && st->n_files > 9) {
                fprintf(out, "  ... and %d more files\n", st->n_files - 8);
                break;
            }
            fprintf(out, "  file %s: %ld row%s\n", shown_text(st->files[i].path).s, st->files[i].rows,
                    st->files[i].rows == 1 ? "" : "s");
        }
    for (int i = 0; i < st->n_bad_rows; i++) fprintf(out, "  bad row %s\n", st->bad_rows[i]);
    if (st->bad > st->n_bad_rows) fprintf(out, "  ... and %ld more bad rows\n", st->bad - st->n_bad_rows);
    sb_free(&drop);
}

void dataset_report(const pt_dataset *ds, FILE *out)
{
    for (int i = 0; i < ds->n_stats; i++) report_entry(&ds->stats[i], i, ds->max_len, out);
    if (ds->n_stats && ds->stats[0].format && !strcmp(ds->stats[0].format, "prompt")) { /* GRPO: segment 1 */
        size_t tokens = 0;
        for (size_t i = 0; i < ds->n; i++)
            for (int32_t t = 0; t < ds->ex[i].len && ds->ex[i].segments[t] == 1; t++) tokens++;
        fprintf(out, "%zu prompts, %zu prompt tokens\n", ds->n, tokens);
        return;
    }
    fprintf(out, "%zu %s, %zu tokens\n", ds->n, ds->packed ? "packed sequences" : "examples", dataset_tokens(ds));
}

size_t dataset_tokens(const pt_dataset *ds)
{
    size_t n = 0;
    for (size_t i = 0; i < ds->n; i++) n += (size_t)ds->ex[i].len;
    return n;
}
