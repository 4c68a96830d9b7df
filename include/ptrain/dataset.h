/* dataset.h — training data: every `dataset:` entry of the config read (local .json/.jsonl files
 * or directories, or HF dataset ids found in the local Hugging Face cache), formatted (ShareGPT
 * `conversations`, `messages`, Alpaca, plain text), rendered through the chat template, tokenized
 * and labelled; then the train/eval split, packing, the per-rank sampler and batch collation.
 *
 * Labels are the token ids themselves where the loss applies and PT_IGNORE_INDEX (-100) elsewhere;
 * they are NOT shifted: the model predicts labels[t+1] from position t (batch_collate writes the
 * shifted targets). With assistant-only loss, exactly the tokens of each assistant turn's content
 * and its end-of-turn token (<|im_end|>, <|eot_id|>, or eos for alpaca) carry labels; they are
 * found from the character spans of those turns in the rendered text (see src/data/label.c).
 *
 * Everything is deterministic: the same config, tokenizer and seeds give the same examples in the
 * same order and the same batches, whatever the number of threads. */
#ifndef PTRAIN_DATASET_H
#define PTRAIN_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ptrain/error.h"
#include "ptrain/settings.h"
#include "ptrain/tokenizer.h"

#ifndef PT_IGNORE_INDEX
#define PT_IGNORE_INDEX (-100)
#endif
#define DATASET_BAD_SHOWN 5 /* bad rows quoted per dataset entry */

/* One training sequence. */
typedef struct {
    int32_t *ids;      /* token ids, len of them */
    int32_t *labels;   /* ids[t] where the loss applies, PT_IGNORE_INDEX elsewhere (unshifted) */
    int32_t *segments; /* packed: 1-based number of the example each token belongs to; else NULL */
    int32_t len;       /* <= max_seq_length */
    float margin;      /* a reward pair's margin (TRL's optional `margin` column); 0 otherwise */
} pt_example;

/* One file a dataset entry read, as this process read it (what ranks compare to be sure they
 * train on the same data). */
typedef struct {
    char *path;     /* as this process resolved it (realpath; as given when that fails) */
    uint64_t bytes; /* its size */
    uint32_t crc;   /* CRC-32 of its bytes, computed while they were read */
    long rows;      /* rows read from it (JSON Lines lines, array items), before any filter */
} pt_data_file;

/* What happened to the rows of one dataset entry. Every row read lands in exactly one of bad,
 * filtered, limited, empty, no_loss and kept. */
typedef struct {
    char *name;           /* the entry's name as configured */
    const char *format;   /* "conversations", "messages", "alpaca", "text", "preference", "unpaired",
                             "prompt", "completion" (NULL: none found) */
    const char *template; /* chat template used for chat formats, else NULL */
    bool assistant_only;  /* whether only assistant tokens carry labels */
    long read;            /* rows found in the files (JSON Lines lines, array items) */
    long bad;             /* unusable: invalid JSON, not an object, missing/mistyped fields, bad UTF-8 */
    long filtered;        /* removed by filter_data */
    long limited;         /* beyond num_samples */
    long empty;           /* formatted to empty text */
    long no_loss;         /* no token left with a label (e.g. the answer truncated away) */
    long kept;            /* examples made */
    long truncated;       /* kept examples cut to max_seq_length */
    char *bad_rows[DATASET_BAD_SHOWN]; /* the first bad rows in file order, as "file:line: reason" */
    int n_bad_rows;
    uint64_t bad_pos[DATASET_BAD_SHOWN]; /* (internal) where each of them is, to keep the first */
    pt_data_file *files; /* every file read, in order */
    int n_files;
} pt_dataset_stats;

typedef struct {
    pt_example *ex;
    size_t n;
    int32_t max_len;         /* max_seq_length; twice it for preference pairs (two sequences an example) */
    bool packed;             /* examples are packed sequences with segment ids */
    pt_dataset_stats *stats; /* one per config dataset entry (dataset_load only), else NULL */
    int n_stats;
    /* A dataset read from a cache (dataset_cache.h): the examples point into these bytes, which
     * dataset_free unmaps (mapped) or frees. NULL: every example owns its arrays. */
    void *backing;
    size_t backing_len;
    bool backing_mapped;
} pt_dataset;

