/* test_qwen35.c — the Qwen3.5 text family (Gated DeltaNet hybrid) against transformers 5.25
 * (tests/reference/make_qwen35_goldens.py: a tiny random fp32 Qwen3_5ForCausalLM with 3 DeltaNet layers, a gated
 * full-attention layer and one more DeltaNet layer, fewer key than value heads, partial rotary; prompts longer
 * than transformers' chunk of 64): prompt logits within 1e-4 of transformers' (relative to the largest), the same
 * last logits when the prompt goes through the cache in pieces (the conv and recurrent states carried), a cacheless
 * pass of two packed sequences equal to each run alone (the states reset at the boundary), greedy tokens equal to
 * transformers' generate, the multimodal checkpoint's text tower (model.language_model.*, the vision tower not
 * loaded) as the text model, and NF4 on load against bitsandbytes' NF4. */
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

static void load_dir(pt_backend *be, const char *dir, bool nf4, pt_model *m)
{
    char path[1024], resolved[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/hf", srcdir(), dir);
    pt_load_options lo = {.load_in_4bit = nf4};
    pt_status st = model_load(path, NULL, &lo, be, m, NULL, resolved, sizeof resolved);
    if (st) print_error("%s\n", err_message());
    assert_int_equal(st, PT_OK);
}

static float *golden(const char *dir, const char *name, size_t count)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/%s", srcdir(), dir, name);
    return read_f32(path, count);
}

static int32_t *golden_ids(const char *dir, const char *name, int *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/%s", srcdir(), dir, name);
    return read_ids(path, n);
}

/* The prompt's logits through a fresh cache, all at once and then in three pieces. */
static double check_prompt(pt_model *m, const char *dir, const char *logits, double tol)
{
    int n;
    int32_t *ids = golden_ids(dir, "hf.ids.txt", &n);
    size_t count = (size_t)n * (size_t)m->cfg.vocab;
    float *ref = golden(dir, logits, count), *got = malloc(sizeof(float) * count);
    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(m, n, &kv), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids, n, got, false), PT_OK);
    double err = max_rel_err(got, ref, count);
    print_message("%s: %d-token prompt, max relative error of %zu logits vs transformers: %.3g\n", dir, n, count, err);
    assert_true(err <= tol);
    kv_cache_free(m, &kv);
    assert_int_equal(kv_cache_init(m, n, &kv), PT_OK);
    int cut1 = n / 3, cut2 = n / 2 + 1;
    assert_int_equal(forward_tokens(m, NULL, &kv, ids, cut1, got, true), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids + cut1, 1, got, true), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids + cut1 + 1, cut2 - cut1 - 1, got, true), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids + cut2, n - cut2, got, true), PT_OK);
    double piece = max_rel_err(got, ref + (size_t)(n - 1) * m->cfg.vocab, (size_t)m->cfg.vocab);
    print_message("  through the cache in pieces of %d, 1, %d and %d: %.3g\n", cut1, cut2 - cut1 - 1, n - cut2, piece);
    assert_true(piece <= tol);
    kv_cache_free(m, &kv);
    free(ids);
    free(ref);
    free(got);
    return err;
}

static void test_text_fp32(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    load_dir(be, "qwen35", false, &m);
    assert_string_equal(arch_name(m.cfg.arch), "qwen35");
    assert_true(m.cfg.full_period == 4 && model_layer_linear(&m.cfg, 0) && !model_layer_linear(&m.cfg, 3) &&
                model_layer_linear(&m.cfg, 4));
    assert_true(m.cfg.lin_k_heads == 2 && m.cfg.lin_v_heads == 4 && m.cfg.rope_dim == 6 && m.cfg.attn_gate);
    assert_null(m.layers[0].w[W_Q].data);
    assert_non_null(m.layers[3].w[W_Q_GATE].data);
    assert_null(m.layers[3].w[W_LIN_QKV].data);
    check_prompt(&m, "qwen35", "hf.logits.f32", 1e-4);
    model_free(&m);
    backend_close(be);
}

/* m's logits of a cacheless pass over rows with segments (hid -> norm -> lm_head), into host logits. */
static void packed_logits(pt_model *m, const int32_t *ids, const int32_t *seg, int n, float *logits)
{
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n);
    for (int i = 0; i < n; i++) pos[i] = i == 0 || seg[i] != seg[i - 1] ? 0 : pos[i - 1] + 1;
    fwd_ctx c = forward_ctx(m, NULL, 1, n, pos, seg);
    pt_arena arena;
    fwd_bufs b;
    pt_tensor xn, rstd, out;
    for (int pass = 0; pass < 2; pass++) { /* measure, then run */
        if (pass == 0) arena_measure(&arena, m->be->act);
        else assert_int_equal(arena_open(&arena, m->be, arena.high), PT_OK);
        assert_int_equal(forward_take(&arena, &c, false, false, &b), PT_OK);
        assert_int_equal(arena_take(&arena, &xn, n, m->cfg.dim), PT_OK);
        assert_int_equal(arena_take_f32(&arena, &rstd, n, 1), PT_OK);
        assert_int_equal(arena_take_f32(&arena, &out, n, m->cfg.vocab), PT_OK);
        if (pass == 0) forward_bufs_free(&b);
    }
    assert_int_equal(forward_run(&c, ids, &b, NULL), PT_OK);
    assert_int_equal(backend_rmsnorm(m->be, &xn, &rstd, forward_output(&c, &b), &m->out_norm, m->cfg.norm_eps), PT_OK);
    assert_int_equal(backend_matmul(m->be, &out, &xn, &m->output, 0.0f), PT_OK);
    assert_int_equal(backend_download(m->be, &out, logits, out.nbytes), PT_OK);
    forward_bufs_free(&b);
    arena_close(&arena);
    free(pos);
}

