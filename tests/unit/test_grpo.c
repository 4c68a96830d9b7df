/* test_grpo.c — GRPO on the tiny Llama against TRL 1.16's GRPOTrainer with PEFT
 * (tests/reference/make_grpo_goldens.py): two prompts with four fixed completions each (token ids,
 * so sampling is out of the comparison), as one padding-free row of eight sequences; the rewards
 * TRL's reward function gave, grpo_advantages; the reference's token log-probs from the same model
 * with the adapter off (step_sequence_nll, one "sequence" per completion token); the loss and the
 * LoRA gradients through the loss head's per-sequence scales, one per token (grpo_token_scales).
 * Checked against TRL: the advantages, the loss, its metrics and the LoRA gradients, with B zero
 * (beta 0.04: the KL is 0) and with A and B random (beta 0.04, TRL's default beta 0, and temperature
 * 0.7, whose log-probs are of logits / temperature: the loss head's logit divisor), and 20 AdamW
 * steps' losses on the same completions from B zero; with num_iterations 2 the second pass on a
 * batch after an AdamW step (its ratio to the old log-probs clipped on some tokens); every case's
 * entropy and clip_ratio metrics; with DoRA (use_dora, make_dora_pref_goldens.py) the loss, metrics and
 * the gradients of A, B and the magnitudes. And the
 * prompt rows (text and turns, two real tokenizers) tokenized as GRPOTrainer's _tokenize_prompts
 * tokenizes them, their other columns kept, max_prompt_length keeping the prompt's end. */
#include <jansson.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ptrain/adapter.h"
#include "ptrain/arena.h"
#include "ptrain/backend.h"
#include "ptrain/config.h"
#include "ptrain/config_options.h"
#include "ptrain/forward.h"
#include "ptrain/dataset.h"
#include "ptrain/gguf.h"
#include "ptrain/grpo.h"
#include "ptrain/lora.h"
#include "ptrain/model.h"
#include "ptrain/sample.h"
#include "ptrain/optimizer.h"
#include "ptrain/step.h"
#include "ptrain/tokenizer.h"
#include "golden_lora.h"
#include "train/trainer.h"

#define MAX_ROWS 256

typedef struct {
    pt_backend *be;
    pt_model m;
    pt_lora l;
    json_t *manifest;
    int rows, n_comp, n_tok, g;
    int32_t ids[MAX_ROWS], targets[MAX_ROWS], pos[MAX_ROWS], segments[MAX_ROWS], row_seq[MAX_ROWS];
    int32_t tok_seq[MAX_ROWS], len[16];
    bool ended[16];
    double ref[MAX_ROWS], ent[MAX_ROWS], *old_nll, adv[16], reward[16], sums[GRPO_COUNT], beta, inv_n;
    double eps_low, eps_high; /* the case's epsilon and epsilon_high (GRPOConfig's 0.2 when not given) */
} fixture;

/* The golden manifest's LoRA tensors of this fixture's adapter, in file order (golden_lora.h). */
static void for_each_tensor(fixture *fx, golden_tensor_fn fn, void *arg)
{
    golden_for_each_tensor(fx->be, &fx->l, fx->manifest, fn, arg);
}

/* completion i: its prompt, then the completion, whose tokens are the targets, each its own
 * "sequence" of the loss head (tok_seq: the completion it is in) */
static void append_completion(fixture *fx, json_t *prompt, json_t *completion)
{
    int np = (int)json_array_size(prompt), nc = (int)json_array_size(completion), at = fx->rows, i = fx->n_comp;
    assert_true(at + np + nc <= MAX_ROWS);
    for (int t = 0; t < np + nc; t++) {
        json_t *id = t < np ? json_array_get(prompt, (size_t)t) : json_array_get(completion, (size_t)(t - np));
        fx->ids[at + t] = (int32_t)json_integer_value(id);
        fx->pos[at + t] = t;
        fx->segments[at + t] = i + 1;
        fx->row_seq[at + t] = -1;
        fx->targets[at + t] = PT_IGNORE_INDEX;
        if (t + 1 < np + nc && t + 1 >= np) {
            fx->targets[at + t] = (int32_t)json_integer_value(json_array_get(completion, (size_t)(t + 1 - np)));
            fx->tok_seq[fx->n_tok] = i;
            fx->row_seq[at + t] = fx->n_tok++;
        }
    }
    int eos = (int)json_integer_value(json_object_get(fx->manifest, "eos"));
    fx->len[i] = nc;
    fx->ended[i] = json_integer_value(json_array_get(completion, (size_t)nc - 1)) == eos;
    fx->rows += np + nc;
    fx->n_comp++;
}

static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/grpo/manifest.json", golden_srcdir());
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
    fx->g = (int)json_integer_value(json_object_get(fx->manifest, "num_generations"));
    json_t *prompts = json_object_get(fx->manifest, "prompts"), *comps = json_object_get(fx->manifest, "completions");
    for (size_t i = 0; i < json_array_size(comps); i++)
        append_completion(fx, json_array_get(prompts, i / (size_t)fx->g), json_array_get(comps, i));
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
    free(fx);
    return 0;
}

