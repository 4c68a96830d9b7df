/* score_cmd.h — `ptrain score`: a reward model's (method: reward's adapter) scores of preference
 * pairs, through the reward model's forward (src/cmd/score.c). */
#ifndef PTRAIN_SCORE_CMD_H
#define PTRAIN_SCORE_CMD_H

#include "ptrain/error.h"

/* argv[0] is "score"; returns the status to exit with (usage errors are PT_ERR_USAGE). */
pt_status score_main(int argc, char **argv);

#endif
