/* checkpoint_internal.h — what checkpoint.c (writing, the completion mark, listing) and
 * checkpoint_read.c (reading, inspect) share: the table of metadata fields, each an HDF5
 * attribute of a group, the names of the tensor groups, and the completion mark. */
#ifndef PTRAIN_CHECKPOINT_INTERNAL_H
#define PTRAIN_CHECKPOINT_INTERNAL_H

#include <hdf5.h>

#include "ptrain/checkpoint.h"

/* CF_ENUM: a config choice's enum (an int) in ckpt_state, its name in the file. */
/* CF_OSTR: a string written only when not empty, read as "" when absent (older checkpoints);
 * CF_OBOOL: a boolean written only when true, read as false when absent (likewise) */
typedef enum { CF_I64, CF_F64, CF_BOOL, CF_STR, CF_HASH, CF_ENUM, CF_OSTR, CF_OBOOL } ckpt_field_type;

typedef struct {
    const char *group, *name;
    ckpt_field_type type;
    size_t offset, size;       /* of the member in ckpt_state */
    const char *const *names; /* CF_ENUM: the enum's names, NULL-terminated (settings.h) */
} ckpt_field;

/* The number of names of a CF_ENUM field (the values it can hold). */
int ckpt_enum_count(const ckpt_field *f);

extern const ckpt_field ckpt_fields[];
extern const int ckpt_nfields;
extern const char *const ckpt_groups[]; /* groups holding the fields, created in this order */
extern const int ckpt_ngroups;

#define CKPT_PARAMS "/adapter"
#define CKPT_EXP_AVG "/optimizer/exp_avg"
#define CKPT_EXP_AVG_SQ "/optimizer/exp_avg_sq"
#define CKPT_CONFIG_TEXT "/run/config.yaml"
#define CKPT_EVALS "/metrics/evals"

/* The completion mark, the text at the start of the user block (zeros fill the rest of it). */
#define CKPT_MARK_FORMAT "PTRAIN-CHECKPOINT %d\nbytes %lld\ncrc32 %08lx\nstep %lld\n"

/* ckpt_verify, also handing back the step the mark names (checked against /state/global_step
 * when the file is read, so no bit of the file goes unchecked). */
pt_status ckpt_verify_mark(const char *path, int64_t *step);

#endif
