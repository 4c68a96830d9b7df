/* method.h — the training methods `method:` selects, one row each: the dataset columns it reads,
 * whether it needs the frozen reference (the same 4-bit base with the adapter off: no second
 * model), its loss as TRL defines it, the metrics it logs under TRL's names, the default of `beta`
 * in TRL's config of that trainer, and whether this ptrain trains it yet. Every method shares the
 * training loop, data parallelism, checkpoints, exports and the Hub; the rows say what differs. */
#ifndef PTRAIN_METHOD_H
#define PTRAIN_METHOD_H

#include <stdbool.h>
#include <stddef.h>

#include "ptrain/settings.h"

typedef struct {
    pt_method method;
    const char *name;      /* config_method_choices[method] */
    const char *trainer;   /* TRL's trainer of the method */
    const char *columns;   /* the dataset columns a row needs */
    bool reference;        /* needs the reference log-probs (the adapter off) */
    bool pairs;            /* each row is a chosen/rejected pair, both in one micro-batch */
    bool legacy_pairs;     /* ... tokenized as TRL's older trainers (CPO, ORPO) do (src/data/pair.c) */
    bool unpaired;         /* KTO's rows: one sequence each with a label, batched with KL sequences in
                              the dataset's order (src/data/unpaired.c) */
    double beta;           /* TRL's default beta (0: the method has none) */
    const char *loss;      /* one line */
    const char *metrics;   /* what it logs besides loss, TRL's names, comma-separated */
    bool built;            /* trained by this ptrain */
} method_info;

/* The row of m (every pt_method has one). */
const method_info *method_info_of(pt_method m);
/* The names of the methods this ptrain trains, ", "-separated, into out. */
void method_built_names(char *out, size_t len);

#endif
