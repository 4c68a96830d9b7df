/* emu.cc — a CPU SIMT emulator that runs the CUDA backend's real kernel source (the .cu files of cuda/, rewritten
 * only by rewrite.sed) on the CPU, so that CI machines without a GPU run tests/unit/test_cuda_ops and
 * test_cuda_model against the CPU backend (tests/emu/test_cuda_*_emu; docs/cuda-backend.md).
 *
 * What it checks: the kernels' indexing, masks, bounds, barriers (a missing __syncthreads shows up
 * because the threads of a block run in an order that alternates per block; a barrier or shuffle
 * not reached by every thread of its block or warp is reported as a deadlock), warp shuffles and
 * votes, aliasing of inputs and outputs, unwritten outputs and uninitialised reads (device memory
 * and shared memory are NaN bytes until written: shared memory per block), launch shapes (block
 * size, grid limits, dynamic shared memory over 48 KiB without cudaFuncSetAttribute), and the host
 * wrappers: staging, the memory pool, cuBLAS and cuBLASLt arguments (column-major shapes, leading
 * dimensions, types, pointer alignment against the algorithm's, the workspace), error paths.
 * What it cannot check: speed, occupancy, the GPU's memory model (threads of a block interleave
 * only at barriers and warp collectives here; real warps run in lockstep and blocks run
 * concurrently, so a race between blocks or a missing __syncwarp/__threadfence is not seen),
 * streams and events (everything runs at once, in program order), the hardware's expf/tanhf/
 * rsqrtf ulps and FMA contraction (the host libm and compiler are used), the per-architecture
 * shared-memory and register limits, and out-of-bounds accesses that land in other host memory.
 *
 * Scheme: one fiber (ucontext) per CUDA thread of a block, all on this one OS thread; the blocks of
 * a grid run one after another. A fiber runs until it finishes or reaches __syncthreads or a warp
 * collective; when every live thread of the block waits at the barrier they all go on, and when all
 * 32 lanes of a warp wait at a collective it is resolved (shuffle: each lane gets its source lane's
 * value; any: the OR; the tensor-core mma and ldmatrix of cuda/mma.h: emu_mma.cc). Fibers cost a
 * context switch, not an OS thread, so a launch of n threads costs about n switches plus its
 * arithmetic. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <vector>

#include <cblas.h>
#include <cublasLt.h>

#include "cuda_backend.h"
#include "emu_internal.h"

/* An emulated GPU is about a thousand times slower than the CPU backend: the test programs linked
 * with it run their small sizes unless PTRAIN_TEST_SMALL is set otherwise (0: the full sizes). */
__attribute__((constructor)) static void emu_default_small(void) { setenv("PTRAIN_TEST_SMALL", "1", 0); }

dim3 threadIdx, blockIdx, blockDim, gridDim;
static cudaError_t last_error; /* cudaGetLastError's */

void emu_fail(cudaError_t e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "CUDA emulator: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    if (!last_error) last_error = e;
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument (emulated)";
    case cudaErrorMemoryAllocation: return "out of memory (emulated)";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument (emulated)";
    case cudaErrorLaunchFailure: return "unspecified launch failure (emulated: see the message above)";
    default: return "emulated CUDA error";
    }
}

/* ---- device, streams, events ---- */

/* Limits: threads per block; each fiber's stack; static shared memory; dynamic shared memory a
 * block may opt in to (the launch check: sm_90's; what cudaDeviceGetAttribute reports: sm_80's,
 * the smaller of the two architectures the backend is built for) */
enum { MAX_THREADS = 1024, STACK_BYTES = 128 << 10, STATIC_SMEM = 48 << 10, MAX_DYN_SMEM = 227 << 10,
       SM80_DYN_SMEM = 166912 };

