/* bench_ckpt.c — ptrain's side of the checkpoint benchmark: the time of ckpt_write (building the
 * HDF5 file, its Fletcher-32 checksums, the CRC-32 of the completion mark, the fsyncs and the
 * rename) for a LoRA r=16 checkpoint on all seven projections with AdamW's moments, shaped like
 * (a) SmolLM2-135M and (b) Gemma-2-2B. The layouts and arrays are synthetic (random values, no
 * model needed); the metadata is a plausible run's. Each case is written reps times into DIR
 * (the filesystem checkpoints go to), each time as a new file after a sync(), so earlier dirty
 * pages do not count. Prints one JSON object per case: size, median and fastest write.
 * Usage: bench_ckpt DIR [reps] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ptrain/adapter.h"
#include "ptrain/checkpoint.h"
#include "ptrain/model.h"

typedef struct {
    const char *name;
    int layers, dim, ffn, q_width, kv_width; /* q_width: heads x head size; kv_width: kv heads x head size */
} shape;

static const shape cases[] = {
    {"smollm2-135m", 30, 576, 1536, 9 * 64, 3 * 64},
    {"gemma-2-2b", 26, 2304, 9216, 8 * 256, 4 * 256},
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* r=16 adapters on q, k, v, o, gate, up, down of every layer: A [r, in], B [out, r]. */
static int make_layout(const shape *c, ckpt_layout *lay)
{
    const int w[7] = {W_Q, W_K, W_V, W_O, W_GATE, W_UP, W_DOWN};
    const int in[7] = {c->dim, c->dim, c->dim, c->q_width, c->dim, c->dim, c->ffn};
    const int out[7] = {c->q_width, c->kv_width, c->kv_width, c->dim, c->ffn, c->ffn, c->dim};
    *lay = (ckpt_layout){calloc((size_t)c->layers * 14, sizeof(ckpt_entry)), 0, 0};
    if (!lay->e) return -1;
    for (int l = 0; l < c->layers; l++)
        for (int p = 0; p < 7; p++)
            for (int ab = 0; ab < 2; ab++) {
                ckpt_entry *e = &lay->e[lay->n++];
                adapter_tensor_name(e->name, sizeof e->name, l, w[p], ab ? 'B' : 'A');
                e->rows = ab ? out[p] : 16, e->cols = ab ? 16 : in[p], e->offset = lay->total;
                lay->total += e->rows * e->cols;
            }
    return 0;
}

static float *random_floats(int64_t n, uint64_t seed)
{
    float *p = malloc(sizeof *p * (size_t)n);
    for (int64_t i = 0; p && i < n; i++) {
        seed = seed * 6364136223846793005u + 1442695040888963407u;
        p[i] = (float)((int64_t)(seed >> 40) - (1 << 23)) * 1e-9f;
    }
    return p;
}

static int make_state(const shape *c, const ckpt_layout *lay, ckpt_state *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->ptrain_version, sizeof s->ptrain_version, "bench");
    s->format_version = CKPT_VERSION, s->global_step = 50, s->total_steps = 1000, s->n_train = 20000;
    s->last_loss = 1.25, s->last_lr = 2e-4, s->seed = 3407, s->world_size = 8, s->per_device_batch = 4;
    s->accumulation = 4, s->max_steps = 1000, s->logging_steps = 10, s->learning_rate = 2e-4;
    s->num_train_epochs = 1, s->lora_r = 16, s->lora_layers = c->layers, s->lora_alpha = 32, s->lora_scale = 2;
    s->model_layers = c->layers, s->model_dim = c->dim, s->model_vocab = 49152;
    s->lr_scheduler_type = SCHED_LINEAR;
    snprintf(s->model_path, sizeof s->model_path, "models/%s", c->name);
    snprintf(s->model_arch, sizeof s->model_arch, "llama");
    snprintf(s->target_modules, sizeof s->target_modules, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj");
    s->config_text = calloc(1, 2049);
    if (s->config_text) memset(s->config_text, 'x', 2048);
    s->n_params = lay->total;
    s->params = random_floats(lay->total, 1);
    s->exp_avg = random_floats(lay->total, 2);
    s->exp_avg_sq = random_floats(lay->total, 3);
    return s->config_text && s->params && s->exp_avg && s->exp_avg_sq ? 0 : -1;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Write the case reps times; print its JSON line. */
static int run_case(const shape *c, const char *dir, int reps)
{
    ckpt_layout lay;
    ckpt_state s;
    char path[4096];
    double t[64];
    struct stat sb = {0};
    if (make_layout(c, &lay) || make_state(c, &lay, &s)) return fprintf(stderr, "bench_ckpt: out of memory\n"), 1;
    snprintf(path, sizeof path, "%s/checkpoint-50.h5", dir);
    for (int i = 0; i < reps; i++) {
        unlink(path);
        sync();
        double t0 = now();
        if (ckpt_write(path, &s, &lay) != PT_OK) return fprintf(stderr, "bench_ckpt: %s\n", err_message()), 1;
        t[i] = now() - t0;
    }
    stat(path, &sb);
    unlink(path);
    double fastest = t[0];
    for (int i = 1; i < reps; i++) fastest = t[i] < fastest ? t[i] : fastest;
    qsort(t, (size_t)reps, sizeof *t, by_value);
    printf("{\"case\": \"%s\", \"params\": %lld, \"tensors\": %d, \"bytes\": %lld, \"write_s\": %.4f, "
           "\"write_s_min\": %.4f, \"reps\": %d}\n", c->name, (long long)lay.total, 3 * lay.n, (long long)sb.st_size,
           t[reps / 2], fastest, reps);
    fflush(stdout);
    ckpt_state_free(&s);
    ckpt_layout_free(&lay);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return fprintf(stderr, "usage: %s DIR [reps]\n", argv[0]), 2;
    int reps = argc > 2 ? atoi(argv[2]) : 5;
    if (reps < 1 || reps > 64) return fprintf(stderr, "bench_ckpt: reps from 1 to 64\n"), 2;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        if (run_case(&cases[i], argv[1], reps)) return 1;
    return 0;
}
