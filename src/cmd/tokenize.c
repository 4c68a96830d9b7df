/* tokenize.c — `ptrain tokenize --model MODEL [--lines] [--chat] [--ids|--pieces] [--no-special]
 * [FILE|-]`: the token ids (or their pieces) of a text, as the model's tokenizer gives them, with
 * the code training uses: the whole input (or, with --lines, each line) encoded as
 * tokenizer(text) does (special tokens written in the text parsed; bos first and eos last when the
 * model's tokenizer adds them: tokenizer_encode_text), or with --no-special as
 * tokenizer(text, add_special_tokens=False); --chat reads a JSON list of {role, content, ...}
 * messages or a {"messages", "tools"} object (one per line with --lines), renders it with the chat
 * template training would use (dataset_chat_open: --chat-template NAME or the model's own, its
 * named templates, --chat-template-kwarg, the special tokens' texts) and tokenizes that as it is. Only the tokenizer is loaded, never the
 * weights. Output: one line per text, the ids separated by spaces, or the pieces each quoted
 * ('...' with \n, \t, \\, \' and other bytes below 0x20 or not UTF-8 escaped), as llama.cpp's
 * llama-tokenize prints them. With --lines the lines are encoded in parallel, blocks of lines
 * over OpenMP's threads (OMP_NUM_THREADS), as dataset preparation encodes its rows, and printed in
 * order; the first line that fails (in input order) is the error. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <getopt.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/dataset.h"
#include "ptrain/model_io.h"
#include "ptrain/tokenize_cmd.h"
#include "ptrain/tokenizer.h"

#define DEFAULT_MODEL "SmolLM2-135M-Instruct.Q4_1.gguf"

typedef struct {
    const char *model, *input;
    bool lines, chat, pieces, no_special;
    const char *chat_template; /* --chat-template NAME, or NULL: the model's own, as training picks it */
    pt_strmap kwargs;          /* --chat-template-kwarg KEY=VALUE ... */
    dataset_chat *ct;          /* the template, opened once (run_tokenize) */
} tok_options;

static const char tok_usage[] =
    "Usage: ptrain tokenize [--model MODEL] [--lines] [--chat] [--ids|--pieces] [--no-special] [FILE|-]\n"
    "                       [--chat-template NAME] [--chat-template-kwarg KEY=VALUE]...\n"
    "Prints the token ids of FILE (default: standard input) as the model's tokenizer gives them, one\n"
    "line per text: the whole input, or with --lines each line of it.\n"
    "--no-special: without the bos/eos the model's tokenizer adds (tokenizer(text,\n"
    "              add_special_tokens=False)); special tokens written in the text are ids either way.\n"
    "--chat: the input is a JSON list of {\"role\", \"content\", ...} messages or an object\n"
    "        {\"messages\": [...], \"tools\": [...]} (with --lines, one per line), rendered with the\n"
    "        chat template as training renders rows.\n"
    "--chat-template NAME: that template, as the config's chat_template (a built-in name, model, or\n"
    "        one of the model's named templates such as tool_use); default: the model's own.\n"
    "--chat-template-kwarg KEY=VALUE: a chat_template_kwargs entry (e.g. enable_thinking=false).\n"
    "--pieces: each token's text, quoted, instead of its id.\n"
    "MODEL: a .gguf file, an HF model directory or an HF id (org/name) in the local HF cache.\n"
    "Default model: " DEFAULT_MODEL " (in $PTRAIN_MODELS or ./models). Only the tokenizer is loaded.\n";

/* Returns PT_OK, PT_ERR_USAGE, or -1 after printing --help. */
static int tok_parse(int argc, char **argv, tok_options *o)
{
    static const struct option longs[] = {
        {"model", required_argument, 0, 'm'}, {"lines", no_argument, 0, 'l'},  {"chat", no_argument, 0, 'c'},
        {"ids", no_argument, 0, 'i'},         {"pieces", no_argument, 0, 'p'}, {"no-special", no_argument, 0, 'n'},
        {"help", no_argument, 0, 'h'},        {"chat-template", required_argument, 0, 'C'},
        {"chat-template-kwarg", required_argument, 0, 'K'}, {0, 0, 0, 0}};
    *o = (tok_options){.model = DEFAULT_MODEL, .input = "-"};
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'l': o->lines = true; break;
        case 'c': o->chat = true; break;
        case 'i': o->pieces = false; break;
        case 'p': o->pieces = true; break;
        case 'n': o->no_special = true; break;
        case 'C': o->chat_template = optarg; break;
        case 'K': TRY(dataset_chat_kwarg_add(&o->kwargs, optarg)); break;
        case 'h': fputs(tok_usage, stdout); return -1;
        default:
            return ERR(PT_ERR_USAGE, "unknown or incomplete option '%s'\nTry 'ptrain tokenize --help'.",
                       shown_text(argv[optind - 1]).s);
        }
    }
    if (optind < argc) o->input = argv[optind++];
    if (optind < argc)
        return ERR(PT_ERR_USAGE, "unexpected argument '%s' (one input file at most)\nTry 'ptrain tokenize --help'.",
                   shown_text(argv[optind]).s);
    return PT_OK;
}

