/* hf_meta_main.c — the C side of tests/export/test_hf_meta.sh: writes the Hugging Face metadata
 * files of a GGUF model (hf_meta_from_gguf), and prints what ptrain's own tokenizer and chat
 * templates make of texts, for hf_meta_check.py to compare with transformers.
 *
 *   hf_meta_main write GGUF DIR DTYPE [vocab-only]   vocab-only: a GGUF with no tensors (the
 *                                                   tokenizer fixtures); sizes from its keys
 *   hf_meta_main encode GGUF|TOKENIZER_JSON TEXTS    TEXTS: one JSON string a line (.jsonl), or
 *                                                   one text a line; prints one
 *                                                   {"ids", "text_ids", "decoded"} a line
 *   hf_meta_main chat GGUF|TOKENIZER_JSON CHATS      CHATS: {"messages", "add_generation_prompt"}
 *                                                   a line; prints {"template", "text"} a line
 *   hf_meta_main config GGUF DIR [vocab-only]        ptrain reading DIR/config.json gets the
 *                                                   GGUF's hyperparameters; prints the differences */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptrain/gguf.h"
#include "ptrain/hf_meta.h"
#include "ptrain/hf_model.h"
#include "ptrain/model.h"
#include "ptrain/tokenizer.h"

static int fail(void)
{
    fprintf(stderr, "hf_meta_main: %s\n", err_message());
    return 1;
}

static uint32_t key_u32(const gguf_file *f, const char *arch, const char *suffix, uint32_t dflt)
{
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    gguf_opt_u32(f, key, &dflt);
    return dflt;
}

/* Sizes of a tokenizer-only GGUF (no tensors for model_config_from_gguf to read). */
static pt_status vocab_only_config(const gguf_file *f, pt_model_config *c)
{
    gguf_str arch;
    memset(c, 0, sizeof *c);
    TRY(gguf_get_str(f, "general.architecture", &arch));
    if (!arch_from_gguf(arch.data, arch.len, &c->arch))
        return ERR(PT_ERR_USER, "%s: architecture %.*s", f->path, (int)arch.len, arch.data);
    const char *a = arch_name(c->arch);
    c->n_layers = (int)key_u32(f, a, "block_count", 1);
    c->dim = (int)key_u32(f, a, "embedding_length", 8);
    c->ffn_dim = (int)key_u32(f, a, "feed_forward_length", 16);
    c->n_heads = (int)key_u32(f, a, "attention.head_count", 1);
    c->n_kv_heads = (int)key_u32(f, a, "attention.head_count_kv", (uint32_t)c->n_heads);
    c->head_dim = (int)key_u32(f, a, "attention.key_length", (uint32_t)(c->dim / c->n_heads));
    c->ctx_len = (int)key_u32(f, a, "context_length", 2048);
    c->norm_eps = 1e-5f;
    c->rope_theta = 10000.0f;
    char key[128];
    snprintf(key, sizeof key, "%s.rope.freq_base", a);
    gguf_opt_f32(f, key, &c->rope_theta);
    const gguf_kv *tokens = gguf_find(f, "tokenizer.ggml.tokens");
    if (!tokens) return ERR(PT_ERR_USER, "%s: no tokenizer.ggml.tokens", f->path);
    c->vocab = (int)tokens->count;
    model_family_defaults(c);
    return PT_OK;
}

static int cmd_write(const char *path, const char *dir, const char *dtype, bool vocab_only)
{
    gguf_file f;
    pt_model_config cfg;
    if (gguf_open(path, &f) != PT_OK) return fail();
    pt_status st = vocab_only ? vocab_only_config(&f, &cfg) : model_config_from_gguf(&f, &cfg);
    if (st == PT_OK) st = hf_meta_from_gguf(&f, &cfg, dir, dtype);
    gguf_close(&f);
    return st == PT_OK ? 0 : fail();
}

static pt_status read_config(const char *path, bool vocab_only, pt_model_config *cfg)
{
    gguf_file f;
    TRY(gguf_open(path, &f));
    pt_status st = vocab_only ? vocab_only_config(&f, cfg) : model_config_from_gguf(&f, cfg);
    gguf_close(&f);
    return st;
}

