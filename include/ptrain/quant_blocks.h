/* quant_blocks.h — the bytes of every quantized weight block, one struct per format: the GGUF
 * blocks of 32 values (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1), the k-quant super-blocks of 256 (Q2_K..Q6_K)
 * and the header of an NF4 buffer. One header for everything that reads or writes them: the GGUF
 * reader and writer, the quantizers and the reference dequantizers (src/backend/quant.c, src/backend/nf4.c), the
 * CPU kernels (src/cpu), the load-time weight check and the CUDA kernels (cuda/dequant_formats.h),
 * so a layout is written once, as llama.cpp's ggml-common.h does (same names, fields and order: a
 * GGUF tensor's data is an array of these structs).
 *
 * Naturally laid out, no packing: every block struct has the 2-byte alignment of its fp16 fields
 * and no padding, which the assertions check against the sizes GGUF files have. fp16 fields are
 * their raw bits (uint16_t; quant_f16_to_f32 or dq_f16_to_f32 decode them), so no compiler's half
 * type is needed. Multi-byte fields are in host byte order, GGUF's little-endian. The header is C11
 * and C++ (nvcc, and the host C++17 of the CUDA emulator in tests/emu).
 *
 * Where a struct may be read in place: in memory known to be 2-byte aligned, i.e. a backend's own
 * tensors (aligned_alloc, cudaMalloc) at whole-block offsets (every block's size is even). A
 * tensor in a GGUF file may start at an odd byte (general.alignment 1 is legal), so code that reads
 * file memory (src/backend/quant.c, src/model/weight_check.c) copies a block out before reading it. */
#ifndef PTRAIN_QUANT_BLOCKS_H
#define PTRAIN_QUANT_BLOCKS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define QUANT_BLOCK_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define QUANT_BLOCK_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the block structs hold GGUF's little-endian fields as they are: a big-endian host would need byte swaps"
#endif

/* A function both the host and a CUDA kernel call (plain on the host compilers). */
#ifdef __CUDACC__
#define PT_HD __host__ __device__
#else
#define PT_HD
#endif

#define QK 32           /* values per block of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1 (ggml's QK8_0 ... QK5_1) */
#define QK_K 256        /* values per k-quant super-block */
#define K_SCALE_SIZE 12 /* bytes of the packed 6-bit scales and mins of Q4_K and Q5_K */

/* ---- blocks of QK values: x[j] for j in [0, 32) ------------------------------------------------ */

/* x[j] = d * qs[j]. */
typedef struct {
    uint16_t d; /* fp16 scale */
    int8_t qs[QK];
} block_q8_0;
QUANT_BLOCK_ASSERT(sizeof(block_q8_0) == 34, "block_q8_0 is 34 bytes in GGUF");

/* x[j] = d * (q[j] - 8); byte j of qs holds q[j] in its low nibble and q[j + 16] in its high one. */
typedef struct {
    uint16_t d;
    uint8_t qs[QK / 2];
} block_q4_0;
QUANT_BLOCK_ASSERT(sizeof(block_q4_0) == 18, "block_q4_0 is 18 bytes in GGUF");

/* x[j] = d * q[j] + m; nibbles as Q4_0. */
typedef struct {
    uint16_t d, m;
    uint8_t qs[QK / 2];
} block_q4_1;
QUANT_BLOCK_ASSERT(sizeof(block_q4_1) == 20, "block_q4_1 is 20 bytes in GGUF");

/* x[j] = d * (q[j] - 16); the low 4 bits of q as Q4_0's nibbles, the fifth bit of q[j] is bit j of
 * qh read as a little-endian uint32 (four bytes: here it is not 4-byte aligned). */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} block_q5_0;
QUANT_BLOCK_ASSERT(sizeof(block_q5_0) == 22, "block_q5_0 is 22 bytes in GGUF");