static pt_status grpo_grad(void *arg, const double *nll, float *scale)
{
    fixture *fx = arg;
    grpo_tokens in = {nll, fx->beta != 0 ? fx->ref : NULL, fx->old_nll, fx->ent, fx->tok_seq, fx->n_tok, fx->adv,
                      fx->beta, fx->eps_low, fx->eps_high, fx->inv_n};
    grpo_token_scales(&in, scale, fx->sums);
    return PT_OK;
}

static void grad_is_zero(pt_backend *be, pt_tensor *t, pt_tensor *g, size_t offset, void *arg)
{
    (void)t, (void)offset, (void)arg;
    float *got = malloc(g->nbytes);
    assert_int_equal(backend_download(be, g, got, g->nbytes), PT_OK);
    for (int64_t i = 0; i < tensor_numel(g); i++)
        if (got[i] != 0.0f) fail_msg("an evaluation wrote a gradient");
    free(got);
}

static void check_close(const char *what, double got, double want, double tol)
{
    print_message("  %s %.9g (TRL %.9g)\n", what, got, want);
    if (!(fabs(got - want) <= tol * fmax(1.0, fabs(want)))) fail_msg("%s is %.9g, TRL's %.9g", what, got, want);
}

/* One GRPO step of case c on the fixed completions: the advantages (checked against TRL's), the
 * reference pass, the loss and the LoRA gradients; the loss. */
static double grpo_step_once(fixture *fx, json_t *c)
{
    memset(fx->sums, 0, sizeof fx->sums);
    fx->beta = json_real_value(json_object_get(c, "beta"));
    json_t *lo = json_object_get(c, "epsilon"), *hi = json_object_get(c, "epsilon_high");
    fx->eps_low = lo ? json_number_value(lo) : 0.2, fx->eps_high = hi ? json_number_value(hi) : fx->eps_low;
    /* the rewards TRL's function gave; the advantages as TRL computes them (float32 there) */
    double per_func[16];
    for (int i = 0; i < fx->n_comp; i++) per_func[i] = json_number_value(json_array_get(json_object_get(c, "rewards"), (size_t)i));
    grpo_advantages(per_func, 1, fx->n_comp, fx->g, fx->reward, fx->adv, fx->sums);
    for (int i = 0; i < fx->n_comp; i++) {
        double want = json_number_value(json_array_get(json_object_get(c, "advantages"), (size_t)i));
        if (fabs(fx->adv[i] - want) > 1e-5 * fmax(1.0, fabs(want))) fail_msg("advantage %d: %.9g, TRL %.9g", i, fx->adv[i], want);
    }
    grpo_lengths(fx->len, fx->ended, fx->n_comp, fx->sums);
    fx->sums[GRPO_STEPS] = 1;
    assert_int_equal(fx->n_tok, (int)json_integer_value(json_object_get(c, "num_items_in_batch")));
    fx->inv_n = 1.0 / fx->n_tok;
    train_batch b = {1, fx->rows, fx->ids, fx->targets, fx->pos, fx->segments};
    json_t *temp = json_object_get(c, "temperature");
    pt_model m = grpo_model_at(&fx->m, temp ? json_number_value(temp) : 1.0); /* TRL's log-probs of logits / T */
    if (fx->beta != 0)
        assert_int_equal(step_sequence_nll(&m, NULL, &b, fx->row_seq, fx->n_tok, NULL, fx->ref), PT_OK);
    memset(fx->ent, 0, sizeof fx->ent);
    step_options o = {.checkpointing = true, .row_seq = fx->row_seq, .n_seq = fx->n_tok, .seq_grad = grpo_grad,
                      .seq_grad_arg = fx, .seq_entropy = fx->ent};
    double token_loss = 0;
    int64_t nt = 0;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(step_run(&m, &fx->l, &b, &o, 0.0f, &token_loss, &nt), PT_OK);
    return fx->sums[GRPO_LOSS];
}

/* The LoRA gradients against TRL's (file grads_name), the loss and every metric ptrain logs of
 * sums against case c's. */
static void compare_case(fixture *fx, json_t *c, const char *which, const char *grads_name, double loss,
                         double want, const double *sums)
{
    size_t n;
    float *grads = golden_read_f32("grpo", grads_name, &n);
    golden_compare ca = {grads, true, 0};
    for_each_tensor(fx, golden_compare_tensor, &ca);
    free(grads);
    print_message("grpo %s: loss %.9f (TRL %.9f); LoRA gradients vs TRL: max relative error %.3g\n", which, loss, want,
                  ca.worst);
    check_close("loss", loss, want, 1e-4);
    assert_true(ca.worst <= 1e-4);
    const char *fn = "even_share", *names[GRPO_COUNT];
    double values[GRPO_COUNT];
    char buf[GRPO_MAX_FUNCS * 192];
    int k = grpo_log_values(sums, 1, &fn, fx->beta != 0, buf, names, values);
    json_t *metrics = json_object_get(c, "metrics");
    assert_true(k >= 6); /* at least the loss's: entropy and the five clip_ratio metrics */
    for (int i = 0; i < k; i++) {
        json_t *v = json_object_get(metrics, names[i]);
        if (!v) fail_msg("%s: TRL logs no %s", which, names[i]);
        check_close(names[i], values[i], json_number_value(v), 1e-5);
    }
}