#define SAME(field, fmt)                                                                            \
    do {                                                                                           \
        if (a->field != b->field) {                                                                \
            printf("config.json %s: " fmt ", the GGUF " fmt "\n", #field, b->field, a->field);       \
            diff++;                                                                                \
        }                                                                                          \
    } while (0)

/* The hyperparameters of a (GGUF) and b (config.json) that differ, printed; their count. */
static int config_diff(const pt_model_config *a, const pt_model_config *b)
{
    int diff = a->arch != b->arch;
    SAME(n_layers, "%d"); SAME(dim, "%d"); SAME(n_heads, "%d"); SAME(n_kv_heads, "%d"); SAME(head_dim, "%d");
    SAME(ffn_dim, "%d"); SAME(vocab, "%d"); SAME(ctx_len, "%d"); SAME(norm_eps, "%g"); SAME(rope_theta, "%g");
    SAME(tied_embeddings, "%d"); SAME(qkv_bias, "%d"); SAME(post_norms, "%d"); SAME(act, "%d");
    SAME(embed_scale, "%g"); SAME(attn_scale, "%g"); SAME(attn_softcap, "%g"); SAME(final_softcap, "%g");
    SAME(sliding_window, "%d");
    for (int l = 0; l < a->n_layers; l++) diff += model_layer_window(a, l) != model_layer_window(b, l);
    return diff;
}

static int cmd_config(const char *path, const char *dir, bool vocab_only)
{
    pt_model_config want;
    hf_config got;
    char file[4096];
    snprintf(file, sizeof file, "%s/config.json", dir);
    if (read_config(path, vocab_only, &want) != PT_OK || hf_config_read(file, &got) != PT_OK) return fail();
    int diff = config_diff(&want, &got.cfg);
    printf("config.json read back by ptrain: %d difference(s), rope_scaling %s\n", diff, rope_type_name(got.rope.type));
    return diff != 0;
}

static pt_status open_tokenizer(const char *path, pt_tokenizer **tok)
{
    size_t n = strlen(path);
    if (n < 5 || strcmp(path + n - 5, ".gguf")) return tokenizer_from_json(path, tok);
    gguf_file f;
    TRY(gguf_open(path, &f));
    pt_status st = tokenizer_from_gguf(&f, tok);
    gguf_close(&f);
    return st;
}

static json_t *id_list(const int32_t *ids, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++) json_array_append_new(a, json_integer(ids[i]));
    return a;
}

/* One text: its ids without and with the model's special tokens, and the plain ids decoded. */
static pt_status encode_one(const pt_tokenizer *tok, const char *text, size_t len)
{
    int32_t *ids = NULL, *text_ids = NULL;
    size_t n = 0, tn = 0;
    strbuf dec = {0};
    pt_status st = tokenizer_encode(tok, text, len, true, &ids, &n);
    if (st == PT_OK) st = tokenizer_encode_text(tok, text, len, &text_ids, &tn);
    if (st == PT_OK) st = tokenizer_decode(tok, ids, n, &dec);
    if (st == PT_OK) {
        json_t *decoded = json_stringn(dec.data ? dec.data : "", dec.len); /* NULL: not UTF-8 */
        json_t *o = json_pack("{s:o, s:o, s:o?}", "ids", id_list(ids, n), "text_ids", id_list(text_ids, tn),
                              "decoded", decoded);
        char *line = json_dumps(o, JSON_COMPACT);
        printf("%s\n", line);
        free(line);
        json_decref(o);
    }
    free(ids);
    free(text_ids);
    sb_free(&dec);
    return st;
}