/* The whole of FILE, or of standard input for "-". */
static pt_status read_input(const char *path, strbuf *out)
{
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return ERR(PT_ERR_USER, "%s: cannot open it for reading", shown_text(path).s);
    char buf[65536];
    size_t n;
    pt_status st = PT_OK;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) sb_append(out, buf, n);
    if (ferror(f)) st = ERR(PT_ERR_USER, "%s: read error", shown_text(path).s);
    if (f != stdin) fclose(f);
    return st;
}

/* A JSON list of messages (or {"messages", "tools"}) rendered with the template o->ct. */
static pt_status chat_text(const tok_options *o, const char *json, size_t len, size_t where, strbuf *text)
{
    json_error_t jerr;
    json_t *doc = json_loadb(json, len, 0, &jerr);
    const json_t *list = json_is_object(doc) ? json_object_get(doc, "messages") : doc;
    const json_t *tools = json_is_object(doc) ? json_object_get(doc, "tools") : NULL;
    if (json_is_null(tools)) tools = NULL;
    if (!json_is_array(list) || (tools && !json_is_array(tools))) {
        json_decref(doc);
        return ERR(PT_ERR_USER,
                   "text %zu: expected a JSON list of {\"role\", \"content\"} messages, or an object with such a "
                   "list as \"messages\" and a list as \"tools\" (%s)",
                   where, doc ? "not that" : jerr.text);
    }
    size_t n = json_array_size(list);
    chat_message *msgs = calloc(n ? n : 1, sizeof *msgs);
    pt_status st = msgs ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; st == PT_OK && i < n; i++) {
        const json_t *m = json_array_get(list, i), *c = json_object_get(m, "content");
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!role || (c && !json_is_null(c) && !json_is_string(c)) || (!json_is_string(c) && json_object_size(m) < 2))
            st = ERR(PT_ERR_USER, "text %zu: message %zu: expected a string \"role\" and a string \"content\" (or "
                                  "other fields such as tool_calls)", where, i);
        else
            msgs[i] = (chat_message){role, json_string_value(c), m}; /* its other fields, as training passes them */
    }
    if (st == PT_OK) st = dataset_chat_render(o->ct, msgs, (int)n, tools, false, text);
    free(msgs);
    json_decref(doc);
    return st;
}

/* One text's ids as training makes them. */
static pt_status text_ids(const pt_tokenizer *tok, const tok_options *o, const char *s, size_t len, size_t where,
                          int32_t **ids, size_t *n)
{
    if (o->chat) {
        strbuf text = {0};
        pt_status st = chat_text(o, s, len, where, &text);
        if (st == PT_OK) st = tokenizer_encode(tok, sb_text(&text), text.len, true, ids, n);
        sb_free(&text);
        return st;
    }
    if (o->no_special) return tokenizer_encode(tok, s, len, true, ids, n);
    TRY(tokenizer_encode_text(tok, s, len, ids, n));
    int32_t eos = tokenizer_eos(tok);
    if (!tokenizer_adds_eos(tok) || eos < 0) return PT_OK;
    int32_t *grown = realloc(*ids, (*n + 1) * sizeof *grown);
    if (!grown) return ERR(PT_ERR_NOMEM, "out of memory");
    *ids = grown;
    (*ids)[(*n)++] = eos;
    return PT_OK;
}

/* A piece quoted: printable bytes as they are, \n \t \r \\ \' and other control bytes escaped. */
static void print_piece(const char *p, size_t len)
{
    putchar('\'');
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)p[i];
        if (ch == '\n') fputs("\\n", stdout);
        else if (ch == '\t') fputs("\\t", stdout);
        else if (ch == '\r') fputs("\\r", stdout);
        else if (ch == '\\' || ch == '\'') printf("\\%c", ch);
        else if (ch < 0x20 || ch == 0x7f) printf("\\x%02x", ch);
        else putchar(ch);
    }
    putchar('\'');
}

