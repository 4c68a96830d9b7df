#!/usr/bin/env python3
"""make_gemma4_peft_goldens.py — LoRA gradients from PEFT 0.21.2 on transformers 5.25's Gemma 4 text model, for
ptrain's training of the family (tests/unit/test_grad.c, test_gemma4_peft).

The model is make_gemma4_goldens.py's tiny Gemma4ForCausalLM (tests/data/gemma4/hf32, f32: layers S S F S S F F,
window 6, head size 16 on sliding and 32 on global layers, k_eq_v on the global ones, per-layer inputs, the last
3 layers KV-shared: layer 4 (sliding) reuses layer 3's keys and values, layers 5 and 6 (global) layer 2's, so
their gradients flow back into layers 2 and 3). LoRA r=4, alpha=8 on q_proj, k_proj, v_proj, o_proj, gate_proj,
up_proj and down_proj: PEFT makes a pair wherever the layer has the module (no k_proj/v_proj on the shared layers,
no v_proj on the global k_eq_v layers). A and B random within 0.1 (init_lora_weights=False, then redrawn), so every
gradient is non-trivial. The batch is ptrain's two rows of 24 tokens (4 windows): row 0 one example, row 1 two
packed examples of 14 and 10. transformers has no packed form here, so each example runs alone and the losses are
summed: what a packed row must give when attention stays within each example. Loss: the sum of each example's
next-token cross-entropy (some labels -100) over the count of labelled tokens, as ptrain's step computes the mean.

Writes tests/data/gemma4/peft.json (rows, ids, labels, loss, tensor order), peft.init.f32 (A, B of every adapted
module, layer by layer in the order of MODULES, PEFT's shapes) and peft.grads.f32 (their gradients, the same
order).

Run (the outputs are committed; CI only reads them): $PTRAIN_PYTHON tests/reference/make_gemma4_peft_goldens.py
"""
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import Gemma4ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import packed_peft  # noqa: E402
OUT = os.path.join(HERE, "..", "data", "gemma4")
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
ROWS = [[24], [14, 10]]


def main():
    torch.manual_seed(7)
    base = Gemma4ForCausalLM.from_pretrained(os.path.join(OUT, "hf32"), dtype=torch.float32,
                                             attn_implementation="eager").eval()
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    params = packed_peft.lora_params(model, MODULES)
    packed_peft.randomize(params, 0.1)
    loss, n, ids, labels = packed_peft.packed_loss(model, ROWS, 17, use_cache=False)
    loss.backward()
    packed_peft.write(OUT, "tests/data/gemma4/hf32", ROWS, 24, params, loss, n, ids, labels)
    shared = sorted({i for i, m, *_ in params if m == "q_proj"} - {i for i, m, *_ in params if m == "k_proj"})
    print(f"gemma4 PEFT: loss {loss.item():.6f} over {n} labels, {len(params)} LoRA tensors; no k_proj on layers {shared}")


if __name__ == "__main__":
    main()
