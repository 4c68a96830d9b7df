/* test_dpo.c — DPO on the tiny Llama against TRL 1.16's DPOTrainer with PEFT
 * (tests/reference/make_dpo_goldens.py): two preference pairs as one padding-free row of four
 * sequences (pair i: chosen 2i, rejected 2i+1; the prompt's tokens unlabelled), the reference
 * log-probs from the same model with the adapter off (step_sequence_nll with no adapter), the
 * loss and gradient through the loss head's per-sequence sums and scales (step.h) and
 * preference_dpo. Checked: the first loss is ln 2 exactly while B is zero, and it, TRL's metrics
 * and the LoRA gradients match TRL's (B zero; A and B random); 20 AdamW steps' losses. And the
 * preference rows (text and conversational) tokenized by the data pipeline as TRL's DPOTrainer
 * tokenizes them with two real tokenizers (its prompt_ids, chosen_ids, rejected_ids); the cuts.
 * CPO and ORPO likewise against their trainers; KTO against KTOTrainer (make_kto_goldens.py): four
 * unpaired rows batched with their KL sequences by batch_collate_unpaired, the reference and KL
 * passes, preference_kto; its rows (text, turns, pairs unrolled) and KL sequences as TRL makes them.
 * Reward modelling against RewardTrainer with a SEQ_CLS LoRA (make_reward_goldens.py): two pairs as
 * four whole sequences scored at their last non-pad token by the step's score head (from PEFT's
 * first score weight), preference_reward; the loss, TRL's metrics, the LoRA and score gradients
 * (B zero, random, and with a margin column and center_rewards_coefficient); 20 AdamW steps of the
 * LoRA matrices and the score under one clip; the rows tokenized as RewardTrainer's _prepare_dataset
 * tokenizes them (and the pairs its max_length filter keeps). DoRA (use_dora) with DPO, KTO, CPO, ORPO
 * and reward modelling against the same trainers with PEFT's use_dora (make_dora_pref_goldens.py):
 * the loss, the metrics and the gradients of A, B, the magnitudes (and the score). */
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
#include "ptrain/config.h"
#include "ptrain/config_options.h"
#include "ptrain/dataset.h"
#include "ptrain/dataset_cache.h"
#include "ptrain/optimizer.h"
#include "ptrain/preference.h"
#include "ptrain/score_head.h"
#include "ptrain/step.h"
#include "golden_lora.h"
#include "train/trainer.h"

#define MAX_ROWS 256

typedef struct {
    pt_backend *be;
    pt_model m;
    pt_lora l;
    json_t *manifest;
    int rows, pairs;
    int32_t ids[MAX_ROWS], targets[MAX_ROWS], pos[MAX_ROWS], segments[MAX_ROWS], row_seq[MAX_ROWS];
    double beta;
    const char *dir; /* "dpo", "cpo", "orpo" or "kto": the goldens, and the loss */
    bool cpo, orpo, kto;
    int kto_main;                 /* KTO: the examples' rows (then the KL sequences') */
    bool desirable[8];            /* KTO: each example's label */
    double kto_ref[24], kto_kl;   /* KTO: ref (2n slots), ref KL (n), policy KL (n); the KL estimate */
    int32_t orpo_targets[MAX_ROWS], orpo_seq[MAX_ROWS];
    double tokens[48];
    double ref_nll[16];
    double sums[PREF_COUNT];
    bool reward;             /* reward modelling (make_reward_goldens.py): the score head */
    score_head head;
    int32_t score_row[16];
    double margins[8];
    bool use_margin;
    double center;
} fixture;

/* The golden manifest's LoRA tensors of this fixture's adapter, in file order (golden_lora.h). */
static void for_each_tensor(fixture *fx, golden_tensor_fn fn, void *arg)
{
    golden_for_each_tensor(fx->be, &fx->l, fx->manifest, fn, arg);
}

static void load_adapter(fixture *fx, const char *file)
{
    size_t n;
    float *v = golden_read_f32(fx->dir, file, &n);
    for_each_tensor(fx, golden_set_values, v);
    free(v);
}

/* one sequence: the prompt, then the completion, whose tokens are the targets */
static void append_sequence(fixture *fx, int seq, json_t *prompt, json_t *completion)
{
    int np = (int)json_array_size(prompt), nc = (int)json_array_size(completion), at = fx->rows;
    assert_true(at + np + nc <= MAX_ROWS);
    for (int t = 0; t < np + nc; t++) {
        json_t *id = t < np ? json_array_get(prompt, (size_t)t) : json_array_get(completion, (size_t)(t - np));
        fx->ids[at + t] = (int32_t)json_integer_value(id);
        fx->pos[at + t] = t;
        fx->segments[at + t] = seq + 1;
        fx->row_seq[at + t] = seq;
        /* row t predicts token t+1: counted when that token is the completion's */
        fx->targets[at + t] = t + 1 < np + nc && t + 1 >= np
                                  ? (int32_t)json_integer_value(json_array_get(completion, (size_t)(t + 1 - np)))
                                  : PT_IGNORE_INDEX;
    }
    fx->rows += np + nc;
}

/* KTO's rows (prompt_ids, completion_ids, label) as the unpaired dataset's examples, batched by
 * batch_collate_unpaired as the trainer batches them: the examples, then their KL sequences. */
