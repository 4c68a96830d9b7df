/* config_check.c — rules between keys, derived defaults, the `ptrain check` table and the hash
 * every rank compares. The rules are the ones a Hugging Face Trainer user expects, plus the holes
 * of the Python trainer that ptrain closes (e.g. load_best_model_at_end without an eval set). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"
#include "ptrain/gguf_methods.h"
#include "ptrain/method.h"


/* Report a rule broken at the position of key (or at the top of the file when it was not given). */
static void rule_error(const pt_config *cfg, config_report *errors, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void rule_error(const pt_config *cfg, config_report *errors, const char *key, const char *fmt, ...)
{
    int i = key_index(config_keys, config_nkeys, key);
    int line = i >= 0 && cfg->key_line[i] ? cfg->key_line[i] : 1;
    int col = i >= 0 && cfg->key_col[i] ? cfg->key_col[i] : 1;
    strbuf msg = {0};
    va_list ap;
    va_start(ap, fmt);
    sb_vprintf(&msg, fmt, ap);
    va_end(ap);
    report_add(errors, NULL, (size_t)line, (size_t)col, "%s: %s", key, sb_text(&msg));
    sb_free(&msg);
}

static bool is(const char *a, const char *b) { return a && strcmp(a, b) == 0; }
static bool missing(const char *s) { return !s || !*s; }

static void check_model(pt_config *cfg, config_report *errors)
{
    if (cfg->full_finetuning)
        rule_error(cfg, errors, "full_finetuning",
                   "ptrain trains LoRA adapters on a frozen 4-bit base; remove the key or set it false");
    if (cfg->load_in_8bit && cfg->load_in_4bit)
        rule_error(cfg, errors, "load_in_8bit",
                   "load_in_4bit and load_in_8bit are both true; keep one (ptrain's base is 4-bit: "
                   "drop load_in_8bit)");
    else if (cfg->load_in_8bit)
        rule_error(cfg, errors, "load_in_8bit",
                   "ptrain has no 8-bit base; use load_in_4bit: true (NF4) or load_in_4bit: false "
                   "(weights as stored)");
    if (cfg->lora_bias != LORA_BIAS_NONE)
        rule_error(cfg, errors, "lora_bias",
                   "ptrain trains no bias terms (the base is frozen in 4-bit); use none");
    if (cfg->lora_target_modules.n == 0)
        rule_error(cfg, errors, "lora_target_modules", "expected at least one projection, found an empty list");
    if (!*cfg->model_name) rule_error(cfg, errors, "model_name", "expected a model id or path, found \"\"");
    if (cfg->dtype == COMPUTE_FLOAT16) /* float32 is the CPU's: refused where a GPU would run it (main.c) */
        rule_error(cfg, errors, "dtype",
                   "float16 compute (with loss scaling) is not implemented in ptrain: the GPU computes in bfloat16, "
                   "which needs no loss scaling, and the CPU in float32; use auto or bfloat16");
}

/* An integer from lo to hi written as text (a list item or a mapping value), into *v. */
static bool int_text(const char *text, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    *v = text && *text ? strtol(text, &end, 10) : 0;
    return text && *text && !*end && !errno && *v >= lo && *v <= hi;
}

/* Unsloth's get_peft_model trains embed_tokens and lm_head named in target_modules in full, as
 * modules_to_save: they move from lora_target_modules to modules_to_save (config_notes says so). */
static void move_targets(pt_config *cfg, config_report *errors)
{
    pt_strlist *t = &cfg->lora_target_modules, *s = &cfg->modules_to_save;
    for (int i = 0; i < t->n;) {
        int bit = !strcmp(t->items[i], "embed_tokens") ? 1 : !strcmp(t->items[i], "lm_head") ? 2 : 0;
        if (!bit) {
            i++;
            continue;
        }
        bool have = false;
        for (int k = 0; k < s->n; k++) have |= !strcmp(s->items[k], t->items[i]);
        if (!have) {
            char **grown = realloc(s->items, sizeof *grown * (size_t)(s->n + 1));
            if (!grown) {
                rule_error(cfg, errors, "lora_target_modules", "out of memory");
                return;
            }
            s->items = grown;
            s->items[s->n++] = t->items[i];
        } else
            free(t->items[i]);
        memmove(t->items + i, t->items + i + 1, sizeof *t->items * (size_t)(t->n - i - 1));
        t->n--;
        cfg->targets_moved |= bit;
    }
    int from = key_index(config_keys, config_nkeys, "lora_target_modules"), to = key_index(config_keys, config_nkeys,
                                                                                       "modules_to_save");
    if (cfg->targets_moved && from >= 0 && to >= 0 && !cfg->is_set[to]) { /* given there, as ptrain check shows */
        cfg->is_set[to] = 1;
        cfg->key_line[to] = cfg->key_line[from], cfg->key_col[to] = cfg->key_col[from];
    }
    if (cfg->targets_moved && !t->n)
        rule_error(cfg, errors, "lora_target_modules", "names no projection besides embed_tokens and lm_head (which "
                   "are trained in full, as modules_to_save); add the projections that get adapters");
}

/* PEFT's selectors: layer numbers, layers_pattern only beside them (as PEFT's LoraConfig requires),
 * finetune_last_n_layers instead of layers_to_transform, ranks and alphas as numbers. The patterns
 * themselves are compiled when the adapters are made (adapter_select.c). */
static void check_selectors(pt_config *cfg, config_report *errors)
{
    long v;
    for (int i = 0; i < cfg->layers_to_transform.n; i++)
        if (!int_text(cfg->layers_to_transform.items[i], 0, 1 << 20, &v)) {
            rule_error(cfg, errors, "layers_to_transform", "expected layer numbers (0 for the first layer), found "
                       "\"%s\"", shown_text(cfg->layers_to_transform.items[i]).s);
            break;
        }
    if (cfg->layers_to_transform.n && cfg->finetune_last_n_layers != -1)
        rule_error(cfg, errors, "finetune_last_n_layers", "layers_to_transform names the layers already; give one "
                   "of the two keys");
    if (cfg->layers_pattern.n && !cfg->layers_to_transform.n && cfg->finetune_last_n_layers == -1)
        rule_error(cfg, errors, "layers_pattern", "is used only with layers_to_transform (PEFT refuses it alone); "
                   "add layers_to_transform or remove layers_pattern");
    const char *init = cfg->init_lora_weights ? cfg->init_lora_weights : "true";
    static const char *const trues[] = {"true", "yes", "on", "1", NULL}, *const falses[] = {"false", "no", "off", "0", NULL};
    static const char *const base_changing[] = {"corda", "lora_ga", NULL};
    static const char *const data_driven[] = {"loftq", "eva", "orthogonal", "mica", NULL};
    bool known = false;
    for (int i = 0; trues[i]; i++)
        if (!strcasecmp(init, trues[i])) cfg->lora_init = LORA_INIT_TRUE, known = true;
    for (int i = 0; falses[i]; i++)
        if (!strcasecmp(init, falses[i])) cfg->lora_init = LORA_INIT_FALSE, known = true;
    if (!strcasecmp(init, "gaussian")) cfg->lora_init = LORA_INIT_GAUSSIAN, known = true;
    if (!strcasecmp(init, "pissa")) cfg->lora_init = LORA_INIT_PISSA, known = true;
    if (!strcasecmp(init, "olora")) cfg->lora_init = LORA_INIT_OLORA, known = true;
    if (!strncasecmp(init, "pissa_niter_", 12)) {
        known = true;
        if (int_text(init + 12, 0, 999, &v))
            cfg->lora_init = LORA_INIT_PISSA_NITER, cfg->lora_init_niter = (int)v;
        else
            rule_error(cfg, errors, "init_lora_weights", "%s: expected pissa_niter_N with N the number of subspace "
                       "iterations, 0 to 999", shown_text(init).s);
    }
    for (int i = 0; !known && base_changing[i]; i++)
        if (!strncasecmp(init, base_changing[i], strlen(base_changing[i]))) {
            rule_error(cfg, errors, "init_lora_weights", "%s is not implemented: it needs data (the model's activations "
                       "or gradients) besides the base weights; use pissa, pissa_niter_N, olora, true, false or "
                       "gaussian", shown_text(init).s);
            known = true;
        }
    for (int i = 0; !known && data_driven[i]; i++)
        if (!strcasecmp(init, data_driven[i])) {
            rule_error(cfg, errors, "init_lora_weights", "%s needs more than the base weights (quantization-aware "
                       "or data-driven initialization, or a different layer) and is not implemented in ptrain; use "
                       "true, false, gaussian, pissa, pissa_niter_N or olora", shown_text(init).s);
            known = true;
        }
    move_targets(cfg, errors);
    for (int i = 0; i < cfg->modules_to_save.n; i++) { /* the key's choices: embed_tokens, lm_head */
        if (!strcmp(cfg->modules_to_save.items[i], "embed_tokens")) cfg->save_embed_tokens = true;
        if (!strcmp(cfg->modules_to_save.items[i], "lm_head")) cfg->save_lm_head = true;
    }
    if (!known)
        rule_error(cfg, errors, "init_lora_weights", "expected true, false, gaussian, pissa, pissa_niter_N or olora, found "
                   "\"%s\"",
                   shown_text(init).s);
    for (int i = 0; i < cfg->rank_pattern.n; i++)
        if (!int_text(cfg->rank_pattern.values[i], 1, 4096, &v)) {
            rule_error(cfg, errors, "rank_pattern", "%s: expected a rank from 1 to 4096, found \"%s\"",
                       shown_text(cfg->rank_pattern.keys[i]).s, shown_text(cfg->rank_pattern.values[i]).s);
            break;
        }
    for (int i = 0; i < cfg->alpha_pattern.n; i++) {
        const char *t = cfg->alpha_pattern.values[i];
        char *end;
        double a = t && *t ? strtod(t, &end) : 0;
        if (!t || !*t || *end || !isfinite(a) || !(a > 0)) {
            rule_error(cfg, errors, "alpha_pattern", "%s: expected a positive number, found \"%s\"",
                       shown_text(cfg->alpha_pattern.keys[i]).s, shown_text(t).s);
            break;
        }
    }
}

/* method: the method's own default of beta; a method this ptrain does not train yet is refused
 * (never trained as another), naming those it trains. */
static void check_method(pt_config *cfg, config_report *errors)
{
    const method_info *mi = method_info_of(cfg->method);
    if (!config_is_set(cfg, "beta")) cfg->beta = mi->beta;
    if (!mi->built) {
        char built[256];
        method_built_names(built, sizeof built);
        rule_error(cfg, errors, "method",
                   "%s (TRL's %s) is not built in this ptrain yet; the methods it trains: %s. Use one of those, "
                   "or remove the key (sft)",
                   mi->name, mi->trainer, built);
    }
    if (cfg->method == METHOD_CPT && cfg->assistant_only_loss == PT_TRUE)
        rule_error(cfg, errors, "assistant_only_loss",
                   "cpt (continued pretraining) trains on every token; remove the key or use method: sft");
    if (cfg->modules_to_save.n && cfg->method != METHOD_SFT && cfg->method != METHOD_CPT)
        rule_error(cfg, errors, "modules_to_save",
                   "%s: training the embedding or the LM head in full is built for sft and cpt only (a preference "
                   "method's reference and reward's score head would need their own copies); remove the key",
                   mi->name);
    if (mi->pairs && cfg->packing)
        rule_error(cfg, errors, "packing",
                   "%s trains on pairs, each its two sequences in one micro-batch; packing does not apply: remove it",
                   mi->name);
    if (mi->unpaired && cfg->packing)
        rule_error(cfg, errors, "packing",
                   "%s batches each row with a mismatched KL sequence; packing does not apply: remove it", mi->name);
    if (!config_is_set(cfg, "epsilon_high")) cfg->epsilon_high = cfg->epsilon; /* GRPOConfig's default */
    if (!config_is_set(cfg, "num_generations_eval")) cfg->num_generations_eval = cfg->num_generations; /* TRL's */
    if (cfg->method == METHOD_GRPO) {
        if (cfg->num_generations < 2)
            rule_error(cfg, errors, "num_generations",
                       "GRPO normalises each completion's reward within its prompt's group, so it needs at least 2 (as "
                       "TRL's GRPOTrainer)");
        else if (cfg->per_device_train_batch_size % cfg->num_generations != 0)
            rule_error(cfg, errors, "per_device_train_batch_size",
                       "GRPO counts completions (as TRL), and each prompt's num_generations (%ld) completions share a "
                       "micro-batch: set it to a multiple of %ld", cfg->num_generations, cfg->num_generations);
        if (cfg->reward_funcs.n == 0)
            rule_error(cfg, errors, "reward_funcs",
                       "GRPO scores its completions with reward functions: give built-in names (exact_answer, "
                       "regex:PATTERN, think_format, length) or Python module:function paths");
        if (cfg->packing) rule_error(cfg, errors, "packing", "GRPO generates its completions; packing does not apply: remove it");
        long eval_batch = config_is_set(cfg, "per_device_eval_batch_size") ? cfg->per_device_eval_batch_size
                                                                           : cfg->per_device_train_batch_size;
        if (cfg->val_split_ratio > 0 && cfg->num_generations_eval > 0 && eval_batch % cfg->num_generations_eval != 0)
            rule_error(cfg, errors, "per_device_eval_batch_size",
                       "GRPO evaluates by generating num_generations_eval (%ld; default num_generations) completions "
                       "of each held-out prompt, and the eval batch counts completions (as TRL): set it to a multiple "
                       "of %ld", cfg->num_generations_eval, cfg->num_generations_eval);
    }
    if (mi->unpaired && cfg->per_device_train_batch_size < 2)
        rule_error(cfg, errors, "per_device_train_batch_size",
                   "%s estimates its KL term from the other rows of a micro-batch, so it needs at least 2 (as TRL's "
                   "KTOTrainer); raise it (and lower gradient_accumulation_steps to keep the global batch)",
                   mi->name);
}

static void check_training(pt_config *cfg, config_report *errors)
{
    if (!config_is_set(cfg, "data_seed")) cfg->data_seed = cfg->seed;
    if (!config_is_set(cfg, "per_device_eval_batch_size"))
        cfg->per_device_eval_batch_size = cfg->per_device_train_batch_size;
    if (!config_is_set(cfg, "save_strategy"))
        cfg->save_strategy = config_is_set(cfg, "save_steps") ? STRATEGY_STEPS : STRATEGY_NO;
    bool has_eval = cfg->val_split_ratio > 0;
    if (cfg->load_best_model_at_end) {
        if (!has_eval)
            rule_error(cfg, errors, "load_best_model_at_end",
                       "needs an eval set to pick the best checkpoint; set val_split_ratio (e.g. 0.05)");
        else if (cfg->save_strategy != cfg->eval_strategy)
            rule_error(cfg, errors, "load_best_model_at_end",
                       "needs save_strategy (%s) to equal eval_strategy (%s)",
                       config_strategy_choices[cfg->save_strategy], config_strategy_choices[cfg->eval_strategy]);
        else if (cfg->save_strategy == STRATEGY_NO)
            rule_error(cfg, errors, "load_best_model_at_end",
                       "needs checkpoints to pick from, but save_strategy and eval_strategy are no; "
                       "set both to steps or epoch");
        else if (cfg->save_strategy == STRATEGY_STEPS && cfg->save_steps >= 1 && cfg->eval_steps >= 1 &&
                 fmod(cfg->save_steps, cfg->eval_steps) != 0)
            rule_error(cfg, errors, "load_best_model_at_end",
                       "needs save_steps (%g) to be a multiple of eval_steps (%g)", cfg->save_steps,
                       cfg->eval_steps);
    }
    if (config_is_set(cfg, "early_stopping_patience") && !has_eval)
        rule_error(cfg, errors, "early_stopping_patience",
                   "needs an eval set to watch; set val_split_ratio (e.g. 0.05)");
    if (config_is_set(cfg, "eval_strategy") && cfg->eval_strategy != STRATEGY_NO && !has_eval)
        rule_error(cfg, errors, "eval_strategy",
                   "there is no eval set to evaluate; set val_split_ratio (e.g. 0.05) or use no");
    if (config_is_set(cfg, "resume_from_checkpoint") && cfg->resume_from_checkpoint.path &&
        !*cfg->resume_from_checkpoint.path)
        rule_error(cfg, errors, "resume_from_checkpoint", "expected true, false or a checkpoint path, found \"\"");
    if (cfg->overwrite_output_dir && cfg->resume_from_checkpoint.on)
        rule_error(cfg, errors, "overwrite_output_dir",
                   "true removes the checkpoints resume_from_checkpoint (%s) continues from; keep one: "
                   "resume_from_checkpoint to continue, overwrite_output_dir to start over",
                   cfg->resume_from_checkpoint.path ? shown_text(cfg->resume_from_checkpoint.path).s : "true");
}

/* lr_scheduler_kwargs: the arguments lr_scheduler_type's schedule takes in transformers, as numbers,
 * into cfg->sched_args (the others at transformers' defaults); any other is an error naming those. */
static void check_schedule(pt_config *cfg, config_report *errors)
{
    static const char *const takes[SCHED_COUNT] = {
        [SCHED_COSINE] = "num_cycles",
        [SCHED_COSINE_WITH_RESTARTS] = "num_cycles",
        [SCHED_POLYNOMIAL] = "lr_end, power",
        [SCHED_COSINE_WITH_MIN_LR] = "num_cycles, min_lr, min_lr_rate",
    };
    const char *type = config_sched_choices[cfg->lr_scheduler_type];
    pt_sched_args *a = &cfg->sched_args;
    *a = (pt_sched_args){.num_cycles = cfg->lr_scheduler_type == SCHED_COSINE_WITH_RESTARTS ? 1.0 : 0.5,
                         .lr_end = 1e-7, .power = 1.0, .min_lr_rate = 0.0};
    bool min_lr = false, min_lr_rate = false;
    const pt_strmap *kw = &cfg->lr_scheduler_kwargs;
    for (int i = 0; i < kw->n; i++) {
        const char *name = kw->keys[i], *text = kw->values[i];
        const char *list = takes[cfg->lr_scheduler_type];
        size_t n = strlen(name);
        const char *at = list ? strstr(list, name) : NULL;
        if (!n || !at || (at[n] && at[n] != ',') || (at != list && at[-1] != ' ')) {
            if (list)
                rule_error(cfg, errors, "lr_scheduler_kwargs",
                           "%s is not an argument of the %s schedule, which takes %s", shown_text(name).s, type, list);
            else
                rule_error(cfg, errors, "lr_scheduler_kwargs", "the %s schedule takes no arguments (%s given); remove "
                           "lr_scheduler_kwargs, or use a schedule that takes it (cosine: num_cycles; polynomial: "
                           "lr_end, power; cosine_with_min_lr: min_lr_rate)", type, shown_text(name).s);
            continue;
        }
        char *end;
        double v = strtod(text, &end);
        if (end == text || *end || !isfinite(v)) {
            rule_error(cfg, errors, "lr_scheduler_kwargs", "%s: expected a number, found \"%s\"", name,
                       shown_text(text).s);
            continue;
        }
        if (!strcmp(name, "num_cycles")) {
            if (v <= 0)
                rule_error(cfg, errors, "lr_scheduler_kwargs", "num_cycles: expected a positive number, found %g", v);
            a->num_cycles = v;
        } else if (!strcmp(name, "lr_end")) {
            if (v < 0 || v >= cfg->learning_rate)
                rule_error(cfg, errors, "lr_scheduler_kwargs",
                           "lr_end: expected a number from 0 to below learning_rate (%g), found %g",
                           cfg->learning_rate, v);
            a->lr_end = v;
        } else if (!strcmp(name, "power")) {
            if (v <= 0)
                rule_error(cfg, errors, "lr_scheduler_kwargs", "power: expected a positive number, found %g", v);
            a->power = v;
        } else { /* min_lr, min_lr_rate: the final learning rate, absolute or over the peak */
            bool rate = !strcmp(name, "min_lr_rate");
            double r = rate ? v : v / cfg->learning_rate;
            if (r < 0 || r > 1)
                rule_error(cfg, errors, "lr_scheduler_kwargs", "%s: expected a number from 0 to %s, found %g", name,
                           rate ? "1" : "learning_rate", v);
            (rate ? &min_lr_rate : &min_lr)[0] = true;
            a->min_lr_rate = r;
        }
    }
    if (min_lr && min_lr_rate)
        rule_error(cfg, errors, "lr_scheduler_kwargs", "min_lr and min_lr_rate say the same; give one of them");
    else if (cfg->lr_scheduler_type == SCHED_COSINE_WITH_MIN_LR && !min_lr && !min_lr_rate)
        rule_error(cfg, errors, "lr_scheduler_type", "cosine_with_min_lr needs the final learning rate: set "
                   "lr_scheduler_kwargs to {min_lr_rate: 0.1} (a tenth of learning_rate) or {min_lr: 1e-5}");
}

/* One part of a repository id: 1 to 96 of [A-Za-z0-9_.-], first and last a word character. */
static bool repo_part_ok(const char *s, size_t n)
{
    static const char word[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
    if (n < 1 || n > 96 || !strchr(word, s[0]) || !strchr(word, s[n - 1])) return false;
    for (size_t i = 0; i < n; i++)
        if (!s[i] || (!strchr(word, s[i]) && s[i] != '-' && s[i] != '.')) return false;
    return true;
}

const char *config_repo_id_problem(const char *id)
{
    const char *slash = id ? strchr(id, '/') : NULL;
    if (!slash) return "it has no namespace (the user or organization it belongs to)";
    if (strchr(slash + 1, '/')) return "it has more than one '/'";
    if (!repo_part_ok(id, (size_t)(slash - id)) || !repo_part_ok(slash + 1, strlen(slash + 1)))
        return "each part must be 1 to 96 letters, digits, '-', '_' or '.', and not start or end with '-' or '.'";
    if (strstr(id, "--") || strstr(id, "..")) return "it contains \"--\" or \"..\"";
    size_t n = strlen(id);
    if (n >= 4 && !strcmp(id + n - 4, ".git")) return "it ends in \".git\"";
    return NULL;
}

/* hub_model_id and hf_model_name, when given, must be ids the Hub takes. */
static void check_repo_id(pt_config *cfg, config_report *errors, const char *key, const char *id, const char *example)
{
    const char *why = missing(id) ? NULL : config_repo_id_problem(id);
    if (why)
        rule_error(cfg, errors, key, "\"%s\" is not a Hub repository id: %s; write NAMESPACE/NAME with your user or "
                   "organization name, e.g. \"%s\"", shown_text(id).s, why, example);
}

static void check_publishing(pt_config *cfg, config_report *errors)
{
    if (cfg->push_to_hub && missing(cfg->hub_model_id))
        rule_error(cfg, errors, "push_to_hub", "needs hub_model_id (e.g. \"yourname/model-lora\")");
    if (cfg->huggingface_save && missing(cfg->hf_model_name))
        rule_error(cfg, errors, "huggingface_save", "needs hf_model_name (e.g. \"yourname/model\")");
    check_repo_id(cfg, errors, "hub_model_id", cfg->hub_model_id, "yourname/model-lora");
    /* tags go into the card's YAML front matter as plain scalars: the characters of Hub tags only */
    for (int i = 0; i < cfg->tags.n; i++) {
        const char *tag = cfg->tags.items[i];
        size_t n = strlen(tag);
        static const char chars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/+";
        if (n < 1 || n > 128 || strspn(tag, chars) != n || strchr("-:", tag[0]))
            rule_error(cfg, errors, "tags", "\"%s\" is not a Hub tag: up to 128 of letters, digits and - _ . : / +, "
                       "not starting with - or :", shown_text(tag).s);
    }
    if (cfg->commit_message && (!*cfg->commit_message || strchr(cfg->commit_message, '\n')))
        rule_error(cfg, errors, "commit_message", "expected one line of text (a commit's title), found \"%s\"",
                   shown_text(cfg->commit_message).s);
    check_repo_id(cfg, errors, "hf_model_name", cfg->hf_model_name, "yourname/model");
    if (cfg->ollama_save && missing(cfg->ollama_model))
        rule_error(cfg, errors, "ollama_save", "needs ollama_model (a name for the Ollama model)");
    for (int i = 0; cfg->huggingface_save_gguf && i < cfg->quantization_method.n; i++)
        if (!gguf_method_known(cfg->quantization_method.items[i]))
            rule_error(cfg, errors, "quantization_method", "%s: ptrain cannot write it yet; choose from %s",
                       cfg->quantization_method.items[i], gguf_method_list());
}

static bool report_has(const pt_config *cfg, const char *name)
{
    for (int i = 0; i < cfg->report_to.n; i++)
        if (is(cfg->report_to.items[i], name)) return true;
    return false;
}

bool config_report_tensorboard(const pt_config *cfg) { return report_has(cfg, "tensorboard") || report_has(cfg, "all"); }

/* run_name names a directory (output_dir/runs/RUN_NAME): one component, printable. */
static const char *run_name_problem(const char *name)
{
    if (!*name) return "it is empty";
    if (!strcmp(name, ".") || !strcmp(name, "..")) return "it is . or ..";
    if (strchr(name, '/')) return "it has a '/'";
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c == 0x7f) return "it has a control character";
    return NULL;
}

static void check_reporting(pt_config *cfg, config_report *errors)
{
    if (report_has(cfg, "none") && cfg->report_to.n > 1)
        rule_error(cfg, errors, "report_to", "\"none\" among other entries; write none alone, or the list without it");
    const char *why = cfg->run_name ? run_name_problem(cfg->run_name) : NULL;
    if (why)
        rule_error(cfg, errors, "run_name", "\"%s\" cannot name a directory under output_dir/runs/: %s; use a name "
                   "such as \"lora-r16\", or set logging_dir", shown_text(cfg->run_name).s, why);
    if (cfg->logging_dir && !*cfg->logging_dir)
        rule_error(cfg, errors, "logging_dir", "expected a directory, found \"\"; remove the key for "
                   "output_dir/runs/RUN_NAME");
}

/* The services of report_to as people call them. */
static const char *service_name(const char *key)
{
    static const char *const names[][2] = {
        {"wandb", "Weights & Biases"}, {"mlflow", "MLflow"},     {"comet_ml", "Comet"},   {"azure_ml", "Azure ML"},
        {"clearml", "ClearML"},        {"codecarbon", "CodeCarbon"}, {"dagshub", "DagsHub"}, {"dvclive", "DVCLive"},
        {"flyte", "Flyte"},            {"neptune", "Neptune"},   {"swanlab", "SwanLab"},  {"trackio", "Trackio"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (is(key, names[i][0])) return names[i][1];
    return key;
}

/* embedding_learning_rate is the learning rate of the modules_to_save that cpt trains (UnslothTrainer's
 * embedding parameter group); other methods ignore it, as the seed system does, and cpt without
 * modules_to_save has nothing to apply it to. */
static void note_embedding_lr(const pt_config *cfg, FILE *warn)
{
    int k = key_index(config_keys, config_nkeys, "embedding_learning_rate");
    if (!warn || k < 0 || !config_is_set(cfg, "embedding_learning_rate") || cfg->method != METHOD_CPT) return;
    if (!cfg->modules_to_save.n)
        fprintf(warn, "ptrain: warning: %s:%d:%d: embedding_learning_rate: cpt without modules_to_save trains no "
                "embedding, so this learning rate applies to nothing; set modules_to_save: [embed_tokens, lm_head] "
                "to adapt the vocabulary\n", shown_text(cfg->path).s, cfg->key_line[k], cfg->key_col[k]);
}

void config_notes(const pt_config *cfg, FILE *warn)
{
    int t = key_index(config_keys, config_nkeys, "lora_target_modules");
    if (warn && t >= 0 && cfg->targets_moved)
        fprintf(warn, "ptrain: note: %s:%d:%d: lora_target_modules: %s trained in full as modules_to_save, as Unsloth's "
                "get_peft_model trains them (LoRA adapters go on the projections)\n", shown_text(cfg->path).s,
                cfg->key_line[t], cfg->key_col[t],
                cfg->targets_moved == 3 ? "embed_tokens and lm_head are" : cfg->targets_moved == 1 ? "embed_tokens is"
                                                                                                   : "lm_head is");
    note_embedding_lr(cfg, warn);
    strbuf names = {0};
    int n = 0;
    for (int i = 0; i < cfg->report_to.n; i++) {
        const char *item = cfg->report_to.items[i];
        if (is(item, "none") || is(item, "all") || is(item, "tensorboard")) continue;
        sb_printf(&names, "%s%s", n++ ? ", " : "", service_name(item));
    }
    int k = key_index(config_keys, config_nkeys, "report_to");
    if (n && warn) {
        strbuf tb = {0};
        if (config_report_tensorboard(cfg))
            sb_printf(&tb, ", and TensorBoard event files under %s%s", cfg->logging_dir ? cfg->logging_dir : cfg->output_dir,
                      cfg->logging_dir ? "" : "/runs/RUN_NAME");
        else sb_printf(&tb, "; add tensorboard to report_to for TensorBoard event files too");
        fprintf(warn, "ptrain: warning: %s:%d:%d: report_to: ptrain cannot send metrics to %s from a compute node (it "
                "has no client for %s, and compute nodes often have no network); it writes %s/metrics.jsonl and "
                "%s/training.png%s\n", shown_text(cfg->path).s, cfg->key_line[k], cfg->key_col[k], sb_text(&names),
                n > 1 ? "them" : "it", shown_text(cfg->output_dir).s, shown_text(cfg->output_dir).s, sb_text(&tb));
        sb_free(&tb);
    }
    sb_free(&names);
}

/* The rules within one entry (filter_data, format) are checked where it is read, in config.c,
 * at the position of the value; here only the derived default. */
static void check_datasets(pt_config *cfg, config_report *errors)
{
    (void)errors;
    for (int d = 0; d < cfg->n_datasets; d++)
        if (cfg->datasets[d].seed < 0) cfg->datasets[d].seed = cfg->seed;
}

/* use_dora: DoRA is built and held to PEFT (and TRL's trainers with PEFT's use_dora) for sft, cpt,
 * dpo, kto, cpo, orpo, reward and grpo (the reference of dpo, kto and grpo: the base alone, as PEFT's
 * disabled adapter is), without dropout (PEFT's DoRA applies the dropout to the LoRA input only, a
 * path ptrain does not have), on the base as loaded (pissa and olora change the base, and PEFT's
 * conversion of their adapters does not carry magnitudes). */
static void check_dora(pt_config *cfg, config_report *errors)
{
    if (!cfg->use_dora) return;
    if (cfg->lora_dropout > 0)
        rule_error(cfg, errors, "use_dora",
                   "DoRA trains without lora_dropout in ptrain (PEFT drops the input of the LoRA part only, which "
                   "ptrain's DoRA does not do); set lora_dropout to 0");
    if (cfg->lora_init == LORA_INIT_PISSA || cfg->lora_init == LORA_INIT_OLORA || cfg->lora_init == LORA_INIT_PISSA_NITER)
        rule_error(cfg, errors, "use_dora",
                   "init_lora_weights %s trains on a residual base, whose conversion back to the original model "
                   "(PEFT's path_initial_model_for_weight_conversion) does not hold DoRA's magnitudes; use "
                   "init_lora_weights true, false or gaussian with DoRA", shown_text(cfg->init_lora_weights).s);
}

bool config_check_values(pt_config *cfg, config_report *errors)
{
    int before = errors->n;
    check_model(cfg, errors);
    check_selectors(cfg, errors);
    check_method(cfg, errors);
    check_dora(cfg, errors);
    check_training(cfg, errors);
    check_schedule(cfg, errors);
    check_publishing(cfg, errors);
    check_reporting(cfg, errors);
    check_datasets(cfg, errors);
    return errors->n == before;
}

pt_status config_validate_launch(const pt_config *cfg, int world_size)
{
    const char *map = cfg->device_map;
    if (world_size > 1 && map &&
        (is(map, "auto") || is(map, "balanced") || is(map, "balanced_low_0") || is(map, "sequential"))) {
        int i = key_index(config_keys, config_nkeys, "device_map");
        return ERR(PT_ERR_USER,
                   "%s:%d:%d: device_map: \"%s\" splits one model across devices in one process, "
                   "which conflicts with data-parallel training over %d ranks; remove device_map "
                   "(each rank then loads the whole model on its own local device)",
                   shown_text(cfg->path).s, cfg->key_line[i], cfg->key_col[i], shown_text(map).s, world_size);
    }
    return PT_OK;
}

/* Whether a numeric field still holds 0, i.e. an optional number that was never given. */
static bool number_is_zero(const key_spec *spec, const pt_config *cfg)
{
    const char *slot = (const char *)cfg + spec->offset;
    if (spec->type == K_INT) return *(const long *)slot == 0;
    if (spec->type == K_FLOAT) return *(const double *)slot == 0.0;
    return false;
}

/* One key's value as the table shows it: optional numbers never given read "(unset)", not 0. */
static void table_value(const pt_config *cfg, int i, strbuf *sb)
{
    const key_spec *spec = &config_keys[i];
    if (!cfg->is_set[i] && !spec->def && number_is_zero(spec, cfg))
        sb_printf(sb, "(unset)");
    else
        key_value_text(spec, cfg, sb);
    if (spec->offset == offsetof(pt_config, lora_target_modules) && cfg->lora_all_linear)
        sb_printf(sb, " (all-linear: and the model's other linear projections, as PEFT's all-linear)");
}

char *config_value_text(const pt_config *cfg, const char *key)
{
    int i = key_index(config_keys, config_nkeys, key);
    if (i < 0 || config_keys[i].type == K_DATASETS) return NULL;
    strbuf sb = {0};
    table_value(cfg, i, &sb);
    return sb.data ? sb.data : xstrdup("");
}

enum { TABLE_WIDTH = 30 };

/* The table's rows of the dataset entries, each key expanded: "dataset[0].name  ...". */
static void dataset_rows(const pt_config *cfg, strbuf *sb)
{
    if (cfg->n_datasets == 0) sb_printf(sb, "%-*s (none given)\n", TABLE_WIDTH, "dataset");
    for (int d = 0; d < cfg->n_datasets; d++)
        for (int j = 0; j < dataset_nkeys; j++) {
            char name[96];
            snprintf(name, sizeof name, "dataset[%d].%s", d, dataset_keys[j].name);
            sb_printf(sb, "%-*s ", TABLE_WIDTH, name);
            key_value_text(&dataset_keys[j], &cfg->datasets[d], sb);
            sb_printf(sb, "\n");
        }
}

/* The table, written into sb: one "key  value" row per key, dataset entries expanded. */
static void config_table(const pt_config *cfg, strbuf *sb, bool mark_defaults)
{
    for (int i = 0; i < config_nkeys; i++) {
        const key_spec *spec = &config_keys[i];
        if (spec->type == K_SECRET) continue;
        if (spec->type == K_DATASETS) {
            dataset_rows(cfg, sb);
            continue;
        }
        sb_printf(sb, "%-*s ", TABLE_WIDTH, spec->name);
        table_value(cfg, i, sb);
        bool shows_unset = sb->len >= 7 && !strcmp(sb->data + sb->len - 7, "(unset)");
        sb_printf(sb, "%s\n", cfg->is_set[i] || shows_unset || !mark_defaults ? "" : "  (default)");
    }
}

void config_print(const pt_config *cfg, FILE *out)
{
    strbuf sb = {0};
    config_table(cfg, &sb, true);
    fprintf(out, "%-30s %s\n", "key", "value");
    fputs(sb_text(&sb), out);
    sb_free(&sb);
}

uint64_t config_hash(const pt_config *cfg)
{
    strbuf sb = {0};
    config_table(cfg, &sb, false);
    uint64_t h = util_fnv1a(UTIL_FNV_INIT, sb_text(&sb), sb.len);
    sb_free(&sb);
    return h;
}

void config_key_hashes(const pt_config *cfg, uint64_t *hashes)
{
    for (int i = 0; i < config_nkeys; i++) {
        strbuf sb = {0};
        if (config_keys[i].type == K_DATASETS) dataset_rows(cfg, &sb);
        else if (config_keys[i].type != K_SECRET) table_value(cfg, i, &sb);
        hashes[i] = util_fnv1a(UTIL_FNV_INIT, sb_text(&sb), sb.len);
        sb_free(&sb);
    }
}
