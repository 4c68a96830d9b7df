/* model_fixture.c — see model_fixture.h. Failures go through cmocka's assertions. */
#include "model_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

const char *srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s ? s : "..";
}

pt_backend *cpu(void)
{
    pt_backend *be = NULL;
    pt_backend_options opts = {.device = "cpu"};
    assert_int_equal(backend_open(&opts, &be), PT_OK);
    return be;
}

int32_t *read_ids(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int32_t *ids = malloc(sizeof(int32_t) * 4096);
    assert_non_null(ids);
    *n = 0;
    while (*n < 4096 && fscanf(f, "%d", &ids[*n]) == 1) (*n)++;
    fclose(f);
    return ids;
}

float *read_f32(const char *path, size_t count)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    float *v = malloc(sizeof(float) * count);
    assert_non_null(v);
    assert_int_equal(fread(v, sizeof(float), count, f), count);
    fclose(f);
    return v;
}

double max_rel_err(const float *a, const float *b, size_t n)
{
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return diff / scale;
}