/* x[j] = d * q[j] + m; q as Q5_0. */
typedef struct {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[QK / 2];
} block_q5_1;
QUANT_BLOCK_ASSERT(sizeof(block_q5_1) == 24, "block_q5_1 is 24 bytes in GGUF");

/* ---- k-quant super-blocks of QK_K values: x[i] for i in [0, 256) ------------------------------ */

/* 16 sub-blocks of 16: x = (d * (scales[i/16] & 15)) * q - dmin * (scales[i/16] >> 4). Each half of
 * 128 values uses 32 bytes of qs, four 2-bit planes of 32 values (bits 2*((i%128)/32) of byte i%32). */
typedef struct {
    uint8_t scales[QK_K / 16]; /* low nibble scale, high nibble min */
    uint8_t qs[QK_K / 4];
    uint16_t d, dmin;
} block_q2_K;
QUANT_BLOCK_ASSERT(sizeof(block_q2_K) == 84, "block_q2_K is 84 bytes in GGUF");

/* 16 sub-blocks of 16: x = (d * scale) * (q - (third bit clear ? 4 : 0)); the low 2 bits of q as
 * Q2_K's, the third bit is bit 4*(i/128) + (i%128)/32 of hmask[i%32]; sixteen 6-bit scales, stored
 * + 32, packed in 12 bytes (block_q3_K_scale). */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} block_q3_K;
QUANT_BLOCK_ASSERT(sizeof(block_q3_K) == 110, "block_q3_K is 110 bytes in GGUF");

/* 8 sub-blocks of 32: x = (d * sc) * q - dmin * m, with sub-block j's 6-bit sc and m packed in
 * scales (block_k4_scale_min). Each 64 values use 32 bytes of qs: low nibbles for the first 32
 * (sub-block 2g), high nibbles for the next 32 (2g + 1). */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;
QUANT_BLOCK_ASSERT(sizeof(block_q4_K) == 144, "block_q4_K is 144 bytes in GGUF");

/* Q4_K plus a fifth bit: bit j (the sub-block) of qh[i%32] adds 16 to q. */
typedef struct {
    uint16_t d, dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;
QUANT_BLOCK_ASSERT(sizeof(block_q5_K) == 176, "block_q5_K is 176 bytes in GGUF");

/* 16 sub-blocks of 16: x = (d * scales[s]) * (q - 32). Half h = i/128 uses ql[64h..], qh[32h..],
 * scales[8h..]; quarter t = (i%128)/32, l = i%32: the low 4 bits of q in ql[l + 32*(t&1)] (low
 * nibble for t < 2, high otherwise), the high 2 bits (qh[l] >> 2t) & 3, s = l/16 + 2t. */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    uint16_t d;
} block_q6_K;
QUANT_BLOCK_ASSERT(sizeof(block_q6_K) == 210, "block_q6_K is 210 bytes in GGUF");

/* ---- MXFP4 (OCP microscaling FP4: gpt-oss's experts; ggml's block_mxfp4) ----------------------- */

/* x[j] = fp4(q[j]) 2^(e - 127): e an E8M0 scale (a bare exponent, bias 127), q[j] an FP4 E2M1 code (sign bit 3,
 * magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6); nibbles as Q4_0 (byte j: q[j] low, q[j + 16] high). Hugging Face's
 * *_blocks pair elements 2i (low) and 2i + 1 (high) in byte i instead: the loader repacks them. */
typedef struct {
    uint8_t e;
    uint8_t qs[QK / 2];
} block_mxfp4;
QUANT_BLOCK_ASSERT(sizeof(block_mxfp4) == 17, "block_mxfp4 is 17 bytes in GGUF");

/* The value of FP4 E2M1 code q (0..15) under E8M0 scale e, exactly (ldexpf scales by a power of two). */
static inline PT_HD float mxfp4_value(uint8_t e, int q)
{
    int m = q & 7;
    float mag = m < 4 ? 0.5f * (float)m : (float)((m & 1 ? 3 : 2) << ((m >> 1) - 2));
    return ldexpf(q & 8 ? -mag : mag, (int)e - 127);
}

