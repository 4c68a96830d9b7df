/* bench_sgemm.c — OpenBLAS sgemm GFLOP/s on this machine (2048^3, best of 5): the ceiling the
 * training benchmark's achieved GFLOP/s is compared with. Usage: bench_sgemm [threads] */
#include <cblas.h>

#include "ptrain/blas_kernel.h"
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv)
{
    blas_kernel_setup(argv); /* the kernel ptrain would run, so the ceiling is ptrain's own */
    int n = 2048, threads = argc > 1 ? atoi(argv[1]) : 0;
    if (threads > 0) openblas_set_num_threads(threads);
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
    for (int i = 0; i < n * n; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (dt < best) best = dt;
    }
    char kernel[512];
    blas_kernel_describe(kernel, sizeof kernel);
    printf("{\"gflops\": %.1f, \"blas\": \"%s\"}\n", 2.0 * n * n * (double)n / best / 1e9, kernel);
    free(a);
    free(b);
    free(c);
    return 0;
}
