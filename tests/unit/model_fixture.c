/* model_fixture.c — see model_fixture.h. Failures go through cmocka's assertions. */
#include "model_fixture.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

const char *srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s ? s : "..";
}

pt_backend *cpu(void)
{
    pt_backend *be = NULL;
    pt_backend_options opts = {.device = DEVICE_CPU};
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

void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static FILE *captured;
static int saved_stderr = -1;

void capture_stderr_begin(void)
{
    fflush(stderr);
    captured = tmpfile();
    assert_non_null(captured);
    saved_stderr = dup(2);
    assert_true(saved_stderr >= 0 && dup2(fileno(captured), 2) >= 0);
}

char *capture_stderr_end(void)
{
    fflush(stderr);
    assert_true(dup2(saved_stderr, 2) >= 0);
    close(saved_stderr);
    long n = ftell(captured);
    char *text = calloc((size_t)(n > 0 ? n : 0) + 1, 1);
    assert_non_null(text);
    rewind(captured);
    if (n > 0) assert_int_equal(fread(text, 1, (size_t)n, captured), (size_t)n);
    fclose(captured);
    return text;
}

void expect_load_outcome(pt_status st, char *warned, const char *want, const char *warn, pt_model *m)
{
    if (want && (st != PT_ERR_USER || !strstr(err_message(), want)))
        fail_msg("status %d, got: %s\nwant: %s", st, err_message(), want);
    if (!want && st != PT_OK) fail_msg("%s", err_message());
    if (!want && (warn ? !strstr(warned, warn) : strstr(warned, "all zeros") != NULL))
        fail_msg("warned: %s\nwant: %s", warned, warn ? warn : "no all-zero warning");
    if (!want) model_free(m);
    free(warned);
}