/* Every stored format ptrain and GGUF share, once: X(pt_dtype, ggml type (ptrain/gguf.h), name,
 * values per block, the C type of one block (a struct above, or the dense value)). It is the one
 * table of formats: src/backend/backend.c's dtype table is expanded from it (plus NF4, which GGUF
 * does not have), and src/model/gguf.c maps a ggml type to its pt_dtype with it and takes the
 * name, values and bytes from the dtype table; so a format's name, size and element count are
 * stated nowhere else. backend.c asserts that the list and NF4 cover pt_dtype. */
#define QUANT_FORMATS(X)                                                                            \
    X(PT_F32, GGML_TYPE_F32, "f32", 1, float)                                                       \
    X(PT_F16, GGML_TYPE_F16, "f16", 1, uint16_t)                                                    \
    X(PT_BF16, GGML_TYPE_BF16, "bf16", 1, uint16_t)                                                 \
    X(PT_Q8_0, GGML_TYPE_Q8_0, "q8_0", QK, block_q8_0)                                              \
    X(PT_Q4_0, GGML_TYPE_Q4_0, "q4_0", QK, block_q4_0)                                              \
    X(PT_Q4_1, GGML_TYPE_Q4_1, "q4_1", QK, block_q4_1)                                              \
    X(PT_Q5_0, GGML_TYPE_Q5_0, "q5_0", QK, block_q5_0)                                              \
    X(PT_Q5_1, GGML_TYPE_Q5_1, "q5_1", QK, block_q5_1)                                              \
    X(PT_Q2_K, GGML_TYPE_Q2_K, "q2_k", QK_K, block_q2_K)                                            \
    X(PT_Q3_K, GGML_TYPE_Q3_K, "q3_k", QK_K, block_q3_K)                                            \
    X(PT_Q4_K, GGML_TYPE_Q4_K, "q4_k", QK_K, block_q4_K)                                            \
    X(PT_Q5_K, GGML_TYPE_Q5_K, "q5_k", QK_K, block_q5_K)                                            \
    X(PT_Q6_K, GGML_TYPE_Q6_K, "q6_k", QK_K, block_q6_K)                                            \
    X(PT_MXFP4, GGML_TYPE_MXFP4, "mxfp4", QK, block_mxfp4)

/* ---- the packed scales, read the same way by the CPU reference and the CUDA kernels ------------ */

/* Sub-block j's 6-bit scale and min in the packed scales of a Q4_K/Q5_K super-block (ggml's
 * get_scale_min_k4): j < 4: the low 6 bits of bytes j and j + 4; else the 4 bits of byte j + 4 plus
 * the top 2 bits of bytes j - 4 and j. */
static inline PT_HD void block_k4_scale_min(int j, const uint8_t *q, int *sc, int *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* Sub-block j's scale in a Q3_K super-block's packed scales, the stored + 32 taken off: the low 4
 * bits are nibble j of bytes 0..7 (low nibbles first), the high 2 bits those at 2*(j/4) of byte
 * 8 + j%4. */
static inline PT_HD int block_q3_K_scale(const uint8_t *s, int j)
{
    int lo = j < 8 ? s[j] & 0x0f : s[j - 8] >> 4;
    int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return (lo | (hi << 4)) - 32;
}

/* ---- NF4 (nf4.h): the header at the start of its buffer --------------------------------------- */

/* The parts after it (maps, absmax codes, packed nibbles) are placed by nf4_layout_of. */
typedef struct {
    char magic[4]; /* "NF4\0" */
    uint32_t version;
    int64_t rows, cols, nblocks, nnested;
    float offset; /* absmax = nested_map[code] * nested_absmax + offset */
    uint32_t reserved;
} nf4_header;
QUANT_BLOCK_ASSERT(sizeof(nf4_header) == 48, "nf4_header is 48 bytes, without padding");

#endif
