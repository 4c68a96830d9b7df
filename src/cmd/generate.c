/* generate.c — `ptrain generate --model M [--adapter DIR] --prompt TEXT [--chat] [--system TEXT]
 * [--chat-template NAME] [--chat-template-kwarg KEY=VALUE] [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] [--threads N] [--device D]`.
 * Loads the model and its tokenizer (a GGUF file, an HF model directory or an HF id in the local
 * cache: ptrain/model_io.h), renders the chat template when asked, chosen and rendered as training
 * does (dataset_chat_open: the name, the model's named templates, kwargs, special tokens) (else encodes the prompt as
 * the model's tokenizer does, bos first when it adds one), runs the prompt through the model
 * once, then samples token by token with the KV cache, printing each piece of text as soon as it
 * exists. Timing goes to stderr. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/adapter.h"
#include "ptrain/dataset.h"
#include "ptrain/filewrite.h"
#include "ptrain/forward.h"
#include "ptrain/generate.h"
#include "ptrain/model_io.h"
#include "ptrain/sample.h"
#include "ptrain/tokenizer.h"

#define DEFAULT_MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct {
    const char *model, *adapter, *prompt, *system;
    const char *chat_template; /* --chat-template NAME, or NULL: the model's own, as training picks it */
    pt_strmap kwargs;          /* --chat-template-kwarg KEY=VALUE ... */
    pt_device device;
    const char *logits_path, *ids_path; /* --logits, --ids: what exporters' tests compare */
    bool chat, no_4bit, show;
    int max_new, threads;
    float temperature, top_p;
    uint64_t seed;
} gen_options;

static const char gen_usage[] =
    "Usage: ptrain generate [--model MODEL] --prompt TEXT [--chat] [--system TEXT]\n"
    "                       [--chat-template NAME] [--chat-template-kwarg KEY=VALUE]...\n"
    "                       [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S]\n"
    "                       [--adapter DIR] [--threads N] [--device auto|cpu|cuda]\n"
    "                       [--no-4bit] [--logits FILE] [--ids FILE] [--show-prompt]\n"
    "--adapter: a ptrain adapter (adapter.h5 or its directory), a PEFT adapter directory, a llama.cpp\n"
    "adapter (.gguf) or a training checkpoint (checkpoint-N.h5).\n"
    "--no-4bit: keep 8/16/32-bit weights as stored (default: NF4, as training runs).\n"
    "--logits FILE: write the prompt's logits there (float32, [prompt tokens, vocab]).\n"
    "--ids FILE: write the prompt's token ids and the generated ones there (two lines).\n"
    "--chat-template NAME: render with this template, as the config's chat_template (a built-in name,\n"
    "model, or one of the model's named templates such as tool_use); default: the model's own.\n"
    "--chat-template-kwarg KEY=VALUE: a chat_template_kwargs entry (e.g. enable_thinking=false).\n"
    "--show-prompt: print the text the model is given (with --chat: the rendered template) and stop.\n"
    "MODEL: a .gguf file, an HF model directory or an HF id (org/name) in the local HF cache.\n"
    "Default model: " DEFAULT_MODEL " (in $PTRAIN_MODELS or ./models). Temperature 0 is greedy.\n";

static pt_status parse_number(const char *opt, const char *text, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || v < lo || v > hi)
        return ERR(PT_ERR_USAGE, "%s expects a number from %g to %g, got '%s'\nTry 'ptrain generate --help'.",
                   opt, lo, hi, shown_text(text).s);
    *out = v;
    return PT_OK;
}

