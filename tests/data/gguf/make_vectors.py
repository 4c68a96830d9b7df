#!/usr/bin/env python3
"""make_vectors.py — dequantization test vectors for tests/unit/test_gguf.c.

For each GGUF block type, a few blocks of random bytes (with their fp16 scale fields set to finite
values: random, zero, subnormal) are written to dequant_<type>.bin, and the values the reference
numpy dequantizer of the PyPI `gguf` package (gguf.quants.dequantize, llama.cpp's gguf-py)
computes from them to dequant_<type>.f32 (little-endian float32). ptrain's C dequantizers must
reproduce them. Re-run with: python3 make_vectors.py (needs numpy and gguf; deterministic).
"""
import os

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

# type: (name, block bytes, number of blocks, byte offsets of fp16 fields)
TYPES = {
    T.Q4_0: ("q4_0", 18, 8, [0]),
    T.Q4_1: ("q4_1", 20, 8, [0, 2]),
    T.Q5_0: ("q5_0", 22, 8, [0]),
    T.Q5_1: ("q5_1", 24, 8, [0, 2]),
    T.Q8_0: ("q8_0", 34, 8, [0]),
    T.Q2_K: ("q2_k", 84, 3, [80, 82]),
    T.Q3_K: ("q3_k", 110, 3, [108]),
    T.Q4_K: ("q4_k", 144, 3, [0, 2]),
    T.Q5_K: ("q5_k", 176, 3, [0, 2]),
    T.Q6_K: ("q6_k", 210, 3, [208]),
}


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(20240611)
    for qtype, (name, size, nblocks, halves) in TYPES.items():
        raw = rng.integers(0, 256, size=(nblocks, size), dtype=np.uint8)
        for b in range(nblocks):
            for k, off in enumerate(halves):
                if b == 1 and k == 0:
                    h = np.float16(0.0)  # a zero scale
                elif b == 2 and k == len(halves) - 1:
                    h = np.float16(3e-6)  # a subnormal fp16
                else:
                    h = np.float16(rng.uniform(-0.5, 0.5) * 10.0 ** rng.integers(-3, 1))
                raw[b, off:off + 2] = np.frombuffer(h.tobytes(), dtype=np.uint8)
        values = dequantize(raw.reshape(-1), qtype).astype("<f4").reshape(-1)
        assert np.all(np.isfinite(values))
        raw.tofile(os.path.join(here, f"dequant_{name}.bin"))
        values.tofile(os.path.join(here, f"dequant_{name}.f32"))
        print(f"{name}: {nblocks} blocks, {values.size} values")


if __name__ == "__main__":
    main()
