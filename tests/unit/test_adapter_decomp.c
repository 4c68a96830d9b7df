/* test_adapter_decomp.c — adapter_pissa_init and adapter_olora_init (src/adapter/adapter_decomp.c)
 * against PEFT 0.21 on the tiny fp32 Llama's layer-0 gate_proj (tall) and down_proj (wide), r 4,
 * scale 2: lora_A, lora_B and the residual base within 1e-5 (tests/data/peft/decomp.bin, written by
 * tests/reference/make_decomp_goldens.py; found under $PTRAIN_SRCDIR, default ".."). Singular
 * vectors are defined up to a sign per pair: each pissa pair's sign is fixed as PEFT's output has it
 * (the product B·A, and so the residual, does not depend on it); QR's signs are LAPACK's own.
 * adapter_decomp_base on the loaded model: the same numbers on the fp32 base, and on the model
 * loaded with load_in_4bit, the residual requantized to NF4 plus scale·B·A is the dequantized
 * original within NF4's rounding; a q4_1 GGUF base keeps its type, within q4_1's rounding. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "model_fixture.h"
#include "ptrain/adapter.h"
#include "ptrain/model_io.h"
#include "ptrain/nf4.h"
#include "ptrain/quant.h"

enum { R = 4, N_MOD = 2, N_INIT = 2 };
static const int64_t shapes[N_MOD][2] = {{128, 64}, {64, 128}}; /* out, in */
static const float scale = 2.0f, tol = 1e-5f;

static float *golden; /* the whole file */

static int setup(void **state)
{
    (void)state;
    const char *src = getenv("PTRAIN_SRCDIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/decomp.bin", src && *src ? src : "..");
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s (set PTRAIN_SRCDIR)\n", path);
        return -1;
    }
    size_t n = 0;
    for (int m = 0; m < N_MOD; m++)
        n += (size_t)(shapes[m][0] * shapes[m][1]) * (1 + N_INIT) + (size_t)(R * (shapes[m][0] + shapes[m][1])) * N_INIT;
    golden = malloc(n * sizeof *golden);
    size_t got = golden ? fread(golden, sizeof *golden, n, f) : 0;
    int extra = fgetc(f);
    fclose(f);
    if (got != n || extra != EOF) {
        fprintf(stderr, "%s: expected exactly %zu floats\n", path, n);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(golden);
    return 0;
}

static float max_diff(const float *x, const float *y, int64_t n)
{
    float d = 0.0f;
    for (int64_t i = 0; i < n; i++) d = fmaxf(d, fabsf(x[i] - y[i]));
    return d;
}

/* Flip pair j of (a, b) where its largest-|value| entry of A has the other sign than want's. */
static void signs_like(float *a, float *b, const float *want_a, int64_t out, int64_t in)
{
    for (int j = 0; j < R; j++) {
        int64_t at = 0;
        for (int64_t i = 1; i < in; i++)
            if (fabsf(want_a[j * in + i]) > fabsf(want_a[j * in + at])) at = i;
        if ((a[j * in + at] < 0) == (want_a[j * in + at] < 0)) continue;
        for (int64_t i = 0; i < in; i++) a[j * in + i] = -a[j * in + i];
        for (int64_t i = 0; i < out; i++) b[i * R + j] = -b[i * R + j];
    }
}

static void check_init(int init)
{
    const float *p = golden;
    for (int m = 0; m < N_MOD; m++) {
        int64_t out = shapes[m][0], in = shapes[m][1], nw = out * in, na = R * in, nb = out * R;
        const float *w = p, *g = p + nw + (size_t)init * (size_t)(na + nb + nw);
        const float *want_a = g, *want_b = g + na, *want_res = g + na + nb;
        float *a = malloc((size_t)na * sizeof *a), *b = malloc((size_t)nb * sizeof *b);
        float *res = malloc((size_t)nw * sizeof *res);
        assert_non_null(a), assert_non_null(b), assert_non_null(res);
        pt_status st = init == 0 ? adapter_pissa_init(w, out, in, R, scale, a, b, res)
                                 : adapter_olora_init(w, out, in, R, scale, a, b, res);
        assert_int_equal(st, PT_OK);
        if (init == 0) signs_like(a, b, want_a, out, in);
        float da = max_diff(a, want_a, na), db = max_diff(b, want_b, nb), dr = max_diff(res, want_res, nw);
        print_message("%s %lldx%lld: max |A - PEFT| %.2e, |B - PEFT| %.2e, |residual - PEFT| %.2e\n",
                      init == 0 ? "pissa" : "olora", (long long)out, (long long)in, (double)da, (double)db, (double)dr);
        assert_true(da <= tol);
        assert_true(db <= tol);
        assert_true(dr <= tol);
        free(a), free(b), free(res);
        p += nw + (size_t)N_INIT * (size_t)(na + nb + nw);
    }
}

