/* test_config.c — unit tests of the config.yaml parser (src/config/config.c, src/config/config_keys.c,
 * src/config/config_check.c): every top-level key read and printed, the defaults, aliases and accepted
 * spellings, dataset forms, derived defaults, each error message with its exact file:line:col,
 * warnings (unknown keys, the token), config_print, config_hash, config_load and
 * config_validate_launch; and the corpus tests/configs/{bad,good} (bad/NAME.err is exactly what
 * `ptrain check NAME.yaml` prints on stderr). Every config is freed: the suite also runs under
 * ASan/LSan. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <math.h>
#include <time.h>
#include <unistd.h>

#include <yaml.h>

#include "ptrain/config.h"
#include "ptrain/jsonfile.h"
#include "ptrain/method.h"
#include "ptrain/error.h"
#include "ptrain/util.h"
#include "config/config_internal.h"

#define NAME "config.yaml"

/* ---------------------------------------------------------------------------------------------
 * helpers */

static pt_status parse(const char *yaml, pt_config *cfg)
{
    return config_parse(NAME, yaml, strlen(yaml), cfg, NULL);
}

/* Parse and capture what went to the warning stream (the caller frees *warnings). */
static pt_status parse_warn(const char *yaml, pt_config *cfg, char **warnings)
{
    size_t size = 0;
    *warnings = NULL;
    FILE *w = open_memstream(warnings, &size);
    assert_non_null(w);
    pt_status st = config_parse(NAME, yaml, strlen(yaml), cfg, w);
    fclose(w);
    return st;
}

/* A config that must parse; fails the test with the error message otherwise. */
static void parse_ok(const char *yaml, pt_config *cfg)
{
    pt_status st = parse(yaml, cfg);
    if (st != PT_OK) fail_msg("config_parse failed on:\n%s\nerror: %s", yaml, err_message());
}

/* A config that must fail with exactly this message; checks that *cfg is left empty. */
static void expect_error(const char *yaml, const char *message)
{
    pt_config cfg;
    char *warnings;
    pt_status st = parse_warn(yaml, &cfg, &warnings);
    free(warnings);
    if (st == PT_OK) {
        config_free(&cfg);
        fail_msg("config_parse accepted:\n%s\nexpected error: %s", yaml, message);
    }
    assert_int_equal(st, PT_ERR_USER);
    assert_string_equal(err_message(), message);
    assert_null(cfg.path);
    assert_null(cfg.is_set);
    assert_null(cfg.datasets);
    assert_int_equal(cfg.n_datasets, 0);
}

static void expect_text(const pt_config *cfg, const char *key, const char *expected)
{
    char *text = config_value_text(cfg, key);
    if (!text) fail_msg("config_value_text(%s) returned NULL", key);
    if (strcmp(text, expected) != 0) {
        char got[512];
        snprintf(got, sizeof got, "%s", text);
        free(text);
        fail_msg("%s: expected \"%s\", got \"%s\"", key, expected, got);
    }
    free(text);
}

static int key_position(const char *key)
{
    const char *const *names = config_key_names();
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], key) == 0) return i;
    fail_msg("no key %s in config_key_names()", key);
    return -1;
}

/* What config_print writes, as a string (the caller frees it). */
static char *print_text(const pt_config *cfg)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    assert_non_null(f);
    config_print(cfg, f);
    fclose(f);
    return buf;
}

static uint64_t hash_of(const char *yaml)
{
    pt_config cfg;
    parse_ok(yaml, &cfg);
    uint64_t h = config_hash(&cfg);
    config_free(&cfg);
    return h;
}

