/* train_data.c — the examples of a training run, tokenized once (issue 27): when output_dir holds a
 * dataset cache for this run's data (dataset_cache.h: a requeued or resumed run, or another run on
 * the same data and tokenizer), every rank maps it; otherwise the ranks tokenize a share of the rows
 * each, rank 0 writes the cache, and every rank maps that. A rank that cannot see the file
 * (output_dir not shared with rank 0's node) is sent its bytes. Ranks whose dataset files differ
 * from rank 0's load without the cache, and data_agree.c says what differs. */
#include <stdlib.h>
#include <string.h>

#include "ptrain/config_options.h"
#include "ptrain/dataset_cache.h"
#include "ptrain/log.h"
#include "ptrain/method.h"
#include "ptrain/outdir.h"
#include "trainer.h"

/* dataset_work's exchange: the parts' statuses agreed, then their rows to rank 0. */
static pt_status gather_rows(void *arg, pt_status local, const void *mine, size_t n, void **all, size_t *all_n)
{
    const pt_dist *d = arg;
    TRY(dist_agree(d, local));
    return dist_gather_bytes(d, "the tokenized examples", mine, n, all, all_n);
}

/* Whether every rank computed rank 0's key (the same files' bytes, tokenizer and keys). */
static pt_status keys_agree(const pt_dist *d, const dataset_cache_key *mine, bool *same)
{
    dataset_cache_key root = *mine;
    TRY(dist_bcast_bytes(d, &root, sizeof root));
    int differ = memcmp(&root, mine, sizeof root) != 0;
    TRY(dist_any(d, &differ));
    *same = !differ;
    return PT_OK;
}

/* Rank 0 checks the cache (its CRC included) and says why one it cannot use is not used. */
static pt_status cache_found(const trainer *t, const char *path, const dataset_cache_key *key, int *found)
{
    *found = 0;
    if (t->d->rank == 0) {
        strbuf why = {0};
        dataset_cache_state s = dataset_cache_check(path, key, true, &why);
        if (s == CACHE_STALE || s == CACHE_DAMAGED)
            log_info("dataset    cache %s is %s (%s): tokenizing again\n", shown_text(path).s,
                     s == CACHE_STALE ? "stale" : "damaged", sb_text(&why));
        sb_free(&why);
        *found = s == CACHE_FOUND;
    }
    return dist_bcast_bytes(t->d, found, sizeof *found);
}

/* Every rank tokenizes its share of the rows; rank 0 writes the cache. Agreed. */
static pt_status cache_build(const trainer *t, dataset_options o, const char *path, const dataset_cache_key *key)
{
    o.work = (dataset_work){t->d->rank, t->d->world, gather_rows, (void *)t->d};
    pt_dataset train, eval;
    pt_status st = dataset_prepare(&o, t->tok, log_warn_stream(), &train, &eval);
    if (st == PT_OK && t->d->rank == 0) st = dataset_cache_write(path, key, &train, &eval);
    dataset_free(&train);
    dataset_free(&eval);
    return dist_agree(t->d, st);
}

/* The ranks that could not map the file get rank 0's bytes of it. */
static pt_status cache_send(trainer *t, const dataset_cache_key *key, bool unseen)
{
    uint64_t len = t->d->rank == 0 ? t->train.backing_len : 0;
    TRY(dist_bcast_bytes(t->d, &len, sizeof len));
    void *bytes = t->d->rank == 0 ? t->train.backing : malloc(len ? len : 1);
    if (!bytes) abort();
    pt_status st = dist_bcast_bytes(t->d, bytes, len);
    if (st == PT_OK && unseen) return dataset_cache_parse(bytes, len, key, true, &t->train, &t->eval);
    if (t->d->rank != 0) free(bytes);
    return st;
}

/* Every rank maps the cache rank 0 has checked or written. Agreed. */
static pt_status cache_map(trainer *t, const char *path, const dataset_cache_key *key)
{
    pt_status st = dataset_cache_open(path, key, false, &t->train, &t->eval);
    TRY(dist_agree(t->d, t->d->rank == 0 ? st : PT_OK));
    int unseen = st != PT_OK, any = unseen;
    if (unseen) err_clear(); /* not on this node, or not yet: rank 0 sends it */
    TRY(dist_any(t->d, &any));
    if (any && t->d->rank == 0)
        log_info("dataset    sent the cache to the ranks that cannot see %s\n", shown_text(path).s);
    return any ? dist_agree(t->d, cache_send(t, key, unseen)) : PT_OK;
}

static pt_status load_cached(trainer *t, const dataset_options *o, const dataset_cache_key *key)
{
    char name[64], path[4096 + 64];
    dataset_cache_file_name(key, name, sizeof name);
    TRY(dist_agree(t->d, t->d->rank == 0 ? outdir_clear_caches(t->cfg, name) : PT_OK)); /* overwrite_output_dir */
    snprintf(path, sizeof path, "%s/%s", t->cfg->output_dir, name);
    int found;
    TRY(cache_found(t, path, key, &found));
    if (!found) TRY(cache_build(t, *o, path, key));
    TRY(cache_map(t, path, key));
    if (found)
        log_info("dataset    reused %s (tokenized by an earlier run with the same data and tokenizer)\n",
                 shown_text(path).s);
    else log_info("dataset    tokenized on %d rank%s, kept in %s for the next run\n", t->d->world,
                  t->d->world == 1 ? "" : "s", shown_text(path).s);
    return PT_OK;
}

pt_status trainer_load_data(trainer *t)
{
    const pt_dist *d = t->d;
    if (t->cfg->n_datasets == 0)
        return dist_agree(d, ERR(PT_ERR_USER, "%s: no dataset given; add e.g.\ndataset:\n  - name: \"yahma/alpaca-cleaned\"",
                                 shown_text(t->cfg->path).s));
    dataset_options o = dataset_options_from_config(t->cfg);
    dataset_cache_key key;
    TRY(dist_agree(d, dataset_cache_key_of(&o, t->tok, &key)));
    bool same;
    TRY(keys_agree(d, &key, &same));
    if (same) TRY(load_cached(t, &o, &key));
    else TRY(dist_agree(d, dataset_prepare(&o, t->tok, log_warn_stream(), &t->train, &t->eval)));
    if (d->rank == 0) dataset_report(&t->train, stdout);
    /* GRPO: per_device_train_batch_size counts completions, num_generations of each prompt (TRL's) */
    long batch = t->cfg->per_device_train_batch_size;
    if (t->cfg->method == METHOD_GRPO) batch /= t->cfg->num_generations > 0 ? t->cfg->num_generations : 1;
    TRY(dist_agree(d, sampler_init(&t->sampler, t->train.n, d->rank, d->world, batch > 0 ? batch : 1)));
    t->sampler.sequential = method_info_of(t->cfg->method)->unpaired; /* KTO's sequential sampler */
    if (t->cfg->group_by_length) /* transformers: LengthGroupedSampler(train_batch_size x accumulation) */
        TRY(dist_agree(d, sampler_group_by_length(&t->sampler, &t->train, t->cfg->per_device_train_batch_size *
                                                                               t->cfg->gradient_accumulation_steps)));
    t->epoch = 0;
    return dist_agree(d, sampler_epoch(&t->sampler, (uint64_t)t->cfg->data_seed, 0));
}
