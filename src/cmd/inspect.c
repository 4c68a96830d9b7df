/* inspect.c — `ptrain inspect MODEL [--revision REV] [--max-seq-length N] [--batch-size N]
 * [--lora-r R] [--lora-target-modules LIST] [--lora-dropout P] [--use-dora] [--gradient-checkpointing MODE]
 * [--device cpu|cuda] [--no-4bit]`: a model's architecture, sizes, tensor types, tokenizer and chat
 * template, and the memory one rank needs for it, read from the files (GGUF header, or
 * config.json + the safetensors headers + tokenizer files) without loading any weights, so it is
 * quick even for large models. The weight memory is what loading would allocate (projections in
 * 8-32 bits as NF4 under load_in_4bit, norms in f32, the rest as stored); the training figure is
 * the trainer's own memory plan (memplan_of_run: the same dry run of the step's buffers, from the
 * config alone, with a model that has no weights and an adapter that has no tensors), printed as
 * `ptrain train` prints it, so a search for the longest sequence that fits needs no loading. A
 * directory with config.json but no weights (what `huggingface-cli download ORG/NAME
 * config.json ...` fetches before committing to gigabytes) is described from config.json alone: the
 * sizes, and the weight memory estimated from them; without tokenizer.json, the tokenizer
 * converted from a SentencePiece tokenizer.model, or else what tokenizer_config.json
 * (and special_tokens_map.json) say of bos, eos and the chat template. generation_config.json's eos
 * ids and sampling defaults are shown when the file is there. Given a training checkpoint
 * (output_dir/checkpoint-N.h5), it prints what the checkpoint holds and verifies its checksums
 * instead (ckpt_inspect, src/io/checkpoint_read.c). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/jsonfile.h"
#include "ptrain/adapter.h"
#include "ptrain/checkpoint.h"
#include "ptrain/dataset.h"
#include "ptrain/hf_model.h"
#include "ptrain/inspect.h"
#include "ptrain/memplan.h"
#include "ptrain/model_io.h"
#include "ptrain/nf4.h"
#include "ptrain/settings.h"
#include "ptrain/util.h"

typedef struct {
    const char *model, *revision;
    long seq, batch, lora_r;
    bool nf4, dora; /* dora: --use-dora, the adapters carry DoRA magnitudes */
    /* the training run whose memory plan is printed */
    const char *targets; /* --lora-target-modules as given (PEFT module names) */
    double lora_dropout;
    pt_checkpointing ckpt;
    pt_device device; /* DEVICE_CPU or DEVICE_CUDA: the plan is this device's */
} insp_options;

typedef struct {
    char name[16];
    int count;
} type_count;

typedef struct {
    pt_model_config cfg;
    char format[96], arch[192], rope[96], quant[128];
    type_count types[32];
    int n_types;
    double loaded; /* weight bytes after loading */
    bool no_weights; /* config.json only: loaded is estimated from the sizes */
    char tok[384], chat[512], gen[256];
} insp_report;

static const char insp_usage[] =
    "Usage: ptrain inspect MODEL [--revision REV] [--max-seq-length N] [--batch-size N] [--lora-r R]\n"
    "                            [--lora-target-modules LIST] [--lora-dropout P] [--use-dora]\n"
    "                            [--gradient-checkpointing false|true|unsloth] [--device cpu|cuda]\n"
    "                            [--no-4bit]\n"
    "       ptrain inspect CHECKPOINT\n"
    "MODEL: a .gguf file, an HF model directory or an HF id (org/name) in the local HF cache. A\n"
    "directory with config.json and no weights is described from config.json, the weights estimated.\n"
    "Prints the architecture, sizes, tensor types, tokenizer, chat template and the memory per rank:\n"
    "the weights after load_in_4bit, and the memory plan `ptrain train` prints for a run with these\n"
    "settings (its `memory plan:` lines, computed from the config without loading the weights).\n"
    "Defaults, as a config's: --max-seq-length 2048 --batch-size 2 --lora-r 16, all seven\n"
    "projections, --lora-dropout 0, no DoRA (--use-dora: use_dora's magnitudes, one per adapted output\n"
    "row, counted as training counts them), --gradient-checkpointing unsloth; --device cuda when this ptrain\n"
    "has the CUDA backend, else cpu. The plan leaves out evaluation, whose buffers (at the training\n"
    "batch size) are never the larger.\n"
    "CHECKPOINT: a training checkpoint, output_dir/checkpoint-N.h5. Prints its step, epoch, loss,\n"
    "world size, config hash, base model and LoRA settings, and verifies it (the completion mark's\n"
    "size and CRC-32, and every tensor's Fletcher-32 checksum): exit 0 when it is complete and\n"
    "intact, 1 with one error saying \"incomplete\" or \"damaged\" and why when it is not.\n";

static void count_type(insp_report *r, const char *name)
{
    for (int i = 0; i < r->n_types; i++)
        if (!strcmp(r->types[i].name, name)) {
            r->types[i].count++;
            return;
        }
    if (r->n_types == 32) return;
    snprintf(r->types[r->n_types].name, sizeof r->types[0].name, "%s", name);
    r->types[r->n_types++].count = 1;
}

/* Bytes after loading of a 2-d weight [rows, cols] stored in `stored` bytes: a projection in
 * 8-32 bits becomes NF4 under load_in_4bit when cols is a multiple of 64. */
static double loaded_matrix(bool projection, bool dense, int64_t rows, int64_t cols, double stored, bool nf4)
{
    if (projection && dense && nf4 && cols % NF4_BLOCK == 0) return (double)nf4_bytes(rows, cols);
    return stored;
}

static const char *human(double bytes, char *buf, size_t len)
{
    const char *unit[] = {"B", "KB", "MB", "GB", "TB"};
    int u = 0;
    while (bytes >= 1024 && u < 4) bytes /= 1024, u++;
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", bytes, unit[u]);
    return buf;
}

