/* backend_cpu.c — the CPU backend: host memory, OpenMP/OpenBLAS threads; MPI sums in comm.c.
 * The CPU backend is a product in its own right (laptops, CI, small models) and the reference
 * every other backend is tested against. Its ops live in one file per op family beside this. */
#ifdef HAVE_CONFIG_H
#include <config.h>
#endif
#include <cblas.h>
#include <omp.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu.h"

static void cpu_close(pt_backend *be)
{
    cpu_comm *c = be->ctx;
    if (c) free(c->req);
    free(c);
    free(be);
}

enum { PAGE = 4096, HUGE_MIN = 8 << 20 };

static pt_status cpu_alloc(pt_backend *be, pt_tensor *t)
{
    (void)be;
    t->data = NULL;
    if (t->nbytes == 0) return PT_OK;
    /* 64-byte alignment for vector loads; size rounded up as aligned_alloc requires. Large
     * tensors (activations, the weights) start on a page and ask for transparent huge pages (the
     * whole 2 MiB pages inside them), which most kernels give only on request (madvise mode):
     * fewer page faults and TLB misses over gigabytes of activations. */
    bool huge = t->nbytes >= HUGE_MIN;
    size_t align = huge ? PAGE : 64;
    t->data = aligned_alloc(align, (t->nbytes + align - 1) & ~(align - 1));
    if (!t->data) return ERR(PT_ERR_NOMEM, "out of host memory allocating %zu bytes", t->nbytes);
#ifdef MADV_HUGEPAGE
    if (huge) madvise(t->data, (t->nbytes + align - 1) & ~(align - 1), MADV_HUGEPAGE); /* a hint: failure is fine */
#endif
    return PT_OK;
}

static void cpu_release(pt_backend *be, pt_tensor *t)
{
    (void)be;
    free(t->data);
}

static pt_status cpu_upload(pt_backend *be, pt_tensor *dst, const void *host, size_t nbytes)
{
    (void)be;
    memcpy(dst->data, host, nbytes);
    return PT_OK;
}

static pt_status cpu_download(pt_backend *be, const pt_tensor *src, void *host, size_t nbytes)
{
    (void)be;
    memcpy(host, src->data, nbytes);
    return PT_OK;
}

static pt_status cpu_synchronize(pt_backend *be)
{
    (void)be;
    return PT_OK;
}

/* Offloading on the CPU: the "host" is the same memory, so a copy happens at once. */
static pt_status cpu_host_alloc(pt_backend *be, size_t bytes, void **p)
{
    (void)be;
    *p = malloc(bytes ? bytes : 1);
    return *p ? PT_OK : ERR(PT_ERR_NOMEM, "out of host memory allocating %zu bytes", bytes);
}

static void cpu_host_free(pt_backend *be, void *p)
{
    (void)be;
    free(p);
}

static pt_status cpu_to_host_async(pt_backend *be, void *host, const pt_tensor *src)
{
    return cpu_download(be, src, host, src->nbytes);
}

static pt_status cpu_from_host_async(pt_backend *be, pt_tensor *dst, const void *host)
{
    return cpu_upload(be, dst, host, dst->nbytes);
}

static const pt_backend_ops cpu_ops = {
    .name = "cpu",
    .close = cpu_close,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_download,
    .synchronize = cpu_synchronize,
    .matmul = cpu_matmul,
    .matmul_bwd_input = cpu_matmul_bwd_input,
    .matmul_bwd_weight = cpu_matmul_bwd_weight,
    .embed = cpu_embed,
    .embed_bwd = cpu_embed_bwd,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rope_fwd = cpu_rope_fwd,
    .rope_bwd = cpu_rope_bwd,
    .pos_scale = cpu_pos_scale,
    .attention_fwd = cpu_attention_fwd,
    .swiglu_fwd = cpu_swiglu_fwd,
    .swiglu_clamp_fwd = cpu_swiglu_clamp_fwd,
    .add = cpu_add,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .add_rmsnorm = cpu_add_rmsnorm,
    .swiglu_bwd = cpu_swiglu_bwd,
    .geglu_fwd = cpu_geglu_fwd,
    .geglu_bwd = cpu_geglu_bwd,
    .add_bias = cpu_add_bias,
    .dora_norm = cpu_dora_norm,
    .dora_scale = cpu_dora_scale,
    .dora_mag_bwd = cpu_dora_mag_bwd,
    .conv1d_silu = cpu_conv1d_silu,
    .delta_gates = cpu_delta_gates,
    .delta_rule = cpu_delta_rule,
    .delta_chunk = cpu_delta_chunk,
    .sigmoid_mul = cpu_sigmoid_mul,
    .conv1d_silu_bwd = cpu_conv1d_silu_bwd,
    .delta_gates_bwd = cpu_delta_gates_bwd,
    .delta_rule_bwd = cpu_delta_rule_bwd,
    .delta_chunk_bwd = cpu_delta_chunk_bwd,
    .sigmoid_mul_bwd = cpu_sigmoid_mul_bwd,
    .softcap_fwd = cpu_softcap_fwd,
    .softcap_bwd = cpu_softcap_bwd,
    .attention_bwd = cpu_attention_bwd,
    .cross_entropy = cpu_cross_entropy,
    .adamw_step = cpu_adamw_step,
    .sum_squares = cpu_sum_squares,
    .scale = cpu_scale,
    .dropout = cpu_dropout,
    .allreduce_sum = cpu_allreduce_sum,
    .reduce_begin = cpu_reduce_begin,
    .reduce_poll = cpu_reduce_poll,
    .reduce_end = cpu_reduce_end,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .host_alloc = cpu_host_alloc,
    .host_free = cpu_host_free,
    .to_host_async = cpu_to_host_async,
    .from_host_async = cpu_from_host_async,
    .copies_wait = cpu_synchronize,
    .moe_route = cpu_moe_route,
    .moe_gather = cpu_moe_gather,
    .moe_combine = cpu_moe_combine,
    .moe_combine_bwd = cpu_moe_combine_bwd,
    .moe_route_bwd = cpu_moe_route_bwd,
    .moe_matmul = cpu_moe_matmul,
    .moe_matmul_bwd_input = cpu_moe_matmul_bwd_input,
    .moe_matmul_bwd_weight = cpu_moe_matmul_bwd_weight,
};

pt_status cpu_backend_open(const pt_backend_options *opts, pt_backend **out)
{
    pt_backend *be = calloc(1, sizeof *be);
    TRY_ALLOC(be);
    be->ops = &cpu_ops;
    be->device = -1;
    be->act = PT_F32; /* the CPU backend computes in fp32 throughout */
    be->ctx = calloc(1, sizeof(cpu_comm));
    if (!be->ctx) {
        free(be);
        return ERR(PT_ERR_NOMEM, "out of memory");
    }
    /* Keep freed activation buffers in the heap: training allocates the same large buffers every
     * micro-batch, and glibc would otherwise return them to the kernel and fault fresh zeroed
     * pages in again each time. */
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's largest on 64-bit (a larger value is refused) */
    mallopt(M_TRIM_THRESHOLD, -1); /* never trim (mallopt(3)); INT_MAX did not hold once a step freed > 2 GiB */
    if (opts->threads > 0) {
        omp_set_num_threads(opts->threads);
        openblas_set_num_threads(opts->threads);
    }
    *out = be;
    return PT_OK;
}