static char *write_temp(const void *data, size_t len)
{
    char *path = strdup("/tmp/test_config_XXXXXX");
    assert_non_null(path);
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* ---------------------------------------------------------------------------------------------
 * every top-level key: one row each, with a non-default value (and what a key needs beside it) */

typedef struct {
    const char *key;
    const char *value;    /* YAML text after "key: " */
    const char *expected; /* config_value_text */
    const char *extra;    /* other lines the value needs to be valid, or NULL */
} key_row;

static const key_row key_rows[] = {
    {"model_name", "\"unsloth/Llama-3.2-1B-Instruct\"", "unsloth/Llama-3.2-1B-Instruct", NULL},
    {"revision", "v1.0", "v1.0", NULL},
    {"max_seq_length", "512", "512", NULL},
    {"load_in_4bit", "false", "false", NULL},
    /* true is always refused (no 8-bit base: test_rule_load_in_8bit); an explicit false is read */
    {"load_in_8bit", "no", "false", NULL},
    {"dtype", "bfloat16", "bfloat16", NULL},
    /* true is always refused (test_rule_full_finetuning); an explicit false is read */
    {"full_finetuning", "off", "false", NULL},
    {"chat_template", "chatml", "chatml", NULL},
    {"chat_template_kwargs", "{enable_thinking: false}", "enable_thinking: false", NULL},
    {"assistant_only_loss", "true", "true", NULL},
    {"train", "false", "false", NULL},
    {"device_map", "cpu", "cpu", NULL},
    {"device", "cpu", "cpu", NULL},
    {"model_read", "broadcast", "broadcast", NULL},
    {"threads", "8", "8", NULL},
    {"lora_r", "8", "8", NULL},
    {"lora_alpha", "32", "32", NULL},
    {"lora_dropout", "0.05", "0.05", NULL},
    /* all and lora_only are refused (test_rule_lora_bias); NONE is read and normalised */
    {"lora_bias", "NONE", "none", NULL},
    {"lora_target_modules", "[q_proj, v_proj]", "q_proj, v_proj", NULL},
    {"use_gradient_checkpointing", "false", "false", NULL},
    {"gradient_checkpointing_keep_layers", "2", "2", NULL},
    {"random_state", "42", "42", NULL},
    {"use_rslora", "true", "true", NULL},
    {"use_dora", "true", "true", NULL},
    {"lora_model_dir", "runs/a/lora", "runs/a/lora", NULL},
    {"layers_to_transform", "[0, 2]", "0, 2", NULL},
    {"layers_pattern", "layers", "layers", "layers_to_transform: [1]\n"},
    {"finetune_last_n_layers", "3", "3", NULL},
    {"init_lora_weights", "gaussian", "gaussian", NULL},
    {"modules_to_save", "[embed_tokens, lm_head]", "embed_tokens, lm_head", NULL},
    {"target_parameters", "[mlp.experts.gate_up_proj, mlp.experts.down_proj]",
     "mlp.experts.gate_up_proj, mlp.experts.down_proj", NULL},
    {"output_router_logits", "true", "true", NULL},
    {"router_aux_loss_coef", "0.02", "0.02", NULL},
    {"rank_pattern", "{q_proj: 8}", "q_proj: 8", NULL},
    {"alpha_pattern", "{q_proj: 32}", "q_proj: 32", NULL},
    {"per_device_train_batch_size", "4", "4", NULL},
    {"gradient_accumulation_steps", "8", "8", NULL},
    {"warmup_steps", "10", "10", NULL},
    {"warmup_ratio", "0.1", "0.1", NULL},
    {"learning_rate", "1e-4", "0.0001", NULL},
    {"num_train_epochs", "1.5", "1.5", NULL},
    {"max_steps", "500", "500", NULL},
    {"optim", "adamw_torch", "adamw_torch", NULL},
    {"lr_scheduler_type", "cosine", "cosine", NULL},
    {"lr_scheduler_kwargs", "{num_cycles: 1.5}", "num_cycles: 1.5", "lr_scheduler_type: cosine\n"},
    {"weight_decay", "0", "0", NULL},
    {"neftune_noise_alpha", "5", "5", NULL},
    {"group_by_length", "true", "true", NULL},
    {"max_grad_norm", "0.3", "0.3", NULL},
    {"skip_nonfinite_steps", "true", "true", NULL},
    {"adam_beta1", "0.8", "0.8", NULL},
    {"adam_beta2", "0.95", "0.95", NULL},
    {"adam_epsilon", "1e-6", "1e-06", NULL},
    {"seed", "42", "42", NULL},
    {"data_seed", "7", "7", NULL},
    {"output_dir", "runs/a", "runs/a", NULL},
    {"logging_steps", "1", "1", NULL},
    {"logging_first_step", "true", "true", NULL},
    {"report_to", "[tensorboard, wandb]", "tensorboard, wandb", NULL},
    {"logging_dir", "tb/run", "tb/run", NULL},
    {"run_name", "lora-r16", "lora-r16", NULL},
    {"packing", "true", "true", NULL},
    {"dataset_text_field", "content", "content", NULL},
    {"per_device_eval_batch_size", "8", "8", NULL},
    {"method", "SFT", "sft", NULL},
    {"beta", "0.5", "0.5", NULL},
    {"max_prompt_length", "128", "128", NULL},
    {"max_completion_length", "256", "256", NULL},
    {"num_generations", "4", "4", NULL},
    {"num_generations_eval", "2", "2", NULL},
    {"num_iterations", "2", "2", NULL},
    {"epsilon", "0.1", "0.1", NULL},
    {"epsilon_high", "0.28", "0.28", NULL},
    {"desirable_weight", "1.33", "1.33", NULL},
    {"undesirable_weight", "0.5", "0.5", NULL},
    {"center_rewards_coefficient", "0.01", "0.01", NULL},
    {"embedding_learning_rate", "5e-6", "5e-06", NULL},
    {"reward_funcs", "[rewards:accuracy, rewards:fmt]", "rewards:accuracy, rewards:fmt", NULL},
    {"temperature", "0.7", "0.7", NULL},
    {"top_p", "0.9", "0.9", NULL},
    {"top_k", "50", "50", NULL},
    {"ddp_find_unused_parameters", "false", "false", NULL},
    {"save_strategy", "epoch", "epoch", NULL},
    {"save_steps", "50", "50", NULL},
    {"save_total_limit", "2", "2", NULL},
    {"save_only_model", "true", "true", NULL},
    {"final_model_dir", "final", "final", NULL},
    {"resume_from_checkpoint", "outputs/checkpoint-100", "outputs/checkpoint-100", NULL},
    {"overwrite_output_dir", "yes", "true", NULL},
    {"val_split_ratio", "0.05", "0.05", NULL},
    {"eval_strategy", "steps", "steps", "val_split_ratio: 0.1\n"},
    {"eval_steps", "25", "25", NULL},
    {"load_best_model_at_end", "true", "true", "val_split_ratio: 0.1\nsave_strategy: epoch\n"},
    {"metric_for_best_model", "perplexity", "eval_perplexity", NULL},
    {"greater_is_better", "true", "true", NULL},
    {"early_stopping_patience", "3", "3", "val_split_ratio: 0.1\n"},
    {"early_stopping_threshold", "0.01", "0.01", NULL},
    {"push_to_hub", "true", "true", "hub_model_id: me/lora\n"},
    {"hub_model_id", "me/lora", "me/lora", NULL},
    {"hub_strategy", "end", "end", NULL},
    {"hub_private", "false", "false", NULL},
    {"hub_upload_timeout", "30", "30", NULL},
    {"huggingface_save", "true", "true", "hf_model_name: me/merged\n"},
    {"hf_model_name", "me/merged", "me/merged", NULL},
    {"huggingface_save_gguf", "true", "true", NULL},
    {"quantization_method", "[q8_0, f16]", "q8_0, f16", NULL},
    {"imatrix_file", "/data/model.imatrix.gguf", "/data/model.imatrix.gguf", NULL},
    {"ollama_save", "true", "true", "ollama_model: pirate\n"},
    {"ollama_model", "pirate", "pirate", NULL},
    {"merged_save_dir", "/shared/merged", "/shared/merged", NULL},
    {"tags", "[text-generation, pirate]", "text-generation, pirate", NULL},
    {"commit_message", "\"Pirate adapter, 3 epochs\"", "Pirate adapter, 3 epochs", NULL},
    {"model_parameters", "{temperature: 0.7, top_p: 0.9}", "temperature: 0.7, top_p: 0.9", NULL},
};
#define N_KEY_ROWS ((int)(sizeof key_rows / sizeof key_rows[0]))

static void test_every_key_value(void **state)
{
    (void)state;
    for (int r = 0; r < N_KEY_ROWS; r++) {
        const key_row *row = &key_rows[r];
        char yaml[512];
        snprintf(yaml, sizeof yaml, "%s%s: %s\n", row->extra ? row->extra : "", row->key, row->value);
        pt_config cfg;
        parse_ok(yaml, &cfg);
        expect_text(&cfg, row->key, row->expected);
        if (!config_is_set(&cfg, row->key)) fail_msg("%s: config_is_set is false", row->key);
        /* the value's position is kept for messages: the last line, after "key: " */
        int i = key_position(row->key);
        int line = 1;
        for (const char *c = row->extra; c && *c; c++) line += *c == '\n';
        assert_int_equal(cfg.key_line[i], line);
        assert_int_equal(cfg.key_col[i], (int)strlen(row->key) + 3);
        config_free(&cfg);
    }
}

/* Adding a key to the table without a row above fails here. */
/* method: sft by default; an unknown method lists the methods; one not built yet is refused
 * naming those built (never trained as SFT); beta takes the method's default from its row */
static void test_method(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("{}\n", &cfg);
    assert_int_equal(cfg.method, METHOD_SFT);
    config_free(&cfg);
    expect_error("method: dpx\n", "config.yaml:1:9: method: expected one of sft, cpt, dpo, orpo, cpo, kto, reward, "
                                  "grpo, found \"dpx\" (did you mean \"dpo\"?)");
    char msg[512];
    for (int m = 0; m < METHOD_COUNT; m++) {
        const method_info *mi = method_info_of((pt_method)m);
        assert_int_equal(mi->method, m);
        assert_string_equal(mi->name, config_method_choices[m]);
        if (mi->built) continue;
        char yaml[64], built[128];
        snprintf(yaml, sizeof yaml, "method: %s\n", mi->name);
        method_built_names(built, sizeof built);
        snprintf(msg, sizeof msg,
                 "config.yaml:1:9: method: %s (TRL's %s) is not built in this ptrain yet; the methods it trains: %s. "
                 "Use one of those, or remove the key (sft)",
                 mi->name, mi->trainer, built);
        expect_error(yaml, msg);
    }
    /* a pair's two sequences share a micro-batch: no packing */
    expect_error("method: dpo\npacking: true\n", "config.yaml:2:10: packing: dpo trains on pairs, each its two sequences "
                                                 "in one micro-batch; packing does not apply: remove it");
    /* KTO's KL estimate needs the other rows of a micro-batch; no packing */
    expect_error("method: kto\nper_device_train_batch_size: 1\n",
                 "config.yaml:2:30: per_device_train_batch_size: kto estimates its KL term from the other rows of a "
                 "micro-batch, so it needs at least 2 (as TRL's KTOTrainer); raise it (and lower "
                 "gradient_accumulation_steps to keep the global batch)");
    expect_error("method: kto\npacking: true\n", "config.yaml:2:10: packing: kto batches each row with a mismatched KL "
                                                 "sequence; packing does not apply: remove it");
    /* cpt trains on every token */
    expect_error("method: cpt\nassistant_only_loss: true\n",
                 "config.yaml:2:22: assistant_only_loss: cpt (continued pretraining) trains on every token; remove "
                 "the key or use method: sft");
    /* beta: the method's default unless given */
    parse_ok("method: dpo\n", &cfg);
    assert_true(cfg.beta == 0.1);
    config_free(&cfg);
    parse_ok("method: dpo\nbeta: 0.5\n", &cfg);
    assert_true(cfg.beta == 0.5);
    config_free(&cfg);
}

static void test_every_key_has_a_row(void **state)
{
    (void)state;
    const char *const *names = config_key_names();
    int n = 0;
    for (; names[n]; n++) {
        if (!strcmp(names[n], "dataset") || !strcmp(names[n], "hub_token")) continue;
        int r = 0;
        while (r < N_KEY_ROWS && strcmp(key_rows[r].key, names[n]) != 0) r++;
        if (r == N_KEY_ROWS) fail_msg("key %s has no row in key_rows (test_config.c)", names[n]);
    }
    /* and every row names a real key */
    for (int r = 0; r < N_KEY_ROWS; r++) key_position(key_rows[r].key);
    assert_int_equal(n, N_KEY_ROWS + 2);
}

/* ---------------------------------------------------------------------------------------------
 * defaults: docs/config-keys.md's table, and ptrain's own choices */

typedef struct {
    const char *key;
    const char *expected;
} default_row;

static const default_row default_rows[] = {
    {"model_name", "SmolLM2-135M-Instruct.Q4_1.gguf"}, /* ptrain: the embedded model */
    {"revision", "main"},
    {"max_seq_length", "2048"}, /* ptrain's choice (required in the peer) */
    {"load_in_4bit", "true"},
    {"load_in_8bit", "false"},
    {"dtype", "auto"},
    {"full_finetuning", "false"},
    {"chat_template", "(unset)"},
    {"chat_template_kwargs", "(none)"},
    {"assistant_only_loss", "auto"},
    {"train", "true"},
    {"device_map", "(unset)"},
    {"device", "auto"},
    {"model_read", "per_node"},
    {"threads", "auto"},
    {"lora_r", "16"},
    {"lora_alpha", "16"},
    {"lora_dropout", "0"},
    {"lora_bias", "none"},
    {"lora_target_modules", "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj"},
    {"use_gradient_checkpointing", "unsloth"},
    {"gradient_checkpointing_keep_layers", "0"},
    {"random_state", "3407"},
    {"use_rslora", "false"},
    {"use_dora", "false"},
    {"lora_model_dir", "(unset)"},
    {"layers_to_transform", "(none)"},
    {"layers_pattern", "(none)"},
    {"finetune_last_n_layers", "(unset)"},
    {"init_lora_weights", "true"},
    {"modules_to_save", "(none)"},
    {"target_parameters", "(none)"},
    {"output_router_logits", "false"},
    {"router_aux_loss_coef", "0.001"},
    {"rank_pattern", "(none)"},
    {"alpha_pattern", "(none)"},
    {"per_device_train_batch_size", "2"},
    {"gradient_accumulation_steps", "2"},
    {"warmup_steps", "50"},
    {"warmup_ratio", "(unset)"},
    {"learning_rate", "0.0002"},
    {"num_train_epochs", "3"},
    {"max_steps", "(unset)"},
    {"optim", "adamw_8bit"},
    {"lr_scheduler_type", "linear"},
    {"lr_scheduler_kwargs", "(none)"},
    {"logging_first_step", "false"},
    {"weight_decay", "0.01"},
    {"neftune_noise_alpha", "(unset)"},
    {"group_by_length", "false"},
    {"max_grad_norm", "1"},
    {"skip_nonfinite_steps", "false"},
    {"adam_beta1", "0.9"},
    {"adam_beta2", "0.999"},
    {"adam_epsilon", "1e-08"},
    {"seed", "3407"},
    {"data_seed", "3407"}, /* seed unless given, as transformers' data_seed */
    {"output_dir", "outputs"},
    {"logging_steps", "15"},
    {"report_to", "none"},
    {"logging_dir", "(unset)"}, /* output_dir/runs/RUN_NAME */
    {"run_name", "(unset)"},    /* the start time and host, kept across resumes */
    {"packing", "false"},
    {"dataset_text_field", "text"},
    {"per_device_eval_batch_size", "2"}, /* the train batch size */
    {"method", "sft"},
    {"beta", "(unset)"}, /* the method's default (SFT has none) */
    {"max_prompt_length", "(unset)"},
    {"max_completion_length", "(unset)"},
    {"num_generations", "8"},
    {"num_generations_eval", "8"}, /* num_generations */
    {"num_iterations", "1"},
    {"epsilon", "0.2"},
    {"epsilon_high", "0.2"}, /* epsilon */
    {"desirable_weight", "1"},
    {"undesirable_weight", "1"},
    {"center_rewards_coefficient", "(unset)"},
    {"embedding_learning_rate", "(unset)"},
    {"reward_funcs", "(none)"},
    {"temperature", "1"},
    {"top_p", "1"},
    {"top_k", "0"},
    {"ddp_find_unused_parameters", "true"},
    {"save_strategy", "no"}, /* no save_steps given */
    {"save_steps", "100"},
    {"save_total_limit", "(unset)"},
    {"save_only_model", "false"},
    {"final_model_dir", "lora_model"},
    {"resume_from_checkpoint", "false"},
    {"overwrite_output_dir", "false"},
    {"val_split_ratio", "(unset)"},
    {"eval_strategy", "epoch"},
    {"eval_steps", "100"},
    {"load_best_model_at_end", "false"},
    {"metric_for_best_model", "eval_loss"},
    {"greater_is_better", "false"},
    {"early_stopping_patience", "(unset)"},
    {"early_stopping_threshold", "0"},
    {"push_to_hub", "false"},
    {"hub_model_id", "(unset)"},
    {"hub_strategy", "every_save"},
    {"hub_private", "true"}, /* ptrain's choice: the peer's uploads were public */
    {"hub_upload_timeout", "600"},
    {"hub_token", "(from HF_TOKEN only)"},
    {"huggingface_save", "false"},
    {"hf_model_name", "(unset)"},
    {"merged_save_dir", "(unset)"},
    {"huggingface_save_gguf", "false"},
    {"quantization_method", "q4_k_m"},
    {"imatrix_file", "(unset)"},
    {"ollama_save", "false"},
    {"ollama_model", "(unset)"},
    {"tags", "(none)"},
    {"commit_message", "(unset)"},
    {"model_parameters", "(none)"},
};
#define N_DEFAULT_ROWS ((int)(sizeof default_rows / sizeof default_rows[0]))

static void test_defaults(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("{}\n", &cfg);
    const char *const *names = config_key_names();
    for (int i = 0; names[i]; i++) {
        if (config_is_set(&cfg, names[i])) fail_msg("%s is set in an empty mapping", names[i]);
        if (!strcmp(names[i], "dataset")) continue;
        int r = 0;
        while (r < N_DEFAULT_ROWS && strcmp(default_rows[r].key, names[i]) != 0) r++;
        if (r == N_DEFAULT_ROWS) fail_msg("key %s has no row in default_rows", names[i]);
        expect_text(&cfg, names[i], default_rows[r].expected);
    }
    assert_null(config_value_text(&cfg, "dataset"));
    assert_null(config_value_text(&cfg, "no_such_key"));

    /* the same, read in the struct */
    assert_string_equal(cfg.path, NAME);
    assert_string_equal(cfg.model_name, "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_int_equal(cfg.max_seq_length, 2048);
    assert_true(cfg.load_in_4bit);
    assert_false(cfg.load_in_8bit);
    assert_null(cfg.chat_template);
    assert_int_equal(cfg.assistant_only_loss, PT_AUTO);
    assert_null(cfg.device_map);
    assert_int_equal(cfg.threads, 0);
    assert_int_equal(cfg.n_datasets, 0);
    assert_null(cfg.datasets);
    assert_int_equal(cfg.lora_target_modules.n, 7);
    assert_int_equal(cfg.use_gradient_checkpointing, PT_CKPT_OFFLOAD);
    assert_true(cfg.learning_rate == 2e-4);
    assert_true(cfg.num_train_epochs == 3.0);
    assert_int_equal(cfg.max_steps, -1);
    assert_true(cfg.warmup_ratio == 0.0);
    assert_true(cfg.adam_epsilon == 1e-8);
    assert_true(cfg.max_grad_norm == 1.0);
    assert_int_equal(cfg.per_device_eval_batch_size, 2);
    assert_int_equal(cfg.save_strategy, STRATEGY_NO);
    assert_int_equal(cfg.save_total_limit, 0);
    assert_false(cfg.resume_from_checkpoint.on);
    assert_null(cfg.resume_from_checkpoint.path);
    assert_true(cfg.val_split_ratio == 0.0);
    assert_int_equal(cfg.early_stopping_patience, 0);
    assert_true(cfg.hub_private);
    assert_int_equal(cfg.quantization_method.n, 1);
    assert_string_equal(cfg.quantization_method.items[0], "q4_k_m");
    assert_int_equal(cfg.model_parameters.n, 0);
    config_free(&cfg);

    /* a file of comments and null values is not empty: defaults everywhere */
    parse_ok("# comment\nmodel_name:\nlora_r: ~\n", &cfg);
    assert_string_equal(cfg.model_name, "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert_int_equal(cfg.lora_r, 16);
    config_free(&cfg);
}

/* ---------------------------------------------------------------------------------------------
 * spellings, aliases and forms */

static void test_aliases(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("model: my/model\ntrain_on_responses_only: false\n"
             "dataset:\n  - name: d\n    split: test\n",
             &cfg);
    assert_string_equal(cfg.model_name, "my/model");
    assert_true(config_is_set(&cfg, "model_name"));
    assert_true(config_is_set(&cfg, "model"));
    expect_text(&cfg, "model", "my/model");
    assert_int_equal(cfg.assistant_only_loss, PT_FALSE);
    assert_true(config_is_set(&cfg, "assistant_only_loss"));
    assert_string_equal(cfg.datasets[0].split_type, "test");
    config_free(&cfg);

    /* hf_private is hub_private (the seed system's name); both at once is one key given twice */
    parse_ok("hf_private: false\n", &cfg);
    assert_false(cfg.hub_private);
    assert_true(config_is_set(&cfg, "hub_private"));
    expect_text(&cfg, "hf_private", "false");
    config_free(&cfg);
    expect_error("hub_private: true\nhf_private: false\n",
                 "config.yaml:2:1: hf_private: given twice (first at line 1 as \"hub_private\"; hf_private is an "
                 "alias of hub_private)");

    /* hf_token is hub_token: warned about, never stored */
    char *warnings;
    assert_int_equal(parse_warn("hf_token: hf_abcdefSECRET\n", &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, "ptrain: warning: config.yaml:1:11: hf_token: a token in a config "
                                  "file is never used (it would reach logs and checkpoints); export "
                                  "HF_TOKEN instead\n");
    assert_true(config_is_set(&cfg, "hub_token"));
    free(warnings);
    config_free(&cfg);
}

static void test_booleans(void **state)
{
    (void)state;
    static const struct {
        const char *word;
        bool value;
    } words[] = {{"true", true},   {"false", false}, {"yes", true},  {"no", false},
                 {"on", true},     {"off", false},   {"1", true},    {"0", false},
                 {"True", true},   {"ON", true},     {"FALSE", false}, {"No", false},
                 {"y", true},      {"n", false},     {"\"true\"", true}, {"'off'", false}};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        char yaml[128];
        pt_config cfg;
        snprintf(yaml, sizeof yaml, "packing: %s\nhub_private: %s\n", words[i].word, words[i].word);
        parse_ok(yaml, &cfg);
        if (cfg.packing != words[i].value || cfg.hub_private != words[i].value)
            fail_msg("\"%s\" read as %d/%d", words[i].word, cfg.packing, cfg.hub_private);
        config_free(&cfg);
    }
    /* assistant_only_loss: auto or a boolean */
    pt_config cfg;
    parse_ok("assistant_only_loss: AUTO\n", &cfg);
    assert_int_equal(cfg.assistant_only_loss, PT_AUTO);
    expect_text(&cfg, "assistant_only_loss", "auto");
    config_free(&cfg);
    parse_ok("assistant_only_loss: yes\n", &cfg);
    assert_int_equal(cfg.assistant_only_loss, PT_TRUE);
    config_free(&cfg);
}

static void test_unsloth_and_all_linear(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("use_gradient_checkpointing: unsloth\n", &cfg);
    assert_int_equal(cfg.use_gradient_checkpointing, PT_CKPT_OFFLOAD);
    expect_text(&cfg, "use_gradient_checkpointing", "unsloth");
    config_free(&cfg);
    parse_ok("use_gradient_checkpointing: \"Unsloth\"\n", &cfg);
    assert_int_equal(cfg.use_gradient_checkpointing, PT_CKPT_OFFLOAD);
    config_free(&cfg);
    parse_ok("use_gradient_checkpointing: yes\n", &cfg);
    assert_int_equal(cfg.use_gradient_checkpointing, PT_CKPT_ON);
    expect_text(&cfg, "use_gradient_checkpointing", "true");
    config_free(&cfg);
    parse_ok("use_gradient_checkpointing: false\n", &cfg);
    assert_int_equal(cfg.use_gradient_checkpointing, PT_CKPT_OFF);
    config_free(&cfg);
    /* "unsloth" is for use_gradient_checkpointing only */
    expect_error("packing: unsloth\n",
                 "config.yaml:1:10: packing: expected true or false, found \"unsloth\"");

    parse_ok("lora_target_modules: all-linear\n", &cfg);
    assert_int_equal(cfg.lora_target_modules.n, 7);
    assert_string_equal(cfg.lora_target_modules.items[0], "q_proj");
    assert_string_equal(cfg.lora_target_modules.items[6], "down_proj");
    config_free(&cfg);
    parse_ok("lora_target_modules: [all-linear]\n", &cfg);
    assert_int_equal(cfg.lora_target_modules.n, 7);
    assert_true(cfg.lora_all_linear); /* the model adds its other linear projections (qwen35's DeltaNet) */
    char *shown = config_value_text(&cfg, "lora_target_modules"); /* ptrain check says so */
    assert_non_null(strstr(shown, "down_proj (all-linear: and the model's other linear projections"));
    free(shown);
    config_free(&cfg);
    parse_ok("lora_target_modules: [o_proj, all-linear, in_proj_a]\n", &cfg);
    assert_true(cfg.lora_all_linear);
    char *dumped = NULL;
    assert_int_equal(config_dump(&cfg, &dumped), PT_OK); /* reads back as all-linear, with what it does not cover */
    assert_non_null(strstr(dumped, "lora_target_modules:\n- all-linear\n- in_proj_a\n"));
    free(dumped);
    config_free(&cfg);
    parse_ok("lora_target_modules: [o_proj, in_proj_a]\n", &cfg);
    assert_false(cfg.lora_all_linear);
    config_free(&cfg);
    parse_ok("lora_target_modules:\n  - o_proj\n", &cfg);
    assert_int_equal(cfg.lora_target_modules.n, 1);
    expect_text(&cfg, "lora_target_modules", "o_proj");
    config_free(&cfg);
}

static void test_numbers(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("learning_rate: \"2e-4\"\nlora_r: '8'\nsave_steps: 1e3\neval_steps: 100.0\n"
             "lora_alpha: 8.5\nwarmup_ratio: 1\nmax_steps: -1\nthreads: auto\n",
             &cfg);
    assert_true(cfg.learning_rate == 2e-4);
    expect_text(&cfg, "learning_rate", "0.0002");
    assert_int_equal(cfg.lora_r, 8);
    assert_int_equal(cfg.save_steps, 1000);
    assert_int_equal(cfg.eval_steps, 100);
    assert_true(cfg.lora_alpha == 8.5);
    assert_true(cfg.warmup_ratio == 1.0);
    assert_int_equal(cfg.max_steps, -1);
    config_free(&cfg);
    /* save_steps/eval_steps below 1 are fractions of the total, as transformers takes them */
    parse_ok("save_steps: 0.25\neval_steps: 0.1\n", &cfg);
    assert_true(cfg.save_steps == 0.25 && cfg.eval_steps == 0.1);
    config_free(&cfg);
    expect_error("save_steps: 2.5\n", "config.yaml:1:13: save_steps: expected a positive integer (at most 1e+18) or a fraction "
                 "below 1 of the total steps, found \"2.5\"");
    parse_ok("max_steps: -1\n", &cfg);
    expect_text(&cfg, "max_steps", "(unset)");
    assert_true(config_is_set(&cfg, "max_steps"));
    assert_int_equal(cfg.threads, 0);
    expect_text(&cfg, "threads", "auto");
    config_free(&cfg);

    /* explicit zeros of optional numbers are values, not "(unset)" */
    parse_ok("warmup_ratio: 0\nthreads: 0\n", &cfg);
    expect_text(&cfg, "warmup_ratio", "0");
    assert_true(config_is_set(&cfg, "warmup_ratio"));
    expect_text(&cfg, "threads", "auto");
    config_free(&cfg);
}

static void test_null_keeps_default(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("learning_rate:\nlora_r: ~\noptim: null\nseed: Null\noutput_dir: NULL\n"
             "lora_target_modules:\nsave_strategy:\nmodel_parameters: ~\ndevice_map:\n",
             &cfg);
    assert_true(cfg.learning_rate == 2e-4);
    assert_int_equal(cfg.lora_r, 16);
    assert_int_equal(cfg.optim, OPTIM_ADAMW_8BIT);
    assert_int_equal(cfg.seed, 3407);
    assert_string_equal(cfg.output_dir, "outputs");
    assert_int_equal(cfg.lora_target_modules.n, 7);
    assert_int_equal(cfg.save_strategy, STRATEGY_NO);
    assert_null(cfg.device_map);
    assert_false(config_is_set(&cfg, "learning_rate"));
    assert_false(config_is_set(&cfg, "lora_r"));
    assert_false(config_is_set(&cfg, "device_map"));
    config_free(&cfg);
    /* quoted "null" is a string */
    parse_ok("chat_template: \"null\"\n", &cfg);
    assert_string_equal(cfg.chat_template, "null");
    config_free(&cfg);
}

static void test_string_or_list(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("quantization_method: q8_0\n"
             "dataset:\n  - name: a\n    data_files: train.jsonl\n"
             "  - name: b\n    data_files: [x.jsonl, y.json]\n    format: jsonl\n",
             &cfg);
    assert_int_equal(cfg.quantization_method.n, 1);
    assert_string_equal(cfg.quantization_method.items[0], "q8_0");
    expect_text(&cfg, "quantization_method", "q8_0");
    assert_int_equal(cfg.datasets[0].data_files.n, 1);
    assert_string_equal(cfg.datasets[0].data_files.items[0], "train.jsonl");
    assert_int_equal(cfg.datasets[1].data_files.n, 2);
    assert_string_equal(cfg.datasets[1].data_files.items[0], "x.jsonl");
    assert_string_equal(cfg.datasets[1].data_files.items[1], "y.json");
    assert_int_equal(cfg.datasets[1].format, DATASET_JSONL);
    config_free(&cfg);

    parse_ok("quantization_method:\n  - q4_k_m\n  - q8_0\n  - f16\n", &cfg);
    assert_int_equal(cfg.quantization_method.n, 3);
    expect_text(&cfg, "quantization_method", "q4_k_m, q8_0, f16");
    config_free(&cfg);
}

static void test_resume_from_checkpoint(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("resume_from_checkpoint: true\n", &cfg);
    assert_true(cfg.resume_from_checkpoint.on);
    assert_null(cfg.resume_from_checkpoint.path);
    expect_text(&cfg, "resume_from_checkpoint", "true (newest in output_dir)");
    config_free(&cfg);
    parse_ok("resume_from_checkpoint: false\n", &cfg);
    assert_false(cfg.resume_from_checkpoint.on);
    assert_null(cfg.resume_from_checkpoint.path);
    expect_text(&cfg, "resume_from_checkpoint", "false");
    config_free(&cfg);
    parse_ok("resume_from_checkpoint: outputs/checkpoint-60\n", &cfg);
    assert_true(cfg.resume_from_checkpoint.on);
    assert_string_equal(cfg.resume_from_checkpoint.path, "outputs/checkpoint-60");
    config_free(&cfg);
    /* overwrite_output_dir starts over: it cannot go with a resume (issue 44) */
    parse_ok("resume_from_checkpoint: false\noverwrite_output_dir: true\n", &cfg);
    assert_true(cfg.overwrite_output_dir);
    config_free(&cfg);
    expect_error("resume_from_checkpoint: true\noverwrite_output_dir: true\n",
                 "config.yaml:2:23: overwrite_output_dir: true removes the checkpoints resume_from_checkpoint (true) "
                 "continues from; keep one: resume_from_checkpoint to continue, overwrite_output_dir to start over");
    expect_error("overwrite_output_dir: on\nresume_from_checkpoint: outputs/checkpoint-60\n",
                 "config.yaml:1:23: overwrite_output_dir: true removes the checkpoints resume_from_checkpoint "
                 "(outputs/checkpoint-60) continues from; keep one: resume_from_checkpoint to continue, "
                 "overwrite_output_dir to start over");
}

static void test_device_map(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("device_map: auto\n", &cfg);
    assert_string_equal(cfg.device_map, "auto");
    config_free(&cfg);
    parse_ok("device_map: {\"\": 0}\n", &cfg);
    assert_string_equal(cfg.device_map, "{\"\": 0}");
    expect_text(&cfg, "device_map", "{\"\": 0}");
    config_free(&cfg);
    parse_ok("device_map:\n  \"\": cuda:1\n", &cfg);
    assert_string_equal(cfg.device_map, "{\"\": cuda:1}");
    config_free(&cfg);
}

static void test_dataset_forms(void **state)
{
    (void)state;
    pt_config cfg;
    /* a list of mappings, every dataset key */
    parse_ok("seed: 7\n"
             "dataset:\n"
             "  - name: yahma/alpaca-cleaned\n"
             "    split_type: validation\n"
             "    data_files: [a.jsonl]\n"
             "    format: jsonl\n"
             "    rename: {instruction: prompt, output: answer}\n"
             "    filter_data: true\n"
             "    filter_column_value: lang\n"
             "    filter_value: en\n"
             "    num_samples: 100\n"
             "    shuffle: true\n"
             "    seed: 11\n",
             &cfg);
    assert_int_equal(cfg.n_datasets, 1);
    pt_dataset_config *d = &cfg.datasets[0];
    assert_string_equal(d->name, "yahma/alpaca-cleaned");
    assert_string_equal(d->split_type, "validation");
    assert_int_equal(d->format, DATASET_JSONL);
    assert_int_equal(d->rename.n, 2);
    assert_string_equal(d->rename.keys[1], "output");
    assert_string_equal(d->rename.values[1], "answer");
    assert_true(d->filter_data);
    assert_string_equal(d->filter_column_value, "lang");
    assert_string_equal(d->filter_value, "en");
    assert_int_equal(d->num_samples, 100);
    assert_true(d->shuffle);
    assert_int_equal(d->seed, 11);
    assert_int_equal(d->line, 3);
    assert_true(config_is_set(&cfg, "dataset"));
    config_free(&cfg);

    /* a single mapping */
    parse_ok("dataset:\n  name: data/train.jsonl\n", &cfg);
    assert_int_equal(cfg.n_datasets, 1);
    assert_string_equal(cfg.datasets[0].name, "data/train.jsonl");
    assert_string_equal(cfg.datasets[0].split_type, "train");
    assert_int_equal(cfg.datasets[0].format, DATASET_JSON);
    assert_int_equal(cfg.datasets[0].num_samples, -1);
    assert_false(cfg.datasets[0].shuffle);
    assert_int_equal(cfg.datasets[0].seed, 3407); /* the top-level seed */
    config_free(&cfg);

    /* a plain string, and a list of strings and mappings */
    parse_ok("dataset: yahma/alpaca-cleaned\n", &cfg);
    assert_int_equal(cfg.n_datasets, 1);
    assert_string_equal(cfg.datasets[0].name, "yahma/alpaca-cleaned");
    config_free(&cfg);
    parse_ok("dataset:\n  - a.jsonl\n  - name: b.jsonl\n    shuffle: yes\n  - {name: c, seed: 0}\n"
             "seed: 99\n",
             &cfg);
    assert_int_equal(cfg.n_datasets, 3);
    assert_string_equal(cfg.datasets[0].name, "a.jsonl");
    assert_string_equal(cfg.datasets[1].name, "b.jsonl");
    assert_string_equal(cfg.datasets[2].name, "c");
    assert_int_equal(cfg.datasets[0].seed, 99); /* seed given after dataset still counts */
    assert_int_equal(cfg.datasets[1].seed, 99);
    assert_true(cfg.datasets[1].shuffle);
    assert_int_equal(cfg.datasets[2].seed, 0);
    assert_int_equal(cfg.datasets[0].line, 2);
    assert_int_equal(cfg.datasets[2].line, 5);
    config_free(&cfg);
}

static void test_derived_defaults(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("save_steps: 30\n", &cfg);
    assert_int_equal(cfg.save_strategy, STRATEGY_STEPS);
    assert_false(config_is_set(&cfg, "save_strategy"));
    config_free(&cfg);
    parse_ok("save_steps: 30\nsave_strategy: epoch\n", &cfg);
    assert_int_equal(cfg.save_strategy, STRATEGY_EPOCH);
    config_free(&cfg);
    parse_ok("save_strategy: steps\n", &cfg);
    assert_int_equal(cfg.save_strategy, STRATEGY_STEPS);
    assert_int_equal(cfg.save_steps, 100);
    config_free(&cfg);
    parse_ok("per_device_train_batch_size: 6\n", &cfg);
    assert_int_equal(cfg.per_device_eval_batch_size, 6);
    expect_text(&cfg, "per_device_eval_batch_size", "6");
    config_free(&cfg);
    parse_ok("per_device_train_batch_size: 6\nper_device_eval_batch_size: 1\n", &cfg);
    assert_int_equal(cfg.per_device_eval_batch_size, 1);
    config_free(&cfg);
}

/* ---------------------------------------------------------------------------------------------
 * errors: every message, exactly, with file:line:col */

typedef struct {
    const char *yaml;
    const char *message;
} error_row;

static void run_error_rows(const error_row *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) expect_error(rows[i].yaml, rows[i].message);
}
#define RUN_ERRORS(rows) run_error_rows(rows, sizeof rows / sizeof rows[0])

static void test_error_document(void **state)
{
    (void)state;
    static const error_row rows[] = {
        {"model_name: [a\nlora_r: 8\n",
         "config.yaml:2:7: not valid YAML: did not find expected ',' or ']' while parsing a flow "
         "sequence started at line 1"},
        {"model_name: m\nchat_template: \"chatml\n",
         "config.yaml:3:1: not valid YAML: found unexpected end of stream while scanning a quoted "
         "scalar started at line 2"},
        {"a: 1\n b: 2\n", "config.yaml:2:3: not valid YAML: mapping values are not allowed in this context"},
        {"\tmodel_name: x\n",
         "config.yaml:1:1: not valid YAML: found character that cannot start any token while "
         "scanning for the next token (a tab: YAML indents with spaces)"},
        {"dataset:\n  - name: a\n\t  split: b\n",
         "config.yaml:3:1: not valid YAML: found a tab character that violates indentation while "
         "scanning a plain scalar started at line 2"},
        {"model_name: m\n@x: 1\n",
         "config.yaml:2:1: not valid YAML: found character that cannot start any token while "
         "scanning for the next token"},
        {"", "config.yaml: the file is empty; write at least \"model_name:\" and \"dataset:\" (see "
             "share/examples/)"},
        {"# nothing but a comment\n",
         "config.yaml: the file is empty; write at least \"model_name:\" and \"dataset:\" (see "
         "share/examples/)"},
        {"~\n", "config.yaml: the file is empty; write at least \"model_name:\" and \"dataset:\" (see "
                "share/examples/)"},
        {"- model_name: x\n- lora_r: 8\n",
         "config.yaml:1:1: expected a mapping of keys (model_name: ..., dataset: ...) at the top "
         "level, found a list"},
        {"model_name x\n",
         "config.yaml:1:1: expected a mapping of keys (model_name: ..., dataset: ...) at the top "
         "level, found a scalar"},
        {"? [a, b]\n: 1\n", "config.yaml:1:3: expected a key name, found a list"},
        {"{a: 1}: 2\n", "config.yaml:1:1: expected a key name, found a mapping"},
        {"model_name: \"a\\0b\"\n", "config.yaml:1:13: model_name: the value contains a NUL byte"},
        /* reader errors are placed too (libyaml gives a byte offset; columns count characters) */
        {"model_name: m\nchat_template: caf\xe9\n",
         "config.yaml:2:19: not valid YAML: incomplete UTF-8 octet sequence"},
        {"model_name: m\nchat_template: \xc3\xa9\x01\n",
         "config.yaml:2:17: not valid YAML: control characters are not allowed"},
    };
    RUN_ERRORS(rows);
    /* a NUL byte in memory: libyaml refuses the control character */
    pt_config cfg;
    assert_int_equal(config_parse(NAME, "a: 1\n\0b: 2\n", 11, &cfg, NULL), PT_ERR_USER);
    assert_string_equal(err_message(), "config.yaml:2:1: not valid YAML: control characters are not allowed");
    assert_null(cfg.path);
}

/* ---------------------------------------------------------------------------------------------
 * bounded parsing: nesting, size, aliases, one document; each refused at once, at its place */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Seconds config_parse takes on yaml (freed), whether it reads as a config or not. */
static double parse_seconds(char *yaml)
{
    pt_config cfg;
    double t0 = seconds_now();
    pt_status st = parse(yaml, &cfg);
    double took = seconds_now() - t0;
    if (st == PT_OK) config_free(&cfg);
    err_clear();
    free(yaml);
    return took;
}

/* How long this machine (and build: sanitizers are slower) takes to read a plain config of about
 * `bytes` bytes, most of them a comment: the yardstick of the bounds below, which only have to tell
 * "at once" from "quadratic", so they are many times it and hold on slow or busy machines. */
static double plain_seconds(size_t bytes)
{
    char *yaml = malloc(bytes + 64);
    assert_non_null(yaml);
    char *p = stpcpy(yaml, "model_name: x\n#");
    for (size_t i = 0; i < bytes; i++) *p++ = i % 80 == 79 ? '\n' : 'x';
    strcpy(p, "\n");
    for (size_t i = 16; yaml[i]; i++)
        if (yaml[i - 1] == '\n' && yaml[i] == 'x') yaml[i] = '#';
    return parse_seconds(yaml);
}

/* The same for a plain flow list of n one-letter items: as many tokens as n aliases, each of which
 * libyaml allocates for (what dominates under a sanitizer that records every allocation's stack). */
static double list_seconds(int n)
{
    char *yaml = malloc(16 + 3 * (size_t)n), *p = stpcpy(yaml, "x: [a");
    assert_non_null(yaml);
    for (int i = 1; i < n; i++) p = stpcpy(p, ", a");
    strcpy(p, "]\n");
    return parse_seconds(yaml);
}

/* head, then n times open, then mid, then n times close, then "\n" (the caller frees it). */
static char *nested(const char *head, int n, const char *open, const char *mid, const char *close)
{
    size_t len = strlen(head) + (size_t)n * (strlen(open) + strlen(close)) + strlen(mid) + 2;
    char *s = malloc(len);
    assert_non_null(s);
    strcpy(s, head);
    char *p = s + strlen(s);
    for (int i = 0; i < n; i++) p = stpcpy(p, open);
    p = stpcpy(p, mid);
    for (int i = 0; i < n; i++) p = stpcpy(p, close);
    strcpy(p, "\n");
    return s;
}

static const char depth_error[] = "nested deeper than 64 levels (mappings and lists inside one another), the most "
                                  "ptrain reads; no key needs more than 4: flatten it";

static void test_limit_depth(void **state)
{
    (void)state;
    /* 20000 levels, 100 KB: libyaml alone takes seconds (quadratic) without the limit */
    char *yaml = nested("model_name: x\ndataset: ", 20000, "{a: ", "1", "}");
    char want[512];
    snprintf(want, sizeof want, "config.yaml:2:262: %s", depth_error); /* the 64th "{" is level 65 */
    double t0 = seconds_now();
    expect_error(yaml, want);
    double took = seconds_now() - t0, bound = 25 * plain_seconds(strlen(yaml)) + 0.2;
    free(yaml);
    if (took > bound) fail_msg("refusing 20000 levels took %.2f s (bound %.2f s)", took, bound);

    /* lists count as much as mappings, block style as much as flow style */
    yaml = nested("x: ", 64, "[", "1", "]");
    snprintf(want, sizeof want, "config.yaml:1:67: %s", depth_error);
    expect_error(yaml, want);
    free(yaml);
    pt_config cfg;
    char *warnings;
    /* 64 levels (the top-level mapping and 63 lists) are read: an unknown key, ignored */
    yaml = nested("x: ", 63, "[", "1", "]");
    assert_int_equal(parse_warn(yaml, &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, "ptrain: warning: config.yaml:1:1: unknown key \"x\"; ignored\n");
    free(warnings);
    config_free(&cfg);
    free(yaml);
    yaml = nested("", 65, "- ", "1", "");
    snprintf(want, sizeof want, "config.yaml:1:129: %s", depth_error);
    expect_error(yaml, want);
    free(yaml);
}

static void test_limit_size(void **state)
{
    (void)state;
    size_t cap = 256 << 10;
    char *text = malloc(cap + 2);
    assert_non_null(text);
    /* "model_name: m", then one comment line up to 256 KiB: read */
    memset(text, 'x', cap + 1);
    memcpy(text, "model_name: m\n# ", 16);
    text[cap - 1] = '\n';
    pt_config cfg;
    assert_int_equal(config_parse(NAME, text, cap, &cfg, NULL), PT_OK);
    assert_string_equal(cfg.model_name, "m");
    config_free(&cfg);
    /* one byte more: refused where the limit is crossed (line 3, its first character) */
    text[cap] = 'x';
    assert_int_equal(config_parse(NAME, text, cap + 1, &cfg, NULL), PT_ERR_USER);
    assert_string_equal(err_message(), "config.yaml:3:1: the file goes on past 256 KiB (262144 bytes), the most "
                                       "ptrain reads of a config file; is this really a config file?");
    assert_null(cfg.path);
    /* columns count characters, as every other position */
    memcpy(text, "model_name: \xc3\xa9\xc3\xa9\n", 17);
    text[cap - 1] = 'x';
    assert_int_equal(config_parse(NAME, text, cap + 1, &cfg, NULL), PT_ERR_USER);
    char want[512];
    snprintf(want, sizeof want, "config.yaml:2:%zu: the file goes on past 256 KiB (262144 bytes), the most ptrain "
             "reads of a config file; is this really a config file?", cap - 17 + 1);
    assert_string_equal(err_message(), want);
    free(text);
}

static void test_limit_aliases(void **state)
{
    (void)state;
    /* a few aliases are fine */
    pt_config cfg;
    parse_ok("d: &d {name: a, shuffle: true}\nq: &q q_proj\ndataset: [*d, *d]\nlora_target_modules: [*q, v_proj]\n",
             &cfg);
    assert_int_equal(cfg.n_datasets, 2);
    assert_true(cfg.datasets[1].shuffle);
    assert_string_equal(cfg.lora_target_modules.items[0], "q_proj");
    config_free(&cfg);
    /* 60000 entries of one mapping: 120000 values read again, refused at the mapping at once */
    char *yaml = malloc(64 + 40 * 16 + 60000 * 4), *p = stpcpy(yaml, "dataset: [&d {name: a}");
    assert_non_null(yaml);
    for (int i = 1; i < 60000; i++) p = stpcpy(p, ", *d");
    strcpy(p, "]\n");
    expect_error(yaml, "config.yaml:1:11: aliases repeat more than 10000 values in all, the most ptrain reads; write "
                       "the values out instead");
    /* each one a mapping of 21 keys (20 unknown: warnings): 1.2 million values to read; refused in one of them */
    p = stpcpy(yaml, "d: &d {name: a");
    for (int i = 0; i < 20; i++) p += sprintf(p, ", k%d: 1", i);
    p = stpcpy(p, "}\ndataset: [*d");
    for (int i = 1; i < 60000; i++) p = stpcpy(p, ", *d");
    strcpy(p, "]\n");
    double t0 = seconds_now();
    assert_int_equal(parse(yaml, &cfg), PT_ERR_USER);
    double took = seconds_now() - t0;
    if (!strstr(err_message(), ": aliases repeat more than 10000 values in all") || strchr(err_message(), '\n'))
        fail_msg("%s", err_message());
    double bound = 25 * (plain_seconds(strlen(yaml)) + list_seconds(60000)) + 0.2;
    free(yaml);
    if (took > bound) fail_msg("refusing 60000 repeated entries took %.2f s (bound %.2f s)", took, bound);
}

static void test_one_document(void **state)
{
    (void)state;
    static const char second[] = "a second YAML document starts here; a config file is one document: remove the "
                                 "\"---\" or \"...\" line that separates them (the two become one) or delete the second";
    char want[512];
    snprintf(want, sizeof want, "config.yaml:3:1: %s", second);
    expect_error("model_name: m\nlora_r: 8\n---\nlora_r: 16\n", want);
    expect_error("model_name: m\nlora_r: 8\n---\n", want);
    expect_error("---\nmodel_name: m\n---\nlora_r: 16\n", want);
    /* after an end marker, more text without "---" is no document: libyaml says so */
    expect_error("model_name: m\n...\nlora_r: 16\n", "config.yaml:3:1: not valid YAML: did not find expected <document start>");
    /* one leading "---", a directive, or an end marker alone are one document */
    pt_config cfg;
    parse_ok("---\nmodel_name: m\nlora_r: 8\n", &cfg);
    assert_int_equal(cfg.lora_r, 8);
    config_free(&cfg);
    parse_ok("%YAML 1.1\n---\nmodel_name: m\n...\n# the end\n", &cfg);
    assert_string_equal(cfg.model_name, "m");
    config_free(&cfg);
}

/* report_to as its users write it, what ptrain says about services it does not send to, and the
 * rules of run_name and logging_dir (issue 28). */
static void test_report_to(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("report_to: tensorboard\n", &cfg);
    assert_true(config_report_tensorboard(&cfg));
    config_free(&cfg);
    parse_ok("report_to: [all]\n", &cfg);
    assert_true(config_report_tensorboard(&cfg));
    config_free(&cfg);
    parse_ok("report_to: []\n", &cfg);
    assert_false(config_report_tensorboard(&cfg));
    expect_text(&cfg, "report_to", "(none)");
    config_free(&cfg);
    parse_ok("{}\n", &cfg);
    assert_false(config_report_tensorboard(&cfg));
    config_free(&cfg);
    char *warnings;
    assert_int_equal(parse_warn("output_dir: out\nreport_to: [wandb, mlflow]\n", &cfg, &warnings), PT_OK);
    assert_string_equal(warnings,
                        "ptrain: warning: config.yaml:2:12: report_to: ptrain cannot send metrics to Weights & Biases, "
                        "MLflow from a compute node (it has no client for them, and compute nodes often have no "
                        "network); it writes out/metrics.jsonl and out/training.png; add tensorboard to report_to for "
                        "TensorBoard event files too\n");
    free(warnings);
    config_free(&cfg);
    assert_int_equal(parse_warn("report_to: [tensorboard]\nrun_name: x\n", &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, ""); /* tensorboard alone: nothing to say */
    free(warnings);
    config_free(&cfg);
    expect_error("report_to: [none, tensorboard]\n",
                 "config.yaml:1:12: report_to: \"none\" among other entries; write none alone, or the list without it");
    expect_error("report_to: tensorbord\n",
                 "config.yaml:1:12: report_to: expected items from none, all, tensorboard, wandb, mlflow, comet_ml, "
                 "azure_ml, clearml, codecarbon, dagshub, dvclive, flyte, neptune, swanlab, trackio, found "
                 "\"tensorbord\" (did you mean \"tensorboard\"?)");
    expect_error("run_name: a/b\n", "config.yaml:1:11: run_name: \"a/b\" cannot name a directory under output_dir/runs/: it "
                                    "has a '/'; use a name such as \"lora-r16\", or set logging_dir");
    expect_error("run_name: \"..\"\n", "config.yaml:1:11: run_name: \"..\" cannot name a directory under output_dir/runs/: "
                                       "it is . or ..; use a name such as \"lora-r16\", or set logging_dir");
    expect_error("logging_dir: \"\"\n",
                 "config.yaml:1:14: logging_dir: expected a directory, found \"\"; remove the key for output_dir/runs/RUN_NAME");
}

static void test_error_types(void **state)
{
    (void)state;
    static const error_row rows[] = {
        /* K_INT */
        {"lora_r: abc\n", "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found \"abc\""},
        {"lora_r: 1.5\n", "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found \"1.5\""},
        {"lora_r: [8]\n", "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found a list"},
        {"seed: 99999999999999999999\n",
         "config.yaml:1:7: seed: expected a non-negative integer (at most 9223372036854775807), found \"99999999999999999999\""},
        {"logging_steps: ten\n",
         "config.yaml:1:16: logging_steps: expected a positive integer (at most 9223372036854775807), found \"ten\""},
        {"threads: many\n",
         "config.yaml:1:10: threads: expected an integer from 0 to 4096 or auto, found \"many\""},
        /* K_FLOAT */
        {"learning_rate: fast\n", "config.yaml:1:16: learning_rate: expected a positive number (at most 1e+18), found \"fast\""},
        {"learning_rate: {a: 1}\n",
         "config.yaml:1:16: learning_rate: expected a positive number (at most 1e+18), found a mapping"},
        {"weight_decay: .nan\n",
         "config.yaml:1:15: weight_decay: expected a non-negative number (at most 1e+18), found \".nan\""},
        {"lora_alpha: inf\n", "config.yaml:1:13: lora_alpha: expected a positive number (at most 1e+18), found \"inf\""},
        /* K_BOOL */
        {"packing: maybe\n", "config.yaml:1:10: packing: expected true or false, found \"maybe\""},
        {"packing: [true]\n", "config.yaml:1:10: packing: expected true or false, found a list"},
        {"use_gradient_checkpointing: sometimes\n",
         "config.yaml:1:29: use_gradient_checkpointing: expected true or false (or \"unsloth\"), "
         "found \"sometimes\""},
        /* K_ENUM, with and without a suggestion */
        {"optim: adamw_8bt\n",
         "config.yaml:1:8: optim: expected one of adamw_8bit, adamw_bnb_8bit, paged_adamw_8bit, "
         "adamw_torch, adamw_torch_fused, adamw, paged_adamw_32bit, found \"adamw_8bt\" (did you "
         "mean \"adamw_8bit\"?)"},
        {"lr_scheduler_type: inverse_sqrt\n",
         "config.yaml:1:20: lr_scheduler_type: expected one of linear, cosine, constant, "
         "constant_with_warmup, cosine_with_restarts, polynomial, cosine_with_min_lr, found \"inverse_sqrt\""},
        {"dtype: [bfloat16]\n",
         "config.yaml:1:8: dtype: expected one of auto, float16, bfloat16, float32, found a list"},
        {"save_strategy: step\n",
         "config.yaml:1:16: save_strategy: expected one of no, steps, epoch, found \"step\" (did you "
         "mean \"steps\"?)"},
        /* metric_for_best_model: resolved once to its metric, the eval_ prefix optional, the value
         * shown as written and the suggestion made with the prefix */
        {"metric_for_best_model: accuracy\n",
         "config.yaml:1:24: metric_for_best_model: expected one of eval_loss, eval_perplexity (the metrics "
         "ptrain evaluates; a name without eval_ gets it), found \"accuracy\""},
        {"metric_for_best_model: eval_perplexty\n",
         "config.yaml:1:24: metric_for_best_model: expected one of eval_loss, eval_perplexity (the metrics "
         "ptrain evaluates; a name without eval_ gets it), found \"eval_perplexty\" (did you mean "
         "\"eval_perplexity\"?)"},
        {"metric_for_best_model: los\n",
         "config.yaml:1:24: metric_for_best_model: expected one of eval_loss, eval_perplexity (the metrics "
         "ptrain evaluates; a name without eval_ gets it), found \"los\" (did you mean \"eval_loss\"?)"},
        /* K_STR */
        {"model_name: [a, b]\n", "config.yaml:1:13: model_name: expected a string, found a list"},
        /* K_STRLIST: scalar, items, item kinds */
        {"lora_target_modules: q_prj\n",
         "config.yaml:1:22: lora_target_modules: expected items from q_proj, k_proj, v_proj, o_proj, "
         "gate_proj, up_proj, down_proj, qkv_proj, gate_up_proj, input_linear, output_linear, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, embed_tokens, lm_head, w1, w3, w2, gate, found \"q_prj\" (did you mean "
         "\"q_proj\"?)"},
        {"lora_target_modules: [q_proj, score]\n",
         "config.yaml:1:31: lora_target_modules: expected items from q_proj, k_proj, v_proj, "
         "o_proj, gate_proj, up_proj, down_proj, qkv_proj, gate_up_proj, input_linear, output_linear, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, embed_tokens, lm_head, w1, w3, w2, gate, found \"score\""},
        {"lora_target_modules: [[q_proj]]\n",
         "config.yaml:1:23: lora_target_modules: item 1 is a list; write one name per item"},
        {"lora_target_modules:\n  - q_proj\n  - v_proj\n  -  - q_proj\n     - k_proj\n",
         "config.yaml:4:6: lora_target_modules: item 3 is a list; write one name per item"},
        {"quantization_method: [q8_0, {q4_k_m: 1}]\n",
         "config.yaml:1:29: quantization_method: item 2 is a mapping; write one name per item"},
        {"dataset:\n  - name: a\n    data_files: [a.json, [b.json]]\n",
         "config.yaml:3:26: dataset[0].data_files: item 2 is a list; write one name per item"},
        {"quantization_method: {q8_0: 1}\n",
         "config.yaml:1:22: quantization_method: expected a list of not_quantized, fast_quantized, "
         "quantized, f32, f16, bf16, q8_0, q4_k_m, q5_k_m, q2_k, q3_k_l, q3_k_m, q3_k_s, q4_0, "
         "q4_1, q4_k_s, q4_k, q5_k, q5_0, q5_1, q5_k_s, q6_k, found a mapping"},
        {"quantization_method: [q4_k_m, q8]\n",
         "config.yaml:1:31: quantization_method: expected items from not_quantized, fast_quantized, "
         "quantized, f32, f16, bf16, q8_0, q4_k_m, q5_k_m, q2_k, q3_k_l, q3_k_m, q3_k_s, q4_0, "
         "q4_1, q4_k_s, q4_k, q5_k, q5_0, q5_1, q5_k_s, q6_k, found \"q8\""},
        /* K_STRMAP */
        {"model_parameters: temperature=0.7\n",
         "config.yaml:1:19: model_parameters: \"temperature=0.7\" is not an Ollama tag: use letters, digits, "
         "'_', '-' and '.' (at most 128), e.g. \"8b\""},
        {"model_parameters: -8b\n",
         "config.yaml:1:19: model_parameters: \"-8b\" is not an Ollama tag: use letters, digits, "
         "'_', '-' and '.' (at most 128), e.g. \"8b\""},
        {"model_parameters: [a, b]\n",
         "config.yaml:1:19: model_parameters: expected a mapping of names to values or a size tag such as "
         "\"8b\", found a list"},
        {"dataset:\n  - name: a\n    rename: x\n",
         "config.yaml:3:13: dataset[0].rename: expected a mapping of names to values, found a scalar"},
        {"model_parameters:\n  stop: [a, b]\n",
         "config.yaml:2:9: model_parameters: expected a plain value for \"stop\", found a list"},
        {"model_parameters:\n  ? [a]\n  : 1\n",
         "config.yaml:2:5: model_parameters: expected a name, found a list"},
        {"model_parameters:\n  stop: \"a\\0b\"\n",
         "config.yaml:2:9: model_parameters: the value contains a NUL byte"},
        /* K_TRI */
        {"assistant_only_loss: maybe\n",
         "config.yaml:1:22: assistant_only_loss: expected auto, true or false, found \"maybe\""},
        {"train_on_responses_only: [auto]\n",
         "config.yaml:1:26: train_on_responses_only: expected auto, true or false, found a list"},
        /* K_RESUME */
        {"resume_from_checkpoint: [a]\n",
         "config.yaml:1:25: resume_from_checkpoint: expected true, false or a checkpoint path, "
         "found a list"},
        {"resume_from_checkpoint: \"\"\n",
         "config.yaml:1:25: resume_from_checkpoint: expected true, false or a checkpoint path, "
         "found \"\""},
        /* K_DEVMAP forms */
        {"device_map: [0]\n",
         "config.yaml:1:13: device_map: expected a device map such as {\"\": 0}, found a list"},
        {"device_map: {\"\": 0, \"lm_head\": 1}\n",
         "config.yaml:1:13: device_map: expected one entry {\"\": DEVICE}, found 2 entries"},
        {"device_map: {}\n", "config.yaml:1:13: device_map: expected one entry {\"\": DEVICE}, found 0 entries"},
        {"device_map: {model: 0}\n",
         "config.yaml:1:13: device_map: expected the whole model on one device, {\"\": DEVICE}"},
        {"device_map: {\"\": [0, 1]}\n",
         "config.yaml:1:13: device_map: expected the whole model on one device, {\"\": DEVICE}"},
        /* the secret is never a type error, but model_name "" is */
        {"model_name: \"\"\n", "config.yaml:1:13: model_name: expected a model id or path, found \"\""},
    };
    RUN_ERRORS(rows);
}

/* A message is one line: what it echoes from the file has its control characters escaped, and
 * a long value is cut. */
static void test_error_echo(void **state)
{
    (void)state;
    static const error_row rows[] = {
        {"lora_r: |\n  16\n  17\n",
         "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found \"16\\n17\\n\""},
        {"optim: \"a\\tb\\x01\\r\"\n",
         "config.yaml:1:8: optim: expected one of adamw_8bit, adamw_bnb_8bit, paged_adamw_8bit, "
         "adamw_torch, adamw_torch_fused, adamw, paged_adamw_32bit, found \"a\\tb\\x01\\r\""},
        {"lora_target_modules: [\"q_proj\\n\"]\n",
         "config.yaml:1:23: lora_target_modules: expected items from q_proj, k_proj, v_proj, o_proj, "
         "gate_proj, up_proj, down_proj, qkv_proj, gate_up_proj, input_linear, output_linear, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, embed_tokens, lm_head, w1, w3, w2, gate, found \"q_proj\\n\" (did you "
         "mean \"q_proj\"?)"},
        {"model_parameters:\n  \"a\\nb\": [1]\n",
         "config.yaml:2:11: model_parameters: expected a plain value for \"a\\nb\", found a list"},
        {"lora_r: 8\n\"lora\\nr\": 1\nlora_alpha: x\n",
         "config.yaml:3:13: lora_alpha: expected a positive number (at most 1e+18), found \"x\""},
    };
    RUN_ERRORS(rows);

    /* long values keep their start and end, and say their length (issue 29) */
    char yaml[400], want[600];
    char long_value[201];
    memset(long_value, 'x', 200);
    long_value[200] = '\0';
    snprintf(yaml, sizeof yaml, "seed: %s\n", long_value);
    snprintf(want, sizeof want, "config.yaml:1:7: seed: expected a non-negative integer (at most 9223372036854775807), "
             "found \"%.68s…(200 bytes)…%.68s\"", long_value, long_value);
    expect_error(yaml, want);

    /* escapes count toward the length, and are never split: 17 of 50 control characters each side */
    strcpy(yaml, "seed: \"");
    for (int i = 0; i < 50; i++) strcat(yaml, "\\x01");
    strcat(yaml, "\"\n");
    snprintf(want, sizeof want, "config.yaml:1:7: seed: expected a non-negative integer (at most 9223372036854775807), found \"");
    for (int i = 0; i < 17; i++) strcat(want, "\\x01");
    strcat(want, "…(50 bytes)…");
    for (int i = 0; i < 17; i++) strcat(want, "\\x01");
    strcat(want, "\"");
    expect_error(yaml, want);

    /* a value of 200 KB (near the most a config file holds): the reason around it is whole */
    size_t big = 200u << 10;
    char *huge = malloc(big + 64);
    assert_non_null(huge);
    char *p = stpcpy(huge, "optim: /very/long/path/");
    memset(p, 'd', big);
    strcpy(p + big, "/adamw\n");
    pt_config cfg;
    assert_int_equal(parse(huge, &cfg), PT_ERR_USER);
    free(huge);
    if (!strstr(err_message(), "config.yaml:1:8: optim: expected one of adamw_8bit, ") ||
        !strstr(err_message(), ", found \"/very/long/path/dddd") || !strstr(err_message(), "…(204822 bytes)…") ||
        strlen(err_message()) > 600)
        fail_msg("%s", err_message());

    /* and so are the names of unknown keys in warnings */
    char *warnings;
    assert_int_equal(parse_warn("\"lora\\nr\": 1\n", &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, "ptrain: warning: config.yaml:1:1: unknown key \"lora\\nr\" (did you "
                                  "mean \"lora_r\"?); ignored\n");
    free(warnings);
    config_free(&cfg);
}

static void test_error_ranges(void **state)
{
    (void)state;
    static const error_row rows[] = {
        {"lora_dropout: 1\n", "config.yaml:1:15: lora_dropout: expected a number in [0, 1), found \"1\""},
        {"lora_dropout: -0.1\n", "config.yaml:1:15: lora_dropout: expected a number in [0, 1), found \"-0.1\""},
        {"adam_beta1: 1.0\n", "config.yaml:1:13: adam_beta1: expected a number in [0, 1), found \"1.0\""},
        {"adam_beta2: 1\n", "config.yaml:1:13: adam_beta2: expected a number in [0, 1), found \"1\""},
        {"adam_epsilon: 0\n", "config.yaml:1:15: adam_epsilon: expected a number in (0, 1], found \"0\""},
        {"val_split_ratio: 0\n",
         "config.yaml:1:18: val_split_ratio: expected a number in (0, 1), found \"0\""},
        {"val_split_ratio: 1\n",
         "config.yaml:1:18: val_split_ratio: expected a number in (0, 1), found \"1\""},
        {"warmup_ratio: 1.5\n", "config.yaml:1:15: warmup_ratio: expected a number in [0, 1], found \"1.5\""},
        {"learning_rate: 0\n", "config.yaml:1:16: learning_rate: expected a positive number (at most 1e+18), found \"0\""},
        {"learning_rate: -2e-4\n",
         "config.yaml:1:16: learning_rate: expected a positive number (at most 1e+18), found \"-2e-4\""},
        {"num_train_epochs: 0\n",
         "config.yaml:1:19: num_train_epochs: expected a positive number (at most 1e+18), found \"0\""},
        {"weight_decay: -1\n", "config.yaml:1:15: weight_decay: expected a non-negative number (at most 1e+18), found \"-1\""},
        {"max_steps: 0\n", "config.yaml:1:12: max_steps: expected a positive integer (at most 9223372036854775807), found \"0\""},
        {"max_steps: -2\n", "config.yaml:1:12: max_steps: expected a positive integer (at most 9223372036854775807), found \"-2\""},
        {"max_steps: 99999999999999999999\n",
         "config.yaml:1:12: max_steps: expected a positive integer (at most 9223372036854775807), found "
         "\"99999999999999999999\""},
        {"learning_rate: 2e18\n", "config.yaml:1:16: learning_rate: expected a positive number (at most 1e+18), found \"2e18\""},
        {"hub_upload_timeout: 1e19\n",
         "config.yaml:1:21: hub_upload_timeout: expected a non-negative number (at most 1e+18), found \"1e19\""},
        {"eval_steps: 1e19\n", "config.yaml:1:13: eval_steps: expected a positive integer (at most 1e+18) or a fraction "
                               "below 1 of the total steps, found \"1e19\""},
        {"lora_r: 0\n", "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found \"0\""},
        {"lora_r: 4097\n", "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found \"4097\""},
        {"max_seq_length: 16777217\n",
         "config.yaml:1:17: max_seq_length: expected an integer from 1 to 16777216, found \"16777217\""},
        {"per_device_train_batch_size: 0\n",
         "config.yaml:1:30: per_device_train_batch_size: expected an integer from 1 to 1048576, "
         "found \"0\""},
        {"threads: -1\n", "config.yaml:1:10: threads: expected an integer from 0 to 4096 or auto, found \"-1\""},
        {"seed: -1\n", "config.yaml:1:7: seed: expected a non-negative integer (at most 9223372036854775807), found \"-1\""},
        {"save_total_limit: 0\n",
         "config.yaml:1:19: save_total_limit: expected a positive integer (at most 9223372036854775807), found \"0\""},
        {"early_stopping_patience: 0\n",
         "config.yaml:1:26: early_stopping_patience: expected a positive integer (at most 9223372036854775807), found \"0\""},
        {"dataset:\n  - name: a\n    num_samples: 0\n",
         "config.yaml:3:18: dataset[0].num_samples: expected a positive integer (at most 9223372036854775807), found \"0\""},
    };
    RUN_ERRORS(rows);
    /* the edges that are in range */
    pt_config cfg;
    parse_ok("lora_dropout: 0.999\nadam_beta1: 0\nadam_epsilon: 1\nwarmup_ratio: 0\nmax_steps: 1\n"
             "lora_r: 4096\nthreads: 4096\nweight_decay: 0\nmax_grad_norm: 0\n"
             "dataset:\n  - name: a\n    num_samples: -1\n",
             &cfg);
    assert_int_equal(cfg.lora_r, 4096);
    assert_int_equal(cfg.datasets[0].num_samples, -1);
    config_free(&cfg);
}

static void test_error_duplicates(void **state)
{
    (void)state;
    static const error_row rows[] = {
        {"lora_r: 8\nlora_alpha: 16\nlora_r: 16\n", "config.yaml:3:1: lora_r: given twice (first at line 1)"},
        {"model_name: a\nmodel: b\n",
         "config.yaml:2:1: model: given twice (first at line 1 as \"model_name\"; model is an alias "
         "of model_name)"},
        {"model: a\nmodel_name: b\n",
         "config.yaml:2:1: model_name: given twice (first at line 1 as \"model\"; model is an alias "
         "of model_name)"},
        {"assistant_only_loss: true\ntrain_on_responses_only: true\n",
         "config.yaml:2:1: train_on_responses_only: given twice (first at line 1 as "
         "\"assistant_only_loss\"; train_on_responses_only is an alias of assistant_only_loss)"},
        /* a null value still counts as given */
        {"lora_r:\nlora_r: 8\n", "config.yaml:2:1: lora_r: given twice (first at line 1)"},
        {"dataset: a\ndataset: b\n", "config.yaml:2:1: dataset: given twice (first at line 1)"},
        {"dataset:\n  - name: a\n    split: x\n    split_type: y\n",
         "config.yaml:4:5: dataset[0].split_type: given twice (first at line 3 as \"split\"; split is "
         "an alias of split_type)"},
    };
    RUN_ERRORS(rows);
}

static void test_error_datasets(void **state)
{
    (void)state;
    static const error_row rows[] = {
        {"dataset: []\n", "config.yaml:1:10: dataset: expected at least one dataset, found an empty list"},
        {"dataset:\nlora_r: 8\n",
         "config.yaml:1:9: dataset: expected a list of datasets, each a mapping with a name, found "
         "nothing"},
        {"dataset:\n  - [a.jsonl]\n",
         "config.yaml:2:5: dataset[0]: expected a mapping with a name (e.g. - name: "
         "\"yahma/alpaca-cleaned\"), found a list"},
        {"dataset:\n  - a\n  - ~\n",
         "config.yaml:3:5: dataset[1]: expected a mapping with a name (e.g. - name: "
         "\"yahma/alpaca-cleaned\"), found nothing"},
        {"dataset:\n  - split: train\n",
         "config.yaml:2:5: dataset[0]: name is required (an HF dataset id or a local file)"},
        {"dataset:\n  - name:\n", "config.yaml:2:5: dataset[0]: name is required (an HF dataset id or a local file)"},
        {"dataset:\n  - name: \"\"\n",
         "config.yaml:2:5: dataset[0]: name is required (an HF dataset id or a local file)"},
        {"dataset: \"\"\n", "config.yaml:1:10: dataset[0]: name is required (an HF dataset id or a local file)"},
        {"dataset:\n  - name: a\n    ? [b]\n    : c\n",
         "config.yaml:3:7: dataset[0]: expected a key name, found a list"},
        {"dataset:\n  - name: a\n    shuffle: sometimes\n",
         "config.yaml:3:14: dataset[0].shuffle: expected true or false, found \"sometimes\""},
        {"dataset:\n  - name: a\n    format: xml\n",
         "config.yaml:3:13: dataset[0].format: expected one of json, jsonl, parquet, csv, found \"xml\""},
        {"dataset:\n  - name: a\n    rename: prompt\n",
         "config.yaml:3:13: dataset[0].rename: expected a mapping of names to values, found a scalar"},
        {"dataset:\n  - name: a\n    data_files: {a: b}\n",
         "config.yaml:3:17: dataset[0].data_files: expected a string or a list of strings, found a "
         "mapping"},
        {"dataset:\n  - name: a\n    seed: -5\n",
         "config.yaml:3:11: dataset[0].seed: expected a non-negative integer (at most 9223372036854775807), found \"-5\""},
        /* rules of one entry: at the value that breaks them */
        {"dataset:\n  - name: a\n    filter_data: true\n    filter_value: en\n",
         "config.yaml:3:18: dataset[0].filter_data: needs filter_column_value and filter_value"},
        {"dataset:\n  - name: a\n    filter_data: yes\n    filter_column_value: lang\n",
         "config.yaml:3:18: dataset[0].filter_data: needs filter_column_value and filter_value"},
    };
    RUN_ERRORS(rows);
}

static void test_rule_full_finetuning(void **state)
{
    (void)state;
    expect_error("model_name: x\nfull_finetuning: true\n",
                 "config.yaml:2:18: full_finetuning: ptrain trains LoRA adapters on a frozen 4-bit "
                 "base; remove the key or set it false");
}

static void test_rule_load_in_8bit(void **state)
{
    (void)state;
    expect_error("load_in_8bit: true\n",
                 "config.yaml:1:15: load_in_8bit: load_in_4bit and load_in_8bit are both true; keep "
                 "one (ptrain's base is 4-bit: drop load_in_8bit)");
    expect_error("load_in_4bit: yes\nload_in_8bit: on\n",
                 "config.yaml:2:15: load_in_8bit: load_in_4bit and load_in_8bit are both true; keep "
                 "one (ptrain's base is 4-bit: drop load_in_8bit)");
    expect_error("load_in_4bit: false\nload_in_8bit: true\n",
                 "config.yaml:2:15: load_in_8bit: ptrain has no 8-bit base; use load_in_4bit: true "
                 "(NF4) or load_in_4bit: false (weights as stored)");
}

static void test_rule_lora(void **state)
{
    (void)state;
    expect_error("lora_bias: all\n", "config.yaml:1:12: lora_bias: ptrain trains no bias terms (the "
                                     "base is frozen in 4-bit); use none");
    expect_error("lora_bias: lora_only\n", "config.yaml:1:12: lora_bias: ptrain trains no bias terms "
                                           "(the base is frozen in 4-bit); use none");
    expect_error("lora_target_modules: []\n", "config.yaml:1:22: lora_target_modules: expected at "
                                              "least one projection, found an empty list");
}

static void test_rule_eval(void **state)
{
    (void)state;
    static const error_row rows[] = {
        {"load_best_model_at_end: true\n",
         "config.yaml:1:25: load_best_model_at_end: needs an eval set to pick the best checkpoint; "
         "set val_split_ratio (e.g. 0.05)"},
        {"val_split_ratio: 0.1\nsave_steps: 50\nload_best_model_at_end: true\n",
         "config.yaml:3:25: load_best_model_at_end: needs save_strategy (steps) to equal "
         "eval_strategy (epoch)"},
        {"val_split_ratio: 0.1\nsave_steps: 50\neval_strategy: steps\neval_steps: 20\n"
         "load_best_model_at_end: true\n",
         "config.yaml:5:25: load_best_model_at_end: needs save_steps (50) to be a multiple of "
         "eval_steps (20)"},
        {"val_split_ratio: 0.1\neval_strategy: no\nload_best_model_at_end: true\n",
         "config.yaml:3:25: load_best_model_at_end: needs checkpoints to pick from, but "
         "save_strategy and eval_strategy are no; set both to steps or epoch"},
        {"early_stopping_patience: 3\n",
         "config.yaml:1:26: early_stopping_patience: needs an eval set to watch; set val_split_ratio "
         "(e.g. 0.05)"},
        {"eval_strategy: steps\n",
         "config.yaml:1:16: eval_strategy: there is no eval set to evaluate; set val_split_ratio "
         "(e.g. 0.05) or use no"},
        {"eval_strategy: epoch\n",
         "config.yaml:1:16: eval_strategy: there is no eval set to evaluate; set val_split_ratio "
         "(e.g. 0.05) or use no"},
    };
    RUN_ERRORS(rows);
    /* the accepted combinations */
    pt_config cfg;
    parse_ok("val_split_ratio: 0.1\nsave_steps: 60\neval_strategy: steps\neval_steps: 20\n"
             "load_best_model_at_end: true\nearly_stopping_patience: 2\n",
             &cfg);
    assert_true(cfg.load_best_model_at_end);
    assert_int_equal(cfg.early_stopping_patience, 2);
    config_free(&cfg);
    parse_ok("eval_strategy: no\n", &cfg);
    assert_int_equal(cfg.metric_for_best_model, METRIC_EVAL_LOSS); /* the default */
    config_free(&cfg);
    static const struct {
        const char *yaml;
        pt_metric metric;
    } metrics[] = {{"metric_for_best_model: loss\n", METRIC_EVAL_LOSS},
                   {"metric_for_best_model: eval_loss\n", METRIC_EVAL_LOSS},
                   {"metric_for_best_model: perplexity\n", METRIC_EVAL_PERPLEXITY},
                   {"metric_for_best_model: eval_perplexity\n", METRIC_EVAL_PERPLEXITY},
                   {"metric_for_best_model: EVAL_LOSS\n", METRIC_EVAL_LOSS}}; /* any case, as every choice */
    for (size_t i = 0; i < sizeof metrics / sizeof metrics[0]; i++) {
        parse_ok(metrics[i].yaml, &cfg);
        assert_int_equal(cfg.metric_for_best_model, metrics[i].metric);
        config_free(&cfg);
    }
}

static void test_rule_publishing(void **state)
{
    (void)state;
    static const error_row rows[] = {
        {"push_to_hub: true\n", "config.yaml:1:14: push_to_hub: needs hub_model_id (e.g. "
                                "\"yourname/model-lora\")"},
        {"push_to_hub: true\nhub_model_id: \"\"\n",
         "config.yaml:1:14: push_to_hub: needs hub_model_id (e.g. \"yourname/model-lora\")"},
        {"huggingface_save: true\n",
         "config.yaml:1:19: huggingface_save: needs hf_model_name (e.g. \"yourname/model\")"},
        {"ollama_save: true\n",
         "config.yaml:1:14: ollama_save: needs ollama_model (a name for the Ollama model)"},
        /* repository ids as huggingface_hub's validate_repo_id takes them, plus a namespace */
        {"hub_model_id: lora\n",
         "config.yaml:1:15: hub_model_id: \"lora\" is not a Hub repository id: it has no namespace (the user or "
         "organization it belongs to); write NAMESPACE/NAME with your user or organization name, e.g. "
         "\"yourname/model-lora\""},
        {"hub_model_id: me/a/b\n", "config.yaml:1:15: hub_model_id: \"me/a/b\" is not a Hub repository id: it has more "
                                  "than one '/'; write NAMESPACE/NAME with your user or organization name, e.g. "
                                  "\"yourname/model-lora\""},
        {"hub_model_id: me/-lora\n",
         "config.yaml:1:15: hub_model_id: \"me/-lora\" is not a Hub repository id: each part must be 1 to 96 letters, "
         "digits, '-', '_' or '.', and not start or end with '-' or '.'; write NAMESPACE/NAME with your user or "
         "organization name, e.g. \"yourname/model-lora\""},
        {"hf_model_name: me/bad--name\n",
         "config.yaml:1:16: hf_model_name: \"me/bad--name\" is not a Hub repository id: it contains \"--\" or \"..\"; "
         "write NAMESPACE/NAME with your user or organization name, e.g. \"yourname/model\""},
        {"hf_model_name: me/model.git\n",
         "config.yaml:1:16: hf_model_name: \"me/model.git\" is not a Hub repository id: it ends in \".git\"; write "
         "NAMESPACE/NAME with your user or organization name, e.g. \"yourname/model\""},
    };
    RUN_ERRORS(rows);
}

static void test_errors_together_in_order(void **state)
{
    (void)state;
    expect_error("lora_r: x\n"
                 "unknown_key: 1\n"
                 "optim: sgd\n"
                 "dataset:\n"
                 "  - name: a\n"
                 "    shuffle: 2\n"
                 "save_steps:  fifty\n"
                 "lora_r: 8\n"
                 "full_finetuning: true\n"
                 "dataset: b\n"
                 "model_name: \"\"\n",
                 "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found \"x\"\n"
                 "config.yaml:3:8: optim: expected one of adamw_8bit, adamw_bnb_8bit, "
                 "paged_adamw_8bit, adamw_torch, adamw_torch_fused, adamw, paged_adamw_32bit, found "
                 "\"sgd\"\n"
                 "config.yaml:6:14: dataset[0].shuffle: expected true or false, found \"2\"\n"
                 "config.yaml:7:14: save_steps: expected a positive integer (at most 1e+18) or a fraction below 1 of the total steps, "
                 "found \"fifty\"\n"
                 "config.yaml:8:1: lora_r: given twice (first at line 1)\n"
                 "config.yaml:10:1: dataset: given twice (first at line 4)");
    /* (the rules between keys wait until every value could be read: full_finetuning and the
     * empty model_name above are not reported yet) */
    /* the rules between keys are all reported too, in file order */
    expect_error("full_finetuning: true\nlora_bias: all\npush_to_hub: true\nollama_save: true\n"
                 "load_best_model_at_end: true\n",
                 "config.yaml:1:18: full_finetuning: ptrain trains LoRA adapters on a frozen 4-bit "
                 "base; remove the key or set it false\n"
                 "config.yaml:2:12: lora_bias: ptrain trains no bias terms (the base is frozen in "
                 "4-bit); use none\n"
                 "config.yaml:3:14: push_to_hub: needs hub_model_id (e.g. \"yourname/model-lora\")\n"
                 "config.yaml:4:14: ollama_save: needs ollama_model (a name for the Ollama model)\n"
                 "config.yaml:5:25: load_best_model_at_end: needs an eval set to pick the best "
                 "checkpoint; set val_split_ratio (e.g. 0.05)");
    /* the rules of a dataset entry are read with it, so they come in file order with the rest */
    expect_error("lora_r: x\ndataset:\n  - name: a\n    format: parquet\n    filter_data: true\n"
                 "packing: maybe\n",
                 "config.yaml:1:9: lora_r: expected an integer from 1 to 4096, found \"x\"\n"
                 "config.yaml:5:18: dataset[0].filter_data: needs filter_column_value and "
                 "filter_value\n"
                 "config.yaml:6:10: packing: expected true or false, found \"maybe\"");
}

/* The report of many mistakes (issue 29): the first CONFIG_REPORT_MAX in file order, whole, then how
 * many more; one line for a mistake an alias repeats; warnings the same. */
static void test_report_many(void **state)
{
    (void)state;
    static const char expected[] = "expected items from q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj, "
                                   "qkv_proj, gate_up_proj, input_linear, output_linear, in_proj_qkv, in_proj_z, in_proj_b, in_proj_a, out_proj, embed_tokens, lm_head, w1, w3, w2, gate";
    /* sixty bad items of lora_target_modules: 20 lines, then "… and 40 more" */
    strbuf yaml = {0}, want = {0};
    sb_printf(&yaml, "lora_target_modules:\n");
    for (int i = 1; i <= 60; i++) sb_printf(&yaml, "  - bad_module_name_number_%d\n", i);
    for (int i = 1; i <= 20; i++)
        sb_printf(&want, "config.yaml:%d:5: lora_target_modules: %s, found \"bad_module_name_number_%d\"\n", i + 1,
                  expected, i);
    sb_printf(&want, "… and 40 more errors in config.yaml");
    expect_error(yaml.data, want.data);
    sb_free(&yaml);
    sb_free(&want);

    /* one value that an alias repeats nine times: one line, with the count */
    char one[1024];
    snprintf(one, sizeof one, "config.yaml:2:5: lora_target_modules: %s, found \"bogus\" (9 times)", expected);
    expect_error("defs:\n  - &m bogus\nlora_target_modules: [*m, *m, *m, *m, *m, *m, *m, *m, *m]\n", one);
    /* ... but two mistakes at two places stay two lines */
    snprintf(one, sizeof one, "config.yaml:1:23: lora_target_modules: %s, found \"bogus\"\n"
             "config.yaml:1:30: lora_target_modules: %s, found \"bogus\"", expected, expected);
    expect_error("lora_target_modules: [bogus, bogus]\n", one);

    /* sixty items of 4 KB each: every line whole, each value shortened with its length */
    sb_printf(&yaml, "lora_target_modules:\n");
    for (int i = 0; i < 60; i++) {
        sb_printf(&yaml, "  - m%02d", i);
        for (int k = 0; k < 4000; k++) sb_printf(&yaml, "x");
        sb_printf(&yaml, "\n");
    }
    pt_config cfg;
    assert_int_equal(parse(yaml.data, &cfg), PT_ERR_USER);
    sb_free(&yaml);
    const char *msg = err_message(), *line = msg;
    int lines = 0;
    for (const char *nl; (nl = strchr(line, '\n')); line = nl + 1, lines++) {
        char head[64];
        snprintf(head, sizeof head, "config.yaml:%d:5: lora_target_modules: ", lines + 2);
        const char *cut = strstr(line, "xxx…(4003 bytes)…xxx");
        if (strncmp(line, head, strlen(head)) || !cut || cut > nl || strncmp(nl - 2, "x\"", 2) != 0)
            fail_msg("line %d is not one whole message:\n%s", lines + 1, msg);
    }
    /* at most 20 lines, fewer when 20 would pass the report's budget (ERR_MESSAGE_MAX / 2: each line here is
     * the list of choices and a value of about 60 bytes); the rest counted */
    assert_true(lines >= 10 && lines <= 20);
    char rest[64];
    snprintf(rest, sizeof rest, "… and %d more errors in config.yaml", 60 - lines);
    assert_string_equal(line, rest);

    /* thirty unknown keys: 20 warnings, then how many more */
    char *warnings;
    for (int i = 0; i < 30; i++) sb_printf(&yaml, "unknown_%d: 1\n", i);
    for (int i = 0; i < 20; i++)
        sb_printf(&want, "ptrain: warning: config.yaml:%d:1: unknown key \"unknown_%d\"; ignored\n", i + 1, i);
    sb_printf(&want, "ptrain: warning: … and 10 more warnings in config.yaml\n");
    assert_int_equal(parse_warn(yaml.data, &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, want.data);
    free(warnings);
    config_free(&cfg);
    sb_free(&yaml);
    sb_free(&want);
}

static void test_validate_launch(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("model_name: m\ndevice_map: auto\n", &cfg);
    assert_int_equal(config_validate_launch(&cfg, 1), PT_OK);
    assert_int_equal(config_validate_launch(&cfg, 2), PT_ERR_USER);
    assert_string_equal(err_message(),
                        "config.yaml:2:13: device_map: \"auto\" splits one model across devices in one "
                        "process, which conflicts with data-parallel training over 2 ranks; remove "
                        "device_map (each rank then loads the whole model on its own local device)");
    config_free(&cfg);

    static const char *const refused[] = {"balanced", "balanced_low_0", "sequential"};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char yaml[64], want[512];
        snprintf(yaml, sizeof yaml, "device_map: %s\n", refused[i]);
        parse_ok(yaml, &cfg);
        assert_int_equal(config_validate_launch(&cfg, 1), PT_OK);
        assert_int_equal(config_validate_launch(&cfg, 8), PT_ERR_USER);
        snprintf(want, sizeof want,
                 "config.yaml:1:13: device_map: \"%s\" splits one model across devices in one "
                 "process, which conflicts with data-parallel training over 8 ranks; remove "
                 "device_map (each rank then loads the whole model on its own local device)",
                 refused[i]);
        assert_string_equal(err_message(), want);
        config_free(&cfg);
    }
    /* the whole model on one device, or no device_map, is fine under any number of ranks */
    parse_ok("device_map: {\"\": 0}\n", &cfg);
    assert_int_equal(config_validate_launch(&cfg, 4), PT_OK);
    config_free(&cfg);
    parse_ok("{}\n", &cfg);
    assert_int_equal(config_validate_launch(&cfg, 4), PT_OK);
    config_free(&cfg);
}

/* ---------------------------------------------------------------------------------------------
 * warnings and the token */

/* The peer's template as it ships: model_parameters a size tag, and keys of TRL/PEFT that ptrain
 * knows (a one-line note each, not "unknown key"); LoftQ asked for is refused. */
static void test_peer_template_keys(void **state)
{
    (void)state;
    pt_config cfg;
    char *warnings;
    assert_int_equal(parse_warn("model_parameters: \"8b\"\n"
                                "dataset_num_proc: 2\n"
                                "loftq_config: null\n",
                                &cfg, &warnings),
                     PT_OK);
    assert_string_equal(cfg.model_parameters.tag, "8b");
    assert_int_equal(cfg.model_parameters.n, 0);
    expect_text(&cfg, "model_parameters", "8b");
    assert_string_equal(warnings,
                        "ptrain: note: config.yaml:2:1: dataset_num_proc: TRL's worker processes for dataset "
                        "preparation; ptrain tokenizes on its own threads (threads, OMP_NUM_THREADS), so the value "
                        "is not used\n"
                        "ptrain: note: config.yaml:3:1: loftq_config: no LoftQ, as always in ptrain: the adapters "
                        "start as PEFT's default (A random, B zero)\n");
    free(warnings);
    config_free(&cfg);
    /* a number is a tag too (YAML 8 is the scalar "8") */
    parse_ok("model_parameters: 70b-instruct.q4\n", &cfg);
    assert_string_equal(cfg.model_parameters.tag, "70b-instruct.q4");
    config_free(&cfg);
    expect_error("loftq_config:\n  loftq_bits: 4\n",
                 "config.yaml:2:3: loftq_config: PEFT's LoftQ initialization is not implemented in ptrain (its "
                 "adapters start as PEFT's default: A random, B zero); remove the key or set it to null");
    /* only at the top level: inside a dataset entry it is an unknown key like any other */
    assert_int_equal(parse_warn("dataset:\n  - name: a\n    dataset_num_proc: 4\n", &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, "ptrain: warning: config.yaml:3:5: unknown key \"dataset[0].dataset_num_proc\"; "
                                  "ignored\n");
    free(warnings);
    config_free(&cfg);
}

/* The keys ptrain reads but has no field for (the seed system's and its libraries', issue 46): each
 * is in no other table, has a note, and refuses exactly what it does not accept, with the fix. */
static void test_foreign_keys_table(void **state)
{
    (void)state;
    assert_true(config_nforeign >= 17);
    for (int i = 0; i < config_nforeign; i++) {
        const foreign_key *fk = &config_foreign_keys[i];
        if (key_index(config_keys, config_nkeys, fk->name) >= 0) fail_msg("%s is in both tables", fk->name);
        assert_ptr_equal(foreign_key_find(fk->name), fk);
        if (!fk->note || !*fk->note) fail_msg("%s has no note", fk->name);
        if (!fk->accept != !fk->refusal) fail_msg("%s: a refusal without accept, or the other way", fk->name);
        if (fk->refusal && !strstr(fk->refusal, "remove")) fail_msg("%s: the refusal says no fix", fk->name);
    }
    assert_null(foreign_key_find("learning_rate"));
}

/* modules_to_save (issue 46): embed_tokens and lm_head are read into their flags; another module,
 * a method that is not sft or cpt is refused saying why; cpt's
 * embedding_learning_rate without modules_to_save is a warning. */
static void test_modules_to_save(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("modules_to_save: [embed_tokens, lm_head]\nmethod: cpt\nembedding_learning_rate: 1e-5\n", &cfg);
    assert_true(cfg.save_embed_tokens && cfg.save_lm_head);
    config_free(&cfg);
    parse_ok("modules_to_save: [lm_head]\n", &cfg);
    assert_true(!cfg.save_embed_tokens && cfg.save_lm_head);
    config_free(&cfg);
    parse_ok("modules_to_save: null\n", &cfg);
    assert_true(!cfg.save_embed_tokens && !cfg.save_lm_head);
    config_free(&cfg);
    expect_error("modules_to_save: [score]\n", "config.yaml:1:19: modules_to_save: expected items from embed_tokens, "
                                               "lm_head, found \"score\"");
    expect_error("modules_to_save: [gate]\n", "config.yaml:1:19: modules_to_save: \"gate\" (a mixture of experts' "
                 "router trained in full) is not built yet; train the router with LoRA instead: target_parameters: "
                 "[mlp.gate.weight]");
    expect_error("modules_to_save: [lm_head]\nmethod: dpo\n",
                 "config.yaml:1:18: modules_to_save: dpo: training the embedding or the LM head in full is built for "
                 "sft and cpt only (a preference method's reference and reward's score head would need their own "
                 "copies); remove the key");
    char *warnings;
    /* Unsloth's way: embed_tokens and lm_head in target_modules are trained in full */
    assert_int_equal(parse_warn("lora_target_modules: [q_proj, lm_head, v_proj, embed_tokens]\n", &cfg, &warnings), PT_OK);
    expect_text(&cfg, "lora_target_modules", "q_proj, v_proj");
    expect_text(&cfg, "modules_to_save", "lm_head, embed_tokens");
    assert_true(cfg.save_embed_tokens && cfg.save_lm_head);
    assert_string_equal(warnings, "ptrain: note: config.yaml:1:22: lora_target_modules: embed_tokens and lm_head are "
                                  "trained in full as modules_to_save, as Unsloth's get_peft_model trains them (LoRA "
                                  "adapters go on the projections)\n");
    free(warnings);
    config_free(&cfg);
    expect_error("lora_target_modules: [lm_head]\n", "config.yaml:1:22: lora_target_modules: names no projection "
                 "besides embed_tokens and lm_head (which are trained in full, as modules_to_save); add the projections "
                 "that get adapters");
    assert_int_equal(parse_warn("method: cpt\nembedding_learning_rate: 1e-5\n", &cfg, &warnings), PT_OK);
    if (!strstr(warnings, "embedding_learning_rate: cpt without modules_to_save trains no embedding"))
        fail_msg("expected the warning, got \"%s\"", warnings);
    free(warnings);
    config_free(&cfg);
    assert_int_equal(parse_warn("method: cpt\nembedding_learning_rate: 1e-5\nmodules_to_save: [embed_tokens]\n", &cfg,
                                &warnings), PT_OK);
    assert_string_equal(warnings, "");
    free(warnings);
    config_free(&cfg);
}

/* Each kind of accepted value (a boolean in any spelling, {}, [], a word) and what is refused; null
 * is always a note. */
static void test_foreign_keys_values(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *note; /* note: NULL when refused */
    } cases[] = {
        {"trust_remote_code: false\n", "trust_remote_code: ptrain runs no code from a model repository"},
        {"trust_remote_code: \"no\"\n", "trust_remote_code: ptrain runs no code from a model repository"},
        {"trust_remote_code: null\n", "trust_remote_code: ptrain runs no code from a model repository"},
        {"trust_remote_code: true\n", NULL},
        {"fast_inference: off\n", "fast_inference: ptrain has no vLLM generation"},
        {"fast_inference: true\n", NULL},
        {"save_method: merged_16bit\n", "save_method: huggingface_save writes the merged model in 16 bits"},
        {"save_method: MERGED_16BIT\n", "save_method: huggingface_save writes the merged model in 16 bits"},
        {"save_method: merged_4bit\n", NULL},
        {"save_method: [merged_16bit]\n", NULL},
        {"bf16: true\n", "bf16: the GPU computes in bfloat16"},
        {"bf16: false\n", NULL},
        {"gpu_memory_utilization: 0.6\n", "gpu_memory_utilization: vLLM's share of GPU memory"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_config cfg;
        char *warnings;
        pt_status st = parse_warn(cases[i].yaml, &cfg, &warnings);
        if (cases[i].note) {
            char want[256];
            snprintf(want, sizeof want, "ptrain: note: config.yaml:1:1: %s", cases[i].note);
            if (st != PT_OK || strncmp(warnings, want, strlen(want)) != 0 || strchr(warnings, '\n')[1])
                fail_msg("%s: expected the note \"%s...\", got status %d, \"%s\" (%s)", cases[i].yaml, want, st,
                         warnings, st == PT_OK ? "" : err_message());
            config_free(&cfg);
        } else {
            const char *name = cases[i].yaml;
            size_t len = strcspn(name, ":");
            const foreign_key *fk;
            char key[64];
            snprintf(key, sizeof key, "%.*s", (int)len, name);
            assert_non_null(fk = foreign_key_find(key));
            char want[1024];
            snprintf(want, sizeof want, "config.yaml:1:%d: %s: %s", (int)len + 3, key, fk->refusal);
            if (st != PT_ERR_USER || strcmp(err_message(), want) != 0)
                fail_msg("%s: expected the error \"%s\", got status %d, \"%s\"", cases[i].yaml, want, st,
                         st == PT_OK ? "" : err_message());
        }
        free(warnings);
    }
    /* the refusal says the reason and the fix */
    expect_error("fast_inference: true\n", "config.yaml:1:17: fast_inference: fast_inference asks Unsloth to generate "
                                           "with vLLM, which ptrain does not have; remove the key or set it to false");
}

/* use_dora (issue 46): a key of ptrain's own, false by default; accepted with the preference methods
 * and grpo held to TRL with DoRA (dpo, kto, cpo, orpo, reward, grpo), refused, saying why, with
 * lora_dropout, and with the inits that change the base. And dtype's float16, refused as fp16 is. */
static void test_use_dora(void **state)
{
    (void)state;
    pt_config cfg;
    assert_int_equal(parse("lora_r: 4\n", &cfg), PT_OK);
    assert_false(cfg.use_dora);
    config_free(&cfg);
    assert_int_equal(parse("use_dora: true\nmethod: cpt\n", &cfg), PT_OK);
    assert_true(cfg.use_dora);
    config_free(&cfg);
    /* dtype: float16 would need loss scaling; float32 holds on the CPU (refused on a GPU when the run starts) */
    expect_error("dtype: float16\n", "config.yaml:1:8: dtype: float16 compute (with loss scaling) is not implemented in "
                                     "ptrain: the GPU computes in bfloat16, which needs no loss scaling, and the CPU in "
                                     "float32; use auto or bfloat16");
    assert_int_equal(parse("dtype: float32\n", &cfg), PT_OK);
    config_free(&cfg);
    static const char *const methods[] = {"dpo", "kto", "cpo", "orpo", "reward"};
    for (int i = 0; i < 5; i++) {
        char text[64];
        snprintf(text, sizeof text, "use_dora: true\nmethod: %s\n", methods[i]);
        if (parse(text, &cfg) != PT_OK) fail_msg("use_dora with method %s: %s", methods[i], err_message());
        config_free(&cfg);
    }
    assert_int_equal(parse("use_dora: true\nmethod: grpo\nreward_funcs: [length]\nper_device_train_batch_size: 8\n",
                           &cfg), PT_OK);
    assert_true(cfg.use_dora);
    config_free(&cfg);
    expect_error("use_dora: true\nlora_dropout: 0.05\n",
                 "config.yaml:1:11: use_dora: DoRA trains without lora_dropout in ptrain (PEFT drops the input of the "
                 "LoRA part only, which ptrain's DoRA does not do); set lora_dropout to 0");
    expect_error("use_dora: true\ninit_lora_weights: olora\n",
                 "config.yaml:1:11: use_dora: init_lora_weights olora trains on a residual base, whose conversion back "
                 "to the original model (PEFT's path_initial_model_for_weight_conversion) does not hold DoRA's "
                 "magnitudes; use init_lora_weights true, false or gaussian with DoRA");
}

/* PEFT's selectors (issue 46): layers_to_transform (a list or one number), layers_pattern only
 * beside it, finetune_last_n_layers instead of it, rank_pattern and alpha_pattern values as numbers;
 * their effect against PEFT: tests/export/test_peft_select.sh. */
static void test_rule_selectors(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("layers_to_transform: [0, 3]\nlayers_pattern: layers\nrank_pattern: {q_proj: 8, \"layers\\\\.0\\\\..*\": 2}\n"
             "alpha_pattern: {v_proj: 2.5}\n", &cfg);
    assert_int_equal(cfg.layers_to_transform.n, 2);
    assert_string_equal(cfg.layers_to_transform.items[1], "3");
    assert_int_equal(cfg.rank_pattern.n, 2);
    assert_string_equal(cfg.rank_pattern.keys[1], "layers\\.0\\..*");
    assert_int_equal(cfg.finetune_last_n_layers, -1);
    config_free(&cfg);
    parse_ok("layers_to_transform: 2\nfinetune_last_n_layers: null\n", &cfg);
    assert_int_equal(cfg.layers_to_transform.n, 1);
    config_free(&cfg);
    parse_ok("finetune_last_n_layers: 4\n", &cfg);
    assert_int_equal(cfg.finetune_last_n_layers, 4);
    config_free(&cfg);
    expect_error("layers_to_transform: [a]\n", "config.yaml:1:22: layers_to_transform: expected layer numbers (0 for the "
                 "first layer), found \"a\"");
    expect_error("layers_pattern: layers\n", "config.yaml:1:17: layers_pattern: is used only with layers_to_transform "
                 "(PEFT refuses it alone); add layers_to_transform or remove layers_pattern");
    expect_error("layers_to_transform: [1]\nfinetune_last_n_layers: 2\n", "config.yaml:2:25: finetune_last_n_layers: "
                 "layers_to_transform names the layers already; give one of the two keys");
    parse_ok("init_lora_weights: false\n", &cfg);
    assert_int_equal(cfg.lora_init, LORA_INIT_FALSE);
    config_free(&cfg);
    parse_ok("init_lora_weights: Gaussian\n", &cfg);
    assert_int_equal(cfg.lora_init, LORA_INIT_GAUSSIAN);
    config_free(&cfg);
    parse_ok("init_lora_weights: null\n", &cfg);
    assert_int_equal(cfg.lora_init, LORA_INIT_TRUE);
    config_free(&cfg);
    parse_ok("init_lora_weights: pissa\n", &cfg);
    assert_int_equal(cfg.lora_init, LORA_INIT_PISSA);
    config_free(&cfg);
    parse_ok("init_lora_weights: OLoRA\n", &cfg);
    assert_int_equal(cfg.lora_init, LORA_INIT_OLORA);
    config_free(&cfg);
    parse_ok("init_lora_weights: pissa_niter_4\n", &cfg);
    assert_int_equal(cfg.lora_init, LORA_INIT_PISSA_NITER);
    assert_int_equal(cfg.lora_init_niter, 4);
    config_free(&cfg);
    expect_error("init_lora_weights: pissa_niter_x\n", "config.yaml:1:20: init_lora_weights: pissa_niter_x: expected "
                 "pissa_niter_N with N the number of subspace iterations, 0 to 999");
    expect_error("init_lora_weights: corda\n", "config.yaml:1:20: init_lora_weights: corda is not implemented: it needs "
                 "data (the model's activations or gradients) besides the base weights; use pissa, pissa_niter_N, "
                 "olora, true, false or gaussian");
    expect_error("init_lora_weights: eva\n", "config.yaml:1:20: init_lora_weights: eva needs more than the base weights "
                 "(quantization-aware or data-driven initialization, or a different layer) and is not implemented in "
                 "ptrain; use true, false, gaussian, pissa, pissa_niter_N or olora");
    expect_error("init_lora_weights: uniform\n", "config.yaml:1:20: init_lora_weights: expected true, false, gaussian, "
                 "pissa, pissa_niter_N or olora, found \"uniform\"");
    expect_error("rank_pattern: {q_proj: 0}\n", "config.yaml:1:15: rank_pattern: q_proj: expected a rank from 1 to 4096, "
                 "found \"0\"");
    expect_error("alpha_pattern: {q_proj: -1}\n", "config.yaml:1:16: alpha_pattern: q_proj: expected a positive number, "
                 "found \"-1\"");
}

/* lr_scheduler_kwargs (issue 46): the arguments each schedule takes, as numbers, into sched_args
 * (transformers' defaults for the others); anything else one error naming what the schedule takes.
 * The rates they give: test_train's test_schedule_matches_transformers. */
static void test_rule_scheduler_kwargs(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("lr_scheduler_type: cosine\n", &cfg);
    assert_true(cfg.sched_args.num_cycles == 0.5);
    config_free(&cfg);
    parse_ok("lr_scheduler_type: cosine_with_restarts\n", &cfg);
    assert_true(cfg.sched_args.num_cycles == 1.0);
    config_free(&cfg);
    parse_ok("lr_scheduler_type: polynomial\nlr_scheduler_kwargs: {power: 2, lr_end: 1e-6}\n", &cfg);
    assert_true(cfg.sched_args.power == 2.0 && cfg.sched_args.lr_end == 1e-6);
    config_free(&cfg);
    parse_ok("learning_rate: 1e-4\nlr_scheduler_type: cosine_with_min_lr\nlr_scheduler_kwargs: {min_lr: 1e-5}\n",
             &cfg);
    assert_true(fabs(cfg.sched_args.min_lr_rate - 0.1) < 1e-15);
    config_free(&cfg);
    parse_ok("lr_scheduler_kwargs: {}\n", &cfg);
    config_free(&cfg);
    expect_error("lr_scheduler_kwargs: {num_cycles: 2}\n",
                 "config.yaml:1:22: lr_scheduler_kwargs: the linear schedule takes no arguments (num_cycles given); "
                 "remove lr_scheduler_kwargs, or use a schedule that takes it (cosine: num_cycles; polynomial: "
                 "lr_end, power; cosine_with_min_lr: min_lr_rate)");
    expect_error("lr_scheduler_type: cosine\nlr_scheduler_kwargs: {power: 2}\n",
                 "config.yaml:2:22: lr_scheduler_kwargs: power is not an argument of the cosine schedule, which "
                 "takes num_cycles");
    expect_error("lr_scheduler_type: cosine\nlr_scheduler_kwargs: {num_cycle: 2}\n",
                 "config.yaml:2:22: lr_scheduler_kwargs: num_cycle is not an argument of the cosine schedule, which "
                 "takes num_cycles");
    expect_error("lr_scheduler_type: cosine\nlr_scheduler_kwargs: {num_cycles: many}\n",
                 "config.yaml:2:22: lr_scheduler_kwargs: num_cycles: expected a number, found \"many\"");
    expect_error("lr_scheduler_type: polynomial\nlr_scheduler_kwargs: {lr_end: 1}\n",
                 "config.yaml:2:22: lr_scheduler_kwargs: lr_end: expected a number from 0 to below learning_rate "
                 "(0.0002), found 1");
    expect_error("lr_scheduler_type: cosine_with_min_lr\n",
                 "config.yaml:1:20: lr_scheduler_type: cosine_with_min_lr needs the final learning rate: set "
                 "lr_scheduler_kwargs to {min_lr_rate: 0.1} (a tenth of learning_rate) or {min_lr: 1e-5}");
    expect_error("lr_scheduler_type: cosine_with_min_lr\nlr_scheduler_kwargs: {min_lr: 1e-5, min_lr_rate: 0.1}\n",
                 "config.yaml:2:22: lr_scheduler_kwargs: min_lr and min_lr_rate say the same; give one of them");
}

/* training_arguments (issue 46): the TrainingArguments in it that ptrain has are read as top-level
 * keys (a second mention of one is "given twice"); the others in one error; not a mapping: refused. */
/* tags and commit_message (issue 46): tags that can stand in the card's front matter as they are;
 * a commit title of one line. The card: test_hub.c's test_card. */
static void test_rule_tags(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("tags: [text-generation, base_model:adapter:me/x, v1.2+]\ncommit_message: first run\n", &cfg);
    assert_int_equal(cfg.tags.n, 3);
    assert_string_equal(cfg.commit_message, "first run");
    config_free(&cfg);
    expect_error("tags: [\"a b\"]\n", "config.yaml:1:7: tags: \"a b\" is not a Hub tag: up to 128 of letters, digits "
                                     "and - _ . : / +, not starting with - or :");
    expect_error("tags: [\"-x\"]\n", "config.yaml:1:7: tags: \"-x\" is not a Hub tag: up to 128 of letters, digits "
                                    "and - _ . : / +, not starting with - or :");
    expect_error("commit_message: \"two\\nlines\"\n",
                 "config.yaml:1:17: commit_message: expected one line of text (a commit's title), found \"two\\nlines\"");
}

static void test_training_arguments(void **state)
{
    (void)state;
    pt_config cfg;
    char *warnings;
    assert_int_equal(parse_warn("training_arguments:\n  warmup_ratio: 0.1\n  logging_first_step: true\n"
                                "  dataloader_num_workers: 4\n",
                                &cfg, &warnings),
                     PT_OK);
    assert_true(cfg.warmup_ratio == 0.1 && cfg.logging_first_step);
    assert_true(config_is_set(&cfg, "warmup_ratio"));
    assert_string_equal(warnings, "ptrain: note: config.yaml:4:3: dataloader_num_workers: transformers' worker "
                                  "processes for loading batches; ptrain prepares the data on its own threads "
                                  "(threads, OMP_NUM_THREADS) before the first step, so the value is not used\n");
    free(warnings);
    config_free(&cfg);
    parse_ok("training_arguments: {}\n", &cfg);
    config_free(&cfg);
    expect_error("learning_rate: 1e-4\ntraining_arguments:\n  learning_rate: 2e-4\n",
                 "config.yaml:3:3: learning_rate: given twice (first at line 1)");
    expect_error("training_arguments:\n  torch_compile: true\n  lr: 1\n  seed: 3\n  training_arguments: {}\n",
                 "config.yaml:2:3: training_arguments: torch_compile, lr, training_arguments are not "
                 "TrainingArguments ptrain has (docs/configuration.md lists the keys it reads); remove them");
    expect_error("training_arguments:\n  fp16: true\n",
                 "config.yaml:2:9: fp16: fp16 mixed precision (with loss scaling) is not implemented in ptrain: the "
                 "GPU computes in bfloat16, which needs no loss scaling, and the CPU in float32; remove the key or "
                 "set it to false");
    expect_error("training_arguments: [warmup_ratio]\n",
                 "config.yaml:1:21: training_arguments: expected a mapping of transformers' TrainingArguments names "
                 "to values (those ptrain has are read as if given at the top level); remove the key or write it as "
                 "such a mapping");
}

static void test_unknown_keys(void **state)
{
    (void)state;
    pt_config cfg;
    char *warnings;
    assert_int_equal(parse_warn("learning_rat: 1e-4\n"
                                "completely_unrelated: 1\n"
                                "dataset:\n"
                                "  - name: a\n"
                                "    shufle: true\n"
                                "    colour: red\n"
                                "lora_r: 8\n",
                                &cfg, &warnings),
                     PT_OK);
    assert_string_equal(warnings,
                        "ptrain: warning: config.yaml:1:1: unknown key \"learning_rat\" (did you mean "
                        "\"learning_rate\"?); ignored\n"
                        "ptrain: warning: config.yaml:2:1: unknown key \"completely_unrelated\"; "
                        "ignored\n"
                        "ptrain: warning: config.yaml:5:5: unknown key \"dataset[0].shufle\" (did you "
                        "mean \"shuffle\"?); ignored\n"
                        "ptrain: warning: config.yaml:6:5: unknown key \"dataset[0].colour\"; "
                        "ignored\n");
    /* ignored means ignored: the default stays, and the known keys around it are read */
    assert_true(cfg.learning_rate == 2e-4);
    assert_false(cfg.datasets[0].shuffle);
    assert_int_equal(cfg.lora_r, 8);
    free(warnings);
    config_free(&cfg);

    /* an alias is suggested when it is the closer name */
    assert_int_equal(parse_warn("hf_tokn: x\n", &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, "ptrain: warning: config.yaml:1:1: unknown key \"hf_tokn\" (did you "
                                  "mean \"hf_token\"?); ignored\n");
    free(warnings);
    config_free(&cfg);

    /* no warning stream: quiet */
    parse_ok("learning_rat: 1\n", &cfg);
    config_free(&cfg);
}

#define TOKEN "hf_SeCrEtToKeN0123456789"

static void assert_no_token(const char *text)
{
    if (text && strstr(text, TOKEN)) fail_msg("the token leaked into: %s", text);
}

static void test_token_never_kept(void **state)
{
    (void)state;
    pt_config cfg;
    char *warnings;
    assert_int_equal(parse_warn("model_name: m\nhub_token: " TOKEN "\ndataset:\n  - name: d\n",
                                &cfg, &warnings),
                     PT_OK);
    assert_string_equal(warnings, "ptrain: warning: config.yaml:2:12: hub_token: a token in a config "
                                  "file is never used (it would reach logs and checkpoints); export "
                                  "HF_TOKEN instead\n");
    assert_no_token(warnings);
    free(warnings);
    assert_true(config_is_set(&cfg, "hub_token"));
    expect_text(&cfg, "hub_token", "(from HF_TOKEN only)");

    /* not in the printed table, not in any value, not in any string of the struct */
    char *printed = print_text(&cfg);
    assert_no_token(printed);
    assert_null(strstr(printed, "hub_token"));
    free(printed);
    const char *const *names = config_key_names();
    for (int i = 0; names[i]; i++) {
        char *text = config_value_text(&cfg, names[i]);
        assert_no_token(text);
        free(text);
    }
    assert_no_token(cfg.path);
    for (int d = 0; d < cfg.n_datasets; d++) {
        assert_no_token(cfg.datasets[d].name);
        assert_no_token(cfg.datasets[d].split_type);
    }
    /* and the hash is that of the same config without the token */
    uint64_t with_token = config_hash(&cfg);
    config_free(&cfg);
    assert_true(with_token == hash_of("model_name: m\ndataset:\n  - name: d\n"));

    /* nor in an error message of a config that also has a token */
    assert_int_equal(parse_warn("hf_token: " TOKEN "\nlora_r: x\n", &cfg, &warnings), PT_ERR_USER);
    assert_no_token(warnings);
    assert_no_token(err_message());
    free(warnings);
    /* a token in a list, or given twice, is not echoed either */
    assert_int_equal(parse_warn("hub_token: [" TOKEN "]\nhf_token: " TOKEN "\n", &cfg, &warnings),
                     PT_ERR_USER);
    assert_string_equal(err_message(), "config.yaml:2:1: hf_token: given twice (first at line 1 as "
                                       "\"hub_token\"; hf_token is an alias of hub_token)");
    assert_no_token(warnings);
    free(warnings);
    /* a null token is no token: no warning */
    assert_int_equal(parse_warn("hub_token:\n", &cfg, &warnings), PT_OK);
    assert_string_equal(warnings, "");
    free(warnings);
    config_free(&cfg);
}

/* What a checkpoint keeps of a config: the resolved settings as YAML (config_dump), which read back
 * as the same configuration and hold no token, whatever the file had around its settings. */
#define HF_SHAPED "hf_ThirtyFourLettersOfAnAccessToken" /* hf_ and 34 letters, as the Hub's */

static char *dump_of(const char *yaml)
{
    pt_config cfg;
    parse_ok(yaml, &cfg);
    char *text = NULL;
    assert_int_equal(config_dump(&cfg, &text), PT_OK);
    assert_non_null(text);
    config_free(&cfg);
    return text;
}

/* Whether text is one YAML document whose root is a mapping, as libyaml reads it. */
static bool libyaml_reads_mapping(const char *text)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    assert_true(yaml_parser_initialize(&parser));
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, strlen(text));
    bool ok = yaml_parser_load(&parser, &doc);
    yaml_parser_delete(&parser);
    if (!ok) return false;
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    ok = root && root->type == YAML_MAPPING_NODE;
    yaml_document_delete(&doc);
    return ok;
}

/* The dump of yaml has none of the texts given (NULL-terminated), and libyaml reads it. */
static void expect_dump_without(const char *yaml, ...)
{
    char *text = dump_of(yaml);
    va_list ap;
    va_start(ap, yaml);
    for (const char *secret; (secret = va_arg(ap, const char *));)
        if (strstr(text, secret)) fail_msg("the dump of:\n%s\nkeeps %s:\n%s", yaml, secret, text);
    va_end(ap);
    if (!libyaml_reads_mapping(text)) fail_msg("libyaml does not read the dump as a mapping:\n%s", text);
    free(text);
}

static void test_dump_no_token(void **state)
{
    (void)state;
    /* around the settings: a comment, an unknown key, an anchor, a block scalar, a flow mapping */
    expect_dump_without("# hub_token: " TOKEN "\nmodel_name: m\n", TOKEN, NULL);
    expect_dump_without("hf_api_key: " TOKEN "\nextra: {hf_token: " TOKEN ", n: [" TOKEN "]}\n", TOKEN, NULL);
    expect_dump_without("x: &t " TOKEN "\nhub_token: *t\nd: &d {name: a}\ndataset: [*d]\n", TOKEN, NULL);
    expect_dump_without("hf_token: |\n  " TOKEN "\n  more\nlora_r: 8\n", TOKEN, NULL);
    expect_dump_without("{model_name: m, hf_token: " TOKEN ", lora_r: 8}\n", TOKEN, NULL);
    expect_dump_without("a: 1\n\"HUB_TOKEN\": " TOKEN "\n", TOKEN, NULL);
    /* a token-shaped text in a key ptrain keeps: a string, a list, a map, a dataset entry */
    expect_dump_without("hub_model_id: tester/" HF_SHAPED "\noutput_dir: /runs/" HF_SHAPED "-x\n"
                        "chat_template: |\n  {{ '" HF_SHAPED "' }}\n",
                        HF_SHAPED, NULL);
    expect_dump_without("model_parameters: {stop: " HF_SHAPED ", " HF_SHAPED ": 1}\n"
                        "dataset:\n  - name: " HF_SHAPED "\n    data_files: [a, " HF_SHAPED "]\n"
                        "    rename: {" HF_SHAPED ": text}\n    filter_column_value: x\n"
                        "    filter_value: api_org_AbcdefghijklmnopqrstuvwxyzABCDEFGH\n    filter_data: true\n",
                        HF_SHAPED, "api_org_Abcdefghij", NULL);
    /* the environment's token, wherever it is (8 characters or more) */
    setenv("HF_TOKEN", "my-env-secret", 1);
    setenv("HUGGING_FACE_HUB_TOKEN", "another-env-secret", 1);
    expect_dump_without("output_dir: /runs/my-env-secret/x\nfinal_model_dir: another-env-secret\n", "my-env-secret",
                        "another-env-secret", NULL);
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    /* a token key given reads "(not stored)"; not given, null; a short hf_ word is no token */
    char *text = dump_of("hub_token: " TOKEN "\nrevision: hf_main\n");
    assert_non_null(strstr(text, "\nhub_token: (not stored)\n"));
    assert_non_null(strstr(text, "\nrevision: hf_main\n"));
    free(text);
    text = dump_of("lora_r: 8\n");
    assert_non_null(strstr(text, "\nhub_token: null\n"));
    free(text);
}

/* Every setting of full.yaml, typed: numbers, booleans, null for unset, lists, maps, datasets. */
static void test_dump_typed(void **state)
{
    (void)state;
    char *text = dump_of("model_name: m\nlora_r: 4\nlora_alpha: 8\nlearning_rate: 2e-4\nadam_epsilon: 1e-8\n"
                         "threads: auto\nuse_rslora: yes\ndevice_map: {\"\": 0}\nchat_template: \"\"\n"
                         "revision: \"123\"\nlora_target_modules: [q_proj, v_proj]\nmodel_parameters: {temperature: 0.7}\n"
                         "dataset:\n  - name: a\n    rename: {instruction: prompt}\n    seed: 0\n  - b.jsonl\n");
    static const char *const lines[] = {
        "model_name: m\n", "\nlora_r: 4\n", "\nlora_alpha: 8\n", "\nlearning_rate: 0.0002\n",
        "\nadam_epsilon: 1.0e-08\n", "\nthreads: auto\n", "\nuse_rslora: true\n", "\ndevice_map:\n  '': 0\n",
        "\nchat_template: ''\n", "\nrevision: '123'\n", "\nlora_target_modules:\n- q_proj\n- v_proj\n",
        "\nmodel_parameters:\n  temperature: 0.7\n", "\nmax_steps: null\n", "\nwarmup_ratio: null\n",
        "\nsave_total_limit: null\n", "\nresume_from_checkpoint: false\n",
        "\ndataset:\n- name: a\n  split_type: train\n  config_name: null\n  revision: null\n  data_files: []\n  format: json\n  rename:\n    instruction: prompt\n"
        "  filter_data: false\n  filter_column_value: null\n  filter_value: null\n  num_samples: null\n"
        "  shuffle: false\n  seed: 0\n- name: b.jsonl\n",
    };
    for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++)
        if (!strstr(text, lines[i])) fail_msg("the dump has no \"%s\":\n%s", lines[i], text);
    free(text);
}

/* The dump reads back as the same configuration (the same hash), for every good config. */
static void test_dump_reads_back(void **state)
{
    (void)state;
    static const char *const configs[] = {
        "model_name: m\n", "max_steps: 7\nsave_steps: 0.25\nwarmup_ratio: 0\nresume_from_checkpoint: /ck/checkpoint-4.h5\n",
        "model_parameters: 8b\nquantization_method: [q8_0, f16]\nhub_model_id: a/b\nchat_template: \"null\"\n",
        "dataset_text_field: \"yes\"\noutput_dir: \"~\"\nlearning_rate: 3.0000000000000001e-4\nthreads: 3\n",
        "assistant_only_loss: false\ndevice_map: cpu\nmodel_name: \"caf\\u00e9: 'x' \\\"y\\\" #z\"\n",
    };
    for (size_t i = 0; i < sizeof configs / sizeof configs[0]; i++) {
        char *text = dump_of(configs[i]);
        pt_config back;
        if (parse(text, &back) != PT_OK) fail_msg("%s\ndoes not read back: %s\n%s", configs[i], err_message(), text);
        if (config_hash(&back) != hash_of(configs[i])) fail_msg("%s\nreads back as another config:\n%s", configs[i], text);
        config_free(&back);
        free(text);
    }
}

/* ---------------------------------------------------------------------------------------------
 * config_print and config_hash */

static void test_print(void **state)
{
    (void)state;
    pt_config cfg;
    parse_ok("model_name: m\nlora_r: 8\nsave_steps: 20\n"
             "dataset:\n  - name: a\n  - name: b\n    shuffle: true\n",
             &cfg);
    char *printed = print_text(&cfg);
    char *save = NULL;
    char *line = strtok_r(printed, "\n", &save);
    assert_non_null(line);
    char header[64];
    snprintf(header, sizeof header, "%-30s %s", "key", "value");
    assert_string_equal(line, header);

    /* then one row per key in table order, the datasets expanded where dataset stands */
    const char *const *names = config_key_names();
    int dataset_rows = 0;
    line = strtok_r(NULL, "\n", &save);
    for (int i = 0; names[i]; i++) {
        if (!strcmp(names[i], "hub_token")) continue; /* the secret has no row */
        if (!strcmp(names[i], "dataset")) {
            for (; line && !strncmp(line, "dataset[", 8); line = strtok_r(NULL, "\n", &save))
                dataset_rows++;
            continue;
        }
        if (!line) fail_msg("config_print has no row for %s", names[i]);
        char *value = config_value_text(&cfg, names[i]);
        char want[512];
        snprintf(want, sizeof want, "%-30s %s%s", names[i], value,
                 config_is_set(&cfg, names[i]) || !strcmp(value, "(unset)") ? "" : "  (default)");
        free(value);
        assert_string_equal(line, want);
        line = strtok_r(NULL, "\n", &save);
    }
    assert_null(line);
    assert_int_equal(dataset_rows % 2, 0);
    assert_true(dataset_rows >= 2 * 10);
    free(printed);

    /* spot checks of the dataset rows and the markers */
    printed = print_text(&cfg);
    static const char *const rows[][2] = {
        {"dataset[0].name", "a"},
        {"dataset[0].split_type", "train"},
        {"dataset[0].num_samples", "(unset)"},
        {"dataset[1].shuffle", "true"},
        {"dataset[1].seed", "3407"},
        {"lora_r", "8"},
        {"lora_alpha", "16  (default)"},
        {"save_strategy", "steps  (default)"},
        {"warmup_ratio", "(unset)"},
        {"chat_template", "(unset)"},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        char want[256];
        snprintf(want, sizeof want, "\n%-30s %s\n", rows[r][0], rows[r][1]);
        if (!strstr(printed, want)) fail_msg("no row \"%s\" in:\n%s", want + 1, printed);
    }
    free(printed);
    config_free(&cfg);

    /* no dataset: one row says so */
    parse_ok("{}\n", &cfg);
    printed = print_text(&cfg);
    char none_row[64];
    snprintf(none_row, sizeof none_row, "\n%-30s (none given)\n", "dataset");
    assert_non_null(strstr(printed, none_row));
    free(printed);
    config_free(&cfg);
}

static void test_hash(void **state)
{
    (void)state;
    const char *base = "model_name: m\nlora_r: 8\ndataset:\n  - name: a\n";
    uint64_t h = hash_of(base);
    /* the same resolved config, written differently */
    assert_true(h == hash_of("dataset: a\nlora_r: 8\nmodel: m\n"));
    assert_true(h == hash_of("# a comment\nlora_r: \"8\"\nmodel_name: 'm'\nlearning_rate: 2e-4\n"
                             "lora_alpha: 16.0\npacking: no\nsave_strategy: no\nthreads: auto\n"
                             "per_device_eval_batch_size: 2\nmax_steps: -1\n"
                             "dataset:\n  - name: a\n    split_type: train\n    seed: 3407\n"));
    assert_true(h == hash_of("model_name: m\nlora_r: 8\ndataset: {name: a}\nlora_dropout:\n"
                             "unknown_key: 1\n"));
    /* the file name is not part of it */
    pt_config cfg;
    assert_int_equal(config_parse("other/path.yaml", base, strlen(base), &cfg, NULL), PT_OK);
    assert_true(h == config_hash(&cfg));
    assert_true(config_hash(&cfg) == config_hash(&cfg));
    config_free(&cfg);

    /* any change of value changes it */
    assert_true(h != hash_of("model_name: m\nlora_r: 16\ndataset:\n  - name: a\n"));
    assert_true(h != hash_of("model_name: n\nlora_r: 8\ndataset:\n  - name: a\n"));
    assert_true(h != hash_of("model_name: m\nlora_r: 8\ndataset:\n  - name: b\n"));
    assert_true(h != hash_of("model_name: m\nlora_r: 8\ndataset:\n  - name: a\n    shuffle: true\n"));
    assert_true(h != hash_of("model_name: m\nlora_r: 8\ndataset:\n  - name: a\n  - name: a\n"));
    assert_true(h != hash_of("model_name: m\nlora_r: 8\nseed: 1\ndataset:\n  - name: a\n"));
    assert_true(h != hash_of("model_name: m\nlora_r: 8\nlearning_rate: 2.0001e-4\ndataset:\n  - name: a\n"));
    /* warmup_ratio: 0 given means "use the ratio": not the same as leaving it out */
    assert_true(h != hash_of("model_name: m\nlora_r: 8\nwarmup_ratio: 0\ndataset:\n  - name: a\n"));
}

/* ---------------------------------------------------------------------------------------------
 * config_load, config_edit_distance */

static void test_load(void **state)
{
    (void)state;
    pt_config cfg;
    const char *good = "model_name: m\nlora_r: 4\n";
    char *path = write_temp(good, strlen(good));
    assert_int_equal(config_load(path, &cfg, NULL), PT_OK);
    assert_string_equal(cfg.path, path);
    assert_int_equal(cfg.lora_r, 4);
    config_free(&cfg);
    unlink(path);
    free(path);

    /* errors name the path given */
    const char *bad = "lora_r: 0\n";
    path = write_temp(bad, strlen(bad));
    assert_int_equal(config_load(path, &cfg, NULL), PT_ERR_USER);
    char want[512];
    snprintf(want, sizeof want, "%s:1:9: lora_r: expected an integer from 1 to 4096, found \"0\"", path);
    assert_string_equal(err_message(), want);
    assert_null(cfg.path);
    unlink(path);

    /* missing */
    assert_int_equal(config_load(path, &cfg, NULL), PT_ERR_USER);
    snprintf(want, sizeof want, "cannot open config file %s: No such file or directory", path);
    assert_string_equal(err_message(), want);
    assert_null(cfg.path);
    free(path);

    /* a NUL byte */
    path = write_temp("model_name: m\n\0\n", 16);
    assert_int_equal(config_load(path, &cfg, NULL), PT_ERR_USER);
    snprintf(want, sizeof want, "%s: contains a NUL byte; a config file is YAML text", path);
    assert_string_equal(err_message(), want);
    unlink(path);
    free(path);

    /* a directory */
    assert_int_equal(config_load("/", &cfg, NULL), PT_ERR_USER);
    assert_string_equal(err_message(), "cannot read config file /: Is a directory");

    /* over 256 KiB: refused where it crosses the limit (1 MiB of spaces: only the first 256 KiB and a
     * little more are read) */
    size_t big = 1u << 20;
    char *spaces = malloc(big);
    assert_non_null(spaces);
    memset(spaces, ' ', big);
    path = write_temp(spaces, big);
    free(spaces);
    assert_int_equal(config_load(path, &cfg, NULL), PT_ERR_USER);
    snprintf(want, sizeof want, "%s:1:262145: the file goes on past 256 KiB (262144 bytes), the most ptrain reads "
             "of a config file; is this really a config file?", path);
    assert_string_equal(err_message(), want);
    unlink(path);
    free(path);
}

static void test_edit_distance(void **state)
{
    (void)state;
    assert_int_equal(config_edit_distance("", ""), 0);
    assert_int_equal(config_edit_distance("abc", ""), 3);
    assert_int_equal(config_edit_distance("", "abcd"), 4);
    assert_int_equal(config_edit_distance("lora_r", "lora_r"), 0);
    assert_int_equal(config_edit_distance("kitten", "sitting"), 3);
    assert_int_equal(config_edit_distance("learning_rat", "learning_rate"), 1); /* insertion */
    assert_int_equal(config_edit_distance("optimm", "optim"), 1);              /* deletion */
    assert_int_equal(config_edit_distance("sead", "seed"), 1);                 /* substitution */
    assert_int_equal(config_edit_distance("nmae", "name"), 2);                 /* a swap is two */
    assert_int_equal(config_edit_distance("LoRA_R", "lora_r"), 0);             /* case-blind */
    assert_int_equal(config_edit_distance("abc", "xyz"), 3);
    /* symmetric */
    assert_int_equal(config_edit_distance("save_steps", "eval_steps"),
                     config_edit_distance("eval_steps", "save_steps"));
    /* long strings are "far" without work */
    char longer[80];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(config_edit_distance(longer, "a"), 99);
    longer[64] = '\0';
    assert_int_equal(config_edit_distance(longer, longer), 0);
}

/* ---------------------------------------------------------------------------------------------
 * the config corpus in tests/configs (found through $PTRAIN_SRCDIR, set by `make check`, or from
 * the source or build directory) */

static bool corpus_dir(const char *sub, char *out, size_t outlen)
{
    const char *roots[] = {getenv("PTRAIN_SRCDIR"), ".", ".."};
    for (size_t i = 0; i < sizeof roots / sizeof roots[0]; i++) {
        if (!roots[i]) continue;
        snprintf(out, outlen, "%s/tests/configs/%s", roots[i], sub);
        DIR *d = opendir(out);
        if (d) {
            closedir(d);
            return true;
        }
    }
    return false;
}

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&buf, &size);
    assert_non_null(out);
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, got, out);
    fclose(f);
    fclose(out);
    return buf;
}

static int yaml_names(const char *dir, char names[][128], int max)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        size_t len = strlen(e->d_name);
        if (len > 5 && len < 128 && !strcmp(e->d_name + len - 5, ".yaml") && n < max)
            memcpy(names[n++], e->d_name, len + 1);
    }
    closedir(d);
    return n;
}

