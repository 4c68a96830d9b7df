/* emu_mpi.c — the collectives behind the CUDA emulator's fake NCCL (tests/emu/emu.cc), in C and
 * compiled by mpicc: device memory is host memory under the emulator, so a sum of a gradient
 * bucket over ranks is MPI_Allreduce on it, and a communicator's unique id is checked equal on
 * every rank (so the id's broadcast by MPI, dist_share_nccl_id, is tested too). This lets
 * `mpirun -np 2 tests/emu/ptrain_emu train` run the CUDA backend's multi-rank path (comm.cu) in
 * CI (tests/emu/test_emu_mpi.sh). */
#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

int emu_mpi_allreduce_f32(float *buf, size_t n);
int emu_mpi_same_id(const void *id, size_t n, int rank, int nranks);

int emu_mpi_allreduce_f32(float *buf, size_t n)
{
    return MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

/* 1 when every rank of MPI_COMM_WORLD passed the same bytes, its rank and size match, else 0. */
int emu_mpi_same_id(const void *id, size_t n, int rank, int nranks)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)id)[i]) * 1099511628211ULL;
    unsigned long long lo = h, hi = h;
    int me = -1, size = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD) != MPI_SUCCESS ||
        MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS)
        return 0;
    return lo == hi && me == rank && size == nranks;
}
