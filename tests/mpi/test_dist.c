/* test_dist.c — the dist module under `mpirun -np 2`: world and node-local ranks, thread defaults,
 * failure agreement (one rank fails, every rank learns it and returns non-zero), the config-hash
 * compare, the per-item compare (dist_compare_items), the byte gather (dist_gather_bytes) and its
 * agreed failure when rank 0 cannot allocate, the CPU backend's MPI all-reduce, gradsync's
 * accumulation and bucketed non-blocking sums, and the NCCL unique-id exchange (which needs no GPU).
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
#include "ptrain/gradsync.h"

/* true on rank 0 when cond held on every rank */
static int all_ranks(int cond)
{
    int all = 0;
    MPI_Allreduce(&cond, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    return all;
}

/* gradsync on 4 layers of 600,000 gradients (2.4 MB each): with accumulation 2 and 2 ranks the
 * result is the sum over micro-batches and ranks, and layers pair up into 2 buckets of 4.8 MB. */
static int gradsync_check(pt_backend *be, int rank)
{
    enum { LAYERS = 4, PER = 600000 };
    int64_t off[LAYERS + 1];
    for (int i = 0; i <= LAYERS; i++) off[i] = (int64_t)i * PER;
    pt_lora l = {.ad = {.n_layers = LAYERS, .be = be}, .layer_off = off};
    int64_t shape[2] = {1, LAYERS * PER};
    l.grads = tensor_make(PT_F32, 2, shape);
    l.grads_sum = tensor_make(PT_F32, 2, shape);
    float *host = malloc(sizeof(float) * LAYERS * PER);
    int good = host && backend_alloc(be, &l.grads) == PT_OK && backend_alloc(be, &l.grads_sum) == PT_OK;
    gradsync g;
    gradsync_init(&g, &l, 2, 2);
    for (int micro = 0; micro < 2 && good; micro++) {
        for (int64_t i = 0; i < LAYERS * PER; i++) host[i] = (float)((rank + 1) * (micro + 1) + i % 7);
        gradsync_begin_micro(&g, micro);
        good = backend_upload(be, &l.grads, host, l.grads.nbytes) == PT_OK;
        for (int layer = LAYERS - 1; layer >= 0 && good; layer--) good = gradsync_layer_done(&g, layer) == PT_OK;
    }
    good = good && gradsync_finish(&g) == PT_OK && g.buckets == 2 &&
           backend_download(be, &l.grads, host, l.grads.nbytes) == PT_OK;
    for (int64_t i = 0; i < LAYERS * PER && good; i++) /* ranks 1+2, micro-batches x1 + x2: 9, plus 4 x (i % 7) */
        good = host[i] == (float)(9 + 4 * (i % 7));
    free(host);
    backend_release(be, &l.grads);
    backend_release(be, &l.grads_sum);
    return good;
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
    TAP_PLAN(14);

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
    TAP_OK(all_ranks(dist_check_same(&d, same, "config", NULL) == PT_OK), "same config hash accepted");
    pt_status st = dist_check_same(&d, differs, "resolved config", NULL);
    int ok = d.rank == 0 ? st == PT_OK : st == PT_ERR_USER && strstr(err_message(), "differs from rank 0's");
    TAP_OK(all_ranks(ok), "a rank with a different config hash fails with a clear message");

    /* per-item hashes: rank 1 learns which items differ from rank 0's; a count that differs fails
     * on the rank that has it, with no hang */
    uint64_t items[4] = {1, 2, 3, 4};
    bool differ[4] = {true, true, true, true};
    if (d.rank == 1) items[2] = 33;
    st = dist_compare_items(&d, items, 4, differ);
    ok = st == PT_OK && !differ[0] && !differ[1] && differ[2] == (d.rank == 1) && !differ[3];
    TAP_OK(all_ranks(ok), "dist_compare_items: rank 1 learns that item 2 differs, and only it");
    st = dist_compare_items(&d, items, d.rank == 1 ? 3 : 4, differ);
    ok = d.rank == 0 ? st == PT_OK : st == PT_ERR_USER && !strcmp(err_message(), "rank 0 has 4 items to compare, this rank 3");
    TAP_OK(all_ranks(ok), "dist_compare_items: another item count fails on that rank, without a hang");

    /* dist_gather_bytes: both ranks' bytes end to end on rank 0; then rank 1 claims 4 EiB, which
     * rank 0 cannot allocate: every rank fails with rank 0's reason, no rank sends, none hangs */
    void *all = NULL;
    size_t all_n = 0;
    st = dist_gather_bytes(&d, "the test bytes", d.rank == 0 ? "ab" : "cde", d.rank == 0 ? 2 : 3, &all, &all_n);
    ok = st == PT_OK && (d.rank == 0 ? all_n == 5 && !memcmp(all, "abcde", 5) : !all && all_n == 0);
    TAP_OK(all_ranks(ok), "dist_gather_bytes: rank 0 gets both ranks' bytes in rank order");
    free(all);
    fflush(stdout);
    size_t huge = (size_t)1 << 62; /* never read: rank 0 cannot take it, so rank 1 sends nothing */
    st = dist_gather_bytes(&d, "the test bytes", "x", d.rank == 0 ? 1 : huge, &all, &all_n);
    ok = st == PT_ERR_NOMEM && !all && all_n == 0 &&
         (d.rank != 0 || (strstr(err_message(), "rank 0 cannot allocate 4611686018427387906 bytes") &&
                              strstr(err_message(), "to gather the test bytes from 2 ranks")));
    TAP_OK(all_ranks(ok), "dist_gather_bytes: rank 0 out of memory for the gathered bytes fails every rank with "
           "its reason (%s)", d.rank == 0 ? err_message() : "");
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
    pt_backend_options opts = {.device = DEVICE_CPU, .local_rank = d.local_rank, .threads = 1};
    int64_t shape[1] = {3};
    pt_tensor t = tensor_make(PT_F32, 1, shape);
    float v[3] = {1.0f + (float)d.rank, 10.0f, -2.0f * (float)d.rank};
    int reduced = cpu_backend_open(&opts, &be) == PT_OK && backend_alloc(be, &t) == PT_OK &&
                  backend_upload(be, &t, v, sizeof v) == PT_OK && backend_allreduce_sum(be, &t) == PT_OK &&
                  backend_download(be, &t, v, sizeof v) == PT_OK;
    TAP_OK(all_ranks(reduced && v[0] == 3.0f && v[1] == 20.0f && v[2] == -2.0f),
           "the cpu backend's all-reduce sums across ranks");
    backend_release(be, &t);
    TAP_OK(all_ranks(gradsync_check(be, d.rank)), "gradsync: 2 micro-batches x 2 ranks summed exactly, in 2 "
           "buckets started during the layer callbacks");
    backend_close(be);

    fflush(stdout);
    int failed = all_ranks(tap_failed == 0) ? 0 : 1;
    dist_finalize(&d);
    return failed;
}