static void test_pissa(void **state)
{
    (void)state;
    check_init(0);
}

static void test_olora(void **state)
{
    (void)state;
    check_init(1);
}

/* A rank above what the weight can have, and a scale that is not positive, are refused. */
static void test_refused(void **state)
{
    (void)state;
    float w[6] = {1, 2, 3, 4, 5, 6}, a[64], b[64], res[6];
    assert_int_equal(adapter_pissa_init(w, 2, 3, 3, 1.0f, a, b, res), PT_ERR_USER);
    assert_int_equal(adapter_olora_init(w, 3, 2, 3, 1.0f, a, b, res), PT_ERR_USER);
    assert_int_equal(adapter_pissa_init(w, 2, 3, 1, 0.0f, a, b, res), PT_ERR_USER);
    assert_int_equal(adapter_olora_init(w, 2, 3, 2, 1.0f, a, b, res), PT_OK);
}

/* The tiny fp32 Llama (load_in_4bit when nf4) with fresh adapters (r 4, alpha 8) on gate_proj and
 * down_proj, started by how. */
static void load_started(pt_backend *be, bool nf4, adapter_decomp how, pt_model *m, pt_adapter *ad)
{
    char path[1024], resolved[4096];
    snprintf(path, sizeof path, "%s/tests/data/hf/tiny-llama-f32", srcdir());
    pt_load_options lo = {.load_in_4bit = nf4};
    if (model_load(path, NULL, &lo, be, m, NULL, resolved, sizeof resolved)) fail_msg("%s", err_message());
    bool target[W_COUNT] = {0};
    target[W_GATE] = target[W_DOWN] = true;
    uint64_t seed = 1;
    if (adapter_create_init(ad, m, R, 8.0f, false, target, NULL, NULL, ADAPTER_INIT_TRUE, &seed))
        fail_msg("%s", err_message());
    if (nf4) return;
    if (adapter_decomp_base(ad, m, how, 0, 0)) fail_msg("%s", err_message());
}

static float *download(pt_backend *be, const pt_tensor *t)
{
    float *h = malloc(t->nbytes);
    assert_non_null(h);
    assert_int_equal(backend_download(be, t, h, t->nbytes), PT_OK);
    return h;
}

