/* hub_card.c — the README.md model card pushed with an adapter or a merged model: the YAML front
 * matter the Hub indexes (base_model only when the config names a Hub id: a local path would be
 * refused as metadata; library_name; tags; datasets that are Hub ids) and a body that says what the
 * model is, what it was trained on and how, where training ended, and how to use it with ptrain
 * and with PEFT/transformers. Pure text, no I/O (tests/unit/test_hub.c checks it). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <math.h>
#include <string.h>

#include "ptrain/hub.h"

/* "org/name" made of the characters Hub ids use, and not a path that exists as written. */
static bool hub_id(const char *s)
{
    const char *slash = s ? strchr(s, '/') : NULL;
    if (!slash || slash == s || !slash[1] || strchr(slash + 1, '/') || s[0] == '.') return false;
    size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./");
    return n == strlen(s) && !strstr(s, "..") && !strstr(s, ".gguf") && !strstr(s, ".safetensors");
}

static const char *short_name(const char *repo) { return strrchr(repo, '/') ? strrchr(repo, '/') + 1 : repo; }

/* A Hub id as it is; a local path by its last component (the card should not show the machine's paths). */
static const char *shown(const char *s)
{
    if (!s || hub_id(s)) return s ? s : "";
    size_t n = strlen(s);
    while (n > 1 && s[n - 1] == '/') n--;
    const char *p = s + n;
    while (p > s && p[-1] != '/') p--;
    return p;
}

static void front_matter(const hub_card_info *c, strbuf *o)
{
    const hub_card_settings *s = &c->settings;
    bool adapter = !strcmp(c->what, "adapter"), id = hub_id(s->model_name);
    sb_printf(o, "---\n");
    if (id) sb_printf(o, "base_model: %s\n", s->model_name);
    sb_printf(o, "library_name: %s\n", adapter ? "peft" : "transformers");
    sb_printf(o, "pipeline_tag: text-generation\ntags:\n- ptrain\n- lora\n- qlora\n%s", adapter ? "" : "- merged\n");
    if (id) sb_printf(o, "- base_model:%s:%s\n", adapter ? "adapter" : "finetune", s->model_name);
    for (int i = 0; i < s->tags.n; i++) /* plain YAML scalars: config_check.c allows no other character */
        if (strcmp(s->tags.items[i], "ptrain") && strcmp(s->tags.items[i], "lora") && strcmp(s->tags.items[i], "qlora"))
            sb_printf(o, "- %s\n", s->tags.items[i]);
    int n_ids = 0;
    for (int i = 0; i < s->n_datasets; i++) n_ids += hub_id(s->datasets[i].name);
    if (n_ids) sb_printf(o, "datasets:\n");
    for (int i = 0; i < s->n_datasets; i++)
        if (hub_id(s->datasets[i].name)) sb_printf(o, "- %s\n", s->datasets[i].name);
    sb_printf(o, "---\n\n");
}

