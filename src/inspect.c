/* inspect.c — `ptrain inspect MODEL [--revision REV] [--max-seq-length N] [--batch-size N]
 * [--lora-r R] [--no-4bit]`: a model's architecture, sizes, tensor types, tokenizer and chat
 * template, and the memory one rank needs for it, read from the files (GGUF header, or
 * config.json + the safetensors headers + tokenizer files) without loading any weights, so it is
 * quick even for large models. The weight memory is what loading would allocate (projections in
 * 8-32 bits as NF4 under load_in_4bit, norms in f32, the rest as stored); the training figure
 * is a rough estimate: those weights, LoRA adapters on the seven projections with their
 * gradients and AdamW moments, and the activations of one micro-batch with gradient
 * checkpointing. Given a training checkpoint (output_dir/checkpoint-N.h5), it prints what the
 * checkpoint holds and verifies its checksums instead (ckpt_inspect, src/io/checkpoint_read.c). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/jsonfile.h"
#include "ptrain/checkpoint.h"
#include "ptrain/hf_model.h"
#include "ptrain/inspect.h"
#include "ptrain/model_io.h"
#include "ptrain/nf4.h"

typedef struct {
    const char *model, *revision;
    long seq, batch, lora_r;
    bool nf4;
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
    char tok[256], chat[128];
} insp_report;

static const char insp_usage[] =
    "Usage: ptrain inspect MODEL [--revision REV] [--max-seq-length N] [--batch-size N] [--lora-r R]\n"
    "                            [--no-4bit]\n"
    "       ptrain inspect CHECKPOINT\n"
    "MODEL: a .gguf file, an HF model directory or an HF id (org/name) in the local HF cache.\n"
    "Prints the architecture, sizes, tensor types, tokenizer, chat template and the memory per rank\n"
    "(weights after load_in_4bit, and a rough training estimate for the given batch; defaults:\n"
    "--max-seq-length 2048 --batch-size 2 --lora-r 16).\n"
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
    else if (template_text) snprintf(r->chat, sizeof r->chat, "the model's own (%zu characters; not a built-in one: "
                                     "set chat_template)", strlen(template_text));
    else snprintf(r->chat, sizeof r->chat, "none in the model (set chat_template)");
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
    const char *kind = gguf_str_eq(model, "gpt2") ? "byte-level BPE" : gguf_str_eq(model, "llama") ? "SentencePiece" : "?";
    snprintf(r->tok, sizeof r->tok, "%s (tokenizer.ggml.model \"%.*s\"), %llu tokens", kind, (int)model.len, model.data,
             (unsigned long long)(tokens ? tokens->count : 0));
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
        snprintf(r->arch, sizeof r->arch, "%s", r->cfg.arch);
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

static void hf_tensors(const st_set *s, bool nf4, insp_report *r)
{
    for (size_t i = 0; i < s->n_entries; i++) {
        const st_tensor *t = s->entries[i].tensor;
        count_type(r, st_dtype_name(t->dtype));
        const char *w = strstr(t->name, ".weight.");
        if (w) continue; /* a bitsandbytes part (absmax, quant_map ...): counted with its weight */
        bool edge = !strcmp(t->name, "model.embed_tokens.weight") || !strcmp(t->name, "lm_head.weight");
        bool dense = t->dtype == ST_F32 || t->dtype == ST_F16 || t->dtype == ST_BF16 || t->dtype == ST_F64;
        double stored = t->dtype == ST_F64 ? (double)t->nbytes / 2 : (double)t->nbytes;
        if (has_quant_state(s, t->name)) r->loaded += (double)t->nbytes * (1 + 1.0 / 32) + 1280; /* NF4: codes, absmax codes, maps */
        else if (t->ndim == 1) r->loaded += 4.0 * (double)st_numel(t);
        else if (t->ndim == 2) r->loaded += loaded_matrix(!edge, dense, t->shape[0], t->shape[1], stored, nf4);
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

/* tokenizer.json's model type, then the tokenizer itself for its size and template. */
static void hf_tokenizer(const char *dir, insp_report *r)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
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
    chat_line(r, tokenizer_chat_template(tok));
    tokenizer_free(tok);
}

static void hf_text(const hf_config *h, const st_set *s, insp_report *r)
{
    snprintf(r->format, sizeof r->format, "Hugging Face safetensors, %d file%s%s", s->n_files, s->n_files > 1 ? "s" : "",
             s->index_path ? " (sharded, model.safetensors.index.json)" : "");
    snprintf(r->arch, sizeof r->arch, "%s (model_type %s%s%s)", h->cfg.arch, h->model_type,
             *h->architecture ? ", " : "", h->architecture);
    snprintf(r->rope, sizeof r->rope, "theta %g, %s scaling", h->rope_theta, rope_type_name(h->rope.type));
    if (h->rope.type != PT_ROPE_DEFAULT)
        snprintf(r->rope + strlen(r->rope), sizeof r->rope - strlen(r->rope), " (factor %g)", h->rope.factor);
    if (h->bnb_4bit) snprintf(r->quant, sizeof r->quant, "bitsandbytes NF4%s, pre-quantized: used as it is",
                              h->bnb_double_quant ? " with double quantization" : "");
    else snprintf(r->quant, sizeof r->quant, "none (dtype %s)", *h->torch_dtype ? h->torch_dtype : "not given");
}

