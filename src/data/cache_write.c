/* cache_write.c — writing the dataset cache (dataset_cache.h; layout in data_internal.h): one pass
 * computes the CRC-32, a second streams the same bytes to a temporary file that is renamed into
 * place only when complete (filewrite.h), so a kill leaves the old cache or none, never half. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data_internal.h"
#include "ptrain/dataset_cache.h"
#include "ptrain/filewrite.h"

/* Where the bytes go: into the CRC (w NULL) or to the file. */
typedef struct {
    pt_filewriter *w;
    uLong crc;
} sink;

static pt_status put(sink *s, const void *p, size_t n)
{
    if (s->w) return fw_write(s->w, p, n);
    for (size_t off = 0; off < n;) { /* zlib takes 32-bit lengths */
        size_t len = n - off < (1u << 30) ? n - off : (1u << 30);
        s->crc = crc32(s->crc, (const Bytef *)p + off, (uInt)len);
        off += len;
    }
    return PT_OK;
}

static size_t pad8(size_t n) { return (8 - n % 8) % 8; }

uint64_t cache_examples_bytes(const pt_dataset *ds)
{
    uint64_t arrays = ds->packed ? 3 : 2, bytes = 16 + 8 * (uint64_t)ds->n; /* lens, margins */
    for (size_t i = 0; i < ds->n; i++) bytes += 4 * arrays * (uint64_t)ds->ex[i].len;
    return bytes;
}

static pt_status put_examples(sink *s, const pt_dataset *ds)
{
    uint64_t n = ds->n;
    int32_t head[2] = {ds->max_len, ds->packed};
    TRY(put(s, &n, sizeof n));
    TRY(put(s, head, sizeof head));
    int32_t *lens = malloc(sizeof *lens * (ds->n + 1));
    TRY_ALLOC(lens);
    for (size_t i = 0; i < ds->n; i++) lens[i] = ds->ex[i].len;
    pt_status st = put(s, lens, sizeof *lens * ds->n);
    for (size_t i = 0; i < ds->n; i++) memcpy(&lens[i], &ds->ex[i].margin, sizeof lens[i]); /* float bits */
    if (st == PT_OK) st = put(s, lens, sizeof *lens * ds->n);
    free(lens);
    for (size_t i = 0; st == PT_OK && i < ds->n; i++) {
        const pt_example *e = &ds->ex[i];
        size_t bytes = sizeof(int32_t) * (size_t)e->len;
        st = put(s, e->ids, bytes);
        if (st == PT_OK) st = put(s, e->labels, bytes);
        if (st == PT_OK && ds->packed) st = put(s, e->segments, bytes);
    }
    static const char zeros[8];
    return st == PT_OK ? put(s, zeros, pad8((size_t)cache_examples_bytes(ds))) : st;
}

static void put_text(strbuf *sb, const char *s)
{
    uint32_t n = s ? (uint32_t)strlen(s) : UINT32_MAX;
    sb_append(sb, &n, sizeof n);
    if (s) sb_append(sb, s, n);
}

static void put_stats(strbuf *sb, const pt_dataset_stats *st)
{
    put_text(sb, st->name);
    put_text(sb, st->format);
    put_text(sb, st->template);
    int64_t counts[9] = {st->assistant_only, st->read, st->bad, st->filtered, st->limited,
                         st->empty,          st->no_loss, st->kept, st->truncated};
    sb_append(sb, counts, sizeof counts);
    uint32_t n = (uint32_t)st->n_bad_rows;
    sb_append(sb, &n, sizeof n);
    for (int i = 0; i < st->n_bad_rows; i++) put_text(sb, st->bad_rows[i]);
    n = (uint32_t)st->n_files;
    sb_append(sb, &n, sizeof n);
    for (int i = 0; i < st->n_files; i++) {
        const pt_data_file *f = &st->files[i];
        put_text(sb, f->path);
        uint64_t nums[3] = {f->bytes, f->crc, (uint64_t)f->rows};
        sb_append(sb, nums, sizeof nums);
    }
}

/* The stats section: how many entries, then each, padded to 8 bytes. */
static void stats_section(const pt_dataset *train, strbuf *sb)
{
    uint32_t n = (uint32_t)train->n_stats;
    sb_append(sb, &n, sizeof n);
    for (int i = 0; i < train->n_stats; i++) put_stats(sb, &train->stats[i]);
    static const char zeros[8];
    sb_append(sb, zeros, pad8(sb->len));
}

static pt_status put_payload(sink *s, const strbuf *stats, const pt_dataset *train, const pt_dataset *eval)
{
    TRY(put(s, stats->data, stats->len));
    TRY(put_examples(s, train));
    return put_examples(s, eval);
}

static cache_header header_of(const dataset_cache_key *key, const strbuf *stats, const pt_dataset *train,
                              const pt_dataset *eval)
{
    cache_header h = {.version = DATASET_CACHE_VERSION, .header_bytes = sizeof h, .name = key->name,
                      .files = key->files};
    memcpy(h.magic, CACHE_MAGIC, sizeof h.magic);
    uint64_t bytes[CACHE_SECTIONS] = {stats->len, cache_examples_bytes(train), cache_examples_bytes(eval)};
    uint64_t at = sizeof h;
    for (int i = 0; i < CACHE_SECTIONS; i++) {
        h.section[i][0] = at, h.section[i][1] = bytes[i];
        at += bytes[i] + pad8((size_t)bytes[i]);
    }
    h.size = at;
    return h;
}

pt_status dataset_cache_write(const char *path, const dataset_cache_key *key, const pt_dataset *train,
                              const pt_dataset *eval)
{
    strbuf stats = {0};
    stats_section(train, &stats);
    cache_header h = header_of(key, &stats, train, eval);
    sink crc = {NULL, crc32(0L, Z_NULL, 0)};
    pt_status st = put_payload(&crc, &stats, train, eval);
    h.crc = (uint32_t)crc32(crc.crc, (const Bytef *)&h, sizeof h);
    pt_filewriter w;
    if (st == PT_OK) st = fw_open(&w, path);
    if (st != PT_OK) {
        sb_free(&stats);
        return st;
    }
    sink file = {&w, 0};
    st = put(&file, &h, sizeof h);
    if (st == PT_OK) st = put_payload(&file, &stats, train, eval);
    sb_free(&stats);
    if (st == PT_OK) return fw_commit(&w);
    fw_abort(&w);
    return st;
}