static void set_init(fixture *fx, const char *which)
{
    char name[64];
    size_t n;
    snprintf(name, sizeof name, "%s_init.f32", which);
    float *init = golden_read_f32("grpo", name, &n);
    for_each_tensor(fx, golden_set_values, init);
    free(init);
}

static void run_case(fixture *fx, const char *which)
{
    json_t *c = json_object_get(fx->manifest, which);
    char name[64];
    set_init(fx, which);
    grpo_step_once(fx, c);
    snprintf(name, sizeof name, "%s_grads.f32", which);
    compare_case(fx, c, which, name, fx->sums[GRPO_LOSS], json_real_value(json_object_get(c, "first_loss")), fx->sums);
}

/* num_iterations 2: the old log-probs when the batch is made, a first pass (ratio 1), one AdamW step,
 * then the second pass on the same completions, its ratio against the old log-probs clipped on some
 * tokens: the loss, the gradients and the loss's metrics (the batch's own are logged once, by the
 * first pass) against TRL's. which: "iter2" (epsilon 0.2) or "iter2_eps" (0.1 and epsilon_high 0.28). */
static void run_iterations(fixture *fx, const char *which)
{
    json_t *c = json_object_get(fx->manifest, which);
    char grads[64];
    set_init(fx, which);
    double old[MAX_ROWS] = {0};
    train_batch b = {1, fx->rows, fx->ids, fx->targets, fx->pos, fx->segments};
    assert_int_equal(step_sequence_nll(&fx->m, &fx->l.ad, &b, fx->row_seq, fx->n_tok, NULL, old), PT_OK);
    fx->old_nll = old;
    double first = grpo_step_once(fx, c), norm;
    check_close("first pass loss", first, json_real_value(json_object_get(c, "first_loss")), 1e-4);
    adamw_options o = {0.9, 0.999, 1e-8, 0.01, 1.0};
    assert_int_equal(optimizer_grad_norm(&fx->l, &norm), PT_OK);
    assert_int_equal(optimizer_step(&fx->l, &o, norm, json_real_value(json_object_get(c, "lr")), 1), PT_OK);
    grpo_step_once(fx, c);
    fx->old_nll = NULL;
    double loss_sums[GRPO_COUNT] = {0}; /* the second pass logs its loss's metrics only, as TRL */
    int keep[] = {GRPO_LOSS, GRPO_KL, GRPO_LOSS_TOK, GRPO_PASSES, GRPO_ENTROPY, GRPO_CLIP_LOW, GRPO_CLIP_HIGH,
                  GRPO_CLIP_LOW_MIN, GRPO_CLIP_HIGH_MAX};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) loss_sums[keep[i]] = fx->sums[keep[i]];
    assert_true(loss_sums[GRPO_CLIP_LOW] > 0 && loss_sums[GRPO_CLIP_HIGH] > 0); /* the clip acts */
    snprintf(grads, sizeof grads, "%s_grads.f32", which);
    compare_case(fx, c, which, grads, fx->sums[GRPO_LOSS], json_real_value(json_object_get(c, "second_loss")),
                 loss_sums);
}

static void test_iterations(void **state) { run_iterations(*state, "iter2"); }

/* GRPO's evaluation of one batch (grpo_micro_eval: on-policy, no gradient; grpo_evaluate names its
 * metrics "eval_" + the training names) against the record TRL's GRPOTrainer logs when it
 * evaluates the "random" case's batch (make_grpo_goldens.py's "eval"): eval_loss and every metric
 * ptrain logs, within 1e-5; the adapters' gradients untouched. */
/* The fixture's batch (its completions, rewards[i] each) evaluated as grpo_evaluate's eval batch:
 * the advantages, lengths and the loss without a gradient into sums. */
static void eval_sums(fixture *fx, trainer *t, json_t *rewards, double *sums)
{
    grpo_micro g = {.n = fx->n_comp, .adv = fx->adv, .row_seq = fx->row_seq, .tok_seq = fx->tok_seq, .n_tok = fx->n_tok};
    g.b = (pt_batch){.rows = 1, .cols = fx->rows, .ids = fx->ids, .targets = fx->targets, .pos = fx->pos,
                     .segments = fx->segments};
    double per_func[16];
    for (int i = 0; i < fx->n_comp; i++) per_func[i] = json_number_value(json_array_get(rewards, (size_t)i));
    grpo_advantages(per_func, 1, fx->n_comp, fx->g, fx->reward, fx->adv, sums);
    grpo_lengths(fx->len, fx->ended, fx->n_comp, sums);
    sums[GRPO_STEPS] = 1;
    assert_int_equal(lora_zero_grads(&fx->l), PT_OK);
    assert_int_equal(grpo_micro_eval(t, &g, sums), PT_OK);
}

