/* reward.h — GRPO's reward functions (`reward_funcs:`): built-in ones computed in C, and Python
 * `module:function` (or `path/file.py:function`) paths run by one long-lived Python worker that
 * ptrain starts (share/reward_worker.py: $PTRAIN_PYTHON, else python3) and talks to in JSON lines
 * over a socket pair; one worker per node, run by the node's first rank for all of its ranks (each
 * rank's batch still one call of each function). Built-ins:
 *   exact_answer[:COLUMN]  1 when the completion's answer (the text of its last <answer>...</answer>,
 *                          else the whole completion), trimmed, equals the row's COLUMN (default
 *                          "answer") as text, trimmed; else 0
 *   regex:PATTERN          1 when the POSIX extended regular expression matches somewhere in the
 *                          completion; else 0
 *   think_format           TRL's think_format_reward: 1 when the completion starts with <think>, has no
 *                          second <think> and has a </think>; else 0
 *   length                 1 - completion tokens / max_completion_length (shorter scores higher)
 * A function's values are per completion; NaN where a Python function returned None (TRL: no
 * reward). A Python function that raises, returns a non-number or the wrong count is an error
 * with its message, the function and the row. */
#ifndef PTRAIN_REWARD_H
#define PTRAIN_REWARD_H

#include <stdint.h>

#include "ptrain/dist.h"
#include "ptrain/error.h"
#include "ptrain/settings.h"

typedef struct reward_set reward_set;

/* What is scored: n completions, each with its row's prompt (the row's "prompt" value as JSON
 * text), its row's columns (the whole row as JSON text), its text and its token ids. */
typedef struct {
    int n;
    const char *const *prompt_json;
    const char *const *columns_json;
    const char *const *text;
    const int32_t *const *ids;
    const int32_t *len;
    long max_completion_length;
} reward_batch;

/* Check funcs and start the Python worker when one is a Python path (python: the interpreter;
 * NULL: $PTRAIN_PYTHON, else python3). A bad name, a bad pattern, a worker that does not start or
 * a function it cannot import is a user error saying so. d: the job; with several ranks on this
 * node only its first rank starts the worker and the others share it: reward_open and then every
 * reward_score are collective over the node (each rank calls them as often as the others; a batch
 * may be empty). d NULL: this process's own worker. */
pt_status reward_open(const pt_strlist *funcs, const char *python, const pt_dist *d, reward_set **out);
int reward_count(const reward_set *r);
/* The name TRL logs function f under (rewards/<name>/mean): the built-in's name, or the Python
 * function's __name__. */
const char *reward_name(const reward_set *r, int f);
/* Every function on b: per_func[f * b->n + i]. */
pt_status reward_score(reward_set *r, const reward_batch *b, double *per_func);
/* Stop the worker and free r (NULL: nothing). */
void reward_close(reward_set *r);

#endif
