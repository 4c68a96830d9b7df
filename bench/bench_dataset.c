/* bench_dataset.c — ptrain's dataset phase alone and the memory it takes: CONFIG's model's
 * tokenizer is loaded, the kernel's peak-RSS mark reset (/proc/self/clear_refs, 5), then
 * dataset_prepare reads, formats, tokenizes and labels CONFIG's `dataset:` entries as a training
 * run does (without the dataset cache). Prints one JSON object: the seconds, the RSS before, the
 * peak RSS during the phase less that (what the phase took at its most), the RSS after, and the
 * tokenized output (examples, tokens, and its bytes: ids and labels, 4 bytes each a token, as
 * the dataset cache holds them), and a hash of the examples in order (FNV-1a of each one's ids and
 * labels), so that two layouts of the same rows can be seen to give the same examples.
 * Usage: bench_dataset CONFIG */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptrain/config.h"
#include "ptrain/config_options.h"
#include "ptrain/dataset.h"
#include "ptrain/error.h"
#include "ptrain/model_io.h"
#include "ptrain/tokenizer.h"
#include "ptrain/util.h"

/* VmRSS or VmHWM of this process in KiB, -1 when unknown. */
static long status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':') kb = strtol(line + k + 1, NULL, 10);
    if (f) fclose(f);
    return kb;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_dataset CONFIG\n");
        return 2;
    }
    pt_config cfg;
    if (config_load(argv[1], &cfg, stderr) != PT_OK) {
        fprintf(stderr, "bench_dataset: %s\n", err_message());
        return 1;
    }
    pt_tokenizer *tok = NULL;
    char resolved[4096];
    pt_model_format fmt;
    if (model_load_tokenizer(cfg.model_name, cfg.revision, &tok, resolved, sizeof resolved, &fmt) != PT_OK) {
        fprintf(stderr, "bench_dataset: %s\n", err_message());
        config_free(&cfg);
        return 1;
    }
    dataset_options o = dataset_options_from_config(&cfg);
    FILE *reset = fopen("/proc/self/clear_refs", "w");
    bool reset_ok = reset && fputs("5", reset) >= 0;
    if (reset) reset_ok = fclose(reset) == 0 && reset_ok;
    long before = status_kb("VmRSS");
    double t0 = now();
    pt_dataset train, eval;
    pt_status st = dataset_prepare(&o, tok, stderr, &train, &eval);
    double s = now() - t0;
    long peak = status_kb("VmHWM"), after = status_kb("VmRSS");
    if (st != PT_OK) {
        fprintf(stderr, "bench_dataset: %s\n", err_message());
        tokenizer_free(tok);
        config_free(&cfg);
        return 1;
    }
    unsigned long long tokens = 0;
    uint64_t hash = UTIL_FNV_INIT;
    for (int set = 0; set < 2; set++) {
        const pt_dataset *ds = set ? &eval : &train;
        for (size_t i = 0; i < ds->n; i++) {
            tokens += (unsigned long long)ds->ex[i].len;
            hash = util_fnv1a(hash, ds->ex[i].ids, sizeof(int32_t) * (size_t)ds->ex[i].len);
            hash = util_fnv1a(hash, ds->ex[i].labels, sizeof(int32_t) * (size_t)ds->ex[i].len);
        }
    }
    printf("{\"dataset_s\": %.3f, \"rss_before_mb\": %.1f, \"phase_peak_mb\": %.1f, \"rss_after_mb\": %.1f, "
           "\"peak_reset\": %s, \"examples\": %zu, \"tokens\": %llu, \"tokenized_mb\": %.1f, \"examples_hash\": \"%016llx\"}\n",
           s, before / 1024.0, reset_ok ? (peak - before) / 1024.0 : -1.0, after / 1024.0, reset_ok ? "true" : "false",
           train.n + eval.n, tokens, (double)tokens * 8 / 1048576.0, (unsigned long long)hash);
    dataset_free(&train);
    dataset_free(&eval);
    tokenizer_free(tok);
    config_free(&cfg);
    return 0;
}
