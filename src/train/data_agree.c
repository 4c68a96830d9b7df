/* data_agree.c — every rank of a job must train on the same data. The same config can name
 * different files on different ranks: a relative dataset path starts at each rank's working
 * directory, a node can hold another copy, an HF cache another snapshot. Such ranks used to end in
 * a raw MPI_ERR_TRUNCATE when their row counts differed (their step counts differed), or to train
 * silently on different data when they did not. So after every rank has read and tokenized its
 * data, each compares with rank 0 what it read: per dataset file, its size, the CRC-32 of its bytes
 * (taken while reading, reader.c) and its rows; then a CRC-32 of the tokenized examples (which
 * differ when the files agree but, say, the tokenizers do not). A rank that differs says which
 * file it resolved to, what differs and the fix; the caller agrees (dist_agree), so every rank
 * stops. One process has nothing to compare. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ptrain/util.h"
#include "trainer.h"

#define AGREE_PATH 480 /* of a path, kept for the message */

/* One file a rank read. */
typedef struct {
    uint64_t bytes;
    int64_t rows;
    uint32_t crc;
    int32_t entry; /* the dataset entry (config order) */
    char path[AGREE_PATH];
} file_record;

/* What a rank read, in all. */
typedef struct {
    int64_t n_files, n_train, n_eval;
    uint32_t examples; /* CRC-32 of every example's length, ids, labels and segments */
    uint32_t pad;
} data_head;

typedef struct {
    data_head head;
    file_record *files;
} data_summary;

static uLong examples_crc(uLong c, const pt_dataset *ds)
{
    for (size_t i = 0; i < ds->n; i++) {
        const pt_example *e = &ds->ex[i];
        size_t bytes = sizeof(int32_t) * (size_t)e->len;
        c = crc32(c, (const Bytef *)&e->len, sizeof e->len);
        c = crc32(c, (const Bytef *)e->ids, (uInt)bytes);
        c = crc32(c, (const Bytef *)e->labels, (uInt)bytes);
        if (e->segments) c = crc32(c, (const Bytef *)e->segments, (uInt)bytes);
    }
    return c;
}

static pt_status summary_make(const trainer *t, data_summary *s)
{
    const pt_dataset *ds = &t->train;
    int64_t n = 0;
    for (int e = 0; e < ds->n_stats; e++) n += ds->stats[e].n_files;
    *s = (data_summary){.head = {.n_files = n, .n_train = (int64_t)t->train.n, .n_eval = (int64_t)t->eval.n}};
    s->head.examples = (uint32_t)examples_crc(examples_crc(crc32(0L, Z_NULL, 0), &t->train), &t->eval);
    s->files = calloc((size_t)n + 1, sizeof *s->files);
    TRY_ALLOC(s->files);
    file_record *r = s->files;
    for (int e = 0; e < ds->n_stats; e++)
        for (int i = 0; i < ds->stats[e].n_files; i++, r++) {
            const pt_data_file *f = &ds->stats[e].files[i];
            r->bytes = f->bytes, r->rows = f->rows, r->crc = f->crc, r->entry = e;
            snprintf(r->path, sizeof r->path, "%s", f->path);
        }
    return PT_OK;
}

/* Rank 0's summary on every rank (rank 0: a copy of its own). Hang-free: every rank takes part in
 * every collective, and a failed allocation is agreed before the data moves. */