static void kto_batch(fixture *fx)
{
    json_t *rows = json_object_get(fx->manifest, "rows");
    size_t n = json_array_size(rows), idx[8];
    assert_true(n <= 8);
    pt_dataset ds = {.ex = calloc(n, sizeof(pt_example)), .n = n, .max_len = 8192, .packed = true};
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_array_get(rows, i), *p = json_object_get(r, "prompt_ids"), *c = json_object_get(r, "completion_ids");
        size_t np = json_array_size(p), len = np + json_array_size(c);
        pt_example *ex = &ds.ex[i];
        ex->ids = malloc(sizeof(int32_t) * len), ex->labels = malloc(sizeof(int32_t) * len);
        ex->segments = malloc(sizeof(int32_t) * len), ex->len = (int32_t)len;
        for (size_t t = 0; t < len; t++) {
            ex->ids[t] = (int32_t)json_integer_value(t < np ? json_array_get(p, t) : json_array_get(c, t - np));
            ex->labels[t] = t < np ? PT_IGNORE_INDEX : ex->ids[t];
            ex->segments[t] = json_is_true(json_object_get(r, "label")) ? 1 : 2;
        }
        fx->desirable[i] = json_is_true(json_object_get(r, "label"));
        idx[i] = i;
    }
    pt_batch b;
    assert_int_equal(batch_collate_unpaired(&ds, idx, n, 4096, &b), PT_OK);
    assert_true(b.cols <= MAX_ROWS);
    fx->rows = b.cols, fx->pairs = (int)n;
    for (int r = 0; r < b.cols; r++) {
        fx->ids[r] = b.ids[r], fx->targets[r] = b.targets[r], fx->pos[r] = b.pos[r], fx->segments[r] = b.segments[r];
        bool main = b.segments[r] <= 2 * (int)n;
        fx->kto_main += main;
        fx->row_seq[r] = main ? b.segments[r] - 1 : b.segments[r] - 2 * (int)n - 1;
        if (main) assert_int_equal((b.segments[r] - 1) % 2, fx->desirable[(b.segments[r] - 1) / 2] ? 0 : 1);
    }
    batch_free(&b);
    dataset_free(&ds);
}

static int setup_dir(void **state, const char *dir)
{
    fixture *fx = calloc(1, sizeof *fx);
    fx->dir = dir, fx->reward = !strcmp(dir, "reward"), fx->cpo = !strcmp(dir, "cpo"), fx->orpo = !strcmp(dir, "orpo"), fx->kto = !strcmp(dir, "kto");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/%s/manifest.json", golden_srcdir(), dir);
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
    fx->beta = json_real_value(json_object_get(fx->manifest, "beta"));
    size_t i;
    json_t *pair;
    if (fx->kto) kto_batch(fx);
    if (fx->reward) { /* the head from PEFT's first score; each sequence whole, scored at its last non-pad token */
        size_t n;
        float *w = golden_read_f32(dir, "score_init.f32", &n);
        assert_int_equal((int64_t)n, fx->m.cfg.dim);
        assert_int_equal(score_head_create(&fx->head, fx->be, fx->m.cfg.dim, 0.02, 1), PT_OK);
        assert_int_equal(score_head_set(&fx->head, w, NULL, NULL), PT_OK);
        free(w);
        json_t *none = json_array();
        json_array_foreach(json_object_get(fx->manifest, "pairs"), i, pair) {
            append_sequence(fx, 2 * (int)i, none, json_object_get(pair, "chosen_ids"));
            append_sequence(fx, 2 * (int)i + 1, none, json_object_get(pair, "rejected_ids"));
            fx->margins[i] = json_real_value(json_array_get(json_object_get(fx->manifest, "margins"), i));
            fx->pairs++;
        }
        json_decref(none);
        int pad = (int)json_integer_value(json_object_get(fx->manifest, "pad_id"));
        assert_int_equal(preference_score_rows(fx->ids, fx->segments, fx->rows, pad, fx->score_row), 2 * fx->pairs);
        *state = fx;
        return 0;
    }
    json_array_foreach(json_object_get(fx->manifest, "pairs"), i, pair) {
        json_t *prompt = json_object_get(pair, "prompt_ids");
        append_sequence(fx, 2 * (int)i, prompt, json_object_get(pair, "chosen_ids"));
        append_sequence(fx, 2 * (int)i + 1, prompt, json_object_get(pair, "rejected_ids"));
        fx->pairs++;
    }
    *state = fx;
    return 0;
}

static int setup(void **state) { return setup_dir(state, "dpo"); }
static int setup_cpo(void **state) { return setup_dir(state, "cpo"); }
static int setup_orpo(void **state) { return setup_dir(state, "orpo"); }
static int setup_kto(void **state) { return setup_dir(state, "kto"); }
static int setup_reward(void **state) { return setup_dir(state, "reward"); }

static int teardown(void **state)
{
    fixture *fx = *state;
    lora_free(&fx->l);
    if (fx->reward) score_head_free(&fx->head);
    model_free(&fx->m);
    backend_close(fx->be);
    json_decref(fx->manifest);
    free(fx);
    return 0;
}

static train_batch batch_of(fixture *fx)
{
    train_batch b = {1, fx->rows, fx->ids, fx->targets, fx->pos, fx->segments};
    return b;
}

static pt_status dpo_grad(void *arg, const double *nll, float *scale)
{
    fixture *fx = arg;
    if (fx->reward) { /* nll: the scores */
        preference_reward(nll, fx->use_margin ? fx->margins : NULL, fx->pairs, fx->center, 1.0 / fx->pairs, scale,
                          fx->sums);
        return PT_OK;
    }
    if (fx->kto) {
        preference_kto(nll, fx->kto_ref, fx->desirable, fx->pairs, fx->kto_kl, fx->beta,
                       json_real_value(json_object_get(fx->manifest, "desirable_weight")),
                       json_real_value(json_object_get(fx->manifest, "undesirable_weight")), 1.0 / fx->pairs, scale,
                       fx->sums);
        return PT_OK;
    }
    if (fx->orpo) {
        preference_orpo(nll, fx->tokens, fx->pairs, fx->beta, 1.0 / fx->pairs, scale, fx->sums);
        return PT_OK;
    }
    if (!fx->cpo) {
        preference_dpo(nll, fx->ref_nll, fx->pairs, fx->beta, 1.0 / fx->pairs, scale, fx->sums);
        return PT_OK;
    }
    double chosen_tokens = 0; /* the chosen completions' targets: sequences 0, 2, ... */
    for (int r = 0; r < fx->rows; r++) chosen_tokens += fx->row_seq[r] % 2 == 0 && fx->targets[r] != PT_IGNORE_INDEX;
    preference_cpo(nll, fx->pairs, chosen_tokens, fx->beta, 1.0 / fx->pairs, scale, fx->sums);
    return PT_OK;
}

