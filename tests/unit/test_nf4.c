/* test_nf4.c — tests NF4 (src/backend/nf4.c) against bitsandbytes: ptrain's quantization of each golden
 * matrix gives bitsandbytes' packed nibbles, absmax codes, nested absmax and offset (the only
 * differences allowed are absmax codes that bitsandbytes' CPU lookup table rounds the other way,
 * each checked to be one); ptrain's dequantization of bitsandbytes' own bytes (nf4_from_bnb) is its
 * dequantized output bit for bit; a buffer's bytes (its alignment gaps too) depend on the weights
 * alone, not on what the memory held; any row range dequantizes to the matching slice; the quantize ->
 * dequantize error stays within the format's bound; bad shapes fail with a clear message; the
 * buffer is rows*cols*(1/2 + 1/64) bytes plus a little. Goldens: tests/data/nf4, made by
 * tests/reference/make_nf4_goldens.py; found under $PTRAIN_SRCDIR (default "..").  */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "ptrain/error.h"
#include "ptrain/nf4.h"

#define MAX_CASES 16

typedef struct {
    char name[64];
    int64_t rows, cols, nblocks, nnested;
    float offset;
    const float *input, *absmax_raw, *nested_absmax, *quant_map, *nested_map, *dequant;
    const uint8_t *packed, *absmax_code;
    uint8_t *blob;
} golden;

/* bitsandbytes' 8-bit blockwise quantizer on its own (quantize_blockwise, dynamic map). */
typedef struct {
    char name[64];
    int64_t n, blocksize, nabsmax;
    const float *input, *absmax, *map;
    const uint8_t *codes;
    uint8_t *blob;
} golden_bw8;

typedef struct {
    int n, nbw8;
    golden g[MAX_CASES];
    golden_bw8 bw8[MAX_CASES];
} goldens;

/* ---- golden files ---------------------------------------------------------------------------- */

