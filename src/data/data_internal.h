/* data_internal.h — what the files of src/data share: the seeded permutation, the list of files a
 * dataset entry names (HF ids through ptrain/hfcache.h), rows as read from JSON, the row
 * transforms, the formats and the labelling. Not part of the public API (include/ptrain/dataset.h). */
#ifndef PTRAIN_DATA_INTERNAL_H
#define PTRAIN_DATA_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "ptrain/dataset.h"
#include "ptrain/error.h"
#include "ptrain/hfcache.h"
#include "ptrain/tokenizer.h"
#include "ptrain/util.h"

/* ---- random.c: bounded draws and Fisher-Yates over rng_next (util.h) ---- */
/* A uniform integer in [0, n) (n > 0), without modulo bias. */
uint64_t rng_below(uint64_t *state, uint64_t n);
/* out[0..n) = a permutation of 0..n-1 fully determined by seed. */
void rng_permutation(size_t n, uint64_t seed, size_t *out);

/* ---- readme.c: a Hub dataset README's configs: ---- */
/* The data_files patterns (relative to dir) of split in the config named config (NULL: the
 * default one) of dir/README.md's configs:; *found false (out empty) when it has none. Fails
 * when the config or the split is not there, listing those that are. */
pt_status readme_data_files(const char *dir, const char *config, const char *split, pt_strlist *out, bool *found);

/* ---- pattern.c: a data_files pattern's files ---- */
/* The files pattern names relative to dir (an absolute pattern: from /), sorted, as datasets'
 * resolve_pattern finds them; none found is no error here. A pattern without a wildcard gives its
 * path if anything is there (a folder too: the caller refuses what is not a file). */
pt_status pattern_files(const char *dir, const char *pattern, pt_strlist *out);
/* Whether rel (a file's path relative to the pattern's folder) is one pattern names, as above. */
bool pattern_matches(const char *pattern, const char *rel);

/* ---- source.c: the files of a dataset entry ---- */
typedef struct {
    char **path;
    int n;
    pt_dataset_format format; /* the entry's format: the reader of files whose extension says neither */
} data_files;

pt_status source_files(const pt_dataset_config *d, data_files *out);
void source_free(data_files *f);
/* The error for a data path that is not a regular file, saying what it is (mode: its stat type). */
pt_status source_not_a_file(const char *path, mode_t mode);
/* Open a data file for reading: refused, saying what it is, unless a regular file; a FIFO never
 * blocks (it is opened without waiting for a writer, then refused). */
pt_status source_open(const char *path, FILE **f);

/* ---- splits.c: a folder's files of a split, as datasets picks them ---- */
/* Keep of f's files (f->path[i] + skip: the path in the folder where, for messages) those of split
 * as datasets' get_data_patterns picks them for a repository without a loading script: the
 * sharded data/SPLIT-00000-of-00002.* names, else the split's keywords in folder names, else in
 * file names (train/training; validation/valid/dev/val; test/testing/eval/evaluation), else every
 * file is train. A split that is not there is an error listing the splits that are. */
pt_status splits_pick(data_files *f, size_t skip, const char *split, const char *where);

/* ---- reader.c: rows from .json / .jsonl ---- */
typedef struct {
    json_t *obj;      /* the row (a JSON object), owned */
    const char *file; /* owned by the data_files the row came from */
    int file_no;      /* its index there */
    long line;        /* 1-based line of the row's start, or 0: see key/item */
    const char *key;  /* "data" or "train" for an array inside an object, else NULL */
    long item;        /* index in that array */
} data_row;

typedef struct {
    data_row *v;
    size_t n, cap;
} data_rows;

/* ---- row_list.c: appending, placing and freeing rows ---- */
/* Append obj (owned) as a row found at `at`. */
void rows_push(data_rows *rows, json_t *obj, const data_row *at);
void rows_free(data_rows *rows);
/* "file:line" or "file: data[3]" */
void row_where(const data_row *r, strbuf *out);
/* Count r as bad for reason why. */
void row_bad(pt_dataset_stats *st, const data_row *r, const char *why);
/* s[0..n) as a JSON string, each invalid UTF-8 byte replaced by FORMAT_BAD_UTF8. */
json_t *rows_string(const char *s, size_t n);