static void chat_line(insp_report *r, const char *template_text)
{
    const char *name = template_text ? chat_template_detect(template_text) : NULL;
    if (name) snprintf(r->chat, sizeof r->chat, "%s (recognised from the model's template)", name);
    else if (template_text) {
        chat_tmpl *ct = NULL;
        bool ok = chat_tmpl_open("model", template_text, &ct) == PT_OK;
        snprintf(r->chat, sizeof r->chat, "the model's own (%zu characters; %s)", strlen(template_text),
                 ok ? "rendered as it is by ptrain's Jinja interpreter" : err_message());
        chat_tmpl_free(ct);
    }
    else snprintf(r->chat, sizeof r->chat, "none in the model (set chat_template)");
}

/* A loaded tokenizer's template as training picks it (dataset_chat_open: the default one, its
 * named ones, tool_use for rows with tools), or why training could not use it. */
static void chat_line_tok(insp_report *r, const pt_tokenizer *tok)
{
    chat_line(r, tokenizer_chat_template(tok));
    dataset_chat *c = NULL;
    if (dataset_chat_open(tok, NULL, NULL, &c) != PT_OK) {
        snprintf(r->chat, sizeof r->chat, "%.500s", err_message());
        err_clear();
    }
    dataset_chat_free(c);
    strbuf names = {0};
    tokenizer_chat_template_names(tok, &names);
    size_t used = strlen(r->chat);
    if (names.len)
        snprintf(r->chat + used, sizeof r->chat - used, "; named: %s%s", sb_text(&names),
                 tokenizer_chat_template_named(tok, "tool_use") ? " (tool_use renders rows with tools)" : "");
    sb_free(&names);
}

/* ---- GGUF ---- */

static void gguf_tensors(const gguf_file *f, bool nf4, insp_report *r)
{
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const char *tname = "?";
        gguf_ggml_type_info(t->ggml_type, &tname, NULL, NULL);
        count_type(r, tname);
        bool vec = t->n_dims == 1, edge = gguf_str_eq(t->name, "token_embd.weight") || gguf_str_eq(t->name, "output.weight");
        bool dense = t->dtype == PT_F32 || t->dtype == PT_F16 || t->dtype == PT_BF16 || t->dtype == PT_Q8_0;
        if (vec) r->loaded += 4.0 * (double)t->dims[0];
        else r->loaded += loaded_matrix(!edge, dense, (int64_t)t->dims[1], (int64_t)t->dims[0], (double)t->nbytes, nf4);
    }
}

static void gguf_tokenizer(const gguf_file *f, insp_report *r)
{
    gguf_str model = {"", 0}, tmpl = {NULL, 0};
    (void)gguf_opt_str(f, "tokenizer.ggml.model", &model);
    (void)gguf_opt_str(f, "tokenizer.chat_template", &tmpl);
    err_clear();
    const gguf_kv *tokens = gguf_find(f, "tokenizer.ggml.tokens");
    bool spm = gguf_str_eq(model, "llama") || gguf_str_eq(model, "gemma4");
    const char *kind = gguf_str_eq(model, "gpt2") ? "byte-level BPE" : spm ? "SentencePiece" : "?";
    snprintf(r->tok, sizeof r->tok, "%s (tokenizer.ggml.model \"%s\"), %llu tokens", kind,
             shown_bytes(model.data, (size_t)model.len).s, (unsigned long long)(tokens ? tokens->count : 0));
    pt_tokenizer *tok = NULL; /* the template as training picks it, when ptrain can load the tokenizer */
    if (tokenizer_from_gguf(f, &tok) == PT_OK) {
        chat_line_tok(r, tok);
        tokenizer_free(tok);
        return;
    }
    err_clear();
    char *text = tmpl.data ? strndup(tmpl.data, (size_t)tmpl.len) : NULL;
    chat_line(r, text);
    free(text);
}

static pt_status describe_gguf(const char *path, const insp_options *o, insp_report *r)
{
    gguf_file f;
    TRY(gguf_open(path, &f));
    pt_status st = model_config_from_gguf(&f, &r->cfg);
    if (st == PT_OK) {
        snprintf(r->format, sizeof r->format, "GGUF version %u, %llu tensors", f.version,
                 (unsigned long long)f.n_tensors);
        snprintf(r->arch, sizeof r->arch, "%s", arch_name(r->cfg.arch));
        snprintf(r->rope, sizeof r->rope, "theta %g%s", r->cfg.rope_theta,
                 gguf_find_tensor(&f, "rope_freqs.weight") ? ", scaled by the file's rope_freqs factors" : "");
        snprintf(r->quant, sizeof r->quant, "as stored in the file (4-bit blocks stay 4-bit)");
        gguf_tensors(&f, o->nf4, r);
        gguf_tokenizer(&f, r);
    }
    gguf_close(&f);
    return st;
}

/* ---- Hugging Face ---- */

static bool has_quant_state(const st_set *s, const char *name)
{
    char q[512];
    snprintf(q, sizeof q, "%s.quant_state.bitsandbytes__nf4", name);
    return st_set_find(s, q, NULL) != NULL;
}

/* A pre-quantized bitsandbytes [rows, cols] weight as the loader keeps it: ptrain's NF4 buffer when
 * the rows are whole 64-value blocks (with the double quantization bitsandbytes writes by default),
 * else dequantized to f32. */
static double bnb_loaded(int64_t rows, int64_t cols)
{
    return cols % NF4_BLOCK == 0 ? (double)nf4_bytes(rows, cols) : 4.0 * (double)rows * (double)cols;
}

/* The shape of the projection weight `name` (model.layers.N.self_attn.q_proj.weight ...) from c; a fused one
 * (phi3's qkv_proj, gate_up_proj) whole. */
static bool proj_shape_of(const pt_model_config *c, const char *name, int64_t *rows, int64_t *cols)
{
    const pt_arch_info *a = arch_info(c->arch);
    size_t n = strlen(name);
    for (int w = 0; w < W_COUNT; w++) {
        size_t k = a->hf_names[w] ? strlen(a->hf_names[w]) : 0;
        int lead;
        int64_t row0;
        if (k && n > k && name[n - k - 1] == '.' && !strcmp(name + n - k, a->hf_names[w]) &&
            model_proj_shape(c, w, rows, cols)) {
            model_fused_part(c, w, &lead, &row0, rows);
            return true;
        }
    }
    return false;
}

