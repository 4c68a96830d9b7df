/* test_model.c — parity of the forward pass with Hugging Face transformers, for the llama, qwen2,
 * gemma2, qwen3 and gemma3 families (tests/reference/make_qwen3_goldens.py and
 * make_gemma3_goldens.py: the same checks). Tiny random models stored as GGUF (tests/reference/make_llama_goldens.py:
 * Llama multi-head, and grouped-query with Llama 3 rope scaling and tied embeddings, in F32,
 * Q8_0, Q4_0 and Q4_1; tests/reference/make_family_goldens.py: Qwen2 with q/k/v biases and Gemma 2
 * with its scaled embedding, post-norms, GeGLU, soft-capped scores and logits and a sliding window
 * shorter than the test, in F32, Q8_0 and Q4_0): ptrain's logits against transformers' logits on
 * the same dequantized weights, max relative error <= 1e-4 (also with load_in_4bit against
 * bitsandbytes' NF4); the same logits again when the tokens are fed in pieces through the KV
 * cache; greedy generation through the cache equal to transformers'; the training pass's loss on
 * the same tokens equal to the cross-entropy of transformers' logits; GGUF files that are not
 * usable models, and damaged ones (a NaN or an infinity in a block's scale or min, in every block
 * format, or in a float tensor; all-zero matrices) refused or warned about by name; and
 * SmolLM2-135M-Instruct itself: top-1 next token equal to transformers' on every prompt. */
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

#include "model_fixture.h"

#include "ptrain/forward.h"
#include "ptrain/model.h"
#include "ptrain/model_io.h"
#include "ptrain/quant.h"
#include "ptrain/step.h"
#include "ptrain/weight_check.h"

/* tests/data/<family>/<name>.gguf loaded onto be (projections to NF4 when nf4) */
static void load_model(pt_backend *be, const char *family, const char *name, bool nf4, pt_model *m)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/%s.gguf", srcdir(), family, name);
    gguf_file f;
    assert_int_equal(gguf_open(path, &f), PT_OK);
    pt_load_options lo = {.load_in_4bit = nf4};
    pt_status st = model_from_gguf(&f, be, &lo, m);
    if (st) print_error("%s\n", err_message());
    assert_int_equal(st, PT_OK);
    gguf_close(&f);
}

/* <family>/<name>.ids.txt and the float32 logits file <family>/<name><suffix>.logits.f32 */
static float *read_golden(const char *family, const char *name, const char *suffix, int vocab, int32_t **ids,
                          int *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/%s.ids.txt", srcdir(), family, name);
    *ids = read_ids(path, n);
    snprintf(path, sizeof path, "%s/tests/data/%s/%s%s.logits.f32", srcdir(), family, name, suffix);
    return read_f32(path, (size_t)*n * (size_t)vocab);
}

/* m's logits on <family>/<name>.ids.txt against <family>/<name><suffix>.logits.f32; then the same
 * tokens in three pieces through the cache */
static void check_logits(pt_model *m, const char *family, const char *name, const char *suffix, const char *what)
{
    int n;
    int32_t *ids;
    float *ref = read_golden(family, name, suffix, m->cfg.vocab, &ids, &n);
    size_t count = (size_t)n * (size_t)m->cfg.vocab;
    float *got = malloc(sizeof(float) * count);

    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(m, n, &kv), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids, n, got, false), PT_OK);
    double err = max_rel_err(got, ref, count);
    print_message("%s/%s%s: max relative error of %zu logits vs transformers: %.3g\n", family, name, what, count, err);
    assert_true(err <= 1e-4);

    /* the same tokens in three pieces through the cache give the same last logits */
    kv.n_past = 0;
    int cut1 = n / 3, cut2 = n / 2;
    assert_int_equal(forward_tokens(m, NULL, &kv, ids, cut1, got, true), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids + cut1, cut2 - cut1, got, true), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids + cut2, n - cut2, got, true), PT_OK);
    err = max_rel_err(got, ref + (size_t)(n - 1) * m->cfg.vocab, (size_t)m->cfg.vocab);
    print_message("  through the cache in pieces of %d, %d and %d: %.3g\n", cut1, cut2 - cut1, n - cut2, err);
    assert_true(err <= 1e-4);
    /* and the cache refuses what does not fit */
    assert_int_equal(forward_tokens(m, NULL, &kv, ids, 1, got, true), PT_ERR_USER);

    kv_cache_free(m, &kv);
    free(ids);
    free(ref);
    free(got);
}

static void check_tiny_in(const char *family, const char *name, bool nf4)
{
    pt_backend *be = cpu();
    pt_model m;
    load_model(be, family, name, nf4, &m);
    check_logits(&m, family, name, nf4 ? ".nf4" : "", nf4 ? " (NF4 on load, vs bitsandbytes' NF4)" : "");
    model_free(&m);
    backend_close(be);
}

static void check_tiny(const char *name) { check_tiny_in("llama", name, false); }

/* load_in_4bit: the f32 projections become NF4; the reference went through bitsandbytes' NF4 */
static void test_tiny_mha_nf4_on_load(void **s) { (void)s; check_tiny_in("llama", "tiny-mha-f32", true); }
static void test_tiny_gqa_nf4_on_load(void **s) { (void)s; check_tiny_in("llama", "tiny-gqa-f32", true); }
static void test_tiny_mha_f32(void **s) { (void)s; check_tiny("tiny-mha-f32"); }
static void test_tiny_mha_q8_0(void **s) { (void)s; check_tiny("tiny-mha-q8_0"); }
static void test_tiny_mha_q4_0(void **s) { (void)s; check_tiny("tiny-mha-q4_0"); }
static void test_tiny_mha_q4_1(void **s) { (void)s; check_tiny("tiny-mha-q4_1"); }
static void test_tiny_gqa_llama3_f32(void **s) { (void)s; check_tiny("tiny-gqa-f32"); }
static void test_tiny_gqa_llama3_q8_0(void **s) { (void)s; check_tiny("tiny-gqa-q8_0"); }
static void test_tiny_gqa_llama3_q4_0(void **s) { (void)s; check_tiny("tiny-gqa-q4_0"); }
static void test_tiny_gqa_llama3_q4_1(void **s) { (void)s; check_tiny("tiny-gqa-q4_1"); }

/* ---- qwen2 and gemma2 ------------------------------------------------------------------------- */

