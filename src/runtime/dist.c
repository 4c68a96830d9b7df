/* dist.c — MPI start-up, node-local ranks, and the collective agreements that keep a job from
 * hanging: every phase that can fail on one rank ends with dist_agree(), so all ranks stop
 * together with the failing rank's message instead of waiting in a collective forever. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include "ptrain/dist.h"

#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <sys/statvfs.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrain/log.h"
#include "ptrain/util.h"

struct dist_comms {
    MPI_Comm node;    /* the ranks of this node (MPI_COMM_TYPE_SHARED) */
    MPI_Comm leaders; /* the first rank of every node; MPI_COMM_NULL on the others */
    MPI_Win window;   /* dist_node_window's, or MPI_WIN_NULL */
};

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

/* Whether a launcher started this process as a rank of a job: mpirun (Open MPI's OMPI_* or PMIx's
 * variables), srun with an MPI plugin (PMIx or PMI-2), MPICH's hydra (PMI_*), or an srun step of
 * several tasks; PTRAIN_MPI=1 asks for MPI anyway. A process started by hand is a job of one
 * rank without MPI_Init, which would start Open MPI's singleton runtime (most of a second, and
 * its daemon) for collectives that a job of one rank never makes. */
static bool launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE", "PMI_FD"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i])) return true;
    const char *tasks = getenv("SLURM_STEP_NUM_TASKS"), *force = getenv("PTRAIN_MPI");
    return (tasks && atoi(tasks) > 1) || (force && !strcmp(force, "1"));
}

pt_status dist_init(pt_dist *d, int *argc, char ***argv)
{
    memset(d, 0, sizeof *d);
    double t0 = util_now();
    d->world = d->local_world = 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    d->node_cores = cores > 0 ? (int)cores : 1;
    cpu_set_t mask;
    d->bound_cores = sched_getaffinity(0, sizeof mask, &mask) == 0 ? CPU_COUNT(&mask) : 0;
    d->comms = calloc(1, sizeof *d->comms);
    if (!d->comms) return ERR(PT_ERR_NOMEM, "out of memory");
    d->comms->node = d->comms->leaders = MPI_COMM_NULL;
    d->comms->window = MPI_WIN_NULL;
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited && !launched_by_mpi()) { /* one rank, no MPI */
        d->nodes = 1;
        log_init(0, 1);
        d->init_s = util_now() - t0;
        d->start = t0;
        return PT_OK;
    }
    if (!inited) MPI_TRY(MPI_Init(argc, argv));
    d->mpi = !inited;
    MPI_TRY(MPI_Comm_rank(MPI_COMM_WORLD, &d->rank));
    MPI_TRY(MPI_Comm_size(MPI_COMM_WORLD, &d->world));
    MPI_Comm *node = &d->comms->node, *leaders = &d->comms->leaders;
    MPI_TRY(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, d->rank, MPI_INFO_NULL, node));
    MPI_TRY(MPI_Comm_rank(*node, &d->local_rank));
    MPI_TRY(MPI_Comm_size(*node, &d->local_world));
    MPI_TRY(MPI_Comm_split(MPI_COMM_WORLD, d->local_rank == 0 ? 0 : MPI_UNDEFINED, d->rank, leaders));
    int leader_rank = -1;
    if (*leaders != MPI_COMM_NULL) MPI_TRY(MPI_Comm_rank(*leaders, &leader_rank));
    MPI_TRY(MPI_Bcast(&leader_rank, 1, MPI_INT, 0, *node));
    d->node = leader_rank;
    int nodes = d->local_rank == 0 ? 1 : 0;
    MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, &nodes, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    d->nodes = nodes;
    log_init(d->rank, d->world);
    d->init_s = util_now() - t0;
    d->start = t0;
    return PT_OK;
}

