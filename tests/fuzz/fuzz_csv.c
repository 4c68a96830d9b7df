/* fuzz-sources: src/data/csv.c src/data/row_list.c src/data/stats.c src/core/util.c src/core/error.c src/core/shown.c */
/* fuzz_csv.c — libFuzzer target for the CSV/TSV reader (src/data/csv.c): byte 0 picks the
 * separator (bit 0: tab, else comma), the rest is the file's text with each invalid UTF-8 byte
 * made FORMAT_BAD_UTF8 as reader.c does (rows_string). Invariants: no crash, leak, hang or
 * sanitizer report; a failure is a user error naming the file; every record counted read is
 * a row (a JSON object with the header's columns) or a bad row. Seed corpus:
 * tests/fuzz/corpus/csv/. Built and run by tests/fuzz/run-fuzz.sh. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#define FUZZ_NAME "fuzz_csv"
#include "support.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    json_t *text = rows_string((const char *)data + 1, size - 1);
    CHECK(text != NULL);
    data_rows rows = {0};
    pt_dataset_stats st = {0};
    pt_status rc = csv_read(json_string_value(text), json_string_length(text), data[0] & 1 ? '\t' : ',', "fuzz.csv", 0,
                            1, &rows, &st);
    if (rc == PT_OK) {
        CHECK(st.read == (long)rows.n + st.bad);
        for (size_t i = 0; i < rows.n; i++) CHECK(json_is_object(rows.v[i].obj) && rows.v[i].line >= 1);
    } else {
        CHECK(rc == PT_ERR_USER && strstr(err_message(), "fuzz.csv") != NULL);
    }
    rows_free(&rows);
    stats_free(&st);
    json_decref(text);
    return 0;
}
