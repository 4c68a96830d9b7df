/* fuzz-sources: src/io/checkpoint.c src/io/checkpoint_read.c src/config/settings.c src/io/h5util.c src/io/filewrite.c src/io/safefs.c src/core/log.c src/core/util.c src/core/error.c src/core/shown.c */
/* fuzz_checkpoint.c — libFuzzer target for reading checkpoint files (src/io/checkpoint*.c): the
 * input is written to a file named checkpoint-7.h5 and goes through ckpt_verify, ckpt_read_meta,
 * ckpt_inspect (stdout to /dev/null) and, when the metadata read, ckpt_read with a layout of the
 * file's own /adapter tensors. Invariants: no crash; a failure is a user error (or out of memory)
 * whose message starts with the file's name; every reader reports the same first failure;
 * a success holds NUL-terminated strings, config choices within their enums and the arrays its
 * layout asks for; no HDF5 object is left open.
 *
 * Two ways in. Raw (the default, what CI runs): the bytes as they are, so every mutation of a
 * seed is stopped by the completion mark (size and CRC-32 of the body) before libhdf5 parses
 * anything: the design this target checks. FUZZ_CKPT_FIXUP=1: an input that starts with a mark
 * gets its size and CRC-32 rewritten to match the mutated body, so the mutations reach libhdf5
 * (H5Fopen and every read) through ptrain's readers. CI stays on the raw path because that mode
 * stops within a minute on bugs inside Debian's libhdf5 1.10.8 itself, none of them ptrain's: heap
 * overflows and SEGVs decoding a crafted attribute message (H5Aexists -> H5O__msg_iterate_real ->
 * memcpy/strdup), a heap overflow reading a crafted chunk (H5Dread -> H5VM_memcpyvv), allocations
 * of gigabytes to exabytes from crafted sizes (H5C_protect), leaks on H5Dopen2's error paths, and
 * out-of-bounds reads converting an integer type whose offset + precision exceed its size
 * (H5T__conv_i_i), which make two reads of one attribute differ (this target's "same failure"
 * check catches it). A file that passes the CRC is trusted to be one ptrain wrote; HDF5 does
 * not claim to survive malicious files. Run the fixed-up mode by hand, with -fork=N
 * -ignore_crashes=1 -detect_leaks=0, to check ptrain's own handling of what HDF5 returns (it
 * found the unchecked eval step conversion fixed in checkpoint_read.c).
 * Seed corpus: tests/fuzz/corpus/checkpoint/ (tests/fuzz/make_corpus_checkpoint.sh). Built and
 * run by tests/fuzz/run-fuzz.sh. */
#include <hdf5.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "io/checkpoint_internal.h"
#include "ptrain/checkpoint.h"
#include "ptrain/error.h"

#define FUZZ_NAME "fuzz_checkpoint"
#include "support.h"

static char dir[64], path[128];
static bool fixup;

static void remove_dir(void)
{
    unlink(path);
    rmdir(dir);
}

