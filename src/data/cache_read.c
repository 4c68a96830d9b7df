/* cache_read.c — reading the dataset cache back (dataset_cache.h; layout in data_internal.h): the
 * header checked against the key (stale: other dataset bytes or another format version) and the
 * file's size, the CRC-32 when asked (damaged), then every length and offset checked before the
 * examples are pointed into the mapped bytes. Nothing in the file is trusted unchecked: a cache
 * that fails any check is never used. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "data_internal.h"
#include "ptrain/dataset_cache.h"

static uLong crc_of(uLong crc, const unsigned char *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        size_t len = n - off < (1u << 30) ? n - off : (1u << 30);
        crc = crc32(crc, p + off, (uInt)len);
        off += len;
    }
    return crc;
}

static dataset_cache_state said(strbuf *why, dataset_cache_state state, const char *text)
{
    if (why) sb_printf(why, "%s", text);
    return state;
}

/* The header's verdict, given the file's length. */
static dataset_cache_state check_header(const cache_header *h, size_t len, const dataset_cache_key *key, strbuf *why)
{
    if (memcmp(h->magic, CACHE_MAGIC, sizeof h->magic) != 0 || h->header_bytes != sizeof *h)
        return said(why, CACHE_DAMAGED, "it does not start as a ptrain dataset cache");
    if (h->version != DATASET_CACHE_VERSION || h->name != key->name)
        return said(why, CACHE_STALE, "it was made by another version of ptrain's data format");
    if (h->files != key->files) return said(why, CACHE_STALE, "the dataset files changed since it was made");
    if (h->size != len) {
        if (why) sb_printf(why, "it has %zu bytes where its header says %llu (cut short?)", len,
                           (unsigned long long)h->size);
        return CACHE_DAMAGED;
    }
    for (int i = 0; i < CACHE_SECTIONS; i++)
        if (h->section[i][0] % 8 || h->section[i][0] < sizeof *h || h->section[i][0] > len ||
            h->section[i][1] > len - h->section[i][0])
            return said(why, CACHE_DAMAGED, "its sections lie outside the file");
    return CACHE_FOUND;
}

static dataset_cache_state check_bytes(const unsigned char *base, size_t len, const dataset_cache_key *key,
                                       bool verify, strbuf *why)
{
    cache_header h;
    if (len < sizeof h) return said(why, CACHE_DAMAGED, "it is shorter than its header (cut short?)");
    memcpy(&h, base, sizeof h);
    dataset_cache_state s = check_header(&h, len, key, why);
    if (s != CACHE_FOUND || !verify) return s;
    uint32_t want = h.crc;
    h.crc = 0;
    uLong crc = crc_of(crc32(0L, Z_NULL, 0), base + sizeof h, len - sizeof h);
    if ((uint32_t)crc32(crc, (const Bytef *)&h, sizeof h) != want)
        return said(why, CACHE_DAMAGED, "its CRC-32 does not match its bytes");
    return CACHE_FOUND;
}

/* ---- sections ---- */

static bool take_text(byte_cursor *c, char **out)
{
    uint32_t n;
    *out = NULL;
    if (!cursor_take(c, &n, sizeof n)) return false;
    if (n == UINT32_MAX) return true;
    if ((size_t)(c->end - c->p) < n || !(*out = malloc((size_t)n + 1))) return false;
    cursor_take(c, *out, n);
    (*out)[n] = '\0';
    return true;
}

/* A text that must be one of the static names (format, template); absent is allowed. */
static bool take_known(byte_cursor *c, const char *(*known)(const char *), const char **out)
{
    char *s;
    if (!take_text(c, &s)) return false;
    *out = s ? known(s) : NULL;
    bool ok = !s || *out;
    free(s);
    return ok;
}