/* Tokenizing split across the parts of a job (the ranks): part p tokenizes rows p, p + parts,
 * p + 2*parts, ... of every entry; then gather, a collective every part calls once per entry (even
 * after its own failure, with local saying so), agrees the parts' statuses and hands part 0 the
 * parts' results end to end (*all, malloc'd; NULL on the other parts). Part 0 ends with the whole
 * dataset, the other parts with none (n 0, no stats). parts 0 or 1: all here, no gather. */
typedef pt_status (*dataset_gather_fn)(void *arg, pt_status local, const void *mine, size_t n, void **all,
                                       size_t *all_n);
typedef struct {
    int part, parts;
    dataset_gather_fn gather;
    void *arg;
} dataset_work;

/* What the data module takes from the config: its own keys, nothing else (filled from the config by
 * dataset_options_from_config, config_options.h; the strings and entries are the config's). Every
 * key here decides the examples: a field added here must be added to dataset_options_hash
 * (dataset_cache.h), or a cache made with another value would be reused. */
typedef struct {
    const pt_dataset_config *datasets; /* the `dataset:` entries, in config order */
    int n_datasets;
    long max_seq_length;
    const char *chat_template; /* a template name; NULL or "": the one detected from the tokenizer */
    const pt_strmap *chat_template_kwargs; /* keyword arguments for the template (may be NULL) */
    pt_tristate assistant_only_loss;
    const char *dataset_text_field;
    bool packing;
    bool pairs;                  /* preference rows (method.h's pairs): each example is prompt + chosen
                                    (segment 1) then prompt + rejected (segment 2); other rows refused */
    bool pairs_legacy;           /* pairs tokenized as TRL's CPO and ORPO trainers do (src/data/pair.c) */
    bool pairs_reward;           /* pairs as TRL's RewardTrainer tokenizes them: prompt + chosen and
                                    prompt + rejected whole, every token labelled, a pair with a sequence
                                    over max_seq_length dropped (src/data/pair.c) */
    bool unpaired;               /* KTO's rows (prompt, completion, label; pairs unrolled): an example is
                                    one sequence, segment 1 desirable, 2 undesirable (src/data/unpaired.c) */
    bool prompts;                /* GRPO's prompt-only rows: an example is the prompt's tokens (segment 1)
                                    and the row's columns as JSON bytes (segment 2); dataset_prompt_row */
    bool singles;                /* rows scored one by one (ptrain score): prompt + completion (text or
                                    turns; a label ignored), turns or text, each one sequence (segment 1,
                                    every token labelled) as RewardTrainer tokenizes a chosen, one over
                                    max_seq_length dropped; with pairs_reward, pairs stay pairs */
    long max_prompt_length;      /* pairs, prompts: the prompt's last tokens kept (0: all) */
    long max_completion_length;  /* pairs: each completion's first tokens kept (0: all) */
    double val_split_ratio; /* 0: no eval set */
    long seed;              /* of the train/eval split */
    dataset_work work;      /* how tokenizing is split (not a key: any split gives the same bytes) */
} dataset_options;

/* Read, format, tokenize and label every dataset entry of o, concatenated in config order.
 * Per entry: rename, then filter_data, then the first num_samples rows, then shuffle (seeded by
 * the entry's seed); the format is detected from the first row that has one. Bad, filtered and
 * empty rows are counted (see dataset_report), not fatal; an entry with no usable row, a missing
 * file or HF cache entry, or a Parquet/CSV file fails with the reason. HF dataset ids resolve in
 * the local HF cache at refs/main. Warnings (e.g. a rename column never seen) go to warn (may be
 * NULL: pass log_warn_stream() so only rank 0 prints). */
pt_status dataset_load(const dataset_options *o, const pt_tokenizer *tok, FILE *warn, pt_dataset *out);
/* What the trainer needs: dataset_load, dataset_split by val_split_ratio with the config seed,
 * then dataset_pack of both sides when packing is on. train keeps the stats. */
pt_status dataset_prepare(const dataset_options *o, const pt_tokenizer *tok, FILE *warn, pt_dataset *train,
                          pt_dataset *eval);