/* A bitsandbytes weight stored in `bytes` bytes of codes (2 values a byte). */
static double bnb_tensor(const pt_model_config *c, const char *name, size_t bytes)
{
    int64_t rows, cols;
    if (proj_shape_of(c, name, &rows, &cols)) return bnb_loaded(rows, cols);
    return (double)bytes * (1 + 1.0 / 32) + 1280; /* not a projection ptrain knows: about the codes and maps */
}

/* A fused expert tensor [E, rows, cols] as the loader keeps it: E weights [rows, cols] (down_proj) or 2E of
 * half the rows (gate_up_proj), each NF4 under load_in_4bit. */
static double fused_experts(const st_tensor *t, double stored, bool nf4)
{
    bool gate_up = strstr(t->name, "gate_up_proj") != NULL;
    int64_t n = t->shape[0] * (gate_up ? 2 : 1), rows = t->shape[1] / (gate_up ? 2 : 1), cols = t->shape[2];
    return loaded_matrix(true, true, rows, cols, stored / (double)n, nf4) * (double)n;
}

/* qwen35's q_proj: the loader keeps its query and gate rows as two weights (load_hf.c load_gated_q) */
static bool gated_q(const pt_model_config *c, const char *name)
{
    const char *q = arch_info(c->arch)->hf_names[W_Q_GATE];
    size_t n = strlen(name), k = q ? strlen(q) : 0;
    return c->attn_gate && k && n > k && !strcmp(name + n - k, q);
}

/* gemma4's per-layer parts as the loader keeps them: the table's columns and the model projection's rows of each
 * layer apart (each its own NF4 tensor), the layer scalars on the host, and a vector of ones for the value norm.
 * Returns false for any other tensor. */
static bool gemma4_tensor(const st_tensor *t, bool dense, double stored, bool nf4, insp_report *r)
{
    const pt_model_config *c = &r->cfg;
    int64_t n = c->n_layers;
    if (c->ple_dim <= 0 || t->ndim > 2) return false;
    if (strstr(t->name, ".layer_scalar")) return true;
    bool table = strstr(t->name, "embed_tokens_per_layer.weight"), proj = strstr(t->name, "per_layer_model_projection.weight");
    if (!table && !proj) return false;
    r->loaded += (double)n * (table ? loaded_matrix(true, dense, t->shape[0], c->ple_dim, stored / (double)n, nf4)
                                    : loaded_matrix(true, dense, c->ple_dim, t->shape[1], stored / (double)n, nf4));
    if (table && c->v_norm) r->loaded += 4.0 * (double)(c->head_dim_full > c->head_dim ? c->head_dim_full : c->head_dim);
    return true;
}

static void hf_tensors(const st_set *s, bool nf4, insp_report *r)
{
    for (size_t i = 0; i < s->n_entries; i++) {
        const st_tensor *t = s->entries[i].tensor;
        count_type(r, st_dtype_name(t->dtype));
        const char *w = strstr(t->name, ".weight.");
        if (w) continue; /* a bitsandbytes part (absmax, quant_map ...): counted with its weight */
        bool edge = !strcmp(t->name, "model.embed_tokens.weight") || !strcmp(t->name, "lm_head.weight") ||
                    strstr(t->name, ".mlp.gate.weight"); /* a router stays as stored */
        bool dense = t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64;
        double stored = t->dtype == ST_F64 ? (double)t->nbytes / 2 : (double)t->nbytes;
        if (gemma4_tensor(t, dense, stored, nf4, r)) continue;
        if (has_quant_state(s, t->name)) r->loaded += bnb_tensor(&r->cfg, t->name, t->nbytes);
        else if (t->ndim == 1) r->loaded += 4.0 * (double)st_numel(t);
        else if (t->ndim == 2 && gated_q(&r->cfg, t->name))
            r->loaded += 2 * loaded_matrix(true, dense, t->shape[0] / 2, t->shape[1], stored / 2, nf4);
        else if (t->ndim == 2) r->loaded += loaded_matrix(!edge, dense, t->shape[0], t->shape[1], stored, nf4);
        else if (t->ndim == 3 && strstr(t->name, ".mlp.experts.")) /* fused experts: each expert's weights apart */
            r->loaded += fused_experts(t, stored, dense && nf4);
        else r->loaded += stored;
    }
}

/* Whether a tokenizer.json pre_tokenizer is, or has in its Sequence, a ByteLevel step. */
static bool byte_level(const json_t *pre)
{
    const char *type = json_string_value(json_object_get(pre, "type"));
    const json_t *steps = json_object_get(pre, "pretokenizers");
    for (size_t i = 0; json_is_array(steps) && i < json_array_size(steps); i++)
        if (byte_level(json_array_get(steps, i))) return true;
    return type && !strcmp(type, "ByteLevel");
}

/* ---- the small files beside config.json ---- */

/* dir/name as a JSON object, or NULL: absent (why ""), or unreadable (why says so: a note in the
 * report, not an error, since inspect describes what it can). */
static json_t *side_json(const char *dir, const char *name, char *why, size_t len)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *why = '\0';
    if (access(path, F_OK) != 0) return NULL;
    json_error_t e;
    json_t *j = jsonfile_load(path, 0, &e);
    if (!j) snprintf(why, len, "%s: cannot read it: %.120s (line %d, column %d)", name, e.text, e.line, e.column);
    else if (!json_is_object(j)) {
        snprintf(why, len, "%s: cannot read it: not a JSON object", name);
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* A special token as tokenizer_config.json and special_tokens_map.json write it: "text" or
 * {"content": "text", ...}; NULL when absent or null. */
static const char *token_text(const json_t *cfg, const char *key)
{
    const json_t *v = json_object_get(cfg, key);
    if (json_is_object(v)) v = json_object_get(v, "content");
    return json_string_value(v);
}

/* tokenizer_config.json's chat_template as transformers picks it: a string, or from a list of
 * {name, template} the one named "default". */
static const char *config_template(const json_t *cfg)
{
    const json_t *v = json_object_get(cfg, "chat_template");
    for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        if (name && !strcmp(name, "default")) return json_string_value(json_object_get(e, "template"));
    }
    return json_string_value(v);
}