static char dummy_object; /* what every stream, event, pool and handle points at */

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device)
{
    if (device != 0) return cudaErrorInvalidValue;
    if (attr == cudaDevAttrMultiProcessorCount) *value = 8;
    else if (attr == cudaDevAttrMaxSharedMemoryPerBlockOptin) *value = SM80_DYN_SMEM; /* the smallest target's */
    else return cudaErrorInvalidValue;
    return cudaSuccess;
}
static size_t used_bytes, used_high;
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
    /* a 16 GiB device; EMU_DEVICE_BYTES makes it smaller (the memory plan's refusal is tested so) */
    const char *e = getenv("EMU_DEVICE_BYTES");
    *total_bytes = e ? (size_t)strtoull(e, NULL, 10) : (size_t)16 << 30;
    *free_bytes = *total_bytes > used_bytes ? *total_bytes - used_bytes : 0;
    return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned) { *s = (cudaStream_t)&dummy_object; return 0; }
cudaError_t cudaStreamDestroy(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned) { *e = (cudaEvent_t)&dummy_object; return 0; }
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }

/* ---- memory: 256-byte aligned like cudaMalloc, its size in a header, NaN bytes until written ---- */

enum { HEAD = 256 };

static void *emu_alloc(size_t n)
{
    char *p = (char *)aligned_alloc(HEAD, HEAD + (n + HEAD - 1) / HEAD * HEAD);
    if (!p) return NULL;
    memcpy(p, &n, sizeof n);
    memset(p + HEAD, 0xff, n); /* NaN as fp32, fp64 and bf16 */
    used_bytes += n;
    if (used_bytes > used_high) used_high = used_bytes;
    return p + HEAD;
}
static void emu_release(void *q)
{
    if (!q) return;
    char *p = (char *)q - HEAD;
    size_t n;
    memcpy(&n, p, sizeof n);
    memset(q, 0xff, n); /* a use after free reads NaN */
    used_bytes -= n;
    free(p);
}
cudaError_t cudaMalloc(void **p, size_t n) { return (*p = emu_alloc(n)) ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFree(void *p)
{
    emu_release(p);
    return cudaSuccess;
}
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t) { return cudaMalloc(p, n); }
cudaError_t cudaFreeAsync(void *p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMallocHost(void **p, size_t n) { return cudaMalloc(p, n); }
cudaError_t cudaFreeHost(void *p) { return cudaFree(p); }
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t)
{
    if (n) memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind, cudaStream_t)
{
    if (n && (!d || !s)) return cudaErrorInvalidValue;
    if (n) memmove(d, s, n);
    return cudaSuccess;
}
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device)
{
    *pool = (cudaMemPool_t)&dummy_object;
    return device == 0 ? cudaSuccess : cudaErrorInvalidDevice;
}
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void *) { return cudaSuccess; }
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t, cudaMemPoolAttr attr, void *value)
{
    if (attr != cudaMemPoolAttrUsedMemHigh) return cudaErrorInvalidValue;
    uint64_t v = used_high;
    memcpy(value, &v, sizeof v);
    return cudaSuccess;
}

/* ---- kernels ---- */


enum { F_READY, F_BARRIER, F_WARP, F_DONE };

typedef struct {
    ucontext_t uc;
    int state, op, src, param;
    uint64_t in, out;         /* a shuffle's or vote's operand and result */
    const void *vin;          /* a vector collective's operands (emu_warp_vector) */
    void *vout;
} fiber;

static fiber fibers[MAX_THREADS];
static char *stacks;
static ucontext_t sched_uc;
static int cur;            /* the fiber running */
static unsigned n_threads; /* of the block */
static void (*cur_body)(void *);
static void *cur_arg;
static bool in_kernel;

static char *dyn_smem;
static size_t dyn_smem_bytes, static_smem_bytes;
static uint64_t block_serial; /* the block running, counted over all launches */
static struct {
    void *p;
    size_t n;
    uint64_t serial;
} shared_seen[64];

static void set_thread_index(int t)
{
    threadIdx = dim3(t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y));
}

static void yield(int state)
{
    fibers[cur].state = state;
    swapcontext(&fibers[cur].uc, &sched_uc);
}

void emu_syncthreads(void) { yield(F_BARRIER); }

void emu_check_mask(unsigned mask)
{
    if (mask != 0xffffffffu) emu_fail(cudaErrorLaunchFailure, "a warp collective with mask %#x (only full warps are emulated)", mask);
}

uint64_t emu_warp_op(int op, uint64_t v, int src)
{
    fibers[cur].op = op;
    fibers[cur].param = 0;
    fibers[cur].in = v;
    fibers[cur].src = src;
    yield(F_WARP);
    return fibers[cur].out;
}

