/* blas_kernel.c — make OpenBLAS run the best GEMM kernel this processor has (see blas_kernel.h
 * for why a re-exec). The decision (blas_kernel_pick) is a pure function of the processor and the
 * library's choice, tested on recorded pairs (tests/unit/test_blas_kernel.c). */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ptrain/blas_kernel.h"

#include <cblas.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define PT_X86 1
#endif

/* Environment: set by ptrain on the re-exec to the core name OpenBLAS had chosen (so the second
 * process knows OPENBLAS_CORETYPE is ptrain's, not the user's, and never execs again). Test hooks:
 * PTRAIN_TEST_CPU (a recorded processor, cpu_parse's format) and PTRAIN_TEST_BLAS_CORENAME (the
 * library's choice to pretend). */
#define ENV_REEXEC "PTRAIN_BLAS_REEXEC"

static char exec_failure[160]; /* why a wanted re-exec did not happen */

void cpu_read(pt_cpu *cpu)
{
    memset(cpu, 0, sizeof *cpu);
#ifdef PT_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d)) return;
    unsigned max_leaf = a;
    memcpy(cpu->vendor, &b, 4), memcpy(cpu->vendor + 4, &d, 4), memcpy(cpu->vendor + 8, &c, 4);
    __get_cpuid(1, &a, &b, &c, &d);
    unsigned fam = (a >> 8) & 0xf, model = (a >> 4) & 0xf;
    cpu->family = (int)(fam == 0xf ? fam + ((a >> 20) & 0xff) : fam);
    cpu->model = (int)(fam == 6 || fam == 0xf ? model + (((a >> 16) & 0xf) << 4) : model);
    cpu->fma = c & (1u << 12);
    bool osxsave = c & (1u << 27), avx = c & (1u << 28);
    if (osxsave && avx) {
        unsigned lo, hi;
        __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
        uint64_t xcr0 = ((uint64_t)hi << 32) | lo;
        cpu->os_avx = (xcr0 & 0x6) == 0x6;
        cpu->os_avx512 = cpu->os_avx && (xcr0 & 0xe0) == 0xe0;
        cpu->os_amx = (xcr0 & 0x60000) == 0x60000;
    }
    if (max_leaf >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        cpu->avx2 = b & (1u << 5);
        cpu->avx512f = b & (1u << 16), cpu->avx512dq = b & (1u << 17);
        cpu->avx512bw = b & (1u << 30), cpu->avx512vl = b & (1u << 31);
        cpu->amx_bf16 = d & (1u << 22), cpu->amx_tile = d & (1u << 24);
    }
    if (__get_cpuid(0x80000000, &a, &b, &c, &d) && a >= 0x80000004) {
        unsigned *w = (unsigned *)(void *)cpu->brand;
        for (unsigned leaf = 0; leaf < 3; leaf++) __get_cpuid(0x80000002 + leaf, &w[4 * leaf], &w[4 * leaf + 1],
                                                              &w[4 * leaf + 2], &w[4 * leaf + 3]);
        cpu->brand[48] = 0;
    }
#endif
}

typedef struct {
    const char *name;
    size_t offset;
} cpu_flag;

#define FLAG(f) {#f, offsetof(pt_cpu, f)}
static const cpu_flag cpu_flags[] = {FLAG(fma),      FLAG(avx2),     FLAG(avx512f),  FLAG(avx512bw),
                                     FLAG(avx512dq), FLAG(avx512vl), FLAG(amx_tile), FLAG(amx_bf16),
                                     FLAG(os_avx),   FLAG(os_avx512), FLAG(os_amx)};
#undef FLAG

