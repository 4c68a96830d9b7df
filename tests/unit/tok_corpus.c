/* tok_corpus.c — the helpers test_tokenizer.c and test_spm.c share (tok_corpus.h): files, the
 * corpus and its chunks, message formatting, patched tokenizer.json files, the chat-template
 * golden checks and in-memory GGUF images. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/error.h"
#include "ptrain/gguf.h"
#include "tok_corpus.h"

/* ---- files ---- */

const char *tok_srcdir(void)
{
    const char *s = getenv("PTRAIN_SRCDIR");
    return s && *s ? s : "..";
}

void tok_data_path(char *buf, size_t size, const char *rel)
{
    snprintf(buf, size, "%s/tests/data/tokenizer/%s", tok_srcdir(), rel);
}

char *tok_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (!b) return NULL;
    b[n] = '\0';
    *len = (size_t)n;
    return b;
}

json_t *tok_load_json(const char *rel)
{
    char path[4096];
    tok_data_path(path, sizeof path, rel);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    if (!j) fail_msg("%s: %s", path, je.text);
    return j;
}

void tok_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) fail_msg("cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

bool tok_find_model(const char *name, char *buf, size_t size)
{
    const char *dirs[] = {getenv("PTRAIN_MODELS"), "/tmp/models", "../models"};
    for (int i = 0; i < 3; i++) {
        if (!dirs[i] || !*dirs[i]) continue;
        snprintf(buf, size, "%s/%s", dirs[i], name);
        if (access(buf, R_OK) == 0) return true;
    }
    return false;
}

/* ---- the texts ---- */

void corpus_add(tok_corpus *c, const char *p, size_t len)
{
    if (c->n == c->cap) fail_msg("corpus: no room for text %zu", c->n);
    c->texts[c->n].text = malloc(len + 1);
    memcpy(c->texts[c->n].text, p, len);
    c->texts[c->n].text[len] = '\0';
    c->texts[c->n++].len = len;
}

static void add_chunk(tok_corpus *c, size_t k)
{
    static const char *const seps[] = {"\n", "\n\n", "\r\n"};
    const char *sep = seps[k % 3];
    const tok_text *line = &c->texts[k * CHUNK_LINES];
    size_t len = 0;
    for (size_t j = 0; j < CHUNK_LINES; j++) len += line[j].len + strlen(sep);
    char *b = malloc(len + 1), *p = b;
    for (size_t j = 0; j < CHUNK_LINES; j++) {
        if (j) p = stpcpy(p, sep);
        memcpy(p, line[j].text, line[j].len);
        p += line[j].len;
    }
    corpus_add(c, b, (size_t)(p - b));
    free(b);
}

int corpus_load(tok_corpus *c, size_t extra)
{
    char path[4096];
    size_t len, lines = 0;
    *c = (tok_corpus){0};
    tok_data_path(path, sizeof path, "corpus.txt");
    char *corpus = tok_slurp(path, &len);
    if (!corpus) {
        fprintf(stderr, "cannot read %s (set PTRAIN_SRCDIR to the source tree)\n", path);
        return -1;
    }
    for (size_t i = 0; i < len; i++) lines += corpus[i] == '\n';
    c->cap = lines + lines / CHUNK_LINES + extra;
    c->texts = calloc(c->cap, sizeof *c->texts);
    for (char *p = corpus, *e; p < corpus + len && (e = memchr(p, '\n', (size_t)(corpus + len - p))); p = e + 1)
        corpus_add(c, p, (size_t)(e - p));
    c->n_lines = c->n;
    for (size_t k = 0; k < c->n_lines / CHUNK_LINES; k++) add_chunk(c, k);
    c->n_chunks = c->n - c->n_lines;
    free(corpus);
    return 0;
}

const char *corpus_where(const tok_corpus *c, size_t i)
{
    static char buf[64];
    if (i < c->n_lines) snprintf(buf, sizeof buf, "corpus line %zu", i + 1);
    else if (i < c->n_lines + c->n_chunks) snprintf(buf, sizeof buf, "chunk %zu", i - c->n_lines);
    else snprintf(buf, sizeof buf, "extra.json[%zu]", i - c->n_lines - c->n_chunks);
    return buf;
}

int corpus_load_extra(tok_corpus *c, const char *rel)
{
    char path[4096];
    tok_data_path(path, sizeof path, rel);
    json_t *extra = json_load_file(path, JSON_ALLOW_NUL, NULL);
    if (!json_is_array(extra)) {
        fprintf(stderr, "cannot read %s (set PTRAIN_SRCDIR to the source tree)\n", path);
        json_decref(extra);
        return -1;
    }
    int rc = corpus_load(c, json_array_size(extra));
    for (size_t i = 0; rc == 0 && i < json_array_size(extra); i++)
        corpus_add(c, json_string_value(json_array_get(extra, i)), json_string_length(json_array_get(extra, i)));
    json_decref(extra);
    return rc;
}

uint32_t tok_fnv1a(const void *data, size_t n, uint32_t h)
{
    const uint8_t *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x01000193u;
    return h;
}

uint32_t tok_ids_hash(const int32_t *ids, size_t n)
{
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) {
        uint8_t le[4] = {(uint8_t)ids[i], (uint8_t)(ids[i] >> 8), (uint8_t)(ids[i] >> 16), (uint8_t)(ids[i] >> 24)};
        h = tok_fnv1a(le, 4, h);
    }
    return h;
}