/* one DPO step on the batch: the reference pass (the adapter off), then the policy's step; the loss */
static double dpo_step(fixture *fx)
{
    train_batch b = batch_of(fx);
    if (fx->kto) { /* the reference of the examples and of the KL sequences, the policy's of the latter */
        int n = fx->pairs, m = fx->kto_main;
        train_batch mis = {1, fx->rows - m, fx->ids + m, fx->targets + m, fx->pos + m, fx->segments + m};
        b.seq = m;
        double *ref_kl = fx->kto_ref + 2 * n, *pol_kl = ref_kl + n;
        assert_int_equal(step_sequence_nll(&fx->m, NULL, &b, fx->row_seq, 2 * n, NULL, fx->kto_ref), PT_OK);
        assert_int_equal(step_sequence_nll(&fx->m, NULL, &mis, fx->row_seq + m, n, NULL, ref_kl), PT_OK);
        assert_int_equal(step_sequence_nll(&fx->m, &fx->l.ad, &mis, fx->row_seq + m, n, NULL, pol_kl), PT_OK);
        fx->kto_kl = 0;
        for (int k = 0; k < n; k++) fx->kto_kl += (ref_kl[k] - pol_kl[k]) / n;
        fx->kto_kl = fmax(fx->kto_kl, 0.0);
    } else if (fx->reward) { /* the score head in place of the LM head */
        memset(fx->sums, 0, sizeof fx->sums);
        step_options o = {.checkpointing = true, .n_seq = 2 * fx->pairs, .seq_grad = dpo_grad, .seq_grad_arg = fx,
                          .score_w = fx->head.host_w, .score_row = fx->score_row, .score_grad = fx->head.host_grad};
        double unused = 0;
        int64_t n = 0;
        assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
        score_head_zero_grad(&fx->head);
        assert_int_equal(step_run(&fx->m, &fx->l, &b, &o, 0.0f, &unused, &n), PT_OK);
        assert_int_equal(score_head_grad_upload(&fx->head), PT_OK);
        return fx->sums[PREF_LOSS] / fx->pairs;
    } else if (!fx->cpo) /* CPO has no reference */
        assert_int_equal(step_sequence_nll(&fx->m, NULL, &b, fx->row_seq, 2 * fx->pairs, NULL, fx->ref_nll), PT_OK);
    memset(fx->sums, 0, sizeof fx->sums);
    step_options o = {.checkpointing = true, .row_seq = fx->row_seq, .n_seq = 2 * fx->pairs, .seq_grad = dpo_grad,
                      .seq_grad_arg = fx};
    if (fx->orpo) { /* the chosen prompts' rows count in ORPO's token mean: 3P sequences */
        o.n_seq = preference_orpo_rows(fx->ids, fx->targets, fx->segments, fx->rows, fx->orpo_targets, fx->orpo_seq,
                                       fx->tokens);
        o.row_seq = fx->orpo_seq, b.targets = fx->orpo_targets;
    }
    double tokens = 0;
    int64_t n = 0;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(step_run(&fx->m, &fx->l, &b, &o, 0.0f, &tokens, &n), PT_OK);
    assert_int_equal((int)fx->sums[PREF_PAIRS], fx->pairs);
    return fx->sums[PREF_LOSS] / fx->pairs;
}

/* reward: the score's gradient, which follows the LoRA matrices' in grads[n] */
static double compare_score_grad(fixture *fx, const float *grads, size_t n, const char *which)
{
    double diff = 0, scale = 1e-30;
    const float *ref = grads + n - (size_t)fx->head.dim;
    for (int64_t k = 0; k < fx->head.dim; k++)
        diff = fmax(diff, fabs((double)fx->head.host_grad[k] - ref[k])), scale = fmax(scale, fabs((double)ref[k]));
    print_message("reward %s: score gradient vs PEFT: max relative error %.3g\n", which, diff / scale);
    return diff / scale;
}

/* The loss and TRL's logged metrics against golden's, within 1e-4. */
static void check_loss_metrics(fixture *fx, json_t *golden, const char *which, double loss, double worst)
{
    double want = json_real_value(json_object_get(golden, "first_loss"));
    print_message("%s %s: loss %.9f (TRL %.9f); LoRA gradients vs TRL: max relative error %.3g\n", fx->dir, which,
                  loss, want, worst);
    assert_true(fabs(loss - want) <= 1e-4 * fmax(1.0, fabs(want)));
    json_t *metrics = json_object_get(golden, "metrics");
    if (fx->kto || fx->reward) { /* TRL's names, as the trainer logs them */
        const char *names[PREF_COUNT];
        double values[PREF_COUNT];
        int count = preference_log_values(fx->reward ? METHOD_REWARD : METHOD_KTO, fx->sums, names, values);
        assert_int_equal(count, (int)json_object_size(metrics));
        for (int k = 0; k < count; k++) {
            json_t *v = json_object_get(metrics, names[k]);
            if (!v) fail_msg("%s: TRL logs no %s", which, names[k]);
            double trl = json_real_value(v);
            print_message("  %s %.9g (TRL %.9g)\n", names[k], values[k], trl);
            if (fabs(values[k] - trl) > 1e-4 * fmax(1.0, fabs(trl)))
                fail_msg("%s: %s is %.9g, TRL's %.9g", which, names[k], values[k], trl);
        }
        return;
    }
    for (int k = PREF_REWARDS_CHOSEN; k < preference_metrics_end(fx->orpo ? METHOD_ORPO : fx->cpo ? METHOD_CPO : METHOD_DPO);
         k++) {
        double trl = json_real_value(json_object_get(metrics, preference_metric_names[k]));
        double mine = fx->sums[k] / fx->pairs;
        if (fabs(mine - trl) > 1e-4 * fmax(1.0, fabs(trl)))
            fail_msg("%s: %s is %.9g, TRL's %.9g", which, preference_metric_names[k], mine, trl);
    }
}