bool cpu_parse(const char *text, pt_cpu *cpu)
{
    memset(cpu, 0, sizeof *cpu);
    char flags[512];
    if (sscanf(text, "%12[^,],%d,%d,%511[^\n]", cpu->vendor, &cpu->family, &cpu->model, flags) < 3) return false;
    if (sscanf(text, "%*[^,],%*d,%*d,%511[^\n]", flags) != 1) flags[0] = 0;
    for (char *save = NULL, *f = strtok_r(flags, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
        size_t i = 0, n = sizeof cpu_flags / sizeof cpu_flags[0];
        while (i < n && strcmp(cpu_flags[i].name, f)) i++;
        if (i == n) return false;
        *(bool *)((char *)cpu + cpu_flags[i].offset) = true;
    }
    return true;
}

/* OpenBLAS's x86 core names by the widest vectors their sgemm kernels use: 0 SSE, 1 AVX, 2 AVX2 +
 * FMA, 3 AVX-512; -1: a name ptrain does not know (a newer library: trust it). */
static int kernel_tier(const char *corename)
{
    static const char *const tiers[][12] = {
        {"Unknown", "Katmai", "Coppermine", "Northwood", "Prescott", "Banias", "Atom", "Core2", "Penryn", "Dunnington",
         "Nehalem", NULL},
        {"Athlon", "Opteron", "Opteron_SSE3", "Barcelona", "Nano", "Bobcat", NULL},
        {"Sandybridge", "Bulldozer", "Piledriver", "Steamroller", "Excavator", NULL},
        {"Haswell", "Zen", NULL},
        {"SkylakeX", "Cooperlake", "SapphireRapids", NULL},
    };
    static const int tier_of_row[] = {0, 0, 1, 2, 3};
    for (size_t r = 0; r < sizeof tiers / sizeof tiers[0]; r++)
        for (int i = 0; tiers[r][i]; i++)
            if (!strcasecmp(tiers[r][i], corename)) return tier_of_row[r];
    return -1;
}

const char *blas_kernel_pick(const pt_cpu *cpu, const char *corename)
{
    const char *best = NULL;
    int best_tier = -1;
    if (cpu->avx512f && cpu->avx512bw && cpu->avx512dq && cpu->avx512vl && cpu->os_avx512)
        best = "SkylakeX", best_tier = 3;
    else if (cpu->avx2 && cpu->fma && cpu->os_avx)
        best = !strcmp(cpu->vendor, "AuthenticAMD") || !strcmp(cpu->vendor, "HygonGenuine") ? "Zen" : "Haswell",
        best_tier = 2;
    if (!best || !corename) return NULL;
    int have = kernel_tier(corename);
    return have >= 0 && have < best_tier ? best : NULL;
}

static void read_cpu(pt_cpu *cpu)
{
    const char *rec = getenv("PTRAIN_TEST_CPU");
    if (!rec || !cpu_parse(rec, cpu)) cpu_read(cpu);
}

static const char *library_corename(void)
{
    const char *fake = getenv("PTRAIN_TEST_BLAS_CORENAME");
    return fake && *fake ? fake : openblas_get_corename();
}

void blas_kernel_setup(char **argv)
{
    const char *user = getenv("OPENBLAS_CORETYPE");
    if ((user && *user) || getenv(ENV_REEXEC)) return; /* the user's setting, or we already did it */
    pt_cpu cpu;
    read_cpu(&cpu);
    const char *chose = library_corename(), *pick = blas_kernel_pick(&cpu, chose);
    if (!pick) return;
    if (setenv(ENV_REEXEC, chose, 1) != 0 || setenv("OPENBLAS_CORETYPE", pick, 1) != 0) {
        snprintf(exec_failure, sizeof exec_failure, "the environment could not be set");
        return;
    }
    fflush(NULL);
    execv("/proc/self/exe", argv);
    snprintf(exec_failure, sizeof exec_failure, "re-exec of /proc/self/exe failed: %s", strerror(errno));
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv(ENV_REEXEC);
}

static void describe_cpu(const pt_cpu *cpu, char *buf, size_t n)
{
    const char *brand = cpu->brand;
    while (*brand == ' ') brand++;
    snprintf(buf, n, "%s (%s family %d model %d;%s%s%s%s)", *brand ? brand : "unknown processor",
             *cpu->vendor ? cpu->vendor : "non-x86", cpu->family, cpu->model, cpu->avx2 ? " avx2" : "",
             cpu->fma ? " fma" : "", cpu->avx512f && cpu->os_avx512 ? " avx512" : "",
             cpu->amx_tile && cpu->os_amx ? " amx" : "");
}

void blas_kernel_describe(char *buf, size_t n)
{
    char lib[64], ver[32] = "", why[200], proc[200];
    if (sscanf(openblas_get_config(), "OpenBLAS %31s", ver) != 1) ver[0] = 0;
    snprintf(lib, sizeof lib, "OpenBLAS%s%s", *ver ? " " : "", ver);
    pt_cpu cpu;
    read_cpu(&cpu);
    const char *now = openblas_get_corename(), *before = getenv(ENV_REEXEC), *want = getenv("OPENBLAS_CORETYPE");
    if (before && want)
        snprintf(why, sizeof why, "%s: OpenBLAS chose %s for this processor; ptrain set OPENBLAS_CORETYPE=%s",
                 strcasecmp(now, want) ? "NOT switched" : "switched", before, want);
    else if (want && *want)
        snprintf(why, sizeof why, "OPENBLAS_CORETYPE=%s, your setting", want);
    else if (*exec_failure)
        snprintf(why, sizeof why, "slow: %s; set OPENBLAS_CORETYPE=%s", exec_failure,
                 blas_kernel_pick(&cpu, now) ? blas_kernel_pick(&cpu, now) : "?");
    else
        snprintf(why, sizeof why, "the library's choice, the best it has here");
    describe_cpu(&cpu, proc, sizeof proc);
    snprintf(buf, n, "%s, %s kernels (%s), %s", lib, now, why, proc);
}

double blas_sgemm_rate(void)
{
    enum { N = 768 };
    float *a = malloc(sizeof(float) * N * N * 3);
    if (!a) return 0;
    float *b = a + N * N, *c = b + N * N;
    for (int i = 0; i < N * N; i++) a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
    double best = 1e30;
    for (int r = 0; r < 4; r++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, N, 1.0f, a, N, b, N, 0.0f, c, N);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double dt = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (r > 0 && dt < best) best = dt; /* the first warms up threads and caches */
    }
    free(a);
    return 2.0 * N * N * (double)N / best / 1e9;
}
