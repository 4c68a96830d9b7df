/* test_moe.c — mixtures of experts (Qwen3-MoE: src/forward/moe.c, the experts' loading in
 * src/model/load_hf.c, the ops of src/cpu/moe.c) against transformers.
 *
 * The tiny Qwen3-MoE of tests/reference/make_qwen3moe_goldens.py (3 layers, layer 1 dense through
 * mlp_only_layers, 4 experts, top-2, norm_topk_prob; bf16): its directory with the experts one by one
 * (hf/, as save_pretrained writes them) and fused (hf-fused/, mlp.experts.gate_up_proj [E, 2I, H]):
 * logits of 40 ids within 1e-4 (max relative error) of transformers' float64 logits on the same
 * weights, again through the KV cache in pieces, and 12 greedy tokens through the cache equal to
 * transformers'; with load_in_4bit every expert weight is NF4 (the router and lm_head are not) and
 * the logits and greedy tokens are those transformers computes on bitsandbytes' NF4 round trip of
 * the same weights. The route op against a direct computation (softmax, top-k, renormalisation),
 * parameter counts (total and active) against the tensors' sizes, the sparse layers config.json
 * makes, and the messages of refused configs. Training: LoRA on the attention against PEFT's gradients
 * (Qwen3-MoE, Mixtral), and with PEFT's target_parameters on the experts and the router
 * (make_moe_lora_goldens.py): loss and every gradient against PEFT's, with the aux load-balancing loss
 * (output_router_logits) its value against transformers' aux_loss (with and without an attention mask) and
 * the gradients of loss + coef·aux against PEFT's. */
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

#include <jansson.h>

#include "ptrain/forward.h"
#include "ptrain/lora.h"
#include "ptrain/step.h"
#include "ptrain/hf_model.h"
#include "ptrain/model_io.h"
#include "ptrain/quant.h"

static const char *family = "qwen3moe"; /* tests/data/<family>: qwen3moe or mixtral */

static void golden(const char *name, const char *ext, char *buf, size_t len)
{
    snprintf(buf, len, "%s/tests/data/%s/%s.%s", srcdir(), family, name, ext);
}

static void check_logits(pt_model *m, const char *name)
{
    char path[1024];
    int n;
    golden(name, "ids.txt", path, sizeof path);
    int32_t *ids = read_ids(path, &n);
    size_t count = (size_t)n * (size_t)m->cfg.vocab;
    golden(name, "logits.f32", path, sizeof path);
    float *ref = read_f32(path, count), *got = malloc(sizeof(float) * count);
    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(m, n, &kv), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids, n, got, false), PT_OK);
    double err = max_rel_err(got, ref, count);
    print_message("%s/%s: max relative error of %zu logits vs transformers: %.3g\n", family, name, count, err);
    assert_true(err <= 1e-4);
    kv.n_past = 0;
    assert_int_equal(forward_tokens(m, NULL, &kv, ids, n / 2, got, true), PT_OK);
    assert_int_equal(forward_tokens(m, NULL, &kv, ids + n / 2, n - n / 2, got, true), PT_OK);
    assert_true(max_rel_err(got, ref + (size_t)(n - 1) * m->cfg.vocab, (size_t)m->cfg.vocab) <= 1e-4);
    kv_cache_free(m, &kv);
    free(ids);
    free(ref);
    free(got);
}

static void check_greedy(pt_model *m, const char *name)
{
    char path[1024];
    golden(name, "greedy.txt", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f) fail_msg("%s: missing; tests/reference/make_%s_goldens.py writes it", path, family);
    int32_t prompt[8], want[12];
    for (int i = 0; i < 8; i++) assert_int_equal(fscanf(f, "%d", &prompt[i]), 1);
    for (int i = 0; i < 12; i++) assert_int_equal(fscanf(f, "%d", &want[i]), 1);
    fclose(f);
    pt_kv_cache kv;
    assert_int_equal(kv_cache_init(m, 20, &kv), PT_OK);
    float *logits = malloc(sizeof(float) * (size_t)m->cfg.vocab);
    assert_int_equal(forward_tokens(m, NULL, &kv, prompt, 8, logits, true), PT_OK);
    for (int i = 0; i < 12; i++) {
        int32_t best = 0;
        for (int v = 1; v < m->cfg.vocab; v++) best = logits[v] > logits[best] ? v : best;
        if (best != want[i]) fail_msg("%s: greedy token %d is %d, transformers' is %d", path, i, best, want[i]);
        if (i < 11) assert_int_equal(forward_tokens(m, NULL, &kv, &best, 1, logits, true), PT_OK);
    }
    print_message("%s/%s: 12 greedy tokens through the cache equal transformers'\n", family, name);
    free(logits);
    kv_cache_free(m, &kv);
}