static double compare_case(fixture *fx, const char *which, double *loss)
{
    char name[64];
    snprintf(name, sizeof name, "%s_init.f32", which);
    load_adapter(fx, name);
    *loss = dpo_step(fx);
    snprintf(name, sizeof name, "%s_grads.f32", which);
    size_t n;
    float *grads = golden_read_f32(fx->dir, name, &n);
    golden_compare c = {grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    if (fx->reward) c.worst = fmax(c.worst, compare_score_grad(fx, grads, n, which));
    free(grads);
    check_loss_metrics(fx, json_object_get(fx->manifest, which), which, *loss, c.worst);
    return c.worst;
}

/* DoRA (use_dora) with the method against TRL + PEFT with use_dora (make_dora_pref_goldens.py): A
 * and B random, the magnitudes PEFT's dora_init values times a factor; the reference (DPO, KTO) the
 * base alone, as PEFT's disabled adapter is. The loss, TRL's metrics and the gradients of A, B and
 * the magnitudes within 1e-4. */
static void test_dora_matches_trl(void **state)
{
    fixture *fx = *state;
    char path[1024], name[64];
    snprintf(path, sizeof path, "%s/tests/data/dora_pref/manifest.json", golden_srcdir());
    json_error_t jerr;
    json_t *all = json_load_file(path, 0, &jerr);
    assert_non_null(all);
    size_t n, n_grads;
    snprintf(name, sizeof name, "%s_init.f32", fx->dir);
    float *init = golden_read_f32("dora_pref", name, &n);
    snprintf(name, sizeof name, "%s_grads.f32", fx->dir);
    float *grads = golden_read_f32("dora_pref", name, &n_grads);
    assert_int_equal(n + (fx->reward ? (size_t)fx->head.dim : 0), n_grads); /* reward: the score's gradient last */
    for_each_tensor(fx, golden_set_values, init);
    size_t ab = 0;
    for (adapter_pair *p = adapter_next(&fx->l.ad, NULL); p; p = adapter_next(&fx->l.ad, p))
        ab += (size_t)(tensor_numel(&p->a) + tensor_numel(&p->b));
    assert_int_equal(lora_dora_enable(&fx->l, &fx->m), PT_OK); /* magnitudes ||W + s B A||, then the golden's */
    assert_int_equal(golden_dora_magnitudes(fx->be, &fx->l, fx->m.cfg.n_layers, init, ab, n, NULL), n);
    double loss = dpo_step(fx), worst_m;
    golden_compare c = {grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    assert_int_equal(golden_dora_magnitudes(fx->be, &fx->l, fx->m.cfg.n_layers, grads, ab, n, &worst_m), n);
    print_message("%s with DoRA: magnitudes' gradients vs TRL + PEFT: max relative error %.3g\n", fx->dir, worst_m);
    if (fx->reward) c.worst = fmax(c.worst, compare_score_grad(fx, grads, n_grads, "dora"));
    check_loss_metrics(fx, json_object_get(all, fx->dir), "dora", loss, c.worst);
    assert_true(c.worst <= 1e-4 && worst_m <= 1e-4);
    free(init), free(grads);
    json_decref(all);
}

/* B zero: the policy is the reference, so every pair's z is 0 and the loss is ln 2 exactly */
static void test_zero_adapter_ln2(void **state)
{
    fixture *fx = *state;
    double loss;
    double worst = compare_case(fx, "zero", &loss);
    if (loss != log(2.0)) fail_msg("first loss %.17g, ln 2 %.17g", loss, log(2.0));
    assert_true(worst <= 1e-4);
}

/* KTO: B zero makes the policy the reference: the KL estimate is 0 and every loss 1 - sigmoid(0),
 * so the first loss is the mean weight / 2 exactly */
static void test_kto_zero_adapter(void **state)
{
    fixture *fx = *state;
    double loss, want = 0;
    assert_true(compare_case(fx, "zero", &loss) <= 1e-4);
    for (int k = 0; k < fx->pairs; k++)
        want += 0.5 * json_real_value(json_object_get(fx->manifest, fx->desirable[k] ? "desirable_weight"
                                                                                    : "undesirable_weight"));
    want /= fx->pairs;
    if (loss != want || fx->kto_kl != 0) fail_msg("first loss %.17g (KL %g), expected %.17g", loss, fx->kto_kl, want);
}

/* CPO: the loss, TRL's metrics (nll_loss too) and gradients, B zero and random */
static void test_cpo_matches_trl(void **state)
{
    fixture *fx = *state;
    double loss;
    assert_true(compare_case(fx, "zero", &loss) <= 1e-4);
    assert_true(compare_case(fx, "random", &loss) <= 1e-4);
}

/* reward modelling: B zero and random; then the random adapters with TRL's margin column and
 * center_rewards_coefficient (margin_grads.f32) */
static void test_reward_matches_trl(void **state)
{
    fixture *fx = *state;
    double loss;
    assert_true(compare_case(fx, "zero", &loss) <= 1e-4);
    assert_true(compare_case(fx, "random", &loss) <= 1e-4);
    fx->use_margin = true;
    fx->center = json_real_value(json_object_get(fx->manifest, "center_rewards_coefficient"));
    load_adapter(fx, "random_init.f32");
    loss = dpo_step(fx);
    size_t n;
    float *grads = golden_read_f32(fx->dir, "margin_grads.f32", &n);
    golden_compare c = {grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &c);
    c.worst = fmax(c.worst, compare_score_grad(fx, grads, n, "margin"));
    free(grads);
    double want = json_real_value(json_object_get(json_object_get(fx->manifest, "margin"), "first_loss"));
    print_message("reward margin: loss %.9f (TRL %.9f); LoRA gradients max relative error %.3g\n", loss, want, c.worst);
    assert_true(fabs(loss - want) <= 1e-4 && c.worst <= 1e-4);
}

static void test_random_adapter_matches_trl(void **state)
{
    fixture *fx = *state;
    double loss;
    double worst = compare_case(fx, "random", &loss);
    assert_true(fabs(loss - log(2.0)) > 1e-3); /* the adapter moves the policy off the reference */
    assert_true(worst <= 1e-4);
}

static void test_20_adamw_steps_match_trl(void **state)
{
    fixture *fx = *state;
    load_adapter(fx, "zero_init.f32");
    json_t *losses = json_object_get(json_object_get(fx->manifest, "zero"), "losses");
    adamw_options o = {0.9, 0.999, 1e-8, 0.01, 1.0};
    double worst = 0;
    for (int s = 0; s < 20; s++) {
        double loss = dpo_step(fx), norm;
        assert_int_equal(optimizer_grad_norm(&fx->l, &norm), PT_OK);
        if (fx->reward) { /* one clip over the LoRA matrices and the score */
            double sq = norm * norm;
            assert_int_equal(score_head_grad_sum_squares(&fx->head, &sq), PT_OK);
            norm = sqrt(sq);
            assert_int_equal(score_head_step(&fx->head, &o, norm, 5e-3, s + 1), PT_OK);
        }
        assert_int_equal(optimizer_step(&fx->l, &o, norm, 5e-3, s + 1), PT_OK);
        double want = json_real_value(json_array_get(losses, (size_t)s));
        worst = fmax(worst, fabs(loss - want));
    }
    print_message("%s: 20 AdamW steps: loss max absolute error %.3g (TRL %.6f -> %.6f)\n", fx->dir, worst,
                  json_real_value(json_array_get(losses, 0)), json_real_value(json_array_get(losses, 19)));
    assert_true(worst <= 1e-3);
}

/* the DPO arithmetic alone: the gradient scales against central differences of the loss */
static void test_dpo_scales(void **state)
{
    (void)state;
    double nll[4] = {3.0, 5.5, 7.25, 2.0}, ref[4] = {3.5, 5.0, 6.0, 2.5};
    float scale[4];
    double sums[PREF_COUNT] = {0};
    preference_dpo(nll, ref, 2, 0.5, 1.0, scale, sums);
    for (int s = 0; s < 4; s++) {
        double up[4], down[4], a[PREF_COUNT] = {0}, b[PREF_COUNT] = {0};
        float ignored[4];
        memcpy(up, nll, sizeof up);
        memcpy(down, nll, sizeof down);
        up[s] += 1e-6, down[s] -= 1e-6;
        preference_dpo(up, ref, 2, 0.5, 1.0, ignored, a);
        preference_dpo(down, ref, 2, 0.5, 1.0, ignored, b);
        double fd = (a[PREF_LOSS] - b[PREF_LOSS]) / 2e-6;
        assert_true(fabs(fd - scale[s]) < 1e-6);
    }
    /* -log sigmoid stays finite far out */
    double far[4] = {1e4, 0, 0, 1e4}, zero[4] = {0};
    double big[PREF_COUNT] = {0};
    preference_dpo(far, zero, 2, 1.0, 1.0, scale, big);
    assert_true(isfinite(big[PREF_LOSS]) && fabs(big[PREF_LOSS] - 1e4) < 1e-6);
}

/* Segment seg of ex against TRL's prompt + completion: the ids, and labels on the completion only. */
static void expect_sequence(const pt_example *ex, int32_t seg, json_t *prompt, json_t *completion, long keep_prompt,
                            long keep_completion, const char *what)
{
    size_t np = json_array_size(prompt), nc = json_array_size(completion);
    size_t from = keep_prompt > 0 && np > (size_t)keep_prompt ? np - (size_t)keep_prompt : 0;
    size_t upto = keep_completion > 0 && nc > (size_t)keep_completion ? (size_t)keep_completion : nc;
    size_t k = 0;
    for (int32_t t = 0; t < ex->len; t++) {
        if (ex->segments[t] != seg) continue;
        bool in_prompt = from + k < np;
        json_t *want = in_prompt ? json_array_get(prompt, from + k) : json_array_get(completion, from + k - np);
        if (k >= np - from + upto || ex->ids[t] != (int32_t)json_integer_value(want))
            fail_msg("%s: token %zu of segment %d is %d, TRL's %lld", what, k, seg, ex->ids[t],
                     (long long)json_integer_value(want));
        int32_t label = in_prompt ? PT_IGNORE_INDEX : ex->ids[t];
        if (ex->labels[t] != label) fail_msg("%s: token %zu of segment %d labelled %d, expected %d", what, k, seg,
                                             ex->labels[t], label);
        k++;
    }
    if (k != np - from + upto) fail_msg("%s: segment %d has %zu tokens, TRL's %zu", what, seg, k, np - from + upto);
}

static pt_dataset load_pairs(const pt_tokenizer *tok, const char *extra)
{
    char yaml[2048];
    snprintf(yaml, sizeof yaml, "%smax_seq_length: 4096\n%sdataset:\n  - name: \"%s/tests/data/dpo/pairs.jsonl\"\n",
             strstr(extra, "method:") ? "" : "method: dpo\n", extra, golden_srcdir());
    pt_config cfg;
    pt_dataset ds;
    assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
    dataset_options o = dataset_options_from_config(&cfg);
    pt_status st = dataset_load(&o, tok, NULL, &ds);
    if (st) fail_msg("%s", err_message());
    config_free(&cfg);
    return ds;
}

static void test_tokenized_as_trl(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/dpo/tokenized.json", golden_srcdir());
    json_error_t jerr;
    json_t *golden = json_load_file(path, 0, &jerr);
    assert_non_null(golden);
    const char *name;
    json_t *rows;
    json_object_foreach(golden, name, rows) {
        pt_tokenizer *tok;
        snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", golden_srcdir(), name);
        assert_int_equal(tokenizer_from_json(path, &tok), PT_OK);
        static const struct {
            const char *yaml;
            long prompt, completion;
        } cuts[] = {{"", 0, 0}, {"max_prompt_length: 4\nmax_completion_length: 2\n", 4, 2}};
        for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
            pt_dataset ds = load_pairs(tok, cuts[c].yaml);
            assert_true(ds.packed);
            assert_int_equal(ds.n, json_array_size(rows));
            for (size_t i = 0; i < ds.n; i++) {
                json_t *r = json_array_get(rows, i);
                char what[128];
                snprintf(what, sizeof what, "%s row %zu%s", name, i, cuts[c].prompt ? " (cut)" : "");
                json_t *p = json_object_get(r, "prompt_ids");
                expect_sequence(&ds.ex[i], 1, p, json_object_get(r, "chosen_ids"), cuts[c].prompt, cuts[c].completion,
                                what);
                expect_sequence(&ds.ex[i], 2, p, json_object_get(r, "rejected_ids"), cuts[c].prompt,
                                cuts[c].completion, what);
            }
            dataset_free(&ds);
        }
        tokenizer_free(tok);
    }
    json_decref(golden);
}

/* reward modelling's rows as TRL's RewardTrainer tokenizes them: each pair's two whole sequences
 * (segments 1 and 2, every token labelled); with max_seq_length its cut, the pairs it keeps */
static void test_reward_tokenized_as_trl(void **state)
{
    (void)state;
    char path[1024], yaml[1024];
    snprintf(path, sizeof path, "%s/tests/data/reward/tokenized.json", golden_srcdir());
    json_error_t jerr;
    json_t *golden = json_load_file(path, 0, &jerr);
    assert_non_null(golden);
    const char *name;
    json_t *g;
    json_object_foreach(golden, name, g) {
        if (!json_is_object(g)) continue; /* "cut" */
        json_t *rows = json_object_get(g, "rows"), *kept = json_object_get(g, "kept");
        pt_tokenizer *tok;
        snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", golden_srcdir(), name);
        assert_int_equal(tokenizer_from_json(path, &tok), PT_OK);
        for (int cut = 0; cut < 2; cut++) {
            long max_len = cut ? (long)json_integer_value(json_object_get(golden, "cut")) : 4096;
            snprintf(yaml, sizeof yaml,
                     "method: reward\nmax_seq_length: %ld\ndataset:\n  - name: \"%s/tests/data/dpo/pairs.jsonl\"\n",
                     max_len, golden_srcdir());
            pt_config cfg;
            pt_dataset ds;
            assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
            dataset_options o = dataset_options_from_config(&cfg);
            if (dataset_load(&o, tok, NULL, &ds)) fail_msg("%s", err_message());
            config_free(&cfg);
            size_t want_n = cut ? json_array_size(kept) : json_array_size(rows);
            if (ds.n != want_n) fail_msg("%s, max_seq_length %ld: %zu pairs kept, TRL %zu", name, max_len, ds.n, want_n);
            for (size_t i = 0; i < ds.n; i++) {
                size_t row = cut ? (size_t)json_integer_value(json_array_get(kept, i)) : i;
                json_t *r = json_array_get(rows, row), *empty = json_array();
                char what[128];
                snprintf(what, sizeof what, "reward %s row %zu%s", name, row, cut ? " (cut)" : "");
                /* the whole sequence is the "completion": every token labelled */
                expect_sequence(&ds.ex[i], 1, empty, json_object_get(r, "chosen_ids"), 0, 0, what);
                expect_sequence(&ds.ex[i], 2, empty, json_object_get(r, "rejected_ids"), 0, 0, what);
                json_decref(empty);
            }
            dataset_free(&ds);
        }
        tokenizer_free(tok);
    }
    json_decref(golden);
}

/* TRL's margin column of reward rows (tests/data/reward/margins.jsonl, text and turns): each pair
 * carries the float32 margin TRL's DataCollatorForPreference hands to compute_loss, through the
 * dataset cache's bytes too; a margin that is no number makes the row a bad one. */
static void test_reward_margin_column(void **state)
{
    (void)state;
    char path[1024], yaml[1024];
    snprintf(path, sizeof path, "%s/tests/data/reward/manifest.json", golden_srcdir());
    json_error_t jerr;
    json_t *man = json_load_file(path, 0, &jerr), *g = json_object_get(man, "margin_rows");
    assert_non_null(g);
    pt_tokenizer *tok;
    snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", golden_srcdir(),
             json_string_value(json_object_get(g, "tokenizer")));
    assert_int_equal(tokenizer_from_json(path, &tok), PT_OK);
    snprintf(yaml, sizeof yaml, "method: reward\nmax_seq_length: 4096\ndataset:\n  - name: \"%s/tests/data/reward/margins.jsonl\"\n",
             golden_srcdir());
    pt_config cfg;
    pt_dataset ds;
    assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
    dataset_options o = dataset_options_from_config(&cfg);
    if (dataset_load(&o, tok, NULL, &ds)) fail_msg("%s", err_message());
    config_free(&cfg);
    json_t *margins = json_object_get(g, "margins"), *chosen = json_object_get(g, "chosen_ids");
    assert_int_equal(ds.n, json_array_size(margins));
    for (size_t i = 0; i < ds.n; i++) {
        float want = (float)json_number_value(json_array_get(margins, i));
        print_message("reward pair %zu: margin %.9g (TRL's collator %.9g)\n", i, ds.ex[i].margin, want);
        assert_true(ds.ex[i].margin == want);
        json_t *empty = json_array();
        expect_sequence(&ds.ex[i], 1, empty, json_array_get(chosen, i), 0, 0, "reward margin row");
        json_decref(empty);
    }
    size_t idx[2] = {1, 3}; /* the batch carries them in its order */
    pt_batch b;
    assert_int_equal(batch_collate(&ds, idx, 2, &b), PT_OK);
    assert_true(b.margin[0] == ds.ex[1].margin && b.margin[1] == ds.ex[3].margin);
    batch_free(&b);
    char cache[256]; /* the dataset cache keeps them */
    snprintf(cache, sizeof cache, "/tmp/ptrain-test-margin-%d.ptdata", (int)getpid());
    dataset_cache_key key = {45, 2};
    pt_dataset none = {.max_len = ds.max_len}, back, back_eval;
    if (dataset_cache_write(cache, &key, &ds, &none)) fail_msg("%s", err_message());
    if (dataset_cache_open(cache, &key, true, &back, &back_eval)) fail_msg("%s", err_message());
    assert_int_equal(back.n, ds.n);
    for (size_t i = 0; i < ds.n; i++) assert_true(back.ex[i].margin == ds.ex[i].margin);
    dataset_free(&back), dataset_free(&back_eval);
    remove(cache);
    dataset_free(&ds);
    tokenizer_free(tok);
    json_decref(man);
}