/* One summary line per entry and the first bad rows, as the trainer prints them. */
void dataset_report(const pt_dataset *ds, FILE *out);
void dataset_free(pt_dataset *ds);
/* The chat template name chat formats use: chat_template (the config's) if set, else the one
 * detected from the tokenizer's own template, else "chatml". */
const char *dataset_template_name(const char *chat_template, const pt_tokenizer *tok);
/* A chat template chosen as training chooses it, for the commands that render a conversation
 * (generate --chat, tokenize --chat): chat_template (a built-in name, "model" or one of the
 * model's named templates; NULL or "": the model's own, detected as dataset_template_name does),
 * the model's "tool_use" template for a conversation with tools when no name is given, the
 * chat_template_kwargs (may be NULL), and the tokenizer's bos/eos and other special tokens' texts
 * (src/data/chat_apply.c). */
typedef struct dataset_chat dataset_chat;
pt_status dataset_chat_open(const pt_tokenizer *tok, const char *chat_template, const pt_strmap *kwargs,
                            dataset_chat **out);
/* Render msgs as apply_chat_template(..., tokenize=False) does (tools: a JSON list, or NULL),
 * appending to out. */
pt_status dataset_chat_render(const dataset_chat *c, const chat_message *msgs, int n, const struct json_t *tools,
                              bool add_generation_prompt, strbuf *out);
/* The template's name: a built-in's, or "model" (the model's own or a named one). */
const char *dataset_chat_name(const dataset_chat *c);
void dataset_chat_free(dataset_chat *c);
/* A command line's --chat-template-kwarg KEY=VALUE added to kw (copies; VALUE read as a
 * chat_template_kwargs YAML scalar is: true/false, null, a number, else text); kw freed by
 * dataset_chat_kwargs_free. */
pt_status dataset_chat_kwarg_add(pt_strmap *kw, const char *arg);
void dataset_chat_kwargs_free(pt_strmap *kw);
/* Total tokens of all examples. */
size_t dataset_tokens(const pt_dataset *ds);

/* Move the examples of all into train and eval (all is left empty): a permutation seeded by
 * seed; eval gets the first ceil(ratio * n) of it, like datasets' train_test_split. ratio 0:
 * everything is train. Fails when either side would be empty for ratio > 0, leaving all as it
 * was (the caller still frees it). */
pt_status dataset_split(pt_dataset *all, double ratio, uint64_t seed, pt_dataset *train, pt_dataset *eval);

/* Pack ds in place (packing: true): examples are placed whole (never split) into sequences of at
 * most max_len tokens by best-fit decreasing on length (ties by order), each sequence keeping
 * its examples in their original order; segments number the examples 1, 2, ... so attention can
 * stay inside each. The first label of every example is PT_IGNORE_INDEX (no target crosses an
 * example boundary). Deterministic. */
pt_status dataset_pack(pt_dataset *ds);

/* The per-rank sampler, as HF Trainer's DataLoader is sharded by Accelerate: each epoch a
 * permutation of the n examples seeded by seed + epoch is cut into batches of batch_size, and
 * rank r takes batches r, r + world, r + 2*world, ... With world > 1 every rank gets the same
 * number of full batches: the last round wraps around to the start of the permutation (so a few
 * examples appear twice in an epoch); disjoint across ranks apart from that padding. With one
 * process the last batch may be smaller. */
typedef struct {
    size_t n_examples;
    int rank, world;
    long batch_size;
    size_t n;     /* indices per rank per epoch: n_examples, or whole batches when world > 1 */
    size_t *idx;  /* this rank's indices for the current epoch */
    long epoch;   /* the epoch idx was drawn for (-1: none yet) */
    size_t full;  /* indices per rank in a whole epoch */
    size_t skip;  /* entries of the epoch's order consumed before this run (resume) */
    bool sequential; /* the order is the dataset's own every epoch (KTO's sequential sampler), not a permutation */
    int32_t *lengths; /* group_by_length: each example's length (NULL: plain shuffled order) */
    long group;       /* ... and the batch the groups are made for (per-device batch x accumulation) */
} pt_sampler;

