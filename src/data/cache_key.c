/* cache_key.c — what names and checks a dataset cache (dataset_cache.h): a hash of every data key
 * and the tokenizer, and a hash of the dataset files' bytes (CRC-32 and Adler-32 of each, with its
 * size: read at disk speed, far below the cost of parsing and tokenizing them). */
#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data_internal.h"
#include "ptrain/dataset_cache.h"

#define MIX(h, v) util_fnv1a(h, &(v), sizeof(v))

static uint64_t mix_text(uint64_t h, const char *s)
{
    uint64_t n = s ? strlen(s) : UINT64_MAX; /* NULL differs from "" */
    h = MIX(h, n);
    return s ? util_fnv1a(h, s, (size_t)n) : h;
}

static uint64_t mix_entry(uint64_t h, const pt_dataset_config *d)
{
    h = mix_text(mix_text(mix_text(h, d->name), d->split_type), d->config_name);
    if (d->revision) h = mix_text(h, d->revision); /* unset: the hash of a config without the key */
    h = MIX(h, d->data_files.n);
    for (int i = 0; i < d->data_files.n; i++) h = mix_text(h, d->data_files.items[i]);
    h = MIX(h, d->format);
    h = MIX(h, d->rename.n);
    for (int i = 0; i < d->rename.n; i++) h = mix_text(mix_text(h, d->rename.keys[i]), d->rename.values[i]);
    uint8_t flags[2] = {d->filter_data, d->shuffle};
    h = util_fnv1a(h, flags, sizeof flags);
    h = mix_text(mix_text(h, d->filter_column_value), d->filter_value);
    h = MIX(h, d->num_samples);
    return MIX(h, d->seed);
}

uint64_t dataset_options_hash(const dataset_options *o)
{
    uint64_t h = MIX(UTIL_FNV_INIT, o->n_datasets);
    for (int i = 0; i < o->n_datasets; i++) h = mix_entry(h, &o->datasets[i]);
    h = MIX(h, o->max_seq_length);
    h = mix_text(h, o->chat_template && *o->chat_template ? o->chat_template : NULL);
    const pt_strmap *kw = o->chat_template_kwargs;
    int n_kw = kw ? kw->n : 0;
    h = MIX(h, n_kw);
    for (int i = 0; kw && i < kw->n; i++) h = mix_text(mix_text(h, kw->keys[i]), kw->values[i]);
    h = MIX(h, o->assistant_only_loss);
    h = mix_text(h, o->dataset_text_field);
    uint8_t packing = o->packing, pairs = o->pairs + 2 * o->pairs_legacy + 4 * o->unpaired + 8 * o->pairs_reward +
                                         16 * o->prompts + 32 * o->singles;
    h = MIX(h, packing);
    h = MIX(h, pairs);
    h = MIX(h, o->max_prompt_length);
    h = MIX(h, o->max_completion_length);
    h = MIX(h, o->val_split_ratio);
    return MIX(h, o->seed);
}

/* Size, CRC-32 and Adler-32 of one file's bytes into h. */
static pt_status mix_file(uint64_t *h, const char *path)
{
    FILE *f;
    TRY(source_open(path, &f));
    const size_t cap = (size_t)1 << 20;
    unsigned char *chunk = malloc(cap);
    if (!chunk) abort();
    uLong crc = crc32(0L, Z_NULL, 0), adler = adler32(0L, Z_NULL, 0);
    uint64_t size = 0;
    size_t n;
    while ((n = fread(chunk, 1, cap, f)) > 0) {
        crc = crc32(crc, chunk, (uInt)n);
        adler = adler32(adler, chunk, (uInt)n);
        size += n;
    }
    bool failed = ferror(f);
    fclose(f);
    free(chunk);
    if (failed) return ERR(PT_ERR_USER, "cannot read %s: read error", shown_text(path).s);
    uint64_t sums[3] = {size, crc, adler};
    *h = util_fnv1a(*h, sums, sizeof sums);
    return PT_OK;
}

static pt_status mix_files(uint64_t *h, const pt_dataset_config *d)
{
    data_files files = {0};
    pt_status st = source_files(d, &files);
    if (st == PT_OK) *h = MIX(*h, files.n);
    for (int i = 0; st == PT_OK && i < files.n; i++) st = mix_file(h, files.path[i]);
    source_free(&files);
    return st;
}

pt_status dataset_cache_key_of(const dataset_options *o, const pt_tokenizer *tok, dataset_cache_key *key)
{
    uint64_t version = DATASET_CACHE_VERSION, fp = tokenizer_fingerprint(tok);
    uint64_t h = MIX(UTIL_FNV_INIT, version);
    h = mix_text(h, PACKAGE_VERSION);
    h = MIX(h, fp);
    uint64_t opts = dataset_options_hash(o);
    key->name = MIX(h, opts);
    key->files = UTIL_FNV_INIT;
    for (int i = 0; i < o->n_datasets; i++) {
        pt_status st = mix_files(&key->files, &o->datasets[i]);
        if (st != PT_OK) {
            err_context("dataset[%d]", i);
            return st;
        }
    }
    return PT_OK;
}

void dataset_cache_file_name(const dataset_cache_key *key, char *out, size_t len)
{
    snprintf(out, len, "dataset-%016llx.ptdata", (unsigned long long)key->name);
}
