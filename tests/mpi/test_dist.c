/* test_dist.c — the dist module under `mpirun -np 2`: world and node-local ranks, thread defaults,
 * failure agreement (one rank fails, every rank learns it and returns non-zero), the config-hash
 * compare, the CPU backend's MPI all-reduce, and the NCCL unique-id exchange (which needs no GPU).
 * Rank 0 prints TAP; results from rank 1 travel to rank 0 through MPI. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"
#include "ptrain/backend.h"
#include "ptrain/dist.h"

/* true on rank 0 when cond held on every rank */
static int all_ranks(int cond)
{
    int all = 0;
    MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

int main(int argc, char **argv)
{
    pt_dist d;
    if (dist_init(&d, &argc, &argv) != PT_OK) {
        printf("Bail out! dist_init: %s\n", err_message());
        return 1;
    }
    if (d.world != 2) {
        if (d.rank == 0) printf("Bail out! run under mpirun -np 2 (world is %d)\n", d.world);
        dist_finalize(&d);
        return 1;
    }
    if (d.rank != 0 && !freopen("/dev/null", "w", stdout)) return 1; /* only rank 0 speaks TAP */
    TAP_PLAN(9);

    int ranks[2] = {0};
    MPI_Allgather(&d.rank, 1, MPI_INT, ranks, 1, MPI_INT, MPI_COMM_WORLD);
    TAP_OK(ranks[0] == 0 && ranks[1] == 1, "world ranks are 0 and 1");
    int locals[2] = {0};
    MPI_Allgather(&d.local_rank, 1, MPI_INT, locals, 1, MPI_INT, MPI_COMM_WORLD);
    TAP_OK(locals[0] != locals[1] && d.local_world == 2, "node-local ranks are distinct (%d, %d of %d)",
           locals[0], locals[1], d.local_world);
    int threads = dist_default_threads(&d);
    int share = d.node_cores / 2 > 0 ? d.node_cores / 2 : 1;
    if (d.bound_cores > 0 && d.bound_cores < share) share = d.bound_cores;
    TAP_OK(all_ranks(threads == share), "default threads = node cores / ranks on node, within the "
           "rank's CPU binding (%d)", threads);

    /* rank 1 fails alone: both ranks must return its failure, neither hangs */
    pt_status local = d.rank == 1 ? ERR(PT_ERR_USER, "test failure on rank 1 only") : PT_OK;
    fflush(stdout);
    pt_status agreed = dist_agree(&d, local);
    TAP_OK(all_ranks(agreed == PT_ERR_USER), "a failure on rank 1 reaches every rank");
    TAP_OK(all_ranks(dist_agree(&d, PT_OK) == PT_OK), "no failure: every rank goes on");

    uint64_t same = 0x1234, differs = d.rank == 1 ? 0x9999 : 0x1234;
    TAP_OK(all_ranks(dist_check_same(&d, same, "config") == PT_OK), "same config hash accepted");
    pt_status st = dist_check_same(&d, differs, "resolved config");
    int ok = d.rank == 0 ? st == PT_OK : st == PT_ERR_USER && strstr(err_message(), "differs from rank 0's");
    TAP_OK(all_ranks(ok), "a rank with a different config hash fails with a clear message");

#ifdef PTRAIN_HAVE_CUDA
    st = dist_share_nccl_id(&d);
    unsigned char ids[2][PT_NCCL_ID_BYTES];
    MPI_Allgather(d.nccl_id, PT_NCCL_ID_BYTES, MPI_BYTE, ids, PT_NCCL_ID_BYTES, MPI_BYTE, MPI_COMM_WORLD);
    unsigned char zero[PT_NCCL_ID_BYTES] = {0};
    TAP_OK(all_ranks(st == PT_OK) && memcmp(ids[0], ids[1], PT_NCCL_ID_BYTES) == 0 &&
               memcmp(ids[0], zero, PT_NCCL_ID_BYTES) != 0,
           "rank 0's NCCL unique id reaches rank 1 intact");
#else
    TAP_SKIP("built without CUDA (./configure --with-cuda)", "NCCL unique id exchange");
#endif
    /* the CPU backend's all-reduce sums across ranks */
    pt_backend *be = NULL;
    pt_backend_options opts = {"cpu", d.local_rank, 1};
    int64_t shape[1] = {3};
    pt_tensor t = tensor_make(PT_F32, 1, shape);
    float v[3] = {1.0f + (float)d.rank, 10.0f, -2.0f * (float)d.rank};
    int reduced = cpu_backend_open(&opts, &be) == PT_OK && backend_alloc(be, &t) == PT_OK &&
                  backend_upload(be, &t, v, sizeof v) == PT_OK && backend_allreduce_sum(be, &t) == PT_OK &&
                  backend_download(be, &t, v, sizeof v) == PT_OK;
    TAP_OK(all_ranks(reduced && v[0] == 3.0f && v[1] == 20.0f && v[2] == -2.0f),
           "the cpu backend's all-reduce sums across ranks");
    backend_release(be, &t);
    backend_close(be);

    fflush(stdout);
    int failed = all_ranks(tap_failed == 0) ? 0 : 1;
    dist_finalize(&d);
    return failed;
}