static const char *data_dir(void)
{
    static char dir[1024];
    const char *src = getenv("PTRAIN_SRCDIR");
    snprintf(dir, sizeof dir, "%s/tests/data/nf4", src && *src ? src : "..");
    return dir;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = n > 0 ? malloc((size_t)n) : NULL;
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Take `n` bytes at *pos of a blob of `len`; NULL when it runs past the end. */
static const void *take(uint8_t *blob, size_t len, size_t *pos, size_t n)
{
    if (*pos > len || n > len - *pos) return NULL;
    const void *p = blob + *pos;
    *pos += n;
    return p;
}

static int parse_golden(golden *g, uint8_t *blob, size_t len)
{
    size_t pos = 8;
    int64_t dims[4];
    if (len < 8 + sizeof dims + 4 || memcmp(blob, "NF4G", 4) != 0) return -1;
    memcpy(dims, take(blob, len, &pos, sizeof dims), sizeof dims);
    memcpy(&g->offset, take(blob, len, &pos, 4), 4);
    g->rows = dims[0], g->cols = dims[1], g->nblocks = dims[2], g->nnested = dims[3];
    size_t n = (size_t)(g->rows * g->cols), nb = (size_t)g->nblocks;
    g->input = take(blob, len, &pos, 4 * n);
    g->packed = take(blob, len, &pos, n / 2);
    g->absmax_raw = take(blob, len, &pos, 4 * nb);
    g->absmax_code = take(blob, len, &pos, nb);
    g->nested_absmax = take(blob, len, &pos, 4 * (size_t)g->nnested);
    g->quant_map = take(blob, len, &pos, 4 * 16);
    g->nested_map = take(blob, len, &pos, 4 * 256);
    g->dequant = take(blob, len, &pos, 4 * n);
    g->blob = blob;
    return g->dequant && pos == len ? 0 : -1;
}

static int parse_bw8(golden_bw8 *g, uint8_t *blob, size_t len)
{
    size_t pos = 8;
    int64_t dims[3];
    if (len < 8 + sizeof dims || memcmp(blob, "BW8G", 4) != 0) return -1;
    memcpy(dims, take(blob, len, &pos, sizeof dims), sizeof dims);
    g->n = dims[0], g->blocksize = dims[1], g->nabsmax = dims[2];
    if (g->n <= 0 || g->blocksize <= 0) return -1;
    if (g->nabsmax != (g->n + g->blocksize - 1) / g->blocksize) return -1;
    g->input = take(blob, len, &pos, 4 * (size_t)g->n);
    g->codes = take(blob, len, &pos, (size_t)g->n);
    g->absmax = take(blob, len, &pos, 4 * (size_t)g->nabsmax);
    g->map = take(blob, len, &pos, 4 * 256);
    g->blob = blob;
    return g->map && pos == len ? 0 : -1;
}

/* Copy a golden's float arrays to aligned memory: the blob packs them at odd offsets. */
static float *aligned_copy(const float *src, size_t n)
{
    float *dst = malloc(n * sizeof(float));
    assert_non_null(dst);
    memcpy(dst, src, n * sizeof(float));
    return dst;
}

/* Load one manifest line ("nf4 name rows cols" or "bw8 name n blocksize"); -1 on a bad file. */
static int load_case(goldens *G, const char *line)
{
    char kind[8], name[64], path[1200];
    long long a, b;
    size_t len;
    if (line[0] == '#' || sscanf(line, "%7s %63s %lld %lld", kind, name, &a, &b) != 4) return 0;
    int nf4 = strcmp(kind, "nf4") == 0;
    if ((nf4 && G->n == MAX_CASES) || (!nf4 && G->nbw8 == MAX_CASES)) return 0;
    snprintf(path, sizeof path, "%s/%s.bin", data_dir(), name);
    uint8_t *blob = read_file(path, &len);
    int ok = 0;
    if (blob && nf4) {
        golden *g = &G->g[G->n];
        ok = parse_golden(g, blob, len) == 0 && g->rows == a && g->cols == b;
        snprintf(g->name, sizeof g->name, "%s", name);
        G->n += ok;
    } else if (blob && strcmp(kind, "bw8") == 0) {
        golden_bw8 *g = &G->bw8[G->nbw8];
        ok = parse_bw8(g, blob, len) == 0 && g->n == a && g->blocksize == b;
        snprintf(g->name, sizeof g->name, "%s", name);
        G->nbw8 += ok;
    }
    if (ok) return 0;
    fprintf(stderr, "bad golden %s\n", path);
    free(blob);
    return -1;
}

static int load_goldens(void **state)
{
    static goldens G;
    char path[1200], line[256];
    int rc = 0;
    snprintf(path, sizeof path, "%s/manifest.txt", data_dir());
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "cannot open %s (set PTRAIN_SRCDIR)\n", path);
        return -1;
    }
    while (rc == 0 && fgets(line, sizeof line, f)) rc = load_case(&G, line);
    fclose(f);
    *state = &G;
    return rc == 0 && G.n > 0 && G.nbw8 > 0 ? 0 : -1;
}

