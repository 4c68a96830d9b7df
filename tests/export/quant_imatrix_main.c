/* quant_imatrix_main.c — ptrain's quantizer with an importance matrix, from the command line, for
 * test_imatrix.sh to hold against ggml's own (imatrix_check.py rows):
 *   quant_imatrix_main TYPE ROWS COLS X.f32 QW.f32|- OUT
 * quantizes ROWS rows of COLS float32 values from X.f32 to TYPE (q4_0, q4_k, ...) with the COLS
 * weights of QW.f32 (- for none) through quant_quantize_row_imatrix, and writes the blocks to OUT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/error.h"
#include "ptrain/quant.h"

static float *read_floats(const char *path, size_t n)
{
    FILE *f = fopen(path, "rb");
    float *v = malloc(sizeof(float) * n);
    size_t got = f && v ? fread(v, sizeof(float), n, f) : 0;
    if (f) fclose(f);
    if (got != n) {
        fprintf(stderr, "%s: cannot read %zu float32 values\n", path, n);
        free(v);
        return NULL;
    }
    return v;
}

static pt_dtype dtype_named(const char *name)
{
    for (int t = 0; t < PT_DTYPE_COUNT; t++)
        if (!strcmp(dtype_name((pt_dtype)t), name)) return (pt_dtype)t;
    return PT_DTYPE_COUNT;
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: quant_imatrix_main TYPE ROWS COLS X.f32 QW.f32|- OUT\n");
        return 2;
    }
    pt_dtype t = dtype_named(argv[1]);
    long rows = atol(argv[2]), cols = atol(argv[3]);
    size_t row_bytes = dtype_size_bytes(t, cols);
    if (t == PT_DTYPE_COUNT || rows < 1 || cols < 1 || row_bytes == 0) {
        fprintf(stderr, "bad type or shape: %s %s %s\n", argv[1], argv[2], argv[3]);
        return 2;
    }
    float *x = read_floats(argv[4], (size_t)(rows * cols)), *qw = strcmp(argv[5], "-") ? read_floats(argv[5], (size_t)cols) : NULL;
    unsigned char *out = malloc(row_bytes * (size_t)rows);
    int rc = x && out && (qw || !strcmp(argv[5], "-")) ? 0 : 1;
    for (long r = 0; rc == 0 && r < rows; r++)
        if (quant_quantize_row_imatrix(t, x + r * cols, out + (size_t)r * row_bytes, cols, qw) != PT_OK) {
            fprintf(stderr, "%s\n", err_message());
            rc = 1;
        }
    FILE *f = rc == 0 ? fopen(argv[6], "wb") : NULL;
    if (rc == 0 && (!f || fwrite(out, row_bytes, (size_t)rows, f) != (size_t)rows)) rc = 1;
    if (f && fclose(f) != 0) rc = 1;
    free(x), free(qw), free(out);
    return rc;
}
