/* test_model.c — parity of the Llama forward pass with Hugging Face transformers.
 * Tiny random Llama models (multi-head, and grouped-query with Llama 3 rope scaling and tied
 * embeddings) stored as GGUF in F32, Q8_0, Q4_0 and Q4_1: ptrain's logits against transformers'
 * logits on the same dequantized weights (tests/reference/make_llama_goldens.py), max relative
 * error <= 1e-4; the same logits again when the tokens are fed in pieces through the KV cache;
 * and SmolLM2-135M-Instruct itself: top-1 next token equal to transformers' on every prompt. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ptrain/model.h"

static const char *srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s ? s : "..";
}

static pt_backend *cpu(void)
{
    pt_backend *be = NULL;
    pt_backend_options opts = {"cpu", 0, 0};
    assert_int_equal(backend_open(&opts, &be), PT_OK);
    return be;
}

static int32_t *read_ids(const char *path, int *n)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int32_t *ids = malloc(sizeof(int32_t) * 4096);
    *n = 0;
    while (*n < 4096 && fscanf(f, "%d", &ids[*n]) == 1) (*n)++;
    fclose(f);
    return ids;
}

static float *read_f32(const char *path, size_t count)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    float *v = malloc(sizeof(float) * count);
    assert_int_equal(fread(v, sizeof(float), count, f), count);
    fclose(f);
    return v;
}

static double max_rel_err(const float *a, const float *b, size_t n)
{
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        scale = fmax(scale, fabs((double)b[i]));
    }
    return diff / scale;
}

static void check_tiny_as(const char *name, bool nf4)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/llama/%s.gguf", srcdir(), name);
    gguf_file f;
    assert_int_equal(gguf_open(path, &f), PT_OK);
    pt_backend *be = cpu();
    pt_model m;
    pt_load_options lo = {.load_in_4bit = nf4};
    pt_status st = model_from_gguf(&f, be, &lo, &m);
    if (st) print_error("%s\n", err_message());
    assert_int_equal(st, PT_OK);
    gguf_close(&f);

    int n;
    snprintf(path, sizeof path, "%s/tests/data/llama/%s.ids.txt", srcdir(), name);
    int32_t *ids = read_ids(path, &n);
    size_t count = (size_t)n * (size_t)m.cfg.vocab;
    snprintf(path, sizeof path, "%s/tests/data/llama/%s%s.logits.f32", srcdir(), name, nf4 ? ".nf4" : "");
    float *ref = read_f32(path, count), *got = malloc(sizeof(float) * count);

    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(&m, n, &kv), PT_OK);
    assert_int_equal(model_forward(&m, &kv, ids, n, got, false), PT_OK);
    double err = max_rel_err(got, ref, count);
    print_message("%s%s: max relative error of %zu logits vs transformers: %.3g\n", name,
                  nf4 ? " (NF4 on load, vs bitsandbytes' NF4)" : "", count, err);
    assert_true(err <= 1e-4);

    /* the same tokens in three pieces through the cache give the same last logits */
    kv.n_past = 0;
    int cut1 = n / 3, cut2 = n / 2;
    assert_int_equal(model_forward(&m, &kv, ids, cut1, got, true), PT_OK);
    assert_int_equal(model_forward(&m, &kv, ids + cut1, cut2 - cut1, got, true), PT_OK);
    assert_int_equal(model_forward(&m, &kv, ids + cut2, n - cut2, got, true), PT_OK);
    err = max_rel_err(got, ref + (size_t)(n - 1) * m.cfg.vocab, (size_t)m.cfg.vocab);
    assert_true(err <= 1e-4);
    /* and the cache refuses what does not fit */
    assert_int_equal(model_forward(&m, &kv, ids, 1, got, true), PT_ERR_USER);

    kv_cache_free(&m, &kv);
    model_free(&m);
    backend_close(be);
    free(ids);
    free(ref);
    free(got);
}

static void check_tiny(const char *name) { check_tiny_as(name, false); }

/* load_in_4bit: the f32 projections become NF4; the reference went through bitsandbytes' NF4 */
static void test_tiny_mha_nf4_on_load(void **s) { (void)s; check_tiny_as("tiny-mha-f32", true); }
static void test_tiny_gqa_nf4_on_load(void **s) { (void)s; check_tiny_as("tiny-gqa-f32", true); }
static void test_tiny_mha_f32(void **s) { (void)s; check_tiny("tiny-mha-f32"); }
static void test_tiny_mha_q8_0(void **s) { (void)s; check_tiny("tiny-mha-q8_0"); }
static void test_tiny_mha_q4_0(void **s) { (void)s; check_tiny("tiny-mha-q4_0"); }
static void test_tiny_mha_q4_1(void **s) { (void)s; check_tiny("tiny-mha-q4_1"); }
static void test_tiny_gqa_llama3_f32(void **s) { (void)s; check_tiny("tiny-gqa-f32"); }
static void test_tiny_gqa_llama3_q8_0(void **s) { (void)s; check_tiny("tiny-gqa-q8_0"); }
static void test_tiny_gqa_llama3_q4_0(void **s) { (void)s; check_tiny("tiny-gqa-q4_0"); }
static void test_tiny_gqa_llama3_q4_1(void **s) { (void)s; check_tiny("tiny-gqa-q4_1"); }