/* Each bad/NAME.yaml fails, and what `ptrain check NAME.yaml` prints on stderr from inside
 * tests/configs/bad (warnings, then "ptrain: error: " before each line of the message) is
 * exactly NAME.err. */
static char saved_cwd[1024];

static int save_cwd(void **state)
{
    (void)state;
    return getcwd(saved_cwd, sizeof saved_cwd) ? 0 : -1;
}

/* runs even when the test failed inside the corpus directory */
static int restore_cwd(void **state)
{
    (void)state;
    return chdir(saved_cwd);
}

static void test_corpus_bad(void **state)
{
    (void)state;
    char dir[1024];
    if (!corpus_dir("bad", dir, sizeof dir)) skip();
    assert_int_equal(chdir(dir), 0);
    static char names[128][128];
    int n = yaml_names(".", names, 128);
    assert_true(n >= 15);
    for (int i = 0; i < n; i++) {
        char err_path[160];
        snprintf(err_path, sizeof err_path, "%.*s.err", (int)strlen(names[i]) - 5, names[i]);
        char *want = read_all(err_path);
        if (!want) fail_msg("%s has no %s", names[i], err_path);

        char *got = NULL;
        size_t size = 0;
        FILE *out = open_memstream(&got, &size);
        assert_non_null(out);
        pt_config cfg;
        pt_status st = config_load(names[i], &cfg, out);
        if (st == PT_OK) {
            config_free(&cfg);
            fail_msg("%s/%s is accepted", dir, names[i]);
        }
        for (const char *m = err_message(); *m;) {
            const char *nl = strchr(m, '\n');
            int len = nl ? (int)(nl - m) : (int)strlen(m);
            fprintf(out, "ptrain: error: %.*s\n", len, m);
            m += len + (nl ? 1 : 0);
        }
        fclose(out);
        if (strcmp(got, want) != 0) fail_msg("%s/%s:\ngot:\n%swant:\n%s", dir, names[i], got, want);
        free(got);
        free(want);
    }
}

