/* inspect.h — `ptrain inspect MODEL`: what a model is (architecture, sizes, tensor types,
 * tokenizer, chat template) and the memory it needs per rank, read from its files without loading
 * the weights. */
#ifndef PTRAIN_INSPECT_H
#define PTRAIN_INSPECT_H

#include "ptrain/error.h"

/* argv[0] is "inspect"; returns the status to exit with (usage errors are PT_ERR_USAGE). */
pt_status inspect_main(int argc, char **argv);

#endif
