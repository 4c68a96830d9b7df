#!/usr/bin/env python3
"""make_qwen35_peft_goldens.py — LoRA gradients from PEFT 0.21.2 on transformers 5.25's Qwen3.5 text model, for
ptrain's training of the family (tests/unit/test_grad.c, test_qwen35_peft).

The model is make_qwen35_goldens.py's tiny Qwen3_5ForCausalLM (tests/data/qwen35/hf: linear, linear, linear,
full, linear; fp32). LoRA r=4, alpha=8 on every projection PEFT can adapt there: the full layer's q_proj (its
rows interleave each head's query and output gate, as transformers lays q_proj out), k_proj, v_proj, o_proj,
the Gated DeltaNet layers' linear_attn.in_proj_qkv, in_proj_z, in_proj_b, in_proj_a and out_proj, and every
MLP's gate_proj, up_proj, down_proj; A and B random within 0.1 (init_lora_weights=False, then redrawn), so every
gradient is non-trivial (within 0.3 the model's gradients are so sensitive that transformers' own fp32 run is 6e-5 off
its float64 one in some tensors; within 0.1 both fp32 runs, transformers' and ptrain's, stay well inside 1e-4). The batch is ptrain's two rows of 72 tokens (longer than transformers' chunk of 64): row 0 one
example, row 1 two packed examples of 40 and 32. transformers' torch delta rule has no packed form, so each
example runs alone and the losses are summed: what a packed row must give when its state and conv window start
afresh at each boundary. Loss: the sum of each example's next-token cross-entropy (some labels -100) over the
count of labelled tokens, as ptrain's step computes the mean.

Writes tests/data/qwen35/peft.json (rows, ids, labels, loss, tensor order), peft.init.f32 (A, B of every
adapted module, layer by layer in the order of MODULES, PEFT's shapes and row order) and peft.grads.f32 (their
gradients, the same order).

Run (the outputs are committed; CI only reads them): $PTRAIN_PYTHON tests/reference/make_qwen35_peft_goldens.py
"""
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import Qwen3_5ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import packed_peft  # noqa: E402
OUT = os.path.join(HERE, "..", "data", "qwen35")
MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj",
           "gate_proj", "up_proj", "down_proj"]
ROWS = [[72], [40, 32]]


def main():
    torch.manual_seed(7)
    base = Qwen3_5ForCausalLM.from_pretrained(os.path.join(OUT, "hf"), dtype=torch.float32).eval()
    cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES, init_lora_weights=False,
                     bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    params = packed_peft.lora_params(model, MODULES)
    packed_peft.randomize(params, 0.1)
    loss, n, ids, labels = packed_peft.packed_loss(model, ROWS, 13)
    loss.backward()
    packed_peft.write(OUT, "tests/data/qwen35/hf", ROWS, 72, params, loss, n, ids, labels)
    print(f"qwen35 PEFT: loss {loss.item():.6f} over {n} labels, {len(params)} LoRA tensors")


if __name__ == "__main__":
    main()
