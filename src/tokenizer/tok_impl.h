/* tok_impl.h — the tokenizer's internal header: its data (token table, vocabulary and merge
 * maps, normalizer and pre-tokenizer steps, added tokens, the decoder's settings and the word
 * cache) and the functions its parts share.
 *
 * Two kinds share it: byte-level BPE (GPT-2 style: BPE over bytes spelled as characters) and
 * SentencePiece-style BPE (BPE over characters, "▁" for spaces, <0xXX> byte tokens for the
 * characters the vocabulary lacks). They differ in how tokens are spelled, how a word becomes
 * symbols and how ids decode; the pipeline (added tokens, normalizer, pre-tokenizer, merges by
 * rank) is the same.
 *
 * The parts, one concern per file in src/tokenizer/, from the bottom up (a file calls only the
 * ones before it; tests/file-order.sh checks): tok_utf8.c, tok_maps.c, spm_proto.c (the protobuf
 * reader), tok_buf.c (growing buffers), normalize.c (NFC ... NFKD and Precompiled), tok_regex.c,
 * tok_norm_align.c, tok_norm.c, tok_spm.c, bpe.c (BPE on a word), tok_pretok.c, tok_added.c,
 * tok_load.c, tok_api.c (encode, decode and the rest of the public API), tok_fingerprint.c; the
 * loaders tok_json_base.c, tok_json_spm.c, tok_json.c, tok_gguf_base.c, tok_gguf_spm.c,
 * tok_gguf.c, tok_spm_config.c and tok_spm_model.c (from a tokenizer.model); template_builtin.c,
 * chat_template.c and template_set.c. Encoding runs down them: tok_api.c hands the text to tok_added.c, which sends
 * the text between added tokens through tok_norm.c to tok_pretok.c, whose words go to bpe.c
 * (SentencePiece symbols from tok_spm.c). normalize.c and spm_proto.c have headers of their own.
 * A function one file uses alone is static there; the ones used across files are declared at the
 * end of this header, by file in the same order, all named tok_*. Nothing here is part of
 * ptrain's API (that is ptrain/tokenizer.h). */
#ifndef PTRAIN_TOK_IMPL_H
#define PTRAIN_TOK_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <jansson.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/tokenizer.h"
#include "spm_proto.h"

/* byte string -> int32 (open addressing; keys point into memory owned elsewhere) */
typedef struct {
    const uint8_t *key;
    uint32_t len;
    int32_t value;
    uint64_t hash;
} smap_slot;
typedef struct {
    smap_slot *slots;
    size_t mask, count;
} smap;

/* (left id, right id) -> (rank, merged id) */
typedef struct {
    uint64_t key;
    int32_t rank, id;
} pmap_slot;
typedef struct {
    pmap_slot *slots;
    size_t mask, count;
} pmap;

enum { TOKF_PRESENT = 1, TOKF_MODEL = 2, TOKF_SPECIAL = 4, TOKF_ADDED = 8 };

typedef struct {
    uint32_t off, len;   /* the token's bytes (what decoding writes), in pt_tokenizer.bytes */
    uint32_t soff, slen; /* its spelling, what BPE matches (byte-level: the same bytes) */
    uint8_t flags;
} tok_entry;

typedef enum { TOK_BYTE_LEVEL, TOK_SPM } tok_kind;

/* a normalizer step: Prepend text, Replace every match of re with text, a Unicode normalization
 * form (NFC/NFD/NFKC/NFKD), or a SentencePiece precompiled charsmap (normalize.h) */
typedef enum { NORM_PREPEND, NORM_REPLACE, NORM_UNICODE, NORM_CHARSMAP } norm_kind;
typedef struct {
    norm_kind kind;
    pcre2_code *re; /* NORM_REPLACE */
    bool jit;
    char *text; /* NORM_PREPEND, NORM_REPLACE */
    size_t len;
    int form;              /* NORM_UNICODE: a unorm_form */
    struct charsmap *cmap; /* NORM_CHARSMAP */
} norm_step;

enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

