#!/usr/bin/env python3
"""make_dora_model_goldens.py — DoRA training (PEFT's use_dora) on a whole model, from PEFT 0.21 + torch,
for ptrain's parity test (tests/unit/test_train.c, test_dora_match_peft).

Model, adapters and batch: make_peft_goldens.py's (the tiny multi-head Llama of
tests/data/llama/tiny-mha-f32.gguf in float64, LoRA r=4 alpha=8 on all seven projections with A and
B from init.f32, 2 sequences of 24 tokens), with use_dora=True. PEFT sets each magnitude from the A
and B it drew; after loading init.f32's A and B the magnitudes are set again as PEFT's dora_init
computes them, m = ‖W + s·B·A‖ per output row, so both sides start from the same m. Loss: the mean
cross-entropy over the labelled tokens, one backward pass (PEFT detaches the weight norm).

Writes tests/data/peft/: dora_grads.f32 (the gradients of A and B in init.f32's order, then those of
every magnitude in the same layer and module order), dora.json (the first loss, PEFT's version).
Run: $PTRAIN_PYTHON tests/reference/make_dora_model_goldens.py  (torch transformers peft)
"""
import json
import os
import sys

import numpy as np
import torch
from peft import LoraConfig, get_peft_model

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_peft_goldens import MHA, MODULES, OUT, base_model, lora_params  # noqa: E402


def main():
    torch.manual_seed(99)
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM", use_dora=True)
    model = get_peft_model(base_model(), cfg).double()
    params = [p for _, _, _, p in lora_params(model)]
    init = np.fromfile(os.path.join(OUT, "init.f32"), dtype="<f4")
    offset = 0
    mags = []
    with torch.no_grad():
        for p in params:
            p.copy_(torch.from_numpy(init[offset:offset + p.numel()].astype(np.float64)).reshape(p.shape))
            offset += p.numel()
        for i in range(MHA["num_hidden_layers"]):
            for mod in MODULES:
                block = "mlp" if mod in ("gate_proj", "up_proj", "down_proj") else "self_attn"
                lin = getattr(getattr(model.base_model.model.model.layers[i], block), mod)
                s = lin.scaling["default"]
                w = lin.base_layer.weight + s * lin.lora_B["default"].weight @ lin.lora_A["default"].weight
                m = lin.lora_magnitude_vector["default"].weight
                m.copy_(torch.linalg.norm(w, dim=1))
                mags.append(m)
    manifest = json.load(open(os.path.join(OUT, "manifest.json")))
    ids = torch.tensor(manifest["ids"]).reshape(2, 24)
    labels = torch.tensor(manifest["labels"]).reshape(2, 24)
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    np.concatenate([p.grad.detach().numpy().astype("<f4").ravel() for p in params + mags]).tofile(
        os.path.join(OUT, "dora_grads.f32"))
    out = {"first_loss": loss.item(), "peft": __import__("peft").__version__}
    with open(os.path.join(OUT, "dora.json"), "w") as f:
        json.dump(out, f, indent=1)
    print("first loss", loss.item(), "m grad max", max(float(m.grad.abs().max()) for m in mags))


if __name__ == "__main__":
    main()
