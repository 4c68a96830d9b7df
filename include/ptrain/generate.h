/* generate.h — `ptrain generate`: text from a model (and later an adapter), streamed as it comes. */
#ifndef PTRAIN_GENERATE_H
#define PTRAIN_GENERATE_H

#include "ptrain/error.h"

/* argv[0] is "generate"; returns the status to exit with (usage errors are PT_ERR_USAGE). */
pt_status generate_main(int argc, char **argv);
/* Find a model file: an existing path as given, else NAME in $PTRAIN_MODELS, ./models and the
 * installed models directory. Writes the path into out (size outlen). */
pt_status model_resolve(const char *name, char *out, size_t outlen);

#endif
