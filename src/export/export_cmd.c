/* export_cmd.c — `ptrain export`, and the export at the end of training: from a base model and an
 * adapter (ptrain's or PEFT's), write the adapter for PEFT and llama.cpp, the merged model as a
 * Hugging Face directory and/or GGUF files, and an Ollama Modelfile, as the config's keys or the
 * command line ask. Nothing here loads the model's weights: the adapter is read against the
 * model's shapes, and merged files are streamed from the base file in row chunks. The config's keys
 * arrive as export_options; only `ptrain export CONFIG` reads a config file itself (config_load),
 * which makes this the one file of src/export that includes ptrain/config.h. */
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ptrain/checkpoint.h"
#include "ptrain/config.h"
#include "ptrain/export.h"
#include "ptrain/filewrite.h"
#include "ptrain/gguf_methods.h"
#include "ptrain/safefs.h"
#include "ptrain/hf_model.h"
#include "ptrain/log.h"
#include "ptrain/model_io.h"
#include "ptrain/peft.h"

/* A model that has its configuration and the shapes of its projections, no weights: enough to
 * read an adapter against. */
static pt_status shape_model(const pt_model_config *cfg, pt_backend *be, pt_model *m)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    m->be = be;
    m->layers = calloc((size_t)cfg->n_layers, sizeof *m->layers);
    TRY_ALLOC(m->layers);
    int64_t qw = (int64_t)cfg->n_heads * cfg->head_dim, kw = (int64_t)cfg->n_kv_heads * cfg->head_dim;
    int64_t shapes[W_COUNT][2] = {[W_Q] = {qw, cfg->dim},           [W_K] = {kw, cfg->dim},
                                  [W_V] = {kw, cfg->dim},           [W_O] = {cfg->dim, qw},
                                  [W_GATE] = {cfg->ffn_dim, cfg->dim}, [W_UP] = {cfg->ffn_dim, cfg->dim},
                                  [W_DOWN] = {cfg->dim, cfg->ffn_dim}};
    for (int l = 0; l < cfg->n_layers; l++)
        for (int w = W_Q; w <= W_DOWN; w++)
            if (shapes[w][0]) m->layers[l].w[w] = tensor_make(PT_F32, 2, shapes[w]);
    int64_t table[2] = {cfg->vocab, cfg->dim}; /* an adapter's modules_to_save are of this shape */
    m->tok_embd = m->output = tensor_make(PT_F32, 2, table);
    return PT_OK;
}

/* The base's hyperparameters and, for GGUF, whether it is one. */
static pt_status base_config(const export_job *j, char *path, size_t len, bool *is_gguf, pt_model_config *cfg)
{
    pt_model_format fmt;
    TRY(model_resolve(j->model, j->revision, path, len, &fmt));
    *is_gguf = fmt == PT_MODEL_GGUF;
    if (*is_gguf) {
        gguf_file f;
        TRY(gguf_open(path, &f));
        pt_status st = model_config_from_gguf(&f, cfg);
        gguf_close(&f);
        return st;
    }
    char dir[4096], config[4200];
    model_hf_dir(path, dir, sizeof dir);
    snprintf(config, sizeof config, "%s/config.json", dir);
    hf_config hc;
    TRY(hf_config_read(config, &hc));
    *cfg = hc.cfg;
    return PT_OK;
}

static bool has_saved(const pt_adapter *l) { return l && (l->saved[0].data || l->saved[1].data); }

