/* test_train.c — LoRA training on the tiny Llama against PEFT + torch
 * (tests/reference/make_peft_goldens.py): the LoRA gradients of one batch (max relative error
 * <= 1e-4), the loss of 20 AdamW steps with gradient clipping (<= 1e-4 relative), and the adapters
 * after them; central finite differences of the whole model's loss; gradient checkpointing giving
 * the same gradients as keeping every activation; lora_dropout checked by central differences;
 * the HDF5 adapter written and read back; adapters with a NaN or an infinity refused before they
 * are written, and the divergence verdict on a step (src/train/finite.c); modules_to_save (embed_tokens
 * and lm_head trained in full) against PEFT (make_modules_goldens.py). */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptrain/adapter.h"
#include "ptrain/forward.h"
#include "ptrain/memplan.h"
#include "ptrain/model_io.h"
#include "ptrain/optimizer.h"
#include "ptrain/step.h"
#include "tmpdir.h"
#include "golden_lora.h"
#include "train/trainer.h"

typedef struct {
    pt_backend *be;
    pt_model m;
    pt_lora l;
    json_t *manifest;
    int batch, seq;
    int32_t ids[256], targets[256], pos[256];
    float *init, *grads, *final;
    size_t n_floats;
} fixture;

/* The golden manifest's LoRA tensors of this fixture's adapter, in file order (golden_lora.h). */
static void for_each_tensor(fixture *fx, golden_tensor_fn fn, void *arg)
{
    golden_for_each_tensor(fx->be, &fx->l, fx->manifest, fn, arg);
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/manifest.json", golden_srcdir());
    json_error_t jerr;
    fx->manifest = json_load_file(path, 0, &jerr);
    if (!fx->manifest) return -1;
    snprintf(path, sizeof path, "%s/tests/data/llama/tiny-mha-f32.gguf", golden_srcdir());
    gguf_file f;
    pt_backend_options bo = {.device = DEVICE_CPU, .threads = 0};
    pt_load_options lo = {.load_in_4bit = false};
    if (gguf_open(path, &f) || backend_open(&bo, &fx->be) || model_from_gguf(&f, fx->be, &lo, &fx->m)) return -1;
    gguf_close(&f);
    bool all[W_COUNT] = {0};
    for (int w = W_Q; w <= W_DOWN; w++) all[w] = w != W_FFN_NORM;
    if (lora_create(&fx->l, &fx->m, 4, 8.0f, false, all, 1)) return -1;
    fx->batch = (int)json_integer_value(json_object_get(fx->manifest, "batch"));
    fx->seq = (int)json_integer_value(json_object_get(fx->manifest, "seq"));
    json_t *ids = json_object_get(fx->manifest, "ids"), *labels = json_object_get(fx->manifest, "labels");
    for (int b = 0; b < fx->batch; b++)
        for (int t = 0; t < fx->seq; t++) {
            int i = b * fx->seq + t;
            fx->ids[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
            /* row t predicts token t+1 (transformers shifts labels inside the model) */
            fx->targets[i] = t + 1 < fx->seq ? (int32_t)json_integer_value(json_array_get(labels, (size_t)i + 1))
                                             : PT_IGNORE_INDEX;
            fx->pos[i] = t;
        }
    size_t n;
    fx->init = golden_read_f32("peft", "init.f32", &fx->n_floats);
    fx->grads = golden_read_f32("peft", "grads.f32", &n);
    fx->final = golden_read_f32("peft", "final.f32", &n);
    for_each_tensor(fx, golden_set_values, fx->init);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    lora_free(&fx->l);
    model_free(&fx->m);
    backend_close(fx->be);
    json_decref(fx->manifest);
    free(fx->init);
    free(fx->grads);
    free(fx->final);
    free(fx);
    return 0;
}

static train_batch batch_of(fixture *fx)
{
    train_batch b = {fx->batch, fx->seq, fx->ids, fx->targets, fx->pos, NULL};
    return b;
}

static int64_t labelled(fixture *fx)
{
    int64_t n = 0;
    for (int i = 0; i < fx->batch * fx->seq; i++) n += fx->targets[i] != PT_IGNORE_INDEX;
    return n;
}

/* one micro-batch: mean loss over labelled tokens, gradients of that mean */
static double run_step(fixture *fx, bool checkpointing)
{
    train_batch b = batch_of(fx);
    step_options o = {.checkpointing = checkpointing};
    double loss = 0;
    int64_t n = 0;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(step_run(&fx->m, &fx->l, &b, &o, 1.0f / (float)labelled(fx), &loss, &n), PT_OK);
    assert_int_equal(n, labelled(fx));
    return loss / (double)n;
}

static void test_gradients_match_peft(void **state)
{
    fixture *fx = *state;
    for_each_tensor(fx, golden_set_values, fx->init);
    double loss = run_step(fx, false);
    double want = json_real_value(json_object_get(fx->manifest, "first_loss"));
    golden_compare c = {fx->grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    print_message("loss %.9f (PEFT %.9f); LoRA gradients vs PEFT: max relative error %.3g over %zu values\n", loss,
                  want, c.worst, fx->n_floats);
    assert_true(fabs(loss - want) / want <= 1e-5);
    assert_true(c.worst <= 1e-4);
}

/* use_rslora (issue 46): lora_alpha 5, the adapter scaled by alpha/sqrt(r) = 2.5 instead of alpha/r = 1.25,
 * from the same A and B: PEFT's loss and gradients with use_rslora=True (grads_rslora.f32). */
static void test_rslora_gradients_match_peft(void **state)
{
    fixture *fx = *state;
    bool all[W_COUNT] = {0};
    for (int w = W_Q; w <= W_DOWN; w++) all[w] = w != W_FFN_NORM;
    pt_lora plain = fx->l;
    assert_int_equal(lora_create(&fx->l, &fx->m, 4, 5.0f, true, all, 1), PT_OK);
    for_each_tensor(fx, golden_set_values, fx->init);
    double loss = run_step(fx, false);
    double want = json_real_value(json_object_get(fx->manifest, "rslora_first_loss"));
    size_t n;
    float *grads = golden_read_f32("peft", "grads_rslora.f32", &n);
    assert_int_equal(n, fx->n_floats);
    golden_compare c = {grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    print_message("rsLoRA: loss %.9f (PEFT %.9f, plain LoRA's %.9f); gradients vs PEFT: max relative error %.3g\n",
                  loss, want, json_real_value(json_object_get(fx->manifest, "first_loss")), c.worst);
    free(grads);
    lora_free(&fx->l);
    fx->l = plain;
    assert_true(fabs(loss - want) / want <= 1e-5);
    assert_true(c.worst <= 1e-4);
}

/* Every schedule and its lr_scheduler_kwargs, read through the config as a user writes them: the
 * learning rate of each step (and the two past the end) is transformers' get_scheduler's
 * (tests/reference/make_schedule_goldens.py), to 1e-12 of the peak. */
static void test_schedule_matches_transformers(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/schedule/transformers_lr.json", golden_srcdir());
    json_error_t jerr;
    json_t *golden = json_load_file(path, 0, &jerr);
    assert_non_null(golden);
    size_t i;
    json_t *c;
    int schedules = 0, steps = 0;
    double worst = 0;
    json_array_foreach(json_object_get(golden, "cases"), i, c) {
        strbuf yaml = {0};
        double peak = json_real_value(json_object_get(c, "learning_rate"));
        sb_printf(&yaml, "learning_rate: %.17g\nlr_scheduler_type: %s\nwarmup_steps: %lld\nlr_scheduler_kwargs: {",
                  peak, json_string_value(json_object_get(c, "type")),
                  (long long)json_integer_value(json_object_get(c, "warmup_steps")));
        const char *name;
        json_t *v;
        int k = 0;
        json_object_foreach(json_object_get(c, "kwargs"), name, v) {
            sb_printf(&yaml, "%s%s: %.17g", k++ ? ", " : "", name, json_number_value(v));
        }
        sb_printf(&yaml, "}\n");
        pt_config cfg;
        pt_status st = config_parse("schedule.yaml", sb_text(&yaml), strlen(sb_text(&yaml)), &cfg, NULL);
        if (st) fail_msg("%s\n%s", sb_text(&yaml), err_message());
        int64_t total = json_integer_value(json_object_get(c, "total_steps"));
        lr_schedule s = schedule_make(cfg.lr_scheduler_type, &cfg.sched_args, cfg.learning_rate, total,
                                      cfg.warmup_steps, -1.0);
        json_t *lrs = json_object_get(c, "lr");
        for (size_t step = 0; step < json_array_size(lrs); step++) {
            double want = json_real_value(json_array_get(lrs, step)), got = schedule_lr(&s, (int64_t)step);
            double err = fabs(got - want) / peak;
            if (err > 1e-12)
                fail_msg("%sstep %zu: ptrain %.17g, transformers %.17g", sb_text(&yaml), step, got, want);
            worst = fmax(worst, err);
            steps++;
        }
        schedules++;
        config_free(&cfg);
        sb_free(&yaml);
    }
    print_message("%d schedules, %d steps: learning rates vs transformers %s: max error %.3g of the peak\n",
                  schedules, steps, json_string_value(json_object_get(golden, "transformers")), worst);
    assert_true(schedules >= 13);
    json_decref(golden);
}

static void test_checkpointing_same_gradients(void **state)
{
    fixture *fx = *state;
    for_each_tensor(fx, golden_set_values, fx->init);
    run_step(fx, true);
    golden_compare c = {fx->grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    print_message("with gradient checkpointing: max relative error vs PEFT %.3g\n", c.worst);
    assert_true(c.worst <= 1e-4);
    /* gradient_checkpointing_keep_layers: the last layers keep their activations instead of being recomputed; the
     * recomputation gives the same values, so the gradients are the same to the bit, and the arena grows by the kept
     * layers' activations */
    float *want = calloc(fx->n_floats, sizeof *want), *got = calloc(fx->n_floats, sizeof *got);
    for_each_tensor(fx, golden_collect_grads, want);
    train_batch b = batch_of(fx);
    int n = fx->m.cfg.n_layers;
    size_t before = 0;
    for (int keep = 0; keep <= n + 1; keep++) {
        step_options o = {.checkpointing = true, .keep_layers = keep};
        double loss = 0;
        int64_t cnt = 0;
        assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
        assert_int_equal(step_run(&fx->m, &fx->l, &b, &o, 1.0f / (float)labelled(fx), &loss, &cnt), PT_OK);
        for_each_tensor(fx, golden_collect_grads, got);
        assert_memory_equal(want, got, fx->n_floats * sizeof *got);
        size_t bytes = step_arena_bytes(&fx->m, &fx->l.ad, b.batch * b.seq, &o);
        if (keep > 0 && keep < n && bytes <= before) fail_msg("keep %d of %d: arena %zu, %zu before", keep, n, bytes, before);
        if (keep >= n) assert_true(bytes == before); /* keep + 1 sets, at most n: all of them from n - 1 on */
        before = bytes;
    }
    print_message("gradient_checkpointing_keep_layers 0 to %d of %d layers: the same gradients, bit for bit\n", n + 1, n);
    free(want), free(got);
}

/* The memory plan from the config alone (what `ptrain inspect` prints): a model with no weights and
 * no backend and an adapter with no tensors give the loaded model's plan, in every checkpointing
 * mode, with and without dropout and evaluation, on either backend's terms. (Were a weight or a
 * tensor touched, the NULL layers and pairs would crash here.) */
static void test_plan_from_config(void **state)
{
    fixture *fx = *state;
    pt_model bare = {.cfg = fx->m.cfg};
    pt_adapter ad = {.r = fx->l.ad.r, .r_max = fx->l.ad.r, .n_layers = fx->m.cfg.n_layers};
    memcpy(ad.target, fx->l.ad.target, sizeof ad.target);
    int64_t params = adapter_param_count(&fx->l.ad);
    assert_int_equal(adapter_param_count_for(&fx->m.cfg, ad.r, ad.target, false), params);
    for (int ck = PT_CKPT_OFF; ck <= PT_CKPT_OFFLOAD; ck++)
        for (int variant = 0; variant < 4; variant++) {
            bool gpu = variant & 1, dropout = variant & 2;
            step_options so = step_options_for((pt_checkpointing)ck, gpu, dropout ? 0.1f : 0.0f);
            pt_memplan_run r = {.batch = 2, .seq = 64, .eval_rows = dropout ? 256 : 0, .weight_bytes = fx->m.weight_bytes,
                                .lora_params = params, .cuda = gpu};
            pt_memplan loaded, from_config;
            memplan_of_run(&fx->m, &fx->l.ad, &so, &r, &loaded);
            memplan_of_run(&bare, &ad, &so, &r, &from_config);
            assert_memory_equal(&loaded, &from_config, sizeof loaded);
            assert_true(loaded.activations > 0);
            assert_int_equal(loaded.offloaded > 0, ck == PT_CKPT_OFFLOAD && gpu);
        }
}

static void test_20_adamw_steps_match_torch(void **state)
{
    fixture *fx = *state;
    for_each_tensor(fx, golden_set_values, fx->init);
    json_t *losses = json_object_get(fx->manifest, "losses");
    adamw_options o = {0.9, 0.999, 1e-8, 0.01, 1.0};
    double worst = 0;
    for (int s = 0; s < 20; s++) {
        double loss = run_step(fx, true), norm;
        assert_int_equal(optimizer_grad_norm(&fx->l, &norm), PT_OK);
        pt_status st = optimizer_step(&fx->l, &o, norm, 2e-3, s + 1);
        if (st) print_error("%s\n", err_message());
        assert_int_equal(st, PT_OK);
        double want = json_real_value(json_array_get(losses, (size_t)s));
        worst = fmax(worst, fabs(loss - want) / fabs(want));
    }
    golden_compare c = {fx->final, false, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    print_message("20 AdamW steps: loss max relative error %.3g; adapters after them %.3g\n", worst, c.worst);
    assert_true(worst <= 1e-4);
    assert_true(c.worst <= 1e-4);
}

/* modules_to_save (issue 46): embed_tokens and lm_head trained in full beside the adapters, from the
 * base's weights (tests/reference/make_modules_goldens.py): the loss, the gradients of the adapters,
 * the embedding and the LM head of one batch, then 20 AdamW steps with the modules in their own
 * parameter group (cpt's embedding_learning_rate) and one clipping norm over everything, against
 * PEFT + torch: measured, the loss within 6e-8, the gradients within 3.1e-6 (embedding 2.4e-6, LM head
 * 1.0e-6), the 20 losses within 2.1e-6, the tensors after them within 1.3e-4 (LoRA), 4.6e-5 and
 * 7.0e-5 of their largest value. */
static double rel_max(const float *got, const float *want, size_t n)
{
    double diff = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    return diff / scale;
}

static double modules_run_step(fixture *fx, saved_modules *sm)
{
    train_batch b = batch_of(fx);
    step_options o = {.embed_grad = &sm->grad[SAVED_EMBED], .head_grad = &sm->grad[SAVED_HEAD]};
    double loss = 0;
    int64_t n = 0;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(saved_modules_zero_grad(sm), PT_OK);
    assert_int_equal(step_run(&fx->m, &fx->l, &b, &o, 1.0f / (float)labelled(fx), &loss, &n), PT_OK);
    return loss / (double)n;
}

/* DoRA training (use_dora, issue 46) against PEFT 0.21 on the whole tiny Llama
 * (tests/reference/make_dora_model_goldens.py): from init.f32's A and B with the magnitudes PEFT's
 * dora_init gives them (lora_dora_enable), one batch's loss and the gradients of every A, B and
 * magnitude (PEFT detaches the weight norm). */
static void test_dora_match_peft(void **state)
{
    fixture *fx = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/dora.json", golden_srcdir());
    json_error_t jerr;
    json_t *g = json_load_file(path, 0, &jerr);
    assert_non_null(g);
    size_t n_grads;
    float *grads = golden_read_f32("peft", "dora_grads.f32", &n_grads);
    bool all[W_COUNT] = {0};
    for (int w = W_Q; w <= W_DOWN; w++) all[w] = w != W_FFN_NORM;
    pt_lora used = fx->l;
    assert_int_equal(lora_create(&fx->l, &fx->m, 4, 8.0f, false, all, 1), PT_OK);
    for_each_tensor(fx, golden_set_values, fx->init);
    assert_int_equal(lora_dora_enable(&fx->l, &fx->m), PT_OK);
    double loss = run_step(fx, false), want = json_real_value(json_object_get(g, "first_loss"));
    golden_compare c = {grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    static const char *const order[] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};
    size_t at = fx->n_floats, n_m = 0;
    double diff = 0, scale = 1e-30;
    for (int layer = 0; layer < fx->m.cfg.n_layers; layer++)
        for (int k = 0; k < 7; k++) {
            lora_pair *s = lora_at(&fx->l, layer, golden_module_index(order[k]));
            assert_non_null(s);
            float *got = malloc(s->grad_m.nbytes);
            assert_int_equal(backend_download(fx->be, &s->grad_m, got, s->grad_m.nbytes), PT_OK);
            for (int64_t i = 0; i < tensor_numel(&s->grad_m); i++, at++, n_m++) {
                assert_true(at < n_grads);
                diff = fmax(diff, fabs((double)got[i] - grads[at]));
                scale = fmax(scale, fabs((double)grads[at]));
            }
            free(got);
        }
    assert_int_equal(at, n_grads);
    print_message("DoRA vs PEFT: loss %.9f (PEFT %.9f); gradients: A and B %.3g, magnitudes %.3g (%zu)\n", loss, want,
                  c.worst, diff / scale, n_m);
    lora_free(&fx->l);
    fx->l = used;
    assert_true(fabs(loss - want) / want <= 1e-6);
    assert_true(c.worst <= 1e-5 && diff / scale <= 1e-5);
    free(grads);
    json_decref(g);
}

static void test_modules_to_save_match_peft(void **state)
{
    fixture *fx = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/modules.json", golden_srcdir());
    json_error_t jerr;
    json_t *g = json_load_file(path, 0, &jerr);
    assert_non_null(g);
    size_t n_grads, n_final;
    float *grads = golden_read_f32("peft", "modules_grads.f32", &n_grads), *final = golden_read_f32("peft", "modules_final.f32", &n_final);
    bool all[W_COUNT] = {0};
    for (int w = W_Q; w <= W_DOWN; w++) all[w] = w != W_FFN_NORM;
    pt_lora used = fx->l; /* fresh adapters: AdamW's moments zero (the earlier tests' steps left theirs) */
    assert_int_equal(lora_create(&fx->l, &fx->m, 4, 8.0f, false, all, 1), PT_OK);
    for_each_tensor(fx, golden_set_values, fx->init);
    pt_tensor embd = fx->m.tok_embd, out = fx->m.output;
    saved_modules sm;
    assert_int_equal(saved_modules_create(&sm, &fx->m, true, true), PT_OK);
    size_t vd = (size_t)(sm.rows * sm.cols), lora = fx->n_floats;
    assert_int_equal(n_grads, lora + 2 * vd);
    float *got = malloc(sizeof(float) * vd * 2);
    double loss = modules_run_step(fx, &sm), want = json_real_value(json_object_get(g, "first_loss"));
    golden_compare c = {grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    assert_int_equal(backend_download(fx->be, &sm.grad[SAVED_EMBED], got, sizeof(float) * vd), PT_OK);
    assert_int_equal(backend_download(fx->be, &sm.grad[SAVED_HEAD], got + vd, sizeof(float) * vd), PT_OK);
    double e_embed = rel_max(got, grads + lora, vd), e_head = rel_max(got + vd, grads + lora + vd, vd);
    print_message("modules_to_save: loss %.9f (PEFT %.9f); gradients vs PEFT: LoRA %.3g, embed_tokens %.3g, lm_head "
                  "%.3g\n", loss, want, c.worst, e_embed, e_head);
    assert_true(fabs(loss - want) / want <= 1e-6);
    assert_true(c.worst <= 1e-4 && e_embed <= 1e-5 && e_head <= 1e-5);
    adamw_options o = {0.9, 0.999, 1e-8, 0.01, 1.0};
    json_t *losses = json_object_get(g, "losses");
    double lr = json_real_value(json_object_get(g, "lr")), elr = json_real_value(json_object_get(g, "embedding_learning_rate"));
    double worst = 0;
    for (int s = 0; s < 20; s++) {
        double l = s ? modules_run_step(fx, &sm) : loss, norm;
        assert_int_equal(optimizer_grad_norm(&fx->l, &norm), PT_OK);
        double sq = norm * norm;
        assert_int_equal(saved_modules_grad_sum_squares(&sm, &sq), PT_OK);
        norm = sqrt(sq);
        assert_int_equal(optimizer_step(&fx->l, &o, norm, lr, s + 1), PT_OK);
        assert_int_equal(saved_modules_step(&sm, &o, norm, elr, s + 1), PT_OK);
        if (getenv("PTRAIN_TEST_VERBOSE")) print_message("step %d loss %.9f (PEFT %.9f) norm %.6f\n", s, l, json_real_value(json_array_get(losses, (size_t)s)), norm);
        worst = fmax(worst, fabs(l - json_real_value(json_array_get(losses, (size_t)s))) / l);
    }
    golden_compare f = {final, false, 0};
    for_each_tensor(fx, golden_compare_tensor, &f);
    assert_int_equal(saved_modules_get(&sm, SAVED_EMBED, got, NULL, NULL), PT_OK);
    assert_int_equal(saved_modules_get(&sm, SAVED_HEAD, got + vd, NULL, NULL), PT_OK);
    double f_embed = rel_max(got, final + lora, vd), f_head = rel_max(got + vd, final + lora + vd, vd);
    print_message("modules_to_save: 20 AdamW steps (modules at lr %g): loss %.3g; after them LoRA %.3g, embed_tokens "
                  "%.3g, lm_head %.3g\n", elr, worst, f.worst, f_embed, f_head);
    saved_modules_free(&sm);
    lora_free(&fx->l);
    fx->l = used;
    assert_true(fx->m.tok_embd.data == embd.data && fx->m.output.data == out.data); /* the model's own, back */
    /* the losses to 1e-5; the parameters after 20 steps as the LoRA-only test holds them (fp32 against
     * PEFT's float64: AdamW's m / sqrt(v) turns the rounding of near-zero gradients into whole steps) */
    assert_true(worst <= 1e-5 && f.worst <= 3e-4 && f_embed <= 1e-4 && f_head <= 1e-4);
    free(got), free(grads), free(final);
    json_decref(g);
}

/* d loss / d theta for a few adapter values by central differences, against step_run's gradient */
static void test_finite_differences(void **state)
{
    fixture *fx = *state;
    for_each_tensor(fx, golden_set_values, fx->init);
    run_step(fx, false);
    train_batch b = batch_of(fx);
    const int probes[][3] = {{0, W_Q, 3}, {1, W_DOWN, 17}, {0, W_V, 250}, {1, W_UP, 5}};
    for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
        adapter_pair *p = adapter_at(&fx->l.ad, probes[i][0], probes[i][1]);
        lora_pair *s = lora_at(&fx->l, probes[i][0], probes[i][1]);
        for (int which = 0; which < 2; which++) {
            pt_tensor *t = which ? &p->b : &p->a, *g = which ? &s->grad_b : &s->grad_a;
            float *vals = malloc(t->nbytes), *grad = malloc(g->nbytes);
            backend_download(fx->be, t, vals, t->nbytes);
            backend_download(fx->be, g, grad, g->nbytes);
            int k = probes[i][2] % (int)tensor_numel(t);
            float keep = vals[k], h = 1e-2f;
            double lp = 0, lm = 0;
            int64_t n = 0;
            vals[k] = keep + h;
            backend_upload(fx->be, t, vals, t->nbytes);
            assert_int_equal(step_loss(&fx->m, &fx->l.ad, &b, NULL, &lp, &n), PT_OK);
            vals[k] = keep - h;
            backend_upload(fx->be, t, vals, t->nbytes);
            n = 0;
            assert_int_equal(step_loss(&fx->m, &fx->l.ad, &b, NULL, &lm, &n), PT_OK);
            vals[k] = keep;
            backend_upload(fx->be, t, vals, t->nbytes);
            double fd = (lp - lm) / (2.0 * h * (double)n);
            /* the fp32 loss sum (~210) carries ~1.5e-5 of rounding noise per evaluation, which the
             * division by 2h·n (~0.7) keeps at ~2e-5; truncation error is O(h²) */
            print_message("layer %d %s %c[%d]: analytic %.6g, central difference %.6g\n", probes[i][0],
                          adapter_module_name(PT_ARCH_LLAMA, probes[i][1]), which ? 'B' : 'A', k, grad[k], fd);
            assert_true(fabs(fd - grad[k]) <= 5e-3 * fabs(fd) + 1e-4);
            free(vals);
            free(grad);
        }
    }
}

/* loss of one micro-batch with dropout (seed fixed, so the function is deterministic) */
static double dropout_loss(fixture *fx, bool checkpointing)
{
    train_batch b = batch_of(fx);
    step_options o = {.checkpointing = checkpointing, .lora_dropout = 0.3f, .dropout_seed = 77};
    double loss = 0;
    int64_t n = 0;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(step_run(&fx->m, &fx->l, &b, &o, 1.0f / (float)labelled(fx), &loss, &n), PT_OK);
    return loss / (double)n;
}

/* lora_dropout: the loss changes, the gradient still matches central differences, and the
 * recomputation under checkpointing draws the same masks */
static void test_lora_dropout(void **state)
{
    fixture *fx = *state;
    for_each_tensor(fx, golden_set_values, fx->init);
    double plain = run_step(fx, false), dropped = dropout_loss(fx, true);
    assert_true(fabs(dropped - plain) > 1e-4);
    adapter_pair *p = adapter_at(&fx->l.ad, 1, W_V);
    lora_pair *s = lora_at(&fx->l, 1, W_V);
    float *grad = malloc(s->grad_a.nbytes), *vals = malloc(p->a.nbytes);
    backend_download(fx->be, &s->grad_a, grad, s->grad_a.nbytes);
    dropout_loss(fx, false);
    float *grad2 = malloc(s->grad_a.nbytes);
    backend_download(fx->be, &s->grad_a, grad2, s->grad_a.nbytes);
    assert_memory_equal(grad, grad2, s->grad_a.nbytes);
    backend_download(fx->be, &p->a, vals, p->a.nbytes);
    int k = 40;
    float keep = vals[k], h = 1e-2f;
    vals[k] = keep + h;
    backend_upload(fx->be, &p->a, vals, p->a.nbytes);
    double lp = dropout_loss(fx, true);
    vals[k] = keep - h;
    backend_upload(fx->be, &p->a, vals, p->a.nbytes);
    double lm = dropout_loss(fx, true);
    vals[k] = keep;
    backend_upload(fx->be, &p->a, vals, p->a.nbytes);
    double fd = (lp - lm) / (2.0 * h);
    print_message("dropout 0.3: loss %.6f (without %.6f); dA[%d] analytic %.6g, central difference %.6g\n", dropped,
                  plain, k, grad[k], fd);
    /* the mean loss carries ~1.5e-5 / labelled of fp32 rounding per evaluation, which the
     * difference quotient turns into ~1e-3 / labelled of noise in fd: allow twice that
     * (measured: 1.0e-5 on an AMD EPYC, 0.7% of the gradient) */
    assert_true(fabs(fd - grad[k]) <= 5e-3 * fabs(fd) + 2e-3 / labelled(fx));
    free(grad);
    free(grad2);
    free(vals);
}

/* NEFTune (neftune_noise_alpha): forward_embed_noise draws uniform(-mag, mag) numbers (mean 0,
 * variance mag^2/3, a quarter in each quarter of the range), the same for the same seed and others
 * for another; in a step the loss moves, the gradients are the same with and without checkpointing
 * (the noise is drawn once, on the embeddings every layer input starts from) and from run to run,
 * and the loss without a gradient (evaluation) has no noise. */
static double neftune_loss(fixture *fx, bool checkpointing, float alpha, uint64_t seed)
{
    train_batch b = batch_of(fx);
    step_options o = {.checkpointing = checkpointing, .neftune_alpha = alpha, .noise_seed = seed};
    double loss = 0;
    int64_t n = 0;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(step_run(&fx->m, &fx->l, &b, &o, 1.0f / (float)labelled(fx), &loss, &n), PT_OK);
    return loss / (double)n;
}

static void test_neftune(void **state)
{
    fixture *fx = *state;
    int64_t shape[2] = {64, 256}, n = 64 * 256;
    pt_tensor x = tensor_make(PT_F32, 2, shape), buf = tensor_make(PT_F32, 2, shape);
    assert_int_equal(backend_alloc(fx->be, &x), PT_OK);
    assert_int_equal(backend_alloc(fx->be, &buf), PT_OK);
    float mag = 0.5f, *a = malloc(sizeof(float) * (size_t)n), *b2 = malloc(sizeof(float) * (size_t)n);
    for (int pass = 0; pass < 3; pass++) {
        assert_int_equal(backend_zero(fx->be, &x), PT_OK);
        assert_int_equal(forward_embed_noise(fx->be, &x, &buf, mag, pass < 2 ? 9 : 10), PT_OK);
        assert_int_equal(backend_download(fx->be, &x, pass ? b2 : a, x.nbytes), PT_OK);
        if (pass == 1) assert_memory_equal(a, b2, x.nbytes);
        if (pass == 2) assert_memory_not_equal(a, b2, x.nbytes);
    }
    double sum = 0, sq = 0;
    int64_t quarter = 0;
    for (int64_t i = 0; i < n; i++) {
        assert_true(fabsf(a[i]) <= mag);
        sum += a[i], sq += (double)a[i] * a[i];
        quarter += a[i] >= 0.0f && a[i] < mag / 2;
    }
    double mean = sum / (double)n, var = sq / (double)n - mean * mean, want = mag * mag / 3.0;
    print_message("neftune: mean %.2e, variance %.5f (uniform: %.5f), %.4f in [0, mag/2) (0.25)\n", mean, var, want,
                  (double)quarter / (double)n);
    assert_true(fabs(mean) < 4.0 * sqrt(want / (double)n));
    assert_true(fabs(var - want) < 0.03 * want);
    assert_true(fabs((double)quarter / (double)n - 0.25) < 0.01);
    free(a);
    free(b2);
    backend_release(fx->be, &x);
    backend_release(fx->be, &buf);

    for_each_tensor(fx, golden_set_values, fx->final); /* B non-zero: the adapters see the noise too */
    double plain = run_step(fx, false), noisy = neftune_loss(fx, false, 5.0f, 3);
    print_message("neftune 5: loss %.6f (without %.6f)\n", noisy, plain);
    assert_true(fabs(noisy - plain) > 1e-5);
    lora_pair *s = lora_at(&fx->l, 0, W_Q);
    float *g1 = malloc(s->grad_a.nbytes), *g2 = malloc(s->grad_a.nbytes);
    assert_int_equal(backend_download(fx->be, &s->grad_a, g1, s->grad_a.nbytes), PT_OK);
    assert_true(neftune_loss(fx, true, 5.0f, 3) == noisy);
    assert_int_equal(backend_download(fx->be, &s->grad_a, g2, s->grad_a.nbytes), PT_OK);
    assert_memory_equal(g1, g2, s->grad_a.nbytes);
    assert_true(neftune_loss(fx, false, 5.0f, 4) != noisy);
    train_batch b = batch_of(fx);
    double eval = 0;
    int64_t cnt = 0;
    assert_int_equal(step_loss(&fx->m, &fx->l.ad, &b, NULL, &eval, &cnt), PT_OK);
    assert_true(fabs(eval / (double)cnt - plain) < 1e-6 * fabs(plain));
    free(g1);
    free(g2);
}

/* init_lora_weights: ptrain's fresh adapters follow PEFT's laws (tests/data/peft/init_stats.json,
 * make_init_goldens.py: the same statistics of PEFT's adapters on a tiny Llama), with a per-module
 * rank from rank_pattern; its numbers come from its own seeded generator. */
static void test_init_lora_weights(void **state)
{
    fixture *fx = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/peft/init_stats.json", golden_srcdir());
    json_error_t jerr;
    json_t *gold = json_load_file(path, 0, &jerr);
    assert_non_null(gold);
    const char *names[] = {"true", "false", "gaussian"};
    adapter_init inits[] = {ADAPTER_INIT_TRUE, ADAPTER_INIT_FALSE, ADAPTER_INIT_GAUSSIAN};
    bool all[W_COUNT] = {0};
    for (int w = W_Q; w <= W_DOWN; w++) all[w] = w != W_FFN_NORM;
    for (int k = 0; k < 3; k++) {
        double a_max = 0, b_max = 0, a_sq = 0, b_sq = 0, a_n = 0, b_n = 0;
        bool b_zero = true;
        for (uint64_t seed = 0; seed < 8; seed++) {
            pt_lora l;
            assert_int_equal(lora_create_select(&l, &fx->m, 4, 8.0f, false, all, "{\"rank_pattern\": {\"down_proj\": 2}}",
                                                "test", inits[k], seed + 1),
                             PT_OK);
            assert_int_equal(adapter_at(&l.ad, 1, W_DOWN)->r, 2);
            for (adapter_pair *p = adapter_next(&l.ad, NULL); p; p = adapter_next(&l.ad, p)) {
                int64_t na = tensor_numel(&p->a), nb = tensor_numel(&p->b);
                float *a = malloc(p->a.nbytes), *b = malloc(p->b.nbytes);
                backend_download(fx->be, &p->a, a, p->a.nbytes);
                backend_download(fx->be, &p->b, b, p->b.nbytes);
                double sa = inits[k] == ADAPTER_INIT_GAUSSIAN ? p->r : sqrt((double)p->a.shape[1]), sb = sqrt(p->r);
                for (int64_t i = 0; i < na; i++) a_max = fmax(a_max, fabs(a[i]) * sa), a_sq += a[i] * sa * a[i] * sa;
                for (int64_t i = 0; i < nb; i++)
                    b_max = fmax(b_max, fabs(b[i]) * sb), b_sq += b[i] * sb * b[i] * sb, b_zero = b_zero && b[i] == 0;
                a_n += (double)na, b_n += (double)nb;
                free(a);
                free(b);
            }
            lora_free(&l);
        }
        json_t *g = json_object_get(gold, names[k]);
        double ga_max = json_real_value(json_object_get(g, "a_max")), ga_rms = json_real_value(json_object_get(g, "a_rms"));
        double gb_max = json_number_value(json_object_get(g, "b_max")), gb_rms = json_number_value(json_object_get(g, "b_rms"));
        double a_rms = sqrt(a_sq / a_n), b_rms = sqrt(b_sq / b_n);
        print_message("init_lora_weights %s: A max %.4f rms %.4f (PEFT %.4f, %.4f), B max %.4f rms %.4f (PEFT %.4f, "
                      "%.4f)\n", names[k], a_max, a_rms, ga_max, ga_rms, b_max, b_rms, gb_max, gb_rms);
        assert_true(b_zero == json_is_true(json_object_get(g, "b_zero")));
        assert_true(fabs(a_rms - ga_rms) < 0.02 * ga_rms);
        assert_true(fabs(b_rms - gb_rms) <= 0.02 * gb_rms);
        if (inits[k] != ADAPTER_INIT_GAUSSIAN) assert_true(a_max <= 1.0 && a_max > 0.99 * ga_max);
        if (inits[k] == ADAPTER_INIT_FALSE) assert_true(b_max <= 1.0 && b_max > 0.99 * gb_max);
    }
    json_decref(gold);
}

static void test_adapter_roundtrip(void **state)
{
    fixture *fx = *state;
    for_each_tensor(fx, golden_set_values, fx->final);
    char dir[TMPDIR_SIZE];
    assert_int_equal(tmpdir_create(dir, sizeof dir, "ptrain-adapter"), 0);
    adapter_info info = {.base_model = "tiny-mha-f32.gguf", .chat_template = "chatml", .best_step = -1};
    assert_int_equal(adapter_save(dir, &fx->l.ad, &info), PT_OK);
    pt_adapter back;
    assert_int_equal(adapter_load(dir, &fx->m, &back), PT_OK);
    assert_int_equal(back.r, 4);
    assert_true(back.scale == fx->l.ad.scale);
    pt_adapter keep = fx->l.ad;
    fx->l.ad = back;
    golden_compare c = {fx->final, false, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    fx->l.ad = keep;
    assert_true(c.worst == 0.0);
    adapter_free(&back);
    /* a file that is not an adapter, and a missing one */
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter.h5", dir);
    FILE *f = fopen(path, "w");
    fputs("not hdf5", f);
    fclose(f);
    assert_int_equal(adapter_load(dir, &fx->m, &back), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "is not an HDF5 file"));
    assert_int_equal(tmpdir_remove(dir), 0);
    assert_int_equal(adapter_load(dir, &fx->m, &back), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "not found"));
}

/* Granite 4.0 (make_granite4_goldens.py's hf/): adapter.gguf holds input_linear's pair as ffn_gate and ffn_up pairs
 * (each with the whole A and its half of B's rows, as llama.cpp's converter splits it); read back, the two are joined
 * into the one pair, bit for bit; a file whose halves' A differ is refused. */
static void test_granite4_adapter_gguf(void **state)
{
    (void)state;
    char path[1200], dir[TMPDIR_SIZE];
    snprintf(path, sizeof path, "%s/tests/data/granite4/hf", golden_srcdir());
    pt_backend *be;
    pt_backend_options bo = {.device = DEVICE_CPU, .threads = 0};
    pt_model m;
    pt_lora l;
    assert_int_equal(backend_open(&bo, &be), PT_OK);
    assert_int_equal(model_load(path, NULL, NULL, be, &m, NULL, NULL, 0), PT_OK);
    bool all[W_COUNT] = {[W_Q] = true, [W_K] = true, [W_V] = true, [W_O] = true, [W_GATE] = true, [W_DOWN] = true};
    assert_int_equal(lora_create_select(&l, &m, 4, 8.0f, false, all, NULL, "test", ADAPTER_INIT_FALSE, 7), PT_OK);
    assert_int_equal(tmpdir_create(dir, sizeof dir, "ptrain-g4gguf"), 0);
    snprintf(path, sizeof path, "%s/adapter.gguf", dir);
    assert_int_equal(adapter_gguf_save(path, &l.ad, &m.cfg, NULL), PT_OK);
    gguf_file f; /* the file as llama.cpp's granite wants it: no input_linear, a gate and an up pair per layer */
    assert_int_equal(gguf_open(path, &f), PT_OK);
    int64_t ffn = adapter_at(&l.ad, 0, W_GATE)->b.shape[0] / 2;
    int halves = 0;
    long at = -1; /* where blk.1.ffn_up's lora_a starts in the file */
    for (uint64_t i = 0; i < f.n_tensors; i++) {
        const gguf_tensor *g = &f.tensors[i];
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(g->name.len < 63 ? g->name.len : 63), g->name.data);
        assert_null(strstr(name, "input_linear"));
        if (strstr(name, ".ffn_gate.weight.lora_b") || strstr(name, ".ffn_up.weight.lora_b"))
            halves++, assert_int_equal((int64_t)g->dims[1], ffn);
        if (!strcmp(name, "blk.1.ffn_up.weight.lora_a")) at = (long)((const char *)g->data - (const char *)f.map);
    }
    gguf_close(&f);
    if (halves != 2 * m.cfg.n_layers) fail_msg("%d halves in %s", halves, path);
    pt_adapter back;
    assert_int_equal(adapter_load(path, &m, &back), PT_OK);
    int pairs = 0;
    for (int i = 0; i < m.cfg.n_layers * W_COUNT; i++) {
        adapter_pair *p = adapter_at(&l.ad, i / W_COUNT, i % W_COUNT), *q = adapter_at(&back, i / W_COUNT, i % W_COUNT);
        if (!p) continue;
        assert_non_null(q);
        pairs++;
        const pt_tensor *t[2][2] = {{&p->a, &q->a}, {&p->b, &q->b}};
        for (int k = 0; k < 2; k++) {
            assert_true(t[k][0]->nbytes == t[k][1]->nbytes);
            float *x = malloc(t[k][0]->nbytes), *y = malloc(t[k][0]->nbytes);
            assert_int_equal(backend_download(be, t[k][0], x, t[k][0]->nbytes), PT_OK);
            assert_int_equal(backend_download(be, t[k][1], y, t[k][0]->nbytes), PT_OK);
            assert_memory_equal(x, y, t[k][0]->nbytes);
            free(x), free(y);
        }
    }
    assert_int_equal(pairs, 6 * m.cfg.n_layers);
    print_message("granite4: adapter.gguf's ffn_gate/ffn_up pairs read back into %d pairs, bit for bit\n", pairs);
    adapter_free(&back);
    FILE *w = fopen(path, "r+b"); /* that A's first value no longer the ffn_gate half's */
    float one = 1.0f;
    assert_true(w && at > 0 && fseek(w, at, SEEK_SET) == 0 && fwrite(&one, sizeof one, 1, w) == 1);
    fclose(w);
    assert_int_equal(adapter_load(path, &m, &back), PT_ERR_USER);
    assert_non_null(strstr(err_message(), "blk.1.ffn_up.weight.lora_a differs from the lora_a of the other half"));
    assert_int_equal(tmpdir_remove(dir), 0);
    lora_free(&l);
    model_free(&m);
    backend_close(be);
}

static double max_rel_diff(const float *got, const float *ref, size_t n)
{
    double worst = 0, scale = 1e-30;
    for (size_t i = 0; i < n; i++) {
        worst = fmax(worst, fabs((double)got[i] - ref[i]));
        scale = fmax(scale, fabs((double)ref[i]));
    }
    return worst / scale;
}

/* One step on a batch, returning its loss sum and labelled count; the gradients land in grads. */
static double step_grads(fixture *fx, const train_batch *b, bool full_lm_head, float *grads, int64_t *n)
{
    step_options o = {.full_lm_head = full_lm_head};
    double loss = 0;
    *n = 0;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(step_run(&fx->m, &fx->l, b, &o, 0.01f, &loss, n), PT_OK);
    for_each_tensor(fx, golden_collect_grads, grads);
    return loss;
}

/* Three examples of 24, 17 and 9 tokens whose first third is a prompt without labels, padded to
 * 24 with the lm_head on every row (the plain computation), against (1) the same rows with logits
 * only on the labelled rows and (2) the examples end to end in one row of 50 (segments, positions
 * restarting) with logits only on the labelled rows. */
static void test_padding_free_labelled_only(void **state)
{
    fixture *fx = *state;
    for_each_tensor(fx, golden_set_values, fx->init);
    enum { B = 3, T = 24 };
    const int lens[B] = {24, 17, 9};
    int32_t ids[B * T], tg[B * T], pos[B * T], fids[B * T], ftg[B * T], fpos[B * T], fseg[B * T];
    int at = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            int i = b * T + t;
            bool real = t < lens[b];
            ids[i] = real ? fx->ids[(b * 7 + t) % (fx->batch * fx->seq)] : 0;
            tg[i] = real && t + 1 < lens[b] && t >= lens[b] / 3 ? fx->ids[(b * 7 + t + 1) % (fx->batch * fx->seq)]
                                                                : PT_IGNORE_INDEX;
            pos[i] = real ? t : 0;
            if (!real) continue;
            fids[at] = ids[i], ftg[at] = tg[i], fpos[at] = t, fseg[at] = b + 1;
            at++;
        }
    train_batch padded = {B, T, ids, tg, pos, NULL}, flat = {1, at, fids, ftg, fpos, fseg};
    float *g_ref = malloc(sizeof(float) * fx->n_floats), *g_lab = malloc(sizeof(float) * fx->n_floats);
    float *g_new = malloc(sizeof(float) * fx->n_floats);
    int64_t n_ref, n_lab, n_new;
    double l_ref = step_grads(fx, &padded, true, g_ref, &n_ref);
    double l_lab = step_grads(fx, &padded, false, g_lab, &n_lab);
    double l_new = step_grads(fx, &flat, false, g_new, &n_new);
    double d_lab = max_rel_diff(g_lab, g_ref, fx->n_floats), d_new = max_rel_diff(g_new, g_ref, fx->n_floats);
    print_message("loss sums over %lld labelled: padded + every row's logits %.9g, padded + labelled rows' %.9g, "
                  "padding-free + labelled rows' %.9g; gradients' max relative difference to the first: %.3g, %.3g\n",
                  (long long)n_ref, l_ref, l_lab, l_new, d_lab, d_new);
    /* The same arithmetic on every labelled row, in GEMMs of other shapes (OpenBLAS blocks them
     * differently), and padding-free sums the weight gradients over 50 rows instead of 72 (22
     * exact zeros): agreement to fp32 rounding. */
    assert_int_equal(n_lab, n_ref);
    assert_int_equal(n_new, n_ref);
    assert_true(fabs(l_lab - l_ref) <= 1e-6 * fabs(l_ref));
    assert_true(fabs(l_new - l_ref) <= 1e-6 * fabs(l_ref));
    assert_true(d_lab <= 2e-5 && d_new <= 2e-5);
    free(g_lab);
    free(g_ref);
    free(g_new);
}

/* trainer_check_finite: the first NaN or infinity names the tensor, the element and the file not
 * written; trainer_check_step: stop at once, or skip until FINITE_MAX_SKIPPED in a row. */
static void test_nonfinite_refused(void **state)
{
    (void)state;
    ckpt_entry e[2] = {{"layers.0.q_proj.lora_A.weight", 2, 3, 0}, {"layers.0.q_proj.lora_B.weight", 3, 2, 6}};
    pt_config cfg = {.learning_rate = 1e3};
    trainer t = {.cfg = &cfg, .lay = {e, 2, 12}, .last_saved = -1, .total = 20};
    float v[12] = {0};
    assert_int_equal(trainer_check_finite(&t, v, "adapter", "out/checkpoint-4.h5"), PT_OK);
    v[6 + 2 * 2 + 1] = INFINITY;
    assert_int_equal(trainer_check_finite(&t, v, "adapter", "out/checkpoint-4.h5"), PT_ERR_DIVERGED);
    assert_non_null(strstr(err_message(), "out/checkpoint-4.h5 is not written: adapter layers.0.q_proj.lora_B.weight "
                                          "holds inf at [2, 1]"));
    assert_non_null(strstr(err_message(), "learning_rate 1000"));
    v[11] = v[0] = NAN; /* the first one is named */
    assert_int_equal(trainer_check_finite(&t, v, "adapter", "x"), PT_ERR_DIVERGED);
    assert_non_null(strstr(err_message(), "lora_A.weight holds nan at [0, 0]"));
    bool skip = true;
    assert_int_equal(trainer_check_step(&t, 3, false, 2.5, 0.7, &skip), PT_OK);
    assert_false(skip);
    assert_int_equal(trainer_check_step(&t, 4, true, NAN, 0.7, &skip), PT_ERR_DIVERGED);
    assert_non_null(strstr(err_message(), "step 4 of 20: the loss is nan and the gradient norm 0.7"));
    cfg.skip_nonfinite_steps = true;
    t.nonfinite_run = 0;
    for (int i = 1; i < FINITE_MAX_SKIPPED; i++) {
        assert_int_equal(trainer_check_step(&t, 4 + i, true, 1.0, INFINITY, &skip), PT_OK);
        assert_true(skip);
    }
    assert_int_equal(trainer_check_step(&t, 4 + FINITE_MAX_SKIPPED, true, 1.0, INFINITY, &skip), PT_ERR_DIVERGED);
    assert_non_null(strstr(err_message(), "gradient norm inf (10 steps in a row)"));
    t.nonfinite_run = 3; /* a finite step ends the run of skipped ones */
    assert_int_equal(trainer_check_step(&t, 30, false, 1.0, 1.0, &skip), PT_OK);
    assert_int_equal(t.nonfinite_run, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradients_match_peft), cmocka_unit_test(test_rslora_gradients_match_peft),
        cmocka_unit_test(test_checkpointing_same_gradients), cmocka_unit_test(test_schedule_matches_transformers),
        cmocka_unit_test(test_plan_from_config),
        cmocka_unit_test(test_finite_differences),   cmocka_unit_test(test_20_adamw_steps_match_torch),
        cmocka_unit_test(test_modules_to_save_match_peft),
        cmocka_unit_test(test_dora_match_peft),
        cmocka_unit_test(test_lora_dropout),          cmocka_unit_test(test_neftune), cmocka_unit_test(test_init_lora_weights),
        cmocka_unit_test(test_adapter_roundtrip), cmocka_unit_test(test_granite4_adapter_gguf),
        cmocka_unit_test(test_padding_free_labelled_only), cmocka_unit_test(test_nonfinite_refused),
    };
    return cmocka_run_group_tests_name("train", tests, setup, teardown);
}