/* Every value grpo_log_values names, "eval_"-prefixed, against TRL's eval record. */
static void check_record(const grpo_eval_metrics *m, json_t *record)
{
    assert_true(m->n >= 17); /* the rewards', the lengths' and the loss's */
    for (int i = 0; i < m->n; i++) {
        json_t *v = json_object_get(record, m->names[i]);
        if (!v) fail_msg("TRL's eval record has no %s", m->names[i]);
        check_close(m->names[i], m->values[i], json_number_value(v), 1e-5);
    }
}

static void test_eval_matches_trl(void **state)
{
    fixture *fx = *state;
    json_t *c = json_object_get(fx->manifest, "eval"), *record = json_object_get(c, "record");
    set_init(fx, "random");
    pt_config cfg = {.beta = 0.04, .temperature = 1.0, .epsilon = 0.2, .epsilon_high = 0.2};
    trainer t = {.cfg = &cfg, .m = fx->m, .l = fx->l};
    assert_int_equal(arena_open(&t.arena, fx->be, step_loss_arena_bytes(&fx->m, &fx->l.ad, fx->rows, fx->be->act)), PT_OK);
    double sums[GRPO_COUNT] = {0};
    eval_sums(fx, &t, json_object_get(c, "rewards"), sums);
    arena_close(&t.arena);
    const char *fn = "even_share";
    grpo_eval_metrics m = {0};
    double w = grpo_eval_weight(2, 8, 1, 0, true); /* one batch of 2 prompts' 8 completions: kept 2 times */
    assert_true(w == 2.0);
    grpo_eval_add(sums, w * sums[GRPO_LOSS], w, 1, 1, &fn, true, &m);
    check_close("eval_loss", grpo_eval_mean(&m), json_number_value(json_object_get(record, "eval_loss")), 1e-5);
    check_record(&m, record);
    for_each_tensor(fx, grad_is_zero, NULL);
}

/* Two unequal eval batches (make_grpo_goldens.py eval2, TRL's trainer.evaluate over 3 prompt rows,
 * eval batch 8): the "random" case's 8 completions, then the first prompt's 4 alone; every metric the
 * plain mean of the two batches' values, eval_loss the batches' losses weighted 8 and 3 (the last
 * batch's loss kept 3 % 8 times by accelerate's gather_for_metrics), which neither the pooled loss
 * over all 12 completions' tokens nor the plain mean of the two losses is. */
static void test_eval_batches_mean(void **state)
{
    fixture *fx = *state;
    json_t *rewards = json_object_get(json_object_get(fx->manifest, "eval"), "rewards");
    json_t *record = json_object_get(json_object_get(fx->manifest, "eval2"), "record");
    set_init(fx, "random");
    pt_config cfg = {.beta = 0.04, .temperature = 1.0, .epsilon = 0.2, .epsilon_high = 0.2};
    trainer t = {.cfg = &cfg, .m = fx->m, .l = fx->l};
    assert_int_equal(arena_open(&t.arena, fx->be, step_loss_arena_bytes(&fx->m, &fx->l.ad, fx->rows, fx->be->act)), PT_OK);
    const char *fn = "even_share";
    grpo_eval_metrics m = {0};
    double a[GRPO_COUNT] = {0}, b[GRPO_COUNT] = {0};
    double wa = grpo_eval_weight(3, 8, 1, 0, false), wb = grpo_eval_weight(3, 8, 1, 0, true);
    assert_true(wa == 8.0 && wb == 3.0);
    eval_sums(fx, &t, rewards, a);
    double loss_a = a[GRPO_LOSS] / a[GRPO_LOSS_TOK];
    grpo_eval_add(a, wa * a[GRPO_LOSS], wa, 1, 1, &fn, true, &m);
    json_t *prompts = json_object_get(fx->manifest, "prompts"), *comps = json_object_get(fx->manifest, "completions");
    fx->rows = fx->n_comp = fx->n_tok = 0; /* batch 2: the first prompt's group alone */
    for (int i = 0; i < fx->g; i++) append_completion(fx, json_array_get(prompts, 0), json_array_get(comps, (size_t)i));
    eval_sums(fx, &t, rewards, b);
    double loss_b = b[GRPO_LOSS] / b[GRPO_LOSS_TOK];
    grpo_eval_add(b, wb * b[GRPO_LOSS], wb, 1, 1, &fn, true, &m);
    arena_close(&t.arena);
    double want = json_number_value(json_object_get(record, "eval_loss"));
    check_close("eval_loss", grpo_eval_mean(&m), want, 1e-5);
    check_record(&m, record);
    double pooled = (a[GRPO_LOSS] + b[GRPO_LOSS]) / (a[GRPO_LOSS_TOK] + b[GRPO_LOSS_TOK]), plain = (loss_a + loss_b) / 2;
    if (fabs(pooled - want) < 1e-4 || fabs(plain - want) < 1e-4)
        fail_msg("the pooled (%.6f) or plain mean (%.6f) eval_loss is TRL's %.6f too: the case tells nothing", pooled, plain,
                 want);
    /* the weights' other cases: no remainder keeps the last batch whole; ranks share the remainder */
    assert_true(grpo_eval_weight(4, 2, 1, 0, true) == 2.0 && grpo_eval_weight(5, 4, 2, 0, true) == 4.0 &&
                grpo_eval_weight(5, 4, 2, 1, true) == 1.0 && grpo_eval_weight(1, 4, 2, 1, true) == 0.0);
}