static void test_qwen2_f32(void **s) { (void)s; check_tiny_in("qwen2", "tiny-f32", false); }
static void test_qwen2_q8_0(void **s) { (void)s; check_tiny_in("qwen2", "tiny-q8_0", false); }
static void test_qwen2_q4_0(void **s) { (void)s; check_tiny_in("qwen2", "tiny-q4_0", false); }
static void test_qwen2_nf4_on_load(void **s) { (void)s; check_tiny_in("qwen2", "tiny-f32", true); }
static void test_gemma2_f32(void **s) { (void)s; check_tiny_in("gemma2", "tiny-f32", false); }
static void test_gemma2_q8_0(void **s) { (void)s; check_tiny_in("gemma2", "tiny-q8_0", false); }
static void test_gemma2_q4_0(void **s) { (void)s; check_tiny_in("gemma2", "tiny-q4_0", false); }
static void test_gemma2_nf4_on_load(void **s) { (void)s; check_tiny_in("gemma2", "tiny-f32", true); }

/* The same families as Hugging Face directories (config.json + bf16 model.safetensors; gemma2's
 * with query_pre_attn_scalar 24, which no GGUF file carries) through model_load, against
 * transformers' float64 logits on the bf16 weights. */
static void check_hf_dir(const char *family)
{
    char path[1024], resolved[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/hf", srcdir(), family);
    pt_backend *be = cpu();
    pt_model m;
    pt_load_options lo = {.load_in_4bit = false};
    pt_status st = model_load(path, NULL, &lo, be, &m, NULL, resolved, sizeof resolved);
    if (st) print_error("%s\n", err_message());
    assert_int_equal(st, PT_OK);
    check_logits(&m, family, "hf", "", " (safetensors bf16)");
    model_free(&m);
    backend_close(be);
}

static void test_qwen2_hf_dir(void **s) { (void)s; check_hf_dir("qwen2"); }
static void test_gemma2_hf_dir(void **s) { (void)s; check_hf_dir("gemma2"); }

/* What the files say about their features, as the forward pass will read it. */
static void test_family_configs(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model q, g;
    load_model(be, "qwen2", "tiny-q4_0", false, &q);
    load_model(be, "gemma2", "tiny-q4_0", false, &g);
    assert_string_equal(arch_name(q.cfg.arch), "qwen2");
    assert_true(q.cfg.qkv_bias && !q.cfg.post_norms && q.cfg.act == PT_ACT_SILU && q.cfg.embed_scale == 1.0f);
    assert_true(q.cfg.attn_softcap == 0.0f && q.cfg.final_softcap == 0.0f && model_layer_window(&q.cfg, 0) == 0);
    assert_non_null(q.layers[1].w[W_V_BIAS].data);
    assert_null(q.layers[1].w[W_POST_FFN_NORM].data);
    assert_string_equal(arch_name(g.cfg.arch), "gemma2");
    assert_true(!g.cfg.qkv_bias && g.cfg.post_norms && g.cfg.act == PT_ACT_GELU_TANH && g.cfg.tied_embeddings);
    assert_true(g.cfg.head_dim == 16 && g.cfg.dim == 32 && g.cfg.n_heads == 4); /* head size from key_length */
    assert_true(g.cfg.embed_scale == sqrtf(32.0f) && g.cfg.attn_scale == 0.25f);
    assert_true(g.cfg.attn_softcap == 4.0f && g.cfg.final_softcap == 6.0f && g.cfg.sliding_window == 6);
    assert_true(model_layer_window(&g.cfg, 0) == 6 && model_layer_window(&g.cfg, 1) == 0 &&
                model_layer_window(&g.cfg, 2) == 6); /* transformers: layers 0, 2, ... slide */
    assert_null(g.layers[0].w[W_Q_BIAS].data);
    model_free(&q);
    model_free(&g);
    backend_close(be);
}

/* Greedy decoding through the KV cache, one token at a time, gives transformers' continuation
 * (tiny.greedy.txt: prompt ids, generated ids, the smallest top-1/top-2 margin, >> our error). */
static void check_greedy(const char *family)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/tiny.greedy.txt", srcdir(), family);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int32_t prompt[8], want[12];
    for (int i = 0; i < 8; i++) assert_int_equal(fscanf(f, "%d", &prompt[i]), 1);
    for (int i = 0; i < 12; i++) assert_int_equal(fscanf(f, "%d", &want[i]), 1);
    fclose(f);
    pt_backend *be = cpu();
    pt_model m;
    load_model(be, family, "tiny-f32", false, &m);
    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(&m, 20, &kv), PT_OK);
    float *logits = malloc(sizeof(float) * (size_t)m.cfg.vocab);
    assert_int_equal(forward_tokens(&m, NULL, &kv, prompt, 8, logits, true), PT_OK);
    for (int i = 0; i < 12; i++) {
        int32_t best = 0;
        for (int v = 1; v < m.cfg.vocab; v++)
            if (logits[v] > logits[best]) best = v;
        assert_int_equal(best, want[i]);
        if (i < 11) assert_int_equal(forward_tokens(&m, NULL, &kv, &best, 1, logits, true), PT_OK);
    }
    print_message("%s: 12 greedy tokens through the cache equal transformers'\n", family);
    free(logits);
    kv_cache_free(&m, &kv);
    model_free(&m);
    backend_close(be);
}

static void test_qwen2_greedy(void **s) { (void)s; check_greedy("qwen2"); }
static void test_gemma2_greedy(void **s) { (void)s; check_greedy("gemma2"); }

/* Σ over rows t0 .. t1-1 of the cross-entropy of transformers' logits row t for token ids[t+1] */
static double golden_ce(const float *logits, const int32_t *ids, int vocab, int t0, int t1)
{
    double sum = 0;
    for (int t = t0; t < t1; t++) {
        const float *row = logits + (size_t)t * vocab;
        double max = row[0], z = 0;
        for (int v = 1; v < vocab; v++) max = fmax(max, row[v]);
        for (int v = 0; v < vocab; v++) z += exp(row[v] - max);
        sum += max + log(z) - row[ids[t + 1]];
    }
    return sum;
}

/* The training pass (step_loss, with its chunked, soft-capped loss head) on the golden tokens:
 * row 0 the n tokens; row 1 their first half twice, packed as two examples (segments, positions
 * restarting), whose logits are the first half's (attention is causal). Both against the
 * cross-entropy of transformers' logits. */
