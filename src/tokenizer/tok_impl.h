/* tok_impl.h — the tokenizer's internal data: token table, vocabulary and merge maps,
 * normalizer and pre-tokenizer steps, added tokens, the decoder's settings and the word cache.
 *
 * Two kinds share it: byte-level BPE (GPT-2 style: BPE over bytes spelled as characters) and
 * SentencePiece-style BPE (BPE over characters, "▁" for spaces, <0xXX> byte tokens for the
 * characters the vocabulary lacks). They differ in how tokens are spelled, how a word becomes
 * symbols and how ids decode; the pipeline (added tokens, normalizer, pre-tokenizer, merges by
 * rank) is the same.
 *
 * The tokenizer is one translation unit: bpe.c includes this header and then the parts
 * (tok_utf8.h, tok_maps.h, tok_norm.h, tok_pretok.h, tok_added.h, tok_load.h, tok_spm.h,
 * tok_json.h, tok_json_spm.h, tok_gguf.h, tok_gguf_spm.h), each of which holds the static
 * functions of one concern. Nothing here is visible outside bpe.c. */
#ifndef PTRAIN_TOK_IMPL_H
#define PTRAIN_TOK_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/tokenizer.h"

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

/* a normalizer step: Prepend text, or Replace every match of re with text */
typedef struct {
    pcre2_code *re; /* NULL: Prepend */
    bool jit;
    char *text;
    size_t len;
} norm_step;

enum { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER };

#define SPM_SPACE "\xe2\x96\x81" /* U+2581, SentencePiece's space */

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
    char ms_rep[8];  /* Metaspace decoder: the first token drops these characters */
    uint8_t ms_rep_len;
    added_token *added;
    int n_added;
    added_trie trie[2]; /* [0]: tokens matched on the raw text, [1]: "normalized" ones */
    pcre2_code *word_re; /* \w as Rust's regex has it, for single_word tokens */
    int32_t bos, eos, pad;
    bool add_bos, add_eos; /* what the model's tokenizer adds around plain text */
    char *chat_template;
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

#endif
