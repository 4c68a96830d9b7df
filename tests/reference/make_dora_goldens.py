#!/usr/bin/env python3
"""make_dora_goldens.py — one DoRA layer as PEFT 0.21 computes it (use_dora=True on a bias-free
nn.Linear, lora_dropout 0, fp32), forward and backward, for test_grad's test_dora_layer: ptrain's
DoRA ops (backend_dora_norm, backend_dora_scale, backend_dora_mag_bwd) composed with its matmuls
must give PEFT's output and gradients of A, B and the magnitude within 1e-5 relative.

PEFT's forward: weight_norm = ||W + s·B·A|| per output row (detached), g = m / weight_norm,
y = x Wᵀ + (g - 1)·(x Wᵀ) + g·s·(x Aᵀ) Bᵀ. B is random (not PEFT's zero start) and m is PEFT's
initial magnitude times a random factor, so every term shows.

Writes tests/data/peft/dora_layer.bin: int32 M, K, N, r; float32 s; then float32 arrays
x [M,K], W [N,K], A [r,K], B [N,r], m [N], dy [M,N], y [M,N], dA [r,K], dB [N,r], dm [N].
Run: $PTRAIN_PYTHON tests/reference/make_dora_goldens.py
"""
import os

import numpy as np
import torch
from peft import LoraConfig, get_peft_model

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "peft", "dora_layer.bin")
M, K, N, R, ALPHA = 6, 40, 24, 4, 8


class One(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(K, N, bias=False)

    def forward(self, x):
        return self.proj(x)


def main():
    torch.manual_seed(0)
    model = get_peft_model(One(), LoraConfig(r=R, lora_alpha=ALPHA, target_modules=["proj"], use_dora=True,
                                             lora_dropout=0.0, init_lora_weights=False))
    layer = model.base_model.model.proj
    a, b = layer.lora_A["default"].weight, layer.lora_B["default"].weight
    mag = layer.lora_magnitude_vector["default"].weight
    with torch.no_grad():
        b.normal_(0, 0.3)
        mag.mul_(torch.empty_like(mag).uniform_(0.5, 1.5))
    s = layer.scaling["default"]
    x = torch.empty(M, K).uniform_(-1, 1)
    dy = torch.empty(M, N).uniform_(-1, 1)
    model.train()
    y = model(x)
    y.backward(dy)
    w = layer.base_layer.weight
    head = np.array([M, K, N, R], dtype=np.int32).tobytes() + np.array([s], dtype=np.float32).tobytes()
    arrays = [x, w, a, b, mag, dy, y, a.grad, b.grad, mag.grad]
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "wb") as f:
        f.write(head)
        for t in arrays:
            f.write(t.detach().float().contiguous().numpy().astype(np.float32).tobytes())
    print(f"wrote {OUT}: M {M} K {K} N {N} r {R} s {s}; |dm| max {mag.grad.abs().max():.3g}")


if __name__ == "__main__":
    main()