/* CPO's rows as TRL's experimental CPOTrainer tokenizes them (maybe_apply_chat_template, tokenize_row) */
static void test_cpo_tokenized_as_trl(void **state)
{
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/cpo/tokenized.json", golden_srcdir());
    json_error_t jerr;
    json_t *golden = json_load_file(path, 0, &jerr);
    assert_non_null(golden);
    const char *name;
    json_t *rows;
    json_object_foreach(golden, name, rows) {
        pt_tokenizer *tok;
        snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", golden_srcdir(), name);
        assert_int_equal(tokenizer_from_json(path, &tok), PT_OK);
        pt_dataset ds = load_pairs(tok, "method: cpo\n");
        assert_int_equal(ds.n, json_array_size(rows));
        for (size_t i = 0; i < ds.n; i++) {
            json_t *r = json_array_get(rows, i);
            const pt_example *ex = &ds.ex[i];
            static const char *const sides[2] = {"chosen", "rejected"};
            for (int s = 0; s < 2; s++) {
                char key[32];
                snprintf(key, sizeof key, "%s_input_ids", sides[s]);
                json_t *ids = json_object_get(r, key);
                snprintf(key, sizeof key, "%s_labels", sides[s]);
                json_t *labels = json_object_get(r, key);
                size_t k = 0;
                for (int32_t t = 0; t < ex->len; t++) {
                    if (ex->segments[t] != s + 1) continue;
                    if (k >= json_array_size(ids) || ex->ids[t] != json_integer_value(json_array_get(ids, k)) ||
                        ex->labels[t] != json_integer_value(json_array_get(labels, k)))
                        fail_msg("%s row %zu %s: token %zu is %d (label %d), TRL's %lld (label %lld)", name, i, sides[s],
                                 k, ex->ids[t], ex->labels[t], (long long)json_integer_value(json_array_get(ids, k)),
                                 (long long)json_integer_value(json_array_get(labels, k)));
                    k++;
                }
                if (k != json_array_size(ids))
                    fail_msg("%s row %zu %s: %zu tokens, TRL's %zu", name, i, sides[s], k, json_array_size(ids));
            }
        }
        dataset_free(&ds);
        tokenizer_free(tok);
    }
    json_decref(golden);
}

