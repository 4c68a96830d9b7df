/* fuzz-sources: src/template/jvalue.c src/template/jjson.c src/template/jlex.c src/template/jparse.c src/template/jobject.c src/template/jfilter.c src/template/jeval.c src/template/jinja.c src/template/jchat.c src/core/util.c src/core/error.c src/core/shown.c */
/* fuzz_jinja.c — libFuzzer target for the chat-template interpreter (src/template): the input is
 * a template, compiled and, when it compiles, rendered with a conversation (system, user,
 * assistant with reasoning and a tool call, tool result), tools and the usual special tokens, under
 * small limits (100000 steps, 1 MB of output, 64 MB of values, 32 nested calls) so that no input
 * hangs or grows without bound. Failing is fine; crashing, leaking or running away is not. Seed
 * corpus: tests/fuzz/corpus/jinja/ (real chat templates). Built and run by tests/fuzz/run-fuzz.sh. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "ptrain/jinja.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char vars_json[] =
    "{\"messages\": [{\"role\": \"system\", \"content\": \"Be brief.\"}, {\"role\": \"user\", \"content\": \"Hi "
    "\\u00e9 <x>\"}, {\"role\": \"assistant\", \"content\": \"\", \"reasoning_content\": \"think\", \"tool_calls\": "
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"arguments\": {\"a\": 1}}}]}, {\"role\": \"tool\", "
    "\"content\": \"42\"}, {\"role\": \"assistant\", \"content\": \"Done.\"}], \"tools\": [{\"type\": \"function\", "
    "\"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\"}}}], \"add_generation_prompt\": true, "
    "\"bos_token\": \"<s>\", \"eos_token\": \"</s>\", \"enable_thinking\": false}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static json_t *vars;
    if (!vars) vars = json_loads(vars_json, 0, NULL);
    if (!vars) abort();
    jinja_template *t;
    if (jinja_compile((const char *)data, size, &t) != PT_OK) return 0;
    jinja_opts o = {.max_steps = 100000, .max_depth = 32, .max_output = 1u << 20, .max_memory = 64u << 20,
                    .fixed_time = true, .now = 1700000000};
    strbuf out = {0};
    size_t *spans = NULL;
    int n_spans = 0;
    (void)jinja_render(t, vars, &o, &out, &spans, &n_spans);
    free(spans);
    sb_free(&out);
    jinja_free(t);
    return 0;
}