void emu_warp_vector(int op, int param, const void *in, void *out)
{
    fibers[cur].op = op;
    fibers[cur].param = param;
    fibers[cur].vin = in;
    fibers[cur].vout = out;
    yield(F_WARP);
}

int emu_thread(void) { return cur; }
unsigned emu_block_threads(void) { return n_threads; }
uint64_t emu_block_serial(void) { return block_serial; }
bool emu_in_kernel(void) { return in_kernel; }

char *emu_dyn_smem(size_t *bytes)
{
    *bytes = dyn_smem_bytes;
    return dyn_smem;
}

bool emu_in_shared(const void *p, size_t n)
{
    const char *c = (const char *)p;
    if (dyn_smem && c >= dyn_smem && c + n <= dyn_smem + dyn_smem_bytes) return true;
    for (size_t i = 0; i < sizeof shared_seen / sizeof shared_seen[0] && shared_seen[i].p; i++) {
        const char *s = (const char *)shared_seen[i].p;
        if (c >= s && c + n <= s + shared_seen[i].n) return true;
    }
    return false;
}

void emu_shared_init(void *p, size_t n)
{
    for (size_t i = 0; i < sizeof shared_seen / sizeof shared_seen[0]; i++) {
        if (shared_seen[i].p == p) {
            if (shared_seen[i].serial == block_serial) return; /* an earlier thread of this block poisoned it */
            shared_seen[i].serial = block_serial;
            break;
        }
        if (!shared_seen[i].p) {
            shared_seen[i].p = p;
            shared_seen[i].n = n;
            shared_seen[i].serial = block_serial;
            break;
        }
    }
    static_smem_bytes += n; /* counted by the first thread of each block */
    if (static_smem_bytes + dyn_smem_bytes > STATIC_SMEM && static_smem_bytes > STATIC_SMEM)
        emu_fail(cudaErrorLaunchFailure, "%zu bytes of static shared memory (at most %d)", static_smem_bytes,
                 (int)STATIC_SMEM);
    memset(p, 0xff, n);
}

void *emu_dyn_shared(void) { return dyn_smem; }

static struct {
    const void *kernel;
    int max_dyn;
} func_attr[64];

cudaError_t emu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value)
{
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > MAX_DYN_SMEM)
        return cudaErrorInvalidValue;
    for (size_t i = 0; i < sizeof func_attr / sizeof func_attr[0]; i++)
        if (func_attr[i].kernel == kernel || !func_attr[i].kernel) {
            func_attr[i].kernel = kernel;
            func_attr[i].max_dyn = value;
            return cudaSuccess;
        }
    return cudaErrorInvalidValue;
}

static int max_dyn_of(const void *kernel)
{
    for (size_t i = 0; i < sizeof func_attr / sizeof func_attr[0] && func_attr[i].kernel; i++)
        if (func_attr[i].kernel == kernel) return func_attr[i].max_dyn;
    return STATIC_SMEM;
}

static void fiber_main(void)
{
    cur_body(cur_arg);
    fibers[cur].state = F_DONE; /* uc_link returns to the scheduler */
}

/* Every lane of a warp waits at a collective: resolve it. false: the lanes disagree. */
static bool warp_resolve(int w)
{
    fiber *f = &fibers[w * 32];
    for (int l = 1; l < 32; l++)
        if (f[l].op != f[0].op || f[l].param != f[0].param) return false;
    if (f[0].op == EMU_OP_LDMATRIX || f[0].op == EMU_OP_MMA) {
        const void *in[32];
        void *out[32];
        for (int l = 0; l < 32; l++) in[l] = f[l].vin, out[l] = f[l].vout;
        (f[0].op == EMU_OP_MMA ? emu_mma_resolve : emu_ldmatrix_resolve)(in, out, f[0].param);
    } else {
        uint64_t any = 0;
        for (int l = 0; l < 32; l++) any |= f[l].in;
        for (int l = 0; l < 32; l++) f[l].out = f[0].op == EMU_OP_ANY ? any != 0 : f[f[l].src].in;
    }
    for (int l = 0; l < 32; l++) f[l].state = F_READY;
    return true;
}