static bool take_files(byte_cursor *c, pt_dataset_stats *st)
{
    uint32_t n;
    if (!cursor_take(c, &n, sizeof n) || n > (size_t)(c->end - c->p) / 16) return false;
    st->files = calloc((size_t)n + 1, sizeof *st->files);
    if (!st->files) abort();
    for (; (uint32_t)st->n_files < n; st->n_files++) {
        pt_data_file *f = &st->files[st->n_files];
        uint64_t nums[3];
        if (!take_text(c, &f->path) || !f->path || !cursor_take(c, nums, sizeof nums)) return false;
        f->bytes = nums[0], f->crc = (uint32_t)nums[1], f->rows = (long)nums[2];
    }
    return true;
}

static bool take_stats(byte_cursor *c, pt_dataset_stats *st)
{
    int64_t k[9];
    uint32_t bad;
    if (!take_text(c, &st->name) || !st->name || !take_known(c, format_name_known, &st->format) ||
        !take_known(c, label_template_known, &st->template) || !cursor_take(c, k, sizeof k) ||
        !cursor_take(c, &bad, sizeof bad) || bad > DATASET_BAD_SHOWN)
        return false;
    st->assistant_only = k[0], st->read = k[1], st->bad = k[2], st->filtered = k[3], st->limited = k[4];
    st->empty = k[5], st->no_loss = k[6], st->kept = k[7], st->truncated = k[8];
    for (; (uint32_t)st->n_bad_rows < bad; st->n_bad_rows++)
        if (!take_text(c, &st->bad_rows[st->n_bad_rows]) || !st->bad_rows[st->n_bad_rows]) return false;
    return take_files(c, st);
}

static bool parse_stats(const unsigned char *p, size_t len, pt_dataset *ds)
{
    byte_cursor c = {p, p + len};
    uint32_t n;
    if (!cursor_take(&c, &n, sizeof n) || n > len) return false;
    ds->stats = calloc((size_t)n + 1, sizeof *ds->stats);
    if (!ds->stats) abort();
    for (; (uint32_t)ds->n_stats < n; ds->n_stats++)
        if (!take_stats(&c, &ds->stats[ds->n_stats])) {
            ds->n_stats++; /* freed with the others */
            return false;
        }
    return c.end - c.p < 8;
}

/* The examples of a section at p (4-byte aligned), pointing into it. */
static bool parse_examples(const unsigned char *p, size_t len, pt_dataset *ds)
{
    uint64_t n;
    int32_t head[2];
    byte_cursor c = {p, p + len};
    if (!cursor_take(&c, &n, sizeof n) || !cursor_take(&c, head, sizeof head) || n > len / 4 || head[0] < 1 ||
        (head[1] != 0 && head[1] != 1))
        return false;
    const int32_t *lens = (const int32_t *)c.p;
    if (!cursor_take(&c, NULL, 4 * n)) return false;
    const unsigned char *margins = c.p; /* each example's margin, float bits */
    if (!cursor_take(&c, NULL, 4 * n)) return false;
    ds->max_len = head[0], ds->packed = head[1];
    ds->ex = calloc(n + 1, sizeof *ds->ex);
    if (!ds->ex) abort();
    size_t arrays = ds->packed ? 3 : 2;
    for (ds->n = 0; ds->n < n; ds->n++) {
        int32_t l = lens[ds->n];
        int32_t *at = (int32_t *)c.p;
        if (l < 1 || l > ds->max_len || !cursor_take(&c, NULL, 4 * arrays * (size_t)l)) return false;
        ds->ex[ds->n] = (pt_example){at, at + l, ds->packed ? at + 2 * l : NULL, l, 0.0f};
        memcpy(&ds->ex[ds->n].margin, margins + 4 * ds->n, sizeof(float));
    }
    return c.end - c.p < 8;
}

/* Undo a parse: the arrays it made, not the bytes its examples point into. */
static void parse_undo(pt_dataset *ds)
{
    free(ds->ex);
    for (int i = 0; i < ds->n_stats; i++) stats_free(&ds->stats[i]);
    free(ds->stats);
    *ds = (pt_dataset){0};
}

/* train and eval from the checked bytes at base: train points into them (its backing is the
 * caller's to set), eval into a copy of its section. */