static void load(const char *dir, bool nf4, pt_backend *be, pt_model *m)
{
    char path[1024], resolved[4096];
    snprintf(path, sizeof path, "%s/tests/data/%s/%s", srcdir(), family, dir);
    pt_load_options lo = {.load_in_4bit = nf4};
    if (model_load(path, NULL, &lo, be, m, NULL, resolved, sizeof resolved)) fail_msg("%s", err_message());
}

/* The layout: layers 0 and 2 sparse (router bf16, 4 x 3 experts), layer 1 dense. */
static void check_layout(const pt_model *m, pt_dtype expert)
{
    const pt_model_config *c = &m->cfg;
    assert_int_equal(c->arch, PT_ARCH_QWEN3MOE);
    assert_int_equal(c->n_experts, 4);
    assert_int_equal(c->n_experts_used, 2);
    assert_int_equal(c->moe_ffn_dim, 64);
    assert_true(c->moe_norm_topk);
    assert_true(model_layer_moe(c, 0) && !model_layer_moe(c, 1) && model_layer_moe(c, 2));
    assert_null(m->layers[1].experts);
    assert_null(m->layers[1].router.data);
    assert_non_null(m->layers[1].w[W_GATE].data);
    for (int l = 0; l < 3; l += 2) {
        assert_null(m->layers[l].w[W_GATE].data);
        assert_int_equal(m->layers[l].router.dtype, PT_BF16);
        assert_int_equal(m->layers[l].router.shape[0], 4);
        for (int i = 0; i < 4 * X_COUNT; i++) assert_int_equal(m->layers[l].experts[i].dtype, expert);
        assert_int_equal(m->layers[l].experts[3 * X_COUNT + X_DOWN].shape[0], 64);
    }
    assert_int_equal(m->output.dtype, PT_BF16);
}

/* Mixtral's: both layers sparse (6 experts, top-2, always renormalised), the sliding window of config.json. */
static void check_mixtral_layout(const pt_model *m, pt_dtype expert)
{
    const pt_model_config *c = &m->cfg;
    assert_int_equal(c->arch, PT_ARCH_MIXTRAL);
    assert_int_equal(c->n_experts, 6);
    assert_int_equal(c->n_experts_used, 2);
    assert_int_equal(c->moe_ffn_dim, 64);
    assert_int_equal(c->sliding_window, 12);
    assert_true(c->moe_norm_topk);
    for (int l = 0; l < 2; l++) {
        assert_true(model_layer_moe(c, l));
        assert_null(m->layers[l].w[W_GATE].data);
        assert_int_equal(m->layers[l].router.dtype, PT_BF16);
        assert_int_equal(m->layers[l].router.shape[0], 6);
        for (int i = 0; i < 6 * X_COUNT; i++) assert_int_equal(m->layers[l].experts[i].dtype, expert);
    }
}

/* gpt-oss's: both layers sparse (6 experts, top-2), layer 0 sliding (window 12), layer 1 full, YaRN, q/k/v/o biases,
 * sinks, the router's and experts' biases, the clamped SwiGLU; the experts, cut out of the x W layout, f32 (bf16
 * widened) or NF4. */