/* Two sequences packed in one row: each one's logits as transformers gives them run alone. */
static void test_packed_rows(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    load_dir(be, "qwen35", false, &m);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/qwen35/hf.pack.txt", srcdir());
    int n;
    int32_t *all = read_ids(path, &n); /* the two lengths, then the ids */
    int la = all[0], lb = all[1];
    assert_int_equal(n, 2 + la + lb);
    int32_t *seg = malloc(sizeof(int32_t) * (size_t)(la + lb));
    for (int i = 0; i < la + lb; i++) seg[i] = i < la ? 0 : 1;
    size_t count = (size_t)(la + lb) * (size_t)m.cfg.vocab;
    float *ref = golden("qwen35", "hf.pack.logits.f32", count), *got = malloc(sizeof(float) * count);
    packed_logits(&m, all + 2, seg, la + lb, got);
    double err = max_rel_err(got, ref, count);
    print_message("qwen35: sequences of %d and %d packed in one row vs each alone in transformers: %.3g\n", la, lb,
                  err);
    assert_true(err <= 1e-4);
    free(all);
    free(seg);
    free(ref);
    free(got);
    model_free(&m);
    backend_close(be);
}

/* Greedy decoding through the cache: the prompt at once, then one token at a time (the recurrent form). */
static void test_greedy(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/qwen35/hf.greedy.txt", srcdir());
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    int32_t prompt[70], want[12];
    for (int i = 0; i < 70; i++) assert_int_equal(fscanf(f, "%d", &prompt[i]), 1);
    for (int i = 0; i < 12; i++) assert_int_equal(fscanf(f, "%d", &want[i]), 1);
    fclose(f);
    pt_backend *be = cpu();
    pt_model m;
    load_dir(be, "qwen35", false, &m);
    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(&m, 82, &kv), PT_OK);
    float *logits = malloc(sizeof(float) * (size_t)m.cfg.vocab);
    assert_int_equal(forward_tokens(&m, NULL, &kv, prompt, 70, logits, true), PT_OK);
    for (int i = 0; i < 12; i++) {
        int32_t best = 0;
        for (int v = 1; v < m.cfg.vocab; v++)
            if (logits[v] > logits[best]) best = v;
        assert_int_equal(best, want[i]);
        if (i < 11) assert_int_equal(forward_tokens(&m, NULL, &kv, &best, 1, logits, true), PT_OK);
    }
    print_message("qwen35: 12 greedy tokens after a 70-token prompt equal transformers' generate\n");
    free(logits);
    kv_cache_free(&m, &kv);
    model_free(&m);
    backend_close(be);
}

/* The multimodal checkpoint's text tower: the same weights under model.language_model.*. */
static void test_multimodal_text_tower(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    load_dir(be, "qwen35-vl", false, &m);
    assert_true(m.cfg.tied_embeddings && m.cfg.n_layers == 5);
    check_prompt(&m, "qwen35-vl", "hf.logits.f32", 1e-4);
    model_free(&m);
    backend_close(be);
}

/* NF4 on load: the projections whose rows are whole 64-value blocks become NF4 (q_proj's query and gate parts
 * each), against transformers on the same weights through bitsandbytes' NF4 (hf.nf4.logits.f32; on this random
 * model they differ from the fp32 weights' logits by 1.2 of the largest, so the check sees the rounding). */
static void test_nf4_on_load(void **state)
{
    (void)state;
    pt_backend *be = cpu();
    pt_model m;
    load_dir(be, "qwen35", true, &m);
    assert_int_equal(m.layers[3].w[W_Q].dtype, PT_NF4);
    assert_int_equal(m.layers[3].w[W_Q_GATE].dtype, PT_NF4);
    assert_int_equal(m.layers[0].w[W_LIN_QKV].dtype, PT_NF4);
    assert_int_equal(m.layers[0].w[W_LIN_OUT].dtype, PT_F32); /* 48 inputs: not whole blocks */
    assert_int_equal(m.layers[0].w[W_LIN_CONV].dtype, PT_F32);
    check_prompt(&m, "qwen35", "hf.nf4.logits.f32", 1e-4);
    model_free(&m);
    backend_close(be);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_fp32),   cmocka_unit_test(test_packed_rows),
        cmocka_unit_test(test_greedy),      cmocka_unit_test(test_multimodal_text_tower),
        cmocka_unit_test(test_nf4_on_load),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