static void check_training_loss(const char *family)
{
    pt_backend *be = cpu();
    pt_model m;
    load_model(be, family, "tiny-f32", false, &m);
    int n;
    int32_t *ids;
    float *ref = read_golden(family, "tiny-f32", "", m.cfg.vocab, &ids, &n);
    int half = n / 2;
    int32_t *in = malloc(sizeof(int32_t) * 4 * (size_t)(2 * n));
    int32_t *tgt = in + 2 * n, *pos = tgt + 2 * n, *seg = pos + 2 * n;
    for (int t = 0; t < n; t++) {
        int u = t % half; /* row 1: the first half twice */
        in[t] = ids[t], tgt[t] = t + 1 < n ? ids[t + 1] : PT_IGNORE_INDEX, pos[t] = t, seg[t] = 0;
        in[n + t] = ids[u], tgt[n + t] = u + 1 < half ? ids[u + 1] : PT_IGNORE_INDEX, pos[n + t] = u;
        seg[n + t] = t / half;
    }
    train_batch b = {2, n, in, tgt, pos, seg};
    double loss = 0;
    int64_t count = 0;
    assert_int_equal(step_loss(&m, NULL, &b, NULL, &loss, &count), PT_OK);
    double want = golden_ce(ref, ids, m.cfg.vocab, 0, n - 1) + 2 * golden_ce(ref, ids, m.cfg.vocab, 0, half - 1);
    assert_int_equal(count, (n - 1) + 2 * (half - 1));
    double err = fabs(loss - want) / want;
    print_message("%s: training loss %.9f, from transformers' logits %.9f (relative %.2g)\n", family,
                  loss / (double)count, want / (double)count, err);
    assert_true(err <= 1e-5);
    free(in);
    free(ids);
    free(ref);
    model_free(&m);
    backend_close(be);
}

static void test_qwen2_training_loss(void **s) { (void)s; check_training_loss("qwen2"); }
static void test_gemma2_training_loss(void **s) { (void)s; check_training_loss("gemma2"); }

/* ---- families of make_more_goldens.py: smollm3 (NoPE on layer 3 of 5), mistral (head_dim 24 against
 * hidden 64 / 4 heads, loading as llama) ---------------------------------------------------------- */

static void test_smollm3_f32(void **s) { (void)s; check_tiny_in("smollm3", "tiny-f32", false); }
static void test_smollm3_q8_0(void **s) { (void)s; check_tiny_in("smollm3", "tiny-q8_0", false); }
static void test_smollm3_q4_0(void **s) { (void)s; check_tiny_in("smollm3", "tiny-q4_0", false); }
static void test_smollm3_nf4_on_load(void **s) { (void)s; check_tiny_in("smollm3", "tiny-f32", true); }
static void test_smollm3_hf_dir(void **s) { (void)s; check_hf_dir("smollm3"); }
static void test_smollm3_greedy(void **s) { (void)s; check_greedy("smollm3"); }
static void test_smollm3_training_loss(void **s) { (void)s; check_training_loss("smollm3"); }
static void test_granite_f32(void **s) { (void)s; check_tiny_in("granite", "tiny-f32", false); }
static void test_granite_q4_0(void **s) { (void)s; check_tiny_in("granite", "tiny-q4_0", false); }
static void test_granite_nf4_on_load(void **s) { (void)s; check_tiny_in("granite", "tiny-f32", true); }
static void test_granite_hf_dir(void **s) { (void)s; check_hf_dir("granite"); }
static void test_granite_greedy(void **s) { (void)s; check_greedy("granite"); }
static void test_granite_training_loss(void **s) { (void)s; check_training_loss("granite"); }
/* ministral3 as llama.cpp's mistral3 (make_ministral3_goldens.py gguf; llama.cpp runs the f32 file to 1.3e-6 of
 * transformers): YaRN with yarn_log_multiplier, the query temperature from attention.temperature_scale */
static void test_mistral3_f32(void **s) { (void)s; check_tiny_in("ministral3", "tiny-f32", false); }
/* Granite 4.0 attention-only as llama.cpp's converter writes it (make_granite4_goldens.py gguf: granite, input_linear
 * split into ffn_gate and ffn_up; llama.cpp runs it to 7.2e-7): loads as granite, transformers' granitemoehybrid logits */
static void test_granite4_gguf(void **s) { (void)s; check_tiny_in("granite4", "tiny-f32", false); }
static void test_mistral3_q4_0(void **s) { (void)s; check_tiny_in("ministral3", "tiny-q4_0", false); }
static void test_mistral3_greedy(void **s) { (void)s; check_greedy("ministral3"); }
static void test_olmo2_f32(void **s) { (void)s; check_tiny_in("olmo2", "tiny-f32", false); }
static void test_olmo2_q8_0(void **s) { (void)s; check_tiny_in("olmo2", "tiny-q8_0", false); }
static void test_olmo2_q4_0(void **s) { (void)s; check_tiny_in("olmo2", "tiny-q4_0", false); }
/* (olmo2's F32 file loaded as NF4 is 1.65e-4 from bitsandbytes' NF4 of it: ptrain's quantizer, which
 * the other families check, rounds a few double-quantized absmaxes one step away from bitsandbytes',
 * as for qwen2's 9.6e-5; olmo2's bnb-4bit directory, bitsandbytes' own codes, agrees to 8.4e-7) */
static void test_olmo2_hf_dir(void **s) { (void)s; check_hf_dir("olmo2"); }
static void test_olmo2_greedy(void **s) { (void)s; check_greedy("olmo2"); }
static void test_olmo2_training_loss(void **s) { (void)s; check_training_loss("olmo2"); }
/* make_more_goldens.py's olmo3: olmo2's block with a window of 6 (prompt 40) on layers 0-2 and 4, layer 3 full;
 * GGUF as llama.cpp converts it (olmo2 with olmo2.attention.sliding_window); olmo3-yarn: YaRN on the full layer
 * only, the sliding ones on their own base */
static void test_olmo3_f32(void **s) { (void)s; check_tiny_in("olmo3", "tiny-f32", false); }
static void test_olmo3_q8_0(void **s) { (void)s; check_tiny_in("olmo3", "tiny-q8_0", false); }
static void test_olmo3_q4_0(void **s) { (void)s; check_tiny_in("olmo3", "tiny-q4_0", false); }
static void test_olmo3_hf_dir(void **s) { (void)s; check_hf_dir("olmo3"); }
static void test_olmo3_yarn_hf_dir(void **s) { (void)s; check_hf_dir("olmo3-yarn"); }
static void test_olmo3_greedy(void **s) { (void)s; check_greedy("olmo3"); }
static void test_olmo3_training_loss(void **s) { (void)s; check_training_loss("olmo3"); }
/* make_phi3_goldens.py's phi3: qkv_proj and gate_up_proj fused in the files (split into q, k, v and gate, up
 * on load), 12 of 16 values of each head rotating (partial_rotary_factor 0.75), untied lm_head */