/* KTO's rows (text, conversational, and text pairs unrolled: each chunk's chosen, then its
 * rejected) as TRL's KTOTrainer tokenizes them, in its order, and the KL sequences of sequential
 * batches of 2 (each example's prompt with the previous one's completion in its batch) */
static void test_kto_tokenized_as_trl(void **state)
{
    (void)state;
    char path[1024], yaml[2048];
    snprintf(path, sizeof path, "%s/tests/data/kto/tokenized.json", golden_srcdir());
    json_error_t jerr;
    json_t *golden = json_load_file(path, 0, &jerr);
    assert_non_null(golden);
    const char *name, *group;
    json_t *groups, *rows;
    json_object_foreach(golden, name, groups) {
        pt_tokenizer *tok;
        snprintf(path, sizeof path, "%s/tests/data/tokenizer/%s/tokenizer.json", golden_srcdir(), name);
        assert_int_equal(tokenizer_from_json(path, &tok), PT_OK);
        json_object_foreach(groups, group, rows) {
            snprintf(yaml, sizeof yaml, "method: kto\nmax_seq_length: 1024\nper_device_train_batch_size: 2\n"
                     "dataset:\n  - name: \"%s/tests/data/kto/%s.jsonl\"\n", golden_srcdir(), group);
            pt_config cfg;
            pt_dataset ds, eval;
            assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
            dataset_options o = dataset_options_from_config(&cfg);
            pt_status st = dataset_prepare(&o, tok, NULL, &ds, &eval);
            if (st) fail_msg("%s", err_message());
            config_free(&cfg);
            assert_int_equal(ds.n, json_array_size(rows));
            for (size_t i = 0; i < ds.n; i++) {
                json_t *r = json_array_get(rows, i);
                char what[128];
                snprintf(what, sizeof what, "%s %s row %zu", name, group, i);
                int32_t seg = json_is_true(json_object_get(r, "label")) ? 1 : 2;
                if (ds.ex[i].segments[0] != seg) fail_msg("%s: label segment %d, TRL's label %d", what,
                                                          ds.ex[i].segments[0], seg == 1);
                expect_sequence(&ds.ex[i], seg, json_object_get(r, "prompt_ids"), json_object_get(r, "completion_ids"),
                                0, 0, what);
            }
            for (size_t from = 0; from < ds.n; from += 2) { /* the KL sequences, batches of 2 */
                size_t idx[2] = {from, from + 1}, n = from + 1 < ds.n ? 2 : 1;
                pt_batch b;
                assert_int_equal(batch_collate_unpaired(&ds, idx, n, 1024, &b), PT_OK);
                for (size_t k = 0; k < n; k++) {
                    json_t *r = json_array_get(rows, from + k);
                    pt_example kl = {b.ids, b.labels, b.segments, b.cols, 0.0f};
                    char what[128];
                    snprintf(what, sizeof what, "%s %s KL sequence %zu", name, group, from + k);
                    expect_sequence(&kl, 2 * (int32_t)n + 1 + (int32_t)k, json_object_get(r, "prompt_ids"),
                                    json_object_get(r, "KL_completion_ids"), 0, 0, what);
                }
                batch_free(&b);
            }
            dataset_free(&ds), dataset_free(&eval);
        }
        tokenizer_free(tok);
    }
    json_decref(golden);
}

