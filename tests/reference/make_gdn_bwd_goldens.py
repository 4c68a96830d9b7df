#!/usr/bin/env python3
"""make_gdn_bwd_goldens.py — the gated delta rule's gradients from transformers 5.25's torch reference
(modeling_qwen3_5.torch_chunk_gated_delta_rule, the chunked WY form of 64, q and k L2-normalised in it) through
torch's autograd, for tests/unit/test_gdn_grad.c's check of ptrain's backend_delta_rule_bwd.

The case: 2 sequences of 150 tokens (three chunks, the last partial), 2 key heads of 16 and 4 value heads of 12
(each key head read by two value heads, as Qwen3.5's repeat_interleave); sequence 0 one example, sequence 1 three
packed examples at tokens 0, 40 and 110 (each run through the reference alone: the state starts empty in each).
Inputs (uniform): qkv [300, 112] in (-1, 1) (q of the 2 key heads, k, v of the 4 value heads, as ptrain's conv
output row), beta [300, 4] in (0.05, 0.95), g [300, 4] in (-2, -0.01), r [300, 48] in (-1, 1); the loss is
sum(r * o). Writes tests/data/qwen35/gdn_bwd.f32: qkv, beta, g, r, then o, dloss/dqkv, dloss/dbeta, dloss/dg (f32,
row-major, in that order).

Run (the output is committed; CI only reads it): $PTRAIN_PYTHON tests/reference/make_gdn_bwd_goldens.py
"""
import os

import numpy as np
import torch
from transformers.models.qwen3_5.modeling_qwen3_5 import torch_chunk_gated_delta_rule

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "qwen35", "gdn_bwd.f32")
B, T, NK, NV, DK, DV = 2, 150, 2, 4, 16, 12
STARTS = [[0], [0, 40, 110]]


def main():
    gen = torch.Generator().manual_seed(42)
    rows, kw = B * T, NK * DK
    qkv = torch.empty(rows, 2 * kw + NV * DV).uniform_(-1, 1, generator=gen)
    beta = torch.empty(rows, NV).uniform_(0.05, 0.95, generator=gen)
    g = torch.empty(rows, NV).uniform_(-2, -0.01, generator=gen)
    r = torch.empty(rows, NV * DV).uniform_(-1, 1, generator=gen)
    leaves = [t.clone().requires_grad_(True) for t in (qkv, beta, g)]
    x, bt, gg = leaves
    outs = []
    for b in range(B):
        bounds = STARTS[b] + [T]
        for s, e in zip(bounds[:-1], bounds[1:]):
            rs = slice(b * T + s, b * T + e)
            n = e - s
            q = x[rs, :kw].reshape(1, n, NK, DK)
            k = x[rs, kw:2 * kw].reshape(1, n, NK, DK)
            v = x[rs, 2 * kw:].reshape(1, n, NV, DV)
            o, _ = torch_chunk_gated_delta_rule(q, k, v, gg[rs].reshape(1, n, NV), bt[rs].reshape(1, n, NV),
                                                chunk_size=64, use_qk_l2norm_in_kernel=True)
            outs.append(o.reshape(n, NV * DV))
    o = torch.cat(outs)
    (o * r).sum().backward()
    parts = [qkv, beta, g, r, o.detach()] + [t.grad for t in leaves]
    with open(OUT, "wb") as f:
        for p in parts:
            f.write(p.detach().numpy().astype(np.float32).tobytes())
    print(f"wrote {OUT}: {sum(p.numel() for p in parts)} floats")


if __name__ == "__main__":
    main()