static void check_gptoss_layout(const pt_model *m, pt_dtype expert)
{
    const pt_model_config *c = &m->cfg;
    assert_int_equal(c->arch, PT_ARCH_GPTOSS);
    assert_int_equal(c->n_experts, 6);
    assert_int_equal(c->n_experts_used, 2);
    assert_int_equal(c->moe_ffn_dim, 64);
    assert_int_equal(model_layer_window(c, 0), 12);
    assert_int_equal(model_layer_window(c, 1), 0);
    assert_true(c->moe_norm_topk && c->o_bias && c->attn_sinks && c->moe_bias);
    assert_true(c->swiglu_limit == 7.0f && c->swiglu_alpha == 1.702f);
    assert_true(c->rope_mscale > 1.0f); /* YaRN's attention factor: 0.1 ln 4 + 1 */
    int64_t total, tensors = tensor_numel(&m->tok_embd) + tensor_numel(&m->output) + tensor_numel(&m->out_norm);
    for (int l = 0; l < 2; l++) {
        const pt_layer_weights *w = &m->layers[l];
        for (int i = 0; i < W_COUNT; i++) tensors += w->w[i].data ? tensor_numel(&w->w[i]) : 0;
        for (int i = 0; i < 6 * X_COUNT; i++) tensors += tensor_numel(&w->experts[i]);
        for (int x = 0; x < X_COUNT; x++) tensors += tensor_numel(&w->expert_bias[x]);
        tensors += tensor_numel(&w->router) + tensor_numel(&w->router_bias);
        assert_true(model_layer_moe(c, l));
        assert_int_equal(w->router_bias.shape[0], 6);
        assert_int_equal(w->w[W_SINKS].shape[0], 4);
        assert_int_equal(w->w[W_O_BIAS].shape[0], 64);
        assert_int_equal(w->expert_bias[X_GATE].shape[1], 64);
        assert_int_equal(w->expert_bias[X_DOWN].shape[0], 6);
        for (int i = 0; i < 6 * X_COUNT; i++) assert_int_equal(w->experts[i].dtype, expert);
        assert_int_equal(w->experts[5 * X_COUNT + X_DOWN].shape[0], 64);
    }
    model_param_counts(c, &total, NULL);
    assert_int_equal(total, tensors); /* the biases and sinks counted */
}

static void check_dir(const char *dir, bool nf4, const char *gold)
{
    pt_backend *be = cpu();
    pt_model m;
    load(dir, nf4, be, &m);
    if (!strcmp(family, "mixtral")) check_mixtral_layout(&m, nf4 ? PT_NF4 : PT_BF16);
    else if (!strcmp(family, "gptoss")) check_gptoss_layout(&m, strstr(dir, "mxfp4") ? PT_MXFP4 : nf4 ? PT_NF4 : PT_F32);
    else check_layout(&m, nf4 ? PT_NF4 : PT_BF16);
    check_logits(&m, gold);
    check_greedy(&m, gold);
    model_free(&m);
    backend_close(be);
}

static void test_experts_one_by_one(void **s) { (void)s; check_dir("hf", false, "hf"); }
static void test_experts_fused(void **s) { (void)s; check_dir("hf-fused", false, "hf"); }
static void test_experts_nf4(void **s)
{
    (void)s;
    check_dir("hf", true, "hf.nf4");
    check_dir("hf-fused", true, "hf.nf4");
}

/* backend_moe_route against softmax, top-k and renormalisation computed here in double. */
static void test_route(void **s)
{
    (void)s;
    pt_backend *be = cpu();
    enum { ROWS = 5, E = 6, K = 3 };
    float z[ROWS * E];
    for (int i = 0; i < ROWS * E; i++) z[i] = (float)sin(1.7 * i) * 3.0f;
    int64_t shape[2] = {ROWS, E};
    pt_tensor t = tensor_make(PT_F32, 2, shape);
    assert_int_equal(backend_alloc(be, &t), PT_OK);
    assert_int_equal(backend_upload(be, &t, z, sizeof z), PT_OK);
    for (int norm = 0; norm < 2; norm++) {
        int32_t ex[ROWS * K];
        float w[ROWS * K];
        assert_int_equal(backend_moe_route(be, ex, w, &t, K, norm), PT_OK);
        for (int r = 0; r < ROWS; r++) {
            double p[E], sum = 0, top = 0;
            for (int e = 0; e < E; e++) sum += p[e] = exp(z[r * E + e]);
            for (int e = 0; e < E; e++) p[e] /= sum;
            for (int k = 0; k < K; k++) { /* the k-th largest */
                int best = -1;
                for (int e = 0; e < E; e++) {
                    bool taken = false;
                    for (int j = 0; j < k; j++) taken |= ex[r * K + j] == e;
                    if (!taken && (best < 0 || p[e] > p[best])) best = e;
                }
                assert_int_equal(ex[r * K + k], best);
                top += p[best];
            }
            for (int k = 0; k < K; k++)
                assert_true(fabs(w[r * K + k] - p[ex[r * K + k]] / (norm ? top : 1.0)) < 1e-6);
        }
    }
    backend_release(be, &t);
    backend_close(be);
}