void dist_finalize(pt_dist *d)
{
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (d->comms && d->comms->node != MPI_COMM_NULL && !finalized) {
        dist_node_window_free(d);
        if (d->comms->leaders != MPI_COMM_NULL) MPI_Comm_free(&d->comms->leaders);
        MPI_Comm_free(&d->comms->node);
    }
    free(d->comms);
    d->comms = NULL;
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
    /* a rank that did not fail has nothing to say: the failing rank spoke, also when this status
     * is agreed again further up */
    if (local == PT_OK) err_mark_reported();
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

/* n bytes between rank 0 and rank `peer`, in pieces of 1 GiB (MPI counts are ints). */
static pt_status move_pieces(int peer, void *data, size_t n, bool receive)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < n; off += piece) {
        int len = (int)(n - off < piece ? n - off : piece);
        if (receive) MPI_TRY(MPI_Recv((char *)data + off, len, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        else MPI_TRY(MPI_Send((char *)data + off, len, MPI_BYTE, peer, 0, MPI_COMM_WORLD));
    }
    return PT_OK;
}

/* Rank 0's buffer for the ranks' lens[r] bytes end to end (and a NUL), checked: a total past what
 * a size_t holds, or an allocation that fails, is an error saying how many bytes and what for. */
static pt_status gather_room(const pt_dist *d, const char *what, const uint64_t *lens, char **out, uint64_t *total)
{
    uint64_t sum = 0;
    bool over = false;
    for (int r = 0; r < d->world; r++) {
        over = over || lens[r] >= (uint64_t)SIZE_MAX - sum; /* sum + lens[r] + 1 must fit a size_t */
        sum += over ? 0 : lens[r];
    }
    *out = NULL, *total = sum;
    if (over)
        return ERR(PT_ERR_NOMEM, "rank 0 cannot gather %s from %d ranks: their byte counts add up to more than "
                   "this machine can address", what, d->world);
    *out = malloc((size_t)sum + 1);
    if (!*out)
        return ERR(PT_ERR_NOMEM, "rank 0 cannot allocate %llu bytes (%.1f MiB) to gather %s from %d ranks",
                   (unsigned long long)sum + 1, (double)(sum + 1) / 1048576.0, what, d->world);
    return PT_OK;
}

pt_status dist_gather_bytes(const pt_dist *d, const char *what, const void *mine, size_t n, void **all,
                            size_t *all_n)
{
    *all = NULL, *all_n = 0;
    uint64_t len = n, *lens = NULL;
    pt_status st = PT_OK;
    if (d->rank == 0 && !(lens = calloc((size_t)d->world, sizeof *lens)))
        st = ERR(PT_ERR_NOMEM, "rank 0 cannot allocate the byte counts of %d ranks to gather %s", d->world, what);
    TRY(dist_agree(d, st)); /* no rank sends its count to a rank 0 with nowhere to put it */
    if (d->world > 1 && MPI_Gather(&len, 1, MPI_UINT64_T, lens, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD) != MPI_SUCCESS)
        st = ERR(PT_ERR_INTERNAL, "MPI_Gather of the byte counts failed");
    char *out = NULL;
    uint64_t total = 0;
    if (d->rank == 0 && st == PT_OK) {
        lens[0] = n;
        st = gather_room(d, what, lens, &out, &total);
    }
    st = dist_agree(d, st); /* no rank sends its bytes to a rank 0 that could not take them */
    if (d->rank != 0) return st == PT_OK ? move_pieces(0, (void *)mine, n, false) : st;
    if (st == PT_OK && n) memcpy(out, mine, n);
    size_t at = n;
    for (int r = 1; st == PT_OK && r < d->world; r++) {
        st = move_pieces(r, out + at, lens[r], true);
        at += lens[r];
    }
    free(lens);
    if (st != PT_OK) free(out);
    else *all = out, *all_n = total;
    return st;
}

pt_status dist_any(const pt_dist *d, int *flag)
{
    if (d->world > 1) MPI_TRY(MPI_Allreduce(MPI_IN_PLACE, flag, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    return PT_OK;
}

/* ---- the node and its leader ---- */

/* Room left on the shared-memory filesystem the MPI library maps windows from. */
static size_t shm_room(void)
{
    struct statvfs v;
    if (statvfs("/dev/shm", &v) != 0) return (size_t)-1; /* no /dev/shm: the library uses another place */
    return (size_t)v.f_bavail * (size_t)v.f_frsize;
}

pt_status dist_node_window(pt_dist *d, size_t bytes, void **base, size_t *size)
{
    struct dist_comms *c = d->comms;
    if (!c || c->node == MPI_COMM_NULL) return ERR(PT_ERR_INTERNAL, "dist_node_window without MPI (before dist_init, or one rank)");
    unsigned long long want = d->local_rank == 0 ? bytes : 0;
    MPI_TRY(MPI_Bcast(&want, 1, MPI_UNSIGNED_LONG_LONG, 0, c->node));
    int fits = d->local_rank != 0 || shm_room() >= want;
    MPI_TRY(MPI_Bcast(&fits, 1, MPI_INT, 0, c->node));
    if (!fits)
        return ERR(PT_ERR_NOMEM, "the node's shared memory (/dev/shm) has %.0f MiB free, %.0f MiB are needed for "
                   "the weights", (double)shm_room() / 1048576.0, (double)want / 1048576.0);
    MPI_Aint mine = d->local_rank == 0 ? (MPI_Aint)want : 0;
    void *own = NULL;
    MPI_TRY(MPI_Win_allocate_shared(mine, 1, MPI_INFO_NULL, c->node, &own, &c->window));
    MPI_Aint got = 0;
    int unit = 0;
    MPI_TRY(MPI_Win_shared_query(c->window, 0, &got, &unit, base));
    *size = (size_t)got;
    return PT_OK;
}

void dist_node_window_free(pt_dist *d)
{
    if (d->comms && d->comms->window != MPI_WIN_NULL) MPI_Win_free(&d->comms->window);
}

/* n bytes of root's in comm reach every rank of comm, 1 GiB at a time. */
static pt_status bcast_pieces(MPI_Comm comm, void *data, size_t n)
{
    const size_t piece = (size_t)1 << 30;
    for (size_t off = 0; off < n; off += piece) {
        size_t len = n - off < piece ? n - off : piece;
        MPI_TRY(MPI_Bcast((char *)data + off, (int)len, MPI_BYTE, 0, comm));
    }
    return PT_OK;
}

pt_status dist_node_bcast(const pt_dist *d, void *data, size_t n)
{
    return d->local_world > 1 && d->comms ? bcast_pieces(d->comms->node, data, n) : PT_OK;
}

pt_status dist_leaders_bcast(const pt_dist *d, void *data, size_t n)
{
    if (!d->comms || d->comms->leaders == MPI_COMM_NULL || d->nodes < 2) return PT_OK;
    return bcast_pieces(d->comms->leaders, data, n);
}

pt_status dist_node_wait(const pt_dist *d)
{
    if (d->local_world < 2 || !d->comms) return PT_OK;
    MPI_Request r;
    MPI_TRY(MPI_Ibarrier(d->comms->node, &r));
    for (int done = 0;;) {
        MPI_TRY(MPI_Test(&r, &done, MPI_STATUS_IGNORE));
        if (done) return PT_OK;
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
}

/* Whether the node has other ranks to talk to. */
static bool node_shared(const pt_dist *d)
{
    return d->local_world > 1 && d->comms && d->comms->node != MPI_COMM_NULL;
}

/* Room for n bytes and a NUL after them (zeroed). */
static pt_status alloc_bytes(size_t n, char **out)
{
    *out = calloc(n + 1, 1);
    return *out ? PT_OK : ERR(PT_ERR_NOMEM, "no memory for %zu bytes", n + 1);
}

/* One copy of n bytes and a NUL (a node of one rank "gathers" and "scatters" to itself). */
static pt_status copy_bytes(const void *src, size_t n, char **out)
{
    TRY(alloc_bytes(n, out));
    if (n) memcpy(*out, src, n);
    return PT_OK;
}

/* The leader's int counts and offsets of the ranks' lens, or an error when they pass what one MPI
 * call moves (2 GiB in all); ok says so to every rank of the node. */
static pt_status node_counts(const pt_dist *d, const long long *lens, int *counts, int *displs, int *ok)
{
    long long at = 0;
    for (int k = 0; d->local_rank == 0 && k < d->local_world && *ok; k++) {
        counts[k] = (int)lens[k], displs[k] = (int)at;
        at += lens[k];
        *ok = lens[k] >= 0 && at <= INT_MAX;
    }
    MPI_TRY(MPI_Bcast(ok, 1, MPI_INT, 0, d->comms->node));
    if (!*ok) return ERR(PT_ERR_USER, "the node's ranks have more than 2 GiB to move through its leader at once");
    return PT_OK;
}

pt_status dist_node_gather_bytes(const pt_dist *d, const void *mine, size_t n, char **all, size_t *sizes)
{
    *all = NULL;
    if (!node_shared(d)) return sizes[0] = n, copy_bytes(mine, n, all);
    bool leader = d->local_rank == 0;
    long long len = n > INT_MAX ? -1 : (long long)n, *lens = leader ? calloc((size_t)d->local_world, sizeof *lens) : NULL;
    int *counts = leader ? calloc((size_t)d->local_world, sizeof *counts) : NULL;
    int *displs = leader ? calloc((size_t)d->local_world, sizeof *displs) : NULL, ok = !leader || (lens && counts && displs);
    pt_status st = MPI_Gather(&len, 1, MPI_LONG_LONG, lens, 1, MPI_LONG_LONG, 0, d->comms->node) == MPI_SUCCESS
                       ? PT_OK : ERR(PT_ERR_INTERNAL, "MPI_Gather of the node's byte counts failed");
    if (st == PT_OK) st = node_counts(d, lens, counts, displs, &ok);
    long long total = 0;
    for (int k = 0; leader && st == PT_OK && k < d->local_world; k++) total += lens[k], sizes[k] = (size_t)lens[k];
    if (st == PT_OK && leader) st = alloc_bytes((size_t)total, all);
    if (st == PT_OK &&
        MPI_Gatherv(mine, (int)n, MPI_BYTE, leader ? *all : NULL, counts, displs, MPI_BYTE, 0, d->comms->node) != MPI_SUCCESS)
        st = ERR(PT_ERR_INTERNAL, "MPI_Gatherv of the node's bytes failed");
    free(lens), free(counts), free(displs);
    if (st != PT_OK) free(*all), *all = NULL;
    return st;
}

pt_status dist_node_scatter_bytes(const pt_dist *d, const char *all, const size_t *sizes, char **mine, size_t *n)
{
    *mine = NULL, *n = 0;
    if (!node_shared(d)) return *n = sizes[0], copy_bytes(all, sizes[0], mine);
    bool leader = d->local_rank == 0;
    long long len = 0, *lens = leader ? calloc((size_t)d->local_world, sizeof *lens) : NULL;
    int *counts = leader ? calloc((size_t)d->local_world, sizeof *counts) : NULL;
    int *displs = leader ? calloc((size_t)d->local_world, sizeof *displs) : NULL, ok = !leader || (lens && counts && displs);
    for (int k = 0; leader && ok && k < d->local_world; k++) lens[k] = sizes[k] > INT_MAX ? -1 : (long long)sizes[k];
    pt_status st = node_counts(d, lens, counts, displs, &ok);
    if (st == PT_OK)
        st = MPI_Scatter(lens, 1, MPI_LONG_LONG, &len, 1, MPI_LONG_LONG, 0, d->comms->node) == MPI_SUCCESS
                 ? PT_OK : ERR(PT_ERR_INTERNAL, "MPI_Scatter of the node's byte counts failed");
    int got = st == PT_OK ? alloc_bytes((size_t)len, mine) == PT_OK : 0, every = got;
    if (st == PT_OK) MPI_TRY(MPI_Allreduce(&got, &every, 1, MPI_INT, MPI_MIN, d->comms->node));
    if (st == PT_OK && !every) st = ERR(PT_ERR_NOMEM, "a rank of the node has no memory for its %lld bytes", len);
    if (st == PT_OK &&
        MPI_Scatterv(all, counts, displs, MPI_BYTE, *mine, (int)len, MPI_BYTE, 0, d->comms->node) != MPI_SUCCESS)
        st = ERR(PT_ERR_INTERNAL, "MPI_Scatterv of the node's bytes failed");
    free(lens), free(counts), free(displs);
    if (st != PT_OK) free(*mine), *mine = NULL;
    else *n = (size_t)len;
    return st;
}
