#!/usr/bin/env python3
"""make_init_goldens.py — how PEFT 0.21 starts LoRA adapters for each init_lora_weights ptrain has
(true, false, "gaussian"), as statistics of the distributions (ptrain draws from its own seeded
generator, so its numbers are not torch's; their laws must be PEFT's). For the tiny fp32 Llama of
tests/data/hf/tiny-llama-f32, r 4 with rank_pattern {down_proj: 2} (so a per-module rank shows),
all seven projections, torch seeds 0..7 pooled; per matrix the values are normalised by the
scale each law has (A: sqrt(in) for the uniform laws, r for the normal one; B: sqrt(r)):

  a_max, b_max   the largest |value| x normaliser (uniform in +-1/sqrt(fan_in): just under 1)
  a_rms, b_rms   the root mean square x normaliser (uniform: 1/sqrt(3); normal: 1)
  b_zero         whether every B is exactly zero (the adapter starts as the identity)

Writes tests/data/peft/init_stats.json, which test_train's test_init_lora_weights holds ptrain's
adapters to. Run: $PTRAIN_PYTHON tests/reference/make_init_goldens.py
"""
import json
import math
import os

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
BASE = os.path.join(HERE, "..", "data", "hf", "tiny-llama-f32")
OUT = os.path.join(HERE, "..", "data", "peft", "init_stats.json")
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def stats(init):
    a_max = b_max = 0.0
    a_sq = b_sq = 0.0
    a_n = b_n = 0
    b_zero = True
    for seed in range(8):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_pretrained(BASE, torch_dtype=torch.float32)
        cfg = LoraConfig(r=4, lora_alpha=8, target_modules=MODULES, rank_pattern={"down_proj": 2},
                         init_lora_weights=init, task_type="CAUSAL_LM")
        model = get_peft_model(model, cfg)
        for name, mod in model.named_modules():
            if not hasattr(mod, "lora_A") or "default" not in mod.lora_A:
                continue
            a = mod.lora_A["default"].weight.detach().double()
            b = mod.lora_B["default"].weight.detach().double()
            r, fan_in = a.shape
            na = r if init == "gaussian" else math.sqrt(fan_in)
            nb = math.sqrt(r)
            a_max = max(a_max, float(a.abs().max()) * na)
            b_max = max(b_max, float(b.abs().max()) * nb)
            a_sq += float((a * na).pow(2).sum())
            b_sq += float((b * nb).pow(2).sum())
            a_n += a.numel()
            b_n += b.numel()
            b_zero = b_zero and bool((b == 0).all())
    return {"a_max": a_max, "a_rms": math.sqrt(a_sq / a_n), "b_max": b_max, "b_rms": math.sqrt(b_sq / b_n),
            "b_zero": b_zero}


def main():
    out = {"true": stats(True), "false": stats(False), "gaussian": stats("gaussian")}
    with open(OUT, "w") as f:
        json.dump(out, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