/* On the fp32 base, layer 0's pairs and weights are PEFT's (as test_pissa / test_olora). */
static void test_model_f32(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    for (int init = 0; init < N_INIT; init++) {
        pt_model m;
        pt_adapter ad;
        load_started(be, false, init == 0 ? ADAPTER_DECOMP_PISSA : ADAPTER_DECOMP_OLORA, &m, &ad);
        const float *p = golden;
        for (int k = 0; k < N_MOD; k++) {
            int slot = k == 0 ? W_GATE : W_DOWN;
            int64_t out = shapes[k][0], in = shapes[k][1], nw = out * in, na = R * in, nb = out * R;
            const float *g = p + nw + (size_t)init * (size_t)(na + nb + nw);
            adapter_pair *pair = adapter_at(&ad, 0, slot);
            assert_non_null(pair);
            float *a = download(be, &pair->a), *b = download(be, &pair->b), *res = download(be, &m.layers[0].w[slot]);
            if (init == 0) signs_like(a, b, g, out, in);
            float da = max_diff(a, g, na), db = max_diff(b, g + na, nb), dr = max_diff(res, g + na + nb, nw);
            print_message("model %s %lldx%lld: |A| %.2e |B| %.2e |residual| %.2e\n", init == 0 ? "pissa" : "olora",
                          (long long)out, (long long)in, (double)da, (double)db, (double)dr);
            assert_true(da <= tol && db <= tol && dr <= tol);
            free(a), free(b), free(res);
            p += nw + (size_t)N_INIT * (size_t)(na + nb + nw);
        }
        /* untrained, the adapter converted for the original base is [A0; A0], [B0, -B0]: rank 8, alpha 16, no change */
        pt_adapter conv;
        assert_int_equal(adapter_decomp_converted(&ad, &m, &conv), PT_OK);
        assert_int_equal(conv.r, 2 * R);
        assert_true(conv.alpha == 16.0f && conv.scale == scale && conv.init == ADAPTER_INIT_TRUE);
        adapter_pair *q = adapter_at(&conv, 0, W_DOWN), *o = adapter_at(&ad, 0, W_DOWN);
        assert_int_equal(q->r, 2 * R);
        float *a2 = download(be, &q->a), *b2 = download(be, &q->b), *a0 = download(be, &o->a), *b0 = download(be, &o->b);
        assert_memory_equal(a2, a0, (size_t)R * 128 * sizeof(float));
        assert_memory_equal(a2 + R * 128, a0, (size_t)R * 128 * sizeof(float));
        for (int i = 0; i < 64; i++)
            for (int k = 0; k < R; k++) assert_true(b2[i * 2 * R + k] == b0[i * R + k] && b2[i * 2 * R + R + k] == -b0[i * R + k]);
        free(a2), free(b2), free(a0), free(b0);
        adapter_free(&conv);
        assert_int_equal(ad.init, init == 0 ? ADAPTER_INIT_PISSA : ADAPTER_INIT_OLORA);
        adapter_free(&ad);
        model_free(&m);
    }
    backend_close(be);
}

/* With load_in_4bit the residual goes back into NF4: dequantized, plus scale·B·A, it is the
 * dequantized original within NF4's rounding (half the widest gap of the table times the block's
 * absmax, bounded here by 0.2 of the largest |W| of the weight). */
static void test_model_nf4(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    pt_adapter ad;
    load_started(be, true, ADAPTER_DECOMP_PISSA, &m, &ad);
    int64_t out = 128, in = 64;
    pt_tensor *t = &m.layers[0].w[W_GATE];
    assert_int_equal(t->dtype, PT_NF4);
    void *before = malloc(t->nbytes), *after = malloc(t->nbytes);
    float *w0 = malloc((size_t)(out * in) * sizeof *w0), *w1 = malloc((size_t)(out * in) * sizeof *w1);
    assert_int_equal(backend_download(be, t, before, t->nbytes), PT_OK);
    assert_int_equal(adapter_decomp_base(&ad, &m, ADAPTER_DECOMP_PISSA, 0, 0), PT_OK);
    assert_int_equal(backend_download(be, t, after, t->nbytes), PT_OK);
    assert_int_equal(nf4_dequantize_rows(before, out, in, 0, out, w0), PT_OK);
    assert_int_equal(nf4_dequantize_rows(after, out, in, 0, out, w1), PT_OK);
    adapter_pair *pair = adapter_at(&ad, 0, W_GATE);
    float *a = download(be, &pair->a), *b = download(be, &pair->b), big = 0.0f, err = 0.0f, moved = 0.0f;
    for (int64_t i = 0; i < out; i++)
        for (int64_t j = 0; j < in; j++) {
            double ba = 0.0;
            for (int k = 0; k < R; k++) ba += (double)b[i * R + k] * a[k * in + j];
            big = fmaxf(big, fabsf(w0[i * in + j]));
            err = fmaxf(err, fabsf(w1[i * in + j] + (float)(pair->scale * ba) - w0[i * in + j]));
            moved = fmaxf(moved, fabsf(w1[i * in + j] - w0[i * in + j]));
        }
    print_message("nf4 gate_proj: max |deq(residual) + s·BA - deq(W)| %.3e (max |W| %.3e, base moved %.3e)\n",
                  (double)err, (double)big, (double)moved);
    assert_true(err <= 0.2f * big);
    assert_true(moved > err); /* the base really changed */
    free(before), free(after), free(w0), free(w1), free(a), free(b);
    adapter_free(&ad);
    model_free(&m);
    backend_close(be);
}

