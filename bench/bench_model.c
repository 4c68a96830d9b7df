/* bench_model.c — ptrain's side of the model benchmark: load time and resident memory of a GGUF
 * model, forward (prefill) tokens/s at two prompt lengths, and generation tokens/s with the KV
 * cache, one sequence and GRPO's group of 8 decoded in step (forward_tokens_batch, sampled at
 * temperature 1 as GRPO samples). Prints one JSON object so bench/run-model.sh can set it beside the peer's numbers.
 * Usage: bench_model MODEL.gguf [threads] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptrain/forward.h"
#include "ptrain/model.h"
#include "ptrain/sample.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) kb = atol(line + strlen(field) + 1);
    if (f) fclose(f);
    return kb;
}

/* tokens/s of one forward over n tokens (best of reps) */
static double prefill_rate(pt_model *m, int n, int reps)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    float *logits = malloc(sizeof(float) * (size_t)m->cfg.vocab);
    for (int i = 0; i < n; i++) ids[i] = (int32_t)((i * 7919) % m->cfg.vocab);
    pt_kv_cache kv;
    double best = 1e30;
    if (kv_cache_init(m, n, &kv) != PT_OK) return 0;
    for (int r = 0; r < reps; r++) {
        kv.n_past = 0;
        double t0 = now();
        if (forward_tokens(m, NULL, &kv, ids, n, logits, true) != PT_OK) return 0;
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    kv_cache_free(m, &kv);
    free(ids);
    free(logits);
    return n / best;
}

static double decode_rate(pt_model *m, int prompt, int steps)
{
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)prompt);
    float *logits = malloc(sizeof(float) * (size_t)m->cfg.vocab);
    for (int i = 0; i < prompt; i++) ids[i] = (int32_t)((i * 7919) % m->cfg.vocab);
    pt_kv_cache kv;
    if (kv_cache_init(m, prompt + steps, &kv) != PT_OK) return 0;
    if (forward_tokens(m, NULL, &kv, ids, prompt, logits, true) != PT_OK) return 0;
    double t0 = now();
    for (int s = 0; s < steps; s++) {
        int32_t next = (int32_t)((s * 31) % m->cfg.vocab);
        if (forward_tokens(m, NULL, &kv, &next, 1, logits, true) != PT_OK) return 0;
    }
    double rate = steps / (now() - t0);
    kv_cache_free(m, &kv);
    free(ids);
    free(logits);
    return rate;
}

/* generated tokens/s of `batch` sequences decoded in step after one prompt, sampled (GRPO's group) */
static double group_rate(pt_model *m, int batch, int prompt, int steps)
{
    int vocab = m->cfg.vocab;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)(prompt * batch));
    float *logits = malloc(sizeof(float) * (size_t)vocab * (size_t)batch);
    for (int i = 0; i < prompt * batch; i++) ids[i] = (int32_t)(((i % prompt) * 7919) % vocab);
    pt_kv_cache kv;
    if (kv_cache_init_batch(m, batch, prompt + steps, &kv) != PT_OK) return 0;
    if (forward_tokens_batch(m, NULL, &kv, ids, prompt, logits) != PT_OK) return 0;
    double t0 = now();
    for (int s = 0; s < steps; s++) {
        for (int b = 0; b < batch; b++) {
            sampler sm = {.temperature = 1.0f, .top_p = 1.0f, .state = (uint64_t)(s * batch + b)};
            ids[b] = sample_next(&sm, logits + (size_t)b * (size_t)vocab, vocab);
        }
        if (forward_tokens_batch(m, NULL, &kv, ids, 1, logits) != PT_OK) return 0;
    }
    double rate = (double)steps * batch / (now() - t0);
    kv_cache_free(m, &kv);
    free(ids);
    free(logits);
    return rate;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODEL.gguf [threads]\n", argv[0]);
        return 2;
    }
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    double t0 = now();
    gguf_file f;
    pt_backend *be = NULL;
    pt_model m;
    pt_backend_options opts = {.device = DEVICE_CPU, .threads = threads};
    if (gguf_open(argv[1], &f) || backend_open(&opts, &be) || model_from_gguf(&f, be, NULL, &m)) {
        fprintf(stderr, "bench_model: %s\n", err_message());
        return 1;
    }
    gguf_close(&f);
    double load_s = now() - t0;
    long rss_kb = status_kb("VmRSS:");
    double p128 = prefill_rate(&m, 128, 3), p512 = prefill_rate(&m, 512, 2), gen = decode_rate(&m, 32, 64);
    double group = group_rate(&m, 8, 32, 32);
    printf("{\"peer\": \"ptrain\", \"load_s\": %.3f, \"rss_after_load_mb\": %.1f, \"peak_rss_mb\": %.1f, "
           "\"weights_mb\": %.1f, \"prefill128_tok_s\": %.1f, \"prefill512_tok_s\": %.1f, \"generate_tok_s\": %.2f, "
           "\"generate8_tok_s\": %.2f}\n",
           load_s, rss_kb / 1024.0, status_kb("VmHWM:") / 1024.0, m.weight_bytes / 1048576.0, p128, p512, gen, group);
    model_free(&m);
    backend_close(be);
    return 0;
}
