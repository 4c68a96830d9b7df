/* test_blas_kernel.c — the OpenBLAS kernel choice (src/runtime/blas_kernel.c) on recorded processors and
 * the core names Debian's OpenBLAS 0.3.21 reported on them, and the re-exec it leads to. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ptrain/blas_kernel.h"

typedef struct {
    const char *what, *cpu, *corename, *want; /* want NULL: keep the library's choice */
} recorded;

#define AVX2 "fma avx2 os_avx"
#define AVX512 AVX2 " avx512f avx512bw avx512dq avx512vl os_avx512"

static const recorded cases[] = {
    /* the machine of the issue: too new for 0.3.21, which falls back to SSE3 */
    {"Emerald Rapids (fam 6 model 207), the machine of issue 13", "GenuineIntel,6,207," AVX512 " amx_tile amx_bf16 os_amx",
     "Prescott", "SkylakeX"},
    {"Sapphire Rapids (model 143), library knows it", "GenuineIntel,6,143," AVX512 " amx_tile amx_bf16 os_amx",
     "SapphireRapids", NULL},
    {"Sapphire Rapids reported as SkylakeX", "GenuineIntel,6,143," AVX512, "SkylakeX", NULL},
    {"Ice Lake server, Haswell kernels", "GenuineIntel,6,106," AVX512, "Haswell", "SkylakeX"},
    {"AVX-512 present but the OS does not save zmm", "GenuineIntel,6,85," AVX2 " avx512f avx512bw avx512dq avx512vl",
     "Prescott", "Haswell"},
    {"Alder Lake (AVX2 only), unknown to the library", "GenuineIntel,6,151," AVX2, "Prescott", "Haswell"},
    {"Haswell", "GenuineIntel,6,63," AVX2, "Haswell", NULL},
    {"Sandy Bridge (AVX, no AVX2)", "GenuineIntel,6,42,os_avx", "Sandybridge", NULL},
    {"AMD EPYC Zen 3 (this CI machine's kind)", "AuthenticAMD,25,1," AVX2, "Zen", NULL},
    {"AMD Zen 4 with AVX-512 under Zen kernels", "AuthenticAMD,25,17," AVX512, "Zen", "SkylakeX"},
    {"AMD Zen 5 unknown to the library", "AuthenticAMD,26,2," AVX512, "Barcelona", "SkylakeX"},
    {"AMD Zen 2 reported as Barcelona", "AuthenticAMD,23,49," AVX2, "Barcelona", "Zen"},
    {"Hygon Dhyana", "HygonGenuine,24,1," AVX2, "Prescott", "Zen"},
    {"a core name newer than ptrain knows", "GenuineIntel,6,207," AVX512, "Diamondrapids", NULL},
    {"no AVX at all", "GenuineIntel,6,23,", "Penryn", NULL},
};

static void test_recorded_pairs(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pt_cpu cpu;
        assert_true(cpu_parse(cases[i].cpu, &cpu));
        const char *got = blas_kernel_pick(&cpu, cases[i].corename);
        if ((got == NULL) != (cases[i].want == NULL) || (got && strcmp(got, cases[i].want)))
            fail_msg("%s: chose %s with the library at %s, expected %s", cases[i].what, got ? got : "(keep)",
                     cases[i].corename, cases[i].want ? cases[i].want : "(keep)");
    }
}

static void test_parse(void **state)
{
    (void)state;
    pt_cpu cpu;
    assert_true(cpu_parse("AuthenticAMD,25,1,fma avx2 os_avx", &cpu));
    assert_string_equal(cpu.vendor, "AuthenticAMD");
    assert_int_equal(cpu.family, 25);
    assert_true(cpu.avx2 && cpu.fma && cpu.os_avx && !cpu.avx512f);
    assert_true(cpu_parse("GenuineIntel,6,23,", &cpu));
    assert_false(cpu.avx2);
    assert_false(cpu_parse("GenuineIntel,6,23,sse9", &cpu)); /* unknown flag */
    assert_false(cpu_parse("nonsense", &cpu));
}

/* The processor this runs on: whatever it is, the choice is never a kernel it cannot run. */
static void test_this_machine(void **state)
{
    (void)state;
    pt_cpu cpu;
    cpu_read(&cpu);
    const char *pick = blas_kernel_pick(&cpu, "Prescott");
    if (pick && !strcmp(pick, "SkylakeX")) assert_true(cpu.avx512f && cpu.os_avx512);
    if (pick && (!strcmp(pick, "Haswell") || !strcmp(pick, "Zen"))) assert_true(cpu.avx2 && cpu.os_avx);
    char line[512];
    blas_kernel_describe(line, sizeof line);
    print_message("%s\n", line);
    assert_non_null(strstr(line, "kernels"));
    assert_true(blas_sgemm_rate() > 0.1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_recorded_pairs),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_this_machine),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