static int free_goldens(void **state)
{
    goldens *G = *state;
    for (int i = 0; G && i < G->n; i++) free(G->g[i].blob);
    for (int i = 0; G && i < G->nbw8; i++) free(G->bw8[i].blob);
    return 0;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static uint32_t bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static int64_t ulp_diff(float a, float b)
{
    int64_t x = (int32_t)bits(a), y = (int32_t)bits(b);
    if (x < 0) x = INT32_MIN - x;
    if (y < 0) y = INT32_MIN - y;
    return x > y ? x - y : y - x;
}

static int64_t count_float_mismatch(const float *a, const float *b, size_t n)
{
    int64_t bad = 0;
    for (size_t i = 0; i < n; i++) bad += bits(a[i]) != bits(b[i]);
    return bad;
}

/* bitsandbytes 0.50.2's CPU 8-bit quantizer (csrc/cpu_ops.cpp): the normalized value is rounded
 * to a 65536-point grid over [-1, 1], and the grid point's nearest code is taken. */
static unsigned bnb_cpu_lut_code(float v, const float map[256])
{
    v = v < -1.0f ? -1.0f : v > 1.0f ? 1.0f : v;
    uint16_t idx = (uint16_t)((v + 1.0f) * 0.5f * 65535.0f + 0.5f);
    float grid = -1.0f + (2.0f * (float)idx) / 65535.0f;
    unsigned c = 0;
    while (c < 255 && 0.5f * (map[c] + map[c + 1]) < grid) c++;
    return c;
}

static uint8_t *quantize_new(const float *w, int64_t rows, int64_t cols, nf4_view *v)
{
    size_t nb = nf4_bytes(rows, cols);
    assert_true(nb > 0);
    uint8_t *buf = malloc(nb);
    assert_non_null(buf);
    float *wa = aligned_copy(w, (size_t)(rows * cols));
    assert_int_equal(nf4_quantize(wa, rows, cols, buf), PT_OK);
    free(wa);
    assert_int_equal(nf4_view_of(buf, v), PT_OK);
    return buf;
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_maps_match_bnb(void **state)
{
    goldens *G = *state;
    float q[16], m[256];
    nf4_quant_map(q);
    nf4_dynamic_map(m);
    for (int c = 0; c < G->n; c++) {
        float gq[16], gm[256];
        memcpy(gq, G->g[c].quant_map, sizeof gq);
        memcpy(gm, G->g[c].nested_map, sizeof gm);
        assert_int_equal(count_float_mismatch(q, gq, 16), 0);
        assert_int_equal(count_float_mismatch(m, gm, 256), 0);
    }
    for (int i = 0; i < 255; i++) assert_true(m[i] < m[i + 1]);
    assert_true(m[255] == 1.0f && m[127] == 0.0f);
}

typedef struct {
    int64_t blocks, code_diff, by_lut, by_offset, offset_off;
} quant_stats;

/* Why an absmax code of ptrain's differs from bitsandbytes': its CPU lookup table rounded the
 * normalized value v to the other side of a midpoint (1), or, when the offsets differ by an ulp,
 * ptrain's own v sits within 1e-6 of the midpoint between the two codes (2); else 0. */
static int explain_code(const golden *g, const nf4_view *v, int64_t b, const float gm[256])
{
    float raw, nabs;
    int pc = v->absmax_code[b], bc = g->absmax_code[b];
    memcpy(&raw, &g->absmax_raw[b], 4);
    memcpy(&nabs, &g->nested_absmax[b / 256], 4);
    if (abs(pc - bc) != 1) return 0;
    if (bnb_cpu_lut_code((raw - g->offset) * (1.0f / nabs), gm) == (unsigned)bc) return 1;
    float mine = (raw - v->offset) * (1.0f / v->nested_absmax[b / 256]);
    float mid = 0.5f * (gm[pc < bc ? pc : bc] + gm[pc < bc ? bc : pc]);
    return v->offset != g->offset && fabsf(mine - mid) <= 1e-6f ? 2 : 0;
}

/* Nibbles, offset, nested absmax and absmax codes of ptrain's quantization against bitsandbytes'. */
static void compare_quantization(const golden *g, quant_stats *s)
{
    nf4_view v;
    uint8_t *buf = quantize_new(g->input, g->rows, g->cols, &v);
    int64_t n = g->rows * g->cols, nib_bad = 0, nested_bad = 0, diff = 0;
    for (int64_t i = 0; i < n / 2; i++) nib_bad += v.packed[i] != g->packed[i];
    int64_t off_ulp = ulp_diff(v.offset, g->offset);
    float gm[256];
    memcpy(gm, g->nested_map, sizeof gm);
    for (int64_t b = 0; b < g->nblocks; b++) {
        if (v.absmax_code[b] == g->absmax_code[b]) continue;
        int why = explain_code(g, &v, b, gm);
        diff++;
        s->by_lut += why == 1;
        s->by_offset += why == 2;
    }
    for (int64_t k = 0; k < g->nnested; k++) {
        float gn;
        memcpy(&gn, &g->nested_absmax[k], 4);
        /* exact with the same offset; an ulp of offset moves it by about that much */
        float tol = 2e-7f * fabsf(g->offset) + 1e-7f * gn;
        nested_bad += off_ulp == 0 ? bits(v.nested_absmax[k]) != bits(gn) : fabsf(v.nested_absmax[k] - gn) > tol;
    }
    printf("# %-20s nibbles %lld/%lld differ, offset %lld ulp, absmax codes %lld/%lld differ, "
           "nested absmax %lld/%lld differ\n",
           g->name, (long long)nib_bad, (long long)(n / 2), (long long)off_ulp, (long long)diff,
           (long long)g->nblocks, (long long)nested_bad, (long long)g->nnested);
    assert_int_equal(nib_bad, 0);
    assert_true(off_ulp <= 1);
    assert_int_equal(nested_bad, 0);
    s->blocks += g->nblocks, s->code_diff += diff, s->offset_off += off_ulp != 0;
    free(buf);
}

static void test_quantize_matches_bnb(void **state)
{
    goldens *G = *state;
    quant_stats s = {0};
    for (int c = 0; c < G->n; c++) compare_quantization(&G->g[c], &s);
    printf("# absmax codes: %lld of %lld differ from bitsandbytes' CPU: %lld by its lookup table's "
           "rounding, %lld by the offset's last bit (offset 1 ulp off in %lld of %d cases)\n",
           (long long)s.code_diff, (long long)s.blocks, (long long)s.by_lut, (long long)s.by_offset,
           (long long)s.offset_off, G->n);
    assert_int_equal(s.code_diff, s.by_lut + s.by_offset);
    assert_true(s.code_diff * 100 <= s.blocks); /* at most 1% */
}

/* The 8-bit quantizer alone, fed bitsandbytes' own absmax - offset: nested absmax bit-exact. */
static void test_blockwise8_matches_bnb(void **state)
{
    goldens *G = *state;
    for (int c = 0; c < G->n; c++) {
        const golden *g = &G->g[c];
        float *x = aligned_copy(g->absmax_raw, (size_t)g->nblocks), gm[256];
        float *nested = malloc((size_t)g->nnested * sizeof(float));
        uint8_t *codes = malloc((size_t)g->nblocks);
        memcpy(gm, g->nested_map, sizeof gm);
        for (int64_t b = 0; b < g->nblocks; b++) x[b] -= g->offset;
        nf4_quantize_blockwise8(x, g->nblocks, 256, gm, codes, nested);
        for (int64_t k = 0; k < g->nnested; k++) {
            float gn;
            memcpy(&gn, &g->nested_absmax[k], 4);
            assert_int_equal(bits(nested[k]), bits(gn));
        }
        for (int64_t b = 0; b < g->nblocks; b++) {
            if (codes[b] == g->absmax_code[b]) continue;
            unsigned lut = bnb_cpu_lut_code(x[b] * (1.0f / nested[b / 256]), gm);
            assert_int_equal(lut, g->absmax_code[b]);
            assert_int_equal(abs((int)codes[b] - (int)lut), 1);
        }
        free(x);
        free(nested);
        free(codes);
    }
}

/* The 8-bit quantizer on bitsandbytes' own 8192-value golden: absmax bit-exact; codes equal except
 * where its CPU lookup table rounds the other way (each checked, one code apart). */
static void test_blockwise8_golden(void **state)
{
    goldens *G = *state;
    for (int c = 0; c < G->nbw8; c++) {
        const golden_bw8 *g = &G->bw8[c];
        float *x = aligned_copy(g->input, (size_t)g->n), *am = malloc((size_t)g->nabsmax * 4), map[256];
        uint8_t *codes = malloc((size_t)g->n);
        int64_t diff = 0, by_lut = 0;
        memcpy(map, g->map, sizeof map);
        nf4_quantize_blockwise8(x, g->n, g->blocksize, map, codes, am);
        for (int64_t k = 0; k < g->nabsmax; k++) {
            float want;
            memcpy(&want, &g->absmax[k], 4);
            assert_int_equal(bits(am[k]), bits(want));
        }
        for (int64_t i = 0; i < g->n; i++) {
            if (codes[i] == g->codes[i]) continue;
            unsigned lut = bnb_cpu_lut_code(x[i] * (1.0f / am[i / g->blocksize]), map);
            diff++;
            by_lut += lut == g->codes[i] && abs((int)codes[i] - (int)g->codes[i]) == 1;
        }
        printf("# %-20s codes %lld/%lld differ from bitsandbytes' CPU, %lld of them by its lookup "
               "table's rounding\n",
               g->name, (long long)diff, (long long)g->n, (long long)by_lut);
        assert_int_equal(diff, by_lut);
        assert_true(diff * 100 <= g->n);
        free(x), free(am), free(codes);
    }
}

/* Values exactly on a midpoint between two NF4 codes go to the lower code, as in bitsandbytes. */
static void test_ties_go_low(void **state)
{
    goldens *G = *state;
    for (int c = 0; c < G->n; c++) {
        const golden *g = &G->g[c];
        if (strcmp(g->name, "ties_1x128") != 0) continue;
        nf4_view v;
        uint8_t *buf = quantize_new(g->input, g->rows, g->cols, &v);
        for (int k = 1; k < 16; k++) {
            unsigned nib = k % 2 ? v.packed[k / 2] & 15u : v.packed[k / 2] >> 4;
            assert_int_equal(nib, k - 1); /* element k is the midpoint between codes k-1 and k */
        }
        free(buf);
        return;
    }
    fail_msg("no ties_1x128 golden");
}

static void test_dequant_bnb_bytes_bit_exact(void **state)
{
    goldens *G = *state;
    for (int c = 0; c < G->n; c++) {
        const golden *g = &G->g[c];
        size_t n = (size_t)(g->rows * g->cols);
        float *nested = aligned_copy(g->nested_absmax, (size_t)g->nnested);
        float *nmap = aligned_copy(g->nested_map, 256), *qmap = aligned_copy(g->quant_map, 16);
        float *want = aligned_copy(g->dequant, n), *out = malloc(n * sizeof(float));
        uint8_t *buf = malloc(nf4_bytes(g->rows, g->cols));
        assert_int_equal(nf4_from_bnb(g->rows, g->cols, g->packed, g->absmax_code, nested, nmap,
                                      g->offset, qmap, buf),
                         PT_OK);
        assert_int_equal(nf4_dequantize_rows(buf, g->rows, g->cols, 0, g->rows, out), PT_OK);
        int64_t bad = count_float_mismatch(out, want, n);
        printf("# %-20s dequantized bnb bytes: %lld/%zu values differ from bitsandbytes\n", g->name,
               (long long)bad, n);
        assert_int_equal(bad, 0);
        free(nested), free(nmap), free(qmap), free(want), free(out), free(buf);
    }
}

static void fill_randn(float *w, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i += 2) {
        double u1 = (rand() + 1.0) / ((double)RAND_MAX + 2.0), u2 = rand() / ((double)RAND_MAX + 1.0);
        double r = sqrt(-2.0 * log(u1));
        w[i] = (float)(r * cos(6.283185307179586 * u2));
        if (i + 1 < n) w[i + 1] = (float)(r * sin(6.283185307179586 * u2));
    }
}

static void test_row_ranges_match_full(void **state)
{
    (void)state;
    const int64_t rows = 37, cols = 448; /* 259 blocks: crosses a nested block of 256 */
    float *w = malloc(rows * cols * sizeof(float)), *full = malloc(rows * cols * sizeof(float));
    float *part = malloc(rows * cols * sizeof(float));
    fill_randn(w, (size_t)(rows * cols), 7);
    nf4_view v;
    uint8_t *buf = quantize_new(w, rows, cols, &v);
    assert_int_equal(nf4_dequantize_rows(buf, rows, cols, 0, rows, full), PT_OK);
    for (int64_t r0 = 0; r0 < rows; r0++)
        for (int64_t nr = 0; r0 + nr <= rows; nr += 1 + nr / 3) {
            assert_int_equal(nf4_dequantize_rows(buf, rows, cols, r0, nr, part), PT_OK);
            assert_int_equal(count_float_mismatch(part, full + r0 * cols, (size_t)(nr * cols)), 0);
        }
    free(w), free(full), free(part), free(buf);
}

/* |w - deq| <= 0.1520 * absmax (half the widest NF4 gap, -1 .. -0.696) + the absmax error of the
 * double quantization, <= half the dynamic map's widest gap * nested absmax, + rounding. */
static void test_roundtrip_error_bound(void **state)
{
    (void)state;
    const int64_t rows = 64, cols = 1024;
    size_t n = (size_t)(rows * cols);
    float *w = malloc(n * sizeof(float)), *out = malloc(n * sizeof(float));
    fill_randn(w, n, 11);
    for (size_t i = 0; i < n; i++) w[i] *= 0.02f * (1.0f + (float)(i / cols) / 8.0f);
    nf4_view v;
    uint8_t *buf = quantize_new(w, rows, cols, &v);
    assert_int_equal(nf4_dequantize_rows(buf, rows, cols, 0, rows, out), PT_OK);
    double se = 0.0, sw = 0.0, worst = 0.0, half_gap = 0.0;
    for (int i = 0; i < 255; i++)
        half_gap = fmax(half_gap, 0.5 * (v.nested_map[i + 1] - v.nested_map[i]));
    for (int64_t b = 0; b < v.nblocks; b++) {
        float am = 0.0f;
        for (int i = 0; i < 64; i++) am = fmaxf(am, fabsf(w[b * 64 + i]));
        double bound = 0.1520 * am + half_gap * v.nested_absmax[b / 256] + 1e-6 * am;
        for (int i = 0; i < 64; i++) {
            double e = fabs((double)w[b * 64 + i] - out[b * 64 + i]);
            worst = fmax(worst, e / bound);
            se += e * e, sw += (double)w[b * 64 + i] * w[b * 64 + i];
        }
    }
    printf("# round trip: relative RMS error %.4f, worst error / bound %.3f (map half gap %.5f)\n",
           sqrt(se / sw), worst, half_gap);
    assert_true(worst <= 1.0);
    assert_true(sqrt(se / sw) < 0.12);
    free(w), free(out), free(buf);
}

static void test_bad_shapes(void **state)
{
    (void)state;
    float w[2 * 128] = {0};
    static uint8_t buf[4096] __attribute__((aligned(64)));
    assert_int_equal(nf4_bytes(2, 100), 0);
    assert_int_equal(nf4_bytes(0, 64), 0);
    assert_int_equal(nf4_quantize(w, 2, 100, buf), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "multiple of 64"));
    assert_non_null(strstr(err_message(), "[2, 100]"));
    assert_int_equal(nf4_quantize(w, 0, 64, buf), PT_ERR_USER);
    assert_int_equal(nf4_check_shape(3, 96), PT_ERR_USER);
    assert_int_equal(nf4_from_bnb(1, 32, buf, buf, w, w, 0.0f, w, buf), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "multiple of 64"));
    assert_int_equal(nf4_quantize(w, 2, 128, buf), PT_OK);
    assert_int_equal(nf4_dequantize_rows(buf, 2, 128, 1, 2, w), PT_ERR_INTERNAL);
    assert_int_equal(nf4_dequantize_rows(buf, 2, 128, -1, 1, w), PT_ERR_INTERNAL);
    assert_int_equal(nf4_dequantize_rows(buf, 1, 256, 0, 1, w), PT_ERR_INTERNAL);
    assert_int_equal(nf4_dequantize_rows(w, 2, 128, 0, 1, w), PT_ERR_INTERNAL); /* not NF4 */
    w[70] = NAN;
    assert_int_equal(nf4_quantize(w, 2, 128, buf), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "not finite"));
    w[70] = INFINITY;
    assert_int_equal(nf4_quantize(w, 2, 128, buf), PT_ERR_USER);
}