static void test_phi3_f32(void **s) { (void)s; check_tiny_in("phi3", "tiny-f32", false); }
static void test_phi3_q8_0(void **s) { (void)s; check_tiny_in("phi3", "tiny-q8_0", false); }
static void test_phi3_q4_0(void **s) { (void)s; check_tiny_in("phi3", "tiny-q4_0", false); }
static void test_phi3_nf4_on_load(void **s) { (void)s; check_tiny_in("phi3", "tiny-f32", true); }
static void test_phi3_hf_dir(void **s) { (void)s; check_hf_dir("phi3"); }
static void test_phi3_greedy(void **s) { (void)s; check_greedy("phi3"); }
static void test_phi3_training_loss(void **s) { (void)s; check_training_loss("phi3"); }
/* phi3 with LongRoPE (Phi-3.5-mini, Phi-4-mini): short factors within original_max_position_embeddings
 * (256), cos and sin times the attention factor sqrt(1 + ln 4 / ln 256); GGUF rope_factors_short and
 * phi3.rope.scaling.attn_factor, config.json's rope_scaling */
static void test_phi3_longrope_f32(void **s) { (void)s; check_tiny_in("phi3-longrope", "tiny-f32", false); }
static void test_phi3_longrope_hf_dir(void **s) { (void)s; check_hf_dir("phi3-longrope"); }
static void test_phi3_longrope_greedy(void **s) { (void)s; check_greedy("phi3-longrope"); }
/* beyond the original positions: transformers picks long_factor for a pass whose positions reach 256
 * (make_longrope_long_goldens.py, on the bf16 hf/ directory): one pass of 264 tokens (its last 8 rows'
 * logits), and greedy decoding through the cache from a 250-token prompt (short factors) across position 256
 * (each step's pass: long factors for the new token, the cached keys as they were), as transformers' model
 * forward through its DynamicCache gives them */
static void test_phi3_longrope_long(void **state)
{
    (void)state;
    char path[1024];
    pt_backend *be = cpu();
    pt_model m;
    pt_load_options lo = {.load_in_4bit = false};
    snprintf(path, sizeof path, "%s/tests/data/phi3-longrope/hf", srcdir());
    pt_status st = model_load(path, NULL, &lo, be, &m, NULL, NULL, 0);
    if (st) print_error("%s\n", err_message());
    assert_int_equal(st, PT_OK);
    assert_true(m.cfg.rope_short_max == 256 && fabsf(m.cfg.rope_mscale - 1.118034f) < 1e-6f && m.cfg.rope_dim == 12);
    int n, vocab = m.cfg.vocab;
    snprintf(path, sizeof path, "%s/tests/data/phi3-longrope/long.ids.txt", srcdir());
    int32_t *ids = read_ids(path, &n);
    assert_int_equal(n, 264);
    snprintf(path, sizeof path, "%s/tests/data/phi3-longrope/long.tail.logits.f32", srcdir());
    float *ref = read_f32(path, (size_t)8 * vocab), *got = malloc(sizeof(float) * (size_t)n * vocab);
    assert_non_null(got);
    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(&m, n, &kv), PT_OK);
    assert_int_equal(forward_tokens(&m, NULL, &kv, ids, n, got, false), PT_OK);
    double err = max_rel_err(got + (size_t)(n - 8) * vocab, ref, (size_t)8 * vocab);
    print_message("phi3-longrope: 264 tokens in one pass (long factors), last 8 rows vs transformers: %.3g\n", err);
    assert_true(err <= 1e-4);
    FILE *f;
    snprintf(path, sizeof path, "%s/tests/data/phi3-longrope/long.greedy.txt", srcdir());
    assert_non_null(f = fopen(path, "r"));
    int32_t want[12];
    for (int i = 0; i < 250; i++) assert_int_equal(fscanf(f, "%d", &ids[i]), 1);
    for (int i = 0; i < 12; i++) assert_int_equal(fscanf(f, "%d", &want[i]), 1);
    fclose(f);
    kv.n_past = 0;
    assert_int_equal(forward_tokens(&m, NULL, &kv, ids, 250, got, true), PT_OK);
    for (int i = 0; i < 12; i++) {
        int32_t best = 0;
        for (int v = 1; v < vocab; v++)
            if (got[v] > got[best]) best = v;
        if (best != want[i]) fail_msg("greedy token %d (position %d) is %d, transformers' %d", i, 250 + i, best, want[i]);
        if (i < 11) assert_int_equal(forward_tokens(&m, NULL, &kv, &best, 1, got, true), PT_OK);
    }
    print_message("phi3-longrope: 12 greedy tokens across position 256 through the cache equal transformers'\n");
    kv_cache_free(&m, &kv);
    free(ids);
    free(ref);
    free(got);
    model_free(&m);
    backend_close(be);
}
/* YaRN (rope_type yarn): qwen3 with factor 4 over original_max_position_embeddings 64 (the ramp over pairs
 * 0..4 of 12, cos and sin times 1 + 0.1 ln 4), from GGUF (qwen3.rope.scaling.type yarn as llama.cpp's converter
 * writes it) and config.json's rope_parameters; a Mistral with every optional key (beta_fast 8, beta_slow 0.5,
 * truncate false, mscale 1 / mscale_all_dim 0.5) in transformers 4's rope_scaling form */
static void test_qwen3_yarn_f32(void **s) { (void)s; check_tiny_in("qwen3-yarn", "tiny-f32", false); }
static void test_qwen3_yarn_hf_dir(void **s) { (void)s; check_hf_dir("qwen3-yarn"); }
static void test_qwen3_yarn_greedy(void **s) { (void)s; check_greedy("qwen3-yarn"); }
static void test_mistral_yarn_hf_dir(void **s) { (void)s; check_hf_dir("mistral-yarn"); }
static void test_yarn_config(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    load_model(be, "qwen3-yarn", "tiny-f32", false, &m);
    assert_float_equal(m.cfg.rope_mscale, 1.0 + 0.1 * log(4.0), 1e-6);
    assert_true(m.cfg.rope_short_max == 0); /* no position limit: YaRN has one set of frequencies */
    model_free(&m);
    backend_close(be);
}
static void test_mistral_head_dim_f32(void **s) { (void)s; check_tiny_in("mistral", "tiny-f32", false); }
static void test_mistral_head_dim_q4_0(void **s) { (void)s; check_tiny_in("mistral", "tiny-q4_0", false); }
static void test_mistral_head_dim_hf_dir(void **s) { (void)s; check_hf_dir("mistral"); }
static void test_mistral_head_dim_greedy(void **s) { (void)s; check_greedy("mistral"); }

