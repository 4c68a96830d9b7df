/* support.h — what the libFuzzer targets share: CHECK(cond), an invariant that aborts naming the
 * target (FUZZ_NAME, defined before including this) and the line, so libFuzzer keeps the input
 * as a reproducer; and, with FUZZ_STUB_CPU_BACKEND defined, a stand-in for the CPU backend's
 * constructor for targets that link src/backend/backend.c but no backend. */
#ifndef PTRAIN_FUZZ_SUPPORT_H
#define PTRAIN_FUZZ_SUPPORT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s: invariant failed: %s (line %d)\n", FUZZ_NAME, #cond, __LINE__);   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#ifdef FUZZ_STUB_CPU_BACKEND
#include "ptrain/backend.h"

pt_status cpu_backend_open(const pt_backend_options *opts, pt_backend **out)
{
    (void)opts;
    *out = NULL;
    return PT_ERR_UNSUPPORTED;
}
#endif

#endif
