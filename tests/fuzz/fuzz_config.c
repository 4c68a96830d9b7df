/* fuzz-sources: src/config/config.c src/config/config_keys.c src/config/config_check.c src/config/config_yaml.c src/config/config_dump.c src/config/config_report.c src/config/settings.c src/config/method.c src/backend/device.c src/model/gguf_methods.c src/core/util.c src/core/error.c src/core/shown.c */
/* fuzz_config.c — libFuzzer target for config.yaml, along the path `ptrain check config.yaml`
 * takes (src/cmd/main.c): the input is parsed with config_parse (libyaml, the key table, the type
 * conversions, the rules between keys; warnings to /dev/null), then, on success, checked for a
 * launch on 1 and on 4 ranks (config_validate_launch), printed (config_print) and hashed
 * (config_hash), every key's value shown (config_value_text), written as a checkpoint keeps it
 * (config_dump), and freed.
 * Invariants: no crash, leak or sanitizer report; a failure is a user error whose message is one
 * or more whole lines, each "config.yaml:LINE:COL: ..." (or "config.yaml: ..." for an empty file),
 * at most CONFIG_REPORT_MAX of them and then "… and N more errors in config.yaml", and leaves a
 * zeroed pt_config; a success passes the launch check on 1 rank, holds every value in
 * its key's range, a named dataset entry for each one given and the derived defaults, hashes
 * the same twice, and its dump reads back as the same configuration (when no value was withheld
 * as "(not stored)" and the dump is within the size a config may have). The rule
 * quantization_method is checked against the GGUF export methods of src/export/gguf_methods.c.
 * Seed corpus: tests/fuzz/corpus/config/ (the configs of
 * tests/configs/good and bad, and the share/examples). Built and run by tests/fuzz/run-fuzz.sh. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config_internal.h"
#include "ptrain/config.h"
#include "ptrain/error.h"
#include "ptrain/export.h"

#define FUZZ_NAME "fuzz_config"
#include "support.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    devnull = fopen("/dev/null", "w");
    CHECK(devnull != NULL);
    return 0;
}

/* Whether line (up to a newline) is the last line of a report that leaves messages out. */
static bool rest_line(const char *line)
{
    static const char start[] = "… and ";
    if (strncmp(line, start, sizeof start - 1)) return false;
    char *end;
    long n = strtol(line + sizeof start - 1, &end, 10);
    const char *rest = n == 1 ? " more error in config.yaml" : " more errors in config.yaml";
    return n >= 1 && !strcmp(end, rest);
}

/* Every line of a failure's message names the file and, but for an empty file, a position, but for
 * the last line of a long report, which says how many more there are; the message is whole (never
 * cut at ERR_MESSAGE_MAX, whatever the number of mistakes) and has at most CONFIG_REPORT_MAX + 1
 * lines. */
static void check_message(const char *msg)
{
    static const char name[] = "config.yaml:";
    CHECK(*msg && strlen(msg) < ERR_MESSAGE_MAX - 8);
    int lines = 0;
    for (const char *line = msg; line; lines++) {
        const char *nl = strchr(line, '\n');
        if (!nl && rest_line(line)) break;
        CHECK(!strncmp(line, name, sizeof name - 1));
        const char *p = line + sizeof name - 1;
        if (*p != ' ') { /* LINE:COL: */
            char *end;
            long l = strtol(p, &end, 10);
            CHECK(end > p && l >= 1 && *end == ':');
            p = end + 1;
            long c = strtol(p, &end, 10);
            CHECK(end > p && c >= 1 && *end == ':');
        }
        line = nl ? nl + 1 : NULL;
    }
    CHECK(lines <= CONFIG_REPORT_MAX + 1);
}