int variants_load(tok_variants *v, const char *rel, size_t n_texts)
{
    char path[4096];
    size_t len;
    tok_data_path(path, sizeof path, rel);
    *v = (tok_variants){0};
    char *b = tok_slurp(path, &len), *save = NULL;
    char *nl = b ? strchr(b, '\n') : NULL;
    if (!nl) {
        free(b);
        return -1;
    }
    *nl = '\0';
    v->names = calloc(64, sizeof *v->names);
    for (char *w = strtok_r(b, " ", &save); w && v->n < 64; w = strtok_r(NULL, " ", &save)) v->names[v->n++] = strdup(w);
    v->hash = calloc(n_texts * (size_t)v->n + 1, sizeof *v->hash);
    char *p = nl + 1;
    for (size_t i = 0; i < n_texts * (size_t)v->n; i++) v->hash[i] = (uint32_t)strtoul(p, &p, 16);
    free(b);
    return 0;
}

void variants_free(tok_variants *v)
{
    for (int i = 0; i < v->n; i++) free(v->names[i]);
    free(v->names);
    free(v->hash);
    *v = (tok_variants){0};
}

int variants_column(const tok_variants *v, const char *name)
{
    for (int k = 0; k < v->n; k++)
        if (strcmp(v->names[k], name) == 0) return k;
    return -1;
}

void corpus_free(tok_corpus *c)
{
    for (size_t i = 0; i < c->n; i++) free(c->texts[i].text);
    free(c->texts);
    *c = (tok_corpus){0};
}

void corpus_throughput(const tok_corpus *c, const pt_tokenizer *tok, const char *what)
{
    size_t bytes = 0, tokens = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int rep = 0; rep < 3; rep++)
        for (size_t i = 0; i < c->n; i++) {
            int32_t *ids;
            size_t n;
            if (tokenizer_encode(tok, c->texts[i].text, c->texts[i].len, true, &ids, &n) != PT_OK)
                fail_msg("text %zu: %s", i, err_message());
            free(ids);
            bytes += c->texts[i].len;
            tokens += n;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    print_message("encode throughput (%s, one thread): %.1f MB/s, %.2f bytes/token\n", what, (double)bytes / 1e6 / s,
                  (double)bytes / (double)tokens);
}

void tok_fmt_text(char *buf, size_t size, const tok_text *t)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < t->len && o + 8 < size; i++) {
        unsigned char c = (unsigned char)t->text[i];
        o += (size_t)(c >= 0x20 && c != 0x7f && c != '\\' ? snprintf(buf + o, size - o, "%c", c)
                                                          : snprintf(buf + o, size - o, "\\x%02x", c));
    }
    if (o + 8 >= size) snprintf(buf + o, size - o, "...");
}

void tok_fmt_ids(char *buf, size_t size, const int32_t *ids, size_t n)
{
    size_t o = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && o + 16 < size; i++) o += (size_t)snprintf(buf + o, size - o, " %d", ids[i]);
    if (o + 16 >= size) snprintf(buf + o, size - o, " ...");
}

/* ---- tokenizers ---- */

