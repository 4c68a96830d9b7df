/* tokenize_cmd.h — `ptrain tokenize`: the token ids (or pieces) of a text as the model's tokenizer
 * gives them, through the code training uses (src/cmd/tokenize.c). */
#ifndef PTRAIN_TOKENIZE_CMD_H
#define PTRAIN_TOKENIZE_CMD_H

#include "ptrain/error.h"

/* argv[0] is "tokenize"; returns the status to exit with (usage errors are PT_ERR_USAGE). */
pt_status tokenize_main(int argc, char **argv);

#endif