/* ---- csv.c: rows from CSV/TSV text ---- */
/* The rows of buf[0..len) (valid UTF-8, BOM removed), fields split at sep: RFC 4180 quoting, the
 * first record the header; each value typed by its column as pandas.read_csv does (the empty
 * field and pandas' NA words null; a column of integers, of numbers or of True/False typed so).
 * A record with more fields than the header is a bad row. first_line: the line buf starts on. Fails
 * only for a file whose short records would make far more nulls than it has bytes. */
pt_status csv_read(const char *buf, size_t len, char sep, const char *path, int file_no, long first_line,
                   data_rows *rows, pt_dataset_stats *st);

/* ---- parquet_meta.c: a Parquet footer and page headers (Thrift compact protocol) ---- */
enum { PQ_REQUIRED, PQ_OPTIONAL, PQ_REPEATED };
enum { PQ_BOOLEAN, PQ_INT32, PQ_INT64, PQ_INT96, PQ_FLOAT, PQ_DOUBLE, PQ_BYTE_ARRAY, PQ_FIXED };
enum { PQ_DATA_PAGE, PQ_INDEX_PAGE, PQ_DICTIONARY_PAGE, PQ_DATA_PAGE_V2 };

typedef struct {
    char *name;
    int type;       /* PQ_BOOLEAN..., -1 for a group */
    int type_length, repetition, num_children;
    int converted;  /* ConvertedType, -1 when unset */
    int logical;    /* the LogicalType union's field id, 0 when unset */
    int scale, precision; /* DECIMAL */
    int unit;             /* TIME, TIMESTAMP: 1 millis, 2 micros, 3 nanos (0: from converted) */
    bool utc;             /* TIME, TIMESTAMP: isAdjustedToUTC */
} pq_schema;

typedef struct {
    int type, codec;
    int64_t num_values, compressed_size, data_page_offset, dictionary_page_offset;
    bool has_meta, external, encrypted;
} pq_chunk;

typedef struct {
    pq_chunk *chunks;
    int n_chunks;
    int64_t num_rows;
} pq_row_group;

typedef struct {
    pq_schema *schema;
    int n_schema;
    pq_row_group *groups;
    int n_groups;
    int64_t num_rows;
    bool encrypted;
} pq_meta;

typedef struct {
    int type;
    int64_t uncompressed_size, compressed_size, num_values;
    int encoding, def_encoding, rep_encoding;
    int64_t def_bytes, rep_bytes; /* v2: level sections, never compressed */
    bool compressed;              /* v2: whether the values are */
} pq_page;

/* The FileMetaData in p[0..n). PT_ERR_USER (nothing set as the error) when it does not parse;
 * *bad_at: where it stopped. */
pt_status pq_meta_read(const unsigned char *p, size_t n, pq_meta *m, size_t *bad_at);
void pq_meta_free(pq_meta *m);
/* The PageHeader at p (at most n bytes); *used: its length. False when it does not parse. */
bool pq_page_read(const unsigned char *p, size_t n, pq_page *pg, size_t *used);

/* ---- parquet_types.c: a leaf value as JSON ---- */
typedef union {
    int64_t i;
    double d;
    struct {
        const char *p; /* BYTE_ARRAY, INT96, FIXED_LEN_BYTE_ARRAY: the value's bytes */
        uint32_t n;
    } s;
} pq_val;

/* Whether ptrain reads the values of column s; false with what (the type) written. */
bool pq_type_known(const pq_schema *s, char *what, size_t len);
/* One value of column s as JSON (dates, times and decimals as the text Python's str() gives the
 * objects datasets makes of them); NULL when the value cannot be what its type says. */
json_t *pq_type_value(const pq_schema *s, const pq_val *v);

/* ---- parquet.c: rows from a Parquet file's bytes ---- */
/* The rows of the Parquet file map[0..len), assembled per row group as datasets gives them
 * (structs as objects, lists as arrays, nulls). A file ptrain cannot read fails with one error
 * naming path, the place (row group, column, byte offset) and what is wrong. */
/* A reader hands its rows over in batches when given a sink: take gets each batch (up to 4096
 * rows of a Parquet row group, whose decoded columns are held until its last row is made, or of a
 * JSON Lines file or JSON array, whose text is held; a whole CSV file or JSON object) and consumes its rows, leaving rows->n 0; a failure stops the
 * reading. Without a sink every row stays in rows. */
typedef struct {
    pt_status (*take)(void *arg, data_rows *rows);
    void *arg;
} rows_sink;