/* KTO's bad rows say what is wrong (a later row without a column the first has, a label that is
 * not a boolean), and an SFT run given unpaired rows says to set method: kto */
static void test_kto_bad_rows(void **state)
{
    (void)state;
    char path[] = "/tmp/ptrain-kto-XXXXXX.jsonl", yaml[1024];
    int fd = mkstemps(path, 6);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("{\"prompt\": \"The sky is\", \"completion\": \" blue.\", \"label\": true}\n"
          "{\"prompt\": \"The sun is\", \"label\": false}\n"
          "{\"prompt\": \"Water is\", \"completion\": \" wet.\", \"label\": \"yes\"}\n", f);
    fclose(f);
    pt_tokenizer *tok;
    char tpath[1024];
    snprintf(tpath, sizeof tpath, "%s/tests/data/tokenizer/smollm2/tokenizer.json", golden_srcdir());
    assert_int_equal(tokenizer_from_json(tpath, &tok), PT_OK);
    for (int kto = 1; kto >= 0; kto--) {
        snprintf(yaml, sizeof yaml, "method: %s\ndataset:\n  - name: \"%s\"\n", kto ? "kto" : "sft", path);
        pt_config cfg;
        pt_dataset ds;
        assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
        dataset_options o = dataset_options_from_config(&cfg);
        pt_status st = dataset_load(&o, tok, NULL, &ds);
        config_free(&cfg);
        if (!kto) {
            assert_int_equal(st, PT_ERR_USER);
            assert_non_null(strstr(err_message(), "set method: kto"));
            continue;
        }
        assert_int_equal(st, PT_OK);
        assert_int_equal(ds.stats[0].kept, 1);
        assert_int_equal(ds.stats[0].bad, 2);
        assert_non_null(strstr(ds.stats[0].bad_rows[0], "no \"completion\""));
        assert_non_null(strstr(ds.stats[0].bad_rows[1], "\"label\" is a string, expected true or false"));
        dataset_free(&ds);
    }
    tokenizer_free(tok);
    unlink(path);
}