/* A line of TEXTS: a JSON string (jsonl), or the line itself without its newline. */
static int encode_line(const pt_tokenizer *tok, char *line, size_t len, bool jsonl)
{
    if (!jsonl) {
        if (len && line[len - 1] == '\n') len--;
        return encode_one(tok, line, len) == PT_OK ? 0 : fail();
    }
    json_error_t e;
    json_t *s = json_loads(line, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    int rc = !json_is_string(s) ? 1 : encode_one(tok, json_string_value(s), json_string_length(s)) == PT_OK ? 0 : fail();
    json_decref(s);
    return rc;
}

static int cmd_encode(const char *tok_path, const char *texts)
{
    pt_tokenizer *tok;
    if (open_tokenizer(tok_path, &tok) != PT_OK) return fail();
    FILE *in = fopen(texts, "r");
    char *line = NULL;
    size_t cap = 0, n = strlen(texts);
    bool jsonl = n > 6 && !strcmp(texts + n - 6, ".jsonl");
    int rc = in ? 0 : 1;
    ssize_t got;
    while (rc == 0 && (got = getline(&line, &cap, in)) > 0) rc = encode_line(tok, line, (size_t)got, jsonl);
    free(line);
    if (in) fclose(in);
    tokenizer_free(tok);
    return rc;
}

/* The model's bos and eos texts ("" when none), as generate and training render templates. */
static void special_text(const pt_tokenizer *tok, int32_t id, strbuf *out)
{
    if (id >= 0) tokenizer_decode_token(tok, id, out);
}

static json_t *render_one(const pt_tokenizer *tok, const json_t *chat)
{
    const json_t *list = json_object_get(chat, "messages");
    size_t n = json_array_size(list);
    chat_message *msgs = calloc(n ? n : 1, sizeof *msgs);
    for (size_t i = 0; i < n; i++) {
        const json_t *m = json_array_get(list, i);
        msgs[i] = (chat_message){json_string_value(json_object_get(m, "role")),
                                 json_string_value(json_object_get(m, "content")), NULL};
    }
    const char *name = chat_template_detect(tokenizer_chat_template(tok));
    strbuf bos = {0}, eos = {0}, text = {0};
    special_text(tok, tokenizer_bos(tok), &bos);
    special_text(tok, tokenizer_eos(tok), &eos);
    bool gen = json_is_true(json_object_get(chat, "add_generation_prompt"));
    pt_status st = name ? chat_render_with_tokens(name, sb_text(&bos), sb_text(&eos), msgs, (int)n, gen, &text) : PT_ERR_USER;
    json_t *o = json_pack("{s:s?, s:s?}", "template", name, "text", st == PT_OK ? sb_text(&text) : NULL);
    free(msgs);
    sb_free(&bos);
    sb_free(&eos);
    sb_free(&text);
    return o;
}

static int cmd_chat(const char *tok_path, const char *chats)
{
    pt_tokenizer *tok;
    if (open_tokenizer(tok_path, &tok) != PT_OK) return fail();
    FILE *in = fopen(chats, "r");
    char *line = NULL;
    size_t cap = 0;
    int rc = in ? 0 : 1;
    while (rc == 0 && getline(&line, &cap, in) > 0) {
        json_error_t e;
        json_t *chat = json_loads(line, 0, &e), *o = chat ? render_one(tok, chat) : NULL;
        char *out = o ? json_dumps(o, JSON_COMPACT) : NULL;
        if (out) printf("%s\n", out);
        else rc = 1;
        free(out);
        json_decref(o);
        json_decref(chat);
    }
    free(line);
    if (in) fclose(in);
    tokenizer_free(tok);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 5 && !strcmp(argv[1], "write")) return cmd_write(argv[2], argv[3], argv[4], argc > 5);
    if (argc == 4 && !strcmp(argv[1], "encode")) return cmd_encode(argv[2], argv[3]);
    if (argc == 4 && !strcmp(argv[1], "chat")) return cmd_chat(argv[2], argv[3]);
    if (argc >= 4 && !strcmp(argv[1], "config")) return cmd_config(argv[2], argv[3], argc > 4);
    fprintf(stderr, "usage: hf_meta_main write GGUF DIR DTYPE [vocab-only] | encode SRC TEXTS | chat SRC CHATS | "
                    "config GGUF DIR [vocab-only]\n");
    return 2;
}
