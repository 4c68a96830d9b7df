/* jinja.h — a Jinja interpreter for chat templates (src/template), rendering what transformers'
 * apply_chat_template renders: Jinja2's ImmutableSandboxedEnvironment with trim_blocks and
 * lstrip_blocks, the loopcontrols extension, transformers' tojson (ensure_ascii=False, indent,
 * separators, sort_keys), raise_exception, strftime_now, namespace, dict, and its {% generation %}
 * blocks (the assistant spans of return_assistant_tokens_mask). docs/models.md lists what it
 * supports. Every error names the template's line and column; raise_exception gives its message.
 * Bounded: a template over JINJA_MAX_SOURCE bytes is refused, and a render stops with an error past
 * its limits on loop iterations and calls, macro nesting, output bytes and memory. */
#ifndef PTRAIN_JINJA_H
#define PTRAIN_JINJA_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "ptrain/error.h"
#include "ptrain/util.h"

#define JINJA_MAX_SOURCE (1u << 20)       /* bytes of template text */
#define JINJA_MAX_STEPS 500000L           /* loop iterations plus macro calls, per render */
#define JINJA_MAX_DEPTH 64                /* macro calls and recursive loops nested */
#define JINJA_MAX_OUTPUT (16u << 20)      /* bytes rendered */
#define JINJA_MAX_MEMORY (256u << 20)     /* bytes of values */

typedef struct jinja_template jinja_template;
struct json_t;

typedef struct {
    long max_steps;      /* 0: JINJA_MAX_STEPS */
    int max_depth;       /* 0: JINJA_MAX_DEPTH */
    size_t max_output;   /* 0: JINJA_MAX_OUTPUT */
    size_t max_memory;   /* 0: JINJA_MAX_MEMORY */
    bool fixed_time;     /* strftime_now renders `now` (else the clock, or SOURCE_DATE_EPOCH when set) */
    time_t now;
} jinja_opts;

/* Parse a template (len bytes of src). *out is freed with jinja_free. A syntax error fails with
 * PT_ERR_USER and "line L col C: ..." (the caller says which template). */
pt_status jinja_compile(const char *src, size_t len, jinja_template **out);
void jinja_free(jinja_template *t);
/* Whether the template has {% generation %} blocks. */
bool jinja_has_generation(const jinja_template *t);
/* Render with the variables of vars (a JSON object: messages, tools, add_generation_prompt,
 * bos_token, ...), appending to out. opts may be NULL (the defaults). With spans non-NULL,
 * *spans gets the byte spans of out the {% generation %} blocks wrote (start, end pairs, offsets
 * from where out began; malloc'd) and *n_spans their count. Errors fail with PT_ERR_USER. */
pt_status jinja_render(const jinja_template *t, const struct json_t *vars, const jinja_opts *opts, strbuf *out,
                       size_t **spans, int *n_spans);

/* The variables apply_chat_template gives a template (a new JSON object, json_decref'd by the
 * caller): messages (null fields dropped, reasoning aliased as "thinking" and
 * "reasoning_content"), tools and documents (null when NULL), add_generation_prompt, then each
 * key of extra (special tokens such as bos_token, keyword arguments such as enable_thinking). */
struct json_t *jinja_chat_vars(const struct json_t *messages, const struct json_t *tools,
                               const struct json_t *documents, bool add_generation_prompt,
                               const struct json_t *extra);

#endif