/* Total and active parameters: the tensors of the model, and those a token runs through. */
static void test_param_counts(void **s)
{
    (void)s;
    pt_backend *be = cpu();
    pt_model m;
    load("hf", false, be, &m);
    int64_t total, active, tensors = tensor_numel(&m.tok_embd) + tensor_numel(&m.output) + tensor_numel(&m.out_norm);
    int64_t experts = 0, one = 0;
    for (int l = 0; l < 3; l++) {
        for (int w = 0; w < W_COUNT; w++) tensors += m.layers[l].w[w].data ? tensor_numel(&m.layers[l].w[w]) : 0;
        if (!m.layers[l].experts) continue;
        tensors += tensor_numel(&m.layers[l].router);
        for (int i = 0; i < 4 * X_COUNT; i++) experts += tensor_numel(&m.layers[l].experts[i]);
        one = tensor_numel(&m.layers[l].experts[0]) * 3;
    }
    model_param_counts(&m.cfg, &total, &active);
    assert_int_equal(total, tensors + experts);
    assert_int_equal(active, tensors + 2 * 2 * one); /* 2 sparse layers x top-2 */
    print_message("qwen3moe tiny: %lld parameters, %lld active\n", (long long)total, (long long)active);
    model_free(&m);
    backend_close(be);
}

static void expect_config_error(const char *json, const char *want)
{
    hf_config h;
    pt_status st = hf_config_parse("config.json", json, strlen(json), &h);
    assert_int_not_equal(st, PT_OK);
    if (!strstr(err_message(), want)) fail_msg("got: %s\nwant: %s", err_message(), want);
}

#define MOE_BASE "{\"model_type\": \"qwen3_moe\", \"num_hidden_layers\": 4, \"hidden_size\": 64, " \
                 "\"intermediate_size\": 96, \"num_attention_heads\": 4, \"vocab_size\": 384, "

static void test_config(void **s)
{
    (void)s;
    const char *ok = MOE_BASE "\"num_experts\": 8, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, "
                              "\"decoder_sparse_step\": 2, \"mlp_only_layers\": [3]}";
    hf_config h;
    assert_int_equal(hf_config_parse("config.json", ok, strlen(ok), &h), PT_OK);
    assert_int_equal(h.cfg.n_experts, 8);
    assert_false(h.cfg.moe_norm_topk); /* transformers' default */
    assert_false(model_layer_moe(&h.cfg, 0));
    assert_true(model_layer_moe(&h.cfg, 1));
    assert_false(model_layer_moe(&h.cfg, 2));
    assert_false(model_layer_moe(&h.cfg, 3)); /* sparse by the step, dense by mlp_only_layers */
    expect_config_error(MOE_BASE "\"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32}",
                        "num_local_experts");
    expect_config_error(MOE_BASE "\"num_experts\": 4, \"num_experts_per_tok\": 5, \"moe_intermediate_size\": 32}",
                        "num_experts_per_tok");
    expect_config_error(MOE_BASE "\"num_experts\": 4, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 32, "
                                 "\"mlp_only_layers\": [4]}",
                        "mlp_only_layers");
}

/* ---- training: LoRA on the attention, the router and experts frozen ---- */

static float *read_golden(const char *name, size_t *count)
{
    char path[1024];
    golden(name, "", path, sizeof path);
    path[strlen(path) - 1] = '\0'; /* golden() adds an extension's dot */
    size_t bytes;
    float *v = read_file(path, &bytes);
    *count = bytes / sizeof(float);
    return v;
}

/* One micro-batch of peft.json (2 x 16 tokens, some labels -100) with the adapters at peft.init.f32: the
 * loss, and the LoRA gradients against PEFT's (make_qwen3moe_goldens.py), in one pass and with gradient
 * checkpointing (the layers recomputed: the same bits). */