pt_status parquet_read(const unsigned char *map, size_t len, const char *path, int file_no, data_rows *rows,
                       pt_dataset_stats *st, const rows_sink *sink);

/* Append the rows of one file, read by its extension (.csv/.tsv, .parquet, .json, .jsonl) or,
 * for another, by format. Unparsable lines and items that are not objects count as bad
 * rows; a file that cannot be read, or a JSON document that does not parse, fails. Invalid
 * UTF-8 bytes become FORMAT_BAD_UTF8 so the formatter can report the field they are in. */
pt_status reader_read(const char *path, int file_no, pt_dataset_format format, data_rows *rows, pt_dataset_stats *st);
/* The same, the rows handed to sink batch by batch (rows: the batch's list, empty after each). A
 * mapped Parquet file's pages are given back after each row group, so memory holds one group. */
pt_status reader_stream(const char *path, int file_no, pt_dataset_format format, data_rows *rows,
                        pt_dataset_stats *st, const rows_sink *sink);
/* "an object", "an array", "a string", "a number", "a boolean" or "null" */
const char *reader_kind(const json_t *v);

/* The stand-in for an invalid UTF-8 byte: U+FDD0, a noncharacter reserved for internal use. */
#define FORMAT_BAD_UTF8 "\xEF\xB7\x90"

/* ---- stats.c ---- */
/* Count a bad row; keep "where: reason" if it is among the first DATASET_BAD_SHOWN by pos. */
void stats_bad(pt_dataset_stats *st, uint64_t pos, const char *where, const char *reason);
void stats_free(pt_dataset_stats *st);

/* ---- rows.c: rename, filter, num_samples (in that order), batch by batch ---- */
typedef struct {
    long *hits;    /* rename: rows that had each source column */
    long renamed;  /* rows renamed */
    long taken;    /* rows kept so far (num_samples) */
} rows_state;
/* Apply the entry's rename, filter and num_samples to the next batch of its rows (s starts zeroed). */
void rows_step(const pt_dataset_config *d, rows_state *s, data_rows *rows, pt_dataset_stats *st);
/* After the last batch: warn of a rename column no row had; frees s. */
void rows_end(const pt_dataset_config *d, int index, rows_state *s, FILE *warn);
/* A JSON scalar as text for filter comparisons: strings as is, numbers as Python prints them,
 * true/false, null; NULL for arrays and objects. Malloc'd. */
char *rows_value_text(const json_t *v);

/* ---- format.c: a row as a conversation or plain text ---- */
typedef enum { FMT_NONE, FMT_CONVERSATIONS, FMT_MESSAGES, FMT_ALPACA, FMT_TEXT, FMT_PREFERENCE, FMT_UNPAIRED, FMT_PROMPT,
               FMT_COMPLETION } data_format;

typedef struct {
    chat_message *msgs; /* chat formats: role (static text), content and fields (owned) */
    int n;
    json_t *tools; /* the row's tools (owned), or NULL */
    char *text; /* FMT_TEXT */
    /* FMT_PREFERENCE: conversational, msgs holds the prompt's n_prompt turns, the chosen's
     * n_chosen, then the rejected's; as text, prompt, chosen and rejected */
    bool pair_chat;
    int n_prompt, n_chosen;
    char *prompt, *chosen, *rejected;
    float margin; /* TRL's optional margin column (a number; 0 without it): the reward method's */
    /* FMT_UNPAIRED (KTO's prompt, completion, label): the completion as chosen (text) or the
     * n_chosen turns after the prompt's; label: whether it is desirable */
    bool label;
    /* FMT_PROMPT (GRPO's prompt-only rows): the prompt as text (prompt) or as the msgs' n_prompt
     * turns, and the whole row as compact JSON (columns), for the reward functions */
    char *columns;
    /* FMT_COMPLETION (prompt, completion: a row a reward model scores, ptrain score): as FMT_UNPAIRED
     * without the label */
} data_record;

typedef enum { ROW_OK, ROW_EMPTY, ROW_BAD } row_result;

/* The format a row is in by its columns, in the order unpaired (completion and label: KTO's rows),
 * preference (chosen and rejected; first only for a method that trains on pairs), conversations, messages, preference, Alpaca (instruction),
 * prompt + completion (only with singles: rows scored one by one), text_field; FMT_NONE when it has
 * none of them. */
