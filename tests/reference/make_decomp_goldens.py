#!/usr/bin/env python3
"""make_decomp_goldens.py — PEFT 0.21's init_lora_weights "pissa" and "olora" on the tiny fp32 Llama of
tests/data/hf/tiny-llama-f32 (an fp32 base, so only the decomposition is compared, no quantization):
r 4, lora_alpha 8 (scale 2), layer 0's gate_proj (128 x 64, tall) and down_proj (64 x 128, wide).

Writes tests/data/peft/decomp.bin: little-endian float32, row-major, no header, in this order —
for module in (gate_proj, down_proj): W (the original weight, out x in), then for init in (pissa,
olora): lora_A (r x in), lora_B (out x r), the residual base PEFT leaves in the layer (out x in).
test_adapter_decomp holds adapter_pissa_init / adapter_olora_init to it.

Also tests/data/peft/decomp_convert.bin (same encoding): PEFT's conversion of a trained pissa adapter
into one for the original base (save_pretrained(..., path_initial_model_for_weight_conversion=...)),
for layer 0's gate_proj: A0, B0 (the start), A, B ("trained": the start plus seeded normal noise of
std 0.01), then the saved A' (2r x in) and B' (out x 2r); the saved config's r and lora_alpha are
checked here (8 and 16). The script also checks that the converted adapter on the original model
gives the logits of the pissa model (residual base + trained adapter) within 1e-5.

And tests/data/peft/decomp_niter.json: for "pissa_niter_4" (torch.svd_lowrank, random), only what does
not hang on torch's generator is comparable: per module, the Frobenius norm of the residual PEFT
leaves for torch seeds 0..7 (min and max), and that of the exact pissa's (the smallest any rank-r
start can leave, Eckart-Young).
Run: $PTRAIN_PYTHON tests/reference/make_decomp_goldens.py
"""
import json
import os
import tempfile

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "data", "hf", "tiny-llama-f32")
OUT = os.path.join(HERE, "..", "data", "peft", "decomp.bin")
OUT_CONVERT = os.path.join(HERE, "..", "data", "peft", "decomp_convert.bin")
OUT_NITER = os.path.join(HERE, "..", "data", "peft", "decomp_niter.json")
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
    convert()
    niter()


def niter():
    res = {}
    for name in MODULES:
        norms = []
        for seed in range(8):
            torch.manual_seed(seed)
            model = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
            cfg = LoraConfig(r=4, lora_alpha=8, target_modules=[name], init_lora_weights="pissa_niter_4",
                             task_type="CAUSAL_LM")
            mod = layer0(get_peft_model(model, cfg), name)
            norms.append(float(mod.base_layer.weight.detach().double().norm()))
        model = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules=[name], init_lora_weights="pissa", task_type="CAUSAL_LM")
        exact = float(layer0(get_peft_model(model, cfg), name).base_layer.weight.detach().double().norm())
        res[name] = {"niter4_min": min(norms), "niter4_max": max(norms), "exact": exact}
    with open(OUT_NITER, "w") as f:
        json.dump(res, f, indent=1)
    print(OUT_NITER, res)


def convert():
    from peft import PeftModel
    from safetensors.torch import load_file

    model = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=MODULES, init_lora_weights="pissa", task_type="CAUSAL_LM")
    model = get_peft_model(model, cfg)
    mod = layer0(model, "gate_proj")
    a0 = mod.lora_A["default"].weight.detach().clone()
    b0 = mod.lora_B["default"].weight.detach().clone()
    with tempfile.TemporaryDirectory() as tmp:
        init_dir, out_dir = os.path.join(tmp, "init"), os.path.join(tmp, "out")
        model.save_pretrained(init_dir)
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "lora_" in name:
                    p.add_(0.01 * torch.randn(p.shape, generator=gen))
        a, b = mod.lora_A["default"].weight.detach().clone(), mod.lora_B["default"].weight.detach().clone()
        ids = torch.tensor([[1, 5, 9, 13, 17, 21, 25, 29]])
        with torch.no_grad():
            want = model(ids).logits
        model.save_pretrained(out_dir, path_initial_model_for_weight_conversion=init_dir)
        with open(os.path.join(out_dir, "adapter_config.json")) as f:
            saved = json.load(f)
        assert saved["r"] == 8 and saved["lora_alpha"] == 16 and saved["init_lora_weights"] is True, saved
        tensors = load_file(os.path.join(out_dir, "adapter_model.safetensors"))
        key = "base_model.model.model.layers.0.mlp.gate_proj."
        a2, b2 = tensors[key + "lora_A.weight"], tensors[key + "lora_B.weight"]
        orig = AutoModelForCausalLM.from_pretrained(BASE, dtype=torch.float32)
        conv = PeftModel.from_pretrained(orig, out_dir)
        with torch.no_grad():
            got = conv(ids).logits
        err = float((got - want).abs().max())
        print("converted adapter on the original base: max |logits - pissa model's| %.2e" % err)
        assert err < 1e-5
    with open(OUT_CONVERT, "wb") as f:
        for p in (a0, b0, a, b, a2, b2):
            f.write(p.contiguous().numpy().astype("<f4").tobytes())
    print(OUT_CONVERT)


if __name__ == "__main__":
    main()