static void check_peft(bool checkpointing)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/peft.json", srcdir(), family);
    json_error_t jerr;
    json_t *man = json_load_file(path, 0, &jerr);
    if (!man) fail_msg("cannot read %s: %s", path, jerr.text);
    pt_backend *be = cpu();
    pt_model m;
    load("hf", false, be, &m);
    bool target[W_COUNT] = {[W_Q] = true, [W_K] = true, [W_V] = true, [W_O] = true};
    pt_lora l;
    assert_int_equal(lora_create(&l, &m, 4, 8.0f, false, target, 3), PT_OK);
    size_t n_init, n_want;
    float *init = read_golden("peft.init.f32", &n_init), *want = read_golden("peft.grads.f32", &n_want);
    assert_int_equal(n_init, n_want);
    json_t *ids = json_object_get(man, "ids"), *labels = json_object_get(man, "labels");
    assert_int_equal(json_array_size(ids), 32);
    int32_t tok[32], tgt[32], pos[32];
    int labelled = 0;
    for (int i = 0; i < 32; i++) { /* row t predicts label t+1 */
        int t = i % 16;
        tok[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
        tgt[i] = t + 1 < 16 ? (int32_t)json_integer_value(json_array_get(labels, (size_t)i + 1)) : PT_IGNORE_INDEX;
        pos[i] = t;
        labelled += tgt[i] != PT_IGNORE_INDEX;
    }
    static const int order[4] = {W_Q, W_K, W_V, W_O}; /* PEFT's module order */
    double worst = 0, loss = 0;
    for (int pass = 0; pass < 2; pass++) { /* 0: set the adapters, run; 1: compare */
        size_t off = 0;
        for (int layer = 0; layer < m.cfg.n_layers; layer++)
            for (int w = 0; w < 4; w++)
                for (int which = 0; which < 2; which++) {
                    adapter_pair *p = adapter_at(&l.ad, layer, order[w]);
                    lora_pair *s = lora_at(&l, layer, order[w]);
                    pt_tensor *t = which ? &p->b : &p->a, *g = which ? &s->grad_b : &s->grad_a;
                    size_t n = (size_t)tensor_numel(t);
                    assert_true(off + n <= n_init);
                    if (pass == 0) assert_int_equal(backend_upload(be, t, init + off, t->nbytes), PT_OK);
                    if (pass == 1) {
                        float *got = malloc(g->nbytes);
                        assert_int_equal(backend_download(be, g, got, g->nbytes), PT_OK);
                        double diff = 0, scale = 1e-30;
                        for (size_t i = 0; i < n; i++)
                            diff = fmax(diff, fabs((double)got[i] - want[off + i])), scale = fmax(scale, fabs(want[off + i]));
                        worst = fmax(worst, diff / scale);
                        free(got);
                    }
                    off += n;
                }
        assert_int_equal(off, n_init);
        if (pass == 1) break;
        train_batch b = {2, 16, tok, tgt, pos, NULL};
        step_options so = {.checkpointing = checkpointing, .loss_chunk = 7};
        int64_t n_tok = 0;
        assert_int_equal(lora_zero_grads(&l), PT_OK);
        pt_status st = step_run(&m, &l, &b, &so, 1.0f / (float)labelled, &loss, &n_tok);
        if (st) fail_msg("%s", err_message());
        assert_int_equal(n_tok, labelled);
        loss /= (double)n_tok;
    }
    double ref = json_real_value(json_object_get(man, "loss"));
    print_message("%s%s: loss %.9f (PEFT %.9f, relative %.2g); LoRA gradients vs PEFT: max relative error %.3g\n",
                  family, checkpointing ? " (checkpointing)" : "", loss, ref, fabs(loss - ref) / ref, worst);
    assert_true(fabs(loss - ref) <= 1e-5 * ref);
    assert_true(worst <= 1e-4);
    free(init), free(want);
    json_decref(man);
    lora_free(&l);
    model_free(&m);
    backend_close(be);
}

static void test_peft_grads(void **s)
{
    (void)s;
    check_peft(false);
    check_peft(true);
}

/* The slot of a module of peft-experts.json: the attention's projections, and the nested ParamWrappers of PEFT's
 * target_parameters (the first target, gate_up_proj, innermost: mlp.experts.base_layer). */
static int experts_slot(const char *module)
{
    static const char *const names[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                        "mlp.experts.base_layer", "mlp.experts", "mlp.gate"};
    static const int slots[] = {W_Q, W_K, W_V, W_O, W_EXP_GATE_UP, W_EXP_DOWN, W_ROUTER};
    for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++)
        if (!strcmp(module, names[i])) return slots[i];
    fail_msg("peft-experts.json: unknown module %s", module);
    return -1;
}

/* Tensor i of the manifest: set it from init (PEFT's layout: an experts' B moved to ptrain's), or its gradient's
 * max relative error against want (ptrain's moved to PEFT's). */