/* num_generations_eval 1 (make_grpo_goldens.py eval_g1): each prompt with one completion, a group of
 * one whose std TRL takes as 0: every advantage 0 (the loss the KL term alone), frac_reward_zero_std
 * 1, and the rest of TRL's record. */
static void test_eval_one_generation(void **state)
{
    fixture *fx = *state;
    json_t *c = json_object_get(fx->manifest, "eval_g1"), *record = json_object_get(c, "record");
    json_t *rewards = json_object_get(json_object_get(fx->manifest, "eval"), "rewards");
    json_t *prompts = json_object_get(fx->manifest, "prompts"), *comps = json_object_get(fx->manifest, "completions");
    set_init(fx, "random");
    fx->rows = fx->n_comp = fx->n_tok = 0;
    json_t *r1 = json_array();
    for (size_t p = 0; p < 2; p++) {
        size_t i = p * (size_t)fx->g; /* the first completion of each group */
        append_completion(fx, json_array_get(prompts, p), json_array_get(comps, i));
        json_array_append(r1, json_array_get(rewards, i));
    }
    fx->g = 1;
    pt_config cfg = {.beta = 0.04, .temperature = 1.0, .epsilon = 0.2, .epsilon_high = 0.2};
    trainer t = {.cfg = &cfg, .m = fx->m, .l = fx->l};
    assert_int_equal(arena_open(&t.arena, fx->be, step_loss_arena_bytes(&fx->m, &fx->l.ad, fx->rows, fx->be->act)), PT_OK);
    double sums[GRPO_COUNT] = {0};
    eval_sums(fx, &t, r1, sums);
    arena_close(&t.arena);
    json_decref(r1);
    for (int i = 0; i < fx->n_comp; i++) assert_true(fx->adv[i] == 0.0);
    const char *fn = "even_share";
    grpo_eval_metrics m = {0};
    grpo_eval_add(sums, 2 * sums[GRPO_LOSS], 2, 1, 1, &fn, true, &m); /* one batch: any weight */
    check_close("eval_loss", grpo_eval_mean(&m), json_number_value(json_object_get(record, "eval_loss")), 1e-5);
    check_record(&m, record);
}

/* epsilon 0.1, epsilon_high 0.28 on iter2's batch and step: other tokens clipped (TRL's clip_ratio/low_mean
 * 0.263 against 0.158 with 0.2), so another loss, other gradients and other clip metrics, each TRL's. */
static void test_epsilon(void **state)
{
    fixture *fx = *state;
    json_t *a = json_object_get(json_object_get(fx->manifest, "iter2"), "metrics");
    json_t *b = json_object_get(json_object_get(fx->manifest, "iter2_eps"), "metrics");
    assert_true(json_number_value(json_object_get(a, "clip_ratio/low_mean")) !=
                json_number_value(json_object_get(b, "clip_ratio/low_mean"))); /* the goldens differ */
    run_iterations(fx, "iter2_eps");
}

static void test_zero_adapter(void **state) { run_case(*state, "zero"); }
static void test_random_adapter(void **state) { run_case(*state, "random"); }
static void test_random_beta0(void **state) { run_case(*state, "random_b0"); }
static void test_temperature(void **state) { run_case(*state, "random_t07"); }

/* DoRA (use_dora) against TRL's GRPOTrainer with PEFT's use_dora (make_dora_pref_goldens.py, the
 * "random" case's completions, rewards and beta 0.04): A and B random, the magnitudes PEFT's
 * dora_init values times a seeded factor; the reference the base alone (PEFT's disabled adapter
 * turns DoRA off too). The loss, its metrics and the gradients of A, B and the magnitudes within 1e-4. */
