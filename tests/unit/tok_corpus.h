/* tok_corpus.h — what the tokenizer tests (test_tokenizer.c, test_spm.c) share: files of the
 * source tree and of the model directories, tests/data/tokenizer/corpus.txt as lines and 8-line
 * chunks (as the goldens scripts split it), texts and ids written out for failure messages,
 * tokenizer.json variants written to a temporary directory, the chat-template golden checks, and
 * GGUF images built in memory. The tests run with cwd = the build dir; PTRAIN_SRCDIR points at
 * the sources. Failures inside go through cmocka (fail_msg). */
#ifndef PTRAIN_TEST_TOK_CORPUS_H
#define PTRAIN_TEST_TOK_CORPUS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/tokenizer.h"

#define CHUNK_LINES 8

/* ---- files ---- */

/* $PTRAIN_SRCDIR, else "..". */
const char *tok_srcdir(void);
/* buf = <srcdir>/tests/data/tokenizer/<rel>. */
void tok_data_path(char *buf, size_t size, const char *rel);
/* The whole file, NUL-terminated (malloc'd), or NULL when it cannot be read. */
char *tok_slurp(const char *path, size_t *len);
/* The JSON file tests/data/tokenizer/<rel>; fails the test when it cannot be read. */
json_t *tok_load_json(const char *rel);
/* Write text to path; fails the test when it cannot. */
void tok_write_file(const char *path, const char *text);
/* A model file from $PTRAIN_MODELS, /tmp/models or ../models; false when none has it. */
bool tok_find_model(const char *name, char *buf, size_t size);

/* ---- the texts ---- */

typedef struct {
    char *text;
    size_t len;
} tok_text;

typedef struct {
    tok_text *texts; /* corpus lines, then chunks, then what corpus_add appended */
    size_t n, n_lines, n_chunks, cap;
} tok_corpus;

/* corpus.txt's lines (split on "\n" only), then chunk k = lines 8k..8k+7 joined by "\n", "\n\n"
 * or "\r\n" in turn, with room for extra more texts. -1, with a message, when it is unreadable. */
int corpus_load(tok_corpus *c, size_t extra);
/* Where text i of c comes from, for a message: "corpus line N", "chunk K" or "extra.json[J]" (a
 * static buffer). */
const char *corpus_where(const tok_corpus *c, size_t i);
/* Append a copy of p[0..len). */
void corpus_add(tok_corpus *c, const char *p, size_t len);
void corpus_free(tok_corpus *c);
/* corpus_load, then the strings of the JSON array in the data file rel (e.g. "spm/extra.json")
 * appended. -1, with a message, when either is unreadable. */
int corpus_load_extra(tok_corpus *c, const char *rel);

/* The hash columns of a golden script's variants.txt: a line of column names, then one line per
 * text of the low 24 bits of each column's hash. */
typedef struct {
    char **names;
    uint32_t *hash; /* n_texts x n: hash[text * n + column] */
    int n;
} tok_variants;
/* FNV-1a over n bytes from h (start: 0x811c9dc5), and over ids as little-endian int32: the hashes
 * the golden scripts write. */
uint32_t tok_fnv1a(const void *data, size_t n, uint32_t h);
uint32_t tok_ids_hash(const int32_t *ids, size_t n);
/* Read the data file rel for n_texts texts; -1 when it is unreadable. */
int variants_load(tok_variants *v, const char *rel, size_t n_texts);
void variants_free(tok_variants *v);
/* The column named name, or -1. */
int variants_column(const tok_variants *v, const char *name);

/* Encode every text three times with parse_special and print the rate, "encode throughput (what,
 * one thread): N MB/s, N bytes/token". */
void corpus_throughput(const tok_corpus *c, const pt_tokenizer *tok, const char *what);
/* A text for a message: printable ASCII as is, other bytes as \xNN, cut with "..." to fit. */
void tok_fmt_text(char *buf, size_t size, const tok_text *t);
/* " 1 2 3", cut with " ..." to fit. */
void tok_fmt_ids(char *buf, size_t size, const int32_t *ids, size_t n);

/* ---- tokenizers ---- */

/* The tokenizer.json at base with the top-level keys of parts put in ("model": merged into the
 * model), written with config as tokenizer_config.json to dir/name/, then loaded. */
pt_tokenizer *tok_load_patched(const char *base, const json_t *parts, const char *config, const char *dir,
                               const char *name);

/* ---- chat templates ---- */

/* The {role, content} objects of list as messages (pointing into list; free the array). */
chat_message *tok_json_messages(const json_t *list, int *n);
/* One golden {template, messages, add_generation_prompt, [bos, eos], expected}: the rendering
 * must equal apply_chat_template's. */
void tok_check_render(const json_t *c, size_t index);
/* Each golden {text, name}: chat_template_detect(text) must give name (null: NULL). */
void tok_check_detect(const json_t *detect);

/* ---- GGUF images in memory: header, then key/values (no tensors) ---- */

typedef struct {
    uint8_t *p;
    size_t n;
    uint64_t n_kv;
} gbuf;

void gbuf_put(gbuf *b, const void *d, size_t n);
void gbuf_u32(gbuf *b, uint32_t v);
void gbuf_u64(gbuf *b, uint64_t v);
void gbuf_str(gbuf *b, const char *s);
/* A key and its value type; the value follows. */
void gbuf_key(gbuf *b, const char *key, uint32_t type);
/* The image: magic, version 3, no tensors, the key/values of body (freed), padding to 32. */
uint8_t *gbuf_image(gbuf *body, size_t *size);
/* tokenizer_from_gguf on the image of body (freed), a file called "tiny.gguf". */
pt_status gbuf_tokenizer(gbuf *body, pt_tokenizer **tok);

#endif