data_format format_detect(const json_t *obj, const char *text_field, bool pairs, bool singles);
const char *format_name(data_format f);
/* format_name's own text for name, NULL when name is no format's (for data read back from a file). */
const char *format_name_known(const char *name);
/* Format one row. ROW_BAD: *why says what is wrong. alpaca_input_role: the Alpaca input goes in
 * an "input" message (the alpaca template's "### Input:" block), not appended to the user turn. */
row_result format_row(data_format f, const json_t *obj, const char *text_field, bool alpaca_input_role,
                      data_record *rec, strbuf *why);
void record_free(data_record *rec);

/* chat_template_kwargs (the config's YAML scalars) as the JSON object a template sees: true/false,
 * null, integers and numbers as such, anything else as text; NULL when there are none (dataset.c). */
json_t *data_template_kwargs(const pt_strmap *kw);

/* ---- label.c: render, tokenize, label ---- */
typedef struct {
    const pt_tokenizer *tok;
    const char *template; /* a built-in template's name or "model" (static text) */
    chat_tmpl *ct;        /* it, compiled */
    chat_tmpl *ct_tools;  /* the model's "tool_use" template for rows with tools (label_use_tool_template), or NULL */
    const json_t *kwargs; /* chat_template_kwargs, or NULL (the caller's) */
    char *bos, *eos;      /* the tokenizer's bos/eos token texts, or NULL */
    bool assistant_only;
    int32_t max_len;
    int32_t max_prompt, max_completion; /* preference rows: tokens kept of each (0: all) */
    bool pair_legacy;                   /* ... tokenized as TRL's CPO and ORPO trainers do (pair.c) */
    bool pair_reward;                   /* ... as TRL's RewardTrainer: whole sequences (pair.c) */
    bool unpaired;                      /* KTO: rows (and pairs) as TRL's KTOTrainer tokenizes them (pair.c) */
    bool single;                        /* rows a reward model scores one by one (label_single) */
} label_ctx;

typedef enum { LABEL_OK, LABEL_NO_LOSS } label_result;

pt_status label_init(label_ctx *c, const pt_tokenizer *tok, const char *template, bool assistant_only,
                     int32_t max_len);
void label_free(label_ctx *c);
/* Render rows that have tools with the model's template named "tool_use" when it has one (as
 * transformers' apply_chat_template does when no chat_template is passed). */
pt_status label_use_tool_template(label_ctx *c);
/* The template a row is rendered with: c->ct_tools for a row with tools (tools non-NULL), else c->ct. */
const chat_tmpl *label_template_for(const label_ctx *c, const struct json_t *tools);
/* A template name's own static text (a built-in's or "model"), NULL when there is no such name. */
const char *label_template_known(const char *name);
/* Byte spans [start, end) of the assistant text in the rendered conversation (written to text;
 * tools: the row's, or NULL): the template's {% generation %} blocks where it has them (as
 * transformers' return_assistant_tokens_mask), else each assistant turn from the end of the
 * rendering of the turns before it with the generation prompt (or its content's start) to its
 * end-of-turn text, found by rendering the turns up to it (label.c); 2 entries per span in
 * *spans (malloc'd). */
pt_status label_spans(const label_ctx *c, const chat_message *m, int n, const json_t *tools, strbuf *text,
                      size_t **spans, int *n_spans);
/* Mark labels[t] = ids[t] for the tokens overlapping a span: by the tokens' byte offsets in text
 * (false, with labels reset, when the decoded tokens do not line up with text), or by tokenizing the text up to each
 * span's ends (the fallback). */
bool label_mark_by_offsets(const label_ctx *c, const char *text, size_t len, const int32_t *ids, size_t n,
                           const size_t *spans, int n_spans, int32_t *labels);
pt_status label_mark_by_prefix(const label_ctx *c, const char *text, const int32_t *ids, size_t n,
                               const size_t *spans, int n_spans, int32_t *labels);
pt_status label_chat(const label_ctx *c, const chat_message *m, int n, const json_t *tools, pt_example *ex,
                     bool *truncated, label_result *res);
pt_status label_text(const label_ctx *c, const char *text, pt_example *ex, bool *truncated, label_result *res);

void example_free(pt_example *ex);

/* ---- pair.c: a preference row as TRL's DPOTrainer tokenizes it ---- */
/* The pair of rec (FMT_PREFERENCE) as one example of two segments: prompt + chosen (segment 1),
 * then prompt + rejected (segment 2), labels on the completions' tokens only (pair.c says how the
 * prompt and the completions are found and cut). */
