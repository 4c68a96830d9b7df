/* cuda_runtime.h (fake) — the CUDA runtime API as the CPU SIMT emulator in tests/emu provides it,
 * so that the UNCHANGED cuda/ .cu sources (after tests/emu/rewrite.sed turns each launch into
 * emu_launch(...)(...) and each __shared__ array into a per-block poisoned one) compile with the
 * host C++ compiler and run on the CPU against the CPU backend (tests/unit/test_cuda_ops,
 * test_cuda_model). Each CUDA thread is a fiber (tests/emu/emu.cc); __syncthreads, warp shuffles
 * and votes switch fibers. Streams, events and the memory pool are plain host operations in
 * program order; device memory is host memory filled with NaN bytes when allocated.
 * Only what cuda/ uses is here: a call the sources start using must be added. */
#ifndef EMU_CUDA_RUNTIME_H
#define EMU_CUDA_RUNTIME_H
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ emu_shared_declaration_missed_by_rewrite_sed /* a compile error, never silence */

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};
struct __attribute__((aligned(16))) uint4 {
    unsigned x, y, z, w;
};
static inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return uint4{x, y, z, w}; }
static inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }
extern dim3 threadIdx, blockIdx, blockDim, gridDim;
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

/* ---- errors ---- */
typedef int cudaError_t;
enum { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInvalidConfiguration = 9,
       cudaErrorInvalidDevice = 101, cudaErrorNotReady = 600, cudaErrorLaunchFailure = 719 };
cudaError_t cudaGetLastError(void);
const char *cudaGetErrorString(cudaError_t e);

/* ---- device, streams, events (everything runs at once, in program order) ---- */
typedef struct emu_stream_s *cudaStream_t;
typedef struct emu_event_s *cudaEvent_t;
typedef struct emu_pool_s *cudaMemPool_t;
enum { cudaStreamNonBlocking = 1, cudaEventDisableTiming = 2 };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4, cudaMemPoolAttrUsedMemHigh = 8 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice,
                      cudaMemcpyDefault };
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaDeviceGetAttribute(int *value, cudaDeviceAttr attr, int device);
cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);

/* ---- memory: host memory, NaN-poisoned on allocation ---- */
cudaError_t cudaMalloc(void **p, size_t n);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocAsync(void **p, size_t n, cudaStream_t s);
cudaError_t cudaFreeAsync(void *p, cudaStream_t s);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t n, cudaMemcpyKind kind, cudaStream_t st);
cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t *pool, int device);
cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value);
cudaError_t cudaMemPoolGetAttribute(cudaMemPool_t pool, cudaMemPoolAttr attr, void *value);

/* ---- kernels: launch, barriers, warp collectives, shared memory ---- */
void emu_syncthreads(void);
uint64_t emu_warp_op(int op, uint64_t v, int src_lane); /* op 0: shuffle from src_lane; 1: any */
void emu_shared_init(void *p, size_t n);                 /* a static __shared__ array, poisoned once per block */
void *emu_dyn_shared(void);                              /* extern __shared__: this launch's dynamic bytes */
static inline void __syncthreads(void) { emu_syncthreads(); }
template <class T> T emu_shfl(T v, int src)
{
    static_assert(sizeof(T) <= 8, "emu: shuffle of a type over 8 bytes");
    uint64_t in = 0;
    memcpy(&in, &v, sizeof v);
    uint64_t out = emu_warp_op(0, in, src & 31);
    T r;
    memcpy(&r, &out, sizeof r);
    return r;
}
void emu_check_mask(unsigned mask);
template <class T> T __shfl_sync(unsigned mask, T v, int src)
{
    emu_check_mask(mask);
    return emu_shfl(v, src);
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int o)
{
    emu_check_mask(mask);
    return emu_shfl(v, (int)(threadIdx.x % 32) ^ o);
}
static inline int __any_sync(unsigned mask, int pred)
{
    emu_check_mask(mask);
    return (int)emu_warp_op(1, pred != 0, 0);
}

/* The tensor-core primitives of cuda/mma.h, which calls these when PTRAIN_CUDA_EMU is defined
 * (tests/emu/emu_mma.cc): mma.sync m16n8k16 bf16 and ldmatrix as warp collectives, cp.async as
 * per-thread copies deferred until the cp.async.wait_group that completes their group. */
#define PTRAIN_CUDA_EMU 1
void emu_mma_bf16_16816(float acc[4], const uint32_t a[4], const uint32_t b[2]);
void emu_ldmatrix(uint32_t *r, int num, bool trans, const void *row); /* num 1, 2, 4 */
void emu_cp_async_16(void *dst, const void *src, int src_bytes);
void emu_cp_async_commit(void);
void emu_cp_async_wait(int n);

/* IEEE single operations that are never contracted into an FMA (an empty asm hides the value) */
static inline float emu_opaque(float r)
{
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
    __asm__ volatile("" : "+x"(r));
#elif defined(__GNUC__)
    __asm__ volatile("" : "+w"(r));
#endif
    return r;
}
static inline float __fmul_rn(float a, float b) { return emu_opaque(emu_opaque(a) * emu_opaque(b)); }
static inline float __fadd_rn(float a, float b) { return emu_opaque(emu_opaque(a) + emu_opaque(b)); }
static inline float __fsub_rn(float a, float b) { return emu_opaque(emu_opaque(a) - emu_opaque(b)); }
static inline float __fdiv_rn(float a, float b) { return emu_opaque(emu_opaque(a) / emu_opaque(b)); }
static inline float __uint_as_float(unsigned u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline unsigned __float_as_uint(float f)
{
    unsigned u;
    memcpy(&u, &f, 4);
    return u;
}

/* kernel<<<g, b, smem, stream>>>(args) is rewritten to emu_launch(kernel, g, b, smem, stream)(args):
 * the arguments are converted to the kernel's parameter types, as a launch does. */
void emu_run(const void *kernel, void (*body)(void *), void *arg, dim3 grid, dim3 block, size_t smem);
template <class... P> struct emu_launcher {
    void (*k)(P...);
    dim3 g, b;
    size_t smem;
    void operator()(P... args)
    {
        auto call = [&]() { k(args...); };
        typedef decltype(call) call_t;
        emu_run((const void *)k, [](void *c) { (*(call_t *)c)(); }, &call, g, b, smem);
    }
};
template <class... P>
emu_launcher<P...> emu_launch(void (*k)(P...), dim3 g, dim3 b, size_t smem = 0, cudaStream_t s = 0)
{
    (void)s;
    return emu_launcher<P...>{k, g, b, smem};
}
cudaError_t emu_func_set_attribute(const void *kernel, cudaFuncAttribute attr, int value);
template <class... P> cudaError_t cudaFuncSetAttribute(void (*k)(P...), cudaFuncAttribute attr, int value)
{
    return emu_func_set_attribute((const void *)k, attr, value);
}
#endif