/* dir/chat_template.jinja (transformers 5 keeps the template there) as a string, or NULL. */
static char *jinja_text(const char *dir)
{
    enum { JINJA_MAX = 4 << 20 };
    char path[4200];
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = malloc(JINJA_MAX + 1);
    size_t n = text ? fread(text, 1, JINJA_MAX, f) : 0;
    fclose(f);
    if (text) text[n] = '\0';
    return text;
}

/* No tokenizer.json (ptrain tokenizes with it): what tokenizer_config.json says, bos/eos falling
 * back to special_tokens_map.json, and the chat template from chat_template.jinja or
 * tokenizer_config.json. */
static void tokenizer_side(const char *dir, insp_report *r)
{
    char why_cfg[256], why_map[256];
    json_t *cfg = side_json(dir, "tokenizer_config.json", why_cfg, sizeof why_cfg);
    json_t *map = side_json(dir, "special_tokens_map.json", why_map, sizeof why_map);
    const char *bos = token_text(cfg, "bos_token"), *eos = token_text(cfg, "eos_token");
    const char *cls = json_string_value(json_object_get(cfg, "tokenizer_class"));
    if (!bos) bos = token_text(map, "bos_token");
    if (!eos) eos = token_text(map, "eos_token");
    strbuf sb = {0};
    sb_printf(&sb, "none: no tokenizer.json, which ptrain tokenizes with");
    if (cfg || map)
        sb_printf(&sb, " (%s%s%s: %s%sbos %s%s%s, eos %s%s%s)", cfg ? "tokenizer_config.json" : "",
                  cfg && map ? ", " : "", map ? "special_tokens_map.json" : "", cls ? cls : "", cls ? ", " : "",
                  bos ? "\"" : "", bos ? bos : "none", bos ? "\"" : "", eos ? "\"" : "", eos ? eos : "none",
                  eos ? "\"" : "");
    if (*why_cfg) sb_printf(&sb, "; %s", why_cfg);
    if (*why_map) sb_printf(&sb, "; %s", why_map);
    snprintf(r->tok, sizeof r->tok, "%s", sb_text(&sb));
    sb_free(&sb);
    char *jinja = jinja_text(dir);
    chat_line(r, jinja ? jinja : config_template(cfg));
    free(jinja);
    json_decref(cfg);
    json_decref(map);
}

/* generation_config.json, when there: its eos ids (often more than the tokenizer's one eos) and
 * sampling defaults; ptrain generate takes sampling from its own options. */
static void generation_side(const char *dir, insp_report *r)
{
    char why[256];
    json_t *g = side_json(dir, "generation_config.json", why, sizeof why);
    if (!g) {
        snprintf(r->gen, sizeof r->gen, "%s", why);
        return;
    }
    strbuf sb = {0};
    const json_t *eos = json_object_get(g, "eos_token_id");
    sb_printf(&sb, "generation_config.json: eos");
    if (json_is_integer(eos)) sb_printf(&sb, " %lld", (long long)json_integer_value(eos));
    for (size_t i = 0; json_is_array(eos) && i < json_array_size(eos); i++)
        sb_printf(&sb, "%s %lld", i ? "," : "", (long long)json_integer_value(json_array_get(eos, i)));
    if (!json_is_integer(eos) && !json_array_size(eos)) sb_printf(&sb, " not given");
    static const char *const sampling[] = {"temperature", "top_p", "top_k", "max_length"};
    const char *sep = "; ";
    if (json_is_true(json_object_get(g, "do_sample"))) sb_printf(&sb, "%sdo_sample", sep), sep = ", ";
    for (size_t i = 0; i < sizeof sampling / sizeof sampling[0]; i++) {
        const json_t *v = json_object_get(g, sampling[i]);
        if (json_is_number(v)) sb_printf(&sb, "%s%s %g", sep, sampling[i], json_number_value(v)), sep = ", ";
    }
    snprintf(r->gen, sizeof r->gen, "%s", sb_text(&sb));
    sb_free(&sb);
    json_decref(g);
}

/* A SentencePiece tokenizer.model and no tokenizer.json: the tokenizer ptrain converts from it. */
static void hf_spm_tokenizer(const char *dir, insp_report *r)
{
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_hf_dir(dir, &tok) != PT_OK) {
        snprintf(r->tok, sizeof r->tok, "SentencePiece tokenizer.model; ptrain cannot load it: %.200s", err_message());
        err_clear();
        chat_line(r, NULL);
        return;
    }
    snprintf(r->tok, sizeof r->tok, "%s (tokenizer.model, no tokenizer.json), %d tokens", tokenizer_kind(tok),
             tokenizer_vocab_size(tok));
    chat_line_tok(r, tok);
    tokenizer_free(tok);
}

/* tokenizer.json's model type, then the tokenizer itself for its size and template. */
static void hf_tokenizer(const char *dir, insp_report *r)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    if (access(path, F_OK) != 0) {
        snprintf(path, sizeof path, "%s/tokenizer.model", dir);
        if (access(path, F_OK) == 0) hf_spm_tokenizer(dir, r);
        else tokenizer_side(dir, r);
        return;
    }
    json_t *root = jsonfile_load(path, 0, NULL);
    const char *type = json_string_value(json_object_get(json_object_get(root, "model"), "type"));
    char kind[64];
    snprintf(kind, sizeof kind, "%s%s", byte_level(json_object_get(root, "pre_tokenizer")) ? "byte-level " : "",
             type ? type : "none (no readable tokenizer.json)");
    json_decref(root);
    pt_tokenizer *tok = NULL;
    if (!type) {
        snprintf(r->tok, sizeof r->tok, "%s", kind);
        chat_line(r, NULL);
        return;
    }
    if (tokenizer_from_hf_dir(dir, &tok) != PT_OK) {
        snprintf(r->tok, sizeof r->tok, "%s; ptrain cannot load it: %.160s", kind, err_message());
        err_clear();
        chat_line(r, NULL);
        return;
    }
    snprintf(r->tok, sizeof r->tok, "%s (tokenizer.json), %d tokens", kind, tokenizer_vocab_size(tok));
    chat_line_tok(r, tok);
    tokenizer_free(tok);
}

