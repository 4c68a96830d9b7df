#!/usr/bin/env python3
"""make_decomp_goldens.py — PEFT 0.21's init_lora_weights "pissa" and "olora" on the tiny fp32 Llama of
tests/data/hf/tiny-llama-f32 (an fp32 base, so only the decomposition is compared, no quantization):
r 4, lora_alpha 8 (scale 2), layer 0's gate_proj (128 x 64, tall) and down_proj (64 x 128, wide).

Writes tests/data/peft/decomp.bin: little-endian float32, row-major, no header, in this order —
for module in (gate_proj, down_proj): W (the original weight, out x in), then for init in (pissa,
olora): lora_A (r x in), lora_B (out x r), the residual base PEFT leaves in the layer (out x in).
test_adapter_decomp holds adapter_pissa_init / adapter_olora_init to it.
Run: $PTRAIN_PYTHON tests/reference/make_decomp_goldens.py
"""
import os

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "data", "hf", "tiny-llama-f32")
OUT = os.path.join(HERE, "..", "data", "peft", "decomp.bin")
MODULES = ["gate_proj", "down_proj"]
INITS = ["pissa", "olora"]


def layer0(model, name):
    for full, mod in model.named_modules():
        if full.endswith("layers.0.mlp." + name):
            return mod
    raise KeyError(name)


def main():
    orig = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
    peft = {}
    for init in INITS:
        model = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules=MODULES, init_lora_weights=init, task_type="CAUSAL_LM")
        peft[init] = get_peft_model(model, cfg)
    parts = []
    for name in MODULES:
        parts.append(layer0(orig, name).weight.detach())
        for init in INITS:
            mod = layer0(peft[init], name)
            parts += [mod.lora_A["default"].weight.detach(), mod.lora_B["default"].weight.detach(),
                      mod.base_layer.weight.detach()]
    with open(OUT, "wb") as f:
        for p in parts:
            f.write(p.contiguous().numpy().astype("<f4").tobytes())
    print(OUT, sum(p.numel() for p in parts), "floats")


if __name__ == "__main__":
    main()
