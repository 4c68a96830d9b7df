/* generate.h — `ptrain generate`: text from a model (and later an adapter), streamed as it comes. */
#ifndef PTRAIN_GENERATE_H
#define PTRAIN_GENERATE_H

#include "ptrain/error.h"

/* argv[0] is "generate"; returns the status to exit with (usage errors are PT_ERR_USAGE). */
pt_status generate_main(int argc, char **argv);
/* Models are found and loaded through ptrain/model_io.h (model_resolve, model_load). */

#endif