#define TOK_MAX_ID (1 << 24) /* ids a loader accepts: below this */
#define PMAP_EMPTY UINT64_MAX /* pmap_slot.key of an empty slot */

/* GGUF token types (tokenizer.ggml.token_type) that both GGUF loaders read */
enum { GGUF_TOKEN_CONTROL = 3, GGUF_TOKEN_USER_DEFINED = 4 };

/* Pre-tokenizer split regexes, in Oniguruma syntax (tok_regex_compile rewrites them for PCRE2). */
#define RE_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define RE_LLAMA3                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN2                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RE_QWEN35                                                                                  \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* A pre-tokenizer GGUF files name (tok_pre_names.c): Split "Isolated" by each of regexes (a
 * NULL-terminated list) in turn, then ByteLevel (splitting with GPT-2's regex when
 * bytelevel_regex); refused, when refused says why. */
typedef struct {
    const char *name;
    const char *const *regexes;
    bool ignore_merges, bytelevel_regex;
    const char *refused;
} tok_pre_rule;

typedef enum {
    SPLIT_ISOLATED,
    SPLIT_REMOVED,
    SPLIT_MERGED_PREV,
    SPLIT_MERGED_NEXT,
    SPLIT_CONTIGUOUS,
} split_behavior;

typedef struct {
    pcre2_code *re; /* NULL: the step does not split (ByteLevel without use_regex) */
    bool jit;
    split_behavior behavior;
    bool prefix_space; /* ByteLevel add_prefix_space */
    bool metaspace;    /* Metaspace: spaces become rep, rep prepended as `prepend` says */
    bool ms_split;     /* Metaspace split: a piece starts at every rep */
    uint8_t prepend, rep_len;
    char rep[8];
} pretok_step;

/* the SentencePiece-style decoder: per token, `from` -> `to` replacements, then <0xXX> -> the
 * byte (ByteFallback); over the whole text, up to strip_start leading and strip_stop trailing
 * strip characters removed (Strip after Fuse, or Metaspace's own prefix) */
typedef struct {
    char *from, *to;
    size_t from_len, to_len;
} dec_replace;

typedef struct {
    uint32_t off, len; /* content, in pt_tokenizer.bytes */
    int32_t id;
    bool special, single_word, lstrip, rstrip, normalized;
} added_token;

typedef struct {
    int32_t child, sibling, token; /* token: index into added[], -1 when no token ends here */
    uint8_t byte;
} trie_node;
typedef struct {
    trie_node *nodes; /* nodes[0] is the root */
    size_t n, cap;
    uint8_t first[32]; /* bitmap of first bytes */
} added_trie;

#define CACHE_SHARDS 16
#define CACHE_SHARD_SLOTS 4096
#define CACHE_KEY_MAX 22 /* longer words, or words of more ids, are not cached */
#define CACHE_IDS_MAX 8
typedef struct { /* one cache line, so that a lookup touches one */
    uint64_t hash;   /* 0: empty */
    uint8_t klen, nids;
    char key[CACHE_KEY_MAX];
    int32_t ids[CACHE_IDS_MAX];
} cache_slot;
typedef struct {
    pthread_mutex_t mu;
    cache_slot *slots; /* CACHE_SHARD_SLOTS, allocated on first use */
    size_t count;
} cache_shard;

