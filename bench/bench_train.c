/* bench_train.c — ptrain's side of the training benchmark: LoRA r=16 on all seven projections of
 * a model (a GGUF file, or a Hugging Face directory quantized to NF4 on load, as a config's defaults do),
 * batch 4 x seq 512 of fixed pseudo-random tokens, forward + backward + AdamW per
 * step (gradient checkpointing as given), timed over a few steps after one warm-up. Prints one
 * JSON object: tokens/s, peak RSS (and its value after loading the model), and achieved GFLOP/s (6N per token: forward, input gradients,
 * recomputation; N = parameters of the projections and the lm_head).
 * The batch shape can be given (the sequence-length sweep keeps batch x seq fixed). Also prints
 * the OpenBLAS kernel in use (src/runtime/blas_kernel.c, which re-executes onto the right one first).
 * A mixture of experts (run-moe.sh) gets LoRA on the attention's four projections and on its experts (PEFT's
 * target_parameters: gate_up_proj, down_proj), its N the active parameters (k experts a token). 
 * keep: with checkpointing, the last keep layers keep their activations (gradient_checkpointing_keep_layers).
 * Usage: bench_train MODEL [threads] [steps] [checkpointing 0/1] [batch 4] [seq 512] [keep 0] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptrain/blas_kernel.h"
#include "ptrain/model_io.h"
#include "ptrain/optimizer.h"
#include "ptrain/step.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A mixture of experts: the attention and the experts (target_parameters), the MLP names being no projections
 * there (lora_init refuses them). Never fails: returns 0 so that it chains in main's condition. */
static int lora_targets(const pt_model *m, bool *all)
{
    if (m->cfg.n_experts <= 0) return 0;
    all[W_GATE] = all[W_UP] = all[W_DOWN] = false;
    all[W_EXP_GATE_UP] = all[W_EXP_DOWN] = true;
    return 0;
}

static long peak_rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atol(line + 6);
    if (f) fclose(f);
    return kb;
}

int main(int argc, char **argv)
{
    blas_kernel_setup(argv);
    if (argc < 2) return fprintf(stderr, "usage: %s MODEL [threads] [steps] [ckpt] [batch] [seq]\n", argv[0]), 2;
    int threads = argc > 2 ? atoi(argv[2]) : 0, steps = argc > 3 ? atoi(argv[3]) : 3;
    bool ckpt = argc > 4 ? atoi(argv[4]) != 0 : true;
    int B = argc > 5 ? atoi(argv[5]) : 4, T = argc > 6 ? atoi(argv[6]) : 512, keep = argc > 7 ? atoi(argv[7]) : 0;
    if (B < 1 || T < 2 || steps < 1) return fprintf(stderr, "bench_train: bad batch, seq or steps\n"), 2;
    pt_backend *be = NULL;
    pt_model m;
    pt_lora l;
    pt_backend_options bo = {.device = DEVICE_CPU, .threads = threads};
    bool all[W_COUNT] = {0};
    for (int w = W_Q; w <= W_DOWN; w++) all[w] = w != W_FFN_NORM;
    if (backend_open(&bo, &be) || model_load(argv[1], NULL, NULL, be, &m, NULL, NULL, 0) ||
        lora_targets(&m, all) || lora_create(&l, &m, 16, 32.0f, false, all, 3407)) {
        fprintf(stderr, "bench_train: %s\n", err_message());
        return 1;
    }
    double load_peak_mb = peak_rss_kb() / 1024.0; /* the high-water mark of loading (and quantizing) the model */
    int32_t *ids = malloc(sizeof(int32_t) * 3 * (size_t)B * T), *targets = ids + B * T, *pos = targets + B * T;
    if (!ids) return fprintf(stderr, "bench_train: out of memory\n"), 1;
    for (int i = 0; i < B * T; i++) {
        ids[i] = (int32_t)((i * 7919u + 13) % (unsigned)m.cfg.vocab);
        pos[i] = i % T;
    }
    for (int i = 0; i < B * T; i++) targets[i] = i % T == T - 1 ? -100 : ids[i + 1];
    train_batch b = {B, T, ids, targets, pos, NULL};
    step_options so = {.checkpointing = ckpt, .keep_layers = keep};
    adamw_options ao = {0.9, 0.999, 1e-8, 0.01, 1.0};
    double t0 = 0, loss = 0;
    for (int s = 0; s <= steps; s++) {
        if (s == 1) t0 = now(); /* step 0 warms up */
        double sum = 0, norm;
        int64_t n = 0;
        if (lora_zero_grads(&l) || step_run(&m, &l, &b, &so, 1.0f / (B * (T - 1)), &sum, &n) ||
            optimizer_grad_norm(&l, &norm) || optimizer_step(&l, &ao, norm, 1e-4, s + 1)) {
            fprintf(stderr, "bench_train: %s\n", err_message());
            return 1;
        }
        loss = sum / (double)n;
    }
    double dt = (now() - t0) / steps, tok_s = B * T / dt;
    double n_params = 0;
    for (int i = 0; i < m.cfg.n_layers; i++)
        for (int w = W_Q; w <= W_DOWN; w++)
            if (w != W_FFN_NORM) n_params += (double)tensor_numel(&m.layers[i].w[w]);
    n_params += (double)m.cfg.vocab * m.cfg.dim;
    for (int i = 0; i < m.cfg.n_layers; i++) /* the experts a token runs through */
        if (model_layer_moe(&m.cfg, i)) n_params += 3.0 * m.cfg.n_experts_used * m.cfg.moe_ffn_dim * m.cfg.dim;
    char kernel[512];
    blas_kernel_describe(kernel, sizeof kernel);
    printf("{\"peer\": \"ptrain\", \"tokens_per_s\": %.1f, \"step_s\": %.3f, \"peak_rss_mb\": %.1f, "
           "\"load_peak_rss_mb\": %.1f, \"gflops\": %.1f, \"loss\": %.4f, \"checkpointing\": %s, \"keep_layers\": %d, \"batch\": %d, \"seq\": %d, \"blas\": \"%s\"}\n",
           tok_s, dt, peak_rss_kb() / 1024.0, load_peak_mb, (ckpt ? 8.0 : 6.0) * n_params * tok_s / 1e9, loss, ckpt ? "true" : "false",
           keep, B, T, kernel);
    free(ids);
    lora_free(&l);
    model_free(&m);
    backend_close(be);
    return 0;
}