/* The conversion to an adapter of the original base is PEFT's (tests/data/peft/decomp_convert.bin),
 * and applied to the original weight it gives the residual plus the trained pair. */
static void test_convert(void **state)
{
    (void)state;
    int64_t out = 128, in = 64, na = R * in, nb = out * R;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/decomp_convert.bin", srcdir());
    float *g = read_f32(path, (size_t)(4 * (na + nb)));
    const float *a0 = g, *b0 = a0 + na, *a = b0 + nb, *b = a + na, *want_a2 = b + nb, *want_b2 = want_a2 + 2 * na;
    float a2[2 * R * 64], b2[128 * 2 * R];
    adapter_decomp_convert(a, b, a0, b0, out, in, R, a2, b2);
    assert_true(max_diff(a2, want_a2, 2 * na) == 0.0f);
    assert_true(max_diff(b2, want_b2, 2 * nb) == 0.0f);
    /* W + s·B'A' against residual + s·B·A, with W and the residual from decomp.bin (gate_proj, pissa) */
    const float *w = golden, *res = golden + out * in + na + nb;
    float worst = 0.0f;
    for (int64_t i = 0; i < out; i++)
        for (int64_t j = 0; j < in; j++) {
            double conv = 0.0, trained = 0.0;
            for (int k = 0; k < 2 * R; k++) conv += (double)b2[i * 2 * R + k] * a2[k * in + j];
            for (int k = 0; k < R; k++) trained += (double)b[i * R + k] * a[k * in + j];
            worst = fmaxf(worst, fabsf((float)(w[i * in + j] + scale * conv) - (float)(res[i * in + j] + scale * trained)));
        }
    print_message("converted adapter on W vs trained adapter on the residual: max weight difference %.2e\n", (double)worst);
    assert_true(worst <= tol);
    free(g);
}

/* A GGUF base keeps its block type: the tiny Llama in q4_1, pissa on q_proj; the residual is requantized to q4_1,
 * and dequantized plus scale·B·A it is the dequantized original within q4_1's rounding. */
static void test_model_gguf(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    pt_adapter ad;
    char path[1024], resolved[4096];
    snprintf(path, sizeof path, "%s/tests/data/llama/tiny-mha-q4_1.gguf", srcdir());
    pt_load_options lo = {0};
    if (model_load(path, NULL, &lo, be, &m, NULL, resolved, sizeof resolved)) fail_msg("%s", err_message());
    bool target[W_COUNT] = {0};
    target[W_Q] = true;
    uint64_t seed = 1;
    assert_int_equal(adapter_create_init(&ad, &m, R, 8.0f, false, target, NULL, NULL, ADAPTER_INIT_TRUE, &seed), PT_OK);
    pt_tensor *t = &m.layers[0].w[W_Q];
    assert_int_equal(t->dtype, PT_Q4_1);
    int64_t out, in;
    assert_true(model_adapter_shape(&m.cfg, W_Q, &out, &in));
    size_t row = dtype_size_bytes(t->dtype, in);
    char *before = malloc(t->nbytes), *after = malloc(t->nbytes);
    float *w0 = malloc((size_t)(out * in) * sizeof *w0), *w1 = malloc((size_t)(out * in) * sizeof *w1);
    assert_int_equal(backend_download(be, t, before, t->nbytes), PT_OK);
    assert_int_equal(adapter_decomp_base(&ad, &m, ADAPTER_DECOMP_PISSA, 0, 0), PT_OK);
    assert_int_equal(t->dtype, PT_Q4_1);
    assert_int_equal(backend_download(be, t, after, t->nbytes), PT_OK);
    for (int64_t i = 0; i < out; i++) {
        assert_int_equal(quant_dequantize_row(PT_Q4_1, before + (size_t)i * row, w0 + i * in, in), PT_OK);
        assert_int_equal(quant_dequantize_row(PT_Q4_1, after + (size_t)i * row, w1 + i * in, in), PT_OK);
    }
    adapter_pair *pair = adapter_at(&ad, 0, W_Q);
    float *a = download(be, &pair->a), *b = download(be, &pair->b), big = 0.0f, err = 0.0f, moved = 0.0f;
    for (int64_t i = 0; i < out; i++)
        for (int64_t j = 0; j < in; j++) {
            double ba = 0.0;
            for (int k = 0; k < R; k++) ba += (double)b[i * R + k] * a[k * in + j];
            big = fmaxf(big, fabsf(w0[i * in + j]));
            err = fmaxf(err, fabsf(w1[i * in + j] + (float)(pair->scale * ba) - w0[i * in + j]));
            moved = fmaxf(moved, fabsf(w1[i * in + j] - w0[i * in + j]));
        }
    print_message("q4_1 q_proj: max |deq(residual) + s·BA - deq(W)| %.3e (max |W| %.3e, base moved %.3e)\n",
                  (double)err, (double)big, (double)moved);
    assert_true(err <= 0.2f * big);
    assert_true(moved > err);
    free(before), free(after), free(w0), free(w1), free(a), free(b);
    adapter_free(&ad);
    model_free(&m);
    backend_close(be);
}