struct pt_tokenizer {
    char *source; /* file name, for messages */
    tok_kind kind;
    char *bytes;  /* all token and added-token texts */
    size_t bytes_len, bytes_cap;
    tok_entry *tok;
    int32_t n_tok, tok_cap;
    smap vocab; /* token bytes -> id, over the BPE model's tokens */
    pmap merges;
    int32_t byte_id[256]; /* the one-byte (SentencePiece: ASCII character) tokens */
    int32_t byte_tok[256]; /* SentencePiece: the <0xXX> tokens, -1 when missing */
    int32_t unk;
    bool fuse_unk, ignore_merges, byte_fallback;
    norm_step *norm;
    int n_norm;
    pretok_step *steps;
    int n_steps;
    dec_replace *dec;
    int n_dec;
    bool dec_bytes;               /* ByteFallback */
    uint8_t strip_start, strip_stop; /* characters stripped per token when !strip_fused */
    bool strip_fused;             /* the Strip comes after Fuse: it applies to the whole text */
    char strip_char[5];
    bool clean_up_spaces; /* decode: transformers' clean_up_tokenization (" ." -> ".", " n't" -> "n't", ...) */
    char ms_rep[8];  /* Metaspace decoder: the first token drops these characters */
    uint8_t ms_rep_len;
    added_token *added;
    int n_added;
    added_trie trie[2]; /* [0]: tokens matched on the raw text, [1]: "normalized" ones */
    pcre2_code *word_re; /* \w as Rust's regex has it, for single_word tokens */
    int32_t bos, eos, pad;
    bool add_bos, add_eos; /* what the model's tokenizer adds around plain text */
    char *chat_template;
    char **tmpl_names, **tmpl_texts; /* the model's other named chat templates (tool_use, rag, ...) */
    json_t *tmpl_tokens; /* unk/sep/pad/cls/mask_token texts of tokenizer_config.json, for templates, or NULL */
    int n_tmpl;
    cache_shard cache[CACHE_SHARDS];
};

/* BPE working state for one word: symbols in a linked list, candidate merges in a heap */
typedef struct {
    int32_t id, prev, next; /* id -1: merged into its left neighbour */
} bpe_sym;
typedef struct {
    int32_t rank, pos, id;
} bpe_cand;

/* State of one tokenizer_encode call (so that encoding is re-entrant across threads). */
typedef struct {
    const pt_tokenizer *tok;
    bool parse_special;
    pcre2_match_data *md;
    pcre2_match_context *mctx; /* with a big JIT stack, made when a match needs one */
    const char *text_start; /* the piece that begins at offset 0 of the text (Metaspace "first") */
    pcre2_jit_stack *jstack;
    int32_t *ids; /* output */
    size_t n, cap;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_cand *heap;
    size_t heap_n, heap_cap;
} enc_ctx;

/* A growing NUL-terminated byte buffer; oom is set (and later puts ignored) when it cannot grow. */
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} rbuf;

/* ---- tok_utf8.c ---- */

/* Length of the well-formed UTF-8 sequence at s (n bytes available), or 0 if it is not one. */
size_t tok_utf8_seq_len(const uint8_t *s, size_t n);
/* Offset of the first byte that is not well-formed UTF-8, or n when all of it is. */
size_t tok_utf8_invalid_at(const char *text, size_t n);
/* Decode the (valid) character at s; *len gets its byte length. */
uint32_t tok_utf8_decode(const uint8_t *s, size_t *len);
/* Start of the character that ends at s[end - 1] (valid UTF-8). */
size_t tok_utf8_prev(const uint8_t *s, size_t end);
/* Unicode White_Space (what \s means to Rust's regex and to Oniguruma). */
bool tok_uni_is_space(uint32_t c);
/* A byte-level spelling (s, n) decoded into raw bytes at out (room for n): the byte count, or -1. */
long tok_bytelevel_decode(const char *s, size_t n, char *out);
/* Whether s (n bytes) is UTF-8 spelled in GPT-2's byte map's characters only. */
bool tok_is_bytelevel_spelling(const char *s, size_t n);

/* ---- tok_maps.c ---- */

bool tok_smap_init(smap *m, size_t expect);
void tok_smap_free(smap *m);
int32_t tok_smap_get(const smap *m, const void *key, size_t len); /* -1 when absent */
bool tok_smap_put(smap *m, const void *key, size_t len, int32_t value); /* the last put for a key wins */
bool tok_pmap_init(pmap *m, size_t expect); /* sized once for all merges: pmap does not grow */
void tok_pmap_free(pmap *m);
void tok_pmap_put(pmap *m, int32_t a, int32_t b, int32_t rank, int32_t id);

/* pmap lookups, inline: BPE makes one per candidate pair (the encoder's hottest call) */
static inline uint64_t tok_pmap_key(int32_t a, int32_t b) { return (uint64_t)(uint32_t)a << 32 | (uint32_t)b; }