static void init_once(void)
{
    if (path[0]) return;
    snprintf(dir, sizeof dir, "/tmp/fuzz_checkpoint.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    atexit(remove_dir);
    snprintf(path, sizeof path, "%s/checkpoint-7.h5", dir);
    CHECK(freopen("/dev/null", "w", stdout) != NULL); /* ckpt_inspect prints */
    const char *v = getenv("FUZZ_CKPT_FIXUP");
    fixup = v && *v == '1';
}

/* Give a mutated input a mark that matches it: its size, the CRC-32 of its body, its step. */
static bool fix_mark(uint8_t *buf, size_t size)
{
    char mark[CKPT_USERBLOCK + 1] = {0};
    long long step = 0;
    memcpy(mark, buf, CKPT_USERBLOCK);
    const char *at = strstr(mark, "\nstep ");
    if (!at || sscanf(at, "\nstep %lld", &step) != 1) return false;
    uLong crc = crc32(crc32(0L, Z_NULL, 0), buf + CKPT_USERBLOCK, (uInt)(size - CKPT_USERBLOCK));
    memset(mark, 0, sizeof mark);
    snprintf(mark, sizeof mark, CKPT_MARK_FORMAT, CKPT_VERSION, (long long)size, (unsigned long)crc, step);
    memcpy(buf, mark, CKPT_USERBLOCK);
    return true;
}

static void write_input(const uint8_t *data, size_t size)
{
    unlink(path); /* a new inode each time: HDF5 must never see an old file's state */
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    CHECK(fwrite(data, 1, size, f) == size);
    CHECK(fclose(f) == 0);
}

/* A failure: the user's error (or out of memory) naming the file; *msg gets a copy. */
static void expect_named_failure(pt_status st, char *msg, size_t len)
{
    size_t n = strlen(path);
    CHECK(st == PT_ERR_USER || st == PT_ERR_NOMEM);
    CHECK(st == PT_ERR_NOMEM || (strncmp(err_message(), path, n) == 0 && err_message()[n] == ':'));
    snprintf(msg, len, "%s", err_message());
    err_clear();
}

/* What a successful read hands over is well formed. */
static void expect_sound(const ckpt_state *s)
{
    CHECK(s->complete && s->format_version == CKPT_VERSION && s->config_text != NULL);
    CHECK(s->n_evals >= 0 && (s->n_evals == 0 || s->evals != NULL));
    for (int i = 0; i < ckpt_nfields; i++) {
        const char *p = (const char *)s + ckpt_fields[i].offset;
        if (ckpt_fields[i].type == CF_STR || ckpt_fields[i].type == CF_OSTR) CHECK(memchr(p, '\0', ckpt_fields[i].size) != NULL);
        if (ckpt_fields[i].type == CF_ENUM) { /* a name read back is one of the enum's */
            int v;
            memcpy(&v, p, sizeof v);
            CHECK(v >= 0 && v < ckpt_enum_count(&ckpt_fields[i]));
        }
    }
}

typedef struct {
    ckpt_layout lay;
    hsize_t limit;
} layout_walk;

/* H5Literate callback: one 2-d dataset of /adapter as a layout entry. */
static herr_t add_entry(hid_t group, const char *name, const H5L_info_t *info, void *arg)
{
    layout_walk *w = arg;
    hid_t set = info->type == H5L_TYPE_HARD ? H5Dopen2(group, name, H5P_DEFAULT) : -1;
    hid_t space = set < 0 ? -1 : H5Dget_space(set);
    hsize_t dims[2] = {0, 0};
    bool ok = space >= 0 && H5Sget_simple_extent_ndims(space) == 2 && H5Sget_simple_extent_dims(space, dims, NULL) == 2;
    if (space >= 0) H5Sclose(space);
    if (set >= 0) H5Dclose(set);
    if (!ok || w->lay.n == 256 || strlen(name) >= sizeof w->lay.e[0].name) return 1; /* stop: not a layout */
    hsize_t room = w->limit - (hsize_t)w->lay.total; /* floats the file could still hold */
    if (dims[1] && dims[0] > room / dims[1]) return 1;
    ckpt_entry *e = &w->lay.e[w->lay.n++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->rows = (int64_t)dims[0], e->cols = (int64_t)dims[1], e->offset = w->lay.total;
    w->lay.total += e->rows * e->cols;
    return 0;
}

/* The layout of the file's /adapter tensors (what a resume of the same run would ask for). */
static bool layout_of_file(ckpt_layout *lay)
{
    layout_walk w = {{calloc(256, sizeof(ckpt_entry)), 0, 0}, 0};
    CHECK(w.lay.e != NULL);
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    hsize_t size = 0;
    if (file >= 0 && H5Fget_filesize(file, &size) >= 0) w.limit = size / sizeof(float);
    hid_t g = file >= 0 && H5Lexists(file, "/adapter", H5P_DEFAULT) > 0 ? H5Gopen2(file, "/adapter", H5P_DEFAULT) : -1;
    hsize_t idx = 0;
    herr_t rc = g < 0 ? -1 : H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, &idx, add_entry, &w);
    if (g >= 0) H5Gclose(g);
    if (file >= 0) H5Fclose(file);
    *lay = w.lay;
    return rc == 0;
}

static void read_with_layout(void)
{
    ckpt_layout lay;
    ckpt_state s;
    char msg[4096];
    if (layout_of_file(&lay)) {
        pt_status st = ckpt_read(path, &lay, &s);
        if (st == PT_OK) {
            expect_sound(&s);
            CHECK(s.n_params == lay.total && s.params != NULL);
            CHECK(s.model_only ? !s.exp_avg && !s.exp_avg_sq : s.exp_avg && s.exp_avg_sq);
            ckpt_state_free(&s);
        } else {
            expect_named_failure(st, msg, sizeof msg);
            CHECK(!s.params && !s.exp_avg && !s.exp_avg_sq && !s.config_text && !s.evals);
        }
    }
    ckpt_layout_free(&lay);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    init_once();
    uint8_t *copy = malloc(size + 1);
    CHECK(copy != NULL);
    if (size) memcpy(copy, data, size);
    bool fixed = fixup && size >= CKPT_USERBLOCK && !memcmp(copy, "PTRAIN-CHECKPOINT", 17) && fix_mark(copy, size);
    write_input(copy, size);
    free(copy);
    char verify_msg[4096] = "", meta_msg[4096] = "", inspect_msg[4096] = "";
    pt_status verified = ckpt_verify(path);
    CHECK(!fixed || verified == PT_OK);
    if (verified != PT_OK) expect_named_failure(verified, verify_msg, sizeof verify_msg);
    ckpt_state s;
    pt_status meta = ckpt_read_meta(path, &s);
    if (meta == PT_OK) expect_sound(&s), ckpt_state_free(&s);
    else expect_named_failure(meta, meta_msg, sizeof meta_msg);
    CHECK(verified == PT_OK || (meta == verified && !strcmp(meta_msg, verify_msg)));
    pt_status inspected = ckpt_inspect(path);
    if (inspected != PT_OK) expect_named_failure(inspected, inspect_msg, sizeof inspect_msg);
    CHECK(meta == PT_OK || (inspected == meta && !strcmp(inspect_msg, meta_msg)));
    if (meta == PT_OK) read_with_layout();
    CHECK(H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL) == 0);
    return 0;
}