/* s: the weights, or NULL for a directory with config.json only. */
static void hf_text(const hf_config *h, const st_set *s, insp_report *r)
{
    if (!s) snprintf(r->format, sizeof r->format, "Hugging Face config.json only: no weights here (sizes from config.json)");
    else snprintf(r->format, sizeof r->format, "Hugging Face safetensors, %d file%s%s", s->n_files,
                  s->n_files > 1 ? "s" : "", s->index_path ? " (sharded, model.safetensors.index.json)" : "");
    snprintf(r->arch, sizeof r->arch, "%s (model_type %s%s%s)", arch_name(h->cfg.arch), h->model_type,
             *h->architecture ? ", " : "", h->architecture);
    snprintf(r->rope, sizeof r->rope, "theta %g, %s scaling", h->rope_theta, rope_type_name(h->rope.type));
    if (h->rope.type != PT_ROPE_DEFAULT)
        snprintf(r->rope + strlen(r->rope), sizeof r->rope - strlen(r->rope), " (factor %g)", h->rope.factor);
    if (h->bnb_4bit) snprintf(r->quant, sizeof r->quant, "bitsandbytes NF4%s, pre-quantized: used as it is",
                              h->bnb_double_quant ? " with double quantization" : "");
    else snprintf(r->quant, sizeof r->quant, "none (dtype %s)", *h->torch_dtype ? h->torch_dtype : "not given");
}

/* Whether dir has weights ptrain could look at (or is told to look at a .safetensors file). */
static bool has_weights(const char *path, const char *dir)
{
    static const char *const names[] = {"model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                                        "pytorch_model.bin.index.json"};
    if (strstr(path, ".safetensors")) return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char file[4200];
        snprintf(file, sizeof file, "%s/%s", dir, names[i]);
        if (access(file, F_OK) == 0) return true;
    }
    return false;
}

/* A sparse layer's router (as stored) and experts (NF4 each under load_in_4bit), estimated from config.json. */
static double config_experts(const hf_config *h, double elt, bool nf4)
{
    const pt_model_config *c = &h->cfg;
    int64_t d = c->dim, f = c->moe_ffn_dim;
    double gate = loaded_matrix(true, true, f, d, elt * (double)(f * d), nf4);
    double down = loaded_matrix(true, true, d, f, elt * (double)(f * d), nf4);
    return elt * (double)(c->n_experts * d) + (double)c->n_experts * (2 * gate + down);
}

/* The weight bytes loading would allocate, from config.json's sizes: projections NF4 under
 * load_in_4bit or when pre-quantized, else as stored (torch_dtype, 16-bit when not given);
 * embeddings and an untied lm_head as stored; norms and biases f32. Each layer's own shapes (gemma4's global
 * layers, shared and k_eq_v layers), and gemma4's per-layer inputs: the table's columns and the model
 * projection's rows of each layer as projections are. */
static double config_weights(const hf_config *h, bool nf4)
{
    const pt_model_config *c = &h->cfg;
    double elt = !strcmp(h->torch_dtype, "float32") ? 4 : 2, total = 0;
    int64_t d = c->dim;
    const int slots[] = {W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN, W_PLE_GATE, W_PLE_PROJ, W_PLE_MODEL, W_PLE_EMBED};
    for (int l = 0; l < c->n_layers; l++) {
        int64_t q = (int64_t)c->n_heads * model_layer_head_dim(c, l);
        int64_t kv = (int64_t)model_layer_kv_heads(c, l) * model_layer_head_dim(c, l);
        double layer = 4.0 * (double)d * ((c->post_norms ? 2 : 0) + (c->no_pre_norms ? 0 : 2) + (c->ple_dim ? 1 : 0)) +
                       (c->qkv_bias ? 4.0 * (double)(q + 2 * kv) : 0);
        layer += c->qk_norm ? 4.0 * (double)(c->head_dim_full ? 2 * model_layer_head_dim(c, l) :
                                             model_qk_norm_width(c, W_Q_NORM) + model_qk_norm_width(c, W_K_NORM)) : 0;
        bool sparse = model_layer_moe(c, l);
        if (sparse) layer += config_experts(h, elt, nf4);
        for (size_t i = 0; i < sizeof slots / sizeof slots[0]; i++) {
            if (sparse && (slots[i] == W_GATE || slots[i] == W_UP || slots[i] == W_DOWN)) continue; /* experts */
            int64_t rows = c->ple_vocab, cols = c->ple_dim;
            if (slots[i] == W_PLE_EMBED ? c->ple_dim <= 0 : !model_layer_proj_shape(c, l, slots[i], &rows, &cols))
                continue;
            double stored = elt * (double)rows * (double)cols;
            layer += h->bnb_4bit && slots[i] < W_PLE_GATE ? bnb_loaded(rows, cols)
                                                          : loaded_matrix(true, true, rows, cols, stored, nf4);
        }
        total += layer;
    }
    double embed = elt * (double)c->vocab * (double)d;
    double ones = c->v_norm ? 4.0 * (double)(c->head_dim_full > c->head_dim ? c->head_dim_full : c->head_dim) : 0;
    return total + 4.0 * (double)(d + c->ple_dim) + ones + embed * (c->tied_embeddings ? 1 : 2);
}