static inline pmap_slot *tok_pmap_slot_for(const pmap *m, uint64_t key)
{
    for (size_t i = (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 17) & m->mask;; i = (i + 1) & m->mask)
        if (m->slots[i].key == key || m->slots[i].key == PMAP_EMPTY) return &m->slots[i];
}

/* The merge of (a, b), or NULL. */
static inline const pmap_slot *tok_pmap_get(const pmap *m, int32_t a, int32_t b)
{
    if (!m->slots) return NULL;
    const pmap_slot *s = tok_pmap_slot_for(m, tok_pmap_key(a, b));
    return s->key == PMAP_EMPTY ? NULL : s;
}
void tok_cache_init(cache_shard *c);
void tok_cache_free(cache_shard *c);
uint64_t tok_cache_hash(const uint8_t *w, size_t len);
/* The cached ids of word w (len <= CACHE_KEY_MAX) copied to dst: how many, or -1 when not cached. */
int tok_cache_get(cache_shard *cache, const uint8_t *w, size_t len, uint64_t h, int32_t *dst);
void tok_cache_put(cache_shard *cache, const uint8_t *w, size_t len, uint64_t h, const int32_t *ids, size_t n);

/* ---- tok_buf.c ---- */

/* Append s[0, n) to b (nothing once b->oom). */
void tok_rbuf_put(rbuf *b, const char *s, size_t n);
/* Append p[0, n) to sb, NUL-terminated. */
pt_status tok_sb_append(strbuf *sb, const char *p, size_t n);
/* Append data to t->bytes; *off gets where it starts. */
pt_status tok_store(pt_tokenizer *t, const void *data, size_t len, uint32_t *off);

/* ---- tok_regex.c ---- */

/* Compile pattern (an Oniguruma regex, or a literal string) for a pre-tokenizer or a check. */
pt_status tok_regex_compile(const char *source, const char *where, const char *pat, size_t len, bool literal,
                            uint32_t extra_opts, pcre2_code **re, bool *jit);
/* The next match of re in s[0, len) from off: *found 1 with [*ms, *me), 0 when none. */
pt_status tok_re_next(enc_ctx *c, const pcre2_code *re, bool jit, const char *s, size_t len, size_t off,
                      size_t *ms, size_t *me, int *found);

/* ---- tok_norm_align.c ---- */

/* Whether s[0, len), the start of the input, normalizes to a text that still starts at offset 0
 * (tokenizers' alignments; Metaspace's prepend "first" asks). */
pt_status tok_norm_first_kept(enc_ctx *c, const char *s, size_t len, bool *kept);

/* ---- tok_norm.c ---- */

pt_status tok_norm_add_prepend(pt_tokenizer *t, const char *text, size_t len);
pt_status tok_norm_add_replace(pt_tokenizer *t, const char *where, const char *pat, size_t plen, bool literal,
                               const char *content, size_t clen);
/* A Unicode normalization form step (form: a unorm_form of normalize.h). */
pt_status tok_norm_add_unicode(pt_tokenizer *t, int form);
/* A Precompiled step: the precompiled_charsmap blob[0, len) (copied); where names it in errors. */
pt_status tok_norm_add_charsmap(pt_tokenizer *t, const char *where, const uint8_t *blob, size_t len);
void tok_norm_free(pt_tokenizer *t);
/* s[0, len) through every normalizer step into *out (malloc'd, NUL-terminated). */
pt_status tok_norm_apply(enc_ctx *c, const char *s, size_t len, rbuf *out);
/* The content a normalized added token is matched by (malloc'd into *out), at load time. */
pt_status tok_norm_content(const pt_tokenizer *t, const char *s, size_t len, rbuf *out);

/* ---- tok_spm.c ---- */

