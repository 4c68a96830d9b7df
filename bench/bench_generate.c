/* bench_generate.c — ptrain's side of bench/run-generate.sh: GRPO's generation of one group, the
 * way grpo_step.c makes it: one prompt run once for the group's KV cache (forward_tokens_shared),
 * then `group` rows decoded in step (forward_tokens_batch), each row sampled at temperature 1, top_p 1 (GRPO's
 * defaults) for exactly `new` tokens (no end of turn, as the peer runs with min_new_tokens). The
 * prompt is the peer's (token i: (i x 7919) mod vocab). Times the whole group, prefill included,
 * best of `reps`, wall clock and the process's CPU time (on a shared machine the CPU time moves
 * less); prints one JSON object. Usage: bench_generate MODEL.gguf threads group prompt new reps */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ptrain/forward.h"
#include "ptrain/model.h"
#include "ptrain/sample.h"

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* seconds to generate `new` tokens for each of `group` rows after the prompt; < 0 on error */
static double group_time(pt_model *m, int group, int prompt, int new, uint64_t seed, double *cpu)
{
    int vocab = m->cfg.vocab;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(prompt * group));
    float *logits = malloc(sizeof(float) * (size_t)vocab * (size_t)group);
    sampler *s = calloc((size_t)group, sizeof *s);
    pt_kv_cache kv = {0};
    double t = -1;
    if (!ids || !logits || !s) goto out;
    for (int i = 0; i < prompt * group; i++) ids[i] = (int32_t)(((i % prompt) * 7919) % vocab);
    for (int k = 0; k < group; k++) s[k] = (sampler){.temperature = 1.0f, .top_p = 1.0f, .state = seed + (uint64_t)k};
    double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    if (kv_cache_init_batch(m, group, prompt + new, &kv) != PT_OK) goto out;
    if (forward_tokens_shared(m, NULL, &kv, ids, prompt, logits) != PT_OK) goto out;
    for (int made = 0; made < new; made++) {
        for (int k = 0; k < group; k++) ids[k] = sample_next(&s[k], logits + (size_t)k * (size_t)vocab, vocab);
        if (made + 1 < new && forward_tokens_batch(m, NULL, &kv, ids, 1, logits) != PT_OK) goto out;
    }
    t = clock_s(CLOCK_MONOTONIC) - t0, *cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
out:
    if (kv.k) kv_cache_free(m, &kv);
    free(ids), free(logits), free(s);
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: %s MODEL.gguf threads group prompt new reps\n", argv[0]);
        return 2;
    }
    int threads = atoi(argv[2]), group = atoi(argv[3]), prompt = atoi(argv[4]), new = atoi(argv[5]), reps = atoi(argv[6]);
    gguf_file f;
    pt_backend *be = NULL;
    pt_model m;
    pt_backend_options opts = {.device = DEVICE_CPU, .threads = threads};
    if (gguf_open(argv[1], &f) || backend_open(&opts, &be) || model_from_gguf(&f, be, NULL, &m)) {
        fprintf(stderr, "bench_generate: %s\n", err_message());
        return 1;
    }
    gguf_close(&f);
    double best = 1e30, best_cpu = 1e30, cpu = 0;
    for (int r = 0; r < reps; r++) {
        double t = group_time(&m, group, prompt, new, 1234 + 100 * (uint64_t)r, &cpu);
        if (t < 0) {
            fprintf(stderr, "bench_generate: %s\n", err_message());
            return 1;
        }
        if (t < best) best = t;
        if (cpu < best_cpu) best_cpu = cpu;
    }
    printf("{\"peer\": \"ptrain\", \"seconds\": %.4f, \"tok_s\": %.2f, \"cpu_seconds\": %.4f}\n", best,
           (double)group * new / best, best_cpu);
    model_free(&m);
    backend_close(be);
    return 0;
}
