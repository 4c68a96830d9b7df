/* dist.c — MPI start-up, node-local ranks, and the collective agreements that keep a job from
 * hanging: every phase that can fail on one rank ends with dist_agree(), so all ranks stop
 * together with the failing rank's message instead of waiting in a collective forever. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ptrain/dist.h"

#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/log.h"
#include "ptrain/util.h"

#define MPI_TRY(call)                                                                              \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        if (rc_ != MPI_SUCCESS) {                                                                  \
            char text_[MPI_MAX_ERROR_STRING];                                                      \
            int len_ = 0;                                                                          \
            MPI_Error_string(rc_, text_, &len_);                                                   \
            return ERR(PT_ERR_INTERNAL, "%s: %s", #call, text_);                                   \
        }                                                                                          \
    } while (0)

pt_status dist_init(pt_dist *d, int *argc, char ***argv)
{
    memset(d, 0, sizeof *d);
    d->world = d->local_world = 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    d->node_cores = cores > 0 ? (int)cores : 1;
    cpu_set_t mask;
    d->bound_cores = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 0;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) MPI_TRY(MPI_Init(argc, argv));
    d->mpi = !inited;
    MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
    MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &d->world));
    MPI_Comm node;
    MPI_TRY(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, &node));
    MPI_TRY(MPI_Comm_rank(node, &d->local_rank));
    MPI_TRY(MPI_Comm_size(node, &d->local_world));
    MPI_Comm_free(&node);
    log_init(d->rank, d->world);
    return PT_OK;
}

void dist_finalize(pt_dist *d)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (d->mpi && !finalized) MPI_Finalize();
    d->mpi = false;
}

pt_status dist_agree(const pt_dist *d, pt_status local)
{
    int mine = (int)local, worst = mine;
    if (d->world > 1 && MPI_Allreduce(&mine, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD) != MPI_SUCCESS) {
        log_error(local ? local : ERR(PT_ERR_INTERNAL, "MPI_Allreduce failed while agreeing on errors"));
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (worst == PT_OK) return PT_OK;
    /* rank 0's message hash decides which other ranks need to print theirs */
    unsigned long long mine_hash = local ? util_fnv1a(UTIL_FNV_INIT, err_message(), strlen(err_message())) : 0;
    unsigned long long root_hash = mine_hash;
    if (d->world > 1) MPI_Bcast(&root_hash, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD);
    if (local != PT_OK && !err_reported() && (d->rank == 0 || mine_hash != root_hash)) log_error(local);
    return local != PT_OK ? local : (pt_status)worst;
}

pt_status dist_check_same(const pt_dist *d, uint64_t hash, const char *what, const char *fix)
{
    unsigned long long root = hash;
    if (d->world > 1) MPI_TRY(MPI_Bcast(&root, 1, MPI_UNSIGNED_LONG_LONG, 0, MPI_COMM_WORLD));
    if (root != hash)
        return ERR(PT_ERR_USER, "the %s on this rank differs from rank 0's (hash %016llx, rank 0 has %016llx): %s",
                   what, (unsigned long long)hash, root,
                   fix ? fix : "start every rank with the same config file and the same ptrain");
    return PT_OK;
}

pt_status dist_compare_items(const pt_dist *d, const uint64_t *hashes, int n, bool *differ)
{
    for (int i = 0; i < n; i++) differ[i] = false;
    if (d->world == 1) return PT_OK;
    int root_n = n, other = 0;
    MPI_TRY(MPI_Bcast(&root_n, 1, MPI_INT, 0, MPI_COMM_WORLD));
    other = root_n != n;
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &other, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    if (other) /* no rank broadcasts the array then: counts that differ would mismatch it */
        return root_n == n ? PT_OK : ERR(PT_ERR_USER, "rank 0 has %d items to compare, this rank %d", root_n, n);
    uint64_t *root = malloc(sizeof *root * (size_t)(n > 0 ? n : 1));
    if (!root) return ERR(PT_ERR_NOMEM, "out of memory");
    if (n > 0) memcpy(root, hashes, sizeof *root * (size_t)n);
    int rc = MPI_Bcast(root, n, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    for (int i = 0; rc == MPI_SUCCESS && i < n; i++) differ[i] = root[i] != hashes[i];
    free(root);
    MPI_TRY(rc);
    return PT_OK;
}

pt_status dist_max_loc(const pt_dist *d, double value, double *max, int *rank)
{
    struct {
        double v;
        int r;
    } in = {value, d->rank}, out = in;
    if (d->world > 1) MPI_TRY(MPI_Allreduce(&in, &out, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD));
    *max = out.v;
    *rank = out.r;
    return PT_OK;
}

void dist_fail_fast(const pt_dist *d, pt_status st)
{
    if (st == PT_OK || d->world == 1) return;
    if (!err_reported()) log_error(st);
    fflush(stdout);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, (int)st);
}

pt_status dist_share_nccl_id(pt_dist *d)
{
#ifdef PTRAIN_HAVE_CUDA
    pt_status st = d->rank == 0 ? cuda_nccl_unique_id(d->nccl_id) : PT_OK;
    TRY(dist_agree(d, st));
    if (d->world > 1) MPI_TRY(MPI_Bcast(d->nccl_id, PT_NCCL_ID_BYTES, MPI_BYTE, 0, MPI_COMM_WORLD));
    d->have_nccl_id = true;
    return PT_OK;
#else
    (void)d;
    return ERR(PT_ERR_UNSUPPORTED, "NCCL needs the CUDA build (./configure --with-cuda)");
#endif
}

int dist_default_threads(const pt_dist *d)
{
    const char *omp = getenv("OMP_NUM_THREADS"); /* set by the user or the batch script: obey it */
    if (omp && atoi(omp) > 0) return atoi(omp);
    int per_rank = d->node_cores / (d->local_world > 0 ? d->local_world : 1);
    if (d->bound_cores > 0 && d->bound_cores < per_rank) per_rank = d->bound_cores;
    return per_rank > 0 ? per_rank : 1;
}

pt_status dist_sum_f64(const pt_dist *d, double *values, int n)
{
    if (d->world > 1) MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD));
    return PT_OK;
}

pt_status dist_bcast_bytes(const pt_dist *d, void *data, size_t n)
{
    const size_t piece = (size_t)1 << 30; /* MPI counts are ints */
    for (size_t off = 0; d->world > 1 && off < n; off += piece) {
        size_t len = n - off < piece ? n - off : piece;
        MPI_TRY(MPI_Bcast((char *)data + off, (int)len, MPI_BYTE, 0, MPI_COMM_WORLD));
    }
    return PT_OK;
}

pt_status dist_any(const pt_dist *d, int *flag)
{
    if (d->world > 1) MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    return PT_OK;
}