/* The id of the byte token <0xXX> for byte, or -1. */
int32_t tok_spm_byte_token(const pt_tokenizer *t, uint8_t byte);
/* The byte a <0xXX> spelling stands for, or -1. */
int tok_spm_byte_value(const char *s, size_t len);
pt_status tok_spm_dec_add_replace(pt_tokenizer *t, const char *from, size_t flen, const char *to, size_t tlen);
void tok_spm_free(pt_tokenizer *t);
/* Store what each token decodes to as its bytes. */
pt_status tok_spm_decoded_all(pt_tokenizer *t);
/* The symbols of word w in c->sym (room for len): how many. */
size_t tok_spm_symbols(enc_ctx *c, const uint8_t *w, size_t len);
pt_status tok_spm_decode_first(const pt_tokenizer *t, int32_t id, strbuf *out);
void tok_spm_strip_text(const pt_tokenizer *t, strbuf *out, size_t start);

/* ---- bpe.c ---- */

/* Room for more ids in c->ids. */
pt_status tok_enc_reserve(enc_ctx *c, size_t more);
pt_status tok_emit_id(enc_ctx *c, int32_t id);
/* BPE on one pre-tokenized word, through the word cache. */
pt_status tok_bpe_word(enc_ctx *c, const uint8_t *w, size_t len);

/* ---- tok_pretok.c ---- */

pt_status tok_pretok_add_split(pt_tokenizer *t, const char *where, const char *pat, size_t len, bool literal,
                               split_behavior behavior);
pt_status tok_pretok_add_digits(pt_tokenizer *t, const char *where, bool individual);
pt_status tok_pretok_add_bytelevel(pt_tokenizer *t, const char *where, bool prefix_space, bool use_regex);
pt_status tok_pretok_add_metaspace(pt_tokenizer *t, const char *rep, size_t rep_len, int prepend, bool split);
void tok_pretok_free(pt_tokenizer *t);
/* Run steps step.. on the piece s; the pieces the last step makes go to tok_bpe_word. */
pt_status tok_pretok_run(enc_ctx *c, int step, const char *s, size_t len);

/* ---- tok_added.c ---- */

void tok_added_free(pt_tokenizer *t);
/* Build the tries once all added tokens are known. */
pt_status tok_added_build(pt_tokenizer *t);
/* Pass `pass` (0: raw, 1: normalized) over s: added tokens become ids, the text between goes on. */
pt_status tok_added_split(enc_ctx *c, int pass, const char *s, size_t len);

/* ---- tok_load.c ---- */

pt_status tok_new(const char *source, pt_tokenizer **out);
/* Give id the token spelled (len bytes) in the file. */
pt_status tok_set(pt_tokenizer *t, int32_t id, const char *spelled, size_t len, uint8_t flags, bool raw_model);
pt_status tok_add_added(pt_tokenizer *t, int32_t id, const char *content, size_t len, added_token flags);
/* The id whose bytes are text (added tokens first), or -1. */
int32_t tok_find_text(const pt_tokenizer *t, const char *text, size_t len);
/* The maps and the added-token tries, once every token is in. */
pt_status tok_finish(pt_tokenizer *t);
/* Record merge `rank` of left + right (spellings); names maps spellings to ids. */
pt_status tok_merge(pt_tokenizer *t, const smap *names, const char *where, int32_t rank, const char *left,
                    size_t llen, const char *right, size_t rlen);
/* Split a merge written "left right" at its one space; false when it is not of that form. */
bool tok_merge_split(const char *s, size_t len, size_t *llen, const char **right, size_t *rlen);

/* ---- tok_json_base.c ---- */

/* An error naming file and the JSON path of the value. */
__attribute__((format(printf, 4, 5))) pt_status tok_jerr(const char *file, pt_status st, const char *path,
                                                         const char *fmt, ...);
/* The JSON object in the file at path (big integers read as reals). */
pt_status tok_json_open(const char *path, json_t **root);
/* t->chat_template from tokenizer_config.json's chat_template (file, its name, is cfg). */
pt_status tok_json_config_template(pt_tokenizer *t, const char *file, const json_t *cfg);
/* t->tmpl_tokens[key] = the text (len bytes; left out when it is not UTF-8): a special token's
 * text a chat template sees beside bos/eos (unk_token, sep_token, pad_token, cls_token, mask_token). */