static pt_status describe_hf(const char *path, const insp_options *o, insp_report *r)
{
    char dir[4096], config[4200];
    model_hf_dir(path, dir, sizeof dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    hf_config h;
    TRY(hf_config_read(config, &h));
    r->cfg = h.cfg;
    if (has_weights(path, dir)) {
        st_set s;
        TRY(st_set_open(strstr(path, ".safetensors") ? path : dir, &s));
        hf_text(&h, &s, r);
        hf_tensors(&s, o->nf4, r);
        st_set_close(&s);
    } else {
        hf_text(&h, NULL, r);
        r->no_weights = true;
        r->loaded = config_weights(&h, o->nf4);
    }
    hf_tokenizer(dir, r);
    generation_side(dir, r);
    return PT_OK;
}

/* ---- the report ---- */

/* gemma4's own: the global layers' heads and rope, k_eq_v, the value norm, KV sharing, per-layer inputs. */
static void gemma4_line(const pt_model_config *c)
{
    if (c->head_dim_full > 0)
        printf("%-18s global layers: head size %d, key/value heads %d, %d of %d rotary pairs turning (proportional)%s\n",
               "family features", c->head_dim_full, c->n_kv_heads_full ? c->n_kv_heads_full : c->n_kv_heads,
               c->rope_pairs_full ? c->rope_pairs_full : c->head_dim_full / 2, c->head_dim_full / 2,
               c->k_eq_v ? ", values are the keys (attention_k_eq_v)" : "");
    if (c->v_norm) printf("%-18s values RMSNormed per head (no weight), layer scalars\n", "family features");
    if (c->kv_shared > 0)
        printf("%-18s the last %d layers reuse the keys and values of earlier ones (no cache of their own)\n",
               "family features", c->kv_shared);
    if (c->ple_dim > 0)
        printf("%-18s per-layer inputs of %d values (embed_tokens_per_layer %d x %d, cut per layer)\n",
               "family features", c->ple_dim, c->ple_vocab, c->n_layers * c->ple_dim);
}

static void family_line(const pt_model_config *c)
{
    if (c->qkv_bias) printf("%-18s q/k/v%s biases\n", "family features", c->o_bias ? "/o" : "");
    if (c->attn_sinks) printf("%-18s an attention sink logit per head\n", "family features");
    if (c->moe_bias)
        printf("%-18s router and expert biases, clamped SwiGLU (limit %g, alpha %g)\n", "family features",
               c->swiglu_limit, c->swiglu_alpha);
    if (c->qk_norm && !c->qk_norm_full)
        printf("%-18s q/k RMSNorm per head (%d values) before RoPE\n", "family features", c->head_dim);
    if (c->qk_norm_full)
        printf("%-18s q/k RMSNorm over the whole projection (%lld / %lld values) before RoPE\n", "family features",
               (long long)model_qk_norm_width(c, W_Q_NORM), (long long)model_qk_norm_width(c, W_K_NORM));
    if (c->no_pre_norms)
        printf("%-18s RMSNorm after attention and after the MLP only (none before)\n", "family features");
    if (c->post_norms && !c->no_pre_norms && c->sliding_period)
        printf("%-18s post-norms, tanh-GELU MLP, embeddings x %.4g, scores x %.4g, soft-caps %g / %g, sliding window %d "
               "on layers but (l + 1) %% %d == 0, local rope base %g\n", "family features", c->embed_scale,
               c->attn_scale, c->attn_softcap, c->final_softcap, c->sliding_window, c->sliding_period,
               c->rope_theta_local);
    else if (c->post_norms && !c->no_pre_norms)
        printf("%-18s post-norms, tanh-GELU MLP, embeddings x %.4g, scores x %.4g, soft-caps %g / %g, sliding window %d "
               "on layers l %% %d == 0\n", "family features", c->embed_scale, c->attn_scale, c->attn_softcap,
               c->final_softcap, c->sliding_window, c->sliding_pattern);
    else if (c->sliding_window && c->sliding_period && c->rope_theta_local > 0.0f) /* olmo3 */
        printf("%-18s sliding window %d on layers but (l + 1) %% %d == 0, their rope base %g unscaled\n",
               "family features", c->sliding_window, c->sliding_period, c->rope_theta_local);
    else if (c->sliding_window && c->sliding_period) /* gpt-oss */
        printf("%-18s sliding window %d on layers but (l + 1) %% %d == 0\n", "family features", c->sliding_window,
               c->sliding_period);
    else if (c->sliding_window) printf("%-18s sliding window %d\n", "family features", c->sliding_window);
    if (c->residual_scale != 0.0f || c->logit_scale != 0.0f)
        printf("%-18s embeddings x %.4g, scores x %.4g, residual branches x %.4g, logits / %.4g\n", "family features",
               c->embed_scale, c->attn_scale, c->residual_scale, c->logit_scale);
    if (c->nope_period == 1) printf("%-18s no RoPE on any layer\n", "family features");
    else if (c->nope_period > 0)
        printf("%-18s no RoPE on layers (l + 1) %% %d == 0\n", "family features", c->nope_period);
    if (arch_info(c->arch)->fused_mlp)
        printf("%-18s gate/up fused in the files (%s: one LoRA, as PEFT)\n", "family features",
               arch_peft_module(c->arch, W_GATE));
    if (arch_info(c->arch)->fused)
        printf("%-18s q/k/v and gate/up fused in the files (qkv_proj, gate_up_proj: one LoRA each, as PEFT)\n",
               "family features");
    if (c->rope_dim > 0 && c->rope_dim < c->head_dim)
        printf("%-18s partial rotary: %d of %d values of each head rotate\n", "family features", c->rope_dim,
               c->head_dim);
    if (c->n_experts > 0) {
        int sparse = 0;
        for (int l = 0; l < c->n_layers; l++) sparse += model_layer_moe(c, l);
        printf("%-18s mixture of experts on %d of %d layers: %d experts of width %d, top-%d%s (router softmax in fp32)\n",
               "family features", sparse, c->n_layers, c->n_experts, c->moe_ffn_dim, c->n_experts_used,
               c->moe_norm_topk ? ", renormalised" : "");
    }
    gemma4_line(c);
    if (c->full_period > 0)
        printf("%-18s Gated DeltaNet on layers but (l + 1) %% %d == 0 (%d key heads of %d, %d value heads of %d, conv "
               "%d; fp32 recurrent state); full attention with an output gate; training and exports of this family "
               "are not built yet (issue 42)\n", "family features", c->full_period, c->lin_k_heads, c->lin_k_dim,
               c->lin_v_heads, c->lin_v_dim, c->lin_conv);
    if (c->n_experts > 0) { /* a dense model's count is the weights line's */
        int64_t total, active;
        model_param_counts(c, &total, &active);
        printf("%-18s %.4g B total, %.4g B active per token (%lld, %lld)\n", "parameters", (double)total / 1e9,
               (double)active / 1e9, (long long)total, (long long)active);
    }
}

/* The slots family a adapts for the module names in text (any separator); how many names it has. */
static int parse_targets(pt_arch a, const char *text, bool target[W_COUNT])
{
    int n = 0;
    char name[32];
    for (const char *p = text; *p;) {
        size_t len = 0;
        while (p[len] && (p[len] == '_' || (p[len] >= 'a' && p[len] <= 'z'))) len++;
        if (len == 3 && !strncmp(p, "all-linear", 10)) { /* PEFT's all-linear: the llama names and the family's others */
            for (int w = 0; w < W_LIN_QKV; w++) /* the seven */
                if (arch_llama_module(w)) n += adapter_target_slot(a, arch_llama_module(w), target, NULL);
            adapter_all_linear(a, target);
            len = 10;
        } else if (len > 0 && len < sizeof name) {
            memcpy(name, p, len);
            name[len] = 0;
            n += adapter_target_slot(a, name, target, NULL);
        }
        p += len ? len : 1;
    }
    return n;
}

/* The weights, then the trainer's plan of a run with o's settings, from the config alone: a model
 * with no weights and no backend, an adapter with r and targets and no tensors. */
static void memory_lines(const insp_report *r, const insp_options *o)
{
    pt_model m = {.cfg = r->cfg};
    pt_adapter ad = {.arch = r->cfg.arch, .r = (int)o->lora_r, .r_max = (int)o->lora_r, .n_layers = r->cfg.n_layers,
                     .dora = o->dora};
    parse_targets(ad.arch, o->targets, ad.target); /* checked when the options were read */
    bool cuda = o->device == DEVICE_CUDA;
    step_options so = step_options_for(o->ckpt, cuda, (float)o->lora_dropout);
    pt_memplan_run run = {.batch = o->batch, .seq = o->seq, .weight_bytes = (size_t)r->loaded,
                          .lora_params = adapter_param_count_for(&r->cfg, ad.r, ad.target, ad.dora), .cuda = cuda};
    pt_memplan p;
    memplan_of_run(&m, &ad, &so, &run, &p);
    char a[32], t[32], targets[128];
    adapter_targets_text(ad.arch, ad.target, targets, sizeof targets);
    const char *about = r->no_weights ? "about " : "";
    if (arch_info(r->cfg.arch)->not_yet) printf("%-18s ptrain %s\n", "not yet", arch_info(r->cfg.arch)->not_yet);
    printf("%-18s %s%s%s (load_in_4bit %s)\n", "weights per rank", about, human(r->loaded, a, sizeof a),
           r->no_weights ? ", estimated from config.json" : "", o->nf4 ? "on" : "off");
    printf("%-18s %lld (LoRA r=%ld on %s%s), as ptrain train counts them\n", "trainable params",
           (long long)run.lora_params, o->lora_r, *targets ? targets : "nothing", o->dora ? ", DoRA magnitudes included" : "");
    printf("%-18s %s%s on %s%s: %s r=%ld on %s, lora_dropout %g, %ld x %ld tokens, use_gradient_checkpointing "
           "%s; ptrain train's plan:\n", "training per rank", about, human((double)p.total, t, sizeof t),
           backend_device_names[o->device], p.offloaded ? " (and the host memory below)" : "", o->dora ? "DoRA" : "LoRA",
           o->lora_r, *targets ? targets : "nothing", o->lora_dropout, o->batch, o->seq, config_checkpointing_names[o->ckpt]);
    memplan_print(&p, backend_device_names[o->device]);
}

static void print_report(const char *path, const insp_report *r, const insp_options *o)
{
    const pt_model_config *c = &r->cfg;
    printf("%-18s %s\n%-18s %s\n%-18s %s\n", "model", path, "format", r->format, "architecture", r->arch);
    printf("%-18s %d layers, hidden %d, ffn %d\n", "sizes", c->n_layers, c->dim, c->ffn_dim);
    printf("%-18s %d (key/value heads %d, head size %d)\n", "attention heads", c->n_heads, c->n_kv_heads, c->head_dim);
    printf("%-18s %d tokens, context %d, %s embeddings\n", "vocabulary", c->vocab, c->ctx_len,
           c->tied_embeddings ? "tied" : "separate lm_head, untied");
    printf("%-18s %s; RMSNorm eps %g\n", "rope", r->rope, c->norm_eps);
    family_line(c);
    printf("%-18s", "tensor types");
    for (int i = 0; i < r->n_types; i++) printf("%s %s: %d", i ? "," : "", r->types[i].name, r->types[i].count);
    if (r->no_weights) printf(" none (no weights in the directory)");
    printf("\n%-18s %s\n%-18s %s\n%-18s %s\n", "quantization", r->quant, "tokenizer", r->tok, "chat template", r->chat);
    if (*r->gen) printf("%-18s %s\n", "generation", r->gen);
    memory_lines(r, o);
}

/* ---- the command ---- */

static pt_status parse_long(const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < lo || v > hi)
        return ERR(PT_ERR_USAGE, "%s expects an integer from %ld to %ld, got '%s'\nTry 'ptrain inspect --help'.", opt,
                   lo, hi, shown_text(text).s);
    *out = v;
    return PT_OK;
}