static double experts_tensor(pt_backend *be, pt_lora *l, const json_t *spec, const float *init, const float *want,
                             int n_exp, bool set)
{
    int layer = (int)json_integer_value(json_object_get(spec, "layer"));
    int w = experts_slot(json_string_value(json_object_get(spec, "module")));
    bool is_b = json_string_value(json_object_get(spec, "which"))[0] == 'B';
    adapter_pair *p = adapter_at(&l->ad, layer, w);
    lora_pair *s = lora_at(l, layer, w);
    assert_non_null(p);
    pt_tensor *t = is_b ? &p->b : &p->a, *g = is_b ? &s->grad_b : &s->grad_a;
    size_t n = (size_t)tensor_numel(t);
    bool moved = is_b && model_slot_experts(w);
    float *buf = malloc(t->nbytes), *host = malloc(t->nbytes);
    if (set && moved) adapter_experts_b(init, buf, t->shape[0] / n_exp, p->r, n_exp, false);
    if (set) assert_int_equal(backend_upload(be, t, moved ? buf : init, t->nbytes), PT_OK);
    double diff = 0, scale = 1e-30;
    if (!set) {
        assert_int_equal(backend_download(be, g, host, g->nbytes), PT_OK);
        if (moved) adapter_experts_b(host, buf, t->shape[0] / n_exp, p->r, n_exp, true);
        const float *got = moved ? buf : host;
        for (size_t i = 0; i < n; i++) diff = fmax(diff, fabs((double)got[i] - want[i])), scale = fmax(scale, fabs(want[i]));
    }
    free(buf), free(host);
    return diff / scale;
}

/* LoRA on the attention and on the experts (PEFT's target_parameters, make_moe_lora_goldens.py): one micro-batch's
 * loss and every LoRA gradient against PEFT's, in one pass and with checkpointing. aux 1: with the aux
 * load-balancing loss added (router_aux_loss_coef aux_coef): its value against transformers' aux_loss and the
 * gradients against PEFT's of that sum; aux 2: the value alone (no coefficient, the plain gradients) with the
 * attention mask of aux_mask, against transformers' aux_loss with that mask. */
static void check_peft_experts(bool checkpointing, int aux)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/peft-experts.json", srcdir(), family);
    json_error_t jerr;
    json_t *man = json_load_file(path, 0, &jerr);
    if (!man) fail_msg("cannot read %s: %s", path, jerr.text);
    pt_backend *be = cpu();
    pt_model m;
    load("hf", false, be, &m);
    bool target[W_COUNT] = {[W_Q] = true, [W_K] = true, [W_V] = true, [W_O] = true, [W_EXP_GATE_UP] = true,
                            [W_EXP_DOWN] = true, [W_ROUTER] = true};
    pt_lora l;
    assert_int_equal(lora_create(&l, &m, 4, 8.0f, false, target, 3), PT_OK);
    size_t n_init, n_want;
    float *init = read_golden("peft-experts.init.f32", &n_init);
    float *want = read_golden(aux == 1 ? "peft-experts.aux.grads.f32" : "peft-experts.grads.f32", &n_want);
    uint8_t mask[32];
    json_t *jm = json_object_get(man, "aux_mask");
    for (int i = 0; i < 32; i++) mask[i] = (uint8_t)json_integer_value(json_array_get(jm, (size_t)i));
    assert_int_equal(n_init, n_want);
    assert_int_equal(adapter_param_count(&l.ad), (int64_t)n_init);
    int32_t tok[32], tgt[32], pos[32];
    int labelled = 0;
    json_t *ids = json_object_get(man, "ids"), *labels = json_object_get(man, "labels");
    for (int i = 0; i < 32; i++) {
        int t = i % 16;
        tok[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
        tgt[i] = t + 1 < 16 ? (int32_t)json_integer_value(json_array_get(labels, (size_t)i + 1)) : PT_IGNORE_INDEX;
        pos[i] = t;
        labelled += tgt[i] != PT_IGNORE_INDEX;
    }
    json_t *tensors = json_object_get(man, "tensors");
    double worst = 0, loss = 0, aux_value = -1;
    for (int pass = 0; pass < 2; pass++) { /* 0: set the adapters, run; 1: compare */
        size_t off = 0;
        for (size_t i = 0; i < json_array_size(tensors); i++) {
            json_t *sh = json_object_get(json_array_get(tensors, i), "shape");
            size_t n = (size_t)(json_integer_value(json_array_get(sh, 0)) * json_integer_value(json_array_get(sh, 1)));
            assert_true(off + n <= n_init);
            worst = fmax(worst, experts_tensor(be, &l, json_array_get(tensors, i), init + off, want + off,
                                               m.cfg.n_experts, pass == 0));
            off += n;
        }
        assert_int_equal(off, n_init);
        if (pass == 1) break;
        train_batch b = {2, 16, tok, tgt, pos, NULL};
        step_options so = {.checkpointing = checkpointing, .loss_chunk = 7};
        if (aux == 1) so.router_aux_coef = (float)json_real_value(json_object_get(man, "aux_coef"));
        if (aux) so.aux_loss = &aux_value;
        if (aux == 2) so.aux_mask = mask;
        int64_t n_tok = 0;
        assert_int_equal(lora_zero_grads(&l), PT_OK);
        pt_status st = step_run(&m, &l, &b, &so, 1.0f / (float)labelled, &loss, &n_tok);
        if (st) fail_msg("%s", err_message());
        assert_int_equal(n_tok, labelled);
        loss /= (double)n_tok;
    }
    double ref = json_real_value(json_object_get(man, "loss"));
    print_message("%s experts%s%s: loss %.9f (PEFT %.9f, relative %.2g); LoRA gradients (attention and "
                  "experts) vs PEFT: max relative error %.3g\n", family, checkpointing ? " (checkpointing)" : "",
                  aux ? " + aux loss" : "", loss, ref, fabs(loss - ref) / ref, worst);
    assert_true(fabs(loss - ref) <= 1e-5 * ref);
    assert_true(worst <= 1e-4);
    if (aux) {
        double want_aux = json_real_value(json_object_get(man, aux == 1 ? "aux_loss" : "aux_loss_masked"));
        print_message("  aux loss%s %.9f (transformers %.9f, relative %.2g)\n", aux == 2 ? " (masked)" : "", aux_value,
                      want_aux, fabs(aux_value - want_aux) / want_aux);
        assert_true(fabs(aux_value - want_aux) <= 1e-5 * want_aux);
    }
    free(init), free(want);
    json_decref(man);
    lora_free(&l);
    model_free(&m);
    backend_close(be);
}