/* an SFT run given preference rows, and DPO given chat rows, say what to set */
static void test_rows_match_the_method(void **state)
{
    (void)state;
    pt_tokenizer *tok;
    char path[1024], yaml[1024];
    snprintf(path, sizeof path, "%s/tests/data/tokenizer/smollm2/tokenizer.json", golden_srcdir());
    assert_int_equal(tokenizer_from_json(path, &tok), PT_OK);
    for (int dpo = 0; dpo < 2; dpo++) {
        snprintf(yaml, sizeof yaml, "method: %s\ndataset:\n  - name: \"%s/tests/data/%s\"\n", dpo ? "dpo" : "sft",
                 golden_srcdir(), dpo ? "datasets/messages.jsonl" : "dpo/pairs.jsonl");
        pt_config cfg;
        pt_dataset ds;
        assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
        dataset_options o = dataset_options_from_config(&cfg);
        assert_int_equal(dataset_load(&o, tok, NULL, &ds), PT_ERR_USER);
        assert_non_null(strstr(err_message(), dpo ? "set method: sft" : "set method: dpo"));
        config_free(&cfg);
    }
    tokenizer_free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dpo_scales),
        cmocka_unit_test(test_tokenized_as_trl),
        cmocka_unit_test(test_rows_match_the_method),
        cmocka_unit_test(test_cpo_tokenized_as_trl),
        cmocka_unit_test(test_reward_tokenized_as_trl),
        cmocka_unit_test(test_reward_margin_column),
        cmocka_unit_test(test_kto_tokenized_as_trl),
        cmocka_unit_test(test_kto_bad_rows),
        cmocka_unit_test_setup_teardown(test_zero_adapter_ln2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_adapter_matches_trl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_20_adamw_steps_match_trl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cpo_matches_trl, setup_cpo, teardown),
        cmocka_unit_test_setup_teardown(test_20_adamw_steps_match_trl, setup_cpo, teardown),
        cmocka_unit_test_setup_teardown(test_cpo_matches_trl, setup_orpo, teardown),
        cmocka_unit_test_setup_teardown(test_20_adamw_steps_match_trl, setup_orpo, teardown),
        cmocka_unit_test_setup_teardown(test_kto_zero_adapter, setup_kto, teardown),
        cmocka_unit_test_setup_teardown(test_dora_matches_trl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dora_matches_trl, setup_kto, teardown),
        cmocka_unit_test_setup_teardown(test_dora_matches_trl, setup_cpo, teardown),
        cmocka_unit_test_setup_teardown(test_dora_matches_trl, setup_orpo, teardown),
        cmocka_unit_test_setup_teardown(test_dora_matches_trl, setup_reward, teardown),
        cmocka_unit_test_setup_teardown(test_cpo_matches_trl, setup_kto, teardown),
        cmocka_unit_test_setup_teardown(test_20_adamw_steps_match_trl, setup_kto, teardown),
        cmocka_unit_test_setup_teardown(test_reward_matches_trl, setup_reward, teardown),
        cmocka_unit_test_setup_teardown(test_20_adamw_steps_match_trl, setup_reward, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