/* SmolLM3's GGUF has no key for its NoPE layers (llama.cpp: every 4th); Granite's has its multipliers. */
static void test_smollm3_config(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    load_model(be, "smollm3", "tiny-q4_0", false, &m);
    assert_string_equal(arch_name(m.cfg.arch), "smollm3");
    assert_true(m.cfg.tied_embeddings && m.cfg.head_dim == 24 && m.cfg.dim == 64 && m.cfg.nope_period == 4);
    for (int l = 0; l < 5; l++) assert_int_equal(model_layer_rope(&m.cfg, l), l != 3);
    model_free(&m);
    load_model(be, "granite", "tiny-q4_0", false, &m); /* granite.embedding_scale, attention.scale, ... */
    assert_string_equal(arch_name(m.cfg.arch), "granite");
    assert_true(m.cfg.embed_scale == 12.0f && m.cfg.attn_scale == 0.1f && m.cfg.residual_scale == 0.22f &&
                m.cfg.logit_scale == 8.0f && m.cfg.nope_period == 0);
    model_free(&m);
    load_model(be, "olmo2", "tiny-q4_0", false, &m); /* no pre-norms; q/k norms of 64 and 32 values */
    assert_string_equal(arch_name(m.cfg.arch), "olmo2");
    assert_true(m.cfg.no_pre_norms && m.cfg.post_norms && m.cfg.qk_norm && m.cfg.qk_norm_full && !m.cfg.tied_embeddings);
    assert_null(m.layers[1].w[W_ATTN_NORM].data);
    assert_null(m.layers[1].w[W_FFN_NORM].data);
    assert_true(tensor_numel(&m.layers[1].w[W_Q_NORM]) == 64 && tensor_numel(&m.layers[1].w[W_K_NORM]) == 32);
    assert_int_equal(model_layer_window(&m.cfg, 0), 0);
    model_free(&m);
    load_model(be, "olmo3", "tiny-q4_0", false, &m); /* olmo2 with olmo2.attention.sliding_window 6 */
    assert_string_equal(arch_name(m.cfg.arch), "olmo2");
    assert_true(m.cfg.no_pre_norms && m.cfg.sliding_window == 6 && m.cfg.rope_theta_local == m.cfg.rope_theta);
    for (int l = 0; l < 5; l++) assert_int_equal(model_layer_window(&m.cfg, l), l == 3 ? 0 : 6);
    model_free(&m);
    load_model(be, "phi3", "tiny-q4_0", false, &m); /* attn_qkv [128, 64] and ffn_up [256, 64] split on load */
    assert_string_equal(arch_name(m.cfg.arch), "phi3");
    assert_true(m.cfg.rope_dim == 12 && model_rope_dim(&m.cfg) == 12 && m.cfg.head_dim == 16 && !m.cfg.tied_embeddings);
    assert_true(m.layers[1].w[W_Q].shape[0] == 64 && m.layers[1].w[W_K].shape[0] == 32 &&
                m.layers[1].w[W_V].shape[0] == 32 && m.layers[1].w[W_GATE].shape[0] == 128 &&
                m.layers[1].w[W_UP].shape[0] == 128 && m.layers[1].w[W_V].dtype == PT_Q4_0);
    model_free(&m);
    load_model(be, "ministral3", "tiny-q4_0", false, &m); /* mistral3.attention.temperature_scale, YaRN's log mul */
    assert_string_equal(arch_name(m.cfg.arch), "mistral3");
    assert_true(m.cfg.q_temp_beta == 0.5f && m.cfg.q_temp_period == 8 && m.cfg.head_dim == 24 &&
                fabsf(model_rope_mscale(&m.cfg) - 1.0f) < 1e-6f && !m.cfg.tied_embeddings);
    model_free(&m);
    load_model(be, "mistral", "tiny-q4_0", false, &m);
    assert_string_equal(arch_name(m.cfg.arch), "llama");
    assert_true(m.cfg.head_dim == 24 && m.cfg.nope_period == 0 && model_layer_rope(&m.cfg, 3));
    model_free(&m);
    backend_close(be);
}

/* GGUF files that parse but are not usable models: one clear error each, nothing leaked. */
static void test_bad_models(void **state)
{
    (void)state;
    const char *cases[][3] = {
        {"llama", "bad-arch", "bad-arch.gguf: architecture \"bert\" is not supported yet; supported: llama (Llama "
                              "2/3, Mistral, SmolLM2, TinyLlama), qwen2 (Qwen2, Qwen2.5), gemma2 (Gemma 2), qwen3 (Qwen3, "
                              "DeepSeek-R1 Qwen3 distills), smollm3 (SmolLM3), granite (Granite 3.x), olmo2 (OLMo 2, OLMo 3), gemma3 "
                              "(Gemma 3 text), phi3 (Phi-3, Phi-3.5, Phi-4, Phi-4-mini), qwen3moe (Qwen3-MoE), gemma4 (Gemma 4 "
                              "text), qwen35 (Qwen3.5 text), mistral3 (Ministral 3), gpt-oss (gpt-oss-20b, gpt-oss-120b)"},
        {"llama", "bad-missing-tensor", "bad-missing-tensor.gguf: tensor blk.0.attn_norm.weight is missing; is this a "
                                        "complete model file?"},
        {"llama", "bad-shape", "bad-shape.gguf: tensor blk.0.attn_q.weight has shape [48, 32], expected [32, 32] for "
                               "this model"},
        {"qwen2", "bad-no-bias", "bad-no-bias.gguf: tensor blk.0.attn_q.bias is missing; is this a complete model "
                                 "file?"},
        {"gemma2", "bad-value-length", "bad-value-length.gguf: gemma2.attention.value_length = 4 differs from the key "
                                       "length 8; ptrain needs values and keys of one head size"},
        {"gemma2", "bad-softcap", "bad-softcap.gguf: gemma2.final_logit_softcapping = -30 must be a finite number >= "
                                  "0"},
        {"gemma2", "bad-no-post-norm", "bad-no-post-norm.gguf: tensor blk.0.post_attention_norm.weight is missing; is "
                                       "this a complete model file?"},
    };
    pt_backend *be = cpu();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/data/%s/%s.gguf", srcdir(), cases[i][0], cases[i][1]);
        gguf_file f;
        assert_int_equal(gguf_open(path, &f), PT_OK);
        pt_model m;
        assert_int_equal(model_from_gguf(&f, be, NULL, &m), PT_ERR_USER);
        const char *msg = err_message();
        const char *tail = strstr(msg, cases[i][2]);
        if (!tail) print_error("got: %s\n", msg);
        assert_non_null(tail);
        gguf_close(&f);
    }
    backend_close(be);
}