static pt_status describe_hf(const char *path, const insp_options *o, insp_report *r)
{
    char dir[4096], config[4200];
    model_hf_dir(path, dir, sizeof dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    hf_config h;
    TRY(hf_config_read(config, &h));
    r->cfg = h.cfg;
    st_set s;
    TRY(st_set_open(strstr(path, ".safetensors") ? path : dir, &s));
    hf_text(&h, &s, r);
    hf_tensors(&s, o->nf4, r);
    st_set_close(&s);
    hf_tokenizer(dir, r);
    return PT_OK;
}

/* ---- the report ---- */

static void family_line(const pt_model_config *c)
{
    if (c->qkv_bias) printf("%-18s q/k/v biases\n", "family features");
    if (c->post_norms)
        printf("%-18s post-norms, tanh-GELU MLP, embeddings x %.4g, scores x %.4g, soft-caps %g / %g, sliding window %d "
               "on layers l %% %d == 0\n", "family features", c->embed_scale, c->attn_scale, c->attn_softcap,
               c->final_softcap, c->sliding_window, c->sliding_pattern);
    else if (c->sliding_window) printf("%-18s sliding window %d\n", "family features", c->sliding_window);
}

static void memory_lines(const insp_report *r, const insp_options *o)
{
    const pt_model_config *c = &r->cfg;
    double qw = (double)c->n_heads * c->head_dim, kw = (double)c->n_kv_heads * c->head_dim, d = c->dim, f = c->ffn_dim;
    double lora = (double)o->lora_r * ((d + qw) + 2 * (d + kw) + (qw + d) + 2 * (d + f) + (f + d)) * c->n_layers * 16;
    double tokens = (double)o->seq * (double)o->batch;
    double acts = 4 * tokens * (c->n_layers * d + 4 * d + 2 * qw + 2 * kw + 3 * f + c->n_heads) + 2 * 4 * 256.0 * c->vocab;
    char a[32], b[32], e[32], t[32];
    printf("%-18s %s (load_in_4bit %s)\n", "weights per rank", human(r->loaded, a, sizeof a), o->nf4 ? "on" : "off");
    printf("%-18s about %s: weights + LoRA r=%ld on 7 projections with gradients and AdamW moments (%s) + "
           "activations of %ld x %ld tokens with gradient checkpointing (%s); rough\n", "training per rank",
           human(r->loaded + lora + acts, t, sizeof t), o->lora_r, human(lora, b, sizeof b), o->batch, o->seq,
           human(acts, e, sizeof e));
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
    printf("\n%-18s %s\n%-18s %s\n%-18s %s\n", "quantization", r->quant, "tokenizer", r->tok, "chat template", r->chat);
    memory_lines(r, o);
}

/* ---- the command ---- */

static pt_status parse_long(const char *opt, const char *text, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(text, &end, 10);
    if (end == text || *end || v < lo || v > hi)
        return ERR(PT_ERR_USAGE, "%s expects an integer from %ld to %ld, got '%s'\nTry 'ptrain inspect --help'.", opt,
                   lo, hi, text);
    *out = v;
    return PT_OK;
}

/* PT_OK, PT_ERR_USAGE, or -1 after printing --help. */
static int insp_parse(int argc, char **argv, insp_options *o)
{
    static const struct option longs[] = {
        {"revision", required_argument, 0, 'r'}, {"max-seq-length", required_argument, 0, 's'},
        {"batch-size", required_argument, 0, 'b'}, {"lora-r", required_argument, 0, 'l'},
        {"no-4bit", no_argument, 0, 'n'},         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    *o = (insp_options){.seq = 2048, .batch = 2, .lora_r = 16, .nf4 = true};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'r': o->revision = optarg; break;
        case 's': TRY(parse_long("--max-seq-length", optarg, 1, 1 << 24, &o->seq)); break;
        case 'b': TRY(parse_long("--batch-size", optarg, 1, 1 << 20, &o->batch)); break;
        case 'l': TRY(parse_long("--lora-r", optarg, 1, 1 << 16, &o->lora_r)); break;
        case 'n': o->nf4 = false; break;
        case 'h': fputs(insp_usage, stdout); return -1;
        default:
            return ERR(PT_ERR_USAGE, "unknown or incomplete option '%s'\nTry 'ptrain inspect --help'.", argv[optind - 1]);
        }
    }
    if (optind >= argc) return ERR(PT_ERR_USAGE, "no model given\nTry 'ptrain inspect --help'.");
    o->model = argv[optind++];
    if (optind < argc) return ERR(PT_ERR_USAGE, "unexpected argument '%s'\nTry 'ptrain inspect --help'.", argv[optind]);
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