/* The blocks run on OpenMP's threads: one thread or four write the same bytes, and the first row
 * with a value that is not finite is the one named, whichever thread met it. */
static void test_threads_same_bytes(void **state)
{
    (void)state;
#ifdef _OPENMP
    enum { ROWS = 300, COLS = 192 };
    float *w = malloc(sizeof(float) * ROWS * COLS);
    size_t n = nf4_bytes(ROWS, COLS);
    uint8_t *one = aligned_alloc(64, n), *four = aligned_alloc(64, n);
    for (int i = 0; i < ROWS * COLS; i++) w[i] = sinf((float)i * 0.37f) * (1.0f + (float)(i % 97));
    int was = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(nf4_quantize(w, ROWS, COLS, one), PT_OK);
    omp_set_num_threads(4);
    assert_int_equal(nf4_quantize(w, ROWS, COLS, four), PT_OK);
    assert_memory_equal(one, four, n);
    w[250 * COLS + 5] = NAN, w[41 * COLS + 100] = INFINITY;
    assert_int_equal(nf4_quantize(w, ROWS, COLS, four), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "row 41 has"));
    omp_set_num_threads(was);
    free(w), free(one), free(four);
#else
    skip();
#endif
}

/* A buffer's bytes depend on the weights alone, not on what the memory held before (the gaps that
 * align its parts are zero): two nodes that each quantize the same model into their shared memory
 * get the same image, which train_load.c checks by its checksum. */