/* Each good config loads without a warning; full.yaml gives every key. */
static void test_corpus_good(void **state)
{
    (void)state;
    char dir[1024];
    if (!corpus_dir("good", dir, sizeof dir)) skip();
    static char names[32][128];
    int n = yaml_names(dir, names, 32);
    assert_true(n >= 3);
    bool saw_full = false;
    for (int i = 0; i < n; i++) {
        char path[1200];
        if (snprintf(path, sizeof path, "%s/%s", dir, names[i]) >= (int)sizeof path) fail();
        char *warnings = NULL;
        size_t size = 0;
        FILE *w = open_memstream(&warnings, &size);
        assert_non_null(w);
        pt_config cfg;
        pt_status st = config_load(path, &cfg, w);
        fclose(w);
        if (st != PT_OK) fail_msg("%s: %s", path, err_message());
        if (*warnings) fail_msg("%s warns: %s", path, warnings);
        free(warnings);
        assert_int_equal(config_validate_launch(&cfg, 2), PT_OK);
        /* what a checkpoint keeps of it reads back as the same configuration */
        char *dumped = NULL;
        assert_int_equal(config_dump(&cfg, &dumped), PT_OK);
        pt_config back;
        if (config_parse(path, dumped, strlen(dumped), &back, NULL) != PT_OK)
            fail_msg("%s: its dump does not read back: %s\n%s", path, err_message(), dumped);
        if (config_hash(&back) != config_hash(&cfg)) fail_msg("%s: its dump reads back as another config:\n%s", path, dumped);
        config_free(&back);
        free(dumped);
        if (!strcmp(names[i], "full.yaml")) {
            saw_full = true;
            const char *const *keys = config_key_names();
            /* the token only as "hub_token:" (null); finetune_last_n_layers null (layers_to_transform is given) */
            for (int k = 0; keys[k]; k++)
                if (strcmp(keys[k], "hub_token") && strcmp(keys[k], "finetune_last_n_layers") &&
                    !config_is_set(&cfg, keys[k]))
                    fail_msg("%s does not give %s", path, keys[k]);
            char *text = read_all(path);
            assert_non_null(strstr(text, "\nhub_token:"));
            free(text);
        }
        config_free(&cfg);
    }
    assert_true(saw_full);
}

