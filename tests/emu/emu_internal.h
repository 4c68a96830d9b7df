/* emu_internal.h — what the CPU SIMT emulator's core (emu.cc: fibers, launches, barriers, shuffles)
 * offers its other parts (emu_mma.cc: the tensor-core primitives of cuda/mma.h): a failure report,
 * the running thread and block, shared-memory bounds, and warp collectives whose operands are
 * whole register vectors, resolved by a function once all 32 lanes have arrived. */
#ifndef EMU_INTERNAL_H
#define EMU_INTERNAL_H

#include "cuda_runtime.h"

/* Report an error once (the first one becomes cudaGetLastError's). */
void emu_fail(cudaError_t e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int emu_thread(void);             /* the running thread's linear index in its block */
unsigned emu_block_threads(void); /* threads of the running block */
uint64_t emu_block_serial(void);  /* the running block, counted over all launches (0: none yet) */
bool emu_in_kernel(void);

/* The launch's dynamic shared memory, and whether [p, p + n) lies in shared memory at all
 * (dynamic, or a static __shared__ array). */
char *emu_dyn_smem(size_t *bytes);
bool emu_in_shared(const void *p, size_t n);

/* A warp-collective operation with vector operands: each lane passes its own in and out (alive
 * on its stack while it waits); when all 32 lanes of the warp have arrived with the same op and
 * param, its resolver runs once, in[l] and out[l] being lane l's. Lanes that disagree on op or
 * param are reported as a failed launch. */
enum { EMU_OP_SHFL, EMU_OP_ANY, EMU_OP_LDMATRIX, EMU_OP_MMA };
void emu_warp_vector(int op, int param, const void *in, void *out);

/* emu_mma.cc: the resolvers of EMU_OP_LDMATRIX and EMU_OP_MMA */
void emu_ldmatrix_resolve(const void *const in[32], void *const out[32], int param);
void emu_mma_resolve(const void *const in[32], void *const out[32], int param);

#endif