/* A typed value within its key's range, as key_set_scalar promises. */
static void check_value(const key_spec *spec, const void *base, bool set)
{
    const char *slot = (const char *)base + spec->offset;
    switch (spec->type) {
    case K_INT: {
        long v = *(const long *)slot;
        bool auto0 = (spec->flags & F_AUTO) && v == 0, unset = (spec->flags & F_MINUS1) && v == -1;
        if (set || spec->def) CHECK(auto0 || unset || (v >= spec->min && (double)v <= spec->max));
        break;
    }
    case K_FLOAT: {
        double v = *(const double *)slot;
        if (set || spec->def) {
            CHECK(v == v && v >= spec->min && v <= spec->max);
            if (spec->flags & F_MIN_EXCL) CHECK(v > spec->min);
            if (spec->flags & F_MAX_EXCL) CHECK(v < spec->max);
        }
        break;
    }
    case K_ENUM: { /* the index of one of the choices */
        int v = *(const int *)slot, n = 0;
        while (spec->choices[n]) n++;
        CHECK(v >= 0 && v < n);
        break;
    }
    case K_STRLIST: {
        const pt_strlist *l = (const pt_strlist *)slot;
        CHECK(l->n >= 0 && (l->n == 0 || l->items));
        for (int i = 0; i < l->n; i++) CHECK(l->items[i] != NULL);
        break;
    }
    case K_STRMAP: {
        const pt_strmap *m = (const pt_strmap *)slot;
        for (int i = 0; i < m->n; i++) CHECK(m->keys[i] && m->values[i]);
        break;
    }
    default: break;
    }
}

/* What a checkpoint keeps of cfg reads back as the same configuration. */
static void check_dump(const pt_config *cfg)
{
    char *dumped = NULL;
    CHECK(config_dump(cfg, &dumped) == PT_OK && dumped);
    if (!strstr(dumped, "(not stored)") && strlen(dumped) <= CONFIG_MAX_BYTES) {
        pt_config back;
        pt_status st = config_parse("config.yaml", dumped, strlen(dumped), &back, devnull);
        if (st != PT_OK) fprintf(stderr, "the dump does not read back: %s\n%s", err_message(), dumped);
        CHECK(st == PT_OK);
        CHECK(config_hash(&back) == config_hash(cfg));
        config_free(&back);
    }
    free(dumped);
}

static void check_config(pt_config *cfg)
{
    CHECK(cfg->path && !strcmp(cfg->path, "config.yaml"));
    for (int i = 0; i < config_nkeys; i++) check_value(&config_keys[i], cfg, cfg->is_set[i]);
    for (int d = 0; d < cfg->n_datasets; d++) {
        const pt_dataset_config *ds = &cfg->datasets[d];
        CHECK(ds->name && *ds->name && ds->seed >= 0);
        CHECK(!ds->filter_data || (ds->filter_column_value && ds->filter_value));
        for (int i = 0; i < dataset_nkeys; i++) check_value(&dataset_keys[i], ds, true);
    }
    CHECK(cfg->model_name && *cfg->model_name && cfg->lora_target_modules.n > 0);
    CHECK(cfg->per_device_eval_batch_size >= 1);
    CHECK((unsigned)cfg->metric_for_best_model < METRIC_COUNT);

    /* what `ptrain check` does next */
    CHECK(config_validate_launch(cfg, 1) == PT_OK);
    pt_status st = config_validate_launch(cfg, 4);
    if (st != PT_OK) {
        CHECK(st == PT_ERR_USER);
        check_message(err_message());
        err_clear();
    }
    config_print(cfg, devnull);
    CHECK(config_hash(cfg) == config_hash(cfg));
    for (const char *const *k = config_key_names(); *k; k++) {
        char *text = config_value_text(cfg, *k);
        CHECK(text || !strcmp(*k, "dataset"));
        free(text);
    }
    check_dump(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const pt_config zero;
    pt_config cfg;
    pt_status st = config_parse("config.yaml", (const char *)data, size, &cfg, devnull);
    if (st != PT_OK) {
        CHECK(st == PT_ERR_USER);
        check_message(err_message());
        CHECK(memcmp(&cfg, &zero, sizeof cfg) == 0);
        err_clear();
        return 0;
    }
    check_config(&cfg);
    config_free(&cfg);
    CHECK(memcmp(&cfg, &zero, sizeof cfg) == 0);
    err_clear();
    return 0;
}
