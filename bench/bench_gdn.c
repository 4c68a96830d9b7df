/* bench_gdn.c — CPU time per token of one Gated DeltaNet layer's delta rule, forward + backward, the recurrent ops
 * (delta_rule, delta_rule_bwd) against the chunked ones (delta_chunk, delta_chunk_bwd) in the same run, at given
 * sequence lengths. Usage: bench_gdn [k_heads v_heads k_dim v_dim [seq ...]] (default 16 32 128 128, 512 2048: the
 * linear-attention shape of transformers' Qwen3_5TextConfig defaults). Prints one JSON line per length; each timing
 * the best of 3. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ptrain/backend.h"
#include "ptrain/blas_kernel.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static pt_tensor make(pt_backend *be, int64_t rows, int64_t cols, float lo, float hi, unsigned *seed)
{
    int64_t shape[2] = {rows, cols};
    pt_tensor t = tensor_make(PT_F32, 2, shape);
    if (backend_alloc(be, &t) != PT_OK) exit(1);
    float *v = t.data;
    for (int64_t i = 0; i < rows * cols; i++) v[i] = lo + (hi - lo) * (float)rand_r(seed) / (float)RAND_MAX;
    return t;
}

/* seconds of the forward + backward (best of 3) */
static double run(pt_backend *be, const pt_delta *d, bool chunked, pt_tensor *t)
{
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t0 = now();
        pt_status s = chunked ? backend_delta_chunk(be, &t[1], &t[0], &t[2], &t[3], NULL, d)
                              : backend_delta_rule(be, &t[1], &t[0], &t[2], &t[3], NULL, d);
        if (s == PT_OK)
            s = chunked ? backend_delta_chunk_bwd(be, &t[4], &t[5], &t[6], &t[7], &t[0], &t[2], &t[3], d)
                        : backend_delta_rule_bwd(be, &t[4], &t[5], &t[6], &t[7], &t[0], &t[2], &t[3], d);
        if (s != PT_OK) exit(1);
        double dt = now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

int main(int argc, char **argv)
{
    blas_kernel_setup(argv);
    int nk = argc > 4 ? atoi(argv[1]) : 16, nv = argc > 4 ? atoi(argv[2]) : 32;
    int dk = argc > 4 ? atoi(argv[3]) : 128, dv = argc > 4 ? atoi(argv[4]) : 128;
    int seqs[16] = {512, 2048}, n_seq = 2;
    if (argc > 5) n_seq = 0;
    for (int i = 5; i < argc && n_seq < 16; i++) seqs[n_seq++] = atoi(argv[i]);
    pt_backend *be = NULL;
    pt_backend_options opts = {.device = DEVICE_CPU};
    if (backend_open(&opts, &be) != PT_OK) return 1;
    for (int i = 0; i < n_seq; i++) {
        pt_delta d = {.batch = 1, .seq = seqs[i], .k_heads = nk, .v_heads = nv, .k_dim = dk, .v_dim = dv, .conv = 4};
        int64_t rows = seqs[i], width = 2 * (int64_t)nk * dk + (int64_t)nv * dv, ow = (int64_t)nv * dv;
        unsigned seed = 7;
        pt_tensor t[8] = {make(be, rows, width, -1, 1, &seed), make(be, rows, ow, 0, 0, &seed),
                          make(be, rows, nv, 0.05f, 0.95f, &seed), make(be, rows, nv, -1.5f, -0.01f, &seed),
                          make(be, rows, width, 0, 0, &seed), make(be, rows, nv, 0, 0, &seed),
                          make(be, rows, nv, 0, 0, &seed), make(be, rows, ow, -1, 1, &seed)};
        double rec = run(be, &d, false, t), chk = run(be, &d, true, t);
        printf("{\"seq\": %d, \"heads\": \"%d/%d of %d/%d\", \"recurrent_us_per_token\": %.1f, "
               "\"chunked_us_per_token\": %.1f, \"speedup\": %.2f}\n",
               seqs[i], nk, nv, dk, dv, rec / rows * 1e6, chk / rows * 1e6, rec / chk);
        for (int k = 0; k < 8; k++) backend_release(be, &t[k]);
    }
    backend_close(be);
    return 0;
}