static void test_dora_matches_trl(void **state)
{
    fixture *fx = *state;
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/dora_pref/manifest.json", golden_srcdir());
    json_error_t jerr;
    json_t *all = json_load_file(path, 0, &jerr), *want = json_object_get(all, "grpo");
    assert_non_null(want);
    size_t n, n_grads, ab = 0;
    float *init = golden_read_f32("dora_pref", "grpo_init.f32", &n), *grads = golden_read_f32("dora_pref", "grpo_grads.f32", &n_grads);
    assert_int_equal(n, n_grads);
    for_each_tensor(fx, golden_set_values, init);
    for (adapter_pair *p = adapter_next(&fx->l.ad, NULL); p; p = adapter_next(&fx->l.ad, p))
        ab += (size_t)(tensor_numel(&p->a) + tensor_numel(&p->b));
    assert_int_equal(lora_dora_enable(&fx->l, &fx->m), PT_OK); /* magnitudes ||W + s B A||, then the golden's */
    assert_int_equal(golden_dora_magnitudes(fx->be, &fx->l, fx->m.cfg.n_layers, init, ab, n, NULL), n);
    grpo_step_once(fx, json_object_get(fx->manifest, "random"));
    double worst_m;
    assert_int_equal(golden_dora_magnitudes(fx->be, &fx->l, fx->m.cfg.n_layers, grads, ab, n, &worst_m), n);
    print_message("grpo with DoRA: magnitudes' gradients vs TRL + PEFT: max relative error %.3g\n", worst_m);
    compare_case(fx, want, "dora", "../dora_pref/grpo_grads.f32", fx->sums[GRPO_LOSS],
                 json_real_value(json_object_get(want, "first_loss")), fx->sums);
    assert_true(worst_m <= 1e-4);
    free(init), free(grads);
    json_decref(all);
}

/* From B zero, 20 AdamW steps on the same completions (beta 0.04: the KL term moves the loss). */
static void test_20_adamw_steps(void **state)
{
    fixture *fx = *state;
    json_t *c = json_object_get(fx->manifest, "zero"), *losses = json_object_get(c, "losses");
    size_t n;
    float *init = golden_read_f32("grpo", "zero_init.f32", &n);
    for_each_tensor(fx, golden_set_values, init);
    free(init);
    adamw_options o = {0.9, 0.999, 1e-8, 0.01, 1.0};
    double worst = 0;
    for (int s = 0; s < 20; s++) {
        double loss = grpo_step_once(fx, c), norm;
        assert_int_equal(optimizer_grad_norm(&fx->l, &norm), PT_OK);
        assert_int_equal(optimizer_step(&fx->l, &o, norm, 5e-3, s + 1), PT_OK);
        worst = fmax(worst, fabs(loss - json_real_value(json_array_get(losses, (size_t)s))));
    }
    print_message("grpo: 20 AdamW steps: loss max absolute error %.3g (TRL %.6f -> %.6f)\n", worst,
                  json_real_value(json_array_get(losses, 0)), json_real_value(json_array_get(losses, 19)));
    assert_true(worst <= 1e-3);
}

/* A group whose rewards are all equal has advantages 0 and counts in frac_reward_zero_std; a
 * completion no function scored (NaN) is left out of its group's statistics with advantage 0. */
static void test_advantages_edge(void **state)
{
    (void)state;
    double per_func[8] = {1, 1, 1, 1, 0, 2, NAN, 4}, reward[8], adv[8], sums[GRPO_COUNT] = {0};
    grpo_advantages(per_func, 1, 8, 4, reward, adv, sums);
    for (int i = 0; i < 4; i++) assert_true(adv[i] == 0);
    assert_true(sums[GRPO_ZERO_STD] == 4);
    assert_true(adv[6] == 0 && isnan(reward[6]));
    double std = 2.0; /* of 0, 2, 4 */
    assert_true(fabs(adv[4] - (0 - 2) / (std + 1e-4)) < 1e-12 && fabs(adv[7] - 2 / (std + 1e-4)) < 1e-12);
    assert_true(sums[GRPO_SCORED] == 7);
}

static void test_prompts_tokenized_as_trl(void **state)
{
    (void)state;
    char path[1024], yaml[2048];
    snprintf(path, sizeof path, "%s/tests/data/grpo/tokenized.json", golden_srcdir());
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
            for (int cut = 0; cut <= 3; cut += 3) { /* max_prompt_length 3: the last 3 of TRL's */
                snprintf(yaml, sizeof yaml, "method: grpo\nreward_funcs: [length]\nper_device_train_batch_size: 8\n%s\ndataset:\n  - name: "
                         "\"%s/tests/data/grpo/%s.jsonl\"\n", cut ? "max_prompt_length: 3" : "", golden_srcdir(), group);
                pt_config cfg;
                pt_dataset ds, eval;
                assert_int_equal(config_parse("test.yaml", yaml, strlen(yaml), &cfg, NULL), PT_OK);
                dataset_options o = dataset_options_from_config(&cfg);
                pt_status st = dataset_prepare(&o, tok, NULL, &ds, &eval);
                if (st) fail_msg("%s", err_message());
                config_free(&cfg);
                assert_int_equal(ds.n, json_array_size(rows));
                for (size_t i = 0; i < ds.n; i++) {
                    const int32_t *ids;
                    int32_t n;
                    char *cols;
                    assert_int_equal(dataset_prompt_row(&ds.ex[i], &ids, &n, &cols), PT_OK);
                    json_t *want = json_array_get(rows, i);
                    size_t nw = json_array_size(want), from = cut && nw > (size_t)cut ? nw - (size_t)cut : 0;
                    if ((size_t)n != nw - from) fail_msg("%s %s row %zu: %d prompt tokens, TRL %zu", name, group, i, n, nw - from);
                    for (int32_t k = 0; k < n; k++)
                        if (ids[k] != json_integer_value(json_array_get(want, from + (size_t)k)))
                            fail_msg("%s %s row %zu token %d: %d, TRL %lld", name, group, i, k, ids[k],
                                     (long long)json_integer_value(json_array_get(want, from + (size_t)k)));
                    json_t *row = json_loads(cols, 0, NULL);
                    assert_non_null(json_object_get(row, "answer"));
                    assert_non_null(json_object_get(row, "prompt"));
                    json_decref(row);
                    free(cols);
                }
                dataset_free(&ds), dataset_free(&eval);
            }
        }
        tokenizer_free(tok);
    }
    json_decref(golden);
}

