/* arena.c — bump allocation of activation and f32 buffers inside one backend allocation (arena.h). */
#include "ptrain/arena.h"

#include <string.h>

pt_status arena_open(pt_arena *a, pt_backend *be, size_t bytes)
{
    memset(a, 0, sizeof *a);
    a->be = be;
    a->act = be->act;
    if (!bytes) return PT_OK;
    int64_t shape[1] = {(int64_t)((bytes + sizeof(float) - 1) / sizeof(float))};
    a->mem = tensor_make(PT_F32, 1, shape);
    TRY(backend_alloc(be, &a->mem));
    a->cap = a->mem.nbytes;
    return PT_OK;
}

void arena_measure(pt_arena *a, pt_dtype act)
{
    memset(a, 0, sizeof *a);
    a->measuring = true;
    a->act = act;
}

void arena_reset(pt_arena *a) { a->used = 0; }

size_t arena_mark(const pt_arena *a) { return a->used; }

void arena_back_to(pt_arena *a, size_t mark)
{
    if (mark < a->used) a->used = mark;
}

static pt_status take(pt_arena *a, pt_tensor *t, pt_dtype dtype, int64_t rows, int64_t cols)
{
    int64_t shape[2] = {rows, cols};
    *t = tensor_make(dtype, 2, shape);
    if (t->nbytes == 0) return PT_OK;
    size_t at = (a->used + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    if (!a->measuring && at + t->nbytes > a->cap)
        return ERR(PT_ERR_INTERNAL, "activation arena of %zu bytes is full (%zu more needed for [%lld, %lld])",
                   a->cap, at + t->nbytes - a->cap, (long long)rows, (long long)cols);
    if (!a->measuring) t->data = (char *)a->mem.data + at;
    a->used = at + t->nbytes;
    if (a->used > a->high) a->high = a->used;
    return PT_OK;
}

pt_status arena_take(pt_arena *a, pt_tensor *t, int64_t rows, int64_t cols)
{
    return take(a, t, a->act, rows, cols);
}

pt_status arena_take_f32(pt_arena *a, pt_tensor *t, int64_t rows, int64_t cols)
{
    return take(a, t, PT_F32, rows, cols);
}

void arena_close(pt_arena *a)
{
    if (a->be && a->mem.data) backend_release(a->be, &a->mem);
    memset(a, 0, sizeof *a);
}