/* Returns PT_OK, PT_ERR_USAGE, or -1 after printing --help. */
static int gen_parse(int argc, char **argv, gen_options *o)
{
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'},       {"adapter", required_argument, 0, 'a'},
        {"prompt", required_argument, 0, 'p'},      {"chat", no_argument, 0, 'c'},
        {"system", required_argument, 0, 'S'},      {"max-new-tokens", required_argument, 0, 'n'},
        {"temperature", required_argument, 0, 't'}, {"top-p", required_argument, 0, 'P'},
        {"seed", required_argument, 0, 's'},        {"threads", required_argument, 0, 'T'},
        {"device", required_argument, 0, 'd'},      {"help", no_argument, 0, 'h'},
        {"no-4bit", no_argument, 0, '4'},           {"logits", required_argument, 0, 'L'},
        {"ids", required_argument, 0, 'I'},         {"show-prompt", no_argument, 0, 'W'},
        {"chat-template", required_argument, 0, 'C'}, {"chat-template-kwarg", required_argument, 0, 'K'},
        {0, 0, 0, 0}};
    *o = (gen_options){.model = DEFAULT_MODEL, .device = DEVICE_AUTO, .max_new = 256, .temperature = 0.7f,
                       .top_p = 0.9f, .seed = (uint64_t)time(NULL)};
    double v;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'a': o->adapter = optarg; break;
        case 'p': o->prompt = optarg; break;
        case 'c': o->chat = true; break;
        case 'S': o->system = optarg; break;
        case 'd':
            if (!backend_device_parse(optarg, &o->device))
                return ERR(PT_ERR_USAGE, "--device expects auto, cpu or cuda, got '%s'\nTry 'ptrain generate --help'.",
                           shown_text(optarg).s);
            break;
        case '4': o->no_4bit = true; break;
        case 'L': o->logits_path = optarg; break;
        case 'I': o->ids_path = optarg; break;
        case 'W': o->show = true; break;
        case 'C': o->chat_template = optarg; break;
        case 'K': TRY(dataset_chat_kwarg_add(&o->kwargs, optarg)); break;
        case 'n': TRY(parse_number("--max-new-tokens", optarg, 1, 1 << 20, &v)); o->max_new = (int)v; break;
        case 't': TRY(parse_number("--temperature", optarg, 0, 100, &v)); o->temperature = (float)v; break;
        case 'P': TRY(parse_number("--top-p", optarg, 0.0001, 1, &v)); o->top_p = (float)v; break;
        case 's': TRY(parse_number("--seed", optarg, 0, 1e18, &v)); o->seed = (uint64_t)v; break;
        case 'T': TRY(parse_number("--threads", optarg, 1, 4096, &v)); o->threads = (int)v; break;
        case 'h': fputs(gen_usage, stdout); return -1;
        default:
            return ERR(PT_ERR_USAGE, "unknown or incomplete option '%s'\nTry 'ptrain generate --help'.",
                       shown_text(argv[optind - 1]).s);
        }
    }
    if (optind < argc)
        return ERR(PT_ERR_USAGE, "unexpected argument '%s'\nTry 'ptrain generate --help'.", shown_text(argv[optind]).s);
    if (!o->prompt) return ERR(PT_ERR_USAGE, "--prompt is required\nTry 'ptrain generate --help'.");
    return PT_OK;
}

/* The prompt as the chat template renders it, the template chosen and rendered as training
 * renders rows (dataset_chat_open), tokenized as it is, so bos comes from the template alone. */
static pt_status chat_text(const pt_tokenizer *tok, const gen_options *o, strbuf *text)
{
    chat_message msgs[2];
    int k = 0;
    if (o->system) msgs[k++] = (chat_message){"system", o->system, NULL};
    msgs[k++] = (chat_message){"user", o->prompt, NULL};
    dataset_chat *ct = NULL;
    pt_status st = dataset_chat_open(tok, o->chat_template, &o->kwargs, &ct);
    if (st == PT_OK) st = dataset_chat_render(ct, msgs, k, NULL, true, text);
    dataset_chat_free(ct);
    return st;
}

static pt_status prompt_ids(const pt_tokenizer *tok, const gen_options *o, int32_t **ids, size_t *n)
{
    if (!o->chat && !*o->prompt) return ERR(PT_ERR_USER, "the prompt is empty");
    if (!o->chat) return tokenizer_encode_text(tok, o->prompt, strlen(o->prompt), ids, n);
    strbuf text = {0};
    pt_status st = chat_text(tok, o, &text);
    if (st == PT_OK) st = tokenizer_encode(tok, sb_text(&text), text.len, true, ids, n);
    sb_free(&text);
    return st;
}

/* --show-prompt: the text the model is given, exactly (with --chat: the rendered template). */
static pt_status show_prompt(const pt_tokenizer *tok, const gen_options *o)
{
    if (!o->chat) {
        fputs(o->prompt, stdout);
        return PT_OK;
    }
    strbuf text = {0};
    pt_status st = chat_text(tok, o, &text);
    if (st == PT_OK) fwrite(sb_text(&text), 1, text.len, stdout);
    sb_free(&text);
    return st;
}