static pt_status summary_share(const pt_dist *d, const data_summary *mine, data_summary *root)
{
    root->head = mine->head;
    TRY(dist_bcast_bytes(d, &root->head, sizeof root->head));
    size_t bytes = sizeof(file_record) * (size_t)root->head.n_files;
    root->files = malloc(bytes + 1);
    TRY(dist_agree(d, root->files ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory")));
    if (d->rank == 0) memcpy(root->files, mine->files, bytes);
    return dist_bcast_bytes(d, root->files, bytes);
}

static void describe(strbuf *sb, const file_record *f)
{
    if (!f) {
        sb_printf(sb, "none");
        return;
    }
    sb_printf(sb, "%s (%llu bytes, %lld rows, CRC-32 %08x)", shown_text(f->path).s, (unsigned long long)f->bytes,
              (long long)f->rows, f->crc);
}

/* What makes two records of the same file differ, as "the size, the content and the rows". */
static void what_differs(strbuf *sb, const file_record *a, const file_record *b)
{
    const char *parts[3];
    int n = 0;
    if (a->bytes != b->bytes) parts[n++] = "the size";
    if (a->crc != b->crc) parts[n++] = "the content";
    if (a->rows != b->rows) parts[n++] = "the row count";
    for (int i = 0; i < n; i++) sb_printf(sb, "%s%s", i == 0 ? "" : i == n - 1 ? " and " : ", ", parts[i]);
    sb_printf(sb, " differ%s", n == 1 ? "s" : "");
}

static const char agree_fix[] =
    "Every rank must read the same data: a relative dataset path starts at each rank's working directory, so "
    "name the files by an absolute path on a filesystem every node sees alike, or start every rank in the same "
    "directory (mpirun --wdir, srun --chdir), and give every node the same copy";

/* How many files entry e read; *first: the index of the first (-1: none). */
static int64_t entry_files(const data_summary *s, int e, int64_t *first)
{
    int64_t n = 0;
    *first = -1;
    for (int64_t i = 0; i < s->head.n_files; i++)
        if (s->files[i].entry == e && n++ == 0) *first = i;
    return n;
}

static pt_status entry_mismatch(const trainer *t, int e, const data_summary *mine, const data_summary *root)
{
    int64_t a0, b0, na = entry_files(mine, e, &a0), nb = entry_files(root, e, &b0);
    pt_shown name = shown_text(t->cfg->datasets[e].name);
    strbuf sb = {0};
    pt_status st = PT_OK;
    if (na != nb) {
        sb_printf(&sb, "dataset[%d] %s: this rank (%d) read %lld files, rank 0 read %lld (the first here: ", e, name.s,
                  t->d->rank, (long long)na, (long long)nb);
        describe(&sb, a0 >= 0 ? &mine->files[a0] : NULL);
        sb_printf(&sb, "; on rank 0: ");
        describe(&sb, b0 >= 0 ? &root->files[b0] : NULL);
        st = ERR(PT_ERR_USER, "%s). %s", sb.data, agree_fix);
    }
    for (int64_t i = 0; st == PT_OK && i < na; i++) {
        const file_record *a = &mine->files[a0 + i], *b = &root->files[b0 + i];
        if (a->bytes == b->bytes && a->crc == b->crc && a->rows == b->rows) continue;
        sb_printf(&sb, "dataset[%d] %s: this rank (%d) read ", e, name.s, t->d->rank);
        describe(&sb, a);
        sb_printf(&sb, ", rank 0 read ");
        describe(&sb, b);
        sb_printf(&sb, ": ");
        what_differs(&sb, a, b);
        st = ERR(PT_ERR_USER, "%s. %s", sb.data, agree_fix);
    }
    sb_free(&sb);
    return st;
}

static pt_status summary_compare(const trainer *t, const data_summary *mine, const data_summary *root)
{
    for (int e = 0; e < t->cfg->n_datasets; e++) TRY(entry_mismatch(t, e, mine, root));
    const data_head *a = &mine->head, *b = &root->head;
    char model[PATH_MAX];
    if (!realpath(t->model_path, model)) snprintf(model, sizeof model, "%s", t->model_path);
    if (a->n_train != b->n_train || a->n_eval != b->n_eval || a->examples != b->examples)
        return ERR(PT_ERR_USER, "this rank (%d) read the same dataset files as rank 0 but made other training "
                   "examples from them (%lld train and %lld eval here, %lld and %lld on rank 0; CRC-32 of their "
                   "tokens %08x, rank 0 %08x): the tokenizer differs, or the model it came from (%s here): give "
                   "every rank the same model files", t->d->rank, (long long)a->n_train, (long long)a->n_eval,
                   (long long)b->n_train, (long long)b->n_eval, a->examples, b->examples, model);
    return PT_OK;
}

pt_status trainer_agree_data(trainer *t)
{
    if (t->d->world == 1) return PT_OK;
    data_summary mine = {0}, root = {0};
    pt_status st = dist_agree(t->d, summary_make(t, &mine));
    if (st == PT_OK) st = summary_share(t->d, &mine, &root);
    if (st == PT_OK) st = dist_agree(t->d, summary_compare(t, &mine, &root));
    free(mine.files);
    free(root.files);
    return st;
}