/* Batched generation (forward_tokens_batch: three sequences decoded in step over one cache) gives
 * each sequence the logits forward_tokens gives it alone: three prompts, then two tokens each. */
static void test_batched_generation(void **state)
{
    fixture *fx = *state;
    const pt_model *m = &fx->m;
    int vocab = m->cfg.vocab, np = 5, B = 3;
    int32_t prompts[15], next[2][3] = {{7, 100, 250}, {3, 319, 42}};
    for (int i = 0; i < 15; i++) prompts[i] = (i * 37 + 11) % vocab;
    float *got = malloc(sizeof(float) * (size_t)(B * vocab)), *want = malloc(sizeof(float) * (size_t)vocab);
    pt_kv_cache kv, one;
    double worst = 0;
    assert_int_equal(kv_cache_init_batch(m, B, 16, &kv), PT_OK);
    assert_int_equal(forward_tokens_batch(m, &fx->l.ad, &kv, prompts, np, got), PT_OK);
    for (int step = 0; step <= 2; step++) {
        if (step > 0) assert_int_equal(forward_tokens_batch(m, &fx->l.ad, &kv, next[step - 1], 1, got), PT_OK);
        for (int b = 0; b < B; b++) {
            assert_int_equal(kv_cache_init(m, 16, &one), PT_OK);
            assert_int_equal(forward_tokens(m, &fx->l.ad, &one, prompts + b * np, np, want, true), PT_OK);
            for (int s = 0; s < step; s++) assert_int_equal(forward_tokens(m, &fx->l.ad, &one, &next[s][b], 1, want, true), PT_OK);
            kv_cache_free(m, &one);
            for (int v = 0; v < vocab; v++) worst = fmax(worst, fabs((double)got[b * vocab + v] - want[v]));
        }
    }
    kv_cache_free(m, &kv);
    free(got), free(want);
    print_message("batched generation: max |logit difference| %.3g\n", worst);
    assert_true(worst <= 1e-4);
}

/* GRPO's group (forward_tokens_shared: one prompt run once, its keys and values copied to every
 * sequence of the cache, then decoded in step) gives each sequence the logits forward_tokens gives
 * the prompt and its own tokens alone. */
static void test_shared_prompt(void **state)
{
    fixture *fx = *state;
    const pt_model *m = &fx->m;
    int vocab = m->cfg.vocab, np = 6, B = 3;
    int32_t prompt[6] = {11, 48, 85, 122, 159, 196}, next[2][3] = {{7, 100, 250}, {3, 319, 42}};
    float *got = malloc(sizeof(float) * (size_t)(B * vocab)), *want = malloc(sizeof(float) * (size_t)vocab);
    pt_kv_cache kv, one;
    double worst = 0;
    assert_int_equal(kv_cache_init_batch(m, B, 16, &kv), PT_OK);
    assert_int_equal(forward_tokens_shared(m, &fx->l.ad, &kv, prompt, np, got), PT_OK);
    assert_int_equal(kv.n_past, np);
    for (int step = 0; step <= 2; step++) {
        if (step > 0) assert_int_equal(forward_tokens_batch(m, &fx->l.ad, &kv, next[step - 1], 1, got), PT_OK);
        for (int b = 0; b < B; b++) {
            assert_int_equal(kv_cache_init(m, 16, &one), PT_OK);
            assert_int_equal(forward_tokens(m, &fx->l.ad, &one, prompt, np, want, true), PT_OK);
            for (int s = 0; s < step; s++) assert_int_equal(forward_tokens(m, &fx->l.ad, &one, &next[s][b], 1, want, true), PT_OK);
            kv_cache_free(m, &one);
            for (int v = 0; v < vocab; v++) worst = fmax(worst, fabs((double)got[b * vocab + v] - want[v]));
        }
    }
    kv_cache_free(m, &kv);
    free(got), free(want);
    print_message("shared prompt: max |logit difference| %.3g\n", worst);
    assert_true(worst <= 1e-4);
}