static void test_peft_experts(void **s)
{
    (void)s;
    check_peft_experts(false, 0);
    check_peft_experts(true, 0);
}

/* The aux load-balancing loss (output_router_logits): value and gradients, with checkpointing (the recomputed
 * layers add nothing to it), and the value with an attention mask. */
static void test_aux_loss(void **s)
{
    (void)s;
    check_peft_experts(false, 1);
    check_peft_experts(true, 1);
    check_peft_experts(false, 2);
}

/* Mixtral (make_mixtral_goldens.py): the directory save_pretrained writes (block_sparse_moe, w1/w3/w2) and the
 * fused one, logits and greedy tokens against transformers (through a sliding window of 12), and PEFT's gradients. */
static void test_mixtral(void **s)
{
    (void)s;
    family = "mixtral";
    check_dir("hf", false, "hf");
    check_dir("hf-fused", false, "hf");
    check_peft(false);
    check_peft(true);
    check_peft_experts(false, 0); /* LoRA on the experts and router too (make_moe_lora_goldens.py mixtral) */
    check_peft_experts(true, 0);
    check_peft_experts(false, 1);
    family = "qwen3moe";
}

/* An MXFP4 block decoded as transformers' convert_moe_packed_tensors decodes it: every value of layer 0's gate and up
 * weights of every expert, dequantized by the CPU backend from ptrain's PT_MXFP4 copy, equal bit for bit to the
 * reference's float32 decode (mxfp4.decoded.f32 [E, H, 2I]: gate the even columns, up the odd). */
static void check_mxfp4_decode(void)
{
    pt_backend *be = cpu();
    pt_model m;
    family = "gptoss";
    load("hf-mxfp4", false, be, &m);
    char path[1024];
    golden("mxfp4", "decoded.f32", path, sizeof path);
    int64_t E = m.cfg.n_experts, H = m.cfg.dim, I = m.cfg.moe_ffn_dim, differ = 0, tiny = 0;
    float *ref = read_f32(path, (size_t)(E * H * 2 * I)), *got = malloc(sizeof(float) * (size_t)(I * H));
    for (int64_t e = 0; e < E; e++)
        for (int x = 0; x < 2; x++) {
            assert_int_equal(quant_dequantize_row(PT_MXFP4, m.layers[0].experts[e * X_COUNT + x].data, got, I * H), PT_OK);
            for (int64_t i = 0; i < I; i++)
                for (int64_t h = 0; h < H; h++) {
                    float want = ref[(e * H + h) * 2 * I + 2 * i + x], have = got[i * H + h];
                    differ += memcmp(&want, &have, sizeof want) != 0;
                    tiny += want != 0.0f && fabsf(want) < 1e-30f;
                }
        }
    print_message("gptoss: %lld MXFP4 values decoded, %lld differ from transformers' decode (%lld subnormal)\n",
                  (long long)(E * H * 2 * I), (long long)differ, (long long)tiny);
    assert_int_equal(differ, 0);
    assert_true(tiny > 0);
    free(ref);
    free(got);
    model_free(&m);
    backend_close(be);
    family = "qwen3moe";
}