/* The ids as decimal numbers separated by spaces, then "\n", written in one piece. */
static void print_id_line(const int32_t *ids, size_t n)
{
    char buf[8192];
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        if (used > sizeof buf - 16) {
            fwrite(buf, 1, used, stdout);
            used = 0;
        }
        if (i) buf[used++] = ' ';
        char digits[12];
        int k = 0;
        uint32_t v = ids[i] < 0 ? (uint32_t)0 - (uint32_t)ids[i] : (uint32_t)ids[i];
        do digits[k++] = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        if (ids[i] < 0) buf[used++] = '-';
        while (k) buf[used++] = digits[--k];
    }
    buf[used++] = '\n';
    fwrite(buf, 1, used, stdout);
}

static pt_status print_ids(const pt_tokenizer *tok, const tok_options *o, const int32_t *ids, size_t n)
{
    if (!o->pieces) {
        print_id_line(ids, n);
        return PT_OK;
    }
    strbuf piece = {0};
    pt_status st = PT_OK;
    for (size_t i = 0; st == PT_OK && i < n; i++) {
        if (i) putchar(' ');
        piece.len = 0;
        st = tokenizer_decode_token(tok, ids[i], &piece);
        if (st == PT_OK) print_piece(piece.data ? piece.data : "", piece.len);
    }
    putchar('\n');
    sb_free(&piece);
    return st;
}

static pt_status tokenize_one(const pt_tokenizer *tok, const tok_options *o, const char *s, size_t len, size_t where)
{
    int32_t *ids = NULL;
    size_t n = 0;
    pt_status st = text_ids(tok, o, s, len, where, &ids, &n);
    if (st == PT_OK) st = print_ids(tok, o, ids, n);
    free(ids);
    return st;
}

enum { LINES_BLOCK = 16384 };

typedef struct {
    int32_t *ids;
    size_t n;
    pt_status st;
    char *why; /* the error message of a failed line (malloc'd) */
} line_ids;

/* The lines of s (split on "\n"; a last line without one counts, an empty last one does not),
 * encoded block by block in parallel and printed in order. */
static pt_status tokenize_lines(const pt_tokenizer *tok, const tok_options *o, const char *s, size_t len)
{
    line_ids *out = calloc(LINES_BLOCK, sizeof *out);
    size_t *start = malloc(sizeof *start * (LINES_BLOCK + 1));
    pt_status st = out && start ? PT_OK : ERR(PT_ERR_NOMEM, "out of memory");
    for (size_t at = 0, first = 1; st == PT_OK && at < len; first += LINES_BLOCK) {
        long n = 0;
        while (n < LINES_BLOCK && at < len) {
            const char *nl = memchr(s + at, '\n', len - at);
            start[n++] = at;
            at = nl ? (size_t)(nl - s) + 1 : len;
        }
        start[n] = at;
#pragma omp parallel for schedule(dynamic, 64)
        for (long i = 0; i < n; i++) {
            size_t end = start[i + 1];
            if (end > start[i] && s[end - 1] == '\n') end--;
            line_ids *r = &out[i];
            r->st = text_ids(tok, o, s + start[i], end - start[i], first + (size_t)i, &r->ids, &r->n);
            if (r->st != PT_OK) r->why = strdup(err_message());
        }
        for (long i = 0; i < n; i++) {
            if (st == PT_OK && out[i].st != PT_OK)
                st = ERR(out[i].st, "%s", out[i].why ? out[i].why : "out of memory");
            if (st == PT_OK) st = print_ids(tok, o, out[i].ids, out[i].n);
            free(out[i].ids);
            free(out[i].why);
            out[i] = (line_ids){0};
        }
    }
    free(out);
    free(start);
    return st;
}

static pt_status tokenize_run(tok_options *o)
{
    strbuf in = {0};
    pt_status st = read_input(o->input, &in);
    pt_tokenizer *tok = NULL;
    char resolved[4096];
    pt_model_format fmt;
    if (st == PT_OK) st = model_load_tokenizer(o->model, NULL, &tok, resolved, sizeof resolved, &fmt);
    if (st == PT_OK && o->chat) st = dataset_chat_open(tok, o->chat_template, &o->kwargs, &o->ct);
    const char *s = in.data ? in.data : "";
    if (st == PT_OK) st = o->lines ? tokenize_lines(tok, o, s, in.len) : tokenize_one(tok, o, s, in.len, 1);
    if (fflush(stdout) != 0 && st == PT_OK) st = ERR(PT_ERR_USER, "writing the ids to standard output failed");
    dataset_chat_free(o->ct);
    o->ct = NULL;
    tokenizer_free(tok);
    sb_free(&in);
    return st;
}

pt_status tokenize_main(int argc, char **argv)
{
    tok_options o;
    int parsed = tok_parse(argc, argv, &o);
    pt_status st = parsed < 0 ? PT_OK : parsed != PT_OK ? (pt_status)parsed : tokenize_run(&o);
    dataset_chat_kwargs_free(&o.kwargs);
    return st;
}
