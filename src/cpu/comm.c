/* comm.c — the CPU backend's communication: sums of f32 tensors over the ranks of
 * MPI_COMM_WORLD. allreduce_sum blocks; reduce_begin starts an MPI_Iallreduce on a bucket of
 * gradients while the backward pass goes on, and reduce_end waits for all of them before the
 * optimizer reads the gradients. Open MPI moves a non-blocking collective forward only inside
 * MPI calls, so reduce_poll (called between layers) tests the open requests. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"

static int world_size(void)
{
    int inited = 0, finalized = 0, world = 1;
    MPI_Initialized(&inited);
    MPI_Finalized(&finalized);
    if (inited && !finalized) MPI_Comm_size(MPI_COMM_WORLD, &world);
    return world;
}

static pt_status mpi_failed(const char *call, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", rc);
    return ERR(PT_ERR_INTERNAL, "%s failed: %s", call, text);
}

/* MPI counts are int: a tensor goes as pieces of at most 2^30 values. */
#define PIECE (1 << 30)

pt_status cpu_allreduce_sum(pt_backend *be, pt_tensor *t)
{
    (void)be;
    if (world_size() == 1) return PT_OK;
    int64_t n = tensor_numel(t);
    float *p = t->data;
    for (int64_t done = 0; done < n; done += PIECE) {
        int count = (int)(n - done < PIECE ? n - done : PIECE);
        int rc = MPI_Allreduce(MPI_IN_PLACE, p + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS) return mpi_failed("MPI_Allreduce", rc);
    }
    return PT_OK;
}

static pt_status push_request(cpu_comm *c, MPI_Request r)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        MPI_Request *grown = realloc(c->req, sizeof *grown * (size_t)cap);
        TRY_ALLOC(grown);
        c->req = grown;
        c->cap = cap;
    }
    c->req[c->n++] = r;
    return PT_OK;
}

pt_status cpu_reduce_begin(pt_backend *be, pt_tensor *t)
{
    cpu_comm *c = be->ctx;
    if (world_size() == 1) return PT_OK;
    int64_t n = tensor_numel(t);
    float *p = t->data;
    for (int64_t done = 0; done < n; done += PIECE) {
        int count = (int)(n - done < PIECE ? n - done : PIECE);
        MPI_Request r;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, p + done, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
        if (rc != MPI_SUCCESS) return mpi_failed("MPI_Iallreduce", rc);
        TRY(push_request(c, r));
    }
    return PT_OK;
}

pt_status cpu_reduce_poll(pt_backend *be)
{
    cpu_comm *c = be->ctx;
    if (c->n == 0) return PT_OK;
    int all_done = 0;
    int rc = MPI_Testall(c->n, c->req, &all_done, MPI_STATUSES_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_failed("MPI_Testall", rc);
    if (all_done) c->n = 0;
    return PT_OK;
}

pt_status cpu_reduce_end(pt_backend *be)
{
    cpu_comm *c = be->ctx;
    if (c->n == 0) return PT_OK;
    int rc = MPI_Waitall(c->n, c->req, MPI_STATUSES_IGNORE);
    c->n = 0;
    if (rc != MPI_SUCCESS) return mpi_failed("MPI_Waitall", rc);
    return PT_OK;
}

pt_status cpu_zero(pt_backend *be, pt_tensor *t)
{
    (void)be;
    if (t->nbytes) memset(t->data, 0, t->nbytes);
    return PT_OK;
}

pt_status cpu_copy(pt_backend *be, pt_tensor *dst, const pt_tensor *src)
{
    (void)be;
    if (src->nbytes) memmove(dst->data, src->data, src->nbytes);
    return PT_OK;
}