pt_status label_pair(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated, label_result *res);
/* KTO (label_ctx.unpaired): an unpaired row (FMT_UNPAIRED) as one sequence, prompt + completion,
 * its segment 1 when the label is desirable, 2 when not; a pair (FMT_PREFERENCE) as two, prompt +
 * chosen (segment 1) and prompt + rejected (segment 2), each tokenized on its own as TRL's
 * KTOTrainer tokenizes the rows unpair_preference_dataset makes of it (dataset_unpair then puts
 * them apart). The completion is labelled; it is kept up to max_len tokens (KTO's collator cuts
 * prompt + completion to max_seq_length when it batches, batch_collate_unpaired), and a row whose
 * prompt fills max_seq_length is dropped as TRL drops it. */
pt_status label_unpaired(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated,
                         label_result *res);
/* A row a reward model scores (label_ctx.single, ptrain score): prompt + completion, a
 * conversation or text as one sequence, segment 1, every token labelled, tokenized as TRL's
 * RewardTrainer tokenizes a chosen (text with eos appended unless it ends with it, turns rendered
 * whole); one over max_len is dropped (counted as truncated), as TRL filters it. */
pt_status label_single(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated, label_result *res);
/* GRPO (FMT_PROMPT): the prompt's tokens as TRL's GRPOTrainer encodes them (text as the tokenizer
 * encodes text, turns rendered with the generation prompt), its last max_prompt kept (0: all), as
 * segment 1; then the row's columns as JSON text, one byte a token, as segment 2 (dataset.h:
 * dataset_prompt_row reads them apart). No token is labelled (the completions are generated). */
pt_status label_prompt(const label_ctx *c, const data_record *rec, pt_example *ex, bool *truncated,
                       label_result *res);

/* ---- reading bytes back (parts.c, cache_file.c): a cursor that never reads past end ---- */
typedef struct {
    const unsigned char *p, *end;
} byte_cursor;

/* Copy n bytes to dst (NULL: skip them); false when fewer are left. */
static inline bool cursor_take(byte_cursor *c, void *dst, size_t n)
{
    if ((size_t)(c->end - c->p) < n) return false;
    if (dst && n) memcpy(dst, c->p, n);
    c->p += n;
    return true;
}

/* ---- cache_write.c, cache_read.c: the dataset cache file (dataset_cache.h) ----
 * The header, then three sections, each at a multiple of 8 bytes: the stats (per entry: name,
 * format, template, counts, the first bad rows, the files), the train examples and the eval
 * examples. An examples section: uint64 n, int32 max_len, uint32 packed; int32 len[n]; then per
 * example its ids, labels and (packed) segments, len int32 each. Numbers in the host's byte
 * order (a cache is made and used on the same cluster; another order reads as stale: magic). */
#define CACHE_MAGIC "PTDATA\r\n"
enum { CACHE_STATS, CACHE_TRAIN, CACHE_EVAL, CACHE_SECTIONS };
typedef struct {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t name, files; /* dataset_cache_key */
    uint64_t size;        /* of the whole file */
    uint64_t section[CACHE_SECTIONS][2]; /* offset, bytes */
    uint32_t crc; /* CRC-32 of everything after the header, continued over the header with crc 0 */
    uint32_t pad;
    uint8_t reserved[32];
} cache_header;

/* The bytes of an examples section. */
uint64_t cache_examples_bytes(const pt_dataset *ds);

/* ---- dataset.c, parts.c: one row's outcome, and tokenizing split into parts ---- */
typedef struct {
    row_result row;
    label_result label;
    pt_status rc;
    bool truncated;
    char *why; /* ROW_BAD or rc != PT_OK */
    pt_example ex;
} data_slot;

/* Whether row i is part `part`'s of `parts` (parts <= 1: every row is). */
static inline bool parts_mine(size_t i, int part, int parts) { return parts <= 1 || (int)(i % (size_t)parts) == part; }
/* The slots of part `part` among n, as bytes appended to out (its length first, so the parts can
 * be sent end to end). */
void parts_encode(const data_slot *slots, size_t n, int part, int parts, strbuf *out);
/* Part 0: every part's slots into slots[0..n), from the parts' encodings end to end. Fails when
 * the bytes do not hold exactly the rows each part owns. */
pt_status parts_decode(const void *all, size_t len, data_slot *slots, size_t n, int parts);

#endif