/* gpt-oss (make_gptoss_goldens.py): the bf16 directory save_pretrained writes, logits through the sliding window
 * (12 of 40 ids) and greedy tokens against transformers'; the configs and checkpoints not built yet refused. */
static void test_gptoss(void **s)
{
    (void)s;
    family = "gptoss";
    check_dir("hf", false, "hf");
    check_dir("hf-mxfp4", false, "hf-mxfp4"); /* MXFP4 experts kept 4-bit (the attention unquantized) */
    family = "qwen3moe";
    check_mxfp4_decode();
#define GPTOSS_BASE "{\"model_type\": \"gpt_oss\", \"num_hidden_layers\": 2, \"hidden_size\": 64, " \
                    "\"intermediate_size\": 64, \"num_attention_heads\": 4, \"vocab_size\": 384, " \
                    "\"num_local_experts\": 4, \"num_experts_per_tok\": 2"
    hf_config h;
    const char *ok = GPTOSS_BASE "}";
    assert_int_equal(hf_config_parse("config.json", ok, strlen(ok), &h), PT_OK);
    assert_int_equal(model_layer_window(&h.cfg, 0), 128); /* GptOssConfig's defaults */
    assert_int_equal(model_layer_window(&h.cfg, 1), 0);
    assert_int_equal(h.rope.type, PT_ROPE_YARN);
    assert_true(h.rope.factor == 32 && h.rope.original_max_position_embeddings == 4096 && h.rope_theta == 150000);
    expect_config_error(GPTOSS_BASE ", \"attention_bias\": false}", "attention_bias is false");
    expect_config_error(GPTOSS_BASE ", \"layer_types\": [\"full_attention\", \"sliding_attention\"]}",
                        "gpt-oss: P = 2, sliding on even layers");
#undef GPTOSS_BASE
}

/* GGUF files as llama.cpp's converter writes them (make_moe_gguf_goldens.py): Mixtral as llama with experts (q/k
 * permuted), a Qwen3-MoE with every layer sparse; the experts' 3-D tensors cut into one weight per expert, f32 or
 * Q4_0 kept in its format (load_in_4bit off: the rest stays f32), the router f32. Logits and greedy tokens against
 * transformers on the weights the file holds (llama.cpp runs the files to the same logits: the script checks). */
static void check_gguf(const char *fam, pt_arch arch, int n_layers)
{
    family = fam;
    static const char *const names[2] = {"gguf-f32", "gguf-q4"};
    for (int q = 0; q < 2; q++) {
        char file[64];
        snprintf(file, sizeof file, "%s.gguf", names[q]);
        pt_backend *be = cpu();
        pt_model m;
        load(file, false, be, &m);
        assert_int_equal(m.cfg.arch, arch);
        assert_int_equal(m.cfg.n_experts_used, 2);
        assert_true(m.cfg.moe_norm_topk);
        for (int l = 0; l < n_layers; l++) {
            assert_true(model_layer_moe(&m.cfg, l));
            assert_int_equal(m.layers[l].router.dtype, PT_F32);
            for (int i = 0; i < m.cfg.n_experts * X_COUNT; i++)
                assert_int_equal(m.layers[l].experts[i].dtype, q ? PT_Q4_0 : PT_F32);
        }
        check_logits(&m, names[q]);
        check_greedy(&m, names[q]);
        model_free(&m);
        backend_close(be);
    }
    family = "qwen3moe";
}

static void test_gguf(void **s)
{
    (void)s;
    check_gguf("mixtral", PT_ARCH_MIXTRAL, 2);
    check_gguf("qwen3moe", PT_ARCH_QWEN3MOE, 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_experts_one_by_one), cmocka_unit_test(test_experts_fused),
        cmocka_unit_test(test_experts_nf4),        cmocka_unit_test(test_route),
        cmocka_unit_test(test_param_counts),       cmocka_unit_test(test_config),
        cmocka_unit_test(test_peft_grads),         cmocka_unit_test(test_mixtral),
        cmocka_unit_test(test_gguf),               cmocka_unit_test(test_peft_experts),
        cmocka_unit_test(test_aux_loss),           cmocka_unit_test(test_gptoss),
    };
    return cmocka_run_group_tests_name("moe", tests, NULL, NULL);
}
