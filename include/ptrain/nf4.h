/* nf4.h — bitsandbytes NF4 weights with double-quantized absmax (QLoRA's 4-bit format), held in
 * one contiguous byte buffer so a whole quantized weight fits in one pt_tensor's data.
 *
 * A weight W [rows, cols] (row-major, HF [out, in]) is cut into blocks of 64 consecutive elements;
 * cols must be a multiple of 64, so a block never crosses a row. Per block b, absmax[b] = max |w|;
 * each w becomes the 4-bit index of the NF4 table entry nearest to w / absmax[b]. The absmax values
 * are double-quantized: offset = mean(absmax); absmax - offset is cut into blocks of 256 and each
 * becomes the 8-bit index of the nearest entry of the signed dynamic map, scaled by that nested
 * block's max |absmax - offset|. Dequantization, bit for bit what bitsandbytes computes in fp32:
 *     absmax[b] = nested_map[absmax_code[b]] * nested_absmax[b / 256] + offset   (product, then sum)
 *     w[i]      = quant_map[nibble(i)] * absmax[i / 64]
 *
 * Buffer layout (byte offsets; every part starts 64-byte aligned; see nf4_layout_of):
 *     0                 nf4_header (quant_blocks.h): "NF4\0", version, rows, cols, nblocks, nnested, offset
 *     quant_map         float[16]        NF4 code table, index = 4-bit code
 *     nested_map        float[256]       8-bit code table for the absmax codes
 *     nested_absmax     float[nnested]   nnested = ceil(nblocks / 256)
 *     absmax_code       uint8[nblocks]   nblocks = rows * cols / 64
 *     packed            uint8[rows*cols/2]  element 2j in the HIGH nibble of byte j, 2j+1 in the LOW
 * Total: about rows*cols*(1/2 + 1/64) bytes + 1.2 KB. Values are in host byte order. The buffer must
 * be at least 4-byte aligned (malloc's, or 64 for aligned parts); the functions check. */
#ifndef PTRAIN_NF4_H
#define PTRAIN_NF4_H

#include <stddef.h>
#include <stdint.h>

#include "ptrain/error.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NF4_BLOCK 64         /* elements per absmax block */
#define NF4_NESTED_BLOCK 256 /* absmax values per nested block */

/* Byte offsets of the parts of an NF4 buffer for a [rows, cols] weight. */
typedef struct {
    int64_t nblocks, nnested;
    size_t quant_map, nested_map, nested_absmax, absmax_code, packed, total;
} nf4_layout;

/* Read-only view of the parts of an NF4 buffer (pointers into it). */
typedef struct {
    int64_t rows, cols, nblocks, nnested;
    float offset;
    const float *quant_map;     /* [16] */
    const float *nested_map;    /* [256] */
    const float *nested_absmax; /* [nnested] */
    const uint8_t *absmax_code; /* [nblocks] */
    const uint8_t *packed;      /* [rows*cols/2] */
} nf4_view;

/* PT_OK when [rows, cols] can be stored as NF4 (positive, cols a multiple of 64, not overflowing);
 * otherwise PT_ERR_USER with a message naming the shape. */
pt_status nf4_check_shape(int64_t rows, int64_t cols);
/* Offsets of the parts; returns the total size in bytes, 0 (and l untouched) for a bad shape. */
size_t nf4_layout_of(int64_t rows, int64_t cols, nf4_layout *l);
/* Bytes of the buffer for a [rows, cols] weight; 0 for a bad shape. */
size_t nf4_bytes(int64_t rows, int64_t cols);
/* Fill v from a buffer written by nf4_quantize or nf4_from_bnb; PT_ERR_INTERNAL when it is not one. */
pt_status nf4_view_of(const void *buf, nf4_view *v);

/* The NF4 table (bitsandbytes' nf4_dequantization_lut). */
void nf4_quant_map(float map[16]);
/* bitsandbytes' create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), sorted, with
 * the same fp32 arithmetic as its torch code (linspace as fma(step, i, start)). */
void nf4_dynamic_map(float map[256]);

/* Quantize w [rows, cols] (fp32, row-major, all finite) into dst, which holds nf4_bytes(rows, cols)
 * bytes. Codes are the nearest table entry to x * (1/absmax), ties to the lower entry (the compare
 * against fp32 midpoints that bitsandbytes' torch and CUDA quantizers use); a zero block gets code 7
 * (0.0); the offset is the mean of the absmax, summed in double. */
pt_status nf4_quantize(const float *w, int64_t rows, int64_t cols, void *dst);

/* Dequantize rows [r0, r0 + nrows) of the NF4 weight in src into out [nrows, cols]. */
pt_status nf4_dequantize_rows(const void *src, int64_t rows, int64_t cols, int64_t r0, int64_t nrows,
                              float *out);

/* The 8-bit blockwise quantizer behind the absmax codes: n values in blocks of `blocksize`; per
 * block absmax[b] = max |x|, codes[i] = the entry of the sorted map nearest to x * (1/absmax[b]),
 * ties to the lower entry; a block of zeros gets absmax 0 and codes 0 (as bitsandbytes' CPU code). */
void nf4_quantize_blockwise8(const float *x, int64_t n, int64_t blocksize, const float map[256],
                             uint8_t *codes, float *absmax);

/* Build an NF4 buffer in dst (nf4_bytes(rows, cols) bytes) from the tensors of a pre-quantized
 * bitsandbytes checkpoint (weight, weight.absmax (U8), weight.nested_absmax, weight.nested_quant_map,
 * quant_state nested_offset, weight.quant_map), copied as they are, so dequantization reproduces
 * bitsandbytes' output bit for bit. Blocksize 64 and nested blocksize 256 only. */
pt_status nf4_from_bnb(int64_t rows, int64_t cols, const uint8_t *packed, const uint8_t *absmax_u8,
                       const float *nested_absmax, const float *nested_map, float offset,
                       const float *quant_map, void *dst);

#ifdef __cplusplus
}
#endif
#endif