/* JSON from model directories: integers beyond int64 become reals; everything else as jansson. */
static void test_jsonfile_big_ints(void **state)
{
    (void)state;
    const char *text = "{\"big\": 1000000000000000019884624838656, \"neg\": -9223372036854775809, "
                       "\"max\": 9223372036854775807, \"min\": -9223372036854775808, \"s\": \"12345678901234567890123\", "
                       "\"esc\": \"a\\\"99999999999999999999999\", \"f\": 1.5e300, \"z\": 0, \"l\": [1, 99999999999999999999]}";
    json_error_t e;
    json_t *root = jsonfile_loadb(text, strlen(text), JSON_REJECT_DUPLICATES, &e);
    if (!root) fail_msg("%s", e.text);
    assert_true(json_is_real(json_object_get(root, "big")));
    assert_true(json_real_value(json_object_get(root, "big")) > 9.9e29);
    assert_true(json_is_real(json_object_get(root, "neg")));
    assert_true(json_is_integer(json_object_get(root, "max")));
    assert_true(json_integer_value(json_object_get(root, "min")) == INT64_MIN);
    assert_string_equal(json_string_value(json_object_get(root, "s")), "12345678901234567890123");
    assert_string_equal(json_string_value(json_object_get(root, "esc")), "a\"99999999999999999999999");
    assert_true(json_is_real(json_object_get(root, "f")) && json_is_integer(json_object_get(root, "z")));
    assert_true(json_is_integer(json_array_get(json_object_get(root, "l"), 0)));
    assert_true(json_is_real(json_array_get(json_object_get(root, "l"), 1)));
    json_decref(root);
    const char *bad = "{\"a\": 1,}";
    assert_null(jsonfile_loadb(bad, strlen(bad), 0, &e));
}