/* pissa_niter_4: its random matrix is not torch's, so only what does not hang on it is compared: W = residual +
 * scale·B·A, B's columns orthogonal (U·sqrt(S)), and the residual's Frobenius norm no smaller than the exact
 * pissa's (Eckart-Young) and within the spread of PEFT's over torch seeds 0..7 (decomp_niter.json), widened by
 * that spread on each side. */
static void test_pissa_niter(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/decomp_niter.json", srcdir());
    json_t *g = json_load_file(path, 0, NULL);
    assert_non_null(g);
    static const char *const names[N_MOD] = {"gate_proj", "down_proj"};
    const float *p = golden;
    for (int k = 0; k < N_MOD; k++) {
        int64_t out = shapes[k][0], in = shapes[k][1], nw = out * in, na = R * in, nb = out * R;
        const json_t *e = json_object_get(g, names[k]);
        double lo = json_real_value(json_object_get(e, "niter4_min")), hi = json_real_value(json_object_get(e, "niter4_max"));
        double exact = json_real_value(json_object_get(e, "exact")), spread = hi - lo;
        float *a = malloc((size_t)na * sizeof *a), *b = malloc((size_t)nb * sizeof *b), *res = malloc((size_t)nw * sizeof *res);
        assert_true(a && b && res && exact > 0.0 && spread >= 0.0);
        for (uint64_t seed = 1; seed <= 4; seed++) {
            assert_int_equal(adapter_pissa_niter_init(p, out, in, R, scale, 4, seed, a, b, res), PT_OK);
            double norm = 0.0, worst = 0.0, off = 0.0, diag = 0.0;
            for (int64_t i = 0; i < out; i++)
                for (int64_t j = 0; j < in; j++) {
                    double ba = 0.0;
                    for (int q = 0; q < R; q++) ba += (double)b[i * R + q] * a[q * in + j];
                    worst = fmax(worst, fabs(p[i * in + j] - res[i * in + j] - scale * ba));
                    norm += (double)res[i * in + j] * res[i * in + j];
                }
            for (int x = 0; x < R; x++)
                for (int y = 0; y < R; y++) {
                    double dot = 0.0;
                    for (int64_t i = 0; i < out; i++) dot += (double)b[i * R + x] * b[i * R + y];
                    if (x == y) diag = fmax(diag, dot);
                    else off = fmax(off, fabs(dot));
                }
            norm = sqrt(norm);
            print_message("pissa_niter_4 %s seed %d: |residual| %.6f (exact pissa %.6f, PEFT %.6f..%.6f), "
                          "|W - residual - s·BA| %.1e, B's columns off-diagonal %.1e of %.1e\n", names[k], (int)seed, norm,
                          exact, lo, hi, worst, off, diag);
            assert_true(worst <= 1e-6);
            assert_true(off <= 1e-4 * diag);
            assert_true(norm >= exact * (1.0 - 1e-6));
            assert_true(norm >= lo - spread && norm <= hi + spread);
        }
        free(a), free(b), free(res);
        p += nw + (size_t)N_INIT * (size_t)(na + nb + nw);
    }
    json_decref(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pissa),
        cmocka_unit_test(test_olora),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_pissa_niter),
        cmocka_unit_test(test_convert),
        cmocka_unit_test(test_model_f32),
        cmocka_unit_test(test_model_nf4),
        cmocka_unit_test(test_model_gguf),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