static void settings(const hub_card_info *c, strbuf *o)
{
    const hub_card_settings *g = &c->settings;
    sb_printf(o, "## Training\n\n");
    sb_printf(o, "- base model: `%s`\n", shown(g->model_name));
    for (int i = 0; i < g->n_datasets; i++) {
        sb_printf(o, "- dataset: `%s`", shown(g->datasets[i].name));
        if (g->datasets[i].num_samples >= 0) sb_printf(o, " (%ld samples)", g->datasets[i].num_samples);
        sb_printf(o, "\n");
    }
    sb_printf(o, "- steps: %lld of %lld on %d rank%s\n", (long long)c->step, (long long)c->total_steps, c->world,
              c->world > 1 ? "s" : "");
    if (!isnan(c->final_loss)) sb_printf(o, "- final training loss: %.4f\n", c->final_loss);
    if (!isnan(c->best_metric))
        sb_printf(o, "- best %s: %.4f (step %lld)\n", c->best_name ? c->best_name : "metric", c->best_metric,
                  (long long)c->best_step);
    sb_printf(o, "\n| setting | value |\n|---|---|\n");
    sb_printf(o, "| learning_rate | %g |\n| lr_scheduler_type | %s |\n| warmup_steps | %ld |\n", g->learning_rate,
              g->lr_scheduler_type, g->warmup_steps);
    sb_printf(o, "| max_steps | %ld |\n| num_train_epochs | %g |\n", g->max_steps, g->num_train_epochs);
    sb_printf(o, "| per_device_train_batch_size | %ld |\n| gradient_accumulation_steps | %ld |\n",
              g->per_device_train_batch_size, g->gradient_accumulation_steps);
    sb_printf(o, "| max_seq_length | %ld |\n| packing | %s |\n| load_in_4bit | %s |\n", g->max_seq_length,
              g->packing ? "true" : "false", g->load_in_4bit ? "true" : "false");
    sb_printf(o, "| lora_r | %ld |\n| lora_alpha | %g |\n| lora_dropout | %g |\n| use_rslora | %s |\n", g->lora_r,
              g->lora_alpha, g->lora_dropout, g->use_rslora ? "true" : "false");
    sb_printf(o, "| lora_target_modules |");
    for (int i = 0; i < g->lora_target_modules.n; i++) sb_printf(o, "%s%s", i ? ", " : " ", g->lora_target_modules.items[i]);
    sb_printf(o, " |\n| optim | %s |\n| weight_decay | %g |\n| seed | %ld |\n", g->optim, g->weight_decay, g->seed);
    if (c->chat_template) sb_printf(o, "| chat template | %s |\n", c->chat_template);
    sb_printf(o, "\n");
}

static void usage(const hub_card_info *c, strbuf *o)
{
    const char *base = shown(c->settings.model_name), *repo = c->repo_id;
    sb_printf(o, "## Use\n\nWith ptrain:\n\n```sh\nhf download %s --local-dir %s\n", repo, short_name(repo));
    if (!strcmp(c->what, "adapter"))
        sb_printf(o, "ptrain generate --model %s --adapter %s --chat --prompt \"...\"\n```\n\n", base, short_name(repo));
    else sb_printf(o, "ptrain generate --model %s --chat --prompt \"...\"\n```\n\n", short_name(repo));
    sb_printf(o, "With transformers%s:\n\n```python\nfrom transformers import AutoModelForCausalLM, AutoTokenizer\n",
              strcmp(c->what, "adapter") ? "" : " and PEFT");
    if (!strcmp(c->what, "adapter"))
        sb_printf(o, "from peft import PeftModel\n\nbase = AutoModelForCausalLM.from_pretrained(\"%s\")\n"
                  "model = PeftModel.from_pretrained(base, \"%s\")\ntokenizer = AutoTokenizer.from_pretrained(\"%s\")\n",
                  base, repo, base);
    else
        sb_printf(o, "\nmodel = AutoModelForCausalLM.from_pretrained(\"%s\")\ntokenizer = AutoTokenizer.from_pretrained(\"%s\")\n",
                  repo, repo);
    sb_printf(o, "```\n");
}

void hub_card_text(const hub_card_info *c, strbuf *o)
{
    bool adapter = !strcmp(c->what, "adapter");
    front_matter(c, o);
    sb_printf(o, "# %s\n\n", short_name(c->repo_id));
    sb_printf(o, "%s `%s`, fine-tuned with QLoRA (LoRA on the 4-bit quantized base) by ptrain %s.\n\n",
              adapter ? "A LoRA adapter (PEFT format) for" : "The merged model (base + LoRA) of", shown(c->settings.model_name),
              PACKAGE_VERSION);
    if (adapter && c->n_params > 0) sb_printf(o, "Trainable parameters: %ld.\n\n", c->n_params);
    settings(c, o);
    usage(c, o);
}
