/* bench_template.c — rendering and tokenizing conversations as ptrain's dataset phase does it
 * (bench/run-template.sh): a chat template compiled once by the Jinja interpreter, every
 * conversation of a JSON Lines file ({"messages": [...]}, read and parsed before the clock starts)
 * rendered as apply_chat_template(..., tokenize=False) renders it and tokenized with special
 * tokens parsed, on `threads` OpenMP threads. Prints one JSON object: seconds, conversations,
 * tokens, and a checksum of the ids (the sum of id * (position + 1) mod 2^32 over each
 * conversation, summed) to compare with the peer's.
 * Usage: bench_template TEMPLATE.jinja TOKENIZER.json DATA.jsonl threads */
#include <jansson.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptrain/error.h"
#include "ptrain/tokenizer.h"
#include "ptrain/util.h"

typedef struct {
    chat_message *m;
    int n;
} conv;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: bench_template TEMPLATE.jinja TOKENIZER.json DATA.jsonl threads\n");
        return 2;
    }
    char *text = slurp(argv[1]);
    pt_tokenizer *tok = NULL;
    chat_tmpl *ct = NULL;
    if (!text || tokenizer_from_json(argv[2], &tok) != PT_OK || chat_tmpl_open("model", text, &ct) != PT_OK) {
        fprintf(stderr, "bench_template: %s\n", text ? err_message() : "cannot read the template");
        return 1;
    }
    FILE *f = fopen(argv[3], "r");
    if (!f) {
        perror(argv[3]);
        return 1;
    }
    size_t cap = 1024, n = 0;
    conv *convs = malloc(sizeof *convs * cap);
    json_t **rows = malloc(sizeof *rows * cap);
    char *line = NULL;
    size_t line_cap = 0;
    while (getline(&line, &line_cap, f) > 0) {
        if (n == cap) {
            cap *= 2;
            convs = realloc(convs, sizeof *convs * cap);
            rows = realloc(rows, sizeof *rows * cap);
        }
        json_t *row = json_loads(line, 0, NULL), *msgs = json_object_get(row, "messages");
        if (!json_is_array(msgs)) continue;
        conv *c = &convs[n];
        c->n = (int)json_array_size(msgs);
        c->m = calloc((size_t)c->n + 1, sizeof *c->m);
        for (int i = 0; i < c->n; i++) {
            json_t *m = json_array_get(msgs, (size_t)i);
            c->m[i].role = json_string_value(json_object_get(m, "role"));
            c->m[i].content = json_string_value(json_object_get(m, "content"));
            c->m[i].fields = m; /* reasoning_content and the like, as a dataset row passes them */
        }
        rows[n++] = row;
    }
    free(line);
    fclose(f);
    const char *eos = "<|im_end|>"; /* Qwen3's eos_token, as the peer passes it */
    int threads = atoi(argv[4]);
    long long tokens = 0;
    uint64_t checksum = 0;
    int failed = 0;
    double t0 = now();
#pragma omp parallel for num_threads(threads) schedule(dynamic, 64) reduction(+ : tokens, checksum, failed)
    for (size_t i = 0; i < n; i++) {
        strbuf out = {0};
        chat_args a = {.eos = eos};
        int32_t *ids = NULL;
        size_t k = 0;
        if (chat_tmpl_render(ct, &a, convs[i].m, convs[i].n, &out, NULL, NULL) != PT_OK ||
            tokenizer_encode(tok, sb_text(&out), out.len, true, &ids, &k) != PT_OK) {
            failed++;
        } else {
            uint32_t h = 0;
            for (size_t t = 0; t < k; t++) h += (uint32_t)ids[t] * (uint32_t)(t + 1);
            checksum += h;
            tokens += (long long)k;
        }
        free(ids);
        sb_free(&out);
    }
    double dt = now() - t0;
    if (failed) fprintf(stderr, "bench_template: %d conversations failed\n", failed);
    printf("{\"seconds\": %.3f, \"conversations\": %zu, \"tokens\": %lld, \"checksum\": %llu}\n", dt, n, tokens,
           (unsigned long long)checksum);
    for (size_t i = 0; i < n; i++) {
        free(convs[i].m);
        json_decref(rows[i]);
    }
    free(convs);
    free(rows);
    chat_tmpl_free(ct);
    tokenizer_free(tok);
    free(text);
    return failed ? 1 : 0;
}
