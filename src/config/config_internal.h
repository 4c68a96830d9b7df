/* config_internal.h — the key tables shared by the config parser, validator and printer. */
#ifndef PTRAIN_CONFIG_INTERNAL_H
#define PTRAIN_CONFIG_INTERNAL_H

#include <stddef.h>
#include <stdio.h>
#include <yaml.h>

#include "ptrain/config.h"
#include "ptrain/util.h"

typedef enum {
    K_STR,      /* any scalar, kept as text */
    K_INT,      /* integer in [min, max] */
    K_FLOAT,    /* finite number in [min, max] (bounds exclusive per flags) */
    K_BOOL,     /* true/false, yes/no, on/off, 1/0 */
    K_ENUM,     /* one of choices, held as its index: a value of the key's enum (settings.h) */
    K_STRLIST,  /* a sequence of scalars, or one scalar; items checked against choices if given */
    K_STRMAP,   /* a mapping of scalars to scalars */
    K_TRI,      /* auto or a boolean */
    K_RESUME,   /* a boolean or a path */
    K_DEVMAP,   /* a string such as auto, or a mapping like {"": 0} */
    K_DATASETS, /* the dataset list (its entries use the dataset key table) */
    K_SECRET,   /* a token: never stored, never printed */
} key_type;

enum {
    F_MIN_EXCL = 1u << 0, /* min is excluded */
    F_MAX_EXCL = 1u << 1, /* max is excluded */
    F_AUTO = 1u << 2,     /* the word "auto" means 0 (integers) */
    F_UNSLOTH = 1u << 3,  /* a pt_checkpointing, not a bool: the booleans, or "unsloth" (2) */
    F_MINUS1 = 1u << 4,   /* -1 is allowed as "unset" besides [min, max] */
    F_STEPS = 1u << 5,    /* a step count: a whole number, or a fraction below 1 of the total (floats) */
    F_TAG = 1u << 6,      /* a scalar is a tag kept in pt_strmap.tag (mappings) */
    F_EVAL = 1u << 7,     /* an evaluated metric's name (enums): one without the eval_ prefix gets it */
};

typedef struct {
    const char *name;
    const char *alias;
    key_type type;
    size_t offset;
    const char *def; /* default as text; NULL: unset. Lists: comma-separated. */
    const char *const *choices;
    double min, max;
    unsigned flags;
    const char *help; /* one line for the docs and --help of check */
} key_spec;

extern const key_spec config_keys[];
extern const int config_nkeys;
extern const key_spec dataset_keys[];
extern const int dataset_nkeys;

/* Keys of the libraries the peer builds on (TRL, PEFT, Unsloth, transformers) and of the seed
 * system's config that ptrain reads but has no field for. Each is accepted with a note saying what
 * ptrain does instead, or refused with the reason and the fix: null is always accepted; another
 * value is accepted when accept allows it, else refused (refusal). */
typedef struct {
    const char *name;
    /* the values accepted with the note, '|'-separated: a boolean word ("false": any spelling of
     * false), "{}" (an empty mapping), "[]" (an empty list) or a scalar's text; NULL: any value */
    const char *accept;
    const char *note;    /* printed as a note for an accepted value: what ptrain does instead */
    const char *refusal; /* the error for any other value: the reason and the fix */
} foreign_key;
/* The entry for a top-level key name, or NULL. */
const foreign_key *foreign_key_find(const char *name);
/* Whether value (not null) is one of the values fk accepts. */
bool foreign_key_accepts(const foreign_key *fk, const yaml_node_t *value);
/* The foreign keys, for the docs and tests. */
extern const foreign_key config_foreign_keys[];
extern const int config_nforeign;

/* Convert scalar text into the field of spec at base. On failure returns false and writes
 * "expected ..., found ..." into why. */
bool key_set_scalar(const key_spec *spec, void *base, const char *text, char *why, size_t whylen);
/* Describe what spec expects ("a positive integer", "one of a, b, c"). */
void key_expected(const key_spec *spec, char *out, size_t outlen);
/* Append the value of spec at base as text. */
void key_value_text(const key_spec *spec, const void *base, strbuf *out);
/* Free whatever the field of spec at base owns. */
void key_free_value(const key_spec *spec, void *base);
/* Apply the defaults of a table to base. */
void key_apply_defaults(const key_spec *table, int n, void *base);
int key_index(const key_spec *table, int n, const char *name);
/* The closest name in table (or in choices) within a small edit distance; NULL if none. */
const char *key_suggest(const key_spec *table, int n, const char *name);
const char *choice_suggest(const char *const *choices, const char *word);
/* The messages about one config file (config_report.c): collected in any order, shown in file
 * order, identical ones once with their count, at most CONFIG_REPORT_MAX and the number left out. */
#define CONFIG_REPORT_MAX 20
typedef struct {
    const char *file; /* the config file's name, as the messages name it */
    struct report_item *items;
    int n, cap;
} config_report;
/* A message at the 1-based line:col of the file (0, 0: the file as a whole); label: NULL in a
 * report of errors, "warning" or "note" in one for the warning stream. */
void report_add(config_report *r, const char *label, size_t line, size_t col, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* PT_OK when r has no message, else the one error of them all, "FILE:LINE:COL: ..." a line. */
pt_status report_fail(config_report *r);
/* Write r's messages to out, "ptrain: LABEL: FILE:LINE:COL: ..." a line, at once; NULL: nowhere. */
void report_print(config_report *r, FILE *out);
void report_free(config_report *r);

/* The rules between keys (config_check.c); each broken one is added to errors. */
bool config_check_values(pt_config *cfg, config_report *errors);
/* What a valid config asks for that ptrain does differently, one warning line each to warn (NULL:
 * none): report_to's services (config_check.c). */
void config_notes(const pt_config *cfg, FILE *warn);
bool strlist_push(pt_strlist *list, const char *item);

/* The bounds a config file is read within (config_yaml.c, and the walk in config.c). A real config
 * is a few KB, nests 4 levels and repeats a value through an alias a few times. */
#define CONFIG_MAX_BYTES (256u << 10) /* parsing 256 KiB of any shape stays well under a second */
#define CONFIG_MAX_DEPTH 64           /* mappings and lists inside one another */
#define CONFIG_MAX_REPEATS 10000      /* values read again through aliases, in all */
/* libyaml's document of text (doc then belongs to the caller: yaml_document_delete), or the one
 * error: past CONFIG_MAX_BYTES, nested past CONFIG_MAX_DEPTH, a second YAML document, or not
 * valid YAML, at the line:col where that starts. */
pt_status config_yaml_load(const char *name, const char *text, size_t len, yaml_document_t *doc);
void strlist_free(pt_strlist *list);

#endif