/* JSON files within bounds: one past 128 MiB is refused before it is read (a sparse file: instant
 * here), and nesting stops at jansson's depth limit at once. */
static void test_jsonfile_limits(void **state)
{
    (void)state;
    char *path = write_temp("{}", 2);
    assert_int_equal(truncate(path, (128 << 20) + 1), 0);
    json_error_t e;
    double t0 = seconds_now();
    assert_null(jsonfile_load(path, 0, &e));
    double took = seconds_now() - t0;
    assert_string_equal(e.text, "the file is larger than 128 MiB, the most ptrain reads of one JSON file");
    assert_int_equal(e.line, -1);
    if (took > 0.5) fail_msg("refusing a JSON file past 128 MiB took %.2f s", took);
    assert_int_equal(truncate(path, 128 << 20), 0); /* at the limit it is read (and is no JSON: NUL bytes) */
    assert_null(jsonfile_load(path, 0, &e));
    assert_null(strstr(e.text, "128 MiB"));
    unlink(path);
    free(path);
    size_t n = 100000;
    char *deep = malloc(2 * n + 1);
    assert_non_null(deep);
    memset(deep, '[', n);
    memset(deep + n, ']', n);
    deep[2 * n] = '\0';
    t0 = seconds_now();
    assert_null(jsonfile_loadb(deep, 2 * n, 0, &e));
    assert_string_equal(e.text, "maximum parsing depth reached near '['");
    if (seconds_now() - t0 > 1.0) fail_msg("refusing 100000 nested arrays took %.2f s", seconds_now() - t0);
    free(deep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jsonfile_big_ints),
        cmocka_unit_test(test_jsonfile_limits),
        cmocka_unit_test(test_every_key_value),
        cmocka_unit_test(test_every_key_has_a_row), cmocka_unit_test(test_method),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_aliases),
        cmocka_unit_test(test_booleans),
        cmocka_unit_test(test_unsloth_and_all_linear),
        cmocka_unit_test(test_numbers),
        cmocka_unit_test(test_null_keeps_default),
        cmocka_unit_test(test_string_or_list),
        cmocka_unit_test(test_resume_from_checkpoint),
        cmocka_unit_test(test_device_map),
        cmocka_unit_test(test_dataset_forms),
        cmocka_unit_test(test_derived_defaults),
        cmocka_unit_test(test_error_document),
        cmocka_unit_test(test_limit_depth),
        cmocka_unit_test(test_limit_size),
        cmocka_unit_test(test_limit_aliases),
        cmocka_unit_test(test_report_many),
        cmocka_unit_test(test_one_document),
        cmocka_unit_test(test_error_types),
        cmocka_unit_test(test_report_to),
        cmocka_unit_test(test_error_echo),
        cmocka_unit_test(test_error_ranges),
        cmocka_unit_test(test_error_duplicates),
        cmocka_unit_test(test_error_datasets),
        cmocka_unit_test(test_rule_full_finetuning),
        cmocka_unit_test(test_rule_load_in_8bit),
        cmocka_unit_test(test_rule_lora),
        cmocka_unit_test(test_rule_eval),
        cmocka_unit_test(test_rule_publishing),
        cmocka_unit_test(test_errors_together_in_order),
        cmocka_unit_test(test_validate_launch),
        cmocka_unit_test(test_unknown_keys),
        cmocka_unit_test(test_peer_template_keys),
        cmocka_unit_test(test_foreign_keys_table),
        cmocka_unit_test(test_foreign_keys_values), cmocka_unit_test(test_use_dora), cmocka_unit_test(test_modules_to_save),
        cmocka_unit_test(test_rule_scheduler_kwargs),
        cmocka_unit_test(test_rule_selectors),
        cmocka_unit_test(test_training_arguments),
        cmocka_unit_test(test_rule_tags),
        cmocka_unit_test(test_token_never_kept),
        cmocka_unit_test(test_dump_no_token),
        cmocka_unit_test(test_dump_typed),
        cmocka_unit_test(test_dump_reads_back),
        cmocka_unit_test(test_print),
        cmocka_unit_test(test_hash),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_edit_distance),
        cmocka_unit_test_setup_teardown(test_corpus_bad, save_cwd, restore_cwd),
        cmocka_unit_test(test_corpus_good),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
