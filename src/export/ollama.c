/* ollama.c — an Ollama Modelfile for the fine-tune: FROM the merged GGUF (or FROM the base GGUF
 * plus ADAPTER adapter.gguf), the TEMPLATE in Ollama's Go-template syntax for the chat templates
 * ptrain knows (the one the adapter was trained with), the stop strings of that template, and the
 * user's model_parameters as PARAMETER lines. `ollama create` runs only when ollama is on PATH;
 * otherwise the exact command is printed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/export.h"
#include "ptrain/filewrite.h"
#include "ptrain/log.h"
#include "ptrain/util.h"

typedef struct {
    const char *name, *template_text, *stops[4], *system;
} ollama_template;

static const ollama_template templates[] = {
    {"chatml",
     "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n"
     "{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n",
     {"<|im_start|>", "<|im_end|>"}, NULL},
    {"smollm2",
     "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n"
     "{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n",
     {"<|im_start|>", "<|im_end|>"}, "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
    {"llama-3",
     "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}"
     "{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>{{ end }}"
     "<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>",
     {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, NULL},
    {"llama-3.1",
     "<|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
     "{{ if .System }}{{ .System }}{{ end }}<|eot_id|>"
     "{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>{{ end }}"
     "<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>",
     {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}, NULL},
    {"qwen2.5",
     "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}{{ if .Prompt }}<|im_start|>user\n"
     "{{ .Prompt }}<|im_end|>\n{{ end }}<|im_start|>assistant\n{{ .Response }}<|im_end|>\n",
     {"<|im_start|>", "<|im_end|>"}, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."},
    {"gemma",
     "<start_of_turn>user\n{{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}<end_of_turn>\n"
     "<start_of_turn>model\n{{ .Response }}<end_of_turn>\n",
     {"<start_of_turn>", "<end_of_turn>"}, NULL},
    {"mistral", "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }} [/INST]{{ .Response }}",
     {"[INST]", "[/INST]"}, NULL},
    {"mistral-v3", "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST]{{ .Response }}",
     {"[INST]", "[/INST]"}, NULL},
    {"alpaca",
     "{{ if .System }}{{ .System }}\n\n{{ end }}### Instruction:\n{{ .Prompt }}\n\n### Response:\n{{ .Response }}",
     {"### Instruction:"}, NULL},
};

/* llama-3.2 writes the day of rendering where llama-3.1 writes a fixed date; a Modelfile's text is
 * fixed, so it takes llama-3.1's. */
static const ollama_template *find_template(const char *name)
{
    if (name && !strcmp(name, "llama-3.2")) name = "llama-3.1";
    for (size_t i = 0; name && i < sizeof templates / sizeof templates[0]; i++)
        if (!strcmp(templates[i].name, name)) return &templates[i];
    return NULL;
}

/* A PARAMETER value: numbers as they are, anything else quoted. */
static void param_line(strbuf *sb, const char *key, const char *value)
{
    char *end;
    strtod(value, &end);
    bool number = *value && !*end;
    sb_printf(sb, number ? "PARAMETER %s %s\n" : "PARAMETER %s \"%s\"\n", key, value);
}

static pt_status check_params(const ollama_job *j)
{
    for (int i = 0; i < j->n_params; i++)
        if (strpbrk(j->param_keys[i], "\"\n\r \t") || strpbrk(j->param_values[i], "\"\n\r"))
            return ERR(PT_ERR_USER, "model_parameters: %s: a Modelfile PARAMETER cannot hold quotes or line breaks",
                       shown_text(j->param_keys[i]).s);
    return PT_OK;
}

static pt_status modelfile_text(const ollama_job *j, strbuf *sb)
{
    TRY(check_params(j));
    const ollama_template *t = find_template(j->chat_template);
    sb_printf(sb, "# Modelfile written by ptrain: ollama create %s -f Modelfile\n", j->name);
    if (j->merged_gguf) sb_printf(sb, "FROM ./%s\n", j->merged_gguf);
    else sb_printf(sb, "FROM %s\nADAPTER ./adapter.gguf\n", j->base_gguf);
    if (t) {
        sb_printf(sb, "TEMPLATE \"\"\"%s\"\"\"\n", t->template_text);
        for (int i = 0; i < 4 && t->stops[i]; i++) sb_printf(sb, "PARAMETER stop \"%s\"\n", t->stops[i]);
        if (t->system) sb_printf(sb, "SYSTEM \"\"\"%s\"\"\"\n", t->system);
    } else {
        log_warn("ollama: no Ollama TEMPLATE for chat template %s; Ollama will use the template in the GGUF's "
                 "metadata, if it can read it", j->chat_template ? shown_text(j->chat_template).s : "(none)");
    }
    for (int i = 0; i < j->n_params; i++) param_line(sb, j->param_keys[i], j->param_values[i]);
    return PT_OK;
}

static bool on_path(const char *prog)
{
    const char *path = getenv("PATH");
    if (!path) return false;
    char *copy = xstrdup(path), *save = NULL;
    bool found = false;
    for (char *dir = strtok_r(copy, ":", &save); dir && !found; dir = strtok_r(NULL, ":", &save)) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, prog);
        found = access(full, X_OK) == 0;
    }
    free(copy);
    return found;
}

pt_status export_ollama(const ollama_job *j)
{
    strbuf text = {0}, cmd = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/Modelfile", j->dir);
    pt_status st = modelfile_text(j, &text);
    if (st == PT_OK) st = fw_write_file(path, sb_text(&text), text.len);
    sb_printf(&cmd, "cd ");
    sb_shell_quote(&cmd, j->dir);
    sb_printf(&cmd, " && ollama create ");
    sb_shell_quote(&cmd, j->name);
    sb_printf(&cmd, " -f Modelfile");
    if (st == PT_OK && on_path("ollama")) {
        log_info("ollama     %s\n", sb_text(&cmd)); /* the command run, shell-quoted: the whole paths */
        if (system(sb_text(&cmd)) != 0)
            st = ERR(PT_ERR_USER, "ollama create failed (the Modelfile is in %s; run: %s)", shown_text(j->dir).s,
                     sb_text(&cmd));
    } else if (st == PT_OK) {
        log_info("ollama     wrote %s; ollama is not on PATH here, so create the model where it is:\n  %s\n",
                 shown_text(path).s, sb_text(&cmd)); /* a command to paste: the whole paths, shell-quoted */
    }
    sb_free(&text);
    sb_free(&cmd);
    return st;
}