/* ---- damaged weights (src/model/weight_check.c) ---- */

/* Every GGUF block format, on the dequantization vectors of tests/data/gguf (whose fp16 fields sit
 * where gguf-py puts them): a NaN written into a block's scale or min is named, and the block then
 * dequantizes to a non-finite value (the field really is that block's scale); with every scale
 * and min zero the matrix counts as all zero, and it dequantizes to zeros. */
static void test_weight_check_blocks(void **state)
{
    (void)state;
    const struct {
        const char *name;
        pt_dtype dtype;
        int values, bytes, fields, off[2];
    } fmt[] = {
        {"q4_0", PT_Q4_0, 32, 18, 1, {0}},      {"q4_1", PT_Q4_1, 32, 20, 2, {0, 2}},
        {"q5_0", PT_Q5_0, 32, 22, 1, {0}},      {"q5_1", PT_Q5_1, 32, 24, 2, {0, 2}},
        {"q8_0", PT_Q8_0, 32, 34, 1, {0}},      {"q2_k", PT_Q2_K, 256, 84, 2, {80, 82}},
        {"q3_k", PT_Q3_K, 256, 110, 1, {108}},  {"q4_k", PT_Q4_K, 256, 144, 2, {0, 2}},
        {"q5_k", PT_Q5_K, 256, 176, 2, {0, 2}}, {"q6_k", PT_Q6_K, 256, 210, 1, {208}},
    };
    for (size_t i = 0; i < sizeof fmt / sizeof fmt[0]; i++) {
        char path[1024], want[256];
        snprintf(path, sizeof path, "%s/tests/data/gguf/dequant_%s.bin", srcdir(), fmt[i].name);
        size_t size;
        uint8_t *blocks = read_file(path, &size);
        int64_t nblocks = (int64_t)size / fmt[i].bytes, n = nblocks * fmt[i].values, last = nblocks - 1;
        float *out = malloc(sizeof(float) * (size_t)n);
        weight_tally t;
        weight_tally_init(&t, "m.gguf", 100);
        assert_int_equal(weight_check(&t, "m.gguf", "w", WEIGHT_PROJECTION, fmt[i].dtype, blocks, n, n), PT_OK);
        assert_int_equal(t.zero_projections, 0);
        for (int k = 0; k < fmt[i].fields; k++) {
            uint8_t *field = blocks + last * fmt[i].bytes + fmt[i].off[k], keep[2] = {field[0], field[1]};
            field[0] = 0x00, field[1] = 0x7e; /* fp16 NaN */
            assert_int_equal(weight_check(&t, "m.gguf", "w", WEIGHT_PROJECTION, fmt[i].dtype, blocks, n, n), PT_ERR_USER);
            snprintf(want, sizeof want, "m.gguf: tensor w (%s) holds NaN in the fp16 %s of block %lld (its values %lld",
                     fmt[i].name, k ? "min" : "scale", (long long)last, (long long)(last * fmt[i].values));
            if (!strstr(err_message(), want)) fail_msg("got: %s\nwant: %s", err_message(), want);
            assert_int_equal(quant_dequantize_row(fmt[i].dtype, blocks, out, n), PT_OK);
            bool nonfinite = false;
            for (int64_t j = last * fmt[i].values; j < n; j++) nonfinite |= !isfinite(out[j]);
            assert_true(nonfinite);
            field[0] = keep[0], field[1] = keep[1];
        }
        for (int64_t b = 0; b < nblocks; b++)
            for (int k = 0; k < fmt[i].fields; k++) memset(blocks + b * fmt[i].bytes + fmt[i].off[k], 0, 2);
        assert_int_equal(weight_check(&t, "m.gguf", "w", WEIGHT_PROJECTION, fmt[i].dtype, blocks, n, n), PT_OK);
        assert_int_equal(t.zero_projections, 1);
        assert_int_equal(quant_dequantize_row(fmt[i].dtype, blocks, out, n), PT_OK);
        for (int64_t j = 0; j < n; j++) assert_true(out[j] == 0.0f);
        free(out);
        free(blocks);
    }
}

/* tests/data/llama/<name>.gguf as an image in memory (img, a copy of orig), opened as "tiny.gguf" */
static void open_copy(const uint8_t *orig, uint8_t *img, size_t size, gguf_file *f)
{
    memcpy(img, orig, size);
    assert_int_equal(gguf_open_memory("tiny.gguf", img, size, f), PT_OK);
}

static uint8_t *tensor_bytes(const gguf_file *f, const char *name)
{
    const gguf_tensor *g = gguf_find_tensor(f, name);
    assert_non_null(g);
    return (uint8_t *)g->data; /* in our own image */
}

/* every value (F32) or every block's scale and min (Q4_1) of a tensor set to zero */
static void zero_tensor(const gguf_file *f, const char *name)
{
    const gguf_tensor *g = gguf_find_tensor(f, name);
    assert_true(g && (g->dtype == PT_F32 || g->dtype == PT_Q4_1));
    for (size_t off = 0; off < g->nbytes; off += g->dtype == PT_F32 ? g->nbytes : 20)
        memset((uint8_t *)g->data + off, 0, g->dtype == PT_F32 ? g->nbytes : 4);
}

/* Load the image: the error's text must hold want (NULL: it loads, and stderr must hold warn, or
 * say nothing of all-zero tensors when warn is NULL). */
static void expect_load(pt_backend *be, gguf_file *f, const char *want, const char *warn)
{
    pt_model m;
    capture_stderr_begin();
    pt_status st = model_from_gguf(f, be, NULL, &m);
    expect_load_outcome(st, capture_stderr_end(), want, warn, &m);
    gguf_close(f);
}

/* Copies of the tiny Q4_1 and F32 Llamas with one thing broken each: refused naming the file, the
 * tensor and the block or element; all-zero embeddings or projections refused; one all-zero
 * projection warned about by name; all-zero norm weights accepted without a word. */