static pt_status parse_double(const char *opt, const char *text, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= lo && v < hi))
        return ERR(PT_ERR_USAGE, "%s expects a number from %g up to (not including) %g, got '%s'\nTry 'ptrain inspect "
                   "--help'.", opt, lo, hi, text);
    *out = v;
    return PT_OK;
}

/* One of config_checkpointing_names (false, true, unsloth). */
static pt_status parse_ckpt(const char *text, pt_checkpointing *out)
{
    for (int i = 0; i < 3; i++)
        if (!strcmp(text, config_checkpointing_names[i])) {
            *out = (pt_checkpointing)i;
            return PT_OK;
        }
    return ERR(PT_ERR_USAGE, "--gradient-checkpointing expects false, true or unsloth, got '%s'\nTry 'ptrain inspect "
               "--help'.", text);
}

static pt_status check_targets(const char *text)
{
    bool llama[W_COUNT] = {0}, phi3[W_COUNT] = {0}, q35[W_COUNT] = {0};
    if (parse_targets(PT_ARCH_LLAMA, text, llama) + parse_targets(PT_ARCH_PHI3, text, phi3) +
        parse_targets(PT_ARCH_QWEN35, text, q35) > 0)
        return PT_OK;
    return ERR(PT_ERR_USAGE, "--lora-target-modules names no projection in '%s' (q_proj, k_proj, v_proj, o_proj, "
               "gate_proj, up_proj, down_proj; phi3: qkv_proj, gate_up_proj; qwen35 also in_proj_qkv, in_proj_z, "
               "in_proj_b, in_proj_a, out_proj)\nTry 'ptrain inspect --help'.", text);
}