/* GRPO's sampling with temperature, top_k and top_p draws from the distribution transformers'
 * generate builds for TRL (tests/reference/make_sampling_goldens.py: its warpers on fixed logits
 * with ties): 40000 seeded draws per case, a token the warpers remove is never drawn and every
 * frequency is within 0.012 (5 standard deviations) of transformers' probability. */
static void test_top_k(void **state)
{
    (void)state;
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/grpo/sampling.json", golden_srcdir());
    json_t *g = json_load_file(path, 0, NULL);
    assert_non_null(g);
    json_t *jl = json_object_get(g, "logits"), *cases = json_object_get(g, "cases");
    int n = (int)json_array_size(jl), draws = 40000;
    float logits[16];
    assert_true(n >= 2 && n <= 16 && json_array_size(cases) > 0); /* a golden that tests nothing fails */
    for (int i = 0; i < n; i++) logits[i] = (float)json_number_value(json_array_get(jl, (size_t)i));
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *cs = json_array_get(cases, c), *probs = json_object_get(cs, "probs");
        assert_true(json_is_integer(json_object_get(cs, "top_k")) && json_array_size(probs) == (size_t)n);
        sampler sm = {(float)json_number_value(json_object_get(cs, "temperature")),
                      (float)json_number_value(json_object_get(cs, "top_p")), 1000 + c,
                      (int)json_integer_value(json_object_get(cs, "top_k"))};
        int count[16] = {0};
        for (int d = 0; d < draws; d++) {
            int32_t id;
            assert_int_equal(sample_next(&sm, logits, n, &id), PT_OK);
            count[id]++;
        }
        double worst = 0;
        for (int i = 0; i < n; i++) {
            double want = json_number_value(json_array_get(probs, (size_t)i));
            if (want == 0) assert_int_equal(count[i], 0);
            worst = fmax(worst, fabs((double)count[i] / draws - want));
        }
        print_message("sampling T %.1f top_k %d top_p %.2f: max |frequency - transformers| %.4f\n", sm.temperature,
                      sm.top_k, sm.top_p, worst);
        assert_true(worst < 0.012);
    }
    json_decref(g);
}

#if !defined(__SANITIZE_ADDRESS__)
/* In a child whose address space is capped just above what it uses: sampling 32M logits needs 256
 * MiB of probabilities (and 128 MiB of top_k heap), which cannot be had; sample_next must say so
 * (PT_ERR_NOMEM, its message) rather than draw some other way. Exit 0: as it must. */
static int sample_without_memory(void)
{
    int n = 1 << 25; /* more than any free memory a test process keeps in its heap */
    float *logits = calloc((size_t)n, sizeof *logits);
    if (!logits) return 2;
    long pages = 0, rss;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f || fscanf(f, "%ld %ld", &pages, &rss) != 2) return 3;
    fclose(f);
    struct rlimit r = {(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (8u << 20), RLIM_INFINITY};
    r.rlim_max = r.rlim_cur;
    if (setrlimit(RLIMIT_AS, &r)) return 4;
    int32_t id = -1;
    sampler s = {1.0f, 1.0f, 7, 0};
    if (sample_next(&s, logits, n, &id) != PT_ERR_NOMEM || id != -1 ||
        !strstr(err_message(), "no memory for the probabilities of 33554432 tokens"))
        return 5;
    s.top_k = n - 1;
    if (sample_next(&s, logits, n, &id) != PT_ERR_NOMEM || !strstr(err_message(), "no memory for top_k 33554431"))
        return 6;
    s.temperature = 0; /* greedy needs no buffer */
    return sample_next(&s, logits, n, &id) == PT_OK && id == 0 ? 0 : 7;
}
#endif

static void test_sample_no_memory(void **state)
{
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    print_message("skipped: the address sanitizer reserves more address space than a capped child may have\n");
    skip();
#else
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(sample_without_memory());
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("sampling without memory: the child ended with status %d (0: PT_ERR_NOMEM with its message)", status);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_zero_adapter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_adapter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_random_beta0, setup, teardown),
        cmocka_unit_test_setup_teardown(test_temperature, setup, teardown),
        cmocka_unit_test_setup_teardown(test_20_adamw_steps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_iterations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_epsilon, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eval_matches_trl, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eval_batches_mean, setup, teardown),
        cmocka_unit_test_setup_teardown(test_eval_one_generation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dora_matches_trl, setup, teardown),
        cmocka_unit_test(test_advantages_edge),
        cmocka_unit_test(test_prompts_tokenized_as_trl),
        cmocka_unit_test_setup_teardown(test_batched_generation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_prompt, setup, teardown),
        cmocka_unit_test(test_top_k),
        cmocka_unit_test(test_sample_no_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