static pt_status parse_sections(const unsigned char *base, const char *what, pt_dataset *train, pt_dataset *eval)
{
    cache_header h;
    memcpy(&h, base, sizeof h);
    const uint64_t(*s)[2] = h.section;
    *train = *eval = (pt_dataset){0};
    bool ok = parse_stats(base + s[CACHE_STATS][0], s[CACHE_STATS][1], train) &&
              parse_examples(base + s[CACHE_TRAIN][0], s[CACHE_TRAIN][1], train);
    void *copy = NULL;
    if (ok) {
        if (!(copy = malloc(s[CACHE_EVAL][1] + 8))) abort();
        memcpy(copy, base + s[CACHE_EVAL][0], s[CACHE_EVAL][1]);
        ok = parse_examples(copy, s[CACHE_EVAL][1], eval);
    }
    if (ok) {
        eval->backing = copy, eval->backing_len = s[CACHE_EVAL][1];
        return PT_OK;
    }
    parse_undo(train);
    parse_undo(eval);
    free(copy);
    return ERR(PT_ERR_USER, "the dataset cache %s: its sections do not hold examples (damaged)", shown_text(what).s);
}

/* bytes (mapped from a file, or malloc'd: then freed on failure) checked and parsed into train and
 * eval, which keep them as their backing; what names them in a message. */
static pt_status adopt(unsigned char *bytes, size_t len, const dataset_cache_key *key, bool verify, const char *what,
                       bool mapped, pt_dataset *train, pt_dataset *eval)
{
    strbuf why = {0};
    pt_status st = PT_OK;
    if (check_bytes(bytes, len, key, verify, &why) != CACHE_FOUND)
        st = ERR(PT_ERR_USER, "the dataset cache %s: %s", shown_text(what).s, sb_text(&why));
    sb_free(&why);
    if (st == PT_OK) st = parse_sections(bytes, what, train, eval);
    if (st != PT_OK) {
        if (!mapped) free(bytes);
        else if (bytes) munmap(bytes, len);
        return st;
    }
    train->backing = bytes, train->backing_len = len, train->backing_mapped = mapped;
    return PT_OK;
}

pt_status dataset_cache_parse(void *bytes, size_t len, const dataset_cache_key *key, bool verify, pt_dataset *train,
                              pt_dataset *eval)
{
    return adopt(bytes, len, key, verify, "received from rank 0", false, train, eval);
}

/* path mapped read-only into *base, *len; a file shorter than the header is not mapped (*base
 * NULL, *len its size). *missing: there is no such file. */
static pt_status map_file(const char *path, unsigned char **base, size_t *len, bool *missing)
{
    *missing = false, *base = NULL, *len = 0;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        *missing = errno == ENOENT;
        return ERR(PT_ERR_USER, "cannot open the dataset cache %s: %s", shown_text(path).s, strerror(errno));
    }
    struct stat info;
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
        close(fd);
        return ERR(PT_ERR_USER, "the dataset cache %s is not a regular file", shown_text(path).s);
    }
    *len = (size_t)info.st_size;
    void *p = *len >= sizeof(cache_header) ? mmap(NULL, *len, PROT_READ, MAP_SHARED, fd, 0) : NULL;
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) return ERR(PT_ERR_USER, "cannot map the dataset cache %s: %s",
                                    shown_text(path).s, strerror(err));
    *base = p;
    return PT_OK;
}

dataset_cache_state dataset_cache_check(const char *path, const dataset_cache_key *key, bool verify, strbuf *why)
{
    unsigned char *base;
    size_t len;
    bool missing;
    if (map_file(path, &base, &len, &missing) != PT_OK) {
        if (!missing && why) sb_printf(why, "%s", err_message());
        err_clear();
        return missing ? CACHE_MISSING : CACHE_DAMAGED;
    }
    dataset_cache_state s = check_bytes(base, len, key, verify, why);
    if (base) munmap(base, len);
    return s;
}

pt_status dataset_cache_open(const char *path, const dataset_cache_key *key, bool verify, pt_dataset *train,
                             pt_dataset *eval)
{
    unsigned char *base;
    size_t len;
    bool missing;
    TRY(map_file(path, &base, &len, &missing));
    return adopt(base, len, key, verify, path, true, train, eval);
}