/* cpu or cuda: the device whose plan is printed (auto names no one device). */
static pt_status parse_device(const char *text, pt_device *device)
{
    pt_device d = DEVICE_AUTO;
    if (!backend_device_parse(text, &d) || d == DEVICE_AUTO)
        return ERR(PT_ERR_USAGE, "--device expects cpu or cuda, got '%s'\nTry 'ptrain inspect --help'.",
                   shown_text(text).s);
    *device = d;
    return PT_OK;
}

static insp_options insp_defaults(void)
{
    insp_options o = {.seq = 2048, .batch = 2, .lora_r = 16, .nf4 = true, .ckpt = PT_CKPT_OFFLOAD,
                      .device = DEVICE_CPU};
#ifdef PTRAIN_HAVE_CUDA
    o.device = DEVICE_CUDA;
#endif
    o.targets = "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj";
    return o;
}

/* One option c with its argument. */
static pt_status insp_option(int c, const char *arg, insp_options *o)
{
    switch (c) {
    case 'r': o->revision = arg; return PT_OK;
    case 's': return parse_long("--max-seq-length", arg, 1, 1 << 24, &o->seq);
    case 'b': return parse_long("--batch-size", arg, 1, 1 << 20, &o->batch);
    case 'l': return parse_long("--lora-r", arg, 1, 1 << 16, &o->lora_r);
    case 't': o->targets = arg; return check_targets(arg);
    case 'p': return parse_double("--lora-dropout", arg, 0, 1, &o->lora_dropout);
    case 'g': return parse_ckpt(arg, &o->ckpt);
    case 'd': return parse_device(arg, &o->device);
    case 'n': o->nf4 = false; return PT_OK;
    case 'D': o->dora = true; return PT_OK;
    default: return PT_ERR_INTERNAL;
    }
}

/* PT_OK, PT_ERR_USAGE, or -1 after printing --help. */
static int insp_parse(int argc, char **argv, insp_options *o)
{
    static const struct option longs[] = {
        {"revision", required_argument, 0, 'r'},     {"max-seq-length", required_argument, 0, 's'},
        {"batch-size", required_argument, 0, 'b'},   {"lora-r", required_argument, 0, 'l'},
        {"lora-target-modules", required_argument, 0, 't'}, {"lora-dropout", required_argument, 0, 'p'},
        {"gradient-checkpointing", required_argument, 0, 'g'}, {"device", required_argument, 0, 'd'},
        {"no-4bit", no_argument, 0, 'n'},            {"use-dora", no_argument, 0, 'D'},
        {"help", no_argument, 0, 'h'},               {0, 0, 0, 0}};
    *o = insp_defaults();
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        if (c == 'h') {
            fputs(insp_usage, stdout);
            return -1;
        }
        if (c == '?' || c == ':')
            return ERR(PT_ERR_USAGE, "unknown or incomplete option '%s'\nTry 'ptrain inspect --help'.",
                       shown_text(argv[optind - 1]).s);
        TRY(insp_option(c, optarg, o));
    }
    if (o->dora && o->lora_dropout > 0)
        return ERR(PT_ERR_USAGE, "--use-dora with --lora-dropout %g: DoRA trains without lora_dropout in ptrain (as "
                   "use_dora does); leave --lora-dropout out\nTry 'ptrain inspect --help'.", o->lora_dropout);
    if (optind >= argc) return ERR(PT_ERR_USAGE, "no model given\nTry 'ptrain inspect --help'.");
    o->model = argv[optind++];
    if (optind < argc)
        return ERR(PT_ERR_USAGE, "unexpected argument '%s'\nTry 'ptrain inspect --help'.", shown_text(argv[optind]).s);
    return PT_OK;
}

pt_status inspect_main(int argc, char **argv)
{
    insp_options o;
    int parsed = insp_parse(argc, argv, &o);
    if (parsed < 0) return PT_OK;
    if (parsed != PT_OK) return (pt_status)parsed;
    if (ckpt_is_checkpoint(o.model)) return ckpt_inspect(o.model);
    char path[4096];
    pt_model_format fmt;
    TRY(model_resolve(o.model, o.revision, path, sizeof path, &fmt));
    insp_report r;
    memset(&r, 0, sizeof r);
    TRY(fmt == PT_MODEL_GGUF ? describe_gguf(path, &o, &r) : describe_hf(path, &o, &r));
    print_report(path, &r, &o);
    return PT_OK;
}
