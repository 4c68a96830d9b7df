/* dist.h — the processes of one job: MPI world and node-local ranks, agreement on failure, the
 * config hash compare and the NCCL unique-id exchange. Rank and local rank always come from MPI;
 * SLURM_* variables are read only for logging. A process that no launcher started (no mpirun, no
 * srun with an MPI plugin; PTRAIN_MPI=1 overrides) is rank 0 of 1 and never initialises MPI. */
#ifndef PTRAIN_DIST_H
#define PTRAIN_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PT_NCCL_ID_BYTES 128

typedef struct {
    int rank, world;             /* MPI_COMM_WORLD */
    int local_rank, local_world; /* ranks sharing this node (MPI_COMM_TYPE_SHARED) */
    int node_cores;              /* online CPUs on this node */
    int bound_cores;             /* CPUs this process may run on (launcher binding), 0 if unknown */
    int node, nodes;             /* this node's index (by its first rank) and the job's nodes */
    double init_s;               /* seconds dist_init took (MPI start-up, the communicators) */
    double start;                /* when dist_init began (util_now): the start of the start-up report */
    bool mpi;                    /* MPI was initialised by dist_init */
    unsigned char nccl_id[PT_NCCL_ID_BYTES];
    bool have_nccl_id;
    struct dist_comms *comms;    /* the node's and the node leaders' communicators, the node window */
} pt_dist;

pt_status dist_init(pt_dist *d, int *argc, char ***argv);
void dist_finalize(pt_dist *d);
/* Every rank learns whether any rank failed. A failing rank prints its own error (a rank other
 * than 0 stays quiet when its message is the same as rank 0's); every rank then returns the
 * highest failing status, so the whole job exits non-zero together. */
pt_status dist_agree(const pt_dist *d, pt_status local);
/* Fail on the ranks whose hash of `what` (e.g. "resolved config") differs from rank 0's; the
 * message ends with fix (NULL: start every rank with the same config and ptrain). */
pt_status dist_check_same(const pt_dist *d, uint64_t hash, const char *what, const char *fix);
/* Which of n items differ from rank 0's, each item given by a hash (e.g. one per config key): rank 0
 * broadcasts its array and differ[i] says whether this rank's hashes[i] is another. Collective;
 * every rank passes its own n: when any rank's n is not rank 0's, no array is sent, those ranks
 * fail ("rank 0 has N items to compare, this rank M") and the others return PT_OK with no item
 * differing (end the phase with dist_agree). */
pt_status dist_compare_items(const pt_dist *d, const uint64_t *hashes, int n, bool *differ);
/* The largest value over the ranks and the rank that has it (the lowest such rank). */
pt_status dist_max_loc(const pt_dist *d, double value, double *max, int *rank);
/* For errors inside the training loop, where the other ranks are already waiting in the step's
 * collectives and cannot agree first: with several ranks and st != PT_OK, print this rank's
 * error (with its rank) and end the whole job with MPI_Abort(st), which makes the launcher stop
 * every rank within seconds. Returns only when st is PT_OK or there is one rank. */
void dist_fail_fast(const pt_dist *d, pt_status st);
/* Rank 0 makes the NCCL unique id and broadcasts it (needs the CUDA build). */
pt_status dist_share_nccl_id(pt_dist *d);
/* Sum values across ranks, in place (a no-op with one rank). */
pt_status dist_sum_f64(const pt_dist *d, double *values, int n);
/* Rank 0's n bytes at data reach every rank (in pieces of 1 GiB). */
pt_status dist_bcast_bytes(const pt_dist *d, void *data, size_t n);
/* Every rank's n bytes at mine reach rank 0, end to end in rank order, in *all (malloc'd) and
 * *all_n; the other ranks get NULL and 0. Collective and agreed: when rank 0 cannot hold them all
 * (an error naming the bytes and what, e.g. "the tokenized examples"), every rank fails, no rank
 * sends, none waits. */
pt_status dist_gather_bytes(const pt_dist *d, const char *what, const void *mine, size_t n, void **all,
                            size_t *all_n);
/* *flag becomes the largest of every rank's *flag. */
pt_status dist_any(const pt_dist *d, int *flag);

/* ---- the node (ranks sharing memory) and its first rank, the leader (local_rank 0) ---- */

/* Host memory every rank of the node maps (an MPI-3 shared window, MPI_Win_allocate_shared): bytes
 * is what the leader asks for (the others pass anything); *base is its address in this process and
 * *size its size. One window per job, kept until dist_node_window_free or dist_finalize. Fails, and
 * allocates nothing, when the node's shared-memory filesystem (/dev/shm) has less room than asked:
 * the caller then loads per rank. Collective over the node. */
pt_status dist_node_window(pt_dist *d, size_t bytes, void **base, size_t *size);
void dist_node_window_free(pt_dist *d);
/* The leader's n bytes at data reach the node's ranks (pieces of 1 GiB). */
pt_status dist_node_bcast(const pt_dist *d, void *data, size_t n);
/* Rank 0's n bytes reach every node's leader (pieces of 1 GiB); ranks that are not leaders do
 * nothing. */
pt_status dist_leaders_bcast(const pt_dist *d, void *data, size_t n);
/* Every rank's n bytes at mine reach the node's leader, end to end in local-rank order: on the
 * leader *all (malloc'd, a NUL after them) and sizes[k] the count of local rank k (sizes holds
 * local_world); the others get NULL. Collective over the node; under 2 GiB in all, else every rank
 * of the node fails. A node of one rank copies its own bytes. */
pt_status dist_node_gather_bytes(const pt_dist *d, const void *mine, size_t n, char **all, size_t *sizes);
/* The leader's bytes for each local rank k (sizes[k] of them, end to end in all) reach it: *mine
 * (malloc'd, a NUL after them) and *n. The other ranks pass NULL and NULL. Collective over the node. */
pt_status dist_node_scatter_bytes(const pt_dist *d, const char *all, const size_t *sizes, char **mine, size_t *n);
/* Wait for every rank of the node without spinning (a non-blocking barrier tested every
 * millisecond), so that the rank doing the node's work has the node's cores meanwhile. */
pt_status dist_node_wait(const pt_dist *d);
/* Threads per rank for threads: auto — OMP_NUM_THREADS when set, else the node's cores divided by
 * the ranks on the node, capped by the CPUs the launcher bound this rank to. */
int dist_default_threads(const pt_dist *d);

#ifdef PTRAIN_HAVE_CUDA
pt_status cuda_nccl_unique_id(unsigned char out[PT_NCCL_ID_BYTES]);
#endif

#ifdef __cplusplus
}
#endif
#endif
