/* nccl.h (fake) — NCCL for the CPU SIMT emulator (tests/emu): a communicator over the ranks of
 * MPI_COMM_WORLD, float sums by MPI_Allreduce on the (host) memory (emu.cc, emu_mpi.c). */
#ifndef EMU_NCCL_H
#define EMU_NCCL_H
#include <stddef.h>
#include "cuda_runtime.h"
typedef struct emu_nccl_s *ncclComm_t;
typedef enum { ncclSuccess = 0, ncclInvalidUsage = 5, ncclInProgress = 7 } ncclResult_t;
typedef enum { ncclFloat = 7 } ncclDataType_t;
typedef enum { ncclSum = 0 } ncclRedOp_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef struct {
    int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {1}
const char *ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *r);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
#endif
