/* nccl_id.cu — the NCCL unique id that rank 0 makes and MPI broadcasts to every rank before
 * ncclCommInitRank. ncclGetUniqueId needs no GPU, so the exchange is tested on any machine. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <string.h>

#include "cuda_check.h"
#include "ptrain/dist.h"

static_assert(sizeof(ncclUniqueId) == PT_NCCL_ID_BYTES, "NCCL unique id size changed");

extern "C" pt_status cuda_nccl_unique_id(unsigned char out[PT_NCCL_ID_BYTES])
{
    ncclUniqueId id;
    NCCL_TRY(ncclGetUniqueId(&id));
    memcpy(out, &id, sizeof id);
    return PT_OK;
}