pt_status tok_template_token(pt_tokenizer *t, const char *key, const char *text, size_t len);
/* special_tokens_map.json beside path (a tokenizer file), as transformers 5 reads it (the legacy
 * file, only when tokenizer_config.json has no added_tokens_decoder): its bos/eos/unk/sep/pad/cls/
 * mask_token replace tokenizer_config.json's in *cfg (made when there is none). */
pt_status tok_json_special_tokens_map(const char *path, json_t **cfg);
/* t->tmpl_tokens from tokenizer_config.json's unk/sep/pad/cls/mask_token (a string or {content}). */
pt_status tok_json_config_specials(pt_tokenizer *t, const char *file, const json_t *cfg);
/* Free the named chat templates and the special tokens' texts (template_set.c). */
void tok_named_templates_free(pt_tokenizer *tok);
/* obj[key] as a boolean: def when absent or null. */
pt_status tok_json_flag(const char *file, const json_t *obj, const char *key, const char *path, bool def, bool *out);

/* ---- tok_json_spm.c ---- */

pt_status tok_json_normalizer(pt_tokenizer *t, const json_t *root);
pt_status tok_json_metaspace(pt_tokenizer *t, const json_t *node, const char *path);
pt_status tok_json_decoder(pt_tokenizer *t, const json_t *root);
/* Whether node (a pre-tokenizer, maybe a Sequence) has a ByteLevel step. */
bool tok_json_has_bytelevel(const json_t *node, int depth);
/* A BPE without ByteLevel is read as SentencePiece-style only when something says so. */
pt_status tok_json_spm_check(const pt_tokenizer *t);
void tok_json_post_processor(pt_tokenizer *t, const json_t *pp, int depth);

/* ---- tok_pre_names.c ---- */

/* The rule of a tokenizer.ggml.pre name, or NULL when the table has none. */
const tok_pre_rule *tok_pre_find(const char *name, size_t len);
/* Rule i of the table, NULL past its end (for listing the names). */
const tok_pre_rule *tok_pre_rule_at(size_t i);

/* ---- tok_gguf_base.c ---- */

/* The id at key (a u32; absent: *id unchanged), which must be a token of t. */
pt_status tok_gguf_special_id(pt_tokenizer *t, const gguf_file *f, const char *key, int32_t *id);
/* The chat template stored with the model, if any. */
pt_status tok_gguf_template(pt_tokenizer *t, const gguf_file *f);

/* ---- tok_gguf_spm.c ---- */

pt_status tok_gguf_spm_build(pt_tokenizer *t, const gguf_file *f);

/* ---- tok_spm_config.c, for tok_spm_model.c: a tokenizer from a SentencePiece tokenizer.model ---- */

/* How transformers converts the model, as the tokenizer_config.json beside it says. */
typedef struct {
    const spm_model *m;
    const json_t *cfg;    /* tokenizer_config.json, or NULL */
    const char *cfg_path; /* its name, for messages */
    bool llama;           /* LlamaTokenizer's conversion, else TokenizersBackend's (the model's own settings) */
    bool legacy;          /* legacy: a dummy prefix before every piece between added tokens */
    bool prefix;          /* LlamaTokenizer's add_prefix_space */
} spm_conv;

/* Which conversion, from tokenizer_class; legacy and add_prefix_space. */
pt_status tok_spm_conv_init(const pt_tokenizer *t, spm_conv *cv, const spm_model *m, const json_t *cfg,
                            const char *cfg_path);
/* The added tokens, bos/eos/pad, add_bos_token / add_eos_token and the chat template. */
pt_status tok_spm_added(pt_tokenizer *t, const spm_conv *cv);

/* ---- template_builtin.c: the built-in chat templates' Jinja texts ---- */

/* The text of a built-in name (NULL: none) and its index; the name at an index (NULL: none). */
const char *tok_builtin_template(const char *name, int *index);
const char *tok_builtin_name(int index);

#endif