/* GGUF files that parse but are not usable models: one clear error each, nothing leaked. */
static void test_bad_models(void **state)
{
    (void)state;
    const char *cases[][2] = {
        {"bad-arch", "bad-arch.gguf: architecture \"bert\" is not supported yet; supported: llama (Llama 2/3, "
                     "Mistral, SmolLM2, TinyLlama)"},
        {"bad-missing-tensor", "bad-missing-tensor.gguf: tensor blk.0.attn_norm.weight is missing; is this a complete "
                               "model file?"},
        {"bad-shape", "bad-shape.gguf: tensor blk.0.attn_q.weight has shape [48, 32], expected [32, 32] for this "
                      "model"},
    };
    pt_backend *be = cpu();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/llama/%s.gguf", srcdir(), cases[i][0]);
        gguf_file f;
        assert_int_equal(gguf_open(path, &f), PT_OK);
        pt_model m;
        assert_int_equal(model_from_gguf(&f, be, NULL, &m), PT_ERR_USER);
        const char *msg = err_message();
        const char *tail = strstr(msg, cases[i][1]);
        if (!tail) print_error("got: %s\n", msg);
        assert_non_null(tail);
        gguf_close(&f);
    }
    backend_close(be);
}

/* The SmolLM2 file: $PTRAIN_MODELS, the source tree's models/, or /tmp/models. */
static const char *smollm2_path(void)
{
    static char path[1024];
    const char *dirs[] = {getenv("PTRAIN_MODELS"), NULL, "/tmp/models"};
    char here[1024];
    snprintf(here, sizeof here, "%s/models", srcdir());
    dirs[1] = here;
    for (int i = 0; i < 3; i++) {
        if (!dirs[i]) continue;
        snprintf(path, sizeof path, "%s/SmolLM2-135M-Instruct.Q4_1.gguf", dirs[i]);
        FILE *f = fopen(path, "rb");
        if (f) {
            fclose(f);
            return path;
        }
    }
    return NULL;
}

static void test_smollm2_next_token(void **state)
{
    (void)state;
    const char *model_path = smollm2_path();
    if (!model_path) {
        print_message("SKIP reason: SmolLM2-135M-Instruct.Q4_1.gguf not found in $PTRAIN_MODELS, models/ or "
                      "/tmp/models (fetch it with share/scripts/fetch-model.sh)\n");
        skip();
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/smollm2/next_token.json", srcdir());
    json_error_t jerr;
    json_t *cases = json_load_file(path, 0, &jerr);
    assert_non_null(cases);
    gguf_file f;
    assert_int_equal(gguf_open(model_path, &f), PT_OK);
    pt_backend *be = cpu();
    pt_model m;
    assert_int_equal(model_from_gguf(&f, be, NULL, &m), PT_OK);
    gguf_close(&f);
    float *logits = malloc(sizeof(float) * (size_t)m.cfg.vocab);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        json_t *jids = json_object_get(c, "ids"), *top = json_object_get(c, "top_ids");
        json_t *top_logits = json_object_get(c, "top_logits");
        int n = (int)json_array_size(jids);
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
        for (int j = 0; j < n; j++) ids[j] = (int32_t)json_integer_value(json_array_get(jids, (size_t)j));
        pt_kv_cache kv;
        assert_int_equal(kv_cache_init(&m, n, &kv), PT_OK);
        assert_int_equal(model_forward(&m, &kv, ids, n, logits, true), PT_OK);
        int best = 0;
        for (int v = 1; v < m.cfg.vocab; v++)
            if (logits[v] > logits[best]) best = v;
        double worst = 0;
        for (size_t k = 0; k < json_array_size(top); k++) {
            double want = json_real_value(json_array_get(top_logits, k));
            int id = (int)json_integer_value(json_array_get(top, k));
            worst = fmax(worst, fabs(logits[id] - want) / fmax(1.0, fabs(want)));
        }
        print_message("prompt %zu: top-1 %d (reference %d), top-20 logit error %.2g\n", i, best,
                      (int)json_integer_value(json_array_get(top, 0)), worst);
        assert_int_equal(best, json_integer_value(json_array_get(top, 0)));
        assert_true(worst < 1e-3);
        kv_cache_free(&m, &kv);
        free(ids);
    }
    free(logits);
    json_decref(cases);
    model_free(&m);
    backend_close(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_mha_f32),        cmocka_unit_test(test_tiny_mha_q8_0),
        cmocka_unit_test(test_tiny_mha_q4_0),       cmocka_unit_test(test_tiny_mha_q4_1),
        cmocka_unit_test(test_tiny_gqa_llama3_f32), cmocka_unit_test(test_tiny_gqa_llama3_q8_0),
        cmocka_unit_test(test_tiny_gqa_llama3_q4_0), cmocka_unit_test(test_tiny_gqa_llama3_q4_1),
        cmocka_unit_test(test_tiny_mha_nf4_on_load), cmocka_unit_test(test_tiny_gqa_nf4_on_load),
        cmocka_unit_test(test_bad_models),          cmocka_unit_test(test_smollm2_next_token),
    };
    return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