static pt_status write_adapter_files(const export_job *j, const pt_adapter *l, const pt_model_config *cfg)
{
    if (l->dora) { /* its own files stay as they are: ptrain's would lose the magnitudes */
        log_info("export     %s: a DoRA adapter's files are not written again (adapter.gguf cannot carry DoRA; "
                 "merge it: --hf, --gguf)\n", shown_text(j->out).s);
        return PT_OK;
    }
    adapter_info info = {.base_model = j->model, .base_name = j->model, .lora_dropout = 0, .best_step = -1};
    float *host[2] = {NULL, NULL};
    pt_status st = PT_OK;
    for (int i = 0; i < 2 && st == PT_OK; i++) { /* modules_to_save, as read */
        if (!l->saved[i].data) continue;
        host[i] = malloc(l->saved[i].nbytes);
        st = host[i] ? backend_download(l->be, &l->saved[i], host[i], l->saved[i].nbytes) : ERR(PT_ERR_NOMEM, "out of memory");
        info.saved[i] = host[i], info.saved_name[i] = adapter_saved_tensor(i), info.saved_module[i] = adapter_saved_module(i);
        info.saved_rows = l->saved[i].shape[0], info.saved_cols = l->saved[i].shape[1];
    }
    if (st == PT_OK) st = peft_save(j->out, l, &info);
    free(host[0]), free(host[1]);
    TRY(st);
    if (has_saved(l)) {
        log_info("export     %s: adapter_config.json + adapter_model.safetensors (PEFT, with modules_to_save); no "
                 "adapter.gguf (llama.cpp's LoRA files carry A and B only)\n", shown_text(j->out).s);
        return PT_OK;
    }
    if (arch_info(cfg->arch)->gated_delta || arch_info(cfg->arch)->not_yet) { /* qwen35, gemma4 */
        log_info("export     %s: adapter_config.json + adapter_model.safetensors (PEFT); no adapter.gguf (llama.cpp's "
                 "tensor names of %s models are not built yet)\n", shown_text(j->out).s, arch_name(cfg->arch));
        return PT_OK;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/adapter.gguf", j->out);
    TRY(adapter_gguf_save(path, l, cfg, j->model));
    log_info("export     %s: adapter_config.json + adapter_model.safetensors (PEFT), adapter.gguf (llama.cpp)\n",
             shown_text(j->out).s);
    return PT_OK;
}

static pt_status write_ggufs(const export_job *j, const char *base, bool is_gguf, const pt_model_config *cfg,
                             const pt_adapter *l, char *first, size_t len)
{
    pt_imatrix im;
    if (j->imatrix) TRY(imatrix_load(j->imatrix, &im));
    pt_status st = PT_OK;
    for (int i = 0; i < j->n_gguf && st == PT_OK; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/merged-%s.gguf", j->out, j->gguf[i]);
        st = export_merged_gguf(path, base, is_gguf, cfg, l, j->gguf[i], j->imatrix ? &im : NULL);
        if (st != PT_OK) break;
        log_info("export     %s (%s)\n", shown_text(path).s, shown_text(j->gguf[i]).s);
        if (i == 0) snprintf(first, len, "merged-%s.gguf", j->gguf[i]);
    }
    if (j->imatrix) imatrix_free(&im);
    return st;
}

static pt_status write_ollama(const export_job *j, const char *base, bool is_gguf, const char *merged, bool adapter)
{
    if (!merged[0] && (!is_gguf || !adapter))
        return ERR(PT_ERR_USER, "ollama_save needs a GGUF model: set huggingface_save_gguf: true (a merged GGUF), "
                   "or train on a GGUF base (FROM the base plus ADAPTER adapter.gguf)");
    char name[256];
    if (j->ollama_name) snprintf(name, sizeof name, "%s", j->ollama_name);
    else {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", j->out);
        snprintf(name, sizeof name, "%s", basename(copy));
    }
    /* the peer's size tag names the model's tag, unless the name already carries one */
    if (j->ollama_tag && !strchr(name, ':')) {
        size_t n = strlen(name);
        snprintf(name + n, sizeof name - n, ":%s", j->ollama_tag);
    }
    char base_abs[4096], adapter_gguf[4200];
    if (!realpath(base, base_abs)) snprintf(base_abs, sizeof base_abs, "%s", base); /* FROM is read from dir */
    snprintf(adapter_gguf, sizeof adapter_gguf, "%s/adapter.gguf", j->out);
    struct stat sb;
    if (!merged[0] && stat(adapter_gguf, &sb) != 0)
        return ERR(PT_ERR_USER, "the Modelfile needs %s (FROM the base + ADAPTER): write the adapter files too "
                   "(without --no-adapter-files), or a merged GGUF", shown_text(adapter_gguf).s);
    ollama_job o = {.dir = j->out, .name = name, .merged_gguf = merged[0] ? merged : NULL, .base_gguf = base_abs,
                    .chat_template = j->chat_template, .param_keys = j->param_keys, .param_values = j->param_values,
                    .n_params = j->n_params};
    return export_ollama(&o);
}

static pt_status run_with(const export_job *j, const char *base, bool is_gguf, const pt_model_config *cfg,
                          const pt_adapter *l)
{
    /* a mixture of experts merges within its own format: the experts are copied as stored (the adapters are on the
     * attention), and moving them between the safetensors and GGUF layouts is not built yet */
    if (cfg->n_experts > 0 && ((j->hf && is_gguf) || ((j->n_gguf || j->ollama) && !is_gguf)))
        return ERR(PT_ERR_USER, "%s: a mixture-of-experts model (%s) from a %s base; merged %s exports of its experts "
                   "from it are not built yet: export a merged %s from this base, or the adapter files alone",
                   shown_text(base).s, arch_name(cfg->arch), is_gguf ? "GGUF" : "Hugging Face",
                   is_gguf ? "Hugging Face" : "GGUF (and ollama)", is_gguf ? "GGUF" : "Hugging Face directory");
    TRY(safefs_mkdirs(j->out));
    if (l && j->adapter_files) TRY(write_adapter_files(j, l, cfg));
    if (j->hf) {
        char dir[4096];
        if (j->merged_dir) snprintf(dir, sizeof dir, "%s", j->merged_dir);
        else snprintf(dir, sizeof dir, "%s/merged", j->out);
        TRY(export_merged_hf(dir, base, is_gguf, cfg, l, j->hf_dtype ? j->hf_dtype : "bf16"));
        log_info("export     %s (merged model, %s; transformers loads it)\n", shown_text(dir).s,
                 shown_text(j->hf_dtype ? j->hf_dtype : "bf16").s);
    }
    char merged[256] = "";
    if (j->n_gguf) TRY(write_ggufs(j, base, is_gguf, cfg, l, merged, sizeof merged));
    if (j->ollama) TRY(write_ollama(j, base, is_gguf, merged, l != NULL));
    return PT_OK;
}

pt_status export_run(const export_job *j, const pt_adapter *trained)
{
    char base[4096];
    bool is_gguf;
    pt_model_config cfg;
    TRY(base_config(j, base, sizeof base, &is_gguf, &cfg));
    if (j->n_gguf || j->ollama) TRY(model_refuse_gated_delta(&cfg, "a merged GGUF export (--gguf, --ollama)"));
    if (j->n_gguf || j->ollama) TRY(arch_check_supported(cfg.arch, "a merged GGUF export (--gguf, --ollama)"));
    if (trained || !j->adapter) return run_with(j, base, is_gguf, &cfg, trained);
    pt_backend *be = NULL;
    pt_backend_options bo = {.device = DEVICE_CPU}; /* all cores: quantizing runs in parallel */
    TRY(backend_open(&bo, &be));
    pt_model shapes;
    pt_adapter l = {0};
    pt_status st = shape_model(&cfg, be, &shapes);
    if (st == PT_OK) st = adapter_load(j->adapter, &shapes, &l);
    if (st == PT_OK) st = run_with(j, base, is_gguf, &cfg, &l);
    adapter_free(&l);
    free(shapes.layers);
    backend_close(be);
    return st;
}

/* The chat template training renders with (dataset_template_name's rule): the built-in one
 * matching the base model's own, else chatml. */
static const char *detect_template(const char *model, const char *revision)
{
    char path[4096], dir[4096];
    pt_model_format fmt;
    pt_tokenizer *tok = NULL;
    if (model_resolve(model, revision, path, sizeof path, &fmt) != PT_OK) return NULL;
    if (fmt == PT_MODEL_GGUF) {
        gguf_file f;
        if (gguf_open(path, &f) != PT_OK) return NULL;
        if (tokenizer_from_gguf(&f, &tok) != PT_OK) tok = NULL;
        gguf_close(&f);
    } else {
        model_hf_dir(path, dir, sizeof dir);
        if (tokenizer_from_hf_dir(dir, &tok) != PT_OK) tok = NULL;
    }
    const char *name = tok ? chat_template_detect(tokenizer_chat_template(tok)) : NULL;
    tokenizer_free(tok);
    return name ? name : "chatml"; /* a static name */
}

static const char export_usage[] =
    "Usage: ptrain export CONFIG [OPTIONS]     what CONFIG asks for (huggingface_save: the merged HF\n"
    "                                          directory, huggingface_save_gguf + quantization_method:\n"
    "                                          merged GGUF files, ollama_save: a Modelfile), from\n"
    "                                          model_name and the adapter in final_model_dir\n"
    "       ptrain export --model MODEL --adapter DIR --out DIR [OPTIONS]\n"
    "Options (add to what CONFIG asks):\n"
    "  --gguf METHODS      merged GGUF files OUT/merged-METHOD.gguf: f16, bf16, q8_0, q4_0, q4_1, q4_k_m, ...\n"
    "                      (one or a comma-separated list)\n"
    "  --imatrix FILE      quantize the GGUF files with llama.cpp's importance matrix FILE (llama-imatrix's\n"
    "                      .gguf or legacy .dat), as llama-quantize --imatrix does\n"
    "  --hf                merged Hugging Face directory OUT/merged\n"
    "  --dtype D           its weights: bf16 (default), f16 or f32\n"
    "  --ollama NAME       OUT/Modelfile, and `ollama create NAME` when ollama is on PATH\n"
    "  --out DIR           where to write (default: the adapter's directory; for a checkpoint-N.h5,\n"
    "                      a directory checkpoint-N beside it)\n"
    "  --no-adapter-files  do not (re)write adapter_config.json, adapter_model.safetensors, adapter.gguf\n"
    "  --chat-template T   the Modelfile's template: chatml, smollm2, qwen2.5, llama-3, llama-3.1,\n"
    "                      llama-3.2, gemma, mistral, mistral-v3, alpaca\n"
    "                      (default: the config's chat_template, else the one training detects)\n"
    "--adapter: a ptrain adapter (adapter.h5 or its directory), a PEFT adapter directory, a llama.cpp\n"
    "adapter (.gguf) or a training checkpoint (output_dir/checkpoint-N.h5: its adapters).\n";

typedef struct {
    export_job job;
    const char *config;
    char *gguf_list; /* --gguf, split in place */
    char *methods[32];
} export_cli;

static pt_status usage(const char *what, const char *arg)
{
    return ERR(PT_ERR_USAGE, "%s '%s'\nTry 'ptrain export --help'.", what, arg ? shown_text(arg).s : "");
}

static pt_status add_methods(export_cli *c, char *list)
{
    for (char *save = NULL, *m = strtok_r(list, ",", &save); m; m = strtok_r(NULL, ",", &save)) {
        if (!gguf_method_known(m))
            return ERR(PT_ERR_USAGE, "--gguf %s: ptrain cannot write it; choose from %s", shown_text(m).s,
                       gguf_method_list());
        if (c->job.n_gguf == 32) return usage("too many GGUF methods in", list);
        c->methods[c->job.n_gguf++] = m;
    }
    c->job.gguf = c->methods;
    return PT_OK;
}

/* Returns PT_OK, PT_ERR_USAGE, or -1 after --help. */
static int parse_cli(int argc, char **argv, export_cli *c)
{
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'}, {"adapter", required_argument, 0, 'a'},
        {"out", required_argument, 0, 'o'},   {"gguf", required_argument, 0, 'g'},
        {"hf", no_argument, 0, 'H'},          {"dtype", required_argument, 0, 'd'},
        {"ollama", required_argument, 0, 'O'}, {"no-adapter-files", no_argument, 0, 'N'},
        {"chat-template", required_argument, 0, 'T'}, {"imatrix", required_argument, 0, 'I'},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    c->job.adapter_files = true;
    optind = 1;
    opterr = 0;
    for (int o; (o = getopt_long(argc, argv, "", longs, NULL)) != -1;) {
        switch (o) {
        case 'm': c->job.model = optarg; break;
        case 'a': c->job.adapter = optarg; break;
        case 'o': c->job.out = optarg; break;
        case 'g': TRY(add_methods(c, optarg)); break;
        case 'H': c->job.hf = true; break;
        case 'd': c->job.hf_dtype = optarg; break;
        case 'O': c->job.ollama = true, c->job.ollama_name = optarg; break;
        case 'N': c->job.adapter_files = false; break;
        case 'T': c->job.chat_template = optarg; break;
        case 'I': c->job.imatrix = optarg; break;
        case 'h': fputs(export_usage, stdout); return -1;
        default: return usage("unknown or incomplete option", argv[optind - 1]);
        }
    }
    if (optind < argc) c->config = argv[optind++];
    if (optind < argc) return usage("unexpected argument", argv[optind]);
    if (!c->config && !c->job.model) return ERR(PT_ERR_USAGE, "give a CONFIG or --model\nTry 'ptrain export --help'.");
    return PT_OK;
}

/* Fill what the command line left open from the config's keys. */
static pt_status apply_config(export_cli *c, const export_options *o)
{
    export_job *j = &c->job;
    if (!j->model) j->model = o->model_name, j->revision = o->revision;
    if (!j->adapter) j->adapter = o->final_model_dir;
    j->hf = j->hf || o->huggingface_save;
    if (!j->merged_dir) j->merged_dir = o->merged_save_dir;
    if (!j->imatrix) j->imatrix = o->imatrix_file;
    if (o->huggingface_save_gguf && j->n_gguf == 0)
        for (int i = 0; i < o->quantization_method.n; i++) {
            char *m = o->quantization_method.items[i];
            if (j->n_gguf == 32)
                return ERR(PT_ERR_USER, "%s: more than 32 quantization methods", shown_text(o->config_path).s);
            if (!gguf_method_known(m))
                return ERR(PT_ERR_USER, "%s: quantization_method %s: ptrain cannot write it yet; choose from %s",
                           shown_text(o->config_path).s, shown_text(m).s, gguf_method_list());
            c->methods[j->n_gguf++] = m;
            j->gguf = c->methods;
        }
    if (o->ollama_save) j->ollama = true;
    if (!j->ollama_name) j->ollama_name = o->ollama_model;
    j->param_keys = o->model_parameters.keys, j->param_values = o->model_parameters.values;
    j->n_params = o->model_parameters.n;
    j->ollama_tag = o->model_parameters.tag;
    if (!j->chat_template) j->chat_template = o->chat_template;
    return PT_OK;
}

/* Where to write when --out is not given: the adapter's directory; for a checkpoint-N.h5, a
 * directory checkpoint-N beside it (as Hugging Face's trainers lay checkpoints out). */
static const char *default_out(const char *adapter, char *out, size_t len)
{
    struct stat sb;
    if (stat(adapter, &sb) != 0 || S_ISDIR(sb.st_mode)) return adapter;
    snprintf(out, len, "%s", adapter);
    size_t n = strlen(out);
    if (ckpt_step_of(adapter) >= 0 && n > 3) out[n - 3] = 0; /* drop .h5 */
    else {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", adapter);
        snprintf(out, len, "%s", dirname(copy));
    }
    return out;
}

pt_status export_main(int argc, char **argv)
{
    export_cli c = {0};
    signal(SIGXFSZ, SIG_IGN); /* past a file-size limit, writes fail (EFBIG) and the export cleans up */
    fw_cleanup_on_signals();  /* Ctrl-C leaves no multi-GB temporary file */
    int parsed = parse_cli(argc, argv, &c);
    if (parsed < 0) return PT_OK;
    if (parsed != PT_OK) return (pt_status)parsed;
    pt_config cfg;
    bool have_cfg = c.config != NULL;
    if (have_cfg) TRY(config_load(c.config, &cfg, log_warn_stream()));
    export_options o = have_cfg ? export_options_from_config(&cfg) : (export_options){0};
    pt_status st = have_cfg ? apply_config(&c, &o) : PT_OK;
    char out[4096];
    if (st == PT_OK && !c.job.out && c.job.adapter) c.job.out = default_out(c.job.adapter, out, sizeof out);
    if (st == PT_OK && !c.job.out) st = ERR(PT_ERR_USAGE, "give --out DIR (or --adapter DIR)\nTry 'ptrain export --help'.");
    if (st == PT_OK && !c.job.chat_template) c.job.chat_template = detect_template(c.job.model, c.job.revision);
    if (st == PT_OK) st = export_run(&c.job, NULL);
    if (have_cfg) config_free(&cfg);
    return st;
}

pt_status export_after_training(const export_options *o, const pt_adapter *l, const char *chat_template)
{
    if (!o->huggingface_save && !o->huggingface_save_gguf && !o->ollama_save) return PT_OK;
    export_cli c = {0};
    TRY(apply_config(&c, o));
    c.job.out = o->final_model_dir;
    c.job.adapter_files = false; /* written with adapter.h5 */
    if (chat_template) c.job.chat_template = chat_template;
    return export_run(&c.job, l);
}

export_options export_options_from_config(const pt_config *cfg)
{
    return (export_options){.config_path = cfg->path, .model_name = cfg->model_name, .revision = cfg->revision,
                            .final_model_dir = cfg->final_model_dir, .chat_template = cfg->chat_template,
                            .merged_save_dir = cfg->merged_save_dir, .imatrix_file = cfg->imatrix_file,
                            .huggingface_save = cfg->huggingface_save,
                            .huggingface_save_gguf = cfg->huggingface_save_gguf, .ollama_save = cfg->ollama_save,
                            .quantization_method = cfg->quantization_method, .ollama_model = cfg->ollama_model,
                            .model_parameters = cfg->model_parameters};
}