static void test_bytes_deterministic(void **state)
{
    (void)state;
    const int64_t rows = 8, cols = 128;
    float w[8 * 128];
    for (int i = 0; i < rows * cols; i++) w[i] = sinf(0.37f * (float)i) * (1.0f + (float)(i % 7));
    size_t n = nf4_bytes(rows, cols);
    uint8_t *a = malloc(n), *b = malloc(n);
    assert_non_null(a);
    assert_non_null(b);
    memset(a, 0xa5, n), memset(b, 0x5a, n);
    assert_int_equal(nf4_quantize(w, rows, cols, a), PT_OK);
    assert_int_equal(nf4_quantize(w, rows, cols, b), PT_OK);
    assert_memory_equal(a, b, n);
    /* nf4_from_bnb, given the parts of that buffer */
    nf4_view v;
    assert_int_equal(nf4_view_of(a, &v), PT_OK);
    memset(b, 0x5a, n);
    assert_int_equal(nf4_from_bnb(rows, cols, v.packed, v.absmax_code, v.nested_absmax, v.nested_map, v.offset,
                                  v.quant_map, b),
                     PT_OK);
    assert_memory_equal(a, b, n);
    free(a);
    free(b);
}

static void test_memory(void **state)
{
    (void)state;
    const int64_t shapes[][2] = {{1, 64}, {8, 64}, {4096, 4096}, {11008, 4096}, {151936, 896}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        int64_t r = shapes[i][0], c = shapes[i][1], n = r * c;
        double ideal = (double)n * (0.5 + 1.0 / 64.0), got = (double)nf4_bytes(r, c);
        double extra = got - ideal, nested = 4.0 * ((n / 64 + 255) / 256);
        printf("# [%lld, %lld]: %.0f bytes = %.5f bytes/weight; ideal + %.0f (nested absmax %.0f)\n",
               (long long)r, (long long)c, got, got / (double)n, extra, nested);
        assert_true(extra >= 0.0 && extra <= nested + 64 + 64 + 1024 + 3 * 64);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_maps_match_bnb),
        cmocka_unit_test(test_quantize_matches_bnb),
        cmocka_unit_test(test_blockwise8_matches_bnb),
        cmocka_unit_test(test_blockwise8_golden),
        cmocka_unit_test(test_ties_go_low),
        cmocka_unit_test(test_dequant_bnb_bytes_bit_exact),
        cmocka_unit_test(test_row_ranges_match_full),
        cmocka_unit_test(test_roundtrip_error_bound),
        cmocka_unit_test(test_bad_shapes),
        cmocka_unit_test(test_threads_same_bytes),
        cmocka_unit_test(test_bytes_deterministic),
        cmocka_unit_test(test_memory),
    };
    return cmocka_run_group_tests(tests, load_goldens, free_goldens);
}
