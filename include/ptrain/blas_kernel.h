/* blas_kernel.h — the GEMM kernel OpenBLAS runs, and making it the right one for this processor.
 *
 * Debian's OpenBLAS (DYNAMIC_ARCH) picks its kernels from a table of processors it knows; on one
 * newer than the library it falls back to generic SSE3 "Prescott" kernels, 3-5x slower than the
 * AVX2 or AVX-512 ones the processor can run. The choice is made when the library loads and can
 * only be changed by OPENBLAS_CORETYPE in the environment before that, so ptrain, first thing in
 * main (before MPI_Init), compares what OpenBLAS chose with what cpuid says the processor and the
 * OS support, and when the library under-uses it sets OPENBLAS_CORETYPE and execs itself again
 * (same pid, arguments and environment: mpirun and srun ranks are unaffected). A user's own
 * OPENBLAS_CORETYPE is never overridden. */
#ifndef PTRAIN_BLAS_KERNEL_H
#define PTRAIN_BLAS_KERNEL_H

#include <stdbool.h>
#include <stddef.h>

/* What cpuid says about the processor; the os_* fields: whether the OS saves that register state
 * (XGETBV), without which the instructions fault. */
typedef struct {
    char vendor[13]; /* "GenuineIntel", "AuthenticAMD", ... ("" off x86) */
    char brand[49];
    int family, model; /* display family and model */
    bool fma, avx2, avx512f, avx512bw, avx512dq, avx512vl, amx_tile, amx_bf16;
    bool os_avx, os_avx512, os_amx;
} pt_cpu;

void cpu_read(pt_cpu *cpu);
/* Parse a recorded processor, "vendor,family,model,flag flag ..." with the flags named as the
 * fields above (os_* included), for tests and PTRAIN_TEST_CPU. Returns false when malformed. */
bool cpu_parse(const char *text, pt_cpu *cpu);
/* The OpenBLAS core type to ask for on cpu when the library chose corename, or NULL to keep the
 * library's choice (already the best it has, or a kernel ptrain does not know). */
const char *blas_kernel_pick(const pt_cpu *cpu, const char *corename);

/* First thing in main: re-exec with OPENBLAS_CORETYPE set when blas_kernel_pick says so. Returns
 * only when no re-exec is needed or it failed (the reason is kept for blas_kernel_describe). */
void blas_kernel_setup(char **argv);
/* One line for the start-up summary: library, kernel in use, why, and the processor. */
void blas_kernel_describe(char *buf, size_t n);
/* sgemm GFLOP/s on this machine at the current thread count (best of a few 768^3 products, about
 * 0.1 s): the ceiling training is compared with. */
double blas_sgemm_rate(void);

#endif