/* Run one block to its end. false: it deadlocked (reported). */
static bool run_block(bool reverse)
{
    for (unsigned t = 0; t < n_threads; t++) {
        fiber *f = &fibers[t];
        f->uc.uc_stack.ss_sp = stacks + (size_t)t * STACK_BYTES;
        f->uc.uc_stack.ss_size = STACK_BYTES;
        f->uc.uc_link = &sched_uc;
        makecontext(&f->uc, fiber_main, 0);
        f->state = F_READY;
    }
    for (;;) {
        for (unsigned i = 0; i < n_threads; i++) {
            int t = reverse ? (int)(n_threads - 1 - i) : (int)i;
            if (fibers[t].state != F_READY) continue;
            cur = t;
            set_thread_index(t);
            swapcontext(&sched_uc, &fibers[t].uc);
        }
        unsigned done = 0, barrier = 0, warp = 0;
        bool woke = false;
        for (unsigned w = 0; w < n_threads / 32; w++) {
            unsigned at = 0;
            for (int l = 0; l < 32; l++) at += fibers[w * 32 + l].state == F_WARP;
            if (at == 32) {
                if (!warp_resolve((int)w)) {
                    emu_fail(cudaErrorLaunchFailure, "block (%u,%u,%u) warp %u: lanes at different warp collectives",
                             blockIdx.x, blockIdx.y, blockIdx.z, w);
                    return false;
                }
                woke = true;
            }
        }
        if (woke) continue;
        for (unsigned t = 0; t < n_threads; t++) {
            done += fibers[t].state == F_DONE;
            barrier += fibers[t].state == F_BARRIER;
            warp += fibers[t].state == F_WARP;
        }
        if (done == n_threads) return true;
        if (barrier + done == n_threads) {
            for (unsigned t = 0; t < n_threads; t++)
                if (fibers[t].state == F_BARRIER) fibers[t].state = F_READY;
            continue;
        }
        emu_fail(cudaErrorLaunchFailure,
                 "block (%u,%u,%u) of %u threads deadlocked: %u at __syncthreads, %u at a warp collective whose warp "
                 "is not all there, %u finished",
                 blockIdx.x, blockIdx.y, blockIdx.z, n_threads, barrier, warp, done);
        return false;
    }
}

void emu_run(const void *kernel, void (*body)(void *), void *arg, dim3 grid, dim3 block, size_t smem)
{
    unsigned n = block.x * block.y * block.z;
    if (n == 0 || n > MAX_THREADS || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
        grid.z > 65535 || grid.x > 2147483647u) {
        emu_fail(cudaErrorInvalidConfiguration, "invalid launch: grid (%u,%u,%u) block (%u,%u,%u)", grid.x, grid.y,
                 grid.z, block.x, block.y, block.z);
        return;
    }
    if (smem > (size_t)max_dyn_of(kernel)) {
        emu_fail(cudaErrorInvalidValue, "launch with %zu bytes of dynamic shared memory; the kernel allows %d "
                 "(cudaFuncSetAttribute)", smem, max_dyn_of(kernel));
        return;
    }
    if (n % 32) { /* whole warps: what the emulated collectives assume, and what the backend launches */
        emu_fail(cudaErrorInvalidConfiguration, "a block of %u threads, not whole warps", n);
        return;
    }
    if (in_kernel) {
        emu_fail(cudaErrorLaunchFailure, "a launch from inside a kernel");
        return;
    }
    if (!stacks) {
        stacks = (char *)mmap(NULL, (size_t)MAX_THREADS * STACK_BYTES, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (stacks == MAP_FAILED) {
            perror("CUDA emulator: mmap of the fiber stacks");
            abort();
        }
        for (int t = 0; t < MAX_THREADS; t++) getcontext(&fibers[t].uc);
    }
    free(dyn_smem);
    dyn_smem = (char *)aligned_alloc(16, (smem + 15) / 16 * 16 + 16);
    dyn_smem_bytes = smem;
    n_threads = n;
    gridDim = grid;
    blockDim = block;
    cur_body = body;
    cur_arg = arg;
    in_kernel = true;
    for (unsigned z = 0; z < grid.z; z++)
        for (unsigned y = 0; y < grid.y; y++)
            for (unsigned x = 0; x < grid.x; x++) {
                blockIdx = dim3(x, y, z);
                block_serial++;
                static_smem_bytes = 0;
                memset(dyn_smem, 0xff, smem);
                if (!run_block(block_serial & 1)) goto out;
            }
out:
    in_kernel = false;
}

/* ---- cuBLAS: its argument checks, then OpenBLAS on fp32 copies ---- */

cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = (cublasHandle_t)&dummy_object;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t) { return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetStream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }

static bool gemm_args_ok(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    int ar = ta == CUBLAS_OP_N ? m : k, br = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (ar > 1 ? ar : 1) || ldb < (br > 1 ? br : 1) || ldc < (m > 1 ? m : 1) ||
        (ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T)) {
        fprintf(stderr, "CUDA emulator: cuBLAS invalid value: ta %d tb %d m %d n %d k %d lda %d ldb %d ldc %d\n", ta,
                tb, m, n, k, lda, ldb, ldc);
        return false;
    }
    return true;
}

/* Column-major op(A) [m,k] as a dense fp32 matrix [m,k], column-major (ld m). */
template <class T, class F>
static float *widen(const T *a, int lda, bool trans, int m, int k, F conv)
{
    float *o = (float *)malloc(sizeof(float) * ((size_t)m * k + 1));
    if (!o) abort();
    for (int j = 0; j < k; j++)
        for (int i = 0; i < m; i++) o[i + (size_t)j * m] = conv(trans ? a[j + (size_t)i * lda] : a[i + (size_t)j * lda]);
    return o;
}

template <class T, class F>
static void gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const T *A, int lda,
                 const T *B, int ldb, float beta, float *C, int ldc, F conv)
{
    if (m == 0 || n == 0) return;
    if (beta == 0.0f) /* cuBLAS does not read C then: NaN there must not leak */
        for (int j = 0; j < n; j++) memset(C + (size_t)j * ldc, 0, sizeof(float) * (size_t)m);
    if (k == 0) {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) C[i + (size_t)j * ldc] *= beta;
        return;
    }
    float *a = widen(A, lda, ta == CUBLAS_OP_T, m, k, conv), *b = widen(B, ldb, tb == CUBLAS_OP_T, k, n, conv);
    cblas_sgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, m, n, k, alpha, a, m, b, k, beta, C, ldc);
    free(a);
    free(b);
}

/* The same with a bf16 C: through an fp32 copy of it, rounded back once (cuBLAS's epilogue). */
template <class T, class F>
static void gemm_c16(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k, float alpha, const T *A, int lda,
                     const T *B, int ldb, float beta, __nv_bfloat16 *C, int ldc, F conv)
{
    float *f = (float *)malloc(sizeof(float) * ((size_t)m * n + 1));
    if (!f) abort();
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) f[i + (size_t)j * m] = beta == 0.0f ? 0.0f : __bfloat162float(C[i + (size_t)j * ldc]);
    gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, f, m > 0 ? m : 1, conv);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) C[i + (size_t)j * ldc] = __float2bfloat16_rn(f[i + (size_t)j * m]);
    free(f);
}

static float bf16_value(__nv_bfloat16 v) { return __bfloat162float(v); }

