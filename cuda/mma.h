/* mma.h — the tensor-core primitives of the attention kernels (attention_tc*.cu), one device
 * function each, for sm_80 and sm_90:
 *   mma_bf16_16816  mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: acc = A B + acc
 *   ldmatrix_x1/x2/x4, ldmatrix_x1/x2/x4_trans   ldmatrix.sync.aligned.m8n8.xN{.trans}.shared.b16
 *   cp_async_16     cp.async.cg.shared.global [dst], [src], 16, src-size (zero fill past src-size)
 *   cp_async_commit, cp_async_wait<N>   cp.async.commit_group, cp.async.wait_group N
 *   pack_bf16x2     cvt.rn.bf16x2.f32: two floats to the two bf16 halves of one register
 * On the GPU each is inline PTX. Under the CPU emulator (tests/emu, whose fake cuda_runtime.h
 * defines PTRAIN_CUDA_EMU) each is a call into tests/emu/emu.cc, which implements the PTX ISA's
 * definitions: mma and ldmatrix as warp-collective operations over the 32 lanes' registers,
 * cp.async as copies deferred until the wait_group that completes their group.
 *
 * The register layouts, from the PTX ISA (section titles; numbers differ between versions):
 * "Matrix Fragments for mma.m16n8k16 with floating point type" — with g = lane >> 2 (groupID) and
 * t = lane % 4 (threadID_in_group); a register of two bf16 holds the lower-numbered element in its
 * low 16 bits ("Elements (low to high)"):
 *   A (16x16, row-major, 4 registers a0..a7):  row g for a0,a1,a4,a5, g + 8 for a2,a3,a6,a7;
 *                                              col 2t + (i & 1), + 8 for i >= 4
 *   B (16x8 = K x N, 2 registers b0..b3):      row (k) 2t + (i & 1), + 8 for i >= 2; col (n) g
 *   C, D (16x8 fp32, c0..c3):                  row g for c0,c1, g + 8 for c2,c3; col 2t + (i & 1)
 * "Warp-level matrix load instruction: ldmatrix" — .m8n8 .b16: lanes 8m .. 8m+7 give the row
 * addresses of matrix m (m < N of .xN); lane l receives in register m the elements (row l >> 2,
 * columns 2 (l % 4), 2 (l % 4) + 1) of matrix m (Figure "ldmatrix fragment layout for one 8x8
 * matrix with 16-bit elements"); with .trans the matrix is read column-major: (rows 2 (l % 4) and
 * 2 (l % 4) + 1, column l >> 2). Row addresses are 16-byte aligned shared memory.
 * So an A operand is ldmatrix_x4 of rows 0-7/8-15 x columns 0-7/8-15 (lanes 0-15 address rows at
 * column 0, lanes 16-31 at column 8); a B operand whose N index runs along the rows in memory
 * (K^T from K[key][d]) is ldmatrix of those rows without .trans, one whose K index runs along the
 * rows (V[key][d] as B[key][d]) is ldmatrix .trans; and the C fragments of two adjacent n-tiles of
 * a product are, packed to bf16, the A fragment of the next product (FlashAttention-2's P V). */
#ifndef PTRAIN_CUDA_MMA_H
#define PTRAIN_CUDA_MMA_H

#include <cuda_bf16.h>
#include <stdint.h>

#ifdef PTRAIN_CUDA_EMU

__device__ static inline void mma_bf16_16816(float acc[4], const uint32_t a[4], const uint32_t b[2])
{
    emu_mma_bf16_16816(acc, a, b);
}
__device__ static inline void ldmatrix_x1(uint32_t r[1], const void *row) { emu_ldmatrix(r, 1, false, row); }
__device__ static inline void ldmatrix_x2(uint32_t r[2], const void *row) { emu_ldmatrix(r, 2, false, row); }
__device__ static inline void ldmatrix_x4(uint32_t r[4], const void *row) { emu_ldmatrix(r, 4, false, row); }
__device__ static inline void ldmatrix_x1_trans(uint32_t r[1], const void *row) { emu_ldmatrix(r, 1, true, row); }
__device__ static inline void ldmatrix_x2_trans(uint32_t r[2], const void *row) { emu_ldmatrix(r, 2, true, row); }
__device__ static inline void ldmatrix_x4_trans(uint32_t r[4], const void *row) { emu_ldmatrix(r, 4, true, row); }
__device__ static inline void cp_async_16(void *dst, const void *src, int src_bytes)
{
    emu_cp_async_16(dst, src, src_bytes);
}
__device__ static inline void cp_async_commit(void) { emu_cp_async_commit(); }
template <int N> __device__ static inline void cp_async_wait(void) { emu_cp_async_wait(N); }
__device__ static inline uint32_t pack_bf16x2(float lo, float hi)
{
    return (uint32_t)__float2bfloat16_rn(lo).x | (uint32_t)__float2bfloat16_rn(hi).x << 16;
}

#else

/* acc (C and D of the PTX) = A B + acc; a, b, acc in the fragment layouts above. */
__device__ static inline void mma_bf16_16816(float acc[4], const uint32_t a[4], const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ static inline unsigned smem_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

/* row: this lane's row address (lanes 0-7 for x1, 0-15 for x2, all for x4; the others ignored). */
__device__ static inline void ldmatrix_x1(uint32_t r[1], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(smem_addr(row)) : "memory");
}
__device__ static inline void ldmatrix_x2(uint32_t r[2], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(row)) : "memory");
}
__device__ static inline void ldmatrix_x4(uint32_t r[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(row)) : "memory");
}
__device__ static inline void ldmatrix_x1_trans(uint32_t r[1], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0]) : "r"(smem_addr(row)) : "memory");
}
__device__ static inline void ldmatrix_x2_trans(uint32_t r[2], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(row)) : "memory");
}
__device__ static inline void ldmatrix_x4_trans(uint32_t r[4], const void *row)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(row)) : "memory");
}

/* 16 bytes from global src to shared dst (both 16-byte aligned), asynchronously: the first
 * src_bytes (0..16) are copied, the rest of the 16 are zeros. Visible to this thread after the
 * cp_async_wait that completes its group; to the block after that and a __syncthreads. */
__device__ static inline void cp_async_16(void *dst, const void *src, int src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
                 : "memory");
}
/* The cp.async calls of this thread since the last commit become one group (maybe empty). */
__device__ static inline void cp_async_commit(void) { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
/* Wait until at most N of this thread's most recent groups are pending. */
template <int N> __device__ static inline void cp_async_wait(void)
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

/* lo in the low half, hi in the high half, each rounded to nearest even ("cvt": for .bf16x2 the
 * first source goes to the upper half). */
__device__ static inline uint32_t pack_bf16x2(float lo, float hi)
{
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

#endif
#endif