pt_tokenizer *tok_load_patched(const char *base, const json_t *parts, const char *config, const char *dir,
                               const char *name)
{
    char path[4096];
    json_t *root = json_load_file(base, 0, NULL);
    if (!root || !json_is_object(parts)) fail_msg("cannot read %s, or no variant %s", base, name);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)parts, key, v)
    {
        if (strcmp(key, "model") == 0) json_object_update(json_object_get(root, "model"), v);
        else json_object_set(root, key, v);
    }
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (access(path, F_OK) != 0 && mkdir(path, 0700) != 0) fail_msg("cannot create %s", path);
    snprintf(path, sizeof path, "%s/%s/tokenizer_config.json", dir, name);
    tok_write_file(path, config);
    snprintf(path, sizeof path, "%s/%s/tokenizer.json", dir, name);
    if (json_dump_file(root, path, JSON_COMPACT) != 0) fail_msg("cannot write %s", path);
    json_decref(root);
    pt_tokenizer *tok = NULL;
    if (tokenizer_from_json(path, &tok) != PT_OK) fail_msg("%s", err_message());
    return tok;
}

/* ---- chat templates ---- */

chat_message *tok_json_messages(const json_t *list, int *n)
{
    *n = (int)json_array_size(list);
    chat_message *m = calloc((size_t)*n + 1, sizeof *m);
    for (int i = 0; i < *n; i++) {
        m[i].role = json_string_value(json_object_get(json_array_get(list, (size_t)i), "role"));
        m[i].content = json_string_value(json_object_get(json_array_get(list, (size_t)i), "content"));
    }
    return m;
}

void tok_check_render(const json_t *c, size_t index)
{
    const char *name = json_string_value(json_object_get(c, "template"));
    bool gen = json_is_true(json_object_get(c, "add_generation_prompt"));
    int n;
    chat_message *msgs = tok_json_messages(json_object_get(c, "messages"), &n);
    strbuf sb = {0};
    const json_t *bos = json_object_get(c, "bos");
    pt_status rc = bos ? chat_render_with_tokens(name, json_string_value(bos),
                                                 json_string_value(json_object_get(c, "eos")), msgs, n, gen, &sb)
                       : chat_render(name, msgs, n, gen, &sb);
    free(msgs);
    if (rc != PT_OK) fail_msg("render %zu (%s): %s", index, name, err_message());
    const char *expected = json_string_value(json_object_get(c, "expected"));
    if (strcmp(sb_text(&sb), expected) != 0)
        fail_msg("render %zu: %s (%d messages, generation prompt %d) renders\n  \"%s\"\n"
                 "  apply_chat_template:\n  \"%s\"", index, name, n, gen, sb_text(&sb), expected);
    sb_free(&sb);
}

void tok_check_detect(const json_t *detect)
{
    for (size_t i = 0; i < json_array_size(detect); i++) {
        const json_t *d = json_array_get(detect, i);
        const char *want = json_string_value(json_object_get(d, "name"));
        const char *got = chat_template_detect(json_string_value(json_object_get(d, "text")));
        if (want ? !got || strcmp(got, want) != 0 : got != NULL)
            fail_msg("detect case %zu: got %s, expected %s", i, got ? got : "NULL", want ? want : "NULL");
    }
}

/* ---- GGUF images ---- */

void gbuf_put(gbuf *b, const void *d, size_t n)
{
    b->p = realloc(b->p, b->n + n);
    memcpy(b->p + b->n, d, n);
    b->n += n;
}

void gbuf_u32(gbuf *b, uint32_t v) { gbuf_put(b, &v, 4); }
void gbuf_u64(gbuf *b, uint64_t v) { gbuf_put(b, &v, 8); }

void gbuf_str(gbuf *b, const char *s)
{
    gbuf_u64(b, strlen(s));
    gbuf_put(b, s, strlen(s));
}

void gbuf_key(gbuf *b, const char *key, uint32_t type)
{
    gbuf_str(b, key);
    gbuf_u32(b, type);
    b->n_kv++;
}

uint8_t *gbuf_image(gbuf *body, size_t *size)
{
    gbuf h = {0};
    gbuf_put(&h, "GGUF", 4);
    gbuf_u32(&h, 3);
    gbuf_u64(&h, 0);
    gbuf_u64(&h, body->n_kv);
    gbuf_put(&h, body->p, body->n);
    static const uint8_t zeros[32];
    gbuf_put(&h, zeros, (32 - h.n % 32) % 32);
    free(body->p);
    *size = h.n;
    return h.p;
}

pt_status gbuf_tokenizer(gbuf *body, pt_tokenizer **tok)
{
    size_t size;
    uint8_t *img = gbuf_image(body, &size);
    gguf_file g;
    pt_status rc = gguf_open_memory("tiny.gguf", img, size, &g);
    if (rc == PT_OK) {
        rc = tokenizer_from_gguf(&g, tok);
        gguf_close(&g);
    }
    free(img);
    return rc;
}