cublasStatus_t cublasGemmEx(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                            cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                            cublasComputeType_t comp, cublasGemmAlgo_t)
{
    if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
    if (at != CUDA_R_16BF || bt != CUDA_R_16BF || (ct != CUDA_R_32F && ct != CUDA_R_16BF) ||
        comp != CUBLAS_COMPUTE_32F) {
        fprintf(stderr, "CUDA emulator: cublasGemmEx with types it does not emulate\n");
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    float al = *(const float *)alpha, be = *(const float *)beta;
    const __nv_bfloat16 *a = (const __nv_bfloat16 *)A, *b = (const __nv_bfloat16 *)B;
    if (ct == CUDA_R_16BF) gemm_c16(ta, tb, m, n, k, al, a, lda, b, ldb, be, (__nv_bfloat16 *)C, ldc, bf16_value);
    else gemm(ta, tb, m, n, k, al, a, lda, b, ldb, be, (float *)C, ldc, bf16_value);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSgemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                           float *C, int ldc)
{
    if (!gemm_args_ok(ta, tb, m, n, k, lda, ldb, ldc)) return CUBLAS_STATUS_INVALID_VALUE;
    gemm(ta, tb, m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc, [](float v) { return v; });
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetWorkspace(cublasHandle_t, void *workspace, size_t bytes)
{
    if (bytes && (!workspace || (uintptr_t)workspace % 256)) {
        fprintf(stderr, "CUDA emulator: cublasSetWorkspace with %p, not 256-byte aligned\n", workspace);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- cuBLASLt: descriptors as host structs, a heuristic that honours the preference, then the
 * argument checks and OpenBLAS as for cuBLAS ---- */

struct emu_lt_handle_s {
    std::vector<uint64_t> asked; /* the problems the heuristic was asked about (emu_lt_problem) */
};
struct emu_lt_desc_s {
    int32_t comp, scale, op[2];
};
struct emu_lt_layout_s {
    int32_t type;
    uint64_t rows, cols;
    int64_t ld;
};
struct emu_lt_pref_s {
    uint64_t max_workspace;
    uint32_t schemes, align[4];
};
static const uint64_t LT_MAGIC = 0x4c54616c676full; /* "LTalgo": an algorithm this heuristic made */
static long lt_matmuls;                              /* cublasLtMatmul calls run */

/* For tests/unit/test_cuda_ops: whether the fast path went through cuBLASLt here. */
extern "C" long emu_lt_matmul_calls(void) { return lt_matmuls; }

static bool lt_bad(const char *what)
{
    fprintf(stderr, "CUDA emulator: cuBLASLt invalid value: %s\n", what);
    return false;
}
static cublasStatus_t lt_invalid(const char *what)
{
    lt_bad(what);
    return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = new emu_lt_handle_s();
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t comp, cudaDataType scale)
{
    *d = new emu_lt_desc_s{comp, scale, {CUBLAS_OP_N, CUBLAS_OP_N}};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    delete d;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t size)
{
    bool known = attr == CUBLASLT_MATMUL_DESC_TRANSA || attr == CUBLASLT_MATMUL_DESC_TRANSB;
    if (!d || !buf || !known || size != sizeof(int32_t))
        return lt_invalid("a matmul descriptor attribute not emulated, or of the wrong size");
    memcpy(&d->op[attr == CUBLASLT_MATMUL_DESC_TRANSB], buf, size);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type, uint64_t rows, uint64_t cols,
                                          int64_t ld)
{
    *l = new emu_lt_layout_s{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    delete l;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{ /* cuBLASLt's defaults: no workspace, every reduction scheme, 256-byte alignment */
    *p = new emu_lt_pref_s{0, CUBLASLT_REDUCTION_SCHEME_MASK, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t size)
{
    bool wide = attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES;
    bool align = attr >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
                 attr <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES;
    bool known = wide || align || attr == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK;
    if (!p || !buf || !known || size != (wide ? sizeof(uint64_t) : sizeof(uint32_t)))
        return lt_invalid("a preference attribute not emulated, or of the wrong size");
    if (wide) memcpy(&p->max_workspace, buf, size);
    else if (attr == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK) memcpy(&p->schemes, buf, size);
    else memcpy(&p->align[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

/* op(A) [m,k] op(B) [k,n] -> C, D [m,n], column-major, the types cuda/lt.cu uses (bf16 A and B,
 * fp32 or bf16 C and D, fp32 compute and scale), C's layout D's, leading dimensions at least the rows. */
static bool lt_problem(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                       cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t dl, int *m, int *n, int *k)
{
    if (!d || !a || !b || !c || !dl) return lt_bad("a NULL descriptor or layout");
    if (d->comp != CUBLAS_COMPUTE_32F || d->scale != CUDA_R_32F || a->type != CUDA_R_16BF || b->type != CUDA_R_16BF ||
        (c->type != CUDA_R_32F && c->type != CUDA_R_16BF) || dl->type != c->type)
        return lt_bad("types other than bf16 x bf16 -> fp32 or bf16 with fp32 compute");
    if (c->rows != dl->rows || c->cols != dl->cols || c->ld != dl->ld) return lt_bad("C and D laid out apart");
    bool ta = d->op[0] == CUBLAS_OP_T, tb = d->op[1] == CUBLAS_OP_T;
    *m = (int)c->rows, *n = (int)c->cols, *k = (int)(ta ? a->rows : a->cols);
    bool ops_ok = (d->op[0] == CUBLAS_OP_N || ta) && (d->op[1] == CUBLAS_OP_N || tb);
    if (!ops_ok || (ta ? a->cols : a->rows) != c->rows || (tb ? b->rows : b->cols) != c->cols ||
        (tb ? b->cols : b->rows) != (uint64_t)*k) {
        fprintf(stderr, "CUDA emulator: cuBLASLt shapes: op %d %d, A %llux%llu, B %llux%llu, C %llux%llu\n", d->op[0],
                d->op[1], (unsigned long long)a->rows, (unsigned long long)a->cols, (unsigned long long)b->rows,
                (unsigned long long)b->cols, (unsigned long long)c->rows, (unsigned long long)c->cols);
        return false;
    }
    const cublasLtMatrixLayout_t all[] = {a, b, c};
    for (auto l : all)
        if (l->ld < (int64_t)(l->rows > 1 ? l->rows : 1)) return lt_bad("a leading dimension below the rows");
    return true;
}

/* One number per problem: the descriptor and the layouts (FNV-1a over their fields). */
static uint64_t lt_problem_id(cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                              cublasLtMatrixLayout_t c)
{
    const uint64_t f[] = {(uint64_t)d->op[0], (uint64_t)d->op[1], a->rows, a->cols, (uint64_t)a->ld, b->rows, b->cols,
                          (uint64_t)b->ld, c->rows, c->cols, (uint64_t)c->ld, (uint64_t)c->type};
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint64_t v : f)
        for (int i = 0; i < 8; i++) h = (h ^ ((v >> (8 * i)) & 0xff)) * 0x100000001b3ull;
    return h;
}

/* Two candidates, the preference permitting: split-K in 4 with a separate reduction in the
 * workspace (what a real heuristic may rank first for a long K), then one pass over K. Each
 * carries the problem it was made for, its scheme, its workspace and the alignment it assumes. */
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,
                                              cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                                              cublasLtMatrixLayout_t dl, cublasLtMatmulPreference_t p, int want,
                                              cublasLtMatmulHeuristicResult_t out[], int *got)
{
    int m, n, k;
    if (!h || !p || want < 1 || !lt_problem(d, a, b, c, dl, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t id = lt_problem_id(d, a, b, c);
    for (uint64_t seen : h->asked)
        if (seen == id) return lt_invalid("the heuristic asked twice for one problem (ptrain keeps each plan)");
    h->asked.push_back(id);
    uint32_t align = 256;
    for (uint32_t v : p->align) align = v < align ? v : align;
    uint64_t split_ws = (uint64_t)4 * m * n * sizeof(float);
    *got = 0;
    for (int i = 0; i < 2 && *got < want; i++) {
        uint32_t scheme = i == 0 ? CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE : CUBLASLT_REDUCTION_SCHEME_NONE;
        uint64_t ws = i == 0 ? split_ws : 0;
        if ((scheme && !(p->schemes & scheme)) || ws > p->max_workspace) continue;
        cublasLtMatmulHeuristicResult_t *r = &out[(*got)++];
        memset(r, 0, sizeof *r);
        r->algo.data[0] = LT_MAGIC, r->algo.data[1] = id, r->algo.data[2] = scheme, r->algo.data[3] = ws;
        r->algo.data[4] = align;
        r->workspaceSize = ws;
        r->state = CUBLAS_STATUS_SUCCESS;
        r->wavesCount = 1.0f;
    }
    return *got ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_NOT_SUPPORTED;
}

cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t *algo,
                                                    cublasLtMatmulAlgoConfigAttributes_t attr, void *buf, size_t size,
                                                    size_t *written)
{
    if (!algo || algo->data[0] != LT_MAGIC || attr != CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME || !buf ||
        size != sizeof(uint32_t))
        return lt_invalid("an algorithm attribute this emulator does not know, or of the wrong size");
    uint32_t scheme = (uint32_t)algo->data[2];
    memcpy(buf, &scheme, sizeof scheme);
    if (written) *written = sizeof scheme;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B, cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t dl,
                              const cublasLtMatmulAlgo_t *algo, void *workspace, size_t workspace_bytes, cudaStream_t)
{
    int m, n, k;
    if (!h || !alpha || !beta || !lt_problem(d, a, b, c, dl, &m, &n, &k)) return CUBLAS_STATUS_INVALID_VALUE;
    if (!algo || algo->data[0] != LT_MAGIC || algo->data[1] != lt_problem_id(d, a, b, c))
        return lt_invalid("an algorithm the heuristic chose for another problem");
    uint64_t align = algo->data[4];
    const void *ptrs[] = {A, B, C, D};
    for (const void *q : ptrs)
        if (!q || (uintptr_t)q % align) {
            fprintf(stderr, "CUDA emulator: cuBLASLt operand %p is not %llu-byte aligned as the algorithm assumes\n", q,
                    (unsigned long long)align);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    if (workspace_bytes < algo->data[3] || (workspace_bytes && (!workspace || (uintptr_t)workspace % 256)))
        return lt_invalid("a workspace smaller than the algorithm's, or not 256-byte aligned");
    float al = *(const float *)alpha, be = *(const float *)beta;
    size_t esize = c->type == CUDA_R_16BF ? 2 : 4;
    if (D != C && be != 0.0f)
        for (int j = 0; j < n; j++)
            memmove((char *)D + (size_t)j * dl->ld * esize, (const char *)C + (size_t)j * c->ld * esize, esize * m);
    cublasOperation_t ta = d->op[0] == CUBLAS_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = d->op[1] == CUBLAS_OP_T ? CUBLAS_OP_T : CUBLAS_OP_N;
    const __nv_bfloat16 *ap = (const __nv_bfloat16 *)A, *bp = (const __nv_bfloat16 *)B;
    if (c->type == CUDA_R_16BF)
        gemm_c16(ta, tb, m, n, k, al, ap, (int)a->ld, bp, (int)b->ld, be, (__nv_bfloat16 *)D, (int)dl->ld, bf16_value);
    else
        gemm(ta, tb, m, n, k, al, ap, (int)a->ld, bp, (int)b->ld, be, (float *)D, (int)dl->ld, bf16_value);
    lt_matmuls++;
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- NCCL: sums over the ranks of MPI_COMM_WORLD (emu_mpi.c) ---- */

extern "C" int emu_mpi_allreduce_f32(float *buf, size_t n);
extern "C" int emu_mpi_same_id(const void *id, size_t n, int rank, int nranks);

struct emu_nccl_s {
    int rank, nranks;
    int in_progress; /* a non-blocking init reports ncclInProgress once, as NCCL may */
};

const char *ncclGetErrorString(ncclResult_t r)
{
    return r == ncclSuccess ? "no error" : r == ncclInProgress ? "in progress" : "emulated NCCL: invalid usage";
}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{ /* different in every process, so that a rank that missed rank 0's broadcast is caught */
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "ptrain CUDA emulator %ld %p", (long)getpid(), (void *)id);
    return ncclSuccess;
}
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t *config)
{
    if (nranks < 1 || rank < 0 || rank >= nranks || !emu_mpi_same_id(&id, sizeof id, rank, nranks))
        return ncclInvalidUsage;
    emu_nccl_s *c = (emu_nccl_s *)calloc(1, sizeof *c);
    if (!c) return ncclInvalidUsage;
    c->rank = rank, c->nranks = nranks, c->in_progress = config && !config->blocking;
    *comm = c;
    return c->in_progress ? ncclInProgress : ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *r)
{
    *r = comm && comm->in_progress ? ncclInProgress : ncclSuccess;
    if (comm) comm->in_progress = 0;
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm)
{
    free(comm);
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    free(comm);
    return ncclSuccess;
}
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t)
{
    if (!comm || type != ncclFloat || op != ncclSum) return ncclInvalidUsage;
    if (send != recv) memcpy(recv, send, count * sizeof(float));
    return comm->nranks == 1 || emu_mpi_allreduce_f32((float *)recv, count) == 0 ? ncclSuccess : ncclInvalidUsage;
}
