#!/usr/bin/env python3
"""make_nf4_goldens.py — bitsandbytes NF4 (double-quantized) goldens for tests/unit/test_nf4.c.

Made with bitsandbytes 0.50.2 and torch 2.15.0 from PyPI, on the CPU (no GPU needed):

    python3 -m venv /tmp/nf4env
    /tmp/nf4env/bin/pip install bitsandbytes numpy
    /tmp/nf4env/bin/python tests/reference/make_nf4_goldens.py tests/data/nf4

For each case it quantizes a float32 [rows, cols] matrix with
bitsandbytes.functional.quantize_4bit(w, blocksize=64, quant_type="nf4", compress_statistics=True)
and dequantizes it back with dequantize_4bit, and writes tests/data/nf4/<name>.bin, little-endian:

    char magic[4] = "NF4G"; u32 version = 1;
    i64 rows, cols, nblocks (= rows*cols/64), nnested (= ceil(nblocks/256));
    f32 offset;                       quant_state.offset (mean of the raw absmax)
    f32 input[rows*cols];             the matrix quantized
    u8  packed[rows*cols/2];          quantized weight: element 2j in the high nibble of byte j
    f32 absmax_raw[nblocks];          the absmax before double quantization (compress_statistics=False)
    u8  absmax_code[nblocks];         quant_state.absmax: the 8-bit codes of absmax - offset
    f32 nested_absmax[nnested];       quant_state.state2.absmax
    f32 quant_map[16];                quant_state.code (the NF4 table)
    f32 nested_map[256];              quant_state.state2.code (create_dynamic_map(signed=True))
    f32 dequant[rows*cols];           dequantize_4bit(packed, quant_state), float32

It also runs bitsandbytes' 8-bit blockwise quantizer alone (the one behind the absmax codes),
quantize_blockwise(x, blocksize=256) with the signed dynamic map, on 8192 random values, and writes
tests/data/nf4/<name>.bin:

    char magic[4] = "BW8G"; u32 version = 1; i64 n, blocksize, nabsmax;
    f32 input[n]; u8 codes[n]; f32 absmax[nabsmax]; f32 map[256];

manifest.txt lists the cases, "nf4 <name> <rows> <cols>" or "bw8 <name> <n> <blocksize>".

Note: on the CPU, bitsandbytes 0.50.2 quantizes the 8-bit absmax codes through a 65536-entry lookup table (csrc/cpu_ops.cpp,
norm_to_lut_index), which rounds the normalized value to a grid of step 2/65535 before picking the
nearest code; its CUDA kernel and ptrain pick the exact nearest code, so a code can differ where the
value lies within one grid step of the midpoint between two codes (test_nf4.c checks exactly that).
"""
import os
import sys

import numpy as np
import torch
import bitsandbytes
import bitsandbytes.functional as F

BLOCK = 64


def nf4_midpoints():
    code = np.array(F.get_4bit_type("nf4", device="cpu").numpy(), dtype=np.float32)
    return ((code[:-1] + code[1:]) / np.float32(2)).astype(np.float32)


def case_inputs():
    """(name, float32 matrix) pairs: random, scaled, with a zero block, ties, > 256 blocks."""
    g = torch.Generator().manual_seed(1234)
    cases = [("randn_8x64", torch.randn(8, 64, generator=g)),
             ("randn_16x128", torch.randn(16, 128, generator=g)),
             ("randn_3x640", torch.randn(3, 640, generator=g) * 0.02)]
    # rows scaled over six orders of magnitude, so the absmax codes use the small end of the map
    scaled = torch.randn(12, 192, generator=g) * torch.logspace(-4, 2, 12).unsqueeze(1)
    cases.append(("scaled_12x192", scaled))
    # a zero block (block 1) and a block with a single non-zero value (block 4)
    zb = torch.randn(4, 128, generator=g)
    zb[0, 64:128] = 0.0
    zb[2, :64] = 0.0
    zb[2, 17] = -0.5
    cases.append(("zeroblock_4x128", zb))
    # values exactly on the NF4 midpoints (absmax 1): checks which way ties go
    mids = torch.from_numpy(nf4_midpoints())
    tie = torch.zeros(1, 128)
    tie[0, 0] = 1.0
    tie[0, 1:16] = mids
    tie[0, 16:31] = -mids
    tie[0, 64] = -1.0
    tie[0, 65:80] = mids
    tie[0, 80:128] = torch.randn(48, generator=g).clamp(-0.99, 0.99)
    cases.append(("ties_1x128", tie))
    # every block has absmax 1: absmax - offset is all zero, so the nested absmax is zero
    eq = torch.randn(2, 128, generator=g).clamp(-0.9, 0.9)
    eq[:, 0] = 1.0
    eq[:, 64] = -1.0
    cases.append(("equal_absmax_2x128", eq))
    # 288 blocks: two nested blocks of 256, the second one partial (32 blocks)
    cases.append(("randn_36x512", torch.randn(36, 512, generator=g) * 0.05))
    return cases


def write_case(out_dir, name, w):
    w = w.to(torch.float32).contiguous()
    rows, cols = w.shape
    q, st = F.quantize_4bit(w, blocksize=BLOCK, quant_type="nf4", compress_statistics=True)
    _, st_raw = F.quantize_4bit(w, blocksize=BLOCK, quant_type="nf4", compress_statistics=False)
    deq = F.dequantize_4bit(q, st).to(torch.float32)
    nblocks = rows * cols // BLOCK
    nnested = (nblocks + 255) // 256
    assert st.absmax.numel() == nblocks and st.state2.absmax.numel() == nnested
    parts = [b"NF4G", np.array([1], "<u4").tobytes(),
             np.array([rows, cols, nblocks, nnested], "<i8").tobytes(),
             np.array([st.offset.item()], "<f4").tobytes(),
             w.numpy().astype("<f4").tobytes(),
             q.numpy().astype(np.uint8).tobytes(),
             st_raw.absmax.numpy().astype("<f4").tobytes(),
             st.absmax.numpy().astype(np.uint8).tobytes(),
             st.state2.absmax.numpy().astype("<f4").tobytes(),
             st.code.numpy().astype("<f4").tobytes(),
             st.state2.code.numpy().astype("<f4").tobytes(),
             deq.numpy().astype("<f4").tobytes()]
    with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
        f.write(b"".join(parts))
    return rows, cols


def write_blockwise8(out_dir, name, x, blocksize):
    x = x.to(torch.float32).contiguous()
    q, st = F.quantize_blockwise(x, blocksize=blocksize)
    n = x.numel()
    parts = [b"BW8G", np.array([1], "<u4").tobytes(),
             np.array([n, blocksize, st.absmax.numel()], "<i8").tobytes(),
             x.numpy().astype("<f4").tobytes(), q.numpy().astype(np.uint8).tobytes(),
             st.absmax.numpy().astype("<f4").tobytes(), st.code.numpy().astype("<f4").tobytes()]
    with open(os.path.join(out_dir, name + ".bin"), "wb") as f:
        f.write(b"".join(parts))
    return n


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/data/nf4"
    os.makedirs(out_dir, exist_ok=True)
    lines = [f"# bitsandbytes {bitsandbytes.__version__}, torch {torch.__version__}"]
    for name, w in case_inputs():
        rows, cols = write_case(out_dir, name, w)
        lines.append(f"nf4 {name} {rows} {cols}")
    x = torch.randn(8192, generator=torch.Generator().manual_seed(99))
    lines.append(f"bw8 blockwise8_8192 {write_blockwise8(out_dir, 'blockwise8_8192', x, 256)} 256")
    with open(os.path.join(out_dir, "manifest.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