static bool ends_turn(const pt_tokenizer *tok, int32_t id)
{
    if (id == tokenizer_eos(tok)) return true;
    if (!tokenizer_is_special(tok, id)) return false;
    strbuf s = {0};
    tokenizer_decode_token(tok, id, &s);
    const char *t = sb_text(&s);
    bool end = !strcmp(t, "<|im_end|>") || !strcmp(t, "<|eot_id|>") || !strcmp(t, "<|endoftext|>") ||
               !strcmp(t, "<|end_of_text|>") || !strcmp(t, "</s>") || !strcmp(t, "<end_of_turn>");
    sb_free(&s);
    return end;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* --logits: the prompt's logits, every position (one more forward over the prompt). */
static pt_status write_logits(const pt_model *m, const pt_adapter *ad, const char *path, const int32_t *ids, int n)
{
    pt_kv_cache kv;
    size_t count = (size_t)n * (size_t)m->cfg.vocab;
    float *all = malloc(sizeof(float) * count);
    TRY_ALLOC(all);
    pt_status st = kv_cache_init(m, n, &kv);
    if (st == PT_OK) st = forward_tokens(m, ad, &kv, ids, n, all, false);
    if (st == PT_OK) st = fw_write_file(path, all, sizeof(float) * count);
    if (kv.k) kv_cache_free(m, &kv);
    free(all);
    return st;
}

/* --ids: "prompt ids...\ngenerated ids...\n". */
static pt_status write_ids(const char *path, const int32_t *prompt, int n, const int32_t *gen, int n_gen)
{
    strbuf sb = {0};
    for (int i = 0; i < n; i++) sb_printf(&sb, "%s%d", i ? " " : "", prompt[i]);
    sb_printf(&sb, "\n");
    for (int i = 0; i < n_gen; i++) sb_printf(&sb, "%s%d", i ? " " : "", gen[i]);
    sb_printf(&sb, "\n");
    pt_status st = fw_write_file(path, sb_text(&sb), sb.len);
    sb_free(&sb);
    return st;
}

static pt_status generate_loop(const pt_model *m, const pt_adapter *ad, const pt_tokenizer *tok, const gen_options *o,
                               int32_t *ids, int n)
{
    int ctx = n + o->max_new < m->cfg.ctx_len ? n + o->max_new : m->cfg.ctx_len;
    if (n >= ctx) return ERR(PT_ERR_USER, "the prompt (%d tokens) does not fit the model's context of %d", n, ctx);
    if (o->logits_path) TRY(write_logits(m, ad, o->logits_path, ids, n));
    pt_kv_cache kv;
    float *logits = malloc(sizeof(float) * (size_t)m->cfg.vocab);
    TRY_ALLOC(logits);
    pt_status st = kv_cache_init(m, ctx, &kv);
    sampler s = {.temperature = o->temperature, .top_p = o->top_p, .state = o->seed};
    double t0 = now();
    if (st == PT_OK) st = forward_tokens(m, ad, &kv, ids, n, logits, true);
    double t1 = now();
    int produced = 0, n_tok = tokenizer_vocab_size(tok);
    int32_t *gen = malloc(sizeof(int32_t) * (size_t)(o->max_new + 1));
    if (!gen) st = ERR(PT_ERR_NOMEM, "out of memory");
    strbuf piece = {0};
    while (st == PT_OK && produced < o->max_new && kv.n_past < ctx) {
        /* rows past the tokenizer's ids are padding (Qwen2 pads its embedding): never sampled */
        int32_t next;
        st = sample_next(&s, logits, m->cfg.vocab < n_tok ? m->cfg.vocab : n_tok, &next);
        if (st != PT_OK || ends_turn(tok, next)) break;
        piece.len = 0;
        st = tokenizer_decode_token(tok, next, &piece);
        fwrite(sb_text(&piece), 1, piece.len, stdout);
        fflush(stdout);
        gen[produced++] = next;
        if (st == PT_OK && kv.n_past < ctx) st = forward_tokens(m, ad, &kv, &next, 1, logits, true);
    }
    double t2 = now();
    printf("\n");
    if (st == PT_OK)
        fprintf(stderr, "ptrain: prompt %d tokens in %.2f s (%.1f tok/s); generated %d tokens in %.2f s (%.1f tok/s)\n",
                n, t1 - t0, n / (t1 - t0), produced, t2 - t1, produced > 0 ? produced / (t2 - t1) : 0.0);
    if (st == PT_OK && o->ids_path) st = write_ids(o->ids_path, ids, n, gen, produced);
    sb_free(&piece);
    free(gen);
    free(logits);
    kv_cache_free(m, &kv);
    return st;
}

static pt_status generate_text(const pt_model *m, const pt_adapter *ad, const pt_tokenizer *tok, const gen_options *o)
{
    int32_t *ids = NULL;
    size_t n = 0;
    pt_status st = prompt_ids(tok, o, &ids, &n);
    if (st == PT_OK && n == 0) st = ERR(PT_ERR_USER, "the prompt is empty");
    if (st == PT_OK) st = generate_loop(m, ad, tok, o, ids, (int)n);
    free(ids);
    return st;
}

static pt_status generate_run(const gen_options *o)
{
    pt_tokenizer *tok = NULL;
    pt_backend *be = NULL;
    pt_model m = {0};
    pt_backend_options bo = {.device = o->device, .threads = o->threads};
    pt_status st = backend_open(&bo, &be);
    pt_load_options lo = {.load_in_4bit = !o->no_4bit};
    if (st == PT_OK) st = model_load(o->model, NULL, &lo, be, &m, &tok, NULL, 0);
    pt_adapter adapter = {0};
    if (st == PT_OK && o->adapter) st = adapter_load(o->adapter, &m, &adapter);
    if (st == PT_OK && o->show) st = show_prompt(tok, o);
    else if (st == PT_OK) st = generate_text(&m, o->adapter ? &adapter : NULL, tok, o);
    adapter_free(&adapter);
    model_free(&m);
    backend_close(be);
    tokenizer_free(tok);
    return st;
}

pt_status generate_main(int argc, char **argv)
{
    gen_options o;
    int parsed = gen_parse(argc, argv, &o);
    pt_status st = parsed < 0 ? PT_OK : parsed != PT_OK ? (pt_status)parsed : generate_run(&o);
    dataset_chat_kwargs_free(&o.kwargs);
    return st;
}