static void test_damaged_gguf(void **state)
{
    (void)state;
    char path[1024];
    size_t size;
    snprintf(path, sizeof path, "%s/tests/data/llama/tiny-gqa-q4_1.gguf", srcdir());
    uint8_t *orig = read_file(path, &size), *img = malloc(size);
    pt_backend *be = cpu();
    gguf_file f;
    open_copy(orig, img, size, &f);
    uint8_t *p = tensor_bytes(&f, "blk.1.attn_k.weight") + 3 * 20;
    p[0] = 0x00, p[1] = 0x7e;
    expect_load(be, &f, "tiny.gguf: tensor blk.1.attn_k.weight (q4_1) holds NaN in the fp16 scale of block 3 (its "
                        "values 96 to 127, row 1): the file is damaged", NULL);
    open_copy(orig, img, size, &f);
    p = tensor_bytes(&f, "blk.2.ffn_down.weight");
    p[2] = 0x00, p[3] = 0xfc;
    expect_load(be, &f, "tensor blk.2.ffn_down.weight (q4_1) holds -inf in the fp16 min of block 0 (its values 0 to "
                        "31, row 0)", NULL);
    open_copy(orig, img, size, &f);
    float inf = INFINITY;
    memcpy(tensor_bytes(&f, "blk.0.attn_norm.weight") + 4 * 7, &inf, 4);
    expect_load(be, &f, "tiny.gguf: tensor blk.0.attn_norm.weight (f32) holds +inf at element 7: the file is damaged "
                        "(an interrupted download, a broken conversion or a bad disk): download or convert the model "
                        "again", NULL);
    open_copy(orig, img, size, &f);
    zero_tensor(&f, "token_embd.weight");
    expect_load(be, &f, "tiny.gguf: tensor token_embd.weight is all zeros: every input would give the same output and "
                        "training would stay at loss = ln(vocab) = 5.6630", NULL);
    open_copy(orig, img, size, &f);
    char name[96];
    for (int l = 0; l < 3; l++)
        for (int slot = W_Q; slot <= W_DOWN; slot++)
            if (slot != W_FFN_NORM) zero_tensor(&f, model_gguf_tensor_name(&(pt_model_config){.arch = PT_ARCH_LLAMA}, l,
                                                                            slot, name, sizeof name, NULL));
    expect_load(be, &f, "tiny.gguf: every projection matrix (21, e.g. blk.0.attn_q.weight) is all zeros", NULL);
    open_copy(orig, img, size, &f);
    zero_tensor(&f, "blk.1.attn_v.weight");
    expect_load(be, &f, NULL, "ptrain: warning: tiny.gguf: tensor blk.1.attn_v.weight is all zeros: that projection "
                              "contributes nothing");
    open_copy(orig, img, size, &f);
    zero_tensor(&f, "blk.0.attn_norm.weight");
    zero_tensor(&f, "output_norm.weight");
    expect_load(be, &f, NULL, NULL);
    free(orig);
    free(img);
    snprintf(path, sizeof path, "%s/tests/data/llama/tiny-gqa-f32.gguf", srcdir());
    orig = read_file(path, &size), img = malloc(size);
    open_copy(orig, img, size, &f);
    float nan = NAN;
    memcpy(tensor_bytes(&f, "blk.0.attn_q.weight") + 4 * (2 * 64 + 5), &nan, 4);
    expect_load(be, &f, "tiny.gguf: tensor blk.0.attn_q.weight (f32) holds NaN at element 133 (row 2, column 5)", NULL);
    free(orig);
    free(img);
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
        assert_int_equal(forward_tokens(&m, NULL, &kv, ids, n, logits, true), PT_OK);
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

/* ---- qwen3 (tests/reference/make_qwen3_goldens.py: q/k norms per head, head_dim 24 != 64/4) ---- */

static void test_qwen3_f32(void **s) { (void)s; check_tiny_in("qwen3", "tiny-f32", false); }
static void test_qwen3_q8_0(void **s) { (void)s; check_tiny_in("qwen3", "tiny-q8_0", false); }
static void test_qwen3_q4_0(void **s) { (void)s; check_tiny_in("qwen3", "tiny-q4_0", false); }
static void test_qwen3_nf4_on_load(void **s) { (void)s; check_tiny_in("qwen3", "tiny-f32", true); }
static void test_qwen3_hf_dir(void **s) { (void)s; check_hf_dir("qwen3"); }
static void test_qwen3_greedy(void **s) { (void)s; check_greedy("qwen3"); }
static void test_qwen3_training_loss(void **s) { (void)s; check_training_loss("qwen3"); }

static void test_qwen3_config(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model q;
    load_model(be, "qwen3", "tiny-q4_0", false, &q);
    assert_string_equal(arch_name(q.cfg.arch), "qwen3");
    assert_true(q.cfg.qk_norm && !q.cfg.qkv_bias && !q.cfg.post_norms && q.cfg.act == PT_ACT_SILU);
    assert_true(q.cfg.head_dim == 24 && q.cfg.dim == 64 && q.cfg.n_heads == 4 && q.cfg.tied_embeddings);
    assert_true(q.cfg.embed_scale == 1.0f && model_layer_window(&q.cfg, 0) == 0);
    assert_int_equal(q.layers[1].w[W_Q_NORM].shape[0], 24);
    assert_int_equal(q.layers[1].w[W_K_NORM].shape[0], 24);
    assert_null(q.layers[1].w[W_Q_BIAS].data);
    model_free(&q);
    backend_close(be);
}

/* ---- gemma3 (tests/reference/make_gemma3_goldens.py: q/k norms, 5 local layers of 6 on their own
 * rope base, no soft-caps; 7 layers, window 6). No NF4-on-load case: ptrain's NF4 quantizer
 * (src/backend/nf4.c) and bitsandbytes 0.50.2's give a different double-quantized absmax to a few
 * blocks of these 35 matrices (a family-independent difference, up to 2.4e-3 on 60 weights), so
 * tiny-f32.nf4.logits.f32 is not a bound for the family's code; hf-bnb4 (test_hf_model) reads
 * bitsandbytes' own codes. -------------------------------------------------------------------- */

static void test_gemma3_f32(void **s) { (void)s; check_tiny_in("gemma3", "tiny-f32", false); }
static void test_gemma3_q8_0(void **s) { (void)s; check_tiny_in("gemma3", "tiny-q8_0", false); }
static void test_gemma3_q4_0(void **s) { (void)s; check_tiny_in("gemma3", "tiny-q4_0", false); }
static void test_gemma3_hf_dir(void **s) { (void)s; check_hf_dir("gemma3"); }
static void test_gemma3_greedy(void **s) { (void)s; check_greedy("gemma3"); }
static void test_gemma3_training_loss(void **s) { (void)s; check_training_loss("gemma3"); }

static void test_gemma3_config(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model g;
    load_model(be, "gemma3", "tiny-q4_0", false, &g);
    assert_string_equal(arch_name(g.cfg.arch), "gemma3");
    assert_true(g.cfg.qk_norm && g.cfg.post_norms && g.cfg.act == PT_ACT_GELU_TANH && g.cfg.tied_embeddings);
    assert_true(g.cfg.head_dim == 24 && g.cfg.embed_scale == sqrtf(64.0f) && g.cfg.attn_scale == 1.0f / sqrtf(24.0f));
    assert_true(g.cfg.attn_softcap == 0.0f && g.cfg.final_softcap == 0.0f && g.cfg.sliding_window == 6);
    for (int l = 0; l < 7; l++) /* transformers' layer_types: every sixth layer is global */
        assert_int_equal(model_layer_window(&g.cfg, l), l == 5 ? 0 : 6);
    assert_true(g.cfg.rope_theta == 1e6f && g.cfg.rope_theta_local == 1e4f && model_freq_count(&g.cfg) == 24);
    /* global layers: 1e6 with linear scaling 2; local ones 1e4 unscaled */
    assert_float_equal(model_layer_freq(&g, 5, NULL, 0)[1], powf(1e6f, -2.0f / 24) / 2, 1e-9);
    assert_float_equal(model_layer_freq(&g, 6, NULL, 0)[1], powf(1e4f, -2.0f / 24), 1e-9);
    model_free(&g);
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
        cmocka_unit_test(test_smollm3_f32),         cmocka_unit_test(test_smollm3_q8_0),
        cmocka_unit_test(test_smollm3_q4_0),        cmocka_unit_test(test_smollm3_nf4_on_load),
        cmocka_unit_test(test_smollm3_hf_dir),      cmocka_unit_test(test_smollm3_greedy),
        cmocka_unit_test(test_smollm3_training_loss), cmocka_unit_test(test_smollm3_config),
        cmocka_unit_test(test_granite_f32),         cmocka_unit_test(test_granite_q4_0),
        cmocka_unit_test(test_granite_nf4_on_load), cmocka_unit_test(test_granite_hf_dir),
        cmocka_unit_test(test_granite_greedy),      cmocka_unit_test(test_granite_training_loss),
        cmocka_unit_test(test_granite4_gguf),       cmocka_unit_test(test_mistral3_f32),        cmocka_unit_test(test_mistral3_q4_0),
        cmocka_unit_test(test_mistral3_greedy),
        cmocka_unit_test(test_olmo2_f32),           cmocka_unit_test(test_olmo2_q8_0),
        cmocka_unit_test(test_olmo2_q4_0),
        cmocka_unit_test(test_olmo2_hf_dir),        cmocka_unit_test(test_olmo2_greedy),
        cmocka_unit_test(test_olmo2_training_loss),
        cmocka_unit_test(test_olmo3_f32),           cmocka_unit_test(test_olmo3_q8_0),
        cmocka_unit_test(test_olmo3_q4_0),          cmocka_unit_test(test_olmo3_hf_dir),
        cmocka_unit_test(test_olmo3_yarn_hf_dir),   cmocka_unit_test(test_olmo3_greedy),
        cmocka_unit_test(test_olmo3_training_loss),
        cmocka_unit_test(test_phi3_f32),            cmocka_unit_test(test_phi3_q8_0),
        cmocka_unit_test(test_phi3_q4_0),           cmocka_unit_test(test_phi3_nf4_on_load),
        cmocka_unit_test(test_phi3_hf_dir),         cmocka_unit_test(test_phi3_greedy),
        cmocka_unit_test(test_phi3_training_loss),
        cmocka_unit_test(test_phi3_longrope_f32),   cmocka_unit_test(test_phi3_longrope_hf_dir),
        cmocka_unit_test(test_phi3_longrope_greedy), cmocka_unit_test(test_phi3_longrope_long),
        cmocka_unit_test(test_qwen3_yarn_f32),       cmocka_unit_test(test_qwen3_yarn_hf_dir),
        cmocka_unit_test(test_qwen3_yarn_greedy),    cmocka_unit_test(test_mistral_yarn_hf_dir),
        cmocka_unit_test(test_yarn_config),
        cmocka_unit_test(test_mistral_head_dim_f32), cmocka_unit_test(test_mistral_head_dim_q4_0),
        cmocka_unit_test(test_mistral_head_dim_hf_dir), cmocka_unit_test(test_mistral_head_dim_greedy),
        cmocka_unit_test(test_qwen2_f32),           cmocka_unit_test(test_qwen2_q8_0),
        cmocka_unit_test(test_qwen2_q4_0),          cmocka_unit_test(test_qwen2_nf4_on_load),
        cmocka_unit_test(test_gemma2_f32),          cmocka_unit_test(test_gemma2_q8_0),
        cmocka_unit_test(test_gemma2_q4_0),         cmocka_unit_test(test_gemma2_nf4_on_load),
        cmocka_unit_test(test_family_configs),      cmocka_unit_test(test_qwen2_greedy),
        cmocka_unit_test(test_gemma2_greedy),       cmocka_unit_test(test_qwen2_training_loss),
        cmocka_unit_test(test_gemma2_training_loss), cmocka_unit_test(test_qwen2_hf_dir),
        cmocka_unit_test(test_gemma2_hf_dir),
        cmocka_unit_test(test_qwen3_f32),           cmocka_unit_test(test_qwen3_q8_0),
        cmocka_unit_test(test_qwen3_q4_0),          cmocka_unit_test(test_qwen3_nf4_on_load),
        cmocka_unit_test(test_qwen3_hf_dir),        cmocka_unit_test(test_qwen3_greedy),
        cmocka_unit_test(test_qwen3_training_loss), cmocka_unit_test(test_qwen3_config),
        cmocka_unit_test(test_gemma3_f32),          cmocka_unit_test(test_gemma3_q8_0),
        cmocka_unit_test(test_gemma3_q4_0),         cmocka_unit_test(test_gemma3_hf_dir),
        cmocka_unit_test(test_gemma3_greedy),       cmocka_unit_test(test_gemma3_training_loss),
        cmocka_unit_test(test_gemma3_config),
        cmocka_unit_test(test_bad_models),          cmocka_unit_test(test_smollm2_next_token),
        cmocka_unit_test(test_weight_check_blocks), cmocka_unit_test(test_damaged_gguf),
    };
    return cmocka_run_group_tests_name("model", tests, NULL, NULL);
}