pt_status sampler_init(pt_sampler *s, size_t n_examples, int rank, int world, long batch_size);
/* group_by_length: every epoch's order is then grouped as transformers' LengthGroupedSampler groups
 * its permutation (sampler_group_order), for batches of group examples (its train_batch_size x
 * gradient_accumulation_steps); the lengths are ds's examples'. Call before the first epoch. */
pt_status sampler_group_by_length(pt_sampler *s, const pt_dataset *ds, long group);
/* transformers' get_length_grouped_indices on the permutation perm of n examples: megabatches of
 * min(n / (4 group), 50) (at least 1) x group consecutive entries, each sorted by length, longest
 * first (ties in perm's order); then the longest example of all swapped to the front. In place. */
pt_status sampler_group_order(size_t *perm, size_t n, const int32_t *lengths, long group);
/* Draw the epoch's order (seed = config seed; the permutation uses seed + epoch). */
pt_status sampler_epoch(pt_sampler *s, uint64_t seed, long epoch);
/* The same epoch, starting after the first skip entries of its order (all ranks together): what a
 * resumed run uses; the rest is cut into batches and shared among the ranks as above. */
pt_status sampler_epoch_from(pt_sampler *s, uint64_t seed, long epoch, size_t skip);
/* Entries of the epoch's order consumed by all ranks after this rank's batches_done batches
 * (at most n_examples). */
size_t sampler_seen(const pt_sampler *s, size_t batches_done);
size_t sampler_batches(const pt_sampler *s);      /* batches of this rank in the current epoch */
size_t sampler_full_batches(const pt_sampler *s); /* ... in a whole epoch */
/* Micro-batch b of the current epoch: *idx points at its example indices; returns their count. */
size_t sampler_batch(const pt_sampler *s, size_t b, const size_t **idx);
void sampler_free(pt_sampler *s);

/* A micro-batch as the training step takes it: rows sequences of cols tokens. targets[t] =
 * labels[t+1] of the same example (PT_IGNORE_INDEX at padding, at each sequence's and each packed
 * example's last token); pos restarts at 0 for every example; segments: the example number
 * (1-based), 0 at padding. */
typedef struct {
    int rows, cols;
    int32_t *ids, *labels, *targets, *pos, *segments; /* [rows*cols] each */
    float *margin; /* [examples]: each example's margin (pt_example.margin), in batch order */
} pt_batch;

/* The micro-batch of examples idx[0..n) without padding: one row (rows 1) of all their tokens end
 * to end; segments number the examples (and the packed examples inside them) 1, 2, ... in order,
 * positions restart at 0 in each, and a target never crosses into the next segment. The step
 * must then mask attention by segment (train.c always passes segments). */
pt_status batch_collate(const pt_dataset *ds, const size_t *idx, size_t n, pt_batch *out);
/* The same examples one per row, right-padded with pad_id to the longest (segment 0, position 0,
 * target -100 on padding): the layout padding-free collation must match (tests, benchmarks). */
/* KTO (unpaired.c): the micro-batch of examples idx[0..n) of an unpaired dataset as one row: first
 * each example k's prompt + completion cut to max_len as segment 2k+1 (desirable) or 2k+2
 * (undesirable), then its KL sequence (k's prompt + the completion of k-1, of n-1 for k = 0, cut to
 * max_len) as segment 2n+1+k; the completions' tokens are the targets. So n = the last segment / 3. */
pt_status batch_collate_unpaired(const pt_dataset *ds, const size_t *idx, size_t n, int32_t max_len, pt_batch *out);
/* KTO: the pair examples (two sequences) of an unrolled as TRL's unpair_preference_dataset does:
 * in chunks of 1000 examples, the chunk's chosen sequences (and unpaired examples) in order, then
 * its rejected ones; every example then one sequence. */
pt_status dataset_unpair(pt_dataset *ds);
/* GRPO (dataset_options.prompts): example ex's prompt tokens (*ids, *n: into ex) and its row's
 * columns as JSON text (*columns: malloc'd, NUL-terminated). Fails on an example not made so. */
pt_status dataset_prompt_row(const pt_example *ex, const int32_t **ids, int32_t *n, char **columns);
pt_status batch_collate_padded(const pt_dataset *ds, const size_t *idx, size_t n, int32_t pad_id, pt_batch *out);
void batch_free(pt_batch *b);

#endif
