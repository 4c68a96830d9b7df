/* dataset_cache.h — the tokenized examples of a run kept in one file, so that a requeued or resumed
 * run, or another run on the same data, neither reads the JSON again nor tokenizes: the train and
 * eval examples (ids, labels, segments: after templates, filters, truncation, the split and
 * packing) and the per-entry counts the trainer prints and compares across ranks.
 *
 * The file is named by a hash of what decides the examples besides the dataset files' bytes (every
 * data key, the tokenizer's fingerprint, ptrain's data format version); inside, it holds that hash,
 * a hash of the files' sizes and bytes, and a CRC-32 of everything. A file for other dataset bytes
 * is stale, one whose bytes do not check is damaged: either is said and made again, never used.
 * Written atomically (filewrite.h); read by mapping it read-only, so the ranks of a node share
 * one copy of the pages. */
#ifndef PTRAIN_DATASET_CACHE_H
#define PTRAIN_DATASET_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "ptrain/dataset.h"
#include "ptrain/util.h"

/* ptrain's data format version: raise it with any change to how rows become examples (formats,
 * templates, labelling, truncation, packing, the split) or to this file's layout. */
#define DATASET_CACHE_VERSION 3 /* 2: assistant spans by the generation prompt (issue 37); 3: reward pairs' margins */

typedef struct {
    uint64_t name;  /* the options, the tokenizer, the version (the file's name) */
    uint64_t files; /* the dataset files of every entry: how many, their sizes and bytes */
} dataset_cache_key;

/* A hash of every field of o that decides the examples (not o->work). */
uint64_t dataset_options_hash(const dataset_options *o);
/* The key of o's examples with tok: reads (does not parse) every file of every entry. Fails as
 * dataset_load would on an entry whose files cannot be found or read. */
pt_status dataset_cache_key_of(const dataset_options *o, const pt_tokenizer *tok, dataset_cache_key *key);
/* "dataset-<16 hex digits of key->name>.ptdata" */
void dataset_cache_file_name(const dataset_cache_key *key, char *out, size_t len);

typedef enum { CACHE_FOUND, CACHE_MISSING, CACHE_STALE, CACHE_DAMAGED } dataset_cache_state;
/* Whether path holds the examples for key; verify: the CRC of every byte too (else the header and
 * the size only). *why (may be NULL) gets the reason a file is stale or damaged. Reads, never
 * writes. */
dataset_cache_state dataset_cache_check(const char *path, const dataset_cache_key *key, bool verify, strbuf *why);
/* Write train (with its stats) and eval to path for key, atomically. */
pt_status dataset_cache_write(const char *path, const dataset_cache_key *key, const pt_dataset *train,
                              const pt_dataset *eval);
/* Map path read-only: train (with the stats) points into it (dataset_free unmaps), eval into a copy
 * of its part (eval sets are small). Fails, with the reason, on a file that dataset_cache_check
 * would not find for key. */
pt_status dataset_cache_open(const char *path, const dataset_cache_key *key, bool verify, pt_dataset *train,
                             pt_dataset *eval);
/* The same from the file's bytes in memory (a rank that cannot see output_dir gets them sent):
 * train takes bytes (malloc'd; freed by dataset_free), eval gets a copy of its part. */
pt_status dataset_cache_parse(void *bytes, size_t len, const dataset_cache_key *key, bool verify, pt_dataset *train,
                              pt_dataset *eval);

#endif
