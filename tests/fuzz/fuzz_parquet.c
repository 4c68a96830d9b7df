/* fuzz-sources: src/data/parquet.c src/data/parquet_meta.c src/data/parquet_types.c src/data/row_list.c src/data/stats.c src/core/util.c src/core/error.c src/core/shown.c */
/* fuzz_parquet.c — libFuzzer target for the Parquet reader (src/data/parquet.c, parquet_meta.c):
 * the input is the bytes of a Parquet file, read as reader.c reads a mapped one. Invariants: no
 * crash, leak, hang or sanitizer report, bounded memory whatever the footer, page sizes and level
 * streams say; a failure is a user error whose message names the file; a success gives one JSON
 * object per row counted read, whether the rows stay in the list or (an input of odd length) go to a
 * sink batch by batch, as dataset.c takes them. Seed corpus: tests/fuzz/corpus/parquet/ (small files of
 * tests/reference/make_parquet_rows.py). Built and run by tests/fuzz/run-fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#define FUZZ_NAME "fuzz_parquet"
#include "support.h"

/* A sink as dataset.c's: each batch's rows checked, counted and freed. */
static pt_status take(void *arg, data_rows *rows)
{
    long *seen = arg;
    CHECK(rows->n > 0);
    for (size_t i = 0; i < rows->n; i++) {
        CHECK(json_is_object(rows->v[i].obj));
        json_decref(rows->v[i].obj);
    }
    *seen += (long)rows->n;
    rows->n = 0;
    return PT_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char *copy = malloc(size ? size : 1); /* an exact allocation, so a read past the end is caught */
    CHECK(copy != NULL);
    if (size) memcpy(copy, data, size);
    data_rows rows = {0};
    pt_dataset_stats st = {0};
    long seen = 0;
    rows_sink sink = {take, &seen};
    pt_status rc = parquet_read(copy, size, "fuzz.parquet", 0, &rows, &st, size % 2 ? &sink : NULL);
    if (rc == PT_OK) {
        CHECK(st.read == (long)rows.n + seen);
        for (size_t i = 0; i < rows.n; i++) CHECK(json_is_object(rows.v[i].obj));
    } else {
        CHECK(rc == PT_ERR_USER);
        CHECK(strstr(err_message(), "fuzz.parquet") != NULL);
    }
    rows_free(&rows);
    stats_free(&st);
    free(copy);
    return 0;
}
