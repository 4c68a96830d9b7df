/* cuda_bf16.h (fake) — bf16 for the CPU SIMT emulator (tests/emu): round-to-nearest-even like
 * __float2bfloat16_rn, NaN kept a quiet NaN. */
#ifndef EMU_CUDA_BF16_H
#define EMU_CUDA_BF16_H
#include "cuda_runtime.h"
struct __nv_bfloat16 {
    uint16_t x;
};
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) r.x = (uint16_t)((u >> 16) | 0x40);
    else r.x = (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
    return r;
}
static inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 b) { return b.x; }
static inline float __bfloat162float(__nv_bfloat16 b)
{
    uint32_t u = (uint32_t)b.x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
#endif
